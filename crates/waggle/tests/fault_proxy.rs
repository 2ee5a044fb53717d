//! The network fault proxy the cluster tests use (tests/common/fault_proxy.rs) does what they
//! rely on: forwards both ways, silences a cut link without an error on either end, and after a
//! heal closes the silenced connections and forwards new ones.

mod common;

use std::time::Duration;

use common::fault_proxy::FaultProxy;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::timeout;

/// An echo server on a free loopback port.
async fn echo_server() -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buffer = [0u8; 1024];
                while let Ok(n) = socket.read(&mut buffer).await {
                    if n == 0 || socket.write_all(&buffer[..n]).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    addr
}

async fn round_trip(stream: &mut TcpStream, text: &[u8]) -> std::io::Result<Vec<u8>> {
    stream.write_all(text).await?;
    let mut answer = vec![0u8; text.len()];
    stream.read_exact(&mut answer).await?;
    Ok(answer)
}

#[tokio::test]
async fn cut_silences_the_link_and_heal_restores_it() {
    let proxy = FaultProxy::start(echo_server().await).await;
    let mut open = TcpStream::connect(proxy.addr()).await.expect("connect");
    assert_eq!(round_trip(&mut open, b"hello").await.expect("echo"), b"hello");
    assert_eq!(proxy.forwarded_bytes(), 10);

    proxy.cut();
    // the open connection gets silence, not an error
    let silent = timeout(Duration::from_millis(300), round_trip(&mut open, b"lost")).await;
    assert!(silent.is_err(), "a cut link answered: {silent:?}");
    // a new connection is accepted but silent too
    let mut during = TcpStream::connect(proxy.addr()).await.expect("connect while cut");
    assert!(timeout(Duration::from_millis(300), round_trip(&mut during, b"x")).await.is_err(), "a new connection passed a cut link");

    proxy.heal();
    // the silenced connections are closed (a read ends, at once, with end of stream or a reset),
    // and what was sent while cut never arrives
    let mut rest = Vec::new();
    let _ended = timeout(Duration::from_secs(2), open.read_to_end(&mut rest)).await.expect("the connection closed after the heal");
    assert!(rest.is_empty(), "bytes sent while cut arrived: {rest:?}");
    // and new connections pass again
    let mut after = TcpStream::connect(proxy.addr()).await.expect("connect after heal");
    assert_eq!(round_trip(&mut after, b"again").await.expect("echo after heal"), b"again");
}
