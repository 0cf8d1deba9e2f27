//! The `endpoint` URL, and the host classes that keep it from pointing the
//! agents that use it at metadata services or internal networks (SSRF).
//!
//! Addresses are judged by where they lead: every numeric IPv4 spelling
//! arrives here already parsed (the URL parser reads `0xa9fea9fe`, `2852039166`
//! and `0251.0376.0251.0376` as addresses), and an IPv6 address that embeds an
//! IPv4 address (mapped, compatible, translated, NAT64, 6to4, Teredo) is
//! judged by that IPv4 address as well as by itself; the stricter class wins.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use serde_json::Value;
use url::{Host, Url};

use super::{Policy, wrong_type};
use crate::error::{FieldError, FieldErrors};

/// Longest `endpoint`.
pub const MAX_URL_CHARS: usize = 2048;

/// Where an endpoint's host points, for the SSRF rules. Ordered from the
/// most to the least permitted, so the stricter of two classes is the `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum HostClass {
    /// Any other host.
    Public,
    /// Loopback, `localhost`, a private or shared range: allowed only by policy.
    Private,
    /// Link-local, cloud metadata, unspecified, multicast, broadcast,
    /// reserved, or any other special-purpose block that is not globally
    /// reachable (documentation, benchmarking, IETF protocol assignments,
    /// discard-only, ...): never.
    Forbidden,
}

/// Host names that cloud platforms resolve to their metadata services,
/// compared in any letter case, with or without a trailing dot:
/// - Google Compute Engine: `metadata.google.internal`, `metadata.goog`,
///   and the short `metadata`, which its DHCP search domain resolves
///   (cloud.google.com/compute/docs/metadata/querying-metadata);
/// - Amazon EC2: `instance-data` and `instance-data.ec2.internal`
///   (docs.aws.amazon.com, "Access instance metadata for an EC2 instance").
///
/// Azure, Oracle Cloud, DigitalOcean, OpenStack and Alibaba Cloud document
/// addresses only (169.254.169.254, 100.100.100.200), refused by class.
pub const METADATA_HOSTS: [&str; 5] = [
    "metadata",
    "metadata.google.internal",
    "metadata.goog",
    "instance-data",
    "instance-data.ec2.internal",
];

/// Classifies a parsed URL host.
pub fn classify_host(host: &Host<&str>) -> HostClass {
    match host {
        Host::Domain(domain) => {
            let domain = domain.trim_end_matches('.').to_ascii_lowercase();
            if METADATA_HOSTS.contains(&domain.as_str()) {
                HostClass::Forbidden
            // RFC 6761: localhost and every name under it are loopback.
            } else if domain == "localhost" || domain.ends_with(".localhost") {
                HostClass::Private
            } else {
                HostClass::Public
            }
        }
        Host::Ipv4(address) => classify_v4(*address),
        Host::Ipv6(address) => classify_v6(*address),
    }
}

