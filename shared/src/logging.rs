//! Log set-up for the Lambda functions and the local API: JSON lines on
//! stdout, at the level `AWS_LAMBDA_LOG_LEVEL` (or `RUST_LOG`) names (a level
//! name, not directives: Lambda only sets a level, and no regex engine).
//! Other crates log at INFO at most ([`secret_safe`]: at DEBUG the SDK prints
//! whole responses, a stored `api_key` included); every line a request causes
//! carries its `request_id` ([`request_span`]). See docs/operations.md, Logs.

use std::fmt;
use std::str::FromStr;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id};
use tracing::{Event, Level, Metadata, Subscriber};

use tracing_subscriber::filter::{FilterFn, LevelFilter, filter_fn};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::{FormatTime, SystemTime};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, MakeWriter};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

/// The field, on the request span and on every line logged inside it,
/// that names the request.
pub const REQUEST_ID: &str = "request_id";

/// The field, on a function's request span and on every line logged inside
/// it that does not name its own, that names the route.
pub const ROUTE: &str = "route";

/// The span a request's work runs in. ERROR level, so it is entered
/// whatever level logging runs at and every line inside carries the id,
/// and the route where it is known (a function's, not local-api's before
/// routing).
pub fn request_span(request_id: &str, route: Option<&str>) -> tracing::Span {
    tracing::error_span!("request", request_id = request_id, route = route)
}

/// The target of metrics lines ([`metrics_line`]).
pub const METRICS_TARGET: &str = "metrics";

/// Writes `document`, one JSON object (an EMF document), as a line of its
/// own, with the request's id, whatever the log level: it is logged at
/// ERROR, so only `off` silences it. Like every other line it leads with an
/// RFC 3339 `timestamp` and a `level`, since Lambda's log-level filtering
/// counts a line lacking either (or holding an invalid one) as INFO and
/// drops it above INFO. The `level` is the least one the configured level
/// lets through ([`metrics_level`]), so the line survives at every level.
pub fn metrics_line(document: &str) {
    tracing::error!(target: METRICS_TARGET, emf = document);
}

/// The `level` a metrics line states when logging runs at `level` (as
/// [`subscriber`] reads it): the least level Lambda's filter at that
/// application log level keeps. INFO at TRACE, DEBUG and INFO, else the
/// level itself, FATAL included (Lambda's most severe level, which the
/// functions otherwise read as ERROR).
pub fn metrics_level(level: &str) -> &'static str {
    if level.trim().eq_ignore_ascii_case("fatal") {
        return "FATAL";
    }
    match level_filter(level) {
        LevelFilter::ERROR => "ERROR",
        LevelFilter::WARN => "WARN",
        _ => "INFO",
    }
}

/// The most verbose level logged when `level` is asked for: see
/// [`subscriber`].
fn level_filter(level: &str) -> LevelFilter {
    // Lambda spells FATAL where tracing has no such level.
    let level = match level.trim() {
        fatal if fatal.eq_ignore_ascii_case("fatal") => "error",
        // LevelFilter parses "" as ERROR; an empty variable means the default.
        "" => "info",
        level => level,
    };
    LevelFilter::from_str(level).unwrap_or(LevelFilter::INFO)
}

/// A request span's id and route, kept with the span for the formatter.
struct RequestId(String, Option<String>);

/// Keeps the `request_id` of each new span ([`request_span`]).
struct RequestIds;

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for RequestIds {
    fn on_new_span(&self, attributes: &Attributes<'_>, id: &Id, context: Context<'_, S>) {
        struct Find(Option<String>, Option<String>);
        impl Find {
            fn found(&mut self, field: &Field, value: String) {
                match field.name() {
                    REQUEST_ID => self.0 = Some(value),
                    ROUTE => self.1 = Some(value),
                    _ => {}
                }
            }
        }
        impl Visit for Find {
            fn record_str(&mut self, field: &Field, value: &str) {
                self.found(field, value.to_owned());
            }
            fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
                self.found(field, format!("{value:?}"));
            }
        }
        let mut found = Find(None, None);
        attributes.record(&mut found);
        if let (Some(request_id), Some(span)) = (found.0, context.span(id)) {
            span.extensions_mut().insert(RequestId(request_id, found.1));
        }
    }
}

