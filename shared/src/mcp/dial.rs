//! The connect-time guard: a URL's host resolved once, refused if any
//! address it resolves to is one the endpoint rule refuses, and connections
//! made only to those checked addresses (TLS with the host as SNI and the
//! platform's roots; no proxy, since nothing here reads the environment's).
//! An agent runtime dialing a stored endpoint can use it as this service
//! does: ops/examples/dial_mcp_endpoint.rs.

use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use url::{Host, Url};

use super::Failure;
use crate::rules::{self, HostClass};

/// What a dial may reach.
#[derive(Debug, Clone, Default)]
pub struct DialPolicy {
    /// Loopback, `localhost` and private ranges too (`ALLOW_PRIVATE_ENDPOINTS`).
    pub allow_private: bool,
    /// Addresses never dialed whatever the ranges allow: inside Lambda,
    /// the Runtime API (`AWS_LAMBDA_RUNTIME_API`), where a request could
    /// take another invocation's event.
    pub refused: Vec<SocketAddr>,
}

impl DialPolicy {
    /// The endpoint rule's policy, with this process's Runtime API refused.
    pub fn of(rules: rules::Policy) -> Self {
        let refused = std::env::var("AWS_LAMBDA_RUNTIME_API")
            .ok()
            .and_then(|api| api.parse().ok())
            .into_iter()
            .collect();
        Self {
            allow_private: rules.allow_private_endpoints,
            refused,
        }
    }

    /// Whether a host of `class` may be dialed.
    fn allows(&self, class: HostClass) -> bool {
        match class {
            HostClass::Public => true,
            HostClass::Private => self.allow_private,
            HostClass::Forbidden => false,
        }
    }

    /// Whether `address` may be dialed.
    fn allows_address(&self, address: SocketAddr) -> bool {
        self.allows(rules::classify_ip(address.ip()))
            && !self.refused.iter().any(|refused| same_place(*refused, address))
    }
}

/// Whether `a` and `b` reach the same socket: the same port, and the same
/// address in any spelling (an IPv4-mapped IPv6 address is its IPv4
/// address), any two loopback addresses counting as one.
fn same_place(a: SocketAddr, b: SocketAddr) -> bool {
    let (x, y) = (a.ip().to_canonical(), b.ip().to_canonical());
    a.port() == b.port() && (x == y || (x.is_loopback() && y.is_loopback()))
}

/// Resolves a host name to addresses: the system's resolver in service,
/// any answer in tests.
pub trait Resolve: Sync {
    /// Every address `host` resolves to.
    fn resolve(&self, host: &str, port: u16) -> impl Future<Output = io::Result<Vec<IpAddr>>> + Send;
}

/// The system's resolver (getaddrinfo, on Tokio's blocking threads).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemResolver;

impl Resolve for SystemResolver {
    async fn resolve(&self, host: &str, port: u16) -> io::Result<Vec<IpAddr>> {
        Ok(tokio::net::lookup_host((host, port))
            .await?
            .map(|address| address.ip())
            .collect())
    }
}

/// The most one of several addresses is given to accept a connection.
const CONNECT_EACH: Duration = Duration::from_millis(1000);

