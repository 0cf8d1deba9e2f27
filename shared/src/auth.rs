//! Authorization: which records the caller's identity lets it change.
//! API Gateway authenticates (JWT or IAM) and hands the verified identity
//! over in the request context; this module is its only reader. A JWT's
//! projects claim grants what it lists (`*` only as the whole claim), IAM
//! every project on the routes its policy allows, anything else nothing
//! (authorization fails closed). See docs/authorization.md.

use crate::apigw::Request;
use crate::error::ApiError;
use crate::ids::parse_uuid;

/// The JWT claim that lists the caller's projects when `PROJECTS_CLAIM` is unset.
pub const DEFAULT_PROJECTS_CLAIM: &str = "projects";
/// The claim entry that grants every project and the API-key route.
pub const ALL_PROJECTS: &str = "*";
/// The most characters of a principal in the form it is logged, stored
/// and published ([`principal`]): it is an identifier, and a token's `sub`
/// is the caller's to choose.
pub const MAX_PRINCIPAL_CHARS: usize = 256;

/// What a request asks to change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target<'a> {
    /// A record of this project (its id already normalised).
    Project(&'a str),
    /// A record that belongs to no project (an API key): only a grant of
    /// every project covers it.
    Unscoped,
}

/// The projects an identity may change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Grants {
    /// Every project, and records of no project.
    All,
    /// These projects (normalised ids), nothing else.
    Projects(Vec<String>),
}

impl Grants {
    /// Nothing at all.
    pub const NONE: Self = Self::Projects(Vec::new());

    /// Reads a projects claim in any form it reaches the function: API
    /// Gateway's rendering of a JSON array (`[a b]`), a JSON array string
    /// (`["a","b"]`), or ids separated by spaces or commas. Ids compare after
    /// the normalisation `project_id` gets.
    ///
    /// `*` grants everything only as the whole claim (`*`, `[*]`, `["*"]`).
    /// A claim with `*` beside another entry, an empty entry, an entry
    /// holding whitespace other than the ASCII space that separates entries
    /// or an invisible character, or an entry that is neither `*` nor a
    /// UUID is refused: it grants nothing, since a token that cannot be read
    /// unambiguously is not trusted in part.
    pub fn from_claim(claim: &str) -> Result<Self, ClaimError> {
        let entries = claim_entries(claim).ok_or(ClaimError::Malformed)?;
        if entries.iter().any(|entry| entry.chars().any(hidden)) {
            return Err(ClaimError::HiddenCharacter);
        }
        if entries.iter().any(|entry| entry == ALL_PROJECTS) {
            return match entries.len() {
                1 => Ok(Self::All),
                _ => Err(ClaimError::StarBesideOthers),
            };
        }
        let mut projects = Vec::new();
        for entry in entries {
            let project = parse_uuid(&entry).ok_or(ClaimError::Malformed)?;
            if !projects.contains(&project) {
                projects.push(project);
            }
        }
        Ok(Self::Projects(projects))
    }

    /// Whether these grants cover `target`.
    pub fn permit(&self, target: Target<'_>) -> bool {
        match (self, target) {
            (Self::All, _) => true,
            (Self::Projects(projects), Target::Project(project)) => projects.iter().any(|p| p == project),
            (Self::Projects(_), Target::Unscoped) => false,
        }
    }
}

/// Why a projects claim grants nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ClaimError {
    /// Not a list this service can read: an empty entry, or an entry that
    /// is neither `*` nor a UUID.
    #[error("the projects claim lists nothing this service can read")]
    Malformed,
    /// An entry holds whitespace other than the ASCII space, or a
    /// character that shows nothing: it would read as an id or `*` to a
    /// person, or to a reader that trims Unicode whitespace, and is neither.
    #[error("an entry of the projects claim holds whitespace other than a space, or an invisible character")]
    HiddenCharacter,
    /// `*` beside other entries: API Gateway's rendering cannot tell an
    /// element `"<id> *"` from the two elements `"<id>"` and `"*"`.
    #[error("the projects claim holds * beside other entries, which grants nothing")]
    StarBesideOthers,
}

