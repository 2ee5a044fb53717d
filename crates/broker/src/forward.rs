//! Commands for a partition another broker leads: forwarded to that broker and submitted there.
//!
//! A broker that takes a client's command for a partition it does not lead sends it, over the
//! `CommandApi` gRPC service, to the broker that leads the partition, which submits it to its own
//! partition and answers with the committed record (as Zeebe's gateway sends each command to the
//! partition leader's command API). The command and the record travel in postcard, the broker's
//! own binary form of its types; the receiving broker answers only what it would answer a local
//! client (C4 holds there). A refusal (not the leader, overloaded, no such partition) comes back
//! as the [`BrokerError`] the receiver would have returned, so the caller can retry elsewhere.
//! The commands for one broker travel together over one `SubmitBatches` stream, as many in a
//! message as wait when it is written (one `Submit` call each cost an HTTP/2 stream, its headers
//! and trailers, both ways); a broker without it (an older version) gets one `Submit` each.
//!
//! [`route`] is the routing decision itself: where a command goes, and when it may be sent again
//! (only when it was certainly not taken). [`crate::Broker`] routes its clients' commands with it,
//! and so does the deterministic simulation in `tests/`, which runs this module over a simulated
//! network (a [`Connector`] given to [`Forwarder::with_connector`]).

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, oneshot};
use tonic::transport::{Channel, Endpoint};
use waggle_engine::{Command, Distribution};
use waggle_protocol::{Intent, PartitionId, Record, RecordValue};
pub use waggle_replication::net::Connector;
use waggle_replication::net::{KEEPALIVE, KEEPALIVE_TIMEOUT};

use crate::cluster::AddressBook;
use crate::{BrokerError, ClusterSpec};

pub(crate) mod pb {
    tonic::include_proto!("waggle.command_api");
}

pub use pb::command_api_server::CommandApiServer;
use pb::refusal::Kind;

/// A forwarded command's largest encoded size: a client request is at most the gateway's message
/// limit (4 MB by default), and its record form is not much larger.
const MAX_MESSAGE_BYTES: usize = 64 << 20;

/// How long a connection attempt to another broker may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// What this broker does with a forwarded command: submit it to its own partition.
pub trait LocalSubmit: Send + Sync + 'static {
    /// As [`crate::Broker::submit`]: the record that answers the command, once committed.
    fn submit_local(&self, partition: PartitionId, command: Command) -> BoxFuture<'_, Result<Record, BrokerError>>;
    /// As [`crate::Broker::deploy`].
    fn deploy_local(&self, command: Command) -> BoxFuture<'_, Result<Record, BrokerError>>;
    /// As [`crate::Broker::rebalance_here`].
    fn rebalance_local(&self) -> Vec<PartitionId>;
    /// As [`crate::Broker::adopt_topology`]: adopts `topology` (JSON; empty: none) if newer
    /// and answers with this broker's topology and its led partitions' configurations, as JSON.
    /// By default (a receiver without partitions) it knows no topology.
    fn topology_local(&self, topology: String) -> Result<(String, String), String> {
        let _ = topology;
        Err("this receiver has no cluster topology".into())
    }
    /// As [`crate::Broker::request_change`] on the coordinator: plans the change `request`
    /// (JSON) and answers the outcome (JSON). By default it has no topology to change.
    fn change_local(&self, request: String) -> Result<String, String> {
        let _ = request;
        Err("this receiver has no cluster topology".into())
    }
}

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A command in its forwarded form (the request id stays with the broker that has the client).
#[derive(Serialize, Deserialize)]
struct WireCommand {
    key: i64,
    intent: Intent,
    value: RecordValue,
    /// `(source partition, distribution key, acknowledged below)` of a command another
    /// partition sent.
    distribution: Option<(PartitionId, i64, i64)>,
}

