//! The time and retry budget a request's AWS calls share.
//!
//! A request makes at most two calls: KMS `Encrypt` when it sets a secret,
//! then DynamoDB's `UpdateItem`. Together they get [`TIME_BUDGET`], well
//! under the functions' timeout, so a slow dependency answers a 503
//! envelope rather than a Lambda timeout. Each client is built with the
//! same policy ([`retry_config`], [`timeout_config`]); the second call gets
//! what the first left ([`remaining`]). When a call fails anyway,
//! [`failure`] says whether a later try may succeed (a 503) or not.

use std::time::{Duration, Instant};

use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use aws_sdk_dynamodb::config::http::HttpResponse;
use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use aws_smithy_types::retry::ErrorKind;

/// The most time a request's AWS calls may take, retries included.
pub const TIME_BUDGET: Duration = Duration::from_millis(3000);
/// The most one attempt may take.
const ATTEMPT_BUDGET: Duration = Duration::from_millis(1000);
/// The most opening a connection may take.
const CONNECT_BUDGET: Duration = Duration::from_millis(500);
/// Attempts per call, the first included.
pub const MAX_ATTEMPTS: u32 = 3;

/// At most [`MAX_ATTEMPTS`] attempts, the SDK's standard backoff.
pub fn retry_config() -> RetryConfig {
    RetryConfig::standard().with_max_attempts(MAX_ATTEMPTS)
}

/// Attempts of at most 1 s each (less if `total` is less), 0.5 s to
/// connect, `total` in all.
pub fn timeout_config(total: Duration) -> TimeoutConfig {
    TimeoutConfig::builder()
        .connect_timeout(CONNECT_BUDGET.min(total))
        .operation_attempt_timeout(ATTEMPT_BUDGET.min(total))
        .operation_timeout(total)
        .build()
}

/// What is left of [`TIME_BUDGET`] for calls made since `started`.
pub fn remaining(started: Instant) -> Duration {
    TIME_BUDGET.saturating_sub(started.elapsed())
}

/// A failed AWS call, as its caller answers it. The reason keeps only error
/// codes and kinds: service messages may quote request values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// Out of time, no connection, an unreadable answer, a server fault
    /// (any 5xx, with or without an error code), a 429 or 408, or a
    /// transient code: a later try may succeed.
    Unavailable(String),
    /// A refusal that trying again will not change.
    Refused(String),
}

/// Classifies a failed call of any AWS SDK client (they share these types).
/// `transient` says which of the service's errors mean "try again later"
/// though sent with a 4xx status, such as throttling ([`has_code`] for a
/// list of codes).
pub fn failure<E: ProvideErrorMetadata>(
    error: &SdkError<E, HttpResponse>,
    transient: impl Fn(&E) -> bool,
) -> Failure {
    match error {
        SdkError::TimeoutError(_) => Failure::Unavailable("time budget exhausted".into()),
        // A connection dropped mid-answer is a transient error of the
        // client's own: as unavailable as a refused connection.
        SdkError::DispatchFailure(failure)
            if failure.is_io()
                || failure.is_timeout()
                || failure.as_other() == Some(ErrorKind::TransientError) =>
        {
            Failure::Unavailable("connection failed".into())
        }
        SdkError::DispatchFailure(_) => Failure::Refused("request could not be sent".into()),
        SdkError::ResponseError(_) => Failure::Unavailable("unreadable response".into()),
        SdkError::ServiceError(context) => {
            let status = context.raw().status();
            let code = context.err().code();
            let reason = code.map_or_else(
                || format!("HTTP {} without an error code", status.as_u16()),
                str::to_string,
            );
            // 429 and 408 say "too many" and "too slow" by themselves.
            let transient_status = status.is_server_error() || matches!(status.as_u16(), 408 | 429);
            if transient_status || transient(context.err()) {
                Failure::Unavailable(reason)
            } else {
                Failure::Refused(reason)
            }
        }
        _ => Failure::Refused("request could not be built".into()),
    }
}

/// Whether a service error carries one of `codes`.
pub fn has_code<E: ProvideErrorMetadata>(error: &E, codes: &[&str]) -> bool {
    error.code().is_some_and(|code| codes.contains(&code))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_budget_shortens_every_timeout() {
        let config = timeout_config(Duration::from_millis(200));
        assert_eq!(config.operation_timeout(), Some(Duration::from_millis(200)));
        assert_eq!(
            config.operation_attempt_timeout(),
            Some(Duration::from_millis(200))
        );
        assert_eq!(config.connect_timeout(), Some(Duration::from_millis(200)));
        let full = timeout_config(TIME_BUDGET);
        assert_eq!(full.operation_attempt_timeout(), Some(ATTEMPT_BUDGET));
        assert_eq!(full.connect_timeout(), Some(CONNECT_BUDGET));
        assert!(remaining(Instant::now()) <= TIME_BUDGET);
    }
}
