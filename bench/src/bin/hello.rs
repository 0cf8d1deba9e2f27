//! The Rust floor: a `lambda_runtime` function that does nothing, built
//! with the same release profile as the real functions.

use lambda_runtime::{Error, LambdaEvent, service_fn};
use serde_json::Value;

// On one thread, as the functions run (`agent_server_shared::lambda::main`).
#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    lambda_runtime::run(service_fn(|event: LambdaEvent<Value>| async move {
        Ok::<Value, Error>(serde_json::json!({ "statusCode": 200, "echo": event.context.request_id }))
    }))
    .await
}