fn encode_command(command: Command) -> Vec<u8> {
    let wire = WireCommand {
        key: command.key,
        intent: command.intent,
        value: command.value,
        distribution: command.distribution.map(|d| (d.source, d.key, d.acknowledged_below)),
    };
    postcard::to_stdvec(&wire).expect("commands encode")
}

fn decode_command(bytes: &[u8]) -> Result<Command, postcard::Error> {
    let wire: WireCommand = postcard::from_bytes(bytes)?;
    let mut command = Command::new(wire.key, wire.intent, wire.value);
    command.distribution = wire.distribution.map(|(source, key, acknowledged_below)| Distribution { source, key, acknowledged_below });
    Ok(command)
}

fn refusal(error: &BrokerError) -> pb::Refusal {
    let kind = match error {
        BrokerError::Overloaded => Kind::Overloaded,
        BrokerError::DiskSpaceLow(_) => Kind::DiskSpaceLow,
        BrokerError::NoSuchPartition(_) => Kind::NoSuchPartition,
        BrokerError::NotLeader(_) => Kind::NotLeader,
        BrokerError::Unavailable(_) | BrokerError::Start { .. } | BrokerError::Cluster(_) | BrokerError::BackupStore(_) => {
            Kind::Unavailable
        }
    };
    pb::Refusal { kind: kind as i32, message: error.to_string() }
}

/// The receiving side: a `CommandApi` service that submits to `local`.
pub fn service(local: Arc<dyn LocalSubmit>) -> CommandApiServer<Receiver> {
    CommandApiServer::new(Receiver { local }).max_decoding_message_size(MAX_MESSAGE_BYTES).max_encoding_message_size(MAX_MESSAGE_BYTES)
}

/// Serves forwarded commands (see [`service`]).
pub struct Receiver {
    local: Arc<dyn LocalSubmit>,
}

impl Receiver {
    /// What `Submit` answers `request`: the answering record once committed, or a refusal.
    async fn answer(local: &dyn LocalSubmit, request: pb::SubmitRequest) -> pb::SubmitResponse {
        let outcome = match (decode_command(&request.command), PartitionId::try_from(request.partition)) {
            (Ok(mut command), Ok(partition)) => {
                if request.tenants_limited {
                    command.authorized_tenants = Some(request.authorized_tenants);
                }
                let answer = if request.deploy { local.deploy_local(command).await } else { local.submit_local(partition, command).await };
                match answer {
                    Ok(record) => pb::submit_response::Outcome::Record(postcard::to_stdvec(&record).expect("records encode")),
                    Err(e) => pb::submit_response::Outcome::Refusal(refusal(&e)),
                }
            }
            (Err(e), _) => pb::submit_response::Outcome::Refusal(pb::Refusal {
                kind: Kind::Malformed as i32,
                message: format!("the forwarded command does not decode: {e}"),
            }),
            (_, Err(_)) => pb::submit_response::Outcome::Refusal(pb::Refusal {
                kind: Kind::NoSuchPartition as i32,
                message: format!("no such partition {}", request.partition),
            }),
        };
        pb::SubmitResponse { outcome: Some(outcome) }
    }

    /// Answers one command of a `SubmitBatches` stream on `answers`, within its sender's wait.
    async fn answer_batched(local: Arc<dyn LocalSubmit>, submit: pb::BatchedSubmit, answers: mpsc::UnboundedSender<pb::BatchedAnswer>) {
        let response = match submit.request {
            Some(request) => {
                let wait = Duration::from_millis(submit.timeout_ms.max(1));
                match tokio::time::timeout(wait, Self::answer(&*local, request)).await {
                    Ok(response) => response,
                    Err(_) => pb::SubmitResponse {
                        outcome: Some(pb::submit_response::Outcome::Refusal(pb::Refusal {
                            kind: Kind::Unavailable as i32,
                            message: "no answer within the sender's deadline".into(),
                        })),
                    },
                }
            }
            None => pb::SubmitResponse {
                outcome: Some(pb::submit_response::Outcome::Refusal(pb::Refusal {
                    kind: Kind::Malformed as i32,
                    message: "a batched command without its request".into(),
                })),
            },
        };
        // (the sender gone: nobody waits for the answer)
        let _ = answers.send(pb::BatchedAnswer { id: submit.id, response: Some(response) });
    }
}

