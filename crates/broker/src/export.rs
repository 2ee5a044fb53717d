//! Runs a partition's exporters ([`waggle_exporter::Exporter`]): one thread per exporter and
//! partition, reading the partition's committed log entries from the journal's files
//! ([`waggle_log::LogReader`]) after their commit, never on the processing thread. The
//! processing thread only publishes its applied index (an atomic store per batch) and reads
//! the exporters' compaction bounds when it compacts the log; with no exporter configured,
//! nothing runs.
//!
//! - **Where:** an exporter runs while its partition is led here (always, standalone); on
//!   losing the lead it is closed, and opened anew when the partition is led here again.
//! - **Resuming:** each exporter's acknowledged position, and the log index export resumes at,
//!   are persisted in `partitions/<p>/exporters/<id>.position` (written atomically, at most
//!   every [`PERSIST_EVERY`], and at close): after a restart, even `kill -9`, export resumes at
//!   that entry and skips the records up to the position: at least once.
//! - **Compaction:** each exporter publishes the last log index whose records it acknowledged
//!   *and persisted* ([`ExportBounds`]); the partition compacts its log no further than the
//!   lowest. A new leader whose log was compacted past its exporters' positions goes on at its
//!   first entry, counting the entries skipped.
//! - **Followers:** in a cluster the leader's runners send their persisted progress to the
//!   partition's other replicas every [`DISTRIBUTE_EVERY`] ([`Distribution`]); a follower's
//!   runner persists a received progress higher than its own and holds its replica's
//!   compaction back to it, so a new leader resumes export at a recent position (Zeebe's
//!   `ExporterDirector` distributes its exporters' positions to the followers at a fixed rate,
//!   and a follower keeps a received position when it is higher than its own:
//!   `zeebe/broker/.../exporter/stream/ExporterDirector.java`, camunda/camunda). An exporter
//!   whose target is local to the node (the SQLite query store, the debug file) therefore
//!   holds, after a failover, what this node exported while it led plus what the new leader
//!   exports; a shared target (a database every broker writes) is whole.
//! - **Failures:** a call that fails is retried with back-off ([`MIN_BACKOFF`] doubling to
//!   [`MAX_BACKOFF`]), counted in `waggle_exporter_errors_total`; it holds back only its own
//!   exporter (and compaction).
//! - **Stuck:** an exporter with committed entries to acknowledge that acknowledged nothing for
//!   the configured time is reported stuck (`waggle_exporter_stuck`, `/health`).
//! - **Bounded lag** (issue 27): while an exporter runs here, works (no failed call waiting for
//!   its retry) and is not stuck, and more than [`ExportConfig::max_backlog_records`] committed
//!   records (positions: the committed position minus its acknowledged one) wait for its
//!   acknowledgement, the partition refuses new process instances ([`BacklogGate`]):
//!   RESOURCE_EXHAUSTED, as back pressure answers, until it is back under. Every other command
//!   is taken, so the instances already running finish and the backlog drains. The bound is in
//!   records, not log entries: an entry is a batch of one to thousands of records, and a bound
//!   in entries let W2's huge entries pile up to a minute of export work, then admitted only as
//!   many (tiny) new entries as the exporter retired huge old ones, so the rate collapsed to a
//!   trickle instead of following the exporter's pace (docs/performance.md). A failing or stuck
//!   exporter holds nothing back, as before (its alarm is `/health`; the disk watermarks stop
//!   the partition before the disk fills).
//! - **Panics** (issue 30): a runner thread catches a panic of its exporter (a bug in the
//!   store, a driver's panic) or of its own: the exporter shows DOWN in `/health`
//!   (`waggle_exporter_health` 0, `waggle_exporter_panics_total`, the panic in the log), its
//!   instance is dropped, and after a back-off ([`MIN_RESTART_BACKOFF`] doubling with each
//!   panic in the window, at most [`MAX_RESTART_BACKOFF`]) a new instance resumes from the
//!   persisted acknowledged progress, so its records are exported at least once, as after a
//!   restart of the node. The partition keeps processing meanwhile (the gate does not count a
//!   down exporter; compaction stays held at its persisted progress). After [`MAX_PANICS`]
//!   within [`PANIC_WINDOW`] it is left down, *dead* (`waggle_exporter_health` -1, DEAD in
//!   `/health`), until the node restarts, as a partition is (`partition/supervise.rs`).

use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use waggle_exporter::{Context, Controller, Exporter, ExporterFactory};
use waggle_log::LogReader;
use waggle_protocol::codec::for_each_record;
use waggle_protocol::PartitionId;

use crate::metrics::{BrokerMetrics, ExporterMetrics};

/// How often a partition's leader sends its exporters' persisted progress to the other
/// replicas (Zeebe's `distributionInterval`; a message of a few bytes per exporter).
pub const DISTRIBUTE_EVERY: Duration = Duration::from_secs(1);

/// The network group carrying partition `p`'s exporter positions (above the command groups
/// of `relay.rs`).
pub(crate) fn positions_group(p: PartitionId) -> u64 {
    (2 << 40) | u64::from(p)
}

/// The way a partition's exporter positions travel between its replicas (a cluster only): the
/// leader's runners send, the followers' runners receive. Best effort, as the network is: a
/// lost message is superseded by the next one.
pub(crate) struct Distribution {
    transport: Mutex<waggle_replication::net::NetTransport>,
    inbox: Mutex<std::sync::mpsc::Receiver<waggle_replication::Message>>,
    /// This replica's Raft id, and the others'.
    from: u64,
    to: Vec<u64>,
    /// Progress received and not yet taken by its exporter's runner, by exporter id.
    received: Mutex<std::collections::HashMap<String, Progress>>,
}

