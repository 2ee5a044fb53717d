//! Raft messages between nodes over the network (the brokers' internal port): one gRPC
//! bidirectional stream (tonic, HTTP/2) from each node to each peer, carrying batches of all
//! its groups' messages in raft-proto's protobuf encoding, reconnecting when it breaks.
//!
//! Best effort, as [`Transport`] allows: a message is dropped when its peer's queue is full or
//! the peer unreachable (what queued while it was is dropped on reconnecting: Raft resends what
//! still matters). Sending never blocks the group's thread. Received messages go to the
//! group's inbox (a bounded channel; full, the message is dropped); the group's owner hands
//! them to [`crate::RaftGroup::step`]. Snapshot packets ([`crate::snapshot`]) travel on the
//! same streams, chunks of up to a megabyte each, at most a few per transfer unacknowledged,
//! and arrive in the group's snapshot inbox ([`RaftNetwork::register_with_snapshots`]), for
//! [`crate::RaftGroup::receive_snapshot`].
//!
//! A connection that stops delivering without breaking (a peer's machine gone, a path that drops
//! everything) is found by HTTP/2 keep-alive pings, both ways, within [`KEEPALIVE`] +
//! [`KEEPALIVE_TIMEOUT`], and the stream reconnects; without them such a stream would stay
//! open, and the peer cut off, for as long as TCP keeps retransmitting (many minutes).
//!
//! The network runs over TCP ([`RaftNetwork::bind`]), over mutual TLS
//! ([`RaftNetwork::bind_secured`]), or over any byte streams a caller accepts
//! and dials ([`RaftNetwork::serve_incoming`] with a [`Connector`]): the deterministic simulation
//! in `crates/broker/tests` runs this very code over a simulated network that way.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use prost011::Message as _;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio_stream::wrappers::{ReceiverStream, TcpListenerStream};
use tokio_stream::StreamExt;
use tonic::service::Routes;
use tonic::transport::server::Connected;
use tonic::transport::{Channel, Endpoint, Server};
use tonic::{Request, Response, Status, Streaming};

use crate::snapshot::{AckKind, PacketBody, SnapshotFile, SnapshotPacket};
use crate::tls::MutualTls;
use crate::{Message, Transport};

mod proto {
    tonic::include_proto!("waggle_replication");
}

use proto::raft_transport_client::RaftTransportClient;
use proto::raft_transport_server::{RaftTransport, RaftTransportServer};
use proto::{Envelope, RaftBatch};

/// Messages queued for one peer before new ones are dropped.
const PEER_QUEUE: usize = 4096;
/// Messages queued for one group before new ones are dropped.
const INBOX: usize = 4096;
/// Snapshot packets queued for one group before new ones are dropped (the leader resends).
const SNAPSHOT_INBOX: usize = 64;
/// Messages per batch on the wire at most.
const BATCH: usize = 256;
/// A batch takes no more messages once it holds this many bytes (one message always fits).
const BATCH_BYTES: usize = 8 << 20;
/// The largest batch a node takes: a batch of [`BATCH_BYTES`] plus one message of entries up to
/// Raft's `max_size_per_msg` (1 MiB), or a single entry larger than that (Raft sends at least
/// one entry per append, whatever its size). tonic's default, 4 MiB, would refuse a batch of
/// a few appends, break the stream, and never let the follower catch up.
const MAX_BATCH_BYTES: usize = 256 << 20;
/// Batches written to a stream and not yet taken by HTTP/2 (flow control) before the sender waits.
const IN_FLIGHT_BATCHES: usize = 16;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
const MIN_BACKOFF: Duration = Duration::from_millis(20);
const MAX_BACKOFF: Duration = Duration::from_secs(1);
/// Idle time before a side pings the other over a connection.
pub const KEEPALIVE: Duration = Duration::from_secs(1);
/// How long a ping may go unanswered before the connection is taken for dead.
pub const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(2);

