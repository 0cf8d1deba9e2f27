//! Authorization, route by route, through the Lambda entry's reading of API
//! Gateway payload 2.0 events and the real handlers: which identity may
//! change which record, and that every refusal costs no store call and
//! leaves every record as it was.

use agent_server_shared::rules::Policy;
use agent_server_shared::store::{Key, MemoryStore};
use agent_server_shared::{App, Settings};
use integration_tests::events::Event;
use integration_tests::{Route, body_json, memory_app};
use serde_json::Value;

const PROJECT: &str = "8a4b2c1d-3e5f-4a6b-8c7d-9e0f1a2b3c4d";
const OTHER: &str = "0b7c6d5e-4f3a-4b2c-9d1e-0f9a8b7c6d5e";
const THIRD: &str = "1c2d3e4f-5a6b-4c7d-8e9f-0a1b2c3d4e5f";
const ID: &str = "7c8d9e0f-1a2b-4c3d-9e4f-5a6b7c8d9e0f";

/// An app holding the record `ID` in `PROJECT` and in `OTHER` (one API key
/// `ID` for the unscoped route).
fn seeded(route: Route, settings: Settings) -> App<MemoryStore> {
    let mut app = memory_app(Policy::default());
    app.settings = settings;
    for project in [PROJECT, OTHER] {
        app.store.put(route.table(), route.item(project, ID));
    }
    app
}

fn key(route: Route, project: &str) -> Key {
    Key {
        project_id: route.scoped().then(|| project.to_string()),
        id: ID.to_string(),
    }
}

/// A `PUT` of a valid body on `route` for the record `ID` in `project`.
fn put(route: Route, project: &str) -> Event {
    Event::put(route, ID, route.scoped().then_some(project)).json(&route.full_body())
}

struct Outcome {
    status: u16,
    body: Value,
    calls: usize,
    /// Whether every stored record is as seeded.
    untouched: bool,
}

async fn send(route: Route, event: Event, settings: Settings) -> Outcome {
    let app = seeded(route, settings);
    let before: Vec<_> = [PROJECT, OTHER]
        .map(|project| app.store.get(route.table(), &key(route, project)))
        .into();
    let response = route.call(&app, event.request()).await;
    let body = body_json(&response);
    let after: Vec<_> = [PROJECT, OTHER]
        .map(|project| app.store.get(route.table(), &key(route, project)))
        .into();
    Outcome {
        status: response.status().as_u16(),
        body,
        calls: app.store.calls(),
        untouched: before == after,
    }
}

/// Asserts the 403 envelope: no store call, nothing changed, no data, and
/// a message that repeats nothing the request sent.
fn assert_forbidden(outcome: &Outcome, case: &str) {
    assert_eq!(outcome.status, 403, "{case}: {}", outcome.body);
    assert_eq!(outcome.body["status"], 403, "{case}");
    assert_eq!(outcome.body["error"], true, "{case}");
    assert_eq!(outcome.body["errorDetails"]["code"], "forbidden", "{case}");
    assert_eq!(outcome.body["data"], Value::Null, "{case}");
    assert_eq!(outcome.calls, 0, "{case}: a 403 must not reach the store");
    assert!(outcome.untouched, "{case}: a 403 changed a record");
    let text = outcome.body.to_string();
    for submitted in [PROJECT, OTHER, THIRD, ID, "New name"] {
        assert!(
            !text.contains(submitted),
            "{case}: the 403 repeats {submitted}: {text}"
        );
    }
}

fn assert_ok(outcome: &Outcome, case: &str) {
    assert_eq!(outcome.status, 200, "{case}: {}", outcome.body);
    assert_eq!(outcome.calls, 1, "{case}");
}

fn jwt(route: Route, project: &str, claims: &[(&str, &str)]) -> Event {
    put(route, project).jwt(claims)
}

