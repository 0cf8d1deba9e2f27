//! RFC 9110's preconditions (section 13) as this API reads them: `If-Match`,
//! `If-None-Match` and `If-Unmodified-Since`, judged in the one conditional
//! write; entity tags name versions.

use aws_lambda_events::http::header;

use crate::apigw::Request;
use crate::error::{ApiError, FieldError};
use crate::store::NoneMatch;
#[cfg(doc)]
use crate::store::Update;

/// Most entity tags one `If-Match` may list (DynamoDB's `IN` limit).
pub const MAX_IF_MATCH_TAGS: usize = 100;

/// What a request's preconditions (RFC 9110 section 13) ask of the stored
/// record; all are checked inside the one conditional write.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Preconditions {
    /// The versions `If-Match` accepts ([`Update::expected_versions`]).
    pub if_match: Option<Vec<u64>>,
    /// What `If-None-Match` refuses ([`Update::none_match`]).
    pub if_none_match: Option<NoneMatch>,
    /// `If-Unmodified-Since` as the stored-format timestamp the record's
    /// `updated_at` must be earlier than ([`Update::unmodified_before`]).
    pub unmodified_before: Option<String>,
}

/// Reads `If-Match`, `If-None-Match` and `If-Unmodified-Since`.
///
/// `If-Match`: `None` without the header or with `*` (the record need only
/// exist), else the versions its strong entity tags name. Weak and
/// non-numeric tags never match a version, so a list of only those is
/// `Some(vec![])`, which no stored record satisfies.
///
/// `If-None-Match`: `*`, or the versions its tags name compared weakly
/// (`W/"3"` names version 3), as RFC 9110 13.1.2 says.
///
/// `If-Unmodified-Since`: ignored when `If-Match` is present or when it is
/// not a valid HTTP-date (RFC 9110 13.1.4); the record must not have been
/// written after it, to the second.
///
/// Several header lines are one comma-separated list (RFC 9110 5.3), so
/// `*` is valid only as the whole of a single line; inside a list it is
/// malformed. The tag limit is checked while reading, so a huge header
/// costs no more than its first [`MAX_IF_MATCH_TAGS`] + 1 tags.
pub fn preconditions(request: &Request) -> Result<Preconditions, ApiError> {
    let if_match = match tag_list(request, &header::IF_MATCH, false, ApiError::InvalidIfMatch)? {
        None | Some(TagList::Any) => None,
        Some(TagList::Versions(versions)) => Some(versions),
    };
    let if_none_match = match tag_list(
        request,
        &header::IF_NONE_MATCH,
        true,
        ApiError::InvalidIfNoneMatch,
    )? {
        None => None,
        Some(TagList::Any) => Some(NoneMatch::Any),
        Some(TagList::Versions(versions)) => Some(NoneMatch::Versions(versions)),
    };
    let unmodified_before = if request.headers().contains_key(header::IF_MATCH) {
        None
    } else {
        unmodified_before(request)
    };
    Ok(Preconditions {
        if_match,
        if_none_match,
        unmodified_before,
    })
}

