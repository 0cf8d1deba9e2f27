//! Compares what an MCP server offers now with a record's tool pin
//! (docs/api.md, "Tool pins"), for an agent runtime about to use a stored
//! server: a live `tools/list` through the same connect-time guard as
//! `verify=true` (`agent_server_shared::mcp::handshake`, which digests each
//! tool as RFC 8785 says), its `tools_digest` against the record's, and, if
//! they differ, the tools that moved, named against `tool_digests`.
//!
//! ```sh
//! MCP_HEADERS='{"Authorization": "Bearer ..."}' MCP_VERIFICATION='{"tools_digest": ..., "tool_digests": {...}}' \
//!   cargo run -p agent-server-ops --example check_tool_pin -- URL
//! ```
//!
//! `MCP_VERIFICATION` is the record's `verification` as the API returned
//! it; `MCP_HEADERS` (optional) its opened headers (docs/secrets.md). Both
//! come from the environment, so no value shows in a process list.
//! Loopback and private addresses are refused unless
//! `ALLOW_PRIVATE_ENDPOINTS=true`. It prints
//! `{"pinned", "live", "moved", "added", "removed", "changed"}` and exits 0
//! when nothing moved, 3 when something did (use the server only after a
//! person has looked), 1 when the server could not be asked. Tested by
//! tests/tests/integration/pins.rs.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::Duration;

use agent_server_shared::mcp::{self, SystemResolver};

#[path = "common/mcp_env.rs"]
mod mcp_env;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let usage = "usage: MCP_VERIFICATION='{...}' [MCP_HEADERS='{...}'] check_tool_pin URL";
    let Some(url) = std::env::args().nth(1).and_then(|url| url::Url::parse(&url).ok()) else {
        eprintln!("{usage}");
        return ExitCode::from(2);
    };
    let pinned = std::env::var("MCP_VERIFICATION")
        .ok()
        .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok());
    let Some(pinned) = pinned.filter(|verification| verification["tools_digest"].is_string()) else {
        eprintln!("check_tool_pin: MCP_VERIFICATION is not a verification with a tools_digest\n{usage}");
        return ExitCode::from(2);
    };
    let Some(headers) = mcp_env::headers() else {
        eprintln!("check_tool_pin: MCP_HEADERS is not a JSON object of strings");
        return ExitCode::from(2);
    };
    let policy = mcp_env::policy();
    let live = match mcp::handshake(&url, &headers, &policy, &SystemResolver, Duration::from_secs(10)).await {
        Ok(verified) => verified.pin,
        Err(failure) => {
            eprintln!(
                "check_tool_pin: the server could not be asked: {} ({failure})",
                failure.stage()
            );
            return ExitCode::FAILURE;
        }
    };
    let digests: Option<BTreeMap<String, String>> =
        serde_json::from_value(pinned["tool_digests"].clone()).ok();
    let changes = live.changes_since(digests.as_ref());
    let moved = pinned["tools_digest"] != live.digest().as_str();
    let report = serde_json::json!({
        "pinned": pinned["tools_digest"],
        "live": live.digest(),
        "moved": moved,
        "added": changes.added,
        "removed": changes.removed,
        "changed": changes.changed,
    });
    println!("{report}");
    if moved {
        ExitCode::from(3)
    } else {
        ExitCode::SUCCESS
    }
}
