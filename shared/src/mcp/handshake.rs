//! The client side of MCP's Streamable HTTP transport, as far as a
//! handshake goes: HTTP/1.1 POSTs of JSON-RPC messages to the endpoint,
//! answered as JSON or as an event stream (resumed after its last event id
//! when the server ends it early), `Mcp-Session-Id` and
//! `MCP-Protocol-Version` carried after `initialize`, the session deleted at
//! the end. Every body read counts against one cap, and answers are read
//! into the few typed fields a handshake needs, never into a JSON tree.

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::client::conn::http1::SendRequest;
use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};
use hyper::{Method, Request, StatusCode};
use hyper_util::rt::TokioIo;
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::json;
use serde_json::value::RawValue;
use url::Url;

use super::dial::{DialPolicy, Dialed, Resolve, dial};
use super::pin::{PinError, ToolPin};
use super::sse;
use super::{Failure, MAX_RESPONSE_BYTES, MAX_TOOL_PAGES, Verified};
use crate::jcs::JcsError;
use crate::rules::{MAX_TEXT_CHARS, Rule};
use crate::secret::Secret;

/// How this service names itself in `initialize`.
pub const CLIENT_NAME: &str = "agent-server";
/// The protocol versions a handshake accepts, the newest first (it asks
/// for that one). Streamable HTTP began with 2025-03-26.
pub const PROTOCOL_VERSIONS: [&str; 3] = ["2025-11-25", "2025-06-18", "2025-03-26"];

const SESSION_ID: HeaderName = HeaderName::from_static("mcp-session-id");
const PROTOCOL_VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");
const LAST_EVENT_ID: HeaderName = HeaderName::from_static("last-event-id");
const EVENT_STREAM: &str = "text/event-stream";
/// The most times one answer's event stream is resumed.
const MAX_RESUMES: usize = 3;
/// The most a server's `retry` may make a resume wait.
const MAX_RETRY_WAIT: Duration = Duration::from_millis(500);
/// The most the session's `DELETE` may take: the handshake's outcome is
/// known by then.
const CLOSE_BUDGET: Duration = Duration::from_millis(500);
/// The shortest run of a credential looked for in what the server
/// announces (a shorter one is found in ordinary words).
const MIN_ECHOED_SECRET: usize = 8;

/// Runs the handshake with the server at `endpoint`, sending `headers`
/// with every request, within `budget`: what the server announced, or the
/// stage that failed. The session the server opened is deleted, success or
/// not, while the budget lasts.
pub async fn handshake(
    endpoint: &Url,
    headers: &BTreeMap<String, Secret>,
    policy: &DialPolicy,
    resolver: &impl Resolve,
    budget: Duration,
) -> Result<Verified, Failure> {
    let deadline = tokio::time::Instant::now() + budget;
    let dialed = tokio::time::timeout_at(deadline, dial(endpoint, policy, resolver))
        .await
        .map_err(|_| Failure::Timeout)??;
    let mut session = Session::new(dialed, headers)?;
    let outcome = tokio::time::timeout_at(deadline, session.run())
        .await
        .unwrap_or(Err(Failure::Timeout));
    if session.session_id.is_some() {
        let close_by = deadline.min(tokio::time::Instant::now() + CLOSE_BUDGET);
        let _ = tokio::time::timeout_at(close_by, session.close()).await;
    }
    let verified = outcome?;
    // A server that repeats a credential it was sent must not get it stored.
    if repeats_a_credential(headers, &verified.name, &verified.version) {
        return Err(Failure::Protocol("serverInfo repeats a header value"));
    }
    if verified
        .pin
        .digests()
        .keys()
        .any(|tool| repeats_a_credential(headers, tool, ""))
    {
        return Err(Failure::Protocol("a tool's name repeats a header value"));
    }
    Ok(verified)
}

