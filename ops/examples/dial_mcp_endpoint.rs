//! Dials an MCP server's endpoint the way `verify=true` does, for an agent
//! runtime that connects to a stored endpoint: the connect-time guard
//! (`agent_server_shared::mcp::dial`: the host resolved once, refused if any
//! address it resolves to is one the endpoint rule refuses or this
//! process's Lambda Runtime API; `Dialed::connect` then connects only to
//! those checked addresses, TLS with the host as SNI), and the handshake
//! (`mcp::handshake`, which dials through the same guard itself).
//!
//! ```sh
//! MCP_HEADERS='{"Authorization": "Bearer ..."}' \
//!   cargo run -p agent-server-ops --example dial_mcp_endpoint -- URL
//! ```
//!
//! `MCP_HEADERS` (optional) is a JSON object of the headers sent with every
//! request: an opened record's `headers` (docs/secrets.md says how to open
//! them), read from the environment so no value shows in a process list.
//! Loopback and private addresses are refused unless
//! `ALLOW_PRIVATE_ENDPOINTS=true`, as in the service. It prints the checked
//! addresses, then what the server announced as JSON; a refusal prints its
//! stage and exits 1. Tested by tests/tests/integration/verify.rs.

use std::process::ExitCode;
use std::time::Duration;

use agent_server_shared::mcp::{self, SystemResolver};

#[path = "common/mcp_env.rs"]
mod mcp_env;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let Some(url) = std::env::args().nth(1).and_then(|url| url::Url::parse(&url).ok()) else {
        eprintln!("usage: [MCP_HEADERS='{{\"Name\": \"value\"}}'] dial_mcp_endpoint URL");
        return ExitCode::from(2);
    };
    let Some(headers) = mcp_env::headers() else {
        eprintln!("dial_mcp_endpoint: MCP_HEADERS is not a JSON object of strings");
        return ExitCode::from(2);
    };
    let policy = mcp_env::policy();
    // The guard alone: where a connection may go. A consumer that speaks
    // to the server itself connects with `dialed.connect()`.
    match mcp::dial(&url, &policy, &SystemResolver).await {
        Ok(dialed) => {
            let addresses: Vec<String> = dialed.addresses().iter().map(ToString::to_string).collect();
            eprintln!("dial_mcp_endpoint: checked addresses {}", addresses.join(", "));
        }
        Err(failure) => {
            eprintln!("dial_mcp_endpoint: refused at {}: {failure}", failure.stage());
            return ExitCode::FAILURE;
        }
    }
    let budget = Duration::from_secs(10);
    match mcp::handshake(&url, &headers, &policy, &SystemResolver, budget).await {
        Ok(verified) => {
            let announced = serde_json::json!({
                "protocol_version": verified.protocol_version,
                "name": verified.name,
                "version": verified.version,
                "tools": verified.tools(),
            });
            println!("{announced}");
            ExitCode::SUCCESS
        }
        Err(failure) => {
            eprintln!(
                "dial_mcp_endpoint: the handshake failed at {}: {failure}",
                failure.stage()
            );
            ExitCode::FAILURE
        }
    }
}
