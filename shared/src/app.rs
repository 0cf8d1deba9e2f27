//! What a running function holds for its whole life: settings, store and,
//! where its record kind seals a field (API keys, MCP servers), the sealer,
//! built once at start-up from one SDK configuration and shared by every
//! invocation.
//!
//! Under Lambda, start-up also opens the HTTPS connections the first
//! request will need (see [`warm_up`]): init runs with the CPU Lambda gives
//! every init, the first invocation with the function's share of one vCPU
//! (128/1769 of it at 128 MB), so a TLS handshake is many times cheaper in
//! init. BENCHMARKS.md has the numbers.

use std::time::Duration;

use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};

use crate::config::{ConfigError, Settings};
use crate::records::Resource;
use crate::seal::{KmsSealer, Sealer};
use crate::store::TableNames;
use crate::store::{DynamoStore, Table};

/// The most the warm-up may add to init. Past it the connection is left to
/// the first request, which opens one anyway.
pub const WARM_UP_BUDGET: Duration = Duration::from_millis(1000);

/// Settings plus the store (and sealer) every request goes through.
#[derive(Debug, Clone)]
pub struct App<S = DynamoStore> {
    /// Store of records.
    pub store: S,
    /// What the handlers read: the field-rule policy, the projects claim.
    pub settings: Settings,
    /// Seals secret fields before they are stored; `None` where no record
    /// kind served has one (a request setting one is then a 500).
    pub sealer: Option<Sealer>,
}

/// What an app must hold for the routes it serves: a sealer only where a
/// record kind seals a field. A constant per function, so the functions
/// that seal nothing have no KMS client in their binary at all.
pub trait Serves {
    /// Whether a sealer is needed.
    const SEALS: bool;
}

impl<R: Resource> Serves for R {
    const SEALS: bool = <R as Resource>::SEALS;
}

/// Every route at once: the local API.
#[derive(Debug)]
pub struct AllRoutes;

impl Serves for AllRoutes {
    const SEALS: bool = Table::any_seals();
}

impl App<DynamoStore> {
    /// Reads the environment and builds the clients from one SDK
    /// configuration (region, credentials, HTTP client, endpoints): the
    /// DynamoDB client, and the KMS sealer if `N` seals (then
    /// `SECRETS_KEY_ID` is required: without it start-up fails). Under
    /// Lambda, also opens their connections ([`warm_up`]), which never
    /// fails start-up.
    pub async fn from_env<N: Serves>() -> Result<Self, ConfigError> {
        let settings = Settings::from_env()?;
        let key_id = if N::SEALS {
            Some(Sealer::key_id(|name| std::env::var(name).ok())?)
        } else {
            None
        };
        let config = aws_config::defaults(aws_config::BehaviorVersion::latest())
            .load()
            .await;
        let store = DynamoStore::from_config(&config, kept_apart(TableNames::from_env())?);
        // Every use of the KMS client sits behind the constant N::SEALS, so
        // a function that seals nothing does not link it.
        let kms = match key_id {
            Some(key_id) if N::SEALS => Some(KmsSealer::from_config(&config, key_id)),
            _ => None,
        };
        if let Some(table) = own_table(|name| std::env::var(name).ok()) {
            // Failures are logged inside; the first request connects instead.
            let table = store.tables().name(table);
            match &kms {
                Some(kms) if N::SEALS => drop(tokio::join!(warm_up(&store, table), warm_up_kms(kms))),
                _ => drop(warm_up(&store, table).await),
            }
        }
        Ok(Self {
            store,
            settings,
            sealer: if N::SEALS { kms.map(Sealer::Kms) } else { None },
        })
    }
}

/// Opens the sealer's connection to KMS within [`WARM_UP_BUDGET`], as
/// [`warm_up`] does DynamoDB's; a failure is a WARN, never fatal.
pub async fn warm_up_kms(kms: &KmsSealer) -> Result<(), crate::seal::SealError> {
    let outcome = kms.warm_up(WARM_UP_BUDGET).await;
    if let Err(error) = &outcome {
        tracing::warn!(%error, "KMS warm-up at init failed; the first sealing request connects instead");
    }
    outcome
}

/// The table to warm up, if any: only inside a Lambda execution environment
/// (which alone sets `AWS_LAMBDA_RUNTIME_API`), and only the table whose
/// variable the environment sets (template.yaml gives each function its own
/// table's and no other, and the role may describe only that one). The
/// local API and the tests never warm up.
pub fn own_table(lookup: impl Fn(&str) -> Option<String>) -> Option<Table> {
    lookup("AWS_LAMBDA_RUNTIME_API").filter(|api| !api.trim().is_empty())?;
    Table::ALL
        .into_iter()
        .find(|table| lookup(table.env_var()).is_some_and(|name| !name.trim().is_empty()))
}

