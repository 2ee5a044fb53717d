//! A broker's place in a cluster: the members, and which of them hold each partition.
//!
//! Placement follows Zeebe's round-robin distribution: with `N` brokers and replication factor
//! `RF`, partition `p` (1-based) is held by brokers `(p - 1 + k) mod N` for `k` in `0..RF`, and the
//! first of them is its preferred leader (highest priority), so leadership spreads over the
//! brokers. Node ids are 0-based (as Zeebe's `nodeId`); a Raft replica id is the node id + 1
//! (the `raft` crate reserves 0).
//!
//! A broker may also be started later with a node id beyond the initial members (Zeebe's
//! scale-up: "start brokers 3, 4, 5 with the existing contact points, then add them"): it names
//! its own internal address ([`ClusterSpec::own_address`]), holds no partition by placement, and
//! every broker learns its address from the gossip ([`AddressBook`]).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::RwLock;

use waggle_protocol::PartitionId;

/// The cluster a broker belongs to. Absent ([`crate::BrokerConfig::cluster`] `None`), the broker
/// is the standalone node: every partition a single voter, nothing sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterSpec {
    /// This broker's id: 0-based, below the cluster size.
    pub node_id: u64,
    /// The initial brokers' internal (Raft) addresses (the contact points), by node id; its
    /// length is the cluster size the cluster started with, which the static placement uses.
    pub members: Vec<SocketAddr>,
    /// How many brokers hold each partition (Zeebe's `replicationFactor`), 1 to the cluster size.
    pub replication_factor: u32,
    /// This broker's internal address when its node id is at or beyond the cluster size (a
    /// broker started later to scale the cluster up, not one of `members`); `None` for one of
    /// `members`, whose entry is its address.
    pub own_address: Option<SocketAddr>,
}

/// A cluster description that cannot work, with what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClusterSpecError {
    #[error("the cluster has no members")]
    NoMembers,
    #[error("node id {node_id} is not below the cluster size {size}, and no internal address of its own is given")]
    NodeIdOutOfRange { node_id: u64, size: usize },
    #[error("the replication factor {factor} must be between 1 and the cluster size {size}")]
    ReplicationFactor { factor: u32, size: usize },
}

impl ClusterSpec {
    /// The internal addresses of every initial member but this broker.
    pub fn other_members(&self) -> Vec<SocketAddr> {
        self.other_nodes().into_iter().map(|(_, addr)| addr).collect()
    }

    /// Every initial member but this broker, with its internal address.
    pub fn other_nodes(&self) -> Vec<(u64, SocketAddr)> {
        self.members.iter().enumerate().filter(|&(node, _)| node as u64 != self.node_id).map(|(node, &addr)| (node as u64, addr)).collect()
    }

    /// This broker's internal address (the unspecified address on a description that does not
    /// [`Self::validate`]).
    pub fn address(&self) -> SocketAddr {
        self.own_address.or_else(|| self.members.get(self.node_id as usize).copied()).unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0)))
    }

    /// Whether this broker is beyond the initial members (started later to scale up).
    pub fn is_added_later(&self) -> bool {
        self.node_id >= self.members.len() as u64
    }

    /// Checks the description: a member list, a node id within it (or beyond it with an address
    /// of its own), a replication factor the members can hold.
    pub fn validate(&self) -> Result<(), ClusterSpecError> {
        let size = self.members.len();
        if size == 0 {
            return Err(ClusterSpecError::NoMembers);
        }
        if self.node_id >= size as u64 && self.own_address.is_none() {
            return Err(ClusterSpecError::NodeIdOutOfRange { node_id: self.node_id, size });
        }
        if self.replication_factor == 0 || self.replication_factor as usize > size {
            return Err(ClusterSpecError::ReplicationFactor { factor: self.replication_factor, size });
        }
        Ok(())
    }

    pub fn cluster_size(&self) -> usize {
        self.members.len()
    }

    /// The node ids holding `partition`, its preferred leader first.
    pub fn replicas(&self, partition: PartitionId) -> Vec<u64> {
        let size = self.members.len().max(1) as u64;
        let first = u64::from(partition.max(1)) - 1;
        (0..u64::from(self.replication_factor)).map(|k| (first + k) % size).collect()
    }

    /// Whether this broker holds a replica of `partition`.
    pub fn hosts(&self, partition: PartitionId) -> bool {
        self.replicas(partition).contains(&self.node_id)
    }

    /// The preferred leader of `partition` (Zeebe's highest priority replica).
    pub fn preferred_leader(&self, partition: PartitionId) -> u64 {
        self.replicas(partition)[0]
    }
}

