//! API Gateway HTTP API (payload format 2.0) events, in the shape
//! `sam local generate-event apigateway http-api-proxy` produces, read by
//! the functions' own Lambda entry ([`agent_server_shared::lambda`]).

use agent_server_shared::Request;
use base64::Engine;
use lambda_runtime::Context;
use serde_json::{Value, json};

use crate::Route;

/// Builds the event for `PUT` (or `method`) on `path?query`.
#[derive(Debug, Clone)]
pub struct Event {
    method: String,
    route_key: String,
    raw_path: String,
    raw_query: String,
    id: Option<String>,
    headers: Vec<(String, String)>,
    body: Option<String>,
    base64: bool,
    authorizer: Option<Value>,
}

/// The IAM caller every event carries unless told otherwise: IAM callers
/// may change every project (IAM policies decide per route).
pub const IAM_USER_ARN: &str = "arn:aws:iam::123456789012:user/tester";

impl Event {
    /// `PUT` on `route` for `id`, with `project_id` in the query if given.
    pub fn put(route: Route, id: &str, project_id: Option<&str>) -> Self {
        let raw_query = project_id.map(|p| format!("project_id={p}")).unwrap_or_default();
        Self {
            method: "PUT".into(),
            route_key: format!("PUT /api/agent-server/{}/{{id}}", route.collection()),
            raw_path: format!("/api/agent-server/{}/{id}", route.collection()),
            raw_query,
            id: Some(id.to_string()),
            headers: vec![("content-type".into(), "application/json".into())],
            body: None,
            base64: false,
            authorizer: Some(json!({
                "iam": {
                    "accessKey": "AKIAEXAMPLE",
                    "accountId": "123456789012",
                    "callerId": "AIDAEXAMPLE",
                    "principalOrgId": null,
                    "userArn": IAM_USER_ARN,
                    "userId": "AIDAEXAMPLE"
                }
            })),
        }
    }

    /// `PATCH` on `route` for `id` with a JSON Merge Patch body type, with
    /// `project_id` in the query if given.
    pub fn patch(route: Route, id: &str, project_id: Option<&str>) -> Self {
        let mut event = Self::put(route, id, project_id);
        event.method = "PATCH".into();
        event.route_key = format!("PATCH /api/agent-server/{}/{{id}}", route.collection());
        event.header("content-type", "application/merge-patch+json")
    }

    /// A JWT authorizer's context with these claims (strings, as API
    /// Gateway passes them) instead of the IAM caller.
    pub fn jwt(mut self, claims: &[(&str, &str)]) -> Self {
        let claims: serde_json::Map<String, Value> = claims
            .iter()
            .map(|(name, value)| (name.to_string(), Value::String(value.to_string())))
            .collect();
        self.authorizer = Some(json!({ "jwt": { "claims": claims, "scopes": null } }));
        self
    }

    /// An IAM authorizer's context naming the caller by `arn`.
    pub fn iam_arn(mut self, arn: &str) -> Self {
        if let Some(iam) = self.authorizer.as_mut().and_then(|a| a.get_mut("iam")) {
            iam["userArn"] = Value::String(arn.to_string());
        }
        self
    }

    /// No authorizer context at all, as in a direct invoke.
    pub fn without_authorizer(mut self) -> Self {
        self.authorizer = None;
        self
    }

    /// Replaces the raw query string.
    pub fn query(mut self, raw_query: &str) -> Self {
        raw_query.clone_into(&mut self.raw_query);
        self
    }

    /// Sets a header (replacing one of the same name); an empty value removes it.
    pub fn header(mut self, name: &str, value: &str) -> Self {
        let name = name.to_ascii_lowercase();
        self.headers.retain(|(existing, _)| *existing != name);
        if !value.is_empty() {
            self.headers.push((name, value.to_string()));
        }
        self
    }

    /// Sets a text body.
    pub fn body(mut self, body: impl Into<String>) -> Self {
        self.body = Some(body.into());
        self
    }

    /// Sets a JSON body.
    pub fn json(self, body: &Value) -> Self {
        self.body(body.to_string())
    }

    /// Sets a binary body, base64-encoded as API Gateway sends one.
    pub fn binary(mut self, bytes: &[u8]) -> Self {
        self.body = Some(base64::engine::general_purpose::STANDARD.encode(bytes));
        self.base64 = true;
        self
    }

    /// The event as JSON.
    pub fn to_json(&self) -> Value {
        let headers: serde_json::Map<String, Value> = self
            .headers
            .iter()
            .map(|(name, value)| (name.clone(), Value::String(value.clone())))
            .collect();
        let mut query = serde_json::Map::new();
        for (name, value) in url::form_urlencoded::parse(self.raw_query.as_bytes()) {
            // API Gateway joins repeated names with commas here; the
            // functions read rawQueryString instead.
            let joined = match query.get(name.as_ref()).and_then(Value::as_str) {
                Some(previous) => format!("{previous},{value}"),
                None => value.into_owned(),
            };
            query.insert(name.into_owned(), Value::String(joined));
        }
        let mut event = json!({
            "version": "2.0",
            "routeKey": self.route_key,
            "rawPath": self.raw_path,
            "rawQueryString": self.raw_query,
            "headers": headers,
            "requestContext": {
                "accountId": "123456789012",
                "apiId": "api-id",
                "domainName": "id.execute-api.us-east-1.amazonaws.com",
                "domainPrefix": "id",
                "http": {
                    "method": self.method,
                    "path": self.raw_path,
                    "protocol": "HTTP/1.1",
                    "sourceIp": "192.0.2.1",
                    "userAgent": "agent"
                },
                "requestId": "id",
                "routeKey": self.route_key,
                "stage": "$default",
                "time": "21/Nov/2026:14:55:00 +0000",
                "timeEpoch": 1795359300000u64
            },
            "isBase64Encoded": self.base64
        });
        if !query.is_empty() {
            event["queryStringParameters"] = Value::Object(query);
        }
        if let Some(id) = &self.id {
            event["pathParameters"] = json!({ "id": id });
        }
        if let Some(body) = &self.body {
            event["body"] = Value::String(body.clone());
        }
        if let Some(authorizer) = &self.authorizer {
            event["requestContext"]["authorizer"] = authorizer.clone();
        }
        event
    }

    /// The request the functions' Lambda entry makes of the event.
    ///
    /// # Panics
    /// If the entry refuses the event.
    pub fn request(&self) -> Request {
        self.request_in(Context::default())
    }

    /// [`Event::request`], in an invocation with this `context` (its
    /// request id, its deadline).
    ///
    /// # Panics
    /// If the entry refuses the event.
    pub fn request_in(&self, context: Context) -> Request {
        match Request::from_event(self.to_json(), context) {
            Ok(request) => request,
            Err(error) => panic!("the Lambda entry refuses the event: {error}"),
        }
    }
}
