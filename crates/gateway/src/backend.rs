//! What the gateway submits to: the broker it is embedded in, or a cluster it reaches from outside
//! (the standalone gateway, `waggle gateway`).
//!
//! An enum rather than a trait object: the embedded gateway's calls stay direct calls on the
//! broker (one predictable branch, no allocation, no virtual call), and the futures stay `Send`
//! without boxing.

use std::sync::Arc;
use std::time::Duration;

use waggle_broker::{Broker, BrokerError, JobStreamRegistry, JobsAvailable, PushedJob, RemoteCluster};
use waggle_engine::Command;
use waggle_protocol::{PartitionId, Record};

/// The partitions behind a gateway.
#[derive(Clone)]
pub enum Backend {
    /// The broker this gateway is part of (standalone node or cluster broker).
    Broker(Arc<Broker>),
    /// A cluster of brokers reached over their internal port (a standalone gateway).
    Remote(Arc<RemoteCluster>),
}

impl Backend {
    pub fn partition_count(&self) -> u16 {
        match self {
            Backend::Broker(b) => b.partition_count(),
            Backend::Remote(r) => r.partition_count(),
        }
    }

    /// The partitions new process instances go to (after a growth of the partition count, the
    /// new ones only once they hold every deployment).
    pub fn routed_partition_count(&self) -> u16 {
        match self {
            Backend::Broker(b) => b.routed_partition_count(),
            Backend::Remote(r) => r.routed_partition_count(),
        }
    }

    pub fn next_partition(&self) -> PartitionId {
        match self {
            Backend::Broker(b) => b.next_partition(),
            Backend::Remote(r) => r.next_partition(),
        }
    }

    pub fn partition_of_key(&self, key: i64) -> Option<PartitionId> {
        match self {
            Backend::Broker(b) => b.partition_of_key(key),
            Backend::Remote(r) => r.partition_of_key(key),
        }
    }

    pub fn partition_of_correlation_key(&self, correlation_key: &str) -> PartitionId {
        match self {
            Backend::Broker(b) => b.partition_of_correlation_key(correlation_key),
            Backend::Remote(r) => r.partition_of_correlation_key(correlation_key),
        }
    }

    /// Whether commands cross a network to reach their partition (a cluster): then a new
    /// instance whose partition is unavailable is created on another one.
    pub fn routes(&self) -> bool {
        match self {
            Backend::Broker(b) => b.is_clustered(),
            Backend::Remote(_) => true,
        }
    }

    pub async fn submit(&self, partition: PartitionId, command: Command) -> Result<Record, BrokerError> {
        match self {
            Backend::Broker(b) => b.submit(partition, command).await,
            Backend::Remote(r) => r.submit(partition, command).await,
        }
    }

    /// [`Broker::submit_within`]: `NotLeader` when no leader took the command within `window`.
    pub async fn submit_within(&self, partition: PartitionId, command: Command, window: Duration) -> Result<Record, BrokerError> {
        match self {
            Backend::Broker(b) => b.submit_within(partition, command, window).await,
            Backend::Remote(r) => r.submit_within(partition, command, window).await,
        }
    }

    pub async fn deploy(&self, command: Command) -> Result<Record, BrokerError> {
        match self {
            Backend::Broker(b) => b.deploy(command).await,
            Backend::Remote(r) => r.deploy(command).await,
        }
    }

    pub fn job_streams(&self) -> &Arc<JobStreamRegistry> {
        match self {
            Backend::Broker(b) => b.job_streams(),
            Backend::Remote(r) => r.job_streams(),
        }
    }

    pub fn yield_jobs(&self, jobs: Vec<PushedJob>) {
        match self {
            Backend::Broker(b) => b.yield_jobs(jobs),
            Backend::Remote(r) => r.yield_jobs(jobs),
        }
    }

    pub fn subscribe_jobs_available(&self) -> JobsAvailable {
        match self {
            Backend::Broker(b) => b.subscribe_jobs_available(),
            Backend::Remote(r) => r.subscribe_jobs_available(),
        }
    }
}
