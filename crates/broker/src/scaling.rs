//! Replicas started and stopped at run time as the cluster topology ([`topology`]) says, and
//! the topology changes this broker carries out as their coordinator (Zeebe 8.5's partition
//! join and leave: `POST` / `DELETE /actuator/cluster/brokers/{id}/partitions/{id}`).
//!
//! The coordinator (the broker that accepted the change) persists the planned change, then
//! until it is done hands the topology to every broker (each adopts a newer version: persists
//! it, starts the replicas it names for it, stops those it no longer names, and tells its
//! partitions' leaders the membership changes asked: [`crate::partition`]'s `membership`) and
//! reads the partitions' leaders' Raft configurations; once they show the operation done, the
//! operation completes (a new version), and the next one starts. A leaving replica's data is
//! removed only once the topology drops it, which is once its partition's configuration no
//! longer names it.
//!
//! A broker that was down while a change completed learns it without waiting for the next one:
//! at start and every [`CATCH_UP_EVERY`] after, it asks the other brokers for their topology
//! and adopts the newest version if it is newer than its own ([`Broker::catch_up_topology`]).

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use waggle_protocol::PartitionId;

use crate::topology::{self, LeaderReport, Operation, ReplicaState, Topology, TopologyError};
use crate::{cluster, partition, relay, Broker, BrokerError, ClusterSpec};

/// How long the coordinator waits for a broker's answer to the topology.
const PUSH_CALL: Duration = Duration::from_secs(2);
/// Pause between two rounds of the coordinator.
const COORDINATE_EVERY: Duration = Duration::from_millis(200);
/// Pause between two rounds of asking the other brokers for a newer topology (one small call
/// per broker, answered from memory).
const CATCH_UP_EVERY: Duration = Duration::from_secs(3);

/// A change accepted: what `POST` / `DELETE .../partitions/{id}` answer (Zeebe's
/// `PlannedOperationsResponse`).
#[derive(Debug, Clone)]
pub struct PlannedChange {
    pub change_id: u64,
    pub current: Topology,
    pub planned: Vec<Operation>,
    pub expected: Topology,
}

/// Why a change was refused.
#[derive(Debug, thiserror::Error)]
pub enum ChangeError {
    #[error("{0}")]
    Invalid(#[from] TopologyError),
    #[error("the standalone node has no cluster topology to change")]
    NotClustered,
    #[error("the topology could not be persisted: {0}")]
    Io(String),
}

/// The persisted topology, or the static placement's (persisted) on a first start.
pub(crate) fn load_topology(data_dir: &std::path::Path, spec: &ClusterSpec, partitions: PartitionId) -> Result<Topology, BrokerError> {
    let fail = |e: std::io::Error| BrokerError::Cluster(format!("the cluster topology in {}: {e}", data_dir.display()));
    if let Some(t) = Topology::load(data_dir).map_err(fail)? {
        if t.partition_count() != partitions {
            return Err(BrokerError::Cluster(format!(
                "the cluster topology in {} has {} partitions, the configuration {partitions}",
                data_dir.display(),
                t.partition_count()
            )));
        }
        return Ok(t);
    }
    let t = Topology::initial(spec, partitions);
    std::fs::create_dir_all(data_dir).map_err(fail)?;
    t.save(data_dir).map_err(fail)?;
    Ok(t)
}

/// What this broker's replica of `partition` starts with, if the topology gives it one.
pub(crate) fn replica_setup<'a>(
    spec: &ClusterSpec,
    topology: &Topology,
    partition: PartitionId,
    network: &'a waggle_replication::net::RaftNetwork,
    relay: &Arc<relay::Relay>,
) -> Option<partition::ReplicaSetup<'a>> {
    let replica = topology.replica(spec.node_id, partition)?;
    Some(partition::ReplicaSetup {
        id: cluster::raft_id(spec.node_id),
        voters: topology.voters(partition).into_iter().map(cluster::raft_id).collect(),
        joining: replica.state == ReplicaState::Joining,
        network,
        relay: relay.clone(),
        relayed: relay::inbox(network, partition),
    })
}

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