/// Whether `name` and `version` hold [`MIN_ECHOED_SECRET`] characters in a
/// row of a header value's credential, as written (`rs/every`) or counting
/// its letters and digits alone (so separators hide no run): in either, or
/// across the two, either way round, forwards or backwards, whatever the
/// case or percent-encoding ([`comparable`]). A value's credentials
/// are each of its parts (split at spaces and commas: `Bearer`'s token
/// alone counts), and for one that is base64 (`Basic`), the text it
/// decodes to and each `:`-separated piece of it (the password alone).
/// A best effort against a server that echoes what it was sent: a
/// credential shorter than the run, or an echo transformed otherwise,
/// is not found.
fn repeats_a_credential(headers: &BTreeMap<String, Secret>, name: &str, version: &str) -> bool {
    [Compared::Every, Compared::LettersAndDigits]
        .into_iter()
        .any(|compared| repeats_as(compared, headers, name, version))
}

/// Which characters the echo check compares.
#[derive(Clone, Copy)]
enum Compared {
    Every,
    LettersAndDigits,
}

/// [`repeats_a_credential`], comparing the characters `compared` names.
fn repeats_as(compared: Compared, headers: &BTreeMap<String, Secret>, name: &str, version: &str) -> bool {
    let (name, version) = (comparable(name, compared), comparable(version, compared));
    let together = [name.as_slice(), version.as_slice()].concat();
    let other_way = [version.as_slice(), name.as_slice()].concat();
    let backwards: Vec<Vec<char>> = [&together, &other_way]
        .iter()
        .map(|text| text.iter().rev().copied().collect())
        .collect();
    let runs: HashSet<&[char]> = [&together, &other_way]
        .into_iter()
        .chain(&backwards)
        .flat_map(|text| text.windows(MIN_ECHOED_SECRET))
        .collect();
    if runs.is_empty() {
        return false;
    }
    headers.values().any(|value| {
        credentials(value.expose(), compared).iter().any(|credential| {
            credential
                .windows(MIN_ECHOED_SECRET)
                .any(|run| runs.contains(run))
        })
    })
}

/// The credentials a header value may carry, each [`comparable`] (and
/// wiped when dropped, as the secret is).
fn credentials(value: &str, compared: Compared) -> Vec<zeroize::Zeroizing<Vec<char>>> {
    use base64::Engine as _;
    let mut found = Vec::new();
    for part in value.split(|c: char| c.is_ascii_whitespace() || c == ',') {
        found.push(zeroize::Zeroizing::new(comparable(part, compared)));
        let Ok(decoded) = base64::engine::general_purpose::STANDARD.decode(part) else {
            continue;
        };
        let decoded = zeroize::Zeroizing::new(decoded);
        if let Ok(text) = std::str::from_utf8(&decoded) {
            found.push(zeroize::Zeroizing::new(comparable(text, compared)));
            found.extend(
                text.split(':')
                    .map(|piece| zeroize::Zeroizing::new(comparable(piece, compared))),
            );
        }
    }
    found
}

/// `text` as the echo check compares it: percent-decoded, fullwidth forms
/// read as ASCII, case-folded (upper then lower, so `ſ` meets `s`), and the
/// characters `compared` names, so case and encoding hide no run (nor
/// separators, counting letters and digits alone).
fn comparable(text: &str, compared: Compared) -> Vec<char> {
    percent_encoding::percent_decode_str(text)
        .decode_utf8_lossy()
        .chars()
        .map(|c| match c {
            '\u{FF01}'..='\u{FF5E}' => char::from_u32(u32::from(c) - 0xFEE0).unwrap_or(c),
            c => c,
        })
        .flat_map(char::to_uppercase)
        .flat_map(char::to_lowercase)
        .filter(|c| matches!(compared, Compared::Every) || c.is_alphanumeric())
        .collect()
}

/// One handshake's connection and what the server told it so far.
struct Session {
    dialed: Dialed,
    /// The record's headers, then the transport's own.
    headers: HeaderMap,
    sender: Option<SendRequest<Full<Bytes>>>,
    session_id: Option<HeaderValue>,
    /// Bytes of response bodies still to be read.
    left: usize,
    next_id: u64,
}

