//! Hands what a committed batch sends out (answers to requests, pushed jobs, job notifications)
//! to the gateway's tokio runtime as one message.
//!
//! Completing each answer from the partition thread woke the gateway once per request, and the
//! gateway wrote each answer to its connection as it came. One message per batch wakes it once:
//! a task on the runtime completes the answers together, and the connections write them in one
//! go (see the gateway's `CoalescingIo`). Without a runtime (a broker started outside tokio) the
//! partition thread delivers itself.

use std::sync::mpsc::SyncSender;
use std::sync::Arc;

use tokio::sync::{broadcast, mpsc};
use waggle_engine::Command;
use waggle_protocol::{Intent, Record, RecordValue};

use crate::backpressure::{Limiter, Permit};
use crate::streams::{JobStreamRegistry, PushedJob, StreamId};
use crate::{Reply, Submission};

/// What one committed batch sends out, in the order the engine produced it per kind.
#[derive(Default)]
pub(crate) struct Delivery {
    pub replies: Vec<(Reply, Record)>,
    pub pushes: Vec<(StreamId, PushedJob)>,
    pub jobs_available: Vec<String>,
    /// The back-pressure slots of the batch's client commands: given back by the delivery task
    /// before the answers, so that a command's time in flight includes the way to the gateway's
    /// runtime and an answered client's next command finds its slot free.
    pub permits: Vec<Permit>,
}

impl Delivery {
    pub fn is_empty(&self) -> bool {
        self.replies.is_empty() && self.pushes.is_empty() && self.jobs_available.is_empty() && self.permits.is_empty()
    }
}

/// Where deliveries go: they are made by `Targets::deliver`, on the runtime or inline.
pub(crate) struct Deliverer {
    runtime: Option<mpsc::UnboundedSender<Delivery>>,
    targets: Arc<Targets>,
}

/// The receivers of a partition's deliveries.
pub(crate) struct Targets {
    pub streams: Arc<JobStreamRegistry>,
    pub jobs_available: broadcast::Sender<String>,
    /// The partition's own queue, for jobs a stream could not take (JOB YIELD).
    pub loopback: SyncSender<Submission>,
    pub limiter: Arc<Limiter>,
}

impl Deliverer {
    /// Delivers on the current tokio runtime when there is one (a task that ends when this
    /// deliverer is dropped), inline otherwise.
    pub fn new(targets: Targets) -> Self {
        let targets = Arc::new(targets);
        let runtime = tokio::runtime::Handle::try_current().ok().map(|handle| {
            let (tx, mut rx) = mpsc::unbounded_channel::<Delivery>();
            let targets = targets.clone();
            handle.spawn(async move {
                while let Some(delivery) = rx.recv().await {
                    targets.deliver(delivery);
                }
            });
            tx
        });
        Self { runtime, targets }
    }

    pub fn send(&self, delivery: Delivery) {
        if delivery.is_empty() {
            return;
        }
        match &self.runtime {
            Some(tx) => {
                if let Err(mpsc::error::SendError(delivery)) = tx.send(delivery) {
                    // the runtime is shutting down: deliver what can be
                    self.targets.deliver(delivery);
                }
            }
            None => self.targets.deliver(delivery),
        }
    }
}

impl Targets {
    fn deliver(&self, delivery: Delivery) {
        // the slots first: a client answered below may send its next command at once, and must
        // not find the slot of the one just answered still held
        for permit in delivery.permits {
            self.limiter.processed(permit);
        }
        for job_type in delivery.jobs_available {
            let _ = self.jobs_available.send(job_type);
        }
        for (reply, record) in delivery.replies {
            let _ = reply.send(Ok(record));
        }
        for (stream_id, job) in delivery.pushes {
            if let Some(job) = self.streams.push(stream_id, job) {
                self.yield_job(job);
            }
        }
    }

    /// Sends a job its stream could not take back to the pool.
    fn yield_job(&self, job: PushedJob) {
        let command = Command::new(job.key, Intent::Yield, RecordValue::Job(job.record));
        let _ = self.loopback.try_send(Submission { command, reply: None, scheduled: false, permit: None });
    }
}
