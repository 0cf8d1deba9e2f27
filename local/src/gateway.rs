//! API Gateway's own part of a request, emulated for the local API: the JWT
//! authorizer, and the authorizer context it hands the function.
//!
//! As on AWS, the authorizer only authenticates: it checks the token's
//! signature, `exp` (required), `nbf`, and the issuer and audience when
//! configured, answers a bad or missing token with API Gateway's own 401
//! `{"message":"Unauthorized"}`, and passes every claim through to the
//! function as a string (a JSON array rendered `[a b]`, as API Gateway
//! renders it). Which projects the caller may change is the functions'
//! decision (`agent_server_shared::auth`).

use std::collections::HashMap;

use agent_server_shared::Response;
use agent_server_shared::auth::ALL_PROJECTS;
use aws_lambda_events::apigw::{ApiGatewayRequestAuthorizer, ApiGatewayRequestAuthorizerJwtDescription};
use aws_lambda_events::encodings::Body;
use aws_lambda_events::http::{HeaderMap, HeaderValue, StatusCode, header};
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde_json::{Map, Value};

/// The principal `--no-auth` requests carry.
pub const NO_AUTH_SUBJECT: &str = "local-no-auth";

/// How the local API authenticates requests.
#[derive(Debug)]
pub enum Authorizer {
    /// `--no-auth`: no token is asked for, and every request carries an
    /// identity granting every project (and the API-key route).
    Open,
    /// Bearer tokens, checked as API Gateway's JWT authorizer checks them.
    Jwt(Box<JwtAuthorizer>),
}

/// Why a JWT authorizer could not be configured.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The JWKS file could not be read or parsed.
    #[error("cannot use the JWKS file: {0}")]
    Jwks(String),
    /// The secret is empty.
    #[error("the JWT secret must not be empty")]
    EmptySecret,
}

/// A JWT authorizer: the keys, and the issuer and audiences to require.
pub struct JwtAuthorizer {
    keys: Keys,
    issuer: Option<String>,
    audiences: Vec<String>,
}

impl std::fmt::Debug for JwtAuthorizer {
    // Never the keys: a shared secret is one.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JwtAuthorizer")
            .field("issuer", &self.issuer)
            .field("audiences", &self.audiences)
            .finish_non_exhaustive()
    }
}

enum Keys {
    /// HS256 with a shared secret.
    Secret(DecodingKey),
    /// RS256 or ES256 with the public keys of a JWKS.
    Set(JwkSet),
}

impl JwtAuthorizer {
    /// Verifies HS256 tokens signed with `secret`.
    pub fn with_secret(secret: &[u8]) -> Result<Self, ConfigError> {
        if secret.is_empty() {
            return Err(ConfigError::EmptySecret);
        }
        Ok(Self {
            keys: Keys::Secret(DecodingKey::from_secret(secret)),
            issuer: None,
            audiences: Vec::new(),
        })
    }

    /// Verifies RS256 and ES256 tokens with the keys of a JWKS document.
    pub fn with_jwks(jwks: &str) -> Result<Self, ConfigError> {
        let set: JwkSet = serde_json::from_str(jwks).map_err(|e| ConfigError::Jwks(e.to_string()))?;
        if set.keys.is_empty() {
            return Err(ConfigError::Jwks("it holds no key".into()));
        }
        Ok(Self {
            keys: Keys::Set(set),
            issuer: None,
            audiences: Vec::new(),
        })
    }

    /// Requires `iss` to be `issuer`.
    pub fn issuer(mut self, issuer: impl Into<String>) -> Self {
        self.issuer = Some(issuer.into());
        self
    }

    /// Requires `aud` (or, without one, `client_id`) to name one of these.
    pub fn audiences(mut self, audiences: Vec<String>) -> Self {
        self.audiences = audiences;
        self
    }