/// A response, its body unread.
struct Answer {
    status: StatusCode,
    headers: HeaderMap,
    body: Incoming,
}

/// A JSON-RPC message as read: its members left as text until needed.
#[derive(Deserialize)]
struct Message<'a> {
    #[serde(borrow)]
    jsonrpc: Option<&'a RawValue>,
    #[serde(borrow)]
    id: Option<&'a RawValue>,
    #[serde(borrow)]
    result: Option<&'a RawValue>,
    #[serde(borrow)]
    error: Option<&'a RawValue>,
}

/// What a handshake reads of `initialize`'s result.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Initialized {
    protocol_version: String,
    server_info: ServerInfo,
    #[serde(default)]
    capabilities: Capabilities,
}

#[derive(Deserialize)]
struct ServerInfo {
    name: String,
    version: String,
}

#[derive(Deserialize, Default)]
struct Capabilities {
    tools: Option<IgnoredAny>,
}

/// What a handshake reads of a `tools/list` page: its tools, pinned.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ToolsPage {
    tools: PageTools,
    next_cursor: Option<Box<RawValue>>,
}

/// A page's tools, each pinned as it is read ([`ToolPin::add`]) and its
/// text dropped, up to the first that cannot be: the rest are skipped
/// unread, so a page of a million tiny values holds none of them.
#[derive(Default)]
struct PageTools {
    pin: ToolPin,
    refused: Option<PinError>,
}

impl<'de> Deserialize<'de> for PageTools {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Read;
        impl<'de> serde::de::Visitor<'de> for Read {
            type Value = PageTools;
            fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                formatter.write_str("a list of tools")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<PageTools, A::Error> {
                let mut page = PageTools::default();
                while let Some(tool) = seq.next_element::<Box<RawValue>>()? {
                    if let Err(refused) = page.pin.add(tool.get()) {
                        page.refused = Some(refused);
                        while seq.next_element::<IgnoredAny>()?.is_some() {}
                        break;
                    }
                }
                Ok(page)
            }
        }
        deserializer.deserialize_seq(Read)
    }
}

