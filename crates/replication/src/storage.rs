//! Raft's view of the partition's journal (`raft::Storage` over [`waggle_log::Journal`]).

use std::sync::{Arc, Mutex, RwLock};

use raft::prelude::{ConfState, Entry as RaftEntry, EntryType, HardState, Snapshot};
use raft::storage::{RaftState, Storage};
use raft::{GetEntriesContext, StorageError};
use waggle_log::{Journal, JournalError};

use crate::conf::ConfHistory;
use crate::SnapshotSource;

/// Raft's view of the journal.
#[derive(Clone)]
pub(crate) struct JournalStorage {
    pub(crate) journal: Arc<RwLock<Journal>>,
    /// The group's membership through its changes.
    pub(crate) conf: Arc<RwLock<ConfHistory>>,
    /// The entries of the latest appends (contiguous, at most [`RECENT_ENTRIES`] and about
    /// [`RECENT_BYTES`]), as Raft gave them: a node asks for them again as soon as they are
    /// committed (a leader with several batches in flight, a follower told of the commit with a
    /// later append), and they are served from here instead of read back from the file. Entries
    /// served from the first one held are taken, not copied (later requests read the file).
    pub(crate) recent: Arc<Mutex<Vec<RaftEntry>>>,
    /// Names the files of the state at the compaction point (none: no snapshot to send).
    pub(crate) source: Arc<RwLock<Option<Arc<dyn SnapshotSource>>>>,
}

impl JournalStorage {
    /// Entries `low..high` from the latest appends, if they hold all of them (at most
    /// `max_size` bytes, and at least one entry, as Raft's storage contract limits them). Served
    /// entries from the first one held are taken, not copied.
    pub(crate) fn recent_entries(&self, low: u64, high: u64, max_size: Option<u64>) -> Option<Vec<RaftEntry>> {
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
        if low == first {
            return Some(recent.drain(..count).collect());
        }
        Some(wanted[..count].to_vec())
    }

    /// Holds the entries of an append (durable now) after those held, replacing what they
    /// overwrite (a follower's log repaired) and dropping the oldest beyond the bounds.
    pub(crate) fn hold_recent(&self, appended: Vec<RaftEntry>) {
        let Some(start) = appended.first().map(|e| e.index) else { return };
        let mut recent = self.recent.lock().expect("recent entries lock");
        match recent.first().map(|e| e.index) {
            Some(first) if start >= first && start <= first + recent.len() as u64 => recent.truncate((start - first) as usize),
            _ => recent.clear(),
        }
        recent.extend(appended);
        let mut drop = recent.len().saturating_sub(RECENT_ENTRIES);
        let mut bytes: usize = recent[drop..].iter().map(|e| e.data.len()).sum();
        for e in &recent[drop..] {
            if bytes <= RECENT_BYTES || drop + 1 == recent.len() {
                break;
            }
            bytes -= e.data.len();
            drop += 1;
        }
        recent.drain(..drop);
    }
}

/// Entries [`JournalStorage::recent`] holds at most ...
pub(crate) const RECENT_ENTRIES: usize = 64;
/// ... and the bytes beyond which it drops the oldest (it keeps the newest entry whatever its size).
const RECENT_BYTES: usize = 32 << 20;

fn store_err(e: JournalError) -> raft::Error {
    raft::Error::Store(StorageError::Other(Box::new(e)))
}

impl Storage for JournalStorage {
    fn initial_state(&self) -> raft::Result<RaftState> {
        let j = self.journal.read().expect("journal lock");
        let hs = j.hard_state();
        let hard_state = HardState { term: hs.term, vote: hs.vote, commit: hs.commit };
        let conf_state: ConfState = self.conf.read().expect("conf lock").latest();
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

    /// The snapshot at the compaction point, when the owner's source has its files: Raft sends
    /// it to a follower that needs entries below the log's first one. The metadata is all it
    /// holds; the files travel in the group's snapshot transfer ([`crate::snapshot`]).
    fn snapshot(&self, _request_index: u64, to: u64) -> raft::Result<Snapshot> {
        let j = self.journal.read().expect("journal lock");
        let index = j.first_index() - 1;
        let term = j.term(index).unwrap_or(0);
        let source = self.source.read().expect("snapshot source lock");
        if index == 0 || source.as_ref().is_none_or(|s| s.files_at(index, term).is_none()) {
            return Err(raft::Error::Store(StorageError::SnapshotTemporarilyUnavailable));
        }
        // a replica added after the snapshot's index would refuse it (it is not in its
        // configuration): it waits for a snapshot taken after it was added
        let conf = self.conf.read().expect("conf lock").at(index);
        if !conf.voters.contains(&to) && !conf.learners.contains(&to) {
            return Err(raft::Error::Store(StorageError::SnapshotTemporarilyUnavailable));
        }
        let mut snapshot = Snapshot::default();
        let meta = snapshot.mut_metadata();
        meta.index = index;
        meta.term = term;
        meta.set_conf_state(conf);
        Ok(snapshot)
    }
}

pub(crate) fn to_raft(e: waggle_log::Entry) -> RaftEntry {
    if e.data.first() != Some(&CONF_MARKER) {
        return RaftEntry { entry_type: EntryType::EntryNormal as i32, term: e.term, index: e.index, data: e.data, ..Default::default() };
    }
    let kind = if e.data.get(1) == Some(&CONF_V2) { EntryType::EntryConfChangeV2 } else { EntryType::EntryConfChange };
    let data = e.data.get(2..).unwrap_or_default().to_vec();
    RaftEntry { entry_type: kind as i32, term: e.term, index: e.index, data, ..Default::default() }
}

/// Journal entries of Raft configuration changes start with this byte (normal entries are
/// stored as given; Waggle's own entries never start with it: their first byte is a codec
/// version, and version 0xFF is reserved), then [`CONF_V1`] or [`CONF_V2`] for the kind.
pub(crate) const CONF_MARKER: u8 = 0xFF;
/// A `ConfChange` (Raft's simple change) follows.
pub(crate) const CONF_V1: u8 = 1;
/// A `ConfChangeV2` (joint consensus) follows.
pub(crate) const CONF_V2: u8 = 2;

pub(crate) fn from_raft(e: RaftEntry) -> waggle_log::Entry {
    let kind = match e.entry_type {
        t if t == EntryType::EntryConfChange as i32 => Some(CONF_V1),
        t if t == EntryType::EntryConfChangeV2 as i32 => Some(CONF_V2),
        _ => None,
    };
    let data = match kind {
        Some(kind) => {
            let mut d = vec![CONF_MARKER, kind];
            d.extend_from_slice(&e.data);
            d
        }
        None => e.data,
    };
    waggle_log::Entry { index: e.index, term: e.term, data }
}
