//! One suite, run against every store implementation.

use crate::{DecodedValue, KvRead, KvStore, MemoryStore, Overlay, RocksStore, WriteSet};

/// A decoded value for the tests: a counter stored as one byte.
#[derive(Clone, Debug, PartialEq)]
struct Count(u8);

impl DecodedValue for Count {
    fn encode(&self) -> Vec<u8> {
        vec![self.0]
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }
}

fn decode_count(bytes: &[u8]) -> Box<dyn DecodedValue> {
    Box::new(Count(bytes[0]))
}

fn count(kv: &dyn KvRead, key: &[u8]) -> Option<u8> {
    let mut out = None;
    kv.read_decoded(key, &decode_count, &mut |v| out = v.map(|v| v.as_any().downcast_ref::<Count>().expect("a count").0));
    out
}

fn increment(ov: &mut Overlay<'_>, key: &[u8]) -> bool {
    ov.update_decoded(key, &decode_count, &mut |v| v.as_any_mut().downcast_mut::<Count>().expect("a count").0 += 1)
}

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

    // keys the rule declares absent from the base are not looked up there: reads see only
    // staged writes, and a delete of a staged one leaves nothing behind
    let mut ov = Overlay::new(store);
    ov.set_absent_from_base(Box::new(|key: &[u8], _whole_key: bool| key.starts_with(b"b/")));
    assert_eq!(ov.get(b"b/1"), None, "the base's b/1 is not read");
    assert_eq!(ov.scan_prefix(b"b/").count(), 0);
    assert_eq!(ov.get(b"a/2"), Some(b"y2".to_vec()), "other keys still come from the base");
    ov.put(b"b/2".to_vec(), b"w".to_vec());
    assert_eq!(ov.scan_prefix(b"b/").collect::<Vec<_>>(), vec![(b"b/2".to_vec(), b"w".to_vec())]);
    ov.delete(b"b/2".to_vec());
    assert!(ov.writes().is_empty(), "put and deleted in this overlay: nothing staged");

    // decoded values: read from the base, changed in place, seen by byte reads and scans,
    // encoded once into the writes; bytes written later win over them
    let mut ws = WriteSet::default();
    ws.put(b"n/1".to_vec(), vec![1]);
    store.commit(&ws).unwrap();
    assert_eq!(count(store, b"n/1"), Some(1), "a store without an overlay decodes");
    let mut ov = Overlay::new(store);
    assert_eq!(count(&ov, b"n/1"), Some(1));
    assert!(increment(&mut ov, b"n/1"));
    assert!(increment(&mut ov, b"n/1"));
    assert!(!increment(&mut ov, b"n/9"), "no such key");
    assert_eq!(count(&ov, b"n/1"), Some(3));
    assert_eq!(ov.get(b"n/1"), Some(vec![3]));
    ov.put_decoded(b"n/2".to_vec(), Box::new(Count(7)));
    ov.put(b"n/0".to_vec(), vec![5]);
    assert_eq!(
        ov.scan_prefix(b"n/").collect::<Vec<_>>(),
        vec![(b"n/0".to_vec(), vec![5]), (b"n/1".to_vec(), vec![3]), (b"n/2".to_vec(), vec![7])]
    );
    ov.put_decoded(b"n/5".to_vec(), Box::new(Count(5)));
    ov.put_decoded(b"n/4".to_vec(), Box::new(Count(4)));
    ov.put_decoded(b"nb/1".to_vec(), Box::new(Count(9)));
    let under = |ov: &Overlay, prefix: &[u8]| ov.scan_prefix(prefix).map(|(k, _)| String::from_utf8(k).unwrap()).collect::<Vec<_>>();
    assert_eq!(under(&ov, b"n/"), ["n/0", "n/1", "n/2", "n/4", "n/5"], "decoded values in key order, within the prefix");
    assert_eq!(under(&ov, b"nb/"), ["nb/1"]);
    let base_a: Vec<String> = store.scan_prefix(b"a/").map(|(k, _)| String::from_utf8(k).unwrap()).collect();
    assert!(!base_a.is_empty());
    assert_eq!(under(&ov, b"a/"), base_a, "other tables as before");
    ov.delete(b"n/4".to_vec());
    ov.delete(b"n/5".to_vec());
    ov.delete(b"nb/1".to_vec());
    ov.put(b"n/2".to_vec(), vec![8]);
    assert_eq!(count(&ov, b"n/2"), Some(8), "bytes written after a decoded value replace it");
    ov.put_decoded(b"n/3".to_vec(), Box::new(Count(1)));
    ov.delete(b"n/3".to_vec());
    assert_eq!(count(&ov, b"n/3"), None);
    let writes = ov.into_writes();
    assert_eq!(writes.get(b"n/1"), Some(&Some(vec![3])));
    assert_eq!(writes.get(b"n/3"), None, "a decoded value put and deleted in this overlay is not staged");
    store.commit(&writes).unwrap();
    assert_eq!(store.get(b"n/1"), Some(vec![3]));
    assert_eq!(store.get(b"n/2"), Some(vec![8]));
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
    // with every commit in RocksDB itself (where the hints apply), and in the write-back layer
    queue_scans_see_every_live_key(true);
    queue_scans_see_every_live_key(false);
}