#[tokio::test]
async fn a_project_grant_changes_that_project_only() {
    for route in [Route::McpServers, Route::Models] {
        let claims = [("sub", "agent-a"), ("projects", PROJECT)];
        let own = send(route, jwt(route, PROJECT, &claims), Settings::default()).await;
        assert_ok(&own, &format!("{route:?} own project"));
        assert_eq!(own.body["data"]["project_id"], PROJECT);

        let other = send(route, jwt(route, OTHER, &claims), Settings::default()).await;
        assert_forbidden(&other, &format!("{route:?} other project"));

        // A project that has no such record: still 403, not 404, so a 403
        // says nothing about what exists.
        let absent = send(route, jwt(route, THIRD, &claims), Settings::default()).await;
        assert_forbidden(
            &absent,
            &format!("{route:?} ungranted project without the record"),
        );
    }
}

#[tokio::test]
async fn api_keys_belong_to_no_project_and_need_a_grant_of_every_project() {
    let route = Route::ApiKeys;
    for claim in [
        PROJECT.to_string(),
        format!("{PROJECT} {OTHER}"),
        format!("[{PROJECT}]"),
    ] {
        let outcome = send(
            route,
            jwt(route, PROJECT, &[("projects", &claim)]),
            Settings::default(),
        )
        .await;
        assert_forbidden(&outcome, &format!("api key with {claim}"));
    }
    let outcome = send(
        route,
        jwt(route, PROJECT, &[("projects", "*")]),
        Settings::default(),
    )
    .await;
    assert_ok(&outcome, "api key with *");
}

#[tokio::test]
async fn a_star_grants_every_route_and_project() {
    for route in Route::ALL {
        for project in [PROJECT, OTHER] {
            for claim in ["*", "[*]", "[\"*\"]"] {
                let outcome = send(
                    route,
                    jwt(route, project, &[("projects", claim)]),
                    Settings::default(),
                )
                .await;
                assert_ok(&outcome, &format!("{route:?} {project} {claim}"));
            }
        }
    }
}

#[tokio::test]
async fn a_star_beside_anything_else_grants_nothing_in_any_form() {
    let (logs, _guard) = integration_tests::capture_logs();
    // API Gateway renders ["<P> *"] and ["<P>", "*"] alike, as `[<P> *]`:
    // a user who may write one element of the claim must not become an
    // administrator, so every form of `*` beside an id is refused.
    let forms = [
        format!("[{PROJECT} *]"),
        format!("[* {PROJECT}]"),
        format!("[\"{PROJECT} *\"]"),
        format!("[\"{PROJECT}\",\"*\"]"),
        format!("{PROJECT} *"),
        format!("*,{PROJECT}"),
        "[* *]".to_string(),
    ];
    for route in Route::ALL {
        for project in [PROJECT, OTHER] {
            for claim in &forms {
                let outcome = send(
                    route,
                    jwt(route, project, &[("projects", claim)]),
                    Settings::default(),
                )
                .await;
                assert_forbidden(&outcome, &format!("{route:?} {project} {claim}"));
            }
        }
    }
    let logged = logs.text();
    let warnings: Vec<&str> = logged
        .lines()
        .filter(|line| line.contains("holds * beside other entries"))
        .collect();
    assert!(!warnings.is_empty(), "{logged}");
    // The claim's name, never its value (the access line names the record's
    // project once validated, which is not the claim).
    for line in warnings {
        assert!(line.contains("\"claim\":\"projects\""), "{line}");
        assert!(
            !line.contains(PROJECT),
            "the claim's value reached a log line: {line}"
        );
    }
}

