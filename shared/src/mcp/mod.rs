//! `verify=true`: an MCP handshake (Streamable HTTP: `initialize`,
//! `notifications/initialized`, `tools/list`) with an endpoint, through a
//! guard that dials only addresses the endpoint rule allows ([`dial`](mod@dial)).
//! What it sends where, and why each bound: docs/ARCHITECTURE.md,
//! Verification.

pub mod dial;
mod handshake;
pub mod pin;
mod sse;

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use url::Url;

use crate::secret::Secret;

pub use dial::{DialPolicy, Dialed, Resolve, SystemResolver, dial};
pub use handshake::{CLIENT_NAME, PROTOCOL_VERSIONS, handshake};
pub use pin::{Changes, ToolPin};

/// The most bytes of response bodies one handshake reads, all requests
/// together.
pub const MAX_RESPONSE_BYTES: usize = 1024 * 1024;
/// The most `tools/list` pages a handshake follows.
pub const MAX_TOOL_PAGES: usize = 32;
/// The most a handshake may take, whatever the request's budget leaves.
pub const HANDSHAKE_BUDGET: Duration = Duration::from_secs(4);

/// A handshake with the system's resolver, as a function pointer: what a
/// record kind that verifies names ([`crate::Resource::VERIFY`]), so the
/// functions of the other kinds hold no reference to the client and do not
/// link it (an `await` on the handshake itself, even behind a constant,
/// would keep its code in their binaries: a future's states are data).
pub type Handshake = for<'a> fn(
    &'a Url,
    &'a BTreeMap<String, Secret>,
    &'a DialPolicy,
    Duration,
) -> Pin<Box<dyn Future<Output = Result<Verified, Failure>> + Send + 'a>>;

/// [`handshake`] with the system's resolver, boxed: a [`Handshake`].
pub fn system_handshake<'a>(
    endpoint: &'a Url,
    headers: &'a BTreeMap<String, Secret>,
    policy: &'a DialPolicy,
    budget: Duration,
) -> Pin<Box<dyn Future<Output = Result<Verified, Failure>> + Send + 'a>> {
    static SYSTEM: SystemResolver = SystemResolver;
    Box::pin(handshake(endpoint, headers, policy, &SYSTEM, budget))
}

/// What a server that passed the handshake announced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    /// The protocol version agreed in `initialize`.
    pub protocol_version: String,
    /// `serverInfo.name`, held to the text rules.
    pub name: String,
    /// `serverInfo.version`, held to the text rules.
    pub version: String,
    /// The tools `tools/list` listed, every page, pinned.
    pub pin: ToolPin,
}

impl Verified {
    /// How many tools it listed.
    pub fn tools(&self) -> u64 {
        self.pin.len() as u64
    }
}

/// Where a handshake failed: `errorDetails.stage`, and the log line's.
/// Never carries what the server sent (a reason is ours, static).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Failure {
    /// The endpoint, or an address its host resolves to, is one the
    /// endpoint rule refuses.
    #[error("an address the endpoint rule refuses")]
    AddressRefused,
    /// The host did not resolve.
    #[error("the host did not resolve")]
    Dns,
    /// No checked address accepted a connection.
    #[error("no connection")]
    Connect,
    /// The TLS handshake failed (certificate, name, protocol).
    #[error("TLS failed")]
    Tls,
    /// The budget ran out.
    #[error("no answer within the budget")]
    Timeout,
    /// An HTTP status no step accepts (a redirect included: none is followed).
    #[error("HTTP status {0}")]
    HttpStatus(u16),
    /// 401 or 403: the headers do not open the server.
    #[error("HTTP status {0}: not authorized")]
    Unauthorized(u16),
    /// The answer is not MCP (not JSON-RPC, or not JSON or an event stream).
    #[error("not an MCP server: {0}")]
    NotMcp(&'static str),
    /// An MCP answer the handshake cannot accept.
    #[error("protocol: {0}")]
    Protocol(&'static str),
    /// The server speaks only the older HTTP+SSE transport.
    #[error("the server speaks only the HTTP+SSE transport (2024-11-05)")]
    UnsupportedTransport,
}

impl Failure {
    /// The stage's stable name.
    pub fn stage(&self) -> &'static str {
        match self {
            Self::AddressRefused => "address_refused",
            Self::Dns => "dns",
            Self::Connect => "connect",
            Self::Tls => "tls",
            Self::Timeout => "timeout",
            Self::HttpStatus(_) => "http_status",
            Self::Unauthorized(_) => "unauthorized",
            Self::NotMcp(_) => "not_mcp",
            Self::Protocol(_) => "protocol",
            Self::UnsupportedTransport => "unsupported_transport",
        }
    }

    /// The HTTP status the server answered, where the stage is one.
    pub fn http_status(&self) -> Option<u16> {
        match self {
            Self::HttpStatus(status) | Self::Unauthorized(status) => Some(*status),
            _ => None,
        }
    }

    /// Every stage, in the order a handshake meets them.
    pub const STAGES: [&'static str; 10] = [
        "address_refused",
        "dns",
        "connect",
        "tls",
        "timeout",
        "http_status",
        "unauthorized",
        "not_mcp",
        "protocol",
        "unsupported_transport",
    ];
}

#[cfg(test)]
mod tests {
    use super::Failure;

    #[test]
    fn every_failure_names_a_listed_stage_and_only_statuses_carry_one() {
        let all = [
            Failure::AddressRefused,
            Failure::Dns,
            Failure::Connect,
            Failure::Tls,
            Failure::Timeout,
            Failure::HttpStatus(307),
            Failure::Unauthorized(401),
            Failure::NotMcp("x"),
            Failure::Protocol("x"),
            Failure::UnsupportedTransport,
        ];
        let stages: Vec<&str> = all.iter().map(Failure::stage).collect();
        assert_eq!(stages, Failure::STAGES);
        let statuses: Vec<Option<u16>> = all.iter().map(Failure::http_status).collect();
        assert_eq!(statuses.iter().flatten().collect::<Vec<_>>(), [&307, &401]);
    }
}
