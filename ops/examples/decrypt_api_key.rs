//! Reads one provider API key from the API-key table and opens its seal:
//! one `GetItem`, one KMS `Decrypt` with the encryption context
//! `{"field": "api_key", "id": "<record id>"}` (docs/secrets.md). No key id
//! is needed (the ciphertext names its key), and a ciphertext copied to
//! another record does not open.
//!
//! ```sh
//! cargo run -p agent-server-ops --example decrypt_api_key -- RECORD_ID
//! ```
//!
//! The caller needs `dynamodb:GetItem` on the table and `kms:Decrypt` on the
//! secrets key (a role in the stack's `SecretReaderRoleArns` has the
//! latter). Everything else is the SDK's standard configuration:
//! credentials, `AWS_REGION`, and `AWS_ENDPOINT_URL_DYNAMODB` /
//! `AWS_ENDPOINT_URL_KMS` for the local emulators. The table is
//! `API_KEYS_TABLE` (default `agent-server-api-keys`; a deployed stack's
//! `ApiKeysTableName` output). Tested against DynamoDB Local and the local
//! KMS by tests/tests/integration/sealing.rs.

use std::process::ExitCode;

use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_kms::error::DisplayErrorContext;
use aws_sdk_kms::primitives::Blob;

/// The plain `api_key` of API-key record `record_id` in `table`.
async fn decrypt_api_key(
    config: &aws_config::SdkConfig,
    table: &str,
    record_id: &str,
) -> Result<String, String> {
    let output = aws_sdk_dynamodb::Client::new(config)
        .get_item()
        .table_name(table)
        .key("id", AttributeValue::S(record_id.to_owned()))
        .projection_expression("api_key")
        .consistent_read(true)
        .send()
        .await
        .map_err(|e| format!("GetItem on {table}: {}", DisplayErrorContext(&e)))?;
    let item = output
        .item
        .ok_or_else(|| format!("no API key record {record_id} in {table}"))?;
    let sealed = match item.get("api_key") {
        Some(AttributeValue::B(sealed)) => sealed.clone().into_inner(),
        // Written before sealing and not yet sealed by `seal-api-keys`.
        Some(AttributeValue::S(plain)) => return Ok(plain.clone()),
        _ => return Err(format!("API key record {record_id} holds no api_key")),
    };
    let output = aws_sdk_kms::Client::new(config)
        .decrypt()
        .ciphertext_blob(Blob::new(sealed))
        .encryption_context("field", "api_key")
        .encryption_context("id", record_id)
        .send()
        .await
        .map_err(|e| format!("KMS Decrypt: {}", DisplayErrorContext(&e)))?;
    let plaintext = output.plaintext.ok_or("KMS Decrypt returned no plaintext")?;
    String::from_utf8(plaintext.into_inner()).map_err(|_| "the api_key is not UTF-8".to_owned())
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [record_id] = args.as_slice() else {
        eprintln!("usage: decrypt_api_key RECORD_ID");
        return ExitCode::from(2);
    };
    let table = std::env::var("API_KEYS_TABLE").unwrap_or_else(|_| "agent-server-api-keys".to_owned());
    let config = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .load()
        .await;
    match decrypt_api_key(&config, &table, record_id).await {
        Ok(api_key) => {
            println!("{api_key}");
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("decrypt_api_key: {message}");
            ExitCode::FAILURE
        }
    }
}
