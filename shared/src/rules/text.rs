//! Plain strings: `name` and `model_id`, the secret `api_key`, and the
//! `provider_type` enum.

use icu_properties::props::{
    BidiControl, DefaultIgnorableCodePoint, GeneralCategory, GeneralCategoryGroup, NoncharacterCodePoint,
    PrependedConcatenationMark,
};
use icu_properties::{CodePointMapData, CodePointSetData};
use serde_json::Value;

use super::wrong_type;
use crate::error::{FieldError, FieldErrors};
use crate::provider::ProviderType;

/// Longest `name` or `model_id`.
pub const MAX_TEXT_CHARS: usize = 255;
/// Longest `api_key`, in bytes: the most KMS `Encrypt` takes. A secret is
/// visible ASCII, so its bytes are its characters.
pub const MAX_SECRET_BYTES: usize = 4096;

/// The length rule of text: 1 to `max` characters.
fn length(path: &str, text: &str, max: usize, errors: &mut FieldErrors) -> bool {
    let bounds = || format!("must be 1 to {max} characters");
    let length = text.chars().count();
    if length == 0 {
        errors.push(FieldError::new(path, "too_short", bounds()));
    } else if length > max {
        errors.push(FieldError::new(path, "too_long", bounds()));
    } else {
        return true;
    }
    false
}

/// Characters that render as nothing though no Unicode property says so:
/// the Braille pattern blank, used as an invisible filler. (The Hangul
/// fillers are Default_Ignorable_Code_Point already.)
const INVISIBLE_FILLERS: [char; 1] = ['\u{2800}'];

/// Whether `c` is a Bidi_Control character (U+061C, U+200E, U+200F,
/// U+202A to U+202E, U+2066 to U+2069): it reorders the text around it,
/// so what a reader sees is not what is stored (the Trojan Source class).
pub fn is_bidi_control(c: char) -> bool {
    CodePointSetData::new::<BidiControl>().contains(c)
}

/// Whether `c` is a noncharacter (U+FDD0 to U+FDEF, and the last two code
/// points of every plane): never meant for interchange.
pub fn is_noncharacter(c: char) -> bool {
    CodePointSetData::new::<NoncharacterCodePoint>().contains(c)
}

/// Whether `c` shows something on its own: it is assigned, not a
/// control character (refused in text anyway), not whitespace, not a format character (General_Category Cf) unless it is a
/// prepended concatenation mark (U+0600 ARABIC NUMBER SIGN and its kin,
/// which draw a sign spanning the digits after them), not a
/// default-ignorable code point (zero-width characters, the Hangul
/// fillers, variation selectors, tags), not a combining mark (which only
/// decorates another character), and not an invisible filler such as
/// U+2800. Format characters are judged by their category rather than by
/// Default_Ignorable_Code_Point alone, because some (the interlinear
/// annotation controls U+FFF9 to U+FFFB, the Egyptian hieroglyph format
/// controls) are not default-ignorable yet draw nothing; an unassigned
/// code point has no glyph in any font.
pub fn is_visible(c: char) -> bool {
    let category = CodePointMapData::<GeneralCategory>::new().get(c);
    !matches!(category, GeneralCategory::Unassigned | GeneralCategory::Control)
        && !c.is_whitespace()
        && (category != GeneralCategory::Format
            || CodePointSetData::new::<PrependedConcatenationMark>().contains(c))
        && !CodePointSetData::new::<DefaultIgnorableCodePoint>().contains(c)
        && !GeneralCategoryGroup::Mark.contains(category)
        && !INVISIBLE_FILLERS.contains(&c)
}

/// The problem with characters no displayed text may hold besides
/// controls: Bidi_Control characters and noncharacters. Shared by text
/// fields and header values.
pub(crate) fn hidden_character(path: &str, text: &str) -> Option<FieldError> {
    if text.chars().any(is_bidi_control) {
        Some(FieldError::new(
            path,
            "bidi_control",
            "must not contain bidirectional control characters (U+061C, U+200E, U+200F, \
             U+202A to U+202E, U+2066 to U+2069)",
        ))
    } else if text.chars().any(is_noncharacter) {
        Some(FieldError::new(
            path,
            "noncharacter",
            "must not contain Unicode noncharacters",
        ))
    } else {
        None
    }
}

pub(super) fn text(path: &str, value: &Value, max: usize, errors: &mut FieldErrors) {
    let Some(text) = value.as_str() else {
        return errors.push(wrong_type(path, "a string", value));
    };
    if !length(path, text, max, errors) {
        return;
    }
    if text.chars().any(char::is_control) {
        errors.push(FieldError::new(
            path,
            "control_character",
            "must not contain control characters",
        ));
    } else if let Some(problem) = hidden_character(path, text) {
        errors.push(problem);
    } else if !text.chars().any(is_visible) {
        errors.push(FieldError::new(
            path,
            "blank",
            "must contain a visible character (assigned, not whitespace, a format or \
             default-ignorable character, a combining mark or an invisible filler)",
        ));
    }
}

