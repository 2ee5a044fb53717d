//! Scheduled work of a partition: reads committed state only and acts only by submitting
//! commands (timers, job time-outs, retry back-offs, message expiry), never by touching state.
//! It acts only while its node leads the partition.
//! It sleeps until the earliest due date (at most [`TICK`]), so a timer fires within a few
//! milliseconds of its due date, never before it.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::SyncSender;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use waggle_engine::{Command, StateView};
use waggle_protocol::value::{JobRecord, MessageRecord, TimerRecord};
use waggle_protocol::{Intent, PartitionId, RecordValue};
use waggle_state::RocksStore;

use crate::Submission;

const TICK: Duration = Duration::from_millis(100);
/// A command for the same key and due time is not submitted again within this time (it is in
/// flight, or was rejected because the job changed meanwhile).
const RESUBMIT_AFTER: Duration = Duration::from_secs(5);
const MAX_DUE_PER_TICK: usize = 1000;
/// Scheduled commands submitted but not yet processed, at most: the partition takes a few per
/// batch, and the rest waits here rather than in its queue.
const MAX_IN_FLIGHT: usize = 256;
/// How soon to look again while due work has been submitted but not processed yet.
const IN_FLIGHT_RECHECK: Duration = Duration::from_millis(5);

pub(crate) fn start(
    id: PartitionId,
    store: Arc<RocksStore>,
    tx: SyncSender<Submission>,
    in_flight: Arc<AtomicUsize>,
    leading: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    failed: SideFailure,
) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new().name(format!("scheduler-{id}")).spawn(move || {
        // a panic (a corrupt row read) is the partition's failure: its thread restarts it
        let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| schedule(store, tx, in_flight, leading, stop)));
        if let Err(payload) = run {
            *failed.lock().unwrap_or_else(|e| e.into_inner()) =
                Some(format!("scheduler panic: {}", crate::partition::panic_message(payload.as_ref())));
        }
    })
}

/// A failure of a partition's side thread, which its processing thread takes as its own.
pub(crate) type SideFailure = Arc<std::sync::Mutex<Option<String>>>;

/// The scheduler's loop, until `stop`.
fn schedule(
    store: Arc<RocksStore>,
    tx: SyncSender<Submission>,
    in_flight: Arc<AtomicUsize>,
    leading: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
) {
    let mut submitted: HashMap<(Intent, i64, i64), Instant> = HashMap::new();
    // due work found by the last scan and not submitted yet: fed to the partition as it
    // takes work, so a storm of due timers costs one scan per MAX_DUE_PER_TICK, not one
    // per batch the partition processes
    let mut pending: VecDeque<Due> = VecDeque::new();
    let mut last_scan: Option<Instant> = None;
    let mut sleep = TICK;
    while !stop.load(Ordering::SeqCst) {
        std::thread::sleep(sleep);
        if !leading.load(Ordering::SeqCst) {
            // only the leader acts; what it submitted before may be lost with its term
            submitted.clear();
            pending.clear();
            sleep = TICK;
            continue;
        }
        if in_flight.load(Ordering::SeqCst) >= MAX_IN_FLIGHT {
            // the partition has plenty to do: nothing to submit until it took some
            sleep = IN_FLIGHT_RECHECK;
            continue;
        }
        let view = StateView::new(&*store);
        if pending.is_empty() || last_scan.is_none_or(|at| at.elapsed() >= TICK) {
            submitted.retain(|_, at| at.elapsed() < RESUBMIT_AFTER);
            pending = scan_due(&view, now_ms()).into_iter().filter(|d| !submitted.contains_key(&d.id())).collect();
            last_scan = Some(Instant::now());
        }
        while let Some(due) = pending.pop_front() {
            if in_flight.load(Ordering::SeqCst) >= MAX_IN_FLIGHT {
                pending.push_front(due);
                break; // the partition has enough: the rest in a moment
            }
            // counted before it is sent: the partition may take it at once
            in_flight.fetch_add(1, Ordering::SeqCst);
            if tx.try_send(Submission { command: due.command(), reply: None, scheduled: true, permit: None }).is_err() {
                in_flight.fetch_sub(1, Ordering::SeqCst);
                pending.push_front(due);
                break; // partition busy: try again in a moment
            }
            submitted.insert(due.id(), Instant::now());
        }
        // wake for the next due date; while due work waits or is in flight, look again soon
        sleep = if !pending.is_empty() {
            IN_FLIGHT_RECHECK
        } else {
            match view.next_due() {
                Some(next) if next > now_ms() => Duration::from_millis((next - now_ms()) as u64).min(TICK),
                Some(_) => IN_FLIGHT_RECHECK,
                None => TICK,
            }
        };
    }
}

/// One piece of due work: what to do to a key (TRIGGER a timer, TIME_OUT a job, ...) and when
/// it fell due.
struct Due {
    intent: Intent,
    at: i64,
    key: i64,
}

impl Due {
    fn id(&self) -> (Intent, i64, i64) {
        (self.intent, self.key, self.at)
    }

    /// The command: the engine reads the record itself, so its value is an empty one of its type.
    fn command(&self) -> Command {
        let value = match self.intent {
            Intent::Trigger => RecordValue::Timer(TimerRecord::default()),
            Intent::Expire => RecordValue::Message(MessageRecord::default()),
            _ => RecordValue::Job(JobRecord::default()),
        };
        Command::new(self.key, self.intent, value)
    }
}

/// Everything due at `now` in the four queues, at most [`MAX_DUE_PER_TICK`] of each.
fn scan_due(view: &StateView<'_>, now: i64) -> Vec<Due> {
    let mut due = Vec::new();
    let mut add = |found: Vec<(i64, i64)>, intent: Intent| due.extend(found.into_iter().map(|(at, key)| Due { intent, at, key }));
    add(view.due_timers(now, MAX_DUE_PER_TICK), Intent::Trigger);
    add(view.timed_out_jobs(now, MAX_DUE_PER_TICK), Intent::TimeOut);
    add(view.jobs_due_after_backoff(now, MAX_DUE_PER_TICK), Intent::RecurAfterBackoff);
    add(view.expired_messages(now, MAX_DUE_PER_TICK), Intent::Expire);
    due
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}
