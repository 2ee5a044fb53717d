//! A partition's replicated log: one Raft group (TiKV's `raft` crate) whose entries live in the
//! partition's [`waggle_log::Journal`].
//!
//! Owns: the Raft state machine driver (the `Ready` loop), durable Raft state, compaction.
//! Does not own: what entries mean (the broker decodes and applies them), the network (this
//! issue runs one voter per group; the transport comes with the replicated cluster).
//!
//! Contract:
//! - [`RaftGroup::propose`] only on the leader; an entry is durable and committed once
//!   [`RaftGroup::drive`] returns it among the committed entries. Nothing may be acknowledged
//!   to a client before that.
//! - `drive` persists with one fsync per call (group commit), however many entries it holds;
//!   the commit index is not fsynced (volatile in Raft): after a restart it is recovered from
//!   the applied index and, for entries past it, by committing an entry of the new term.
//! - Committed entries come back exactly once per run, in index order, starting after the
//!   `applied` index given to [`RaftGroup::open`] (so a restart re-delivers what state lacks).

use std::path::Path;
use std::sync::{Arc, Mutex, RwLock};

use raft::prelude::{ConfState, Entry as RaftEntry, EntryType, HardState, Snapshot};
use raft::storage::{RaftState, Storage};
use raft::{Config, GetEntriesContext, RawNode, StateRole, StorageError};
use waggle_log::{Journal, JournalConfig, JournalError};

/// This node's id within its Raft groups (one voter for now).
pub const LOCAL_NODE_ID: u64 = 1;

#[derive(Debug, thiserror::Error)]
pub enum ReplicationError {
    #[error("journal: {0}")]
    Journal(#[from] JournalError),
    #[error("raft: {0}")]
    Raft(#[from] raft::Error),
    #[error("not the leader of this partition")]
    NotLeader,
}

/// A committed entry handed to the state machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Committed {
    pub index: u64,
    pub term: u64,
    /// Empty for Raft's own entries (leader no-ops, configuration changes).
    pub data: Vec<u8>,
}

/// Raft's view of the journal.
#[derive(Clone)]
struct JournalStorage {
    journal: Arc<RwLock<Journal>>,
    voters: Vec<u64>,
    /// The entries of the last append, as Raft gave them: the leader asks for them again as soon
    /// as they are committed, and they are served from here instead of read back from the file.
    /// A request for all of them takes them (a single voter asks once; later requests read the
    /// file).
    recent: Arc<Mutex<Vec<RaftEntry>>>,
}

impl JournalStorage {
    /// Entries `low..high` from the last append, if it holds all of them (at most `max_size`
    /// bytes, and at least one entry, as Raft's storage contract limits them). Served entries
    /// that are all it holds are taken, not copied.
    fn recent_entries(&self, low: u64, high: u64, max_size: Option<u64>) -> Option<Vec<RaftEntry>> {
        let mut recent = self.recent.lock().expect("recent entries lock");
        let first = recent.first()?.index;
        if low < first || high > first + recent.len() as u64 {
            return None;
        }
        let wanted = &recent[(low - first) as usize..(high - first) as usize];
        let mut size = 0u64;
        let mut count = 0;
        for e in wanted {
            size += e.data.len() as u64;
            if count > 0 && max_size.is_some_and(|max| size > max) {
                break;
            }
            count += 1;
        }
        if count == recent.len() {
            return Some(std::mem::take(&mut *recent));
        }
        Some(wanted[..count].to_vec())
    }
}

fn store_err(e: JournalError) -> raft::Error {
    raft::Error::Store(StorageError::Other(Box::new(e)))
}

impl Storage for JournalStorage {
    fn initial_state(&self) -> raft::Result<RaftState> {
        let j = self.journal.read().expect("journal lock");
        let hs = j.hard_state();
        let hard_state = HardState { term: hs.term, vote: hs.vote, commit: hs.commit };
        let conf_state = ConfState { voters: self.voters.clone(), ..Default::default() };
        Ok(RaftState::new(hard_state, conf_state))
    }

    fn entries(&self, low: u64, high: u64, max_size: impl Into<Option<u64>>, _ctx: GetEntriesContext) -> raft::Result<Vec<RaftEntry>> {
        let max_size = max_size.into();
        let j = self.journal.read().expect("journal lock");
        if low < j.first_index() {
            return Err(raft::Error::Store(StorageError::Compacted));
        }
        if high > j.last_index() + 1 {
            return Err(raft::Error::Store(StorageError::Unavailable));
        }
        if let Some(recent) = self.recent_entries(low, high, max_size) {
            return Ok(recent);
        }
        let entries = j.entries(low, high, max_size).map_err(store_err)?;
        Ok(entries.into_iter().map(to_raft).collect())
    }

    fn term(&self, idx: u64) -> raft::Result<u64> {
        let j = self.journal.read().expect("journal lock");
        if idx + 1 < j.first_index() {
            return Err(raft::Error::Store(StorageError::Compacted));
        }
        j.term(idx).ok_or(raft::Error::Store(StorageError::Unavailable))
    }