/// The answers of one `SubmitBatches` stream, as many in each message as are ready.
type AnswerStream = Pin<Box<dyn futures_util::Stream<Item = Result<pb::AnswerBatch, tonic::Status>> + Send>>;

#[tonic::async_trait]
impl pb::command_api_server::CommandApi for Receiver {
    async fn submit(&self, request: tonic::Request<pb::SubmitRequest>) -> Result<tonic::Response<pb::SubmitResponse>, tonic::Status> {
        Ok(tonic::Response::new(Self::answer(&*self.local, request.into_inner()).await))
    }

    type SubmitBatchesStream = AnswerStream;

    /// Each command of the stream is submitted as it comes (they run concurrently, as separate
    /// `Submit` calls would); the answers go back coalesced. The stream of answers ends once
    /// the sender's stream ended and every command of it was answered.
    async fn submit_batches(
        &self,
        request: tonic::Request<tonic::Streaming<pb::SubmitBatch>>,
    ) -> Result<tonic::Response<AnswerStream>, tonic::Status> {
        let mut incoming = request.into_inner();
        let (answers, ready) = mpsc::unbounded_channel();
        let local = self.local.clone();
        tokio::spawn(async move {
            while let Ok(Some(batch)) = incoming.message().await {
                for submit in batch.submits {
                    tokio::spawn(Self::answer_batched(local.clone(), submit, answers.clone()));
                }
            }
        });
        let stream = futures_util::stream::unfold(ready, |mut ready: mpsc::UnboundedReceiver<pb::BatchedAnswer>| async move {
            let mut answers = vec![ready.recv().await?];
            while let Ok(more) = ready.try_recv() {
                answers.push(more);
            }
            Some((Ok(pb::AnswerBatch { answers }), ready))
        });
        Ok(tonic::Response::new(Box::pin(stream)))
    }

    async fn rebalance(&self, _: tonic::Request<pb::RebalanceRequest>) -> Result<tonic::Response<pb::RebalanceResponse>, tonic::Status> {
        let partitions = self.local.rebalance_local().into_iter().map(u32::from).collect();
        Ok(tonic::Response::new(pb::RebalanceResponse { partitions }))
    }

    async fn topology(&self, request: tonic::Request<pb::TopologyRequest>) -> Result<tonic::Response<pb::TopologyResponse>, tonic::Status> {
        let (local, topology) = (self.local.clone(), request.into_inner().topology);
        match tokio::task::spawn_blocking(move || local.topology_local(topology)).await {
            Ok(Ok((topology, led))) => Ok(tonic::Response::new(pb::TopologyResponse { topology, led })),
            Ok(Err(message)) => Err(tonic::Status::failed_precondition(message)),
            Err(e) => Err(tonic::Status::internal(e.to_string())),
        }
    }

    async fn change_topology(
        &self,
        request: tonic::Request<pb::ChangeTopologyRequest>,
    ) -> Result<tonic::Response<pb::ChangeTopologyResponse>, tonic::Status> {
        let (local, request) = (self.local.clone(), request.into_inner().request);
        match tokio::task::spawn_blocking(move || local.change_local(request)).await {
            Ok(Ok(outcome)) => Ok(tonic::Response::new(pb::ChangeTopologyResponse { outcome })),
            Ok(Err(message)) => Err(tonic::Status::failed_precondition(message)),
            Err(e) => Err(tonic::Status::internal(e.to_string())),
        }
    }
}