/// A byte stream to a checked address, plain or TLS.
pub trait Io: AsyncRead + AsyncWrite + Send + Unpin {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin> Io for T {}

/// An endpoint whose addresses all passed the guard: connections go to
/// those addresses only, never to a second resolution.
#[derive(Debug, Clone)]
pub struct Dialed {
    url: Url,
    addresses: Vec<SocketAddr>,
    tls: Option<ServerName<'static>>,
}

/// Resolves `url`'s host and checks every address it resolves to (a
/// literal address, and a host name the endpoint rule names, are judged
/// as written): [`Failure::AddressRefused`] if any is refused,
/// [`Failure::Dns`] if there is none.
pub async fn dial(url: &Url, policy: &DialPolicy, resolver: &impl Resolve) -> Result<Dialed, Failure> {
    let https = match url.scheme() {
        "https" => true,
        "http" => false,
        _ => return Err(Failure::AddressRefused),
    };
    let host = url.host().ok_or(Failure::AddressRefused)?;
    if !policy.allows(rules::classify_host(&host)) {
        return Err(Failure::AddressRefused);
    }
    let port = url.port_or_known_default().ok_or(Failure::AddressRefused)?;
    let ips = match &host {
        Host::Ipv4(v4) => vec![IpAddr::V4(*v4)],
        Host::Ipv6(v6) => vec![IpAddr::V6(*v6)],
        Host::Domain(name) => resolver.resolve(name, port).await.map_err(|_| Failure::Dns)?,
    };
    if ips.is_empty() {
        return Err(Failure::Dns);
    }
    let addresses: Vec<SocketAddr> = ips.into_iter().map(|ip| SocketAddr::new(ip, port)).collect();
    if !addresses.iter().all(|address| policy.allows_address(*address)) {
        return Err(Failure::AddressRefused);
    }
    let tls = if https {
        let name = match host {
            Host::Domain(name) => ServerName::try_from(name.trim_end_matches('.').to_string()),
            Host::Ipv4(v4) => Ok(ServerName::IpAddress(IpAddr::V4(v4).into())),
            Host::Ipv6(v6) => Ok(ServerName::IpAddress(IpAddr::V6(v6).into())),
        };
        Some(name.map_err(|_| Failure::Tls)?)
    } else {
        None
    };
    Ok(Dialed {
        url: url.clone(),
        addresses,
        tls,
    })
}

impl Dialed {
    /// The URL dialed.
    pub fn url(&self) -> &Url {
        &self.url
    }

    /// The checked addresses, in the order tried.
    pub fn addresses(&self) -> &[SocketAddr] {
        &self.addresses
    }

    /// A connection to the first checked address that accepts one, TLS
    /// over it for `https` (ALPN `http/1.1`).
    pub async fn connect(&self) -> Result<Box<dyn Io>, Failure> {
        let mut connected = None;
        // With more than one address, a silent one (dropped packets) must
        // not take the whole budget from the next.
        let each = match self.addresses.len() {
            1 => Duration::from_secs(3600),
            _ => CONNECT_EACH,
        };
        for address in &self.addresses {
            if let Ok(Ok(stream)) = tokio::time::timeout(each, TcpStream::connect(address)).await {
                connected = Some(stream);
                break;
            }
        }
        let stream = connected.ok_or(Failure::Connect)?;
        // Small requests, each answered before the next: no Nagle delay.
        let _ = stream.set_nodelay(true);
        let Some(name) = &self.tls else {
            return Ok(Box::new(stream));
        };
        let config = tls_config().ok_or(Failure::Tls)?;
        let connector = tokio_rustls::TlsConnector::from(config);
        let stream = connector
            .connect(name.clone(), stream)
            .await
            .map_err(|_| Failure::Tls)?;
        Ok(Box::new(stream))
    }
}

/// The TLS client configuration: the platform's roots (as the AWS SDK
/// reads them, `SSL_CERT_FILE` included), read at the first `https` dial;
/// `None` if the platform has none.
fn tls_config() -> Option<Arc<rustls::ClientConfig>> {
    static CONFIG: OnceLock<Option<Arc<rustls::ClientConfig>>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let mut roots = rustls::RootCertStore::empty();
            for certificate in rustls_native_certs::load_native_certs().certs {
                let _ = roots.add(certificate);
            }
            if roots.is_empty() {
                tracing::error!("no TLS roots found on this platform: https endpoints cannot be verified");
                return None;
            }
            let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
            let mut config = rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .ok()?
                .with_root_certificates(roots)
                .with_no_client_auth();
            config.alpn_protocols = vec![b"http/1.1".to_vec()];
            Some(Arc::new(config))
        })
        .clone()
}

#[cfg(test)]
mod tests {
    use std::net::{Ipv4Addr, Ipv6Addr};

    use super::*;

    /// Answers every name with the same addresses.
    struct Fixed(Vec<IpAddr>);

    impl Resolve for Fixed {
        async fn resolve(&self, _host: &str, _port: u16) -> io::Result<Vec<IpAddr>> {
            Ok(self.0.clone())
        }
    }

    fn url(text: &str) -> Url {
        Url::parse(text).unwrap_or_else(|error| panic!("{text}: {error}"))
    }