impl Distribution {
    /// Registers partition `id`'s positions group on `network`; `voters` are the replicas'
    /// Raft ids (this one's, `from`, included).
    pub fn new(id: PartitionId, network: &waggle_replication::net::RaftNetwork, from: u64, voters: &[u64]) -> Distribution {
        let (transport, inbox) = network.register(positions_group(id));
        Distribution {
            transport: Mutex::new(transport),
            inbox: Mutex::new(inbox),
            from,
            to: voters.iter().copied().filter(|&v| v != from).collect(),
            received: Mutex::default(),
        }
    }

    fn send(&self, exporter: &str, progress: Progress) {
        use waggle_replication::Transport;
        let Ok(context) = postcard::to_allocvec(&(exporter, progress.position, progress.index)) else { return };
        let messages = self
            .to
            .iter()
            .map(|&to| waggle_replication::Message { to, from: self.from, context: context.clone(), ..Default::default() })
            .collect();
        self.transport.lock().expect("distribution lock").send(messages);
    }

    /// The highest progress received for `exporter` since the last call, if any.
    fn take(&self, exporter: &str) -> Option<Progress> {
        let mut received = self.received.lock().expect("distribution lock");
        for message in self.inbox.lock().expect("distribution lock").try_iter() {
            match postcard::from_bytes::<(String, u64, u64)>(&message.context) {
                Ok((id, position, index)) => {
                    let known = received.entry(id).or_default();
                    if position > known.position {
                        *known = Progress { position, index };
                    }
                }
                Err(e) => tracing::warn!(from = message.from, error = %e, "an undecodable exporter position dropped"),
            }
        }
        received.remove(exporter)
    }
}

/// The first retry of a failed call waits this long; each further failure doubles it.
pub const MIN_BACKOFF: Duration = Duration::from_millis(100);
pub const MAX_BACKOFF: Duration = Duration::from_secs(10);
/// How often an exporter's acknowledged position is persisted at most.
pub const PERSIST_EVERY: Duration = Duration::from_millis(200);
/// Log entries read before the records read so far are flushed.
const ENTRIES_PER_ROUND: usize = 256;
/// Bytes of log entries queued before the records read so far are flushed (a W2 entry holds
/// thousands of records in ~50 bytes each; a round of 256 such entries took the store 20 s,
/// acknowledging nothing meanwhile; 20,000 records, the bound before, were ~1 MB).
const BYTES_PER_ROUND: usize = 1 << 20;
/// An exporter is flushed at most this often while records keep coming (unless
/// [`FLUSH_RECORDS`] wait): a flush is a commit of the query store's transaction, and under a
/// steady load the runner otherwise flushed every round, each a couple of milliseconds' worth of
/// records. Every commit writes the pages its rows touched again (the same right-hand pages of
/// the same indexes), and an element's end folds into its insert only within one commit, so
/// at 25 instances in flight the store's exporter took more than half the server's CPU and
/// W2-25 fell to ~60 % of its rate without the store (docs/performance.md, W2-25). The first
/// records after a quiet spell are flushed at once. (Camunda's own RDBMS exporter flushes every
/// 500 ms or 1,000 queued records by default.)
pub const FLUSH_EVERY: Duration = Duration::from_millis(50);
/// Records exported since the last flush that make the next round flush whatever the time.
const FLUSH_RECORDS: u64 = 20_000;
/// How long an exporter with nothing to do waits before looking at the commit index again.
const IDLE_WAIT: Duration = Duration::from_millis(2);
/// How long a runner of a partition not led here waits before looking again.
const FOLLOWER_WAIT: Duration = Duration::from_millis(50);

/// The default of [`ExportConfig::max_backlog_records`]: about 3 s of the query store
/// exporter's work at W2's rate on a quiet machine. There it exported about 340,000-400,000
/// records/s (W2 at 17.7k-18k PI/s wrote some 500,000 records/s and the store fell behind by
/// ~160,000/s; 64 M records took it ~160 s: docs/performance.md), so a million records is a
/// few seconds of staleness, an order of magnitude above what the ~200 ms between the store's
/// synced commits leave unacknowledged at that rate (~80,000), so the gate does not engage on
/// that cadence alone, and small enough that the gate follows the exporter's pace closely.
pub const DEFAULT_MAX_BACKLOG_RECORDS: u64 = 1_000_000;

/// Panics of one exporter on one partition within [`PANIC_WINDOW`] after which it is left down.
pub const MAX_PANICS: usize = 5;
pub const PANIC_WINDOW: Duration = Duration::from_secs(600);
/// The wait before an exporter that panicked is restarted; it doubles with each panic in the
/// window, up to [`MAX_RESTART_BACKOFF`].
pub const MIN_RESTART_BACKOFF: Duration = Duration::from_millis(500);
pub const MAX_RESTART_BACKOFF: Duration = Duration::from_secs(30);

/// The exporters a node runs, when one counts as stuck, and how far one may fall behind.
#[derive(Debug, Clone)]
pub struct ExportConfig {
    pub exporters: Vec<Arc<ExporterFactory>>,
    /// An exporter behind the commit index that acknowledged nothing for this long is stuck.
    pub stuck_after: Duration,
    /// Committed records (positions) an exporter may leave unacknowledged before the
    /// partition refuses new process instances ([`BacklogGate`]); 0: never.
    pub max_backlog_records: u64,
}

