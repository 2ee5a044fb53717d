//! One partition: recovery, the processing thread, commit, responses, side effects, snapshots.

mod membership;
mod snapshots;
mod supervise;

pub(crate) use supervise::{panic_message, StoreSlot};

use std::collections::{HashMap, VecDeque};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TryRecvError, TrySendError};
use std::sync::{Arc, Mutex, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tokio::sync::broadcast;
use waggle_engine::{BatchOutput, Command, Engine, ProcessingContext, RequestId, SideEffect, StateView};
use waggle_protocol::codec;
use waggle_protocol::value::IncidentRecord;
use waggle_protocol::{Intent, PartitionId, Record, RecordType, RecordValue, ValueType};
use waggle_replication::{Message, MessageType, RaftGroup, ReplicationError, SnapshotPacket};
use waggle_state::{KvRead, KvStore, Layered, Overlay, RocksStore, WriteSet};

use crate::backpressure::{Limiter, Permit, SaturationWindow};
use crate::delivery::{Deliverer, Delivery, Targets};
use crate::export::{ExportBounds, ExporterStatus};
use crate::metrics::{BrokerMetrics, PartitionMetrics};
use crate::relay::Relay;
use crate::streams::{JobStreamRegistry, PartitionStreams, PushCounts, PushedJob};
use crate::{scheduler, BrokerConfig, BrokerError, NotTaken, Peer, Peers, Reply, Submission};

const META_APPLIED_INDEX: &[u8] = b"X/applied_index";
/// The state's format version (its rows' keys and encodings; a snapshot, a checkpoint of the
/// state, carries it too), big-endian u32. State without it was written before it existed, in
/// version 1. Not part of [`StateDigest`].
const META_STATE_FORMAT: &[u8] = b"X/state_format";
/// The state format this build writes and reads.
pub const STATE_FORMAT_VERSION: u32 = 1;
/// Commands taken into one processing batch at most.
const MAX_BATCH_COMMANDS: usize = 512;
/// Scheduled commands (timers, time-outs) in a batch that also carries client commands: a
/// client command waits for at most this much due work.
const SCHEDULED_PER_BUSY_BATCH: usize = 8;
/// Scheduled commands in a batch without client commands.
const SCHEDULED_PER_IDLE_BATCH: usize = 16;
/// A command sent to another partition and not acknowledged after this long is sent again (the
/// receiver processes it once however often it arrives).
const RESEND_UNACKNOWLEDGED_AFTER: Duration = Duration::from_secs(10);
/// A replicated partition's Raft tick (see [`crate::cluster::replica_config`] for the timing in
/// ticks).
pub(crate) const RAFT_TICK: Duration = Duration::from_millis(50);
/// How long a replicated partition's leader waits for a client command before it looks at
/// its peers' messages (heartbeat answers, votes; while a batch waits for its commit it
/// waits for them instead).
const LEADER_POLL: Duration = Duration::from_millis(10);
/// How long a replicated leader with batches in flight waits for its peers' answers before it
/// looks at its queue again.
const IN_FLIGHT_POLL: Duration = Duration::from_millis(1);
/// A replicated leader's batches proposed and not yet committed, at most: it processes the next
/// batch while earlier ones replicate, up to this many entries (the environment variable
/// `WAGGLE_IN_FLIGHT_ENTRIES` overrides it, for measurements: 1 is one batch at a time) ...
const MAX_IN_FLIGHT_ENTRIES: usize = 4;
/// ... or this many bytes of entries.
const MAX_IN_FLIGHT_BYTES: usize = 8 << 20;

/// What the management API shows of a partition.
#[derive(Debug, Clone)]
pub struct PartitionStatus {
    pub partition_id: PartitionId,
    /// `"LEADER"` while this node leads the partition and takes commands for it (it has
    /// applied everything committed before its term), `"FOLLOWER"` otherwise.
    pub role: &'static str,
    /// False while the partition restarts after a failure, and once it is left down (`dead`).
    pub healthy: bool,
    /// Failed too often and left down until the node restarts (see `partition/supervise.rs`).
    pub dead: bool,
    /// The last failure (a panic's message, an error with its context) while not healthy.
    pub failure: Option<String>,
    pub applied_index: u64,
    pub snapshot_index: u64,
    /// The node id (0-based, as [`crate::ClusterSpec::node_id`]) of the leader this node knows
    /// of, if any; the standalone node is node 0.
    pub leader: Option<u64>,
    /// The Raft term this node is in.
    pub term: u64,
    /// Snapshots this replica received from its leader and installed, and snapshots it sent to
    /// followers behind its compacted log (this run; always 0 standalone).
    pub snapshots_installed: u64,
    pub snapshots_sent: u64,
    /// The group's configuration as this replica applied it, in node ids (empty standalone,
    /// and on a joining replica before its snapshot): voters, learners, and the voters of the
    /// configuration being left during a joint change.
    pub voters: Vec<u64>,
    pub learners: Vec<u64>,
    pub voters_outgoing: Vec<u64>,
}

/// The role names [`PartitionStatus::role`] takes.
pub const LEADER: &str = "LEADER";
pub const FOLLOWER: &str = "FOLLOWER";

/// What a partition of a cluster needs to run as one replica of its Raft group.
pub(crate) struct ReplicaSetup<'a> {
    /// This node's Raft id and every replica's (this node's included).
    pub id: u64,
    pub voters: Vec<u64>,
    /// A replica added to the running group ([`crate::topology`]'s JOINING): it starts without a
    /// configuration and learns it from the leader's snapshot.
    pub joining: bool,
    pub network: &'a waggle_replication::net::RaftNetwork,
    /// Where its commands for partitions led on other brokers go.
    pub relay: Arc<Relay>,
    /// Commands other brokers' partitions sent this one.
    pub relayed: Receiver<Message>,
}

pub(crate) use membership::Wanted as MembershipWanted;

pub(crate) struct PartitionHandle {
    tx: SyncSender<Submission>,
    /// Client commands in flight, and whether the partition takes another (back pressure).
    pub limiter: Arc<Limiter>,
    /// Whether the exporters' backlog lets the partition take a new process instance.
    pub export_gate: crate::export::BacklogGate,
    status: Arc<Mutex<PartitionStatus>>,
    /// The partition's state store; empty while the partition restarts after a failure.
    store: StoreSlot,
    /// False while the partition restarts after a failure or is left down: client commands are
    /// refused at once (UNAVAILABLE) rather than waiting in its queue.
    up: Arc<AtomicBool>,
    /// Whether this node leads the partition and takes commands for it (always, standalone).
    leading: Arc<AtomicBool>,
    /// A leadership transfer asked for and not yet started: the Raft id of the replica to hand
    /// the lead to (0: none).
    transfer: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    /// The partition's exporters here (see [`crate::export`]).
    exporters: Vec<Arc<Mutex<ExporterStatus>>>,
    /// The partition's folder in the data folder.
    dir: PathBuf,
    /// The membership changes the cluster topology asks of the partition (its leader makes them).
    membership: Arc<Mutex<membership::Wanted>>,
}

impl PartitionHandle {
    /// Asks this replica, if it leads, to hand the lead to the replica of Raft id `to` (see
    /// [`RaftGroup::transfer_leader`]); while the transfer is under way it refuses commands as
    /// not taken, so that their brokers send them to the next leader.
    pub fn transfer_leadership(&self, to: u64) {
        self.transfer.store(to, Ordering::SeqCst);
    }

    /// Whether this node leads the partition and takes commands for it now.
    pub fn leads(&self) -> bool {
        self.leading.load(Ordering::Relaxed)
    }

    /// A digest of the partition's committed state: its applied index, and the count and a
    /// hash of every other row, read together (replicas at the same applied index have equal
    /// digests: C1; entries without records, such as a new leader's, change only the index).
    /// While the partition restarts after a failure, the digest is all zeros.
    pub fn state_digest(&self) -> StateDigest {
        self.store().map(|s| digest_of(&*s)).unwrap_or(StateDigest { applied_index: 0, rows: 0, hash: 0 })
    }

    /// The partition's state store, unless the partition is restarting.
    fn store(&self) -> Option<Arc<RocksStore>> {
        self.store.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The partition's last backup checkpoint in its committed state (none while it restarts).
    pub fn last_checkpoint(&self) -> Option<waggle_protocol::value::CheckpointRecord> {
        self.store().and_then(|s| StateView::new(&*s).last_checkpoint())
    }

    /// The partition count a scale-up carried out by this (deployment) partition reached
    /// (SCALE SCALED_UP), as this replica's committed state has it; 0 for none.
    pub fn scaled_up(&self) -> u32 {
        self.store().and_then(|s| StateView::new(&*s).scale()).filter(|(_, _, done)| *done).map_or(0, |(_, r, _)| r.desired_partition_count)
    }

    /// The partition count this partition moved its correlation keys to (MESSAGE_RELOCATION
    /// RELOCATED), as this replica's committed state has it; 0 for none.
    pub fn relocated(&self) -> u32 {
        self.store()
            .and_then(|s| StateView::new(&*s).message_relocation())
            .filter(|(_, _, done)| *done)
            .map_or(0, |(_, desired, _)| desired)
    }

    /// The partition's folder in the data folder.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    pub(crate) fn peer(&self) -> Peer {
        Peer { tx: self.tx.clone(), leading: self.leading.clone() }
    }

