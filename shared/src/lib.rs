//! Everything the three agent-server update functions have in common.
//!
//! Lambda enters through [`lambda::run`], the local API through
//! [`lambda::respond`]; both reach [`handler::serve`], the one edge: the
//! key and body are read ([`request`], checked against the [`rules`] of
//! their [`records::Resource`] by [`patch`] or [`merge`]), [`auth`] decides
//! the grant, then one run of the [`writes::Pipeline`] reads, seals
//! ([`seal`]) and writes ([`store`]); [`envelope`] renders the outcome, and
//! [`error::ApiError`] is where a failure becomes a status code.

pub mod apigw;
pub mod app;
pub mod auth;
pub mod budget;
pub mod config;
pub mod envelope;
pub mod error;
pub mod handler;
pub mod ids;
pub mod item;
pub mod jcs;
pub mod json;
pub mod keycheck;
pub mod lambda;
pub mod logging;
pub mod mcp;
pub mod merge;
pub mod metrics;
pub mod number;
pub mod patch;
pub mod provider;
pub mod records;
pub mod request;
pub mod rules;
pub mod seal;
pub mod secret;
pub mod store;
pub mod writes;

pub use app::App;
pub use config::Settings;
pub use error::{ApiError, FieldError};
pub use provider::ProviderType;
pub use records::Table;
pub use records::{ApiKey, McpServer, Model, Resource};
pub use store::Store;

pub use apigw::Request;
/// The response every handler returns; [`lambda::event_response`] puts it
/// in the form API Gateway takes back.
pub type Response = aws_lambda_events::http::Response<aws_lambda_events::encodings::Body>;

/// The crate's imports run one way: no module depends, directly or through
/// others, on a module that depends on it, and storage never reaches for
/// validation. Read from the source (`use crate::…` and `crate::…` paths in
/// code, doc comments and test modules aside), so a new cycle fails here.
#[cfg(test)]
mod imports {
    use std::collections::{BTreeMap, BTreeSet};
    use std::path::Path;

    /// `module -> modules it uses`, by top-level module (`store`, `rules`).
    fn graph() -> BTreeMap<String, BTreeSet<String>> {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        let mut files = vec![src.clone()];
        while let Some(path) = files.pop() {
            let Ok(entries) = std::fs::read_dir(&path) else {
                continue;
            };
            for entry in entries.flatten() {
                let path = entry.path();
                if path.is_dir() {
                    files.push(path);
                    continue;
                }
                let relative = path
                    .strip_prefix(&src)
                    .map(|p| p.to_string_lossy().into_owned())
                    .unwrap_or_default();
                let module = relative.split(['/', '.']).next().unwrap_or_default().to_string();
                if module == "lib" {
                    continue;
                }
                let text = std::fs::read_to_string(&path).unwrap_or_default();
                let code = text.split("#[cfg(test)]").next().unwrap_or_default();
                let uses = graph.entry(module.clone()).or_default();
                for line in code.lines().map(str::trim).filter(|line| !line.starts_with("//")) {
                    let mut rest = line;
                    while let Some(at) = rest.find("crate::") {
                        rest = &rest[at + "crate::".len()..];
                        let names: Vec<&str> = match rest.strip_prefix('{') {
                            Some(group) => group.split(['}', ',']).map(str::trim).collect(),
                            None => vec![rest],
                        };
                        for name in names {
                            let used: String = name
                                .chars()
                                .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                                .collect();
                            if !used.is_empty() && used != module {
                                uses.insert(used);
                            }
                        }
                    }
                }
            }
        }
        graph
    }

    #[test]
    fn no_module_cycle_and_storage_does_not_import_validation() {
        let graph = graph();
        assert!(
            graph.contains_key("store") && graph.contains_key("rules"),
            "{graph:?}"
        );
        for start in graph.keys() {
            let mut seen = BTreeSet::new();
            let mut stack: Vec<&String> = graph[start].iter().collect();
            while let Some(next) = stack.pop() {
                assert_ne!(next, start, "{start} depends on itself through {seen:?}");
                if seen.insert(next.clone()) {
                    stack.extend(graph.get(next).into_iter().flatten());
                }
            }
        }
        for storage in ["store", "item", "number"] {
            let uses = &graph[storage];
            assert!(
                !uses.contains("rules") && !uses.contains("patch"),
                "{storage} imports validation: {uses:?}"
            );
        }
    }

    /// Storage types stay in storage: outside tests, DynamoDB's
    /// `AttributeValue` (and any other of the SDK's types and primitives) is
    /// named by the DynamoDB store and the one module that converts to and
    /// from it; merge, patch, verify and the records hold `item::Attr`.
    #[test]
    fn the_sdk_value_type_is_named_only_where_items_cross_to_dynamodb() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut naming = BTreeSet::new();
        let mut files = vec![src.clone()];
        while let Some(path) = files.pop() {
            for entry in std::fs::read_dir(&path).into_iter().flatten().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    files.push(path);
                } else if std::fs::read_to_string(&path)
                    .unwrap_or_default()
                    .split("#[cfg(test)]")
                    .next()
                    .is_some_and(|code| {
                        [
                            "AttributeValue",
                            "aws_sdk_dynamodb::types",
                            "aws_sdk_dynamodb::primitives",
                        ]
                        .iter()
                        .any(|name| code.contains(name))
                    })
                {
                    let relative = path.strip_prefix(&src).map(|p| p.to_string_lossy().into_owned());
                    naming.insert(relative.unwrap_or_default());
                }
            }
        }
        let allowed = BTreeSet::from(["item.rs".to_string(), "store/dynamo.rs".to_string()]);
        assert!(naming.contains("store/dynamo.rs"), "{naming:?}");
        assert!(
            naming.is_subset(&allowed),
            "{:?}",
            naming.difference(&allowed).collect::<Vec<_>>()
        );
    }
}
