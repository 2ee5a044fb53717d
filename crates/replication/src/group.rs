//! One partition's Raft group on this node: configuration, the `Ready` loop over the journal, and
//! the [`Transport`] its messages leave by.

use std::path::Path;
use std::sync::{Arc, RwLock};

use raft::prelude::{Entry as RaftEntry, EntryType, Message};
use raft::{Config, RawNode, StateRole};
use waggle_log::{Journal, JournalConfig};

use crate::storage::{from_raft, to_raft, JournalStorage, CONF_MARKER};
use crate::{Committed, ReplicationError, LOCAL_NODE_ID};

/// Carries a group's Raft messages to its peers.
///
/// Best effort: a message may be lost, delayed, duplicated or reordered (Raft retransmits and
/// discards stale messages), so `send` must not block on a slow or absent peer. The receiving
/// side hands each message to its peer's group with [`RaftGroup::step`].
pub trait Transport: Send {
    /// Sends each message to the peer its `to` names.
    fn send(&mut self, messages: Vec<Message>);
}

/// A group's members and timing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaConfig {
    /// This node's id in the group (not 0).
    pub id: u64,
    /// Every voter's id, this node's included. Fixed for the group's life: membership changes
    /// are not supported yet.
    pub voters: Vec<u64>,
    /// Ticks a follower waits without hearing from a leader before it campaigns, and a leader
    /// waits without hearing from a quorum before it steps down (check-quorum).
    pub election_tick: usize,
    /// Ticks between a leader's heartbeats (less than `election_tick`).
    pub heartbeat_tick: usize,
    /// Raft draws each election timeout from `[election_tick, 2 × election_tick)` with the
    /// thread's RNG, so that voters rarely campaign together. Off, the timeout is exactly
    /// `election_tick`: a deterministic simulation jitters the ticks themselves instead.
    pub randomized_election_timeout: bool,
}

impl ReplicaConfig {
    /// A voter `id` among `voters`, with the timing the broker uses (ticks of ~100 ms: an
    /// election after 1–2 s of silence, a heartbeat every 200 ms).
    pub fn new(id: u64, voters: Vec<u64>) -> Self {
        Self { id, voters, election_tick: 10, heartbeat_tick: 2, randomized_election_timeout: true }
    }

    fn validate(&self) -> Result<(), ReplicationError> {
        let invalid = |why: String| Err(ReplicationError::InvalidConfig(why));
        if self.id == 0 || self.voters.contains(&0) {
            return invalid("node id 0 is reserved (Raft's \"none\")".into());
        }
        if !self.voters.contains(&self.id) {
            return invalid(format!("node {} is not among the voters {:?}", self.id, self.voters));
        }
        let mut sorted = self.voters.clone();
        sorted.sort_unstable();
        sorted.dedup();
        if sorted.len() != self.voters.len() {
            return invalid(format!("voters {:?} name a node twice", self.voters));
        }
        if self.heartbeat_tick == 0 || self.election_tick <= self.heartbeat_tick {
            return invalid(format!(
                "election_tick ({}) must exceed heartbeat_tick ({}), which must not be 0",
                self.election_tick, self.heartbeat_tick
            ));
        }
        Ok(())
    }
}

/// One partition's Raft group on this node.
pub struct RaftGroup {
    node: RawNode<JournalStorage>,
    journal: Arc<RwLock<Journal>>,
    /// None for a single voter: it has no one to send to.
    transport: Option<Box<dyn Transport>>,
}

impl RaftGroup {
    /// Opens a single-voter group (node [`LOCAL_NODE_ID`]) on the journal in `dir`; it elects
    /// itself at once. `applied` is the last index the state machine has durably applied;
    /// committed entries after it are re-delivered by [`Self::drive`].
    pub fn open(dir: &Path, applied: u64) -> Result<Self, ReplicationError> {
        Self::open_with(dir, applied, ReplicaConfig::new(LOCAL_NODE_ID, vec![LOCAL_NODE_ID]), None)
    }