    pub fn send(&self, submission: Submission) -> Result<(), BrokerError> {
        if !self.up.load(Ordering::Relaxed) {
            if let Some(permit) = submission.permit {
                self.limiter.abandoned(permit);
            }
            return Err(BrokerError::Unavailable(self.status().partition_id));
        }
        let (error, submission) = match self.tx.try_send(submission) {
            Ok(()) => return Ok(()),
            Err(TrySendError::Full(s)) => (BrokerError::Overloaded, s),
            Err(TrySendError::Disconnected(s)) => (BrokerError::Unavailable(self.status().partition_id), s),
        };
        if let Some(permit) = submission.permit {
            self.limiter.dropped(permit);
        }
        Err(error)
    }

    pub fn status(&self) -> PartitionStatus {
        self.status.lock().expect("status lock").clone()
    }

    pub fn exporters(&self) -> Vec<ExporterStatus> {
        self.exporters.iter().map(|s| s.lock().unwrap_or_else(|e| e.into_inner()).clone()).collect()
    }

    /// The partition's incidents (none while it restarts after a failure).
    pub fn incidents(&self) -> Vec<(i64, IncidentRecord)> {
        self.store().map(|s| StateView::new(&*s).incidents()).unwrap_or_default()
    }

    /// Whether a command of this type and key sent to another partition still waits for its
    /// acknowledgement (committed state).
    pub fn distributing(&self, value_type: ValueType, command_key: i64) -> bool {
        self.store().is_some_and(|s| {
            StateView::new(&*s).pending_distributions().iter().any(|(_, d)| d.value_type == value_type && d.command_key == command_key)
        })
    }

    /// Asks the partition's leader for these membership changes (see [`membership`]); replaces
    /// what was asked before.
    pub(crate) fn want_membership(&self, wanted: membership::Wanted) {
        *self.membership.lock().unwrap_or_else(|e| e.into_inner()) = wanted;
    }

    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        for t in self.threads.lock().expect("threads lock").drain(..) {
            let _ = t.join();
        }
    }
}

/// The digest of `store`'s rows (see [`PartitionHandle::state_digest`]).
pub(crate) fn digest_of(store: &dyn KvRead) -> StateDigest {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    let (mut rows, mut applied_index) = (0u64, 0u64);
    for (key, value) in store.scan_prefix(b"") {
        if key.as_slice() == META_APPLIED_INDEX {
            applied_index = value.as_slice().try_into().map(u64::from_be_bytes).unwrap_or(u64::MAX);
            continue;
        }
        if key.as_slice() == META_STATE_FORMAT {
            continue;
        }
        key.hash(&mut hasher);
        value.hash(&mut hasher);
        rows += 1;
    }
    StateDigest { applied_index, rows, hash: hasher.finish() }
}

/// A partition's committed state in brief (see [`PartitionHandle::state_digest`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StateDigest {
    pub applied_index: u64,
    /// The rows other than the applied index, and a hash of them.
    pub rows: u64,
    pub hash: u64,
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

fn applied_index(store: &dyn KvRead) -> Result<u64, String> {
    match store.get(META_APPLIED_INDEX) {
        None => Ok(0),
        Some(b) => b.as_slice().try_into().map(u64::from_be_bytes).map_err(|_| format!("corrupt state: the applied index row holds {b:?}")),
    }
}

/// Refuses state of a newer format than [`STATE_FORMAT_VERSION`], and records the version in
/// state that has none yet (new, or written before the row existed).
fn check_state_format(store: &RocksStore) -> Result<(), String> {
    match store.get(META_STATE_FORMAT) {
        None => {
            let mut writes = WriteSet::default();
            writes.put(META_STATE_FORMAT.to_vec(), STATE_FORMAT_VERSION.to_be_bytes().to_vec());
            store.commit_owned(writes).map_err(|e| format!("recording the state format: {e}"))
        }
        Some(b) => match <[u8; 4]>::try_from(b.as_slice()).map(u32::from_be_bytes) {
            Ok(v) if v <= STATE_FORMAT_VERSION => Ok(()),
            Ok(v) => Err(format!(
                "the state was written by a newer Waggle (state format version {v}; this one reads up to version {STATE_FORMAT_VERSION}): refusing to open it"
            )),
            Err(_) => Err(format!("corrupt state: the state format row holds {b:?}")),
        },
    }
}

fn start_err(partition: PartitionId, reason: impl ToString) -> BrokerError {
    BrokerError::Start { partition, reason: reason.to_string() }
}

struct Dirs {
    log: PathBuf,
    runtime: PathBuf,
    snapshots: PathBuf,
}

/// The partition's state store, told which engine tables are never scanned.
/// Its format is checked (and recorded when missing); table files from before partitioned
/// index and filters are rewritten in the background.
fn open_state(id: PartitionId, dirs: &Dirs) -> Result<RocksStore, BrokerError> {
    let mut store = RocksStore::open_with_point_tables(&dirs.runtime, waggle_engine::POINT_TABLES, Some(waggle_engine::stored_absence(id)))
        .map_err(|e| start_err(id, e))?;
    check_state_format(&store).map_err(|e| start_err(id, format!("{}: {e}", dirs.runtime.display())))?;
    store.upgrade_tables().map_err(|e| start_err(id, e))?;
    Ok(store)
}

/// Opens state and log so that state + the log's committed entries after it are complete:
/// if the log was compacted past what the runtime state holds, state restarts from the newest
/// snapshot.
fn recover<R>(
    id: PartitionId,
    dirs: &Dirs,
    open_raft: impl Fn(&Path, u64) -> Result<(RaftGroup, R), ReplicationError>,
) -> Result<(RocksStore, (RaftGroup, R), u64), BrokerError> {
    let mut store = open_state(id, dirs)?;
    let mut applied = applied_index(&store).map_err(|e| start_err(id, e))?;
    let (mut raft, extra) = open_raft(&dirs.log, applied).map_err(|e| start_err(id, e))?;
    // a snapshot received from the leader and installed in the journal before a crash, which
    // the state does not hold yet: it becomes the newest snapshot and the state
    if let Some(installed) = raft.take_installed() {
        tracing::warn!(partition = id, snapshot = installed.index, "taking the snapshot received before the restart");
        let kept = snapshots::keep_installed(&dirs.snapshots, &installed).map_err(|e| start_err(id, e))?;
        drop(store);
        store = restore_state(id, dirs, &kept)?;
        applied = applied_index(&store).map_err(|e| start_err(id, e))?;
    }
    if raft.first_index() <= applied + 1 {
        return Ok((store, (raft, extra), applied));
    }
    drop(raft);
    drop(extra);
    drop(store);
    let Some((index, snapshot)) = snapshots::newest(&dirs.snapshots) else {
        return Err(start_err(id, format!("log starts at {} but state is at {applied} and there is no snapshot", applied + 1)));
    };
    tracing::warn!(partition = id, snapshot = index, "state is behind the log: restoring from snapshot");
    let store = restore_state(id, dirs, &snapshot)?;
    let applied = applied_index(&store).map_err(|e| start_err(id, e))?;
    let (raft, extra) = open_raft(&dirs.log, applied).map_err(|e| start_err(id, e))?;
    if raft.first_index() > applied + 1 {
        return Err(start_err(id, "snapshot is older than the log's first entry"));
    }
    Ok((store, (raft, extra), applied))
}

/// Replaces the runtime state by a copy of the checkpoint in `snapshot` and opens it.
fn restore_state(id: PartitionId, dirs: &Dirs, snapshot: &Path) -> Result<RocksStore, BrokerError> {
    fs::remove_dir_all(&dirs.runtime).map_err(|e| start_err(id, e))?;
    snapshots::copy_dir(snapshot, &dirs.runtime).map_err(|e| start_err(id, e))?;
    open_state(id, dirs)
}