/// Every broker's internal address as this broker knows it, by node id: the initial members'
/// (the contact points), this broker's own, and those the gossip announced (brokers started
/// later, or restarted at another address). An address learned replaces the one known, except
/// for the brokers the contact points name: the gossip is not authenticated, and a node gossiping
/// under a contact point's id (an impostor, refused by mutual TLS) must not take its traffic.
#[derive(Debug)]
pub struct AddressBook {
    node_id: u64,
    /// Brokers `0..fixed` are the contact points': their addresses never change.
    fixed: u64,
    addresses: RwLock<BTreeMap<u64, SocketAddr>>,
}

impl AddressBook {
    /// The book of `spec`: its members and this broker.
    pub fn new(spec: &ClusterSpec) -> Self {
        let mut addresses: BTreeMap<u64, SocketAddr> = spec.members.iter().enumerate().map(|(n, &a)| (n as u64, a)).collect();
        addresses.insert(spec.node_id, spec.address());
        AddressBook { node_id: spec.node_id, fixed: spec.members.len() as u64, addresses: RwLock::new(addresses) }
    }

    /// This broker's node id.
    pub fn node_id(&self) -> u64 {
        self.node_id
    }

    /// `node`'s internal address, if known.
    pub fn get(&self, node: u64) -> Option<SocketAddr> {
        self.addresses.read().expect("address book lock").get(&node).copied()
    }

    /// Every broker known (this one included), by node id.
    pub fn nodes(&self) -> Vec<u64> {
        self.addresses.read().expect("address book lock").keys().copied().collect()
    }

    /// Every other broker known, with its address, by node id.
    pub fn others(&self) -> Vec<(u64, SocketAddr)> {
        let book = self.addresses.read().expect("address book lock");
        book.iter().filter(|&(&n, _)| n != self.node_id).map(|(&n, &a)| (n, a)).collect()
    }

    /// Records `node`'s address `addr`: the address it replaces (`Some(None)` for a broker not
    /// known before), or `None` when nothing changed (this broker's own entry and the contact
    /// points' never do).
    pub fn learn(&self, node: u64, addr: SocketAddr) -> Option<Option<SocketAddr>> {
        if node == self.node_id || node < self.fixed {
            return None;
        }
        let mut book = self.addresses.write().expect("address book lock");
        match book.insert(node, addr) {
            Some(old) if old == addr => None,
            old => Some(old),
        }
    }
}

/// Raft ticks (of [`crate::partition::RAFT_TICK`], 50 ms) a follower waits without hearing from
/// its leader before it campaigns, at least (and a leader without a quorum's answers before it
/// steps down).
pub const ELECTION_TICKS: usize = 10;
/// Ticks between a leader's heartbeats (100 ms).
pub const HEARTBEAT_TICKS: usize = 2;
/// Each replica's election timeout is drawn from a window this many ticks wide, placed later
/// for each replica further from the preferred leader in placement order: the preferred one
/// campaigns 0.5-0.65 s after the leader went silent, the next 0.65-0.8 s, the third 0.8-0.95 s.
/// So the preferred leader is usually elected (when it is up to date), and when it is gone the
/// next one is, without waiting for two windows.
pub const ELECTION_WINDOW_TICKS: usize = 3;

/// The Raft configuration of replica `raft_id` of a partition held by `voters` (Raft ids, in
/// placement order: the preferred leader first). Priorities follow placement, as in Zeebe's
/// priority election: the preferred leader has the highest priority and the earliest election
/// timeout, and a voter refuses a candidate of lower priority than its own whose log is no
/// longer than its own.
pub(crate) fn replica_config(raft_id: u64, voters: Vec<u64>) -> waggle_replication::ReplicaConfig {
    let rank = voters.iter().position(|&v| v == raft_id).unwrap_or(voters.len());
    waggle_replication::ReplicaConfig {
        election_tick: ELECTION_TICKS,
        heartbeat_tick: HEARTBEAT_TICKS,
        election_delay_ticks: rank * ELECTION_WINDOW_TICKS,
        election_jitter_ticks: ELECTION_WINDOW_TICKS,
        priority: (voters.len() - rank.min(voters.len())) as u64,
        ..waggle_replication::ReplicaConfig::new(raft_id, voters)
    }
}

/// The Raft replica id of a node (the `raft` crate reserves 0).
pub fn raft_id(node_id: u64) -> u64 {
    node_id + 1
}

