//! Partitions at run time: for each partition a Raft group, a RocksDB state, the engine on its
//! own processing thread, a scheduler for due work, and snapshots.
//!
//! Owns: the command path from a submitted command to a committed, applied, answered batch;
//! recovery; job streams and long-poll notification; partition metrics. Does not own: gRPC
//! (the gateway) or the meaning of records (the engine).
//!
//! Contract: [`Broker::submit`] answers only after the records that answer the command are
//! committed in the partition's log and applied to its state. A partition with as many client
//! commands in flight as its adaptive limit ([`backpressure`]), or with a full queue, answers
//! [`BrokerError::Overloaded`] at once (back pressure) instead of queueing without bound.
//!
//! In a cluster ([`BrokerConfig::cluster`]), each partition this broker holds a replica of is
//! one voter of a Raft group with the partition's other replicas ([`cluster`] places them),
//! over one [`waggle_replication::net::RaftNetwork`] on the broker's internal address. The
//! leader processes and proposes as the standalone node does (its partition thread waits for
//! each batch's commit, stepping and ticking meanwhile); followers commit the rows the leader
//! logged with each entry (an entry without them is replayed by its events, C1). [`Broker::submit`] routes a command to the broker that leads its partition
//! ([`forward`]), retrying while it is certainly not taken (no leader yet, a leader that refused
//! it unprocessed); one whose leader loses the lead after its batch was proposed and before it
//! commits gets [`BrokerError::Unavailable`] (its batch is discarded; Zeebe's behaviour).
//! Leadership follows placement priorities, and moves on request ([`Broker::rebalance`]) and on
//! shutdown ([`Broker::hand_over`]).
//!
//! Commands between partitions go through in-process queues to a partition led on the same
//! broker, and over the network ([`relay`]) to one led elsewhere.

mod backpressure;
pub mod backup;
pub mod cluster;
mod delivery;
pub mod disk;
pub mod export;
pub mod forward;
mod members;
mod metrics;
mod partition;
mod relay;
pub mod remote_cluster;
pub mod remote_streams;
mod scaling;
mod scheduler;
mod streams;
pub mod topology;
mod topology_scale;

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use tokio::sync::{broadcast, oneshot};
use waggle_engine::Command;
use waggle_protocol::value::IncidentRecord;
use waggle_protocol::{partition_of, PartitionId, Record, RecordValue, ValueType};

pub use backpressure::BackpressureConfig;
pub use cluster::ClusterSpec;
pub use metrics::BrokerMetrics;
pub use partition::{PartitionStatus, StateDigest, FOLLOWER, LEADER};
pub use remote_cluster::RemoteCluster;
pub use remote_streams::JobsAvailable;
use scaling::{load_topology, replica_setup};
pub use scaling::{ChangeError, ChangeRequest, PlannedChange};
pub use streams::{JobStreamRegistry, LocalStream, PushedJob, StreamId, StreamSettings};
pub use waggle_engine::{EngineLimits, ParseLimits};

/// How long a deployment's answer waits for the other partitions to acknowledge it.
const DISTRIBUTION_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// How to run the broker.
#[derive(Debug, Clone)]
pub struct BrokerConfig {
    pub data_dir: PathBuf,
    pub partitions: u16,
    /// Commands waiting per partition before RESOURCE_EXHAUSTED.
    pub queue_capacity: usize,
    /// The adaptive limit on each partition's client commands in flight.
    pub backpressure: BackpressureConfig,
    /// Take a snapshot (and compact the log behind it) after this many applied entries.
    pub snapshot_every_entries: u64,
    /// What one command may ask of a partition's engine.
    pub limits: EngineLimits,
    /// The cluster this broker is part of; `None` runs the standalone node (every partition a
    /// single voter).
    pub cluster: Option<ClusterSpec>,
    /// The exporters run on every partition led here (none by default).
    pub export: export::ExportConfig,
    /// Disk watermarks: below them, client commands are refused ([`disk`]).
    pub disk: disk::DiskConfig,
    /// Where backups go, a directory or an S3-compatible bucket ([`backup`]); `None`: backups
    /// are refused.
    pub backup_store: Option<backup::StoreConfig>,
    /// Mutual TLS on every connection between brokers ([`waggle_replication::tls`]); `None`:
    /// plaintext. Only used in a cluster.
    pub internal_tls: Option<Arc<waggle_replication::tls::MutualTls>>,
}

