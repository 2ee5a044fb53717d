//! Scheduled work of a partition: reads committed state only and acts only by submitting
//! commands (job time-outs, retry back-offs, message expiry), never by touching state.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::SyncSender;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use waggle_engine::{Command, StateView};
use waggle_protocol::value::{JobRecord, MessageRecord};
use waggle_protocol::{Intent, PartitionId, RecordValue};
use waggle_state::RocksStore;

use crate::Submission;

const TICK: Duration = Duration::from_millis(100);
/// A command for the same key and due time is not submitted again within this time (it is in
/// flight, or was rejected because the job changed meanwhile).
const RESUBMIT_AFTER: Duration = Duration::from_secs(5);
const MAX_DUE_PER_TICK: usize = 1000;

pub(crate) fn start(
    id: PartitionId,
    store: Arc<RocksStore>,
    tx: SyncSender<Submission>,
    stop: Arc<AtomicBool>,
) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new().name(format!("scheduler-{id}")).spawn(move || {
        let mut submitted: HashMap<(Intent, i64, i64), Instant> = HashMap::new();
        while !stop.load(Ordering::SeqCst) {
            std::thread::sleep(TICK);
            let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0);
            let view = StateView::new(&*store);
            let mut due: Vec<(Intent, (i64, i64), RecordValue)> = Vec::new();
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
                let command = Command { request_id: None, key, intent, value };
                if tx.try_send(Submission { command, reply: None }).is_err() {
                    break; // partition busy: try again next tick
                }
                submitted.insert((intent, key, at), Instant::now());
            }
        }
    })
}