/// The class of an address, whichever family: what a resolved host is
/// judged by at connect time ([`crate::mcp::dial()`]).
pub fn classify_ip(address: IpAddr) -> HostClass {
    match address {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

/// The class of an IPv4 address: that of the most specific row of
/// [`SPECIAL_V4`] holding it, else public.
pub fn classify_v4(address: Ipv4Addr) -> HostClass {
    most_specific(&SPECIAL_V4, address.to_bits().into(), 32)
}

/// The class of an IPv6 address: its own (that of the most specific row of
/// [`SPECIAL_V6`] holding it, else public), or that of an IPv4 address it
/// embeds, whichever is stricter.
pub fn classify_v6(address: Ipv6Addr) -> HostClass {
    let embedded = embedded_v4(address)
        .into_iter()
        .flatten()
        .map(classify_v4)
        .max()
        .unwrap_or(HostClass::Public);
    most_specific(&SPECIAL_V6, address.to_bits(), 128).max(embedded)
}

/// The class of the most specific row holding `bits` (an address of `width`
/// bits), except that a globally reachable row never lifts a block that is
/// not: 192.0.0.9 stays refused with the rest of 192.0.0.0/24. (A row that
/// embeds an IPv4 address, Teredo inside 2001::/23, is judged by that
/// address instead, by its caller.)
fn most_specific(rows: &[Special], bits: u128, width: u32) -> HostClass {
    let holding = || rows.iter().filter(|row| row.holds(bits, width));
    match holding().max_by_key(|row| row.length).map(|row| row.reach) {
        Some(Reach::Global) if holding().any(|row| row.reach == Reach::Never) => HostClass::Forbidden,
        reach => reach.map_or(HostClass::Public, Reach::class),
    }
}

/// How far the addresses of a special-purpose block reach, as this rule
/// reads the registry's "Globally Reachable" column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// Globally reachable: an address like any other.
    Global,
    /// Not globally reachable, and a network of one's own (loopback,
    /// private use, shared): allowed only by policy.
    Private,
    /// Not globally reachable, or a metadata service: never.
    Never,
    /// An IPv6 block that leads to an IPv4 address it embeds: judged by
    /// that address, whatever the registry says of the block.
    Embeds,
}

impl Reach {
    fn class(self) -> HostClass {
        match self {
            Self::Global | Self::Embeds => HostClass::Public,
            Self::Private => HostClass::Private,
            Self::Never => HostClass::Forbidden,
        }
    }
}

/// One row: a block, the registry's name for it, how far it reaches.
#[derive(Debug, Clone, Copy)]
pub struct Special {
    /// The block's first address, as bits (an IPv4 block in the low 32).
    pub block: u128,
    /// Its prefix length.
    pub length: u8,
    /// The registry's name for it (or where the row comes from).
    pub name: &'static str,
    /// How far it reaches.
    pub reach: Reach,
}

impl Special {
    fn holds(&self, bits: u128, width: u32) -> bool {
        let shift = width - u32::from(self.length);
        // A /0 holds everything (and a shift by the width would overflow).
        shift >= width || bits >> shift == self.block >> shift
    }
}

const fn v4(octets: [u8; 4], length: u8, name: &'static str, reach: Reach) -> Special {
    let block = Ipv4Addr::new(octets[0], octets[1], octets[2], octets[3]).to_bits() as u128;
    Special {
        block,
        length,
        name,
        reach,
    }
}

const fn v6(segments: [u16; 8], length: u8, name: &'static str, reach: Reach) -> Special {
    let [a, b, c, d, e, f, g, h] = segments;
    let block = Ipv6Addr::new(a, b, c, d, e, f, g, h).to_bits();
    Special {
        block,
        length,
        name,
        reach,
    }
}

/// IANA's IPv4 Special-Purpose Address Registry, every row (the most
/// specific row holding an address decides, but a globally reachable row
/// inside a block that is not stays refused: `most_specific`), then what
/// this rule adds:
/// multicast (IANA's multicast registry) and a metadata address in a
/// shared range.
pub const SPECIAL_V4: [Special; 27] = {
    use Reach::{Global, Never, Private};
    [
        v4([0, 0, 0, 0], 8, "This network", Never),
        v4([0, 0, 0, 0], 32, "This host on this network", Never),
        v4([10, 0, 0, 0], 8, "Private-Use", Private),
        v4([100, 64, 0, 0], 10, "Shared Address Space", Private),
        v4([127, 0, 0, 0], 8, "Loopback", Private),
        v4([169, 254, 0, 0], 16, "Link Local", Never),
        v4([172, 16, 0, 0], 12, "Private-Use", Private),
        v4([192, 0, 0, 0], 24, "IETF Protocol Assignments", Never),
        v4([192, 0, 0, 0], 29, "IPv4 Service Continuity Prefix", Never),
        v4([192, 0, 0, 8], 32, "IPv4 dummy address", Never),
        v4([192, 0, 0, 9], 32, "Port Control Protocol Anycast", Global),
        v4(
            [192, 0, 0, 10],
            32,
            "Traversal Using Relays around NAT Anycast",
            Global,
        ),
        v4([192, 0, 0, 170], 32, "NAT64/DNS64 Discovery", Never),
        v4([192, 0, 0, 171], 32, "NAT64/DNS64 Discovery", Never),
        v4([192, 0, 2, 0], 24, "Documentation (TEST-NET-1)", Never),
        v4([192, 31, 196, 0], 24, "AS112-v4", Global),
        v4([192, 52, 193, 0], 24, "AMT", Global),
        // Deprecated by RFC 7526; the registry no longer states its reach.
        v4([192, 88, 99, 0], 24, "Deprecated (6to4 Relay Anycast)", Never),
        v4([192, 168, 0, 0], 16, "Private-Use", Private),
        v4([192, 175, 48, 0], 24, "Direct Delegation AS112 Service", Global),
        v4([198, 18, 0, 0], 15, "Benchmarking", Never),
        v4([198, 51, 100, 0], 24, "Documentation (TEST-NET-2)", Never),
        v4([203, 0, 113, 0], 24, "Documentation (TEST-NET-3)", Never),
        v4([240, 0, 0, 0], 4, "Reserved", Never),
        v4([255, 255, 255, 255], 32, "Limited Broadcast", Never),
        // Not rows of the registry.
        v4([224, 0, 0, 0], 4, "Multicast", Never),
        v4([100, 100, 100, 200], 32, "Alibaba Cloud metadata service", Never),
    ]
};

/// IANA's IPv6 Special-Purpose Address Registry, every row, then what this
/// rule adds: the IPv4-compatible and IPv4-translated forms, site-local
/// (deprecated by RFC 3879, never reassigned), multicast, and the EC2
/// service network (its metadata service, fd00:ec2::254, among them).
pub const SPECIAL_V6: [Special; 30] = {
    use Reach::{Embeds, Global, Never, Private};
    [
        v6([0, 0, 0, 0, 0, 0, 0, 1], 128, "Loopback Address", Private),
        v6([0, 0, 0, 0, 0, 0, 0, 0], 128, "Unspecified Address", Never),
        v6([0, 0, 0, 0, 0, 0xffff, 0, 0], 96, "IPv4-mapped Address", Embeds),
        v6(
            [0x64, 0xff9b, 0, 0, 0, 0, 0, 0],
            96,
            "IPv4-IPv6 Translat.",
            Embeds,
        ),
        v6(
            [0x64, 0xff9b, 1, 0, 0, 0, 0, 0],
            48,
            "IPv4-IPv6 Translat.",
            Embeds,
        ),
        v6(
            [0x100, 0, 0, 0, 0, 0, 0, 0],
            64,
            "Discard-Only Address Block",
            Never,
        ),
        v6([0x100, 0, 0, 1, 0, 0, 0, 0], 64, "Dummy IPv6 Prefix", Never),
        v6(
            [0x2001, 0, 0, 0, 0, 0, 0, 0],
            23,
            "IETF Protocol Assignments",
            Never,
        ),
        v6([0x2001, 0, 0, 0, 0, 0, 0, 0], 32, "TEREDO", Embeds),
        v6(
            [0x2001, 1, 0, 0, 0, 0, 0, 1],
            128,
            "Port Control Protocol Anycast",
            Global,
        ),
        v6(
            [0x2001, 1, 0, 0, 0, 0, 0, 2],
            128,
            "Traversal Using Relays around NAT Anycast",
            Global,
        ),
        v6(
            [0x2001, 1, 0, 0, 0, 0, 0, 3],
            128,
            "DNS-SD Service Registration Protocol Anycast",
            Global,
        ),
        v6([0x2001, 2, 0, 0, 0, 0, 0, 0], 48, "Benchmarking", Never),
        v6([0x2001, 3, 0, 0, 0, 0, 0, 0], 32, "AMT", Global),
        v6([0x2001, 4, 0x112, 0, 0, 0, 0, 0], 48, "AS112-v6", Global),
        v6(
            [0x2001, 0x10, 0, 0, 0, 0, 0, 0],
            28,
            "Deprecated (previously ORCHID)",
            Never,
        ),
        v6([0x2001, 0x20, 0, 0, 0, 0, 0, 0], 28, "ORCHIDv2", Global),
        v6(
            [0x2001, 0x30, 0, 0, 0, 0, 0, 0],
            28,
            "Drone Remote ID Protocol Entity Tags (DETs) Prefix",
            Global,
        ),
        v6([0x2001, 0xdb8, 0, 0, 0, 0, 0, 0], 32, "Documentation", Never),
        v6([0x2002, 0, 0, 0, 0, 0, 0, 0], 16, "6to4", Embeds),
        v6(
            [0x2620, 0x4f, 0x8000, 0, 0, 0, 0, 0],
            48,
            "Direct Delegation AS112 Service",
            Global,
        ),
        v6([0x3fff, 0, 0, 0, 0, 0, 0, 0], 20, "Documentation", Never),
        v6(
            [0x5f00, 0, 0, 0, 0, 0, 0, 0],
            16,
            "Segment Routing (SRv6) SIDs",
            Never,
        ),
        v6([0xfc00, 0, 0, 0, 0, 0, 0, 0], 7, "Unique-Local", Private),
        v6([0xfe80, 0, 0, 0, 0, 0, 0, 0], 10, "Link-Local Unicast", Never),
        // Not rows of the registry.
        v6(
            [0, 0, 0, 0, 0, 0, 0, 0],
            96,
            "IPv4-compatible Address (deprecated)",
            Embeds,
        ),
        v6(
            [0, 0, 0, 0, 0xffff, 0, 0, 0],
            96,
            "IPv4-translated Address (RFC 2765)",
            Embeds,
        ),
        v6(
            [0xfec0, 0, 0, 0, 0, 0, 0, 0],
            10,
            "Site-Local (deprecated)",
            Never,
        ),
        v6([0xff00, 0, 0, 0, 0, 0, 0, 0], 8, "Multicast", Never),
        v6(
            [0xfd00, 0x0ec2, 0, 0, 0, 0, 0, 0],
            64,
            "EC2 service network",
            Never,
        ),
    ]
};

/// The IPv4 addresses an IPv6 address leads to, by every standard
/// embedding: at most two (Teredo names a server and a client).
fn embedded_v4(address: Ipv6Addr) -> [Option<Ipv4Addr>; 4] {
    let s = address.segments();
    let bits = u128::from(address);
    let v4 = |high: u16, low: u16| Some(Ipv4Addr::from((u32::from(high) << 16) | u32::from(low)));
    let last = v4(s[6], s[7]);
    match s {
        // ::ffff:a.b.c.d (mapped) and ::ffff:0:a.b.c.d (translated, RFC 2765).
        [0, 0, 0, 0, 0, 0xffff, ..] | [0, 0, 0, 0, 0xffff, 0, ..] => [last, None, None, None],
        // ::a.b.c.d (compatible), except :: and ::1, which are IPv6's own.
        [0, 0, 0, 0, 0, 0, ..] if bits > 1 => [last, None, None, None],
        // 64:ff9b::/96, the well-known NAT64 prefix (RFC 6052).
        [0x64, 0xff9b, 0, 0, 0, 0, ..] => [last, None, None, None],
        // 64:ff9b:1::/48, local NAT64 prefixes (RFC 8215) of any RFC 6052
        // length from /48 to /96: the prefix length is the operator's, so
        // every place the address may sit is judged and the strictest class
        // wins. A place that reads 0.0.0.0 is padding and is skipped unless
        // every place reads so.
        [0x64, 0xff9b, 0x0001, ..] => {
            let octets = address.octets();
            let at = |indices: [usize; 4]| Ipv4Addr::from(indices.map(|index| octets[index]));
            let places = [
                at([6, 7, 9, 10]),    // /48 (octet 8 is RFC 6052's reserved u octet)
                at([7, 9, 10, 11]),   // /56
                at([9, 10, 11, 12]),  // /64
                at([12, 13, 14, 15]), // /96
            ];
            let reached = places.map(|v4| (!v4.is_unspecified()).then_some(v4));
            if reached.iter().all(Option::is_none) {
                [Some(Ipv4Addr::UNSPECIFIED), None, None, None]
            } else {
                reached
            }
        }
        // 2002:aabb:ccdd::/48, 6to4 (RFC 3056).
        [0x2002, high, low, ..] => [v4(high, low), None, None, None],
        // 2001:0:server:server:flags:port:client:client, Teredo (RFC 4380);
        // the client address is stored inverted.
        [0x2001, 0, high, low, ..] => [v4(high, low), v4(!s[6], !s[7]), None, None],
        _ => [None; 4],
    }
}

pub(super) fn endpoint(path: &str, value: &Value, policy: Policy, errors: &mut FieldErrors) {
    let Some(raw) = value.as_str() else {
        return errors.push(wrong_type(path, "a string", value));
    };
    let invalid = |message: &str| FieldError::new(path, "invalid_url", message);
    if raw.chars().count() > MAX_URL_CHARS {
        return errors.push(FieldError::new(
            path,
            "too_long",
            format!("must be at most {MAX_URL_CHARS} characters"),
        ));
    }
    // The URL parser strips and skips whitespace and controls; the stored
    // string is the submitted one, so refuse them rather than store them.
    if raw.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return errors.push(invalid("must not contain whitespace or control characters"));
    }
    let Ok(url) = Url::parse(raw) else {
        return errors.push(invalid("must be an absolute http or https URL"));
    };
    let scheme_ok = matches!(url.scheme(), "http" | "https");
    // `http:host` and `http:\\host` parse too; an absolute URL spells `://`.
    let spelled_absolute = raw
        .get(url.scheme().len()..)
        .is_some_and(|rest| rest.starts_with("://"));
    if !scheme_ok || !spelled_absolute {
        return errors.push(invalid("must be an absolute http or https URL"));
    }
    // Parsers disagree on these, and an MCP client need not parse as this
    // check does: the WHATWG parser reads `\` as `/` and skips the empty
    // authority of `http:///host`, where RFC 3986 has no `\` at all and
    // RFC 9110 says to reject an empty host. Refused, so every parser
    // reaches the host judged below.
    let authority = raw_authority(raw);
    if raw.contains('\\') || authority.is_empty() {
        return errors.push(invalid("must be an absolute http or https URL"));
    }
    let Some(host) = url.host() else {
        return errors.push(invalid("must have a host"));
    };
    // `http://@host` has an empty user-info that the parser drops; the
    // submitted string still carries it.
    if !url.username().is_empty() || url.password().is_some() || authority.contains('@') {
        return errors.push(FieldError::new(
            path,
            "user_info",
            "must not contain user information",
        ));
    }
    match classify_host(&host) {
        HostClass::Public => {}
        HostClass::Private if policy.allow_private_endpoints => {}
        HostClass::Private => errors.push(FieldError::new(
            path,
            "private_host",
            "must not point to a loopback, private or shared-network host",
        )),
        HostClass::Forbidden => errors.push(FieldError::new(
            path,
            "forbidden_host",
            "must not point to a link-local, metadata, unspecified, multicast, broadcast or reserved \
             address, or into another special-purpose block that is not globally reachable",
        )),
    }
}

