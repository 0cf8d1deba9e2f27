//! The local API over real HTTP, backed by DynamoDB Local: routing, the
//! 404/405 envelopes, body limits, and the write really landing.

use std::sync::Arc;

use agent_server_shared::rules::Policy;
use hyper::body::Bytes;
use integration_tests::{
    Reply, Route, client, dynamo_app, dynamo_local, get_item, http, put_item, serve_local_api,
};
use serde_json::json;
use tokio::sync::oneshot;

struct Server {
    base: String,
    stop: Option<oneshot::Sender<()>>,
    done: tokio::task::JoinHandle<std::io::Result<()>>,
}

async fn start() -> Server {
    let app = Arc::new(
        dynamo_app(Policy {
            allow_private_endpoints: true,
        })
        .await,
    );
    let (stop, stopped) = oneshot::channel::<()>();
    let (base, done) = serve_local_api(app, async {
        let _ = stopped.await;
    })
    .await;
    Server {
        base,
        stop: Some(stop),
        done,
    }
}

async fn send(method: &str, url: &str, content_type: Option<&str>, body: impl Into<Bytes>) -> Reply {
    let headers: Vec<(&str, &str)> = content_type.map(|c| ("content-type", c)).into_iter().collect();
    http(method, url, &headers, body).await
}

#[tokio::test]
async fn serves_the_three_routes_and_writes_reach_dynamodb() {
    let mut server = start().await;
    let local = dynamo_local().await;
    let dynamo = client(&local.endpoint);
    for route in Route::ALL {
        let (project, id) = (uuid::Uuid::new_v4().to_string(), uuid::Uuid::new_v4().to_string());
        put_item(&dynamo, route.table(), route.item(&project, &id)).await;
        let query = if route.scoped() {
            format!("?project_id={project}")
        } else {
            String::new()
        };
        let url = format!(
            "{}/api/agent-server/{}/{id}{query}",
            server.base,
            route.collection()
        );
        let body = route.full_body();
        let reply = send("PUT", &url, Some("application/json"), body.to_string()).await;
        assert_eq!(reply.status, 200, "{route:?}: {}", reply.body);
        assert_eq!(reply.body["message"], route.success_message());
        assert_eq!(reply.headers["etag"], "\"1\"");
        assert_eq!(reply.headers["content-type"], "application/json");

        let key = agent_server_shared::store::Key {
            project_id: route.scoped().then(|| project.clone()),
            id: id.clone(),
        };
        let stored = get_item(&dynamo, route.table(), &key).await.unwrap_or_default();
        for (name, value) in body.as_object().cloned().unwrap_or_default() {
            assert!(stored.contains_key(&name), "{name} not stored");
            let read = integration_tests::stored_json(&stored, &name);
            assert!(
                integration_tests::same_json(&read, &value),
                "{route:?}.{name}: stored {read}"
            );
            if name != "api_key" {
                assert!(integration_tests::same_json(&reply.body["data"][&name], &value));
            }
        }
    }
    if let Some(stop) = server.stop.take() {
        let _ = stop.send(());
    }
    let finished = tokio::time::timeout(std::time::Duration::from_secs(10), &mut server.done).await;
    assert!(matches!(finished, Ok(Ok(Ok(())))), "server did not stop cleanly");
}

#[tokio::test]
async fn unknown_paths_and_methods_get_envelopes() {
    let server = start().await;
    let id = uuid::Uuid::new_v4();
    for path in [
        "/",
        "/api/agent-server/widgets/{id}",
        "/api/agent-server/models/",
        "/api/agent-server/models/{id}/x",
    ] {
        let url = format!("{}{}", server.base, path.replace("{id}", &id.to_string()));
        let reply = send("PUT", &url, Some("application/json"), "{}").await;
        assert_eq!(reply.status, 404, "{path}");
        assert_eq!(reply.body["errorDetails"]["code"], "not_found");
        assert_eq!(reply.body["status"], 404);
    }
    for method in ["GET", "POST", "DELETE", "OPTIONS"] {
        let url = format!("{}/api/agent-server/api-keys/{id}", server.base);
        let reply = send(method, &url, None, "").await;
        assert_eq!(reply.status, 405, "{method}");
        assert_eq!(reply.headers["allow"], "PUT, PATCH");
        assert_eq!(reply.body["errorDetails"]["code"], "method_not_allowed");
    }
}

#[tokio::test]
async fn the_reference_paths_answer_only_reads() {
    let server = start().await;
    // Beside the reference's own paths, the API's 404 stands; under them,
    // the reference's, with its security headers, as on every answer there.
    for path in ["/docs/nothing", "/docs.html", "/openapi.json"] {
        let reply = send("GET", &format!("{}{path}", server.base), None, "").await;
        assert_eq!(reply.status, 404, "{path}");
        assert_eq!(reply.body["errorDetails"]["code"], "not_found", "{path}");
        if path.starts_with("/docs/") {
            assert_eq!(reply.headers["x-content-type-options"], "nosniff", "{path}");
            assert!(reply.headers.contains_key("content-security-policy"), "{path}");
        }
    }
    for path in ["/docs", "/openapi.yaml"] {
        for method in ["PUT", "POST", "DELETE", "PATCH"] {
            let reply = send(
                method,
                &format!("{}{path}", server.base),
                Some("application/json"),
                "{}",
            )
            .await;
            assert_eq!(reply.status, 405, "{method} {path}");
            assert_eq!(reply.headers["allow"], "GET, HEAD", "{method} {path}");
            assert_eq!(
                reply.headers["x-content-type-options"], "nosniff",
                "{method} {path}"
            );
            assert!(
                reply.headers.contains_key("content-security-policy"),
                "{method} {path}"
            );
            assert_eq!(reply.body["errorDetails"]["code"], "method_not_allowed");
            assert_eq!(reply.body["status"], 405);
        }
    }
}

