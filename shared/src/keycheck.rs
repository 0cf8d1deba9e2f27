//! `verify=true` on an API key: the provider's cheapest authenticated read
//! (its model list), sent once with the key in the header the provider
//! expects, through the same connect-time guard as an MCP handshake
//! ([`crate::mcp::dial`](mod@crate::mcp::dial)). Where each request goes and why:
//! docs/ARCHITECTURE.md, Verification.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use http_body_util::{BodyExt, Empty, Limited};
use hyper::body::Bytes;
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request};
use hyper_util::rt::TokioIo;
use serde::Deserialize;
use serde::de::IgnoredAny;
use url::Url;
use zeroize::Zeroizing;

use crate::mcp::{DialPolicy, Failure as DialFailure, Resolve, SystemResolver, dial};
use crate::provider::ProviderType;
use crate::rules::endpoint::{HostClass, classify_host};
use crate::secret::Secret;

/// The most bytes of a model list read.
pub const MAX_LIST_BYTES: usize = 1024 * 1024;
/// The `anthropic-version` every Anthropic request names.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// Where each provider's API is: its base URL, from the operator's
/// configuration (a private gateway, a test peer) or the provider's own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderBases {
    bases: [Url; ProviderType::ALL.len()],
}

impl ProviderBases {
    /// Each provider's base from its variable ([`ProviderType::base_var`])
    /// through `lookup`, else its default; a value that is no absolute
    /// http(s) URL is an error naming the variable.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, &'static str> {
        let mut bases = Vec::with_capacity(ProviderType::ALL.len());
        for provider in ProviderType::ALL {
            let text = lookup(provider.base_var())
                .filter(|text| !text.trim().is_empty())
                .unwrap_or_else(|| provider.default_base().to_string());
            let base = Url::parse(&text)
                .ok()
                .filter(acceptable_base)
                .ok_or(provider.base_var())?;
            bases.push(base);
        }
        let bases = bases.try_into().map_err(|_| "one base per provider")?;
        Ok(Self { bases })
    }

    /// The base of `provider`.
    pub fn base(&self, provider: ProviderType) -> &Url {
        &self.bases[provider as usize]
    }
}

/// Whether `url` may be a provider's base: `https` (plain `http` only to
/// loopback: a local mock), with a host no endpoint rule forbids (never a
/// metadata service or link-local address; a private gateway is fine).
fn acceptable_base(url: &Url) -> bool {
    let Some(host) = url.host() else {
        return false;
    };
    let loopback = match &host {
        url::Host::Domain(name) => name.eq_ignore_ascii_case("localhost"),
        url::Host::Ipv4(address) => address.is_loopback(),
        url::Host::Ipv6(address) => address.is_loopback(),
    };
    let scheme = url.scheme() == "https" || (url.scheme() == "http" && loopback);
    scheme
        && classify_host(&host) != HostClass::Forbidden
        && url.username().is_empty()
        && url.password().is_none()
}

impl Default for ProviderBases {
    fn default() -> Self {
        Self::from_lookup(|_| None).unwrap_or_else(|_| unreachable!("the defaults are URLs"))
    }
}

/// One check: which provider, the key, where to send it, under which
/// policy, within which time.
pub struct Probe<'a> {
    /// The record's provider.
    pub provider: ProviderType,
    /// The key the write would leave.
    pub key: &'a Secret,
    /// The provider's base URL.
    pub base: &'a Url,
    /// Which addresses may be dialed.
    pub policy: &'a DialPolicy,
    /// The most the check may take.
    pub budget: Duration,
}