/// The authority as submitted: what follows the first `://`, up to the
/// path, query or fragment.
fn raw_authority(raw: &str) -> &str {
    let after_scheme = raw.split_once("://").map_or("", |(_, rest)| rest);
    after_scheme.split(['/', '?', '#']).next().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::super::testing::{codes, problems_with};
    use super::super::{Policy, Rule};
    use super::*;
    use serde_json::json;

    #[test]
    fn endpoint_shapes() {
        for ok in [
            "https://mcp.example.com/sse",
            "http://example.com",
            "HTTPS://Example.COM:8443/a?b=c#d",
            "https://8.8.8.8/",
            "https://[2606:4700:4700::1111]/mcp",
            "https://xn--nxasmq6b.example/",
        ] {
            assert!(codes(Rule::Endpoint, json!(ok)).is_empty(), "{ok}");
        }
        for bad in [
            "ftp://example.com",
            "example.com",
            "/relative/path",
            "https:example.com",
            "https:\\\\example.com",
            // Read alike by every parser, or refused.
            "http:////example.com/",
            "http:///example.com/",
            "http://",
            "http://?x",
            "http://#x",
            "http://evil.com\\.169.254.169.254/",
            "http://example.com\\@169.254.169.254/",
            "https://example.com/a\\b",
            "mailto:a@example.com",
            "https://exa mple.com",
            " https://example.com",
            "https://example.com/\n",
            "",
        ] {
            assert_eq!(codes(Rule::Endpoint, json!(bad)), ["invalid_url"], "{bad:?}");
        }
        let long = format!("https://example.com/{}", "a".repeat(2048 - 20));
        assert_eq!(long.chars().count(), 2048);
        assert!(codes(Rule::Endpoint, json!(long)).is_empty());
        assert_eq!(codes(Rule::Endpoint, json!(format!("{long}a"))), ["too_long"]);
    }

    #[test]
    fn endpoint_user_info_is_refused() {
        for bad in [
            "https://user:pw@example.com",
            "https://user@example.com/",
            "https://@example.com",
        ] {
            assert_eq!(codes(Rule::Endpoint, json!(bad)), ["user_info"], "{bad}");
        }
        assert!(codes(Rule::Endpoint, json!("https://example.com/a@b")).is_empty());
    }

    #[test]
    fn endpoint_host_classes() {
        let forbidden = [
            // Globally reachable rows inside blocks that are not.
            "http://192.0.0.9",
            "http://192.0.0.10",
            "http://[2001:1::1]",
            "http://[2001:3::1]",
            "http://[2001:20::1]",
            "http://169.254.169.254/latest/meta-data",
            "http://169.254.0.1",
            "http://[fe80::1]",
            "http://[febf::1]",
            "http://[fd00:ec2::254]",
            "http://[fd00:ec2::23]",
            "http://[fd00:ec2::ffff:1]",
            "http://100.100.100.200/latest/meta-data",
            "http://metadata.google.internal/computeMetadata/v1/",
            "http://metadata/computeMetadata/v1/",
            "http://METADATA./",
            "http://Metadata.Google.Internal./",
            "http://metadata.goog/",
            "http://instance-data/latest/meta-data/",
            "http://INSTANCE-DATA.EC2.INTERNAL./latest/",
            "http://instance-data.:80/",
            "http://metad%61ta/",
            "http://Metadata.Google.Internal./",
            "http://0.0.0.0",
            "http://0.1.2.3",
            "http://[::]",
            "http://224.0.0.1",
            "http://239.255.255.250",
            "http://[ff02::1]",
            "http://255.255.255.255",
            "http://240.0.0.1",
            "http://250.1.2.3",
            "http://[::ffff:169.254.169.254]",
            "http://0xa9fea9fe/",
            "http://0251.0376.0251.0376/",
            "http://169.254.43518/",
            // IPv4 embedded in IPv6, every standard way.
            "http://[::169.254.169.254]/",
            "http://[::ffff:0:169.254.169.254]/",
            "http://[64:ff9b::169.254.169.254]/",
            "http://[64:ff9b::a9fe:a9fe]/",
            "http://[64:ff9b:1::a9fe:a9fe]/",
            "http://[64:ff9b:1:a9fe:a9:fe00::]/",
            "http://[2002:a9fe:a9fe::1]/",
            "http://[2001:0:a9fe:a9fe::1]/",
            "http://[2001:0:4136:e378:8000:63bf:5601:5601]/",
            "http://[::ffff:100.100.100.200]/",
            // IANA's special-purpose blocks that are not globally reachable,
            // in the spellings the rule parses.
            "http://192.0.0.192/",
            "http://192.0.0.1/",
            "http://3221225664/",
            "http://0xc00000c0/",
            "http://192.0.2.1/",
            "http://198.51.100.7/",
            "http://203.0.113.9/",
            "http://198.18.0.1",
            "http://198.19.255.255",
            "http://192.88.99.1/",
            "http://[::ffff:192.0.2.1]/",
            "http://[64:ff9b::203.0.113.1]/",
            "http://[2002:c000:0201::1]/",
            "http://[2001:db8::1]/",
            "http://[2001:DB8:FFFF::]/",
            "http://[fec0::1]",
            "http://[100::1]/",
            "http://[2001:2::1]",
            "http://[2001:100::1]/",
            "http://[3fff::1]/",
            "http://[5f00::1]/",
        ];
        let private = [
            "http://127.0.0.1:8080",
            "http://127.1.2.3",
            "http://2130706433/",
            "http://localhost:3000",
            "http://LOCALHOST.",
            "http://api.localhost",
            "http://[::1]",
            "http://10.0.0.1",
            "http://172.16.0.1",
            "http://172.31.255.255",
            "http://192.168.1.1",
            "http://100.64.0.1",
            "http://100.127.255.254",
            "http://[fc00::1]",
            "http://[fd12:3456::1]",
            "http://[fd00:ec3::254]",
            "http://[::ffff:10.0.0.1]",
            "http://[::127.0.0.1]",
            "http://[64:ff9b::10.0.0.1]",
            "http://[2002:c0a8:0101::]",
        ];
        let public = [
            "http://172.32.0.1",
            "http://172.15.0.1",
            "http://192.169.0.1",
            "http://100.63.255.255",
            "http://100.128.0.1",
            "http://198.20.0.1",
            "http://192.0.1.1",
            "http://192.31.196.1",
            "http://[2001:4860:4860::8888]",
            "http://localhost.example.com",
            "http://metadata.google.internal.example.com",
            "http://[64:ff9b::8.8.8.8]",
            "http://[2002:0808:0808::1]",
        ];
        let allow = Policy {
            allow_private_endpoints: true,
        };
        for url in forbidden {
            assert_eq!(codes(Rule::Endpoint, json!(url)), ["forbidden_host"], "{url}");
            let allowed = problems_with(Rule::Endpoint, json!(url), allow);
            assert_eq!(
                allowed.len(),
                1,
                "{url} must stay forbidden when private is allowed"
            );
        }
        for url in private {
            assert_eq!(codes(Rule::Endpoint, json!(url)), ["private_host"], "{url}");
            assert!(
                problems_with(Rule::Endpoint, json!(url), allow).is_empty(),
                "{url}"
            );
        }
        for url in public {
            assert!(codes(Rule::Endpoint, json!(url)).is_empty(), "{url}");
        }
    }

    /// One address of each row of the registries (and of the blocks this
    /// rule adds), with the class the API gives it, written out here
    /// rather than read from the tables.
    #[test]
    fn one_address_of_each_registry_row_has_its_class() {
        use HostClass::{Forbidden as F, Private as P, Public as G};
        let cases = [
            ("0.1.2.3", F),
            ("0.0.0.0", F),
            ("10.9.8.7", P),
            ("100.64.1.1", P),
            ("127.0.0.2", P),
            ("169.254.1.1", F),
            ("172.20.0.1", P),
            ("192.0.0.200", F),
            ("192.0.0.5", F),
            ("192.0.0.8", F),
            ("192.0.0.9", F),
            ("192.0.0.10", F),
            ("192.0.0.170", F),
            ("192.0.0.171", F),
            ("192.0.2.200", F),
            ("192.31.196.1", G),
            ("192.52.193.1", G),
            ("192.88.99.1", F),
            ("192.168.7.7", P),
            ("192.175.48.1", G),
            ("198.19.0.1", F),
            ("198.51.100.200", F),
            ("203.0.113.200", F),
            ("250.0.0.1", F),
            ("255.255.255.255", F),
            ("224.1.1.1", F),
            ("100.100.100.200", F),
            ("8.8.8.8", G),
            ("::1", P),
            ("::", F),
            ("::ffff:8.8.8.8", G),
            ("64:ff9b::8.8.8.8", G),
            ("100::1", F),
            ("100:0:0:1::1", F),
            ("2001:100::1", F),
            ("2001:0:808:808::f7f7:f7f7", G),
            ("2001:1::1", F),
            ("2001:1::2", F),
            ("2001:1::3", F),
            ("2001:1::4", F),
            ("2001:2::5", F),
            ("2001:3::1", F),
            ("2001:4:112::1", F),
            ("2001:10::1", F),
            ("2001:20::1", F),
            ("2001:30::1", F),
            ("2001:db8:1::1", F),
            ("2002:808:808::1", G),
            ("2620:4f:8000::1", G),
            ("3fff:fff::1", F),
            ("5f00:1::1", F),
            ("fd12::1", P),
            ("fe80::2", F),
            ("fec0::2", F),
            ("ff05::1", F),
            ("fd00:ec2::254", F),
            ("2606:4700::1", G),
        ];
        for (address, class) in cases {
            let parsed: IpAddr = address.parse().unwrap_or_else(|e| panic!("{address}: {e}"));
            assert_eq!(classify_ip(parsed), class, "{address}");
        }
    }

    /// Each row of the special-purpose tables decides for the addresses it
    /// holds that no more specific row holds: its first, last and middle.
    #[test]
    fn every_special_purpose_row_is_judged_by_its_reach() {
        for (rows, width) in [(&SPECIAL_V4[..], 32u32), (&SPECIAL_V6[..], 128)] {
            for row in rows {
                let host_bits = width - u32::from(row.length);
                let hosts = if host_bits == 0 {
                    0
                } else {
                    u128::MAX >> (128 - host_bits)
                };
                for sample in [row.block, row.block | hosts, row.block | (hosts >> 1)] {
                    let decided_elsewhere = rows
                        .iter()
                        .any(|other| other.length > row.length && other.holds(sample, width));
                    if decided_elsewhere {
                        continue;
                    }
                    let class = match u32::try_from(sample) {
                        Ok(bits) if width == 32 => classify_v4(Ipv4Addr::from_bits(bits)),
                        _ => classify_v6(Ipv6Addr::from_bits(sample)),
                    };
                    // A globally reachable row inside a block that is not stays refused.
                    let inside_never = rows
                        .iter()
                        .any(|other| other.reach == Reach::Never && other.holds(sample, width));
                    let expected = match row.reach {
                        Reach::Never => HostClass::Forbidden,
                        Reach::Private => HostClass::Private,
                        Reach::Global if inside_never => HostClass::Forbidden,
                        Reach::Global => HostClass::Public,
                        // Judged by what it embeds: elsewhere.
                        Reach::Embeds => continue,
                    };
                    assert_eq!(class, expected, "{} ({sample:x})", row.name);
                }
            }
        }
    }

    /// Every standard IPv6 spelling of an IPv4 address: first those whose
    /// place is fixed, then the four RFC 6052 places under 64:ff9b:1::/48.
    fn embeddings(v4: Ipv4Addr) -> (Vec<Ipv6Addr>, Vec<Ipv6Addr>) {
        let [a, b, c, d] = v4.octets();
        let high = u16::from_be_bytes([a, b]);
        let low = u16::from_be_bytes([c, d]);
        let mut fixed = vec![
            v4.to_ipv6_mapped(),
            Ipv6Addr::new(0, 0, 0, 0, 0xffff, 0, high, low),
            Ipv6Addr::new(0x64, 0xff9b, 0, 0, 0, 0, high, low),
            Ipv6Addr::new(0x2002, high, low, 0, 0, 0, 0, 1),
            Ipv6Addr::new(0x2001, 0, 0x4136, 0xe378, 0x8000, 0x63bf, !high, !low),
            // The client part reads 8.8.8.8, so only the server part can refuse.
            Ipv6Addr::new(0x2001, 0, high, low, 0, 0, 0xf7f7, 0xf7f7),
        ];
        if u32::from(v4) > 1 {
            fixed.push(v4.to_ipv6_compatible());
        }
        let local = [[6, 7, 9, 10], [7, 9, 10, 11], [9, 10, 11, 12], [12, 13, 14, 15]]
            .into_iter()
            .map(|indices: [usize; 4]| {
                let mut octets = [0u8; 16];
                octets[..6].copy_from_slice(&[0x00, 0x64, 0xff, 0x9b, 0x00, 0x01]);
                for (index, byte) in indices.into_iter().zip([a, b, c, d]) {
                    octets[index] = byte;
                }
                Ipv6Addr::from(octets)
            })
            .collect();
        (fixed, local)
    }

    /// An IPv4 address is judged alike in every fixed embedding, and at
    /// least as strictly under the local NAT64 prefix, whose places are
    /// ambiguous (so a forbidden address stays forbidden there too).
    fn assert_embeddings_judged_like(v4: Ipv4Addr) {
        let class = classify_v4(v4);
        let (fixed, local) = embeddings(v4);
        for v6 in fixed {
            assert_eq!(classify_v6(v6), class, "{v6} embeds {v4}");
        }
        for v6 in &local {
            assert!(classify_v6(*v6) >= class, "{v6} embeds {v4}");
        }
    }

    #[test]
    fn every_embedding_of_a_refused_ipv4_address_is_refused_alike() {
        let samples = [
            "169.254.169.254",
            "169.254.0.0",
            "100.100.100.200",
            "0.0.0.0",
            "0.255.255.255",
            "224.0.0.1",
            "240.0.0.0",
            "255.255.255.255",
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.0.1",
            "100.64.0.1",
            "198.18.0.1",
        ];
        for sample in samples {
            let v4: Ipv4Addr = sample.parse().unwrap_or(Ipv4Addr::UNSPECIFIED);
            assert_ne!(classify_v4(v4), HostClass::Public, "{sample}");
            assert_embeddings_judged_like(v4);
        }
    }

    proptest::proptest! {
        #[test]
        fn any_ipv4_address_is_judged_alike_in_ipv6(bits: u32) {
            assert_embeddings_judged_like(Ipv4Addr::from(bits));
        }

        #[test]
        fn any_refused_range_is_refused_in_ipv6(
            prefix in proptest::sample::select(vec![
                (0u32, 8u32), (0xa9fe_0000, 16), (0x7f00_0000, 8), (0x0a00_0000, 8), (0xac10_0000, 12),
                (0xc0a8_0000, 16), (0x6440_0000, 10), (0xc612_0000, 15), (0xe000_0000, 4), (0xf000_0000, 4),
            ]),
            host: u32,
        ) {
            let (network, length) = prefix;
            let v4 = Ipv4Addr::from(network | (host >> length));
            proptest::prop_assert_ne!(classify_v4(v4), HostClass::Public);
            assert_embeddings_judged_like(v4);
        }
    }
}
