//! The three record kinds, each declared once: every field's name, stored
//! type and what a request may do with it. The response record (fields in
//! the documented order), the rules a body is checked by, the read-only
//! fields and the reading of a stored item all follow from that one
//! declaration (the `record!` macro).

use serde::Serialize;
use serde_json::{Map, Value};

use crate::item::{Attribute, Item, ItemError, Kind, Sealed};
pub use crate::provider::ProviderType;
use crate::rules::{MAX_SECRET_BYTES, MAX_TEXT_CHARS, Rule};
use Access::{Key, ReadOnly, Set, Stamp};

/// Fields no request may set on any record kind, whether or not the kind
/// has them (an API key has no `project_id`, yet a body naming it is told
/// it is read-only, not unknown).
pub const ALWAYS_READ_ONLY: [&str; 4] = ["id", "project_id", "created_at", "updated_at"];

/// What a request may do with a field, and whether a response shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Part of the item's key: shown, never set by a request.
    Key,
    /// Written by every update (`updated_at`): shown, never set by a request.
    Stamp,
    /// Shown as stored; no request sets it (`created_at`).
    ReadOnly,
    /// A request may set it, under this rule; responses show it.
    Set(Rule),
    /// A request may set it, under this rule; no response shows it.
    WriteOnly(Rule),
    /// A request may set it, under this rule, and responses show it, but
    /// its values are stored sealed ([`crate::seal::values`]): a map whose
    /// member names stay readable and whose member values are each
    /// AES-256-GCM under the record's own data key, stored (sealed by KMS)
    /// in the attribute `key`.
    SealedValues {
        /// The rule a request's value must meet.
        rule: Rule,
        /// The attribute holding the record's data key, as KMS sealed it.
        key: &'static str,
    },
    /// Set by the service when `verify=true` proved the record's
    /// configuration ([`crate::mcp`]); shown as stored, and removed by a
    /// write that sets one of the fields `of` without verifying.
    Verification {
        /// The fields whose values were verified.
        of: &'static [&'static str],
    },
}

/// How a field's value is sealed before it is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sealing {
    /// The whole value, by one KMS `Encrypt` (`api_key`): never read back.
    Whole,
    /// Each member value, under the record's data key held in this
    /// attribute (`headers`): read back through one KMS `Decrypt`.
    Values {
        /// The attribute holding the sealed data key.
        key: &'static str,
    },
}

/// One field of a record kind, as declared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    /// The field's name, in bodies, responses and items alike.
    pub name: &'static str,
    /// What a request may do with it.
    pub access: Access,
    /// The type it is stored as.
    pub kind: Kind,
}

impl Field {
    /// The rule a request's value must meet, if a request may set it.
    pub fn rule(&self) -> Option<Rule> {
        match self.access {
            Access::Set(rule) | Access::WriteOnly(rule) | Access::SealedValues { rule, .. } => Some(rule),
            Key | Stamp | ReadOnly | Access::Verification { .. } => None,
        }
    }

    /// Whether a response shows it, and an update that does not set it
    /// keeps it: then its stored type must be the one the response needs.
    pub fn is_kept_and_shown(&self) -> bool {
        matches!(
            self.access,
            ReadOnly | Set(_) | Access::SealedValues { .. } | Access::Verification { .. }
        )
    }

    /// How a request's value is sealed before it is stored
    /// ([`crate::seal`]), if it is: every secret whole, a
    /// [`Access::SealedValues`] field member by member.
    pub const fn sealing(&self) -> Option<Sealing> {
        match self.access {
            Access::WriteOnly(Rule::Secret { .. }) => Some(Sealing::Whole),
            Access::SealedValues { key, .. } => Some(Sealing::Values { key }),
            _ => None,
        }
    }

    /// Whether a request's value is sealed before it is stored.
    pub const fn is_sealed(&self) -> bool {
        self.sealing().is_some()
    }
}

/// Whether any of `fields` is sealed.
const fn any_sealed(fields: &[Field]) -> bool {
    let mut index = 0;
    while index < fields.len() {
        if fields[index].is_sealed() {
            return true;
        }
        index += 1;
    }
    false
}