// (the broker's shared parts one by one: each partition, started at boot or by a scale-up, takes
// the same ones)
#[allow(clippy::too_many_arguments)]
pub(crate) fn start(
    id: PartitionId,
    config: &BrokerConfig,
    streams: Arc<JobStreamRegistry>,
    jobs_available: broadcast::Sender<String>,
    metrics: Arc<BrokerMetrics>,
    peers: Peers,
    counts: Arc<crate::PartitionCounts>,
    replica: Option<ReplicaSetup<'_>>,
) -> Result<PartitionHandle, BrokerError> {
    let base = config.data_dir.join("partitions").join(id.to_string());
    let dirs = Dirs { log: base.join("log"), runtime: base.join("runtime"), snapshots: base.join("snapshots") };
    for d in [&dirs.log, &dirs.snapshots] {
        fs::create_dir_all(d).map_err(|e| start_err(id, e))?;
    }
    let (store, (raft, inbox), applied) = match &replica {
        None => recover(id, &dirs, |dir, applied| Ok((RaftGroup::open(dir, applied)?, None)))?,
        Some(r) => recover(id, &dirs, |dir, applied| {
            let (transport, inbox, packets) = r.network.register_with_snapshots(u64::from(id));
            let raft = open_replica(dir, applied, r.id, &r.voters, r.joining, &transport, &dirs.snapshots)?;
            Ok((raft, Some((inbox, packets, transport))))
        })?,
    };
    let store = Arc::new(store);
    let snapshot_index = snapshots::newest(&dirs.snapshots).map(|(i, _)| i).unwrap_or(0);
    // standalone, the single voter leads from the start; a replica leads once elected
    let standalone = inbox.is_none();
    let (role, leader) = if standalone { (LEADER, Some(0)) } else { (FOLLOWER, None) };
    let status = Arc::new(Mutex::new(PartitionStatus {
        partition_id: id,
        role,
        healthy: true,
        dead: false,
        failure: None,
        applied_index: applied,
        snapshot_index,
        leader,
        term: raft.term(),
        snapshots_installed: 0,
        snapshots_sent: 0,
        voters: Vec::new(),
        learners: Vec::new(),
        voters_outgoing: Vec::new(),
    }));
    // standalone, the single voter leads once its state has caught up with the log (below): an
    // exporter started before that would take the state's applied index, behind the log's
    // commit point while the tail replays, for the end of the log and report itself caught up
    let leading = Arc::new(AtomicBool::new(false));
    let transfer = Arc::new(AtomicU64::new(0));
    let (tx, rx) = mpsc::sync_channel(config.queue_capacity.max(1));
    let stop = Arc::new(AtomicBool::new(false));
    let scheduled_in_flight = Arc::new(AtomicUsize::new(0));
    let wanted_membership: Arc<Mutex<membership::Wanted>> = Arc::default();
    let limiter = Arc::new(Limiter::new(config.backpressure, metrics.limiter(id)));
    let distribution = replica.as_ref().map(|r| Arc::new(crate::export::Distribution::new(id, r.network, r.id, &r.voters)));
    let crate::export::Runners { bounds: export, statuses: exporters, threads: export_threads, gate: export_gate } = crate::export::start(
        id,
        &config.export,
        &dirs.log,
        &base.join("exporters"),
        Arc::new(AtomicU64::new(applied)),
        Engine::last_position(&*store),
        leading.clone(),
        stop.clone(),
        &metrics,
        distribution,
    )
    .map_err(|e| start_err(id, e))?;
    let partition_metrics = metrics.for_partition(id);
    partition_metrics.health.set(supervise::Health::Healthy.gauge());
    let up = Arc::new(AtomicBool::new(true));
    let health = supervise::HealthReport { status: status.clone(), gauge: partition_metrics.health.clone(), up: up.clone() };
    let store_slot: StoreSlot = Arc::new(RwLock::new(Some(store.clone())));
    metrics.store_memory.watch(id, &store_slot);
    let mut processor = Processor {
        id,
        engine: Engine::with_limits(id, config.limits),
        engine_stale: false,
        store: store.clone(),
        store_slot: store_slot.clone(),
        health,
        side_failure: Default::default(),
        pending_permits: Vec::new(),
        raft,
        applied,
        snapshot_index,
        snapshot_every: config.snapshot_every_entries.max(1),
        snapshots_dir: dirs.snapshots.clone(),
        snapshot: SnapshotProgress::default(),
        replies: HashMap::default(),
        next_request: 1,
        saturation: SaturationWindow::new(PushCounts::default()),
        limiter: limiter.clone(),
        streams: PartitionStreams::new(streams.clone()),
        deliverer: Deliverer::new(Targets { streams, jobs_available, loopback: tx.clone(), limiter: limiter.clone() }),
        metrics: partition_metrics,
        status: status.clone(),
        started: HashMap::default(),
        batch_buffer: Vec::new(),
        last_tick: Instant::now(),
        peers,
        outbox: VecDeque::new(),
        unacknowledged: Unacknowledged::default(),
        counts,
        deferred: VecDeque::new(),
        scheduled_in_flight: scheduled_in_flight.clone(),
        limits: config.limits,
        leading: leading.clone(),
        transfer: transfer.clone(),
        stop: stop.clone(),
        compacted: 0,
        keep_backups: config.backup_store.is_some(),
        export,
        relay: replica.as_ref().map(|r| r.relay.clone()),
        replica: inbox.zip(replica).map(|((inbox, packets, transport), r)| Replica {
            inbox,
            packets,
            transport,
            raft_id: r.id,
            voters: r.voters,
            joining: r.joining,
            next_tick: Instant::now() + RAFT_TICK,
            serving_term: None,
            relayed: r.relayed,
            own: tx.clone(),
        }),
        in_flight: VecDeque::new(),
        in_flight_bytes: 0,
        max_in_flight: std::env::var("WAGGLE_IN_FLIGHT_ENTRIES")
            .ok()
            .and_then(|v| v.parse().ok())
            .filter(|&n: &usize| n >= 1)
            .unwrap_or(MAX_IN_FLIGHT_ENTRIES),
        membership: wanted_membership.clone(),
        membership_progress: membership::Progress::default(),
    };
    // Bring state up to the log's commit point before accepting commands.
    processor.drive_raft().map_err(|e| start_err(id, e))?;
    if standalone {
        leading.store(true, Ordering::SeqCst);
        // what other partitions were sent and had not acknowledged before the restart goes first
        processor.outbox = waggle_engine::pending_commands(StateView::new(&*processor.store), id).into();
    }
    // the scheduler reads one run's store: each restart starts another
    let start_scheduler = {
        let (tx, leading) = (tx.clone(), leading.clone());
        move |p: &Processor| {
            let stop = Arc::new(AtomicBool::new(false));
            let thread = scheduler::start(
                id,
                p.store.clone(),
                tx.clone(),
                p.scheduled_in_flight.clone(),
                leading.clone(),
                stop.clone(),
                p.side_failure.clone(),
            )?;
            Ok(supervise::SchedulerRun { stop, thread })
        }
    };
    let scheduler = start_scheduler(&processor).map_err(|e| start_err(id, e))?;
    drop(store);
    let processing = std::thread::Builder::new()
        .name(format!("partition-{id}"))
        .spawn(move || supervise::run(processor, rx, dirs, scheduler, start_scheduler))
        .map_err(|e| start_err(id, e))?;
    let mut threads = vec![processing];
    threads.extend(export_threads);
    Ok(PartitionHandle {
        tx,
        limiter,
        export_gate,
        status,
        store: store_slot,
        up,
        leading,
        transfer,
        stop,
        threads: Mutex::new(threads),
        exporters,
        dir: base,
        membership: wanted_membership,
    })
}

/// Opens this node's replica of a partition's Raft group on its journal in `dir` (the term,
/// vote and log a previous run persisted, never reset), sending through `transport`.
fn open_replica(
    dir: &Path,
    applied: u64,
    raft_id: u64,
    voters: &[u64],
    joining: bool,
    transport: &waggle_replication::net::NetTransport,
    snapshots_dir: &Path,
) -> Result<RaftGroup, ReplicationError> {
    let config = waggle_replication::ReplicaConfig { joining, ..crate::cluster::replica_config(raft_id, voters.to_vec()) };
    let mut raft = RaftGroup::open_replicated(dir, applied, config, Box::new(transport.clone()))?;
    raft.set_snapshot_source(Arc::new(snapshots::CheckpointSource { dir: snapshots_dir.to_path_buf() }));
    Ok(raft)
}

/// A replicated partition's Raft side: its peers' messages, its clock, and whether it serves.
struct Replica {
    /// Messages from the group's other replicas, and pieces of snapshot transfers.
    inbox: Receiver<Message>,
    packets: Receiver<SnapshotPacket>,
    /// The group's sending side, its Raft id and voters (a restart reopens the group with them).
    transport: waggle_replication::net::NetTransport,
    raft_id: u64,
    voters: Vec<u64>,
    joining: bool,
    next_tick: Instant,
    /// The term in which this node leads and takes commands: set once, as leader, it has
    /// applied its term's first entry (everything committed before the term), cleared when it
    /// loses the lead.
    serving_term: Option<u64>,
    /// Commands other brokers' partitions sent this one, and its own queue they go to.
    relayed: Receiver<Message>,
    own: SyncSender<Submission>,
}