/// The sending side: one lazily connected channel per broker address, and over it one
/// `SubmitBatches` stream that carries every command for that broker (see `pipe`). (Ordered
/// maps: dropping a forwarder closes its pipes in address order, the same in every run of the
/// deterministic simulation; a `HashMap`'s random order made `netsim_replay` fail.)
#[derive(Default)]
pub struct Forwarder {
    channels: Mutex<BTreeMap<SocketAddr, Channel>>,
    /// How channels connect (TCP when `None`).
    connector: Option<Connector>,
    /// The commands waiting for each broker's pipe.
    pipes: Mutex<BTreeMap<SocketAddr, mpsc::UnboundedSender<Pending>>>,
    /// Brokers that do not know `SubmitBatches` (an older version): one `Submit` per command.
    unary: Arc<Mutex<BTreeSet<SocketAddr>>>,
}

/// A command waiting in a pipe, and where its answer goes.
struct Pending {
    request: pb::SubmitRequest,
    timeout: Duration,
    answer: oneshot::Sender<Result<pb::SubmitResponse, Lost>>,
}

/// Why a pipe has no answer for a command.
enum Lost {
    /// The stream could not be opened because the broker could not be connected to: the
    /// command was certainly not taken.
    NotSent,
    /// The broker does not know `SubmitBatches`: the command (not sent) goes by `Submit`.
    Unimplemented(pb::SubmitRequest),
    /// The stream failed, or could not be opened for another reason: the command may have been
    /// taken.
    NoAnswer,
}

impl Forwarder {
    /// A forwarder whose channels connect through `connector` instead of TCP.
    pub fn with_connector(connector: Connector) -> Self {
        Self { connector: Some(connector), ..Self::default() }
    }

    fn channel(&self, to: SocketAddr) -> Channel {
        let mut channels = self.channels.lock().expect("channels lock");
        channels
            .entry(to)
            .or_insert_with(|| {
                // a connection that went silent is found by pings, not by a request's time-out
                let endpoint = Endpoint::from_shared(format!("http://{to}"))
                    .expect("a socket address is a valid URI")
                    .tcp_nodelay(true)
                    .http2_keep_alive_interval(KEEPALIVE)
                    .keep_alive_timeout(KEEPALIVE_TIMEOUT)
                    .keep_alive_while_idle(true);
                match &self.connector {
                    None => endpoint.connect_timeout(CONNECT_TIMEOUT).connect_lazy(),
                    Some(connect) => connect(endpoint),
                }
            })
            .clone()
    }

    /// Hands `pending` to the pipe to `to`, starting one (on the current runtime) if there is
    /// none or its task ended (its runtime stopped).
    fn enqueue(&self, to: SocketAddr, pending: Pending) {
        let mut pipes = self.pipes.lock().expect("pipes lock");
        let pending = match pipes.get(&to) {
            Some(pipe) => match pipe.send(pending) {
                Ok(()) => return,
                Err(mpsc::error::SendError(pending)) => pending,
            },
            None => pending,
        };
        let (sender, receiver) = mpsc::unbounded_channel();
        tokio::spawn(pipe(self.channel(to), to, receiver, self.unary.clone()));
        sender.send(pending).unwrap_or_else(|_| unreachable!("the pipe's receiver is alive"));
        pipes.insert(to, sender);
    }

