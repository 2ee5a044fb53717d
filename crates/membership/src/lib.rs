//! Cluster membership through gossip: brokers learn each other, each partition's leader and each
//! node's health.
//!
//! Each node runs a [`Membership`]: it announces its [`NodeState`] (gateway and internal
//! addresses, version, and its role, term and health in each partition) and keeps a
//! [`ClusterView`] of every node it has heard of, alive or not, which [`Membership::subscribe`]
//! delivers on every change. [`ClusterView::leader_of`] picks a partition's leader among the alive
//! members, the highest term winning when two claim it.
//!
//! # Built on chitchat
//!
//! The gossip is [chitchat](https://crates.io/crates/chitchat) 0.13 (Quickwit's, MIT licence):
//! scuttlebutt anti-entropy over UDP with a phi-accrual-style failure detector, on tokio. It was
//! preferred to foca 2.0 (MPL-2.0: usable as a dependency, but changes to its files must be
//! published under the MPL; and a runtime-agnostic SWIM state machine that leaves the socket,
//! timers and the dissemination of custom state to us). chitchat builds here from crates.io with
//! the workspace's tokio; it needs Rust 1.86 (foca 1.88).
//!
//! A node's state travels as two chitchat keys holding small JSON documents (see `state`). Each
//! run of a node is a chitchat id (node id, generation = start time in µs, gossip address), so a
//! restarted node is a new run that supersedes the dead one in the view.
//!
//! # Failure detection
//!
//! A peer is declared dead once no newer heartbeat of it has arrived for
//! [`MembershipConfig::phi_threshold`] times the mean interval between its heartbeats'
//! arrivals, checked after each gossip round. Heartbeats arrive with every gossip exchange, several
//! per gossip interval, so the timeout is a few gossip intervals and shrinks somewhat as more
//! peers gossip. With the defaults (250 ms, threshold 20) the estimate is ~2.5 s in a three-node
//! cluster on loopback, and the `cluster` tests measured a stopped node reported dead by both its
//! peers after 2.4-3.2 s (up to 4 s with the cores saturated); they print what they measure.
//! Nodes are checked not to be taken for dead in steady gossip. A peer declared dead is alive
//! again after one or two newer heartbeats. Dead members stay in the view, not alive,
//! for [`MembershipConfig::dead_node_grace_period`].

mod config;
mod membership;
mod state;
mod transport;
mod view;

use std::net::SocketAddr;

pub use config::MembershipConfig;
pub use membership::Membership;
pub use state::{ClusterShape, NodeState, PartitionState, Role};
pub use view::{ClusterView, Member};

/// Why membership could not start or change.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("membership setting {setting}: {reason}")]
    InvalidConfig { setting: &'static str, reason: String },
    #[error("partition {0} is given twice")]
    DuplicatePartition(u16),
    #[error("cannot gossip on {addr}: {source}")]
    Bind { addr: SocketAddr, source: Box<dyn std::error::Error + Send + Sync> },
    #[error("cannot encode the node state: {0}")]
    Encode(serde_json::Error),
    #[error("the gossip task failed: {0}")]
    Shutdown(Box<dyn std::error::Error + Send + Sync>),
}
