//! Deterministic simulation of the replication, transport and routing layers over turmoil's
//! simulated network and clock, seeded.
//!
//! What runs is the production code: each host is a broker's network side, a
//! [`RaftNetwork`] (tonic bidirectional streams, batching, reconnecting with back-off, keep-alive
//! pings) carrying a [`RaftGroup`] on a real journal, the `CommandApi` service and its
//! [`Forwarder`] on the internal port, and [`forward::route`] (the routing decision the broker's
//! `submit` makes) behind a gateway port the clients call. What is modelled is only the partition
//! behind the group: a leader proposes a client's command as one entry and answers once it is
//! committed (the broker's partition thread answers the same way, C4), and every node applies the
//! committed entries to a state whose digest chains over them.
//!
//! Turmoil decides, from the seed: message latency, links that break at random (`fail_rate`;
//! its TCP does not resend, so a broken link stalls its connections until keep-alive gives them
//! up), and the harness's own seeded RNG: partitions (segments dropped both ways), holds (segments
//! delayed until released), host crashes (every socket gone, the journal kept) and restarts, the
//! ticks of each node's Raft clock (so election timeouts differ: Raft's own random timeout draws
//! from the thread's RNG and is off), which gateway a client calls. Then a calm phase: links
//! repaired, hosts restarted, clients stopped, until every node applied everything committed.
//!
//! The run is recorded in a [`History`]; each invariant is a test file of its own that checks it
//! over many seeds. A failing seed is printed; `SIM_SEED=<n>` replays only it, `SIM_SEEDS=<count>`
//! and `SIM_SEED_BASE=<n>` run other seeds than CI's.
#![allow(dead_code)] // each test file uses part of the harness

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{mpsc, oneshot};
use tokio_stream::wrappers::ReceiverStream;
use tonic::codegen::http::Uri;
use tonic::codegen::Service;
use tonic::transport::server::Connected;
use tonic::transport::{Channel, Endpoint, Server};
use waggle_broker::forward::{self, BoxFuture, Connector, Forwarder, LocalSubmit, RouteLocal};
use waggle_broker::{BrokerError, ClusterSpec};
use waggle_engine::Command;
use waggle_protocol::{Intent, PartitionId, Record, RecordType, RecordValue, ValueType};
use waggle_replication::net::RaftNetwork;
use waggle_replication::{RaftGroup, ReplicaConfig};

/// Seeds each invariant's test runs by default (CI): seeds `base..base + count`.
const DEFAULT_SEEDS: u64 = 20;

/// The one partition the simulated cluster has, and its Raft group id.
const PARTITION: PartitionId = 1;
/// The internal port (Raft streams and forwarded commands) and the gateway port clients call.
const INTERNAL_PORT: u16 = 26502;
const GATEWAY_PORT: u16 = 26501;
/// How often a node's driver steps, drives and applies (its partition thread's loop).
const DRIVE_EVERY: Duration = Duration::from_millis(2);
/// A node's Raft clock ticks every this much (the broker's tick), with the scenario's chance (so
/// clocks drift): with the broker's election timeout of 10 ticks, a follower campaigns after
/// 0.5-1 s of silence, against the transport's keep-alive of seconds, as in production.
const TICK_EVERY: Duration = Duration::from_millis(50);
/// How long the gateway routes a command, and the pause between two tries.
const ROUTE_WINDOW: Duration = Duration::from_secs(3);
const ROUTE_RETRY: Duration = Duration::from_millis(25);
/// How long a client waits for an answer.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a simulated connection attempt may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// Runs `check` for every seed of this run; a failure names its seed and how to replay it.
pub fn for_each_seed(mut check: impl FnMut(u64)) {
    for seed in seeds() {
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check(seed)));
        if let Err(panic) = outcome {
            eprintln!("network simulation seed {seed} failed; replay it with SIM_SEED={seed}");
            std::panic::resume_unwind(panic);
        }
    }
}

/// This run's seeds: `SIM_SEED` alone, or `SIM_SEED_BASE..SIM_SEED_BASE + SIM_SEEDS`.
pub fn seeds() -> Vec<u64> {
    match std::env::var("SIM_SEED") {
        Ok(s) => vec![s.parse().expect("SIM_SEED is a number")],
        Err(_) => {
            let base = std::env::var("SIM_SEED_BASE").map(|s| s.parse().expect("SIM_SEED_BASE is a number")).unwrap_or(0);
            let count = std::env::var("SIM_SEEDS").map(|s| s.parse().expect("SIM_SEEDS is a number")).unwrap_or(DEFAULT_SEEDS);
            (base..base + count).collect()
        }
    }
}