#[tokio::test]
async fn an_entry_with_other_whitespace_or_an_invisible_character_grants_nothing_in_any_form() {
    let (logs, _guard) = integration_tests::capture_logs();
    for hidden in [
        "\u{a0}", "\u{3000}", "\u{2028}", "\t", "\u{200b}", "\u{feff}", "\u{fff9}",
    ] {
        let mut entries = vec![format!("{hidden}*"), format!("*{hidden}")];
        entries.extend([format!("{hidden}{PROJECT}"), format!("{PROJECT}{hidden}")]);
        for entry in entries {
            let json = serde_json::to_string(&[&entry]).unwrap_or_default();
            for claim in [entry.clone(), format!("[{entry}]"), json] {
                for route in Route::ALL {
                    let outcome = send(
                        route,
                        jwt(route, PROJECT, &[("projects", &claim)]),
                        Settings::default(),
                    )
                    .await;
                    assert_forbidden(&outcome, &format!("{route:?} with claim {claim:?}"));
                }
            }
        }
    }
    let logged = logs.text();
    let warnings: Vec<&str> = logged
        .lines()
        .filter(|line| line.contains("\"level\":\"WARN\"") && line.contains("projects claim refused"))
        .collect();
    assert!(!warnings.is_empty(), "{logged}");
    for line in warnings {
        assert!(line.contains("\"claim\":\"projects\""), "{line}");
        assert!(line.contains("invisible character"), "{line}");
        assert!(
            !line.contains(PROJECT),
            "the claim's value reached a log line: {line}"
        );
    }
}

#[tokio::test]
async fn every_form_a_claim_reaches_the_function_in() {
    let upper = PROJECT.to_uppercase();
    let forms = [
        format!("[{THIRD} {PROJECT}]"),
        format!("[\"{THIRD}\",\"{PROJECT}\"]"),
        format!("{THIRD} {PROJECT}"),
        format!("{THIRD},{PROJECT}"),
        format!("{THIRD}, {upper}"),
        upper.clone(),
    ];
    for route in [Route::McpServers, Route::Models] {
        for form in &forms {
            let outcome = send(
                route,
                jwt(route, PROJECT, &[("projects", form)]),
                Settings::default(),
            )
            .await;
            assert_ok(&outcome, &format!("{route:?} granted by {form}"));
            let outcome = send(
                route,
                jwt(route, OTHER, &[("projects", form)]),
                Settings::default(),
            )
            .await;
            assert_forbidden(&outcome, &format!("{route:?} not granted by {form}"));
        }
        // The query's project id is normalised before the comparison too.
        let outcome = send(
            route,
            jwt(route, &upper, &[("projects", PROJECT)]),
            Settings::default(),
        )
        .await;
        assert_ok(&outcome, &format!("{route:?} upper-case project_id"));
    }
}

#[tokio::test]
async fn missing_empty_and_malformed_claims_grant_nothing() {
    let malformed = [
        String::new(),
        "[]".into(),
        "not-a-project".into(),
        format!("{PROJECT} not-a-project"),
        format!("[{PROJECT}"),
        format!("[\"{PROJECT}\", 7]"),
        format!("{{\"{PROJECT}\": true}}"),
        "* and more".into(),
        format!("{{{PROJECT}}}"),
    ];
    for route in Route::ALL {
        let outcome = send(
            route,
            jwt(route, PROJECT, &[("sub", "agent")]),
            Settings::default(),
        )
        .await;
        assert_forbidden(&outcome, &format!("{route:?} without the claim"));
        // Another claim's grant is not this claim's.
        let outcome = send(
            route,
            jwt(route, PROJECT, &[("scope", "*"), ("groups", "*")]),
            Settings::default(),
        )
        .await;
        assert_forbidden(&outcome, &format!("{route:?} with other claims only"));
        for claim in &malformed {
            let outcome = send(
                route,
                jwt(route, PROJECT, &[("projects", claim)]),
                Settings::default(),
            )
            .await;
            assert_forbidden(&outcome, &format!("{route:?} with claim {claim:?}"));
        }
    }
}

#[tokio::test]
async fn the_claim_name_is_configurable() {
    let settings = Settings {
        projects_claim: "https://example.com/projects".into(),
        ..Settings::default()
    };
    let route = Route::Models;
    let event = jwt(route, PROJECT, &[("https://example.com/projects", PROJECT)]);
    assert_ok(&send(route, event, settings.clone()).await, "custom claim");
    let event = jwt(route, PROJECT, &[("projects", PROJECT)]);
    assert_forbidden(&send(route, event, settings).await, "default claim once renamed");
}

