//! The cluster topology: which brokers hold which partition replicas (with their priorities),
//! a version, and the change under way and the last one, as Zeebe 8.5's dynamic cluster
//! topology has them (docs.camunda.io, "Cluster scaling"; the management API's
//! `cluster-api.yaml` of camunda-zeebe 8.5).
//!
//! Contract:
//! - Each broker persists the topology in `<data>/cluster-topology.json` (temporary file, fsync,
//!   rename). On a first start it is initialised from the static placement
//!   ([`ClusterSpec::replicas`]); once it exists, it and not the formula decides which replicas a
//!   broker runs, so a cluster started before has the same replicas as before.
//! - A change is planned as a list of operations ([`Operation`]), checked as a whole before
//!   anything changes, and carried out one operation at a time by the coordinator (the broker of
//!   lowest id in the topology, [`Topology::coordinator`]); each completed operation bumps the
//!   version. A second change while one is pending is refused ([`TopologyError::Conflict`]).
//! - Scaling the brokers or the replication factor ([`Topology::plan_layout`]) spreads the
//!   partitions round-robin over the wanted brokers, as the static placement does, and plans
//!   for each partition its joins before its leaves: a partition never has fewer than its
//!   replication factor of up-to-date replicas during the change.
//! - A replica joining is JOINING until its partition's leader reports it a voter (caught up by
//!   snapshot and log as a learner, then promoted); a replica leaving is LEAVING until the
//!   partition's Raft configuration no longer names it, and only then is it dropped from the
//!   topology (and its data removed by its broker). A partition always keeps one replica at
//!   least.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};
use waggle_protocol::PartitionId;

use crate::cluster::ClusterSpec;

/// The file's name in the data folder.
pub const FILE_NAME: &str = "cluster-topology.json";

/// A replica's place in a partition's group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ReplicaState {
    Joining,
    Active,
    Leaving,
    /// A replica of a partition a scale-up adds: all of its replicas are new and start
    /// together as the group's voters (Zeebe 8.8's BOOTSTRAPPING).
    Bootstrapping,
}

impl ReplicaState {
    pub fn name(self) -> &'static str {
        match self {
            ReplicaState::Joining => "JOINING",
            ReplicaState::Active => "ACTIVE",
            ReplicaState::Leaving => "LEAVING",
            ReplicaState::Bootstrapping => "BOOTSTRAPPING",
        }
    }
}

/// One replica of a partition on a broker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Replica {
    pub state: ReplicaState,
    /// Its election priority: the highest is the partition's preferred leader.
    pub priority: u32,
}

/// One step of a change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "operation", rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Operation {
    /// A broker enters the topology (holding nothing yet).
    #[serde(rename_all = "camelCase")]
    BrokerAdd { broker_id: u64 },
    #[serde(rename_all = "camelCase")]
    PartitionJoin { broker_id: u64, partition_id: PartitionId, priority: u32 },
    #[serde(rename_all = "camelCase")]
    PartitionLeave { broker_id: u64, partition_id: PartitionId },
    /// A replica's priority changes (it stays where it is).
    #[serde(rename_all = "camelCase")]
    PartitionReconfigurePriority { broker_id: u64, partition_id: PartitionId, priority: u32 },
    /// A broker that holds nothing any more leaves the topology.
    #[serde(rename_all = "camelCase")]
    BrokerRemove { broker_id: u64 },
    /// A new partition (the next after the last) starts as a group of its own:
    /// `replication_factor` replicas round-robin from `broker_id` (its preferred leader) over
    /// the brokers in id order, all BOOTSTRAPPING until the group has a leader (see
    /// `topology_scale`).
    #[serde(rename_all = "camelCase")]
    PartitionBootstrap { broker_id: u64, partition_id: PartitionId, replication_factor: u32 },
    /// The deployment partition sends every deployed resource to the new partitions (SCALE
    /// SCALE_UP): done once it records SCALED_UP.
    #[serde(rename_all = "camelCase")]
    AwaitRedistributionCompletion { desired_partition_count: u32 },
    /// New process instances go to every partition from now on.
    #[serde(rename_all = "camelCase")]
    UpdateRoutingState { desired_partition_count: u32 },
    /// Every old message partition (1 to `partition_count`) moves the correlation keys whose
    /// partition differs under `desired_partition_count` there (MESSAGE_RELOCATION RELOCATE):
    /// done once each recorded RELOCATED; messages are spread over the desired count from then
    /// on (Zeebe 8.8 plans the step as `AWAIT_RELOCATION_COMPLETION`; appended).
    #[serde(rename_all = "camelCase")]
    AwaitRelocationCompletion { partition_count: u32, desired_partition_count: u32 },
}