    /// Submits `command` to `partition` on the broker at `to` (a deployment when `deploy`) and
    /// waits for the answering record. [`BrokerError::NotLeader`] means the command was certainly
    /// not taken (the broker does not lead the partition, or cannot be connected to): it may be
    /// sent to another. [`BrokerError::Unavailable`] means no answer came (it may have been
    /// taken); other refusals are the receiving broker's own. `timeout` bounds the whole call.
    pub async fn submit(
        &self,
        to: SocketAddr,
        partition: PartitionId,
        deploy: bool,
        command: Command,
        timeout: Duration,
    ) -> Result<Record, BrokerError> {
        let request = pb::SubmitRequest {
            partition: u32::from(partition),
            deploy,
            tenants_limited: command.authorized_tenants.is_some(),
            authorized_tenants: command.authorized_tenants.clone().unwrap_or_default(),
            command: encode_command(command),
        };
        let unary = self.unary.lock().expect("unary lock").contains(&to);
        let response = if unary {
            self.submit_unary(to, partition, request, timeout).await?
        } else {
            let (answer, answered) = oneshot::channel();
            self.enqueue(to, Pending { request, timeout, answer });
            match tokio::time::timeout(timeout, answered).await {
                Ok(Ok(Ok(response))) => response,
                Ok(Ok(Err(Lost::Unimplemented(request)))) => self.submit_unary(to, partition, request, timeout).await?,
                Ok(Ok(Err(Lost::NotSent))) => return Err(BrokerError::NotLeader(partition)),
                Ok(Ok(Err(Lost::NoAnswer)) | Err(_)) | Err(_) => {
                    tracing::debug!(%to, partition, "a forwarded command got no answer");
                    return Err(BrokerError::Unavailable(partition));
                }
            }
        };
        match response.outcome {
            Some(pb::submit_response::Outcome::Record(bytes)) => postcard::from_bytes(&bytes).map_err(|e| {
                tracing::warn!(%to, partition, error = %e, "a forwarded command's answer does not decode");
                BrokerError::Unavailable(partition)
            }),
            Some(pb::submit_response::Outcome::Refusal(refusal)) => Err(match Kind::try_from(refusal.kind) {
                Ok(Kind::Overloaded) => BrokerError::Overloaded,
                Ok(Kind::DiskSpaceLow) => BrokerError::DiskSpaceLow(partition),
                Ok(Kind::NoSuchPartition) => BrokerError::NoSuchPartition(partition),
                Ok(Kind::NotLeader) => BrokerError::NotLeader(partition),
                _ => BrokerError::Unavailable(partition),
            }),
            None => Err(BrokerError::Unavailable(partition)),
        }
    }

    /// Sends one command by `Submit` (to a broker that does not know `SubmitBatches`).
    async fn submit_unary(
        &self,
        to: SocketAddr,
        partition: PartitionId,
        request: pb::SubmitRequest,
        timeout: Duration,
    ) -> Result<pb::SubmitResponse, BrokerError> {
        let mut client = pb::command_api_client::CommandApiClient::new(self.channel(to))
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES);
        let mut request = tonic::Request::new(request);
        request.set_timeout(timeout);
        match client.submit(request).await {
            Ok(response) => Ok(response.into_inner()),
            // no connection to the broker: the command never left, it may go to another
            Err(status) if status.code() == tonic::Code::Unavailable && refused_connection(status.message()) => {
                tracing::debug!(%to, partition, %status, "a broker to forward to cannot be reached");
                Err(BrokerError::NotLeader(partition))
            }
            Err(status) => {
                tracing::debug!(%to, partition, %status, "a forwarded command got no answer");
                Err(BrokerError::Unavailable(partition))
            }
        }
    }

    /// Asks the broker at `to` to hand the partitions it leads to their preferred leaders;
    /// answers the partitions it started to hand over.
    pub async fn rebalance(&self, to: SocketAddr, timeout: Duration) -> Result<Vec<PartitionId>, tonic::Status> {
        let mut client = pb::command_api_client::CommandApiClient::new(self.channel(to));
        let mut request = tonic::Request::new(pb::RebalanceRequest {});
        request.set_timeout(timeout);
        let answer = client.rebalance(request).await?.into_inner();
        Ok(answer.partitions.into_iter().filter_map(|p| PartitionId::try_from(p).ok()).collect())
    }
}

impl Forwarder {
    /// Hands the broker at `to` the cluster topology (JSON); answers its topology and its led
    /// partitions' configurations (JSON).
    pub async fn topology(&self, to: SocketAddr, topology: String, timeout: Duration) -> Result<(String, String), tonic::Status> {
        let mut client = pb::command_api_client::CommandApiClient::new(self.channel(to));
        let mut request = tonic::Request::new(pb::TopologyRequest { topology });
        request.set_timeout(timeout);
        let answer = client.topology(request).await?.into_inner();
        Ok((answer.topology, answer.led))
    }