/// What a passed `verify=true` handshake found, as an MCP server record
/// shows it ([`crate::mcp::Verified`], and when).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Verification {
    /// When the handshake passed.
    pub verified_at: String,
    /// The protocol version agreed.
    pub protocol_version: String,
    /// The server's name, as it announced it.
    pub name: String,
    /// The server's version, as it announced it.
    pub version: String,
    /// How many tools it listed.
    pub tools: u64,
    /// The digest of its tools' pin ([`crate::mcp::ToolPin::digest`]); absent
    /// from a verification made before pins.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools_digest: Option<String>,
    /// Each tool's digest, by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_digests: Option<std::collections::BTreeMap<String, String>>,
    /// How the tools moved against the pin held before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changes: Option<crate::mcp::Changes>,
}

impl Attribute for Verification {
    const KIND: Kind = Kind::Map;
    fn read(item: &Item, name: &str) -> Result<Option<Self>, ItemError> {
        read_map(
            item,
            name,
            "a verification (M of verified_at, protocol_version, name, version, tools, and its pin)",
        )
    }
}

/// The map `name` of `item` read as `T`, if the item has it: `expected`
/// names what it must be otherwise.
fn read_map<T: serde::de::DeserializeOwned>(
    item: &Item,
    name: &str,
    expected: &'static str,
) -> Result<Option<T>, ItemError> {
    let Some(map) = crate::item::object(item, name)? else {
        return Ok(None);
    };
    serde_json::from_value(Value::Object(map))
        .map(Some)
        .map_err(|_| ItemError {
            attribute: name.into(),
            expected,
        })
}

/// What a passed `verify=true` check of an API key found, as the record
/// shows it: when, and how many models the provider listed (its first
/// page).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct KeyVerification {
    /// When the provider accepted the key.
    pub verified_at: String,
    /// How many models its list held.
    pub models: u64,
}

impl Attribute for KeyVerification {
    const KIND: Kind = Kind::Map;
    fn read(item: &Item, name: &str) -> Result<Option<Self>, ItemError> {
        read_map(item, name, "a verification (M of verified_at, models)")
    }
}

/// The field of `fields` holding a verification, and the fields it
/// vouches for.
pub const fn verification(fields: &[Field]) -> Option<(&'static str, &'static [&'static str])> {
    let mut index = 0;
    while index < fields.len() {
        if let Access::Verification { of } = fields[index].access {
            return Some((fields[index].name, of));
        }
        index += 1;
    }
    None
}

/// The record kinds, one table each: the one list of them. Every other
/// list (table names and their variables, the local API's routes, the
/// tests', the operator commands', the fuzz targets') is read from it, and
/// [`with_resource!`](crate::with_resource) runs code for whichever kind a
/// value names. A new kind is a variant here, an arm there, and its
/// `record!` below.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Table {
    /// API keys ([`ApiKey`]).
    ApiKeys,
    /// MCP servers ([`McpServer`]).
    McpServers,
    /// Models ([`Model`]).
    Models,
}

/// Runs `$body` with `$kind` naming the record type stored in the table
/// `$table` (a [`Table`]): code written once for every record kind.
#[macro_export]
macro_rules! with_resource {
    ($table:expr, $kind:ident => $body:expr) => {
        match $table {
            $crate::records::Table::ApiKeys => {
                type $kind = $crate::records::ApiKey;
                $body
            }
            $crate::records::Table::McpServers => {
                type $kind = $crate::records::McpServer;
                $body
            }
            $crate::records::Table::Models => {
                type $kind = $crate::records::Model;
                $body
            }
        }
    };
}

impl Table {
    /// Every table, in the list's order.
    pub const ALL: [Table; 3] = [Self::ApiKeys, Self::McpServers, Self::Models];

