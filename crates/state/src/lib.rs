//! Partition state storage: an ordered key-value store with two implementations (RocksDB and
//! in-memory) and an [`Overlay`] that stages a processing batch's writes.
//!
//! Owns: bytes in, bytes out, ordering, atomic batches, checkpoints. Does not own: what the
//! keys mean (the engine's tables encode them) or when to write (the broker decides).
//!
//! Contract: [`KvStore::commit`] applies a [`WriteSet`] atomically; readers of an [`Overlay`] see
//! the staged writes over the store. A storage *read* failure is not recoverable by the engine:
//! implementations panic with the cause, and the partition is restarted from its snapshot + log.

mod generation;
mod key;
mod memory;
mod overlay;
mod rocks;
mod scan_hints;

use std::collections::BTreeMap;

use key::{Key, KeyRef};

pub use memory::MemoryStore;
pub use overlay::{AbsentFromBase, Overlay};
pub use rocks::{RocksStore, StoredAbsence, COMPACT_AFTER_DELETES};

#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("rocksdb: {0}")]
    Rocks(#[from] rocksdb::Error),
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
}

/// Key-value pairs in key order.
pub type KvIter<'a> = Box<dyn Iterator<Item = (Vec<u8>, Vec<u8>)> + 'a>;

/// A value held in decoded form by an [`Overlay`] (see there), able to encode itself again.
pub trait DecodedValue: std::any::Any {
    fn encode(&self) -> Vec<u8>;
    fn as_any(&self) -> &dyn std::any::Any;
    fn as_any_mut(&mut self) -> &mut dyn std::any::Any;
}

/// Turns stored bytes into their decoded value.
pub type DecodeFn<'f> = &'f dyn Fn(&[u8]) -> Box<dyn DecodedValue>;

/// Read access to ordered key-value state.
pub trait KvRead {
    fn get(&self, key: &[u8]) -> Option<Vec<u8>>;
    /// All pairs whose key starts with `prefix`, in key order.
    fn scan_prefix(&self, prefix: &[u8]) -> KvIter<'_>;
    /// Shows `read` the value of `key` decoded by `decode` (None when there is no such key).
    /// An [`Overlay`] keeps it decoded for its life; other stores decode at every call.
    fn read_decoded(&self, key: &[u8], decode: DecodeFn, read: &mut dyn FnMut(Option<&dyn DecodedValue>)) {
        let value = self.get(key).map(|bytes| decode(&bytes));
        read(value.as_deref());
    }
}

/// A store that can apply write sets atomically.
pub trait KvStore: KvRead + Send + Sync {
    fn commit(&self, writes: &WriteSet) -> Result<(), StateError>;
    /// As [`Self::commit`], taking the write set (a store that keeps rows can move them).
    fn commit_owned(&self, writes: WriteSet) -> Result<(), StateError> {
        self.commit(&writes)
    }
    /// Every pair in the store, in key order (tests and consistency checks).
    fn dump(&self) -> Vec<(Vec<u8>, Vec<u8>)> {
        self.scan_prefix(&[]).collect()
    }
}

/// Staged writes: `Some(value)` puts, `None` deletes.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct WriteSet {
    entries: BTreeMap<Key, Row>,
}

/// One key's write. `fresh` (puts only) promises that no store below held the key when it was
/// put, so a later delete of it needs no tombstone and no look-up below (see
/// [`WriteSet::put_fresh`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Row {
    pub value: Option<Vec<u8>>,
    pub fresh: bool,
}

impl WriteSet {
    pub fn put(&mut self, key: Vec<u8>, value: Vec<u8>) {
        self.entries.insert(Key(key), Row { value: Some(value), fresh: false });
    }
    /// As [`Self::put`], for a key that the store committed to does not hold (a row of an
    /// entity created by this batch). Wrongly marked, a later delete of the key could leave
    /// an older value in place.
    pub fn put_fresh(&mut self, key: Vec<u8>, value: Vec<u8>) {
        self.entries.insert(Key(key), Row { value: Some(value), fresh: true });
    }
    pub fn delete(&mut self, key: Vec<u8>) {
        self.entries.insert(Key(key), Row { value: None, fresh: false });
    }
    /// Forgets whatever is staged for `key`.
    pub fn unstage(&mut self, key: &[u8]) {
        self.entries.remove(KeyRef::new(key));
    }
    pub fn get(&self, key: &[u8]) -> Option<&Option<Vec<u8>>> {
        self.entries.get(KeyRef::new(key)).map(|r| &r.value)
    }
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
    pub fn len(&self) -> usize {
        self.entries.len()
    }
    pub fn iter(&self) -> impl Iterator<Item = (&Vec<u8>, &Option<Vec<u8>>)> {
        self.entries.iter().map(|(k, r)| (&k.0, &r.value))
    }
    /// Staged entries whose key starts with `prefix`, in key order.
    pub fn range_prefix<'a>(&'a self, prefix: &'a [u8]) -> impl Iterator<Item = (&'a Vec<u8>, &'a Option<Vec<u8>>)> + 'a {
        key::prefix_range(&self.entries, prefix).map(|(k, r)| (k, &r.value))
    }
    /// The entries with their freshness, in key order.
    pub(crate) fn into_rows(self) -> impl Iterator<Item = (Key, Row)> {
        self.entries.into_iter()
    }
    /// Moves all of `other`'s entries into this set (later writes win).
    pub fn absorb(&mut self, other: WriteSet) {
        self.entries.extend(other.entries);
    }
}

#[cfg(test)]
mod contract_tests;
