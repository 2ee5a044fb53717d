//! A partition's processing thread under supervision: a panic or an error on it marks the
//! partition unhealthy (DOWN in `/health`, UNHEALTHY in Topology, `zeebe_health` 0), drops what
//! the failed run held in memory (unanswered requests, its engine, its caches), and reopens the
//! partition from its durable state: the state store and the log, recovered as at a start
//! (`super::recover`), so a batch whose entry reached the log is applied by the appliers and
//! one that did not is gone, unanswered (its clients see an error; nothing acknowledged is
//! lost, C4). The node's other partitions keep serving meanwhile.
//!
//! A partition that fails [`MAX_FAILURES`] times within [`FAILURE_WINDOW`] is left down, *dead*
//! (`zeebe_health` -1, DEAD in Topology), with the last failure in `/health` and the log: a
//! command that panics every time it is processed (a timer the scheduler submits again, a
//! command another partition re-sends until acknowledged) or an entry whose appliers panic
//! on replay would otherwise restart it forever. Zeebe does the same for an error it cannot
//! get past: its stream processor goes to the DEAD health status (`HealthMetrics`: "1 =
//! healthy, 0 = unhealthy, -1 = dead") and stays there until the broker restarts.
//!
//! A replica of a cluster's partition restarts the same way: it reopens its Raft group from
//! its journal (persisted term, vote and log reused, never reset: as a node restarting after a
//! crash) and comes back as a follower. While it is down, the group's other replicas go on; if
//! it led, they elect a new leader once its heartbeats stop.

use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Receiver;
use std::sync::{Arc, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use waggle_state::RocksStore;

use super::{Dirs, Processor};
use crate::Submission;

/// Failures (panics and errors) within [`FAILURE_WINDOW`] after which a partition is left down.
pub(super) const MAX_FAILURES: usize = 3;
pub(super) const FAILURE_WINDOW: Duration = Duration::from_secs(600);
/// How long a restart waits for the state store's last users (a management request reading
/// it) to let go of it before it gives up and leaves the partition down.
const STORE_RELEASE_WAIT: Duration = Duration::from_secs(30);

/// The partition's open state store, shared with its handle (digests, incidents) and its
/// scheduler; empty while the partition restarts.
pub(crate) type StoreSlot = Arc<RwLock<Option<Arc<RocksStore>>>>;

/// A partition's health as `zeebe_health` and Topology show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Health {
    Healthy,
    /// Failed and restarting.
    Unhealthy,
    /// Failed too often: left down until the node restarts.
    Dead,
}

impl Health {
    pub(crate) fn gauge(self) -> i64 {
        match self {
            Health::Healthy => 1,
            Health::Unhealthy => 0,
            Health::Dead => -1,
        }
    }
}

/// How a run of the processing loop ended.
pub(super) enum RunEnd {
    /// Asked to stop, or its queue closed: the node shuts down.
    Stopped,
    /// An error with its context (a log write, a state commit, a corrupt entry or row).
    Failed(String),
}

/// The scheduler thread of one run of the partition (it reads that run's store).
pub(super) struct SchedulerRun {
    pub stop: Arc<AtomicBool>,
    pub thread: JoinHandle<()>,
}

impl SchedulerRun {
    fn end(self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = self.thread.join();
    }
}

/// The processing thread's body: runs the processing loop, and after each failure reopens the
/// partition from its durable state (see the module's contract).
pub(super) fn run(
    mut processor: Processor,
    rx: Receiver<Submission>,
    dirs: Dirs,
    mut scheduler: SchedulerRun,
    start_scheduler: impl Fn(&Processor) -> std::io::Result<SchedulerRun>,
) {
    let id = processor.id;
    let health = processor.health.clone();
    let mut failures: VecDeque<Instant> = VecDeque::new();
    loop {
        let ended = catch_unwind(AssertUnwindSafe(|| processor.run_loop(&rx)));
        let failure = match ended {
            Ok(RunEnd::Stopped) => {
                scheduler.end();
                // the snapshot thread holds the store: once it is done, the data folder can be
                // opened again (a restart in the same process, as tests do)
                while processor.snapshot.running.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(2));
                }
                tracing::info!(partition = id, "partition stopped");
                return;
            }
            Ok(RunEnd::Failed(error)) => error,
            Err(payload) => format!("panic: {}", panic_message(payload.as_ref())),
        };
        // DOWN at once: its client commands are refused from now on, and those already queued
        // too (commands of the scheduler and of other partitions are submitted again)
        health.set(Health::Unhealthy, Some(failure.clone()));
        processor.step_down_failed();
        let queued: Vec<Submission> = rx.try_iter().collect();
        processor.refuse(queued);
        scheduler.end();
        let now = Instant::now();
        failures.push_back(now);
        while failures.front().is_some_and(|t| now.duration_since(*t) > FAILURE_WINDOW) {
            failures.pop_front();
        }
        if failures.len() >= MAX_FAILURES {
            tracing::error!(
                partition = id,
                error = %failure,
                failures = failures.len(),
                window_s = FAILURE_WINDOW.as_secs(),
                "partition failed too often: left down (dead) until the node restarts; the other partitions go on"
            );
            health.set(Health::Dead, Some(failure));
            return;
        }
        tracing::error!(partition = id, error = %failure, "partition failed; restarting it from its log and state");
        wait_out_injected_hold();
        // replaying the log on reopening runs the appliers, which may panic as well
        let restarted = catch_unwind(AssertUnwindSafe(|| restart(processor, &dirs)))
            .unwrap_or_else(|payload| Err(format!("panic: {}", panic_message(payload.as_ref()))));
        processor = match restarted {
            Ok(p) => p,
            Err(e) => {
                tracing::error!(partition = id, error = %e, "partition could not be restarted: left down until the node restarts");
                health.set(Health::Dead, Some(format!("{failure}; restarting it: {e}")));
                return;
            }
        };
        scheduler = match start_scheduler(&processor) {
            Ok(s) => s,
            Err(e) => {
                health.set(Health::Dead, Some(format!("the scheduler thread did not start: {e}")));
                return;
            }
        };
        health.set(Health::Healthy, None);
        tracing::info!(partition = id, applied = processor.applied, "partition restarted from its log and state");
    }
}