/// The JSON formatter, adding the enclosing request span's id to each line
/// that does not name one itself, and writing metrics lines as the
/// documents they carry, at `metrics_level`.
struct WithRequestId<F> {
    json: F,
    metrics_level: &'static str,
}

/// The `emf` field of a metrics line.
struct Document(Option<String>);

impl Visit for Document {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "emf" {
            self.0 = Some(value.to_owned());
        }
    }
    fn record_debug(&mut self, _: &Field, _: &dyn fmt::Debug) {}
}

impl<S, N, F> FormatEvent<S, N> for WithRequestId<F>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'w> FormatFields<'w> + 'static,
    F: FormatEvent<S, N>,
{
    fn format_event(
        &self,
        context: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let (request_id, route) = context
            .event_scope()
            .and_then(|scope| {
                scope.into_iter().find_map(|span| {
                    span.extensions()
                        .get::<RequestId>()
                        .map(|id| (id.0.clone(), id.1.clone()))
                })
            })
            .unzip();
        if event.metadata().target() == METRICS_TARGET {
            let mut document = Document(None);
            event.record(&mut document);
            let Some(members) = document
                .0
                .as_deref()
                .and_then(|doc| doc.trim().strip_prefix('{'))
                .and_then(|doc| doc.strip_suffix('}'))
                .map(str::trim)
            else {
                return Ok(());
            };
            // The same clock and format as the other lines' timestamps.
            let mut now = String::new();
            SystemTime.format_time(&mut Writer::new(&mut now))?;
            let now = serde_json::to_string(&now).map_err(|_| fmt::Error)?;
            write!(
                writer,
                "{{\"timestamp\":{now},\"level\":\"{}\"",
                self.metrics_level
            )?;
            if !members.is_empty() {
                write!(writer, ",{members}")?;
            }
            if let Some(id) = request_id {
                let id = serde_json::to_string(&id).map_err(|_| fmt::Error)?;
                write!(writer, ",\"{REQUEST_ID}\":{id}")?;
            }
            return writeln!(writer, "}}");
        }
        // What the span names and the line does not.
        let fields = event.metadata().fields();
        let added: Vec<(&str, String)> = [(REQUEST_ID, request_id), (ROUTE, route.flatten())]
            .into_iter()
            .filter_map(|(name, value)| Some((name, value?)))
            .filter(|(name, _)| fields.field(name).is_none())
            .collect();
        if added.is_empty() {
            return self.json.format_event(context, writer, event);
        }
        let mut line = String::new();
        self.json.format_event(context, Writer::new(&mut line), event)?;
        // The JSON formatter writes one object and a line break.
        let Some(head) = line.strip_suffix("}\n") else {
            return writer.write_str(&line);
        };
        writer.write_str(head)?;
        for (name, value) in added {
            let value = serde_json::to_string(&value).map_err(|_| fmt::Error)?;
            write!(writer, ",\"{name}\":{value}")?;
        }
        writeln!(writer, "}}")
    }
}

/// Whether [`escaped`] keeps `c` as it is: visible ASCII, but `"` and `\`
/// (which JSON escapes, and a template that pastes text into a JSON string
/// does not) and `%` (the escape itself).
fn shown_as_is(c: char) -> bool {
    c.is_ascii_graphic() && !matches!(c, '"' | '\\' | '%')
}

