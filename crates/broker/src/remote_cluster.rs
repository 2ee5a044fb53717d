//! A cluster reached from outside: what a standalone gateway (`waggle gateway`) submits through.
//!
//! [`RemoteCluster`] holds no partition and no data. It sends each command to the broker leading
//! its partition over that broker's `CommandApi` ([`crate::forward`], as a broker forwards a
//! command for a partition led elsewhere), and keeps one `JobStreams` session with every broker
//! it knows ([`crate::remote_streams`], as brokers keep with each other), so that the job streams
//! its clients open get the jobs of every partition and its long polls wake for them.
//!
//! Where the brokers are and who leads what comes from a [`Directory`] (the binary's gossip
//! view). The partition counts (all, routed to, of messages) follow the cluster topology: every
//! [`FOLLOW_EVERY`] it asks a broker for it (the `CommandApi`'s `Topology` call), so a grown
//! partition count reaches the gateway's routing without a restart. A command goes to the leader the directory names; when that broker refuses it (not, or
//! no longer, the leader) or cannot be connected to, the command was certainly not taken, and it
//! is sent again within its routing window: to the named leader while it is not the broker that
//! just refused, otherwise to the known brokers in turn (a new leader is elected before the gossip
//! says so). A command whose connection failed mid-request is never sent again (it may have
//! been taken): the caller gets [`BrokerError::Unavailable`].

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::broadcast;
use tokio::task::JoinHandle;
use waggle_engine::Command;
use waggle_protocol::{partition_of, PartitionId, Record};

use crate::streams::{JobStreamRegistry, PushedJob};
use crate::{forward, BrokerError, FORWARD_ANSWER_WAIT, ROUTE_RETRY, ROUTE_WINDOW};

/// How often the brokers known are compared with the job stream sessions open.
const SESSIONS_EVERY: Duration = Duration::from_millis(200);
/// How often the cluster topology is read for the partition counts.
const FOLLOW_EVERY: Duration = Duration::from_secs(1);

/// Where the brokers of a cluster are, and which leads each partition, as far as known now.
pub trait Directory: Send + Sync + 'static {
    /// The brokers known to be alive: node id and internal address, ordered by node id.
    fn brokers(&self) -> Vec<(u64, SocketAddr)>;
    /// The broker leading `partition` and its internal address, if one is known.
    fn leader(&self, partition: PartitionId) -> Option<(u64, SocketAddr)>;
}

/// A cluster of brokers as a client reaches it (see the module documentation).
pub struct RemoteCluster {
    counts: Arc<crate::PartitionCounts>,
    round_robin: AtomicUsize,
    directory: Arc<dyn Directory>,
    forwarder: Arc<forward::Forwarder>,
    streams: Arc<JobStreamRegistry>,
    jobs_available: broadcast::Sender<String>,
    runtime: tokio::runtime::Handle,
    /// The job stream sessions by broker address, and the task opening new ones.
    sessions: Arc<Mutex<HashMap<SocketAddr, JoinHandle<()>>>>,
    watcher: Mutex<Option<JoinHandle<()>>>,
    /// The task following the cluster topology's partition counts.
    follower: Mutex<Option<JoinHandle<()>>>,
}

impl RemoteCluster {
    /// A client of the cluster of `partitions` partitions whose brokers `directory` knows;
    /// opens a job stream session with each broker as the directory learns of it, on the
    /// current tokio runtime (it must be in one).
    pub fn start(partitions: u16, directory: Arc<dyn Directory>) -> Arc<RemoteCluster> {
        Self::start_with(partitions, directory, None)
    }