/// The change under way.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingChange {
    pub id: u64,
    /// The broker carrying it out.
    pub coordinator: u64,
    /// Milliseconds since the epoch.
    pub started_at: i64,
    pub completed: Vec<Operation>,
    pub pending: Vec<Operation>,
}

/// The last change completed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompletedChange {
    pub id: u64,
    pub started_at: i64,
    pub completed_at: i64,
}

/// The cluster's replicas by broker, versioned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Topology {
    pub version: u64,
    /// By node id: the partitions each broker holds.
    pub brokers: BTreeMap<u64, BTreeMap<PartitionId, Replica>>,
    pub pending: Option<PendingChange>,
    pub last: Option<CompletedChange>,
    /// Where requests go once the partition count grew (`None`: every partition, messages by
    /// correlation key over all of them; see `topology_scale`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub routing: Option<Routing>,
}

/// Where requests go after the partition count grew (Zeebe 8.8's routing state).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Routing {
    /// New process instances go round-robin to partitions 1 to this.
    pub routed_partitions: PartitionId,
    /// Messages live on the partition of their correlation key among 1 to this: the count the
    /// cluster had before it grew, until `AwaitRelocationCompletion` moved the correlation keys
    /// to the grown count (Zeebe 8.8's `MessageCorrelation.HashMod`).
    pub message_partitions: PartitionId,
    /// The count the cluster was created with (what its brokers' data folders record; 0 in a
    /// topology written before the correlation keys could move, where `message_partitions` is
    /// that count).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub first_partitions: PartitionId,
}

fn is_zero(n: &PartitionId) -> bool {
    *n == 0
}

impl Routing {
    /// The count the cluster was created with.
    pub fn created_with(&self) -> PartitionId {
        if self.first_partitions == 0 {
            self.message_partitions
        } else {
            self.first_partitions
        }
    }
}

/// A change that cannot be made, with why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
pub enum TopologyError {
    #[error("Another topology change with id {0} is in progress")]
    Conflict(u64),
    #[error("Broker {broker} is not a member of the cluster (its brokers are 0 to {last})")]
    UnknownBroker { broker: u64, last: u64 },
    #[error("Partition {partition} does not exist (the cluster's partitions are 1 to {count})")]
    UnknownPartition { partition: PartitionId, count: PartitionId },
    #[error("Broker {broker} does not replicate partition {partition}")]
    NotAReplica { broker: u64, partition: PartitionId },
    #[error("Broker {broker} cannot leave partition {partition}: it is the partition's only replica")]
    LastReplica { broker: u64, partition: PartitionId },
    #[error("the priority must be at least 1")]
    Priority,
    #[error("Broker {broker} is already a member of the cluster")]
    AlreadyMember { broker: u64 },
    #[error("Broker {broker} cannot be added: only brokers 0 to {last} have an internal address (the contact points name them)")]
    NotAddressable { broker: u64, last: u64 },
    #[error("Broker {broker} cannot be removed: it still replicates partitions {partitions:?}")]
    StillReplicating { broker: u64, partitions: Vec<PartitionId> },
    #[error("the cluster needs one broker at least")]
    NoBrokers,
    #[error("the replication factor must be at least 1")]
    ReplicationFactor,
    #[error("{brokers} broker(s) cannot hold a replication factor of {factor}: the cluster needs as many brokers as the replication factor at least")]
    TooFewBrokers { brokers: usize, factor: u32 },
    #[error("Partition count can only be increased: the cluster has {current} partitions, {asked} were asked")]
    PartitionCountDecrease { current: PartitionId, asked: u32 },
    #[error("{0}")]
    Scale(String),
}

impl Topology {
    /// The static placement of `spec` for `partitions` partitions (version 1): the preferred
    /// leader has the highest priority, as [`crate::cluster::replica_config`] gives it.
    pub fn initial(spec: &ClusterSpec, partitions: PartitionId) -> Self {
        let mut brokers: BTreeMap<u64, BTreeMap<PartitionId, Replica>> =
            (0..spec.cluster_size() as u64).map(|n| (n, BTreeMap::new())).collect();
        for p in 1..=partitions.max(1) {
            let replicas = spec.replicas(p);
            let count = replicas.len() as u32;
            for (rank, node) in replicas.into_iter().enumerate() {
                let replica = Replica { state: ReplicaState::Active, priority: count - rank as u32 };
                brokers.entry(node).or_default().insert(p, replica);
            }
        }
        Topology { version: 1, brokers, pending: None, last: None, routing: None }
    }