fn queue_scans_see_every_live_key(flush_every_commit: bool) {
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
        if flush_every_commit {
            store.flush_write_back().unwrap();
        }
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
                if flush_every_commit || i % 100 == 0 {
                    store.flush_write_back().unwrap();
                }
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
fn rocks_store_with_point_tables_meets_the_contract() {
    // the suite's tables kept in the write-back layer's hash map: scans still see them, in order
    let dir = tempfile::tempdir().unwrap();
    let store = RocksStore::open_with_point_tables(&dir.path().join("db"), &[b"a/", b"n/", b"nb/"], None).unwrap();
    suite(&store);
    store.flush_write_back().unwrap();
    assert_eq!(store.stored_keys(b"n/"), ["n/0", "n/1", "n/2"]);
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
    assert_eq!(restored.dump().len(), 5, "a/2, b/1, n/0, n/1, n/2");
}

#[test]
fn rocks_store_rows_deleted_before_a_flush_never_reach_rocksdb() {
    let dir = tempfile::tempdir().unwrap();
    let store = RocksStore::open(&dir.path().join("db")).unwrap();
    let commit = |puts: &[(&str, &str)], deletes: &[&str]| {
        let mut ws = WriteSet::default();
        puts.iter().for_each(|(k, v)| ws.put(k.as_bytes().to_vec(), v.as_bytes().to_vec()));
        deletes.iter().for_each(|k| ws.delete(k.as_bytes().to_vec()));
        store.commit_owned(ws).unwrap();
    };
    commit(&[("E/old", "1")], &[]);
    store.flush_write_back().unwrap();
    assert_eq!(store.stored_keys(b"E/"), ["E/old"]);
    // a short-lived row, and an update and delete of a row RocksDB has
    commit(&[("E/new", "2"), ("E/old", "3")], &[]);
    assert_eq!(store.get(b"E/new"), Some(b"2".to_vec()));
    assert_eq!(store.get(b"E/old"), Some(b"3".to_vec()));
    commit(&[], &["E/new", "E/old"]);
    assert_eq!(store.get(b"E/new"), None);
    assert_eq!(store.get(b"E/old"), None, "the layer's delete hides what RocksDB has");
    assert_eq!(store.scan_prefix(b"E/").count(), 0);
    assert_eq!(store.stored_keys(b"E/"), ["E/old"], "nothing reached RocksDB before the flush");
    store.flush_write_back().unwrap();
    assert!(store.stored_keys(b"E/").is_empty());
    assert_eq!(store.scan_prefix(b"E/").count(), 0);
}

#[test]
fn rocks_store_fresh_rows_are_dropped_on_delete_and_deleted_once_flushed() {
    fresh_rows_are_dropped_on_delete_and_deleted_once_flushed(&[]);
    fresh_rows_are_dropped_on_delete_and_deleted_once_flushed(&[b"J/"]);
}

fn fresh_rows_are_dropped_on_delete_and_deleted_once_flushed(point_tables: &[&[u8]]) {
    let dir = tempfile::tempdir().unwrap();
    let store = RocksStore::open_with_point_tables(&dir.path().join("db"), point_tables, None).unwrap();
    let commit = |fresh: &[&str], puts: &[&str], deletes: &[&str]| {
        let mut ws = WriteSet::default();
        fresh.iter().for_each(|k| ws.put_fresh(k.as_bytes().to_vec(), b"f".to_vec()));
        puts.iter().for_each(|k| ws.put(k.as_bytes().to_vec(), b"p".to_vec()));
        deletes.iter().for_each(|k| ws.delete(k.as_bytes().to_vec()));
        store.commit_owned(ws).unwrap();
    };
    // fresh, updated, then deleted before a flush: nothing ever reaches RocksDB
    commit(&["J/1", "J/2"], &[], &[]);
    commit(&[], &["J/1"], &[]);
    assert_eq!(store.get(b"J/1"), Some(b"p".to_vec()));
    commit(&[], &[], &["J/1", "J/2"]);
    assert_eq!(store.scan_prefix(b"J/").count(), 0);
    store.flush_write_back().unwrap();
    assert!(store.stored_keys(b"J/").is_empty());
    // fresh, flushed, then updated and deleted: the delete reaches RocksDB
    commit(&["J/3"], &[], &[]);
    store.flush_write_back().unwrap();
    assert_eq!(store.stored_keys(b"J/"), ["J/3"]);
    commit(&[], &["J/3"], &[]);
    commit(&[], &[], &["J/3"]);
    assert_eq!(store.get(b"J/3"), None);
    store.flush_write_back().unwrap();
    assert!(store.stored_keys(b"J/").is_empty());
    assert_eq!(store.get(b"J/3"), None);
}

#[test]
fn rocks_store_flushes_its_write_back_layer_when_it_grows_and_when_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let rows = crate::rocks::FLUSH_AT_ROWS + 10;
    {
        let store = RocksStore::open(&dir.path().join("db")).unwrap();
        let mut ws = WriteSet::default();
        for i in 0..rows {
            ws.put(format!("V/{i:08}").into_bytes(), vec![1]);
        }
        store.commit(&ws).unwrap();
        // a thread of its own writes them; meanwhile and after, readers see every row
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while store.stored_keys(b"V/").len() < rows {
            assert_eq!(store.scan_prefix(b"V/").count(), rows);
            assert!(std::time::Instant::now() < deadline, "the layer was not flushed once it held FLUSH_AT_ROWS rows");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert_eq!(store.get(b"V/00000007"), Some(vec![1]));
        let mut ws = WriteSet::default();
        ws.put(b"V/last".to_vec(), vec![2]);
        store.commit(&ws).unwrap();
        assert_eq!(store.stored_keys(b"V/").len(), rows, "one row stays in the layer");
    }
    let reopened = RocksStore::open(&dir.path().join("db")).unwrap();
    assert_eq!(reopened.get(b"V/last"), Some(vec![2]), "a store dropped cleanly keeps its layer");
    assert_eq!(reopened.scan_prefix(b"V/").count(), rows + 1);
}

#[test]
fn newer_staged_writes_win_over_older_ones_in_key_order() {
    let w = |pairs: &[(&str, Option<&str>)]| -> Vec<crate::overlay::StagedWrite> {
        pairs.iter().map(|(k, v)| (k.as_bytes().to_vec(), v.map(|v| v.as_bytes().to_vec()))).collect()
    };
    let older = w(&[("a", Some("1")), ("c", Some("1")), ("d", None), ("f", Some("1"))]);
    let newer = w(&[("b", Some("2")), ("c", None), ("d", Some("2")), ("g", Some("2"))]);
    let merged = crate::overlay::newer_wins(older.clone(), newer.clone());
    assert_eq!(merged, w(&[("a", Some("1")), ("b", Some("2")), ("c", None), ("d", Some("2")), ("f", Some("1")), ("g", Some("2"))]));
    assert_eq!(crate::overlay::newer_wins(older.clone(), vec![]), older);
    assert_eq!(crate::overlay::newer_wins(vec![], newer.clone()), newer);
}

#[test]
fn a_write_set_keeps_point_table_rows_apart_and_scans_them_in_order() {
    let mut ws = WriteSet::with_point_tables([b"p/".to_vec()].into_iter().collect());
    ws.put(b"p/2".to_vec(), b"two".to_vec());
    ws.put(b"pa/1".to_vec(), b"ordered".to_vec());
    ws.put_fresh(b"p/1".to_vec(), b"one".to_vec());
    ws.delete(b"p/3".to_vec());
    ws.put(b"p/4".to_vec(), b"four".to_vec());
    ws.delete_over(b"p/4".to_vec(), false, |_| false);
    assert_eq!((ws.len(), ws.points.len()), (4, 3), "p/ rows in the hash map");
    assert_eq!(ws.get(b"p/2"), Some(&Some(b"two".to_vec())));
    assert_eq!(ws.get(b"p/3"), Some(&None));
    assert_eq!(ws.get(b"p/4"), None);
    let scanned = |ws: &WriteSet, prefix: &[u8]| -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
        ws.range_prefix(prefix).map(|(k, v)| (k.clone(), v.clone())).collect()
    };
    let all = vec![
        (b"p/1".to_vec(), Some(b"one".to_vec())),
        (b"p/2".to_vec(), Some(b"two".to_vec())),
        (b"p/3".to_vec(), None),
        (b"pa/1".to_vec(), Some(b"ordered".to_vec())),
    ];
    assert_eq!(scanned(&ws, b"p"), all, "both maps, in key order");
    assert_eq!(scanned(&ws, b"p/"), all[..3]);
    assert_eq!(scanned(&ws, b"pa"), all[3..]);

    // absorbed by a set without point tables (later writes win): the same rows, ordered
    let mut empty = WriteSet::default();
    empty.absorb(ws.clone());
    assert_eq!(scanned(&empty, b"p"), all, "an empty set takes the other's rows as they are");
    let mut older = WriteSet::default();
    older.put(b"p/1".to_vec(), b"older".to_vec());
    older.put(b"q/1".to_vec(), b"kept".to_vec());
    older.absorb(ws.clone());
    assert!(older.points.is_empty());
    assert_eq!(scanned(&older, b"p"), all);
    assert_eq!(older.get(b"q/1"), Some(&Some(b"kept".to_vec())));
    // and the other way round: rows of a point table move to the hash map
    let mut newer = WriteSet::with_point_tables([b"p/".to_vec()].into_iter().collect());
    newer.put(b"z/1".to_vec(), b"z".to_vec());
    newer.absorb(older);
    assert_eq!((newer.len(), newer.points.len()), (6, 3));
    assert_eq!(scanned(&newer, b"p"), all);
}