impl Default for ExportConfig {
    fn default() -> Self {
        Self { exporters: Vec::new(), stuck_after: Duration::from_secs(60), max_backlog_records: DEFAULT_MAX_BACKLOG_RECORDS }
    }
}

/// Bounded export lag (see the module): whether a partition takes a new process instance, from
/// its committed position and each exporter's acknowledged position.
pub(crate) struct BacklogGate {
    /// The position of the partition's last committed record.
    committed_position: Arc<AtomicU64>,
    /// Per exporter: its acknowledged position, while it runs here, works and is not stuck;
    /// `u64::MAX` otherwise (it holds nothing back).
    acknowledged: Vec<Arc<AtomicU64>>,
    max_backlog_records: u64,
    /// New process instances refused (`waggle_export_backpressure_refused_total`).
    refused: prometheus::IntCounter,
}

impl BacklogGate {
    /// The committed records the furthest behind of the exporters that count has not
    /// acknowledged (positions are dense: one per record).
    pub fn backlog(&self) -> u64 {
        let low = self.acknowledged.iter().map(|e| e.load(Ordering::Acquire)).min().unwrap_or(u64::MAX);
        self.committed_position.load(Ordering::Acquire).saturating_sub(low)
    }

    /// Whether the partition takes `command`: anything but a new process instance always, a
    /// new instance while the backlog is within the bound (counted when refused).
    pub fn admits(&self, command: &waggle_engine::Command) -> bool {
        use waggle_protocol::{Intent, RecordValue};
        let creates = matches!(
            (&command.value, command.intent),
            (RecordValue::ProcessInstanceCreation(_), Intent::Create | Intent::CreateWithAwaitingResult)
        );
        if self.max_backlog_records == 0 || !creates || self.backlog() <= self.max_backlog_records {
            return true;
        }
        self.refused.inc();
        false
    }
}

/// What a partition's processing thread shares with its exporters.
#[derive(Clone, Default)]
pub(crate) struct ExportBounds {
    /// The partition's applied (committed) log index.
    pub committed: Arc<AtomicU64>,
    /// The position of its last applied record (kept only while exporters are configured).
    pub committed_position: Arc<AtomicU64>,
    /// Per exporter: every record of the log entries up to this index is acknowledged and
    /// persisted (`u64::MAX` while the exporter does not run here).
    pub acknowledged: Vec<Arc<AtomicU64>>,
}

impl ExportBounds {
    /// The highest log index the log may be compacted to for the exporters' sake.
    pub fn compaction_bound(&self) -> u64 {
        self.acknowledged.iter().map(|a| a.load(Ordering::Acquire)).min().unwrap_or(u64::MAX)
    }
}

/// What `/health` and the management API show of an exporter on a partition.
#[derive(Debug, Clone, Default)]
pub struct ExporterStatus {
    pub exporter: String,
    pub partition_id: PartitionId,
    /// Whether it runs here (the partition is led here and the exporter opened).
    pub running: bool,
    pub last_exported_position: u64,
    pub acknowledged_position: u64,
    /// Committed log entries not yet handed to the exporter, and not yet acknowledged.
    pub lag_entries: u64,
    pub unacknowledged_entries: u64,
    /// Committed records (positions) not yet acknowledged: what the [`BacklogGate`] bounds.
    pub unacknowledged_records: u64,
    /// Panicked and not running again yet (restarting, or dead); see the module.
    pub down: bool,
    /// Panicked too often: left down until the node restarts.
    pub dead: bool,
    /// Panics so far, and the last one's message.
    pub panics: u64,
    pub last_panic: Option<String>,
    pub errors: u64,
    pub last_error: Option<String>,
    /// Behind, and no acknowledgement for longer than the configured time.
    pub stuck: bool,
    /// Log entries the log no longer held when the exporter came to them (see the module).
    pub skipped_entries: u64,
}

/// The persisted progress of one exporter on one partition.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Progress {
    /// The highest acknowledged position (0: none).
    position: u64,
    /// The log index export resumes at: every entry before it is acknowledged.
    index: u64,
}

fn progress_path(dir: &Path, exporter: &str) -> PathBuf {
    dir.join(format!("{exporter}.position"))
}

fn read_progress(path: &Path) -> Progress {
    let Ok(text) = std::fs::read_to_string(path) else { return Progress { position: 0, index: 1 } };
    let value: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
    Progress { position: value["position"].as_u64().unwrap_or(0), index: value["index"].as_u64().unwrap_or(1).max(1) }
}

/// tmp file, fsync, rename, directory fsync: a crash leaves the old or the new progress.
fn write_progress(path: &Path, progress: Progress) -> std::io::Result<()> {
    use std::io::Write;
    let tmp = path.with_extension("position.tmp");
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(serde_json::json!({ "position": progress.position, "index": progress.index }).to_string().as_bytes())?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent() {
        std::fs::File::open(dir)?.sync_all()?;
    }
    Ok(())
}

