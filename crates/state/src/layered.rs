//! A store seen through write sets that are not committed to it yet: a replicated leader's
//! batches in flight (processed, proposed, not yet committed), which the next batch must see.

use crate::overlay::{newer_wins, Merge, StagedWrite};
use crate::{KvIter, KvRead, PointTables, WriteSet};

/// `base` seen through `layers` (oldest first): a key's value is the newest layer's write of
/// it (a delete hides the key), else the base's. Neither the base nor a layer may change while
/// the view is read by an [`crate::Overlay`] (it remembers what it read).
pub struct Layered<'a> {
    base: &'a dyn KvRead,
    layers: Vec<&'a WriteSet>,
}

impl<'a> Layered<'a> {
    /// `base` under `layers`, the oldest first.
    pub fn new(base: &'a dyn KvRead, layers: Vec<&'a WriteSet>) -> Self {
        Self { base, layers }
    }
}

impl KvRead for Layered<'_> {
    fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        for layer in self.layers.iter().rev() {
            if let Some(write) = layer.get(key) {
                return write.clone();
            }
        }
        self.base.get(key)
    }

    fn scan_prefix(&self, prefix: &[u8]) -> KvIter<'_> {
        let mut staged: Vec<StagedWrite> = Vec::new();
        for layer in &self.layers {
            let newer: Vec<StagedWrite> = layer.range_prefix(prefix).map(|(k, v)| (k.clone(), v.clone())).collect();
            staged = newer_wins(staged, newer);
        }
        Box::new(Merge::new(self.base.scan_prefix(prefix), staged))
    }

    fn point_tables(&self) -> PointTables {
        self.base.point_tables()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{KvStore, MemoryStore, Overlay};

    fn set(writes: &[(&str, Option<&str>)]) -> WriteSet {
        let mut set = WriteSet::default();
        for (k, v) in writes {
            match v {
                Some(v) => set.put(k.as_bytes().to_vec(), v.as_bytes().to_vec()),
                None => set.delete(k.as_bytes().to_vec()),
            }
        }
        set
    }

    fn pairs(iter: KvIter<'_>) -> Vec<(String, String)> {
        iter.map(|(k, v)| (String::from_utf8(k).unwrap(), String::from_utf8(v).unwrap())).collect()
    }

    #[test]
    fn the_newest_layer_wins_and_deletes_hide_what_is_below() {
        let base = MemoryStore::new();
        base.commit(&set(&[("a/1", Some("base")), ("a/2", Some("base")), ("a/3", Some("base")), ("b/1", Some("base"))])).unwrap();
        let older = set(&[("a/1", Some("older")), ("a/2", None), ("a/4", Some("older"))]);
        let newer = set(&[("a/1", Some("newer")), ("a/4", None), ("a/5", Some("newer")), ("a/2", Some("newer"))]);
        let view = Layered::new(&base, vec![&older, &newer]);
        assert_eq!(view.get(b"a/1").as_deref(), Some(&b"newer"[..]));
        assert_eq!(view.get(b"a/2").as_deref(), Some(&b"newer"[..]));
        assert_eq!(view.get(b"a/3").as_deref(), Some(&b"base"[..]));
        assert_eq!(view.get(b"a/4"), None);
        let scanned = pairs(view.scan_prefix(b"a/"));
        let expected: Vec<(String, String)> = [("a/1", "newer"), ("a/2", "newer"), ("a/3", "base"), ("a/5", "newer")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        assert_eq!(scanned, expected);
        // only the older layer: its delete hides the base's row
        let view = Layered::new(&base, vec![&older]);
        assert_eq!(view.get(b"a/2"), None);
        assert_eq!(pairs(view.scan_prefix(b"a/")).len(), 3);
    }

    #[test]
    fn committing_the_layers_in_order_gives_what_the_view_showed() {
        let base = MemoryStore::new();
        base.commit(&set(&[("k/1", Some("0")), ("k/2", Some("0"))])).unwrap();
        let first = set(&[("k/1", Some("1")), ("k/3", Some("1"))]);
        // the second batch runs on the first one's writes, uncommitted
        let second = {
            let view = Layered::new(&base, vec![&first]);
            let mut overlay = Overlay::new(&view);
            assert_eq!(overlay.get(b"k/3").as_deref(), Some(&b"1"[..]));
            overlay.delete(b"k/3".to_vec());
            overlay.delete(b"k/2".to_vec());
            overlay.put(b"k/4".to_vec(), b"2".to_vec());
            overlay.into_writes()
        };
        let shown = pairs(Layered::new(&base, vec![&first, &second]).scan_prefix(b"k/"));
        base.commit_owned(first).unwrap();
        base.commit_owned(second).unwrap();
        assert_eq!(pairs(base.scan_prefix(b"k/")), shown);
        assert_eq!(shown, vec![("k/1".to_string(), "1".to_string()), ("k/4".to_string(), "2".to_string())]);
    }
}
