//! The API Gateway HTTP API (payload format 2.0) event of a request, and
//! the HTTP response made of a function's answer: the two halves of what
//! API Gateway does around a Lambda function, so the local API hands the
//! functions exactly what they get on AWS, in process or under the Runtime
//! Interface Emulator.

use agent_server_shared::Response;
use aws_lambda_events::apigw::{ApiGatewayRequestAuthorizer, ApiGatewayV2httpResponse};
use aws_lambda_events::encodings::Body;
use aws_lambda_events::http::uri::Authority;
use aws_lambda_events::http::{HeaderValue, StatusCode, header};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use chrono::{DateTime, Utc};
use serde_json::{Map, Value, json};

use crate::HttpRequest;

/// The stage the local API serves: the HTTP API's default stage, which
/// API Gateway does not put in the path.
pub const STAGE: &str = "$default";

/// What API Gateway knows of a request besides its bytes.
#[derive(Debug, Clone, Copy)]
pub struct Gateway<'a> {
    /// The matched route, `PUT /api/agent-server/models/{id}`.
    pub route_key: &'a str,
    /// The `{id}` path parameter, decoded.
    pub id: &'a str,
    /// The authorizer's context: JWT claims, or IAM.
    pub authorizer: &'a ApiGatewayRequestAuthorizer,
    /// API Gateway's request id, also the function's.
    pub request_id: &'a str,
    /// When the request arrived.
    pub time: DateTime<Utc>,
}

/// The payload 2.0 event API Gateway would send for `request`: header
/// lines of one name joined by commas and names in lowercase, cookies
/// moved to `cookies`, the raw path and query kept, the query's values
/// decoded (a repeated name's values joined by commas), and a body that is
/// not UTF-8 text sent as base64.
pub fn of_request(request: &HttpRequest, gateway: Gateway<'_>) -> Value {
    let uri = request.uri();
    let mut headers = Map::new();
    let mut cookies = Vec::new();
    for name in request.headers().keys() {
        let values = request.headers().get_all(name).iter();
        let values: Vec<String> = values
            .map(|value| String::from_utf8_lossy(value.as_bytes()).into_owned())
            .collect();
        if name == header::COOKIE {
            let pairs = values.iter().flat_map(|v| v.split(';')).map(str::trim);
            cookies.extend(pairs.filter(|c| !c.is_empty()).map(str::to_owned));
            continue;
        }
        headers.insert(name.as_str().to_owned(), Value::String(values.join(",")));
    }
    let header = |name: header::HeaderName| request.headers().get(name).and_then(|v| v.to_str().ok());
    // API Gateway's domain name has no port.
    let host = header(header::HOST).unwrap_or("localhost");
    let domain = host
        .parse::<Authority>()
        .map_or_else(|_| host.to_owned(), |authority| authority.host().to_owned());
    let mut event = json!({
        "version": "2.0",
        "routeKey": gateway.route_key,
        "rawPath": uri.path(),
        "rawQueryString": uri.query().unwrap_or_default(),
        "headers": headers,
        "pathParameters": {"id": gateway.id},
        "requestContext": {
            "accountId": "000000000000",
            "apiId": "local",
            "authorizer": gateway.authorizer,
            "domainName": domain,
            "domainPrefix": domain.split('.').next().unwrap_or_default(),
            "http": {
                "method": request.method().as_str(),
                "path": uri.path(),
                "protocol": "HTTP/1.1",
                "sourceIp": "127.0.0.1",
                "userAgent": header(header::USER_AGENT).unwrap_or_default(),
            },
            "requestId": gateway.request_id,
            "routeKey": gateway.route_key,
            "stage": STAGE,
            "time": gateway.time.format("%d/%b/%Y:%H:%M:%S %z").to_string(),
            "timeEpoch": gateway.time.timestamp_millis(),
        },
        "isBase64Encoded": false,
    });
    if !cookies.is_empty() {
        event["cookies"] = json!(cookies);
    }
    if let Some(query) = uri.query().filter(|q| !q.is_empty()) {
        let mut parameters: Map<String, Value> = Map::new();
        for (name, value) in url::form_urlencoded::parse(query.as_bytes()) {
            match parameters.get_mut(name.as_ref()) {
                Some(Value::String(joined)) => {
                    joined.push(',');
                    joined.push_str(&value);
                }
                _ => {
                    parameters.insert(name.into_owned(), Value::String(value.into_owned()));
                }
            }
        }
        event["queryStringParameters"] = Value::Object(parameters);
    }
    let body = request.body().as_ref();
    if !body.is_empty() {
        match std::str::from_utf8(body) {
            Ok(text) => event["body"] = json!(text),
            Err(_) => {
                event["body"] = json!(BASE64.encode(body));
                event["isBase64Encoded"] = json!(true);
            }
        }
    }
    event
}

