//! Where the local API sends an event: into the functions' code in this
//! process, or to the real function binaries, each running under AWS's
//! Lambda Runtime Interface Emulator (`make run LAMBDA=1`), the way
//! `sam local start-api` runs them in containers.

use std::sync::Arc;
use std::time::Duration;

use crate::routes::Route;

use aws_lambda_events::apigw::ApiGatewayV2httpResponse;
use aws_lambda_events::encodings::Body;
use aws_lambda_events::http::{HeaderValue, Method, Request, StatusCode, Uri, header};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;
use tokio::sync::Mutex;

/// The path the emulator serves invocations on (the Lambda Invoke API's).
const INVOKE_PATH: &str = "/2015-03-31/functions/function/invocations";

/// API Gateway's integration timeout for HTTP APIs.
const INTEGRATION_TIMEOUT: Duration = Duration::from_secs(30);

/// The largest answer read from a function: Lambda's response limit.
const MAX_ANSWER_BYTES: usize = 6 * 1024 * 1024;

/// How the local API reaches the functions.
#[derive(Debug, Default)]
pub enum Functions {
    /// Their code, linked into this process.
    #[default]
    InProcess,
    /// Their binaries under the Runtime Interface Emulator.
    Emulated(Box<Emulators>),
}

/// The emulators' invoke URLs, one per function, in [`Route::ALL`]'s order.
#[derive(Debug)]
pub struct Emulators {
    urls: Vec<Uri>,
    /// An emulator runs one instance of its function, which takes one
    /// invocation at a time (as one Lambda instance does); requests for
    /// the same function wait their turn here.
    turns: Vec<Arc<Mutex<()>>>,
    client: Client<HttpConnector, Full<Bytes>>,
}

/// Why an emulator gave no usable answer; API Gateway answers these
/// itself.
#[derive(Debug, thiserror::Error)]
pub enum InvokeError {
    /// The emulator could not be reached or broke off.
    #[error("the function could not be invoked: {0}")]
    Unreachable(String),
    /// No answer within the integration timeout.
    #[error("the function did not answer within {0:?}")]
    Timeout(Duration),
    /// The function failed (the emulator relays its error), or answered
    /// something that is not a payload 2.0 response.
    #[error("the function failed or answered no HTTP response: {0}")]
    Failed(String),
}

impl InvokeError {
    /// The status API Gateway answers with.
    pub fn status(&self) -> StatusCode {
        match self {
            Self::Timeout(_) => StatusCode::SERVICE_UNAVAILABLE,
            Self::Unreachable(_) | Self::Failed(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

impl Emulators {
    /// Emulators at `addresses`: `FUNCTION=HOST:PORT` for each function
    /// (every route's), by binary name (`update-model=127.0.0.1:9003`).
    pub fn new<'a>(addresses: impl IntoIterator<Item = &'a str>) -> Result<Self, String> {
        let mut urls: Vec<Option<Uri>> = vec![None; Route::ALL.len()];
        for address in addresses {
            let (function, host) = address
                .split_once('=')
                .ok_or_else(|| format!("--rie {address}: not FUNCTION=HOST:PORT"))?;
            let index = Route::ALL
                .iter()
                .position(|route| route.function() == function)
                .ok_or_else(|| format!("--rie {address}: no function named {function}"))?;
            let url = format!("http://{host}{INVOKE_PATH}")
                .parse()
                .map_err(|_| format!("--rie {address}: not HOST:PORT"))?;
            if urls[index].replace(url).is_some() {
                return Err(format!("--rie: {function} given twice"));
            }
        }
        let Some(urls) = urls.into_iter().collect::<Option<Vec<Uri>>>() else {
            let names: Vec<&str> = Route::ALL.iter().map(|route| route.function()).collect();
            return Err(format!("--rie: give every function ({})", names.join(", ")));
        };
        Ok(Self {
            turns: urls.iter().map(|_| Arc::default()).collect(),
            urls,
            client: Client::builder(TokioExecutor::new()).build_http(),
        })
    }

    /// Invokes the function serving `route` with `event`, as API
    /// Gateway's Lambda integration does, and reads its payload 2.0 answer.
    pub async fn invoke(&self, route: Route, event: &Value) -> Result<ApiGatewayV2httpResponse, InvokeError> {
        let index = Route::ALL
            .iter()
            .position(|served| *served == route)
            .ok_or_else(|| InvokeError::Failed(format!("no function serves {}", route.template())))?;
        let request = Request::builder()
            .method(Method::POST)
            .uri(self.urls[index].clone())
            .header(header::CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from(event.to_string())))
            .map_err(|e| InvokeError::Unreachable(e.to_string()))?;
        // One invocation at a time per function; the integration timeout
        // starts when this one's turn comes, and the turn is held until the
        // emulator has answered, even if API Gateway gave up waiting.
        let turn = Arc::clone(&self.turns[index]).lock_owned().await;
        let client = self.client.clone();
        let exchange = tokio::spawn(async move {
            let _turn = turn;
            let response = client
                .request(request)
                .await
                .map_err(|e| InvokeError::Unreachable(e.to_string()))?;
            let status = response.status();
            let bytes = Limited::new(response.into_body(), MAX_ANSWER_BYTES)
                .collect()
                .await
                .map_err(|e| InvokeError::Unreachable(e.to_string()))?
                .to_bytes();
            Ok::<_, InvokeError>((status, bytes))
        });
        let (status, bytes) = tokio::time::timeout(INTEGRATION_TIMEOUT, exchange)
            .await
            .map_err(|_| InvokeError::Timeout(INTEGRATION_TIMEOUT))?
            .map_err(|e| InvokeError::Unreachable(e.to_string()))??;
        if !status.is_success() {
            return Err(InvokeError::Failed(format!("the emulator answered {status}")));
        }
        // A function error comes back as {"errorType": …, "errorMessage": …}.
        let answer: Value = serde_json::from_slice(&bytes).map_err(|e| InvokeError::Failed(e.to_string()))?;
        if let Some(kind) = answer.get("errorType") {
            return Err(InvokeError::Failed(
                kind.as_str().unwrap_or("an error").to_owned(),
            ));
        }
        if answer.get("statusCode").is_none() {
            // Payload 2.0: an answer without a status code is the body of a 200.
            let mut plain = ApiGatewayV2httpResponse::default();
            plain.status_code = 200;
            plain
                .headers
                .insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
            plain.body = Some(Body::Text(answer.to_string()));
            return Ok(plain);
        }
        serde_json::from_value(answer).map_err(|e| InvokeError::Failed(e.to_string()))
    }
}