struct Processor {
    id: PartitionId,
    engine: Engine,
    /// Whether state changed without the engine (entries applied by their state changes): its
    /// caches are dropped before it processes or replays.
    engine_stale: bool,
    store: Arc<RocksStore>,
    /// The store as the handle sees it (replaced when the partition restarts).
    store_slot: StoreSlot,
    health: supervise::HealthReport,
    /// A failure of the partition's scheduler thread, taken as the partition's own.
    side_failure: scheduler::SideFailure,
    /// The back-pressure slots of the batch being processed, until its delivery takes them
    /// (given back if the batch fails).
    pending_permits: Vec<Permit>,
    raft: RaftGroup,
    applied: u64,
    snapshot_index: u64,
    snapshot_every: u64,
    snapshots_dir: PathBuf,
    snapshot: SnapshotProgress,
    replies: HashMap<RequestId, Reply, foldhash::fast::RandomState>,
    next_request: RequestId,
    streams: PartitionStreams,
    /// How many new jobs found their streams full lately: many tell back pressure of congestion.
    saturation: SaturationWindow,
    limiter: Arc<Limiter>,
    /// Answers, pushed jobs and job notifications of committed batches go out through it.
    deliverer: Deliverer,
    metrics: PartitionMetrics,
    status: Arc<Mutex<PartitionStatus>>,
    /// Start times of process instances and jobs, for the lifetime histograms (runtime only).
    started: HashMap<i64, i64, foldhash::fast::RandomState>,
    last_tick: Instant,
    peers: Peers,
    /// Commands for other partitions not handed to their queue yet, in the order they were
    /// sent (retried every loop while a queue is full).
    outbox: VecDeque<(PartitionId, Command)>,
    unacknowledged: Unacknowledged,
    /// The cluster's partition counts (they grow with its topology), read for every batch.
    counts: Arc<crate::PartitionCounts>,
    /// Scheduled commands taken off the queue, waiting for a batch with room for them.
    deferred: VecDeque<Submission>,
    /// Scheduled commands submitted and not yet processed (the scheduler keeps it bounded).
    scheduled_in_flight: Arc<AtomicUsize>,
    /// The batch being gathered, kept between batches so that its room is allocated once.
    batch_buffer: Vec<Submission>,
    limits: waggle_engine::EngineLimits,
    /// [`PartitionHandle::transfer_leadership`]'s request.
    transfer: Arc<AtomicU64>,
    /// Published to [`PartitionHandle::leads`] and the scheduler.
    leading: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    /// The index the log was last compacted to.
    compacted: u64,
    /// Whether backups are taken (a backup store is configured): then the partition keeps a
    /// copy of its state at each checkpoint it applies ([`Self::keep_backup_checkpoint`]).
    keep_backups: bool,
    /// The applied index the exporters read up to, and how far they let the log be compacted.
    export: ExportBounds,
    /// The Raft side of a partition of a cluster; `None` standalone (a single voter).
    replica: Option<Replica>,
    /// Where commands for partitions led on other brokers go (a cluster's partitions only).
    relay: Option<Arc<Relay>>,
    /// A replicated leader's batches proposed and not yet committed, oldest first (always empty
    /// standalone): the state the next batch runs on, and what each sends out once committed.
    in_flight: VecDeque<InFlight>,
    /// The bytes of their entries.
    in_flight_bytes: usize,
    /// The entries it may have in flight ([`MAX_IN_FLIGHT_ENTRIES`]).
    max_in_flight: usize,
    /// The membership changes asked of the partition ([`PartitionHandle::want_membership`]).
    membership: Arc<Mutex<membership::Wanted>>,
    membership_progress: membership::Progress,
}

/// A replicated leader's batch, processed and proposed, whose entry is not committed yet. Its
/// writes are not in the store (which holds committed state only); its answers, pushed jobs,
/// notifications and commands for other partitions wait for the commit (C4).
struct InFlight {
    /// The entry's index and term; none for a batch that wrote nothing, sent out with the
    /// batch before it.
    entry: Option<(u64, u64)>,
    writes: WriteSet,
    /// The encoded entry's size.
    bytes: usize,
    output: BatchOutput,
    permits: Vec<Permit>,
    /// The ids of its clients' requests.
    requests: std::ops::Range<RequestId>,
    processed: Instant,
}

impl Processor {
    /// The processing loop, until the partition is stopped or fails (see [`supervise`]).
    fn run_loop(&mut self, rx: &Receiver<Submission>) -> supervise::RunEnd {
        *self.side_failure.lock().unwrap_or_else(|e| e.into_inner()) = None;
        let ended = if self.replica.is_none() { self.run(rx) } else { self.run_replicated(rx) };
        match ended {
            Ok(()) => supervise::RunEnd::Stopped,
            Err(e) => supervise::RunEnd::Failed(e),
        }
    }

    /// The standalone partition's loop: a single voter, always the leader.
    fn run(&mut self, rx: &Receiver<Submission>) -> Result<(), String> {
        while !self.stop.load(Ordering::SeqCst) {
            // block for work only when no scheduled work waits
            let wait = if self.deferred.is_empty() { Duration::from_millis(50) } else { Duration::ZERO };
            let first = match rx.recv_timeout(wait) {
                Ok(s) => Some(s),
                Err(RecvTimeoutError::Timeout) => None,
                Err(RecvTimeoutError::Disconnected) => break,
            };
            if self.last_tick.elapsed() >= Duration::from_millis(100) {
                self.raft.tick();
                self.last_tick = Instant::now();
            }
            self.side_failed()?;
            self.drive_raft()?;
            self.serve(first, rx)?;
        }
        Ok(())
    }

    /// A replicated partition's loop: it ticks its group, steps its peers' messages and applies
    /// what commits; while it leads (and has applied everything committed before its term) it
    /// processes commands as the standalone partition does, and refuses them otherwise.
    fn run_replicated(&mut self, rx: &Receiver<Submission>) -> Result<(), String> {
        while !self.stop.load(Ordering::SeqCst) {
            let first = if !self.serving() || self.window_full() {
                self.wait_for_raft(None);
                None
            } else if !self.in_flight.is_empty() {
                // a batch in flight: commands waiting are processed at once; otherwise the
                // peers' answers are awaited, looking at the queue again shortly
                match rx.try_recv() {
                    Ok(s) => Some(s),
                    Err(TryRecvError::Empty) => {
                        self.wait_for_raft(Some(IN_FLIGHT_POLL));
                        None
                    }
                    Err(TryRecvError::Disconnected) => break,
                }
            } else {
                let wait = if self.deferred.is_empty() { LEADER_POLL } else { Duration::ZERO };
                match rx.recv_timeout(wait) {
                    Ok(s) => Some(s),
                    Err(RecvTimeoutError::Timeout) => None,
                    Err(RecvTimeoutError::Disconnected) => break,
                }
            };
            self.pump_raft();
            self.start_transfer();
            self.side_failed()?;
            self.drive_raft()?;
            self.follow_role();
            self.change_membership();
            self.take_relayed();
            if !self.serving() {
                self.refuse(first.into_iter().chain(rx.try_iter()));
                self.maybe_snapshot();
                continue;
            }
            if first.is_none() && self.window_full() {
                self.maybe_snapshot();
                continue;
            }
            self.serve(first, rx)?;
        }
        Ok(())
    }

    /// Re-sends and delivers commands for other partitions, then processes a batch of what
    /// waits (`first` and the queue, with due scheduled work), then snapshots if due.
    fn serve(&mut self, first: Option<Submission>, rx: &Receiver<Submission>) -> Result<(), String> {
        self.resend_unacknowledged();
        self.flush_outbox();
        let mut batch = std::mem::take(&mut self.batch_buffer);
        let mut next = first;
        while let Some(s) = next {
            if s.scheduled {
                self.deferred.push_back(s);
            } else {
                batch.push(s);
            }
            next = if batch.len() < MAX_BATCH_COMMANDS { rx.try_recv().ok() } else { None };
        }
        let room = if batch.is_empty() { SCHEDULED_PER_IDLE_BATCH } else { SCHEDULED_PER_BUSY_BATCH };
        let scheduled = room.min(self.deferred.len());
        batch.extend(self.deferred.drain(..scheduled));
        self.scheduled_in_flight.fetch_sub(scheduled, Ordering::SeqCst);
        if batch.is_empty() {
            self.batch_buffer = batch;
            self.prune_replies();
            self.maybe_snapshot();
            return Ok(());
        }
        let processed = self.process(&mut batch);
        self.batch_buffer = batch;
        processed?;
        self.maybe_snapshot();
        Ok(())
    }

    /// Whether this replica leads and takes commands (see [`Replica::serving_term`]); not while
    /// it hands its leadership over.
    fn serving(&self) -> bool {
        self.replica.as_ref().is_some_and(|r| r.serving_term.is_some_and(|t| self.raft.is_leader() && self.raft.term() == t))
            && self.raft.transferring_to().is_none()
    }

    /// Starts the leadership transfer asked for, if any (only a leader transfers).
    fn start_transfer(&mut self) {
        let to = self.transfer.swap(0, Ordering::SeqCst);
        if to != 0 && self.raft.is_leader() {
            tracing::info!(partition = self.id, to = crate::cluster::node_of_raft_id(to), "handing the leadership over");
            self.raft.transfer_leader(to);
        }
    }

    /// Waits for a peer's message until the next tick at most, and at most `at_most` (not at all
    /// while pieces of a snapshot transfer arrive: they are handed over at once).
    fn wait_for_raft(&mut self, at_most: Option<Duration>) {
        let Some(replica) = &mut self.replica else { return };
        let mut transfer = false;
        for packet in replica.packets.try_iter() {
            receive_snapshot(&mut self.raft, packet);
            transfer = true;
        }
        if transfer {
            return;
        }
        let mut timeout = replica.next_tick.saturating_duration_since(Instant::now());
        if let Some(at_most) = at_most {
            timeout = timeout.min(at_most);
        }
        match replica.inbox.recv_timeout(timeout) {
            Ok(m) => step(&mut self.raft, m),
            Err(RecvTimeoutError::Timeout) => {}
            // the network is gone (shutting down): nothing will arrive
            Err(RecvTimeoutError::Disconnected) => std::thread::sleep(timeout),
        }
    }