impl Default for BrokerConfig {
    fn default() -> Self {
        Self {
            data_dir: PathBuf::from("data"),
            partitions: 1,
            queue_capacity: 4096,
            backpressure: BackpressureConfig::default(),
            snapshot_every_entries: 10_000,
            limits: EngineLimits::default(),
            cluster: None,
            export: export::ExportConfig::default(),
            disk: disk::DiskConfig::default(),
            backup_store: None,
            internal_tls: None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    #[error("the partition is overloaded; retry later")]
    Overloaded,
    /// Refused: the data folder's free space is below a disk watermark ([`disk`]).
    #[error("Cannot accept requests for partition {0}. Broker is out of disk space")]
    DiskSpaceLow(PartitionId),
    #[error("partition {0} is not available")]
    Unavailable(PartitionId),
    /// Not taken: this broker does not lead the partition (a command may be sent to its leader).
    #[error("partition {0} is not led by this broker")]
    NotLeader(PartitionId),
    #[error("no such partition {0}")]
    NoSuchPartition(PartitionId),
    #[error("failed to start partition {partition}: {reason}")]
    Start { partition: PartitionId, reason: String },
    #[error("failed to join the cluster: {0}")]
    Cluster(String),
    #[error("the backup store: {0}")]
    BackupStore(String),
}

/// Where a client command's answer goes: the record that answers it, or [`NotTaken`].
pub(crate) type Reply = oneshot::Sender<Result<Record, NotTaken>>;

/// A command the partition refused before processing it (its replica does not lead, or is
/// handing its leadership over): it was certainly not taken and may go to the next leader. A
/// reply dropped unanswered means the command's fate is unknown (its batch was proposed and the
/// lead lost before it committed).
#[derive(Debug)]
pub(crate) struct NotTaken;

/// A command on its way to a partition's processing thread.
pub(crate) struct Submission {
    pub command: Command,
    pub reply: Option<Reply>,
    /// From the scheduler (timers, time-outs): processed a few per batch, so that a burst of
    /// due work does not hold back client commands.
    pub scheduled: bool,
    /// A client command's slot of the partition's back-pressure limit, given back when the
    /// batch that processed it reaches the gateway's runtime, before its answers are handed over.
    pub permit: Option<backpressure::Permit>,
}

/// Every partition's command queue on this broker, by partition id - 1 (`None` for a partition
/// this broker does not hold: empty until all partitions started, and changing as replicas
/// start and stop at run time), for commands one partition sends another (message
/// subscriptions).
pub(crate) type Peers = Arc<RwLock<Vec<Option<Peer>>>>;

/// A partition on this broker, as the others send it commands.
pub(crate) struct Peer {
    pub tx: std::sync::mpsc::SyncSender<Submission>,
    /// Whether it leads here (always, standalone): if not, its commands go to the broker
    /// that leads it ([`relay`]).
    pub leading: Arc<std::sync::atomic::AtomicBool>,
}

/// The running broker: every partition of this node.
pub struct Broker {
    /// By partition id - 1; `None` for a partition of the cluster this broker does not hold
    /// (replicas start and stop at run time as the cluster topology says: [`topology`]).
    partitions: RwLock<Vec<Option<Arc<partition::PartitionHandle>>>>,
    /// The cluster's partition counts (they grow with the cluster topology).
    counts: Arc<PartitionCounts>,
    /// How the broker was started (a replica started at run time is started with it).
    config: BrokerConfig,
    /// Every partition's command queue here, for the partitions' commands to each other.
    peers: Peers,
    /// Where commands for partitions led on other brokers go (in a cluster).
    relay: Option<Arc<relay::Relay>>,
    /// Held while replicas are started or stopped (one reconciliation at a time).
    reconciling: Mutex<()>,
    round_robin: AtomicUsize,
    streams: Arc<JobStreamRegistry>,
    jobs_available: broadcast::Sender<String>,
    /// The notices other brokers passed on (in a cluster), kept apart from this broker's own,
    /// which alone it passes on (see [`JobsAvailable`]).
    relayed_jobs_available: broadcast::Sender<String>,
    metrics: Arc<BrokerMetrics>,
    /// The cluster's Raft network (`None` standalone, and once shut down).
    network: Mutex<Option<waggle_replication::net::RaftNetwork>>,
    /// In a cluster: the members, the client of their `CommandApi` and the job stream sessions.
    links: Option<ClusterLinks>,
    /// A runtime of the broker's own for the network, when it was started outside one.
    _runtime: Option<OwnRuntime>,
    /// The data folder's free space against the disk watermarks.
    disk: Arc<disk::DiskMonitor>,
    /// Where backups go, if configured.
    backup_store: Option<backup::BackupStore>,
}

/// The cluster's partition counts as this broker's topology gives them, read by the gateway's
/// routing and by each partition for every batch (standalone: the configured count, all three).
#[derive(Debug, Default)]
pub(crate) struct PartitionCounts {
    /// Every partition of the cluster (those bootstrapping after a scale-up too).
    all: std::sync::atomic::AtomicU16,
    /// The partitions new process instances are routed to round-robin: the new ones only once
    /// they hold every deployment.
    routed: std::sync::atomic::AtomicU16,
    /// The partitions messages are spread over by correlation key (the old count until the
    /// keys moved to the grown one).
    messages: std::sync::atomic::AtomicU16,
}

impl PartitionCounts {
    /// All three `count`.
    pub(crate) fn fixed(count: u16) -> Arc<Self> {
        let counts = Arc::new(PartitionCounts::default());
        counts.store(count, count, count);
        counts
    }

    fn store(&self, all: u16, routed: u16, messages: u16) {
        self.all.store(all.max(1), Ordering::SeqCst);
        self.routed.store(routed.clamp(1, all.max(1)), Ordering::SeqCst);
        self.messages.store(messages.clamp(1, all.max(1)), Ordering::SeqCst);
    }

    /// The counts `t` gives.
    pub(crate) fn follow(&self, t: &topology::Topology) {
        self.store(t.ready_partitions(), t.routed_partitions(), t.message_partitions());
    }

    pub(crate) fn all(&self) -> u16 {
        self.all.load(Ordering::SeqCst)
    }

    pub(crate) fn routed(&self) -> u16 {
        self.routed.load(Ordering::SeqCst)
    }

    pub(crate) fn messages(&self) -> u16 {
        self.messages.load(Ordering::SeqCst)
    }
}

/// What a broker in a cluster uses to reach the others (see [`forward`] and [`remote_streams`]).
struct ClusterLinks {
    spec: ClusterSpec,
    /// Every broker's internal address as known now (the contact points', and the gossip's).
    book: Arc<cluster::AddressBook>,
    forwarder: Arc<forward::Forwarder>,
    runtime: tokio::runtime::Handle,
    announcer: Mutex<Option<remote_streams::StreamAnnouncer>>,
    /// How connections to the others are made: mutual TLS when configured, else TCP.
    connector: Option<forward::Connector>,
    /// The cluster topology as this broker knows it (persisted in the data folder).
    topology: Mutex<topology::Topology>,
    /// Whether this broker carries out a topology change now.
    coordinating: std::sync::atomic::AtomicBool,
}

/// How long a command waits for its partition to have a leader it can reach (an election, a
/// failover), retrying the leader it learns of: Zeebe's gateway retries within the request's
/// deadline; the command is sent again only when it was certainly not taken.
pub(crate) const ROUTE_WINDOW: std::time::Duration = std::time::Duration::from_secs(8);
/// Pause between two tries of a command whose partition has no leader to take it yet.
pub(crate) const ROUTE_RETRY: std::time::Duration = std::time::Duration::from_millis(25);
/// How long a forwarded command waits for its answer at least (its routing window may be
/// shorter): a creation awaiting its result waits for the instance to complete, and the
/// client's own deadline, when it sends one, ends the call sooner.
pub(crate) const FORWARD_ANSWER_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// The broker, once started, for the services on its internal port that are bound before it.
#[derive(Default)]
struct LateBroker(std::sync::OnceLock<std::sync::Weak<Broker>>);

impl LateBroker {
    fn get(&self) -> Option<Arc<Broker>> {
        self.0.get().and_then(std::sync::Weak::upgrade)
    }
}

impl forward::LocalSubmit for LateBroker {
    fn rebalance_local(&self) -> Vec<PartitionId> {
        self.get().map(|b| b.rebalance_here()).unwrap_or_default()
    }

    fn topology_local(&self, topology: String) -> Result<(String, String), String> {
        match self.get() {
            Some(broker) => broker.topology_here(&topology),
            None => Err("the broker is starting".into()),
        }
    }

    fn change_local(&self, request: String) -> Result<String, String> {
        match self.get() {
            Some(broker) => Ok(broker.change_forwarded(&request)),
            None => Err("the broker is starting".into()),
        }
    }

    fn submit_local(&self, partition: PartitionId, command: Command) -> forward::BoxFuture<'_, Result<Record, BrokerError>> {
        Box::pin(async move {
            match self.get() {
                Some(broker) => broker.submit_here(partition, command).await,
                None => Err(BrokerError::NotLeader(partition)),
            }
        })
    }

    fn deploy_local(&self, command: Command) -> forward::BoxFuture<'_, Result<Record, BrokerError>> {
        Box::pin(async move {
            match self.get() {
                Some(broker) => broker.deploy_here(command).await,
                None => Err(BrokerError::NotLeader(1)),
            }
        })
    }
}

