//! Mutual TLS on the brokers' internal port (issue 29): every broker presents its certificate
//! and takes a peer's only if the configured CA signed it, on both ends of every connection
//! (Raft streams, forwarded commands, job stream sessions). The settings follow Zeebe's
//! `zeebe.broker.network.security.*` (`enabled`, `certificateChainPath`, `privateKeyPath`,
//! <https://docs.camunda.io/docs/self-managed/zeebe-deployment/security/secure-cluster-communication/>),
//! plus the CA file peers are verified against.
//!
//! A peer is a member when its chain leads to the CA: names are not checked (brokers dial each
//! other by resolved address, and a certificate need not name it), so the CA should be one
//! that signs only this cluster's certificates. A broker's certificate serves both as a server
//! and as a client certificate: it needs both extended key usages (`serverAuth`, `clientAuth`),
//! or none. rustls with ring; TLS 1.2 and 1.3; ALPN `h2`.
//!
//! A refused handshake (a certificate of another CA, none, or plaintext) is logged as a warning
//! on the side that refused it, with the peer's address and the reason.

use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use hyper_util::rt::TokioIo;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, ServerConfig, SignatureScheme};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::{TlsAcceptor, TlsConnector};
use tokio_stream::wrappers::ReceiverStream;
use tonic::codegen::http::Uri;
use tonic::codegen::Service;
use tonic::transport::server::{Connected, TcpConnectInfo};
use tonic::transport::{Channel, Endpoint};

use crate::net::Connector;

/// How long a peer may take over its TLS handshake before its connection is dropped.
pub const HANDSHAKE_LIMIT: Duration = Duration::from_secs(5);
/// How long dialing a peer (TCP and TLS handshake) may take.
const DIAL_LIMIT: Duration = Duration::from_secs(2);
/// Accepted connections whose handshakes finished and the server has not taken yet.
const ACCEPTED_QUEUE: usize = 64;

/// The files of the internal port's TLS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MutualTlsFiles {
    /// PEM: this broker's certificate first, then any intermediates.
    pub certificate_chain_path: PathBuf,
    /// PEM: the certificate's private key (PKCS#8, PKCS#1 or SEC1).
    pub private_key_path: PathBuf,
    /// PEM: the CA certificate(s) a peer's certificate must lead to.
    pub ca_certificate_path: PathBuf,
}

#[derive(Debug, thiserror::Error)]
pub enum MutualTlsError {
    #[error("reading the certificate file {}: {source}", .path.display())]
    Certificates { path: PathBuf, source: rustls::pki_types::pem::Error },
    #[error("the certificate file {} holds no PEM certificate", .0.display())]
    NoCertificate(PathBuf),
    #[error("reading the private key {}: {source}", .path.display())]
    Key { path: PathBuf, source: rustls::pki_types::pem::Error },
    #[error("the CA certificate in {} is not usable: {source}", .path.display())]
    Ca { path: PathBuf, source: rustls::Error },
    #[error("the CA file {} cannot verify peers: {reason}", .path.display())]
    Verifier { path: PathBuf, reason: String },
    #[error("the private key {} does not fit the certificate chain or is not usable: {source}", .key.display())]
    Unusable { key: PathBuf, source: rustls::Error },
}

/// The internal port's TLS, loaded: the server side (which requires a client certificate of
/// the CA) and the client side (which presents this broker's certificate).
pub struct MutualTls {
    acceptor: TlsAcceptor,
    connector: TlsConnector,
    ca_der: Vec<CertificateDer<'static>>,
}

impl std::fmt::Debug for MutualTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MutualTls").finish_non_exhaustive()
    }
}

