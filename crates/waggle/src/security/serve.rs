//! Serving an axum router on a listener, over TLS when an acceptor is given.

use std::pin::pin;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use super::tls::HANDSHAKE_LIMIT;

/// How long a client may take to send a request's head (request line and headers) on HTTP/1.1:
/// one that sends it a byte at a time (slowloris) is closed then, with 408 if it sent anything.
pub const HEADER_READ_LIMIT: Duration = Duration::from_secs(10);

/// Serves `router` on `listener` until `stop` resolves, then lets the requests in progress end.
/// With `tls`, every connection is a TLS one (a plaintext client's handshake fails and it is
/// closed), speaking HTTP/2 or HTTP/1.1 as ALPN chose; without, HTTP/1.1 or HTTP/2 (prior
/// knowledge). Either way a request's head must come within [`HEADER_READ_LIMIT`].
pub async fn http(
    listener: TcpListener,
    router: Router,
    tls: Option<TlsAcceptor>,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) {
    let graceful = GracefulShutdown::new();
    let mut stop = pin!(stop);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (tcp, _) = match accepted {
                    Ok(c) => c,
                    Err(e) => {
                        // out of file descriptors, say: wait for some to close instead of spinning
                        tracing::warn!(error = %e, "accepting an HTTP connection failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let (tls, router, watcher) = (tls.clone(), router.clone(), graceful.watcher());
                tokio::spawn(async move {
                    let Some(tls) = tls else {
                        return serve_connection(tcp, router, watcher).await;
                    };
                    match tokio::time::timeout(HANDSHAKE_LIMIT, tls.accept(tcp)).await {
                        Ok(Ok(stream)) => serve_connection(stream, router, watcher).await,
                        Ok(Err(e)) => tracing::debug!(error = %e, "TLS handshake failed"),
                        Err(_) => tracing::debug!("TLS handshake timed out"),
                    }
                });
            }
            () = &mut stop => break,
        }
    }
    drop(listener);
    graceful.shutdown().await;
}

/// Serves one connection (HTTP/1.1 or HTTP/2) until the client closes it or the shutdown ends it.
async fn serve_connection<S>(stream: S, router: Router, watcher: Watcher)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder.http1().timer(TokioTimer::new()).header_read_timeout(HEADER_READ_LIMIT);
    builder.http2().timer(TokioTimer::new());
    let connection = builder.serve_connection_with_upgrades(TokioIo::new(stream), TowerToHyperService::new(router));
    if let Err(e) = watcher.watch(connection.into_owned()).await {
        tracing::debug!(error = %e, "HTTP connection ended");
    }
}