/// The entries of a projects claim, or `None` if it is malformed.
///
/// Every form comes down to one list text, read by one rule. A JSON array
/// string becomes API Gateway's rendering of it (its elements joined by
/// single spaces), since on AWS that is all the function sees; the
/// brackets of that rendering are dropped; any other claim is the list
/// text itself. Nothing is trimmed. In the list text, entries are
/// separated by one ASCII space, or by one comma with at most one ASCII
/// space on either side (`a,b`, `a, b`); any other character, other
/// whitespace included, belongs to an entry. So an empty element, two
/// spaces in a row, or a separator at either end is an empty entry, and
/// malformed, in every form alike.
fn claim_entries(claim: &str) -> Option<Vec<String>> {
    let rendered;
    let list = match claim.strip_prefix('[').and_then(|inner| inner.strip_suffix(']')) {
        Some(inner) => match serde_json::from_str::<Vec<String>>(claim) {
            Ok(elements) => {
                rendered = elements.join(" ");
                rendered.as_str()
            }
            Err(_) => inner,
        },
        None => claim,
    };
    let mut entries = Vec::new();
    let mut rest = list;
    loop {
        let end = rest.find([' ', ',']).unwrap_or(rest.len());
        let (entry, tail) = rest.split_at(end);
        if entry.is_empty() {
            return None;
        }
        entries.push(entry.to_owned());
        if tail.is_empty() {
            return Some(entries);
        }
        rest = separator_end(tail);
    }
}

/// `text` after the separator it starts with: a space, or a comma with at
/// most one space on either side.
fn separator_end(text: &str) -> &str {
    let after_space = text.strip_prefix(' ').unwrap_or(text);
    match after_space.strip_prefix(',') {
        Some(after_comma) => after_comma.strip_prefix(' ').unwrap_or(after_comma),
        None if after_space.len() < text.len() => after_space,
        // Starts with neither (the caller saw one of them): keep the text,
        // whose empty entry is then refused.
        None => text,
    }
}

/// Whether `c` may not stand in a claim's entry: whitespace other than the
/// separating space (which never reaches an entry), or a character the
/// text rules count as invisible.
fn hidden(c: char) -> bool {
    c.is_whitespace() || !crate::rules::text::is_visible(c)
}

/// The caller API Gateway verified, as far as this service cares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// Who it is, for the access log and the record's `updated_by`: see
    /// [`principal`]. Never a token.
    pub principal: Option<String>,
    /// What it may change.
    pub grants: Grants,
}

impl Caller {
    /// The caller of `request`, its projects read from the JWT claim named
    /// `projects_claim`.
    pub fn of(request: &Request, projects_claim: &str) -> Self {
        Self {
            principal: principal(request),
            grants: grants(request, projects_claim),
        }
    }

    /// `Ok` if the caller may change `target`, else [`ApiError::Forbidden`].
    pub fn authorize(&self, target: Target<'_>) -> Result<(), ApiError> {
        if self.grants.permit(target) {
            Ok(())
        } else {
            Err(ApiError::Forbidden)
        }
    }
}

/// The caller's principal, the JWT's `sub`, else the IAM caller's ARN, in
/// the one form it is logged (the access line, the panic guard's line),
/// stored (`updated_by`) and published (the change event): percent-encoded
/// by [`crate::logging::escaped`], so it needs no JSON escaping wherever it
/// is pasted, and at most [`MAX_PRINCIPAL_CHARS`] characters. An empty
/// `sub` or ARN is no principal, as a token without `sub` is: one spelling
/// of "nobody named".
pub fn principal(request: &Request) -> Option<String> {
    let authorizer = request.authorizer()?;
    let named = match (&authorizer.jwt, &authorizer.iam) {
        (Some(jwt), _) => jwt.claims.get("sub").map(String::as_str),
        (None, Some(iam)) => iam.user_arn.as_deref(),
        (None, None) => None,
    };
    named
        .filter(|named| !named.is_empty())
        .map(|named| crate::logging::escaped(named, MAX_PRINCIPAL_CHARS))
}

/// Who the caller is, whole and with its kind (a JWT's issuer and `sub`,
/// or an IAM caller's ARN), for what is the caller's alone (an idempotency
/// key); `None` for a caller with no name. Each part is written after its
/// length, so no two callers share an identity whatever their claims hold
/// (a separator inside a claim moves no boundary).
pub fn identity(request: &Request) -> Option<String> {
    let authorizer = request.authorizer()?;
    let identity = match (&authorizer.jwt, &authorizer.iam) {
        (Some(jwt), _) => {
            let sub = jwt.claims.get("sub").filter(|sub| !sub.is_empty())?;
            let issuer = jwt.claims.get("iss").map_or("", String::as_str);
            length_prefixed(&["jwt", issuer, sub])
        }
        (None, Some(iam)) => {
            length_prefixed(&["iam", iam.user_arn.as_deref().filter(|arn| !arn.is_empty())?])
        }
        (None, None) => return None,
    };
    Some(identity)
}

