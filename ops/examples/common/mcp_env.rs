//! What the MCP consumer examples read from the environment, so no value
//! shows in a process list: `MCP_HEADERS` (optional), a JSON object of the
//! headers sent with every request (an opened record's `headers`,
//! docs/secrets.md), and `ALLOW_PRIVATE_ENDPOINTS` (`true` allows loopback
//! and private addresses, as in the service).

use std::collections::BTreeMap;

use agent_server_shared::mcp::DialPolicy;
use agent_server_shared::rules::Policy;
use agent_server_shared::secret::Secret;

/// The headers `MCP_HEADERS` names, each value a secret; `None` when it is
/// not a JSON object of strings.
pub fn headers() -> Option<BTreeMap<String, Secret>> {
    let given = std::env::var("MCP_HEADERS").unwrap_or_else(|_| "{}".into());
    let given = serde_json::from_str::<BTreeMap<String, String>>(&given).ok()?;
    Some(
        given
            .iter()
            .map(|(name, value)| (name.clone(), Secret::from(value.as_str())))
            .collect(),
    )
}

/// Where a connection may go: the endpoint rule, private addresses as
/// `ALLOW_PRIVATE_ENDPOINTS` says.
pub fn policy() -> DialPolicy {
    DialPolicy::of(Policy {
        allow_private_endpoints: std::env::var("ALLOW_PRIVATE_ENDPOINTS").is_ok_and(|v| v == "true"),
    })
}
