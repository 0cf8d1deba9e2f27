//! local-api's emulation of API Gateway's JWT authorizer, over real HTTP
//! with really signed tokens, backed by DynamoDB Local: what gets a 401
//! (API Gateway's own body), what a token's projects claim lets it change
//! (403 otherwise, with nothing written), HS256 secrets and ES256 JWKS.

use std::time::{SystemTime, UNIX_EPOCH};

use agent_server_shared::rules::Policy;
use agent_server_shared::store::Key;
use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair};
use integration_tests::{
    Reply, Route, client, dynamo_app, dynamo_local, get_item, http, put_item, serve_local_api_with,
};
use jsonwebtoken::jwk::{Jwk, JwkSet};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use local_api::LocalApi;
use local_api::gateway::{Authorizer, JwtAuthorizer};
use serde_json::{Value, json};

const SECRET: &[u8] = b"a secret for this test only";
const ISSUER: &str = "https://issuer.example.com/";
const AUDIENCE: &str = "agent-server";

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| elapsed.as_secs())
        .unwrap_or_default()
}

/// Claims valid for an hour from `ISSUER` for `AUDIENCE`, granting `projects`.
fn claims(projects: &str) -> Value {
    json!({"sub": "agent-1", "iss": ISSUER, "aud": AUDIENCE, "exp": now() + 3600, "projects": projects})
}

fn hs256(claims: &Value, secret: &[u8]) -> String {
    jsonwebtoken::encode(
        &Header::new(Algorithm::HS256),
        claims,
        &EncodingKey::from_secret(secret),
    )
    .unwrap()
}

async fn serve(authorizer: JwtAuthorizer) -> String {
    let local = LocalApi {
        app: dynamo_app(Policy::default()).await,
        authorizer: Authorizer::Jwt(Box::new(
            authorizer.issuer(ISSUER).audiences(vec![AUDIENCE.into()]),
        )),
        functions: local_api::functions::Functions::InProcess,
        docs: local_api::docs::Docs::default(),
    };
    serve_local_api_with(local, std::future::pending::<()>()).await.0
}

/// Two models with the same id, one in each of two fresh projects.
async fn seed() -> (String, String, String) {
    let dynamo = client(&dynamo_local().await.endpoint);
    let (own, other, id) = (uuid::Uuid::new_v4(), uuid::Uuid::new_v4(), uuid::Uuid::new_v4());
    let (own, other, id) = (own.to_string(), other.to_string(), id.to_string());
    for project in [&own, &other] {
        put_item(&dynamo, Route::Models.table(), Route::Models.item(project, &id)).await;
    }
    (own, other, id)
}

async fn put(base: &str, project: &str, id: &str, token: Option<&str>) -> Reply {
    let url = format!("{base}/api/agent-server/models/{id}?project_id={project}");
    let bearer = token.map(|token| format!("Bearer {token}"));
    let mut headers = vec![("content-type", "application/json")];
    if let Some(bearer) = &bearer {
        headers.push(("authorization", bearer.as_str()));
    }
    http("PUT", &url, &headers, json!({"name": "Renamed"}).to_string()).await
}

async fn stored_name(project: &str, id: &str) -> Option<String> {
    let dynamo = client(&dynamo_local().await.endpoint);
    let key = Key {
        project_id: Some(project.into()),
        id: id.into(),
    };
    let item = get_item(&dynamo, Route::Models.table(), &key).await?;
    item.get("name").and_then(|name| name.as_s()).map(str::to_owned)
}

/// An HS256 token over `header` and `payload` exactly as written (the
/// encoder would normalise what these tests need repeated or unusual).
fn hs256_raw(header: &str, payload: &str) -> String {
    use base64::Engine as _;
    let encode = |text: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(text);
    let message = format!("{}.{}", encode(header), encode(payload));
    let signature = jsonwebtoken::crypto::sign(
        message.as_bytes(),
        &EncodingKey::from_secret(SECRET),
        Algorithm::HS256,
    )
    .unwrap();
    format!("{message}.{signature}")
}