    /// The token's claims, if it is valid; `None` for any fault, as API
    /// Gateway says no more than 401 either.
    pub fn verify(&self, token: &str) -> Option<Map<String, Value>> {
        if !strictly_formed(token) {
            return None;
        }
        let header = jsonwebtoken::decode_header(token).ok()?;
        let key = match (&self.keys, header.alg) {
            (Keys::Secret(key), Algorithm::HS256) => key.clone(),
            (Keys::Set(set), Algorithm::RS256 | Algorithm::ES256) => {
                let jwk = match &header.kid {
                    Some(kid) => set.find(kid)?,
                    None if set.keys.len() == 1 => set.keys.first()?,
                    None => return None,
                };
                DecodingKey::from_jwk(jwk).ok()?
            }
            _ => return None,
        };
        let mut validation = Validation::new(header.alg);
        validation.leeway = 0;
        // RFC 7519: not accepted on or after `exp` (so `exp` now is expired).
        validation.reject_tokens_expiring_in_less_than = 1;
        validation.validate_nbf = true;
        validation.validate_aud = false; // checked below, with client_id too
        validation.set_required_spec_claims(&["exp"]); // iss, when required, below
        let claims = jsonwebtoken::decode::<Map<String, Value>>(token, &key, &validation)
            .ok()?
            .claims;
        // `iss`, present and one string (RFC 7519): the decoder's own check
        // passes a token without one, and an array that holds it.
        let issuer_matches = self
            .issuer
            .as_ref()
            .is_none_or(|issuer| matches!(claims.get("iss"), Some(Value::String(iss)) if iss == issuer));
        (issuer_matches && self.audience_matches(&claims)).then_some(claims)
    }

    /// API Gateway's rule: `aud` must name one of the audiences; only a
    /// token without `aud` is judged by `client_id` instead. An `aud` or
    /// `client_id` that is not a string or an array of strings names none.
    fn audience_matches(&self, claims: &Map<String, Value>) -> bool {
        if self.audiences.is_empty() {
            return true;
        }
        let claim = claims.get("aud").or_else(|| claims.get("client_id"));
        named(claim).is_some_and(|candidates| {
            candidates
                .iter()
                .any(|candidate| self.audiences.iter().any(|audience| audience == candidate))
        })
    }
}

/// What RFC 7515 and RFC 7519 let a recipient refuse, refused: a header
/// with `crit` (this authorizer understands no extension, and `crit` must
/// name one), and a header or payload that repeats a member name (the
/// RFCs allow rejecting it, and two readers could take different values).
fn strictly_formed(token: &str) -> bool {
    use base64::Engine as _;
    let mut parts = token.split('.');
    let (Some(header), Some(payload)) = (parts.next(), parts.next()) else {
        return false;
    };
    let decode = |part: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(part).ok();
    let (Some(header), Some(payload)) = (decode(header), decode(payload)) else {
        return false;
    };
    // The service's own strict reader: one object, no repeated key at any depth.
    let read = |bytes: &[u8]| agent_server_shared::json::parse_object(bytes).ok();
    match (read(&header), read(&payload)) {
        (Some(header), Some(_)) => !header.contains_key("crit"),
        _ => false,
    }
}

/// The strings a claim names: itself, or its array's (`None` if it is
/// neither a string nor an array of strings).
fn named(value: Option<&Value>) -> Option<Vec<&str>> {
    match value? {
        Value::String(one) => Some(vec![one.as_str()]),
        Value::Array(many) => many.iter().map(Value::as_str).collect(),
        _ => None,
    }
}

/// API Gateway turned the request away: no valid token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unauthorized;

impl Authorizer {
    /// The authorizer context for a request with these headers, or
    /// [`Unauthorized`]. `projects_claim` names the claim `--no-auth`
    /// identities carry their grant in.
    pub fn context(
        &self,
        headers: &HeaderMap,
        projects_claim: &str,
    ) -> Result<ApiGatewayRequestAuthorizer, Unauthorized> {
        let claims = match self {
            Self::Open => HashMap::from([
                ("sub".to_owned(), NO_AUTH_SUBJECT.to_owned()),
                (projects_claim.to_owned(), ALL_PROJECTS.to_owned()),
            ]),
            Self::Jwt(authorizer) => {
                let token = bearer_token(headers).ok_or(Unauthorized)?;
                render_claims(authorizer.verify(token).ok_or(Unauthorized)?)
            }
        };
        let mut jwt = ApiGatewayRequestAuthorizerJwtDescription::default();
        jwt.claims = claims;
        let mut context = ApiGatewayRequestAuthorizer::default();
        context.jwt = Some(jwt);
        Ok(context)
    }
}