    /// The topology persisted in `data_dir`, if any.
    pub fn load(data_dir: &Path) -> std::io::Result<Option<Self>> {
        match std::fs::read(data_dir.join(FILE_NAME)) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, format!("{FILE_NAME}: {e}"))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Writes the topology to `data_dir` atomically.
    pub fn save(&self, data_dir: &Path) -> std::io::Result<()> {
        let tmp = data_dir.join(format!("{FILE_NAME}.tmp"));
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(&serde_json::to_vec_pretty(self).map_err(std::io::Error::other)?)?;
        file.sync_all()?;
        drop(file);
        std::fs::rename(&tmp, data_dir.join(FILE_NAME))?;
        std::fs::File::open(data_dir)?.sync_all()
    }

    /// The partitions of the cluster that have a group: those a scale-up is bootstrapping
    /// (every replica still BOOTSTRAPPING) left out.
    pub fn ready_partitions(&self) -> PartitionId {
        let bootstrapping = |p: PartitionId| {
            let replicas = self.replicas(p);
            !replicas.is_empty() && replicas.iter().all(|(_, r)| r.state == ReplicaState::Bootstrapping)
        };
        (1..=self.partition_count()).take_while(|&p| !bootstrapping(p)).last().unwrap_or(0)
    }

    /// The partitions of the cluster.
    pub fn partition_count(&self) -> PartitionId {
        self.brokers.values().flat_map(|ps| ps.keys().copied()).max().unwrap_or(0)
    }

    /// The brokers holding `partition` (in any state), highest priority first (ties: lower
    /// node id first).
    pub fn replicas(&self, partition: PartitionId) -> Vec<(u64, Replica)> {
        let mut list: Vec<(u64, Replica)> = self.brokers.iter().filter_map(|(&n, ps)| ps.get(&partition).map(|r| (n, *r))).collect();
        list.sort_by(|a, b| b.1.priority.cmp(&a.1.priority).then(a.0.cmp(&b.0)));
        list
    }

    /// The voters a new replica of `partition` starts with (every replica that is not
    /// joining), highest priority first.
    pub fn voters(&self, partition: PartitionId) -> Vec<u64> {
        self.replicas(partition).into_iter().filter(|(_, r)| r.state != ReplicaState::Joining).map(|(n, _)| n).collect()
    }

    /// `node`'s replica of `partition`, if it holds one.
    pub fn replica(&self, node: u64, partition: PartitionId) -> Option<Replica> {
        self.brokers.get(&node).and_then(|ps| ps.get(&partition)).copied()
    }

    /// The preferred leader of `partition`: its replica of highest priority that is not
    /// joining or leaving.
    pub fn preferred_leader(&self, partition: PartitionId) -> Option<u64> {
        self.replicas(partition).into_iter().find(|(_, r)| r.state == ReplicaState::Active).map(|(n, _)| n)
    }

    /// The broker that plans and carries out changes: the member of lowest id (broker 0 while
    /// it is one, as in Zeebe).
    pub fn coordinator(&self) -> u64 {
        self.brokers.keys().copied().next().unwrap_or(0)
    }

    /// The replication factor: the most replicas a partition has.
    pub fn replication_factor(&self) -> u32 {
        (1..=self.partition_count()).map(|p| self.replicas(p).len() as u32).max().unwrap_or(1)
    }

    /// Plans `operation` as change `self.version + 1`'s only step (see [`Topology::plan_operations`]).
    pub fn plan(&mut self, operation: Operation, coordinator: u64, now_ms: i64) -> Result<u64, TopologyError> {
        self.plan_operations(vec![operation], coordinator, now_ms)
    }

    /// Plans `operations` as change `self.version + 1`, coordinated by `coordinator`, and starts
    /// its first: refused while another change is pending, or when an operation names an
    /// unknown broker or partition, would leave a partition without a replica, or removes a
    /// broker that still holds one (every operation is checked on the topology the ones before
    /// it leave). Returns the change's id; no operations: nothing changes and the id is the
    /// current version.
    pub fn plan_operations(&mut self, operations: Vec<Operation>, coordinator: u64, now_ms: i64) -> Result<u64, TopologyError> {
        if let Some(pending) = &self.pending {
            return Err(TopologyError::Conflict(pending.id));
        }
        let mut simulated = self.clone();
        for &operation in &operations {
            simulated.check(operation)?;
            simulated.start(operation);
            simulated.finish(operation);
        }
        let Some(&first) = operations.first() else { return Ok(self.version) };
        self.version += 1;
        let id = self.version;
        self.start(first);
        self.pending = Some(PendingChange { id, coordinator, started_at: now_ms, completed: Vec::new(), pending: operations });
        Ok(id)
    }

