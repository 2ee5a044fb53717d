use std::collections::BTreeMap;
use std::sync::RwLock;

use crate::{KvIter, KvRead, KvStore, StateError, WriteSet};

/// In-memory store for tests and replay checks. Same contract as [`crate::RocksStore`].
#[derive(Debug, Default)]
pub struct MemoryStore {
    map: RwLock<BTreeMap<Vec<u8>, Vec<u8>>>,
}

impl MemoryStore {
    pub fn new() -> Self {
        Self::default()
    }
}

impl KvRead for MemoryStore {
    fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.map.read().expect("memory store lock").get(key).cloned()
    }

    fn scan_prefix(&self, prefix: &[u8]) -> KvIter<'_> {
        let map = self.map.read().expect("memory store lock");
        let items: Vec<_> =
            map.range(prefix.to_vec()..).take_while(|(k, _)| k.starts_with(prefix)).map(|(k, v)| (k.clone(), v.clone())).collect();
        Box::new(items.into_iter())
    }
}

impl KvStore for MemoryStore {
    fn commit(&self, writes: &WriteSet) -> Result<(), StateError> {
        let mut map = self.map.write().expect("memory store lock");
        for (k, v) in writes.iter() {
            match v {
                Some(v) => map.insert(k.clone(), v.clone()),
                None => map.remove(k),
            };
        }
        Ok(())
    }
}