/// Makes the channel for an endpoint (connecting lazily, on its first call) over a network other
/// than TCP (a simulation's), within a time limit of its own. Its connection failures, time-outs
/// included, must read as hyper's own ("tcp connect error: ..."): the broker's forwarder tells a
/// command that was certainly not sent by that.
pub type Connector = Arc<dyn Fn(Endpoint) -> Channel + Send + Sync>;

/// A group's inbox for Raft messages, and for snapshot packets if it takes them.
struct Inbox {
    messages: SyncSender<Message>,
    snapshots: Option<SyncSender<SnapshotPacket>>,
}

type Inboxes = Arc<Mutex<HashMap<u64, Inbox>>>;
type Peers = Arc<RwLock<HashMap<u64, mpsc::Sender<Envelope>>>>;

/// This node's end of the Raft network: the server on its internal port and a stream to each
/// peer. Dropping it closes both (its groups' messages stop; peers see it gone).
pub struct RaftNetwork {
    id: u64,
    local_addr: SocketAddr,
    runtime: tokio::runtime::Handle,
    inboxes: Inboxes,
    peers: Peers,
    /// How streams to peers connect (TCP when `None`).
    connector: Option<Connector>,
    shutdown: watch::Sender<bool>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

impl RaftNetwork {
    /// Listens on `addr` (port 0 picks one) for node `id`'s peers, on the current tokio runtime.
    pub async fn bind(id: u64, addr: SocketAddr) -> std::io::Result<Self> {
        Self::bind_with(id, addr, |routes| routes).await
    }

    /// As [`Self::bind`], serving also the gRPC services `more` adds to the server's routes
    /// (other broker-to-broker services share the internal port, as in Zeebe).
    pub async fn bind_with(id: u64, addr: SocketAddr, more: impl FnOnce(Routes) -> Routes + Send + 'static) -> std::io::Result<Self> {
        Self::bind_secured(id, addr, None, more).await
    }

    /// As [`Self::bind_with`]; with `tls`, every connection, accepted or made, is mutual TLS
    /// ([`crate::tls`]): a peer without a certificate of the CA, or speaking plaintext, is refused.
    pub async fn bind_secured(
        id: u64,
        addr: SocketAddr,
        tls: Option<Arc<MutualTls>>,
        more: impl FnOnce(Routes) -> Routes + Send + 'static,
    ) -> std::io::Result<Self> {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let local_addr = listener.local_addr()?;
        if let Some(tls) = tls {
            return Ok(Self::serve_incoming(id, local_addr, tls.incoming(listener), Some(tls.connector()), more));
        }
        let incoming = TcpListenerStream::new(listener).map(|stream| {
            let stream = stream?;
            stream.set_nodelay(true)?;
            Ok::<_, std::io::Error>(stream)
        });
        Ok(Self::serve_incoming(id, local_addr, incoming, None, more))
    }

    /// As [`Self::bind_with`], over connections the caller accepts (`incoming`, the node's
    /// address being `local_addr`) and, with a `connector`, makes to peers (TCP without one).
    pub fn serve_incoming<IO, IE>(
        id: u64,
        local_addr: SocketAddr,
        incoming: impl tokio_stream::Stream<Item = Result<IO, IE>> + Send + 'static,
        connector: Option<Connector>,
        more: impl FnOnce(Routes) -> Routes + Send + 'static,
    ) -> Self
    where
        IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Connected + Unpin + Send + 'static,
        IE: Into<Box<dyn std::error::Error + Send + Sync>> + Send,
    {
        let inboxes = Inboxes::default();
        let (shutdown, stopped) = watch::channel(false);
        let service = Inbound { inboxes: inboxes.clone(), stopped: stopped.clone() };
        let mut stop = stopped;
        let server = tokio::spawn(async move {
            let signal = async move { until_stopped(&mut stop).await };
            let service = RaftTransportServer::new(service).max_decoding_message_size(MAX_BATCH_BYTES);
            let routes = more(Routes::new(service));
            let served = Server::builder()
                .http2_keepalive_interval(Some(KEEPALIVE))
                .http2_keepalive_timeout(Some(KEEPALIVE_TIMEOUT))
                .add_routes(routes)
                .serve_with_incoming_shutdown(incoming, signal)
                .await;
            if let Err(e) = served {
                tracing::warn!(node = id, error = %e, "raft transport server failed");
            }
        });
        Self {
            id,
            local_addr,
            runtime: tokio::runtime::Handle::current(),
            inboxes,
            peers: Peers::default(),
            connector,
            shutdown,
            tasks: Mutex::new(vec![server]),
        }
    }