impl Session {
    fn new(dialed: Dialed, record_headers: &BTreeMap<String, Secret>) -> Result<Self, Failure> {
        let mut headers = HeaderMap::new();
        for (name, value) in record_headers {
            // A name the header rules refuse now, stored before they did,
            // is the HTTP or MCP client's (Host, Mcp-Session-Id, and their
            // `_` spellings): never sent.
            if crate::rules::headers::is_forbidden_name(name) {
                continue;
            }
            // The record's headers met the header rules when written; one
            // that is no HTTP header now (a legacy item) fails the step.
            let name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| Failure::Protocol("a stored header is not an HTTP header"))?;
            let mut value = HeaderValue::from_str(value.expose())
                .map_err(|_| Failure::Protocol("a stored header is not an HTTP header"))?;
            value.set_sensitive(true);
            headers.append(name, value);
        }
        let url = dialed.url();
        let host = match url.port() {
            Some(port) => format!("{}:{port}", url.host_str().unwrap_or_default()),
            None => url.host_str().unwrap_or_default().to_string(),
        };
        let host = HeaderValue::from_str(&host).map_err(|_| Failure::AddressRefused)?;
        headers.insert(header::HOST, host);
        headers.insert(
            header::ACCEPT,
            HeaderValue::from_static("application/json, text/event-stream"),
        );
        headers.insert(header::USER_AGENT, HeaderValue::from_static(CLIENT_NAME));
        Ok(Self {
            dialed,
            headers,
            sender: None,
            session_id: None,
            left: MAX_RESPONSE_BYTES,
            next_id: 0,
        })
    }

    async fn run(&mut self) -> Result<Verified, Failure> {
        let (initialized, lists_tools) = self.initialize().await?;
        self.notify("notifications/initialized").await?;
        // A server that declares no tools capability has none to list.
        if !lists_tools {
            return Ok(initialized);
        }
        let mut pin = ToolPin::default();
        let mut cursor: Option<String> = None;
        for _ in 0..MAX_TOOL_PAGES {
            let params = match &cursor {
                Some(cursor) => json!({ "cursor": cursor }),
                None => json!({}),
            };
            let page: ToolsPage = self.call("tools/list", params).await?;
            let PageTools { pin: tools, refused } = page.tools;
            if tools.digests().keys().any(|name| !shown(name)) {
                return Err(Failure::Protocol("a tool's name is not text this service shows"));
            }
            refused
                .map_or(Ok(()), Err)
                .and_then(|()| pin.absorb(tools))
                .map_err(|error| {
                    Failure::Protocol(match error {
                        PinError::Canonical(JcsError::TooDeep | JcsError::TooManyMembers) => {
                            "a tool is larger than a pin reads"
                        }
                        PinError::Canonical(_) => "a tool is not an I-JSON object (RFC 8785)",
                        PinError::Unnamed => "a tool has no name",
                        PinError::Repeated => "tools/list names a tool twice",
                        PinError::TooMany => "more tools than a pin holds",
                    })
                })?;
            let next = match page.next_cursor {
                None => None,
                Some(raw) if raw.get() == "null" => None,
                Some(raw) => Some(
                    serde_json::from_str::<String>(raw.get())
                        .ok()
                        .filter(|next| cursor.as_ref() != Some(next))
                        .ok_or(Failure::Protocol("tools/list gave an unusable nextCursor"))?,
                ),
            };
            match next {
                None => return Ok(Verified { pin, ..initialized }),
                Some(next) => cursor = Some(next),
            }
        }
        Err(Failure::Protocol(
            "tools/list has more pages than a handshake follows",
        ))
    }

    /// `initialize`: what the server announced, and whether it lists tools.
    async fn initialize(&mut self) -> Result<(Verified, bool), Failure> {
        let params = json!({
            "protocolVersion": PROTOCOL_VERSIONS[0],
            "capabilities": {},
            "clientInfo": { "name": CLIENT_NAME, "version": env!("CARGO_PKG_VERSION") },
        });
        let (id, body) = self.request("initialize", params);
        let answer = self.post(body).await?;
        // The specification's test for the older transport: a 4xx to the
        // POST (other than a refusal of the headers), then a GET.
        let status = answer.status.as_u16();
        if answer.status.is_client_error() && !matches!(status, 401 | 403) {
            // Its body is not read: the probe goes on a connection of its own.
            drop(answer);
            if self.speaks_sse_transport().await {
                return Err(Failure::UnsupportedTransport);
            }
            return Err(Failure::HttpStatus(status));
        }
        let result: Initialized = self.result(answer, id).await?;
        let version = PROTOCOL_VERSIONS
            .into_iter()
            .find(|known| *known == result.protocol_version)
            .ok_or(Failure::Protocol(
                "the server chose a protocol version this client does not speak",
            ))?;
        let ServerInfo {
            name,
            version: server_version,
        } = result.server_info;
        if !shown(&name) || !shown(&server_version) {
            return Err(Failure::Protocol(
                "serverInfo's name or version is not text this service shows",
            ));
        }
        self.headers
            .insert(PROTOCOL_VERSION, HeaderValue::from_static(version));
        if let Some(id) = &self.session_id {
            self.headers.insert(SESSION_ID, id.clone());
        }
        let verified = Verified {
            protocol_version: version.to_string(),
            name,
            version: server_version,
            pin: ToolPin::default(),
        };
        Ok((verified, result.capabilities.tools.is_some()))
    }

    /// Whether the endpoint answers a GET with the older transport's event
    /// stream, whose first event names the endpoint to POST to.
    async fn speaks_sse_transport(&mut self) -> bool {
        let mut headers = self.headers.clone();
        headers.insert(header::ACCEPT, HeaderValue::from_static(EVENT_STREAM));
        let Ok(answer) = self.send(Method::GET, headers, Bytes::new()).await else {
            return false;
        };
        if !answer.status.is_success() || !is_type(&answer.headers, EVENT_STREAM) {
            return false;
        }
        let mut reader = sse::Reader::default();
        let mut body = answer.body;
        while let Some(Ok(chunk)) = next_chunk(&mut body, &mut self.left).await {
            if let Some(event) = reader.feed(&chunk).into_iter().next() {
                return event.name == "endpoint";
            }
        }
        false
    }

    /// A notification: accepted (202) with nothing to read.
    async fn notify(&mut self, method: &str) -> Result<(), Failure> {
        let body = json!({ "jsonrpc": "2.0", "method": method });
        let answer = self.post(body).await?;
        refused(answer.status)?;
        Ok(())
    }

    /// A request and its result, read as `T`.
    async fn call<T: for<'de> Deserialize<'de>>(
        &mut self,
        method: &str,
        params: serde_json::Value,
    ) -> Result<T, Failure> {
        let (id, body) = self.request(method, params);
        let answer = self.post(body).await?;
        self.result(answer, id).await
    }

    fn request(&mut self, method: &str, params: serde_json::Value) -> (u64, serde_json::Value) {
        self.next_id += 1;
        let id = self.next_id;
        (
            id,
            json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }),
        )
    }

    async fn post(&mut self, body: serde_json::Value) -> Result<Answer, Failure> {
        let mut headers = self.headers.clone();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        let answer = self
            .send(Method::POST, headers, Bytes::from(body.to_string()))
            .await?;
        if self.session_id.is_none() {
            self.session_id = answer
                .headers
                .get(SESSION_ID)
                .filter(|id| id.as_bytes().iter().all(|b| (0x21..=0x7e).contains(b)))
                .cloned();
        }
        Ok(answer)
    }

    /// The result answering request `id`, read as `T`, from a JSON body or
    /// from the event stream that carries it.
    async fn result<T: for<'de> Deserialize<'de>>(&mut self, answer: Answer, id: u64) -> Result<T, Failure> {
        refused(answer.status)?;
        let bytes = if is_type(&answer.headers, "application/json") {
            read_all(answer.body, &mut self.left).await?
        } else if is_type(&answer.headers, EVENT_STREAM) {
            self.streamed(answer.body, id).await?
        } else {
            return Err(Failure::NotMcp("the answer is neither JSON nor an event stream"));
        };
        let message: Message<'_> =
            serde_json::from_slice(&bytes).map_err(|_| Failure::NotMcp("the answer is not a JSON object"))?;
        if message.jsonrpc.map(RawValue::get) != Some("\"2.0\"") {
            return Err(Failure::NotMcp("the answer is not JSON-RPC 2.0"));
        }
        if !answers(&message, id) {
            return Err(Failure::Protocol("the answer is not to this request"));
        }
        if message.error.is_some() {
            return Err(Failure::Protocol("the server answered a JSON-RPC error"));
        }
        let result = message
            .result
            .ok_or(Failure::Protocol("the answer has no result"))?;
        serde_json::from_str(result.get())
            .map_err(|_| Failure::Protocol("the result is not the one this request asks for"))
    }

    /// The message answering `id` on an event stream, as its bytes; the
    /// server's own requests and notifications before it are passed over.
    /// A stream that ends first is resumed after its last event id, as the
    /// transport provides, at most [`MAX_RESUMES`] times.
    async fn streamed(&mut self, body: Incoming, id: u64) -> Result<Vec<u8>, Failure> {
        let mut reader = sse::Reader::default();
        let mut body = body;
        for resume in 0..=MAX_RESUMES {
            if resume > 0 {
                let Some(last) = reader.last_id().and_then(|last| HeaderValue::from_str(last).ok()) else {
                    break;
                };
                let wait = reader.retry_ms().map_or(Duration::ZERO, Duration::from_millis);
                tokio::time::sleep(wait.min(MAX_RETRY_WAIT)).await;
                let mut headers = self.headers.clone();
                headers.insert(header::ACCEPT, HeaderValue::from_static(EVENT_STREAM));
                headers.insert(LAST_EVENT_ID, last);
                if let Some(id) = &self.session_id {
                    headers.insert(SESSION_ID, id.clone());
                }
                let answer = self.send(Method::GET, headers, Bytes::new()).await?;
                refused(answer.status)?;
                if !is_type(&answer.headers, EVENT_STREAM) {
                    break;
                }
                body = answer.body;
            }
            while let Some(chunk) = next_chunk(&mut body, &mut self.left).await {
                for event in reader.feed(&chunk?) {
                    if event.name != "message" {
                        continue;
                    }
                    let message: Message<'_> = serde_json::from_str(&event.data)
                        .map_err(|_| Failure::NotMcp("an event is not a JSON object"))?;
                    if answers(&message, id) && (message.result.is_some() || message.error.is_some()) {
                        return Ok(event.data.into_bytes());
                    }
                }
            }
        }
        Err(Failure::Protocol("the event stream ended without an answer"))
    }

    /// Deletes the server's session (its answer does not matter: a server
    /// may refuse to let clients end sessions).
    async fn close(&mut self) -> Result<(), Failure> {
        let mut headers = self.headers.clone();
        if let Some(id) = &self.session_id {
            headers.insert(SESSION_ID, id.clone());
        }
        let answer = self.send(Method::DELETE, headers, Bytes::new()).await?;
        drop(answer);
        Ok(())
    }

    /// Sends one request on the open connection, or on a new one to the
    /// checked address when the server had closed it.
    async fn send(&mut self, method: Method, headers: HeaderMap, body: Bytes) -> Result<Answer, Failure> {
        let target = match self.dialed.url().query() {
            Some(query) => format!("{}?{query}", self.dialed.url().path()),
            None => self.dialed.url().path().to_string(),
        };
        let build = || {
            let mut request = Request::builder()
                .method(method.clone())
                .uri(target.as_str())
                .body(Full::new(body.clone()))
                .map_err(|_| Failure::Protocol("the request could not be built"))?;
            *request.headers_mut() = headers.clone();
            Ok::<_, Failure>(request)
        };
        let mut reused = self.sender.take();
        if let Some(sender) = &mut reused
            && sender.ready().await.is_err()
        {
            reused = None;
        }
        let (sender, response) = match reused {
            Some(mut sender) => match sender.try_send_request(build()?).await {
                Ok(response) => (sender, response),
                // The server closed the idle connection before it took the
                // request, or as it took it, before an answer's head (the
                // race of a keep-alive close, which a client cannot see
                // coming): once more, and only once, on a new connection to
                // the same checked address. Only a request after the first
                // on a connection can be reused, so never `initialize`;
                // the others (the notification, the lists, a resume, the
                // session's DELETE) change nothing when sent twice.
                Err(mut error) => match error.take_message() {
                    Some(request) => {
                        let mut sender = self.connect().await?;
                        let response = sender.send_request(request).await.map_err(failure)?;
                        (sender, response)
                    }
                    None if closed_under_it(error.error()) => {
                        let mut sender = self.connect().await?;
                        let response = sender.send_request(build()?).await.map_err(failure)?;
                        (sender, response)
                    }
                    None => return Err(failure(error.into_error())),
                },
            },
            None => {
                let mut sender = self.connect().await?;
                let response = sender.send_request(build()?).await.map_err(failure)?;
                (sender, response)
            }
        };
        self.sender = Some(sender);
        let (parts, body) = response.into_parts();
        if parts.status.is_redirection() {
            // Never followed: its target was not checked.
            return Err(Failure::HttpStatus(parts.status.as_u16()));
        }
        Ok(Answer {
            status: parts.status,
            headers: parts.headers,
            body,
        })
    }

    async fn connect(&self) -> Result<SendRequest<Full<Bytes>>, Failure> {
        let stream = self.dialed.connect().await?;
        let (sender, connection) = hyper::client::conn::http1::Builder::new()
            .max_buf_size(64 * 1024)
            .handshake(TokioIo::new(stream))
            .await
            .map_err(|_| Failure::Connect)?;
        // Ends when the sender is dropped or the server closes.
        tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(sender)
    }
}