    /// As [`Self::start`]; every connection to a broker goes through `connector` when given
    /// (the brokers' mutual TLS, [`waggle_replication::tls::MutualTls::connector`]).
    pub fn start_with(partitions: u16, directory: Arc<dyn Directory>, connector: Option<forward::Connector>) -> Arc<RemoteCluster> {
        let runtime = tokio::runtime::Handle::current();
        let (jobs_available, _) = broadcast::channel(1024);
        let cluster = Arc::new(RemoteCluster {
            counts: crate::PartitionCounts::fixed(partitions.max(1)),
            round_robin: AtomicUsize::new(0),
            directory,
            forwarder: Arc::new(connector.clone().map_or_else(forward::Forwarder::default, forward::Forwarder::with_connector)),
            streams: Arc::new(JobStreamRegistry::default()),
            jobs_available,
            runtime: runtime.clone(),
            sessions: Arc::default(),
            watcher: Mutex::new(None),
            follower: Mutex::new(None),
        });
        let watcher = runtime.spawn(keep_sessions(
            cluster.directory.clone(),
            cluster.streams.clone(),
            cluster.jobs_available.clone(),
            cluster.sessions.clone(),
            connector,
        ));
        *cluster.watcher.lock().expect("watcher lock") = Some(watcher);
        let follower = runtime.spawn(follow_counts(cluster.directory.clone(), cluster.forwarder.clone(), cluster.counts.clone()));
        *cluster.follower.lock().expect("follower lock") = Some(follower);
        cluster
    }

    /// Asks every broker known to hand each partition it leads to its preferred leader (as
    /// [`crate::Broker::rebalance`]); answers the partitions asked, skipping brokers that do not
    /// answer within a second.
    pub async fn rebalance(&self) -> Vec<PartitionId> {
        let mut asked = Vec::new();
        for (node, addr) in self.directory.brokers() {
            match self.forwarder.rebalance(addr, Duration::from_secs(1)).await {
                Ok(partitions) => asked.extend(partitions),
                Err(e) => tracing::warn!(node, error = %e, "a broker could not be asked to rebalance"),
            }
        }
        asked.sort_unstable();
        asked
    }

    /// The cluster's partition count (as its topology says, once read).
    pub fn partition_count(&self) -> u16 {
        self.counts.all()
    }

    /// The partitions new process instances go to (see [`crate::Broker::routed_partition_count`]).
    pub fn routed_partition_count(&self) -> u16 {
        self.counts.routed()
    }

    /// The next partition for work that is not bound to a key (round robin).
    pub fn next_partition(&self) -> PartitionId {
        (self.round_robin.fetch_add(1, Ordering::Relaxed) % usize::from(self.counts.routed())) as PartitionId + 1
    }

    /// The partition of a key, if it is one of the cluster's.
    pub fn partition_of_key(&self, key: i64) -> Option<PartitionId> {
        let p = partition_of(key);
        (p >= 1 && p <= self.counts.all()).then_some(p)
    }

    /// The partition a message lives on: a hash of its correlation key among the cluster's
    /// first partition count, as in Zeebe.
    pub fn partition_of_correlation_key(&self, correlation_key: &str) -> PartitionId {
        waggle_protocol::keys::partition_of_correlation_key(correlation_key, u32::from(self.counts.messages()))
    }

    /// Submits a command to `partition`'s leader and waits for the record that answers it; tried
    /// again on the next leader while none takes it (at most [`ROUTE_WINDOW`]).
    pub async fn submit(&self, partition: PartitionId, command: Command) -> Result<Record, BrokerError> {
        match self.route(partition, false, command, ROUTE_WINDOW).await {
            Err(BrokerError::NotLeader(p)) => Err(BrokerError::Unavailable(p)),
            other => other,
        }
    }

    /// As [`Self::submit`], trying for at most `window`; [`BrokerError::NotLeader`] when no
    /// broker took the command by then (it was certainly not taken: it may go to another
    /// partition).
    pub async fn submit_within(&self, partition: PartitionId, command: Command, window: Duration) -> Result<Record, BrokerError> {
        self.route(partition, false, command, window).await
    }

    /// Deploys through partition 1's leader (as [`crate::Broker::deploy`] there).
    pub async fn deploy(&self, command: Command) -> Result<Record, BrokerError> {
        match self.route(1, true, command, ROUTE_WINDOW).await {
            Err(BrokerError::NotLeader(p)) => Err(BrokerError::Unavailable(p)),
            other => other,
        }
    }

