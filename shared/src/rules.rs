//! The field rules, each in exactly one place.
//!
//! A rule reads a JSON value and appends every problem it finds to a list
//! of [`FieldError`]s. Messages state the rule, never the submitted value.
//! Lengths count Unicode scalar values, not bytes.

use std::collections::HashSet;
use std::fmt::Write as _;
use std::net::{Ipv4Addr, Ipv6Addr};

use serde_json::Value;
use url::{Host, Url};

use crate::error::FieldError;
use crate::records::ProviderType;

/// Longest `name` or `model_id`.
pub const MAX_TEXT_CHARS: usize = 255;
/// Longest `api_key`.
pub const MAX_SECRET_CHARS: usize = 4096;
/// Longest `endpoint`.
pub const MAX_URL_CHARS: usize = 2048;
/// Most entries in `headers`.
pub const MAX_HEADERS: usize = 64;
/// Longest header name.
pub const MAX_HEADER_NAME_CHARS: usize = 256;
/// Longest header value.
pub const MAX_HEADER_VALUE_CHARS: usize = 8192;
/// Largest `parameters`, as compact JSON.
pub const MAX_PARAMETERS_BYTES: usize = 16 * 1024;
/// Deepest `parameters`; the `parameters` object itself is depth 1.
pub const MAX_PARAMETERS_DEPTH: usize = 16;
/// Most significant digits in a DynamoDB number.
pub const MAX_NUMBER_DIGITS: usize = 38;

/// How a body field is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// `name`, `model_id`: 1 to 255 characters, not blank, no control characters.
    Text,
    /// `api_key`: 1 to 4096 characters, no whitespace or control characters.
    Secret,
    /// `enabled`: a boolean.
    Flag,
    /// `endpoint`: an absolute http(s) URL to an allowed host.
    Endpoint,
    /// `headers`: an object of HTTP header names to string values.
    Headers,
    /// `provider_type`: one of [`ProviderType`]'s spellings.
    Provider,
    /// `parameters`: an object DynamoDB can store natively.
    Parameters,
}

/// What a rule may depend on beyond the value itself.
#[derive(Debug, Clone, Copy, Default)]
pub struct Policy {
    /// Accept loopback, `localhost` and private-range endpoints.
    pub allow_private_endpoints: bool,
}

impl Rule {
    /// Checks `value` found at `path`, appending each problem to `errors`.
    pub fn check(self, path: &str, value: &Value, policy: Policy, errors: &mut Vec<FieldError>) {
        match self {
            Rule::Text => text(path, value, errors),
            Rule::Secret => secret(path, value, errors),
            Rule::Flag => {
                if !value.is_boolean() {
                    errors.push(wrong_type(path, "a boolean", value));
                }
            }
            Rule::Endpoint => endpoint(path, value, policy, errors),
            Rule::Headers => headers(path, value, errors),
            Rule::Provider => provider(path, value, errors),
            Rule::Parameters => parameters(path, value, errors),
        }
    }
}

fn wrong_type(path: &str, expected: &str, value: &Value) -> FieldError {
    let found = match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    };
    FieldError::new(path, "invalid_type", format!("must be {expected}, not {found}"))
}

fn text(path: &str, value: &Value, errors: &mut Vec<FieldError>) {
    let Some(text) = value.as_str() else {
        return errors.push(wrong_type(path, "a string", value));
    };
    let length = text.chars().count();
    let bounds = format!("must be 1 to {MAX_TEXT_CHARS} characters");
    if length == 0 {
        errors.push(FieldError::new(path, "too_short", bounds));
    } else if length > MAX_TEXT_CHARS {
        errors.push(FieldError::new(path, "too_long", bounds));
    } else if text.chars().any(char::is_control) {
        errors.push(FieldError::new(
            path,
            "control_character",
            "must not contain control characters",
        ));
    } else if text.chars().all(char::is_whitespace) {
        errors.push(FieldError::new(
            path,
            "blank",
            "must contain a non-whitespace character",
        ));
    }
}