    /// Steps every message received and ticks when a tick is due.
    fn pump_raft(&mut self) {
        let Some(replica) = &mut self.replica else { return };
        for m in replica.inbox.try_iter() {
            step(&mut self.raft, m);
        }
        for packet in replica.packets.try_iter() {
            receive_snapshot(&mut self.raft, packet);
        }
        let now = Instant::now();
        if now >= replica.next_tick {
            self.raft.tick();
            replica.next_tick = (replica.next_tick + RAFT_TICK).max(now);
        }
    }

    /// Follows this replica's role after Raft acted: a leader serves once it has applied its
    /// term's first entry (so that it processes on all that is committed) and then starts
    /// what a partition starts with (its whole outbox re-sent; its scheduler, which follows
    /// [`Self::leading`]); a replica that lost the lead drops what it held for its term (the
    /// answers it owed: their clients see the partition unavailable).
    fn follow_role(&mut self) {
        let Some(serving_term) = self.replica.as_ref().map(|r| r.serving_term) else { return };
        let (leader, term) = (self.raft.is_leader(), self.raft.term());
        let mut serving = serving_term.is_some();
        if serving_term.is_some_and(|t| !leader || t != term) {
            serving = false;
            self.set_serving(None);
            tracing::info!(partition = self.id, term, "no longer the leader");
            self.abandon_in_flight();
            self.replies.clear();
            self.outbox.clear();
            let deferred: Vec<Submission> = self.deferred.drain(..).collect();
            self.refuse(deferred);
            // what the engine remembers between batches (awaited results) was for this term
            self.engine = Engine::with_limits(self.id, self.limits);
        }
        // the term's first entry (the leader's empty entry) is the last one until it proposes
        if leader && !serving && self.applied >= self.raft.last_index() {
            serving = true;
            if std::mem::take(&mut self.engine_stale) {
                self.engine = Engine::with_limits(self.id, self.limits);
            }
            self.outbox = waggle_engine::pending_commands(StateView::new(&*self.store), self.id).into();
            self.unacknowledged = Unacknowledged::default();
            self.set_serving(Some(term));
            tracing::info!(partition = self.id, term, applied = self.applied, "leading");
        }
        let role = if serving { LEADER } else { FOLLOWER };
        let leader_node = self.raft.leader_id().map(crate::cluster::node_of_raft_id);
        let stats = self.raft.snapshot_stats();
        let mut status = self.status.lock().expect("status lock");
        if status.role != role || status.term != term || status.leader != leader_node {
            (status.role, status.term, status.leader) = (role, term, leader_node);
        }
        (status.snapshots_installed, status.snapshots_sent) = (stats.installed, stats.completed);
        let conf = self.raft.conf_state();
        let nodes = |ids: &[u64]| ids.iter().map(|&id| crate::cluster::node_of_raft_id(id)).collect::<Vec<_>>();
        status.voters = nodes(&conf.voters);
        status.learners = nodes(&conf.learners);
        status.voters_outgoing = nodes(&conf.voters_outgoing);
    }

    /// Starts (`Some(term)`) or ends serving as the leader, and tells the handle and scheduler.
    fn set_serving(&mut self, term: Option<u64>) {
        if let Some(replica) = &mut self.replica {
            replica.serving_term = term;
        }
        self.leading.store(term.is_some(), Ordering::SeqCst);
    }

    /// Queues the commands other brokers' partitions sent this one, while it leads (it drops
    /// them otherwise: their senders send them again until acknowledged).
    fn take_relayed(&mut self) {
        let serving = self.serving();
        let Some(replica) = &self.replica else { return };
        for message in replica.relayed.try_iter() {
            if !serving {
                continue;
            }
            let Some(command) = crate::relay::decode(&message) else { continue };
            // a full queue drops it: it is sent again
            let _ = replica.own.try_send(Submission { command, reply: None, scheduled: false, permit: None });
        }
    }

    /// Answers [`NotTaken`] to commands this replica will not process (their clients' brokers
    /// send them to the next leader), giving back their back-pressure slots and scheduler counts.
    fn refuse(&mut self, submissions: impl IntoIterator<Item = Submission>) {
        for s in submissions {
            if let Some(reply) = s.reply {
                let _ = reply.send(Err(NotTaken));
            }
            if s.scheduled {
                self.scheduled_in_flight.fetch_sub(1, Ordering::SeqCst);
            }
            if let Some(permit) = s.permit {
                self.limiter.abandoned(permit);
            }
        }
    }

    /// The failure of a side thread (the scheduler), if one failed.
    fn side_failed(&self) -> Result<(), String> {
        match self.side_failure.lock().unwrap_or_else(|e| e.into_inner()).take() {
            Some(failure) => Err(failure),
            None => Ok(()),
        }
    }

    /// A failed replica stops claiming the lead at once (its handle, the scheduler and the
    /// Topology see a follower with no known leader until it is back and hears one).
    fn step_down_failed(&mut self) {
        if self.replica.is_none() {
            return;
        }
        self.set_serving(None);
        let mut status = self.status.lock().unwrap_or_else(|e| e.into_inner());
        (status.role, status.leader) = (FOLLOWER, None);
    }

    /// Drops what a failed run held for its clients and the scheduler: their requests go
    /// unanswered (the clients see an error), their back-pressure slots and scheduler counts
    /// are given back.
    fn forget_run(&mut self) {
        self.abandon_in_flight();
        for permit in self.pending_permits.drain(..) {
            self.limiter.abandoned(permit);
        }
        let deferred: Vec<Submission> = self.deferred.drain(..).collect();
        let batch: Vec<Submission> = self.batch_buffer.drain(..).collect();
        self.refuse(deferred.into_iter().chain(batch));
        self.replies.clear();
        self.outbox.clear();
        self.started.clear();
    }

    /// Closes the partition's store and log and opens them again as a start does
    /// ([`recover`]), replaying the committed entries the state lacks; what the processor
    /// shares with the rest of the node (its queue's other end, status, limiter, exporters'
    /// bounds, delivery) goes on. The store's other users must have let go of it.
    ///
    /// A replica of a cluster reopens its Raft group from its journal as a node restarting
    /// does (the persisted term, vote and log are kept, so Raft's safety holds as across a
    /// crash: whatever it acknowledged to its peers is still on disk), on the same network
    /// registration, and comes back as a follower: if it led, the others have elected a
    /// leader meanwhile or it campaigns again with its log.
    fn reopen(self, dirs: &Dirs) -> Result<Processor, String> {
        let Processor {
            id,
            engine,
            engine_stale: _,
            store,
            store_slot,
            health,
            side_failure,
            pending_permits,
            raft,
            applied: _,
            snapshot_index: _,
            snapshot_every,
            snapshots_dir,
            snapshot,
            replies,
            next_request,
            streams,
            saturation,
            limiter,
            deliverer,
            metrics,
            status,
            started,
            last_tick: _,
            peers,
            outbox: _,
            unacknowledged: _,
            counts,
            deferred,
            scheduled_in_flight,
            batch_buffer,
            limits,
            transfer,
            leading,
            stop,
            compacted: _,
            keep_backups,
            export,
            replica,
            relay,
            in_flight: _,
            in_flight_bytes: _,
            max_in_flight,
            membership,
            membership_progress: _,
        } = self;
        drop((engine, raft));
        let Some(store) = Arc::into_inner(store) else { return Err("the state store is still in use".into()) };
        // a compaction RocksDB runs for the store may take a while to let go of it
        if !store.close(Duration::from_secs(120)) {
            return Err("the state store's background work did not end".into());
        }
        let (store, (raft, ()), applied) = match &replica {
            None => recover(id, dirs, |dir, applied| Ok((RaftGroup::open(dir, applied)?, ()))),
            Some(r) => recover(id, dirs, |dir, applied| {
                Ok((open_replica(dir, applied, r.raft_id, &r.voters, r.joining, &r.transport, &dirs.snapshots)?, ()))
            }),
        }
        .map_err(|e| e.to_string())?;
        let replica = replica.map(|r| Replica { next_tick: Instant::now() + RAFT_TICK, serving_term: None, ..r });
        if replica.is_some() {
            // a follower until elected again (the handle and the scheduler follow `leading`)
            leading.store(false, Ordering::SeqCst);
            let mut status = status.lock().unwrap_or_else(|e| e.into_inner());
            (status.role, status.leader, status.term) = (FOLLOWER, None, raft.term());
        }
        let store = Arc::new(store);
        *store_slot.write().unwrap_or_else(|e| e.into_inner()) = Some(store.clone());
        let snapshot_index = snapshots::newest(&dirs.snapshots).map(|(i, _)| i).unwrap_or(0);
        status.lock().unwrap_or_else(|e| e.into_inner()).snapshot_index = snapshot_index;
        let mut processor = Processor {
            id,
            engine: Engine::with_limits(id, limits),
            engine_stale: false,
            store,
            store_slot,
            health,
            side_failure,
            pending_permits,
            raft,
            applied,
            snapshot_index,
            snapshot_every,
            snapshots_dir,
            snapshot,
            replies,
            next_request,
            streams,
            saturation,
            limiter,
            deliverer,
            metrics,
            status,
            started,
            last_tick: Instant::now(),
            peers,
            outbox: VecDeque::new(),
            unacknowledged: Unacknowledged::default(),
            counts,
            deferred,
            scheduled_in_flight,
            batch_buffer,
            limits,
            transfer,
            leading,
            stop,
            compacted: 0,
            keep_backups,
            export,
            replica,
            relay,
            in_flight: VecDeque::new(),
            in_flight_bytes: 0,
            max_in_flight,
            membership,
            membership_progress: membership::Progress::default(),
        };
        processor.set_applied(applied);
        processor.drive_raft()?;
        if processor.replica.is_none() {
            // a replica re-sends its outbox once it leads again (`follow_role`)
            processor.outbox = waggle_engine::pending_commands(StateView::new(&*processor.store), id).into();
        }
        Ok(processor)
    }