fn assert_unauthorized(reply: &Reply, case: &str) {
    assert_eq!(reply.status, 401, "{case}: {}", reply.body);
    assert_eq!(reply.body, json!({"message": "Unauthorized"}), "{case}");
}

#[tokio::test]
async fn a_token_changes_its_projects_and_nothing_else() {
    let base = serve(JwtAuthorizer::with_secret(SECRET).unwrap()).await;
    let (own, other, id) = seed().await;
    let before = stored_name(&other, &id).await;

    let token = hs256(&claims(&own), SECRET);
    let reply = put(&base, &own, &id, Some(&token)).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(stored_name(&own, &id).await.as_deref(), Some("Renamed"));

    let reply = put(&base, &other, &id, Some(&token)).await;
    assert_eq!(reply.status, 403, "{}", reply.body);
    assert_eq!(reply.body["errorDetails"]["code"], "forbidden");
    assert_eq!(
        reply.body["data"],
        Value::Null,
        "another project's record must not be returned"
    );
    assert_eq!(stored_name(&other, &id).await, before, "a 403 wrote");

    // API Gateway renders a JSON array claim as `[a b]`; a real array works.
    let listed = json!({"sub": "agent-2", "iss": ISSUER, "aud": [AUDIENCE, "other"], "exp": now() + 60, "projects": [own, uuid::Uuid::new_v4().to_string()]});
    assert_eq!(
        put(&base, &own, &id, Some(&hs256(&listed, SECRET))).await.status,
        200
    );
    assert_eq!(
        put(&base, &other, &id, Some(&hs256(&listed, SECRET)))
            .await
            .status,
        403
    );

    let star = hs256(&claims("*"), SECRET);
    assert_eq!(put(&base, &other, &id, Some(&star)).await.status, 200);
    assert_eq!(stored_name(&other, &id).await.as_deref(), Some("Renamed"));

    // `*` only as the whole claim: smuggled into an element, or beside an
    // id, it grants nothing, not even the id (API Gateway renders both
    // arrays as `[<id> *]`).
    let token = |projects: Value| {
        hs256(
            &json!({"sub": "agent-3", "iss": ISSUER, "aud": AUDIENCE, "exp": now() + 60, "projects": projects}),
            SECRET,
        )
    };
    for projects in [json!([own, "*"]), json!([format!("{own} *")]), json!(["*", "*"])] {
        for project in [&own, &other] {
            let reply = put(&base, project, &id, Some(&token(projects.clone()))).await;
            assert_eq!(reply.status, 403, "{projects} on {project}: {}", reply.body);
        }
    }
    assert_eq!(
        put(&base, &other, &id, Some(&token(json!(["*"])))).await.status,
        200
    );
}