fn secret(path: &str, value: &Value, errors: &mut Vec<FieldError>) {
    let Some(secret) = value.as_str() else {
        return errors.push(wrong_type(path, "a string", value));
    };
    let length = secret.chars().count();
    let bounds = format!("must be 1 to {MAX_SECRET_CHARS} characters");
    if length == 0 {
        errors.push(FieldError::new(path, "too_short", bounds));
    } else if length > MAX_SECRET_CHARS {
        errors.push(FieldError::new(path, "too_long", bounds));
    } else if secret.chars().any(|c| c.is_whitespace() || c.is_control()) {
        errors.push(FieldError::new(
            path,
            "invalid_character",
            "must not contain whitespace or control characters",
        ));
    }
}

fn provider(path: &str, value: &Value, errors: &mut Vec<FieldError>) {
    let Some(spelling) = value.as_str() else {
        return errors.push(wrong_type(path, "a string", value));
    };
    if ProviderType::parse(spelling).is_none() {
        errors.push(FieldError::new(
            path,
            "invalid_enum",
            format!("must be one of {}", ProviderType::SPELLINGS.join(", ")),
        ));
    }
}

/// Where an endpoint's host points, for the SSRF rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostClass {
    /// Any other host.
    Public,
    /// Loopback, `localhost` or a private range: allowed only by policy.
    Private,
    /// Link-local, cloud metadata, unspecified, multicast or broadcast: never.
    Forbidden,
}

/// Classifies a parsed URL host.
pub fn classify_host(host: &Host<&str>) -> HostClass {
    match host {
        Host::Domain(domain) => {
            let domain = domain.trim_end_matches('.').to_ascii_lowercase();
            // RFC 6761: localhost and every name under it are loopback.
            if domain == "localhost" || domain.ends_with(".localhost") {
                HostClass::Private
            } else {
                HostClass::Public
            }
        }
        Host::Ipv4(address) => classify_v4(*address),
        Host::Ipv6(address) => classify_v6(*address),
    }
}

fn classify_v4(address: Ipv4Addr) -> HostClass {
    let [first, ..] = address.octets();
    if address.is_link_local() || first == 0 || address.is_multicast() || address.is_broadcast() {
        HostClass::Forbidden
    } else if address.is_loopback() || address.is_private() {
        HostClass::Private
    } else {
        HostClass::Public
    }
}

fn classify_v6(address: Ipv6Addr) -> HostClass {
    // An IPv4-mapped address reaches the IPv4 host it embeds.
    if let Some(v4) = address.to_ipv4_mapped() {
        return classify_v4(v4);
    }
    const EC2_METADATA: Ipv6Addr = Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254);
    let first = address.segments()[0];
    let link_local = first & 0xffc0 == 0xfe80;
    let unique_local = first & 0xfe00 == 0xfc00;
    if address == EC2_METADATA || link_local || address.is_unspecified() || address.is_multicast() {
        HostClass::Forbidden
    } else if address.is_loopback() || unique_local {
        HostClass::Private
    } else {
        HostClass::Public
    }
}

fn endpoint(path: &str, value: &Value, policy: Policy, errors: &mut Vec<FieldError>) {
    let Some(raw) = value.as_str() else {
        return errors.push(wrong_type(path, "a string", value));
    };
    let invalid = |message: &str| FieldError::new(path, "invalid_url", message);
    if raw.chars().count() > MAX_URL_CHARS {
        return errors.push(FieldError::new(
            path,
            "too_long",
            format!("must be at most {MAX_URL_CHARS} characters"),
        ));
    }
    // The URL parser strips and skips whitespace and controls; the stored
    // string is the submitted one, so refuse them rather than store them.
    if raw.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return errors.push(invalid("must not contain whitespace or control characters"));
    }
    let Ok(url) = Url::parse(raw) else {
        return errors.push(invalid("must be an absolute http or https URL"));
    };
    let scheme_ok = matches!(url.scheme(), "http" | "https");
    // `http:host` and `http:\\host` parse too; an absolute URL spells `://`.
    let spelled_absolute = raw
        .get(url.scheme().len()..)
        .is_some_and(|rest| rest.starts_with("://"));
    if !scheme_ok || !spelled_absolute {
        return errors.push(invalid("must be an absolute http or https URL"));
    }
    let Some(host) = url.host() else {
        return errors.push(invalid("must have a host"));
    };
    if !url.username().is_empty() || url.password().is_some() || raw_has_user_info(raw) {
        return errors.push(FieldError::new(
            path,
            "user_info",
            "must not contain user information",
        ));
    }
    match classify_host(&host) {
        HostClass::Public => {}
        HostClass::Private if policy.allow_private_endpoints => {}
        HostClass::Private => errors.push(FieldError::new(
            path,
            "private_host",
            "must not point to a loopback or private-network host",
        )),
        HostClass::Forbidden => errors.push(FieldError::new(
            path,
            "forbidden_host",
            "must not point to a link-local, metadata, unspecified, multicast or broadcast address",
        )),
    }
}