impl Broker {
    /// The cluster topology as this broker knows it (`None` standalone).
    pub fn cluster_topology(&self) -> Option<Topology> {
        self.links.as_ref().map(|l| l.topology.lock().expect("topology lock").clone())
    }

    /// Plans `broker` joining `partition` with `priority` (or its priority changing, if it
    /// holds a replica already) and starts carrying it out.
    pub fn join_partition(self: &Arc<Self>, broker: u64, partition: PartitionId, priority: u32) -> Result<PlannedChange, ChangeError> {
        self.plan(Operation::PartitionJoin { broker_id: broker, partition_id: partition, priority })
    }

    /// Plans `broker` leaving `partition` and starts carrying it out.
    pub fn leave_partition(self: &Arc<Self>, broker: u64, partition: PartitionId) -> Result<PlannedChange, ChangeError> {
        self.plan(Operation::PartitionLeave { broker_id: broker, partition_id: partition })
    }

    fn plan(self: &Arc<Self>, operation: Operation) -> Result<PlannedChange, ChangeError> {
        let links = self.links.as_ref().ok_or(ChangeError::NotClustered)?;
        let planned = {
            let mut t = links.topology.lock().expect("topology lock");
            let current = t.clone();
            let mut next = t.clone();
            let change_id = next.plan(operation, links.spec.node_id, now_ms())?;
            next.save(&self.config.data_dir).map_err(|e| ChangeError::Io(e.to_string()))?;
            *t = next.clone();
            let planned = next.pending.as_ref().map(|p| p.pending.clone()).unwrap_or_default();
            let mut expected = next;
            while expected.next_operation().is_some() {
                expected.complete_next(now_ms());
            }
            PlannedChange { change_id, current, planned, expected }
        };
        tracing::info!(change = planned.change_id, operations = ?planned.planned, "topology change planned");
        self.reconcile();
        links.runtime.spawn(self.clone().coordinate());
        Ok(planned)
    }

    /// The partitions this broker leads, with their configurations.
    fn leader_reports(&self) -> Vec<LeaderReport> {
        let Some(links) = &self.links else { return Vec::new() };
        self.hosted()
            .iter()
            .filter(|h| h.leads())
            .map(|h| {
                let s = h.status();
                LeaderReport {
                    partition: s.partition_id,
                    leader: links.spec.node_id,
                    voters: s.voters,
                    learners: s.learners,
                    voters_outgoing: s.voters_outgoing,
                }
            })
            .collect()
    }

    /// The `Topology` call of another broker: adopts `offered` (JSON; empty: nothing offered)
    /// if it is newer, and answers this broker's topology and leader reports (JSON).
    pub(crate) fn topology_here(&self, offered: &str) -> Result<(String, String), String> {
        let links = self.links.as_ref().ok_or("the standalone node has no cluster topology")?;
        if !offered.is_empty() {
            let offered: Topology = serde_json::from_str(offered).map_err(|e| format!("an unreadable topology: {e}"))?;
            if self.adopt_topology(offered)? {
                self.reconcile();
            }
        }
        let topology = serde_json::to_string(&*links.topology.lock().expect("topology lock")).map_err(|e| e.to_string())?;
        let led = serde_json::to_string(&self.leader_reports()).map_err(|e| e.to_string())?;
        Ok((topology, led))
    }

    /// Makes `offered` this broker's topology (persisted first) if its version is newer than
    /// the one it has; whether it did (the caller then reconciles).
    fn adopt_topology(&self, offered: Topology) -> Result<bool, String> {
        let links = self.links.as_ref().ok_or("the standalone node has no cluster topology")?;
        let mut t = links.topology.lock().expect("topology lock");
        if offered.version <= t.version {
            return Ok(false);
        }
        offered.save(&self.config.data_dir).map_err(|e| format!("persisting the topology: {e}"))?;
        tracing::info!(version = offered.version, was = t.version, "cluster topology adopted");
        *t = offered;
        Ok(true)
    }

