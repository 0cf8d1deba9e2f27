//! A request as API Gateway's HTTP API (payload format 2.0) hands it to a
//! function, read where the handlers need it and nowhere else.
//!
//! The event is `aws_lambda_events`' [`ApiGatewayV2httpRequest`], kept as
//! it came: the method from `requestContext.http`, the `{id}` from
//! `pathParameters`, `project_id` from `rawQueryString` (so a repeated one
//! is visible), the headers, the body and the authorizer's context. No
//! HTTP request or URI is built from it: the handlers never read a scheme,
//! a host or a path, and API Gateway has routed on them already, so an odd
//! `Host`, `X-Forwarded-Proto` or stage changes nothing.
//!
//! An event that does not read as a payload 2.0 event, or whose body is
//! flagged base64 and is not, is the caller's error: 400
//! `invalid_request`, in the envelope like every other answer.

use aws_lambda_events::apigw::{ApiGatewayRequestAuthorizer, ApiGatewayV2httpRequest};
use aws_lambda_events::http::{HeaderMap, Method};
use base64::Engine as _;
use lambda_runtime::Context;
use serde_json::Value;

use crate::error::ApiError;

/// One request: the event as API Gateway sent it, its body decoded, and
/// the invocation's context (request id, deadline).
pub struct Request {
    event: ApiGatewayV2httpRequest,
    body: Vec<u8>,
    context: Context,
}

impl Request {
    /// Reads an invocation's `event`. Refused (400 `invalid_request`) when
    /// it is not an HTTP API payload 2.0 event (a method no request line
    /// has, headers of the wrong shape, not an object) or its body is
    /// flagged base64 and is not standard base64.
    pub fn from_event(event: Value, context: Context) -> Result<Self, ApiError> {
        let mut event: ApiGatewayV2httpRequest =
            serde_json::from_value(event).map_err(|_| ApiError::BadRequest)?;
        let body = match event.body.take() {
            None => Vec::new(),
            Some(body) if event.is_base64_encoded => base64::engine::general_purpose::STANDARD
                .decode(body)
                .map_err(|_| ApiError::BadRequest)?,
            Some(body) => body.into_bytes(),
        };
        Ok(Self { event, body, context })
    }

    /// The request's method (`requestContext.http.method`).
    pub fn method(&self) -> &Method {
        &self.event.request_context.http.method
    }

    /// The request's headers. API Gateway joins a header sent on several
    /// lines into one, comma-separated, as RFC 9110 5.3 allows.
    pub fn headers(&self) -> &HeaderMap {
        &self.event.headers
    }

    /// The body's bytes, base64-decoded when the event says it is encoded.
    pub fn body(&self) -> &[u8] {
        &self.body
    }

    /// A path parameter (`{id}`), as API Gateway decoded it.
    pub fn path_parameter(&self, name: &str) -> Option<&str> {
        self.event.path_parameters.get(name).map(String::as_str)
    }

    /// Every value of the query parameter `name`, in order, decoded as
    /// WHATWG's `application/x-www-form-urlencoded` parser does (`+` is a
    /// space, a `%` that starts no escape stays). Read from
    /// `rawQueryString`, because `queryStringParameters` joins a repeated
    /// name's values with commas, which a value may hold too; an event
    /// without `rawQueryString` (a hand-written one) falls back to it.
    pub fn query_values(&self, name: &str) -> Vec<String> {
        match &self.event.raw_query_string {
            Some(query) => url::form_urlencoded::parse(query.as_bytes())
                .filter(|(key, _)| key == name)
                .map(|(_, value)| value.into_owned())
                .collect(),
            None => self
                .event
                .query_string_parameters
                .all(name)
                .unwrap_or_default()
                .into_iter()
                .map(str::to_owned)
                .collect(),
        }
    }

    /// The identity API Gateway verified (JWT claims or the IAM caller),
    /// if the route has an authorizer.
    pub fn authorizer(&self) -> Option<&ApiGatewayRequestAuthorizer> {
        self.event.request_context.authorizer.as_ref()
    }

    /// The invocation's context: its request id and deadline.
    pub fn context(&self) -> &Context {
        &self.context
    }
}