/// The token of the one `Authorization` header, with or without the
/// `Bearer` scheme (API Gateway accepts both).
fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let mut values = headers.get_all(header::AUTHORIZATION).iter();
    let value = values.next()?.to_str().ok()?.trim();
    if values.next().is_some() {
        return None;
    }
    let token = match value.split_once(' ') {
        Some((scheme, token)) if scheme.eq_ignore_ascii_case("bearer") => token.trim(),
        Some(_) => return None,
        // The scheme alone is no token.
        None if value.eq_ignore_ascii_case("bearer") => return None,
        None => value,
    };
    (!token.is_empty()).then_some(token)
}

/// Claims as API Gateway passes them to a function: every value a string,
/// arrays rendered `[a b]`. (Objects become their JSON text; API Gateway's
/// own rendering of a nested object is not documented.)
pub fn render_claims(claims: Map<String, Value>) -> HashMap<String, String> {
    fn render(value: Value) -> String {
        match value {
            Value::String(text) => text,
            Value::Array(items) => {
                let items: Vec<String> = items.into_iter().map(render).collect();
                format!("[{}]", items.join(" "))
            }
            other => other.to_string(),
        }
    }
    claims
        .into_iter()
        .filter(|(_, value)| !value.is_null())
        .map(|(name, value)| (name, render(value)))
        .collect()
}

