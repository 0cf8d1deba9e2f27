//! The KMS floor as a Lambda function: per event, one `Encrypt` of a
//! provider-key-sized value under `SECRETS_KEY_ID` with the sealing context,
//! from a client built as the API-key function builds its sealer
//! (`KmsSealer::from_config`, no warm-up), and nothing else. Warm, it is the
//! bare KMS round trip a sealing request adds at most.

use agent_server_shared::budget::TIME_BUDGET;
use agent_server_shared::seal::{KmsSealer, Sealer};
use lambda_runtime::{Error, LambdaEvent, service_fn};
use serde_json::Value;

// On one thread, as the functions run (`agent_server_shared::lambda::main`).
#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    let config = aws_config::defaults(aws_config::BehaviorVersion::latest()).load().await;
    let key_id = Sealer::key_id(|name| std::env::var(name).ok())?;
    let sealer = KmsSealer::from_config(&config, key_id);
    let sealer = &sealer;
    lambda_runtime::run(service_fn(move |_: LambdaEvent<Value>| async move {
        let sealed = sealer
            .seal(&[("field", "api_key"), ("id", agent_server_bench::API_KEY_ID)], agent_server_bench::SEALED_KEY.as_bytes(), TIME_BUDGET)
            .await;
        let status = if sealed.is_ok() { 200 } else { 503 };
        Ok::<Value, Error>(serde_json::json!({ "statusCode": status }))
    }))
    .await
}