/// A tokio runtime the broker made; dropped without waiting for its tasks (so that dropping
/// the broker inside another runtime does not panic).
struct OwnRuntime(Option<tokio::runtime::Runtime>);

impl Drop for OwnRuntime {
    fn drop(&mut self) {
        if let Some(runtime) = self.0.take() {
            runtime.shutdown_background();
        }
    }
}

/// Starts the cluster's network on this node's internal address, with every other member as a
/// peer, on the current tokio runtime (it should be multi-threaded) or one of the broker's own.
fn start_network(
    spec: &ClusterSpec,
    tls: Option<Arc<waggle_replication::tls::MutualTls>>,
    late: Arc<LateBroker>,
    streams: Arc<JobStreamRegistry>,
    jobs_available: broadcast::Sender<String>,
) -> Result<(waggle_replication::net::RaftNetwork, Option<OwnRuntime>, tokio::runtime::Handle), BrokerError> {
    spec.validate().map_err(|e| BrokerError::Cluster(e.to_string()))?;
    let (handle, own) = match tokio::runtime::Handle::try_current() {
        Ok(handle) => (handle, None),
        Err(_) => {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name("raft-network")
                .enable_all()
                .build()
                .map_err(|e| BrokerError::Cluster(e.to_string()))?;
            (runtime.handle().clone(), Some(OwnRuntime(Some(runtime))))
        }
    };
    let addr = spec.address();
    let id = cluster::raft_id(spec.node_id);
    // bound from a thread outside any runtime: `Broker::start` may run inside one
    // the internal port also serves forwarded commands and job stream sessions
    let yielding = late.clone();
    let yielder: remote_streams::Yielder = Arc::new(move |jobs| {
        if let Some(broker) = yielding.get() {
            broker.yield_jobs(jobs);
        }
    });
    let services = move |routes: tonic::service::Routes| {
        routes.add_service(forward::service(late)).add_service(remote_streams::JobStreamsService::new(streams, yielder, jobs_available))
    };
    let bound = std::thread::scope(|s| {
        s.spawn(|| handle.block_on(waggle_replication::net::RaftNetwork::bind_secured(id, addr, tls, services))).join()
    })
    .map_err(|_| BrokerError::Cluster("binding the internal address panicked".into()))?
    .map_err(|e| BrokerError::Cluster(format!("binding the internal address {addr}: {e}")))?;
    for (node, peer) in spec.other_nodes() {
        bound.add_peer(cluster::raft_id(node), peer);
    }
    Ok((bound, own, handle))
}

