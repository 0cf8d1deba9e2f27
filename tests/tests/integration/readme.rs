//! Keeps the documents in step with the code and with each other.
//!
//! The API's rules and limits live in docs/api.md: every field a request may
//! set has a row in its field-rules table, each row states its rule's limits
//! as the code's consts have them and lists only codes the code can emit,
//! and the body and error-size limits are stated as they are.
//!
//! README.md stays a five-minute read (at most 200 lines) that indexes every
//! page in docs/, and every relative link in README.md and docs/*.md leads to
//! a file that exists and, with a `#fragment`, to a heading in it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use agent_server_shared::error::{
    FIELD_CODES, MAX_FIELD_ERRORS, MAX_FIELD_ERRORS_BYTES, MAX_FIELD_PATH_BYTES,
};
use agent_server_shared::json::{MAX_BODY_DEPTH, MAX_BODY_VALUES};
use agent_server_shared::records::{Resource, Table};
use agent_server_shared::request::MAX_BODY_BYTES;
use agent_server_shared::rules::parameters::{MAX_NUMBER_EXPONENT, MIN_NUMBER_EXPONENT};
use agent_server_shared::rules::{
    MAX_HEADER_NAME_CHARS, MAX_HEADER_VALUE_CHARS, MAX_HEADERS, MAX_NUMBER_DIGITS, MAX_PARAMETERS_BYTES,
    MAX_PARAMETERS_DEPTH, MAX_URL_CHARS,
};
use agent_server_shared::with_resource;
use integration_tests::{length_limits, repo_root};

/// The document that holds the API's field rules, limits and status codes.
const API_DOC: &str = "docs/api.md";

/// The most lines README.md may have.
const README_MAX_LINES: usize = 200;

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
    let fields: Vec<_> = Table::ALL
        .into_iter()
        .flat_map(|table| with_resource!(table, R => settable::<R>()))
        .collect();
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

/// The `headers` row names every refused header name the code holds, so
/// a name added to the code's lists is added to the document too.
#[test]
fn the_headers_row_names_every_refused_name() {
    use agent_server_shared::rules::headers::{FORBIDDEN_PREFIX, refused_names};
    let doc = api_doc();
    let rows = field_rows(&doc);
    let rule = row(&rows, "headers")[1].to_ascii_lowercase();
    for name in refused_names() {
        assert!(
            rule.contains(&format!("`{name}`")),
            "{API_DOC} `headers` does not name {name}"
        );
    }
    assert!(
        rule.contains(&format!("`{FORBIDDEN_PREFIX}*`")),
        "{API_DOC}: {FORBIDDEN_PREFIX}*"
    );
}

