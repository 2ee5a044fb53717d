//! Job streams (`StreamActivatedJobs`): workers register per job type; a partition activates a
//! new job for a stream with room and pushes it after commit. A bounded channel per stream is
//! the flow control: a stream without room gets nothing, and a push that cannot be delivered
//! sends the job back to the pool (JOB YIELD).

use std::cell::Cell;
use std::sync::{Arc, Mutex};

use tokio::sync::mpsc;
use waggle_engine::{JobStreamTarget, JobStreams};
use waggle_protocol::value::JobRecord;
use waggle_protocol::SharedStr;

pub type StreamId = u64;

/// See [`PartitionStreams::push_counts`].
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
    /// The tenants whose jobs the stream takes (the default tenant's alone unless the worker
    /// asked for others).
    tenant_ids: Vec<String>,
    sender: mpsc::Sender<PushedJob>,
    /// Jobs picked for this stream but not pushed yet.
    reserved: usize,
    /// A stream a client opened at another broker's gateway, registered here by that broker
    /// (see `remote_streams`): this broker's partitions push to it, but it is not announced to
    /// other brokers.
    remote: bool,
    /// Not picked before this time: a remote stream whose client could not take a job (its
    /// broker yielded it back) gets none for a moment, instead of the job bouncing between the
    /// brokers while the client is behind.
    paused_until: Option<std::time::Instant>,
}

/// What a worker asked of its stream: the same whether its client opened it here or at another
/// broker that announced it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamSettings {
    pub job_type: String,
    pub worker: String,
    pub timeout_ms: i64,
    pub fetch_variables: Vec<String>,
    /// The tenants whose jobs it takes.
    pub tenant_ids: Vec<String>,
}

/// A stream a client opened at this broker's gateway, as announced to other brokers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalStream {
    pub id: StreamId,
    pub job_type: String,
    pub worker: String,
    pub timeout_ms: i64,
    pub fetch_variables: Vec<String>,
    /// The tenants whose jobs it takes.
    pub tenant_ids: Vec<String>,
}

#[derive(Default)]
struct Inner {
    next_id: StreamId,
    streams: Vec<Stream>,
    round_robin: usize,
    /// Grows whenever a local stream opens or closes (see [`JobStreamRegistry::generation`]).
    generation: u64,
}

/// Every open job stream of this node.
#[derive(Default)]
pub struct JobStreamRegistry {
    inner: Mutex<Inner>,
}

/// What a new job found among the open streams of its type.
enum StreamLookup {
    /// A stream with room, which the job is reserved for.
    Found(JobStreamTarget),
    /// Streams of the type are open, and every one is full.
    AllFull,
    /// No stream of the type is open.
    NoStream,
}

impl JobStreamRegistry {
    /// Registers a stream taking the default tenant's jobs.
    pub fn register(
        &self,
        job_type: String,
        worker: String,
        timeout_ms: i64,
        fetch_variables: Vec<String>,
        sender: mpsc::Sender<PushedJob>,
    ) -> StreamId {
        let settings = StreamSettings { job_type, worker, timeout_ms, fetch_variables, tenant_ids: default_tenant() };
        self.add(settings, sender, false)
    }

    /// Registers a stream a client opened at this broker's gateway, taking the jobs of
    /// `settings.tenant_ids` only (multi-tenancy).
    pub fn register_for_tenants(&self, settings: StreamSettings, sender: mpsc::Sender<PushedJob>) -> StreamId {
        self.add(settings, sender, false)
    }

    /// Registers a stream a client opened at another broker (see `remote_streams`), taking the
    /// jobs of its tenants (none: the default tenant's, as a broker of an older version
    /// announces its streams).
    pub(crate) fn register_remote(&self, mut settings: StreamSettings, sender: mpsc::Sender<PushedJob>) -> StreamId {
        if settings.tenant_ids.is_empty() {
            settings.tenant_ids = default_tenant();
        }
        self.add(settings, sender, true)
    }