/// Starts one runner thread per configured exporter for partition `id`, whose log is in
/// `log_dir` and whose exporter progress goes to `progress_dir`; `committed` and
/// `committed_position` are the partition's applied index and last applied position.
#[allow(clippy::too_many_arguments)]
pub(crate) fn start(
    id: PartitionId,
    config: &ExportConfig,
    log_dir: &Path,
    progress_dir: &Path,
    committed: Arc<AtomicU64>,
    committed_position: u64,
    leading: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    metrics: &BrokerMetrics,
    distribution: Option<Arc<Distribution>>,
) -> std::io::Result<Runners> {
    let committed_position = Arc::new(AtomicU64::new(committed_position));
    let mut bounds =
        ExportBounds { committed: committed.clone(), committed_position: committed_position.clone(), acknowledged: Vec::new() };
    let (mut statuses, mut threads) = (Vec::new(), Vec::new());
    let mut gate = BacklogGate {
        committed_position: committed_position.clone(),
        acknowledged: Vec::new(),
        max_backlog_records: config.max_backlog_records,
        refused: metrics.export_backpressure_refused.with_label_values(&[&id.to_string()]),
    };
    if config.exporters.is_empty() {
        return Ok(Runners { bounds, statuses, threads, gate });
    }
    std::fs::create_dir_all(progress_dir)?;
    for factory in &config.exporters {
        // until it runs, the persisted progress holds compaction back
        let progress = read_progress(&progress_path(progress_dir, &factory.id));
        let bound = Arc::new(AtomicU64::new(progress.index - 1));
        let status = Arc::new(Mutex::new(ExporterStatus {
            exporter: factory.id.clone(),
            partition_id: id,
            acknowledged_position: progress.position,
            ..Default::default()
        }));
        let exported = Arc::new(AtomicU64::new(u64::MAX));
        let runner = Runner {
            exported: exported.clone(),
            partition: id,
            factory: factory.clone(),
            log_dir: log_dir.to_path_buf(),
            progress_path: progress_path(progress_dir, &factory.id),
            committed: committed.clone(),
            committed_position: committed_position.clone(),
            leading: leading.clone(),
            stop: stop.clone(),
            bound: bound.clone(),
            status: status.clone(),
            metrics: metrics.exporter(&factory.id, id),
            stuck_after: config.stuck_after,
            distribution: distribution.clone(),
        };
        runner.metrics.health.set(1);
        let thread = std::thread::Builder::new().name(format!("export-{id}-{}", factory.id)).spawn(move || {
            run_in_background();
            runner.run()
        })?;
        bounds.acknowledged.push(bound);
        gate.acknowledged.push(exported);
        statuses.push(status);
        threads.push(thread);
    }
    Ok(Runners { bounds, statuses, threads, gate })
}

/// A partition's exporter runners, as [`start`] started them.
pub(crate) struct Runners {
    pub bounds: ExportBounds,
    pub statuses: Vec<Arc<Mutex<ExporterStatus>>>,
    pub threads: Vec<JoinHandle<()>>,
    pub gate: BacklogGate,
}

struct Runner {
    partition: PartitionId,
    factory: Arc<ExporterFactory>,
    log_dir: PathBuf,
    progress_path: PathBuf,
    committed: Arc<AtomicU64>,
    committed_position: Arc<AtomicU64>,
    leading: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    bound: Arc<AtomicU64>,
    /// This exporter's part of the [`BacklogGate`]: its acknowledged position while it counts.
    exported: Arc<AtomicU64>,
    status: Arc<Mutex<ExporterStatus>>,
    metrics: ExporterMetrics,
    stuck_after: Duration,
    distribution: Option<Arc<Distribution>>,
}

/// What failed last, to be retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Retry {
    Open,
    Export,
    Flush,
    Scheduled(u64),
}

/// An exporter opened on a partition led here.
struct Active {
    exporter: Box<dyn Exporter>,
    controller: Controller,
    reader: LogReader,
    /// The entries read whose records are not all exported, in log order, as they are in the
    /// log: their records are decoded one at a time as they are exported
    /// ([`waggle_protocol::codec::for_each_record`]), so no record vector is built per entry
    /// (under W2 those vectors, a few MB for each entry and freed a moment later, held ~20 MB
    /// of the server's RSS; docs/performance.md, W6).
    queue: std::collections::VecDeque<Queued>,
    /// Bytes of the entries in `queue`.
    queued_bytes: usize,
    /// Log entries read whose records are not all acknowledged: (index, last position).
    entries: std::collections::VecDeque<(u64, u64)>,
    /// Records up to this position were acknowledged before this opening: not exported again.
    skip_upto: u64,
    last_exported: u64,
    /// Records exported since the last flush.
    unflushed: u64,
    /// When the exporter was last flushed.
    flushed_at: Instant,
    /// Whether `open` succeeded.
    opened: bool,
    persisted: Progress,
    persisted_at: Instant,
    retry: Option<(Retry, Instant, Duration)>,
    last_progress: Instant,
    stages: Stages,
    /// When the persisted progress was last sent to the other replicas.
    distributed_at: Option<Instant>,
}

/// A log entry waiting for its records to be exported.
struct Queued {
    index: u64,
    data: Vec<u8>,
    /// Its records exported (or skipped as acknowledged before) so far, from the first.
    done: usize,
}

/// Where an exporter's time goes, logged at debug level every [`STAGES_EVERY`] (target
/// `waggle_broker::export`): journal reads, queueing, decoding with the `export` calls,
/// `flush` calls.
#[derive(Debug)]
struct Stages {
    since: Instant,
    entries: u64,
    records: u64,
    read: Duration,
    decode: Duration,
    export: Duration,
    flush: Duration,
    flushes: u64,
}

