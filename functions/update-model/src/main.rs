//! Lambda entry point for `update-model`: the shared runner, for Model records.

use std::process::ExitCode;

use agent_server_shared::Model;

#[tokio::main]
async fn main() -> ExitCode {
    agent_server_shared::lambda::run::<Model>().await
}