/// The stored-format timestamp one second past `If-Unmodified-Since`, if it
/// is one valid HTTP-date: `updated_at` earlier than it means "not modified
/// since", at the date's one-second precision.
fn unmodified_before(request: &Request) -> Option<String> {
    let mut lines = request.headers().get_all(header::IF_UNMODIFIED_SINCE).iter();
    let (Some(line), None) = (lines.next(), lines.next()) else {
        return None;
    };
    let text = line.to_str().ok()?.trim_matches([' ', '\t']);
    // IMF-fixdate first with chrono, which reads years before 1970 too (a
    // valid HTTP-date, earlier than every write); httpdate for the two
    // obsolete forms.
    let date = match chrono::NaiveDateTime::parse_from_str(text, "%a, %d %b %Y %H:%M:%S GMT") {
        Ok(date) => date.and_utc(),
        Err(_) => chrono::DateTime::<chrono::Utc>::from(httpdate::parse_http_date(text).ok()?),
    };
    let bound = date + chrono::Duration::seconds(1);
    // Past year 9999 the stored format has no spelling; every write is earlier.
    if chrono::Datelike::year(&bound) > 9999 {
        return None;
    }
    Some(bound.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
}

/// A precondition header's value: `*`, or the versions its entity tags
/// name.
enum TagList {
    Any,
    Versions(Vec<u64>),
}

/// Reads the entity-tag list of header `name` (all its lines), or `None`
/// without it; a malformed one is `invalid` (with the header's own code).
/// Weak tags name a version only where `weak` comparison applies
/// (If-None-Match); only the canonical decimal spelling is an ETag this
/// service issued.
fn tag_list(
    request: &Request,
    name: &header::HeaderName,
    weak: bool,
    invalid: fn(FieldError) -> ApiError,
) -> Result<Option<TagList>, ApiError> {
    let (header_name, code) = if *name == header::IF_MATCH {
        ("If-Match", "invalid_if_match")
    } else {
        ("If-None-Match", "invalid_if_none_match")
    };
    let malformed = || {
        invalid(FieldError::new(
            header_name,
            code,
            "must be * or a list of entity tags",
        ))
    };
    let lines = request.headers().get_all(name);
    let mut iter = lines.iter();
    let Some(first) = iter.next() else {
        return Ok(None);
    };
    let single = iter.next().is_none();
    if single
        && first
            .to_str()
            .is_ok_and(|text| text.trim_matches([' ', '\t']) == "*")
    {
        return Ok(Some(TagList::Any));
    }
    let mut versions = Vec::new();
    let mut tags = 0;
    for line in lines {
        // RFC 9110's etagc includes obs-text (bytes 0x80-0xFF), which
        // `to_str` refuses; such a tag is well-formed and matches no version.
        let text = String::from_utf8_lossy(line.as_bytes());
        for tag in EntityTags(&text) {
            tags += 1;
            if tags > MAX_IF_MATCH_TAGS {
                return Err(invalid(FieldError::new(
                    header_name,
                    code,
                    format!("must list at most {MAX_IF_MATCH_TAGS} entity tags"),
                )));
            }
            let opaque = match tag.ok_or_else(malformed)? {
                EntityTag::Strong(opaque) => opaque,
                EntityTag::Weak(opaque) if weak => opaque,
                EntityTag::Weak(_) => continue,
            };
            if let Ok(version) = opaque.parse::<u64>()
                && version.to_string() == opaque
                && !versions.contains(&version)
            {
                versions.push(version);
            }
        }
    }
    Ok(Some(TagList::Versions(versions)))
}

enum EntityTag<'a> {
    Strong(&'a str),
    Weak(&'a str),
}

/// Reads RFC 9110 `#entity-tag` one tag at a time: `Some(None)` for a
/// malformed list, after which it stops. The list may be empty (then no
/// version matches).
struct EntityTags<'a>(&'a str);

impl<'a> Iterator for EntityTags<'a> {
    type Item = Option<EntityTag<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        let rest = self.0.trim_start_matches([' ', '\t', ',']);
        if rest.is_empty() {
            return None;
        }
        let tag = read_tag(rest);
        self.0 = match tag {
            Some((_, after)) => after,
            None => "",
        };
        Some(tag.map(|(tag, _)| tag))
    }
}

