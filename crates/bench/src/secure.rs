//! TLS and an OAuth 2 bearer token on the bench's connections (`waggle bench run --tls-ca`,
//! `--token`): the tonic client's and the lean HTTP/2 client's alike, so a workload can measure
//! a node with TLS and token validation on. Set once per process, before the first connection;
//! without it every connection is plaintext and unauthenticated, as before.

use std::path::Path;
use std::sync::{Arc, OnceLock};

use anyhow::Context;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

/// How the bench's connections are made.
#[derive(Default)]
pub struct Secure {
    /// TLS trusting one CA, when set.
    pub tls: Option<TlsConnector>,
    /// The `authorization` header's value (`Bearer <token>`), when set.
    pub authorization: Option<String>,
}

static SECURE: OnceLock<Secure> = OnceLock::new();

/// Turns on TLS trusting `ca` (PEM) and/or the bearer `token` for every connection from now on.
pub fn set(ca: Option<&Path>, token: Option<&str>) -> anyhow::Result<()> {
    let tls = match ca {
        None => None,
        Some(ca) => {
            let mut roots = rustls::RootCertStore::empty();
            for cert in CertificateDer::pem_file_iter(ca).with_context(|| format!("reading {}", ca.display()))? {
                roots.add(cert.with_context(|| format!("reading {}", ca.display()))?).context("a CA certificate")?;
            }
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            let mut config = rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .context("TLS versions")?
                .with_root_certificates(roots)
                .with_no_client_auth();
            config.alpn_protocols = vec![b"h2".to_vec()];
            Some(TlsConnector::from(Arc::new(config)))
        }
    };
    let authorization = token.map(|t| format!("Bearer {}", t.trim()));
    SECURE.set(Secure { tls, authorization }).map_err(|_| anyhow::anyhow!("the bench's connection security is set already"))
}

/// The connection settings (plaintext and unauthenticated unless [`set`]).
pub fn get() -> &'static Secure {
    SECURE.get_or_init(Secure::default)
}

/// A TLS connection over `tcp` to `address`'s host.
pub async fn handshake(connector: &TlsConnector, address: &str, tcp: TcpStream) -> std::io::Result<TlsStream<TcpStream>> {
    let host = address.rsplit_once(':').map_or(address, |(h, _)| h).trim_start_matches('[').trim_end_matches(']');
    let name = ServerName::try_from(host.to_string()).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    connector.connect(name, tcp).await
}