/// splitmix64: small, fast and the same on every platform.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed ^ 0x5DEE_CE66_D1CE_4E5B)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// A number in `lo..=hi`.
    pub fn between(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        ((self.next_u64() >> 11) as f64) / ((1u64 << 53) as f64) < p
    }
}

/// What can go wrong, and how often (chances per simulated millisecond unless said).
#[derive(Debug, Clone)]
pub struct Scenario {
    /// Voters of the partition's group: hosts `0..voters`.
    pub voters: u64,
    /// Hosts that hold no replica and only route (a gateway's view: it must guess the leader).
    pub gateways_only: u64,
    pub clients: u64,
    /// Milliseconds of chaos, then at most this many of calm to converge.
    pub chaos_ms: u64,
    pub calm_ms: u64,
    pub min_latency_ms: u64,
    pub max_latency_ms: u64,
    /// Turmoil's chance per segment sent that its link breaks, and that a broken one heals.
    pub fail_rate: f64,
    pub repair_rate: f64,
    /// A node's chance to tick its Raft clock at each [`TICK_EVERY`].
    pub tick: f64,
    /// Cutting a random set of hosts off from the others (segments dropped), for a while.
    pub partition: f64,
    pub partition_ms: (u64, u64),
    /// Holding a random set of hosts' segments to the others (delivered when released).
    pub hold: f64,
    pub hold_ms: (u64, u64),
    /// Crashing a host (while fewer than a quorum's worth of voters are down; the leader in half
    /// the cases), restarting it after a while.
    pub crash: f64,
    pub down_ms: (u64, u64),
    /// A client's pause between two commands.
    pub think_ms: (u64, u64),
}

impl Default for Scenario {
    fn default() -> Self {
        Self {
            voters: 3,
            gateways_only: 1,
            clients: 3,
            chaos_ms: 15_000,
            calm_ms: 30_000,
            min_latency_ms: 1,
            max_latency_ms: 10,
            fail_rate: 0.0,
            repair_rate: 0.0,
            tick: 0.7,
            partition: 1.0 / 3_000.0,
            partition_ms: (300, 4_000),
            hold: 1.0 / 4_000.0,
            hold_ms: (20, 1_500),
            crash: 1.0 / 3_000.0,
            down_ms: (100, 4_000),
            think_ms: (2, 40),
        }
    }
}

impl Scenario {
    /// The default, varied by seed: five voters for odd seeds, slower links for one seed in
    /// four, and links that break at random for one seed in three.
    pub fn for_seed(seed: u64) -> Self {
        let mut s = Self { voters: if seed % 2 == 1 { 5 } else { 3 }, ..Self::default() };
        if seed % 4 == 3 {
            s.max_latency_ms = 40;
        }
        if seed % 3 == 2 {
            s.fail_rate = 0.000_2;
            s.repair_rate = 0.05;
        }
        s
    }

    fn hosts(&self) -> u64 {
        self.voters + self.gateways_only
    }
}

/// An entry a node's state machine applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    pub node: u64,
    /// Which run of the node (0 before its first crash).
    pub run: u64,
    pub index: u64,
    pub term: u64,
    /// The client command the entry carries (`None` for Raft's own entries).
    pub op: Option<u64>,
    /// The node's state digest once this entry is applied.
    pub digest: u64,
}

/// A command a client was answered for: committed at `index`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Acknowledged {
    pub op: u64,
    pub index: u64,
    pub client: u64,
    /// The host whose gateway the client called.
    pub gateway: u64,
}

/// What happened in a run.
#[derive(Debug, Default)]
pub struct History {
    pub seed: u64,
    pub voters: u64,
    /// Every node seen leading each term (after each drive).
    pub leaders: BTreeMap<u64, BTreeSet<u64>>,
    /// Every application, in the order they happened.
    pub applied: Vec<Applied>,
    pub acknowledged: Vec<Acknowledged>,
    /// Commands clients sent, and the answers that were not a record.
    pub submitted: u64,
    pub unavailable: u64,
    pub refused_other: u64,
    /// Commands gateways routed, how often routing asked where the leader is (once per try:
    /// more than once when an answer was `NotLeader`, certainly not taken), and how many tries
    /// reached a partition through another host's `CommandApi`.
    pub routed: u64,
    pub asks: u64,
    pub forwarded: u64,
    /// `NotLeader` answers the partitions gave (a command reached a node that does not lead).
    pub not_leader: u64,
    /// Answers a leader gave `Unavailable` (it lost the lead before the entry committed).
    pub lost_lead: u64,
    pub crashes: u64,
    pub partitions: u64,
    pub holds: u64,
    /// Each voter's applications in its last run, after the calm phase (a run applies from the
    /// first index: it holds the node's whole committed log).
    pub final_logs: BTreeMap<u64, Vec<Applied>>,
    /// Each voter's applied index and digest at the end.
    pub final_states: BTreeMap<u64, (u64, u64)>,
    /// Simulated milliseconds the calm phase took to converge.
    pub calm_ms: u64,
    /// What happened when, in simulated milliseconds (faults, leaders, answers that were not a
    /// record); printed with `SIM_TRACE=1`.
    pub events: Vec<String>,
}