/// The HTTP response API Gateway makes of a function's payload 2.0 answer.
pub fn into_response(answer: ApiGatewayV2httpResponse) -> Response {
    let body = match answer.body {
        None => Body::Empty,
        Some(body) if answer.is_base64_encoded => match BASE64.decode(body.as_ref()) {
            Ok(bytes) => Body::Binary(bytes),
            Err(_) => return failure(StatusCode::BAD_GATEWAY),
        },
        Some(body) => Body::Binary(body.as_ref().to_vec()),
    };
    let Ok(status) = u16::try_from(answer.status_code).map(StatusCode::from_u16) else {
        return failure(StatusCode::BAD_GATEWAY);
    };
    let Ok(status) = status else {
        return failure(StatusCode::BAD_GATEWAY);
    };
    let mut response = Response::new(body);
    *response.status_mut() = status;
    // Payload 2.0 has no multi-value headers: API Gateway reads `headers`.
    for (name, value) in &answer.headers {
        response.headers_mut().append(name, value.clone());
    }
    for cookie in answer.cookies {
        if let Ok(value) = HeaderValue::try_from(cookie) {
            response.headers_mut().append(header::SET_COOKIE, value);
        }
    }
    response
}

/// API Gateway's own answer when the function itself failed: `{"message":
/// "Internal Server Error"}` (500), or a bad answer (502), or no answer
/// in time (503), not in the envelope, as on AWS.
pub fn failure(status: StatusCode) -> Response {
    let message = match status {
        StatusCode::SERVICE_UNAVAILABLE => "Service Unavailable",
        StatusCode::BAD_GATEWAY => "Bad Gateway",
        _ => "Internal Server Error",
    };
    let mut response = Response::new(Body::Text(json!({ "message": message }).to_string()));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_lambda_events::apigw::ApiGatewayRequestAuthorizerJwtDescription;
    use aws_lambda_events::http::Request;

    fn event(request: Request<Body>) -> Value {
        let mut jwt = ApiGatewayRequestAuthorizerJwtDescription::default();
        jwt.claims.insert("sub".into(), "someone".into());
        let mut authorizer = ApiGatewayRequestAuthorizer::default();
        authorizer.jwt = Some(jwt);
        let gateway = Gateway {
            route_key: "PUT /api/agent-server/models/{id}",
            id: "abc",
            authorizer: &authorizer,
            request_id: "req-1",
            time: DateTime::from_timestamp(1_795_359_300, 0).unwrap_or_default(),
        };
        of_request(&request, gateway)
    }

    fn request(query: &str, body: Body) -> Request<Body> {
        Request::builder()
            .method("PUT")
            .uri(format!("/api/agent-server/models/abc{query}"))
            .header("Host", "localhost:3000")
            .header("If-Match", "\"1\"")
            .header("if-match", "\"2\"")
            .header("Cookie", "a=1; b=2;")
            .body(body)
            .unwrap_or_default()
    }

    #[test]
    fn the_event_is_api_gateway_s() {
        let event = event(request(
            "?project_id=a&project_id=b%20c&x=",
            Body::Text("{}".into()),
        ));
        assert_eq!(event["version"], "2.0");
        assert_eq!(event["rawPath"], "/api/agent-server/models/abc");
        assert_eq!(event["rawQueryString"], "project_id=a&project_id=b%20c&x=");
        assert_eq!(
            event["queryStringParameters"],
            json!({"project_id": "a,b c", "x": ""})
        );
        assert_eq!(event["pathParameters"], json!({"id": "abc"}));
        assert_eq!(event["headers"]["if-match"], "\"1\",\"2\"");
        assert_eq!(event["headers"]["host"], "localhost:3000");
        assert_eq!(event["requestContext"]["domainName"], "localhost");
        assert!(event["headers"].get("cookie").is_none());
        assert_eq!(event["cookies"], json!(["a=1", "b=2"]));
        assert_eq!(
            event["requestContext"]["authorizer"]["jwt"]["claims"]["sub"],
            "someone"
        );
        assert_eq!(event["requestContext"]["http"]["method"], "PUT");
        assert_eq!(event["requestContext"]["stage"], STAGE);
        assert_eq!(event["requestContext"]["time"], "22/Nov/2026:14:55:00 +0000");
        assert_eq!(event["body"], "{}");
        assert_eq!(event["isBase64Encoded"], false);
    }

    #[test]
    fn no_query_no_body_and_bytes_that_are_not_text() {
        let event1 = event(request("", Body::Empty));
        assert!(event1.get("queryStringParameters").is_none());
        assert!(event1.get("body").is_none());
        let event2 = event(request("", Body::Binary(vec![b'{', 0xff, b'}'])));
        assert_eq!(event2["body"], "e/99");
        assert_eq!(event2["isBase64Encoded"], true);
    }

    #[test]
    fn answers_become_responses() {
        let answer: ApiGatewayV2httpResponse = serde_json::from_value(json!({
            "statusCode": 412,
            "headers": {"etag": "\"3\"", "content-type": "application/json"},
            "multiValueHeaders": {},
            "body": "{\"status\":412}",
            "isBase64Encoded": false,
            "cookies": []
        }))
        .unwrap_or_default();
        let response = into_response(answer);
        assert_eq!(response.status(), StatusCode::PRECONDITION_FAILED);
        assert_eq!(response.headers()["etag"], "\"3\"");
        assert_eq!(response.body().as_ref(), b"{\"status\":412}");

        let mut encoded = ApiGatewayV2httpResponse::default();
        encoded.status_code = 200;
        encoded.body = Some(Body::Text("e30=".into()));
        encoded.is_base64_encoded = true;
        assert_eq!(into_response(encoded).body().as_ref(), b"{}");

        for status in [0, 99, 1000, -1] {
            let mut odd = ApiGatewayV2httpResponse::default();
            odd.status_code = status;
            assert_eq!(into_response(odd).status(), StatusCode::BAD_GATEWAY, "{status}");
        }
    }
}
