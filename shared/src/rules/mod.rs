//! The field rules, each in exactly one place.
//!
//! A rule reads a JSON value and adds every problem it finds to a bounded
//! [`FieldErrors`] list. Messages state the rule, never the submitted value.
//! Lengths count Unicode scalar values, not bytes.
//!
//! - [`text`]: `name`, `model_id`, the secret `api_key`, `provider_type`;
//! - [`endpoint`]: the `endpoint` URL and the host classes that guard it;
//! - [`headers`]: the MCP server's HTTP headers;
//! - [`parameters`]: the model's free-form parameters and DynamoDB numbers.

pub mod endpoint;
pub mod headers;
pub mod parameters;
pub mod text;

use std::io;

use serde_json::Value;

use crate::error::{FieldError, FieldErrors};

pub use endpoint::{HostClass, MAX_URL_CHARS, classify_host, classify_ip};
pub use headers::{MAX_HEADER_NAME_CHARS, MAX_HEADER_VALUE_CHARS, MAX_HEADERS, MAX_HEADERS_BYTES};
pub use parameters::{Decimal, MAX_NUMBER_DIGITS, MAX_PARAMETERS_BYTES, MAX_PARAMETERS_DEPTH};
pub use text::{MAX_SECRET_BYTES, MAX_TEXT_CHARS};

/// How a body field is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// A display string such as `name` or `model_id`: 1 to `max`
    /// characters, not blank, no control characters.
    Text {
        /// Most characters (Unicode scalar values).
        max: usize,
    },
    /// A secret such as `api_key`: 1 to `max` bytes of visible ASCII,
    /// sealed before it is stored ([`crate::seal`]).
    Secret {
        /// Most bytes (KMS `Encrypt` takes at most 4,096).
        max: usize,
    },
    /// `enabled`: a boolean.
    Flag,
    /// `endpoint`: an absolute http(s) URL to an allowed host.
    Endpoint,
    /// `headers`: an object of HTTP header names to string values.
    Headers,
    /// `provider_type`: one of [`crate::ProviderType`]'s spellings.
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
    /// The most characters a string under this rule may have, where the
    /// limit is the rule's own data (documents state it per field). A
    /// secret is ASCII, so its byte limit is its character limit.
    pub fn max_chars(self) -> Option<usize> {
        match self {
            Rule::Text { max } | Rule::Secret { max } => Some(max),
            _ => None,
        }
    }

    /// Checks `value` found at `path`, adding each problem to `errors`.
    pub fn check(self, path: &str, value: &Value, policy: Policy, errors: &mut FieldErrors) {
        match self {
            Rule::Text { max } => text::text(path, value, max, errors),
            Rule::Secret { max } => text::secret(path, value, max, errors),
            Rule::Flag => {
                if !value.is_boolean() {
                    errors.push(wrong_type(path, "a boolean", value));
                }
            }
            Rule::Endpoint => endpoint::endpoint(path, value, policy, errors),
            Rule::Headers => headers::headers(path, value, errors),
            Rule::Provider => text::provider(path, value, errors),
            Rule::Parameters => parameters::parameters(path, value, errors),
        }
    }
}

/// Whether `value` as compact JSON is longer than `limit` bytes, counted
/// without building the text and given up as soon as the limit is passed.
pub(crate) fn compact_len_exceeds(value: &Value, limit: usize) -> bool {
    struct Counter {
        left: usize,
    }
    impl io::Write for Counter {
        fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
            self.left = self
                .left
                .checked_sub(bytes.len())
                .ok_or_else(|| io::Error::other("over the limit"))?;
            Ok(bytes.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
    serde_json::to_writer(Counter { left: limit }, value).is_err()
}

/// The error for a value of the wrong JSON type (`null` included).
pub(crate) fn wrong_type(path: &str, expected: &str, value: &Value) -> FieldError {
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

/// Test helpers shared by the rule modules' tests.
#[cfg(test)]
pub(crate) mod testing {
    use super::*;

    /// `(path, code)` of every problem `rule` finds in `value` under `policy`.
    pub fn problems_with(rule: Rule, value: Value, policy: Policy) -> Vec<(String, &'static str)> {
        let mut errors = FieldErrors::new();
        let path = match rule {
            Rule::Headers => "headers",
            Rule::Parameters => "parameters",
            _ => "field",
        };
        rule.check(path, &value, policy, &mut errors);
        errors.into_vec().into_iter().map(|e| (e.field, e.code)).collect()
    }

    /// As [`problems_with`], under the default policy.
    pub fn problems(rule: Rule, value: Value) -> Vec<(String, &'static str)> {
        problems_with(rule, value, Policy::default())
    }

    /// The codes only.
    pub fn codes(rule: Rule, value: Value) -> Vec<&'static str> {
        problems(rule, value).into_iter().map(|(_, code)| code).collect()
    }

    /// The full errors, messages included.
    pub fn errors(rule: Rule, path: &str, value: Value) -> Vec<FieldError> {
        let mut errors = FieldErrors::new();
        rule.check(path, &value, Policy::default(), &mut errors);
        errors.into_vec()
    }
}

#[cfg(test)]
mod tests {
    use super::Rule;
    use super::testing::codes;
    use serde_json::json;

    #[test]
    fn wrong_types_and_null() {
        let text = Rule::Text { max: 10 };
        let secret = Rule::Secret { max: 10 };
        for rule in [text, secret, Rule::Endpoint, Rule::Provider] {
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
}