    /// Asks the broker at `to` (the coordinator) to plan the change `request` (JSON); answers
    /// the outcome (JSON).
    pub async fn change(&self, to: SocketAddr, request: String, timeout: Duration) -> Result<String, tonic::Status> {
        let mut client = pb::command_api_client::CommandApiClient::new(self.channel(to));
        let mut request = tonic::Request::new(pb::ChangeTopologyRequest { request });
        request.set_timeout(timeout);
        Ok(client.change_topology(request).await?.into_inner().outcome)
    }
}

/// Carries the commands for the broker at `to` over one `SubmitBatches` stream, opened when a
/// command comes and kept while it works: whatever waits when a message is written goes in it,
/// so commands coalesce while the stream is busy. A stream that fails answers its commands
/// [`Lost::NoAnswer`] (each may have been taken) and the next command opens another; one that
/// could not be opened answers [`Lost::NotSent`] when the broker could not be connected to. A
/// broker that does not know the stream is marked in `unary` and its commands handed back. The
/// pipe ends when its forwarder is dropped.
async fn pipe(channel: Channel, to: SocketAddr, mut pending: mpsc::UnboundedReceiver<Pending>, unary: Arc<Mutex<BTreeSet<SocketAddr>>>) {
    let mut next_id: u64 = 0;
    while let Some(first) = pending.recv().await {
        let mut queued = vec![first];
        let mut client = pb::command_api_client::CommandApiClient::new(channel.clone())
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES);
        let (out, batches) = mpsc::unbounded_channel();
        let mut inbound = match client.submit_batches(tokio_stream::wrappers::UnboundedReceiverStream::new(batches)).await {
            Ok(response) => response.into_inner(),
            Err(status) => {
                while let Ok(more) = pending.try_recv() {
                    queued.push(more);
                }
                if status.code() == tonic::Code::Unimplemented {
                    tracing::debug!(%to, "a broker without SubmitBatches: one Submit per command");
                    unary.lock().expect("unary lock").insert(to);
                    for p in queued {
                        let _ = p.answer.send(Err(Lost::Unimplemented(p.request)));
                    }
                    return;
                }
                let refused = status.code() == tonic::Code::Unavailable && refused_connection(status.message());
                tracing::debug!(%to, %status, refused, "a stream of forwarded commands could not be opened");
                for p in queued {
                    let _ = p.answer.send(Err(if refused { Lost::NotSent } else { Lost::NoAnswer }));
                }
                continue;
            }
        };
        // (ordered: a failed stream answers its commands in the order they were sent, the same in
        // every run of the deterministic simulation)
        let mut waiting: BTreeMap<u64, oneshot::Sender<Result<pb::SubmitResponse, Lost>>> = BTreeMap::new();
        loop {
            while let Ok(more) = pending.try_recv() {
                queued.push(more);
            }
            if !queued.is_empty() {
                let submits = queued
                    .drain(..)
                    .map(|p| {
                        next_id += 1;
                        waiting.insert(next_id, p.answer);
                        let timeout_ms = u64::try_from(p.timeout.as_millis()).unwrap_or(u64::MAX);
                        pb::BatchedSubmit { id: next_id, request: Some(p.request), timeout_ms }
                    })
                    .collect();
                if out.send(pb::SubmitBatch { submits }).is_err() {
                    break;
                }
            }
            // (biased, answers first: an unbiased select picks among ready branches with tokio's
            // own random numbers, which the deterministic simulation does not seed, and answers
            // first so that a steady flow of commands cannot hold them back)
            tokio::select! {
                biased;
                message = inbound.message() => match message {
                    Ok(Some(batch)) => {
                        for answer in batch.answers {
                            if let (Some(waiter), Some(response)) = (waiting.remove(&answer.id), answer.response) {
                                let _ = waiter.send(Ok(response));
                            }
                        }
                    }
                    Ok(None) | Err(_) => {
                        tracing::debug!(%to, waiting = waiting.len(), "a stream of forwarded commands ended");
                        break;
                    }
                },
                more = pending.recv() => match more {
                    Some(more) => queued.push(more),
                    None => return,
                },
            }
        }
        // (dropping the waiters answers them: no answer)
        for (_, waiter) in std::mem::take(&mut waiting) {
            let _ = waiter.send(Err(Lost::NoAnswer));
        }
    }
}

