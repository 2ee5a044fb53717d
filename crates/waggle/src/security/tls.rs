//! TLS from a PEM certificate chain and a PEM private key, as Zeebe's gateway takes them
//! (`zeebe.gateway.security.certificateChainPath` / `privateKeyPath`,
//! <https://docs.camunda.io/docs/self-managed/zeebe-deployment/security/secure-client-communication/>).
//! rustls with ring as its crypto provider; TLS 1.2 and 1.3; no client certificates.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rustls::ServerConfig;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::TlsAcceptor;

/// How long a client may take over its TLS handshake before its connection is dropped (a client
/// that opens a connection and sends nothing holds no task for longer).
pub const HANDSHAKE_LIMIT: Duration = Duration::from_secs(10);

/// ALPN of the gRPC port: HTTP/2 only (gRPC clients require `h2` to be negotiated).
pub const GRPC_ALPN: &[&[u8]] = &[b"h2"];

/// ALPN of the HTTP ports (REST, management): HTTP/2 or HTTP/1.1.
pub const HTTP_ALPN: &[&[u8]] = &[b"h2", b"http/1.1"];

/// The files a TLS port serves with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// PEM: the server's certificate first, then any intermediates.
    pub certificate_chain_path: PathBuf,
    /// PEM: the server certificate's private key (PKCS#8, PKCS#1 or SEC1).
    pub private_key_path: PathBuf,
}

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("reading the certificate chain {}: {source}", .path.display())]
    Chain { path: PathBuf, source: rustls_pki_types::pem::Error },
    #[error("the certificate chain {} holds no PEM certificate", .0.display())]
    EmptyChain(PathBuf),
    #[error("reading the private key {}: {source}", .path.display())]
    Key { path: PathBuf, source: rustls_pki_types::pem::Error },
    #[error("the private key {} does not fit the certificate chain or is not usable: {source}", .key.display())]
    Unusable { key: PathBuf, source: rustls::Error },
}

/// An acceptor for `files` offering `alpn`; the files are read now, so a wrong path or a key
/// that does not match the certificate stops the start-up with its reason.
pub fn acceptor(files: &TlsFiles, alpn: &[&[u8]]) -> Result<TlsAcceptor, TlsError> {
    let chain = read_chain(&files.certificate_chain_path)?;
    let key = PrivateKeyDer::from_pem_file(&files.private_key_path)
        .map_err(|source| TlsError::Key { path: files.private_key_path.clone(), source })?;
    let unusable = |source| TlsError::Unusable { key: files.private_key_path.clone(), source };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(unusable)?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(unusable)?;
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Ok(TlsAcceptor::from(Arc::new(config)))
}

fn read_chain(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let chain_error = |source| TlsError::Chain { path: path.to_path_buf(), source };
    let chain = CertificateDer::pem_file_iter(path).map_err(chain_error)?.collect::<Result<Vec<_>, _>>().map_err(chain_error)?;
    if chain.is_empty() {
        return Err(TlsError::EmptyChain(path.to_path_buf()));
    }
    Ok(chain)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_pair(dir: &Path) -> TlsFiles {
        let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        let files = TlsFiles { certificate_chain_path: dir.join("chain.pem"), private_key_path: dir.join("key.pem") };
        std::fs::write(&files.certificate_chain_path, cert.cert.pem()).unwrap();
        std::fs::write(&files.private_key_path, cert.key_pair.serialize_pem()).unwrap();
        files
    }

    #[test]
    fn a_matching_pair_loads_and_a_mismatch_or_a_missing_file_says_which() {
        let dir = tempfile::tempdir().unwrap();
        let files = write_pair(dir.path());
        acceptor(&files, GRPC_ALPN).expect("a matching pair");
        let other = tempfile::tempdir().unwrap();
        let other = write_pair(other.path());
        let mismatch = TlsFiles { private_key_path: other.private_key_path, ..files.clone() };
        let err = acceptor(&mismatch, GRPC_ALPN).err().expect("refused").to_string();
        assert!(err.contains("does not fit the certificate chain"), "{err}");
        let missing = TlsFiles { certificate_chain_path: dir.path().join("nope.pem"), ..files.clone() };
        let err = acceptor(&missing, GRPC_ALPN).err().expect("refused").to_string();
        assert!(err.contains("nope.pem"), "{err}");
        std::fs::write(dir.path().join("empty.pem"), "not a certificate").unwrap();
        let empty = TlsFiles { certificate_chain_path: dir.path().join("empty.pem"), ..files };
        let err = acceptor(&empty, GRPC_ALPN).err().expect("refused").to_string();
        assert!(err.contains("holds no PEM certificate"), "{err}");
    }
}