/// Whether a kept-alive connection was closed under a request before its
/// answer: a clean close (plain HTTP), a TLS stream ended without its
/// `close_notify`, or a reset (a server closing with the request unread).
fn closed_under_it(error: &hyper::Error) -> bool {
    use std::io::ErrorKind;
    let mut source = std::error::Error::source(error);
    let io_closed = std::iter::from_fn(|| {
        let next = source?;
        source = next.source();
        Some(next)
    })
    .filter_map(|cause| cause.downcast_ref::<std::io::Error>())
    .any(|io| {
        matches!(
            io.kind(),
            ErrorKind::UnexpectedEof
                | ErrorKind::ConnectionReset
                | ErrorKind::BrokenPipe
                | ErrorKind::ConnectionAborted
        )
    });
    error.is_incomplete_message() || io_closed
}

/// The stage of an exchange that failed: an answer that is not HTTP (or
/// a head past the buffer) is no MCP server; anything else, the connection.
fn failure(error: hyper::Error) -> Failure {
    if error.is_parse() || error.is_parse_too_large() {
        Failure::NotMcp("the answer is not HTTP/1.1")
    } else {
        Failure::Connect
    }
}

/// Whether `message` names request `id` (a number, as this client sends).
fn answers(message: &Message<'_>, id: u64) -> bool {
    message
        .id
        .is_some_and(|raw| raw.get().parse::<u64>().ok() == Some(id))
}