    /// Asks the other brokers for their topology now and every [`CATCH_UP_EVERY`] after, and
    /// adopts (and reconciles with) the newest if it is newer than this broker's: a broker that
    /// was down when a change completed, and missed its coordinator's last pushes, catches up.
    /// Runs until the broker is dropped; holds it only while adopting.
    pub(crate) async fn catch_up_topology(broker: Weak<Broker>) {
        loop {
            let asked = {
                let Some(b) = broker.upgrade() else { return };
                let Some(links) = &b.links else { return };
                let others: Vec<_> = links.spec.other_members();
                (links.forwarder.clone(), others)
            };
            let (forwarder, others) = asked;
            let mut newest: Option<Topology> = None;
            for addr in others {
                let Ok((json, _)) = forwarder.topology(addr, String::new(), PUSH_CALL).await else { continue };
                let Ok(t) = serde_json::from_str::<Topology>(&json) else { continue };
                if newest.as_ref().is_none_or(|n| t.version > n.version) {
                    newest = Some(t);
                }
            }
            if let (Some(t), Some(b)) = (newest, broker.upgrade()) {
                match b.adopt_topology(t) {
                    Ok(true) => {
                        let _ = tokio::task::spawn_blocking(move || b.reconcile()).await;
                    }
                    Ok(false) => {}
                    Err(e) => tracing::warn!(error = %e, "a newer cluster topology could not be adopted"),
                }
            }
            tokio::time::sleep(CATCH_UP_EVERY).await;
        }
    }

    /// Starts the replicas the topology gives this broker and it does not run, stops (and
    /// removes the data of) those it runs and the topology no longer gives it, and tells each
    /// replica the membership changes asked of its partition. Blocks while replicas start or stop.
    pub(crate) fn reconcile(&self) {
        let Some(links) = &self.links else { return };
        let _one_at_a_time = self.reconciling.lock().unwrap_or_else(|e| e.into_inner());
        let topology = links.topology.lock().expect("topology lock").clone();
        let me = links.spec.node_id;
        for p in 1..=self.partition_count {
            let wanted = topology.replica(me, p).is_some();
            let running = self.handle(p).is_ok();
            if wanted && !running {
                if let Err(e) = self.start_replica(&topology, p) {
                    tracing::error!(partition = p, error = %e, "the replica could not be started");
                }
            } else if !wanted && running {
                self.stop_replica(p);
            }
            if let Ok(handle) = self.handle(p) {
                let in_state = |state: ReplicaState| -> Vec<u64> {
                    topology.replicas(p).into_iter().filter(|(_, r)| r.state == state).map(|(n, _)| cluster::raft_id(n)).collect()
                };
                handle.want_membership(partition::MembershipWanted {
                    join: in_state(ReplicaState::Joining),
                    leave: in_state(ReplicaState::Leaving),
                });
            }
        }
    }

    fn start_replica(&self, topology: &Topology, p: PartitionId) -> Result<(), BrokerError> {
        let links = self.links.as_ref().ok_or(BrokerError::Unavailable(p))?;
        let network = self.network.lock().expect("network lock");
        let (Some(network), Some(relay)) = (network.as_ref(), &self.relay) else { return Err(BrokerError::Unavailable(p)) };
        let setup = replica_setup(&links.spec, topology, p, network, relay).ok_or(BrokerError::Unavailable(p))?;
        tracing::info!(partition = p, joining = setup.joining, "starting a replica");
        let handle = partition::start(
            p,
            &self.config,
            self.streams.clone(),
            self.jobs_available.clone(),
            self.metrics.clone(),
            self.peers.clone(),
            Some(setup),
        )?;
        let handle = Arc::new(handle);
        let slot = usize::from(p) - 1;
        if let Some(peer) = self.peers.write().expect("peers lock").get_mut(slot) {
            *peer = Some(handle.peer());
        }
        self.partitions.write().expect("partitions lock")[slot] = Some(handle);
        Ok(())
    }