/// `parts`, each as its length in bytes, `:`, and itself.
fn length_prefixed(parts: &[&str]) -> String {
    parts
        .iter()
        .map(|part| format!("{}:{part}", part.len()))
        .collect()
}

/// What the identity in `request` may change: the JWT's projects claim,
/// everything for an IAM caller, nothing without either.
fn grants(request: &Request, projects_claim: &str) -> Grants {
    let Some(authorizer) = request.authorizer() else {
        return Grants::NONE;
    };
    match (&authorizer.jwt, &authorizer.iam) {
        (Some(jwt), _) => match jwt.claims.get(projects_claim) {
            Some(claim) => Grants::from_claim(claim).unwrap_or_else(|error| {
                // The claim's name, never its value: an operator needs to
                // know the form is wrong, not what the token said.
                tracing::warn!(claim = projects_claim, %error, "projects claim refused");
                Grants::NONE
            }),
            None => Grants::NONE,
        },
        (None, Some(_)) => Grants::All,
        (None, None) => Grants::NONE,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "8a4b2c1d-3e5f-4a6b-8c7d-9e0f1a2b3c4d";
    const B: &str = "0b7c6d5e-4f3a-4b2c-9d1e-0f9a8b7c6d5e";

    fn projects(ids: &[&str]) -> Grants {
        Grants::Projects(ids.iter().map(|id| id.to_string()).collect())
    }

    /// A request whose authorizer carries these JWT claims.
    fn with_claims(claims: serde_json::Value) -> Request {
        let event = serde_json::json!({
            "requestContext": {"http": {"method": "PUT"}, "authorizer": {"jwt": {"claims": claims, "scopes": null}}},
            "pathParameters": {"id": "3f1c2a9e-7b4d-4e8a-9c21-5d6e7f8a9b01"},
        });
        Request::from_event(event, lambda_runtime::Context::default()).unwrap()
    }

    #[test]
    fn no_two_callers_share_an_identity_whatever_their_claims_hold() {
        let of = |iss: &str, sub: &str| identity(&with_claims(serde_json::json!({"iss": iss, "sub": sub})));
        let pairs = [
            (("x", "y\0z"), ("x\0y", "z")),
            (("x", "y:z"), ("x:y", "z")),
            (("x", "1:yz"), ("x1:", "yz")),
            (("x\0", "y"), ("x", "\0y")),
            (("a b", "c"), ("a", "b c")),
        ];
        for ((iss_a, sub_a), (iss_b, sub_b)) in pairs {
            let (a, b) = (of(iss_a, sub_a), of(iss_b, sub_b));
            assert!(a.is_some(), "{iss_a:?} {sub_a:?}");
            assert_ne!(a, b, "({iss_a:?}, {sub_a:?}) and ({iss_b:?}, {sub_b:?})");
        }
        // The same caller is the same identity; no sub is no caller.
        assert_eq!(of("x", "y"), of("x", "y"));
        assert_eq!(identity(&with_claims(serde_json::json!({"iss": "x"}))), None);
    }

    #[test]
    fn every_form_a_claim_reaches_the_function_in() {
        let upper = A.to_uppercase();
        for claim in [
            format!("[{A} {B}]"),
            format!("[\"{A}\",\"{B}\"]"),
            format!("[ \"{A}\" , \"{B}\" ]"),
            format!("{A} {B}"),
            format!("{A},{B}"),
            format!("{A}, {B}"),
            format!("{A} ,{B}"),
            format!("{A} , {B}"),
            format!("[{A}, {B}]"),
            format!("[\"{A},\", \"{B}\"]"),
            format!("{upper} {B}"),
            format!("[{upper} {B} {A}]"),
        ] {
            assert_eq!(Grants::from_claim(&claim), Ok(projects(&[A, B])), "{claim}");
        }
        assert_eq!(Grants::from_claim(A), Ok(projects(&[A])));
        // An element holding a space is two entries, as API Gateway renders it.
        assert_eq!(
            Grants::from_claim(&format!("[\"{A} {B}\"]")),
            Ok(projects(&[A, B]))
        );
    }

    #[test]
    fn a_star_grants_everything_only_as_the_whole_claim() {
        for claim in ["*", "[*]", "[\"*\"]", "[ \"*\" ]"] {
            assert_eq!(Grants::from_claim(claim), Ok(Grants::All), "{claim}");
        }
        // Smuggled beside ids, in any form: nothing at all.
        for claim in [
            format!("{A} *"),
            format!("[* {B}]"),
            format!("[{A} *]"),
            format!("[\"{A} *\"]"),
            format!("[\"{A}\", \"*\"]"),
            format!("*,{A}"),
            "* *".to_string(),
            "[* *]".to_string(),
            "[\"*\",\"*\"]".to_string(),
        ] {
            assert_eq!(
                Grants::from_claim(&claim),
                Err(ClaimError::StarBesideOthers),
                "{claim}"
            );
        }
    }

    #[test]
    fn every_form_of_a_list_with_an_empty_entry_is_refused_alike() {
        for claim in [
            format!("[\"{A}\", \"\"]"),
            format!("[{A} ]"),
            format!("[\"\", \"{A}\"]"),
            format!("[ {A}]"),
            format!("[\"{A}\", \"\", \"{B}\"]"),
            format!("[{A}  {B}]"),
            format!("{A},,{B}"),
            format!("{A},"),
            format!(",{A}"),
            format!(" {A}"),
            format!("{A} "),
            format!("{A}  {B}"),
            format!("{A},  {B}"),
            format!("{A}  ,{B}"),
            format!("[\" {A}\"]"),
            " * ".to_string(),
            "[ *]".to_string(),
            "*,".to_string(),
        ] {
            assert_eq!(Grants::from_claim(&claim), Err(ClaimError::Malformed), "{claim}");
        }
    }

    /// Whitespace other than the ASCII space, and invisible characters,
    /// make an entry neither an id nor `*`, wherever they stand and in
    /// every form.
    #[test]
    fn an_entry_with_other_whitespace_or_an_invisible_character_grants_nothing() {
        for hidden in [
            '\t',
            '\n',
            '\r',
            '\u{b}',
            '\u{c}',
            '\u{85}',
            '\u{a0}',
            '\u{1680}',
            '\u{2000}',
            '\u{200a}',
            '\u{2028}',
            '\u{2029}',
            '\u{202f}',
            '\u{205f}',
            '\u{3000}',
            '\u{200b}',
            '\u{200d}',
            '\u{2060}',
            '\u{feff}',
            '\u{ad}',
            '\u{180e}',
            '\u{fff9}',
            '\u{61c}',
            '\u{34f}',
            '\u{e0020}',
            '\u{13430}',
            '\u{378}',
        ] {
            for entry in [
                format!("{hidden}*"),
                format!("*{hidden}"),
                format!("{hidden}{A}"),
                format!("{A}{hidden}"),
            ] {
                let json = serde_json::to_string(&[&entry]).unwrap_or_default();
                for claim in [
                    entry.clone(),
                    format!("[{entry}]"),
                    json,
                    format!("{entry} {B}"),
                    format!("{B},{entry}"),
                ] {
                    let grants = Grants::from_claim(&claim);
                    assert_eq!(grants, Err(ClaimError::HiddenCharacter), "{claim:?}");
                }
            }
        }
    }

    #[test]
    fn malformed_and_empty_claims_grant_nothing() {
        for claim in [
            "",
            "  ",
            "[]",
            "[ ]",
            "[\"\"]",
            "not-a-uuid",
            &format!("{A} not-a-uuid"),
            "* garbage",
            &format!("[{A}"),
            &format!("{{\"{A}\": true}}"),
            &format!("[\"{A}\", 5]"),
            "**",
            "{3f1c2a9e-7b4d-4e8a-9c21-5d6e7f8a9b01}",
        ] {
            let grants = Grants::from_claim(claim).unwrap_or(Grants::NONE);
            assert!(!grants.permit(Target::Project(A)), "{claim}");
            assert!(!grants.permit(Target::Unscoped), "{claim}");
        }
    }

    #[test]
    fn grants_cover_their_projects_only_and_api_keys_need_all() {
        let grants = projects(&[A]);
        assert!(grants.permit(Target::Project(A)));
        assert!(!grants.permit(Target::Project(B)));
        assert!(!grants.permit(Target::Unscoped));
        assert!(Grants::All.permit(Target::Project(B)));
        assert!(Grants::All.permit(Target::Unscoped));
        assert!(!Grants::NONE.permit(Target::Project(A)));
    }

    #[test]
    fn long_principals_are_cut_in_their_logged_form() {
        let long = "é".repeat(MAX_PRINCIPAL_CHARS);
        let form = crate::logging::escaped(&long, MAX_PRINCIPAL_CHARS);
        assert_eq!(form, "%C3%A9".repeat(MAX_PRINCIPAL_CHARS / 6));
    }
}
