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

    // a key put and deleted in one overlay never reaches the base (no tombstone is staged);
    // a key the base has is deleted there
    let mut ov = Overlay::new(store);
    ov.put(b"c/1".to_vec(), b"t".to_vec());
    ov.delete(b"c/1".to_vec());
    ov.put(b"a/0".to_vec(), b"newer".to_vec());
    ov.delete(b"a/0".to_vec());
    assert_eq!(ov.get(b"c/1"), None);
    assert_eq!(ov.get(b"a/0"), None);
    assert_eq!(ov.writes().get(b"c/1"), None, "nothing staged for a key the base never had");
    assert_eq!(ov.writes().get(b"a/0"), Some(&None), "a delete staged for a key the base has");
    store.commit(&ov.into_writes()).unwrap();
    assert_eq!(store.get(b"a/0"), None);
    assert_eq!(store.scan_prefix(b"c/").count(), 0);
}

#[test]
fn rocks_store_scans_stay_within_their_prefix_after_many_deletes() {
    // deleting enough keys starts a compaction of the queue tables in the background; scans
    // see the same either way
    let dir = tempfile::tempdir().unwrap();
    let store = RocksStore::open(&dir.path().join("db")).unwrap();
    let n = crate::COMPACT_AFTER_DELETES + 10;
    for round in 0..2 {
        let mut ws = WriteSet::default();
        for i in 0..n {
            let key = format!("A/t\0{i:08}").into_bytes();
            if round == 0 {
                ws.put(key, vec![]);
            } else if i % 1000 != 0 {
                ws.delete(key);
            }
        }
        store.commit(&ws).unwrap();
    }
    let mut ws = WriteSet::default();
    ws.put(b"B/1".to_vec(), b"b".to_vec());
    store.commit(&ws).unwrap();
    assert_eq!(store.scan_prefix(b"A/t\0").count() as u64, n.div_ceil(1000));
    assert_eq!(store.scan_prefix(b"A/").count() as u64, n.div_ceil(1000));
    assert_eq!(store.scan_prefix(b"B/").collect::<Vec<_>>(), vec![(b"B/1".to_vec(), b"b".to_vec())]);
    assert_eq!(store.scan_prefix(&[0xff, 0xff]).count(), 0);
}

#[test]
fn rocks_store_queue_scans_see_every_live_key_whatever_their_hints() {
    // scans of queue tables start past the keys earlier scans found deleted; a key put below
    // that point later must still be seen, and a scan must not start past a live key
    let dir = tempfile::tempdir().unwrap();
    let store = RocksStore::open(&dir.path().join("db")).unwrap();
    let keys =
        |store: &RocksStore, prefix: &[u8]| store.scan_prefix(prefix).map(|(k, _)| String::from_utf8(k).unwrap()).collect::<Vec<_>>();
    let commit = |puts: &[&str], deletes: &[&str]| {
        let mut ws = WriteSet::default();
        puts.iter().for_each(|k| ws.put(k.as_bytes().to_vec(), vec![]));
        deletes.iter().for_each(|k| ws.delete(k.as_bytes().to_vec()));
        store.commit(&ws).unwrap();
    };
    commit(&["A/t|1", "A/t|2", "A/t|3", "TD/5", "TD/6"], &[]);
    assert_eq!(keys(&store, b"A/t|"), ["A/t|1", "A/t|2", "A/t|3"]);
    commit(&[], &["A/t|1", "A/t|2"]);
    assert_eq!(keys(&store, b"A/t|"), ["A/t|3"]); // learns: nothing below 3
    commit(&["A/t|1"], &[]); // back below the hint (a failed job with retries left)
    assert_eq!(keys(&store, b"A/t|"), ["A/t|1", "A/t|3"]);
    commit(&[], &["A/t|1", "A/t|3"]);
    assert!(keys(&store, b"A/t|").is_empty()); // learns: the prefix is empty
    commit(&["A/t|2"], &[]);
    assert_eq!(keys(&store, b"A/t|"), ["A/t|2"]);
    assert_eq!(keys(&store, b"A/"), ["A/t|2"], "a wider prefix keeps its own hint");
    // a scan racing commits from another thread never misses a key that was committed before it
    std::thread::scope(|scope| {
        let store = &store;
        scope.spawn(move || {
            for i in 0..2_000 {
                let mut ws = WriteSet::default();
                ws.put(format!("TD/{:04}", 4_000 - i).into_bytes(), vec![]);
                store.commit(&ws).unwrap();
            }
        });
        let mut seen = 0;
        while seen < 2_002 {
            let now = store.scan_prefix(b"TD/").count();
            assert!(now >= seen, "a scan saw {now} keys after one saw {seen}");
            seen = now;
        }
    });
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
    assert_eq!(restored.dump().len(), 2);
}