#[test]
fn an_overlay_delete_leaves_a_tombstone_only_for_keys_the_base_may_hold() {
    overlay_delete_outcomes(&[]);
    overlay_delete_outcomes(&[b"p/"]);
}

/// What an overlay's delete stages, for keys in an ordered table (`o/`) and, when given as a
/// point table, a hashed one (`p/`): a tombstone where the base holds the key or was not asked,
/// nothing for a put (bytes or decoded) of a key the base does not hold.
fn overlay_delete_outcomes(point_tables: &[&[u8]]) {
    let dir = tempfile::tempdir().unwrap();
    let store = RocksStore::open_with_point_tables(&dir.path().join("db"), point_tables, None).unwrap();
    let mut ws = WriteSet::default();
    for table in ["o", "p"] {
        ws.put(format!("{table}/base").into_bytes(), vec![1]);
        ws.put(format!("{table}/base-decoded").into_bytes(), vec![1]);
    }
    store.commit(&ws).unwrap();
    for table in ["o", "p"] {
        let key = |name: &str| format!("{table}/{name}").into_bytes();
        let mut ov = Overlay::new(&store);
        ov.put(key("base"), vec![2]);
        ov.put(key("new"), vec![2]);
        ov.put_decoded(key("base-decoded"), Box::new(Count(2)));
        ov.put_decoded(key("new-decoded"), Box::new(Count(2)));
        for name in ["base", "new", "base-decoded", "new-decoded", "never-put"] {
            ov.delete(key(name));
            assert_eq!(ov.get(&key(name)), None, "{table}/{name} reads as deleted");
        }
        let staged: Vec<(String, Option<Vec<u8>>)> = {
            let mut rows: Vec<_> = ov.writes().iter().map(|(k, v)| (String::from_utf8(k.clone()).unwrap(), v.clone())).collect();
            rows.sort();
            rows
        };
        let tombstone = |name: &str| (format!("{table}/{name}"), None);
        assert_eq!(staged, [tombstone("base"), tombstone("base-decoded"), tombstone("never-put")], "point tables {point_tables:?}");
    }
}
