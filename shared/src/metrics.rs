//! One CloudWatch embedded-metric-format (EMF) line per request: the
//! request's outcome, its latency, the time spent in DynamoDB and KMS, and
//! whether it was its instance's first. CloudWatch Logs turns the line into
//! metrics by itself; no API call, no agent.
//!
//! Namespace `METRICS_NAMESPACE` (default [`DEFAULT_NAMESPACE`]); dimension
//! sets `[Route, Outcome]` and `[Route]`, where Route is the function name
//! and Outcome one of [`Outcome`]'s names. The line is written whatever the
//! application log level (see [`crate::logging::metrics_line`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::{Map, Value, json};

/// The namespace when `METRICS_NAMESPACE` is unset.
pub const DEFAULT_NAMESPACE: &str = "AgentServer";

/// What became of a request: every status the API answers maps to one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// 200, written.
    Updated,
    /// 200 answered from the outcome kept for an `Idempotency-Key`:
    /// nothing written.
    Replayed,
    /// 400, 405, 413, 415: the request's shape.
    Invalid,
    /// 401, 403.
    Forbidden,
    /// 404.
    NotFound,
    /// 412: a precondition failed (a concurrent write).
    Conflict,
    /// 503: DynamoDB or KMS.
    Unavailable,
    /// 500 and anything else.
    Error,
}

impl Outcome {
    /// Every outcome.
    pub const ALL: [Outcome; 8] = [
        Self::Updated,
        Self::Replayed,
        Self::Invalid,
        Self::Forbidden,
        Self::NotFound,
        Self::Conflict,
        Self::Unavailable,
        Self::Error,
    ];

    /// The outcome of an answer with `status` (a replay's, [`Self::Replayed`]).
    pub fn of(status: u16, replayed: bool) -> Self {
        if replayed {
            Self::Replayed
        } else {
            Self::of_status(status)
        }
    }

    /// The outcome of an answer with `status` that is not a replay.
    pub fn of_status(status: u16) -> Self {
        match status {
            200 => Self::Updated,
            400 | 405 | 413 | 415 | 422 => Self::Invalid,
            401 | 403 => Self::Forbidden,
            404 => Self::NotFound,
            409 | 412 => Self::Conflict,
            503 => Self::Unavailable,
            _ => Self::Error,
        }
    }

    /// The dimension value.
    pub fn name(self) -> &'static str {
        match self {
            Self::Updated => "updated",
            Self::Replayed => "replayed",
            Self::Invalid => "invalid",
            Self::Forbidden => "forbidden",
            Self::NotFound => "not_found",
            Self::Conflict => "conflict",
            Self::Unavailable => "unavailable",
            Self::Error => "error",
        }
    }
}

/// Time a request spent waiting on its dependencies.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Calls {
    /// Around the `UpdateItem` call, if one was made.
    pub dynamodb: Option<Duration>,
    /// Around sealing, if the request set a secret.
    pub kms: Option<Duration>,
    /// Around the MCP handshake of `verify=true`, if one ran.
    pub mcp: Option<Duration>,
    /// Around an API key's check with its provider (`verify=true`), if one ran.
    pub provider: Option<Duration>,
}

/// One request, as its metrics line reports it.
#[derive(Debug, Clone, Copy)]
pub struct Measurement<'a> {
    /// The function's name (`update-model`).
    pub route: &'a str,
    /// The answer's status.
    pub status: u16,
    /// Whether it answered a retry with a kept outcome.
    pub replayed: bool,
    /// From arrival to answer.
    pub latency: Duration,
    /// Time in DynamoDB and KMS.
    pub calls: Calls,
    /// Whether it was this process's first request.
    pub cold_start: bool,
}

static SERVED_ONE: AtomicBool = AtomicBool::new(false);

/// Whether this is the process's first request: true exactly once.
pub fn first_request() -> bool {
    !SERVED_ONE.swap(true, Ordering::Relaxed)
}

fn milliseconds(duration: Duration) -> f64 {
    (duration.as_secs_f64() * 1000.0 * 1000.0).round() / 1000.0
}

