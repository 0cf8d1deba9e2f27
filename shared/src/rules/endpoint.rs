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
    /// Link-local, cloud metadata, unspecified, multicast, broadcast or
    /// reserved: never.
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

/// The Alibaba Cloud metadata service, outside every range below.
const ALIBABA_METADATA: Ipv4Addr = Ipv4Addr::new(100, 100, 100, 200);
/// The EC2 IPv6 service network (metadata `fd00:ec2::254`, DNS, time sync).
const EC2_SERVICES: [u16; 4] = [0xfd00, 0x0ec2, 0, 0];

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
/// judged by at connect time ([`crate::mcp::dial`]).
pub fn classify_ip(address: IpAddr) -> HostClass {
    match address {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

/// The class of an IPv4 address.
pub fn classify_v4(address: Ipv4Addr) -> HostClass {
    let [a, b, ..] = address.octets();
    let forbidden = a == 0 // "this network", 0.0.0.0 included
        || address.is_link_local() // 169.254/16, the metadata address among them
        || address == ALIBABA_METADATA
        || address.is_multicast() // 224/4
        || a >= 240; // 240/4 reserved, 255.255.255.255 broadcast included
    let private = address.is_loopback()
        || address.is_private() // 10/8, 172.16/12, 192.168/16
        || (a == 100 && (64..128).contains(&b)) // 100.64/10 shared (carrier-grade NAT)
        || (a == 198 && (b == 18 || b == 19)); // 198.18/15 benchmarking networks
    if forbidden {
        HostClass::Forbidden
    } else if private {
        HostClass::Private
    } else {
        HostClass::Public
    }
}

/// The class of an IPv6 address: its own, or that of an IPv4 address it
/// embeds, whichever is stricter.
pub fn classify_v6(address: Ipv6Addr) -> HostClass {
    let embedded = embedded_v4(address)
        .into_iter()
        .flatten()
        .map(classify_v4)
        .max()
        .unwrap_or(HostClass::Public);
    own_class_v6(address).max(embedded)
}

fn own_class_v6(address: Ipv6Addr) -> HostClass {
    let segments = address.segments();
    let link_local = segments[0] & 0xffc0 == 0xfe80;
    let unique_local = segments[0] & 0xfe00 == 0xfc00;
    let ec2_services = segments[..4] == EC2_SERVICES;
    let benchmarking = segments[..3] == [0x2001, 0x0002, 0];
    if address.is_unspecified() || address.is_multicast() || link_local || ec2_services {
        HostClass::Forbidden
    } else if address.is_loopback() || unique_local || benchmarking {
        HostClass::Private
    } else {
        HostClass::Public
    }
}

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
            "must not point to a link-local, metadata, unspecified, multicast, broadcast or reserved address",
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
            "https://[2001:db8::1]/mcp",
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
            "http://198.18.0.1",
            "http://198.19.255.255",
            "http://[fc00::1]",
            "http://[fd12:3456::1]",
            "http://[fd00:ec3::254]",
            "http://[2001:2::1]",
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
            "http://[fec0::1]",
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