#[tokio::test]
async fn crit_headers_repeated_claims_and_raw_bytes_in_the_target_are_refused() {
    let base = serve(JwtAuthorizer::with_secret(SECRET).unwrap()).await;
    let (own, _, id) = seed().await;
    let before = stored_name(&own, &id).await;
    let payload = |projects: &str| {
        format!(
            r#"{{"sub":"agent-9","iss":"{ISSUER}","aud":"{AUDIENCE}","exp":{},"projects":"{projects}"}}"#,
            now() + 600
        )
    };
    // The same token, well formed, is accepted: the refusals below are
    // for what they change, not for how they are signed.
    let good = hs256_raw(r#"{"alg":"HS256","typ":"JWT"}"#, &payload(&own));
    assert_eq!(put(&base, &own, &id, Some(&good)).await.status, 200);
    put_item(
        &client(&dynamo_local().await.endpoint),
        Route::Models.table(),
        Route::Models.item(&own, &id),
    )
    .await;
    for (case, token) in [
        (
            "crit names an extension",
            hs256_raw(r#"{"alg":"HS256","crit":["x-ext"],"x-ext":1}"#, &payload(&own)),
        ),
        (
            "empty crit",
            hs256_raw(r#"{"alg":"HS256","crit":[]}"#, &payload(&own)),
        ),
        (
            "repeated header member",
            hs256_raw(r#"{"alg":"HS256","typ":"JWT","typ":"JWT"}"#, &payload(&own)),
        ),
        (
            "repeated claim",
            hs256_raw(
                r#"{"alg":"HS256"}"#,
                &format!(
                    r#"{{"sub":"agent-9","iss":"{ISSUER}","aud":"{AUDIENCE}","exp":{},"projects":"{}","projects":"*"}}"#,
                    now() + 600,
                    own
                ),
            ),
        ),
    ] {
        assert_unauthorized(&put(&base, &own, &id, Some(&token)).await, case);
    }
    assert_eq!(stored_name(&own, &id).await, before, "a refused token wrote");

    // Raw non-ASCII bytes in the request target: the bare 400 of the HTTP layer.
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let address = base.trim_start_matches("http://");
    for target in [
        &b"/api/agent-server/mod\xc3\xa9ls/x"[..],
        b"/api/agent-server/models/\xe2\x80\xae",
    ] {
        let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
        let mut request = b"PUT ".to_vec();
        request.extend_from_slice(target);
        request
            .extend_from_slice(b" HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}");
        stream.write_all(&request).await.unwrap();
        let mut answer = Vec::new();
        let _ = stream.read_to_end(&mut answer).await;
        let answer = String::from_utf8_lossy(&answer);
        assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
        assert!(answer.ends_with("\r\n\r\n"), "a bare 400 has no body: {answer}");
    }
}

#[tokio::test]
async fn bad_or_missing_tokens_get_api_gateways_401_and_write_nothing() {
    let base = serve(JwtAuthorizer::with_secret(SECRET).unwrap()).await;
    let (own, _, id) = seed().await;
    let before = stored_name(&own, &id).await;
    let with = |change: &dyn Fn(&mut serde_json::Map<String, Value>)| {
        let mut claims = claims("*");
        if let Some(map) = claims.as_object_mut() {
            change(map);
        }
        hs256(&claims, SECRET)
    };
    let valid = hs256(&claims("*"), SECRET);
    let cases: Vec<(&str, Option<String>)> = vec![
        ("no token", None),
        (
            "expired",
            Some(with(&|c| {
                c.insert("exp".into(), json!(now() - 5));
            })),
        ),
        (
            "no exp",
            Some(with(&|c| {
                c.remove("exp");
            })),
        ),
        (
            "not yet valid",
            Some(with(&|c| {
                c.insert("nbf".into(), json!(now() + 600));
            })),
        ),
        (
            "wrong issuer",
            Some(with(&|c| {
                c.insert("iss".into(), json!("https://evil.example.com/"));
            })),
        ),
        (
            "no issuer",
            Some(with(&|c| {
                c.remove("iss");
            })),
        ),
        (
            "wrong audience",
            Some(with(&|c| {
                c.insert("aud".into(), json!("someone-else"));
            })),
        ),
        ("wrong signature", Some(hs256(&claims("*"), b"another secret"))),
        (
            "tampered payload",
            Some({
                let parts: Vec<&str> = valid.split('.').collect();
                let forged = hs256(
                    &json!({"sub": "x", "iss": ISSUER, "aud": AUDIENCE, "exp": now() + 60, "projects": "*", "admin": true}),
                    SECRET,
                );
                format!(
                    "{}.{}.{}",
                    parts[0],
                    forged.split('.').nth(1).unwrap_or_default(),
                    parts[2]
                )
            }),
        ),
        (
            "alg none",
            Some({
                use base64::Engine;
                let engine = base64::engine::general_purpose::URL_SAFE_NO_PAD;
                let header = engine.encode(r#"{"alg":"none","typ":"JWT"}"#);
                let payload = engine.encode(claims("*").to_string());
                format!("{header}.{payload}.")
            }),
        ),
        ("garbage", Some("not.a.token".into())),
    ];
    for (case, token) in &cases {
        assert_unauthorized(&put(&base, &own, &id, token.as_deref()).await, case);
    }
    assert_eq!(stored_name(&own, &id).await, before, "a 401 wrote");

    // `client_id` stands in for a missing `aud`, as in API Gateway.
    let client_id = with(&|c| {
        c.remove("aud");
        c.insert("client_id".into(), json!(AUDIENCE));
    });
    assert_eq!(put(&base, &own, &id, Some(&client_id)).await.status, 200);
}

#[tokio::test]
async fn es256_tokens_verify_against_a_jwks() {
    let pair = EcdsaKeyPair::generate(&ECDSA_P256_SHA256_FIXED_SIGNING).unwrap();
    let pkcs8 = pair.to_pkcs8v1().unwrap();
    let key = EncodingKey::from_ec_der(pkcs8.as_ref());
    let mut jwk = Jwk::from_encoding_key(&key, Algorithm::ES256).unwrap();
    jwk.common.key_id = Some("key-1".into());
    let jwks = serde_json::to_string(&JwkSet { keys: vec![jwk] }).unwrap();
    let base = serve(JwtAuthorizer::with_jwks(&jwks).unwrap()).await;
    let (own, other, id) = seed().await;

    let mut header = Header::new(Algorithm::ES256);
    header.kid = Some("key-1".into());
    let token = jsonwebtoken::encode(&header, &claims(&own), &key).unwrap();
    assert_eq!(put(&base, &own, &id, Some(&token)).await.status, 200);
    assert_eq!(put(&base, &other, &id, Some(&token)).await.status, 403);

    header.kid = Some("unknown-key".into());
    let unknown = jsonwebtoken::encode(&header, &claims(&own), &key).unwrap();
    assert_unauthorized(&put(&base, &own, &id, Some(&unknown)).await, "unknown kid");
    // An HS256 token signed with the public key's text must not pass (alg confusion).
    assert_unauthorized(
        &put(&base, &own, &id, Some(&hs256(&claims(&own), jwks.as_bytes()))).await,
        "HS256 against a JWKS",
    );
}

/// API Gateway's order, whatever the body's size: 401 (no token) and 404
/// (no route) first, then the function's 400 (record key) and 403 (grant),
/// and only then its 413; and `Expect: 100-continue` is answered only once
/// the caller may send a body.
#[tokio::test]
async fn oversized_bodies_are_answered_after_authentication_and_authorization() {
    let base = serve(JwtAuthorizer::with_secret(SECRET).unwrap()).await;
    let (own, other, id) = seed().await;
    let token = hs256(&claims(&own), SECRET);
    let bearer = format!("Bearer {token}");
    let huge = vec![b' '; 7 * 1024 * 1024];
    let over = vec![b' '; 64 * 1024 + 1];
    let send = |path: String, authorized: bool, body: Vec<u8>| {
        let bearer = bearer.clone();
        let base = base.clone();
        async move {
            let mut headers = vec![("content-type", "application/json")];
            if authorized {
                headers.push(("authorization", bearer.as_str()));
            }
            http("PUT", &format!("{base}{path}"), &headers, body).await
        }
    };
    let model = |project: &str, id: &str| format!("/api/agent-server/models/{id}?project_id={project}");
    for body in [huge.clone(), over.clone()] {
        let size = body.len();
        let unauthorized = send(model(&own, &id), false, body.clone()).await;
        assert_eq!(unauthorized.status, 401, "{size}");
        let unrouted = send(format!("/api/agent-server/nothing/{id}"), true, body.clone()).await;
        assert_eq!(unrouted.status, 404, "{size}");
        let forbidden = send(model(&other, &id), true, body.clone()).await;
        assert_eq!(
            (forbidden.status, forbidden.body["errorDetails"]["code"].as_str()),
            (403, Some("forbidden")),
            "{size}"
        );
        let bad_key = send(model(&own, "not-a-uuid"), true, body.clone()).await;
        assert_eq!(bad_key.status, 400, "{size}");
        let too_large = send(model(&own, &id), true, body).await;
        assert_eq!(
            (too_large.status, too_large.body["errorDetails"]["code"].as_str()),
            (413, Some("payload_too_large")),
            "{size}"
        );
    }
    assert_eq!(stored_name(&own, &id).await.as_deref(), Some("Original"));

    // Expect: 100-continue: the 403 comes without asking for the body; a
    // granted caller is asked for it.
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let address = base.trim_start_matches("http://").to_string();
    for (project, expected) in [(&other, "HTTP/1.1 403"), (&own, "HTTP/1.1 100 Continue")] {
        let mut stream = tokio::net::TcpStream::connect(&address).await.unwrap();
        let head = format!(
            "PUT {} HTTP/1.1\r\nHost: {address}\r\nAuthorization: {bearer}\r\nContent-Type: application/json\r\n\
             Content-Length: 100000\r\nExpect: 100-continue\r\n\r\n",
            model(project, &id)
        );
        stream.write_all(head.as_bytes()).await.unwrap();
        let mut answer = vec![0; 64];
        let read = tokio::time::timeout(std::time::Duration::from_secs(10), stream.read(&mut answer))
            .await
            .expect("no answer before the body")
            .unwrap();
        let answer = String::from_utf8_lossy(&answer[..read]).to_string();
        assert!(answer.starts_with(expected), "{project}: {answer}");
    }
}

/// A client that sends its whole body before it reads (Python's
/// `http.client`, say) still reads an answer given before the body (401,
/// 403, 404, 413): the local API stops writing, then reads and discards
/// what is still sent (RFC 9112 section 9.6), instead of closing at once,
/// which resets the connection and fails the client's send.
#[tokio::test]
async fn an_early_answer_reaches_a_client_that_sends_its_whole_body_first() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let base = serve(JwtAuthorizer::with_secret(SECRET).unwrap()).await;
    let (own, other, id) = seed().await;
    let bearer = format!("Bearer {}", hs256(&claims(&own), SECRET));
    let address = base.trim_start_matches("http://").to_string();
    // More than the sockets' buffers hold, and than the local API reads.
    let body = vec![b' '; 16 * 1024 * 1024];
    let model = |project: &str| format!("/api/agent-server/models/{id}?project_id={project}");
    let cases = [
        (model(&own), false, "HTTP/1.1 401"),
        (model(&other), true, "HTTP/1.1 403"),
        (format!("/api/agent-server/nothing/{id}"), true, "HTTP/1.1 404"),
        (model(&own), true, "HTTP/1.1 413"),
    ];
    for (path, authorized, expected) in cases {
        let mut stream = tokio::net::TcpStream::connect(&address).await.unwrap();
        let authorization = if authorized {
            format!("Authorization: {bearer}\r\n")
        } else {
            String::new()
        };
        let head = format!(
            "PUT {path} HTTP/1.1\r\nHost: {address}\r\n{authorization}Content-Type: application/json\r\n\
             Content-Length: {}\r\n\r\n",
            body.len()
        );
        stream.write_all(head.as_bytes()).await.unwrap();
        let sent = stream.write_all(&body).await;
        assert!(sent.is_ok(), "{expected}: the body could not be sent: {sent:?}");
        let mut answer = Vec::new();
        let read = tokio::time::timeout(
            std::time::Duration::from_secs(10),
            stream.read_to_end(&mut answer),
        )
        .await
        .expect("no answer");
        assert!(read.is_ok(), "{expected}: the answer could not be read: {read:?}");
        let answer = String::from_utf8_lossy(&answer);
        assert!(answer.starts_with(expected), "{expected}: {answer}");
    }
    assert_eq!(stored_name(&own, &id).await.as_deref(), Some("Original"));
}
