//! Log set-up for the Lambda functions and the local API: JSON lines on
//! stdout, at the level `AWS_LAMBDA_LOG_LEVEL` (or `RUST_LOG`) names.
//!
//! A plain level, not `RUST_LOG`'s directive language: Lambda's log
//! controls only ever set a level, and the directive parser would bring a
//! regex engine into every cold start.
//!
//! Whatever level is asked for, other crates log at INFO at most: at DEBUG
//! and TRACE the AWS SDK and the HTTP stack print whole requests and
//! responses, and an `UpdateItem` response carries the stored `api_key`.

use std::str::FromStr;
use tracing::{Level, Metadata, Subscriber};

use tracing_subscriber::filter::{FilterFn, LevelFilter, filter_fn};
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::SubscriberExt;

/// At most `max` characters of `text`: what a log line keeps of a value
/// the caller chose (a principal, a path no route matched), so one
/// request cannot make a log line of any size.
pub fn cut(text: &str, max: usize) -> &str {
    match text.char_indices().nth(max) {
        Some((end, _)) => &text[..end],
        None => text,
    }
}

/// Targets of this project's own crates, which never log secrets and so
/// may log at any level.
const OWN_TARGETS: [&str; 6] = [
    "agent_server_shared",
    "local_api",
    "update_api_key",
    "update_mcp_server",
    "update_model",
    "access",
];

/// Drops DEBUG and TRACE events from every crate but this project's.
pub fn secret_safe() -> FilterFn<impl Fn(&Metadata<'_>) -> bool + Clone> {
    filter_fn(|metadata: &Metadata<'_>| {
        *metadata.level() <= Level::INFO
            || OWN_TARGETS
                .iter()
                .any(|own| metadata.target().split("::").next() == Some(*own))
    })
}

/// A JSON subscriber writing to `writer` at `level` (`trace`, `debug`,
/// `info`, `warn`, `error` or `off`, any case; anything else is INFO), with
/// [`secret_safe`] applied.
pub fn subscriber<W>(writer: W, level: &str) -> impl Subscriber + Send + Sync
where
    W: for<'a> MakeWriter<'a> + Send + Sync + 'static,
{
    // Lambda spells FATAL where tracing has no such level.
    let level = match level.trim() {
        fatal if fatal.eq_ignore_ascii_case("fatal") => "error",
        // LevelFilter parses "" as ERROR; an empty variable means the default.
        "" => "info",
        level => level,
    };
    let filter = LevelFilter::from_str(level).unwrap_or(LevelFilter::INFO);
    tracing_subscriber::fmt()
        .json()
        .flatten_event(true)
        .with_current_span(false)
        .with_span_list(false)
        .with_max_level(filter)
        .with_writer(writer)
        .finish()
        .with(secret_safe())
}

/// Installs the subscriber on stdout, at the level Lambda's advanced
/// logging controls (`AWS_LAMBDA_LOG_LEVEL`) or `RUST_LOG` set, INFO if
/// neither is set. Does nothing if a subscriber is already installed.
pub fn init() {
    let level = std::env::var("AWS_LAMBDA_LOG_LEVEL")
        .or_else(|_| std::env::var("RUST_LOG"))
        .unwrap_or_else(|_| "info".into());
    let _ = tracing::subscriber::set_global_default(subscriber(std::io::stdout, &level));
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing::level_filters::LevelFilter as Max;

    fn max_level(level: &str) -> Option<Max> {
        tracing::subscriber::with_default(subscriber(std::io::sink, level), Max::current).into()
    }

    #[test]
    fn levels_parse_in_any_case_and_default_to_info() {
        assert_eq!(max_level("DEBUG"), Some(Max::DEBUG));
        assert_eq!(max_level("warn"), Some(Max::WARN));
        assert_eq!(max_level("FATAL"), Some(Max::ERROR));
        assert_eq!(max_level("info,foo=trace"), Some(Max::INFO));
        assert_eq!(max_level(""), Some(Max::INFO));
    }

    #[test]
    fn cut_keeps_whole_characters() {
        let long = "é".repeat(1000);
        assert_eq!(cut(&long, 256).chars().count(), 256);
        assert_eq!(cut("/short", 256), "/short");
        assert_eq!(cut("😀😀", 1), "😀");
    }
}