impl MutualTls {
    /// Reads `files` now: a missing or unreadable file, a key that does not fit the chain, or a
    /// CA file without a usable certificate is an error naming the file.
    pub fn load(files: &MutualTlsFiles) -> Result<MutualTls, MutualTlsError> {
        let chain = read_certificates(&files.certificate_chain_path)?;
        let key = || {
            PrivateKeyDer::from_pem_file(&files.private_key_path)
                .map_err(|source| MutualTlsError::Key { path: files.private_key_path.clone(), source })
        };
        let ca_der = read_certificates(&files.ca_certificate_path)?;
        let mut roots = RootCertStore::empty();
        for ca in &ca_der {
            roots.add(ca.clone()).map_err(|source| MutualTlsError::Ca { path: files.ca_certificate_path.clone(), source })?;
        }
        let roots = Arc::new(roots);
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let unusable = |source| MutualTlsError::Unusable { key: files.private_key_path.clone(), source };
        let verifier_error = |e: rustls::server::VerifierBuilderError| MutualTlsError::Verifier {
            path: files.ca_certificate_path.clone(),
            reason: e.to_string(),
        };
        let client_verifier =
            WebPkiClientVerifier::builder_with_provider(roots.clone(), provider.clone()).build().map_err(verifier_error)?;
        let mut server = ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(unusable)?
            .with_client_cert_verifier(client_verifier)
            .with_single_cert(chain.clone(), key()?)
            .map_err(unusable)?;
        server.alpn_protocols = vec![b"h2".to_vec()];
        let server_verifier = WebPkiServerVerifier::builder_with_provider(roots, provider.clone())
            .build()
            .map_err(|e| MutualTlsError::Verifier { path: files.ca_certificate_path.clone(), reason: e.to_string() })?;
        let mut client = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(unusable)?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(SignedByCa(server_verifier)))
            .with_client_auth_cert(chain, key()?)
            .map_err(unusable)?;
        client.alpn_protocols = vec![b"h2".to_vec()];
        Ok(MutualTls { acceptor: TlsAcceptor::from(Arc::new(server)), connector: TlsConnector::from(Arc::new(client)), ca_der })
    }

    /// The CA certificates peers are verified against (DER), e.g. to derive a cluster's name.
    pub fn ca_certificates(&self) -> &[CertificateDer<'static>] {
        &self.ca_der
    }

    /// Channels to peers over TLS: dials TCP, then the handshake, within a time limit. Its
    /// failures read as hyper's connection errors ("tcp connect error: ..."; see [`Connector`]),
    /// and a refused handshake is logged as a warning.
    pub fn connector(self: &Arc<Self>) -> Connector {
        let tls = self.clone();
        Arc::new(move |endpoint: Endpoint| -> Channel { endpoint.connect_with_connector_lazy(TlsDial(tls.clone())) })
    }

    /// Accepts connections on `listener`, each one's handshake in a task of its own (so one slow
    /// or hostile peer holds up no other); yields those that completed it. A refused one is
    /// logged with the peer's address and the reason, and dropped.
    pub fn incoming(self: &Arc<Self>, listener: TcpListener) -> ReceiverStream<io::Result<TlsConnection>> {
        let (accepted, incoming) = mpsc::channel(ACCEPTED_QUEUE);
        let tls = self.clone();
        tokio::spawn(async move {
            loop {
                // the server gone (the network dropped): the port is released
                let (stream, peer) = tokio::select! {
                    next = listener.accept() => match next {
                        Ok(next) => next,
                        Err(e) => {
                            tracing::warn!(error = %e, "accepting a connection on the internal port failed");
                            tokio::time::sleep(Duration::from_millis(50)).await;
                            continue;
                        }
                    },
                    () = accepted.closed() => return,
                };
                let _ = stream.set_nodelay(true);
                let acceptor = tls.acceptor.clone();
                let accepted = accepted.clone();
                tokio::spawn(async move {
                    match tokio::time::timeout(HANDSHAKE_LIMIT, acceptor.accept(stream)).await {
                        Ok(Ok(stream)) => {
                            let _ = accepted.send(Ok(TlsConnection { inner: stream, peer })).await;
                        }
                        Ok(Err(e)) => {
                            tracing::warn!(%peer, reason = %e, "internal port: refused a peer's connection (TLS handshake failed: its certificate must be signed by the configured CA; plaintext is refused)")
                        }
                        Err(_) => {
                            tracing::warn!(%peer, "internal port: refused a peer's connection (no TLS handshake within {HANDSHAKE_LIMIT:?})")
                        }
                    }
                });
            }
        });
        ReceiverStream::new(incoming)
    }
}

