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

mod backpressure;
pub mod cluster;
mod delivery;
pub mod forward;
mod metrics;
mod partition;
pub mod remote_streams;
mod scheduler;
mod streams;

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::sync::{broadcast, oneshot};
use waggle_engine::Command;
use waggle_protocol::value::IncidentRecord;
use waggle_protocol::{partition_of, PartitionId, Record, ValueType};

pub use backpressure::BackpressureConfig;
pub use cluster::ClusterSpec;
pub use metrics::BrokerMetrics;
pub use partition::PartitionStatus;
pub use streams::{JobStreamRegistry, LocalStream, PushedJob, StreamId};
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
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    #[error("the partition is overloaded; retry later")]
    Overloaded,
    #[error("partition {0} is not available")]
    Unavailable(PartitionId),
    #[error("no such partition {0}")]
    NoSuchPartition(PartitionId),
    #[error("failed to start partition {partition}: {reason}")]
    Start { partition: PartitionId, reason: String },
}

/// A command on its way to a partition's processing thread.
pub(crate) struct Submission {
    pub command: Command,
    pub reply: Option<oneshot::Sender<Record>>,
    /// From the scheduler (timers, time-outs): processed a few per batch, so that a burst of
    /// due work does not hold back client commands.
    pub scheduled: bool,
    /// A client command's slot of the partition's back-pressure limit, given back when the
    /// batch that processed it reaches the gateway's runtime, before its answers are handed over.
    pub permit: Option<backpressure::Permit>,
}

/// Every partition's command queue, by partition id - 1 (set once all partitions started), for
/// commands one partition sends another (message subscriptions).
pub(crate) type Peers = Arc<std::sync::OnceLock<Vec<std::sync::mpsc::SyncSender<Submission>>>>;

/// The running broker: every partition of this node.
pub struct Broker {
    partitions: Vec<partition::PartitionHandle>,
    round_robin: AtomicUsize,
    streams: Arc<JobStreamRegistry>,
    jobs_available: broadcast::Sender<String>,
    metrics: Arc<BrokerMetrics>,
}

impl Broker {
    /// Opens (recovering) every partition and starts its threads.
    pub fn start(config: BrokerConfig, registry: &prometheus::Registry) -> Result<Arc<Broker>, BrokerError> {
        let metrics = Arc::new(BrokerMetrics::new(registry));
        let streams = Arc::new(JobStreamRegistry::default());
        let (jobs_available, _) = broadcast::channel(1024);
        let mut partitions = Vec::new();
        let peers: Peers = Arc::new(std::sync::OnceLock::new());
        for id in 1..=config.partitions.max(1) {
            let handle = partition::start(id, &config, streams.clone(), jobs_available.clone(), metrics.clone(), peers.clone())?;
            partitions.push(handle);
        }
        let _ = peers.set(partitions.iter().map(|p| p.sender()).collect());
        Ok(Arc::new(Broker { partitions, round_robin: AtomicUsize::new(0), streams, jobs_available, metrics }))
    }

    pub fn partition_count(&self) -> u16 {
        self.partitions.len() as u16
    }

    /// The next partition for work that is not bound to a key (round robin).
    pub fn next_partition(&self) -> PartitionId {
        (self.round_robin.fetch_add(1, Ordering::Relaxed) % self.partitions.len()) as PartitionId + 1
    }

    /// The partition of a key, or an error for a key that no partition of this node owns.
    pub fn partition_of_key(&self, key: i64) -> Option<PartitionId> {
        let p = partition_of(key);
        (p >= 1 && p <= self.partition_count()).then_some(p)
    }

    /// The partition a message lives on: a hash of its correlation key, as in Zeebe.
    pub fn partition_of_correlation_key(&self, correlation_key: &str) -> PartitionId {
        waggle_protocol::keys::partition_of_correlation_key(correlation_key, self.partitions.len() as u32)
    }

    /// Submits a command and waits for the record that answers it (an event or a rejection).
    pub async fn submit(&self, partition: PartitionId, command: Command) -> Result<Record, BrokerError> {
        let handle = self.partitions.get((partition as usize).wrapping_sub(1)).ok_or(BrokerError::NoSuchPartition(partition))?;
        let permit = Some(handle.limiter.try_acquire(&command).ok_or(BrokerError::Overloaded)?);
        let (tx, rx) = oneshot::channel();
        handle.send(Submission { command, reply: Some(tx), scheduled: false, permit })?;
        rx.await.map_err(|_| BrokerError::Unavailable(partition))
    }

    /// Deploys on partition 1, which distributes the deployment (same keys and versions) to
    /// every other partition; answers once every partition has it (at most
    /// [`DISTRIBUTION_WAIT`]: the distribution goes on after that, until acknowledged), so any
    /// partition can start the new processes at once.
    pub async fn deploy(&self, command: Command) -> Result<Record, BrokerError> {
        let answer = self.submit(1, command).await?;
        if answer.rejection.is_some() || self.partitions.len() == 1 {
            return Ok(answer);
        }
        let deadline = std::time::Instant::now() + DISTRIBUTION_WAIT;
        while self.partitions[0].distributing(ValueType::Deployment, answer.key) && std::time::Instant::now() < deadline {
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
            let submission = Submission { command, reply: None, scheduled: false, permit: None };
            if let Err(e) = self.partitions[partition as usize - 1].send(submission) {
                tracing::warn!(job = job.key, error = %e, "a pushed job could not be yielded: it returns to the pool at its time-out");
            }
        }
    }

    /// Job types that became activatable (for long-polling activations).
    pub fn subscribe_jobs_available(&self) -> broadcast::Receiver<String> {
        self.jobs_available.subscribe()
    }

    pub fn metrics(&self) -> &Arc<BrokerMetrics> {
        &self.metrics
    }

    pub fn status(&self) -> Vec<PartitionStatus> {
        self.partitions.iter().map(|p| p.status()).collect()
    }

    /// Open incidents, optionally of one process instance (read from committed state).
    pub fn incidents(&self, process_instance_key: Option<i64>) -> Vec<(i64, IncidentRecord)> {
        let handles: Vec<&partition::PartitionHandle> = match process_instance_key.and_then(|k| self.partition_of_key(k)) {
            Some(p) => vec![&self.partitions[p as usize - 1]],
            None => self.partitions.iter().collect(),
        };
        handles
            .into_iter()
            .flat_map(|h| h.incidents())
            .filter(|(_, i)| process_instance_key.is_none_or(|k| i.process_instance_key == k))
            .collect()
    }

    /// Stops every partition after the batch in progress; nothing acknowledged is lost.
    pub fn shutdown(&self) {
        for p in &self.partitions {
            p.stop();
        }
    }
}

impl forward::LocalSubmit for Broker {
    fn submit_local(&self, partition: PartitionId, command: Command) -> forward::BoxFuture<'_, Result<Record, BrokerError>> {
        Box::pin(self.submit(partition, command))
    }

    fn deploy_local(&self, command: Command) -> forward::BoxFuture<'_, Result<Record, BrokerError>> {
        Box::pin(self.deploy(command))
    }
}
