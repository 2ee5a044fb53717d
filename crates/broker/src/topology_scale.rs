//! Growing the partition count of a running cluster in its topology (Zeebe 8.8's partition
//! scaling: docs.camunda.io "Cluster scaling", 8.8: "Partition count can only be increased
//! and not decreased"; the camunda repository's `zeebe/dynamic-config`: the
//! `PARTITION_BOOTSTRAP` operation, the scale-up's redistribution, and the routing state whose
//! `MessageCorrelation.HashMod` keeps the partition count messages were spread over).
//!
//! Contract:
//! - [`Topology::plan_partitions`] plans, for each new partition in order, one
//!   `PartitionBootstrap` (its replicas placed round-robin over the brokers in id order with
//!   the cluster's replication factor, as the static placement places partition `p`: from the
//!   `(p - 1) mod n`-th broker, the first preferred), then `AwaitRedistributionCompletion`,
//!   `AwaitRelocationCompletion` and `UpdateRoutingState`. A count below the current one is
//!   refused; the same count plans nothing.
//! - A bootstrapping partition's replicas are BOOTSTRAPPING, all of them voters of a new group
//!   (no learner phase: none has data); the operation is done once the group has a leader.
//! - From the first bootstrap on, the topology has a [`Routing`]: new instances go to the
//!   partitions there were (`routed_partitions`) until `UpdateRoutingState`, which comes after
//!   the deployment partition recorded that every new partition holds every deployment
//!   (`AwaitRedistributionCompletion`); messages stay on the partitions of the old count
//!   (`message_partitions`) until every old message partition moved the correlation keys whose
//!   partition differs under the new count there (`AwaitRelocationCompletion`: MESSAGE_RELOCATION
//!   RELOCATED, reported as `LeaderReport::relocated`; the engine's `processors::relocation`);
//!   finishing it spreads messages over the new count.

use waggle_protocol::PartitionId;

use crate::topology::{LeaderReport, Operation, Replica, ReplicaState, Routing, Topology, TopologyError};

/// The partition that takes deployments and carries out the redistribution.
const DEPLOYMENT_PARTITION: PartitionId = 1;

impl Topology {
    /// The partitions new process instances are routed to.
    pub fn routed_partitions(&self) -> PartitionId {
        self.routing.map_or(self.partition_count(), |r| r.routed_partitions)
    }

    /// The partitions messages are spread over by correlation key.
    pub fn message_partitions(&self) -> PartitionId {
        self.routing.map_or(self.partition_count(), |r| r.message_partitions)
    }

    /// Whether a broker configured with `partitions` partitions runs this topology: its
    /// partition count, or, once the count grew, the count the cluster was created with (its
    /// brokers keep their configuration; the routing state records it). The start-up guards
    /// (`load_topology`, `waggle`'s `cluster.json` check) and `waggle restore` ask this.
    pub fn fits_configured_count(&self, partitions: PartitionId) -> bool {
        let count = self.partition_count();
        partitions == count || (self.routing.is_some_and(|r| r.created_with() == partitions) && count > partitions)
    }

    /// The operations that grow the cluster to `count` partitions (see the module doc).
    pub fn plan_partitions(&self, count: u32) -> Result<Vec<Operation>, TopologyError> {
        let current = self.partition_count();
        if count < u32::from(current) {
            return Err(TopologyError::PartitionCountDecrease { current, asked: count });
        }
        if count == u32::from(current) {
            return Ok(Vec::new());
        }
        let last = PartitionId::try_from(count)
            .ok()
            .filter(|&c| c < PartitionId::MAX)
            .ok_or_else(|| TopologyError::Scale(format!("a cluster cannot have {count} partitions")))?;
        let ids: Vec<u64> = self.brokers.keys().copied().collect();
        if ids.is_empty() {
            return Err(TopologyError::NoBrokers);
        }
        let factor = self.replication_factor();
        let mut ops: Vec<Operation> = (current + 1..=last)
            .map(|p| Operation::PartitionBootstrap {
                broker_id: ids[usize::from(p - 1) % ids.len()],
                partition_id: p,
                replication_factor: factor,
            })
            .collect();
        ops.push(Operation::AwaitRedistributionCompletion { desired_partition_count: count });
        ops.push(relocation_step(self.message_partitions(), count));
        ops.push(Operation::UpdateRoutingState { desired_partition_count: count });
        Ok(ops)
    }