impl Broker {
    /// Opens (recovering) every partition this node holds and starts its threads. In a
    /// cluster, also starts the Raft network on this node's internal address (on the current
    /// tokio runtime, which must then be multi-threaded, or on a runtime of the broker's own
    /// when there is none); its partitions lead or follow as their groups elect.
    pub fn start(config: BrokerConfig, registry: &prometheus::Registry) -> Result<Arc<Broker>, BrokerError> {
        let metrics = Arc::new(BrokerMetrics::new(registry));
        let _ = std::fs::create_dir_all(&config.data_dir);
        let disk = disk::DiskMonitor::start(config.disk.clone(), &config.data_dir, registry);
        let streams = Arc::new(JobStreamRegistry::default());
        let (jobs_available, _) = broadcast::channel(1024);
        let late = Arc::new(LateBroker::default());
        let counts = PartitionCounts::fixed(config.partitions.max(1));
        let (network, runtime, links) = match &config.cluster {
            None => (None, None, None),
            Some(spec) => {
                let topology = load_topology(&config.data_dir, spec, config.partitions.max(1))?;
                counts.follow(&topology);
                let tls = config.internal_tls.clone();
                let (network, runtime, handle) = start_network(spec, tls.clone(), late.clone(), streams.clone(), jobs_available.clone())?;
                let connector = tls.as_ref().map(|tls| tls.connector());
                let forwarder = Arc::new(connector.clone().map_or_else(forward::Forwarder::default, forward::Forwarder::with_connector));
                let links = ClusterLinks {
                    spec: spec.clone(),
                    book: Arc::new(cluster::AddressBook::new(spec)),
                    forwarder,
                    runtime: handle,
                    announcer: Mutex::new(None),
                    connector,
                    topology: Mutex::new(topology),
                    coordinating: Default::default(),
                };
                (Some(network), runtime, Some(links))
            }
        };
        // every partition the topology names (one being bootstrapped too)
        let partition_count = links.as_ref().map_or(counts.all(), |l| l.topology.lock().expect("topology lock").partition_count().max(1));
        let relay = match (&links, &network) {
            (Some(links), Some(network)) => Some(Arc::new(relay::Relay::new(links.book.clone(), partition_count, network))),
            _ => None,
        };
        let mut partitions = Vec::new();
        let peers: Peers = Arc::default();
        for id in 1..=partition_count {
            let replica = match (&links, &network, &relay) {
                (Some(links), Some(network), Some(relay)) => {
                    let topology = links.topology.lock().expect("topology lock").clone();
                    match replica_setup(&links.spec, &topology, id, network, relay) {
                        Some(setup) => Some(setup),
                        None => {
                            partitions.push(None);
                            continue;
                        }
                    }
                }
                _ => None,
            };
            let handle = partition::start(
                id,
                &config,
                streams.clone(),
                jobs_available.clone(),
                metrics.clone(),
                peers.clone(),
                counts.clone(),
                replica,
            )?;
            partitions.push(Some(Arc::new(handle)));
        }
        *peers.write().expect("peers lock") = partitions.iter().map(|p| p.as_ref().map(|p| p.peer())).collect();
        let backup_store = match &config.backup_store {
            Some(c) => Some(backup::BackupStore::open(c).map_err(|e| BrokerError::BackupStore(e.to_string()))?),
            None => None,
        };
        let broker = Arc::new(Broker {
            partitions: RwLock::new(partitions),
            counts,
            config,
            peers,
            relay,
            reconciling: Mutex::new(()),
            round_robin: AtomicUsize::new(0),
            streams,
            jobs_available,
            relayed_jobs_available: broadcast::channel(1024).0,
            metrics,
            network: Mutex::new(network),
            links,
            _runtime: runtime,
            disk,
            backup_store,
        });
        let _ = late.0.set(Arc::downgrade(&broker));
        broker.start_backup_uploads()?;
        if let Some(links) = &broker.links {
            // this broker's clients' job streams get the jobs of partitions led elsewhere
            let others = links.book.others().into_iter().map(|(_, addr)| addr).collect();
            let announcer = remote_streams::StreamAnnouncer::start(
                &links.runtime,
                broker.streams.clone(),
                others,
                broker.relayed_jobs_available.clone(),
                links.connector.clone(),
            );
            *links.announcer.lock().expect("announcer lock") = Some(announcer);
            // the membership changes the topology asks of the partitions held here, and a
            // change this broker was carrying out before it stopped
            broker.reconcile();
            links.runtime.spawn(broker.clone().coordinate());
            // and the topology of a change that completed while this broker was down
            links.runtime.spawn(Broker::catch_up_topology(Arc::downgrade(&broker)));
        }
        Ok(broker)
    }

    /// The cluster's partition count (those this broker holds and those it does not; those
    /// a scale-up is bootstrapping too).
    pub fn partition_count(&self) -> u16 {
        self.counts.all()
    }

    /// The partitions new process instances go to round-robin ([`Self::next_partition`]): all
    /// of them, but while a scale-up's new partitions do not hold every deployment yet.
    pub fn routed_partition_count(&self) -> u16 {
        self.counts.routed()
    }