    /// The one way a stream enters the registry; only a local stream changes the generation
    /// (a remote one is not announced again).
    fn add(&self, settings: StreamSettings, sender: mpsc::Sender<PushedJob>, remote: bool) -> StreamId {
        let StreamSettings { job_type, worker, timeout_ms, fetch_variables, tenant_ids } = settings;
        let mut inner = self.inner.lock().expect("streams lock");
        inner.next_id += 1;
        let id = inner.next_id;
        inner.streams.push(Stream {
            id,
            job_type,
            worker: worker.into(),
            timeout_ms,
            fetch_variables,
            tenant_ids,
            sender,
            reserved: 0,
            remote,
            paused_until: None,
        });
        if !remote {
            inner.generation += 1;
        }
        id
    }

    pub fn remove(&self, id: StreamId) {
        let mut inner = self.inner.lock().expect("streams lock");
        let before = inner.streams.len();
        inner.streams.retain(|s| s.id != id || s.remote);
        if inner.streams.len() < before {
            inner.generation += 1;
        }
        inner.streams.retain(|s| s.id != id);
    }

    /// Changes with every local stream opened or closed: a broker re-reads
    /// [`Self::local_streams`] to announce them when it moves.
    pub fn generation(&self) -> u64 {
        self.inner.lock().expect("streams lock").generation
    }

    /// The open streams clients opened at this broker's gateway (not other brokers' streams).
    pub fn local_streams(&self) -> Vec<LocalStream> {
        let inner = self.inner.lock().expect("streams lock");
        inner
            .streams
            .iter()
            .filter(|s| !s.remote && !s.sender.is_closed())
            .map(|s| LocalStream {
                id: s.id,
                job_type: s.job_type.clone(),
                worker: s.worker.to_string(),
                timeout_ms: s.timeout_ms,
                fetch_variables: s.fetch_variables.clone(),
                tenant_ids: s.tenant_ids.clone(),
            })
            .collect()
    }

    /// Picks nothing for stream `id` for `pause` (see `Stream::paused_until`).
    pub(crate) fn pause(&self, id: StreamId, pause: std::time::Duration) {
        let mut inner = self.inner.lock().expect("streams lock");
        if let Some(s) = inner.streams.iter_mut().find(|s| s.id == id) {
            s.paused_until = Some(std::time::Instant::now() + pause);
        }
    }

    /// Hands a job another broker's partition activated for local stream `id` to its client.
    /// Returns the job when the stream is gone or full: it goes back to its partition's pool.
    #[must_use]
    pub fn deliver(&self, id: StreamId, job: PushedJob) -> Option<PushedJob> {
        let inner = self.inner.lock().expect("streams lock");
        let Some(stream) = inner.streams.iter().find(|s| s.id == id && !s.remote) else { return Some(job) };
        stream.sender.try_send(job).err().map(|e| e.into_inner())
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
                if !stream.remote {
                    inner.generation += 1;
                }
                inner.streams.retain(|s| s.id != id);
                Some(job)
            }
        }
    }

    /// Forgets reservations of a batch that was not committed.
    pub fn release(&self, id: StreamId) {
        let mut inner = self.inner.lock().expect("streams lock");
        if let Some(s) = inner.streams.iter_mut().find(|s| s.id == id) {
            s.reserved = s.reserved.saturating_sub(1);
        }
    }

    /// A stream of `job_type` taking jobs of `tenant`, with room, round robin, reserving a
    /// place in it.
    fn lookup(&self, job_type: &str, tenant: &str) -> StreamLookup {
        let mut inner = self.inner.lock().expect("streams lock");
        let n = inner.streams.len();
        let start = inner.round_robin;
        // whether a stream of the type is open: if so, and none has room, it is saturated
        let mut open = false;
        for i in 0..n {
            let idx = (start + i) % n;
            let s = &mut inner.streams[idx];
            if s.job_type != job_type || s.sender.is_closed() || !s.tenant_ids.iter().any(|t| t == tenant) {
                continue;
            }
            if let Some(until) = s.paused_until {
                if std::time::Instant::now() < until {
                    open = true;
                    continue;
                }
                s.paused_until = None;
            }
            open = true;
            if s.sender.capacity() > s.reserved {
                s.reserved += 1;
                let target = JobStreamTarget {
                    stream_id: s.id,
                    worker: s.worker.clone(),
                    timeout_ms: s.timeout_ms,
                    fetch_variables: s.fetch_variables.clone(),
                };
                inner.round_robin = idx + 1;
                return StreamLookup::Found(target);
            }
        }
        if open {
            StreamLookup::AllFull
        } else {
            StreamLookup::NoStream
        }
    }
}