    /// Applies committed entries that this run did not process itself (recovery, and a
    /// follower's), then takes a snapshot the group installed, if any.
    fn drive_raft(&mut self) -> Result<(), String> {
        let committed = self.raft.drive().map_err(|e| e.to_string())?;
        self.settle(committed)?;
        if self.replica.is_some() {
            self.take_installed()?;
        }
        Ok(())
    }

    /// Takes the snapshot a follower's group installed (a leader's log lacked the entries this
    /// replica needed): its files become the partition's newest snapshot and its rows the
    /// state, whose applied index (the snapshot's own, which may be past the snapshot's index)
    /// the next committed entries are applied after. Nothing of the engine's caches survives.
    fn take_installed(&mut self) -> Result<(), String> {
        let Some(installed) = self.raft.take_installed() else { return Ok(()) };
        let started = Instant::now();
        // (a follower: what it had in flight as a leader is not committed as its own)
        self.abandon_in_flight();
        // a checkpoint under way reads the store about to be rewritten, and would delete the
        // received snapshot once done
        while self.snapshot.running.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(1));
        }
        let kept = snapshots::keep_installed(&self.snapshots_dir, &installed).map_err(|e| format!("keeping the received snapshot: {e}"))?;
        let scratch = self.snapshots_dir.with_file_name("received-snapshot-load");
        let (applied, rows) = snapshots::load_into(&self.store, &kept, &scratch)?;
        self.engine = Engine::with_limits(self.id, self.limits);
        self.started.clear();
        self.set_applied(applied);
        (self.snapshot_index, self.compacted) = (installed.index, installed.index);
        self.status.lock().expect("status lock").snapshot_index = installed.index;
        tracing::info!(
            partition = self.id,
            index = installed.index,
            applied,
            rows,
            load_ms = started.elapsed().as_millis() as u64,
            "snapshot received from the leader installed"
        );
        Ok(())
    }

    /// Applies committed entries: an entry that carries its state changes (a replicated
    /// leader's) by committing them, any other by replaying its events, in runs committed to
    /// the store together. A run ends at an entry that created a backup checkpoint, whose state
    /// is then kept ([`Self::keep_backup_checkpoint`]).
    fn replay(&mut self, committed: Vec<waggle_replication::Committed>) -> Result<(), String> {
        if committed.is_empty() {
            return Ok(());
        }
        // a test's injected panic reaches a follower here (it processes no batch)
        supervise::injected_panic(self.id);
        let applied = self.applied;
        let mut entries = committed.into_iter().filter(|c| c.index > applied).peekable();
        let carries_changes = |c: &waggle_replication::Committed| c.data.first() == Some(&codec::CODEC_VERSION_WITH_CHANGES);
        while let Some(c) = entries.next_if(carries_changes) {
            self.apply_changes(&c)?;
        }
        while entries.peek().is_some() {
            if std::mem::take(&mut self.engine_stale) {
                self.engine = Engine::with_limits(self.id, self.limits);
            }
            let mut writes = WriteSet::default();
            let mut last = self.applied;
            let mut checkpoint = None;
            {
                let mut overlay = Overlay::new(&*self.store);
                while let Some(c) = entries.next_if(|c| !carries_changes(c)) {
                    if !c.data.is_empty() {
                        let created =
                            self.engine.replay_encoded(&mut overlay, &c.data).map_err(|e| format!("log entry {}: {e}", c.index))?;
                        checkpoint = created.map(|created| (created.checkpoint_id, c.term));
                    }
                    last = c.index;
                    if checkpoint.is_some() {
                        break;
                    }
                }
                writes.absorb(overlay.into_writes());
            }
            writes.put(META_APPLIED_INDEX.to_vec(), last.to_be_bytes().to_vec());
            self.store.commit_owned(writes).map_err(|e| e.to_string())?;
            self.set_applied(last);
            if let Some((id, term)) = checkpoint {
                self.keep_backup_checkpoint(id, last, term);
            }
            while let Some(c) = entries.next_if(carries_changes) {
                self.apply_changes(&c)?;
            }
        }
        Ok(())
    }

    /// Applies an entry that carries its state changes by committing them as the leader did:
    /// no record is decoded unless the entry created a backup checkpoint. The engine's caches
    /// (parsed models) no longer follow the state: a new one is made before this replica
    /// processes ([`Self::follow_role`]).
    fn apply_changes(&mut self, c: &waggle_replication::Committed) -> Result<(), String> {
        let malformed = |e: codec::CodecError| format!("log entry {}: {e}", c.index);
        let changes = codec::state_changes(&c.data).map_err(malformed)?.expect("an entry that carries its state changes");
        // read whole before any is committed: a malformed entry commits nothing
        let rows = changes.rows().collect::<Result<Vec<_>, _>>().map_err(malformed)?;
        let rows = rows.into_iter().map(|change| (change.key.to_vec(), change.value.map(<[u8]>::to_vec), change.fresh));
        let applied = (META_APPLIED_INDEX.to_vec(), Some(c.index.to_be_bytes().to_vec()), false);
        self.store.commit_changes(rows.chain([applied])).map_err(|e| e.to_string())?;
        self.set_applied(c.index);
        self.engine_stale = true;
        if changes.created_checkpoint {
            let mut created = None;
            codec::for_each_record(&c.data, |record| {
                created = waggle_engine::created_checkpoint(std::slice::from_ref(record)).or(created.take());
            })
            .map_err(malformed)?;
            if let Some(created) = created {
                self.keep_backup_checkpoint(created.checkpoint_id, c.index, c.term);
            }
        }
        Ok(())
    }

    fn set_applied(&mut self, index: u64) {
        self.applied = index;
        if !self.export.acknowledged.is_empty() {
            // the export back pressure's measure (a point read of the row just committed)
            self.export.committed_position.store(Engine::last_position(&*self.store), Ordering::Release);
        }
        self.export.committed.store(index, Ordering::Release);
        self.status.lock().expect("status lock").applied_index = index;
    }

    /// Processes and empties `batch`. Standalone, it waits for the batch's commit and then
    /// delivers what it sends out. A replicated leader proposes the batch and goes on (see
    /// [`Processor::in_flight`]): the next batch runs on this one's writes, and what this one
    /// sends out waits for its commit ([`Self::settle`]).
    fn process(&mut self, batch: &mut Vec<Submission>) -> Result<(), String> {
        if !self.raft.is_leader() {
            self.refuse(batch.drain(..));
            return Ok(());
        }
        let mut commands = Vec::with_capacity(batch.len());
        let first_request = self.next_request;
        // the client commands' back-pressure slots, handed over with the batch's delivery
        let mut permits = Vec::with_capacity(batch.len());
        for Submission { mut command, reply, permit, .. } in batch.drain(..) {
            permits.extend(permit);
            if let Some(reply) = reply {
                let id = self.next_request;
                self.next_request += 1;
                self.replies.insert(id, reply);
                command.request_id = Some(id);
            }
            commands.push(command);
        }
        // held by the processor while the engine runs: a failed batch's slots are given back
        self.pending_permits = permits;
        self.metrics.batch_commands.observe(commands.len() as f64);
        supervise::injected_panic(self.id);
        let started = Instant::now();
        let ctx = ProcessingContext {
            now_ms: now_ms(),
            job_streams: &self.streams,
            partition_count: u32::from(self.counts.all()),
            message_partition_count: u32::from(self.counts.messages()),
        };
        // the batches in flight are state this batch runs on, not yet in the store
        let layered;
        let base: &dyn KvRead = if self.in_flight.is_empty() {
            &*self.store
        } else {
            layered = Layered::new(&*self.store, self.in_flight.iter().map(|b| &b.writes).collect());
            &layered
        };
        let mut overlay = Overlay::new(base);
        let output = self.engine.process_batch(&mut overlay, &ctx, commands);
        let writes = overlay.into_writes();
        let permits = std::mem::take(&mut self.pending_permits);
        self.limiter.congested(self.saturation.cuts(self.streams.push_counts(), started));
        let requests = first_request..self.next_request;
        let Some(mut entry) = output.encoded_entry() else {
            if self.in_flight.is_empty() {
                self.deliver(output, permits);
            } else {
                // nothing to commit, but its answers may rest on the batches in flight
                let rider = InFlight { entry: None, writes: WriteSet::default(), bytes: 0, output, permits, requests, processed: started };
                self.in_flight.push_back(rider);
            }
            return Ok(());
        };
        if self.replica.is_some() {
            // the followers apply the batch's writes instead of replaying its events
            let checkpoint = waggle_engine::created_checkpoint(&output.records).is_some();
            let changes = writes.rows().map(|(key, value, fresh)| codec::Change { key, value, fresh });
            codec::append_state_changes(&mut entry, checkpoint, changes);
        }
        let processed = Instant::now();
        self.metrics.batch_processing.observe((processed - started).as_secs_f64());
        let bytes = entry.len();
        let proposed = self.raft.propose(entry).map_err(|e| e.to_string());
        if self.replica.is_none() {
            let committed = proposed.and_then(|()| {
                let expected = self.raft.last_index();
                self.commit_own(expected, writes)
            });
            if let Err(e) = committed {
                // the batch is lost with the partition: the streams it picked for its jobs (the
                // node's, shared with the other partitions) must not keep their places for them
                self.release_streams(&output.side_effects);
                return Err(e);
            }
            self.metrics.batch_commit.observe(processed.elapsed().as_secs_f64());
            if let Some(created) = waggle_engine::created_checkpoint(&output.records) {
                self.keep_backup_checkpoint(created.checkpoint_id, self.applied, self.raft.term());
            }
            self.observe(&output.records);
            self.deliver(output, permits);
            return Ok(());
        }
        let entry = Some((self.raft.last_index(), self.raft.term()));
        self.in_flight_bytes += bytes;
        self.in_flight.push_back(InFlight { entry, writes, bytes, output, permits, requests, processed });
        if let Err(e) = proposed {
            self.abandon_in_flight();
            return Err(e);
        }
        // the appends go out and this replica's copy is written; what commits is settled
        self.drive_raft()
    }

    /// Whether a replicated leader has as much in flight as it may (see [`MAX_IN_FLIGHT_ENTRIES`]).
    fn window_full(&self) -> bool {
        self.in_flight.len() >= self.max_in_flight || self.in_flight_bytes >= MAX_IN_FLIGHT_BYTES
    }

    /// Applies committed entries in log order: this leader's batches in flight by their staged
    /// writes (and then sends out what they send), every other entry by replaying its events.
    /// An entry of another leader where a batch in flight was means that none of them will
    /// commit as this leader's ([`Self::abandon_in_flight`]).
    fn settle(&mut self, committed: Vec<waggle_replication::Committed>) -> Result<(), String> {
        let mut foreign = Vec::new();
        for c in committed {
            let front = self.in_flight.front().and_then(|b| b.entry);
            if front == Some((c.index, c.term)) {
                self.replay(std::mem::take(&mut foreign))?;
                let batch = self.in_flight.pop_front().expect("the batch at the front");
                self.commit_in_flight(batch)?;
                // batches that wrote nothing, released with the one before them
                while self.in_flight.front().is_some_and(|b| b.entry.is_none()) {
                    let rider = self.in_flight.pop_front().expect("a rider");
                    self.deliver(rider.output, rider.permits);
                }
                continue;
            }
            if front.is_some_and(|(index, _)| c.index >= index) {
                self.abandon_in_flight();
            }
            foreign.push(c);
        }
        self.replay(foreign)
    }

    /// Commits a batch in flight whose entry committed: its writes with the applied index, then
    /// what it sends out.
    fn commit_in_flight(&mut self, batch: InFlight) -> Result<(), String> {
        let InFlight { entry, mut writes, bytes, output, permits, processed, .. } = batch;
        self.in_flight_bytes -= bytes;
        if let Some((index, term)) = entry {
            writes.put(META_APPLIED_INDEX.to_vec(), index.to_be_bytes().to_vec());
            self.store.commit_owned(writes).map_err(|e| e.to_string())?;
            self.set_applied(index);
            if let Some(created) = waggle_engine::created_checkpoint(&output.records) {
                self.keep_backup_checkpoint(created.checkpoint_id, index, term);
            }
            self.metrics.batches.inc();
            self.metrics.batch_commit.observe(processed.elapsed().as_secs_f64());
            self.observe(&output.records);
        }
        self.deliver(output, permits);
        Ok(())
    }

    /// Drops every batch in flight (the lead was lost, or the partition stops): their writes
    /// are discarded (the store holds only committed state), their clients are not answered
    /// (they see the partition unavailable), their back-pressure slots and the job streams they
    /// picked are given back. Their entries may still commit under the next leader: this
    /// replica then replays them as a follower.
    fn abandon_in_flight(&mut self) {
        if self.in_flight.is_empty() {
            return;
        }
        let abandoned: Vec<InFlight> = self.in_flight.drain(..).collect();
        self.in_flight_bytes = 0;
        for batch in abandoned {
            self.release_streams(&batch.output.side_effects);
            for permit in batch.permits {
                self.limiter.abandoned(permit);
            }
            for id in batch.requests {
                self.replies.remove(&id);
            }
        }
        // the appliers may have cached models of a deployment in a discarded batch
        self.engine = Engine::with_limits(self.id, self.limits);
    }

    /// Gives back the places in job streams that a batch's pushed jobs took.
    fn release_streams(&self, side_effects: &[SideEffect]) {
        for effect in side_effects {
            if let SideEffect::PushJob { stream_id, .. } = effect {
                self.streams.registry().release(*stream_id);
            }
        }
    }

    /// Sends out what a committed batch sends: answers, pushed jobs, job notifications (one
    /// delivery) and commands for other partitions.
    fn deliver(&mut self, output: BatchOutput, permits: Vec<Permit>) {
        let BatchOutput { records, responses, side_effects, .. } = output;
        self.engine.recycle(records);
        let mut delivery = Delivery {
            replies: Vec::with_capacity(responses.len()),
            pushes: Vec::with_capacity(side_effects.len()),
            jobs_available: Vec::new(),
            permits,
        };
        for (id, record) in responses {
            if let Some(reply) = self.replies.remove(&id) {
                delivery.replies.push((reply, record));
            }
        }
        for effect in side_effects {
            match effect {
                SideEffect::JobsAvailable { job_type } => delivery.jobs_available.push(job_type),
                SideEffect::PushJob { stream_id, job_key, job } => {
                    delivery.pushes.push((stream_id, PushedJob { key: job_key, record: *job }))
                }
                SideEffect::SendCommand { partition, command } => self.outbox.push_back((partition, *command)),
            }
        }
        self.deliverer.send(delivery);
        self.flush_outbox();
    }

    /// Delivers commands for other partitions in the order they were sent; once a partition's
    /// queue is full, the rest for that partition waits for the next round.
    fn flush_outbox(&mut self) {
        if self.outbox.is_empty() {
            return;
        }
        let peers = self.peers.clone();
        let peers = peers.read().unwrap_or_else(|e| e.into_inner());
        if peers.is_empty() {
            return;
        }
        let mut full: Vec<PartitionId> = Vec::new();
        for (partition, command) in std::mem::take(&mut self.outbox) {
            if full.contains(&partition) {
                self.outbox.push_back((partition, command));
                continue;
            }
            let Some(peer) = peers.get(usize::from(partition).wrapping_sub(1)) else {
                tracing::error!(partition = self.id, target = partition, "command for an unknown partition dropped");
                continue;
            };
            // a partition this broker does not hold or lead: to the broker leading it
            let Some(peer) = peer.as_ref().filter(|p| p.leading.load(Ordering::Relaxed)) else {
                if let Some(relay) = &self.relay {
                    relay.send(partition, &command);
                }
                continue;
            };
            match peer.tx.try_send(Submission { command, reply: None, scheduled: false, permit: None }) {
                Ok(()) => {}
                Err(TrySendError::Full(s)) => {
                    full.push(partition);
                    self.outbox.push_back((partition, s.command));
                }
                Err(TrySendError::Disconnected(_)) => {}
            }
        }
    }

    /// Every [`RESEND_UNACKNOWLEDGED_AFTER`], sends again the distributed commands that were
    /// already unacknowledged at the previous check (lost with a receiver's queue, say).
    fn resend_unacknowledged(&mut self) {
        if self.unacknowledged.checked.elapsed() < RESEND_UNACKNOWLEDGED_AFTER || !self.outbox.is_empty() {
            return;
        }
        let pending = waggle_engine::pending_commands(StateView::new(&*self.store), self.id);
        let keys: std::collections::HashSet<i64> = pending.iter().filter_map(|(_, c)| c.distribution.map(|d| d.key)).collect();
        for (partition, command) in pending {
            if command.distribution.is_some_and(|d| self.unacknowledged.keys.contains(&d.key)) {
                tracing::debug!(partition = self.id, target = partition, "re-sending an unacknowledged command");
                self.outbox.push_back((partition, command));
            }
        }
        self.unacknowledged = Unacknowledged { checked: Instant::now(), keys };
    }

    /// Drives Raft until our proposal is committed, then commits its state writes with the
    /// applied index in one batch. Entries before ours (recovery) are replayed first.
    fn commit_own(&mut self, expected: u64, mut writes: WriteSet) -> Result<(), String> {
        for _ in 0..10_000 {
            let committed = self.raft.drive().map_err(|e| e.to_string())?;
            let (before, ours): (Vec<_>, Vec<_>) = committed.into_iter().partition(|c| c.index < expected);
            self.replay(before)?;
            if let Some(c) = ours.iter().find(|c| !c.data.is_empty()) {
                writes.put(META_APPLIED_INDEX.to_vec(), c.index.to_be_bytes().to_vec());
                self.store.commit_owned(writes).map_err(|e| e.to_string())?;
                self.set_applied(c.index);
                self.metrics.batches.inc();
                return Ok(());
            }
            std::thread::sleep(Duration::from_micros(100));
        }
        Err("proposal was not committed".into())
    }

    fn observe(&mut self, records: &[Record]) {
        for r in records {
            match r.record_type {
                RecordType::Command => self.metrics.commands.inc(),
                RecordType::Event => self.metrics.events.inc(),
                RecordType::CommandRejection => self.metrics.rejections.inc(),
            }
            if r.record_type != RecordType::Event {
                continue;
            }
            match (&r.value, r.intent) {
                (RecordValue::ProcessInstance(pi), Intent::ElementActivating) if pi.bpmn_element_type == "PROCESS" => {
                    self.started.insert(r.key, r.timestamp_ms);
                }
                (RecordValue::ProcessInstance(pi), Intent::ElementCompleted) if pi.bpmn_element_type == "PROCESS" => {
                    if let Some(start) = self.started.remove(&r.key) {
                        let secs = (r.timestamp_ms - start).max(0) as f64 / 1000.0;
                        self.metrics.process_instance_execution_time.observe(secs);
                    }
                }
                (RecordValue::ProcessInstance(pi), Intent::ElementTerminated) if pi.bpmn_element_type == "PROCESS" => {
                    self.started.remove(&r.key);
                }
                (RecordValue::Job(_), Intent::Created) => {
                    self.started.insert(r.key, r.timestamp_ms);
                }
                (RecordValue::Job(job), Intent::Completed) => {
                    if let Some(start) = self.started.remove(&r.key) {
                        let secs = (r.timestamp_ms - start).max(0) as f64 / 1000.0;
                        self.metrics.job_life_time(&job.job_type, secs);
                    }
                }
                (RecordValue::Job(_), Intent::Canceled) => {
                    self.started.remove(&r.key);
                }
                _ => {}
            }
        }
        if self.started.len() > 1_000_000 {
            self.started.clear(); // bound memory; only the histograms lose samples
        }
    }

    /// Drops replies whose requester has given up (e.g. a timed-out CreateProcessInstanceWithResult).
    fn prune_replies(&mut self) {
        if self.replies.len() > 1024 {
            self.replies.retain(|_, r| !r.is_closed());
        }
    }

    /// Starts a checkpoint of state in the background once `snapshot_every` entries were applied
    /// since the last one, and compacts the log behind a finished one. Checkpointing (a memtable
    /// flush and hard links) runs off the processing thread so commands do not wait for it.
    fn maybe_snapshot(&mut self) {
        let done = self.snapshot.done.load(Ordering::SeqCst);
        if self.replica.is_some() {
            self.compact_replicated(done);
        } else {
            if done > self.snapshot_index {
                self.snapshot_index = done;
                self.status.lock().expect("status lock").snapshot_index = done;
                tracing::info!(partition = self.id, index = done, "snapshot taken");
            }
            self.compact_standalone();
        }
        // (a learner waits for a snapshot at or after `compact_to`)
        let forced = self.membership_progress.compact_to.is_some_and(|at| self.snapshot_index < at) && self.applied > self.snapshot_index;
        if (self.applied < self.snapshot_index + self.snapshot_every && !forced) || self.snapshot.running.swap(true, Ordering::SeqCst) {
            return;
        }
        let (index, store, dir, progress, id) =
            (self.applied, self.store.clone(), self.snapshots_dir.clone(), self.snapshot.clone(), self.id);
        let spawned = std::thread::Builder::new().name(format!("snapshot-{id}")).spawn(move || {
            let taken = snapshots::take(&store, &dir, index);
            // the store is let go before `running` falls: a stopping or restarting partition
            // waits for `running` to fall before its store is opened again (`supervise::run`)
            drop(store);
            match taken {
                Ok(()) => progress.done.store(index, Ordering::SeqCst),
                Err(e) => tracing::error!(partition = id, error = %e, "snapshot failed"),
            }
            progress.running.store(false, Ordering::SeqCst);
        });
        if let Err(e) = spawned {
            tracing::error!(partition = self.id, error = %e, "snapshot thread did not start");
            self.snapshot.running.store(false, Ordering::SeqCst);
        }
    }
}

