//! The time and retry budget a request's AWS calls share.
//!
//! A request makes at most one KMS call (sealing or opening a secret) and
//! at most two DynamoDB calls. Together they get a [`Budget`]: at most
//! [`TIME_BUDGET`], and never past the invocation's deadline less
//! [`ANSWER_MARGIN`], so a slow dependency answers a 503 envelope, with its
//! access and metrics lines, rather than Lambda ending the invocation. Each
//! client is built with the same policy ([`retry_config`],
//! [`timeout_config`]); each call gets what the earlier ones left
//! ([`Budget::remaining`]). When a call fails anyway, [`failure`] says
//! whether a later try may succeed (a 503) or not.

use std::time::{Duration, Instant, SystemTime};

use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use aws_runtime::retries::classifiers::{THROTTLING_ERRORS, TRANSIENT_ERRORS};
use aws_sdk_dynamodb::config::http::HttpResponse;
use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use aws_smithy_types::retry::{ErrorKind, ProvideErrorKind};

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

/// The first ceiling of [`Budget::backoff`]'s wait.
pub const BACKOFF_BASE: Duration = Duration::from_millis(10);
/// The most [`Budget::backoff`] waits at once.
pub const BACKOFF_CAP: Duration = Duration::from_millis(250);
/// What one more try of a merge (a read and a write) is given at least.
pub const TRY_TIME: Duration = Duration::from_millis(200);

/// What a request keeps back from its invocation's deadline to answer:
/// the response, its access and metrics lines, at a small share of a CPU.
pub const ANSWER_MARGIN: Duration = Duration::from_millis(250);

/// The time one request's AWS calls may still take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    until: Instant,
}

impl Budget {
    /// A budget starting now: [`TIME_BUDGET`], or less where the
    /// invocation's `deadline` (when it has one) comes sooner, less
    /// [`ANSWER_MARGIN`].
    pub fn start(deadline: Option<SystemTime>) -> Self {
        Self::start_with(deadline, TIME_BUDGET)
    }

    /// A budget of `time` (a request that also runs an MCP handshake gets
    /// [`TIME_BUDGET`] for its AWS calls on top of the handshake's), or
    /// less where the invocation's `deadline` comes sooner, less
    /// [`ANSWER_MARGIN`].
    pub fn start_with(deadline: Option<SystemTime>, time: Duration) -> Self {
        let now = Instant::now();
        let mut time = time;
        if let Some(deadline) = deadline {
            let left = deadline.duration_since(SystemTime::now()).unwrap_or_default();
            time = time.min(left.saturating_sub(ANSWER_MARGIN));
        }
        Self { until: now + time }
    }

    /// The invocation's deadline as the Lambda runtime gives it
    /// (milliseconds since the epoch); 0, as an invocation made outside
    /// Lambda has, is none.
    pub fn deadline_of(context: &lambda_runtime::Context) -> Option<SystemTime> {
        (context.deadline > 0).then(|| SystemTime::UNIX_EPOCH + Duration::from_millis(context.deadline))
    }

    /// What is left.
    pub fn remaining(&self) -> Duration {
        self.until.saturating_duration_since(Instant::now())
    }

    /// How long to wait before try `tries` + 1 of a write that lost to
    /// another (`tries` made so far): a random share ("full jitter") of
    /// [`BACKOFF_BASE`] doubled per try, at most [`BACKOFF_CAP`]; `None`
    /// when the wait and one more try ([`TRY_TIME`]) no longer fit what is
    /// left, and the write gives up.
    pub fn backoff(&self, tries: u32) -> Option<Duration> {
        let ceiling = BACKOFF_BASE.saturating_mul(1 << tries.min(16)).min(BACKOFF_CAP);
        let mut random = [0; 8];
        // Without a random source, the whole ceiling: slower, still bounded.
        let share = match aws_lc_rs::rand::fill(&mut random) {
            Ok(()) => u64::from_le_bytes(random) as f64 / u64::MAX as f64,
            Err(_) => 1.0,
        };
        let wait = ceiling.mul_f64(share);
        (self.remaining() > wait + TRY_TIME).then_some(wait)
    }
}

/// A failed AWS call, as its caller answers it. The reason keeps only error
/// codes and kinds: service messages may quote request values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallFailure {
    /// Out of time, no connection, an unreadable answer, a server fault
    /// (any 5xx, with or without an error code), a 429 or 408, or a
    /// transient code: a later try may succeed.
    Unavailable(String),
    /// A refusal that trying again will not change.
    Refused(String),
}