const STAGES_EVERY: Duration = Duration::from_secs(10);

impl Stages {
    fn new() -> Self {
        Stages {
            since: Instant::now(),
            entries: 0,
            records: 0,
            read: Duration::ZERO,
            decode: Duration::ZERO,
            export: Duration::ZERO,
            flush: Duration::ZERO,
            flushes: 0,
        }
    }

    fn report(&mut self, partition: PartitionId, exporter: &str) {
        let elapsed = self.since.elapsed();
        if elapsed < STAGES_EVERY {
            return;
        }
        let busy = self.read + self.decode + self.export + self.flush;
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        tracing::debug!(
            partition,
            exporter,
            elapsed_ms = ms(elapsed) as u64,
            entries = self.entries,
            records = self.records,
            flushes = self.flushes,
            read_ms = ms(self.read) as u64,
            decode_ms = ms(self.decode) as u64,
            export_ms = ms(self.export) as u64,
            flush_ms = ms(self.flush) as u64,
            records_per_busy_s = (self.records as f64 / busy.as_secs_f64().max(1e-9)) as u64,
            "exporter stage times"
        );
        *self = Stages::new();
    }
}

impl Runner {
    /// The thread's body: runs the exporter under supervision (see the module's **Panics**).
    fn run(self) {
        let mut panics: VecDeque<Instant> = VecDeque::new();
        let mut active: Option<Active> = None;
        loop {
            let ran = catch_unwind(AssertUnwindSafe(|| self.run_until_stopped(&mut active)));
            let Err(payload) = ran else { break };
            let failure = format!("panic: {}", crate::partition::panic_message(payload.as_ref()));
            // the instance that panicked is not used again (its drop may panic as well)
            if let Some(a) = active.take() {
                let _ = catch_unwind(AssertUnwindSafe(move || drop(a)));
            }
            if !self.panicked(&mut panics, failure) {
                return;
            }
        }
        if let Some(a) = active.take() {
            if let Err(payload) = catch_unwind(AssertUnwindSafe(|| self.close(a))) {
                let error = crate::partition::panic_message(payload.as_ref());
                tracing::error!(partition = self.partition, exporter = %self.factory.id, error = %error, "exporter panicked while closing");
            }
        }
    }

    /// Reports a panic and waits out the back-off before the next instance; whether to go on
    /// (false: too many panics, the exporter stays down until the node stops).
    fn panicked(&self, panics: &mut VecDeque<Instant>, failure: String) -> bool {
        let now = Instant::now();
        panics.push_back(now);
        while panics.front().is_some_and(|t| now.duration_since(*t) > PANIC_WINDOW) {
            panics.pop_front();
        }
        // it holds no new instance back while down; compaction stays at its persisted progress
        self.exported.store(u64::MAX, Ordering::Release);
        self.metrics.panics.inc();
        let dead = panics.len() >= MAX_PANICS;
        {
            let mut s = self.status.lock().unwrap_or_else(|e| e.into_inner());
            s.running = false;
            s.down = true;
            s.dead = dead;
            s.panics += 1;
            s.last_panic = Some(failure.clone());
        }
        if dead {
            self.metrics.health.set(-1);
            tracing::error!(
                partition = self.partition,
                exporter = %self.factory.id,
                error = %failure,
                panics = panics.len(),
                window_s = PANIC_WINDOW.as_secs(),
                "exporter panicked too often: left down (dead) until the node restarts; the partition goes on, its log is kept from the exporter's acknowledged position"
            );
            while !self.stop.load(Ordering::SeqCst) {
                std::thread::sleep(FOLLOWER_WAIT);
            }
            return false;
        }
        self.metrics.health.set(0);
        let backoff = MIN_RESTART_BACKOFF.saturating_mul(1 << (panics.len() - 1).min(16)).min(MAX_RESTART_BACKOFF);
        let backoff = backoff.max(injected_hold());
        tracing::error!(
            partition = self.partition,
            exporter = %self.factory.id,
            error = %failure,
            restart_in_ms = backoff.as_millis() as u64,
            "exporter panicked; restarting it from its acknowledged position"
        );
        let until = Instant::now() + backoff;
        while Instant::now() < until && !self.stop.load(Ordering::SeqCst) {
            std::thread::sleep(FOLLOWER_WAIT.min(until.saturating_duration_since(Instant::now())));
        }
        true
    }

    /// After a panic: the exporter runs again (opened, or not led here).
    fn recovered(&self) {
        let mut s = self.status.lock().unwrap_or_else(|e| e.into_inner());
        if s.down && !s.dead {
            s.down = false;
            self.metrics.health.set(1);
            tracing::info!(partition = self.partition, exporter = %self.factory.id, "exporter restarted after a panic");
        }
    }

    /// Exports while the partition is led here, until the node stops; `active` is left for
    /// [`Runner::run`] to close (or to drop, after a panic).
    fn run_until_stopped(&self, active: &mut Option<Active>) {
        while !self.stop.load(Ordering::SeqCst) {
            if !self.leading.load(Ordering::SeqCst) {
                if let Some(a) = active.take() {
                    self.close(a);
                }
                self.recovered();
                self.follow();
                std::thread::sleep(FOLLOWER_WAIT);
                continue;
            }
            let a = active.get_or_insert_with(|| self.activate());
            let busy = self.step(a);
            self.report(a);
            self.distribute(a);
            if !busy {
                let wait = a.retry.map_or(IDLE_WAIT, |(_, at, _)| at.saturating_duration_since(Instant::now()).min(FOLLOWER_WAIT));
                let wait = a.controller.next_due().map_or(wait, |due| wait.min(due.saturating_duration_since(Instant::now())));
                std::thread::sleep(wait.max(Duration::from_micros(200)));
            }
        }
    }