fn default_tenant() -> Vec<String> {
    vec![waggle_protocol::DEFAULT_TENANT.to_string()]
}

/// One partition's view of the node's job streams, on its processing thread: it counts what
/// the partition's own new jobs found, so that one partition's back pressure is not cut by
/// another's jobs (the streams are the node's, shared by every partition).
pub(crate) struct PartitionStreams {
    registry: Arc<JobStreamRegistry>,
    offered: Cell<u64>,
    saturated: Cell<u64>,
}

impl PartitionStreams {
    pub fn new(registry: Arc<JobStreamRegistry>) -> Self {
        Self { registry, offered: Cell::new(0), saturated: Cell::new(0) }
    }

    /// The node's streams.
    pub fn registry(&self) -> &JobStreamRegistry {
        &self.registry
    }

    /// The partition's jobs so far created for a type with an open stream, and those of them
    /// that found every such stream full. Many full streams mean the workers, or the path to
    /// them, take jobs more slowly than the partition makes them (back pressure reads it as
    /// congestion).
    pub fn push_counts(&self) -> PushCounts {
        PushCounts { offered: self.offered.get(), saturated: self.saturated.get() }
    }
}

impl JobStreams for PartitionStreams {
    fn stream_for(&self, job_type: &str) -> Option<JobStreamTarget> {
        self.stream_for_tenant(job_type, waggle_protocol::DEFAULT_TENANT)
    }

    fn stream_for_tenant(&self, job_type: &str, tenant: &str) -> Option<JobStreamTarget> {
        let tenant = if tenant.is_empty() { waggle_protocol::DEFAULT_TENANT } else { tenant };
        match self.registry.lookup(job_type, tenant) {
            StreamLookup::Found(target) => {
                self.offered.set(self.offered.get() + 1);
                Some(target)
            }
            StreamLookup::AllFull => {
                self.offered.set(self.offered.get() + 1);
                self.saturated.set(self.saturated.get() + 1);
                None
            }
            StreamLookup::NoStream => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_partition_counts_only_what_its_own_jobs_found() {
        let registry = Arc::new(JobStreamRegistry::default());
        let (tx, _jobs) = mpsc::channel(1);
        registry.register("a".into(), "worker".into(), 1_000, vec![], tx);
        let (one, two) = (PartitionStreams::new(registry.clone()), PartitionStreams::new(registry));

        assert!(one.stream_for("a").is_some(), "the stream has room for one job");
        assert!(one.stream_for("a").is_none(), "and is full then");
        assert!(one.stream_for("b").is_none(), "no stream of the type");
        assert_eq!(one.push_counts(), PushCounts { offered: 2, saturated: 1 }, "a job with no stream is not counted");
        assert_eq!(two.push_counts(), PushCounts::default(), "another partition's jobs are not its own");

        assert!(two.stream_for("a").is_none());
        assert_eq!(two.push_counts(), PushCounts { offered: 1, saturated: 1 });
        assert_eq!(one.push_counts(), PushCounts { offered: 2, saturated: 1 });
    }

    #[test]
    fn a_place_picked_for_a_lost_batch_is_given_back() {
        let registry = Arc::new(JobStreamRegistry::default());
        let (tx, _jobs) = mpsc::channel(1);
        let id = registry.register("a".into(), "worker".into(), 1_000, vec![], tx);
        let partition = PartitionStreams::new(registry.clone());
        assert_eq!(partition.stream_for("a").map(|t| t.stream_id), Some(id));
        assert!(partition.stream_for("a").is_none(), "its one place is picked");
        registry.release(id);
        assert_eq!(partition.stream_for("a").map(|t| t.stream_id), Some(id), "the place is free again");
    }
}
