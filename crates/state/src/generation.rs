//! One generation of `RocksStore`'s write-back layer: the rows committed since a flush began.
//!
//! Rows of the tables scans read are kept in key order (a scan merges them with RocksDB's
//! iterator). Rows of *point tables*, which are only ever read by key (the engine's element
//! instances and jobs: ~40 % of the rows a W2 instance commits), are kept in a hash map, where a
//! put or a delete costs a fraction of an ordered map's search and rebalancing. A scan still
//! sees them: it looks at the hash map when a point table could hold keys under its prefix, and
//! sorts what it finds there. Which tables are point tables is a performance hint only.

use std::collections::{btree_map, hash_map, BTreeMap, HashMap};

use crate::key::{self, Key, KeyRef};
use crate::overlay::StagedWrite;
use crate::{PointTables, Row};

#[derive(Clone)]
pub(crate) struct Generation {
    point_tables: PointTables,
    ordered: BTreeMap<Key, Row>,
    points: HashMap<Vec<u8>, Row, foldhash::fast::RandomState>,
}

/// What committing a row does to the row a generation holds for its key.
enum Change {
    Replace(Vec<u8>),
    Remove,
    /// Turn the held put into a delete (something below holds the key).
    Delete,
    Keep,
}

impl Generation {
    pub(crate) fn new(point_tables: PointTables) -> Self {
        Self { point_tables, ordered: BTreeMap::new(), points: HashMap::default() }
    }

    pub(crate) fn point_tables(&self) -> PointTables {
        self.point_tables.clone()
    }

    pub(crate) fn len(&self) -> usize {
        self.ordered.len() + self.points.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.ordered.is_empty() && self.points.is_empty()
    }

    pub(crate) fn get(&self, key: &[u8]) -> Option<&Row> {
        if self.point_tables.holds(key) {
            self.points.get(key)
        } else {
            self.ordered.get(KeyRef::new(key))
        }
    }

    /// Every row, in no particular order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&[u8], &Row)> {
        self.ordered.iter().map(|(k, r)| (k.0.as_slice(), r)).chain(self.points.iter().map(|(k, r)| (k.as_slice(), r)))
    }

    /// The rows under `prefix`, in key order.
    pub(crate) fn range_prefix(&self, prefix: &[u8]) -> Vec<StagedWrite> {
        let mut rows: Vec<StagedWrite> = key::prefix_range(&self.ordered, prefix).map(|(k, r)| (k.clone(), r.value.clone())).collect();
        if self.point_tables.may_hold_under(prefix) && !self.points.is_empty() {
            let before = rows.len();
            rows.extend(self.points.iter().filter(|(k, _)| k.starts_with(prefix)).map(|(k, r)| (k.clone(), r.value.clone())));
            if rows.len() > before {
                rows.sort_unstable_by(|(a, _), (b, _)| a.cmp(b));
            }
        }
        rows
    }

    /// Adds `newer`'s rows over this generation's.
    pub(crate) fn extend(&mut self, newer: Generation) {
        self.ordered.extend(newer.ordered);
        self.points.extend(newer.points);
    }

    /// Commits `row` for `key` (see `RocksStore::commit_rows`). `below` tells whether a store
    /// below this generation may hold the key; it is asked only when a held put is deleted.
    pub(crate) fn commit(&mut self, key: Key, row: Row, below: impl FnOnce(&[u8]) -> bool) {
        if self.point_tables.holds(&key.0) {
            match self.points.entry(key.0) {
                hash_map::Entry::Vacant(vacant) => {
                    vacant.insert(row);
                }
                hash_map::Entry::Occupied(mut held) => match change(held.get(), row, || below(held.key())) {
                    Change::Remove => {
                        held.remove();
                    }
                    other => apply(held.get_mut(), other),
                },
            }
        } else {
            match self.ordered.entry(key) {
                btree_map::Entry::Vacant(vacant) => {
                    vacant.insert(row);
                }
                btree_map::Entry::Occupied(mut held) => match change(held.get(), row, || below(&held.key().0)) {
                    Change::Remove => {
                        held.remove();
                    }
                    other => apply(held.get_mut(), other),
                },
            }
        }
    }
}

/// The rule for a row committed over a held one.
fn change(held: &Row, incoming: Row, below: impl FnOnce() -> bool) -> Change {
    match incoming.value {
        // a row put again keeps its freshness: nothing below has it yet either
        Some(value) => Change::Replace(value),
        None if held.fresh => Change::Remove,
        // a row put since the last flush began that nothing below holds is dropped
        None if held.value.is_some() => {
            if below() {
                Change::Delete
            } else {
                Change::Remove
            }
        }
        None => Change::Keep,
    }
}

fn apply(held: &mut Row, change: Change) {
    match change {
        Change::Replace(value) => held.value = Some(value),
        Change::Delete => held.value = None,
        Change::Remove | Change::Keep => {}
    }
}
