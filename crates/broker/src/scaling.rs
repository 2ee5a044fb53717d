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

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use waggle_protocol::PartitionId;

use crate::topology::{self, LeaderReport, Operation, ReplicaState, Topology, TopologyError};
use crate::{cluster, partition, relay, Broker, BrokerError, ClusterSpec};

/// How long the coordinator waits for a broker's answer to the topology.
const PUSH_CALL: Duration = Duration::from_secs(2);
/// How long a change request forwarded to the coordinator may take.
const CHANGE_CALL: Duration = Duration::from_secs(10);
/// Pause between two rounds of the coordinator.
const COORDINATE_EVERY: Duration = Duration::from_millis(200);
/// Pause between two rounds of asking the other brokers for a newer topology (one small call
/// per broker, answered from memory).
const CATCH_UP_EVERY: Duration = Duration::from_secs(3);
/// Pause between two SCALE_UP commands of a scale-up the deployment partition has not recorded
/// done yet.
const SCALE_ASK_EVERY: Duration = Duration::from_secs(3);

/// A change accepted: what the change endpoints answer (Zeebe's `PlannedOperationsResponse`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PlannedChange {
    pub change_id: u64,
    pub current: Topology,
    pub planned: Vec<Operation>,
    pub expected: Topology,
    /// Only planned (`dryRun`): nothing changed.
    pub dry_run: bool,
}

/// A change asked of the cluster (the management API's requests).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ChangeRequest {
    /// `POST /actuator/cluster/brokers/{b}/partitions/{p}`.
    JoinPartition { broker: u64, partition: PartitionId, priority: u32 },
    /// `DELETE /actuator/cluster/brokers/{b}/partitions/{p}`.
    LeavePartition { broker: u64, partition: PartitionId },
    /// `POST /actuator/cluster/brokers` (8.5): exactly these brokers.
    Brokers(BTreeSet<u64>),
    /// `POST /actuator/cluster/brokers/{b}`.
    AddBroker(u64),
    /// `DELETE /actuator/cluster/brokers/{b}`: its replicas move to the others first.
    RemoveBroker(u64),
    /// `PATCH /actuator/cluster` (8.8): brokers added and removed, or their count (brokers 0
    /// to count - 1), and the replication factor; or a greater partition count (on its own:
    /// a smaller one is refused, as Zeebe 8.8 refuses it).
    Reconfigure { add: Vec<u64>, remove: Vec<u64>, count: Option<u64>, replication_factor: Option<u32>, partition_count: Option<u32> },
}

impl ChangeRequest {
    /// The operations that carry out this request on `t`, with `addressable` brokers (node ids
    /// below it) that can be reached at all.
    fn operations(&self, t: &Topology, addressable: u64) -> Result<Vec<Operation>, ChangeError> {
        let members: BTreeSet<u64> = t.brokers.keys().copied().collect();
        let factor = t.replication_factor();
        let ops = match self {
            ChangeRequest::JoinPartition { broker, partition, priority } => {
                vec![Operation::PartitionJoin { broker_id: *broker, partition_id: *partition, priority: *priority }]
            }
            ChangeRequest::LeavePartition { broker, partition } => {
                vec![Operation::PartitionLeave { broker_id: *broker, partition_id: *partition }]
            }
            ChangeRequest::Brokers(wanted) => t.plan_layout(wanted, factor, addressable)?,
            ChangeRequest::AddBroker(broker) => {
                let mut wanted = members;
                wanted.insert(*broker);
                t.plan_layout(&wanted, factor, addressable)?
            }
            ChangeRequest::RemoveBroker(broker) => {
                if !members.contains(broker) {
                    let last = members.iter().copied().max().unwrap_or(0);
                    return Err(TopologyError::UnknownBroker { broker: *broker, last }.into());
                }
                let mut wanted = members;
                wanted.remove(broker);
                t.plan_layout(&wanted, factor, addressable)?
            }
            ChangeRequest::Reconfigure { add, remove, count, replication_factor, partition_count } => {
                if let Some(partitions) = partition_count.filter(|&c| c != u32::from(t.partition_count())) {
                    // the partition count grows on its own (Zeebe 8.8: "Partition count can
                    // only be increased"); a smaller count is refused by the plan
                    let brokers_change = !add.is_empty() || !remove.is_empty() || count.is_some_and(|c| c != members.len() as u64);
                    let factor_change = replication_factor.is_some_and(|f| f != factor);
                    if partitions > u32::from(t.partition_count()) && (brokers_change || factor_change) {
                        return Err(ChangeError::Unsupported(
                            "partitions.count cannot be changed together with the brokers or the replication factor: change one, then the other".into(),
                        ));
                    }
                    return Ok(t.plan_partitions(partitions)?);
                }
                let wanted: BTreeSet<u64> = match count {
                    Some(_) if !add.is_empty() || !remove.is_empty() => {
                        return Err(ChangeError::Unsupported("brokers.count cannot be combined with brokers.add or brokers.remove".into()))
                    }
                    Some(count) => (0..*count).collect(),
                    None => {
                        if let Some(broker) = remove.iter().find(|b| !members.contains(b)) {
                            let last = members.iter().copied().max().unwrap_or(0);
                            return Err(TopologyError::UnknownBroker { broker: *broker, last }.into());
                        }
                        members.iter().chain(add).copied().filter(|b| !remove.contains(b)).collect()
                    }
                };
                t.plan_layout(&wanted, replication_factor.unwrap_or(factor), addressable)?
            }
        };
        Ok(ops)
    }
}