    /// The partitions messages are spread over by correlation key: the count before the cluster
    /// grew until the correlation keys moved to the grown count (`AWAIT_RELOCATION_COMPLETION`).
    pub fn message_partition_count(&self) -> u16 {
        self.counts.messages()
    }

    /// This broker's handle of `partition`: `NoSuchPartition` outside the cluster's
    /// partitions, `Unavailable` for one this broker does not hold.
    fn handle(&self, partition: PartitionId) -> Result<Arc<partition::PartitionHandle>, BrokerError> {
        match self.partitions.read().expect("partitions lock").get((partition as usize).wrapping_sub(1)) {
            None => Err(BrokerError::NoSuchPartition(partition)),
            Some(None) => Err(BrokerError::Unavailable(partition)),
            Some(Some(handle)) => Ok(handle.clone()),
        }
    }

    /// The partitions held here now.
    fn hosted(&self) -> Vec<Arc<partition::PartitionHandle>> {
        self.partitions.read().expect("partitions lock").iter().flatten().cloned().collect()
    }

    /// Every partition's handle here now, by partition id - 1.
    fn partitions(&self) -> Vec<Option<Arc<partition::PartitionHandle>>> {
        self.partitions.read().expect("partitions lock").clone()
    }

    /// The node id of `partition`'s leader as this broker knows it (itself when it leads), if
    /// it holds the partition and knows of one; the standalone node is node 0.
    pub fn leader_of(&self, partition: PartitionId) -> Option<u64> {
        let status = self.handle(partition).ok()?.status();
        status.leader
    }

    /// Whether this broker leads `partition` and takes commands for it now.
    pub fn leads(&self, partition: PartitionId) -> bool {
        self.handle(partition).is_ok_and(|h| h.leads())
    }

    /// A digest of `partition`'s committed state on this broker (diagnostics: it reads every
    /// row). Replicas at the same applied index have the same digest.
    pub fn state_digest(&self, partition: PartitionId) -> Result<StateDigest, BrokerError> {
        Ok(self.handle(partition)?.state_digest())
    }

    /// The last backup checkpoint (CHECKPOINT CREATED) in this broker's replica of
    /// `partition`'s committed state, if any.
    pub fn last_checkpoint(&self, partition: PartitionId) -> Result<Option<waggle_protocol::value::CheckpointRecord>, BrokerError> {
        Ok(self.handle(partition)?.last_checkpoint())
    }

    /// The next partition for work that is not bound to a key (round robin).
    pub fn next_partition(&self) -> PartitionId {
        (self.round_robin.fetch_add(1, Ordering::Relaxed) % usize::from(self.counts.routed())) as PartitionId + 1
    }

    /// The partition of a key, or an error for a key that no partition of this node owns.
    pub fn partition_of_key(&self, key: i64) -> Option<PartitionId> {
        let p = partition_of(key);
        (p >= 1 && p <= self.partition_count()).then_some(p)
    }

    /// The partition a message lives on: a hash of its correlation key, as in Zeebe.
    pub fn partition_of_correlation_key(&self, correlation_key: &str) -> PartitionId {
        waggle_protocol::keys::partition_of_correlation_key(correlation_key, u32::from(self.counts.messages()))
    }

    /// Submits a command and waits for the record that answers it (an event or a rejection).
    /// In a cluster, a command for a partition led by another broker is forwarded to it, and
    /// tried again on the next leader while none takes it (at most [`ROUTE_WINDOW`]).
    pub async fn submit(&self, partition: PartitionId, command: Command) -> Result<Record, BrokerError> {
        match &self.links {
            None => self.submit_here(partition, command).await,
            Some(links) => not_taken_is_unavailable(self.route(links, partition, false, command, ROUTE_WINDOW).await),
        }
    }

    /// As [`Self::submit`], routing for at most `window` in a cluster: [`BrokerError::NotLeader`]
    /// when no broker took the command by then (certainly not taken: it may go to another
    /// partition).
    pub async fn submit_within(
        &self,
        partition: PartitionId,
        command: Command,
        window: std::time::Duration,
    ) -> Result<Record, BrokerError> {
        match &self.links {
            None => self.submit_here(partition, command).await,
            Some(links) => self.route(links, partition, false, command, window).await,
        }
    }

    /// Whether this broker is a member of a cluster (its commands may be routed to others).
    pub fn is_clustered(&self) -> bool {
        self.links.is_some()
    }

    /// Sends `command` to whichever broker leads `partition` (this one included), retrying while
    /// the answer says the command was certainly not taken (no leader yet, a leader that is not
    /// one any more, a broker that cannot be reached).
    /// [`BrokerError::NotLeader`] once `window` passed with the command taken by none.
    async fn route(
        &self,
        links: &ClusterLinks,
        partition: PartitionId,
        deploy: bool,
        command: Command,
        window: std::time::Duration,
    ) -> Result<Record, BrokerError> {
        forward::route(self, &links.forwarder, &members::Routing(links), partition, deploy, command, window, ROUTE_RETRY).await
    }