    /// The address peers reach this node at.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Starts streaming to peer `id` at `addr`, connecting (and reconnecting) in the background.
    /// May be called at any time (a peer learned at run time); for a peer known already it
    /// streams to `addr` instead: the old stream's queue is dropped, and its stream ends.
    pub fn add_peer(&self, id: u64, addr: SocketAddr) {
        let (queue, queued) = mpsc::channel(PEER_QUEUE);
        self.peers.write().expect("peers lock").insert(id, queue);
        let task = self.runtime.spawn(send_to_peer(self.id, id, addr, self.connector.clone(), queued, self.shutdown.subscribe()));
        let mut tasks = self.tasks.lock().expect("tasks lock");
        tasks.retain(|t| !t.is_finished());
        tasks.push(task);
    }

    /// The transport for `group`'s messages, and the inbox its peers' messages arrive in.
    /// Snapshot packets for the group are dropped: a group that may fall behind a leader's
    /// compacted log is registered with [`Self::register_with_snapshots`].
    pub fn register(&self, group: u64) -> (NetTransport, Receiver<Message>) {
        let (messages, received) = std::sync::mpsc::sync_channel(INBOX);
        self.inboxes.lock().expect("inboxes lock").insert(group, Inbox { messages, snapshots: None });
        (NetTransport { group, peers: self.peers.clone() }, received)
    }

    /// As [`Self::register`], with a second inbox for the group's snapshot packets (hand them to
    /// [`crate::RaftGroup::receive_snapshot`]).
    pub fn register_with_snapshots(&self, group: u64) -> (NetTransport, Receiver<Message>, Receiver<SnapshotPacket>) {
        let (messages, received) = std::sync::mpsc::sync_channel(INBOX);
        let (snapshots, packets) = std::sync::mpsc::sync_channel(SNAPSHOT_INBOX);
        self.inboxes.lock().expect("inboxes lock").insert(group, Inbox { messages, snapshots: Some(snapshots) });
        (NetTransport { group, peers: self.peers.clone() }, received, packets)
    }
}

impl Drop for RaftNetwork {
    fn drop(&mut self) {
        let _ = self.shutdown.send(true);
        for task in self.tasks.lock().expect("tasks lock").drain(..) {
            task.abort();
        }
    }
}

/// One group's [`Transport`] over the node's streams (a clone sends for the same group: a
/// replica reopened after a failure takes one).
#[derive(Clone)]
pub struct NetTransport {
    group: u64,
    peers: Peers,
}

impl Transport for NetTransport {
    fn send(&mut self, messages: Vec<Message>) {
        let peers = self.peers.read().expect("peers lock");
        for m in messages {
            let Some(queue) = peers.get(&m.to) else {
                tracing::debug!(group = self.group, to = m.to, "raft message for an unknown peer dropped");
                continue;
            };
            let envelope = Envelope { group: self.group, message: m.encode_to_vec(), snapshot: None };
            // a closed queue: the network is shutting down
            if let Err(mpsc::error::TrySendError::Full(_)) = queue.try_send(envelope) {
                tracing::debug!(group = self.group, to = m.to, "raft message dropped: the peer's queue is full");
            }
        }
    }