impl History {
    fn event(&mut self, what: String) {
        let ms = turmoil::sim_elapsed().map_or(0, |d| d.as_millis());
        self.events.push(format!("{ms:>6} ms  {what}"));
    }
}

/// What the test's driver sees of a node (written by the node's host).
#[derive(Debug, Default, Clone)]
struct NodeView {
    run: u64,
    applied: u64,
    commit: u64,
    last: u64,
    leading: bool,
}

/// State shared by the hosts, the clients and the test's driver (all on the test's thread).
#[derive(Default)]
struct Shared {
    history: History,
    nodes: BTreeMap<u64, NodeView>,
    runs: BTreeMap<u64, u64>,
    stop_clients: bool,
}

type SharedRef = Arc<Mutex<Shared>>;

fn with<T>(shared: &SharedRef, f: impl FnOnce(&mut Shared) -> T) -> T {
    f(&mut shared.lock().expect("shared lock"))
}

fn host_name(node: u64) -> String {
    format!("node{node}")
}

/// The state machine's digest after applying `op` at `index`: a chain over every command.
fn digest(previous: u64, index: u64, op: Option<u64>) -> u64 {
    let Some(op) = op else { return previous };
    // FNV-1a over the previous digest, the index and the command
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for b in previous.to_le_bytes().iter().chain(&index.to_le_bytes()).chain(&op.to_le_bytes()) {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// A command's entry: a version byte and the command's key (the client's operation id).
fn encode(op: u64) -> Vec<u8> {
    let mut data = vec![1];
    data.extend_from_slice(&op.to_le_bytes());
    data
}

fn decode(data: &[u8]) -> Option<u64> {
    (data.len() == 9 && data[0] == 1).then(|| u64::from_le_bytes(data[1..].try_into().expect("8 bytes")))
}

fn answer(op: u64, index: u64) -> Record {
    Record {
        position: index,
        source_position: 0,
        key: op as i64,
        timestamp_ms: 0,
        record_type: RecordType::Event,
        value_type: ValueType::Job,
        intent: Intent::Complete,
        rejection: None,
        value: RecordValue::Job(Default::default()),
    }
}

// ---- the simulated network under tonic ----

/// A turmoil TCP stream as tonic's server takes it.
struct SimIo(turmoil::net::TcpStream);

impl Connected for SimIo {
    type ConnectInfo = ();
    fn connect_info(&self) -> Self::ConnectInfo {}
}

impl AsyncRead for SimIo {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl AsyncWrite for SimIo {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

/// The connections a simulated listener accepts, as a stream for tonic's server.
async fn incoming(port: u16) -> std::io::Result<ReceiverStream<std::io::Result<SimIo>>> {
    let listener = turmoil::net::TcpListener::bind((IpAddr::from([0, 0, 0, 0]), port)).await?;
    let (accepted, stream) = mpsc::channel(16);
    tokio::spawn(async move {
        loop {
            let connection = listener.accept().await.map(|(s, _)| SimIo(s));
            if accepted.send(connection).await.is_err() {
                return;
            }
        }
    });
    Ok(ReceiverStream::new(stream))
}

/// A connection that could not be made; it reads as hyper's own (see [`Connector`]).
#[derive(Debug)]
struct ConnectFailed(String);

impl std::fmt::Display for ConnectFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "tcp connect error: {}", self.0)
    }
}

impl std::error::Error for ConnectFailed {}

/// Dials turmoil TCP for tonic's channels.
#[derive(Clone)]
struct SimDial;

impl Service<Uri> for SimDial {
    type Response = TokioIo<turmoil::net::TcpStream>;
    type Error = ConnectFailed;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, ConnectFailed>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), ConnectFailed>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        Box::pin(async move {
            let ip: IpAddr = uri.host().and_then(|h| h.parse().ok()).ok_or_else(|| ConnectFailed(format!("no address in {uri}")))?;
            let addr = SocketAddr::new(ip, uri.port_u16().unwrap_or(80));
            match tokio::time::timeout(CONNECT_TIMEOUT, turmoil::net::TcpStream::connect(addr)).await {
                Ok(Ok(stream)) => Ok(TokioIo::new(stream)),
                Ok(Err(e)) => Err(ConnectFailed(e.to_string())),
                Err(_) => Err(ConnectFailed("timed out".into())),
            }
        })
    }
}