    /// Submits to this broker's own replica of `partition`: `NotLeader` when it does not lead it.
    async fn submit_here(&self, partition: PartitionId, command: Command) -> Result<Record, BrokerError> {
        let handle = match self.handle(partition) {
            Err(BrokerError::Unavailable(p)) => return Err(BrokerError::NotLeader(p)),
            other => other?,
        };
        if !handle.leads() {
            return Err(BrokerError::NotLeader(partition));
        }
        if !self.disk.admits(&command) {
            return Err(BrokerError::DiskSpaceLow(partition));
        }
        if !handle.export_gate.admits(&command) {
            return Err(BrokerError::Overloaded);
        }
        let permit = Some(handle.limiter.try_acquire(&command).ok_or(BrokerError::Overloaded)?);
        let (tx, rx) = oneshot::channel();
        handle.send(Submission { command, reply: Some(tx), scheduled: false, permit })?;
        match rx.await {
            Ok(Ok(record)) => Ok(record),
            Ok(Err(NotTaken)) => Err(BrokerError::NotLeader(partition)),
            Err(_) => Err(BrokerError::Unavailable(partition)),
        }
    }

    /// Deploys on partition 1, which distributes the deployment (same keys and versions) to
    /// every other partition; answers once every partition has it (at most
    /// [`DISTRIBUTION_WAIT`]: the distribution goes on after that, until acknowledged), so any
    /// partition can start the new processes at once.
    pub async fn deploy(&self, command: Command) -> Result<Record, BrokerError> {
        match &self.links {
            None => self.deploy_here(command).await,
            Some(links) => not_taken_is_unavailable(self.route(links, 1, true, command, ROUTE_WINDOW).await),
        }
    }