/// One entity tag at the start of `text` and what follows its separator.
fn read_tag(text: &str) -> Option<(EntityTag<'_>, &str)> {
    let (weak, rest) = match text.strip_prefix("W/") {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let body = rest.strip_prefix('"')?;
    let end = body.find('"')?;
    let opaque = &body[..end];
    let etagc = |c: char| c == '\x21' || ('\x23'..='\x7e').contains(&c) || !c.is_ascii();
    if !opaque.chars().all(etagc) {
        return None;
    }
    let after = body[end + 1..].trim_start_matches([' ', '\t']);
    if !(after.is_empty() || after.starts_with(',')) {
        return None;
    }
    let tag = if weak {
        EntityTag::Weak(opaque)
    } else {
        EntityTag::Strong(opaque)
    };
    Some((tag, after))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::test_support::{code, fails, request};

    fn expected_versions(request: &Request) -> Result<Option<Vec<u64>>, ApiError> {
        preconditions(request).map(|found| found.if_match)
    }

    fn none_match(value: &str) -> Result<Option<NoneMatch>, String> {
        code(preconditions(&request(&[], &[("if-none-match", value)], "")).map(|found| found.if_none_match))
    }

    #[test]
    fn if_none_match_forms_compare_weakly() {
        assert_eq!(none_match("*"), Ok(Some(NoneMatch::Any)));
        assert_eq!(none_match("\"3\""), Ok(Some(NoneMatch::Versions(vec![3]))));
        assert_eq!(
            none_match("W/\"3\", \"5\""),
            Ok(Some(NoneMatch::Versions(vec![3, 5])))
        );
        assert_eq!(none_match("\"abc\""), Ok(Some(NoneMatch::Versions(vec![]))));
        for bad in ["3", "*, \"3\"", "W/3", "\"3\" x"] {
            assert_eq!(none_match(bad), fails("invalid_if_none_match"), "{bad:?}");
        }
        let lines = preconditions(&request(
            &[],
            &[("if-none-match", "\"1\""), ("if-none-match", "*")],
            "",
        ));
        assert!(matches!(lines, Err(ApiError::InvalidIfNoneMatch(_))));
    }

    #[test]
    fn if_unmodified_since_is_a_bound_one_second_past_its_date() {
        let bound = |headers: &[(&str, &str)]| {
            preconditions(&request(&[], headers, ""))
                .ok()
                .and_then(|found| found.unmodified_before)
        };
        let expected = Some("2026-11-21T14:55:01.000Z".to_string());
        // IMF-fixdate, and the two obsolete forms RFC 9110 says to accept.
        assert_eq!(
            bound(&[("if-unmodified-since", "Sat, 21 Nov 2026 14:55:00 GMT")]),
            expected
        );
        assert_eq!(
            bound(&[("if-unmodified-since", "Saturday, 21-Nov-26 14:55:00 GMT")]),
            expected
        );
        assert_eq!(
            bound(&[("if-unmodified-since", "Sat Nov 21 14:55:00 2026")]),
            expected
        );
        // Ignored: not a date, two lines, or If-Match present.
        for ignored in [
            "yesterday",
            "",
            "2026-11-21T14:55:00Z",
            "Sat, 21 Nov 2026 14:55:00 UTC",
        ] {
            assert_eq!(bound(&[("if-unmodified-since", ignored)]), None, "{ignored:?}");
        }
        let date = "Sat, 21 Nov 2026 14:55:00 GMT";
        assert_eq!(
            bound(&[("if-unmodified-since", date), ("if-unmodified-since", date)]),
            None
        );
        assert_eq!(bound(&[("if-unmodified-since", date), ("if-match", "*")]), None);
    }

    #[test]
    fn if_match_forms() {
        let versions = |value: &str| code(expected_versions(&request(&[], &[("if-match", value)], "")));
        assert_eq!(code(expected_versions(&request(&[], &[], ""))), Ok(None));
        assert_eq!(versions("*"), Ok(None));
        assert_eq!(versions("\"3\""), Ok(Some(vec![3])));
        assert_eq!(versions("\"3\", \"5\" ,\"3\""), Ok(Some(vec![3, 5])));
        assert_eq!(versions("W/\"3\""), Ok(Some(vec![])));
        assert_eq!(versions("\"abc\""), Ok(Some(vec![])));
        assert_eq!(versions("\"03\""), Ok(Some(vec![])));
        assert_eq!(versions("\"a,b\", \"0\""), Ok(Some(vec![0])));
        // RFC 9110's `#entity-tag` may be an empty list, which matches nothing.
        assert_eq!(versions(""), Ok(Some(vec![])));
        assert_eq!(versions(" , ,"), Ok(Some(vec![])));
        // obs-text is an etagc: well-formed, matching no version.
        for value in ["\"\u{ff}\"", "\"café\", \"2\"", "W/\"\u{80}\""] {
            let expected = if value.ends_with("\"2\"") {
                Ok(Some(vec![2]))
            } else {
                Ok(Some(vec![]))
            };
            assert_eq!(versions(value), expected, "{value:?}");
        }
        for bad in [
            "3",
            "\"3",
            "\"3\" \"4\"",
            "W/3",
            "\"a b\"",
            "*, \"3\"",
            "\"3\",x",
            "**",
            "\"3\", *",
        ] {
            assert_eq!(versions(bad), fails("invalid_if_match"), "{bad:?}");
        }
    }

    #[test]
    fn repeated_if_match_lines_are_one_list() {
        let lines = |values: &[&str]| {
            let headers: Vec<(&str, &str)> = values.iter().map(|value| ("if-match", *value)).collect();
            code(expected_versions(&request(&[], &headers, "")))
        };
        assert_eq!(lines(&["\"999\"", "\"3\""]), Ok(Some(vec![999, 3])));
        assert_eq!(lines(&["\"999\"", "W/\"1\""]), Ok(Some(vec![999])));
        // `*` is the whole field or nothing: never one member of a list.
        assert_eq!(lines(&["\"999\"", "*"]), fails("invalid_if_match"));
        assert_eq!(lines(&["*", "\"999\""]), fails("invalid_if_match"));
        assert_eq!(lines(&["*", "*"]), fails("invalid_if_match"));
        assert_eq!(lines(&["*"]), Ok(None));
        assert_eq!(lines(&["\"1\"", "bad"]), fails("invalid_if_match"));
    }

    #[test]
    fn the_tag_limit_counts_across_lines_and_stops_reading_early() {
        let tags = |count: usize| {
            (0..count)
                .map(|i| format!("\"{i}\""))
                .collect::<Vec<_>>()
                .join(",")
        };
        let exact = tags(MAX_IF_MATCH_TAGS);
        assert!(expected_versions(&request(&[], &[("if-match", &exact)], "")).is_ok());
        let half = tags(MAX_IF_MATCH_TAGS / 2 + 1);
        assert_eq!(
            code(expected_versions(&request(
                &[],
                &[("if-match", &half), ("if-match", &half)],
                ""
            ))),
            fails("invalid_if_match")
        );
        // A huge list followed by garbage is refused for its length: reading
        // stopped at the limit and never reached the garbage.
        let huge = format!("{}, garbage", tags(50_000));
        let error = expected_versions(&request(&[], &[("if-match", &huge)], "")).err();
        assert!(
            matches!(&error, Some(ApiError::InvalidIfMatch(field)) if field.message.contains("at most")),
            "{error:?}"
        );
    }
}