/// Whether a step fails on `status`: 401 and 403 as unauthorized, any
/// other status but 2xx as itself.
fn refused(status: StatusCode) -> Result<(), Failure> {
    match status.as_u16() {
        200..=299 => Ok(()),
        code @ (401 | 403) => Err(Failure::Unauthorized(code)),
        code => Err(Failure::HttpStatus(code)),
    }
}

/// Whether `headers` name `essence` as the content type.
fn is_type(headers: &HeaderMap, essence: &str) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .is_some_and(|found| found.trim().eq_ignore_ascii_case(essence))
}

/// Whether server-chosen `text` is text this service would accept in its
/// own display fields.
fn shown(text: &str) -> bool {
    let mut errors = crate::error::FieldErrors::new();
    let value = serde_json::Value::String(text.to_string());
    Rule::Text { max: MAX_TEXT_CHARS }.check(
        "verification",
        &value,
        crate::rules::Policy::default(),
        &mut errors,
    );
    errors.is_empty()
}

/// The next data chunk of `body`, counted against `left`: an error once the
/// handshake's bodies pass [`MAX_RESPONSE_BYTES`].
async fn next_chunk(body: &mut Incoming, left: &mut usize) -> Option<Result<Bytes, Failure>> {
    loop {
        let frame = match body.frame().await? {
            Ok(frame) => frame,
            Err(_) => return Some(Err(Failure::Protocol("the response body broke off"))),
        };
        let Ok(data) = frame.into_data() else {
            continue;
        };
        let Some(rest) = left.checked_sub(data.len()) else {
            return Some(Err(Failure::Protocol(
                "the responses are larger than a handshake reads",
            )));
        };
        *left = rest;
        return Some(Ok(data));
    }
}

