//! Optimistic concurrency against DynamoDB Local: ETag and If-Match through
//! the real handlers, and a race of concurrent conditional writes.

use std::sync::Arc;

use agent_server_shared::item::{self, Item};
use agent_server_shared::rules::Policy;
use agent_server_shared::store::Key;
use aws_sdk_dynamodb::Client;
use integration_tests::events::Event;
use integration_tests::{Route, body_json, client, dynamo_app, dynamo_local, get_item, put_item};
use serde_json::json;

async fn seed(dynamo: &Client, route: Route, project: &str, id: &str) -> Key {
    put_item(dynamo, route.table(), route.item(project, id)).await;
    Key {
        project_id: route.scoped().then(|| project.to_string()),
        id: id.to_string(),
    }
}

async fn stored(dynamo: &Client, route: Route, key: &Key) -> Item {
    get_item(dynamo, route.table(), key)
        .await
        .unwrap_or_else(|| panic!("{route:?}: item missing"))
}

fn put(route: Route, key: &Key, if_match: &str, name: &str) -> Event {
    Event::put(route, &key.id, key.project_id.as_deref())
        .header("If-Match", if_match)
        .json(&json!({ "name": name }))
}

#[tokio::test]
async fn etags_guard_updates_of_every_route() {
    let app = dynamo_app(Policy::default()).await;
    let dynamo = client(&dynamo_local().await.endpoint);
    for route in Route::ALL {
        let (project, id) = (uuid::Uuid::new_v4().to_string(), uuid::Uuid::new_v4().to_string());
        // Seeded without a version attribute: it counts as 0.
        let key = seed(&dynamo, route, &project, &id).await;

        let first = route
            .call(&app, put(route, &key, "\"0\"", "first").request())
            .await;
        assert_eq!(first.status().as_u16(), 200, "{route:?}: {}", body_json(&first));
        assert_eq!(first.headers()["etag"], "\"1\"");
        let after_first = stored(&dynamo, route, &key).await;

        let stale = route
            .call(&app, put(route, &key, "\"0\"", "stale").request())
            .await;
        assert_eq!(stale.status().as_u16(), 412);
        assert_eq!(stale.headers()["etag"], "\"1\"");
        assert_eq!(body_json(&stale)["errorDetails"]["code"], "precondition_failed");
        assert_eq!(
            stored(&dynamo, route, &key).await,
            after_first,
            "{route:?}: a refused write changed the item"
        );

        let next = route
            .call(&app, put(route, &key, "\"1\"", "second").request())
            .await;
        assert_eq!(
            (next.status().as_u16(), next.headers()["etag"].to_str().ok()),
            (200, Some("\"2\""))
        );

        let any = route.call(&app, put(route, &key, "*", "third").request()).await;
        assert_eq!(
            (any.status().as_u16(), any.headers()["etag"].to_str().ok()),
            (200, Some("\"3\""))
        );

        let missing = Key {
            id: uuid::Uuid::new_v4().to_string(),
            ..key.clone()
        };
        let gone = route
            .call(&app, put(route, &missing, "\"1\"", "ghost").request())
            .await;
        assert_eq!(
            gone.status().as_u16(),
            404,
            "{route:?}: a missing record must be 404, not 412"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn of_concurrent_writers_with_the_same_etag_exactly_one_wins() {
    const WRITERS: usize = 24;
    let app = Arc::new(dynamo_app(Policy::default()).await);
    let dynamo = client(&dynamo_local().await.endpoint);
    for route in Route::ALL {
        let (project, id) = (uuid::Uuid::new_v4().to_string(), uuid::Uuid::new_v4().to_string());
        let key = seed(&dynamo, route, &project, &id).await;
        let warm = route.call(&app, put(route, &key, "*", "v1").request()).await;
        assert_eq!(warm.headers()["etag"], "\"1\"");

        let mut writers = Vec::with_capacity(WRITERS);
        for writer in 0..WRITERS {
            let (app, key) = (Arc::clone(&app), key.clone());
            writers.push(tokio::spawn(async move {
                let name = format!("writer-{writer}");
                let response = route.call(&app, put(route, &key, "\"1\"", &name).request()).await;
                (response.status().as_u16(), name)
            }));
        }
        let mut winners = Vec::new();
        let mut refused = 0;
        for writer in writers {
            match writer.await {
                Ok((200, name)) => winners.push(name),
                Ok((412, _)) => refused += 1,
                other => panic!("{route:?}: unexpected outcome {other:?}"),
            }
        }
        assert_eq!(winners.len(), 1, "{route:?}: winners {winners:?}");
        assert_eq!(refused, WRITERS - 1);
        let item = stored(&dynamo, route, &key).await;
        assert_eq!(
            item::string(&item, "name"),
            Ok(Some(winners[0].clone())),
            "{route:?}"
        );
        assert_eq!(item::version(&item), Ok(2));
    }
}
