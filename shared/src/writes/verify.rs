//! The pipeline's verify step: the handshake a `verify=true` write waits
//! on, run against the configuration the record would hold after the write
//! (the record as read, its sealed values open, with what the write sets),
//! and the verification it earns, set by that same write.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::types::AttributeValue;
use url::Url;

use super::{Pipeline, add_time, timestamp};
use crate::budget::TIME_BUDGET;
use crate::error::ApiError;
use crate::item::Item;
use crate::mcp::{DialPolicy, Failure, HANDSHAKE_BUDGET, Verified};
use crate::patch::{Patch, Written};
use crate::records::{self, Resource};
use crate::rules::Rule;
use crate::seal::values_field;
use crate::secret::Secret;
use crate::store::Store;

impl<R: Resource, S: Store> Pipeline<'_, R, S> {
    /// Runs the handshake with what `record` (as read, opened) holds after
    /// `set` and `remove`, and adds the verification it earns to `set`: a
    /// 422 naming the failed stage otherwise. The handshake gets what the
    /// budget holds beyond one more [`TIME_BUDGET`] for the write, at most
    /// [`HANDSHAKE_BUDGET`]. A try after a conflict that would send what
    /// passed already takes the same verification, without a second one.
    pub(super) async fn handshake(
        &mut self,
        record: &Item,
        set: &mut Patch,
        remove: &[&'static str],
    ) -> Result<(), ApiError> {
        // A constant per record kind: the functions whose records cannot be
        // verified hold no pointer to the client, so their binaries lack it.
        let (Some(handshake), Some((verification, _))) = (R::HANDSHAKE, records::verification(R::FIELDS))
        else {
            return Ok(());
        };
        let endpoint = R::FIELDS
            .iter()
            .find(|field| field.rule() == Some(Rule::Endpoint))
            .and_then(|field| resulting_text(record, set, remove, field.name))
            .and_then(|endpoint| Url::parse(&endpoint).ok());
        let headers = values_field(R::FIELDS)
            .map(|(field, _)| resulting_secrets(record, set, remove, field))
            .unwrap_or_default();
        let budget = self
            .budget
            .remaining()
            .saturating_sub(TIME_BUDGET)
            .min(HANDSHAKE_BUDGET);
        if let Some(earlier) = self.passed.as_ref().filter(|earlier| {
            earlier.endpoint == endpoint.as_ref().map(Url::as_str).unwrap_or_default()
                && earlier.headers == headers
        }) {
            set.push((verification, Written::Plain(earlier.verification.clone())));
            return Ok(());
        }
        // A budget the AWS calls before it ate: the server was never given a
        // fair chance, so the answer is the service's (503, or 409 when an
        // earlier try's handshake took it), not the server's 422.
        if budget < MIN_HANDSHAKE {
            return Err(match self.passed {
                Some(_) => ApiError::Conflict,
                None => {
                    tracing::warn!("no time left for the MCP handshake: nothing written");
                    ApiError::Unavailable
                }
            });
        }
        let dial_policy = DialPolicy::of(self.app.settings.policy);
        let started = Instant::now();
        let outcome = match &endpoint {
            None => Err(Failure::AddressRefused),
            Some(endpoint) => handshake(endpoint, &headers, &dial_policy, budget).await,
        };
        add_time(&mut self.calls.mcp, started);
        match outcome {
            Ok(verified) => {
                tracing::info!(
                    protocol_version = verified.protocol_version.as_str(),
                    tools = verified.tools,
                    "MCP handshake passed"
                );
                let stored = attribute(&verified);
                set.push((verification, Written::Plain(stored.clone())));
                self.passed = endpoint.map(|endpoint| Passed {
                    endpoint: endpoint.to_string(),
                    headers,
                    verification: stored,
                });
                Ok(())
            }
            Err(failure) => {
                tracing::warn!(
                    stage = failure.stage(),
                    reason = %failure,
                    "MCP handshake failed: nothing written"
                );
                Err(ApiError::McpUnverified {
                    stage: failure.stage(),
                    http_status: failure.http_status(),
                })
            }
        }
    }
}

/// The least a handshake is given: less, and the request is answered as
/// out of time before it dials.
const MIN_HANDSHAKE: Duration = Duration::from_millis(1000);

/// A handshake that passed within this request: what it sent, and the
/// verification it earned.
pub(super) struct Passed {
    endpoint: String,
    headers: BTreeMap<String, Secret>,
    verification: AttributeValue,
}

/// The verification as stored: a map in the order the record shows it.
fn attribute(verified: &Verified) -> AttributeValue {
    AttributeValue::M(
        [
            ("verified_at", AttributeValue::S(timestamp())),
            (
                "protocol_version",
                AttributeValue::S(verified.protocol_version.clone()),
            ),
            ("name", AttributeValue::S(verified.name.clone())),
            ("version", AttributeValue::S(verified.version.clone())),
            ("tools", AttributeValue::N(verified.tools.to_string())),
        ]
        .into_iter()
        .map(|(name, value)| (name.to_string(), value))
        .collect(),
    )
}

/// The text `field` holds after the write: what it sets, else what the
/// record holds (unless it removes it).
fn resulting_text(record: &Item, set: &Patch, remove: &[&str], field: &str) -> Option<String> {
    match set.iter().find(|(name, _)| *name == field) {
        Some((_, Written::Plain(AttributeValue::S(text)))) => Some(text.clone()),
        Some(_) => None,
        None if remove.contains(&field) => None,
        None => match record.get(field) {
            Some(AttributeValue::S(text)) => Some(text.clone()),
            _ => None,
        },
    }
}

/// The header values `field` holds after the write, in the clear: what it
/// sets, else what the record holds opened (unless it removes them).
fn resulting_secrets(record: &Item, set: &Patch, remove: &[&str], field: &str) -> BTreeMap<String, Secret> {
    let texts = |members: &std::collections::HashMap<String, AttributeValue>| {
        members
            .iter()
            .filter_map(|(name, value)| Some((name.clone(), Secret::from(value.as_s().ok()?.as_str()))))
            .collect()
    };
    match set.iter().find(|(name, _)| *name == field) {
        Some((_, Written::Secrets(members))) => members.clone(),
        Some((_, Written::Plain(AttributeValue::M(members)))) => texts(members),
        Some(_) => BTreeMap::new(),
        None if remove.contains(&field) => BTreeMap::new(),
        None => match record.get(field) {
            Some(AttributeValue::M(members)) => texts(members),
            _ => BTreeMap::new(),
        },
    }
}