pub(super) fn secret(path: &str, value: &Value, max: usize, errors: &mut FieldErrors) {
    let Some(secret) = value.as_str() else {
        return errors.push(wrong_type(path, "a string", value));
    };
    // Agents send the key as an HTTP header value, and every provider's
    // keys are visible ASCII: U+0021 to U+007E, no space.
    if !secret.bytes().all(|byte| byte.is_ascii_graphic()) {
        return errors.push(FieldError::new(
            path,
            "invalid_character",
            "must be visible ASCII characters (U+0021 to U+007E)",
        ));
    }
    if secret.is_empty() || secret.len() > max {
        errors.push(FieldError::new(
            path,
            if secret.is_empty() {
                "too_short"
            } else {
                "too_long"
            },
            format!("must be 1 to {max} bytes"),
        ));
    }
}

pub(super) fn provider(path: &str, value: &Value, errors: &mut FieldErrors) {
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

#[cfg(test)]
mod tests {
    use super::super::Rule;
    use super::super::testing::{codes, errors};
    use super::{MAX_SECRET_BYTES, MAX_TEXT_CHARS};
    use serde_json::json;

    const NAME: Rule = Rule::Text { max: MAX_TEXT_CHARS };
    const API_KEY: Rule = Rule::Secret {
        max: MAX_SECRET_BYTES,
    };

    #[test]
    fn text_length_boundaries_count_characters() {
        assert!(codes(NAME, json!("a".repeat(255))).is_empty());
        assert_eq!(codes(NAME, json!("a".repeat(256))), ["too_long"]);
        // 255 four-byte characters are 1020 bytes and still fit.
        assert!(codes(NAME, json!("😀".repeat(255))).is_empty());
        assert_eq!(codes(NAME, json!("é".repeat(256))), ["too_long"]);
        // The limit is the rule's data: another field may have another.
        let long = Rule::Text { max: 1000 };
        assert!(codes(long, json!("é".repeat(1000))).is_empty());
        assert_eq!(codes(long, json!("é".repeat(1001))), ["too_long"]);
        let errors = errors(long, "description", json!(""));
        assert_eq!(errors[0].message, "must be 1 to 1000 characters");
        assert_eq!(codes(NAME, json!("")), ["too_short"]);
        assert!(codes(NAME, json!("x")).is_empty());
    }

    #[test]
    fn text_needs_a_visible_character() {
        for invisible in [
            "\u{200b}",
            "\u{200b}\u{200c}\u{200d}\u{2060}\u{feff}",
            "\u{115f}\u{1160}\u{3164}\u{ffa0}",
            "\u{2800}",
            "\u{ad}",
            "\u{34f}",
            "\u{301}\u{301}",
            "\u{fe0f}",
            "\u{e0041}\u{e0042}",
            " \u{200b} \u{3000}",
            "\u{180e}",
        ] {
            assert_eq!(codes(NAME, json!(invisible)), ["blank"], "{invisible:?}");
        }
        for visible in ["a\u{200b}", "e\u{301}", "\u{2800}x", "😀", "ا", "\u{3164}한"] {
            assert!(codes(NAME, json!(visible)).is_empty(), "{visible:?}");
        }
    }

    #[test]
    fn format_characters_and_unassigned_code_points_are_not_visible() {
        // Format controls that are not default-ignorable, and unassigned
        // code points: a name of nothing else renders as nothing.
        let mut invisible: Vec<char> = [
            '\u{fff9}',
            '\u{fffa}',
            '\u{fffb}',
            '\u{378}',
            '\u{5ff}',
            '\u{e0080}',
        ]
        .into_iter()
        .chain(('\u{13430}'..='\u{1343f}').filter(|c| *c != '\u{13440}'))
        .collect();
        invisible.push('\u{2800}');
        for c in &invisible {
            assert_eq!(codes(NAME, json!(c.to_string())), ["blank"], "{:#x}", *c as u32);
            assert_eq!(
                codes(NAME, json!(format!("{c}\u{fff9} {c}"))),
                ["blank"],
                "{:#x}",
                *c as u32
            );
            assert!(codes(NAME, json!(format!("{c}x"))).is_empty(), "{:#x}", *c as u32);
        }
        // Prepended concatenation marks are format characters that draw a
        // sign of their own.
        for c in [
            '\u{600}',
            '\u{601}',
            '\u{602}',
            '\u{603}',
            '\u{604}',
            '\u{605}',
            '\u{6dd}',
            '\u{70f}',
            '\u{890}',
            '\u{891}',
            '\u{8e2}',
            '\u{110bd}',
            '\u{110cd}',
        ] {
            assert!(codes(NAME, json!(c.to_string())).is_empty(), "{:#x}", c as u32);
        }
    }

    /// The class, over every code point: a character counts as visible
    /// exactly when its general category is a letter, number, punctuation,
    /// symbol, private-use or (for a prepended concatenation mark) format
    /// one, and it is neither default-ignorable nor U+2800.
    #[test]
    fn visibility_follows_the_general_category_on_every_code_point() {
        use icu_properties::props::{
            DefaultIgnorableCodePoint, GeneralCategory, GeneralCategoryGroup, PrependedConcatenationMark,
        };
        use icu_properties::{CodePointMapData, CodePointSetData};
        let category = CodePointMapData::<GeneralCategory>::new();
        let ignorable = CodePointSetData::new::<DefaultIgnorableCodePoint>();
        let prepended = CodePointSetData::new::<PrependedConcatenationMark>();
        let shown = GeneralCategoryGroup::Letter
            .union(GeneralCategoryGroup::Number)
            .union(GeneralCategoryGroup::Punctuation)
            .union(GeneralCategoryGroup::Symbol)
            .union(GeneralCategoryGroup::PrivateUse);
        let mut counted = [0usize; 2];
        for c in ('\0'..=char::MAX).filter(|c| !c.is_whitespace()) {
            let gc = category.get(c);
            let expected =
                (shown.contains(gc) || prepended.contains(c)) && !ignorable.contains(c) && c != '\u{2800}';
            assert_eq!(super::is_visible(c), expected, "{:#x} {gc:?}", c as u32);
            counted[usize::from(expected)] += 1;
        }
        // Neither side is empty: the assertion above can fail either way.
        assert!(counted[0] > 800_000 && counted[1] > 150_000, "{counted:?}");
        for c in [' ', '\u{a0}', '\u{3000}', '\u{2028}', '\u{1680}'] {
            assert!(!super::is_visible(c), "{:#x}", c as u32);
        }
    }

    #[test]
    fn bidi_controls_and_noncharacters_are_refused_anywhere() {
        let bidi = [
            0x061C, 0x200E, 0x200F, 0x202A, 0x202B, 0x202C, 0x202D, 0x202E, 0x2066, 0x2067, 0x2068, 0x2069,
        ];
        for code in bidi {
            let c = char::from_u32(code).unwrap_or_default();
            assert_eq!(
                codes(NAME, json!(format!("abc{c}def"))),
                ["bidi_control"],
                "{code:#x}"
            );
        }
        for code in [0xFDD0, 0xFDEF, 0xFFFE, 0xFFFF, 0x1FFFE, 0x10FFFF] {
            let c = char::from_u32(code).unwrap_or_default();
            assert_eq!(codes(NAME, json!(format!("a{c}"))), ["noncharacter"], "{code:#x}");
        }
        // Exactly those: every other code point up to U+3100 is neither.
        for code in (0..0x3100).chain(0xFDB0..0xFE10) {
            let Some(c) = char::from_u32(code) else { continue };
            assert_eq!(super::is_bidi_control(c), bidi.contains(&code), "{code:#x}");
            assert_eq!(
                super::is_noncharacter(c),
                (0xFDD0..=0xFDEF).contains(&code),
                "{code:#x}"
            );
        }
    }

    #[test]
    fn text_must_not_be_blank_or_control() {
        assert_eq!(codes(NAME, json!("   ")), ["blank"]);
        assert_eq!(codes(NAME, json!("\u{3000}")), ["blank"]);
        assert_eq!(codes(NAME, json!("a\tb")), ["control_character"]);
        assert_eq!(codes(NAME, json!("a\u{0}b")), ["control_character"]);
        assert_eq!(codes(NAME, json!("a\u{7f}")), ["control_character"]);
        assert_eq!(codes(NAME, json!("a\u{85}")), ["control_character"]);
        assert!(codes(NAME, json!(" Claude Sonnet 4 ")).is_empty());
        assert!(codes(NAME, json!("модель 模型")).is_empty());
    }

    #[test]
    fn secret_rules() {
        assert!(codes(API_KEY, json!("k".repeat(4096))).is_empty());
        assert_eq!(codes(API_KEY, json!("k".repeat(4097))), ["too_long"]);
        assert_eq!(codes(API_KEY, json!("")), ["too_short"]);
        assert!(
            codes(
                API_KEY,
                json!("sk-ant-api03_AZaz09~!\"#$%&'()*+,./:;<=>?@[\\]^`{|}")
            )
            .is_empty()
        );
        for bad in [
            "sk live",
            "sk\u{a0}live",
            "sk\nlive",
            "sk-ant-api03_ключ",
            "sk\u{7f}",
            "sk\u{200b}x",
            "é",
        ] {
            assert_eq!(codes(API_KEY, json!(bad)), ["invalid_character"], "{bad:?}");
        }
        // Every code point outside U+0021..=U+007E is refused, alone or
        // inside a key.
        for code in (0u32..0x3100).chain([0xFEFF, 0xFFFD, 0x1F600, 0xE0041]) {
            let Some(c) = char::from_u32(code) else { continue };
            let expected: &[&str] = if ('\u{21}'..='\u{7e}').contains(&c) {
                &[]
            } else {
                &["invalid_character"]
            };
            assert_eq!(codes(API_KEY, json!(format!("sk{c}k"))), expected, "{code:#x}");
        }
    }

    #[test]
    fn secret_messages_never_contain_the_secret() {
        for value in ["", "sk SENTINEL", &"SENTINEL".repeat(600)] {
            let errors = errors(API_KEY, "api_key", json!(value));
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
        let errors = errors(Rule::Provider, "provider_type", json!("x"));
        assert_eq!(errors[0].message, "must be one of OpenAI, Anthropic, Gemini, xAI");
    }
}
