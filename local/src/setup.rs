//! Creates the three tables with their documented key schemas, and the
//! table of outcomes kept under idempotency keys, and loads the sample
//! records: what `make run` and the tests do to DynamoDB Local.

use std::time::{Duration, Instant};

use agent_server_shared::Table;
use agent_server_shared::seal::{self, Sealer};
use agent_server_shared::store::{TableNames, kept};
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::DisplayErrorContext;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, KeySchemaElement, KeyType, ScalarAttributeType, StreamSpecification,
    StreamViewType, TimeToLiveSpecification,
};

use crate::samples;

/// A setup step failed.
#[derive(Debug, thiserror::Error)]
#[error("{step}: {detail}")]
pub struct SetupError {
    step: String,
    detail: String,
}

fn failed(step: impl Into<String>, error: impl std::error::Error) -> SetupError {
    SetupError {
        step: step.into(),
        detail: DisplayErrorContext(error).to_string(),
    }
}

/// Creates every table that does not exist yet.
pub async fn create_tables(client: &Client, tables: &TableNames) -> Result<(), SetupError> {
    for table in Table::ALL {
        let keys: &[(&str, KeyType)] = if table.scoped_by_project() {
            &[("project_id", KeyType::Hash), ("id", KeyType::Range)]
        } else {
            &[("id", KeyType::Hash)]
        };
        // A stream of new images, as template.yaml gives the tables on AWS
        // (PublishChangeEvents): `make events` and `make events-test` read it.
        let stream = StreamSpecification::builder()
            .stream_enabled(true)
            .stream_view_type(StreamViewType::NewImage)
            .build()
            .map_err(|e| failed("define stream", e))?;
        create_table(client, tables.name(table), keys, Some(stream)).await?;
    }
    // The outcomes kept under idempotency keys, as template.yaml gives them:
    // keyed by `key`, expiring by `expires_at`.
    let name = &tables.idempotency;
    if create_table(client, name, &[(kept::KEY, KeyType::Hash)], None).await? {
        client
            .update_time_to_live()
            .table_name(name)
            .time_to_live_specification(
                TimeToLiveSpecification::builder()
                    .enabled(true)
                    .attribute_name(kept::EXPIRES_AT)
                    .build()
                    .map_err(|e| failed("define time to live", e))?,
            )
            .send()
            .await
            .map_err(|e| failed(format!("set the time to live of {name}"), e))?;
    }
    Ok(())
}

/// Creates the table `name` keyed by `keys` (each a string), with `stream`
/// if given: whether it was created (`false`: it exists already).
async fn create_table(
    client: &Client,
    name: &str,
    keys: &[(&str, KeyType)],
    stream: Option<StreamSpecification>,
) -> Result<bool, SetupError> {
    let mut request = client
        .create_table()
        .table_name(name)
        .billing_mode(BillingMode::PayPerRequest)
        .set_stream_specification(stream);
    for (attribute, key_type) in keys {
        request = request
            .attribute_definitions(
                AttributeDefinition::builder()
                    .attribute_name(*attribute)
                    .attribute_type(ScalarAttributeType::S)
                    .build()
                    .map_err(|e| failed("define attribute", e))?,
            )
            .key_schema(
                KeySchemaElement::builder()
                    .attribute_name(*attribute)
                    .key_type(key_type.clone())
                    .build()
                    .map_err(|e| failed("define key", e))?,
            );
    }
    match request.send().await {
        Ok(_) => Ok(true),
        Err(error)
            if error
                .as_service_error()
                .is_some_and(|e| e.is_resource_in_use_exception()) =>
        {
            Ok(false)
        }
        Err(error) => Err(failed(format!("create table {name}"), error)),
    }
}

/// Writes the sample records, replacing any earlier copies. With a
/// `sealer`, the sample API key's `api_key` and the sample MCP server's
/// header values are stored sealed, as the API stores them; without, in
/// plain text, as items written before sealing.
pub async fn load_samples(
    client: &Client,
    tables: &TableNames,
    sealer: Option<&Sealer>,
) -> Result<(), SetupError> {
    for (table, mut item) in samples::items() {
        if let Some(sealer) = sealer {
            seal::seal_stored(sealer, table, table.fields(), &mut item)
                .await
                .map_err(|e| failed("seal the sample's secrets (is the local KMS running?)", e))?;
        }
        client
            .put_item()
            .table_name(tables.name(table))
            .set_item(Some(agent_server_shared::item::to_sdk(item)))
            .send()
            .await
            .map_err(|e| failed(format!("load sample into {}", tables.name(table)), e))?;
    }
    Ok(())
}

/// Creates the tables and loads the samples (sealed with `sealer`, see
/// [`load_samples`]), waiting up to `patience` for a database that is still
/// starting.
pub async fn prepare(
    client: &Client,
    tables: &TableNames,
    sealer: Option<&Sealer>,
    patience: Duration,
) -> Result<(), SetupError> {
    let deadline = Instant::now() + patience;
    loop {
        match create_tables(client, tables).await {
            Ok(()) => break,
            Err(error) if Instant::now() >= deadline => return Err(error),
            Err(_) => tokio::time::sleep(Duration::from_millis(250)).await,
        }
    }
    load_samples(client, tables, sealer).await
}