    /// The environment variable naming the table.
    pub const fn env_var(self) -> &'static str {
        with_resource!(self, R => R::TABLE_VAR)
    }

    /// The name used when the variable is unset (the local run's).
    pub const fn default_name(self) -> &'static str {
        with_resource!(self, R => R::TABLE_DEFAULT)
    }

    /// Whether records are keyed by `project_id` as well as `id`.
    pub fn scoped_by_project(self) -> bool {
        self.fields()
            .iter()
            .any(|field| field.name == "project_id" && field.access == Access::Key)
    }

    /// What the record kind stored here is called (`MCP server`).
    pub const fn noun(self) -> &'static str {
        with_resource!(self, R => R::NOUN)
    }

    /// The fields of the record kind stored here.
    pub const fn fields(self) -> &'static [Field] {
        with_resource!(self, R => R::FIELDS)
    }

    /// The route that updates the record kind stored here.
    pub const fn route(self) -> &'static str {
        with_resource!(self, R => R::ROUTE)
    }

    /// The function serving that route.
    pub const fn function(self) -> &'static str {
        with_resource!(self, R => R::FUNCTION)
    }

    /// The client its function's `verify=true` dials, if any.
    pub const fn verify_client(self) -> Option<&'static str> {
        with_resource!(self, R => R::VERIFY.client())
    }

    /// The string sets its change event carries beside every event's
    /// fields (docs/change-events.md).
    pub const fn event_sets(self) -> &'static [&'static str] {
        with_resource!(self, R => R::VERIFY.event_sets())
    }

    /// Whether the record kind stored here seals a field.
    pub const fn seals(self) -> bool {
        with_resource!(self, R => R::SEALS)
    }

    /// The KMS calls the function serving this kind makes on the secrets
    /// key, from how its fields are sealed and how it verifies: a whole
    /// secret `Encrypt`ed (and `Decrypt`ed to check it with its provider),
    /// values under a data key (`GenerateDataKey`, `Decrypt`), and
    /// `DescribeKey` at start-up wherever it seals. What its role must
    /// allow, and no more (`tools/resources.json`, which the template's
    /// checks read, is written from it).
    pub fn kms_calls(self) -> Vec<&'static str> {
        let mut calls = Vec::new();
        for field in self.fields() {
            match field.sealing() {
                Some(Sealing::Whole) => {
                    calls.push("kms:Encrypt");
                    if with_resource!(self, R => matches!(R::VERIFY, Verify::Key(_))) {
                        calls.push("kms:Decrypt");
                    }
                }
                Some(Sealing::Values { .. }) => calls.extend(["kms:GenerateDataKey", "kms:Decrypt"]),
                None => {}
            }
        }
        if !calls.is_empty() {
            calls.push("kms:DescribeKey");
        }
        calls
    }

    /// Whether any record kind seals a field (a constant: what an app
    /// serving every route needs).
    pub const fn any_seals() -> bool {
        let mut index = 0;
        while index < Self::ALL.len() {
            if Self::ALL[index].seals() {
                return true;
            }
            index += 1;
        }
        false
    }
}

/// What a request's `verify` asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VerifyMode {
    /// `verify=true`: verify, and record what the verification found.
    True,
    /// `verify=pinned`: as `true`, and refuse the write when an MCP
    /// server's tools differ from the record's pin.
    Pinned,
}

impl VerifyMode {
    /// The query value that asks for it.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::True => "true",
            Self::Pinned => "pinned",
        }
    }
}

/// What `verify=true` checks for a record kind, as a pointer to the client
/// that checks it.
#[derive(Clone, Copy)]
pub enum Verify {
    /// Nothing: the route takes no `verify`.
    Nothing,
    /// An MCP handshake with the record's endpoint and headers.
    Mcp(crate::mcp::Handshake),
    /// The provider's model list, asked with the record's key.
    Key(crate::keycheck::KeyCheck),
}

/// The attributes a verification that moved a server's tool pin sets, one
/// per list of its changes (added, removed, changed) that is not empty, for
/// the change event: the tools' names, percent-encoded as `updated_by` is (a
/// pipe's input template pastes them into JSON unescaped). Every other write
/// removes them.
pub const PIN_CHANGES: [&str; 3] = ["tools_added", "tools_removed", "tools_changed"];

impl Verify {
    /// The string sets a change event of this kind carries beside the
    /// fields every event has: the pin's changes where there is a pin.
    pub const fn event_sets(&self) -> &'static [&'static str] {
        match self {
            Self::Mcp(_) => &PIN_CHANGES,
            Self::Nothing | Self::Key(_) => &[],
        }
    }

    /// The client `verify=true` dials (`mcp`, `provider`), if any: what the
    /// function's binary links.
    pub const fn client(&self) -> Option<&'static str> {
        match self {
            Self::Nothing => None,
            Self::Mcp(_) => Some("mcp"),
            Self::Key(_) => Some("provider"),
        }
    }

    /// The values `verify` takes: `pinned` only where there are tools to pin.
    pub const fn modes(&self) -> &'static [VerifyMode] {
        match self {
            Self::Nothing => &[],
            Self::Mcp(_) => &[VerifyMode::True, VerifyMode::Pinned],
            Self::Key(_) => &[VerifyMode::True],
        }
    }
}