/// Why a warm-up did not complete: a code or kind, never a service message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WarmUpError {
    /// [`WARM_UP_BUDGET`] ran out.
    #[error("no answer within the warm-up budget")]
    TimedOut,
    /// DynamoDB answered with an error (for example `AccessDeniedException`
    /// when the role lacks `dynamodb:DescribeTable`); the connection is open.
    #[error("DynamoDB answered {0}")]
    Service(String),
    /// No connection could be made or the exchange failed.
    #[error("the request failed: {0}")]
    Request(&'static str),
}

/// Makes one `DescribeTable` call on `table`, within [`WARM_UP_BUDGET`], so
/// the client's pool holds an open TLS connection (with the TLS library's
/// random generator seeded and the trust store parsed) for the first request.
///
/// `DescribeTable` reads the table's description, no item: the role needs
/// only that read-only action besides `UpdateItem`. A failure is logged as
/// a WARN and returned; start-up goes on, since the first request would
/// connect anyway.
pub async fn warm_up(store: &DynamoStore, table: &str) -> Result<(), WarmUpError> {
    let call = store.client().describe_table().table_name(table).send();
    let outcome = match tokio::time::timeout(WARM_UP_BUDGET, call).await {
        Err(_) => Err(WarmUpError::TimedOut),
        Ok(Ok(_)) => Ok(()),
        Ok(Err(SdkError::ServiceError(context))) => Err(WarmUpError::Service(
            context.err().code().unwrap_or("an unnamed error").to_string(),
        )),
        Ok(Err(SdkError::TimeoutError(_))) => Err(WarmUpError::TimedOut),
        Ok(Err(SdkError::DispatchFailure(_))) => Err(WarmUpError::Request("dispatch failure")),
        Ok(Err(SdkError::ResponseError(_))) => Err(WarmUpError::Request("unreadable response")),
        Ok(Err(_)) => Err(WarmUpError::Request("request could not be built")),
    };
    if let Err(error) = &outcome {
        tracing::warn!(%error, "DynamoDB warm-up at init failed; the first request connects instead");
    }
    outcome
}

/// `tables`, if the outcomes kept under idempotency keys have a table of
/// their own: in a records table they would answer keyed requests from
/// records, and overwrite records.
fn kept_apart(tables: TableNames) -> Result<TableNames, ConfigError> {
    if Table::ALL
        .iter()
        .any(|table| tables.name(*table) == tables.idempotency)
    {
        return Err(ConfigError::Invalid {
            name: crate::store::IDEMPOTENCY_TABLE_VAR,
            expected: "a table of its own, not one of the records' tables",
        });
    }
    Ok(tables)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn lookup(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| map.get(name).cloned()
    }

    #[test]
    fn warms_up_only_under_lambda_and_only_the_table_it_is_given() {
        let lambda = ("AWS_LAMBDA_RUNTIME_API", "127.0.0.1:9001");
        assert_eq!(
            own_table(lookup(&[lambda, ("MODELS_TABLE", "prod-models")])),
            Some(Table::Models)
        );
        assert_eq!(
            own_table(lookup(&[lambda, ("API_KEYS_TABLE", "keys")])),
            Some(Table::ApiKeys)
        );
        assert_eq!(own_table(lookup(&[lambda])), None);
        assert_eq!(own_table(lookup(&[lambda, ("MODELS_TABLE", " ")])), None);
        // The local API and the tests: no runtime API, no warm-up.
        assert_eq!(own_table(lookup(&[("MODELS_TABLE", "prod-models")])), None);
        assert_eq!(
            own_table(lookup(&[("AWS_LAMBDA_RUNTIME_API", ""), ("MODELS_TABLE", "m")])),
            None
        );
    }

    #[tokio::test]
    async fn an_unreachable_database_is_reported_not_raised() {
        // Nothing listens on a port just released by the OS.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .map(|address| address.port())
            .unwrap_or(9);
        let config = aws_sdk_dynamodb::Config::builder()
            .behavior_version(aws_sdk_dynamodb::config::BehaviorVersion::latest())
            .region(aws_sdk_dynamodb::config::Region::new("us-east-1"))
            .credentials_provider(aws_sdk_dynamodb::config::Credentials::new(
                "test", "test", None, None, "test",
            ))
            .endpoint_url(format!("http://127.0.0.1:{port}"));
        let store = DynamoStore::new(
            aws_sdk_dynamodb::Client::from_conf(DynamoStore::budgeted(config)),
            TableNames::default(),
        );
        let outcome = warm_up(&store, "agent-server-models").await;
        assert!(
            matches!(outcome, Err(WarmUpError::Request(_) | WarmUpError::TimedOut)),
            "{outcome:?}"
        );
    }

    #[test]
    fn outcomes_need_a_table_of_their_own() {
        assert!(kept_apart(TableNames::default()).is_ok());
        let mut shared = TableNames::default();
        shared.idempotency = shared.name(Table::Models).to_string();
        assert!(kept_apart(shared).is_err());
    }
}
