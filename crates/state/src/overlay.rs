use std::cell::RefCell;
use std::collections::HashMap;
use std::iter::Peekable;

use crate::{KvIter, KvRead, WriteSet};

/// A store seen through staged writes: reads see `writes` first, then `base`. Point reads of
/// the base are remembered for the overlay's life (a batch reads the same element instance,
/// job or process several times), so the base must not change underneath an overlay.
pub struct Overlay<'a> {
    base: &'a dyn KvRead,
    writes: WriteSet,
    base_reads: RefCell<HashMap<Vec<u8>, Option<Vec<u8>>>>,
}

impl<'a> Overlay<'a> {
    pub fn new(base: &'a dyn KvRead) -> Self {
        Self { base, writes: WriteSet::default(), base_reads: RefCell::default() }
    }

    fn base_get(&self, key: &[u8]) -> Option<Vec<u8>> {
        if let Some(cached) = self.base_reads.borrow().get(key) {
            return cached.clone();
        }
        let value = self.base.get(key);
        self.base_reads.borrow_mut().insert(key.to_vec(), value.clone());
        value
    }
    pub fn put(&mut self, key: Vec<u8>, value: Vec<u8>) {
        self.writes.put(key, value);
    }
    /// Deletes `key`. A key put in this overlay that the base does not have is simply
    /// unstaged: the base never sees it, and gets no tombstone (tombstones slow down scans).
    pub fn delete(&mut self, key: Vec<u8>) {
        if matches!(self.writes.get(&key), Some(Some(_))) && self.base_get(&key).is_none() {
            self.writes.unstage(&key);
        } else {
            self.writes.delete(key);
        }
    }
    pub fn writes(&self) -> &WriteSet {
        &self.writes
    }
    pub fn into_writes(self) -> WriteSet {
        self.writes
    }
}

impl KvRead for Overlay<'_> {
    fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        match self.writes.get(key) {
            Some(staged) => staged.clone(),
            None => self.base_get(key),
        }
    }

    fn scan_prefix(&self, prefix: &[u8]) -> KvIter<'_> {
        let staged: Vec<(Vec<u8>, Option<Vec<u8>>)> = self.writes.range_prefix(prefix).map(|(k, v)| (k.clone(), v.clone())).collect();
        Box::new(Merge { base: self.base.scan_prefix(prefix).peekable(), staged: staged.into_iter().peekable() })
    }
}

/// A staged write: `None` deletes the key.
type StagedWrite = (Vec<u8>, Option<Vec<u8>>);

/// Merge-join of base pairs and staged writes, both in key order; staged entries win.
struct Merge<'a> {
    base: Peekable<KvIter<'a>>,
    staged: Peekable<std::vec::IntoIter<StagedWrite>>,
}

impl Iterator for Merge<'_> {
    type Item = (Vec<u8>, Vec<u8>);

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let take_staged = match (self.base.peek(), self.staged.peek()) {
                (None, None) => return None,
                (Some(_), None) => false,
                (None, Some(_)) => true,
                (Some((bk, _)), Some((sk, _))) => {
                    if bk == sk {
                        self.base.next();
                        true
                    } else {
                        sk < bk
                    }
                }
            };
            if take_staged {
                let (k, v) = self.staged.next()?;
                if let Some(v) = v {
                    return Some((k, v));
                }
            } else {
                return self.base.next();
            }
        }
    }
}