    async fn route(&self, partition: PartitionId, deploy: bool, command: Command, window: Duration) -> Result<Record, BrokerError> {
        if partition == 0 || partition > self.counts.all() {
            return Err(BrokerError::NoSuchPartition(partition));
        }
        let deadline = tokio::time::Instant::now() + window;
        // the broker that refused last, and the next of the known brokers to try instead
        let mut refused: Option<u64> = None;
        let mut turn = usize::from(partition);
        loop {
            let target = match self.directory.leader(partition) {
                Some((node, addr)) if refused != Some(node) => Some((node, addr)),
                _ => {
                    let brokers = self.directory.brokers();
                    turn += 1;
                    (!brokers.is_empty()).then(|| brokers[turn % brokers.len()])
                }
            };
            let answer = match target {
                Some((node, addr)) => {
                    let left = deadline.saturating_duration_since(tokio::time::Instant::now());
                    let answer = self.forwarder.submit(addr, partition, deploy, command.clone(), left.max(FORWARD_ANSWER_WAIT)).await;
                    if matches!(answer, Err(BrokerError::NotLeader(_))) {
                        refused = Some(node);
                    }
                    answer
                }
                None => Err(BrokerError::NotLeader(partition)),
            };
            match answer {
                Err(BrokerError::NotLeader(_)) if tokio::time::Instant::now() < deadline => tokio::time::sleep(ROUTE_RETRY).await,
                other => return other,
            }
        }
    }

    /// The job streams of this gateway's clients (the brokers push to them through the sessions).
    pub fn job_streams(&self) -> &Arc<JobStreamRegistry> {
        &self.streams
    }

    /// Sends jobs pushed to a stream whose client never took them back to their partitions'
    /// pools at once (JOB YIELD through each partition's leader), instead of at their time-out.
    pub fn yield_jobs(self: &Arc<Self>, jobs: impl IntoIterator<Item = PushedJob>) {
        for job in jobs {
            let Some(partition) = self.partition_of_key(job.key) else { continue };
            let command = Command::new(job.key, waggle_protocol::Intent::Yield, waggle_protocol::RecordValue::Job(job.record));
            let cluster = self.clone();
            self.runtime.spawn(async move {
                if let Err(e) = cluster.route(partition, false, command, Duration::from_secs(5)).await {
                    tracing::warn!(partition, error = %e, "a pushed job could not be yielded: it returns to the pool at its time-out");
                }
            });
        }
    }

    /// Job types that became activatable on any broker (for long-polling activations).
    pub fn subscribe_jobs_available(&self) -> crate::JobsAvailable {
        crate::JobsAvailable::new(self.jobs_available.subscribe(), None)
    }

    /// Closes the job stream sessions (the brokers yield what they held for them).
    pub fn shutdown(&self) {
        if let Some(watcher) = self.watcher.lock().expect("watcher lock").take() {
            watcher.abort();
        }
        if let Some(follower) = self.follower.lock().expect("follower lock").take() {
            follower.abort();
        }
        for (_, session) in self.sessions.lock().expect("sessions lock").drain() {
            session.abort();
        }
    }
}

impl Drop for RemoteCluster {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Reads the cluster topology from the brokers the directory lists (the first that answers)
/// every [`FOLLOW_EVERY`], and keeps `counts` as its newest version says.
async fn follow_counts(directory: Arc<dyn Directory>, forwarder: Arc<forward::Forwarder>, counts: Arc<crate::PartitionCounts>) {
    let mut version = 0;
    loop {
        for (_, addr) in directory.brokers() {
            let Ok((json, _)) = forwarder.topology(addr, String::new(), Duration::from_secs(2)).await else { continue };
            let Ok(t) = serde_json::from_str::<crate::topology::Topology>(&json) else { continue };
            if t.version > version {
                version = t.version;
                counts.follow(&t);
            }
            break;
        }
        tokio::time::sleep(FOLLOW_EVERY).await;
    }
}

/// Opens a job stream session with every broker the directory lists, as it appears (a session
/// reconnects by itself while its broker is away, so none is closed here).
async fn keep_sessions(
    directory: Arc<dyn Directory>,
    streams: Arc<JobStreamRegistry>,
    jobs_available: broadcast::Sender<String>,
    sessions: Arc<Mutex<HashMap<SocketAddr, JoinHandle<()>>>>,
    connector: Option<forward::Connector>,
) {
    let mut tick = tokio::time::interval(SESSIONS_EVERY);
    loop {
        tick.tick().await;
        let brokers = directory.brokers();
        let mut sessions = sessions.lock().expect("sessions lock");
        for (node, addr) in brokers {
            sessions.entry(addr).or_insert_with(|| {
                tracing::debug!(node, %addr, "opening a job stream session");
                tokio::spawn(crate::remote_streams::keep_session(streams.clone(), addr, jobs_available.clone(), connector.clone()))
            });
        }
    }
}