#[tokio::test]
async fn oversized_and_non_json_bodies_over_http() {
    let server = start().await;
    let url = format!(
        "{}/api/agent-server/api-keys/{}",
        server.base,
        uuid::Uuid::new_v4()
    );
    let reply = send("PUT", &url, Some("application/json"), vec![b' '; 64 * 1024 + 1]).await;
    assert_eq!(
        (reply.status, reply.body["errorDetails"]["code"].clone()),
        (413, json!("payload_too_large"))
    );
    let reply = send("PUT", &url, Some("application/json"), vec![b' '; 7 * 1024 * 1024]).await;
    assert_eq!(reply.status, 413);
    let reply = send("PUT", &url, Some("text/plain"), "{\"name\": \"x\"}").await;
    assert_eq!(reply.status, 415);
    let reply = send("PUT", &url, None, "{\"name\": \"x\"}").await;
    assert_eq!(
        reply.status, 404,
        "no Content-Type is fine; the record is missing"
    );
}

/// Header lines as API Gateway passes them: many If-Match lines are one
/// list, and more tags than the limit is the function's 400 in the
/// envelope, not the HTTP layer's bare 431; up to the limit, they match.
#[tokio::test]
async fn many_header_lines_reach_the_function() {
    use agent_server_shared::request::MAX_IF_MATCH_TAGS;
    let server = start().await;
    let local = dynamo_local().await;
    let dynamo = client(&local.endpoint);
    let route = Route::Models;
    let (project, id) = (uuid::Uuid::new_v4().to_string(), uuid::Uuid::new_v4().to_string());
    put_item(&dynamo, route.table(), route.item(&project, &id)).await;
    let url = format!(
        "{}/api/agent-server/{}/{id}?project_id={project}",
        server.base,
        route.collection()
    );
    // One tag per line; the stored item has no version, so "0" matches.
    let tags: Vec<String> = (0..=MAX_IF_MATCH_TAGS).map(|n| format!("\"{n}\"")).collect();
    let lines = |count: usize| -> Vec<(&str, &str)> {
        let mut headers = vec![("content-type", "application/json")];
        headers.extend(tags[..count].iter().map(|tag| ("if-match", tag.as_str())));
        headers
    };
    let body = r#"{"name": "many lines"}"#;
    let reply = http("PUT", &url, &lines(MAX_IF_MATCH_TAGS + 1), body).await;
    assert_eq!(reply.status, 400, "{}", reply.body);
    assert_eq!(reply.body["errorDetails"]["code"], "invalid_if_match");
    let reply = http("PUT", &url, &lines(MAX_IF_MATCH_TAGS), body).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.headers["etag"], "\"1\"");
}

/// local-api's command line (clap): a secret is a value whatever its first
/// character (a generated one may start with `-`), exactly one way to
/// authenticate, and `token` signs for the secret given.
#[test]
fn the_command_line_takes_any_secret_and_one_way_to_authenticate() {
    let binary = integration_tests::workspace_binary("local-api");
    let run = |args: &[&str]| {
        std::process::Command::new(&binary)
            .args(args)
            .env("SECRETS_KEY_ID", "alias/none")
            .output()
            .unwrap_or_else(|e| panic!("{}: {e}", binary.display()))
    };
    let token = run(&[
        "token",
        "--jwt-secret",
        "-Bsecret",
        "--projects",
        "*",
        "--sub",
        "-me",
    ]);
    assert!(
        token.status.success(),
        "{}",
        String::from_utf8_lossy(&token.stderr)
    );
    let text = String::from_utf8_lossy(&token.stdout).trim().to_string();
    let claims = jsonwebtoken::decode::<serde_json::Value>(
        &text,
        &jsonwebtoken::DecodingKey::from_secret(b"-Bsecret"),
        &jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::HS256),
    )
    .expect("not a token for that secret");
    assert_eq!(claims.claims["sub"], "-me");
    for (args, said) in [
        (&["--jwks", "x", "--no-auth"][..], "cannot be used with"),
        (&["--jwt-secret", "-s", "--no-auth"][..], "cannot be used with"),
        (&[][..], "choose how requests are authenticated"),
        (
            &["--no-auth", "--jwt-issuer", "i"][..],
            "need --jwt-secret or --jwks",
        ),
        (&["--addr", "nowhere", "--no-auth"][..], "invalid value"),
    ] {
        let refused = run(args);
        assert_eq!(refused.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&refused.stderr);
        assert!(stderr.contains(said), "{args:?}: {stderr}");
    }
}