/// Names only: headers may carry credentials and the body secrets
/// (`api_key`, header values), which no `{:?}` may show.
impl std::fmt::Debug for Request {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Request")
            .field("method", self.method())
            .field("route_key", &self.event.route_key)
            .field("headers", &self.headers().keys().collect::<Vec<_>>())
            .field("body_bytes", &self.body.len())
            .field("request_id", &self.context.request_id)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn event(raw_query: Option<&str>) -> Value {
        let mut event = json!({
            "version": "2.0",
            "routeKey": "PUT /api/agent-server/models/{id}",
            "rawPath": "/api/agent-server/models/x",
            "headers": {"content-type": "application/json", "authorization": "Bearer secret-token"},
            "queryStringParameters": {"project_id": "a,b"},
            "requestContext": {
                "http": {"method": "PATCH", "path": "/api/agent-server/models/x", "protocol": "HTTP/1.1", "sourceIp": "192.0.2.1", "userAgent": "t"},
                "stage": "$default",
                "requestId": "r",
            },
            "pathParameters": {"id": "x"},
            "isBase64Encoded": false,
            "body": "{\"api_key\":\"sk-sentinel\"}",
        });
        if let Some(raw_query) = raw_query {
            event["rawQueryString"] = json!(raw_query);
        }
        event
    }

    fn read(event: Value) -> Result<Request, ApiError> {
        Request::from_event(event, Context::default())
    }

    #[test]
    fn the_event_is_read_as_sent() {
        let request = read(event(Some(""))).unwrap();
        assert_eq!(request.method(), Method::PATCH);
        assert_eq!(request.path_parameter("id"), Some("x"));
        assert_eq!(request.path_parameter("other"), None);
        assert_eq!(request.body(), b"{\"api_key\":\"sk-sentinel\"}");
        assert_eq!(request.headers()["content-type"], "application/json");
        assert!(request.authorizer().is_none());
        assert_eq!(request.query_values("project_id"), Vec::<String>::new());
    }

    #[test]
    fn every_query_character_is_read_verbatim() {
        for code in (0u32..0x300).chain([0xFFFD, 0x1F600]) {
            let Some(c) = char::from_u32(code) else { continue };
            if matches!(c, '&' | '=' | '+' | '%') {
                continue;
            }
            let request = read(event(Some(&format!("project_id=a{c}b&{c}=%zz%2{c}")))).unwrap();
            assert_eq!(
                request.query_values("project_id"),
                [format!("a{c}b")],
                "{code:#x}"
            );
        }
    }

    #[test]
    fn query_values_are_form_decoded_and_repeats_kept() {
        let request = read(event(Some("project_id=a%20b+c&x=1&project_id=%zz&project_id="))).unwrap();
        assert_eq!(request.query_values("project_id"), ["a b c", "%zz", ""]);
        // Without rawQueryString, API Gateway's own map, split on commas.
        let request = read(event(None)).unwrap();
        assert_eq!(request.query_values("project_id"), ["a", "b"]);
    }

    #[test]
    fn bodies_flagged_base64_must_be_base64() {
        let mut bad = event(Some(""));
        bad["isBase64Encoded"] = json!(true);
        bad["body"] = json!("not base64!");
        assert_eq!(read(bad).unwrap_err().code(), "invalid_request");
        let mut good = event(Some(""));
        good["isBase64Encoded"] = json!(true);
        good["body"] = json!("e30=");
        assert_eq!(read(good).unwrap().body(), b"{}");
        let mut empty = event(Some(""));
        empty.as_object_mut().map(|event| event.remove("body"));
        assert_eq!(read(empty).unwrap().body(), b"");
    }

    #[test]
    fn an_event_that_is_not_an_http_event_is_refused() {
        let mut bad_method = event(Some(""));
        bad_method["requestContext"]["http"]["method"] = json!("PU T");
        let mut bad_headers = event(Some(""));
        bad_headers["headers"] = json!(["host"]);
        for value in [
            json!(null),
            json!("PUT"),
            json!([1]),
            json!({"rawPath": 7}),
            bad_method,
            bad_headers,
        ] {
            assert_eq!(
                read(value.clone()).unwrap_err().code(),
                "invalid_request",
                "{value}"
            );
        }
    }

    #[test]
    fn debug_shows_no_header_value_or_body() {
        let shown = format!("{:?}", read(event(Some("project_id=p"))).unwrap());
        assert!(shown.contains("authorization"), "{shown}");
        for secret in ["secret-token", "sk-sentinel"] {
            assert!(!shown.contains(secret), "{shown}");
        }
    }
}