    fn first_index(&self) -> raft::Result<u64> {
        Ok(self.journal.read().expect("journal lock").first_index())
    }

    fn last_index(&self) -> raft::Result<u64> {
        Ok(self.journal.read().expect("journal lock").last_index())
    }

    fn snapshot(&self, _request_index: u64, _to: u64) -> raft::Result<Snapshot> {
        // Snapshot transfer to followers arrives with the replicated cluster.
        Err(raft::Error::Store(StorageError::SnapshotTemporarilyUnavailable))
    }
}

fn to_raft(e: waggle_log::Entry) -> RaftEntry {
    let kind = if e.data.first() == Some(&CONF_MARKER) { EntryType::EntryConfChange } else { EntryType::EntryNormal };
    let data = if kind == EntryType::EntryConfChange { e.data[1..].to_vec() } else { e.data };
    RaftEntry { entry_type: kind as i32, term: e.term, index: e.index, data, ..Default::default() }
}

/// Journal entries of Raft configuration changes start with this byte (normal entries are
/// stored as given; Waggle's own entries never start with it: their first byte is a codec
/// version, and version 0xFF is reserved).
const CONF_MARKER: u8 = 0xFF;

fn from_raft(e: RaftEntry) -> waggle_log::Entry {
    let data = if e.entry_type == EntryType::EntryConfChange as i32 {
        let mut d = vec![CONF_MARKER];
        d.extend_from_slice(&e.data);
        d
    } else {
        e.data
    };
    waggle_log::Entry { index: e.index, term: e.term, data }
}

/// One partition's Raft group on this node.
pub struct RaftGroup {
    node: RawNode<JournalStorage>,
    journal: Arc<RwLock<Journal>>,
}

impl RaftGroup {
    /// Opens the group's journal in `dir`. `applied` is the last index the state machine has
    /// durably applied; committed entries after it are re-delivered by [`Self::drive`].
    pub fn open(dir: &Path, applied: u64) -> Result<Self, ReplicationError> {
        let mut journal = Journal::open(dir, JournalConfig::default())?;
        // The journal persists the commit index lazily: entries the state machine applied were
        // committed, so the commit index is at least the applied one (if the log holds it).
        let mut hs = journal.hard_state();
        hs.commit = hs.commit.max(applied.min(journal.last_index()));
        journal.set_hard_state(hs)?;
        let applied = applied.min(hs.commit).max(journal.first_index().saturating_sub(1));
        let journal = Arc::new(RwLock::new(journal));
        let storage = JournalStorage { journal: journal.clone(), voters: vec![LOCAL_NODE_ID], recent: Arc::default() };
        let config = Config {
            id: LOCAL_NODE_ID,
            election_tick: 10,
            heartbeat_tick: 2,
            applied,
            max_size_per_msg: 1 << 20,
            max_inflight_msgs: 256,
            check_quorum: false,
            pre_vote: true,
            ..Default::default()
        };
        config.validate()?;
        let logger = slog::Logger::root(slog::Discard, slog::o!());
        let mut node = RawNode::new(&config, storage, &logger)?;
        // A single voter elects itself at once.
        node.campaign()?;
        Ok(Self { node, journal })
    }

