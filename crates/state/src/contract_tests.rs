//! One suite, run against every store implementation.

use crate::{KvRead, KvStore, MemoryStore, Overlay, RocksStore, WriteSet};

fn suite(store: &dyn KvStore) {
    let mut ws = WriteSet::default();
    ws.put(b"a/1".to_vec(), b"x".to_vec());
    ws.put(b"a/2".to_vec(), b"y".to_vec());
    ws.put(b"b/1".to_vec(), b"z".to_vec());
    store.commit(&ws).unwrap();
    assert_eq!(store.get(b"a/1"), Some(b"x".to_vec()));
    assert_eq!(store.get(b"nope"), None);
    let a: Vec<_> = store.scan_prefix(b"a/").map(|(k, _)| k).collect();
    assert_eq!(a, vec![b"a/1".to_vec(), b"a/2".to_vec()]);

    // overlay: staged put, staged delete, new key, all merged in order
    let mut ov = Overlay::new(store);
    ov.put(b"a/0".to_vec(), b"new".to_vec());
    ov.delete(b"a/1".to_vec());
    ov.put(b"a/2".to_vec(), b"y2".to_vec());
    let seen: Vec<_> = ov.scan_prefix(b"a/").collect();
    assert_eq!(seen, vec![(b"a/0".to_vec(), b"new".to_vec()), (b"a/2".to_vec(), b"y2".to_vec())]);
    assert_eq!(ov.get(b"a/1"), None);
    assert_eq!(store.get(b"a/1"), Some(b"x".to_vec()), "base untouched until commit");
    let writes = ov.into_writes();
    store.commit(&writes).unwrap();
    assert_eq!(store.dump(), vec![(b"a/0".to_vec(), b"new".to_vec()), (b"a/2".to_vec(), b"y2".to_vec()), (b"b/1".to_vec(), b"z".to_vec())]);
}

#[test]
fn memory_store_meets_the_contract() {
    suite(&MemoryStore::new());
}

#[test]
fn rocks_store_meets_the_contract_and_checkpoints() {
    let dir = tempfile::tempdir().unwrap();
    let store = RocksStore::open(&dir.path().join("db")).unwrap();
    suite(&store);
    let cp = dir.path().join("cp");
    store.checkpoint(&cp).unwrap();
    drop(store);
    let restored = RocksStore::open(&cp).unwrap();
    assert_eq!(restored.get(b"b/1"), Some(b"z".to_vec()));
    assert_eq!(restored.dump().len(), 3);
}