#[test]
fn the_field_rules_state_the_code_s_limits() {
    let doc = api_doc();
    let rows = field_rows(&doc);
    let lengths = Table::ALL
        .into_iter()
        .flat_map(|table| with_resource!(table, R => length_limits::<R>()));
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

#[test]
fn the_readme_is_a_five_minute_read() {
    let readme = read(&repo_root().join("README.md"));
    let lines = readme.lines().count();
    assert!(
        lines <= README_MAX_LINES,
        "README.md has {lines} lines, more than {README_MAX_LINES}: move the detail into docs/"
    );
}

/// README.md and every docs/*.md, as paths from the repository root.
fn documents() -> Vec<PathBuf> {
    let root = repo_root();
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("docs/")
        .map(|entry| entry.expect("docs/").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
        .collect();
    docs.sort();
    docs.insert(0, root.join("README.md"));
    docs
}

/// `path` from the repository root, as a link from README.md names it.
fn relative(path: &Path) -> String {
    let root = repo_root();
    let relative = path.strip_prefix(&root).unwrap_or(path);
    relative.to_string_lossy().into_owned()
}

/// Every route takes `PUT` and `PATCH`: an IAM policy the documents offer
/// (an `execute-api` ARN) names both, by `*` in the method's place, so a
/// `Deny` written from one covers both.
#[test]
fn every_iam_policy_example_covers_both_methods() {
    let mut seen = 0;
    for path in documents() {
        let text = read(&path);
        for (at, _) in text.match_indices("arn:aws:execute-api:") {
            let arn: String = text[at..]
                .chars()
                .take_while(|c| !c.is_whitespace() && !matches!(c, '"' | '`' | ',' | ')'))
                .collect();
            // arn:aws:execute-api:REGION:ACCOUNT:API_ID/STAGE/METHOD/PATH
            let method = arn.split('/').nth(2);
            if let Some(method) = method {
                seen += 1;
                assert!(
                    method == "*",
                    "{}: {arn} names the method {method}, not every method the route takes",
                    relative(&path)
                );
            }
        }
    }
    assert!(seen > 0, "no IAM policy example found");
}

#[test]
fn the_readme_indexes_every_page_in_docs() {
    let root = repo_root();
    let readme = read(&root.join("README.md"));
    let targets: Vec<String> = links(&readme).into_iter().map(|(target, _)| target).collect();
    for doc in documents().into_iter().skip(1) {
        let name = relative(&doc);
        assert!(
            targets.iter().any(|target| target == &name),
            "README.md does not link {name} from its index"
        );
    }
}

#[test]
fn every_relative_link_leads_somewhere() {
    let root = repo_root();
    let mut anchors: HashMap<PathBuf, Vec<String>> = HashMap::new();
    let mut broken = Vec::new();
    for doc in documents() {
        let name = relative(&doc);
        let text = read(&doc);
        let dir = doc.parent().unwrap_or(&root);
        for (target, line) in links(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (path, fragment) = target.split_once('#').unwrap_or((target.as_str(), ""));
            let file = if path.is_empty() {
                doc.clone()
            } else {
                dir.join(path)
            };
            if !file.exists() {
                broken.push(format!("{name}:{line}: ({target}): no file {path}"));
                continue;
            }
            if fragment.is_empty() || file.extension().is_none_or(|ext| ext != "md") {
                continue;
            }
            let file = file
                .canonicalize()
                .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            let known = anchors
                .entry(file.clone())
                .or_insert_with(|| heading_anchors(&read(&file)));
            if !known.iter().any(|anchor| anchor == fragment) {
                broken.push(format!(
                    "{name}:{line}: ({target}): no heading #{fragment} in {path}"
                ));
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// The text outside fenced code blocks, line by line (numbered from 1),
/// with inline code spans blanked out.
fn prose(text: &str) -> Vec<(usize, String)> {
    let mut in_fence = false;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            in_fence = !in_fence;
            continue;
        }
        if in_fence {
            continue;
        }
        let mut kept = String::new();
        for (j, part) in line.split('`').enumerate() {
            if j % 2 == 0 {
                kept.push_str(part);
            }
        }
        out.push((i + 1, kept));
    }
    out
}

/// Every inline link's target (`[text](target)`), with its line.
fn links(text: &str) -> Vec<(String, usize)> {
    let mut out = Vec::new();
    for (number, line) in prose(text) {
        let mut rest = line.as_str();
        while let Some(start) = rest.find("](") {
            let after = &rest[start + 2..];
            let end = after.find(')').unwrap_or(after.len());
            let target = after[..end].split_whitespace().next().unwrap_or("");
            out.push((target.trim_matches(['<', '>']).to_string(), number));
            rest = &after[end..];
        }
    }
    out
}

/// The anchors GitHub gives a document's headings: lowercase, spaces as
/// hyphens, punctuation dropped, a repeated one numbered `-1`, `-2`, ...
fn heading_anchors(text: &str) -> Vec<String> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut anchors = Vec::new();
    let mut in_fence = false;
    for line in text.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            in_fence = !in_fence;
            continue;
        }
        let hashes = line.chars().take_while(|&c| c == '#').count();
        if in_fence || !(1..=6).contains(&hashes) || !line[hashes..].starts_with(' ') {
            continue;
        }
        let slug: String = line[hashes..]
            .trim()
            .to_lowercase()
            .chars()
            .filter(|&c| c.is_alphanumeric() || c == '-' || c == '_' || c == ' ')
            .map(|c| if c == ' ' { '-' } else { c })
            .collect();
        let count = seen.entry(slug.clone()).or_insert(0);
        anchors.push(if *count == 0 {
            slug.clone()
        } else {
            format!("{slug}-{count}")
        });
        *count += 1;
    }
    anchors
}

#[test]
fn heading_anchors_are_github_s() {
    let doc = "# The API\n## JWT: putting `projects` in\n```\n# not a heading\n```\n## Locally\n## Locally\n";
    assert_eq!(
        heading_anchors(doc),
        ["the-api", "jwt-putting-projects-in", "locally", "locally-1"]
    );
    assert_eq!(
        links("[a](x.md#b) `[c](d)` [e](<f.md>)\n```\n[g](h)\n```\n"),
        [("x.md#b".to_string(), 1), ("f.md".to_string(), 1)]
    );
}
