//! Brokers learned at run time: a broker started later with a node id beyond the initial
//! members (Zeebe's scale-up), or one restarted at another internal address. The gossip (the
//! binary's) announces each broker's internal address; [`Broker::learn_addresses`] records
//! what is new in the [`cluster::AddressBook`] and connects to it: a Raft network peer (so a change can
//! place replicas on it: its partitions' leaders reach it), a job stream session (its
//! partitions' jobs reach this broker's streams), and from then on commands between partitions
//! ([`crate::relay`]), forwarded commands, topology pushes and catch-up, and rebalancing reach it
//! too (they all read the book).

use std::net::SocketAddr;

use waggle_protocol::PartitionId;

use crate::cluster;
use crate::forward::Members;
use crate::{Broker, ClusterLinks};

impl Broker {
    /// Records the internal addresses the gossip announces (node id and address of each alive
    /// broker; this broker's own is ignored) and connects to every broker new to it or moved.
    /// Cheap when nothing changed (called on every gossip round).
    pub fn learn_addresses(&self, announced: impl IntoIterator<Item = (u64, SocketAddr)>) {
        let Some(links) = &self.links else { return };
        for (node, addr) in announced {
            let Some(previous) = links.book.learn(node, addr) else { continue };
            match previous {
                None => tracing::info!(node, %addr, "a broker's internal address learned from the gossip"),
                Some(was) => tracing::info!(node, %addr, %was, "a broker's internal address changed"),
            }
            if let Some(network) = self.network.lock().expect("network lock").as_ref() {
                network.add_peer(cluster::raft_id(node), addr);
            }
            if let Some(announcer) = links.announcer.lock().expect("announcer lock").as_mut() {
                if let Some(was) = previous {
                    announcer.disconnect(was);
                }
                announcer.connect(addr);
            }
        }
    }

    /// Every broker's internal address this broker knows now, by node id (this one included).
    pub fn known_addresses(&self) -> Vec<(u64, SocketAddr)> {
        let Some(links) = &self.links else { return Vec::new() };
        links.book.nodes().into_iter().filter_map(|n| Some((n, links.book.get(n)?))).collect()
    }
}

/// The brokers a cluster broker routes its clients' commands among: the address book, and for
/// a partition held elsewhere its replicas in the topology first (preferred first), then every
/// other broker known.
pub(crate) struct Routing<'a>(pub &'a ClusterLinks);

impl Members for Routing<'_> {
    fn node_id(&self) -> u64 {
        self.0.spec.node_id
    }

    fn address(&self, node: u64) -> Option<SocketAddr> {
        self.0.book.get(node)
    }

    fn guess(&self, partition: PartitionId, attempt: usize) -> u64 {
        let mut order: Vec<u64> = self.0.topology.lock().expect("topology lock").replicas(partition).into_iter().map(|(n, _)| n).collect();
        for node in self.0.book.nodes() {
            if !order.contains(&node) {
                order.push(node);
            }
        }
        order.get(attempt % order.len().max(1)).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::AddressBook;

    #[test]
    fn the_book_routes_in_turn_over_every_broker_known() {
        let spec = crate::ClusterSpec {
            node_id: 3,
            members: (0..3).map(|i| SocketAddr::from(([127, 0, 0, 1], 26502 + i))).collect(),
            replication_factor: 3,
            own_address: Some(SocketAddr::from(([127, 0, 0, 1], 26600))),
        };
        let book = AddressBook::new(&spec);
        assert_eq!((0..5).map(|a| book.guess(2, a)).collect::<Vec<_>>(), vec![2, 3, 0, 1, 2]);
        book.learn(4, SocketAddr::from(([127, 0, 0, 1], 26700)));
        assert_eq!((0..5).map(|a| book.guess(2, a)).collect::<Vec<_>>(), vec![2, 3, 4, 0, 1]);
        assert_eq!(Members::address(&book, 4), Some(SocketAddr::from(([127, 0, 0, 1], 26700))));
    }
}