    async fn dialed(
        text: &str,
        policy: &DialPolicy,
        resolver: &impl Resolve,
    ) -> Result<Vec<SocketAddr>, Failure> {
        dial(&url(text), policy, resolver)
            .await
            .map(|dialed| dialed.addresses().to_vec())
    }

    const PUBLIC: IpAddr = IpAddr::V4(Ipv4Addr::new(93, 184, 215, 14));

    #[tokio::test]
    async fn a_name_is_refused_if_any_address_it_resolves_to_is() {
        let strict = DialPolicy::default();
        let open = DialPolicy {
            allow_private: true,
            ..DialPolicy::default()
        };
        let metadata = IpAddr::V4(Ipv4Addr::new(169, 254, 169, 254));
        let loopback = IpAddr::V4(Ipv4Addr::LOCALHOST);
        let mapped = IpAddr::V6(Ipv4Addr::new(10, 0, 0, 1).to_ipv6_mapped());
        let nat64: IpAddr = IpAddr::V6(Ipv6Addr::new(0x64, 0xff9b, 0, 0, 0, 0, 0xa9fe, 0xa9fe));
        let cases: [(Vec<IpAddr>, &DialPolicy, bool); 9] = [
            (vec![PUBLIC], &strict, true),
            (vec![metadata], &strict, false),
            (vec![metadata], &open, false),
            (vec![PUBLIC, metadata], &open, false),
            (vec![metadata, PUBLIC], &strict, false),
            (vec![loopback], &strict, false),
            (vec![PUBLIC, loopback], &open, true),
            (vec![PUBLIC, mapped], &strict, false),
            (vec![nat64], &open, false),
        ];
        for (addresses, policy, allowed) in cases {
            let outcome = dialed("https://mcp.example.com/mcp", policy, &Fixed(addresses.clone())).await;
            assert_eq!(outcome.is_ok(), allowed, "{addresses:?}: {outcome:?}");
            if !allowed {
                assert_eq!(outcome, Err(Failure::AddressRefused), "{addresses:?}");
            }
        }
        assert_eq!(
            dialed("http://mcp.example.com/", &strict, &Fixed(Vec::new())).await,
            Err(Failure::Dns)
        );
    }

    #[tokio::test]
    async fn literal_addresses_and_metadata_names_are_judged_before_any_lookup() {
        // A resolver that would allow anything is never asked.
        let anything = Fixed(vec![PUBLIC]);
        let open = DialPolicy {
            allow_private: true,
            ..DialPolicy::default()
        };
        for text in [
            "http://169.254.169.254/latest",
            "http://[fd00:ec2::254]/",
            "http://metadata.google.internal./",
            "http://INSTANCE-DATA/",
            "http://0xa9fea9fe/",
            "http://[::ffff:169.254.169.254]/",
        ] {
            assert_eq!(
                dialed(text, &open, &anything).await,
                Err(Failure::AddressRefused),
                "{text}"
            );
        }
        assert_eq!(
            dialed("http://127.0.0.1:9/", &DialPolicy::default(), &anything).await,
            Err(Failure::AddressRefused)
        );
        let runtime_api = DialPolicy {
            allow_private: true,
            refused: vec![SocketAddr::from((Ipv4Addr::LOCALHOST, 9001))],
        };
        assert_eq!(
            dialed("http://127.0.0.1:9001/", &runtime_api, &anything).await,
            Err(Failure::AddressRefused)
        );
        assert_eq!(
            dialed(
                "http://localhost:9001/",
                &runtime_api,
                &Fixed(vec![IpAddr::V4(Ipv4Addr::LOCALHOST)])
            )
            .await,
            Err(Failure::AddressRefused)
        );
        for spelling in [
            "http://[::ffff:127.0.0.1]:9001/",
            "http://[::1]:9001/",
            "http://127.0.0.2:9001/",
        ] {
            assert_eq!(
                dialed(spelling, &runtime_api, &anything).await,
                Err(Failure::AddressRefused),
                "{spelling}"
            );
        }
        assert!(
            dialed("http://127.0.0.1:9002/", &runtime_api, &anything)
                .await
                .is_ok()
        );
    }
}