/// A record kind served by one update route.
pub trait Resource: Serialize + Sized {
    /// Where it is stored.
    const TABLE: Table;
    /// The environment variable naming that table.
    const TABLE_VAR: &'static str;
    /// The table's name when the variable is unset (the local run's).
    const TABLE_DEFAULT: &'static str;
    /// The API Gateway route that updates it.
    const ROUTE: &'static str;
    /// The Lambda function (and binary) serving that route; the metrics'
    /// Route dimension.
    const FUNCTION: &'static str;
    /// How messages name it ("Model").
    const NOUN: &'static str;
    /// The success message.
    const UPDATED: &'static str;
    /// Every field: those a response shows in its order, then the
    /// write-only ones.
    const FIELDS: &'static [Field];
    /// Whether a request may set a sealed field, so the function serving
    /// this kind needs a sealer (and no other function has one).
    const SEALS: bool = any_sealed(Self::FIELDS);
    /// What `verify=true` checks: a pointer to the client that checks it,
    /// so only the function serving a kind that verifies links its client.
    const VERIFY: Verify = Verify::Nothing;
    /// Whether a request may ask for its record to be verified
    /// (`verify=true`): a kind with a [`Self::VERIFY`] and a field that
    /// holds the verification.
    const VERIFIES: bool = !matches!(Self::VERIFY, Verify::Nothing) && verification(Self::FIELDS).is_some();
    /// The values a request's `verify` may take ([`Verify::modes`]): none
    /// where the kind does not verify.
    const VERIFY_MODES: &'static [VerifyMode] = if Self::VERIFIES { Self::VERIFY.modes() } else { &[] };

    /// Reads the record from its stored item.
    fn from_item(item: &Item) -> Result<Self, ItemError>;

    /// The field a request may set under this name, with its rule.
    fn settable(name: &str) -> Option<(&'static str, Rule)> {
        Self::FIELDS
            .iter()
            .find(|field| field.name == name)
            .and_then(|field| field.rule().map(|rule| (field.name, rule)))
    }

    /// The fields a request is told are read-only: [`ALWAYS_READ_ONLY`],
    /// then every other field of the kind no request may set.
    fn read_only() -> Vec<&'static str> {
        let own = Self::FIELDS.iter().filter(|field| field.rule().is_none());
        let own = own
            .map(|field| field.name)
            .filter(|name| !ALWAYS_READ_ONLY.contains(name));
        ALWAYS_READ_ONLY.into_iter().chain(own).collect()
    }
}

