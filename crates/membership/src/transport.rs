//! A chitchat transport handing chitchat a UDP socket bound beforehand, so that the node knows
//! its port (port 0 picks a free one) before it announces its address.

use std::net::SocketAddr;
use std::sync::Mutex;

use async_trait::async_trait;
use chitchat::transport::{Socket, Transport, UdpSocket};

/// Hands out its socket once. (`anyhow` appears here only because chitchat's trait names it.)
pub(crate) struct BoundSocket {
    socket: Mutex<Option<UdpSocket>>,
}

impl BoundSocket {
    /// Binds `addr`, returning the transport and the bound address.
    pub(crate) async fn bind(addr: SocketAddr) -> anyhow::Result<(Self, SocketAddr)> {
        let socket = UdpSocket::open(addr).await?;
        let bound = socket.local_addr()?;
        Ok((BoundSocket { socket: Mutex::new(Some(socket)) }, bound))
    }
}

#[async_trait]
impl Transport for BoundSocket {
    async fn open(&self, _listen_addr: SocketAddr) -> anyhow::Result<Box<dyn Socket>> {
        let socket = self.socket.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).take();
        let socket = socket.ok_or_else(|| anyhow::anyhow!("the gossip socket was handed out already"))?;
        Ok(Box::new(socket))
    }
}