    /// The leader's part of [`Distribution`]: sends the persisted progress every
    /// [`DISTRIBUTE_EVERY`].
    fn distribute(&self, a: &mut Active) {
        let Some(distribution) = &self.distribution else { return };
        if a.persisted.position == 0 || a.distributed_at.is_some_and(|at| at.elapsed() < DISTRIBUTE_EVERY) {
            return;
        }
        distribution.send(&self.factory.id, a.persisted);
        a.distributed_at = Some(Instant::now());
    }

    /// A follower's part of [`Distribution`]: persists a received progress higher than the
    /// persisted one, then holds compaction back to it (a new leader here resumes after it).
    fn follow(&self) {
        let Some(received) = self.distribution.as_ref().and_then(|d| d.take(&self.factory.id)) else { return };
        let persisted = read_progress(&self.progress_path);
        if received.position <= persisted.position || received.index < persisted.index {
            return;
        }
        match write_progress(&self.progress_path, received) {
            Ok(()) => {
                self.bound.store(received.index - 1, Ordering::Release);
                self.status.lock().unwrap_or_else(|e| e.into_inner()).acknowledged_position = received.position;
                self.metrics.acknowledged_position.set(received.position as i64);
            }
            Err(e) => self.count_error(&format!("persisting the leader's exporter position: {e}")),
        }
    }

    /// A new instance of the exporter, to be opened at the persisted progress.
    fn activate(&self) -> Active {
        let progress = read_progress(&self.progress_path);
        Active {
            exporter: self.factory.make(),
            controller: Controller::new(progress.position),
            reader: LogReader::open(&self.log_dir, progress.index),
            queue: Default::default(),
            queued_bytes: 0,
            entries: Default::default(),
            skip_upto: progress.position,
            last_exported: progress.position,
            unflushed: 0,
            flushed_at: Instant::now().checked_sub(FLUSH_EVERY).unwrap_or_else(Instant::now),
            opened: false,
            persisted: progress,
            persisted_at: Instant::now(),
            retry: Some((Retry::Open, Instant::now(), Duration::ZERO)),
            last_progress: Instant::now(),
            stages: Stages::new(),
            distributed_at: None,
        }
    }

    /// One round: a due retry, due scheduled tasks, then up to [`ENTRIES_PER_ROUND`] entries
    /// (or [`BYTES_PER_ROUND`]) read and exported, then flushed if [`FLUSH_EVERY`] has passed
    /// since the last flush (or [`FLUSH_RECORDS`] wait). Whether there was work.
    fn step(&self, a: &mut Active) -> bool {
        let now = Instant::now();
        if let Some((what, at, backoff)) = a.retry {
            if now < at {
                return false;
            }
            let result = match what {
                Retry::Open => self.open(a),
                Retry::Export => self.export_queue(a),
                Retry::Flush => self.flush(a),
                Retry::Scheduled(task) => {
                    let Active { exporter, controller, .. } = a;
                    exporter.on_scheduled(task, controller)
                }
            };
            match result {
                Ok(()) => a.retry = None,
                Err(e) => {
                    self.failed(a, what, backoff, e);
                    return false;
                }
            }
        }
        for task in a.controller.take_due(now) {
            let Active { exporter, controller, .. } = a;
            if let Err(e) = exporter.on_scheduled(task, controller) {
                self.failed(a, Retry::Scheduled(task), Duration::ZERO, e);
                return false;
            }
        }
        let committed = self.committed.load(Ordering::Acquire);
        let mut read = 0;
        while read < ENTRIES_PER_ROUND && a.queued_bytes < BYTES_PER_ROUND {
            let started = Instant::now();
            let next = a.reader.next(committed);
            a.stages.read += started.elapsed();
            match next {
                Ok(Some(entry)) => {
                    read += 1;
                    let started = Instant::now();
                    self.take_entry(a, entry);
                    a.stages.decode += started.elapsed();
                    a.stages.entries += 1;
                }
                Ok(None) => break,
                Err(e) => {
                    self.count_error(&format!("reading the log: {e}"));
                    a.retry = Some((Retry::Export, now + MAX_BACKOFF, MAX_BACKOFF));
                    return false;
                }
            }
        }
        let started = Instant::now();
        let exported = self.export_queue(a);
        a.stages.export += started.elapsed();
        if let Err(e) = exported {
            self.failed(a, Retry::Export, Duration::ZERO, e);
            return read > 0;
        }
        if a.unflushed > 0 && (a.unflushed >= FLUSH_RECORDS || a.flushed_at.elapsed() >= FLUSH_EVERY) {
            let started = Instant::now();
            let flushed = self.flush(a);
            a.stages.flush += started.elapsed();
            a.stages.flushes += 1;
            if let Err(e) = flushed {
                self.failed(a, Retry::Flush, Duration::ZERO, e);
                return read > 0;
            }
        }
        self.acknowledged(a, false);
        a.stages.report(self.partition, &self.factory.id);
        read > 0
    }

