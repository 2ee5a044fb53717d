//! A snapshot of the cluster as one node sees it: the members, whether each is alive, and who
//! leads each partition.

use std::net::SocketAddr;

use crate::state::{NodeState, Role};

/// One node of the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub node_id: u64,
    /// The address the node gossips at.
    pub gossip_addr: SocketAddr,
    /// Distinguishes the node's runs: a restarted node has a higher generation.
    pub generation: u64,
    pub state: NodeState,
    /// Whether the failure detector hears from the node (always true for the local node).
    pub alive: bool,
}

/// The members known to a node, one per node id, ordered by node id.
///
/// A member is listed once its state has arrived, and stays listed (not alive) after it stops
/// until the dead-node grace period ends. Of several runs (generations) of one node id only the
/// latest is listed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClusterView {
    members: Vec<Member>,
}

impl ClusterView {
    /// Builds the view from every run of every node known, keeping each node id's latest run.
    pub(crate) fn from_runs(runs: impl IntoIterator<Item = Member>) -> Self {
        let mut members: Vec<Member> = runs.into_iter().collect();
        // latest generation first within a node id, then keep the first of each id
        members.sort_by(|a, b| a.node_id.cmp(&b.node_id).then(b.generation.cmp(&a.generation)));
        members.dedup_by_key(|m| m.node_id);
        ClusterView { members }
    }

    /// All members, alive or not, ordered by node id.
    pub fn members(&self) -> &[Member] {
        &self.members
    }

    /// The member with `node_id`.
    pub fn member(&self, node_id: u64) -> Option<&Member> {
        self.members.iter().find(|m| m.node_id == node_id)
    }

    /// The alive members, ordered by node id.
    pub fn alive(&self) -> impl Iterator<Item = &Member> {
        self.members.iter().filter(|m| m.alive)
    }

    /// The alive member claiming leadership of `partition_id` in the highest term (of two claims in
    /// one term, which Raft rules out but stale gossip may show, the lower node id).
    pub fn leader_of(&self, partition_id: u16) -> Option<&Member> {
        self.alive()
            .filter_map(|m| m.state.partition(partition_id).filter(|p| p.role == Role::Leader).map(|p| (p.term, m)))
            .max_by(|(term_a, a), (term_b, b)| term_a.cmp(term_b).then(b.node_id.cmp(&a.node_id)))
            .map(|(_, m)| m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::PartitionState;

    fn member(node_id: u64, generation: u64, alive: bool, partitions: &[(u16, Role, u64)]) -> Member {
        Member {
            node_id,
            gossip_addr: SocketAddr::from(([127, 0, 0, 1], 9000 + node_id as u16)),
            generation,
            state: NodeState {
                gateway_addr: format!("node-{node_id}:26500"),
                partitions: partitions
                    .iter()
                    .map(|&(partition_id, role, term)| PartitionState { partition_id, role, term, healthy: true, dead: false })
                    .collect(),
                ..NodeState::default()
            },
            alive,
        }
    }

    #[test]
    fn the_latest_run_of_a_node_is_kept() {
        let view = ClusterView::from_runs([member(2, 5, true, &[]), member(1, 7, false, &[]), member(1, 9, true, &[])]);
        let ids: Vec<_> = view.members().iter().map(|m| (m.node_id, m.generation, m.alive)).collect();
        assert_eq!(ids, [(1, 9, true), (2, 5, true)]);
    }

    #[test]
    fn the_highest_term_leader_wins() {
        let view = ClusterView::from_runs([
            member(1, 1, true, &[(1, Role::Leader, 3), (2, Role::Follower, 4)]),
            member(2, 1, true, &[(1, Role::Leader, 4), (2, Role::Leader, 4)]),
            member(3, 1, true, &[(1, Role::Follower, 4), (2, Role::Leader, 4)]),
        ]);
        assert_eq!(view.leader_of(1).map(|m| m.node_id), Some(2));
        assert_eq!(view.leader_of(2).map(|m| m.node_id), Some(2), "a tie in term goes to the lower node id");
        assert_eq!(view.leader_of(3), None);
    }

    #[test]
    fn dead_members_lead_nothing() {
        let view = ClusterView::from_runs([member(1, 1, false, &[(1, Role::Leader, 9)]), member(2, 1, true, &[(1, Role::Leader, 2)])]);
        assert_eq!(view.leader_of(1).map(|m| m.node_id), Some(2));
        assert_eq!(view.alive().count(), 1);
    }
}