    /// The operations that give the partitions' replicas to `brokers` with `factor` replicas
    /// each, placed round-robin over them in id order (partition `p` on the `factor` brokers
    /// from the `(p - 1) mod n`-th, the first preferred), `addressable` brokers (ids below it)
    /// reachable at all: brokers added first, then for each partition its joins, its priority
    /// changes and its leaves, then brokers removed.
    pub fn plan_layout(
        &self,
        brokers: &std::collections::BTreeSet<u64>,
        factor: u32,
        addressable: u64,
    ) -> Result<Vec<Operation>, TopologyError> {
        if brokers.is_empty() {
            return Err(TopologyError::NoBrokers);
        }
        if factor == 0 {
            return Err(TopologyError::ReplicationFactor);
        }
        if let Some(&broker) = brokers.iter().find(|&&b| b >= addressable) {
            return Err(TopologyError::NotAddressable { broker, last: addressable.saturating_sub(1) });
        }
        if (factor as usize) > brokers.len() {
            return Err(TopologyError::TooFewBrokers { brokers: brokers.len(), factor });
        }
        let ids: Vec<u64> = brokers.iter().copied().collect();
        let mut ops: Vec<Operation> =
            ids.iter().filter(|b| !self.brokers.contains_key(b)).map(|&broker_id| Operation::BrokerAdd { broker_id }).collect();
        for p in 1..=self.partition_count() {
            let first = usize::from(p - 1);
            let target: Vec<(u64, u32)> = (0..factor as usize).map(|k| (ids[(first + k) % ids.len()], factor - k as u32)).collect();
            let current = self.replicas(p);
            for &(broker_id, priority) in target.iter().filter(|(t, _)| !current.iter().any(|(b, _)| b == t)) {
                ops.push(Operation::PartitionJoin { broker_id, partition_id: p, priority });
            }
            for &(broker_id, priority) in &target {
                if current.iter().any(|(b, r)| *b == broker_id && r.priority != priority) {
                    ops.push(Operation::PartitionReconfigurePriority { broker_id, partition_id: p, priority });
                }
            }
            for &(broker_id, _) in current.iter().filter(|(b, _)| !target.iter().any(|(t, _)| t == b)) {
                ops.push(Operation::PartitionLeave { broker_id, partition_id: p });
            }
        }
        ops.extend(self.brokers.keys().filter(|b| !brokers.contains(b)).map(|&broker_id| Operation::BrokerRemove { broker_id }));
        Ok(ops)
    }

    /// Whether `operation` can be made on this topology.
    fn check(&self, operation: Operation) -> Result<(), TopologyError> {
        let count = self.partition_count();
        let last = self.brokers.keys().copied().max().unwrap_or(0);
        let known =
            |broker: u64| if self.brokers.contains_key(&broker) { Ok(()) } else { Err(TopologyError::UnknownBroker { broker, last }) };
        let partition_ok = |partition: PartitionId| {
            if partition == 0 || partition > count {
                Err(TopologyError::UnknownPartition { partition, count })
            } else {
                Ok(())
            }
        };
        match operation {
            Operation::BrokerAdd { broker_id } if self.brokers.contains_key(&broker_id) => {
                Err(TopologyError::AlreadyMember { broker: broker_id })
            }
            Operation::BrokerAdd { .. } => Ok(()),
            Operation::BrokerRemove { broker_id } => {
                known(broker_id)?;
                let partitions: Vec<PartitionId> = self.brokers[&broker_id].keys().copied().collect();
                if partitions.is_empty() {
                    Ok(())
                } else {
                    Err(TopologyError::StillReplicating { broker: broker_id, partitions })
                }
            }
            Operation::PartitionJoin { broker_id, partition_id, priority } => {
                known(broker_id)?;
                partition_ok(partition_id)?;
                if priority == 0 {
                    return Err(TopologyError::Priority);
                }
                Ok(())
            }
            Operation::PartitionReconfigurePriority { broker_id, partition_id, priority } => {
                known(broker_id)?;
                partition_ok(partition_id)?;
                if priority == 0 {
                    return Err(TopologyError::Priority);
                }
                if self.replica(broker_id, partition_id).is_none() {
                    return Err(TopologyError::NotAReplica { broker: broker_id, partition: partition_id });
                }
                Ok(())
            }
            Operation::PartitionBootstrap { .. }
            | Operation::AwaitRedistributionCompletion { .. }
            | Operation::UpdateRoutingState { .. }
            | Operation::AwaitRelocationCompletion { .. } => self.check_scale(operation),
            Operation::PartitionLeave { broker_id, partition_id } => {
                known(broker_id)?;
                partition_ok(partition_id)?;
                if self.replica(broker_id, partition_id).is_none() {
                    return Err(TopologyError::NotAReplica { broker: broker_id, partition: partition_id });
                }
                if self.replicas(partition_id).iter().filter(|(_, r)| r.state != ReplicaState::Leaving).count() <= 1 {
                    return Err(TopologyError::LastReplica { broker: broker_id, partition: partition_id });
                }
                Ok(())
            }
        }
    }