/// `http://@host` has an empty user-info that the parser drops; the
/// submitted string still carries it.
fn raw_has_user_info(raw: &str) -> bool {
    let after_scheme = raw.split_once("://").map_or("", |(_, rest)| rest);
    let authority = after_scheme.split(['/', '?', '#']).next().unwrap_or_default();
    authority.contains('@')
}

/// RFC 9110 `tchar`.
fn is_token_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c)
}

fn headers(path: &str, value: &Value, errors: &mut Vec<FieldError>) {
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
    let mut seen = HashSet::new();
    // Name order, whatever the map's order, so the same body always names
    // the same duplicate.
    let mut entries: Vec<(&String, &Value)> = headers.iter().collect();
    entries.sort_unstable_by_key(|(name, _)| *name);
    for (name, header_value) in entries {
        let field = format!("{path}.{name}");
        let length = name.chars().count();
        if length == 0 || length > MAX_HEADER_NAME_CHARS || !name.chars().all(is_token_char) {
            errors.push(FieldError::new(
                &field,
                "invalid_name",
                format!("header names must be HTTP tokens of 1 to {MAX_HEADER_NAME_CHARS} characters"),
            ));
        } else if !seen.insert(name.to_ascii_lowercase()) {
            errors.push(FieldError::new(
                &field,
                "duplicate_name",
                "header names must be unique regardless of letter case",
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
            Some(text) if text.contains(['\r', '\n', '\0']) => errors.push(FieldError::new(
                &field,
                "invalid_value",
                "header values must not contain CR, LF or NUL",
            )),
            Some(_) => {}
        }
    }
}

fn parameters(path: &str, value: &Value, errors: &mut Vec<FieldError>) {
    if !value.is_object() {
        return errors.push(wrong_type(path, "an object", value));
    }
    let compact = serde_json::to_string(value).map_or(usize::MAX, |json| json.len());
    if compact > MAX_PARAMETERS_BYTES {
        errors.push(FieldError::new(
            path,
            "too_large",
            format!("must be at most {MAX_PARAMETERS_BYTES} bytes as compact JSON"),
        ));
    }
    walk_parameters(&mut path.to_string(), value, 1, errors);
}

/// Checks every nested value. `path` is one buffer, extended and cut back
/// around each child: valid parameters cost no allocation per value.
fn walk_parameters(path: &mut String, value: &Value, depth: usize, errors: &mut Vec<FieldError>) {
    let nested = matches!(value, Value::Object(_) | Value::Array(_));
    if nested && depth > MAX_PARAMETERS_DEPTH {
        return errors.push(FieldError::new(
            path.as_str(),
            "too_deep",
            format!("must nest at most {MAX_PARAMETERS_DEPTH} levels deep"),
        ));
    }
    let parent = path.len();
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_unstable_by_key(|(key, _)| *key);
            for (key, child) in entries {
                if key.is_empty() {
                    errors.push(FieldError::new(
                        path.as_str(),
                        "empty_key",
                        "object keys must not be empty",
                    ));
                    continue;
                }
                path.push('.');
                path.push_str(key);
                walk_parameters(path, child, depth + 1, errors);
                path.truncate(parent);
            }
        }
        Value::Array(items) => {
            for (index, child) in items.iter().enumerate() {
                // Writing to a String cannot fail.
                let _ = write!(path, "[{index}]");
                walk_parameters(path, child, depth + 1, errors);
                path.truncate(parent);
            }
        }
        Value::Number(number) => {
            if let Err(message) = dynamo_number(number.as_str()) {
                errors.push(FieldError::new(path.as_str(), "invalid_number", message));
            }
        }
        Value::Null | Value::Bool(_) | Value::String(_) => {}
    }
}