    /// The brokers (in id order, from `first`, wrapping) that hold a bootstrapped partition,
    /// with their priorities (the first highest).
    fn bootstrap_placement(&self, first: u64, factor: u32) -> Vec<(u64, u32)> {
        let ids: Vec<u64> = self.brokers.keys().copied().collect();
        let at = ids.iter().position(|&b| b == first).unwrap_or(0);
        (0..factor as usize).map(|k| (ids[(at + k) % ids.len()], factor - k as u32)).collect()
    }

    /// Whether a scale-up's `operation` can be made on this topology.
    pub(crate) fn check_scale(&self, operation: Operation) -> Result<(), TopologyError> {
        let count = self.partition_count();
        match operation {
            Operation::PartitionBootstrap { broker_id, partition_id, replication_factor } => {
                if !self.brokers.contains_key(&broker_id) {
                    let last = self.brokers.keys().copied().max().unwrap_or(0);
                    return Err(TopologyError::UnknownBroker { broker: broker_id, last });
                }
                if partition_id != count + 1 {
                    return Err(TopologyError::Scale(format!(
                        "partition {partition_id} cannot be bootstrapped: the next new partition is {}",
                        count + 1
                    )));
                }
                if replication_factor == 0 {
                    return Err(TopologyError::ReplicationFactor);
                }
                if replication_factor as usize > self.brokers.len() {
                    return Err(TopologyError::TooFewBrokers { brokers: self.brokers.len(), factor: replication_factor });
                }
                Ok(())
            }
            Operation::AwaitRedistributionCompletion { desired_partition_count }
            | Operation::UpdateRoutingState { desired_partition_count } => {
                if desired_partition_count != u32::from(count) || self.routed_partitions() >= count {
                    return Err(TopologyError::Scale(format!(
                        "the cluster has {count} partitions, {} of them routed: nothing to redistribute to {desired_partition_count}",
                        self.routed_partitions()
                    )));
                }
                Ok(())
            }
            Operation::AwaitRelocationCompletion { partition_count, desired_partition_count } => {
                self.check_relocation(partition_count, desired_partition_count)
            }
            _ => Ok(()),
        }
    }

    /// Starts a scale-up's `operation` (checked): a bootstrapped partition's replicas enter the
    /// topology BOOTSTRAPPING, and the routing state keeps the counts there were.
    pub(crate) fn start_scale(&mut self, operation: Operation) {
        if let Operation::PartitionBootstrap { broker_id, partition_id, replication_factor } = operation {
            let count = self.partition_count();
            self.routing.get_or_insert(Routing { routed_partitions: count, message_partitions: count, first_partitions: count });
            for (node, priority) in self.bootstrap_placement(broker_id, replication_factor) {
                self.brokers.entry(node).or_default().insert(partition_id, Replica { state: ReplicaState::Bootstrapping, priority });
            }
        }
    }

    /// Finishes a scale-up's `operation`: the bootstrapped replicas are ACTIVE; the routing
    /// state routes to every partition.
    pub(crate) fn finish_scale(&mut self, operation: Operation) {
        match operation {
            Operation::PartitionBootstrap { partition_id, .. } => {
                for replicas in self.brokers.values_mut() {
                    if let Some(r) = replicas.get_mut(&partition_id) {
                        r.state = ReplicaState::Active;
                    }
                }
            }
            Operation::UpdateRoutingState { desired_partition_count } => {
                if let Some(routing) = &mut self.routing {
                    routing.routed_partitions = desired_partition_count as PartitionId;
                }
            }
            Operation::AwaitRelocationCompletion { desired_partition_count, .. } => self.finish_relocation(desired_partition_count),
            _ => {}
        }
    }

    /// Whether a relocation of the correlation keys from `partition_count` to
    /// `desired_partition_count` partitions can be made: the messages are spread over the first,
    /// and the cluster has the second.
    fn check_relocation(&self, partition_count: u32, desired_partition_count: u32) -> Result<(), TopologyError> {
        let (count, messages) = (u32::from(self.partition_count()), u32::from(self.message_partitions()));
        if desired_partition_count != count || partition_count != messages || messages >= count {
            return Err(TopologyError::Scale(format!(
                "the cluster has {count} partitions, messages over {messages}: no correlation keys to move from \
                 {partition_count} to {desired_partition_count} partitions"
            )));
        }
        Ok(())
    }