    /// Starts `operation` (checked): a joining replica is JOINING (an existing one only takes
    /// the priority, Zeebe's answer to a join of a replica that exists), a leaving one LEAVING.
    fn start(&mut self, operation: Operation) {
        match operation {
            Operation::BrokerAdd { broker_id } => {
                self.brokers.entry(broker_id).or_default();
            }
            Operation::PartitionJoin { broker_id, partition_id, priority } => {
                let replicas = self.brokers.entry(broker_id).or_default();
                match replicas.get_mut(&partition_id) {
                    Some(r) => r.priority = priority,
                    None => {
                        replicas.insert(partition_id, Replica { state: ReplicaState::Joining, priority });
                    }
                }
            }
            Operation::PartitionReconfigurePriority { broker_id, partition_id, priority } => {
                if let Some(r) = self.brokers.get_mut(&broker_id).and_then(|ps| ps.get_mut(&partition_id)) {
                    r.priority = priority;
                }
            }
            Operation::PartitionLeave { broker_id, partition_id } => {
                if let Some(r) = self.brokers.get_mut(&broker_id).and_then(|ps| ps.get_mut(&partition_id)) {
                    r.state = ReplicaState::Leaving;
                }
            }
            Operation::BrokerRemove { .. } => {}
            Operation::PartitionBootstrap { .. }
            | Operation::AwaitRedistributionCompletion { .. }
            | Operation::UpdateRoutingState { .. }
            | Operation::AwaitRelocationCompletion { .. } => self.start_scale(operation),
        }
    }

    /// Finishes `operation`: the joined replica is ACTIVE, the leaving one or the broker gone.
    fn finish(&mut self, operation: Operation) {
        match operation {
            Operation::PartitionJoin { broker_id, partition_id, .. } => {
                if let Some(r) = self.brokers.get_mut(&broker_id).and_then(|ps| ps.get_mut(&partition_id)) {
                    r.state = ReplicaState::Active;
                }
            }
            Operation::PartitionLeave { broker_id, partition_id } => {
                if let Some(ps) = self.brokers.get_mut(&broker_id) {
                    ps.remove(&partition_id);
                }
            }
            Operation::BrokerRemove { broker_id } => {
                self.brokers.remove(&broker_id);
            }
            Operation::BrokerAdd { .. } | Operation::PartitionReconfigurePriority { .. } => {}
            Operation::PartitionBootstrap { .. }
            | Operation::AwaitRedistributionCompletion { .. }
            | Operation::UpdateRoutingState { .. }
            | Operation::AwaitRelocationCompletion { .. } => self.finish_scale(operation),
        }
    }

    /// Completes the pending change's next operation and starts the one after, bumping the
    /// version; the change completes with its last operation.
    pub fn complete_next(&mut self, now_ms: i64) {
        let Some(pending) = &mut self.pending else { return };
        if pending.pending.is_empty() {
            return;
        }
        let operation = pending.pending.remove(0);
        pending.completed.push(operation);
        let next = pending.pending.first().copied();
        let done = next.is_none().then_some(CompletedChange { id: pending.id, started_at: pending.started_at, completed_at: now_ms });
        self.finish(operation);
        self.version += 1;
        match next {
            Some(next) => self.start(next),
            None => {
                self.pending = None;
                self.last = done;
            }
        }
    }

    /// The operation the pending change carries out now, if any.
    pub fn next_operation(&self) -> Option<Operation> {
        self.pending.as_ref().and_then(|p| p.pending.first().copied())
    }

    /// The brokers and their partitions as Zeebe's API lists them (`BrokerState`s: `id`,
    /// `state`, `version`, `partitions` with `id`, `state`, `priority`).
    pub fn brokers_json(&self) -> serde_json::Value {
        self.brokers
            .iter()
            .map(|(&id, partitions)| {
                let partitions: Vec<_> = partitions
                    .iter()
                    .map(|(&p, r)| serde_json::json!({ "id": p, "state": r.state.name(), "priority": r.priority }))
                    .collect();
                serde_json::json!({ "id": id, "state": "ACTIVE", "version": self.version, "partitions": partitions })
            })
            .collect()
    }