fn connector() -> Connector {
    Arc::new(|endpoint: Endpoint| -> Channel { endpoint.connect_with_connector_lazy(SimDial) })
}

// ---- a node: the partition's replica behind the real network ----

/// Where a proposed command's answer goes.
type Reply = oneshot::Sender<Result<Record, BrokerError>>;

/// A client's command waiting for its entry to commit.
struct Proposal {
    op: u64,
    reply: Reply,
}

/// The node's replica as the `CommandApi` and the router see it.
struct Replica {
    node: u64,
    /// The leader's node id as the replica knows it, and whether it leads.
    leader: Mutex<(Option<u64>, bool)>,
    proposals: mpsc::UnboundedSender<Proposal>,
    shared: SharedRef,
}

impl LocalSubmit for Replica {
    fn rebalance_local(&self) -> Vec<PartitionId> {
        Vec::new()
    }

    fn submit_local(&self, partition: PartitionId, command: Command) -> BoxFuture<'_, Result<Record, BrokerError>> {
        Box::pin(async move {
            let leads = self.leader.lock().expect("leader lock").1;
            if partition != PARTITION || !leads {
                with(&self.shared, |s| s.history.not_leader += 1);
                return Err(BrokerError::NotLeader(partition));
            }
            let (reply, answered) = oneshot::channel();
            if self.proposals.send(Proposal { op: command.key as u64, reply }).is_err() {
                return Err(BrokerError::NotLeader(partition));
            }
            answered.await.unwrap_or(Err(BrokerError::Unavailable(partition)))
        })
    }

    fn deploy_local(&self, _command: Command) -> BoxFuture<'_, Result<Record, BrokerError>> {
        Box::pin(async { Err(BrokerError::NotLeader(PARTITION)) })
    }
}

/// The internal port's `CommandApi` in front of the replica: counts the commands forwarded to it.
struct Forwarded(Arc<Replica>);

impl LocalSubmit for Forwarded {
    fn rebalance_local(&self) -> Vec<PartitionId> {
        Vec::new()
    }

    fn submit_local(&self, partition: PartitionId, command: Command) -> BoxFuture<'_, Result<Record, BrokerError>> {
        with(&self.0.shared, |s| s.history.forwarded += 1);
        self.0.submit_local(partition, command)
    }

    fn deploy_local(&self, command: Command) -> BoxFuture<'_, Result<Record, BrokerError>> {
        self.0.deploy_local(command)
    }
}

/// What a host's gateway routes from: its replica, if it holds one.
struct Local {
    replica: Option<Arc<Replica>>,
    shared: SharedRef,
}

impl LocalSubmit for Local {
    fn rebalance_local(&self) -> Vec<PartitionId> {
        Vec::new()
    }

    fn submit_local(&self, partition: PartitionId, command: Command) -> BoxFuture<'_, Result<Record, BrokerError>> {
        match &self.replica {
            Some(r) => r.submit_local(partition, command),
            None => Box::pin(async move { Err(BrokerError::NotLeader(partition)) }),
        }
    }

    fn deploy_local(&self, command: Command) -> BoxFuture<'_, Result<Record, BrokerError>> {
        match &self.replica {
            Some(r) => r.deploy_local(command),
            None => Box::pin(async { Err(BrokerError::NotLeader(PARTITION)) }),
        }
    }
}

impl RouteLocal for Local {
    fn leader_hint(&self, partition: PartitionId) -> Result<Option<u64>, BrokerError> {
        with(&self.shared, |s| s.history.asks += 1);
        match &self.replica {
            Some(r) => Ok(r.leader.lock().expect("leader lock").0),
            None => Err(BrokerError::Unavailable(partition)),
        }
    }
}

/// The gateway port's service: every command goes through [`forward::route`].
struct Gateway {
    local: Local,
    forwarder: Forwarder,
    spec: ClusterSpec,
    shared: SharedRef,
}

impl LocalSubmit for Gateway {
    fn rebalance_local(&self) -> Vec<PartitionId> {
        Vec::new()
    }

    fn submit_local(&self, partition: PartitionId, command: Command) -> BoxFuture<'_, Result<Record, BrokerError>> {
        Box::pin(async move {
            with(&self.shared, |s| s.history.routed += 1);
            forward::route(&self.local, &self.forwarder, &self.spec, partition, false, command, ROUTE_WINDOW, ROUTE_RETRY).await
        })
    }

    fn deploy_local(&self, _command: Command) -> BoxFuture<'_, Result<Record, BrokerError>> {
        Box::pin(async { Err(BrokerError::NoSuchPartition(PARTITION)) })
    }
}