/// Where a check failed: `errorDetails.stage`. Never carries what the
/// provider sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum KeyFailure {
    /// 401 or 403: the provider refused the key.
    #[error("the provider refused the key (HTTP {0})")]
    Refused(u16),
    /// Any other status but 2xx (a redirect included: none is followed).
    #[error("HTTP status {0}")]
    HttpStatus(u16),
    /// No connection: the host did not resolve, resolved to an address the
    /// endpoint rule refuses, or refused it.
    #[error("no connection")]
    Connect,
    /// The TLS handshake failed.
    #[error("TLS failed")]
    Tls,
    /// No answer within the budget.
    #[error("no answer within the budget")]
    Timeout,
    /// A 2xx that is not the provider's model list.
    #[error("protocol: {0}")]
    Protocol(&'static str),
    /// The record's provider has no known check.
    #[error("no check is known for this provider")]
    UnsupportedProvider,
    /// The record holds no key, and the write sets none: nothing to send.
    #[error("the record holds no key")]
    NoKey,
}

impl KeyFailure {
    /// The stage's stable name.
    pub fn stage(&self) -> &'static str {
        match self {
            Self::Refused(_) | Self::NoKey => "refused",
            Self::HttpStatus(_) => "http_status",
            Self::Connect => "connect",
            Self::Tls => "tls",
            Self::Timeout => "timeout",
            Self::Protocol(_) => "protocol",
            Self::UnsupportedProvider => "unsupported_provider",
        }
    }

    /// The HTTP status the provider answered, for `http_status`.
    pub fn http_status(&self) -> Option<u16> {
        match self {
            Self::HttpStatus(status) => Some(*status),
            _ => None,
        }
    }

    /// Every stage.
    pub const STAGES: [&'static str; 7] = [
        "refused",
        "http_status",
        "connect",
        "tls",
        "timeout",
        "protocol",
        "unsupported_provider",
    ];
}

/// A key check with the system's resolver, as a function pointer: what a
/// record kind whose key is checked names, so no other function links the
/// client.
pub type KeyCheck =
    for<'a> fn(&'a Probe<'a>) -> Pin<Box<dyn Future<Output = Result<u64, KeyFailure>> + Send + 'a>>;

/// [`check`] with the system's resolver, boxed: a [`KeyCheck`].
pub fn system_check<'a>(
    probe: &'a Probe<'a>,
) -> Pin<Box<dyn Future<Output = Result<u64, KeyFailure>> + Send + 'a>> {
    static SYSTEM: SystemResolver = SystemResolver;
    Box::pin(check(probe, &SYSTEM))
}

/// Sends the provider's model-list request with the key, once, and counts
/// the models its first page lists: the key is verified; or the stage that
/// failed.
pub async fn check(probe: &Probe<'_>, resolver: &impl Resolve) -> Result<u64, KeyFailure> {
    tokio::time::timeout(probe.budget, ask(probe, resolver))
        .await
        .unwrap_or(Err(KeyFailure::Timeout))
}

async fn ask(probe: &Probe<'_>, resolver: &impl Resolve) -> Result<u64, KeyFailure> {
    let url = probe.provider.models_url(probe.base);
    let dialed = dial(&url, probe.policy, resolver).await.map_err(dial_failure)?;
    let stream = dialed.connect().await.map_err(dial_failure)?;
    let (mut sender, connection) = hyper::client::conn::http1::Builder::new()
        .max_buf_size(64 * 1024)
        .handshake::<_, Empty<Bytes>>(TokioIo::new(stream))
        .await
        .map_err(|_| KeyFailure::Connect)?;
    // Ends when the sender is dropped or the provider closes.
    tokio::spawn(async move {
        let _ = connection.await;
    });
    let request = probe.provider.request(&url, probe.key)?;
    let response = sender.send_request(request).await.map_err(|error| {
        if error.is_parse() || error.is_parse_too_large() {
            KeyFailure::Protocol("the answer is not HTTP/1.1")
        } else {
            KeyFailure::Connect
        }
    })?;
    let status = response.status().as_u16();
    match status {
        200..=299 => {}
        401 | 403 => return Err(KeyFailure::Refused(status)),
        other => return Err(KeyFailure::HttpStatus(other)),
    }
    let body = Limited::new(response.into_body(), MAX_LIST_BYTES)
        .collect()
        .await
        .map_err(|_| KeyFailure::Protocol("the answer is larger than 1 MiB or broke off"))?
        .to_bytes();
    probe.provider.count_models(&body)
}