/// Text a caller chose (a principal, a path no route matched) in the one
/// form this service logs, stores and publishes it: every character but
/// visible ASCII, and `"`, `\` and `%`, percent-encoded as its UTF-8 bytes
/// (`%22`, `%5C`, `%25`, `%20`, `%0A`, `%C3%A9`), so the form needs no
/// escaping in JSON, reads as what was sent, and decodes back to it. At
/// most `max` characters: a character whose encoding would pass the limit
/// is left out with everything after it, so an escape is never cut.
pub fn escaped(text: &str, max: usize) -> String {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut out = String::with_capacity(text.len().min(max));
    let mut buffer = [0; 4];
    for c in text.chars() {
        let width = if shown_as_is(c) { 1 } else { 3 * c.len_utf8() };
        // Every character pushed is ASCII, so bytes count characters.
        if out.len() + width > max {
            break;
        }
        if shown_as_is(c) {
            out.push(c);
            continue;
        }
        for byte in c.encode_utf8(&mut buffer).bytes() {
            out.push('%');
            out.push(char::from(HEX[usize::from(byte >> 4)]));
            out.push(char::from(HEX[usize::from(byte & 0xF)]));
        }
    }
    out
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
    let metrics_level = metrics_level(level);
    let filter = level_filter(level);
    let json = tracing_subscriber::fmt::format()
        .json()
        .flatten_event(true)
        .with_current_span(false)
        .with_span_list(false);
    tracing_subscriber::fmt()
        .json()
        .event_format(WithRequestId { json, metrics_level })
        .with_max_level(filter)
        .with_writer(writer)
        .finish()
        .with(secret_safe())
        .with(RequestIds)
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
    use serde_json::json;
    use tracing::level_filters::LevelFilter as Max;

    /// `LevelFilter::current` is the most any live subscriber enables:
    /// tests that install one take turns.
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

    /// A writer keeping what is written, for tests to read back.
    #[derive(Clone, Default)]
    struct Lines(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

    impl std::io::Write for Lines {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if let Ok(mut lines) = self.0.lock() {
                lines.extend_from_slice(buf);
            }
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Lines {
        fn text(&self) -> String {
            String::from_utf8(self.0.lock().map(|l| l.clone()).unwrap_or_default()).unwrap_or_default()
        }

        fn parsed(&self) -> Vec<serde_json::Value> {
            self.text()
                .lines()
                .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
                .collect()
        }
    }

    /// Lambda's application log levels, least severe first.
    const LAMBDA_LEVELS: [&str; 6] = ["TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL"];

    /// Whether Lambda's log-level filtering, at application log level
    /// `configured`, sends `line` to CloudWatch Logs, by its documented
    /// rules: a JSON line's `level` counts only if it is a valid level and
    /// the line has a valid RFC 3339 `timestamp`; otherwise the line is
    /// INFO. A line is kept at its level and any less severe setting.
    fn lambda_keeps(line: &serde_json::Value, configured: &str) -> bool {
        let rank = |level: &str| LAMBDA_LEVELS.iter().position(|l| l.eq_ignore_ascii_case(level));
        let timestamp_valid = line["timestamp"]
            .as_str()
            .is_some_and(|t| chrono::DateTime::parse_from_rfc3339(t).is_ok());
        let level = line["level"]
            .as_str()
            .and_then(rank)
            .filter(|_| timestamp_valid)
            .or(rank("INFO"));
        level >= rank(configured)
    }

    #[test]
    fn the_filter_model_counts_a_line_without_a_valid_timestamp_or_level_as_info() {
        let now = "2026-11-26T22:49:35.123456Z";
        let line = |text: &str| -> serde_json::Value { serde_json::from_str(text).unwrap_or_default() };
        let warn = line(&format!(r#"{{"timestamp":"{now}","level":"WARN"}}"#));
        assert!(lambda_keeps(&warn, "WARN"));
        assert!(!lambda_keeps(&warn, "ERROR"));
        // The metrics lines before they carried a timestamp: INFO, so dropped at WARN.
        for lost in [
            r#"{"level":"WARN","_aws":{"Timestamp":1}}"#.to_owned(),
            r#"{"timestamp":"yesterday","level":"ERROR"}"#.to_owned(),
            format!(r#"{{"timestamp":"{now}","level":"SEVERE"}}"#),
            format!(r#"{{"timestamp":"{now}"}}"#),
        ] {
            let lost = line(&lost);
            assert!(lambda_keeps(&lost, "INFO"), "{lost}");
            assert!(!lambda_keeps(&lost, "WARN"), "{lost}");
        }
    }

    #[test]
    fn metrics_lines_pass_lambdas_filter_at_every_level_and_info_lines_only_at_info_or_below() {
        let _turn = ONE_AT_A_TIME.lock();
        for configured in LAMBDA_LEVELS {
            let lines = Lines::default();
            let writer = lines.clone();
            tracing::subscriber::with_default(subscriber(move || writer.clone(), configured), || {
                request_span("r-1", None).in_scope(|| {
                    tracing::info!("an info line");
                    crate::metrics::record(
                        "AgentServer",
                        &crate::metrics::Measurement {
                            route: "update-model",
                            status: 200,
                            replayed: false,
                            latency: std::time::Duration::from_millis(3),
                            calls: crate::metrics::Calls::default(),
                            cold_start: false,
                        },
                    );
                });
            });
            let parsed = lines.parsed();
            let metrics: Vec<_> = parsed.iter().filter(|l| l.get("_aws").is_some()).collect();
            assert_eq!(metrics.len(), 1, "at {configured}: {}", lines.text());
            assert!(
                lambda_keeps(metrics[0], configured),
                "at {configured}, Lambda drops {}",
                metrics[0]
            );
            let info: Vec<_> = parsed.iter().filter(|l| l["message"] == "an info line").collect();
            let info_kept = !info.is_empty() && info.iter().all(|l| lambda_keeps(l, configured));
            let info_passes = matches!(configured, "TRACE" | "DEBUG" | "INFO");
            assert_eq!(info_kept, info_passes, "at {configured}: {}", lines.text());
        }
    }

    fn max_level(level: &str) -> Option<Max> {
        tracing::subscriber::with_default(subscriber(std::io::sink, level), Max::current).into()
    }

    #[test]
    fn levels_parse_in_any_case_and_default_to_info() {
        let _turn = ONE_AT_A_TIME.lock();
        assert_eq!(max_level("DEBUG"), Some(Max::DEBUG));
        assert_eq!(max_level("warn"), Some(Max::WARN));
        assert_eq!(max_level("FATAL"), Some(Max::ERROR));
        assert_eq!(max_level("info,foo=trace"), Some(Max::INFO));
        assert_eq!(max_level(""), Some(Max::INFO));
    }

    #[test]
    fn every_line_inside_a_request_span_carries_its_id() {
        let _turn = ONE_AT_A_TIME.lock();
        let lines = Lines::default();
        let writer = lines.clone();
        // At WARN: the span must still be entered.
        tracing::subscriber::with_default(subscriber(move || writer.clone(), "warn"), || {
            tracing::warn!("outside");
            request_span("id-\"1", Some("/r/{id}")).in_scope(|| {
                tracing::warn!(reason = "x", "inside");
                tracing::error!(request_id = "own", route = "mine", "names its own");
                tracing::info!("below the level");
                request_span("inner", None).in_scope(|| tracing::warn!("no route known"));
            });
        });
        let text = lines.text();
        let parsed = lines.parsed();
        assert_eq!(parsed.len(), 4, "{text}");
        assert_eq!(parsed[0].get(REQUEST_ID), None);
        assert_eq!(parsed[0].get(ROUTE), None);
        assert_eq!(parsed[1][REQUEST_ID], "id-\"1");
        assert_eq!(parsed[1][ROUTE], "/r/{id}");
        assert_eq!(parsed[1]["level"], "WARN");
        assert_eq!(
            (&parsed[2][REQUEST_ID], &parsed[2][ROUTE]),
            (&json!("own"), &json!("mine"))
        );
        assert_eq!(
            (&parsed[3][REQUEST_ID], parsed[3].get(ROUTE)),
            (&json!("inner"), None)
        );
        assert_eq!(text.matches(REQUEST_ID).count(), 3, "{text}");

        // A metrics line is its document, led by the timestamp and the
        // least level that passes, as the other lines are.
        let lines = Lines::default();
        let writer = lines.clone();
        tracing::subscriber::with_default(subscriber(move || writer.clone(), "warn"), || {
            request_span("r-2", Some("/r"))
                .in_scope(|| metrics_line(r#"{"_aws":{"Timestamp":1},"Requests":1}"#));
        });
        let text = lines.text();
        let (head, rest) = text.split_at(text.find(",\"level\"").unwrap_or(0));
        let timestamp = head
            .strip_prefix("{\"timestamp\":\"")
            .and_then(|t| t.strip_suffix('"'));
        assert!(
            timestamp.is_some_and(|t| chrono::DateTime::parse_from_rfc3339(t).is_ok()),
            "{text}"
        );
        assert_eq!(
            rest,
            ",\"level\":\"WARN\",\"_aws\":{\"Timestamp\":1},\"Requests\":1,\"request_id\":\"r-2\"}\n"
        );
        // The other lines' timestamps are written the same way.
        let other = parsed[0]["timestamp"].as_str().unwrap_or_default();
        assert_eq!(other.len(), timestamp.map_or(0, str::len), "{other} {text}");
    }

    #[test]
    fn metrics_levels_are_the_least_each_lambda_level_keeps() {
        let levels: Vec<&str> = LAMBDA_LEVELS.iter().map(|level| metrics_level(level)).collect();
        assert_eq!(levels, ["INFO", "INFO", "INFO", "WARN", "ERROR", "FATAL"]);
        assert_eq!(metrics_level(" fatal "), "FATAL");
        assert_eq!(metrics_level(""), "INFO");
        assert_eq!(metrics_level("warn"), "WARN");
    }

    #[test]
    fn escaped_text_keeps_visible_ascii_but_the_json_escapes_and_percent() {
        assert_eq!(
            escaped("arn:aws:iam::1:user/a-b_c.d@e", 256),
            "arn:aws:iam::1:user/a-b_c.d@e"
        );
        assert_eq!(escaped("a\"b\\c%d e\nf\u{0}", 256), "a%22b%5Cc%25d%20e%0Af%00");
        assert_eq!(
            escaped("é\u{202e}😀\u{7f}", 256),
            "%C3%A9%E2%80%AE%F0%9F%98%80%7F"
        );
        // The limit counts the encoded form and never cuts an escape.
        assert_eq!(escaped("abé", 4), "ab");
        assert_eq!(escaped("abé", 8), "ab%C3%A9");
        assert_eq!(escaped(&"x".repeat(300), 256).len(), 256);
        assert_eq!(escaped("", 256), "");
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 512, failure_persistence: None, ..Default::default() })]

        /// Whatever the text: the form is visible ASCII with no `"` or `\`,
        /// every `%` starts a whole escape, it fits the limit, it decodes
        /// to a prefix of the text (all of it when the text fits), and
        /// JSON writes it unchanged.
        #[test]
        fn escaped_text_needs_no_json_escaping_and_decodes_back(text in "\\PC{0,40}|.{0,40}|[ -~]{0,40}", max in 0usize..200) {
            let form = escaped(&text, max);
            proptest::prop_assert!(form.len() <= max);
            proptest::prop_assert!(form.chars().all(|c| c.is_ascii_graphic() && c != '"' && c != '\\'), "{}", form);
            let bytes = form.as_bytes();
            for (i, _) in form.match_indices('%') {
                proptest::prop_assert!(bytes.get(i + 1..i + 3).is_some_and(|hex| hex.iter().all(u8::is_ascii_hexdigit)), "{}", form);
            }
            let decoded = percent_encoding::percent_decode_str(&form).decode_utf8();
            proptest::prop_assert!(decoded.as_ref().is_ok_and(|decoded| text.starts_with(decoded.as_ref())), "{:?} {}", text, form);
            if escaped(&text, usize::MAX).len() <= max {
                proptest::prop_assert_eq!(decoded.map(|d| d.into_owned()).unwrap_or_default(), text.clone());
            }
            proptest::prop_assert_eq!(serde_json::to_string(&form).unwrap_or_default(), format!("\"{form}\""));
        }
    }
}