/// Everything a host's software needs (cloned into each of its runs).
#[derive(Clone)]
struct HostSetup {
    node: u64,
    scenario: Scenario,
    seed: u64,
    dir: PathBuf,
    shared: SharedRef,
}

impl HostSetup {
    fn spec(&self) -> ClusterSpec {
        let members = (0..self.scenario.hosts()).map(|n| SocketAddr::new(turmoil::lookup(host_name(n)), INTERNAL_PORT)).collect();
        ClusterSpec { node_id: self.node, members, replication_factor: self.scenario.voters as u32, own_address: None }
    }

    /// One run of the host, from its start (or restart) until it crashes.
    async fn run(self) -> turmoil::Result {
        let run = with(&self.shared, |s| {
            let run = s.runs.entry(self.node).or_insert(0);
            *run += 1;
            *run - 1
        });
        let spec = self.spec();
        let voter = self.node < self.scenario.voters;
        let (proposals, proposed) = mpsc::unbounded_channel();
        let replica =
            voter.then(|| Arc::new(Replica { node: self.node, leader: Mutex::new((None, false)), proposals, shared: self.shared.clone() }));
        let local = Local { replica: replica.clone(), shared: self.shared.clone() };
        let gateway = Gateway { local, forwarder: Forwarder::with_connector(connector()), spec: spec.clone(), shared: self.shared.clone() };
        let clients = incoming(GATEWAY_PORT).await?;
        tokio::spawn(async move {
            let served = Server::builder().add_service(forward::service(Arc::new(gateway))).serve_with_incoming(clients).await;
            if let Err(e) = served {
                panic!("the gateway server failed: {e}");
            }
        });
        let Some(replica) = replica else {
            std::future::pending::<()>().await;
            return Ok(());
        };
        let raft_id = self.node + 1;
        let peers_in = incoming(INTERNAL_PORT).await?;
        let command_api = forward::service(Arc::new(Forwarded(replica.clone())));
        let network = RaftNetwork::serve_incoming(raft_id, spec.members[self.node as usize], peers_in, Some(connector()), move |routes| {
            routes.add_service(command_api)
        });
        for peer in (0..self.scenario.voters).filter(|&p| p != self.node) {
            network.add_peer(peer + 1, spec.members[peer as usize]);
        }
        let (transport, inbox) = network.register(u64::from(PARTITION));
        let config =
            ReplicaConfig { randomized_election_timeout: false, ..ReplicaConfig::new(raft_id, (1..=self.scenario.voters).collect()) };
        let mut group = RaftGroup::open_replicated(&self.dir, 0, config, Box::new(transport))?;
        let mut driver = Driver {
            node: self.node,
            run,
            group: &mut group,
            replica: &replica,
            shared: &self.shared,
            pending: Vec::new(),
            applied: 0,
            digest: 0,
        };
        let mut rng = Rng::new(self.seed ^ (self.node << 32) ^ (run << 48));
        let mut next_tick = tokio::time::Instant::now() + TICK_EVERY;
        let mut proposed = proposed;
        loop {
            tokio::time::sleep(DRIVE_EVERY).await;
            while let Ok(message) = inbox.try_recv() {
                // a message from a node outside the group, or for another: dropped, as the broker does
                let _ = driver.group.step(message);
            }
            while tokio::time::Instant::now() >= next_tick {
                next_tick += TICK_EVERY;
                if rng.chance(self.scenario.tick) {
                    driver.group.tick();
                }
            }
            while let Ok(proposal) = proposed.try_recv() {
                driver.propose(proposal);
            }
            driver.drive()?;
        }
    }
}

/// A node's partition thread, modelled: proposes, drives, applies, answers.
struct Driver<'a> {
    node: u64,
    run: u64,
    group: &'a mut RaftGroup,
    replica: &'a Replica,
    shared: &'a SharedRef,
    /// Proposed and not answered: (index, term, op, reply).
    pending: Vec<(u64, u64, u64, Reply)>,
    applied: u64,
    digest: u64,
}

