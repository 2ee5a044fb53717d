//! A TCP proxy on loopback that a test controls, to inject network faults between brokers: the
//! test points one broker's contact point for another at the proxy, then cuts and heals the link.
//!
//! While cut, the link behaves as a network partition, not as a refused connection: bytes on open
//! connections are read and dropped (neither end sees an error, only silence) and new connections
//! are accepted and left silent. Healing closes the silenced connections (their streams lost
//! bytes, so they cannot go on) and forwards new connections again.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// One proxied link: connections to [`FaultProxy::addr`] are forwarded to the target.
pub struct FaultProxy {
    addr: SocketAddr,
    /// `(cut, epoch)`: the epoch grows at every cut and heal, so connections of an earlier one
    /// know to stop.
    state: watch::Sender<(bool, u64)>,
    forwarded: Arc<AtomicU64>,
    accept: tokio::task::JoinHandle<()>,
}

impl FaultProxy {
    /// Listens on a free loopback port and forwards every connection to `target`.
    pub async fn start(target: SocketAddr) -> FaultProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind the proxy");
        let addr = listener.local_addr().expect("proxy address");
        let (state, _) = watch::channel((false, 0u64));
        let forwarded = Arc::new(AtomicU64::new(0));
        let accept = {
            let state = state.clone();
            let forwarded = forwarded.clone();
            tokio::spawn(async move {
                while let Ok((inbound, _)) = listener.accept().await {
                    let _ = inbound.set_nodelay(true);
                    tokio::spawn(serve(inbound, target, state.subscribe(), forwarded.clone()));
                }
            })
        };
        FaultProxy { addr, state, forwarded, accept }
    }

    /// Where to connect instead of the target.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Partitions the link: from now on nothing passes, in either direction.
    pub fn cut(&self) {
        self.state.send_modify(|(cut, epoch)| {
            *cut = true;
            *epoch += 1;
        });
    }

    /// Ends the partition: silenced connections are closed, new ones forwarded.
    pub fn heal(&self) {
        self.state.send_modify(|(cut, epoch)| {
            *cut = false;
            *epoch += 1;
        });
    }

    /// Bytes forwarded so far, both directions (to check that traffic does pass the proxy).
    pub fn forwarded_bytes(&self) -> u64 {
        self.forwarded.load(Ordering::Relaxed)
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.accept.abort();
        // connections see the epoch change and close
        self.heal();
    }
}

/// Serves one accepted connection until it closes or a cut or heal changes the epoch.
async fn serve(inbound: TcpStream, target: SocketAddr, mut state: watch::Receiver<(bool, u64)>, forwarded: Arc<AtomicU64>) {
    let (cut, epoch) = *state.borrow_and_update();
    if cut {
        // a partition: accept, say nothing, drop what arrives, until healed
        silence(inbound, state, epoch).await;
        return;
    }
    let Ok(outbound) = TcpStream::connect(target).await else {
        return;
    };
    let _ = outbound.set_nodelay(true);
    let (mut in_read, mut in_write) = inbound.into_split();
    let (mut out_read, mut out_write) = outbound.into_split();
    let up = pump(&mut in_read, &mut out_write, &forwarded);
    let down = pump(&mut out_read, &mut in_write, &forwarded);
    tokio::select! {
        _ = async { tokio::join!(up, down) } => {}
        _ = state.changed() => {
            // cut: keep both sockets open and silent until healed; heal or drop: close
            let (cut, epoch) = *state.borrow_and_update();
            if cut {
                let inbound = in_read.reunite(in_write).expect("halves of one stream");
                let outbound = out_read.reunite(out_write).expect("halves of one stream");
                tokio::join!(silence(inbound, state.clone(), epoch), silence(outbound, state, epoch));
            }
        }
    }
}

/// Copies bytes until end of stream or an error, counting them.
async fn pump(from: &mut tokio::net::tcp::OwnedReadHalf, to: &mut tokio::net::tcp::OwnedWriteHalf, forwarded: &AtomicU64) {
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        match from.read(&mut buffer).await {
            Ok(0) | Err(_) => {
                let _ = to.shutdown().await;
                return;
            }
            Ok(n) => {
                if to.write_all(&buffer[..n]).await.is_err() {
                    return;
                }
                forwarded.fetch_add(n as u64, Ordering::Relaxed);
            }
        }
    }
}

/// Reads and drops everything on `stream` until the epoch moves past `epoch`, then closes it.
async fn silence(mut stream: TcpStream, mut state: watch::Receiver<(bool, u64)>, epoch: u64) {
    let mut sink = vec![0u8; 64 * 1024];
    loop {
        tokio::select! {
            read = stream.read(&mut sink) => {
                if matches!(read, Ok(0) | Err(_)) {
                    return;
                }
            }
            changed = state.changed() => {
                if changed.is_err() || state.borrow_and_update().1 != epoch {
                    return;
                }
            }
        }
    }
}
