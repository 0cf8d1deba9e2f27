//! Lambda entry point for `update-api-key`: the shared runner, for ApiKey records.

use std::process::ExitCode;

use agent_server_shared::ApiKey;

#[tokio::main]
async fn main() -> ExitCode {
    agent_server_shared::lambda::run::<ApiKey>().await
}