/// Declares a record kind: the struct a response serialises (each field
/// optional, in declaration order) and its [`Resource`] implementation,
/// from one line per field: `name: StoredType = Access`. Write-only fields
/// (never in a response) follow in `write_only { name: StoredType = Rule }`.
macro_rules! record {
    (
        $(#[$meta:meta])*
        pub struct $name:ident in $table:expr, named by $var:literal or $default:literal, at $route:literal, by $function:literal, named $noun:literal $(, verified by $variant:ident($($check:tt)*))? {
            $( $(#[$field_meta:meta])* $field:ident: $ty:ty = $access:expr, )*
        }
        $( write_only { $( $secret:ident: $secret_ty:ty = $secret_rule:expr, )* } )?
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Serialize)]
        pub struct $name {
            $( $(#[$field_meta])* pub $field: Option<$ty>, )*
        }

        impl Resource for $name {
            const TABLE: Table = $table;
            const TABLE_VAR: &'static str = $var;
            const TABLE_DEFAULT: &'static str = $default;
            const ROUTE: &'static str = $route;
            const FUNCTION: &'static str = $function;
            const NOUN: &'static str = $noun;
            const UPDATED: &'static str = concat!($noun, " updated successfully");
            $( const VERIFY: Verify = Verify::$variant($($check)*); )?
            const FIELDS: &'static [Field] = &[
                $( Field {
                    name: stringify!($field),
                    access: $access,
                    kind: <$ty as Attribute>::KIND,
                }, )*
                $( $( Field {
                    name: stringify!($secret),
                    access: Access::WriteOnly($secret_rule),
                    kind: <$secret_ty as Attribute>::KIND,
                }, )* )?
            ];

            fn from_item(item: &Item) -> Result<Self, ItemError> {
                Ok(Self {
                    $( $field: <$ty as Attribute>::read(item, stringify!($field))?, )*
                })
            }
        }
    };
}

record! {
    /// A provider API key. The secret `api_key` is write-only: the record
    /// has no field for it, so no response can carry it.
    pub struct ApiKey in Table::ApiKeys, named by "API_KEYS_TABLE" or "agent-server-api-keys",
        at "/api/agent-server/api-keys/{id}", by "update-api-key", named "API key",
        verified by Key(crate::keycheck::system_check) {
        /// Record id.
        id: String = Key,
        /// Provider the key belongs to (read-only).
        provider_type: String = ReadOnly,
        /// Display name.
        name: String = Set(Rule::Text { max: MAX_TEXT_CHARS }),
        /// Whether agents may use the key.
        enabled: bool = Set(Rule::Flag),
        /// What the last check of the key with its provider found
        /// (`verify=true`): gone once `api_key` changes unverified. Shown
        /// only when there is one.
        #[serde(skip_serializing_if = "Option::is_none")]
        verification: KeyVerification = Access::Verification { of: &["api_key"] },
        /// Creation time.
        created_at: String = ReadOnly,
        /// Time of the last write.
        updated_at: String = Stamp,
    }
    write_only {
        api_key: Sealed = Rule::Secret { max: MAX_SECRET_BYTES },
    }
}

record! {
    /// An MCP server connection.
    pub struct McpServer in Table::McpServers, named by "MCP_SERVERS_TABLE" or "agent-server-mcp-servers",
        at "/api/agent-server/mcp-servers/{id}", by "update-mcp-server", named "MCP server",
        verified by Mcp(crate::mcp::system_handshake) {
        /// Record id.
        id: String = Key,
        /// Owning project.
        project_id: String = Key,
        /// Display name.
        name: String = Set(Rule::Text { max: MAX_TEXT_CHARS }),
        /// Server URL.
        endpoint: String = Set(Rule::Endpoint),
        /// HTTP headers sent to the server: names readable, values sealed
        /// at rest under the record's data key (`headers_key`).
        headers: Map<String, Value> = Access::SealedValues { rule: Rule::Headers, key: "headers_key" },
        /// What the last handshake with the server found (`verify=true`):
        /// gone once `endpoint` or `headers` change unverified. Shown only
        /// when there is one.
        #[serde(skip_serializing_if = "Option::is_none")]
        verification: Verification = Access::Verification { of: &["endpoint", "headers"] },
        /// Creation time.
        created_at: String = ReadOnly,
        /// Time of the last write.
        updated_at: String = Stamp,
    }
}

record! {
    /// A model definition.
    pub struct Model in Table::Models, named by "MODELS_TABLE" or "agent-server-models",
        at "/api/agent-server/models/{id}", by "update-model", named "Model" {
        /// Record id.
        id: String = Key,
        /// Owning project.
        project_id: String = Key,
        /// Display name.
        name: String = Set(Rule::Text { max: MAX_TEXT_CHARS }),
        /// The provider's model identifier.
        model_id: String = Set(Rule::Text { max: MAX_TEXT_CHARS }),
        /// The provider.
        provider_type: String = Set(Rule::Provider),
        /// Free-form model parameters.
        parameters: Map<String, Value> = Set(Rule::Parameters),
        /// Creation time.
        created_at: String = ReadOnly,
        /// Time of the last write.
        updated_at: String = Stamp,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `TableNames` indexes its names by `table as usize`:
    /// the list's order is the declaration's.
    #[test]
    fn the_list_is_in_declaration_order() {
        for (index, table) in Table::ALL.into_iter().enumerate() {
            assert_eq!(table as usize, index, "{table:?}");
        }
    }

    #[test]
    fn an_api_key_record_has_no_secret() {
        let item: Item = [
            ("id".to_string(), crate::item::Attr::S("k".into())),
            ("api_key".to_string(), crate::item::Attr::S("SENTINEL".into())),
        ]
        .into();
        let record = ApiKey::from_item(&item).map(|r| serde_json::to_string(&r).unwrap_or_default());
        let json = record.unwrap_or_default();
        assert!(json.starts_with(r#"{"id":"k","provider_type":null"#), "{json}");
        assert!(!json.contains("SENTINEL"));
        assert!(!json.contains("api_key"));
    }

    /// A stored item holding every field of `R`, each with a value of its
    /// stored type.
    fn full_item<R: Resource>() -> Item {
        use crate::item::Attr as A;
        R::FIELDS
            .iter()
            .map(|field| {
                let value = match field.kind {
                    // An API key's verification: when, and how many models.
                    Kind::Map if field.access == (Access::Verification { of: &["api_key"] }) => A::M(
                        [
                            ("verified_at".to_string(), A::S("T".into())),
                            ("models".to_string(), A::N("7".into())),
                        ]
                        .into(),
                    ),
                    Kind::Map if matches!(field.access, Access::Verification { .. }) => A::M(
                        [
                            ("verified_at", A::S("T".into())),
                            ("protocol_version", A::S("P".into())),
                        ]
                        .into_iter()
                        .chain([("name", A::S("N".into())), ("version", A::S("V".into()))])
                        .chain([("tools", A::N("3".into()))])
                        .map(|(name, value)| (name.to_string(), value))
                        .collect(),
                    ),
                    Kind::String => A::S(field.name.to_uppercase()),
                    Kind::Boolean => A::Bool(true),
                    Kind::Map => A::M(Default::default()),
                    Kind::Binary => A::B(field.name.as_bytes().to_vec()),
                };
                (field.name.to_string(), value)
            })
            .collect()
    }

    /// Every shown field is read from the item, and the record serialises
    /// them in declaration order, write-only ones left out.
    fn reads_and_orders<R: Resource>() {
        // The text, not a Value: a Value's map may sort its keys.
        let text = R::from_item(&full_item::<R>()).map(|r| serde_json::to_string(&r).unwrap_or_default());
        let text = text.unwrap_or_default();
        let record: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
        let shown: Vec<&str> = R::FIELDS
            .iter()
            .filter(|field| !matches!(field.access, Access::WriteOnly(_)))
            .map(|field| field.name)
            .collect();
        let keys: Vec<&str> = record
            .as_object()
            .map(|o| o.keys().map(String::as_str).collect())
            .unwrap_or_default();
        let mut sorted_keys = keys.clone();
        sorted_keys.sort_by_key(|key| shown.iter().position(|name| name == key));
        assert_eq!(sorted_keys, shown, "{}", R::NOUN);
        let order: Vec<usize> = shown
            .iter()
            .filter_map(|name| text.find(&format!("\"{name}\":")))
            .collect();
        assert!(order.windows(2).all(|w| w[0] < w[1]), "{}: {text}", R::NOUN);
        for name in shown {
            assert!(!record[name].is_null(), "{}: {name} not read", R::NOUN);
        }
    }

    #[test]
    fn every_declared_field_is_read_and_shown_in_order() {
        reads_and_orders::<ApiKey>();
        reads_and_orders::<McpServer>();
        reads_and_orders::<Model>();
    }

    #[test]
    fn read_only_fields_are_the_common_ones_and_those_no_request_sets() {
        assert_eq!(
            ApiKey::read_only(),
            [
                "id",
                "project_id",
                "created_at",
                "updated_at",
                "provider_type",
                "verification"
            ]
        );
        assert_eq!(Model::read_only(), ALWAYS_READ_ONLY);
        assert_eq!(
            ApiKey::settable("api_key"),
            Some((
                "api_key",
                Rule::Secret {
                    max: MAX_SECRET_BYTES
                }
            ))
        );
        assert_eq!(ApiKey::settable("provider_type"), None);
    }

    fn sealed<R: Resource>() -> Vec<(&'static str, Sealing)> {
        R::FIELDS
            .iter()
            .filter_map(|field| field.sealing().map(|sealing| (field.name, sealing)))
            .collect()
    }

    #[test]
    fn the_api_key_and_the_mcp_headers_are_sealed_and_nothing_else() {
        assert_eq!(
            [ApiKey::SEALS, McpServer::SEALS, Model::SEALS],
            [true, true, false]
        );
        assert_eq!(sealed::<ApiKey>(), [("api_key", Sealing::Whole)]);
        assert_eq!(
            sealed::<McpServer>(),
            [("headers", Sealing::Values { key: "headers_key" })]
        );
        assert_eq!(sealed::<Model>(), []);
        // A whole secret is stored as binary and never shown.
        assert!(
            ApiKey::FIELDS
                .iter()
                .all(|field| field.is_sealed() == (field.kind == Kind::Binary))
        );
    }
}
