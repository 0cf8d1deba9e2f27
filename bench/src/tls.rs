//! The TLS endpoints in front of DynamoDB Local and the local KMS, as both
//! are on AWS: a throwaway CA made for the run, a certificate for
//! `127.0.0.1` signed by it, and a terminator per backend that decrypts
//! each connection and relays it to the backend's plain HTTP port.
//!
//! The functions trust the CA the way an operator would trust another one:
//! `SSL_CERT_FILE` (the Rust SDK's trust store) and `AWS_CA_BUNDLE` (boto3),
//! both pointing at a bundle of the system's roots plus this CA, so parsing
//! the trust store costs what it costs with the system's bundle alone.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// The system's CA bundle on Debian and Ubuntu, which the trust bundle
/// starts with (on Amazon Linux it is `/etc/pki/tls/certs/ca-bundle.crt`).
const SYSTEM_BUNDLE: [&str; 2] = [
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
];

/// A running TLS endpoint.
pub struct Endpoint {
    /// `https://127.0.0.1:<port>`.
    pub url: String,
    /// The bundle to trust: the system's roots and this run's CA.
    pub bundle: PathBuf,
    /// TLS connections accepted so far.
    accepted: Arc<AtomicUsize>,
}

/// The run's CA and the server configuration it signed, shared by every
/// endpoint (DynamoDB's and KMS's), so one bundle trusts them all.
pub struct Credentials {
    bundle: PathBuf,
    config: Arc<ServerConfig>,
}

impl Credentials {
    /// Makes a CA and a server certificate for `127.0.0.1` in `dir`.
    pub fn make(dir: &Path) -> Result<Self, String> {
        let (bundle, config) = credentials(dir)?;
        Ok(Self {
            bundle,
            config: Arc::new(config),
        })
    }
}

impl Endpoint {
    /// Starts relaying `https://127.0.0.1:<free port>` to
    /// `127.0.0.1:<backend_port>` with `credentials`.
    pub async fn start(credentials: &Credentials, backend_port: u16) -> Result<Self, String> {
        let bundle = credentials.bundle.clone();
        let acceptor = TlsAcceptor::from(Arc::clone(&credentials.config));
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| e.to_string())?;
        let port = listener.local_addr().map_err(|e| e.to_string())?.port();
        let accepted = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&accepted);
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                counter.fetch_add(1, Ordering::SeqCst);
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let _ = client.set_nodelay(true);
                    let Ok(mut tls) = acceptor.accept(client).await else {
                        return;
                    };
                    let Ok(mut backend) = TcpStream::connect(("127.0.0.1", backend_port)).await else {
                        return;
                    };
                    let _ = backend.set_nodelay(true);
                    let _ = tokio::io::copy_bidirectional(&mut tls, &mut backend).await;
                });
            }
        });
        Ok(Self {
            url: format!("https://127.0.0.1:{port}"),
            bundle,
            accepted,
        })
    }

    /// TLS connections accepted since the endpoint started.
    pub fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }
}

/// Writes `ca.pem` and `bundle.pem` into `dir` and returns the bundle's path
/// and the server's configuration.
fn credentials(dir: &Path) -> Result<(PathBuf, ServerConfig), String> {
    let fail = |e: rcgen::Error| format!("certificate: {e}");
    let ca_key = KeyPair::generate().map_err(fail)?;
    let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(fail)?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "agent-server bench throwaway CA");
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca_cert = ca.self_signed(&ca_key).map_err(fail)?;
    let issuer = Issuer::new(ca, ca_key);

    let server_key = KeyPair::generate().map_err(fail)?;
    // An IP address SAN: the endpoint is 127.0.0.1, so no name resolution
    // (and no ::1 attempt first) enters the measurement.
    let mut server = CertificateParams::new(vec!["127.0.0.1".to_string()]).map_err(fail)?;
    server
        .distinguished_name
        .push(DnType::CommonName, "agent-server bench endpoints");
    let server_cert = server.signed_by(&server_key, &issuer).map_err(fail)?;

    let system = SYSTEM_BUNDLE
        .iter()
        .find_map(|path| std::fs::read_to_string(path).ok())
        .unwrap_or_default();
    if system.is_empty() {
        eprintln!("bench: WARNING: no system CA bundle found; the trust store holds only the bench CA");
    }
    let ca_pem = ca_cert.pem();
    let bundle = dir.join("bundle.pem");
    std::fs::write(dir.join("ca.pem"), &ca_pem).map_err(|e| e.to_string())?;
    std::fs::write(&bundle, format!("{system}\n{ca_pem}")).map_err(|e| e.to_string())?;

    let provider = Arc::new(tokio_rustls::rustls::crypto::aws_lc_rs::default_provider());
    let config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_single_cert(
            vec![CertificateDer::from(server_cert.der().to_vec())],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(server_key.serialize_der())),
        )
        .map_err(|e| e.to_string())?;
    Ok((bundle, config))
}
