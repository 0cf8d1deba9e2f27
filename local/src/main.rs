//! `local-api [--addr 127.0.0.1:3000] [--setup]`: serves the three update
//! routes on loopback, configured by the same environment variables as the
//! Lambda functions. `--setup` first creates the tables and loads the
//! sample records.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use agent_server_shared::App;
use local_api::{samples, serve, setup};
use tokio::net::TcpListener;

const USAGE: &str = "usage: local-api [--addr HOST:PORT] [--setup]

Serves PUT /api/agent-server/{api-keys,mcp-servers,models}/{id} over HTTP.
  --addr HOST:PORT  where to listen (default 127.0.0.1:3000)
  --setup           create the tables and load the sample records first
Environment: API_KEYS_TABLE, MCP_SERVERS_TABLE, MODELS_TABLE,
ALLOW_PRIVATE_ENDPOINTS, AWS_ENDPOINT_URL_DYNAMODB, AWS_REGION, credentials.";

struct Options {
    addr: SocketAddr,
    setup: bool,
}

fn options() -> Result<Options, String> {
    let mut options = Options {
        addr: SocketAddr::from(([127, 0, 0, 1], 3000)),
        setup: false,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--addr" => {
                let value = args.next().ok_or("--addr needs HOST:PORT")?;
                options.addr = value
                    .parse()
                    .map_err(|_| format!("--addr: not HOST:PORT: {value}"))?;
            }
            "--setup" => options.setup = true,
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument: {other}")),
        }
    }
    Ok(options)
}

#[tokio::main]
async fn main() -> ExitCode {
    let options = match options() {
        Ok(options) => options,
        Err(message) => {
            if !message.is_empty() {
                eprintln!("local-api: {message}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    agent_server_shared::logging::init();
    match run(options).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("local-api: {message}");
            ExitCode::FAILURE
        }
    }
}

async fn run(options: Options) -> Result<(), String> {
    let app = App::from_env().await.map_err(|e| e.to_string())?;
    if options.setup {
        setup::prepare(app.store.client(), &app.settings.tables, Duration::from_secs(30))
            .await
            .map_err(|e| format!("could not prepare DynamoDB (is DynamoDB Local running?): {e}"))?;
    }
    let listener = TcpListener::bind(options.addr).await.map_err(|e| {
        format!(
            "cannot listen on {}: {e} (is another local-api running?)",
            options.addr
        )
    })?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    tracing::info!(%addr, "listening");
    if options.setup {
        eprintln!("{}", try_these(addr));
    }
    let shutdown = async {
        // If the signal handler cannot be installed, serve until killed.
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
        tracing::info!("shutting down");
    };
    serve(listener, Arc::new(app), shutdown)
        .await
        .map_err(|e| e.to_string())
}

fn try_these(addr: SocketAddr) -> String {
    let base = format!("http://{addr}/api/agent-server");
    let project = samples::PROJECT_ID;
    format!(
        "\nlocal-api is ready on http://{addr} (Ctrl-C stops it). Try:\n\n\
         curl -sS -X PUT '{base}/api-keys/{key}' -H 'Content-Type: application/json' \\\n  \
         -d '{{\"name\": \"Production OpenAI key\", \"enabled\": false}}'\n\n\
         curl -sS -X PUT '{base}/mcp-servers/{mcp}?project_id={project}' -H 'Content-Type: application/json' \\\n  \
         -d '{{\"endpoint\": \"http://localhost:8931/mcp\", \"headers\": {{\"Authorization\": \"Bearer new-token\"}}}}'\n\n\
         curl -sS -X PUT '{base}/models/{model}?project_id={project}' -H 'Content-Type: application/json' \\\n  \
         -d '{{\"provider_type\": \"Anthropic\", \"parameters\": {{\"temperature\": 0.2, \"max_tokens\": 8192}}}}'\n",
        key = samples::API_KEY_ID,
        mcp = samples::MCP_SERVER_ID,
        model = samples::MODEL_ID,
    )
}