    /// `lastChange` and `pendingChange` as Zeebe's `GET /actuator/cluster` shows them.
    pub fn changes_json(&self) -> (serde_json::Value, serde_json::Value) {
        let last = self.last.as_ref().map_or(serde_json::Value::Null, |c| {
            serde_json::json!({ "id": c.id, "status": "COMPLETED", "startedAt": rfc3339(c.started_at), "completedAt": rfc3339(c.completed_at) })
        });
        let pending = self.pending.as_ref().map_or(serde_json::Value::Null, |c| {
            serde_json::json!({
                "id": c.id,
                "status": "IN_PROGRESS",
                "startedAt": rfc3339(c.started_at),
                "completed": c.completed,
                "pending": c.pending,
            })
        });
        (last, pending)
    }
}

/// A partition's Raft configuration as its leader applied it (node ids), which the coordinator
/// reads to know when an operation is done.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaderReport {
    pub partition: PartitionId,
    pub leader: u64,
    pub voters: Vec<u64>,
    pub learners: Vec<u64>,
    pub voters_outgoing: Vec<u64>,
    /// The partition count a scale-up carried out by this partition reached (SCALE SCALED_UP;
    /// 0: none), as its leader's state has it.
    #[serde(default)]
    pub scaled_up: u32,
    /// The partition count this partition moved its correlation keys to (MESSAGE_RELOCATION
    /// RELOCATED; 0: none), as its leader's state has it.
    #[serde(default)]
    pub relocated: u32,
}

/// Whether `operation` is done by what the partitions' leaders report: a joining replica is a
/// voter (caught up and promoted) outside a joint configuration; a leaving one is in no
/// configuration of a leader other than itself.
pub fn operation_done(operation: Operation, reports: &[LeaderReport]) -> bool {
    match operation {
        // the topology alone changes
        Operation::BrokerAdd { .. } | Operation::BrokerRemove { .. } | Operation::PartitionReconfigurePriority { .. } => true,
        Operation::PartitionJoin { broker_id, partition_id, .. } => reports.iter().any(|r| {
            r.partition == partition_id && r.voters.contains(&broker_id) && r.voters_outgoing.is_empty() && !r.learners.contains(&broker_id)
        }),
        Operation::PartitionLeave { broker_id, partition_id } => reports.iter().any(|r| {
            r.partition == partition_id
                && r.leader != broker_id
                && !r.voters.contains(&broker_id)
                && !r.learners.contains(&broker_id)
                && !r.voters_outgoing.contains(&broker_id)
        }),
        Operation::PartitionBootstrap { .. }
        | Operation::AwaitRedistributionCompletion { .. }
        | Operation::UpdateRoutingState { .. }
        | Operation::AwaitRelocationCompletion { .. } => crate::topology_scale::scale_operation_done(operation, reports),
    }
}

