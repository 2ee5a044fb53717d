//! A partition's replicated log: one Raft group (TiKV's `raft` crate, with pre-vote and
//! check-quorum) whose entries live in the partition's [`waggle_log::Journal`].
//!
//! Owns: the Raft state machine driver (the `Ready` loop), durable Raft state (log, term, vote),
//! the order of persisting and acknowledging, compaction of the log.
//! Does not own: what entries mean (the caller decodes and applies them), the clock (the caller
//! ticks), how messages travel (a [`Transport`]; [`net`] carries them between nodes).
//!
//! Contract for the caller (the broker's partition thread, or the simulation in `tests/`):
//! - Call [`RaftGroup::tick`] every ~100 ms ([`ReplicaConfig`]'s timing is in ticks), hand every
//!   message received for the group to [`RaftGroup::step`], and call [`RaftGroup::drive`] after
//!   ticking, stepping or proposing. `drive` sends, persists and reports; nothing happens
//!   between calls.
//! - [`RaftGroup::propose`] only on the leader; an entry is durable on a quorum and committed
//!   once `drive` returns it among the committed entries. Nothing may be acknowledged to a
//!   client before that. A proposal on a leader that loses its term may never commit.
//! - Apply the committed entries `drive` returns, on every node (followers too: their state
//!   stays warm); they come back exactly once per run, in index order, starting after the
//!   `applied` index given at open (so a restart re-delivers what state lacks).
//! - `drive` persists what each Raft ready holds with one fsync (group commit: a call usually
//!   has one ready, however many entries it holds), before it sends any message that
//!   acknowledges them (a follower's append response, a vote granted).
//!   The commit index is not fsynced (volatile in Raft): after a restart it is recovered from the
//!   applied index and from the leader.
//! - [`RaftGroup::compact`] drops the log up to a snapshot of the state the owner keeps, and the
//!   owner names that snapshot's files with a [`SnapshotSource`]
//!   ([`RaftGroup::set_snapshot_source`]): a follower behind the compacted log is sent them
//!   ([`snapshot`]: chunks with checksums, over the same [`Transport`]), then the log. The
//!   owner hands received [`SnapshotPacket`]s to [`RaftGroup::receive_snapshot`]. When a
//!   follower installs a snapshot, `drive` returns the entries committed before it and stops;
//!   [`RaftGroup::take_installed`] then gives the snapshot, whose files replace the owner's
//!   state before it applies anything more (`drive` refuses to go on until it is taken). The
//!   state in the files may be ahead of the snapshot's index (a checkpoint carries its own
//!   applied index): the owner skips the entries its state already holds.
//!
//! A single voter ([`RaftGroup::open`]) has no transport and elects itself at once; its path
//! sends nothing and costs what it did before replication (one fsync per `drive`).

mod conf;
mod group;
pub mod net;
mod raft_log;
pub mod snapshot;
mod storage;
pub mod tls;

pub use group::{RaftGroup, ReplicaConfig, SnapshotStats, Transport, RECEIVED_SNAPSHOTS_DIR};
/// Raft's message between the voters of a group (raft-proto, prost 0.11 encoding).
pub use raft::prelude::{ConfState, Message, MessageType};
pub use snapshot::{AckKind, InstalledSnapshot, PacketBody, SnapshotFile, SnapshotPacket, SnapshotSource};

/// This node's id in a single-voter group.
pub const LOCAL_NODE_ID: u64 = 1;

#[derive(Debug, thiserror::Error)]
pub enum ReplicationError {
    #[error("journal: {0}")]
    Journal(#[from] waggle_log::JournalError),
    #[error("raft: {0}")]
    Raft(#[from] raft::Error),
    #[error("not the leader of this partition")]
    NotLeader,
    #[error("invalid replica configuration: {0}")]
    InvalidConfig(String),
    #[error("message for node {to} reached node {id}")]
    WrongRecipient { to: u64, id: u64 },
    #[error("message from node {0}, which is not a voter of this group")]
    UnknownPeer(u64),
    #[error("snapshot transfer: {0}")]
    SnapshotIo(#[from] std::io::Error),
    #[error("raft installs snapshot {index} (term {term}) but its files were not received")]
    SnapshotFilesMissing { index: u64, term: u64 },
    #[error("the installed snapshot {0} was not taken: the owner replaces its state before driving on")]
    SnapshotNotTaken(u64),
    #[error("a raft snapshot message outside a snapshot transfer")]
    SnapshotOutsideTransfer,
    #[error("the configuration change at index {0} cannot be read")]
    BadConfChange(u64),
    #[error("a configuration change is under way: one at a time")]
    ConfChangePending,
}

/// A committed entry handed to the state machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Committed {
    pub index: u64,
    pub term: u64,
    /// Empty for Raft's own entries (leader no-ops, configuration changes).
    pub data: Vec<u8>,
}
