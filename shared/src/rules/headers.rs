//! The MCP server's `headers`: names an HTTP client can send as they are,
//! and values no client can be tricked into framing differently.

use std::collections::HashSet;

use serde_json::Value;

use super::wrong_type;
use crate::error::{FieldError, FieldErrors};

/// Most entries in `headers`.
pub const MAX_HEADERS: usize = 64;
/// Longest header name.
pub const MAX_HEADER_NAME_CHARS: usize = 256;
/// Longest header value.
pub const MAX_HEADER_VALUE_CHARS: usize = 8192;
/// Largest `headers`, all of them together, as compact JSON: what a `PUT`
/// body (at most 64 KiB) can carry. A merge patch is held to it after the
/// merge, so repeated patches cannot grow a record past what DynamoDB
/// stores in one item (400 KB).
pub const MAX_HEADERS_BYTES: usize = 64 * 1024;

/// Header names the HTTP client must own: they frame or code the message,
/// or shape the connection or its handshake, so a stored one could change
/// how a request is sent.
pub const FORBIDDEN_NAMES: [&str; 11] = [
    "host",
    "content-length",
    "transfer-encoding",
    "content-encoding",
    "connection",
    "keep-alive",
    "upgrade",
    "te",
    "trailer",
    "expect",
    "http2-settings",
];
/// Header names that exist only to unlock a cloud metadata service: GCE's
/// `Metadata-Flavor: Google` and its legacy `X-Google-Metadata-Request:
/// True`, Azure IMDS's `Metadata: true`, EC2 IMDSv2's session token and its
/// TTL, and Alibaba Cloud ECS's hardened-mode token and its TTL. A stored
/// one helps an agent that is pointed at a metadata service read it. Each
/// cloud's own metadata-service documentation names the header its
/// service demands; a new one joins this list.
pub const METADATA_HEADERS: [&str; 7] = [
    "metadata-flavor",
    "metadata",
    "x-google-metadata-request",
    "x-aws-ec2-metadata-token",
    "x-aws-ec2-metadata-token-ttl-seconds",
    "x-aliyun-ecs-metadata-token",
    "x-aliyun-ecs-metadata-token-ttl-seconds",
];
/// Header names the MCP client owns: Streamable HTTP's session and
/// protocol version, and the event id a resumed stream carries. A stored
/// one would be sent beside (or instead of) the client's own.
pub const MCP_CLIENT_HEADERS: [&str; 3] = ["mcp-session-id", "mcp-protocol-version", "last-event-id"];
/// Every name with this prefix (any case) is the client's too.
pub const FORBIDDEN_PREFIX: &str = "proxy-";

/// Every name refused whole (lowercase, `-` spelled): the HTTP client's,
/// the metadata services', the MCP client's; [`FORBIDDEN_PREFIX`] beside them.
pub fn refused_names() -> impl Iterator<Item = &'static str> {
    FORBIDDEN_NAMES
        .into_iter()
        .chain(METADATA_HEADERS)
        .chain(MCP_CLIENT_HEADERS)
}

/// RFC 9110 `tchar`.
fn is_token_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c)
}

/// The name a server may read `name` as: letter case ignored, and `_`
/// read as `-`, since CGI, WSGI and the servers built on them map both to
/// the same variable (`X_Api_Key` and `X-Api-Key` are both
/// `HTTP_X_API_KEY`). Two names with the same reading are one header, and
/// a refused name is refused in every spelling of it.
pub fn reading(name: &str) -> String {
    name.chars()
        .map(|c| match c {
            '_' => '-',
            c => c.to_ascii_lowercase(),
        })
        .collect()
}

/// Whether `a` and `b` name the same header (the same [`reading`]): what a
/// merge patch's member replaces or removes.
pub fn same_header(a: &str, b: &str) -> bool {
    a.len() == b.len() && reading(a) == reading(b)
}

/// Whether the HTTP or MCP client must own a header of this name, or it
/// unlocks a metadata service, in any letter case and with `_` read as `-`.
pub fn is_forbidden_name(name: &str) -> bool {
    forbidden_reading(&reading(name))
}

fn forbidden_reading(read: &str) -> bool {
    refused_names().any(|name| name == read) || read.starts_with(FORBIDDEN_PREFIX)
}