/// What routing asks of the broker it runs on.
pub trait RouteLocal: LocalSubmit {
    /// The node id of `partition`'s leader as this broker knows it (itself when it leads; `None`
    /// when it knows of none), or [`BrokerError::Unavailable`] when it holds no replica of the
    /// partition; another error ends routing with it.
    fn leader_hint(&self, partition: PartitionId) -> Result<Option<u64>, BrokerError>;
}

/// The brokers a command can be routed among: this broker's id, the others' internal addresses,
/// and which to try in turn for a partition this broker holds no replica of (it knows no leader).
pub trait Members: Send + Sync {
    /// This broker's node id.
    fn node_id(&self) -> u64;
    /// `node`'s internal address, if known.
    fn address(&self, node: u64) -> Option<SocketAddr>;
    /// The broker to try at the `attempt`-th try (from 0) for `partition`, held elsewhere.
    fn guess(&self, partition: PartitionId, attempt: usize) -> u64;
}

/// The static members: the preferred leader by placement first, then the next ones.
impl Members for ClusterSpec {
    fn node_id(&self) -> u64 {
        self.node_id
    }

    fn address(&self, node: u64) -> Option<SocketAddr> {
        if node == self.node_id {
            return Some(ClusterSpec::address(self));
        }
        self.members.get(node as usize).copied()
    }

    fn guess(&self, partition: PartitionId, attempt: usize) -> u64 {
        (self.preferred_leader(partition) + attempt as u64) % self.cluster_size().max(1) as u64
    }
}

/// Every broker the book knows, in turn by node id from the partition's number.
impl Members for AddressBook {
    fn node_id(&self) -> u64 {
        AddressBook::node_id(self)
    }

    fn address(&self, node: u64) -> Option<SocketAddr> {
        self.get(node)
    }

    fn guess(&self, partition: PartitionId, attempt: usize) -> u64 {
        let nodes = self.nodes();
        nodes.get((usize::from(partition) + attempt) % nodes.len().max(1)).copied().unwrap_or(0)
    }
}

/// Sends `command` to whichever of `members` leads `partition` (`local`'s own replica
/// included), retrying every `retry` while the answer says the command was certainly not taken
/// ([`BrokerError::NotLeader`]: no leader yet, a leader that is not one any more, a broker that
/// cannot be reached), for at most `window`, after which it answers `NotLeader` (taken by none:
/// the caller may try another partition, or report the partition unavailable). Any other answer
/// is final: a command that may have been taken is never sent twice. A forwarded command's
/// answer is awaited at least [`crate::FORWARD_ANSWER_WAIT`] (it may be a creation awaiting its
/// result; the client's own deadline ends the call sooner).
#[allow(clippy::too_many_arguments)]
pub async fn route<L: RouteLocal + ?Sized, M: Members + ?Sized>(
    local: &L,
    forwarder: &Forwarder,
    members: &M,
    partition: PartitionId,
    deploy: bool,
    command: Command,
    window: Duration,
    retry: Duration,
) -> Result<Record, BrokerError> {
    let deadline = tokio::time::Instant::now() + window;
    // for a partition this broker does not hold, the members are tried in turn from its
    // preferred leader (without membership, it does not know the leader)
    let mut attempt = 0;
    loop {
        let target = match local.leader_hint(partition) {
            Ok(leader) => leader,
            Err(BrokerError::Unavailable(_)) => Some(members.guess(partition, attempt)),
            Err(e) => return Err(e),
        };
        let answer = match target {
            Some(node) if node == members.node_id() => {
                if deploy {
                    local.deploy_local(command.clone()).await
                } else {
                    local.submit_local(partition, command.clone()).await
                }
            }
            Some(node) => match members.address(node) {
                Some(to) => {
                    let left = deadline.saturating_duration_since(tokio::time::Instant::now()).max(crate::FORWARD_ANSWER_WAIT);
                    forwarder.submit(to, partition, deploy, command.clone(), left).await
                }
                // a leader whose address the gossip has not brought yet: certainly not sent
                None => Err(BrokerError::NotLeader(partition)),
            },
            None => Err(BrokerError::NotLeader(partition)),
        };
        match answer {
            Err(BrokerError::NotLeader(_)) if tokio::time::Instant::now() < deadline => {
                attempt += 1;
                tokio::time::sleep(retry).await;
            }
            other => return other,
        }
    }
}

