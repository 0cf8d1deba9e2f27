//! `seal-api-keys [--table NAME] [--dry-run]`: the earlier name of
//! `seal-secrets --only api-keys`, kept so scripts that call it go on
//! working.

use std::process::ExitCode;

use agent_server_ops::cli;
use agent_server_shared::Table;
use agent_server_shared::store::TableNames;
use clap::Parser;

/// Seals every api_key the table still holds in plain text with KMS Encrypt
/// under SECRETS_KEY_ID, bound to its record; writes only while the item
/// still holds that plain text, touches no other attribute, and can be run
/// again. The same as `seal-secrets --only api-keys`.
///
/// Environment: SECRETS_KEY_ID (required), AWS_REGION, AWS_PROFILE or
/// credentials, AWS_ENDPOINT_URL_DYNAMODB / AWS_ENDPOINT_URL_KMS for local
/// emulators.
#[derive(Debug, Parser)]
#[command(name = "seal-api-keys")]
struct Args {
    /// The API-key table [default: API_KEYS_TABLE, else agent-server-api-keys]
    #[arg(long, value_name = "NAME")]
    table: Option<String>,
    /// Count what would be sealed; write nothing, call no KMS
    #[arg(long)]
    dry_run: bool,
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args = Args::parse();
    let table = args
        .table
        .unwrap_or_else(|| TableNames::from_env().name(Table::ApiKeys).to_string());
    cli::run("seal-api-keys", &[(Table::ApiKeys, table)], args.dry_run).await
}