/// What a failed run held in memory is dropped (its requests unanswered: their clients see an
/// error) and the partition reopened from disk.
fn restart(mut processor: Processor, dirs: &Dirs) -> Result<Processor, String> {
    processor.forget_run();
    // a checkpoint under way reads the store
    while processor.snapshot.running.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(1));
    }
    let slot = processor.store_slot.clone();
    let taken = slot.write().unwrap_or_else(|e| e.into_inner()).take();
    // every other user of the store lets go of it (the processor's own reference goes with
    // the reopen below), so that RocksDB's lock is released before the store is opened again
    let deadline = Instant::now() + STORE_RELEASE_WAIT;
    if let Some(store) = taken {
        while Arc::strong_count(&store) > 2 {
            if Instant::now() > deadline {
                *slot.write().unwrap_or_else(|e| e.into_inner()) = Some(store);
                return Err("the state store is still in use".into());
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    processor.reopen(dirs)
}

/// Where a partition's health is shown: its status (`/health`, Topology) and `zeebe_health`.
#[derive(Clone)]
pub(super) struct HealthReport {
    pub status: Arc<std::sync::Mutex<super::PartitionStatus>>,
    pub gauge: prometheus::IntGauge,
    /// Whether the partition takes client commands (refused UNAVAILABLE at once while not).
    pub up: Arc<AtomicBool>,
}

impl HealthReport {
    /// Sets the health, with the failure that caused it (`None` once healthy again).
    pub fn set(&self, health: Health, failure: Option<String>) {
        self.gauge.set(health.gauge());
        self.up.store(health == Health::Healthy, Ordering::SeqCst);
        let mut status = self.status.lock().unwrap_or_else(|e| e.into_inner());
        status.healthy = health == Health::Healthy;
        status.dead = health == Health::Dead;
        status.failure = failure;
    }
}

/// The text of a panic's payload.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "(no message)".into()
    }
}

/// A panic injected by a test (debug builds only; a release build has no such hook): when the
/// environment variable `WAGGLE_TEST_PANIC_FILE` names a file and that file holds this
/// partition's id (`<id>`, or `<id> <hold ms>` to keep the partition down that long before it
/// restarts, so a test sees it DOWN; see [`wait_out_injected_hold`]), the file is removed and the partition thread panics
/// before processing its next batch. `crates/waggle/tests/panics.rs` uses it.
#[cfg(debug_assertions)]
pub(super) fn injected_panic(id: waggle_protocol::PartitionId) {
    static FILE: std::sync::OnceLock<Option<std::path::PathBuf>> = std::sync::OnceLock::new();
    let Some(path) = FILE.get_or_init(|| std::env::var_os("WAGGLE_TEST_PANIC_FILE").map(Into::into)) else { return };
    let Ok(text) = std::fs::read_to_string(path) else { return };
    let mut words = text.split_whitespace();
    if words.next().and_then(|w| w.parse::<waggle_protocol::PartitionId>().ok()) != Some(id) || std::fs::remove_file(path).is_err() {
        return;
    }
    let hold = words.next().and_then(|w| w.parse::<u64>().ok()).unwrap_or(0);
    INJECTED_HOLD_MS.store(hold, Ordering::SeqCst);
    panic!("injected panic (WAGGLE_TEST_PANIC_FILE) on partition {id}");
}

#[cfg(debug_assertions)]
static INJECTED_HOLD_MS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Keeps a partition down after an injected panic for as long as it asked (taken once), or
/// until the test writes the release file (the panic file's name with `.release` appended),
/// whichever comes first; the release file is removed. Does nothing in a release build.
fn wait_out_injected_hold() {
    #[cfg(debug_assertions)]
    {
        let hold = Duration::from_millis(INJECTED_HOLD_MS.swap(0, Ordering::SeqCst));
        let Some(release) = std::env::var_os("WAGGLE_TEST_PANIC_FILE").map(|mut f| {
            f.push(".release");
            std::path::PathBuf::from(f)
        }) else {
            return;
        };
        let until = Instant::now() + hold;
        while Instant::now() < until {
            if std::fs::remove_file(&release).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

#[cfg(not(debug_assertions))]
#[inline(always)]
pub(super) fn injected_panic(_id: waggle_protocol::PartitionId) {}