fn read_certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, MutualTlsError> {
    let error = |source| MutualTlsError::Certificates { path: path.to_path_buf(), source };
    let certificates = CertificateDer::pem_file_iter(path).map_err(error)?.collect::<Result<Vec<_>, _>>().map_err(error)?;
    if certificates.is_empty() {
        return Err(MutualTlsError::NoCertificate(path.to_path_buf()));
    }
    Ok(certificates)
}

/// Takes a server's certificate when its chain leads to the CA, whatever names it holds (see
/// the module documentation); webpki checks the chain before the name, so a name mismatch is
/// the only error passed over.
#[derive(Debug)]
struct SignedByCa(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for SignedByCa {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self.0.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
            Err(rustls::Error::InvalidCertificate(CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. })) => {
                Ok(ServerCertVerified::assertion())
            }
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// A connection that could not be made; it reads as hyper's own (see [`Connector`]).
#[derive(Debug)]
pub struct DialFailed(String);

impl std::fmt::Display for DialFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "tcp connect error: {}", self.0)
    }
}

impl std::error::Error for DialFailed {}

/// Dials a peer and completes the TLS handshake, for tonic's channels.
#[derive(Clone)]
struct TlsDial(Arc<MutualTls>);

impl Service<Uri> for TlsDial {
    type Response = TokioIo<tokio_rustls::client::TlsStream<TcpStream>>;
    type Error = DialFailed;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, DialFailed>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), DialFailed>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let connector = self.0.connector.clone();
        Box::pin(async move {
            let host = uri.host().unwrap_or_default().trim_start_matches('[').trim_end_matches(']').to_string();
            let port = uri.port_u16().unwrap_or(80);
            let name = match host.parse::<IpAddr>() {
                Ok(ip) => ServerName::IpAddress(ip.into()),
                Err(_) => ServerName::try_from(host.clone()).map_err(|e| DialFailed(format!("{host}: {e}")))?,
            };
            let dial = async {
                let stream = TcpStream::connect((host.as_str(), port)).await.map_err(|e| DialFailed(e.to_string()))?;
                let _ = stream.set_nodelay(true);
                connector.connect(name, stream).await.map_err(|e| {
                    tracing::warn!(peer = %format!("{host}:{port}"), reason = %e, "internal port: a peer refused this broker's connection, or its certificate was refused (TLS handshake failed)");
                    DialFailed(format!("TLS handshake with {host}:{port} failed: {e}"))
                })
            };
            match tokio::time::timeout(DIAL_LIMIT, dial).await {
                Ok(Ok(stream)) => Ok(TokioIo::new(stream)),
                Ok(Err(e)) => Err(e),
                Err(_) => Err(DialFailed(format!("{host}:{port}: timed out"))),
            }
        })
    }
}

/// A peer's connection to the internal port, past its TLS handshake.
pub struct TlsConnection {
    inner: tokio_rustls::server::TlsStream<TcpStream>,
    peer: SocketAddr,
}

impl Connected for TlsConnection {
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> TcpConnectInfo {
        self.inner.get_ref().0.connect_info()
    }
}

impl TlsConnection {
    /// The peer's address.
    pub fn peer(&self) -> SocketAddr {
        self.peer
    }
}

impl AsyncRead for TlsConnection {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for TlsConnection {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(mut self: Pin<&mut Self>, cx: &mut Context<'_>, bufs: &[io::IoSlice<'_>]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}
