//! Reads one MCP server's headers from the MCP-server table and opens them
//! (docs/secrets.md): one `GetItem`, one KMS `Decrypt` of the record's data
//! key with the encryption context `{"field": "headers", "project_id":
//! "<project>", "id": "<record id>"}`, and AES-256-GCM for each value, whose
//! layout (version 2; version 1, written before, under the data key itself
//! with no salt) is
//!
//! ```text
//! value key    = HKDF-SHA256(ikm = data key, salt, info = "agent-server sealed values v2")
//! sealed value = 0x02 || salt (32 bytes) || nonce (12 bytes) || ciphertext || tag (16 bytes)
//! associated   = 0x02 || "headers" 0x00 project_id 0x00 id 0x00 header name
//! ```
//!
//! ```sh
//! cargo run -p agent-server-ops --example open_mcp_headers -- PROJECT_ID RECORD_ID
//! ```
//!
//! It prints the headers as one JSON object. The caller needs
//! `dynamodb:GetItem` on the table and `kms:Decrypt` on the secrets key with
//! the context `field=headers` (a role in the stack's `SecretReaderRoleArns`
//! has it). Everything else is the SDK's standard configuration:
//! credentials, `AWS_REGION`, and `AWS_ENDPOINT_URL_DYNAMODB` /
//! `AWS_ENDPOINT_URL_KMS` for the local emulators. The table is
//! `MCP_SERVERS_TABLE` (default `agent-server-mcp-servers`). AES-GCM comes
//! from aws-lc-rs. Tested by tests/tests/integration/mcp_sealing.rs.

use std::collections::BTreeMap;
use std::process::ExitCode;

use aws_lc_rs::aead::{AES_256_GCM, Aad, LessSafeKey, Nonce, UnboundKey};
use aws_lc_rs::hkdf::{HKDF_SHA256, Salt};
use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_kms::error::DisplayErrorContext;
use aws_sdk_kms::primitives::Blob;

const NONCE_BYTES: usize = 12;
const SALT_BYTES: usize = 32;
const TAG_BYTES: usize = 16;
const WRITE_KEY_INFO: &[u8] = b"agent-server sealed values v2";

/// Opens one sealed value of header `name` of record `id` in `project`
/// with the record's data key.
fn open_value(data_key: &[u8], project: &str, id: &str, name: &str, sealed: &[u8]) -> Result<String, String> {
    let unreadable = || format!("header {name}: not a sealed value of layout version 1 or 2");
    let (&layout, rest) = sealed.split_first().ok_or_else(unreadable)?;
    let (value_key, rest) = match layout {
        2 if rest.len() >= SALT_BYTES + NONCE_BYTES + TAG_BYTES => {
            let (salt, rest) = rest.split_at(SALT_BYTES);
            let mut derived = [0u8; 32];
            Salt::new(HKDF_SHA256, salt)
                .extract(data_key)
                .expand(&[WRITE_KEY_INFO], HKDF_SHA256)
                .and_then(|okm| okm.fill(&mut derived))
                .map_err(|_| format!("header {name}: key derivation failed"))?;
            (derived.to_vec(), rest)
        }
        1 if rest.len() >= NONCE_BYTES + TAG_BYTES => (data_key.to_vec(), rest),
        _ => return Err(unreadable()),
    };
    let key = LessSafeKey::new(
        UnboundKey::new(&AES_256_GCM, &value_key).map_err(|_| "the data key is not AES-256")?,
    );
    let (nonce, ciphertext) = rest.split_at(NONCE_BYTES);
    let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| format!("header {name}: bad nonce"))?;
    let mut associated = vec![layout];
    associated.extend_from_slice(format!("headers\0{project}\0{id}\0{name}").as_bytes());
    let mut in_out = ciphertext.to_vec();
    let opened = key
        .open_in_place(nonce, Aad::from(associated), &mut in_out)
        .map_err(|_| format!("header {name}: does not open for this record and name"))?;
    String::from_utf8(opened.to_vec()).map_err(|_| format!("header {name}: not UTF-8"))
}

/// The headers of MCP server `id` of `project` in `table`.
async fn open_headers(
    config: &aws_config::SdkConfig,
    table: &str,
    project: &str,
    id: &str,
) -> Result<BTreeMap<String, String>, String> {
    let output = aws_sdk_dynamodb::Client::new(config)
        .get_item()
        .table_name(table)
        .key("project_id", AttributeValue::S(project.to_owned()))
        .key("id", AttributeValue::S(id.to_owned()))
        .projection_expression("headers, headers_key")
        .consistent_read(true)
        .send()
        .await
        .map_err(|e| format!("GetItem on {table}: {}", DisplayErrorContext(&e)))?;
    let item = output
        .item
        .ok_or_else(|| format!("no MCP server {id} in project {project} in {table}"))?;
    let key = match item.get("headers_key") {
        Some(AttributeValue::B(sealed)) => {
            let output = aws_sdk_kms::Client::new(config)
                .decrypt()
                .ciphertext_blob(Blob::new(sealed.as_ref()))
                .encryption_context("field", "headers")
                .encryption_context("project_id", project)
                .encryption_context("id", id)
                .send()
                .await
                .map_err(|e| format!("KMS Decrypt: {}", DisplayErrorContext(&e)))?;
            let plaintext = output.plaintext.ok_or("KMS Decrypt returned no plaintext")?;
            Some(plaintext.into_inner())
        }
        _ => None,
    };
    let mut headers = BTreeMap::new();
    if let Some(AttributeValue::M(members)) = item.get("headers") {
        for (name, value) in members {
            let text = match (value, &key) {
                // Written before sealing and not yet sealed by `seal-secrets`.
                (AttributeValue::S(plain), _) => plain.clone(),
                (AttributeValue::B(sealed), Some(key)) => {
                    open_value(key, project, id, name, sealed.as_ref())?
                }
                _ => {
                    return Err(format!(
                        "header {name} is sealed but the record holds no data key"
                    ));
                }
            };
            headers.insert(name.clone(), text);
        }
    }
    Ok(headers)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [project, id] = args.as_slice() else {
        eprintln!("usage: open_mcp_headers PROJECT_ID RECORD_ID");
        return ExitCode::from(2);
    };
    let table = std::env::var("MCP_SERVERS_TABLE").unwrap_or_else(|_| "agent-server-mcp-servers".to_owned());
    let config = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .load()
        .await;
    match open_headers(&config, &table, project, id).await {
        Ok(headers) => match serde_json::to_string(&headers) {
            Ok(json) => {
                println!("{json}");
                ExitCode::SUCCESS
            }
            Err(error) => {
                eprintln!("open_mcp_headers: {error}");
                ExitCode::FAILURE
            }
        },
        Err(message) => {
            eprintln!("open_mcp_headers: {message}");
            ExitCode::FAILURE
        }
    }
}