/// Milliseconds since the epoch as an RFC 3339 timestamp in UTC.
pub fn rfc3339(ms: i64) -> String {
    let (days, rest) = (ms.div_euclid(86_400_000), ms.rem_euclid(86_400_000));
    // days to a civil date (Howard Hinnant's algorithm)
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let (h, m, s, milli) = (rest / 3_600_000, rest / 60_000 % 60, rest / 1000 % 60, rest % 1000);
    format!("{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}.{milli:03}Z")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::SocketAddr;

    fn spec(size: usize, rf: u32) -> ClusterSpec {
        let members = (0..size).map(|i| SocketAddr::from(([127, 0, 0, 1], 26502 + i as u16))).collect();
        ClusterSpec { node_id: 0, members, replication_factor: rf, own_address: None }
    }

    #[test]
    fn the_initial_topology_is_the_static_placement_with_priorities() {
        let t = Topology::initial(&spec(3, 2), 3);
        assert_eq!(t.voters(1), vec![0, 1]);
        assert_eq!(t.voters(3), vec![2, 0]);
        assert_eq!(t.replica(0, 1), Some(Replica { state: ReplicaState::Active, priority: 2 }));
        assert_eq!(t.replica(2, 1), None);
        assert_eq!((t.partition_count(), t.preferred_leader(2)), (3, Some(1)));
    }

    #[test]
    fn a_join_then_a_leave_move_a_replica_one_change_at_a_time() {
        let mut t = Topology::initial(&spec(3, 2), 3);
        let join = Operation::PartitionJoin { broker_id: 2, partition_id: 1, priority: 1 };
        assert_eq!(t.plan(join, 0, 5), Ok(2));
        assert_eq!(t.replica(2, 1).map(|r| r.state), Some(ReplicaState::Joining));
        assert_eq!(t.voters(1), vec![0, 1], "a joining replica is no voter yet");
        let leave = Operation::PartitionLeave { broker_id: 0, partition_id: 1 };
        assert_eq!(t.plan(leave, 0, 6), Err(TopologyError::Conflict(2)));
        assert_eq!(t.next_operation(), Some(join));
        t.complete_next(7);
        assert_eq!(
            (t.version, t.pending.clone(), t.last.clone()),
            (3, None, Some(CompletedChange { id: 2, started_at: 5, completed_at: 7 }))
        );
        assert_eq!(t.voters(1), vec![0, 1, 2]);
        assert_eq!(t.plan(leave, 1, 8), Ok(4));
        assert_eq!(t.preferred_leader(1), Some(1), "a leaving replica is not preferred");
        t.complete_next(9);
        assert_eq!(t.voters(1), vec![1, 2]);
        assert_eq!(t.replica(0, 1), None);
        assert_eq!(t.version, 5);
    }

    #[test]
    fn impossible_changes_are_refused_naming_what_is_wrong() {
        let mut t = Topology::initial(&spec(3, 1), 3);
        let leave = |b, p| Operation::PartitionLeave { broker_id: b, partition_id: p };
        assert_eq!(t.plan(leave(0, 1), 0, 0), Err(TopologyError::LastReplica { broker: 0, partition: 1 }));
        assert_eq!(t.plan(leave(1, 1), 0, 0), Err(TopologyError::NotAReplica { broker: 1, partition: 1 }));
        assert_eq!(t.plan(leave(7, 1), 0, 0), Err(TopologyError::UnknownBroker { broker: 7, last: 2 }));
        assert_eq!(t.plan(leave(0, 4), 0, 0), Err(TopologyError::UnknownPartition { partition: 4, count: 3 }));
        let join = Operation::PartitionJoin { broker_id: 1, partition_id: 1, priority: 0 };
        assert_eq!(t.plan(join, 0, 0), Err(TopologyError::Priority));
        assert_eq!(t.version, 1, "nothing changed");
    }

    #[test]
    fn an_operation_is_done_once_a_leader_reports_the_configuration_it_asks_for() {
        let report = |leader, voters: &[u64], learners: &[u64], outgoing: &[u64]| LeaderReport {
            partition: 1,
            leader,
            voters: voters.to_vec(),
            learners: learners.to_vec(),
            voters_outgoing: outgoing.to_vec(),
            scaled_up: 0,
            relocated: 0,
        };
        let join = Operation::PartitionJoin { broker_id: 2, partition_id: 1, priority: 1 };
        assert!(!operation_done(join, &[report(0, &[0, 1], &[2], &[])]), "a learner is not joined");
        assert!(!operation_done(join, &[report(0, &[0, 1, 2], &[], &[0, 1])]), "joint configuration");
        assert!(operation_done(join, &[report(0, &[0, 1, 2], &[], &[])]));
        let leave = Operation::PartitionLeave { broker_id: 0, partition_id: 1 };
        assert!(!operation_done(leave, &[report(0, &[1, 2], &[], &[])]), "its own report does not count");
        assert!(!operation_done(leave, &[report(1, &[0, 1, 2], &[], &[])]));
        assert!(operation_done(leave, &[report(1, &[1, 2], &[], &[])]));
        assert!(!operation_done(leave, &[]), "no leader known");
    }

    /// Carries out the pending change, asserting before each step that every partition keeps
    /// `factor` replicas that are not joining (caught up) at least.
    fn carry_out(t: &mut Topology, factor: usize) {
        let mut now = 100;
        while t.next_operation().is_some() {
            for p in 1..=t.partition_count() {
                assert!(t.voters(p).len() >= factor, "partition {p} below its factor: {:?}", t.replicas(p));
            }
            now += 1;
            t.complete_next(now);
        }
    }

    #[test]
    fn scaling_brokers_spreads_the_partitions_round_robin_with_joins_before_leaves() {
        // Zeebe's cluster scaling (docs.camunda.io, "Cluster scaling"): the partitions are
        // redistributed over the new set of brokers, each keeping its replication factor
        let mut t = Topology::initial(&spec(3, 3), 3);
        let five: std::collections::BTreeSet<u64> = (0..5).collect();
        let ops = t.plan_layout(&five, 3, 5).unwrap();
        use Operation::*;
        assert_eq!(
            ops,
            vec![
                BrokerAdd { broker_id: 3 },
                BrokerAdd { broker_id: 4 },
                PartitionJoin { broker_id: 3, partition_id: 2, priority: 1 },
                PartitionLeave { broker_id: 0, partition_id: 2 },
                PartitionJoin { broker_id: 3, partition_id: 3, priority: 2 },
                PartitionJoin { broker_id: 4, partition_id: 3, priority: 1 },
                PartitionLeave { broker_id: 0, partition_id: 3 },
                PartitionLeave { broker_id: 1, partition_id: 3 },
            ]
        );
        let id = t.plan_operations(ops, 0, 5).unwrap();
        assert_eq!(t.replica(3, 2).map(|r| r.state), None, "one operation at a time: broker 3 is added first");
        assert!(t.brokers.contains_key(&3));
        carry_out(&mut t, 3);
        assert_eq!(t.last.as_ref().map(|c| c.id), Some(id));
        assert_eq!(t.brokers, Topology::initial(&spec(5, 3), 3).brokers, "the static placement of five brokers");
        assert_eq!(t.version, id + 8);

        // and back: brokers 3 and 4 hand their replicas back, then leave the topology
        let three: std::collections::BTreeSet<u64> = (0..3).collect();
        let ops = t.plan_layout(&three, 3, 5).unwrap();
        assert_eq!(ops.last(), Some(&BrokerRemove { broker_id: 4 }));
        t.plan_operations(ops, 0, 200).unwrap();
        carry_out(&mut t, 3);
        assert_eq!(t.brokers, Topology::initial(&spec(3, 3), 3).brokers);
        assert_eq!(t.plan_layout(&three, 3, 5), Ok(Vec::new()), "nothing to change");
        let version = t.version;
        assert_eq!(t.plan_operations(Vec::new(), 0, 300), Ok(version));
        assert_eq!((t.version, t.pending.clone()), (version, None));
    }

    #[test]
    fn a_replication_factor_change_adds_or_removes_replicas_of_each_partition() {
        let mut t = Topology::initial(&spec(3, 2), 3);
        let all: std::collections::BTreeSet<u64> = (0..3).collect();
        assert_eq!(t.replication_factor(), 2);
        let ops = t.plan_layout(&all, 3, 3).unwrap();
        assert!(
            ops.iter().all(|o| matches!(o, Operation::PartitionJoin { .. } | Operation::PartitionReconfigurePriority { .. })),
            "{ops:?}"
        );
        t.plan_operations(ops, 0, 1).unwrap();
        carry_out(&mut t, 2);
        assert_eq!((t.brokers.clone(), t.replication_factor()), (Topology::initial(&spec(3, 3), 3).brokers, 3));
        let ops = t.plan_layout(&all, 1, 3).unwrap();
        t.plan_operations(ops, 0, 1).unwrap();
        carry_out(&mut t, 1);
        assert_eq!(t.brokers, Topology::initial(&spec(3, 1), 3).brokers);
    }

    #[test]
    fn impossible_layouts_are_refused_and_change_nothing() {
        let mut t = Topology::initial(&spec(3, 3), 3);
        let ids = |r: std::ops::Range<u64>| r.collect::<std::collections::BTreeSet<u64>>();
        assert_eq!(t.plan_layout(&ids(0..2), 3, 5), Err(TopologyError::TooFewBrokers { brokers: 2, factor: 3 }));
        assert_eq!(t.plan_layout(&ids(0..7), 3, 5), Err(TopologyError::NotAddressable { broker: 5, last: 4 }));
        assert_eq!(t.plan_layout(&ids(0..0), 1, 5), Err(TopologyError::NoBrokers));
        assert_eq!(t.plan_layout(&ids(0..3), 0, 5), Err(TopologyError::ReplicationFactor));
        let remove = Operation::BrokerRemove { broker_id: 1 };
        assert_eq!(t.plan(remove, 0, 0), Err(TopologyError::StillReplicating { broker: 1, partitions: vec![1, 2, 3] }));
        assert_eq!(t.plan(Operation::BrokerAdd { broker_id: 2 }, 0, 0), Err(TopologyError::AlreadyMember { broker: 2 }));
        assert_eq!(t, Topology::initial(&spec(3, 3), 3));
        assert!(TopologyError::TooFewBrokers { brokers: 2, factor: 3 }.to_string().contains("replication factor of 3"));
    }

    #[test]
    fn the_topology_survives_a_round_trip_through_its_file() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(Topology::load(dir.path()).unwrap(), None);
        let mut t = Topology::initial(&spec(3, 2), 2);
        t.plan(Operation::PartitionJoin { broker_id: 2, partition_id: 1, priority: 3 }, 0, 1).unwrap();
        t.save(dir.path()).unwrap();
        assert_eq!(Topology::load(dir.path()).unwrap(), Some(t));
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(1_709_251_199_123), "2024-02-29T23:59:59.123Z");
    }
}