    /// Opens this node's member of a group of `config.voters` on the journal in `dir` (term, vote
    /// and log as a previous run left them), sending its messages through `transport`. It
    /// starts as a follower (a single voter elects itself at once); `applied` is as for
    /// [`Self::open`].
    pub fn open_replicated(
        dir: &Path,
        applied: u64,
        config: ReplicaConfig,
        transport: Box<dyn Transport>,
    ) -> Result<Self, ReplicationError> {
        Self::open_with(dir, applied, config, Some(transport))
    }

    fn open_with(dir: &Path, applied: u64, config: ReplicaConfig, transport: Option<Box<dyn Transport>>) -> Result<Self, ReplicationError> {
        config.validate()?;
        let mut journal = Journal::open(dir, JournalConfig::default())?;
        // The journal persists the commit index lazily: entries the state machine applied were
        // committed, so the commit index is at least the applied one (if the log holds it).
        let mut hs = journal.hard_state();
        hs.commit = hs.commit.max(applied.min(journal.last_index()));
        journal.set_hard_state(hs)?;
        let applied = applied.min(hs.commit).max(journal.first_index().saturating_sub(1));
        let journal = Arc::new(RwLock::new(journal));
        let single = config.voters.len() == 1;
        let storage = JournalStorage { journal: journal.clone(), voters: config.voters.clone(), recent: Arc::default() };
        let raft_config = Config {
            id: config.id,
            election_tick: config.election_tick,
            heartbeat_tick: config.heartbeat_tick,
            // 0 leaves Raft's default, 2 × election_tick
            max_election_tick: if config.randomized_election_timeout { 0 } else { config.election_tick + 1 },
            applied,
            max_size_per_msg: 1 << 20,
            max_inflight_msgs: 256,
            // a leader cut off from a quorum steps down (a single voter always hears itself)
            check_quorum: !single,
            // a node back from a partition asks before it campaigns, so it does not depose a
            // healthy leader by raising the term
            pre_vote: true,
            ..Default::default()
        };
        raft_config.validate()?;
        let logger = slog::Logger::root(slog::Discard, slog::o!());
        let mut node = RawNode::new(&raft_config, storage, &logger)?;
        if single {
            node.campaign()?;
        }
        Ok(Self { node, journal, transport })
    }

    pub fn is_leader(&self) -> bool {
        self.node.raft.state == StateRole::Leader
    }

    /// This node's id in the group.
    pub fn id(&self) -> u64 {
        self.node.raft.id
    }

    /// The current term.
    pub fn term(&self) -> u64 {
        self.node.raft.term
    }

    /// The leader this node knows of in the current term, if any.
    pub fn leader_id(&self) -> Option<u64> {
        Some(self.node.raft.leader_id).filter(|&id| id != raft::INVALID_ID)
    }

    /// Proposes an entry (leader only). It is committed when `drive` returns it.
    pub fn propose(&mut self, data: Vec<u8>) -> Result<(), ReplicationError> {
        if !self.is_leader() {
            return Err(ReplicationError::NotLeader);
        }
        debug_assert_ne!(data.first(), Some(&CONF_MARKER), "codec version 0xFF is reserved");
        self.node.propose(vec![], data)?;
        Ok(())
    }

    /// Hands a message from a peer to Raft; [`Self::drive`] then acts on it. Messages meant for
    /// another node, from a node outside the group, or of a kind only a node sends itself are
    /// refused.
    pub fn step(&mut self, message: Message) -> Result<(), ReplicationError> {
        if message.to != self.id() {
            return Err(ReplicationError::WrongRecipient { to: message.to, id: self.id() });
        }
        if !self.node.store().voters.contains(&message.from) {
            return Err(ReplicationError::UnknownPeer(message.from));
        }
        self.node.step(message)?;
        Ok(())
    }

    /// Advances Raft's logical clock (call every ~100 ms).
    pub fn tick(&mut self) {
        self.node.tick();
    }

