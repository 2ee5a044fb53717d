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
mod layered;
mod memory;
mod overlay;
mod rocks;
mod scan_hints;
mod table_upgrade;

use std::collections::{btree_map, hash_map, BTreeMap, HashMap};
use std::sync::Arc;

use key::{Key, KeyRef};

pub use layered::Layered;
pub use memory::MemoryStore;
pub use overlay::{AbsentFromBase, Overlay};
pub use rocks::{RocksStore, StoreMemory, StoredAbsence, COMPACT_AFTER_DELETES};

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
    /// The store's point tables (see [`PointTables`]), for write sets staged over it.
    fn point_tables(&self) -> PointTables {
        PointTables::default()
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
///
/// Rows of point tables (see [`RocksStore::open_with_point_tables`]; the set's own list, given
/// by [`WriteSet::with_point_tables`] and empty by default) are kept in a hash map, the others in
/// key order: a W2 instance stages ~22 rows, ~40 % of them element instances and jobs, and an
/// ordered map's insert cost ~1,000 instructions against a hash map's ~150.
#[derive(Debug, Default, Clone)]
pub struct WriteSet {
    ordered: BTreeMap<Key, Row>,
    points: HashMap<Vec<u8>, Row, foldhash::fast::RandomState>,
    point_tables: PointTables,
}

/// Key prefixes of the tables that are only ever read by key (a speed hint: scans see their
/// rows too, more slowly). Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct PointTables(Arc<[Vec<u8>]>);

impl PointTables {
    /// Whether `key` is a row of a point table.
    pub(crate) fn holds(&self, key: &[u8]) -> bool {
        self.0.iter().any(|table| key.starts_with(table))
    }

    /// Whether a point table's row may have a key starting with `prefix`.
    pub(crate) fn may_hold_under(&self, prefix: &[u8]) -> bool {
        self.0.iter().any(|table| table.starts_with(prefix) || prefix.starts_with(table))
    }
}

impl FromIterator<Vec<u8>> for PointTables {
    fn from_iter<I: IntoIterator<Item = Vec<u8>>>(tables: I) -> Self {
        PointTables(tables.into_iter().collect())
    }
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
    /// An empty set keeping the rows of `point_tables` in its hash map.
    pub fn with_point_tables(point_tables: PointTables) -> Self {
        Self { point_tables, ..Self::default() }
    }

    fn insert(&mut self, key: Vec<u8>, row: Row) {
        if self.point_tables.holds(&key) {
            self.points.insert(key, row);
        } else {
            self.ordered.insert(Key(key), row);
        }
    }

    pub fn put(&mut self, key: Vec<u8>, value: Vec<u8>) {
        self.insert(key, Row { value: Some(value), fresh: false });
    }
    /// As [`Self::put`], for a key that the store committed to does not hold (a row of an
    /// entity created by this batch). Wrongly marked, a later delete of the key could leave
    /// an older value in place.
    pub fn put_fresh(&mut self, key: Vec<u8>, value: Vec<u8>) {
        self.insert(key, Row { value: Some(value), fresh: true });
    }
    pub fn delete(&mut self, key: Vec<u8>) {
        self.insert(key, Row { value: None, fresh: false });
    }
    /// Deletes `key` with one look-up of what is staged: a put staged here, or one staged
    /// elsewhere (`put_elsewhere`, such as an overlay's decoded values), of a key that no store
    /// below holds is forgotten (`below_has` answers; it is not asked for a fresh put); anything
    /// else becomes a tombstone.
    pub(crate) fn delete_over(&mut self, key: Vec<u8>, put_elsewhere: bool, below_has: impl FnOnce(&[u8]) -> bool) {
        let forget = |row: Option<&Row>, key: &[u8]| match row {
            Some(Row { value: Some(_), fresh: true }) => true,
            Some(Row { value: Some(_), fresh: false }) => !below_has(key),
            _ => put_elsewhere && !below_has(key),
        };
        let tombstone = Row { value: None, fresh: false };
        if self.point_tables.holds(&key) {
            match self.points.entry(key) {
                hash_map::Entry::Occupied(mut row) => {
                    if forget(Some(row.get()), row.key()) {
                        row.remove();
                    } else {
                        *row.get_mut() = tombstone;
                    }
                }
                hash_map::Entry::Vacant(row) => {
                    if !forget(None, row.key()) {
                        row.insert(tombstone);
                    }
                }
            }
        } else {
            match self.ordered.entry(Key(key)) {
                btree_map::Entry::Occupied(mut row) => {
                    if forget(Some(row.get()), &row.key().0) {
                        row.remove();
                    } else {
                        *row.get_mut() = tombstone;
                    }
                }
                btree_map::Entry::Vacant(row) => {
                    if !forget(None, &row.key().0) {
                        row.insert(tombstone);
                    }
                }
            }
        }
    }
    pub fn get(&self, key: &[u8]) -> Option<&Option<Vec<u8>>> {
        let row = if self.point_tables.holds(key) { self.points.get(key) } else { self.ordered.get(KeyRef::new(key)) };
        row.map(|r| &r.value)
    }
    pub fn is_empty(&self) -> bool {
        self.ordered.is_empty() && self.points.is_empty()
    }
    pub fn len(&self) -> usize {
        self.ordered.len() + self.points.len()
    }
    /// Every staged entry with its freshness (see [`Self::put_fresh`]), in no particular order.
    pub fn rows(&self) -> impl Iterator<Item = (&[u8], Option<&[u8]>, bool)> {
        self.ordered
            .iter()
            .map(|(k, r)| (k.0.as_slice(), r))
            .chain(self.points.iter().map(|(k, r)| (k.as_slice(), r)))
            .map(|(k, r)| (k, r.value.as_deref(), r.fresh))
    }
    /// Every staged entry, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&Vec<u8>, &Option<Vec<u8>>)> {
        self.ordered.iter().map(|(k, r)| (&k.0, &r.value)).chain(self.points.iter().map(|(k, r)| (k, &r.value)))
    }
    /// Staged entries whose key starts with `prefix`, in key order.
    pub fn range_prefix<'a>(&'a self, prefix: &'a [u8]) -> impl Iterator<Item = (&'a Vec<u8>, &'a Option<Vec<u8>>)> + 'a {
        let ordered = key::prefix_range(&self.ordered, prefix).map(|(k, r)| (k, &r.value));
        let mut points: Vec<_> = if self.point_tables.may_hold_under(prefix) {
            self.points.iter().filter(|(k, _)| k.starts_with(prefix)).map(|(k, r)| (k, &r.value)).collect()
        } else {
            Vec::new()
        };
        if points.is_empty() {
            return PrefixRange::Ordered(ordered);
        }
        // a scan over a point table (never the engine's): sorted here
        points.extend(ordered);
        points.sort_unstable_by(|(a, _), (b, _)| key::compare(a, b));
        PrefixRange::Sorted(points.into_iter())
    }
    /// The entries with their freshness, in no particular order.
    pub(crate) fn into_rows(self) -> impl Iterator<Item = (Key, Row)> {
        self.ordered.into_iter().chain(self.points.into_iter().map(|(k, r)| (Key(k), r)))
    }
    /// Moves all of `other`'s entries into this set (later writes win).
    pub fn absorb(&mut self, other: WriteSet) {
        if self.is_empty() {
            // other's rows, kept as other keeps them (which tables are point tables is a hint)
            *self = other;
            return;
        }
        for (key, row) in other.into_rows() {
            self.insert(key.0, row);
        }
    }
}

/// [`WriteSet::range_prefix`]'s entries: straight from the ordered map, or sorted when a point
/// table's rows are among them.
enum PrefixRange<O, S> {
    Ordered(O),
    Sorted(S),
}

impl<T, O: Iterator<Item = T>, S: Iterator<Item = T>> Iterator for PrefixRange<O, S> {
    type Item = T;

    fn next(&mut self) -> Option<T> {
        match self {
            PrefixRange::Ordered(o) => o.next(),
            PrefixRange::Sorted(s) => s.next(),
        }
    }
}

#[cfg(test)]
mod contract_tests;
