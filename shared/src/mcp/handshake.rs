//! The client side of MCP's Streamable HTTP transport, as far as a
//! handshake goes: HTTP/1.1 POSTs of JSON-RPC messages to the endpoint,
//! answered as JSON or as an event stream, `Mcp-Session-Id` and
//! `MCP-Protocol-Version` carried after `initialize`, the session deleted
//! at the end. Every body read counts against one cap.

use std::collections::BTreeMap;
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::client::conn::http1::SendRequest;
use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};
use hyper::{Method, Request, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use url::Url;

use super::dial::{Dialed, Policy, Resolve, dial};
use super::sse;
use super::{Failure, MAX_RESPONSE_BYTES, MAX_TOOL_PAGES, Verified};
use crate::rules::{MAX_TEXT_CHARS, Rule};
use crate::secret::Secret;

/// How this service names itself in `initialize`.
pub const CLIENT_NAME: &str = "agent-server";
/// The protocol versions a handshake accepts, the newest first (it asks
/// for that one). Streamable HTTP began with 2025-03-26.
pub const PROTOCOL_VERSIONS: [&str; 3] = ["2025-11-25", "2025-06-18", "2025-03-26"];

const SESSION_ID: HeaderName = HeaderName::from_static("mcp-session-id");
const PROTOCOL_VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");
const EVENT_STREAM: &str = "text/event-stream";

/// Runs the handshake with the server at `endpoint`, sending `headers`
/// with every request, within `budget`: what the server announced, or the
/// stage that failed. The session the server opened is deleted, success or
/// not, while the budget lasts.
pub async fn handshake(
    endpoint: &Url,
    headers: &BTreeMap<String, Secret>,
    policy: &Policy,
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
        let _ = tokio::time::timeout_at(deadline, session.close()).await;
    }
    outcome
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

/// A response, its body read as far as the handshake needs.
struct Answer {
    status: StatusCode,
    headers: HeaderMap,
    body: Incoming,
}

impl Session {
    fn new(dialed: Dialed, record_headers: &BTreeMap<String, Secret>) -> Result<Self, Failure> {
        let mut headers = HeaderMap::new();
        for (name, value) in record_headers {
            // The record's headers met the header rules when written; one
            // that is no HTTP header now (a legacy item) fails the step.
            let name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| Failure::Protocol("a stored header is not an HTTP header"))?;
            let mut value = HeaderValue::from_str(value.expose())
                .map_err(|_| Failure::Protocol("a stored header is not an HTTP header"))?;
            value.set_sensitive(true);
            headers.append(name, value);
        }
        // The transport's own headers are the client's to send.
        headers.remove(SESSION_ID);
        headers.remove(PROTOCOL_VERSION);
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
        let initialized = self.initialize().await?;
        self.notify("notifications/initialized").await?;
        let mut tools = 0u64;
        let mut cursor: Option<String> = None;
        for _ in 0..MAX_TOOL_PAGES {
            let params = match &cursor {
                Some(cursor) => json!({ "cursor": cursor }),
                None => json!({}),
            };
            let result = self.call("tools/list", params).await?;
            let listed = result
                .get("tools")
                .and_then(Value::as_array)
                .ok_or(Failure::Protocol("tools/list answered no tools array"))?;
            tools += listed.len() as u64;
            match result.get("nextCursor") {
                None | Some(Value::Null) => {
                    return Ok(Verified { tools, ..initialized });
                }
                Some(Value::String(next)) if cursor.as_ref() != Some(next) => cursor = Some(next.clone()),
                Some(_) => return Err(Failure::Protocol("tools/list gave an unusable nextCursor")),
            }
        }
        Err(Failure::Protocol(
            "tools/list has more pages than a handshake follows",
        ))
    }

    async fn initialize(&mut self) -> Result<Verified, Failure> {
        let params = json!({
            "protocolVersion": PROTOCOL_VERSIONS[0],
            "capabilities": {},
            "clientInfo": { "name": CLIENT_NAME, "version": env!("CARGO_PKG_VERSION") },
        });
        let (id, body) = self.request("initialize", params);
        let answer = self.post(body).await?;
        if matches!(
            answer.status,
            StatusCode::NOT_FOUND | StatusCode::METHOD_NOT_ALLOWED
        ) {
            let status = answer.status.as_u16();
            // Its body is not read: the probe goes on a connection of its own.
            drop(answer);
            if self.speaks_sse_transport().await {
                return Err(Failure::UnsupportedTransport);
            }
            return Err(Failure::HttpStatus(status));
        }
        let result = self.result(answer, id).await?;
        let version = result
            .get("protocolVersion")
            .and_then(Value::as_str)
            .ok_or(Failure::Protocol("initialize answered no protocolVersion"))?;
        let version = PROTOCOL_VERSIONS
            .into_iter()
            .find(|known| *known == version)
            .ok_or(Failure::Protocol(
                "the server chose a protocol version this client does not speak",
            ))?;
        let info = result
            .get("serverInfo")
            .ok_or(Failure::Protocol("initialize answered no serverInfo"))?;
        let text = |name| {
            info.get(name)
                .filter(|value| shown(value))
                .and_then(Value::as_str)
                .map(str::to_string)
                .ok_or(Failure::Protocol(
                    "serverInfo's name or version is not text this service shows",
                ))
        };
        let (name, server_version) = (text("name")?, text("version")?);
        self.headers
            .insert(PROTOCOL_VERSION, HeaderValue::from_static(version));
        if let Some(id) = &self.session_id {
            self.headers.insert(SESSION_ID, id.clone());
        }
        Ok(Verified {
            protocol_version: version.to_string(),
            name,
            version: server_version,
            tools: 0,
        })
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

    /// A request and its result.
    async fn call(&mut self, method: &str, params: Value) -> Result<Value, Failure> {
        let (id, body) = self.request(method, params);
        let answer = self.post(body).await?;
        self.result(answer, id).await
    }

    fn request(&mut self, method: &str, params: Value) -> (u64, Value) {
        self.next_id += 1;
        let id = self.next_id;
        (
            id,
            json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }),
        )
    }

    async fn post(&mut self, body: Value) -> Result<Answer, Failure> {
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

    /// The JSON-RPC result answering request `id`, from a JSON body or
    /// from the event stream that carries it.
    async fn result(&mut self, answer: Answer, id: u64) -> Result<Value, Failure> {
        refused(answer.status)?;
        let message = if is_type(&answer.headers, "application/json") {
            let bytes = read_all(answer.body, &mut self.left).await?;
            serde_json::from_slice(&bytes).map_err(|_| Failure::NotMcp("the body is not JSON"))?
        } else if is_type(&answer.headers, EVENT_STREAM) {
            self.streamed(answer.body, id).await?
        } else {
            return Err(Failure::NotMcp("the answer is neither JSON nor an event stream"));
        };
        if message.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
            return Err(Failure::NotMcp("the answer is not JSON-RPC 2.0"));
        }
        if message.get("id").and_then(Value::as_u64) != Some(id) {
            return Err(Failure::Protocol("the answer is not to this request"));
        }
        if message.get("error").is_some() {
            return Err(Failure::Protocol("the server answered a JSON-RPC error"));
        }
        message
            .get("result")
            .filter(|result| result.is_object())
            .cloned()
            .ok_or(Failure::Protocol("the answer has no result object"))
    }

    /// The message answering `id` on an event stream; the server's own
    /// requests and notifications before it are passed over.
    async fn streamed(&mut self, mut body: Incoming, id: u64) -> Result<Value, Failure> {
        let mut reader = sse::Reader::default();
        while let Some(chunk) = next_chunk(&mut body, &mut self.left).await {
            for event in reader.feed(&chunk?) {
                // A priming event (an id to resume from) carries no data.
                if event.name != "message" || event.data.trim().is_empty() {
                    continue;
                }
                let message: Value =
                    serde_json::from_str(&event.data).map_err(|_| Failure::NotMcp("an event is not JSON"))?;
                let answers = message.get("id").and_then(Value::as_u64) == Some(id)
                    && (message.get("result").is_some() || message.get("error").is_some());
                if answers {
                    return Ok(message);
                }
            }
        }
        Err(Failure::Protocol("the event stream ended without an answer"))
    }

    /// Deletes the server's session (its answer does not matter: a server
    /// may refuse to let clients end sessions).
    async fn close(&mut self) -> Result<(), Failure> {
        let headers = self.headers.clone();
        let answer = self.send(Method::DELETE, headers, Bytes::new()).await?;
        drop(answer);
        Ok(())
    }

    /// Sends one request on the open connection, or on a new one to the
    /// checked address when the server closed it.
    async fn send(&mut self, method: Method, headers: HeaderMap, body: Bytes) -> Result<Answer, Failure> {
        let target = match self.dialed.url().query() {
            Some(query) => format!("{}?{query}", self.dialed.url().path()),
            None => self.dialed.url().path().to_string(),
        };
        let mut request = Request::builder()
            .method(method)
            .uri(target)
            .body(Full::new(body))
            .map_err(|_| Failure::Protocol("the request could not be built"))?;
        *request.headers_mut() = headers;
        let mut reused = self.sender.take();
        if let Some(sender) = &mut reused
            && sender.ready().await.is_err()
        {
            reused = None;
        }
        let (sender, response) = match reused {
            Some(mut sender) => {
                let retry = request.clone();
                match sender.send_request(request).await {
                    Ok(response) => (sender, response),
                    // The server closed the idle connection as it was used:
                    // once more, on a new one.
                    Err(_) => {
                        let mut sender = self.connect().await?;
                        let response = sender.send_request(retry).await;
                        (sender, response.map_err(|_| Failure::Connect)?)
                    }
                }
            }
            None => {
                let mut sender = self.connect().await?;
                let response = sender.send_request(request).await;
                (sender, response.map_err(|_| Failure::Connect)?)
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

/// Whether a server-chosen `value` is text this service would accept in
/// its own display fields.
fn shown(value: &Value) -> bool {
    let mut errors = crate::error::FieldErrors::new();
    Rule::Text { max: MAX_TEXT_CHARS }.check(
        "verification",
        value,
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