impl Driver<'_> {
    fn propose(&mut self, proposal: Proposal) {
        if !self.group.is_leader() {
            with(self.shared, |s| s.history.not_leader += 1);
            let _ = proposal.reply.send(Err(BrokerError::NotLeader(PARTITION)));
            return;
        }
        match self.group.propose(encode(proposal.op)) {
            Ok(()) => self.pending.push((self.group.last_index(), self.group.term(), proposal.op, proposal.reply)),
            // not appended: certainly not taken
            Err(_) => {
                let _ = proposal.reply.send(Err(BrokerError::NotLeader(PARTITION)));
            }
        }
    }

    fn drive(&mut self) -> Result<(), Box<dyn std::error::Error>> {
        let committed = self.group.drive()?;
        let mut shared = self.shared.lock().expect("shared lock");
        for c in committed {
            assert_eq!(c.index, self.applied + 1, "node {} applied {} after {}", self.node, c.index, self.applied);
            let op = decode(&c.data);
            self.applied = c.index;
            self.digest = digest(self.digest, c.index, op);
            shared.history.applied.push(Applied { node: self.node, run: self.run, index: c.index, term: c.term, op, digest: self.digest });
            if let Some(at) = self.pending.iter().position(|p| p.0 == c.index) {
                let (_, term, proposed, reply) = self.pending.remove(at);
                let outcome = if term == c.term && op == Some(proposed) {
                    Ok(answer(proposed, c.index))
                } else {
                    shared.history.lost_lead += 1;
                    Err(BrokerError::Unavailable(PARTITION))
                };
                let _ = reply.send(outcome);
            }
        }
        // a leader that lost its term: what it proposed may or may not commit (Zeebe's answer)
        let (leading, term) = (self.group.is_leader(), self.group.term());
        let (lost, kept) = std::mem::take(&mut self.pending).into_iter().partition(|p| !leading || p.1 != term);
        self.pending = kept;
        for (_, _, _, reply) in lost {
            shared.history.lost_lead += 1;
            let _ = reply.send(Err(BrokerError::Unavailable(PARTITION)));
        }
        let leader = self.group.leader_id().map(|id| id - 1);
        *self.replica.leader.lock().expect("leader lock") = (leader, leading);
        if leading && shared.history.leaders.entry(term).or_default().insert(self.node) {
            shared.history.event(format!("node {} leads term {term}", self.node));
        }
        shared.nodes.insert(
            self.node,
            NodeView { run: self.run, applied: self.applied, commit: self.group.commit_index(), last: self.group.last_index(), leading },
        );
        Ok(())
    }
}

// ---- clients ----

async fn client(index: u64, seed: u64, scenario: Scenario, shared: SharedRef) -> turmoil::Result {
    let mut rng = Rng::new(seed ^ 0xC11E ^ (index << 40));
    let forwarder = Forwarder::with_connector(connector());
    let mut sent = 0u64;
    loop {
        if with(&shared, |s| s.stop_clients) {
            return Ok(());
        }
        sent += 1;
        let op = (index + 1) * 1_000_000 + sent;
        with(&shared, |s| s.history.submitted += 1);
        let command = Command::new(op as i64, Intent::Complete, RecordValue::Job(Default::default()));
        // a gateway that cannot be reached certainly did not take the command: the client sends
        // it to another (a few times)
        let (mut gateway, mut answer) = (0, Err(BrokerError::NotLeader(PARTITION)));
        for _ in 0..3 {
            gateway = rng.below(scenario.hosts());
            let to = SocketAddr::new(turmoil::lookup(host_name(gateway)), GATEWAY_PORT);
            answer = forwarder.submit(to, PARTITION, false, command.clone(), CLIENT_TIMEOUT).await;
            if !matches!(answer, Err(BrokerError::NotLeader(_))) {
                break;
            }
        }
        with(&shared, |s| match answer {
            Ok(record) => {
                assert_eq!(record.key, op as i64, "client {index} got the answer to another command");
                s.history.acknowledged.push(Acknowledged { op, index: record.position, client: index, gateway });
            }
            Err(BrokerError::Unavailable(_)) => {
                s.history.unavailable += 1;
                s.history.event(format!("client {index}: command {op} through node {gateway}: unavailable"));
            }
            Err(e) => {
                s.history.refused_other += 1;
                s.history.event(format!("client {index}: command {op} through node {gateway}: {e}"));
            }
        });
        tokio::time::sleep(Duration::from_millis(rng.between(scenario.think_ms.0, scenario.think_ms.1))).await;
    }
}

// ---- the run ----

/// A fault in force, and the simulated millisecond it ends at.
enum Fault {
    Partition(Vec<u64>, Vec<u64>, u64),
    Hold(Vec<u64>, Vec<u64>, u64),
}

pub struct Sim;

/// One run at a time in a process (see [`align_task_ids`]).
static ONE_RUN: Mutex<()> = Mutex::new(());

/// Makes the next tokio task id a multiple of 64. Task ids come from one counter in the process,
/// and a runtime keeps its tasks in lists by id modulo 4; a crashed host's tasks are dropped list
/// by list, so the order its connections send their last segments in (each drawing a latency
/// from turmoil's RNG) would depend on how many tasks earlier runs spawned, and a seed would not
/// replay inside a longer run of seeds.
fn align_task_ids() {
    let runtime = tokio::runtime::Builder::new_current_thread().build().expect("a runtime");
    runtime.block_on(async {
        loop {
            let task = tokio::spawn(async {});
            let id: u64 = task.id().to_string().parse().expect("a task id is a number");
            let _ = task.await;
            if id % 64 == 63 {
                return;
            }
        }
    });
}