    /// The relocation is done: messages are spread over the desired count (gateways publish,
    /// engines open subscriptions by it).
    fn finish_relocation(&mut self, desired_partition_count: u32) {
        if let Some(routing) = &mut self.routing {
            routing.message_partitions = desired_partition_count as PartitionId;
        }
    }
}

/// The step that moves the correlation keys of the `partition_count` message partitions to
/// their partitions under `desired_partition_count` (see [`relocation_done`]).
fn relocation_step(partition_count: PartitionId, desired_partition_count: u32) -> Operation {
    Operation::AwaitRelocationCompletion { partition_count: u32::from(partition_count), desired_partition_count }
}

/// Whether every old message partition (1 to `partition_count`) recorded its correlation keys
/// moved to `desired_partition_count` partitions (MESSAGE_RELOCATION RELOCATED), by what their
/// leaders report.
fn relocation_done(partition_count: u32, desired_partition_count: u32, reports: &[LeaderReport]) -> bool {
    (1..=partition_count).all(|p| reports.iter().any(|r| u32::from(r.partition) == p && r.relocated >= desired_partition_count))
}

/// Whether a scale-up's `operation` is done by what the partitions' leaders report: a
/// bootstrapped partition has a leader; the deployment partition recorded the scale-up done.
pub(crate) fn scale_operation_done(operation: Operation, reports: &[LeaderReport]) -> bool {
    match operation {
        Operation::PartitionBootstrap { partition_id, .. } => reports.iter().any(|r| r.partition == partition_id),
        Operation::AwaitRedistributionCompletion { desired_partition_count } => {
            reports.iter().any(|r| r.partition == DEPLOYMENT_PARTITION && r.scaled_up >= desired_partition_count)
        }
        Operation::AwaitRelocationCompletion { partition_count, desired_partition_count } => {
            relocation_done(partition_count, desired_partition_count, reports)
        }
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::ClusterSpec;
    use std::net::SocketAddr;

    fn spec(size: usize, rf: u32) -> ClusterSpec {
        let members = (0..size).map(|i| SocketAddr::from(([127, 0, 0, 1], 26502 + i as u16))).collect();
        ClusterSpec { node_id: 0, members, replication_factor: rf, own_address: None }
    }

    fn report(partition: PartitionId, scaled_up: u32) -> LeaderReport {
        LeaderReport {
            partition,
            leader: 0,
            voters: vec![0, 1, 2],
            learners: Vec::new(),
            voters_outgoing: Vec::new(),
            scaled_up,
            relocated: 0,
        }
    }

    #[test]
    fn growing_to_six_partitions_bootstraps_each_new_one_as_the_static_placement_would() {
        let mut t = Topology::initial(&spec(3, 3), 3);
        let ops = t.plan_partitions(6).unwrap();
        use Operation::*;
        assert_eq!(
            ops,
            vec![
                PartitionBootstrap { broker_id: 0, partition_id: 4, replication_factor: 3 },
                PartitionBootstrap { broker_id: 1, partition_id: 5, replication_factor: 3 },
                PartitionBootstrap { broker_id: 2, partition_id: 6, replication_factor: 3 },
                AwaitRedistributionCompletion { desired_partition_count: 6 },
                AwaitRelocationCompletion { partition_count: 3, desired_partition_count: 6 },
                UpdateRoutingState { desired_partition_count: 6 },
            ]
        );
        let id = t.plan_operations(ops, 0, 5).unwrap();
        // the first bootstrap started: partition 4 on every broker, all of them voters
        assert_eq!(t.partition_count(), 4);
        assert_eq!(t.voters(4), vec![0, 1, 2]);
        assert_eq!(t.replica(0, 4).map(|r| (r.state, r.priority)), Some((ReplicaState::Bootstrapping, 3)));
        assert_eq!((t.routed_partitions(), t.message_partitions()), (3, 3), "routing stays on the first count");
        assert!(!scale_operation_done(t.next_operation().unwrap(), &[report(1, 0)]), "partition 4 has no leader yet");
        assert!(scale_operation_done(t.next_operation().unwrap(), &[report(4, 0)]));
        for now in 6..9 {
            t.complete_next(now);
        }
        assert_eq!(t.partition_count(), 6);
        assert_eq!(t.routed_partitions(), 3, "instances go to the new partitions only after the redistribution");
        let waiting = t.next_operation().unwrap();
        assert!(!scale_operation_done(waiting, &[report(1, 0), report(4, 0)]));
        assert!(scale_operation_done(waiting, &[report(1, 6)]));
        t.complete_next(9);
        // the relocation: done once every old message partition moved its keys
        let relocating = t.next_operation().unwrap();
        let moved = |partition, relocated| LeaderReport { relocated, ..report(partition, 0) };
        assert!(!scale_operation_done(relocating, &[moved(1, 6), moved(2, 6), moved(4, 0)]), "partition 3 has not");
        assert!(!scale_operation_done(relocating, &[moved(1, 6), moved(2, 6), moved(3, 0)]));
        assert!(scale_operation_done(relocating, &[moved(1, 6), moved(2, 6), moved(3, 6)]));
        assert_eq!(t.message_partitions(), 3, "messages stay on the old count while keys move");
        t.complete_next(10);
        assert_eq!((t.routed_partitions(), t.message_partitions()), (3, 6), "then the new count");
        t.complete_next(11);
        assert_eq!((t.pending.clone(), t.last.as_ref().map(|c| c.id)), (None, Some(id)));
        assert_eq!((t.partition_count(), t.routed_partitions(), t.message_partitions()), (6, 6, 6));
        assert_eq!(t.routing.map(|r| r.created_with()), Some(3), "the count the data folders were created with");
        let mut expected = Topology::initial(&spec(3, 3), 6).brokers;
        // the static placement of six partitions, every replica active
        for replicas in expected.values_mut() {
            for r in replicas.values_mut() {
                r.state = ReplicaState::Active;
            }
        }
        assert_eq!(t.brokers, expected);
        // its brokers run it configured with the first count or the grown one, no other
        assert!(t.fits_configured_count(3) && t.fits_configured_count(6), "{t:?}");
        assert!(!t.fits_configured_count(5) && !t.fits_configured_count(7));
        assert!(Topology::initial(&spec(3, 3), 3).fits_configured_count(3) && !Topology::initial(&spec(3, 3), 3).fits_configured_count(6));
        // a second growth moves the keys from six partitions
        let ops = t.plan_partitions(7).unwrap();
        assert_eq!(ops[2], AwaitRelocationCompletion { partition_count: 6, desired_partition_count: 7 });
        t.plan_operations(ops, 0, 11).unwrap();
        while t.next_operation().is_some() {
            t.complete_next(12);
        }
        assert_eq!((t.partition_count(), t.routed_partitions(), t.message_partitions()), (7, 7, 7));
    }

    #[test]
    fn a_smaller_count_is_refused_and_the_same_count_plans_nothing() {
        let t = Topology::initial(&spec(3, 1), 3);
        assert_eq!(t.plan_partitions(2), Err(TopologyError::PartitionCountDecrease { current: 3, asked: 2 }));
        assert!(t.plan_partitions(2).unwrap_err().to_string().contains("Partition count can only be increased"));
        assert_eq!(t.plan_partitions(3), Ok(Vec::new()));
        assert!(matches!(t.plan_partitions(70_000), Err(TopologyError::Scale(_))));
        // replication factor 1: one replica each, round robin
        let ops = t.plan_partitions(5).unwrap();
        let mut grown = t.clone();
        grown.plan_operations(ops, 0, 1).unwrap();
        while grown.next_operation().is_some() {
            grown.complete_next(2);
        }
        assert_eq!((grown.voters(4), grown.voters(5)), (vec![0], vec![1]));
        assert_eq!((t.routed_partitions(), t.message_partitions()), (3, 3), "no routing state before a growth");
        assert_eq!(t.routing, None);
    }

    #[test]
    fn the_routing_state_survives_the_topology_file_and_an_old_file_has_none() {
        let dir = tempfile::tempdir().unwrap();
        let mut t = Topology::initial(&spec(3, 3), 3);
        t.save(dir.path()).unwrap();
        let text = std::fs::read_to_string(dir.path().join(crate::topology::FILE_NAME)).unwrap();
        assert!(!text.contains("routing"), "an ungrown cluster's file is as before");
        let ops = t.plan_partitions(4).unwrap();
        t.plan_operations(ops, 0, 1).unwrap();
        t.save(dir.path()).unwrap();
        assert_eq!(Topology::load(dir.path()).unwrap(), Some(t));
        // a routing state written before the keys could move: its message count is the first
        let old: Routing = serde_json::from_str(r#"{"routedPartitions": 6, "messagePartitions": 3}"#).unwrap();
        assert_eq!(old.created_with(), 3);
    }
}