async fn read_all(mut body: Incoming, left: &mut usize) -> Result<Vec<u8>, Failure> {
    let mut bytes = Vec::new();
    while let Some(chunk) = next_chunk(&mut body, left).await {
        bytes.extend_from_slice(&chunk?);
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_announcement_holding_a_credential_is_refused_in_any_case_or_split() {
        use base64::Engine as _;
        let credential = "sk-live-4f9a2b7c1d";
        let basic = base64::engine::general_purpose::STANDARD.encode("agent:s3cr3t-pa55word");
        let headers = BTreeMap::from([
            (
                "Authorization".to_string(),
                Secret::from(format!("Bearer {credential}").as_str()),
            ),
            (
                "Proxy-Authorization".to_string(),
                Secret::from(format!("Basic {basic}").as_str()),
            ),
            ("X-Task".to_string(), Secret::from("tasks-token-99")),
            ("X-Short".to_string(), Secret::from("abc")),
            ("X-Path".to_string(), Secret::from("Bearer rs/every")),
        ]);
        let repeats = |name: &str, version: &str| repeats_a_credential(&headers, name, version);
        // The credential alone, upper-cased, or a run of 8 of it.
        assert!(repeats(credential, "1.0"));
        assert!(repeats("server", &credential.to_uppercase()));
        assert!(repeats("srv 4F9A2B7C", "1.0"));
        // Split across name and version, at most 7 in each, either way round.
        assert!(repeats("ve-4f9a", "2b7c1d"));
        assert!(repeats("2b7c1d", "ve-4f9a"));
        // Separators, reversal, fullwidth forms, percent-encoding, long s.
        assert!(repeats("4f9a-2b7c-1d", "1"));
        assert!(repeats("4f-9a-2b-7c", "1"));
        assert!(repeats(&credential.chars().rev().collect::<String>(), "1"));
        assert!(repeats(
            "\u{FF14}\u{FF46}\u{FF19}\u{FF41}\u{FF12}\u{FF42}\u{FF17}\u{FF43}",
            "1"
        ));
        assert!(repeats("%73%6B%2D%6C%69%76%65%34%66%39%61", "1"));
        assert!(repeats("ta\u{17F}kstoken", "1"));
        // Basic: the password it encodes, alone.
        assert!(repeats("s3cr3t-pa55word", "1"));
        assert!(repeats("server", "pa55word"));
        // The whole value, as before.
        assert!(repeats(&format!("Bearer {credential}"), "1"));
        // 8 characters as written, separators among them: 7 letters and digits.
        assert!(repeats("mcp-servers/everything", "1.0"));
        assert!(repeats("server", "tasks-to"));
        // 7 of it, the scheme, a short value, ordinary words: not found.
        assert!(!repeats("sk-live", "1.0.0"));
        assert!(!repeats("Bearer Basic server", "abc abc abc"));
        assert!(!repeats("everything-server", "2.0.0"));
    }

    #[test]
    fn ids_match_as_numbers_and_nothing_else() {
        let read = |text: &str| {
            serde_json::from_str::<Message<'_>>(text)
                .map(|m| answers(&m, 7))
                .ok()
        };
        assert_eq!(read(r#"{"jsonrpc":"2.0","id":7,"result":{}}"#), Some(true));
        assert_eq!(read(r#"{"jsonrpc":"2.0","id":"7","result":{}}"#), Some(false));
        assert_eq!(read(r#"{"jsonrpc":"2.0","id":8,"result":{}}"#), Some(false));
        assert_eq!(read(r#"{"jsonrpc":"2.0","result":{}}"#), Some(false));
        assert_eq!(read("[1]"), None);
    }

    #[test]
    fn a_tools_page_is_pinned_as_it_is_read_up_to_a_tool_that_cannot_be() {
        let page =
            r#"{"tools":[{"name":"a","inputSchema":{"type":"object"}}, {"name":"b"}],"nextCursor":"n"}"#;
        let page: ToolsPage = serde_json::from_str(page).unwrap_or_else(|e| panic!("{e}"));
        let names: Vec<&String> = page.tools.pin.digests().keys().collect();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(page.tools.refused, None);
        let many = format!(r#"{{"tools":[{{"name":"a"}},{}]}}"#, vec!["0"; 100_000].join(","));
        let page: ToolsPage = serde_json::from_str(&many).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(page.tools.pin.len(), 1);
        assert!(matches!(page.tools.refused, Some(PinError::Canonical(_))));
        let page = r#"{"tools":[{"name":"a"}],"nextCursor":"n"}"#;
        let page: ToolsPage = serde_json::from_str(page).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            page.next_cursor.map(|raw| raw.get().to_string()).as_deref(),
            Some("\"n\"")
        );
    }
}