impl Processor {
    /// Keeps a copy of the state at the entry `index` (of `term`) that created backup
    /// checkpoint `id`, for the backup (see [`crate::backup`]): every replica keeps one, right
    /// after the entry is applied and before any later one is, so whichever replica leads can
    /// upload the partition's part of the backup, also after a failover. A copy that cannot be
    /// taken is logged: that replica has none to upload. Nothing without a backup store.
    fn keep_backup_checkpoint(&self, id: i64, index: u64, term: u64) {
        if !self.keep_backups {
            return;
        }
        let started = Instant::now();
        let pending = self.snapshots_dir.with_file_name(crate::backup::PENDING_DIR);
        match crate::backup::keep_checkpoint(&self.store, &pending, id, term) {
            Ok(()) => {
                let ms = started.elapsed().as_millis() as u64;
                tracing::info!(partition = self.id, checkpoint = id, index, term, ms, "backup checkpoint kept");
            }
            Err(e) => tracing::error!(partition = self.id, checkpoint = id, index, error = %e, "backup checkpoint not kept"),
        }
    }

    /// The standalone partition's log compaction: up to its newest snapshot, but not past an
    /// entry an exporter has not acknowledged; an exporter that holds it back lets it go on in
    /// steps of at least an eighth of the snapshot interval (each compaction writes the
    /// journal's meta file).
    fn compact_standalone(&mut self) {
        let upto = self.snapshot_index.min(self.export.compaction_bound());
        let step = (self.snapshot_every / 8).max(1);
        if upto <= self.compacted || (upto < self.snapshot_index && upto - self.compacted < step) {
            return;
        }
        let started = Instant::now();
        match self.raft.compact(upto) {
            Ok(()) => {
                self.compacted = upto;
                let compact_ms = started.elapsed().as_millis() as u64;
                tracing::info!(partition = self.id, index = upto, snapshot = self.snapshot_index, compact_ms, "log compacted");
            }
            Err(e) => tracing::error!(partition = self.id, error = %e, "log compaction failed"),
        }
    }

