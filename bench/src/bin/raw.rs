//! The database floor as a Lambda function: per event, the same conditional
//! `UpdateItem` as `update-model` makes, from a client built as the
//! functions build theirs (`DynamoStore::from_config`, no warm-up), with no
//! request parsing or validation. Cold, it shows what a function that only
//! talks to DynamoDB pays; warm, the least any update can cost over the
//! same TLS path and CPU share.

use std::sync::atomic::{AtomicUsize, Ordering};

use agent_server_shared::store::TableNames;
use agent_server_shared::store::{DynamoStore, Store};
use lambda_runtime::{Error, LambdaEvent, service_fn};
use serde_json::Value;

// On one thread, as the functions run (`agent_server_shared::lambda::main`).
#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    let config = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .load()
        .await;
    let store = DynamoStore::from_config(&config, TableNames::default());
    let round = AtomicUsize::new(0);
    let (store, round) = (&store, &round);
    lambda_runtime::run(service_fn(move |_: LambdaEvent<Value>| async move {
        let update = agent_server_bench::sample_update(round.fetch_add(1, Ordering::Relaxed));
        let status = match store.update(update).await {
            Ok(_) => 200,
            Err(_) => 503,
        };
        Ok::<Value, Error>(serde_json::json!({ "statusCode": status }))
    }))
    .await
}