pub(super) fn headers(path: &str, value: &Value, errors: &mut FieldErrors) {
    let Some(headers) = value.as_object() else {
        return errors.push(wrong_type(path, "an object", value));
    };
    if headers.len() > MAX_HEADERS {
        errors.push(FieldError::new(
            path,
            "too_many_entries",
            format!("must have at most {MAX_HEADERS} entries"),
        ));
    }
    if super::compact_len_exceeds(value, MAX_HEADERS_BYTES) {
        errors.push(FieldError::new(
            path,
            "too_large",
            format!("must be at most {MAX_HEADERS_BYTES} bytes as compact JSON, all headers together"),
        ));
    }
    let mut seen = HashSet::new();
    // Name order, whatever the map's order, so the same body always names
    // the same duplicate.
    let mut entries: Vec<(&String, &Value)> = headers.iter().collect();
    entries.sort_unstable_by_key(|(name, _)| *name);
    let mut field = String::new();
    for (name, header_value) in entries {
        if errors.is_full() {
            return;
        }
        field.clear();
        field.push_str(path);
        field.push('.');
        field.push_str(name);
        let length = name.chars().count();
        let read = reading(name);
        if length == 0 || length > MAX_HEADER_NAME_CHARS || !name.chars().all(is_token_char) {
            errors.push(FieldError::new(
                &field,
                "invalid_name",
                format!("header names must be HTTP tokens of 1 to {MAX_HEADER_NAME_CHARS} characters"),
            ));
        } else if forbidden_reading(&read) {
            errors.push(FieldError::new(
                &field,
                "forbidden_name",
                "must not be a header the HTTP client sets itself (Host, Content-Length, \
                 Transfer-Encoding, Content-Encoding, Connection, Keep-Alive, Upgrade, TE, Trailer, \
                 Expect, HTTP2-Settings, Proxy-*) nor one that unlocks a cloud metadata service \
                 (Metadata-Flavor, Metadata, X-Google-Metadata-Request, X-aws-ec2-metadata-token, \
                 X-aws-ec2-metadata-token-ttl-seconds, X-aliyun-ecs-metadata-token, \
                 X-aliyun-ecs-metadata-token-ttl-seconds), nor one the MCP client sets itself \
                 (Mcp-Session-Id, MCP-Protocol-Version, Last-Event-ID), in any case, with _ read as -",
            ));
        } else if !seen.insert(read) {
            errors.push(FieldError::new(
                &field,
                "duplicate_name",
                "header names must be unique regardless of letter case, with _ read as -",
            ));
        }
        match header_value.as_str() {
            None => errors.push(wrong_type(&field, "a string", header_value)),
            Some(text) if text.chars().count() > MAX_HEADER_VALUE_CHARS => {
                errors.push(FieldError::new(
                    &field,
                    "too_long",
                    format!("header values must be at most {MAX_HEADER_VALUE_CHARS} characters"),
                ));
            }
            // RFC 9110 field values: visible characters, spaces and tabs.
            Some(text) if text.chars().any(|c| c.is_control() && c != '\t') => errors.push(FieldError::new(
                &field,
                "invalid_value",
                "header values must not contain control characters other than tab (no CR, LF, NUL or DEL)",
            )),
            // RFC 9110's field-value begins and ends with a visible
            // character: clients trim, refuse or mangle the rest.
            Some(text) if text.starts_with([' ', '\t']) || text.ends_with([' ', '\t']) => {
                errors.push(FieldError::new(
                    &field,
                    "invalid_value",
                    "header values must not start or end with a space or tab",
                ));
            }
            Some(text) => {
                if let Some(problem) = super::text::hidden_character(&field, text) {
                    errors.push(problem);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::Rule;
    use super::super::testing::{codes, errors, problems};
    use serde_json::{Value, json};

    #[test]
    fn header_rules() {
        assert!(codes(Rule::Headers, json!({})).is_empty());
        assert!(
            codes(
                Rule::Headers,
                json!({"Authorization": "Bearer x", "X-Api-Key": "", "X-Tab": "a\tb é"})
            )
            .is_empty()
        );
        let many: serde_json::Map<String, Value> = (0..64).map(|i| (format!("h{i}"), json!("v"))).collect();
        assert!(codes(Rule::Headers, Value::Object(many.clone())).is_empty());
        let mut too_many = many;
        too_many.insert("h64".into(), json!("v"));
        assert_eq!(
            codes(Rule::Headers, Value::Object(too_many)),
            ["too_many_entries"]
        );

        assert_eq!(
            problems(Rule::Headers, json!({"Bad Name": "v"})),
            [("headers.Bad Name".to_string(), "invalid_name")]
        );
        assert_eq!(codes(Rule::Headers, json!({"": "v"})), ["invalid_name"]);
        assert_eq!(codes(Rule::Headers, json!({"X:Y": "v"})), ["invalid_name"]);
        assert_eq!(codes(Rule::Headers, json!({"Ünicode": "v"})), ["invalid_name"]);
        assert!(codes(Rule::Headers, json!({"a".repeat(256): "v"})).is_empty());
        assert_eq!(
            codes(Rule::Headers, json!({"a".repeat(257): "v"})),
            ["invalid_name"]
        );
        assert!(codes(Rule::Headers, json!({"!#$%&'*+-.^_`|~09azAZ": "v"})).is_empty());

        let duplicate = problems(Rule::Headers, json!({"X-Key": "a", "x-key": "b"}));
        assert_eq!(duplicate.len(), 1);
        assert_eq!(duplicate[0].1, "duplicate_name");

        assert!(codes(Rule::Headers, json!({"A": "v".repeat(8192)})).is_empty());
        assert_eq!(codes(Rule::Headers, json!({"A": "v".repeat(8193)})), ["too_long"]);
        assert_eq!(codes(Rule::Headers, json!({"A": 1})), ["invalid_type"]);
        assert_eq!(codes(Rule::Headers, json!({"A": null})), ["invalid_type"]);
        // Every problem is listed, not just the first.
        assert_eq!(
            codes(Rule::Headers, json!({"A": 1, "B C": "x", "D": "\n"})).len(),
            3
        );
    }

    #[test]
    fn values_are_rfc_9110_field_values() {
        for bad in [
            "a\rb",
            "a\nb",
            "a\u{0}b",
            "a\u{1}b",
            "\u{1b}[31m",
            "a\u{7f}",
            "a\u{85}",
            "\u{b}",
            "\u{c}",
        ] {
            assert_eq!(
                problems(Rule::Headers, json!({"Authorization": bad})),
                [("headers.Authorization".to_string(), "invalid_value")],
                "{bad:?}"
            );
        }
        for ok in ["a\tb", "in  side", "ünïcödé", "!\"#~"] {
            assert!(codes(Rule::Headers, json!({ "X": ok })).is_empty(), "{ok:?}");
        }
    }

    #[test]
    fn names_the_client_owns_are_refused_in_any_case() {
        for name in [
            "Host",
            "host",
            "Content-Length",
            "TRANSFER-ENCODING",
            "Connection",
            "Keep-Alive",
            "Upgrade",
            "TE",
            "te",
            "Trailer",
            "Proxy-Authorization",
            "proxy-connection",
            "PROXY-X",
        ] {
            assert_eq!(
                problems(Rule::Headers, json!({ name: "v" })),
                [(format!("headers.{name}"), "forbidden_name")],
                "{name}"
            );
        }
        for ok in [
            "Hosts",
            "X-Host",
            "Content-Type",
            "Teapot",
            "Proxy",
            "X-Proxy-Id",
            "Trailers",
        ] {
            assert!(codes(Rule::Headers, json!({ ok: "v" })).is_empty(), "{ok}");
        }
    }

    #[test]
    fn names_that_change_the_exchange_or_unlock_metadata_are_refused() {
        for name in [
            "Expect",
            "HTTP2-Settings",
            "Content-Encoding",
            "content-encoding",
            "Metadata-Flavor",
            "metadata-flavor",
            "Metadata",
            "METADATA",
            "X-aws-ec2-metadata-token",
            "x-AWS-EC2-METADATA-TOKEN-TTL-SECONDS",
        ] {
            assert_eq!(
                problems(Rule::Headers, json!({name: "v"})),
                [(format!("headers.{name}"), "forbidden_name")],
                "{name}"
            );
        }
        for allowed in [
            "Metadata-Flavour",
            "X-Metadata",
            "Content-Type",
            "Expectation",
            "Accept-Encoding",
        ] {
            assert!(
                problems(Rule::Headers, json!({allowed: "v"})).is_empty(),
                "{allowed}"
            );
        }
    }

    /// Every spelling of `name` a CGI-style server reads as it: each `-`
    /// as `-` or `_`, each letter in either case (both patterns cycled by
    /// `variant` so a handful of variants cover each position both ways).
    fn spellings(name: &str) -> Vec<String> {
        (0..8usize)
            .map(|variant| {
                name.chars()
                    .enumerate()
                    .map(|(i, c)| match (c, (i + variant) % 3, variant % 2) {
                        ('-', 0, _) | ('-', _, 1) => '_',
                        (c, 1, _) => c.to_ascii_uppercase(),
                        (c, _, _) => c.to_ascii_lowercase(),
                    })
                    .collect()
            })
            .collect()
    }

    #[test]
    fn refused_names_are_refused_in_every_spelling_with_underscores() {
        let refused = super::refused_names()
            .map(|name| name.to_string())
            .chain(["proxy-authorization".to_string(), "proxy-".to_string()]);
        for name in refused {
            for spelling in spellings(&name) {
                assert_eq!(
                    problems(Rule::Headers, json!({spelling.as_str(): "v"})),
                    [(format!("headers.{spelling}"), "forbidden_name")],
                    "{spelling}"
                );
            }
        }
        for name in [
            "X-Google-Metadata-Request",
            "X-aliyun-ecs-metadata-token",
            "X-aliyun-ecs-metadata-token-ttl-seconds",
            "Metadata_Flavor",
            "X_aws_ec2_metadata_token",
            "Content_Length",
            "Transfer_Encoding",
            "Proxy_Authorization",
            "proxy_",
            "Mcp_Session_Id",
            "MCP_Protocol_Version",
            "Last_Event_ID",
            "mcp-session-id",
            "MCP-PROTOCOL-VERSION",
            "Last-Event-ID",
        ] {
            assert_eq!(
                codes(Rule::Headers, json!({name: "v"})),
                ["forbidden_name"],
                "{name}"
            );
        }
        // Underscores anywhere else are ordinary token characters.
        for allowed in [
            "X_Api_Key",
            "my_header",
            "_",
            "Proxy",
            "Metadata_Flavour",
            "X_Proxy_Id",
        ] {
            assert!(
                codes(Rule::Headers, json!({allowed: "v"})).is_empty(),
                "{allowed}"
            );
        }
    }

    #[test]
    fn names_equal_with_underscores_read_as_hyphens_are_duplicates() {
        assert_eq!(
            problems(Rule::Headers, json!({"X-Api-Key": "a", "X_Api_Key": "b"})),
            [("headers.X_Api_Key".to_string(), "duplicate_name")]
        );
        for name in ["x-api-key", "A-B-C-D", "trace-id", "a-", "-b"] {
            let variants = spellings(name);
            for (i, first) in variants.iter().enumerate() {
                for second in &variants[i + 1..] {
                    if first == second {
                        continue;
                    }
                    let found = codes(Rule::Headers, json!({first.as_str(): "a", second.as_str(): "b"}));
                    assert_eq!(found, ["duplicate_name"], "{first} {second}");
                }
            }
        }
        // Other characters are not folded: these are distinct names.
        assert!(
            codes(
                Rule::Headers,
                json!({"X-Key": "a", "X.Key": "b", "XKey": "c", "X--Key": "d"})
            )
            .is_empty()
        );
    }

    #[test]
    fn values_have_no_outer_whitespace_bidi_controls_or_noncharacters() {
        for bad in [" Bearer t", "Bearer t ", "\tBearer t", "Bearer t\t", " ", "\t"] {
            assert_eq!(
                codes(Rule::Headers, json!({"Authorization": bad})),
                ["invalid_value"],
                "{bad:?}"
            );
        }
        assert_eq!(
            codes(Rule::Headers, json!({"Authorization": "Bearer \u{202e}t"})),
            ["bidi_control"]
        );
        assert_eq!(
            codes(Rule::Headers, json!({"Authorization": "Bearer \u{fffe}"})),
            ["noncharacter"]
        );
        for good in ["Bearer  t", "a\tb", "", "ключ", "x"] {
            assert!(
                codes(Rule::Headers, json!({"Authorization": good})).is_empty(),
                "{good:?}"
            );
        }
    }

    #[test]
    fn header_messages_never_contain_values() {
        let value = json!({"Authorization": format!("SENTINEL\n{}", "x".repeat(9000)), "B": "SENTINEL\r"});
        let errors = errors(Rule::Headers, "headers", value);
        assert_eq!(errors.len(), 2);
        assert!(errors.iter().all(|e| !format!("{e:?}").contains("SENTINEL")));
    }
}
