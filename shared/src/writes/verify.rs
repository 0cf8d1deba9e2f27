//! The pipeline's verify step: what a `verify=true` write waits on (an MCP
//! server's handshake, or an API key's check with its provider), run
//! against what the record would hold after the write (the record as read,
//! its sealed values open, with what the write sets), and the verification
//! it earns, set by that same write.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use url::Url;

use super::{Pipeline, add_time, timestamp};
use crate::budget::TIME_BUDGET;
use crate::error::ApiError;
use crate::item::{Attr, Attribute, Item};
use crate::keycheck::{KeyCheck, KeyFailure, Probe};
use crate::mcp::{Changes, DialPolicy, Failure, HANDSHAKE_BUDGET, Handshake, Verified};
use crate::patch::{Patch, Written};
use crate::provider::ProviderType;
use crate::records::{self, PIN_CHANGES, Resource, Verify, VerifyMode};
use crate::rules::Rule;
use crate::seal::values_field;
use crate::secret::Secret;
use crate::store::Store;

/// The least a verification is given: less, and the request is answered
/// as out of time before anything is dialed.
const MIN_VERIFY: Duration = Duration::from_millis(1000);

/// A verification that passed within this request: what it sent, and what
/// it earned (for a try after a conflict that would send the same).
pub(super) struct Passed {
    sent: Sent,
    earned: Earned,
}

/// What a passed verification found.
#[derive(Clone)]
enum Earned {
    /// A handshake: what the server announced, and when. The pin's changes
    /// are judged on each try, against the record as that try read it.
    Server(Verified, String),
    /// A key check: the verification as stored.
    Key(Attr),
}

/// What a verification sent, and where.
#[derive(PartialEq)]
enum Sent {
    Mcp {
        endpoint: String,
        headers: BTreeMap<String, Secret>,
    },
    Key {
        provider: ProviderType,
        key: Secret,
    },
}

