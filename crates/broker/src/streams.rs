//! Job streams (`StreamActivatedJobs`): workers register per job type; a partition activates a
//! new job for a stream with room and pushes it after commit. A bounded channel per stream is
//! the flow control: a stream without room gets nothing, and a push that cannot be delivered
//! sends the job back to the pool (JOB YIELD).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use tokio::sync::mpsc;
use waggle_engine::{JobStreamTarget, JobStreams};
use waggle_protocol::value::JobRecord;
use waggle_protocol::SharedStr;

pub type StreamId = u64;

/// See [`JobStreamRegistry::push_counts`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PushCounts {
    pub offered: u64,
    pub saturated: u64,
}

/// An activated job on its way to a worker.
#[derive(Debug, Clone)]
pub struct PushedJob {
    pub key: i64,
    pub record: JobRecord,
}

struct Stream {
    id: StreamId,
    job_type: String,
    worker: SharedStr,
    timeout_ms: i64,
    fetch_variables: Vec<String>,
    sender: mpsc::Sender<PushedJob>,
    /// Jobs picked for this stream but not pushed yet.
    reserved: usize,
}

#[derive(Default)]
struct Inner {
    next_id: StreamId,
    streams: Vec<Stream>,
    round_robin: usize,
}

/// Every open job stream of this node.
#[derive(Default)]
pub struct JobStreamRegistry {
    inner: Mutex<Inner>,
    /// Jobs created for a type with an open stream, and those of them that found every such
    /// stream full (see [`Self::push_counts`]).
    offered: AtomicU64,
    saturated: AtomicU64,
}

impl JobStreamRegistry {
    pub fn register(
        &self,
        job_type: String,
        worker: String,
        timeout_ms: i64,
        fetch_variables: Vec<String>,
        sender: mpsc::Sender<PushedJob>,
    ) -> StreamId {
        let mut inner = self.inner.lock().expect("streams lock");
        inner.next_id += 1;
        let id = inner.next_id;
        inner.streams.push(Stream { id, job_type, worker: worker.into(), timeout_ms, fetch_variables, sender, reserved: 0 });
        id
    }

    pub fn remove(&self, id: StreamId) {
        self.inner.lock().expect("streams lock").streams.retain(|s| s.id != id);
    }

    pub fn len(&self) -> usize {
        self.inner.lock().expect("streams lock").streams.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Delivers a job to its stream. Returns the job when the stream is gone or full: the
    /// caller yields it back to the pool.
    #[must_use]
    pub fn push(&self, id: StreamId, job: PushedJob) -> Option<PushedJob> {
        let mut inner = self.inner.lock().expect("streams lock");
        let Some(stream) = inner.streams.iter_mut().find(|s| s.id == id) else { return Some(job) };
        stream.reserved = stream.reserved.saturating_sub(1);
        match stream.sender.try_send(job) {
            Ok(()) => None,
            Err(mpsc::error::TrySendError::Full(job)) => Some(job),
            Err(mpsc::error::TrySendError::Closed(job)) => {
                inner.streams.retain(|s| s.id != id);
                Some(job)
            }
        }
    }

    /// Jobs so far created for a type with an open stream, and those of them that found every
    /// such stream full. Many full streams mean the workers, or the path to them, take jobs more
    /// slowly than the partitions make them (back pressure reads it as congestion).
    pub fn push_counts(&self) -> PushCounts {
        PushCounts { offered: self.offered.load(Ordering::Relaxed), saturated: self.saturated.load(Ordering::Relaxed) }
    }

    /// Forgets reservations of a batch that was not committed.
    pub fn release(&self, id: StreamId) {
        let mut inner = self.inner.lock().expect("streams lock");
        if let Some(s) = inner.streams.iter_mut().find(|s| s.id == id) {
            s.reserved = s.reserved.saturating_sub(1);
        }
    }
}

impl JobStreams for JobStreamRegistry {
    fn stream_for(&self, job_type: &str) -> Option<JobStreamTarget> {
        let mut inner = self.inner.lock().expect("streams lock");
        let n = inner.streams.len();
        let start = inner.round_robin;
        // whether a stream of the type is open: if so, and none has room, it is saturated
        let mut open = false;
        for i in 0..n {
            let idx = (start + i) % n;
            let s = &mut inner.streams[idx];
            if s.job_type != job_type || s.sender.is_closed() {
                continue;
            }
            open = true;
            if s.sender.capacity() > s.reserved {
                s.reserved += 1;
                self.offered.fetch_add(1, Ordering::Relaxed);
                let target = JobStreamTarget {
                    stream_id: s.id,
                    worker: s.worker.clone(),
                    timeout_ms: s.timeout_ms,
                    fetch_variables: s.fetch_variables.clone(),
                };
                inner.round_robin = idx + 1;
                return Some(target);
            }
        }
        if open {
            self.offered.fetch_add(1, Ordering::Relaxed);
            self.saturated.fetch_add(1, Ordering::Relaxed);
        }
        None
    }
}
