//! A secret's text (`api_key`, an MCP header value) from the body that
//! carried it to the seal: nothing that holds one can show it, and its
//! memory is zeroed when it is dropped.

use zeroize::Zeroizing;

/// Text that must reach no response it does not belong in, no error detail
/// and no log line: its `Debug` names it only, and it has no `Display`,
/// `Serialize` or `Deref`. [`Secret::expose`] is the one way to its text.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(Zeroizing<String>);

impl Secret {
    /// The text, for the one place that needs it: the seal.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl From<&str> for Secret {
    fn from(text: &str) -> Self {
        Self(Zeroizing::new(text.to_owned()))
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("Secret(…)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_shows_the_text() {
        let secret = Secret::from("sk-never-shown");
        assert_eq!(format!("{secret:?}"), "Secret(…)");
        assert_eq!(format!("{:?}", Some(vec![secret.clone()])), "Some([Secret(…)])");
        assert_eq!(secret.expose(), "sk-never-shown");
    }
}
