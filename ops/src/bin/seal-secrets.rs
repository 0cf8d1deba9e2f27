//! `seal-secrets [--api-keys-table NAME] [--mcp-servers-table NAME]
//! [--only api-keys|mcp-servers] [--dry-run]`: seals the secrets the tables
//! still hold in plain text (see the library's docs), with the operator's
//! usual AWS configuration (credentials, region, endpoints) and
//! `SECRETS_KEY_ID`, and prints what it did.

use std::process::ExitCode;

use agent_server_ops::cli::{self, Kind};
use agent_server_shared::Table;
use agent_server_shared::store::TableNames;
use clap::Parser;

/// Seals every secret the tables still hold in plain text, under
/// SECRETS_KEY_ID, bound to its record: each api_key with KMS Encrypt, each
/// MCP server's header values under a new data key (KMS GenerateDataKey).
/// Writes only while the item still holds what was read, touches no other
/// attribute, and can be run again.
///
/// Environment: SECRETS_KEY_ID (required), AWS_REGION, AWS_PROFILE or
/// credentials, AWS_ENDPOINT_URL_DYNAMODB / AWS_ENDPOINT_URL_KMS for local
/// emulators.
#[derive(Debug, Parser)]
#[command(name = "seal-secrets")]
struct Args {
    /// The API-key table [default: API_KEYS_TABLE, else agent-server-api-keys]
    #[arg(long, value_name = "NAME")]
    api_keys_table: Option<String>,
    /// The MCP-server table [default: MCP_SERVERS_TABLE, else agent-server-mcp-servers]
    #[arg(long, value_name = "NAME")]
    mcp_servers_table: Option<String>,
    /// Seal one table only
    #[arg(long, value_enum)]
    only: Option<Kind>,
    /// Count what would be sealed; write nothing, call no KMS
    #[arg(long)]
    dry_run: bool,
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args = Args::parse();
    let names = TableNames::from_env();
    let mut tables = Vec::new();
    if args.only.is_none_or(|only| only == Kind::ApiKeys) {
        tables.push((
            Table::ApiKeys,
            args.api_keys_table
                .unwrap_or(names.name(Table::ApiKeys).to_string()),
        ));
    }
    if args.only.is_none_or(|only| only == Kind::McpServers) {
        tables.push((
            Table::McpServers,
            args.mcp_servers_table
                .unwrap_or(names.name(Table::McpServers).to_string()),
        ));
    }
    cli::run("seal-secrets", &tables, args.dry_run).await
}