/// The node of a Raft replica id.
pub fn node_of_raft_id(raft_id: u64) -> u64 {
    raft_id - 1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(node_id: u64, size: usize, replication_factor: u32) -> ClusterSpec {
        let members = (0..size).map(|i| SocketAddr::from(([127, 0, 0, 1], 26502 + i as u16))).collect();
        ClusterSpec { node_id, members, replication_factor, own_address: None }
    }

    #[test]
    fn partitions_are_placed_round_robin_with_the_preferred_leader_first() {
        // Zeebe's round-robin distribution, 3 brokers, 3 partitions, RF 3: each broker prefers one
        let s = spec(0, 3, 3);
        assert_eq!(s.replicas(1), vec![0, 1, 2]);
        assert_eq!(s.replicas(2), vec![1, 2, 0]);
        assert_eq!(s.replicas(3), vec![2, 0, 1]);
        // 5 brokers, RF 3: partition 5 wraps around
        let s = spec(4, 5, 3);
        assert_eq!(s.replicas(5), vec![4, 0, 1]);
        assert!(s.hosts(5) && s.hosts(4) && s.hosts(3) && !s.hosts(2) && !s.hosts(1));
        assert_eq!(s.preferred_leader(6), 0);
    }

    #[test]
    fn impossible_descriptions_are_refused_naming_the_setting() {
        assert_eq!(spec(3, 3, 1).validate(), Err(ClusterSpecError::NodeIdOutOfRange { node_id: 3, size: 3 }));
        assert_eq!(spec(0, 3, 4).validate(), Err(ClusterSpecError::ReplicationFactor { factor: 4, size: 3 }));
        assert_eq!(spec(0, 3, 0).validate(), Err(ClusterSpecError::ReplicationFactor { factor: 0, size: 3 }));
        assert_eq!(
            ClusterSpec { node_id: 0, members: vec![], replication_factor: 1, own_address: None }.validate(),
            Err(ClusterSpecError::NoMembers)
        );
        assert_eq!(spec(2, 3, 3).validate(), Ok(()));
    }

    #[test]
    fn a_broker_beyond_the_initial_members_names_its_own_address_and_is_placed_nowhere() {
        let own = SocketAddr::from(([127, 0, 0, 1], 26600));
        let late = ClusterSpec { own_address: Some(own), ..spec(3, 3, 3) };
        assert_eq!(late.validate(), Ok(()));
        assert!(late.is_added_later() && !spec(2, 3, 3).is_added_later());
        assert_eq!((late.address(), late.other_members().len()), (own, 3));
        assert!((1..=6).all(|p| !late.hosts(p)), "no partition by placement");
        let book = AddressBook::new(&late);
        assert_eq!(book.nodes(), vec![0, 1, 2, 3]);
        assert_eq!(book.others().len(), 3);
        // learned: a new broker, a moved one, nothing new; never this broker's own, and never a
        // contact point's (the gossip is not authenticated: an impostor could announce it)
        let (a4, moved) = (SocketAddr::from(([127, 0, 0, 1], 26700)), SocketAddr::from(([127, 0, 0, 2], 26502)));
        assert_eq!(book.learn(4, a4), Some(None));
        assert_eq!(book.learn(4, a4), None);
        assert_eq!(book.learn(4, moved), Some(Some(a4)));
        assert_eq!(book.learn(0, moved), None);
        assert_eq!(book.learn(3, a4), None);
        let first = spec(0, 3, 3).members[0];
        assert_eq!((book.get(0), book.get(3), book.get(4), book.get(5)), (Some(first), Some(own), Some(moved), None));
    }

    #[test]
    fn raft_ids_skip_zero() {
        assert_eq!((raft_id(0), node_of_raft_id(raft_id(7))), (1, 7));
    }

    #[test]
    fn the_preferred_replica_has_the_highest_priority_and_campaigns_first() {
        // partition 2 of 3 brokers, RF 3: brokers 1, 2, 0 (Raft ids 2, 3, 1)
        let voters: Vec<u64> = spec(0, 3, 3).replicas(2).into_iter().map(raft_id).collect();
        let configs: Vec<_> = [2, 3, 1].iter().map(|&id| replica_config(id, voters.clone())).collect();
        assert_eq!(configs.iter().map(|c| c.priority).collect::<Vec<_>>(), vec![3, 2, 1]);
        // disjoint windows, one after the other: the preferred one times out first
        let windows: Vec<(usize, usize)> = configs
            .iter()
            .map(|c| (c.election_tick + c.election_delay_ticks, c.election_tick + c.election_delay_ticks + c.election_jitter_ticks))
            .collect();
        assert_eq!(windows, vec![(10, 13), (13, 16), (16, 19)]);
    }
}