/// A dial's failure, as a key check's stage.
fn dial_failure(failure: DialFailure) -> KeyFailure {
    match failure {
        DialFailure::Tls => KeyFailure::Tls,
        DialFailure::Timeout => KeyFailure::Timeout,
        _ => KeyFailure::Connect,
    }
}

/// An OpenAI-style list (OpenAI, xAI, Anthropic): `{"data": [...]}`.
#[derive(Deserialize)]
struct DataList {
    data: Vec<IgnoredAny>,
}

/// Gemini's list: `{"models": [...]}`.
#[derive(Deserialize)]
struct ModelList {
    models: Vec<IgnoredAny>,
}

impl ProviderType {
    /// The variable naming this provider's base URL.
    pub const fn base_var(self) -> &'static str {
        match self {
            Self::OpenAI => "OPENAI_BASE_URL",
            Self::Anthropic => "ANTHROPIC_BASE_URL",
            Self::Gemini => "GEMINI_BASE_URL",
            Self::XAi => "XAI_BASE_URL",
        }
    }

    /// The provider's own base URL.
    pub const fn default_base(self) -> &'static str {
        match self {
            Self::OpenAI => "https://api.openai.com/v1",
            Self::Anthropic => "https://api.anthropic.com",
            Self::Gemini => "https://generativelanguage.googleapis.com",
            Self::XAi => "https://api.x.ai/v1",
        }
    }

    /// Where its model list is, under `base`.
    fn models_url(self, base: &Url) -> Url {
        let path = match self {
            Self::OpenAI | Self::XAi => "/models",
            Self::Anthropic => "/v1/models",
            Self::Gemini => "/v1beta/models",
        };
        let mut url = base.clone();
        let joined = format!("{}{path}", base.path().trim_end_matches('/'));
        url.set_path(&joined);
        url
    }

    /// The `GET` of the model list at `url`, the key in the one header the
    /// provider reads it from (never in the URL).
    fn request(self, url: &Url, key: &Secret) -> Result<Request<Empty<Bytes>>, KeyFailure> {
        let unbuilt = || KeyFailure::Protocol("the request could not be built");
        let host = match url.port() {
            Some(port) => format!("{}:{port}", url.host_str().unwrap_or_default()),
            None => url.host_str().unwrap_or_default().to_string(),
        };
        let target = match url.query() {
            Some(query) => format!("{}?{query}", url.path()),
            None => url.path().to_string(),
        };
        // Copies of the key are wiped when dropped, as the key is.
        let (name, value) = match self {
            Self::OpenAI | Self::XAi => (
                "authorization",
                Zeroizing::new(format!("Bearer {}", key.expose())),
            ),
            Self::Anthropic => ("x-api-key", Zeroizing::new(key.expose().to_string())),
            Self::Gemini => ("x-goog-api-key", Zeroizing::new(key.expose().to_string())),
        };
        let mut value = HeaderValue::from_str(&value).map_err(|_| unbuilt())?;
        value.set_sensitive(true);
        let mut request = Request::builder()
            .method(Method::GET)
            .uri(target)
            .header(header::HOST, host)
            .header(header::ACCEPT, "application/json")
            .header(header::USER_AGENT, crate::mcp::CLIENT_NAME)
            .header(name, value);
        if self == Self::Anthropic {
            request = request.header("anthropic-version", ANTHROPIC_VERSION);
        }
        request.body(Empty::new()).map_err(|_| unbuilt())
    }

    /// How many models the list in `body` holds (its first page).
    fn count_models(self, body: &[u8]) -> Result<u64, KeyFailure> {
        let not_a_list = || KeyFailure::Protocol("the answer is not the provider's model list");
        let count = match self {
            Self::Gemini => serde_json::from_slice::<ModelList>(body)
                .map_err(|_| not_a_list())?
                .models
                .len(),
            _ => serde_json::from_slice::<DataList>(body)
                .map_err(|_| not_a_list())?
                .data
                .len(),
        };
        Ok(count as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `ProviderBases` indexes its bases by `provider as usize`.
    #[test]
    fn the_providers_are_in_declaration_order() {
        for (index, provider) in ProviderType::ALL.into_iter().enumerate() {
            assert_eq!(provider as usize, index, "{provider:?}");
        }
    }

    #[test]
    fn each_provider_s_list_is_at_its_path() {
        let bases = ProviderBases::default();
        let urls: Vec<String> = ProviderType::ALL
            .into_iter()
            .map(|provider| provider.models_url(bases.base(provider)).to_string())
            .collect();
        assert_eq!(
            urls,
            [
                "https://api.openai.com/v1/models",
                "https://api.anthropic.com/v1/models",
                "https://generativelanguage.googleapis.com/v1beta/models",
                "https://api.x.ai/v1/models",
            ]
        );
        let local = ProviderBases::from_lookup(|name| {
            (name == "OPENAI_BASE_URL").then(|| "http://127.0.0.1:9/v1/".to_string())
        });
        let local = local.unwrap_or_default();
        assert_eq!(
            ProviderType::OpenAI
                .models_url(local.base(ProviderType::OpenAI))
                .as_str(),
            "http://127.0.0.1:9/v1/models"
        );
        for refused in [
            "not a url",
            "http://api.example.com/v1",
            "https://169.254.169.254/v1",
            "https://user:pass@api.example.com",
            "ftp://api.example.com",
        ] {
            assert!(
                ProviderBases::from_lookup(|_| Some(refused.into())).is_err(),
                "{refused}"
            );
        }
        for accepted in [
            "https://10.1.2.3/v1",
            "http://127.0.0.1:9/v1",
            "http://localhost:9",
        ] {
            assert!(
                ProviderBases::from_lookup(|_| Some(accepted.into())).is_ok(),
                "{accepted}"
            );
        }
    }

    #[test]
    fn the_key_is_in_its_header_and_never_in_the_url() {
        let key = Secret::from("sk-SENTINEL-1");
        for provider in ProviderType::ALL {
            let url = provider.models_url(ProviderBases::default().base(provider));
            let request = provider.request(&url, &key).unwrap_or_else(|e| panic!("{e}"));
            assert!(!request.uri().to_string().contains("SENTINEL"));
            let carried: Vec<&str> = request
                .headers()
                .iter()
                .filter(|(_, value)| value.as_bytes().windows(8).any(|w| w == b"SENTINEL"))
                .map(|(name, _)| name.as_str())
                .collect();
            let expected = match provider {
                ProviderType::OpenAI | ProviderType::XAi => "authorization",
                ProviderType::Anthropic => "x-api-key",
                ProviderType::Gemini => "x-goog-api-key",
            };
            assert_eq!(carried, [expected], "{provider:?}");
        }
    }

    #[test]
    fn lists_are_counted_by_provider() {
        let openai = br#"{"object":"list","data":[{"id":"a"},{"id":"b"}]}"#;
        assert_eq!(ProviderType::OpenAI.count_models(openai), Ok(2));
        assert_eq!(ProviderType::XAi.count_models(openai), Ok(2));
        assert_eq!(
            ProviderType::Anthropic.count_models(br#"{"data":[],"has_more":false}"#),
            Ok(0)
        );
        assert_eq!(
            ProviderType::Gemini.count_models(br#"{"models":[{"name":"models/x"}]}"#),
            Ok(1)
        );
        for not_a_list in [&b"{}"[..], b"[]", b"{\"data\":{}}", b"<html>", b""] {
            assert_eq!(
                ProviderType::OpenAI
                    .count_models(not_a_list)
                    .map_err(|e| e.stage()),
                Err("protocol")
            );
        }
        assert!(ProviderType::Gemini.count_models(openai).is_err());
    }
}