impl Sim {
    /// Runs `scenario` under `seed` to the end of its calm phase.
    pub fn run(seed: u64, scenario: Scenario) -> History {
        let _one = ONE_RUN.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        align_task_ids();
        let dirs = match std::path::Path::new("/dev/shm").is_dir() {
            true => tempfile::Builder::new().prefix("waggle-netsim").tempdir_in("/dev/shm"),
            false => tempfile::Builder::new().prefix("waggle-netsim").tempdir(),
        }
        .expect("temp dir");
        let shared: SharedRef = Arc::default();
        let mut sim = turmoil::Builder::new()
            .rng_seed(seed)
            .simulation_duration(Duration::from_secs(3_600))
            .tick_duration(Duration::from_millis(1))
            .min_message_latency(Duration::from_millis(scenario.min_latency_ms))
            .max_message_latency(Duration::from_millis(scenario.max_latency_ms))
            .fail_rate(scenario.fail_rate)
            .repair_rate(scenario.repair_rate)
            .tcp_capacity(1 << 16)
            .build();
        let hosts: Vec<u64> = (0..scenario.hosts()).collect();
        for &node in &hosts {
            let setup =
                HostSetup { node, scenario: scenario.clone(), seed, dir: dirs.path().join(format!("node-{node}")), shared: shared.clone() };
            sim.host(host_name(node), move || setup.clone().run());
        }
        for c in 0..scenario.clients {
            sim.client(format!("client{c}"), client(c, seed, scenario.clone(), shared.clone()));
        }
        let mut rng = Rng::new(seed);
        let mut faults: Vec<Fault> = Vec::new();
        // crashed hosts, and the millisecond each restarts at
        let mut down: BTreeMap<u64, u64> = BTreeMap::new();
        let step = |sim: &mut turmoil::Sim, seed: u64| {
            if let Err(e) = sim.step() {
                panic!("seed {seed}: the simulation failed: {e}");
            }
        };
        let end_faults = |sim: &mut turmoil::Sim, faults: &mut Vec<Fault>, now: u64, all: bool| {
            faults.retain(|f| match f {
                Fault::Partition(a, b, until) if all || *until <= now => {
                    for (x, y) in pairs(a, b) {
                        sim.repair(host_name(x), host_name(y));
                    }
                    with(&shared, |s| s.history.events.push(format!("{now:>6} ms  partition {a:?} | {b:?} repaired")));
                    false
                }
                Fault::Hold(a, b, until) if all || *until <= now => {
                    for (x, y) in pairs(a, b) {
                        sim.release(host_name(x), host_name(y));
                    }
                    with(&shared, |s| s.history.events.push(format!("{now:>6} ms  hold {a:?} | {b:?} released")));
                    false
                }
                _ => true,
            });
        };
        for now in 0..scenario.chaos_ms {
            step(&mut sim, seed);
            end_faults(&mut sim, &mut faults, now, false);
            for (&node, _) in down.iter().filter(|&(_, &at)| at <= now) {
                sim.bounce(host_name(node));
                with(&shared, |s| s.history.events.push(format!("{now:>6} ms  node {node} restarts")));
            }
            down.retain(|_, &mut at| at > now);
            if faults.is_empty() && rng.chance(scenario.partition) {
                let (side, rest) = split(&mut rng, &hosts);
                for (x, y) in pairs(&side, &rest) {
                    sim.partition(host_name(x), host_name(y));
                }
                let until = now + rng.between(scenario.partition_ms.0, scenario.partition_ms.1);
                with(&shared, |s| {
                    s.history.partitions += 1;
                    s.history.events.push(format!("{now:>6} ms  partition {side:?} | {rest:?} until {until}"));
                });
                faults.push(Fault::Partition(side, rest, until));
            } else if faults.is_empty() && rng.chance(scenario.hold) {
                let (side, rest) = split(&mut rng, &hosts);
                for (x, y) in pairs(&side, &rest) {
                    sim.hold(host_name(x), host_name(y));
                }
                let until = now + rng.between(scenario.hold_ms.0, scenario.hold_ms.1);
                with(&shared, |s| {
                    s.history.holds += 1;
                    s.history.events.push(format!("{now:>6} ms  hold {side:?} | {rest:?} until {until}"));
                });
                faults.push(Fault::Hold(side, rest, until));
            }
            let voters_down = down.keys().filter(|&&n| n < scenario.voters).count() as u64;
            if rng.chance(scenario.crash) {
                let leader = with(&shared, |s| s.nodes.iter().find(|(_, v)| v.leading).map(|(&n, _)| n));
                let victim = match leader {
                    Some(l) if rng.chance(0.5) => l,
                    _ => rng.below(scenario.hosts()),
                };
                let voter = victim < scenario.voters;
                if !down.contains_key(&victim) && (!voter || voters_down < (scenario.voters - 1) / 2) {
                    sim.crash(host_name(victim));
                    with(&shared, |s| {
                        s.nodes.remove(&victim);
                        s.history.crashes += 1;
                        s.history.events.push(format!("{now:>6} ms  node {victim} crashes"));
                    });
                    down.insert(victim, now + rng.between(scenario.down_ms.0, scenario.down_ms.1));
                }
            }
        }
        // calm: every fault ends, the clients stop, the nodes converge
        end_faults(&mut sim, &mut faults, u64::MAX, true);
        sim.set_fail_rate(0.0);
        for node in std::mem::take(&mut down).into_keys() {
            sim.bounce(host_name(node));
        }
        with(&shared, |s| {
            s.stop_clients = true;
            s.history.events.push(format!("{:>6} ms  calm", scenario.chaos_ms));
        });
        let mut calm = 0;
        loop {
            step(&mut sim, seed);
            calm += 1;
            if calm % 10 == 0 && converged(&shared, scenario.voters) {
                break;
            }
            assert!(calm < scenario.calm_ms, "seed {seed}: the nodes did not converge in {calm} ms of calm: {:?}", views(&shared));
        }
        let mut shared = shared.lock().expect("shared lock");
        let mut history = std::mem::take(&mut shared.history);
        history.seed = seed;
        history.voters = scenario.voters;
        history.calm_ms = calm;
        for (&node, view) in &shared.nodes {
            let log: Vec<Applied> = history.applied.iter().filter(|a| a.node == node && a.run == view.run).cloned().collect();
            history.final_states.insert(node, (view.applied, log.last().map_or(0, |a| a.digest)));
            history.final_logs.insert(node, log);
        }
        history
    }
}

