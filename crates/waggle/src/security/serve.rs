//! Serving an axum router on a listener, over TLS when an acceptor is given.

use std::pin::pin;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use super::tls::HANDSHAKE_LIMIT;

/// Serves `router` on `listener` until `stop` resolves, then lets the requests in progress end.
/// With `tls`, every connection is a TLS one (a plaintext client's handshake fails and it is
/// closed), speaking HTTP/2 or HTTP/1.1 as ALPN chose.
pub async fn http(
    listener: TcpListener,
    router: Router,
    tls: Option<TlsAcceptor>,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) {
    let Some(tls) = tls else {
        let served = axum::serve(listener, router.into_make_service()).with_graceful_shutdown(stop).await;
        if let Err(e) = served {
            tracing::warn!(error = %e, "an HTTP server stopped");
        }
        return;
    };
    let graceful = GracefulShutdown::new();
    let mut stop = pin!(stop);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (tcp, _) = match accepted {
                    Ok(c) => c,
                    Err(e) => {
                        tracing::warn!(error = %e, "accepting an HTTPS connection failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let (tls, router, watcher) = (tls.clone(), router.clone(), graceful.watcher());
                tokio::spawn(async move {
                    let stream = match tokio::time::timeout(HANDSHAKE_LIMIT, tls.accept(tcp)).await {
                        Ok(Ok(stream)) => stream,
                        Ok(Err(e)) => return tracing::debug!(error = %e, "TLS handshake failed"),
                        Err(_) => return tracing::debug!("TLS handshake timed out"),
                    };
                    let builder = auto::Builder::new(TokioExecutor::new());
                    let connection = builder.serve_connection_with_upgrades(TokioIo::new(stream), TowerToHyperService::new(router));
                    if let Err(e) = watcher.watch(connection.into_owned()).await {
                        tracing::debug!(error = %e, "HTTPS connection ended");
                    }
                });
            }
            () = &mut stop => break,
        }
    }
    drop(listener);
    graceful.shutdown().await;
}
