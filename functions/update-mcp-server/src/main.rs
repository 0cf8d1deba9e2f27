//! Lambda entry point for `update-mcp-server`.

use std::convert::Infallible;

use agent_server_shared::App;
use lambda_http::{Error, service_fn};

#[tokio::main]
async fn main() -> Result<(), Error> {
    agent_server_shared::logging::init();
    let app = App::from_env().await?;
    lambda_http::run(service_fn(|request| async {
        Ok::<_, Infallible>(update_mcp_server::handle(&app, request).await)
    }))
    .await
}
