//! The model providers: one enum, their exact spellings, and their order.

use serde::Serialize;

/// The model providers, in their documented order and exact spelling.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum ProviderType {
    /// `OpenAI`
    OpenAI,
    /// `Anthropic`
    Anthropic,
    /// `Gemini`
    Gemini,
    /// `xAI`
    #[serde(rename = "xAI")]
    XAi,
}

impl ProviderType {
    /// Every provider, in documented order.
    pub const ALL: [ProviderType; 4] = [Self::OpenAI, Self::Anthropic, Self::Gemini, Self::XAi];

    /// The exact spelling.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::OpenAI => "OpenAI",
            Self::Anthropic => "Anthropic",
            Self::Gemini => "Gemini",
            Self::XAi => "xAI",
        }
    }

    /// Every accepted spelling, in documented order (derived from [`Self::ALL`]).
    pub const SPELLINGS: [&'static str; Self::ALL.len()] = {
        let mut spellings = [""; Self::ALL.len()];
        let mut index = 0;
        while index < spellings.len() {
            spellings[index] = Self::ALL[index].as_str();
            index += 1;
        }
        spellings
    };

    /// Parses an exact, case-sensitive spelling.
    pub fn parse(spelling: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|provider| provider.as_str() == spelling)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings_parse_serialise_and_keep_their_order() {
        assert_eq!(ProviderType::SPELLINGS, ["OpenAI", "Anthropic", "Gemini", "xAI"]);
        for provider in ProviderType::ALL {
            assert_eq!(ProviderType::parse(provider.as_str()), Some(provider));
            assert_eq!(
                serde_json::to_value(provider).ok(),
                Some(serde_json::Value::from(provider.as_str()))
            );
        }
        assert_eq!(ProviderType::parse("openai"), None);
    }
}