    fn stop_replica(&self, p: PartitionId) {
        let slot = usize::from(p) - 1;
        if let Some(peer) = self.peers.write().expect("peers lock").get_mut(slot) {
            *peer = None;
        }
        let Some(handle) = self.partitions.write().expect("partitions lock")[slot].take() else { return };
        tracing::info!(partition = p, "stopping the replica the topology no longer gives this broker");
        handle.stop();
        let dir = handle.dir().to_path_buf();
        drop(handle);
        match std::fs::remove_dir_all(&dir) {
            Ok(()) => tracing::info!(partition = p, dir = %dir.display(), "the replica's data removed"),
            Err(e) => tracing::warn!(partition = p, dir = %dir.display(), error = %e, "the replica's data could not be removed"),
        }
    }

    /// Carries out the pending change this broker coordinates, operation by operation, then
    /// hands the final topology to every broker. Returns at once when another run is under way
    /// or there is nothing to do.
    pub(crate) async fn coordinate(self: Arc<Self>) {
        let Some(links) = &self.links else { return };
        if links.coordinating.swap(true, Ordering::SeqCst) {
            return;
        }
        let me = links.spec.node_id;
        loop {
            let t = links.topology.lock().expect("topology lock").clone();
            let (Some(operation), Some(pending)) = (t.next_operation(), t.pending.as_ref()) else { break };
            if pending.coordinator != me {
                break;
            }
            let mut reports = self.leader_reports();
            reports.extend(self.push(&t).await);
            if topology::operation_done(operation, &reports) && self.complete_operation() {
                tracing::info!(?operation, "topology operation completed");
                let broker = self.clone();
                let _ = tokio::task::spawn_blocking(move || broker.reconcile()).await;
                continue;
            }
            tokio::time::sleep(COORDINATE_EVERY).await;
        }
        // the last version to everyone (a leaving replica's broker stops it now)
        let last = links.topology.lock().expect("topology lock").clone();
        for _ in 0..5 {
            self.push(&last).await;
            if self.everyone_has(&last).await {
                break;
            }
            tokio::time::sleep(COORDINATE_EVERY).await;
        }
        links.coordinating.store(false, Ordering::SeqCst);
    }

    /// Completes the pending change's next operation and persists the new version; false when
    /// it could not be persisted (the change waits).
    fn complete_operation(&self) -> bool {
        let Some(links) = &self.links else { return false };
        let mut t = links.topology.lock().expect("topology lock");
        let mut next = t.clone();
        next.complete_next(now_ms());
        match next.save(&self.config.data_dir) {
            Ok(()) => {
                *t = next;
                true
            }
            Err(e) => {
                tracing::error!(error = %e, "the topology could not be persisted; the change waits");
                false
            }
        }
    }

    /// Hands `t` to every other broker; returns the leader reports of those that answered.
    async fn push(&self, t: &Topology) -> Vec<LeaderReport> {
        let Some(links) = &self.links else { return Vec::new() };
        let json = match serde_json::to_string(t) {
            Ok(json) => json,
            Err(e) => {
                tracing::error!(error = %e, "the topology does not encode");
                return Vec::new();
            }
        };
        let mut reports = Vec::new();
        let others = links.spec.members.iter().enumerate().filter(|&(node, _)| node as u64 != links.spec.node_id);
        for (node, &addr) in others {
            match links.forwarder.topology(addr, json.clone(), PUSH_CALL).await {
                Ok((_, led)) => reports.extend(serde_json::from_str::<Vec<LeaderReport>>(&led).unwrap_or_default()),
                Err(e) => tracing::debug!(node, error = %e, "a broker did not take the topology"),
            }
        }
        reports
    }

    /// Whether every other broker answers with version `t.version` or newer.
    async fn everyone_has(&self, t: &Topology) -> bool {
        let Some(links) = &self.links else { return true };
        let others = links.spec.members.iter().enumerate().filter(|&(node, _)| node as u64 != links.spec.node_id);
        for (_, &addr) in others {
            let answer = links.forwarder.topology(addr, String::new(), PUSH_CALL).await;
            let version = answer.ok().and_then(|(json, _)| serde_json::from_str::<Topology>(&json).ok()).map(|t| t.version);
            if version.is_none_or(|v| v < t.version) {
                return false;
            }
        }
        true
    }
}