/// API Gateway's own answer to a request without a valid token: not the
/// envelope, since on AWS the functions never see such a request.
pub fn unauthorized() -> Response {
    let mut response = Response::new(Body::Text(r#"{"message":"Unauthorized"}"#.into()));
    *response.status_mut() = StatusCode::UNAUTHORIZED;
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
        .headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    response
}

/// A development token: HS256 with `secret`, for `sub`, granting
/// `projects` (a space-separated list, or `*`) in `projects_claim`, valid
/// for `lifetime_seconds`.
pub fn development_token(
    secret: &[u8],
    sub: &str,
    projects_claim: &str,
    projects: &str,
    lifetime_seconds: u64,
) -> Result<String, jsonwebtoken::errors::Error> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| elapsed.as_secs())
        .unwrap_or_default();
    let mut claims = Map::new();
    claims.insert("sub".into(), sub.into());
    claims.insert("iat".into(), now.into());
    claims.insert("exp".into(), (now + lifetime_seconds).into());
    claims.insert(projects_claim.into(), projects.into());
    jsonwebtoken::encode(
        &Header::new(Algorithm::HS256),
        &claims,
        &EncodingKey::from_secret(secret),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(authorization: &[&str]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for value in authorization {
            if let Ok(value) = HeaderValue::from_str(value) {
                map.append(header::AUTHORIZATION, value);
            }
        }
        map
    }

    #[test]
    fn crit_headers_and_repeated_members_are_refused() {
        use base64::Engine as _;
        let encode = |text: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(text);
        let token = |header: &str, payload: &str| format!("{}.{}.c2ln", encode(header), encode(payload));
        let payload = r#"{"sub":"a","exp":9999999999,"projects":"*"}"#;
        assert!(strictly_formed(&token(r#"{"alg":"HS256","typ":"JWT"}"#, payload)));
        for (header, payload) in [
            (r#"{"alg":"HS256","crit":["exp"]}"#, payload),
            (r#"{"alg":"HS256","crit":[]}"#, payload),
            (r#"{"alg":"HS256","alg":"none"}"#, payload),
            (
                r#"{"alg":"HS256"}"#,
                r#"{"sub":"a","projects":"x","projects":"*"}"#,
            ),
            (r#"{"alg":"HS256"}"#, r#"{"sub":"a","nested":{"k":1,"k":2}}"#),
            (r#"{"alg":"HS256"}"#, "not json"),
        ] {
            assert!(!strictly_formed(&token(header, payload)), "{header} {payload}");
        }
        assert!(!strictly_formed("only-one-part"));
    }

    #[test]
    fn tokens_with_or_without_the_bearer_scheme() {
        assert_eq!(bearer_token(&headers(&["Bearer abc"])), Some("abc"));
        assert_eq!(bearer_token(&headers(&["bearer  abc "])), Some("abc"));
        assert_eq!(bearer_token(&headers(&["abc"])), Some("abc"));
        assert_eq!(bearer_token(&headers(&["Basic abc"])), None);
        assert_eq!(bearer_token(&headers(&["Bearer "])), None);
        assert_eq!(bearer_token(&headers(&[])), None);
        assert_eq!(bearer_token(&headers(&["Bearer a", "Bearer b"])), None);
    }

    #[test]
    fn claims_render_as_api_gateway_passes_them() {
        let claims = serde_json::json!({
            "sub": "user-1",
            "projects": ["a", "b"],
            "n": 5,
            "ok": true,
            "gone": null,
            "nested": [["x"], 1]
        });
        let Value::Object(claims) = claims else {
            panic!("an object")
        };
        let rendered = render_claims(claims);
        assert_eq!(rendered["sub"], "user-1");
        assert_eq!(rendered["projects"], "[a b]");
        assert_eq!(rendered["n"], "5");
        assert_eq!(rendered["ok"], "true");
        assert_eq!(rendered["nested"], "[[x] 1]");
        assert!(!rendered.contains_key("gone"));
    }

    #[test]
    fn issuer_audience_and_expiry_are_judged_as_api_gateway_and_rfc_7519_do() {
        let secret = b"local development secret";
        let authorizer = JwtAuthorizer::with_secret(secret)
            .unwrap()
            .issuer("https://iss.test")
            .audiences(vec!["aud-test".into()]);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|elapsed| elapsed.as_secs())
            .unwrap_or_default();
        let verifies = |claims: Value| {
            let Value::Object(mut claims) = claims else {
                panic!("an object")
            };
            claims.entry("sub").or_insert("dev".into());
            claims.entry("exp").or_insert((now + 60).into());
            let token = jsonwebtoken::encode(
                &Header::new(Algorithm::HS256),
                &claims,
                &EncodingKey::from_secret(secret),
            )
            .unwrap();
            authorizer.verify(&token).is_some()
        };
        use serde_json::json;
        let iss = "https://iss.test";
        assert!(verifies(json!({"iss": iss, "aud": "aud-test"})));
        assert!(verifies(json!({"iss": iss, "aud": ["other", "aud-test"]})));
        assert!(verifies(json!({"iss": iss, "client_id": "aud-test"})));
        for refused in [
            // iss is one string, not a list holding it.
            json!({"iss": ["https://evil", iss], "aud": "aud-test"}),
            json!({"aud": "aud-test"}),
            // An aud present is judged alone: empty, it names none; and
            // what is not a string names nothing.
            json!({"iss": iss, "aud": [], "client_id": "aud-test"}),
            json!({"iss": iss, "aud": [5, "aud-test"]}),
            json!({"iss": iss, "aud": "other", "client_id": "aud-test"}),
            json!({"iss": iss, "client_id": ["aud-test", 5]}),
            // Not accepted on or after exp.
            json!({"iss": iss, "aud": "aud-test", "exp": now}),
            json!({"iss": iss, "aud": "aud-test", "exp": now - 1}),
            json!({"iss": iss, "aud": "aud-test", "nbf": now + 60}),
        ] {
            assert!(!verifies(refused.clone()), "{refused}");
        }
    }

    #[test]
    fn a_development_token_verifies_and_a_tampered_one_does_not() {
        let secret = b"local development secret";
        let authorizer = JwtAuthorizer::with_secret(secret).unwrap();
        let token = development_token(secret, "dev", "projects", "*", 60).unwrap();
        let claims = authorizer.verify(&token).expect("valid token refused");
        assert_eq!(claims["projects"], "*");
        let other = JwtAuthorizer::with_secret(b"another secret").unwrap();
        assert!(other.verify(&token).is_none());
        assert!(authorizer.verify(&format!("{token}x")).is_none());
        assert!(JwtAuthorizer::with_secret(b"").is_err());
    }
}