/// Why a change was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
pub enum ChangeError {
    #[error("{0}")]
    Invalid(#[from] TopologyError),
    #[error("{0}")]
    Unsupported(String),
    #[error("the standalone node has no cluster topology to change")]
    NotClustered,
    #[error("topology changes are coordinated by broker {coordinator}, which could not be reached: {reason}")]
    CoordinatorUnreachable { coordinator: u64, reason: String },
    #[error("the topology could not be persisted: {0}")]
    Io(String),
}

/// Refuses operations that give a replica to, or add, a broker whose internal address is not
/// known (not one of the contact points, and not announced by the gossip: not started yet).
fn unaddressable(operations: &[Operation], book: &cluster::AddressBook) -> Result<(), ChangeError> {
    for operation in operations {
        let broker = match *operation {
            Operation::BrokerAdd { broker_id } | Operation::PartitionJoin { broker_id, .. } => broker_id,
            _ => continue,
        };
        if book.get(broker).is_none() {
            return Err(ChangeError::Unsupported(format!(
                "Broker {broker} cannot be added: its internal address is not known (the brokers known are {:?}); \
                 start it with the cluster's contact points first",
                book.nodes()
            )));
        }
    }
    Ok(())
}

/// The persisted topology, or the static placement's (persisted) on a first start.
pub(crate) fn load_topology(data_dir: &std::path::Path, spec: &ClusterSpec, partitions: PartitionId) -> Result<Topology, BrokerError> {
    let fail = |e: std::io::Error| BrokerError::Cluster(format!("the cluster topology in {}: {e}", data_dir.display()));
    if let Some(t) = Topology::load(data_dir).map_err(fail)? {
        // a cluster grown at run time may be started with the configured count
        if !t.fits_configured_count(partitions) {
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

    /// Plans `request` (only plans it with `dry_run`) and starts carrying it out. Every change
    /// is planned by the coordinator ([`Topology::coordinator`], broker 0 while it is a
    /// member): another broker forwards the request there, so changes asked on any broker are
    /// serialised and a second one while one runs is refused as a conflict; once planned, it
    /// takes the coordinator's topology, so that it shows the change it was asked for.
    pub async fn request_change(self: &Arc<Self>, request: ChangeRequest, dry_run: bool) -> Result<PlannedChange, ChangeError> {
        let links = self.links.as_ref().ok_or(ChangeError::NotClustered)?;
        let coordinator = links.topology.lock().expect("topology lock").coordinator();
        if coordinator == links.spec.node_id {
            let broker = self.clone();
            return tokio::task::spawn_blocking(move || broker.change_here(request, dry_run))
                .await
                .map_err(|e| ChangeError::Io(e.to_string()))?;
        }
        let unreachable = |reason: String| ChangeError::CoordinatorUnreachable { coordinator, reason };
        let to = links.book.get(coordinator).ok_or_else(|| unreachable("it has no known address".into()))?;
        let json = serde_json::to_string(&(request, dry_run)).map_err(|e| ChangeError::Io(e.to_string()))?;
        let answer = links.forwarder.change(to, json, CHANGE_CALL).await.map_err(|e| unreachable(e.message().to_string()))?;
        let planned = serde_json::from_str::<Result<PlannedChange, ChangeError>>(&answer)
            .map_err(|e| unreachable(format!("an unreadable answer: {e}")))??;
        if !planned.dry_run && !planned.planned.is_empty() {
            // this broker shows the change it was asked for at once (`GET /actuator/cluster`
            // right after the answer), without waiting for the coordinator's push
            if let Ok((json, _)) = links.forwarder.topology(to, String::new(), PUSH_CALL).await {
                if let Ok(t) = serde_json::from_str::<Topology>(&json) {
                    if matches!(self.adopt_topology(t), Ok(true)) {
                        let broker = self.clone();
                        tokio::task::spawn_blocking(move || broker.reconcile());
                    }
                }
            }
        }
        Ok(planned)
    }

    /// The `ChangeTopology` call of another broker: `request` as JSON (`[request, dry_run]`);
    /// answers the outcome as JSON.
    pub(crate) fn change_forwarded(self: &Arc<Self>, request: &str) -> String {
        let outcome = match serde_json::from_str::<(ChangeRequest, bool)>(request) {
            Ok((request, dry_run)) => self.change_here(request, dry_run),
            Err(e) => Err(ChangeError::Unsupported(format!("an unreadable change request: {e}"))),
        };
        serde_json::to_string(&outcome).unwrap_or_else(|e| format!("{{\"Err\":{{\"Io\":\"{e}\"}}}}"))
    }

    /// Plans `request` on this broker, which must be the coordinator (else the request is
    /// refused naming it: the topology it knows may be behind).
    fn change_here(self: &Arc<Self>, request: ChangeRequest, dry_run: bool) -> Result<PlannedChange, ChangeError> {
        let links = self.links.as_ref().ok_or(ChangeError::NotClustered)?;
        let planned = {
            let mut t = links.topology.lock().expect("topology lock");
            let coordinator = t.coordinator();
            if coordinator != links.spec.node_id {
                return Err(ChangeError::CoordinatorUnreachable {
                    coordinator,
                    reason: format!("broker {} is not the coordinator", links.spec.node_id),
                });
            }
            if let Some(pending) = &t.pending {
                return Err(TopologyError::Conflict(pending.id).into());
            }
            let current = t.clone();
            let operations = request.operations(&t, u64::MAX)?;
            unaddressable(&operations, &links.book)?;
            let mut next = t.clone();
            let change_id = next.plan_operations(operations.clone(), links.spec.node_id, now_ms())?;
            if !dry_run && !operations.is_empty() {
                next.save(&self.config.data_dir).map_err(|e| ChangeError::Io(e.to_string()))?;
                *t = next.clone();
            }
            let mut expected = next;
            while expected.next_operation().is_some() {
                expected.complete_next(now_ms());
            }
            PlannedChange { change_id, current, planned: operations, expected, dry_run }
        };
        if dry_run || planned.planned.is_empty() {
            return Ok(planned);
        }
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
                    scaled_up: if s.partition_id == 1 { h.scaled_up() } else { 0 },
                    relocated: h.relocated(),
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
                let others: Vec<_> = links.book.others().into_iter().map(|(_, addr)| addr).collect();
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
        self.make_room(&topology);
        for p in 1..=topology.partition_count() {
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
                // (`replicas` lists them highest priority first)
                let staying = topology.replicas(p).into_iter().filter(|(_, r)| r.state != ReplicaState::Leaving);
                handle.want_membership(partition::MembershipWanted {
                    join: in_state(ReplicaState::Joining),
                    leave: in_state(ReplicaState::Leaving),
                    // a replica that leaves takes the lowest priority: as a voter until it is
                    // removed, it no longer refuses a staying candidate whose log is as long
                    priority: topology.replica(me, p).map(|r| if r.state == ReplicaState::Leaving { 0 } else { u64::from(r.priority) }),
                    successors: staying.map(|(n, _)| cluster::raft_id(n)).collect(),
                });
            }
        }
        self.remove_stale_replicas(&topology);
        // the counts the gateway routes by and the partitions process with: a partition whose
        // group is being bootstrapped counts once it has one
        self.counts.follow(&topology);
    }

    /// Removes the folder of each partition `topology` gives this broker no replica of and
    /// that it does not run: the data of a replica whose leave completed, left behind by a
    /// `kill -9` after the topology that dropped it was persisted and before the folder was
    /// removed (a later join of the partition would open its old log and configuration).
    fn remove_stale_replicas(&self, topology: &Topology) {
        let Some(links) = &self.links else { return };
        let root = self.config.data_dir.join("partitions");
        let Ok(entries) = std::fs::read_dir(&root) else { return };
        for entry in entries.flatten() {
            let Some(p) = entry.file_name().to_str().and_then(|n| n.parse::<PartitionId>().ok()).filter(|&p| p > 0) else { continue };
            if topology.replica(links.spec.node_id, p).is_some() || self.handle(p).is_ok() {
                continue;
            }
            match std::fs::remove_dir_all(entry.path()) {
                Ok(()) => {
                    tracing::info!(partition = p, dir = %entry.path().display(), "the data of a replica the topology dropped removed")
                }
                Err(e) => {
                    tracing::warn!(partition = p, dir = %entry.path().display(), error = %e, "the data of a replica the topology dropped could not be removed")
                }
            }
        }
    }

    /// Slots for partitions the topology added (a scale-up), and their command groups on the
    /// network (registered before a replica takes its inbox, as at start).
    fn make_room(&self, topology: &Topology) {
        let count = usize::from(topology.partition_count());
        {
            let mut partitions = self.partitions.write().expect("partitions lock");
            if partitions.len() < count {
                partitions.resize_with(count, || None);
            }
        }
        {
            let mut peers = self.peers.write().expect("peers lock");
            if peers.len() < count {
                peers.resize_with(count, || None);
            }
        }
        if let (Some(relay), Some(network)) = (&self.relay, self.network.lock().expect("network lock").as_ref()) {
            for p in 1..=topology.partition_count() {
                relay.add_partition(p, network);
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
            self.counts.clone(),
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
    /// hands the final topology to every broker, and once no change is pending hands each
    /// partition's leadership back to its preferred broker. Returns at once when another run is
    /// under way or there is nothing to do.
    ///
    /// A change planned while a run is finishing (its last operation completed, the final
    /// topology still being handed out) finds the run under way and leaves the change to it:
    /// so a run, once it lets go, looks for a pending change of its own again and carries it
    /// out (else that change would wait for ever, its operations done and never completed).
    pub(crate) async fn coordinate(self: Arc<Self>) {
        let Some(links) = &self.links else { return };
        let me = links.spec.node_id;
        let mut completed_any = false;
        loop {
            if links.coordinating.swap(true, Ordering::SeqCst) {
                return;
            }
            completed_any |= self.coordinate_run().await;
            links.coordinating.store(false, Ordering::SeqCst);
            let pending_here = links.topology.lock().expect("topology lock").pending.as_ref().is_some_and(|p| p.coordinator == me);
            if !pending_here {
                break;
            }
            tracing::info!("a change was planned while the last one finished: carrying it out");
        }
        // leadership back to each partition's preferred broker (Zeebe's `POST
        // /actuator/rebalance`), once the brokers' replicas have their new priorities
        if completed_any {
            let asked = self.rebalance().await;
            tracing::info!(partitions = ?asked, "topology change done: leadership rebalanced");
        }
    }

    /// One run of [`Self::coordinate`] (holding its flag): the pending change's operations,
    /// then the final topology to everyone; whether it completed any operation.
    async fn coordinate_run(self: &Arc<Self>) -> bool {
        let Some(links) = &self.links else { return false };
        let me = links.spec.node_id;
        let mut completed_any = false;
        let mut scale_asked: Option<std::time::Instant> = None;
        loop {
            let t = links.topology.lock().expect("topology lock").clone();
            let (Some(operation), Some(pending)) = (t.next_operation(), t.pending.as_ref()) else { break };
            if pending.coordinator != me {
                break;
            }
            if let Operation::AwaitRedistributionCompletion { desired_partition_count } = operation {
                // the deployment partition carries it out; asked again while it is not done (a
                // command lost in a failover), each copy after the first refused there
                if scale_asked.is_none_or(|at| at.elapsed() >= SCALE_ASK_EVERY) {
                    scale_asked = Some(std::time::Instant::now());
                    self.ask_scale_up(u32::from(t.routed_partitions()), desired_partition_count).await;
                }
            }
            if let Operation::AwaitRelocationCompletion { partition_count, desired_partition_count } = operation {
                // each old message partition carries it out; asked again while one is not done
                if scale_asked.is_none_or(|at| at.elapsed() >= SCALE_ASK_EVERY) {
                    scale_asked = Some(std::time::Instant::now());
                    self.ask_relocation(partition_count, desired_partition_count).await;
                }
            }
            let mut reports = self.leader_reports();
            reports.extend(self.push(&t).await);
            if topology::operation_done(operation, &reports) && self.complete_operation() {
                tracing::info!(?operation, "topology operation completed");
                completed_any = true;
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
        completed_any
    }

    /// Sends SCALE SCALE_UP (from `current` to `desired` partitions) to the deployment
    /// partition, which sends every deployed resource to the new partitions
    /// (`waggle_engine`'s `processors::scale`).
    async fn ask_scale_up(&self, current: u32, desired: u32) {
        let value = waggle_protocol::value::ScaleRecord {
            current_partition_count: current,
            desired_partition_count: desired,
            redistributed_partitions: Vec::new(),
        };
        let command = waggle_engine::Command::new(-1, waggle_protocol::Intent::ScaleUp, waggle_protocol::RecordValue::Scale(value));
        match self.submit(1, command).await {
            Ok(answer) => match &answer.rejection {
                None => tracing::info!(current, desired, "the deployment partition redistributes the resources to the new partitions"),
                Some(r) => tracing::debug!(reason = %r.reason, "scale-up asked again"),
            },
            Err(e) => tracing::warn!(error = %e, "the scale-up could not be asked for yet"),
        }
    }

    /// Sends MESSAGE_RELOCATION RELOCATE (from `current` to `desired` partitions) to each old
    /// message partition, which moves the correlation keys whose partition differs under
    /// `desired` there (`waggle_engine`'s `processors::relocation`); a partition done already
    /// refuses the copy.
    async fn ask_relocation(&self, current: u32, desired: u32) {
        let value = waggle_protocol::value::MessageRelocationRecord {
            partition_count: current,
            desired_partition_count: desired,
            ..Default::default()
        };
        for partition in 1..=current as PartitionId {
            let value = waggle_protocol::RecordValue::MessageRelocation(value.clone());
            let command = waggle_engine::Command::new(-1, waggle_protocol::Intent::Relocate, value);
            match self.submit(partition, command).await {
                Ok(answer) => match &answer.rejection {
                    None => tracing::info!(partition, current, desired, "the partition moves its correlation keys"),
                    Some(r) => tracing::debug!(partition, reason = %r.reason, "relocation asked again"),
                },
                Err(e) => tracing::warn!(partition, error = %e, "the relocation could not be asked for yet"),
            }
        }
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

    /// Hands `t` to every other broker it names (a broker outside it, e.g. one removed and
    /// stopped, is not waited for; one that is running learns `t` by catching up); returns the
    /// leader reports of those that answered.
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
        for (node, addr) in links.book.others().into_iter().filter(|(node, _)| t.brokers.contains_key(node)) {
            match links.forwarder.topology(addr, json.clone(), PUSH_CALL).await {
                Ok((_, led)) => reports.extend(serde_json::from_str::<Vec<LeaderReport>>(&led).unwrap_or_default()),
                Err(e) => tracing::debug!(node, error = %e, "a broker did not take the topology"),
            }
        }
        reports
    }

    /// Whether every other broker of `t` answers with version `t.version` or newer.
    async fn everyone_has(&self, t: &Topology) -> bool {
        let Some(links) = &self.links else { return true };
        for (_, addr) in links.book.others().into_iter().filter(|(node, _)| t.brokers.contains_key(node)) {
            let answer = links.forwarder.topology(addr, String::new(), PUSH_CALL).await;
            let version = answer.ok().and_then(|(json, _)| serde_json::from_str::<Topology>(&json).ok()).map(|t| t.version);
            if version.is_none_or(|v| v < t.version) {
                return false;
            }
        }
        true
    }
}