/// A decimal number reduced to its value: sign, significant digits (no
/// leading or trailing zeros) and scientific exponent, so `1.50e3` and
/// `1500` both become `(false, "15", 3)`. Zero, in any spelling, is
/// `(false, "", 0)`. `None` if `text` is not a JSON number.
pub fn decimal_parts(text: &str) -> Option<(bool, String, i64)> {
    let (negative, unsigned) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (mantissa, exponent) = unsigned.split_once(['e', 'E']).unwrap_or((unsigned, "0"));
    let (integer, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits = [integer, fraction].concat();
    let exponent = exponent.strip_prefix('+').unwrap_or(exponent);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let significant = digits.trim_start_matches('0');
    if significant.is_empty() {
        return Some((false, String::new(), 0));
    }
    let leading_zeros = digits.len() - significant.len();
    // An exponent too long for i64 is saturated: far outside any range anyway.
    let exponent = exponent.parse::<i64>().unwrap_or_else(|_| {
        if exponent.starts_with('-') {
            i64::MIN
        } else {
            i64::MAX
        }
    });
    // value = 0.d1d2... x 10^(integer digits before the first significant one)
    let point =
        i64::try_from(integer.len()).unwrap_or(i64::MAX) - i64::try_from(leading_zeros).unwrap_or(i64::MAX);
    let scientific = exponent.saturating_add(point).saturating_sub(1);
    Some((
        negative,
        significant.trim_end_matches('0').to_string(),
        scientific,
    ))
}

/// Checks that a JSON number's text is representable as a DynamoDB number:
/// at most 38 significant digits, and zero or a magnitude from 1E-130 up to
/// (not including) 1E+126.
pub fn dynamo_number(text: &str) -> Result<(), &'static str> {
    const MESSAGE: &str =
        "numbers must have at most 38 significant digits and a magnitude between 1e-130 and 9.99e125";
    match decimal_parts(text) {
        Some((_, digits, _)) if digits.is_empty() => Ok(()),
        Some((_, digits, exponent))
            if digits.len() <= MAX_NUMBER_DIGITS && (-130..=125).contains(&exponent) =>
        {
            Ok(())
        }
        _ => Err(MESSAGE),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn problems(rule: Rule, value: Value) -> Vec<(String, &'static str)> {
        problems_with(rule, value, Policy::default())
    }

    fn problems_with(rule: Rule, value: Value, policy: Policy) -> Vec<(String, &'static str)> {
        let mut errors = Vec::new();
        let path = match rule {
            Rule::Headers => "headers",
            Rule::Parameters => "parameters",
            _ => "field",
        };
        rule.check(path, &value, policy, &mut errors);
        errors.into_iter().map(|e| (e.field, e.code)).collect()
    }

    fn codes(rule: Rule, value: Value) -> Vec<&'static str> {
        problems(rule, value).into_iter().map(|(_, code)| code).collect()
    }

    #[test]
    fn text_length_boundaries_count_characters() {
        assert!(codes(Rule::Text, json!("a".repeat(255))).is_empty());
        assert_eq!(codes(Rule::Text, json!("a".repeat(256))), ["too_long"]);
        // 255 four-byte characters are 1020 bytes and still fit.
        assert!(codes(Rule::Text, json!("😀".repeat(255))).is_empty());
        assert_eq!(codes(Rule::Text, json!("é".repeat(256))), ["too_long"]);
        assert_eq!(codes(Rule::Text, json!("")), ["too_short"]);
        assert!(codes(Rule::Text, json!("x")).is_empty());
    }

    #[test]
    fn text_must_not_be_blank_or_control() {
        assert_eq!(codes(Rule::Text, json!("   ")), ["blank"]);
        assert_eq!(codes(Rule::Text, json!("\u{3000}")), ["blank"]);
        assert_eq!(codes(Rule::Text, json!("a\tb")), ["control_character"]);
        assert_eq!(codes(Rule::Text, json!("a\u{0}b")), ["control_character"]);
        assert_eq!(codes(Rule::Text, json!("a\u{7f}")), ["control_character"]);
        assert_eq!(codes(Rule::Text, json!("a\u{85}")), ["control_character"]);
        assert!(codes(Rule::Text, json!(" Claude Sonnet 4 ")).is_empty());
        assert!(codes(Rule::Text, json!("модель 模型")).is_empty());
    }

    #[test]
    fn wrong_types_and_null() {
        for rule in [Rule::Text, Rule::Secret, Rule::Endpoint, Rule::Provider] {
            for value in [json!(null), json!(1), json!(true), json!([]), json!({})] {
                assert_eq!(codes(rule, value), ["invalid_type"], "{rule:?}");
            }
        }
        assert_eq!(codes(Rule::Flag, json!(null)), ["invalid_type"]);
        assert_eq!(codes(Rule::Flag, json!("true")), ["invalid_type"]);
        assert_eq!(codes(Rule::Flag, json!(0)), ["invalid_type"]);
        assert!(codes(Rule::Flag, json!(false)).is_empty());
        assert_eq!(codes(Rule::Headers, json!(null)), ["invalid_type"]);
        assert_eq!(codes(Rule::Headers, json!([])), ["invalid_type"]);
        assert_eq!(codes(Rule::Parameters, json!(null)), ["invalid_type"]);
        assert_eq!(codes(Rule::Parameters, json!([1])), ["invalid_type"]);
    }

    #[test]
    fn secret_rules() {
        assert!(codes(Rule::Secret, json!("k".repeat(4096))).is_empty());
        assert_eq!(codes(Rule::Secret, json!("k".repeat(4097))), ["too_long"]);
        assert_eq!(codes(Rule::Secret, json!("")), ["too_short"]);
        assert_eq!(codes(Rule::Secret, json!("sk live")), ["invalid_character"]);
        assert_eq!(codes(Rule::Secret, json!("sk\u{a0}live")), ["invalid_character"]);
        assert_eq!(codes(Rule::Secret, json!("sk\nlive")), ["invalid_character"]);
        assert!(codes(Rule::Secret, json!("sk-ant-api03_ключ")).is_empty());
    }

    #[test]
    fn secret_messages_never_contain_the_secret() {
        for value in ["", "sk SENTINEL", &"SENTINEL".repeat(600)] {
            let mut errors = Vec::new();
            Rule::Secret.check("api_key", &json!(value), Policy::default(), &mut errors);
            assert!(!errors.is_empty());
            assert!(errors.iter().all(|e| !format!("{e:?}").contains("SENTINEL")));
        }
    }

    #[test]
    fn provider_spellings_are_exact() {
        for ok in ["OpenAI", "Anthropic", "Gemini", "xAI"] {
            assert!(codes(Rule::Provider, json!(ok)).is_empty());
        }
        for bad in ["openai", "OPENAI", "XAI", "Google", "", " OpenAI"] {
            assert_eq!(codes(Rule::Provider, json!(bad)), ["invalid_enum"]);
        }
        let mut errors = Vec::new();
        Rule::Provider.check("provider_type", &json!("x"), Policy::default(), &mut errors);
        assert_eq!(errors[0].message, "must be one of OpenAI, Anthropic, Gemini, xAI");
    }

    #[test]
    fn endpoint_shapes() {
        for ok in [
            "https://mcp.example.com/sse",
            "http://example.com",
            "HTTPS://Example.COM:8443/a?b=c#d",
            "https://8.8.8.8/",
            "https://[2001:db8::1]/mcp",
            "https://xn--nxasmq6b.example/",
        ] {
            assert!(codes(Rule::Endpoint, json!(ok)).is_empty(), "{ok}");
        }
        for bad in [
            "ftp://example.com",
            "example.com",
            "/relative/path",
            "https:example.com",
            "https:\\\\example.com",
            "mailto:a@example.com",
            "https://exa mple.com",
            " https://example.com",
            "https://example.com/\n",
            "",
        ] {
            assert_eq!(codes(Rule::Endpoint, json!(bad)), ["invalid_url"], "{bad:?}");
        }
        let long = format!("https://example.com/{}", "a".repeat(2048 - 20));
        assert_eq!(long.chars().count(), 2048);
        assert!(codes(Rule::Endpoint, json!(long)).is_empty());
        assert_eq!(codes(Rule::Endpoint, json!(format!("{long}a"))), ["too_long"]);
    }

    #[test]
    fn endpoint_user_info_is_refused() {
        for bad in [
            "https://user:pw@example.com",
            "https://user@example.com/",
            "https://@example.com",
        ] {
            assert_eq!(codes(Rule::Endpoint, json!(bad)), ["user_info"], "{bad}");
        }
        assert!(codes(Rule::Endpoint, json!("https://example.com/a@b")).is_empty());
    }

    #[test]
    fn endpoint_host_classes() {
        let forbidden = [
            "http://169.254.169.254/latest/meta-data",
            "http://169.254.0.1",
            "http://[fe80::1]",
            "http://[febf::1]",
            "http://[fd00:ec2::254]",
            "http://0.0.0.0",
            "http://0.1.2.3",
            "http://[::]",
            "http://224.0.0.1",
            "http://239.255.255.250",
            "http://[ff02::1]",
            "http://255.255.255.255",
            "http://[::ffff:169.254.169.254]",
            "http://0xa9fea9fe/",
        ];
        let private = [
            "http://127.0.0.1:8080",
            "http://127.1.2.3",
            "http://2130706433/",
            "http://localhost:3000",
            "http://LOCALHOST.",
            "http://api.localhost",
            "http://[::1]",
            "http://10.0.0.1",
            "http://172.16.0.1",
            "http://172.31.255.255",
            "http://192.168.1.1",
            "http://[fc00::1]",
            "http://[fd12:3456::1]",
            "http://[::ffff:10.0.0.1]",
        ];
        let public = [
            "http://172.32.0.1",
            "http://172.15.0.1",
            "http://192.169.0.1",
            "http://[fec0::1]",
            "http://localhost.example.com",
        ];
        let allow = Policy {
            allow_private_endpoints: true,
        };
        for url in forbidden {
            assert_eq!(codes(Rule::Endpoint, json!(url)), ["forbidden_host"], "{url}");
            let allowed = problems_with(Rule::Endpoint, json!(url), allow);
            assert_eq!(
                allowed.len(),
                1,
                "{url} must stay forbidden when private is allowed"
            );
        }
        for url in private {
            assert_eq!(codes(Rule::Endpoint, json!(url)), ["private_host"], "{url}");
            assert!(
                problems_with(Rule::Endpoint, json!(url), allow).is_empty(),
                "{url}"
            );
        }
        for url in public {
            assert!(codes(Rule::Endpoint, json!(url)).is_empty(), "{url}");
        }
    }

    #[test]
    fn header_rules() {
        assert!(codes(Rule::Headers, json!({})).is_empty());
        assert!(
            codes(
                Rule::Headers,
                json!({"Authorization": "Bearer x", "X-Api-Key": ""})
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
        for bad in ["a\rb", "a\nb", "a\u{0}b"] {
            assert_eq!(
                problems(Rule::Headers, json!({"Authorization": bad})),
                [("headers.Authorization".to_string(), "invalid_value")]
            );
        }
        assert_eq!(codes(Rule::Headers, json!({"A": 1})), ["invalid_type"]);
        assert_eq!(codes(Rule::Headers, json!({"A": null})), ["invalid_type"]);
        // Every problem is listed, not just the first.
        assert_eq!(
            codes(Rule::Headers, json!({"A": 1, "B C": "x", "D": "\n"})).len(),
            3
        );
    }

    #[test]
    fn header_messages_never_contain_values() {
        let mut errors = Vec::new();
        let value = json!({"Authorization": format!("SENTINEL\n{}", "x".repeat(9000)), "B": "SENTINEL\r"});
        Rule::Headers.check("headers", &value, Policy::default(), &mut errors);
        assert_eq!(errors.len(), 2);
        assert!(errors.iter().all(|e| !format!("{e:?}").contains("SENTINEL")));
    }

    fn nested(depth: usize) -> Value {
        (1..depth).fold(json!({}), |inner, _| json!({ "a": inner }))
    }

    #[test]
    fn parameter_depth_and_size() {
        assert!(codes(Rule::Parameters, nested(16)).is_empty());
        assert_eq!(codes(Rule::Parameters, nested(17)), ["too_deep"]);
        assert_eq!(
            problems(Rule::Parameters, json!({"a": [[{"b": nested(12)}]]})),
            Vec::<(String, &str)>::new()
        );
        assert_eq!(
            codes(Rule::Parameters, json!({"a": [[{"b": nested(13)}]]})),
            ["too_deep"]
        );

        // {"k":"..."} is 8 bytes of punctuation and key around the string.
        let fits = json!({"k": "x".repeat(MAX_PARAMETERS_BYTES - 8)});
        assert_eq!(fits.to_string().len(), MAX_PARAMETERS_BYTES);
        assert!(codes(Rule::Parameters, fits).is_empty());
        let over = json!({"k": "x".repeat(MAX_PARAMETERS_BYTES - 7)});
        assert_eq!(codes(Rule::Parameters, over), ["too_large"]);
    }

    #[test]
    fn parameter_keys_and_paths() {
        assert_eq!(
            problems(Rule::Parameters, json!({"reasoning": {"": 1}})),
            [("parameters.reasoning".to_string(), "empty_key")]
        );
        assert_eq!(
            problems(Rule::Parameters, json!({"stop": [1, {"": 2}]})),
            [("parameters.stop[1]".to_string(), "empty_key")]
        );
        let bad_number: Value =
            serde_json::from_str(r#"{"reasoning": {"effort": 1e126}}"#).unwrap_or_default();
        assert_eq!(
            problems(Rule::Parameters, bad_number),
            [("parameters.reasoning.effort".to_string(), "invalid_number")]
        );
        assert!(
            codes(
                Rule::Parameters,
                json!({"a": null, "b": [true, "s", 1, 2.5, {}], "c": ""})
            )
            .is_empty()
        );
    }

    #[test]
    fn decimal_parts_compare_by_value() {
        assert_eq!(decimal_parts("1.50e3"), decimal_parts("1500"));
        assert_eq!(decimal_parts("1.5E+3"), Some((false, "15".into(), 3)));
        assert_eq!(decimal_parts("-0.00120"), Some((true, "12".into(), -3)));
        assert_eq!(decimal_parts("-0.0"), decimal_parts("0"));
        assert_ne!(decimal_parts("1"), decimal_parts("-1"));
        assert_eq!(decimal_parts("x"), None);
    }

    #[test]
    fn dynamo_number_range() {
        for ok in [
            "0",
            "-0",
            "0.0",
            "0e999999999999999999999",
            "1",
            "-1",
            "1e125",
            "9.99e125",
            "9.9999999999999999999999999999999999999E+125",
            "1e-130",
            "-1E-130",
            "1.5",
            "12345678901234567890123456789012345678",
            "0.00012345678901234567890123456789012345678",
            "1234567890123456789012345678901234567800000",
            "100e-2",
            "0.001e-127",
        ] {
            assert_eq!(dynamo_number(ok), Ok(()), "{ok}");
        }
        for bad in [
            "1e126",
            "10e125",
            "-1e126",
            "1e-131",
            "0.1e-130",
            "0.001e-128",
            "123456789012345678901234567890123456789",
            "1.00000000000000000000000000000000000001",
            "1e99999999999999999999",
        ] {
            assert!(dynamo_number(bad).is_err(), "{bad}");
        }
    }
}