#[tokio::test]
async fn iam_callers_may_change_every_project_and_no_context_nothing() {
    for route in Route::ALL {
        for project in [PROJECT, OTHER] {
            // Event::put carries an IAM authorizer context unless told otherwise.
            let outcome = send(route, put(route, project), Settings::default()).await;
            assert_ok(&outcome, &format!("{route:?} IAM {project}"));
            let outcome = send(
                route,
                put(route, project).without_authorizer(),
                Settings::default(),
            )
            .await;
            assert_forbidden(&outcome, &format!("{route:?} no authorizer context"));
        }
    }
}

/// The record's key first (400), then the identity (403), then everything
/// else the request holds: a caller without a grant learns nothing of the
/// body rules, the preconditions or the media types, and costs no call.
#[tokio::test]
async fn the_key_is_judged_then_the_identity_then_the_rest() {
    for route in Route::ALL {
        let ungranted = [("projects", THIRD)];
        let bad_id = Event::put(route, "not-a-uuid", route.scoped().then_some(OTHER))
            .json(&route.full_body())
            .jwt(&ungranted);
        let outcome = send(route, bad_id, Settings::default()).await;
        assert_eq!(outcome.status, 400, "{route:?}: {}", outcome.body);
        assert_eq!(outcome.body["errorDetails"]["code"], "invalid_id");
        if route.scoped() {
            let bad_project = Event::put(route, ID, None)
                .query("project_id=nope")
                .jwt(&ungranted);
            let outcome = send(route, bad_project, Settings::default()).await;
            assert_eq!(
                outcome.body["errorDetails"]["code"], "invalid_project_id",
                "{route:?}"
            );
        }
        // Whatever else is wrong with the request, a caller without a grant
        // (a token for another project, or no authorizer context) hears 403.
        let big = format!(r#"{{"name": "{}"}}"#, "x".repeat(70_000));
        type Breaks<'a> = Box<dyn Fn(Event) -> Event + 'a>;
        let wrong: [(&str, Breaks<'_>); 9] = [
            ("empty", Box::new(|event: Event| event.body("{}"))),
            (
                "unknown",
                Box::new(|event: Event| event.body(r#"{"no_such_field": 1}"#)),
            ),
            (
                "bad value",
                Box::new(|event: Event| event.body(r#"{"name": ""}"#)),
            ),
            ("not JSON", Box::new(|event: Event| event.body("{"))),
            ("no body", Box::new(|event: Event| event)),
            ("too large", Box::new(move |event: Event| event.body(big.clone()))),
            (
                "media type",
                Box::new(|event: Event| {
                    event
                        .json(&route.full_body())
                        .header("content-type", "text/plain")
                }),
            ),
            (
                "If-Match",
                Box::new(|event: Event| event.json(&route.full_body()).header("if-match", "\"1\", *")),
            ),
            (
                "encoding",
                Box::new(|event: Event| event.json(&route.full_body()).header("content-encoding", "gzip")),
            ),
        ];
        for (case, make) in &wrong {
            for identity in ["token for another project", "no authorizer"] {
                let event = make(Event::put(route, ID, route.scoped().then_some(OTHER)));
                let event = match identity {
                    "no authorizer" => event.without_authorizer(),
                    _ => event.jwt(&ungranted),
                };
                let outcome = send(route, event, Settings::default()).await;
                assert_forbidden(&outcome, &format!("{route:?} {case}, {identity}"));
                assert_eq!(outcome.calls, 0);
            }
            // With a grant, the same request is judged on what it holds.
            let event = make(Event::put(route, ID, route.scoped().then_some(OTHER)))
                .jwt(&[("projects", &format!("{OTHER} {THIRD}"))]);
            let event = if route.scoped() {
                event
            } else {
                event.jwt(&[("projects", "*")])
            };
            let outcome = send(route, event, Settings::default()).await;
            assert!(
                [400, 413, 415].contains(&outcome.status),
                "{route:?} {case} granted: {}",
                outcome.body
            );
            assert_eq!(outcome.calls, 0);
        }
    }
}