    fn open(&self, a: &mut Active) -> Result<(), waggle_exporter::ExportError> {
        if !a.opened {
            a.exporter.configure(&Context { exporter_id: self.factory.id.clone(), partition_id: self.partition })?;
            a.exporter.open(&mut a.controller)?;
            a.opened = true;
            tracing::info!(partition = self.partition, exporter = %self.factory.id, after = a.skip_upto, "exporter opened");
            self.recovered();
        }
        Ok(())
    }

    /// Queues a committed entry for export; Raft's own entries (a leader's empty entry,
    /// configuration changes, 0xFF) hold no records.
    fn take_entry(&self, a: &mut Active, entry: waggle_log::Entry) {
        if entry.data.is_empty() || entry.data[0] == 0xFF {
            a.entries.push_back((entry.index, 0));
            return;
        }
        // its last position is known once its records are exported: until then it holds the
        // acknowledgement (and the resume index) at this entry
        a.entries.push_back((entry.index, u64::MAX));
        a.queued_bytes += entry.data.len();
        a.queue.push_back(Queued { index: entry.index, data: entry.data, done: 0 });
    }

    /// Exports the queued entries' records in order, leaving out those acknowledged before;
    /// the one that fails stays next (its entry is decoded again from the first record then).
    fn export_queue(&self, a: &mut Active) -> Result<(), waggle_exporter::ExportError> {
        let Active { queue, queued_bytes, entries, exporter, controller, skip_upto, last_exported, unflushed, stages, .. } = a;
        // a test's injected panic comes after the first record exported (debug builds)
        let mut panic_in: Option<u32> = if !queue.is_empty() && injected_panic(&self.factory.id, self.partition) { Some(1) } else { None };
        while let Some(q) = queue.front_mut() {
            let (mut seen, mut last, mut failed) = (0, 0, None);
            let decoded = for_each_record(&q.data, |record| {
                seen += 1;
                last = record.position;
                if failed.is_some() || seen <= q.done {
                    return;
                }
                // positions grow within an entry: the ones acknowledged before come first
                if record.position > *skip_upto {
                    match panic_in.as_mut() {
                        Some(0) => panic!(
                            "injected panic (WAGGLE_TEST_EXPORTER_PANIC_FILE) in exporter {} on partition {}",
                            self.factory.id, self.partition
                        ),
                        Some(n) => *n -= 1,
                        None => {}
                    }
                    if let Err(e) = exporter.export(record, controller) {
                        failed = Some(e);
                        return;
                    }
                    *last_exported = record.position;
                    *unflushed += 1;
                    stages.records += 1;
                }
                q.done = seen;
            });
            if let Some(e) = failed {
                return Err(e);
            }
            if let Err(e) = decoded {
                self.count_error(&format!("log entry {} does not decode: {e}", q.index));
            }
            let index = q.index;
            *queued_bytes -= q.data.len();
            queue.pop_front();
            if let Some(entry) = entries.iter_mut().rev().find(|e| e.0 == index) {
                entry.1 = last;
            }
        }
        Ok(())
    }

    fn flush(&self, a: &mut Active) -> Result<(), waggle_exporter::ExportError> {
        a.exporter.flush(&mut a.controller)?;
        a.unflushed = 0;
        a.flushed_at = Instant::now();
        Ok(())
    }

    fn failed(&self, a: &mut Active, what: Retry, backoff: Duration, e: waggle_exporter::ExportError) {
        let backoff = (backoff * 2).clamp(MIN_BACKOFF, MAX_BACKOFF);
        tracing::warn!(partition = self.partition, exporter = %self.factory.id, error = %e, retry_in_ms = backoff.as_millis() as u64, "exporter failed");
        self.count_error(&e.to_string());
        a.retry = Some((what, Instant::now() + backoff, backoff));
    }

    fn count_error(&self, error: &str) {
        self.metrics.errors.inc();
        let mut s = self.status.lock().unwrap_or_else(|e| e.into_inner());
        s.errors += 1;
        s.last_error = Some(error.to_string());
    }

    /// Takes the exporter's acknowledgement: drops the entries it covers, and persists the
    /// progress (at most every [`PERSIST_EVERY`], or now when `force`), then publishes the
    /// compaction bound of what is persisted.
    fn acknowledged(&self, a: &mut Active, force: bool) {
        let acked = a.controller.last_acknowledged();
        while a.entries.front().is_some_and(|&(_, last)| last <= acked) {
            a.entries.pop_front();
        }
        let resume = a.entries.front().map_or(a.reader.next_index(), |&(index, _)| index);
        let progress = Progress { position: acked.max(a.persisted.position), index: resume.max(a.persisted.index) };
        if progress.position > a.persisted.position {
            a.last_progress = Instant::now();
        }
        if progress != a.persisted && (force || a.persisted_at.elapsed() >= PERSIST_EVERY) {
            match write_progress(&self.progress_path, progress) {
                Ok(()) => {
                    a.persisted = progress;
                    a.persisted_at = Instant::now();
                    self.bound.store(progress.index - 1, Ordering::Release);
                }
                Err(e) => self.count_error(&format!("persisting the exporter position: {e}")),
            }
        }
    }