impl<R: Resource, S: Store> Pipeline<'_, R, S> {
    /// Verifies what `record` (as read, opened) holds after `set` and
    /// `remove`, as the record kind verifies ([`Resource::VERIFY`]), and
    /// adds the verification it earns to `set`: a 422 naming the failed
    /// stage otherwise. It gets what the budget holds beyond one more
    /// [`TIME_BUDGET`] for the write, at most [`HANDSHAKE_BUDGET`]. A try
    /// after a conflict that would send what passed already takes the same
    /// verification, without sending it again.
    pub(super) async fn verify_step(
        &mut self,
        mode: VerifyMode,
        record: &Item,
        set: &mut Patch,
        remove: &[&'static str],
    ) -> Result<(), ApiError> {
        let Some((field, _)) = records::verification(R::FIELDS) else {
            return Ok(());
        };
        // A constant per record kind: a function holds a pointer to its
        // kind's client alone, so no other client is in its binary.
        let verification = match R::VERIFY {
            Verify::Nothing => return Ok(()),
            Verify::Mcp(handshake) => {
                let (verified, at) = self.handshake(handshake, record, set, remove).await?;
                let earlier = records::Verification::read(record, field).ok().flatten();
                let changes = judge_pin(mode, &verified, earlier, set)?;
                server_verification(&verified, at, changes)
            }
            Verify::Key(check) => self.check_key(check, record, set).await?,
        };
        set.push((field, Written::Plain(verification)));
        Ok(())
    }

    /// The time a verification gets, or the service's answer when the AWS
    /// calls before it left too little (the server never had a fair chance:
    /// 503, or 409 when an earlier try's verification took it).
    fn verify_budget(&self) -> Result<Duration, ApiError> {
        let budget = self
            .budget
            .remaining()
            .saturating_sub(TIME_BUDGET)
            .min(HANDSHAKE_BUDGET);
        if budget >= MIN_VERIFY {
            return Ok(budget);
        }
        Err(match self.passed {
            Some(_) => ApiError::Conflict,
            None => {
                tracing::warn!("no time left for the verification: nothing written");
                ApiError::Unavailable
            }
        })
    }

    /// The verification earned earlier in this request by sending `sent`.
    fn passed_for(&self, sent: &Sent) -> Option<Earned> {
        self.passed
            .as_ref()
            .filter(|passed| passed.sent == *sent)
            .map(|passed| passed.earned.clone())
    }

    /// An MCP handshake with the endpoint and headers the record would hold.
    async fn handshake(
        &mut self,
        handshake: Handshake,
        record: &Item,
        set: &Patch,
        remove: &[&'static str],
    ) -> Result<(Verified, String), ApiError> {
        let endpoint = R::FIELDS
            .iter()
            .find(|field| field.rule() == Some(Rule::Endpoint))
            .and_then(|field| resulting_text(record, set, remove, field.name))
            .and_then(|endpoint| Url::parse(&endpoint).ok());
        let headers = values_field(R::FIELDS)
            .map(|(field, _)| resulting_secrets(record, set, remove, field))
            .unwrap_or_default();
        let sent = Sent::Mcp {
            endpoint: endpoint.as_ref().map(Url::to_string).unwrap_or_default(),
            headers: headers.clone(),
        };
        if let Some(Earned::Server(verified, at)) = self.passed_for(&sent) {
            return Ok((verified, at));
        }
        let budget = self.verify_budget()?;
        let dial_policy = DialPolicy::of(self.app.settings.policy);
        let started = Instant::now();
        let outcome = match &endpoint {
            None => Err(Failure::AddressRefused),
            Some(endpoint) => handshake(endpoint, &headers, &dial_policy, budget).await,
        };
        add_time(&mut self.calls.mcp, started);
        let verified = outcome?;
        tracing::info!(
            protocol_version = verified.protocol_version.as_str(),
            tools = verified.tools(),
            "MCP handshake passed"
        );
        let at = timestamp();
        if endpoint.is_some() {
            self.passed = Some(Passed {
                sent,
                earned: Earned::Server(verified.clone(), at.clone()),
            });
        }
        Ok((verified, at))
    }

    /// A check with the record's provider of the key the write would
    /// leave: the one it sets, else the stored one, opened (one KMS call).
    async fn check_key(&mut self, check: KeyCheck, record: &Item, set: &Patch) -> Result<Attr, ApiError> {
        let provider = match record.get("provider_type") {
            Some(Attr::S(spelling)) => ProviderType::parse(spelling),
            _ => None,
        }
        .ok_or(KeyFailure::UnsupportedProvider)?;
        let Some(field) = R::FIELDS.iter().find(|field| field.is_sealed()) else {
            return Err(KeyFailure::NoKey.into());
        };
        let key = match set.iter().find(|(name, _)| *name == field.name) {
            Some((_, Written::Secret(key))) => key.clone(),
            _ => match record.get(field.name) {
                Some(Attr::B(sealed)) => self.seals.open_secret(field.name, sealed.as_ref()).await?,
                // Stored before sealing.
                Some(Attr::S(text)) => Secret::from(text.as_str()),
                _ => return Err(KeyFailure::NoKey.into()),
            },
        };
        let sent = Sent::Key {
            provider,
            key: key.clone(),
        };
        if let Some(Earned::Key(earlier)) = self.passed_for(&sent) {
            return Ok(earlier);
        }
        let budget = self.verify_budget()?;
        // The base is the operator's (a private gateway is fine); what no
        // endpoint may reach (metadata, link-local, the Runtime API) stays
        // refused, at every address it resolves to.
        let policy = DialPolicy::of(crate::rules::Policy {
            allow_private_endpoints: true,
        });
        let probe = Probe {
            provider,
            key: &key,
            base: self.app.settings.providers.base(provider),
            policy: &policy,
            budget,
        };
        let started = Instant::now();
        let outcome = check(&probe).await;
        add_time(&mut self.calls.provider, started);
        let models = outcome?;
        tracing::info!(provider = provider.as_str(), models, "provider key check passed");
        let verification = Attr::M(
            [
                ("verified_at", Attr::S(timestamp())),
                ("models", Attr::N(models.to_string())),
            ]
            .into_iter()
            .map(|(name, value)| (name.to_string(), value))
            .collect(),
        );
        self.passed = Some(Passed {
            sent,
            earned: Earned::Key(verification.clone()),
        });
        Ok(verification)
    }
}

/// A handshake that failed: 422 naming its stage, with the one log line
/// that explains it (the stage and our own reason, never what the server
/// sent).
impl From<Failure> for ApiError {
    fn from(failure: Failure) -> Self {
        tracing::warn!(
            stage = failure.stage(),
            reason = %failure,
            "MCP handshake failed: nothing written"
        );
        Self::McpUnverified {
            stage: failure.stage(),
            http_status: failure.http_status(),
        }
    }
}

/// A provider key check that failed: 422 naming its stage, with the one
/// log line that explains it (never the key or what the provider sent).
impl From<KeyFailure> for ApiError {
    fn from(failure: KeyFailure) -> Self {
        tracing::warn!(
            stage = failure.stage(),
            reason = %failure,
            "provider key check failed: nothing written"
        );
        Self::KeyUnverified {
            stage: failure.stage(),
            http_status: failure.http_status(),
        }
    }
}

/// How `verified`'s tools moved against the pin of `earlier` (the record's
/// verification as read): under `pinned`, a 422 naming them if any did;
/// otherwise the changes, with the attributes that announce them added to
/// `set` ([`PIN_CHANGES`]).
fn judge_pin(
    mode: VerifyMode,
    verified: &Verified,
    earlier: Option<records::Verification>,
    set: &mut Patch,
) -> Result<Changes, ApiError> {
    let earlier = earlier.and_then(|earlier| earlier.tool_digests);
    let changes = verified.pin.changes_since(earlier.as_ref());
    if mode == VerifyMode::Pinned && !changes.is_empty() {
        tracing::warn!(
            added = changes.added.len(),
            removed = changes.removed.len(),
            changed = changes.changed.len(),
            "MCP server's tools differ from its pin: nothing written"
        );
        let Changes {
            added,
            removed,
            changed,
        } = changes;
        return Err(ApiError::McpToolsChanged {
            added,
            removed,
            changed,
        });
    }
    let lists = [&changes.added, &changes.removed, &changes.changed];
    for (attribute, names) in PIN_CHANGES.into_iter().zip(lists) {
        if !names.is_empty() {
            let escaped = names.iter().map(|name| crate::logging::escaped(name, usize::MAX));
            set.push((attribute, Written::Plain(Attr::Ss(escaped.collect()))));
        }
    }
    Ok(changes)
}

/// An MCP server's verification as stored: what the handshake found at
/// `at`, its tools' pin, and how the pin moved.
fn server_verification(verified: &Verified, at: String, changes: Changes) -> Attr {
    let verification = records::Verification {
        verified_at: at,
        protocol_version: verified.protocol_version.clone(),
        name: verified.name.clone(),
        version: verified.version.clone(),
        tools: verified.tools(),
        tools_digest: Some(verified.pin.digest()),
        tool_digests: Some(verified.pin.digests().clone()),
        changes: Some(changes),
    };
    // A struct of strings, numbers and string maps always serializes.
    crate::item::to_attribute(&serde_json::to_value(&verification).unwrap_or_default())
}

/// The text `field` holds after the write: what it sets, else what the
/// record holds (unless it removes it).
fn resulting_text(record: &Item, set: &Patch, remove: &[&str], field: &str) -> Option<String> {
    match set.iter().find(|(name, _)| *name == field) {
        Some((_, Written::Plain(Attr::S(text)))) => Some(text.clone()),
        Some(_) => None,
        None if remove.contains(&field) => None,
        None => match record.get(field) {
            Some(Attr::S(text)) => Some(text.clone()),
            _ => None,
        },
    }
}

/// The header values `field` holds after the write, in the clear: what it
/// sets, else what the record holds opened (unless it removes them).
fn resulting_secrets(record: &Item, set: &Patch, remove: &[&str], field: &str) -> BTreeMap<String, Secret> {
    let texts = |members: &std::collections::HashMap<String, Attr>| {
        members
            .iter()
            .filter_map(|(name, value)| Some((name.clone(), Secret::from(value.as_s()?))))
            .collect()
    };
    match set.iter().find(|(name, _)| *name == field) {
        Some((_, Written::Secrets(members))) => members.clone(),
        Some((_, Written::Plain(Attr::M(members)))) => texts(members),
        Some(_) => BTreeMap::new(),
        None if remove.contains(&field) => BTreeMap::new(),
        None => match record.get(field) {
            Some(Attr::M(members)) => texts(members),
            _ => BTreeMap::new(),
        },
    }
}
