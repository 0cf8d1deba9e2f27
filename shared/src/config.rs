//! Settings read once at start-up from the environment.

use std::env;

use crate::auth::DEFAULT_PROJECTS_CLAIM;
use crate::keycheck::ProviderBases;
use crate::rules::Policy;

/// Why the environment could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A variable holds a value the service cannot use.
    #[error("{name} must be {expected}")]
    Invalid {
        /// The variable.
        name: &'static str,
        /// What it must hold.
        expected: &'static str,
    },
}

/// Everything a handler needs besides the store (which owns the table
/// names, [`crate::store::TableNames`]).
#[derive(Debug, Clone)]
pub struct Settings {
    /// Field-rule policy.
    pub policy: Policy,
    /// The JWT claim listing the caller's projects (`PROJECTS_CLAIM`).
    pub projects_claim: String,
    /// The namespace of the metrics lines (`METRICS_NAMESPACE`).
    pub metrics_namespace: String,
    /// Where each provider's API is, for `verify=true` on an API key
    /// (`OPENAI_BASE_URL`, `ANTHROPIC_BASE_URL`, `GEMINI_BASE_URL`,
    /// `XAI_BASE_URL`; each provider's own by default).
    pub providers: ProviderBases,
}

impl Default for Settings {
    /// The local defaults: private endpoints refused, the projects listed
    /// in the `projects` claim.
    fn default() -> Self {
        Self {
            policy: Policy::default(),
            projects_claim: DEFAULT_PROJECTS_CLAIM.into(),
            metrics_namespace: crate::metrics::DEFAULT_NAMESPACE.into(),
            providers: ProviderBases::default(),
        }
    }
}

impl Settings {
    /// Reads `ALLOW_PRIVATE_ENDPOINTS`, `PROJECTS_CLAIM` (default
    /// [`DEFAULT_PROJECTS_CLAIM`]), `METRICS_NAMESPACE` (default
    /// [`crate::metrics::DEFAULT_NAMESPACE`]) and the providers' base URLs
    /// ([`ProviderBases`]).
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|name| env::var(name).ok())
    }

    /// As [`Settings::from_env`], reading variables through `lookup`.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let allow_private_endpoints = match lookup("ALLOW_PRIVATE_ENDPOINTS")
            .unwrap_or_default()
            .trim()
            .to_ascii_lowercase()
            .as_str()
        {
            "" | "false" | "0" => false,
            "true" | "1" => true,
            _ => {
                return Err(ConfigError::Invalid {
                    name: "ALLOW_PRIVATE_ENDPOINTS",
                    expected: "true or false",
                });
            }
        };
        Ok(Self {
            policy: Policy {
                allow_private_endpoints,
            },
            projects_claim: lookup("PROJECTS_CLAIM")
                .map(|claim| claim.trim().to_owned())
                .filter(|claim| !claim.is_empty())
                .unwrap_or_else(|| DEFAULT_PROJECTS_CLAIM.into()),
            metrics_namespace: lookup("METRICS_NAMESPACE")
                .map(|namespace| namespace.trim().to_owned())
                .filter(|namespace| !namespace.is_empty())
                .unwrap_or_else(|| crate::metrics::DEFAULT_NAMESPACE.into()),
            providers: ProviderBases::from_lookup(&lookup).map_err(|name| ConfigError::Invalid {
                name,
                expected: "an absolute http or https URL",
            })?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{Table, TableNames};

    #[test]
    fn defaults_and_overrides() {
        let settings = Settings::from_lookup(|_| None).ok();
        let settings = settings.expect("defaults must load");
        assert_eq!(TableNames::from_lookup(|_| None), TableNames::default());
        assert_eq!(TableNames::default().name(Table::Models), "agent-server-models");
        assert!(!settings.policy.allow_private_endpoints);

        let settings = Settings::from_lookup(|name| match name {
            "MODELS_TABLE" => Some("prod-models".into()),
            "ALLOW_PRIVATE_ENDPOINTS" => Some("TRUE".into()),
            _ => None,
        });
        let settings = settings.unwrap();
        let tables = TableNames::from_lookup(|name| (name == "MODELS_TABLE").then(|| "prod-models".into()));
        assert_eq!(tables.name(Table::Models), "prod-models");
        assert_eq!(tables.name(Table::ApiKeys), "agent-server-api-keys");
        assert!(settings.policy.allow_private_endpoints);
        assert_eq!(settings.projects_claim, DEFAULT_PROJECTS_CLAIM);

        let claim = |value: &str| {
            let value = value.to_owned();
            Settings::from_lookup(move |name| (name == "PROJECTS_CLAIM").then(|| value.clone()))
                .map(|settings| settings.projects_claim)
                .ok()
        };
        assert_eq!(claim(" custom:projects ").as_deref(), Some("custom:projects"));
        assert_eq!(claim("").as_deref(), Some(DEFAULT_PROJECTS_CLAIM));
    }

    #[test]
    fn a_typo_in_the_policy_is_an_error_not_a_silent_false() {
        let result = Settings::from_lookup(|name| (name == "ALLOW_PRIVATE_ENDPOINTS").then(|| "yes".into()));
        assert!(result.is_err());
    }
}