    /// Does what Raft asks: sends messages, persists entries and hard state (one fsync), and
    /// returns newly committed entries. A message that acknowledges entries or a vote (a
    /// follower's append response, a vote granted) is sent only once they are durable.
    pub fn drive(&mut self) -> Result<Vec<Committed>, ReplicationError> {
        let mut committed = Vec::new();
        while self.node.has_ready() {
            let mut ready = self.node.ready();
            // a leader's appends and heartbeats go out before its own fsync: Raft counts the
            // leader's copy of an entry toward the quorum only once `advance` says it is durable
            self.send(ready.take_messages());
            if !ready.snapshot().is_empty() {
                // no leader sends one: `JournalStorage::snapshot` has none to give yet
                return Err(ReplicationError::SnapshotUnsupported);
            }
            collect(&mut committed, ready.take_committed_entries());
            {
                let mut j = self.journal.write().expect("journal lock");
                // the entries' data is moved into the journal's form and back (an entry can be
                // ~150 KB: no copy kept only for the append)
                let entries: Vec<_> = ready.take_entries().into_iter().map(from_raft).collect();
                j.append(&entries)?;
                let appended: Vec<_> = entries.into_iter().map(to_raft).collect();
                if let Some(hs) = ready.hs() {
                    j.set_hard_state(waggle_log::HardState { term: hs.term, vote: hs.vote, commit: hs.commit })?;
                }
                if ready.must_sync() || !appended.is_empty() || ready.hs().is_some() {
                    j.flush()?;
                }
                // kept once durable; an append without entries leaves the last ones
                if !appended.is_empty() {
                    *self.node.store().recent.lock().expect("recent entries lock") = appended;
                }
            }
            // append responses and votes: what they acknowledge is durable now
            self.send(ready.take_persisted_messages());
            let mut light = self.node.advance(ready);
            if let Some(commit) = light.commit_index() {
                let mut j = self.journal.write().expect("journal lock");
                let mut hs = j.hard_state();
                hs.commit = commit;
                j.set_hard_state(hs)?;
                j.flush()?;
            }
            self.send(light.take_messages());
            collect(&mut committed, light.take_committed_entries());
            self.node.advance_apply();
        }
        Ok(committed)
    }

    fn send(&mut self, messages: Vec<Message>) {
        if messages.is_empty() {
            return;
        }
        // a single voter has no transport and Raft gives it nothing to send
        if let Some(transport) = &mut self.transport {
            transport.send(messages);
        }
    }

    /// Drops log entries up to `index` (state up to it is in a snapshot).
    ///
    /// With several voters, a follower that still needs a dropped entry cannot catch up until
    /// snapshots are sent to followers (not yet supported): the caller compacts only below
    /// what every follower has.
    pub fn compact(&mut self, index: u64) -> Result<(), ReplicationError> {
        let mut j = self.journal.write().expect("journal lock");
        let Some(term) = j.term(index) else { return Ok(()) };
        if index >= j.first_index() {
            j.compact(index, term)?;
        }
        Ok(())
    }

    pub fn first_index(&self) -> u64 {
        self.journal.read().expect("journal lock").first_index()
    }

    /// Index of the last entry in the log (the last proposal, right after `propose`).
    pub fn last_index(&self) -> u64 {
        self.node.raft.raft_log.last_index()
    }

    pub fn commit_index(&self) -> u64 {
        self.node.raft.raft_log.committed
    }

    /// The highest index every voter is known to hold (leader only; `None` elsewhere): what
    /// can be compacted without leaving a follower behind the log.
    pub fn replicated_to_all(&self) -> Option<u64> {
        if !self.is_leader() {
            return None;
        }
        self.node.raft.prs().iter().map(|(_, p)| p.matched).min()
    }
}

fn collect(out: &mut Vec<Committed>, entries: Vec<RaftEntry>) {
    out.extend(entries.into_iter().map(|e| {
        let data = if e.entry_type == EntryType::EntryNormal as i32 { e.data } else { Vec::new() };
        Committed { index: e.index, term: e.term, data }
    }));
}

#[cfg(test)]
mod tests;