    fn send_snapshot(&mut self, packets: Vec<SnapshotPacket>) {
        let peers = self.peers.read().expect("peers lock");
        for p in packets {
            let Some(queue) = peers.get(&p.to) else {
                tracing::debug!(group = self.group, to = p.to, "snapshot packet for an unknown peer dropped");
                continue;
            };
            let to = p.to;
            let envelope = Envelope { group: self.group, message: Vec::new(), snapshot: Some(to_wire(p)) };
            if let Err(mpsc::error::TrySendError::Full(_)) = queue.try_send(envelope) {
                tracing::debug!(group = self.group, to, "snapshot packet dropped: the peer's queue is full");
            }
        }
    }
}

fn to_wire(p: SnapshotPacket) -> proto::SnapshotPacket {
    use proto::snapshot_packet::Body;
    let body = match p.body {
        PacketBody::Offer { files, message } => Body::Offer(proto::Offer {
            files: files.into_iter().map(|f| proto::SnapshotFile { name: f.name, size: f.size }).collect(),
            message: message.encode_to_vec(),
        }),
        PacketBody::Chunk { position, data, crc } => Body::Chunk(proto::Chunk { position, data, crc }),
        PacketBody::Ack { next, kind } => {
            let kind = match kind {
                AckKind::Progress => 0,
                AckKind::Refused => 1,
                AckKind::Unknown => 2,
                AckKind::Done => 3,
            };
            Body::Ack(proto::Ack { next, kind })
        }
    };
    proto::SnapshotPacket { from: p.from, to: p.to, index: p.index, term: p.term, body: Some(body) }
}

fn from_wire(p: proto::SnapshotPacket) -> Option<SnapshotPacket> {
    use proto::snapshot_packet::Body;
    let body = match p.body? {
        Body::Offer(o) => PacketBody::Offer {
            files: o.files.into_iter().map(|f| SnapshotFile { name: f.name, size: f.size }).collect(),
            message: Box::new(Message::decode(o.message.as_slice()).ok()?),
        },
        Body::Chunk(c) => PacketBody::Chunk { position: c.position, data: c.data, crc: c.crc },
        Body::Ack(a) => {
            let kind = match a.kind {
                0 => AckKind::Progress,
                1 => AckKind::Refused,
                2 => AckKind::Unknown,
                3 => AckKind::Done,
                _ => return None,
            };
            PacketBody::Ack { next: a.next, kind }
        }
    };
    Some(SnapshotPacket { from: p.from, to: p.to, index: p.index, term: p.term, body })
}

/// Keeps a stream to `peer` open while the network lives, with exponential back-off between
/// attempts.
async fn send_to_peer(
    node: u64,
    peer: u64,
    addr: SocketAddr,
    connector: Option<Connector>,
    mut queue: mpsc::Receiver<Envelope>,
    mut stopped: watch::Receiver<bool>,
) {
    let mut backoff = MIN_BACKOFF;
    loop {
        match stream_to(addr, connector.as_ref(), &mut queue, &mut stopped, &mut backoff).await {
            Ok(()) => return,
            Err(e) => tracing::debug!(node, peer, %addr, error = %e, "raft stream to peer broke; reconnecting"),
        }
        // stale by the time the peer is back: Raft resends what still matters
        loop {
            match queue.try_recv() {
                Ok(_) => {}
                // replaced (the peer moved) or the network gone: this stream is done
                Err(mpsc::error::TryRecvError::Disconnected) => return,
                Err(mpsc::error::TryRecvError::Empty) => break,
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(backoff) => {}
            _ = until_stopped(&mut stopped) => return,
        }
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

/// Connects to `addr` and writes the queue's messages in batches until the stream breaks
/// (`Err`) or the network stops (`Ok`).
async fn stream_to(
    addr: SocketAddr,
    connector: Option<&Connector>,
    queue: &mut mpsc::Receiver<Envelope>,
    stopped: &mut watch::Receiver<bool>,
    backoff: &mut Duration,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let endpoint = Endpoint::from_shared(format!("http://{addr}"))?
        .tcp_nodelay(true)
        .http2_keep_alive_interval(KEEPALIVE)
        .keep_alive_timeout(KEEPALIVE_TIMEOUT)
        .keep_alive_while_idle(true);
    let channel = match connector {
        None => endpoint.connect_timeout(CONNECT_TIMEOUT).connect().await?,
        Some(connect) => connect(endpoint),
    };
    let (batches, outgoing) = mpsc::channel::<RaftBatch>(IN_FLIGHT_BATCHES);
    let mut replies = RaftTransportClient::new(channel).stream(ReceiverStream::new(outgoing)).await?.into_inner();
    *backoff = MIN_BACKOFF;
    loop {
        tokio::select! {
            first = queue.recv() => {
                let Some(first) = first else { return Ok(()) };
                let mut bytes = envelope_bytes(&first);
                let mut messages = vec![first];
                while messages.len() < BATCH && bytes < BATCH_BYTES {
                    match queue.try_recv() {
                        Ok(e) => {
                            bytes += envelope_bytes(&e);
                            messages.push(e);
                        }
                        Err(_) => break,
                    }
                }
                if batches.send(RaftBatch { messages }).await.is_err() {
                    return Err("the stream closed".into());
                }
            }
            reply = replies.message() => match reply {
                Ok(Some(_)) => {}
                Ok(None) => return Err("the peer ended the stream".into()),
                Err(status) => return Err(status.into()),
            },
            _ = until_stopped(stopped) => return Ok(()),
        }
    }
}

/// An envelope's payload size, roughly (a chunk's data or a message's encoding).
fn envelope_bytes(e: &Envelope) -> usize {
    let chunk = match e.snapshot.as_ref().and_then(|s| s.body.as_ref()) {
        Some(proto::snapshot_packet::Body::Chunk(c)) => c.data.len(),
        _ => 0,
    };
    e.message.len() + chunk
}

/// The server side: hands each received message to its group's inbox.
struct Inbound {
    inboxes: Inboxes,
    stopped: watch::Receiver<bool>,
}

#[tonic::async_trait]
impl RaftTransport for Inbound {
    type StreamStream = ReceiverStream<Result<RaftBatch, Status>>;

    async fn stream(&self, request: Request<Streaming<RaftBatch>>) -> Result<Response<Self::StreamStream>, Status> {
        let mut batches = request.into_inner();
        // the response stream stays open (and empty) while this task runs
        let (open, response) = mpsc::channel(1);
        let inboxes = self.inboxes.clone();
        let mut stopped = self.stopped.clone();
        tokio::spawn(async move {
            let _open = open;
            loop {
                let batch = tokio::select! {
                    batch = batches.message() => batch,
                    _ = until_stopped(&mut stopped) => return,
                };
                match batch {
                    Ok(Some(batch)) => deliver(&inboxes, batch),
                    Ok(None) => return,
                    Err(status) => {
                        tracing::debug!(error = %status, "raft stream from a peer broke");
                        return;
                    }
                }
            }
        });
        Ok(Response::new(ReceiverStream::new(response)))
    }
}

/// Resolves once the network stops (or is gone).
async fn until_stopped(stopped: &mut watch::Receiver<bool>) {
    let _ = stopped.wait_for(|s| *s).await;
}

fn deliver(inboxes: &Inboxes, batch: RaftBatch) {
    let inboxes = inboxes.lock().expect("inboxes lock");
    for envelope in batch.messages {
        let group = envelope.group;
        let Some(inbox) = inboxes.get(&group) else {
            tracing::debug!(group, "raft message for a group this node does not have dropped");
            continue;
        };
        if let Some(packet) = envelope.snapshot {
            let Some(snapshots) = &inbox.snapshots else {
                tracing::debug!(group, "snapshot packet for a group that takes none dropped");
                continue;
            };
            match from_wire(packet) {
                Some(packet) => match snapshots.try_send(packet) {
                    Ok(()) | Err(TrySendError::Disconnected(_)) => {}
                    Err(TrySendError::Full(_)) => tracing::debug!(group, "snapshot packet dropped: the group's inbox is full"),
                },
                None => tracing::warn!(group, "undecodable snapshot packet dropped"),
            }
            continue;
        }
        match Message::decode(envelope.message.as_slice()) {
            Ok(message) => match inbox.messages.try_send(message) {
                Ok(()) | Err(TrySendError::Disconnected(_)) => {}
                Err(TrySendError::Full(_)) => tracing::debug!(group, "raft message dropped: the group's inbox is full"),
            },
            Err(e) => tracing::warn!(group, error = %e, "undecodable raft message dropped"),
        }
    }
}
