//! Keeps the API's rules and limits, in docs/api.md, in step with the code:
//! every field a request may set has a row in its field-rules table, each
//! row states its rule's limits as the code's consts have them and lists
//! only codes the code can emit, and the body and error-size limits are
//! stated as they are.

use std::path::Path;

use agent_server_shared::error::{
    FIELD_CODES, MAX_FIELD_ERRORS, MAX_FIELD_ERRORS_BYTES, MAX_FIELD_PATH_BYTES,
};
use agent_server_shared::json::{MAX_BODY_DEPTH, MAX_BODY_VALUES};
use agent_server_shared::records::{ApiKey, McpServer, Model, Resource};
use agent_server_shared::request::MAX_BODY_BYTES;
use agent_server_shared::rules::parameters::{MAX_NUMBER_EXPONENT, MIN_NUMBER_EXPONENT};
use agent_server_shared::rules::{
    MAX_HEADER_NAME_CHARS, MAX_HEADER_VALUE_CHARS, MAX_HEADERS, MAX_NUMBER_DIGITS, MAX_PARAMETERS_BYTES,
    MAX_PARAMETERS_DEPTH, MAX_URL_CHARS,
};
use integration_tests::{length_limits, repo_root};

/// The document that holds the API's field rules, limits and status codes.
const API_DOC: &str = "docs/api.md";

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn api_doc() -> String {
    read(&repo_root().join(API_DOC))
}

/// `n` with thousands separated by commas, as the documents write them.
fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The rows of the table under the `Field rules` heading, as cells.
fn field_rows(doc: &str) -> Vec<Vec<String>> {
    let mut lines = doc.lines();
    lines
        .by_ref()
        .find(|line| line.starts_with('#') && line.trim_start_matches('#').trim() == "Field rules")
        .unwrap_or_else(|| panic!("{API_DOC}: no Field rules section"));
    lines
        .skip_while(|line| !line.starts_with('|'))
        .take_while(|line| line.starts_with('|'))
        .skip(2)
        .map(|line| {
            line.trim_matches('|')
                .split(" | ")
                .map(|cell| cell.trim().to_string())
                .collect()
        })
        .collect()
}

/// The row whose first cell names `field`.
fn row<'a>(rows: &'a [Vec<String>], field: &str) -> &'a [String] {
    rows.iter()
        .find(|cells| cells[0].contains(&format!("`{field}`")))
        .unwrap_or_else(|| panic!("{API_DOC}: no field-rules row for `{field}`"))
}

fn settable<R: Resource>() -> Vec<&'static str> {
    R::FIELDS
        .iter()
        .filter(|field| field.rule().is_some())
        .map(|field| field.name)
        .collect()
}

#[test]
fn every_settable_field_has_a_row_with_known_codes() {
    let doc = api_doc();
    let rows = field_rows(&doc);
    let fields = [settable::<ApiKey>(), settable::<McpServer>(), settable::<Model>()].concat();
    for field in fields {
        let cells = row(&rows, field);
        assert_eq!(cells.len(), 3, "{field}: {cells:?}");
        for code in cells[2].split(", ") {
            let code = code.trim_matches('`');
            assert!(
                FIELD_CODES.contains(&code),
                "{API_DOC} `{field}` lists `{code}`, which no rule emits"
            );
        }
    }
}

#[test]
fn the_field_rules_state_the_code_s_limits() {
    let doc = api_doc();
    let rows = field_rows(&doc);
    let lengths = [
        length_limits::<ApiKey>(),
        length_limits::<McpServer>(),
        length_limits::<Model>(),
    ];
    let lengths = lengths.concat().into_iter();
    let lengths = lengths.map(|(field, max)| (field, vec![format!("1–{max} characters")]));
    let limits = [
        ("endpoint", vec![format!("at most {MAX_URL_CHARS} characters")]),
        (
            "headers",
            vec![
                format!("at most {MAX_HEADERS} entries"),
                format!("1–{MAX_HEADER_NAME_CHARS} characters"),
                format!("at most {MAX_HEADER_VALUE_CHARS} characters"),
            ],
        ),
        (
            "parameters",
            vec![
                format!("at most {} KiB as compact JSON", MAX_PARAMETERS_BYTES / 1024),
                format!("at most {MAX_PARAMETERS_DEPTH} levels deep"),
                format!("at most {MAX_NUMBER_DIGITS} significant digits"),
                format!("1e{MIN_NUMBER_EXPONENT}"),
                format!("1e{}", MAX_NUMBER_EXPONENT + 1),
            ],
        ),
    ];
    for (field, phrases) in limits.into_iter().chain(lengths) {
        let rule = &row(&rows, field)[1];
        for phrase in phrases {
            assert!(
                rule.contains(&phrase),
                "{API_DOC} `{field}`: `{phrase}` not in `{rule}`"
            );
        }
    }
}

#[test]
fn the_body_and_error_limits_are_stated_as_they_are() {
    let doc = api_doc();
    for phrase in [
        format!(
            "Body larger than {} KiB ({} bytes)",
            MAX_BODY_BYTES / 1024,
            thousands(MAX_BODY_BYTES)
        ),
        format!("more than {} JSON values", thousands(MAX_BODY_VALUES)),
        format!("at most {} JSON values", thousands(MAX_BODY_VALUES)),
        format!("nest at most {MAX_BODY_DEPTH} levels"),
        format!("nested more than {MAX_BODY_DEPTH} levels"),
        format!("(up to {MAX_FIELD_ERRORS})"),
        format!("longer than {MAX_FIELD_PATH_BYTES} bytes"),
        format!("pass {} KiB", MAX_FIELD_ERRORS_BYTES / 1024),
    ] {
        assert!(doc.contains(&phrase), "{API_DOC} does not say `{phrase}`");
    }
}