    /// [`Self::deploy`] on this broker's replica of partition 1.
    async fn deploy_here(&self, command: Command) -> Result<Record, BrokerError> {
        let answer = self.submit_here(1, command).await?;
        if answer.rejection.is_some() || self.partition_count() == 1 {
            return Ok(answer);
        }
        let deadline = std::time::Instant::now() + DISTRIBUTION_WAIT;
        let first = self.handle(1)?;
        while first.distributing(ValueType::Deployment, answer.key) && std::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(2)).await;
        }
        Ok(answer)
    }

    pub fn job_streams(&self) -> &Arc<JobStreamRegistry> {
        &self.streams
    }

    /// Sends jobs that were pushed to a job stream but never reached its client (the stream
    /// closed with them buffered) back to the pool at once (JOB YIELD), instead of leaving them
    /// activated until their time-out: a long poll or another stream takes them.
    pub fn yield_jobs(&self, jobs: impl IntoIterator<Item = PushedJob>) {
        for job in jobs {
            let Some(partition) = self.partition_of_key(job.key) else { continue };
            let command = Command::new(job.key, waggle_protocol::Intent::Yield, waggle_protocol::RecordValue::Job(job.record));
            // in a cluster, a job of a partition led elsewhere goes back through its leader
            if let Some(links) = &self.links {
                match self.leader_of(partition).map(|node| (node, links.book.get(node))) {
                    Some((node, Some(to))) if node != links.spec.node_id => {
                        let forwarder = links.forwarder.clone();
                        links.runtime.spawn(async move {
                            if let Err(e) = forwarder.submit(to, partition, false, command, std::time::Duration::from_secs(5)).await {
                                tracing::warn!(partition, error = %e, "a pushed job could not be yielded: it returns to the pool at its time-out");
                            }
                        });
                        continue;
                    }
                    _ => {}
                }
            }
            let submission = Submission { command, reply: None, scheduled: false, permit: None };
            if let Err(e) = self.handle(partition).and_then(|h| h.send(submission)) {
                tracing::warn!(job = job.key, error = %e, "a pushed job could not be yielded: it returns to the pool at its time-out");
            }
        }
    }

    /// Job types that became activatable (for long-polling activations): on this broker's
    /// partitions, and in a cluster on the others' too.
    pub fn subscribe_jobs_available(&self) -> JobsAvailable {
        JobsAvailable::new(self.jobs_available.subscribe(), self.links.as_ref().map(|_| self.relayed_jobs_available.subscribe()))
    }

    /// Where this broker's "jobs available" notices go out (for serving them to other brokers).
    pub fn jobs_available_sender(&self) -> broadcast::Sender<String> {
        self.jobs_available.clone()
    }

    pub fn metrics(&self) -> &Arc<BrokerMetrics> {
        &self.metrics
    }

    /// The partitions this broker holds.
    pub fn status(&self) -> Vec<PartitionStatus> {
        self.hosted().iter().map(|p| p.status()).collect()
    }

    /// Takes backup `id` of every partition of the cluster (Zeebe's `POST /actuator/backups`
    /// on any broker; see [`backup`]): refused unless the id is new in the store and greater
    /// than the last checkpoint of every partition this broker holds a replica of; then every
    /// part is recorded IN_PROGRESS and each partition's CHECKPOINT CREATE command is written
    /// through its leader (tried again on the next one after a failover, for at most
    /// [`CHECKPOINT_WINDOW`]). A partition whose checkpoint was not created (IGNORED, or no
    /// leader took it) is recorded FAILED. Returns once every command is answered; the leaders
    /// upload the parts (see [`Self::start_backup_uploads`]).
    pub async fn take_backup(self: &Arc<Self>, id: u64) -> Result<(), backup::BackupError> {
        if let Some(change) = self.cluster_topology().and_then(|t| t.pending).filter(|c| {
            c.pending.iter().any(|o| {
                matches!(
                    o,
                    topology::Operation::PartitionBootstrap { .. }
                        | topology::Operation::AwaitRedistributionCompletion { .. }
                        | topology::Operation::AwaitRelocationCompletion { .. }
                        | topology::Operation::UpdateRoutingState { .. }
                )
            })
        }) {
            return Err(backup::BackupError::Scaling(change.id));
        }
        let store = self.backup_store.clone().ok_or(backup::BackupError::NotConfigured)?;
        for p in 1..=self.partition_count() {
            let last = self.handle(p).ok().and_then(|h| h.last_checkpoint());
            if let Some(last) = last.filter(|c| c.checkpoint_id >= 0 && id <= c.checkpoint_id as u64) {
                return Err(backup::BackupError::CheckpointNotNewer { id, partition: p, last: last.checkpoint_id });
            }
        }
        let (count, node_id) = (self.partition_count(), self.node_id());
        let partitions: Vec<PartitionId> = (1..=count).collect();
        {
            // the layout `waggle restore` gives the brokers back ([`backup::BackupStore::topology`])
            let (store, partitions, topology) = (store.clone(), partitions.clone(), self.cluster_topology());
            tokio::task::spawn_blocking(move || {
                store.check_new(id)?;
                store.begin(id, count, &[], topology.as_ref())?;
                backup::begin_partitions(&store, id, node_id, &partitions)
            })
            .await
            .map_err(|e| backup::BackupError::Io(e.to_string()))??;
        }
        let answers = futures_util::future::join_all(partitions.iter().map(|&p| self.create_checkpoint(p, id))).await;
        for (p, answer) in partitions.into_iter().zip(answers) {
            if let Err(reason) = answer {
                tracing::warn!(backup = id, partition = p, reason = %reason, "the partition's checkpoint was not created");
                let store = store.clone();
                tokio::task::spawn_blocking(move || backup::fail_partition(&store, id, node_id, p, &reason))
                    .await
                    .map_err(|e| backup::BackupError::Io(e.to_string()))??;
            }
        }
        Ok(())
    }

    /// Writes backup `id`'s CHECKPOINT CREATE command into `partition`'s log through its
    /// leader, again while no leader answers (a try that was committed before its leader
    /// failed is answered IGNORED with this very checkpoint as the last: done).
    async fn create_checkpoint(&self, partition: PartitionId, id: u64) -> Result<(), String> {
        let deadline = std::time::Instant::now() + CHECKPOINT_WINDOW;
        loop {
            let value = waggle_protocol::value::CheckpointRecord { checkpoint_id: id as i64, checkpoint_position: -1 };
            let command = Command::new(-1, waggle_protocol::Intent::Create, RecordValue::Checkpoint(value));
            let error = match self.submit(partition, command).await {
                Ok(record) => {
                    return match (&record.value, record.intent) {
                        (RecordValue::Checkpoint(_), waggle_protocol::Intent::Created) => Ok(()),
                        (RecordValue::Checkpoint(last), _) if last.checkpoint_id == id as i64 => Ok(()),
                        (RecordValue::Checkpoint(last), _) => {
                            Err(format!("checkpoint {id} ignored: the partition's last checkpoint is {}", last.checkpoint_id))
                        }
                        _ => Err(format!("unexpected answer to the checkpoint command: {:?} {:?}", record.intent, record.rejection)),
                    };
                }
                Err(e) => e,
            };
            if std::time::Instant::now() >= deadline {
                return Err(format!("no leader took the partition's checkpoint: {error}"));
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    }

    /// This broker's node id (0 standalone).
    fn node_id(&self) -> u64 {
        self.links.as_ref().map_or(0, |l| l.spec.node_id)
    }

    /// Starts the thread that uploads, for each partition this broker leads, the backup copies
    /// its replica kept, and drops the copies whose parts are done ([`backup::upload_pending`],
    /// every [`BACKUP_SCAN`]); it ends with the broker. Nothing without a backup store.
    fn start_backup_uploads(self: &Arc<Self>) -> Result<(), BrokerError> {
        let Some(store) = self.backup_store.clone() else { return Ok(()) };
        let broker = Arc::downgrade(self);
        let node_id = self.node_id();
        std::thread::Builder::new()
            .name("backup-uploads".into())
            .spawn(move || loop {
                std::thread::sleep(BACKUP_SCAN);
                let Some(broker) = broker.upgrade() else { return };
                for (i, handle) in broker.partitions().into_iter().enumerate() {
                    let Some(handle) = handle else { continue };
                    let pending = handle.dir().join(backup::PENDING_DIR);
                    backup::upload_pending(&store, node_id, i as PartitionId + 1, &pending, || handle.leads());
                }
            })
            .map(|_| ())
            .map_err(|e| BrokerError::BackupStore(format!("starting the backup upload thread: {e}")))
    }

    /// The backup store, if one is configured.
    pub fn backup_store(&self) -> Option<&backup::BackupStore> {
        self.backup_store.as_ref()
    }

    /// The data folder's free space against the disk watermarks (see [`disk`]).
    pub fn disk(&self) -> disk::DiskStatus {
        self.disk.status()
    }

    /// Every exporter on every partition held here (see [`export`]).
    pub fn exporters(&self) -> Vec<export::ExporterStatus> {
        self.hosted().iter().flat_map(|p| p.exporters()).collect()
    }

    /// Open incidents, optionally of one process instance (read from committed state).
    pub fn incidents(&self, process_instance_key: Option<i64>) -> Vec<(i64, IncidentRecord)> {
        let handles: Vec<Arc<partition::PartitionHandle>> = match process_instance_key.and_then(|k| self.partition_of_key(k)) {
            Some(p) => self.handle(p).into_iter().collect(),
            None => self.hosted(),
        };
        handles
            .into_iter()
            .flat_map(|h| h.incidents())
            .filter(|(_, i)| process_instance_key.is_none_or(|k| i.process_instance_key == k))
            .collect()
    }

    /// Asks every partition this broker leads but is not the preferred leader of to hand its
    /// lead to the preferred one (best effort: a transfer to a replica that is down or far
    /// behind is abandoned after an election timeout). Returns the partitions asked.
    pub fn rebalance_here(&self) -> Vec<PartitionId> {
        let Some(links) = &self.links else { return Vec::new() };
        let mut asked = Vec::new();
        let topology = links.topology.lock().expect("topology lock").clone();
        for (i, handle) in self.partitions().iter().enumerate() {
            let (Some(handle), partition) = (handle, i as PartitionId + 1) else { continue };
            let Some(preferred) = topology.preferred_leader(partition) else { continue };
            if handle.leads() && preferred != links.spec.node_id {
                handle.transfer_leadership(cluster::raft_id(preferred));
                asked.push(partition);
            }
        }
        asked
    }

    /// Moves every partition's leadership back to its preferred broker (Zeebe's `POST
    /// /actuator/rebalance`): this broker's partitions, and the others' through their command
    /// API. Best effort, as Zeebe's: it answers once every broker was asked (those that cannot
    /// be reached within a second are skipped), not once the transfers are done.
    pub async fn rebalance(&self) -> Vec<PartitionId> {
        let mut asked = self.rebalance_here();
        let Some(links) = &self.links else { return asked };
        for (node, addr) in links.book.others() {
            match links.forwarder.rebalance(addr, REBALANCE_CALL).await {
                Ok(partitions) => asked.extend(partitions),
                Err(e) => tracing::warn!(node, error = %e, "a broker could not be asked to rebalance"),
            }
        }
        asked.sort_unstable();
        asked
    }

    /// Hands the lead of every partition this broker leads to another replica (the next in
    /// placement order, whose priority is highest among the rest), and waits until they took it
    /// or `within` passed: a broker that shuts down leaves its partitions led, so their clients
    /// see no election timeout.
    pub fn hand_over(&self, within: std::time::Duration) {
        let Some(links) = &self.links else { return };
        let mut handing = Vec::new();
        let topology = links.topology.lock().expect("topology lock").clone();
        let partitions = self.partitions();
        for (i, handle) in partitions.iter().enumerate() {
            let (Some(handle), partition) = (handle, i as PartitionId + 1) else { continue };
            let next = topology.voters(partition).into_iter().find(|&n| n != links.spec.node_id);
            if let (true, Some(next)) = (handle.leads(), next) {
                handle.transfer_leadership(cluster::raft_id(next));
                handing.push((partition, handle, next));
            }
        }
        let deadline = std::time::Instant::now() + within;
        // done once each partition knows another leader (between stepping down and hearing of the
        // new leader, it knows none)
        let led_elsewhere = |h: &Arc<partition::PartitionHandle>| h.status().leader.is_some_and(|l| l != links.spec.node_id);
        while !handing.iter().all(|(_, h, _)| led_elsewhere(h)) && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        for (partition, handle, next) in handing {
            match handle.status().leader {
                Some(leader) if leader != links.spec.node_id => tracing::info!(partition, leader, "handed the lead over"),
                _ => tracing::warn!(partition, to = next, "the lead was not handed over in time; the others elect a leader"),
            }
        }
    }

    /// Stops every partition after the batch in progress (nothing acknowledged is lost), then
    /// the cluster's network (its peers see this broker gone).
    pub fn shutdown(&self) {
        for p in self.hosted() {
            p.stop();
        }
        if let Some(links) = &self.links {
            drop(links.announcer.lock().expect("announcer lock").take());
        }
        drop(self.network.lock().expect("network lock").take());
        self.disk.stop();
    }
}

/// How long `rebalance` waits for each other broker's answer.
const REBALANCE_CALL: std::time::Duration = std::time::Duration::from_secs(1);
/// How long a backup's CHECKPOINT command is tried on a partition's leader (and the next one,
/// after a failover) before its part is recorded FAILED.
const CHECKPOINT_WINDOW: std::time::Duration = std::time::Duration::from_secs(30);
/// How often a broker looks for backup copies to upload or drop ([`backup::upload_pending`]).
const BACKUP_SCAN: std::time::Duration = std::time::Duration::from_millis(200);

/// A command no leader took within its routing window, as its caller reports it: unavailable.
fn not_taken_is_unavailable(answer: Result<Record, BrokerError>) -> Result<Record, BrokerError> {
    match answer {
        Err(BrokerError::NotLeader(p)) => Err(BrokerError::Unavailable(p)),
        other => other,
    }
}

impl forward::RouteLocal for Broker {
    fn leader_hint(&self, partition: PartitionId) -> Result<Option<u64>, BrokerError> {
        Ok(self.handle(partition)?.status().leader)
    }
}

impl forward::LocalSubmit for Broker {
    fn rebalance_local(&self) -> Vec<PartitionId> {
        self.rebalance_here()
    }

    fn submit_local(&self, partition: PartitionId, command: Command) -> forward::BoxFuture<'_, Result<Record, BrokerError>> {
        Box::pin(self.submit_here(partition, command))
    }

    fn deploy_local(&self, command: Command) -> forward::BoxFuture<'_, Result<Record, BrokerError>> {
        Box::pin(self.deploy_here(command))
    }
}