    pub fn is_leader(&self) -> bool {
        self.node.raft.state == StateRole::Leader
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

    /// Advances Raft's logical clock (call every ~100 ms).
    pub fn tick(&mut self) {
        self.node.tick();
    }

    /// Persists what Raft asks for (one fsync), and returns newly committed entries.
    pub fn drive(&mut self) -> Result<Vec<Committed>, ReplicationError> {
        let mut committed = Vec::new();
        while self.node.has_ready() {
            let mut ready = self.node.ready();
            // messages to peers: none with one voter (the transport comes with the cluster)
            let _ = ready.take_messages();
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
            let _ = ready.take_persisted_messages();
            let mut light = self.node.advance(ready);
            if let Some(commit) = light.commit_index() {
                let mut j = self.journal.write().expect("journal lock");
                let mut hs = j.hard_state();
                hs.commit = commit;
                j.set_hard_state(hs)?;
                j.flush()?;
            }
            let _ = light.take_messages();
            collect(&mut committed, light.take_committed_entries());
            self.node.advance_apply();
        }
        Ok(committed)
    }

    /// Drops log entries up to `index` (state up to it is in a snapshot).
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
}

fn collect(out: &mut Vec<Committed>, entries: Vec<RaftEntry>) {
    out.extend(entries.into_iter().map(|e| {
        let data = if e.entry_type == EntryType::EntryNormal as i32 { e.data } else { Vec::new() };
        Committed { index: e.index, term: e.term, data }
    }));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drive_until(group: &mut RaftGroup, want: usize) -> Vec<Committed> {
        let mut all = Vec::new();
        for _ in 0..100 {
            all.extend(group.drive().unwrap());
            if all.iter().filter(|c| !c.data.is_empty()).count() >= want {
                break;
            }
        }
        all
    }

    #[test]
    fn single_voter_commits_proposals_and_redelivers_unapplied_after_restart() {
        let dir = tempfile::tempdir().unwrap();
        let mut group = RaftGroup::open(dir.path(), 0).unwrap();
        group.drive().unwrap();
        assert!(group.is_leader());
        group.propose(b"\x01one".to_vec()).unwrap();
        group.propose(b"\x01two".to_vec()).unwrap();
        let committed = drive_until(&mut group, 2);
        let data: Vec<_> = committed.iter().filter(|c| !c.data.is_empty()).map(|c| c.data.clone()).collect();
        assert_eq!(data, vec![b"\x01one".to_vec(), b"\x01two".to_vec()]);
        let first_index = committed.iter().find(|c| !c.data.is_empty()).unwrap().index;
        drop(group);

        // state applied only the first entry: the second comes back after restart
        let mut group = RaftGroup::open(dir.path(), first_index).unwrap();
        let again = drive_until(&mut group, 1);
        let data: Vec<_> = again.iter().filter(|c| !c.data.is_empty()).map(|c| c.data.clone()).collect();
        assert_eq!(data, vec![b"\x01two".to_vec()]);
        assert!(group.is_leader());
    }

    #[test]
    fn entries_of_the_last_append_are_served_as_the_journal_holds_them() {
        let dir = tempfile::tempdir().unwrap();
        let mut group = RaftGroup::open(dir.path(), 0).unwrap();
        group.drive().unwrap();
        for p in [&b"\x01first"[..], b"\x01second entry", b"\x01third"] {
            group.propose(p.to_vec()).unwrap();
        }
        drive_until(&mut group, 3);
        let storage = group.node.store().clone();
        // Raft asked for the committed entries of the last append once, all of them: taken
        assert!(storage.recent.lock().unwrap().is_empty());
        let from_journal = |low: u64, high: u64, max: Option<u64>| -> Vec<RaftEntry> {
            storage.journal.read().unwrap().entries(low, high, max).unwrap().into_iter().map(to_raft).collect()
        };
        // held again: the three proposals, as one append would hold them
        let last = storage.journal.read().unwrap().last_index();
        let first = last - 2;
        let held = from_journal(first, last + 1, None);
        let hold = || *storage.recent.lock().unwrap() = held.clone();
        for (low, high) in [(first, last + 1), (first + 1, last + 1), (first, first + 1)] {
            for max in [None, Some(0), Some(12), Some(1 << 20)] {
                hold();
                let served = storage.recent_entries(low, high, max).expect("held");
                assert_eq!(served, from_journal(low, high, max), "{low}..{high} max {max:?}");
                hold();
                let via_raft = Storage::entries(&storage, low, high, max, GetEntriesContext::empty(false)).unwrap();
                assert_eq!(via_raft, served);
            }
        }
        hold();
        // what the last append does not hold comes from the journal
        assert!(storage.recent_entries(first - 1, last + 1, None).is_none());
        // a request for all of them takes them: the next one reads the journal
        assert_eq!(storage.recent_entries(first, last + 1, None).expect("held"), from_journal(first, last + 1, None));
        assert!(storage.recent.lock().unwrap().is_empty());
        assert!(storage.recent_entries(first, last + 1, None).is_none());
        assert_eq!(
            Storage::entries(&storage, 1, last + 1, None, GetEntriesContext::empty(false)).unwrap(),
            from_journal(1, last + 1, None)
        );
    }

    fn payloads(committed: &[Committed]) -> Vec<Vec<u8>> {
        committed.iter().filter(|c| !c.data.is_empty()).map(|c| c.data.clone()).collect()
    }

    #[test]
    fn restart_after_commit_index_was_not_persisted() {
        let dir = tempfile::tempdir().unwrap();
        let mut group = RaftGroup::open(dir.path(), 0).unwrap();
        group.drive().unwrap();
        for p in [&b"\x01a"[..], b"\x01b", b"\x01c"] {
            group.propose(p.to_vec()).unwrap();
        }
        let committed = drive_until(&mut group, 3);
        let last = committed.last().unwrap().index;
        drop(group);

        // the state machine applied everything: nothing comes back, new proposals commit
        let mut group = RaftGroup::open(dir.path(), last).unwrap();
        assert!(group.commit_index() >= last);
        group.drive().unwrap();
        group.propose(b"\x01d".to_vec()).unwrap();
        assert_eq!(payloads(&drive_until(&mut group, 1)), vec![b"\x01d".to_vec()]);
        drop(group);

        // the state machine applied nothing: every entry comes back once, in order
        let mut group = RaftGroup::open(dir.path(), 0).unwrap();
        let again = drive_until(&mut group, 4);
        assert_eq!(payloads(&again), vec![b"\x01a".to_vec(), b"\x01b".to_vec(), b"\x01c".to_vec(), b"\x01d".to_vec()]);
    }
}
