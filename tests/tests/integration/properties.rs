//! Property tests over the whole request path (the Lambda entry's event reading,
//! extraction, validation, store, envelope) on the in-memory store:
//! arbitrary bytes and arbitrary JSON never panic and always produce one of
//! the documented statuses in a well-formed envelope, and whatever
//! validation accepts is stored and returned JSON-equal.

use agent_server_shared::rules::Policy;
use agent_server_shared::store::Key;
use integration_tests::events::Event;
use integration_tests::{Route, body_json, memory_app, same_json};
use proptest::prelude::*;
use serde_json::{Map, Number, Value};

const PROJECT: &str = "8a4b2c1d-3e5f-4a6b-8c7d-9e0f1a2b3c4d";
const ID: &str = "7c8d9e0f-1a2b-4c3d-9e4f-5a6b7c8d9e0f";
const DOCUMENTED: [u16; 6] = [200, 400, 404, 412, 413, 415];

fn route() -> impl Strategy<Value = Route> {
    prop::sample::select(Route::ALL.to_vec())
}

/// Numbers as JSON text, from ordinary to DynamoDB's limits and beyond.
fn number() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| Number::from_f64(f).map_or(Value::Null, Value::Number)),
        ("-?[1-9][0-9]{0,45}", -140i32..140).prop_map(|(mantissa, exponent)| {
            serde_json::from_str::<Value>(&format!("{mantissa}e{exponent}")).unwrap_or(Value::Null)
        }),
    ]
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-zA-Z0-9 _.-]{0,20}",
        any::<String>(),
        "\\PC{0,300}",
        Just(String::new()),
        Just("https://mcp.example.com/sse".to_string()),
        Just("http://169.254.169.254/".to_string()),
        prop::sample::select(vec!["OpenAI", "Anthropic", "Gemini", "xAI", "openai"]).prop_map(String::from),
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        number(),
        text().prop_map(Value::String),
    ];
    leaf.prop_recursive(6, 64, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(text(), inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A value for `field` that usually keeps its rule, sometimes not.
fn field_value(field: &'static str) -> BoxedStrategy<Value> {
    let valid: BoxedStrategy<Value> = match field {
        "name" | "model_id" => "[A-Za-z0-9][A-Za-z0-9 ._-]{0,40}".prop_map(Value::from).boxed(),
        "api_key" => "[A-Za-z0-9_-]{1,80}".prop_map(Value::from).boxed(),
        "enabled" => any::<bool>().prop_map(Value::Bool).boxed(),
        "endpoint" => "https://[a-z]{1,10}\\.example\\.com(:[1-9][0-9]{0,3})?/[a-z/]{0,20}"
            .prop_map(Value::from)
            .boxed(),
        "headers" => prop::collection::btree_map("[A-Za-z][A-Za-z0-9-]{0,15}", "[ -~]{0,30}", 0..5)
            .prop_map(|m| Value::Object(m.into_iter().map(|(k, v)| (k, Value::from(v))).collect()))
            .boxed(),
        "provider_type" => prop::sample::select(vec!["OpenAI", "Anthropic", "Gemini", "xAI"])
            .prop_map(Value::from)
            .boxed(),
        "parameters" => prop::collection::btree_map("[a-z_]{1,10}", json_value(), 0..5)
            .prop_map(|m| Value::Object(m.into_iter().collect()))
            .boxed(),
        _ => json_value().boxed(),
    };
    prop_oneof![6 => valid, 1 => json_value()].boxed()
}

/// Bodies of the route's own fields (and now and then another name), so
/// that a good share passes validation.
fn body(route: Route) -> BoxedStrategy<Map<String, Value>> {
    let fields: &'static [&'static str] = match route {
        Route::ApiKeys => &["name", "api_key", "enabled"],
        Route::McpServers => &["name", "endpoint", "headers"],
        Route::Models => &["name", "model_id", "provider_type", "parameters"],
    };
    let entry = prop_oneof![
        12 => prop::sample::select(fields.to_vec()),
        1 => prop::sample::select(vec!["id", "version", "other", "provider_type", "api_key"]),
    ]
    .prop_flat_map(|field| (Just(field), field_value(field)));
    prop::collection::vec(entry, 0..5)
        .prop_map(|entries| entries.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
        .boxed()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().build().unwrap()
}

fn event(route: Route) -> Event {
    Event::put(route, ID, route.scoped().then_some(PROJECT))
}

/// Sends the event to a seeded app; checks the envelope; returns status and body.
fn exchange(route: Route, event: Event) -> (u16, Value, agent_server_shared::store::MemoryStore) {
    let app = memory_app(Policy::default());
    assert!(app.store.put(route.table(), route.item(PROJECT, ID)));
    let response = runtime().block_on(route.call(&app, event.request()));
    let status = response.status().as_u16();
    let body = body_json(&response);
    assert!(
        DOCUMENTED.contains(&status),
        "undocumented status {status}: {body}"
    );
    assert_eq!(body["status"], status);
    assert_eq!(body["error"], status != 200);
    assert_eq!(body.as_object().map(Map::len), Some(5));
    if status == 200 {
        assert!(body["errorDetails"].as_object().is_some_and(Map::is_empty));
    } else {
        assert!(body["errorDetails"]["code"].is_string());
        assert!(body["data"].is_null());
    }
    (status, body, app.store)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(route in route(), bytes in prop::collection::vec(any::<u8>(), 0..2048)) {
        let (status, _, store) = exchange(route, event(route).binary(&bytes));
        if status != 200 {
            prop_assert_eq!(store.calls(), 0);
        }
    }

    #[test]
    fn arbitrary_json_never_panics(route in route(), value in json_value()) {
        let (status, _, store) = exchange(route, event(route).json(&value));
        prop_assert!(status == 200 || store.calls() <= 1);
        if !value.is_object() {
            prop_assert_eq!(status, 400);
            prop_assert_eq!(store.calls(), 0);
        }
    }

    #[test]
    fn accepted_bodies_are_stored_and_returned_json_equal((route, body) in route().prop_flat_map(|r| (Just(r), body(r)))) {
        let (status, response, store) = exchange(route, event(route).json(&Value::Object(body.clone())));
        if status == 200 {
            let key = Key { project_id: route.scoped().then(|| PROJECT.to_string()), id: ID.to_string() };
            let stored = store.get(route.table(), &key).unwrap_or_default();
            for (name, value) in &body {
                let kept = stored.contains_key(name).then(|| integration_tests::stored_json(&stored, name));
                prop_assert!(kept.as_ref().is_some_and(|kept| same_json(kept, value)), "{} stored as {:?}", name, kept);
                if name != "api_key" {
                    prop_assert!(same_json(&response["data"][name], value), "{} returned as {}", name, response["data"][name]);
                }
            }
            prop_assert!(!response.to_string().contains("\"api_key\""));
        } else {
            prop_assert_eq!(store.calls(), if [404, 412].contains(&status) { 1 } else { 0 });
        }
    }
}

/// The round-trip property is only as good as the share of bodies that
/// pass validation: make sure it is not vacuous.
#[test]
fn the_body_strategy_reaches_acceptance() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let (mut accepted, total) = (0, 300);
    for _ in 0..total {
        let route = route()
            .new_tree(&mut runner)
            .map(|t| t.current())
            .unwrap_or(Route::Models);
        let body = body(route)
            .new_tree(&mut runner)
            .map(|t| t.current())
            .unwrap_or_default();
        if exchange(route, event(route).json(&Value::Object(body))).0 == 200 {
            accepted += 1;
        }
    }
    assert!(
        accepted * 10 >= total,
        "only {accepted} of {total} generated bodies were accepted"
    );
    println!("properties: {accepted} of {total} generated bodies accepted");
}

/// Characters a projects claim's entry may not hold: whitespace other than
/// the ASCII space that separates entries, and characters that show
/// nothing (format controls, default-ignorable and unassigned code points,
/// combining marks).
const HIDDEN: [char; 30] = [
    '\t',
    '\n',
    '\r',
    '\u{b}',
    '\u{c}',
    '\u{85}',
    '\u{a0}',
    '\u{1680}',
    '\u{2000}',
    '\u{2007}',
    '\u{200a}',
    '\u{2028}',
    '\u{2029}',
    '\u{202f}',
    '\u{205f}',
    '\u{3000}',
    '\u{200b}',
    '\u{200c}',
    '\u{200d}',
    '\u{2060}',
    '\u{feff}',
    '\u{ad}',
    '\u{180e}',
    '\u{fff9}',
    '\u{fffb}',
    '\u{34f}',
    '\u{e0020}',
    '\u{13430}',
    '\u{378}',
    '\u{3164}',
];
/// The projects a generated claim may name; the requests target the first two.
const CLAIMED: [&str; 3] = [PROJECT, OTHER_PROJECT, "1c2d3e4f-5a6b-4c7d-8e9f-0a1b2c3d4e5f"];
const OTHER_PROJECT: &str = "0b7c6d5e-4f3a-4b2c-9d1e-0f9a8b7c6d5e";

/// One entry of a claim: an id in either letter case, `*` or junk, with
/// now and then a hidden character inserted somewhere in it.
fn claim_entry() -> impl Strategy<Value = (String, bool)> {
    let base = prop_oneof![
        4 => (prop::sample::select(CLAIMED.to_vec()), any::<bool>())
            .prop_map(|(id, upper)| if upper { id.to_uppercase() } else { id.to_string() }),
        2 => Just("*".to_string()),
        1 => "[0-9a-f*-]{1,8}",
    ];
    let hidden = prop::option::weighted(
        0.4,
        (
            prop::sample::select(HIDDEN.to_vec()),
            any::<prop::sample::Index>(),
        ),
    );
    (base, hidden).prop_map(|(entry, hidden)| match hidden {
        None => (entry, false),
        Some((c, at)) => {
            let mut chars: Vec<char> = entry.chars().collect();
            chars.insert(at.index(chars.len() + 1), c);
            (chars.into_iter().collect(), true)
        }
    })
}

/// The list as each form a claim reaches the function in spells it: API
/// Gateway's rendering of an array, a JSON array string, space-separated,
/// comma-separated, comma-and-space-separated.
fn claim_forms(list: &[String]) -> [String; 5] {
    [
        format!("[{}]", list.join(" ")),
        serde_json::to_string(list).unwrap_or_default(),
        list.join(" "),
        list.join(","),
        list.join(", "),
    ]
}

/// The status of a `PUT` by a caller with this projects claim: on a model
/// of each of the first two claimable projects, and on an API key.
fn claim_statuses(runtime: &tokio::runtime::Runtime, claim: &str) -> [u16; 3] {
    let targets = [
        (Route::Models, Some(PROJECT)),
        (Route::Models, Some(OTHER_PROJECT)),
        (Route::ApiKeys, None),
    ];
    targets.map(|(route, project)| {
        let app = memory_app(Policy::default());
        app.store
            .put(route.table(), route.item(project.unwrap_or(PROJECT), ID));
        let event = Event::put(route, ID, project)
            .json(&route.full_body())
            .jwt(&[("sub", "agent"), ("projects", claim)]);
        let response = runtime.block_on(route.call(&app, event.request()));
        let status = response.status().as_u16();
        assert!(
            status == 200 || status == 403,
            "{claim:?}: {status} {}",
            body_json(&response)
        );
        status
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    /// Every form of the same list grants the same, and what the contract
    /// says: nothing if an entry holds a hidden character or `*` stands
    /// beside anything, everything for `*` alone, else the listed ids (and
    /// nothing if one entry is neither an id nor `*`).
    #[test]
    fn every_form_of_a_claim_grants_the_same(entries in prop::collection::vec(claim_entry(), 1..4)) {
        let runtime = runtime();
        let hidden = entries.iter().any(|(_, hidden)| *hidden);
        let list: Vec<String> = entries.into_iter().map(|(entry, _)| entry).collect();
        let ids: Option<Vec<String>> = list.iter().map(|entry| {
            CLAIMED.iter().find(|id| id.eq_ignore_ascii_case(entry)).map(|id| id.to_string())
        }).collect();
        let granted = |project: &str| ids.as_ref().is_some_and(|ids| ids.iter().any(|id| id == project));
        let expected = match (hidden, list.as_slice()) {
            (true, _) => [403; 3],
            (false, [only]) if only == "*" => [200; 3],
            // API keys belong to no project: only `*` grants them.
            (false, _) => [granted(PROJECT), granted(OTHER_PROJECT), false].map(|ok| if ok { 200 } else { 403 }),
        };
        for claim in claim_forms(&list) {
            prop_assert_eq!(claim_statuses(&runtime, &claim), expected, "{:?} as {:?}", list, claim);
        }
    }
}

/// A spelling of `name` a CGI-style server reads as `name`: each letter in
/// a chosen case, each `-` kept or written `_`.
fn respelled(name: &str, choices: &[bool]) -> String {
    name.chars()
        .zip(choices.iter().cycle())
        .map(|(c, flip)| match (c, flip) {
            ('-', true) => '_',
            (c, true) => c.to_ascii_uppercase(),
            (c, false) => c.to_ascii_lowercase(),
        })
        .collect()
}

/// The problems a `PUT` of `headers` on an MCP server is refused for.
fn header_problems(runtime: &tokio::runtime::Runtime, headers: Value) -> (u16, Vec<(String, String)>) {
    let route = Route::McpServers;
    let app = memory_app(Policy::default());
    app.store.put(route.table(), route.item(PROJECT, ID));
    let event = Event::put(route, ID, Some(PROJECT)).json(&serde_json::json!({ "headers": headers }));
    let response = runtime.block_on(route.call(&app, event.request()));
    let body = body_json(&response);
    let fields = body["errorDetails"]["fields"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let fields = fields
        .iter()
        .map(|f| {
            (
                f["field"].as_str().unwrap_or_default().to_string(),
                f["code"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    (response.status().as_u16(), fields)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    /// Every refused header name is refused in every spelling a server
    /// reads as it, through the whole request path.
    #[test]
    fn refused_header_names_are_refused_in_every_spelling(
        name in prop::sample::select(
            agent_server_shared::rules::headers::refused_names()
                .map(|n| n.to_string())
                .chain(["proxy-authorization".to_string(), "proxy-x_y".to_string()])
                .collect::<Vec<_>>()
        ),
        choices in prop::collection::vec(any::<bool>(), 1..12),
    ) {
        let spelling = respelled(&name, &choices);
        let (status, fields) = header_problems(&runtime(), serde_json::json!({ spelling.clone(): "v" }));
        prop_assert_eq!(status, 400);
        prop_assert_eq!(fields, vec![(format!("headers.{spelling}"), "forbidden_name".to_string())]);
    }

    /// Two names a server reads as one are a duplicate, whatever their
    /// letter case and `-`/`_` spelling; names that differ otherwise are not.
    #[test]
    fn header_names_equal_once_read_are_duplicates(
        name in "[A-Za-z][A-Za-z0-9]{0,6}(-[A-Za-z0-9]{1,6}){1,3}",
        first in prop::collection::vec(any::<bool>(), 1..12),
        second in prop::collection::vec(any::<bool>(), 1..12),
    ) {
        let (one, other) = (respelled(&name, &first), respelled(&name, &second));
        prop_assume!(one != other && !agent_server_shared::rules::headers::is_forbidden_name(&name));
        let runtime = runtime();
        let (status, fields) = header_problems(&runtime, serde_json::json!({ one.clone(): "a", other.clone(): "b" }));
        let later = if one < other { &other } else { &one };
        prop_assert_eq!(status, 400);
        prop_assert_eq!(fields, vec![(format!("headers.{later}"), "duplicate_name".to_string())]);
        // Either spelling alone is an ordinary name.
        prop_assert_eq!(header_problems(&runtime, serde_json::json!({ other.clone(): "b" })).0, 200);
    }
}
