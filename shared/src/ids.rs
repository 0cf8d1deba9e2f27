//! UUIDs in paths and query strings.

use uuid::Uuid;

/// Accepts a UUID in canonical hyphenated form (8-4-4-4-12 hex digits, any
/// letter case) and returns it lowercased.
///
/// The `uuid` crate also accepts the simple, braced and URN forms; those are
/// refused here so that one record has exactly one spelling of its id.
pub fn parse_uuid(raw: &str) -> Option<String> {
    if raw.len() != 36 {
        return None;
    }
    Uuid::try_parse(raw)
        .ok()
        .map(|uuid| uuid.hyphenated().to_string())
}

#[cfg(test)]
mod tests {
    use super::parse_uuid;

    #[test]
    fn canonical_forms_are_lowercased() {
        assert_eq!(
            parse_uuid("3F1C2A9E-7B4D-4E8A-9C21-5D6E7F8A9B01").as_deref(),
            Some("3f1c2a9e-7b4d-4e8a-9c21-5d6e7f8a9b01")
        );
        assert_eq!(
            parse_uuid("00000000-0000-0000-0000-000000000000").as_deref(),
            Some("00000000-0000-0000-0000-000000000000")
        );
    }

    #[test]
    fn other_spellings_are_refused() {
        for raw in [
            "",
            "3f1c2a9e7b4d4e8a9c215d6e7f8a9b01",
            "{3f1c2a9e-7b4d-4e8a-9c21-5d6e7f8a9b01}",
            "urn:uuid:3f1c2a9e-7b4d-4e8a-9c21-5d6e7f8a9b01",
            "3f1c2a9e-7b4d-4e8a-9c21-5d6e7f8a9b0g",
            "3f1c2a9e-7b4d-4e8a-9c21-5d6e7f8a9b0",
            " 3f1c2a9e-7b4d-4e8a-9c21-5d6e7f8a9b01",
            "3f1c2a9e-7b4d-4e8a-9c21_5d6e7f8a9b01",
            "not-a-uuid",
        ] {
            assert_eq!(parse_uuid(raw), None, "{raw:?}");
        }
    }
}