/// The EMF document for `measurement` in `namespace`, at `timestamp_ms`
/// (milliseconds since the epoch). Only metrics with a value are declared.
pub fn document(namespace: &str, measurement: &Measurement<'_>, timestamp_ms: i64) -> Value {
    let mut metrics = vec![
        json!({"Name": "Requests", "Unit": "Count"}),
        json!({"Name": "Latency", "Unit": "Milliseconds"}),
        json!({"Name": "ColdStart", "Unit": "Count"}),
    ];
    let mut root = Map::new();
    root.insert("Route".into(), json!(measurement.route));
    root.insert(
        "Outcome".into(),
        json!(Outcome::of(measurement.status, measurement.replayed).name()),
    );
    root.insert("Requests".into(), json!(1));
    root.insert("Latency".into(), json!(milliseconds(measurement.latency)));
    root.insert("ColdStart".into(), json!(u8::from(measurement.cold_start)));
    for (name, time) in [
        ("DynamoDbLatency", measurement.calls.dynamodb),
        ("KmsLatency", measurement.calls.kms),
        ("McpHandshakeLatency", measurement.calls.mcp),
        ("ProviderCheckLatency", measurement.calls.provider),
    ] {
        if let Some(time) = time {
            metrics.push(json!({"Name": name, "Unit": "Milliseconds"}));
            root.insert(name.into(), json!(milliseconds(time)));
        }
    }
    root.insert("status".into(), json!(measurement.status));
    if measurement.replayed {
        root.insert("replayed".into(), json!(true));
    }
    root.insert(
        "_aws".into(),
        json!({
            "Timestamp": timestamp_ms,
            "CloudWatchMetrics": [{
                "Namespace": namespace,
                "Dimensions": [["Route", "Outcome"], ["Route"]],
                "Metrics": metrics,
            }],
        }),
    );
    Value::Object(root)
}

/// Writes the metrics line of `measurement`.
pub fn record(namespace: &str, measurement: &Measurement<'_>) {
    let now = chrono::Utc::now().timestamp_millis();
    crate::logging::metrics_line(&document(namespace, measurement, now).to_string());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_status_of_the_api_has_one_outcome() {
        let cases = [
            (200, Outcome::Updated),
            (400, Outcome::Invalid),
            (413, Outcome::Invalid),
            (415, Outcome::Invalid),
            (405, Outcome::Invalid),
            (401, Outcome::Forbidden),
            (403, Outcome::Forbidden),
            (404, Outcome::NotFound),
            (412, Outcome::Conflict),
            (503, Outcome::Unavailable),
            (500, Outcome::Error),
            (502, Outcome::Error),
        ];
        for (status, outcome) in cases {
            assert_eq!(Outcome::of_status(status), outcome, "{status}");
            assert_eq!(Outcome::of(status, false), outcome, "{status}");
        }
        assert_eq!(Outcome::of(200, true), Outcome::Replayed);
        let names: Vec<&str> = Outcome::ALL.iter().map(|o| o.name()).collect();
        assert_eq!(
            names,
            [
                "updated",
                "replayed",
                "invalid",
                "forbidden",
                "not_found",
                "conflict",
                "unavailable",
                "error"
            ]
        );
    }

    #[test]
    fn a_document_declares_exactly_the_metrics_it_carries() {
        let measurement = Measurement {
            route: "update-api-key",
            status: 503,
            replayed: false,
            latency: Duration::from_micros(12_345),
            calls: Calls {
                dynamodb: None,
                kms: Some(Duration::from_millis(3)),
                mcp: None,
                provider: None,
            },
            cold_start: true,
        };
        let doc = document("AgentServer", &measurement, 1_795_000_000_000);
        let directive = &doc["_aws"]["CloudWatchMetrics"][0];
        assert_eq!(directive["Namespace"], "AgentServer");
        let declared: Vec<&str> = directive["Metrics"]
            .as_array()
            .map(|m| m.iter().filter_map(|m| m["Name"].as_str()).collect())
            .unwrap_or_default();
        assert_eq!(declared, ["Requests", "Latency", "ColdStart", "KmsLatency"]);
        for name in &declared {
            assert!(doc[name].is_number(), "{name}");
        }
        assert_eq!(doc["Outcome"], "unavailable");
        assert_eq!(doc["Latency"], 12.345);
        assert_eq!(doc["ColdStart"], 1);
        assert!(doc.get("DynamoDbLatency").is_none());
        assert_eq!(doc["_aws"]["Timestamp"], 1_795_000_000_000_i64);
        assert!(doc.get("replayed").is_none());
        let replay = Measurement {
            status: 200,
            replayed: true,
            ..measurement
        };
        let doc = document("AgentServer", &replay, 1_795_000_000_000);
        assert_eq!(doc["Outcome"], "replayed");
        assert_eq!(doc["replayed"], true);
    }

    #[test]
    fn the_first_request_is_cold_once() {
        // Other tests in this binary may have served one: at most one true.
        let firsts = (0..5).filter(|_| first_request()).count();
        assert!(firsts <= 1);
        assert!(!first_request());
    }
}