    /// A replicated partition's log compaction, always to its newest snapshot `done` (the
    /// index whose files the group's [`snapshots::CheckpointSource`] names; a replica behind
    /// it is sent them). A follower compacts as soon as its snapshot is taken. A leader waits
    /// while a replica lacks entries up to the snapshot but is less than one snapshot interval
    /// behind it (a live follower catching up reads the log, not a snapshot); a replica further
    /// behind (down, or just wiped) no longer holds compaction back: the log below the
    /// snapshot stays under two intervals.
    fn compact_replicated(&mut self, done: u64) {
        if done > self.snapshot_index {
            self.snapshot_index = done;
            self.status.lock().expect("status lock").snapshot_index = done;
            tracing::info!(partition = self.id, index = done, "snapshot taken");
        }
        let upto = self.snapshot_index;
        if upto <= self.compacted || upto > self.export.compaction_bound() {
            // (a leader's exporters hold it back; on a follower they do not run)
            return;
        }
        // (a learner waiting for its first snapshot is sent this one: it does not hold
        // compaction back)
        let for_learner = self.membership_progress.compact_to.is_some_and(|at| self.compacted < at && upto >= at);
        if let Some(everyone) = self.raft.replicated_to_all().filter(|_| !for_learner) {
            if everyone < upto && upto - everyone <= self.snapshot_every {
                return;
            }
        }
        match self.raft.compact(upto) {
            Ok(()) => {
                self.compacted = upto;
                tracing::info!(partition = self.id, index = upto, "log compacted");
            }
            Err(e) => tracing::error!(partition = self.id, error = %e, "log compaction failed"),
        }
    }
}

/// Hands a peer's message to the group; a message Raft refuses (from outside the group, or
/// for another replica) is dropped.
fn step(raft: &mut RaftGroup, mut message: Message) {
    // A heartbeat carries the leader's commit index up to what the leader last knew this
    // replica to hold. A replica whose data directory was lost holds less, and Raft would
    // panic committing past its log: it keeps its commit index instead; its log is repaired by
    // the leader's next append, which it refuses (then the leader sends a snapshot).
    if message.msg_type() == MessageType::MsgHeartbeat && message.commit > raft.last_index() {
        message.commit = raft.commit_index();
    }
    if let Err(e) = raft.step(message) {
        tracing::debug!(error = %e, "raft message dropped");
    }
}

/// Hands a piece of a snapshot transfer to the group; one it refuses is dropped (the sender
/// resends from what was acknowledged).
fn receive_snapshot(raft: &mut RaftGroup, packet: SnapshotPacket) {
    if let Err(e) = raft.receive_snapshot(packet) {
        tracing::debug!(error = %e, "snapshot packet dropped");
    }
}

/// Distribution keys found unacknowledged at the last check, and when it was.
struct Unacknowledged {
    checked: Instant,
    keys: std::collections::HashSet<i64>,
}

impl Default for Unacknowledged {
    fn default() -> Self {
        Self { checked: Instant::now(), keys: Default::default() }
    }
}

/// A background snapshot's progress, shared with the processing thread.
#[derive(Default, Clone)]
struct SnapshotProgress {
    running: Arc<AtomicBool>,
    /// The index of the newest finished snapshot (0: none this run).
    done: Arc<AtomicU64>,
}