/// Whether a transport error says the connection was never made (so no command was sent), not
/// that an open one failed (after which the command may have been taken).
fn refused_connection(message: &str) -> bool {
    message.contains("error trying to connect") || message.contains("tcp connect error")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_keep_key_intent_value_and_distribution_through_the_wire_form() {
        let mut command = Command::new(42, Intent::Complete, RecordValue::Job(Default::default()));
        command.distribution = Some(Distribution { source: 3, key: 7, acknowledged_below: 5 });
        let decoded = decode_command(&encode_command(command.clone())).expect("decodes");
        assert_eq!(decoded, command);
        assert!(decode_command(b"\xff\xff").is_err());
    }

    /// A broker of an older version: `Submit` only (every answer a refusal that names it).
    struct Legacy;

    #[tonic::async_trait]
    impl pb::command_api_server::CommandApi for Legacy {
        async fn submit(&self, _: tonic::Request<pb::SubmitRequest>) -> Result<tonic::Response<pb::SubmitResponse>, tonic::Status> {
            let refusal = pb::Refusal { kind: Kind::NoSuchPartition as i32, message: "legacy".into() };
            Ok(tonic::Response::new(pb::SubmitResponse { outcome: Some(pb::submit_response::Outcome::Refusal(refusal)) }))
        }
        type SubmitBatchesStream = AnswerStream;
        async fn submit_batches(
            &self,
            _: tonic::Request<tonic::Streaming<pb::SubmitBatch>>,
        ) -> Result<tonic::Response<AnswerStream>, tonic::Status> {
            Err(tonic::Status::unimplemented("no SubmitBatches here"))
        }
        async fn rebalance(
            &self,
            _: tonic::Request<pb::RebalanceRequest>,
        ) -> Result<tonic::Response<pb::RebalanceResponse>, tonic::Status> {
            Err(tonic::Status::unimplemented("no Rebalance here"))
        }
        async fn topology(&self, _: tonic::Request<pb::TopologyRequest>) -> Result<tonic::Response<pb::TopologyResponse>, tonic::Status> {
            Err(tonic::Status::unimplemented("no Topology here"))
        }
        async fn change_topology(
            &self,
            _: tonic::Request<pb::ChangeTopologyRequest>,
        ) -> Result<tonic::Response<pb::ChangeTopologyResponse>, tonic::Status> {
            Err(tonic::Status::unimplemented("no ChangeTopology here"))
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_broker_without_submit_batches_gets_one_submit_per_command() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("address");
        tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(CommandApiServer::new(Legacy))
                .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
        );
        let forwarder = Forwarder::default();
        let command = || Command::new(1, Intent::Complete, RecordValue::Job(Default::default()));
        for _ in 0..2 {
            // its answer, not a lost command: the stream's refusal sent it by Submit
            let answer = forwarder.submit(addr, 1, false, command(), Duration::from_secs(5)).await;
            assert!(matches!(answer, Err(BrokerError::NoSuchPartition(1))), "{answer:?}");
        }
        assert!(forwarder.unary.lock().expect("unary lock").contains(&addr), "the broker is remembered as one without the stream");
    }
}