fn views(shared: &SharedRef) -> BTreeMap<u64, NodeView> {
    with(shared, |s| s.nodes.clone())
}

/// Every voter is up, one leads, and each applied all the leader has (nothing in flight).
fn converged(shared: &SharedRef, voters: u64) -> bool {
    with(shared, |s| {
        let clients_done = s.stop_clients;
        let up: Vec<&NodeView> = (0..voters).filter_map(|n| s.nodes.get(&n)).collect();
        let Some(leader) = up.iter().find(|v| v.leading) else { return false };
        clients_done
            && up.len() as u64 == voters
            && leader.last == leader.commit
            && up.iter().all(|v| v.applied == leader.commit && v.commit == leader.commit)
    })
}

/// A random non-empty proper subset of `hosts`, and the rest.
fn split(rng: &mut Rng, hosts: &[u64]) -> (Vec<u64>, Vec<u64>) {
    loop {
        let (side, rest): (Vec<u64>, Vec<u64>) = hosts.iter().partition(|_| rng.chance(0.4));
        if !side.is_empty() && !rest.is_empty() {
            return (side, rest);
        }
    }
}

fn pairs<'a>(a: &'a [u64], b: &'a [u64]) -> impl Iterator<Item = (u64, u64)> + 'a {
    a.iter().flat_map(move |&x| b.iter().map(move |&y| (x, y)))
}

/// A run's history for `seed` with the scenario's default for that seed, after checking that
/// the run exercised what it should (so an invariant is not checked over an idle run).
pub fn history(seed: u64) -> History {
    let started = std::time::Instant::now();
    let history = Sim::run(seed, Scenario::for_seed(seed));
    if std::env::var("SIM_TRACE").is_ok() {
        for e in &history.events {
            eprintln!("seed {seed}: {e}");
        }
    }
    eprintln!(
        "seed {seed}: {} voters, {} submitted, {} acknowledged, {} unavailable, {} other refusals, {} routed ({} retries after NotLeader, {} forwarded), \
         {} not-leader answers, {} lost leads, {} terms led, {} partitions, {} holds, {} crashes, calm {} ms; {:.1} s",
        history.voters,
        history.submitted,
        history.acknowledged.len(),
        history.unavailable,
        history.refused_other,
        history.routed,
        history.asks.saturating_sub(history.routed),
        history.forwarded,
        history.not_leader,
        history.lost_lead,
        history.leaders.len(),
        history.partitions,
        history.holds,
        history.crashes,
        history.calm_ms,
        started.elapsed().as_secs_f64()
    );
    assert!(history.acknowledged.len() >= 20, "seed {seed}: only {} commands acknowledged", history.acknowledged.len());
    assert!(!history.leaders.is_empty(), "seed {seed}: no leader ever");
    history
}
