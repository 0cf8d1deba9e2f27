//! `seal-api-keys [--table NAME] [--dry-run]`: seals the plain-text
//! `api_key`s of an API-key table (see the library's docs), with the
//! operator's usual AWS configuration (credentials, region, endpoints) and
//! `SECRETS_KEY_ID`, and prints what it did.

use std::process::ExitCode;

use agent_server_ops::seal_table;
use agent_server_shared::seal::{KmsSealer, Sealer};
use agent_server_shared::store::TableNames;

const USAGE: &str = "usage: seal-api-keys [--table NAME] [--dry-run]

Seals every api_key the table still holds in plain text with KMS Encrypt
under SECRETS_KEY_ID, bound to its record; writes only while the item still
holds that plain text, touches no other attribute, and can be run again.
  --table NAME   the API-key table (default: API_KEYS_TABLE, else agent-server-api-keys)
  --dry-run      count what would be sealed; write nothing, call no KMS
Environment: SECRETS_KEY_ID (required), AWS_REGION, AWS_PROFILE or credentials,
AWS_ENDPOINT_URL_DYNAMODB / AWS_ENDPOINT_URL_KMS for local emulators.";

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let (mut table, mut dry_run) = (TableNames::from_env().api_keys, false);
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--table" => match args.next() {
                Some(name) => table = name,
                None => return usage("--table needs a name"),
            },
            "--dry-run" => dry_run = true,
            "-h" | "--help" => return usage(""),
            other => return usage(&format!("unknown argument: {other}")),
        }
    }
    let key_id = match Sealer::key_id(|name| std::env::var(name).ok()) {
        Ok(key_id) => key_id,
        Err(error) => return usage(&error.to_string()),
    };
    let config = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .load()
        .await;
    let client = aws_sdk_dynamodb::Client::new(&config);
    let sealer = Sealer::Kms(KmsSealer::from_config(&config, key_id));
    match seal_table(&client, &table, &sealer, dry_run).await {
        Ok(report) => {
            let verb = if dry_run {
                "dry run, nothing written"
            } else {
                "done"
            };
            println!("seal-api-keys: {table}: {report} ({verb})");
            for (id, reason) in &report.failed {
                eprintln!("seal-api-keys: {id}: not sealed: {reason}");
            }
            if report.failed.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Err(message) => {
            eprintln!("seal-api-keys: {message}");
            ExitCode::FAILURE
        }
    }
}

fn usage(message: &str) -> ExitCode {
    if !message.is_empty() {
        eprintln!("seal-api-keys: {message}");
    }
    eprintln!("{USAGE}");
    ExitCode::from(2)
}