    fn report(&self, a: &mut Active) {
        let committed = self.committed.load(Ordering::Acquire);
        let handed = a.reader.next_index().saturating_sub(1) - if a.queue.is_empty() { 0 } else { 1 };
        let lag = committed.saturating_sub(handed);
        let unacknowledged = committed.saturating_sub(a.persisted.index - 1);
        if unacknowledged == 0 {
            a.last_progress = Instant::now();
        }
        let stuck = unacknowledged > 0 && a.last_progress.elapsed() >= self.stuck_after;
        let acked = a.controller.last_acknowledged();
        let unacknowledged_records = self.committed_position.load(Ordering::Acquire).saturating_sub(acked);
        self.metrics.unacknowledged_records.set(unacknowledged_records as i64);
        self.metrics.last_exported_position.set(a.last_exported as i64);
        self.metrics.acknowledged_position.set(acked as i64);
        self.metrics.lag_entries.set(lag as i64);
        self.metrics.unacknowledged_entries.set(unacknowledged as i64);
        self.metrics.stuck.set(i64::from(stuck));
        let counts = a.opened && a.retry.is_none() && !stuck;
        self.exported.store(if counts { acked } else { u64::MAX }, Ordering::Release);
        let mut s = self.status.lock().unwrap_or_else(|e| e.into_inner());
        s.running = a.opened;
        s.last_exported_position = a.last_exported;
        s.acknowledged_position = acked;
        s.lag_entries = lag;
        s.unacknowledged_entries = unacknowledged;
        s.unacknowledged_records = unacknowledged_records;
        s.stuck = stuck;
        s.skipped_entries = a.reader.skipped();
        if s.skipped_entries > 0 && a.reader.skipped() != self.metrics.skipped.get() as u64 {
            tracing::warn!(partition = self.partition, exporter = %self.factory.id, skipped = s.skipped_entries, "log entries were compacted before this exporter exported them");
            self.metrics.skipped.set(s.skipped_entries as i64);
        }
    }

    /// Flushes what it can, persists the acknowledged progress and closes the exporter.
    fn close(&self, mut a: Active) {
        if a.opened {
            if a.unflushed > 0 && a.retry.is_none() {
                let _ = self.flush(&mut a);
            }
            self.acknowledged(&mut a, true);
            a.exporter.close();
        }
        // a replica goes on holding compaction back to the persisted progress, which the
        // leader's distribution moves on; without one nothing would move it
        let bound = if self.distribution.is_some() { a.persisted.index - 1 } else { u64::MAX };
        self.bound.store(bound, Ordering::Release);
        self.exported.store(u64::MAX, Ordering::Release);
        self.status.lock().unwrap_or_else(|e| e.into_inner()).running = false;
        tracing::info!(partition = self.partition, exporter = %self.factory.id, "exporter closed");
    }
}

/// A panic injected by a test (debug builds only; a release build has no such hook): when the
/// environment variable `WAGGLE_TEST_EXPORTER_PANIC_FILE` names a file and that file holds
/// `<exporter id> <partition id>` (or `... <hold ms>` to keep the exporter down at least that
/// long before it restarts, so a test sees it DOWN), the file is removed and the exporter's
/// runner panics after the first record it exports. `crates/waggle/tests/
/// exporter_panics.rs` uses it.
#[cfg(debug_assertions)]
fn injected_panic(exporter: &str, partition: PartitionId) -> bool {
    static FILE: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    let Some(path) = FILE.get_or_init(|| std::env::var_os("WAGGLE_TEST_EXPORTER_PANIC_FILE").map(Into::into)) else { return false };
    let Ok(text) = std::fs::read_to_string(path) else { return false };
    let mut words = text.split_whitespace();
    let (Some(id), Some(p)) = (words.next(), words.next().and_then(|w| w.parse::<PartitionId>().ok())) else { return false };
    if id != exporter || p != partition || std::fs::remove_file(path).is_err() {
        return false;
    }
    INJECTED_HOLD_MS.store(words.next().and_then(|w| w.parse().ok()).unwrap_or(0), Ordering::SeqCst);
    true
}

#[cfg(not(debug_assertions))]
#[inline(always)]
fn injected_panic(_exporter: &str, _partition: PartitionId) -> bool {
    false
}

#[cfg(debug_assertions)]
static INJECTED_HOLD_MS: AtomicU64 = AtomicU64::new(0);

/// How long an injected panic asked the exporter to stay down (taken once).
fn injected_hold() -> Duration {
    #[cfg(debug_assertions)]
    return Duration::from_millis(INJECTED_HOLD_MS.swap(0, Ordering::SeqCst));
    #[cfg(not(debug_assertions))]
    Duration::ZERO
}

/// Exporter threads run as Linux's batch work (`SCHED_BATCH`, at the default nice value):
/// their fair share of the CPU, but a waking exporter (every few milliseconds, to look for
/// committed entries) does not preempt the partition's thread or the gateway, which each
/// instance's commits and replies wait for. A lower priority (nice 10 or 19) gave W2-25 more
/// but starved the store exporter under W2, whose back pressure then refused 4–5 times as
/// many new instances; raising a thread's priority back needs privileges, so it cannot follow
/// the backlog (measurements: docs/performance.md, "What holds now").
fn run_in_background() {
    // SAFETY: `sched_setscheduler` reads the parameter struct we pass; pid 0 is the calling
    // thread only
    let result = unsafe {
        let param = libc::sched_param { sched_priority: 0 };
        libc::sched_setscheduler(0, libc::SCHED_BATCH, &param)
    };
    if result != 0 {
        tracing::debug!(error = %std::io::Error::last_os_error(), "could not run the exporter thread as batch work");
    }
}