/// Classifies a failed call of any AWS SDK client (they share these types).
/// A service error is worth retrying when its status says so (any 5xx, 429,
/// 408), when the SDK says so ([`sdk_transient`]: the kind the error
/// declares, or a code the SDK's own retry classifier treats as throttling
/// or transient), or when `transient` says so: the service's own errors
/// that mean "try again later" and that the SDK does not classify ([`has_code`]
/// for a list of codes).
pub fn failure<E: ProvideErrorMetadata + ProvideErrorKind>(
    error: &SdkError<E, HttpResponse>,
    transient: impl Fn(&E) -> bool,
) -> CallFailure {
    match error {
        SdkError::TimeoutError(_) => CallFailure::Unavailable("time budget exhausted".into()),
        // A connection dropped mid-answer is a transient error of the
        // client's own: as unavailable as a refused connection.
        SdkError::DispatchFailure(failure)
            if failure.is_io()
                || failure.is_timeout()
                || failure.as_other() == Some(ErrorKind::TransientError) =>
        {
            CallFailure::Unavailable("connection failed".into())
        }
        SdkError::DispatchFailure(_) => CallFailure::Refused("request could not be sent".into()),
        SdkError::ResponseError(_) => CallFailure::Unavailable("unreadable response".into()),
        SdkError::ServiceError(context) => {
            let status = context.raw().status();
            let code = ProvideErrorMetadata::code(context.err());
            let reason = code.map_or_else(
                || format!("HTTP {} without an error code", status.as_u16()),
                str::to_string,
            );
            // 429 and 408 say "too many" and "too slow" by themselves.
            let transient_status = status.is_server_error() || matches!(status.as_u16(), 408 | 429);
            if transient_status || sdk_transient(context.err()) || transient(context.err()) {
                CallFailure::Unavailable(reason)
            } else {
                CallFailure::Refused(reason)
            }
        }
        _ => CallFailure::Refused("request could not be built".into()),
    }
}

/// Whether the SDK itself classifies a service error as worth retrying:
/// the kind the error declares (a modelled throttling or transient error),
/// or a code its standard retry classifier lists as throttling or transient
/// (`aws_runtime`'s lists, which the SDK's own retries use).
pub fn sdk_transient<E: ProvideErrorMetadata + ProvideErrorKind>(error: &E) -> bool {
    let code = ProvideErrorMetadata::code(error);
    ProvideErrorKind::retryable_error_kind(error).is_some()
        || code.is_some_and(|code| THROTTLING_ERRORS.contains(&code) || TRANSIENT_ERRORS.contains(&code))
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
    }

    #[test]
    fn backoff_is_jittered_capped_and_ends_with_the_budget() {
        let budget = Budget::start(None);
        let waits: Vec<Duration> = (0..64).filter_map(|_| budget.backoff(0)).collect();
        assert_eq!(waits.len(), 64, "a fresh budget always allows a retry");
        assert!(waits.iter().all(|wait| *wait <= BACKOFF_BASE));
        assert!(
            waits.windows(2).any(|pair| pair[0] != pair[1]),
            "no jitter: {waits:?}"
        );
        for tries in [5, 20, u32::MAX] {
            assert!(budget.backoff(tries).is_some_and(|wait| wait <= BACKOFF_CAP));
        }
        // Less left than a wait and a try: give up.
        let nearly_over = Budget::start(Some(SystemTime::now() + ANSWER_MARGIN + TRY_TIME));
        assert_eq!(nearly_over.backoff(0), None);
    }

    #[test]
    fn the_budget_ends_before_the_deadline() {
        assert!(Budget::start(None).remaining() <= TIME_BUDGET);
        assert!(Budget::start(None).remaining() > TIME_BUDGET - Duration::from_millis(500));
        let soon = SystemTime::now() + Duration::from_millis(1000);
        let budget = Budget::start(Some(soon)).remaining();
        assert!(
            budget <= Duration::from_millis(1000) - ANSWER_MARGIN,
            "{budget:?}"
        );
        assert!(budget > Duration::from_millis(500), "{budget:?}");
        let far = SystemTime::now() + Duration::from_secs(60);
        assert!(Budget::start(Some(far)).remaining() <= TIME_BUDGET);
        // Past, or within the margin: nothing left, so no call is made.
        for gone in [
            SystemTime::now() - Duration::from_secs(1),
            SystemTime::now() + ANSWER_MARGIN / 2,
        ] {
            assert_eq!(Budget::start(Some(gone)).remaining(), Duration::ZERO);
        }
        let mut context = lambda_runtime::Context::default();
        assert_eq!(Budget::deadline_of(&context), None);
        context.deadline = 1_700_000_000_000;
        assert_eq!(
            Budget::deadline_of(&context),
            Some(SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000))
        );
    }
}
