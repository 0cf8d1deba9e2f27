//! The time and retry budget a request's AWS calls share.
//!
//! A request makes at most two calls: KMS `Encrypt` when it sets a secret,
//! then DynamoDB's `UpdateItem`. Together they get [`TIME_BUDGET`], well
//! under the functions' timeout, so a slow dependency answers a 503
//! envelope rather than a Lambda timeout. Each client is built with the
//! same policy ([`retry_config`], [`timeout_config`]); the second call gets
//! what the first left ([`remaining`]).

use std::time::{Duration, Instant};

use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;

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
