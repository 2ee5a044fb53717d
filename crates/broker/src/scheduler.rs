//! Scheduled work of a partition: reads committed state only and acts only by submitting
//! commands (timers, job time-outs, retry back-offs, message expiry), never by touching state.
//! It sleeps until the earliest due date (at most [`TICK`]), so a timer fires within a few
//! milliseconds of its due date, never before it.

use std::collections::HashMap;
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
    stop: Arc<AtomicBool>,
) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new().name(format!("scheduler-{id}")).spawn(move || {
        let mut submitted: HashMap<(Intent, i64, i64), Instant> = HashMap::new();
        let mut sleep = TICK;
        while !stop.load(Ordering::SeqCst) {
            std::thread::sleep(sleep);
            if in_flight.load(Ordering::SeqCst) >= MAX_IN_FLIGHT {
                // the partition has plenty to do: no scan until it took some
                sleep = IN_FLIGHT_RECHECK;
                continue;
            }
            let now = now_ms();
            let view = StateView::new(&*store);
            let mut due: Vec<(Intent, (i64, i64), RecordValue)> = Vec::new();
            for at_key in view.due_timers(now, MAX_DUE_PER_TICK) {
                due.push((Intent::Trigger, at_key, RecordValue::Timer(TimerRecord::default())));
            }
            for at_key in view.timed_out_jobs(now, MAX_DUE_PER_TICK) {
                due.push((Intent::TimeOut, at_key, RecordValue::Job(JobRecord::default())));
            }
            for at_key in view.jobs_due_after_backoff(now, MAX_DUE_PER_TICK) {
                due.push((Intent::RecurAfterBackoff, at_key, RecordValue::Job(JobRecord::default())));
            }
            for at_key in view.expired_messages(now, MAX_DUE_PER_TICK) {
                due.push((Intent::Expire, at_key, RecordValue::Message(MessageRecord::default())));
            }
            submitted.retain(|_, at| at.elapsed() < RESUBMIT_AFTER);
            for (intent, (at, key), value) in due {
                if submitted.contains_key(&(intent, key, at)) {
                    continue;
                }
                if in_flight.load(Ordering::SeqCst) >= MAX_IN_FLIGHT {
                    break; // the partition has enough: the rest in a moment
                }
                let command = Command { request_id: None, key, intent, value };
                // counted before it is sent: the partition may take it at once
                in_flight.fetch_add(1, Ordering::SeqCst);
                if tx.try_send(Submission { command, reply: None, scheduled: true }).is_err() {
                    in_flight.fetch_sub(1, Ordering::SeqCst);
                    break; // partition busy: try again next tick
                }
                submitted.insert((intent, key, at), Instant::now());
            }
            // wake for the next due date; while due work is in flight, look again soon
            sleep = match view.next_due() {
                Some(next) if next > now_ms() => Duration::from_millis((next - now_ms()) as u64).min(TICK),
                Some(_) => IN_FLIGHT_RECHECK,
                None => TICK,
            };
        }
    })
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}
