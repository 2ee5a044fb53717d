use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock, RwLockWriteGuard};

use rocksdb::{
    checkpoint::Checkpoint, BlockBasedOptions, CompactOptions, Direction, IteratorMode, Options, ReadOptions, WriteBatch, WriteOptions, DB,
};

use crate::overlay::Merge;
use crate::scan_hints::{is_hinted, ScanHints};
use crate::{KvIter, KvRead, KvStore, StateError, WriteSet};

/// RocksDB-backed state in a single column family (keys carry their table prefix), so a flush
/// is always atomic across tables.
///
/// Writes skip RocksDB's WAL: the partition's log is the source of truth, and the store records
/// the log position it has applied in the same batch, so after a crash the broker replays the
/// log from that position.
///
/// The engine's indexes are queues (activatable jobs, deadlines, due timers): entries are put
/// and soon deleted, and a scan from the front would step over every tombstone left behind.
/// Scans of those tables start where an earlier scan found the first live key (see
/// `scan_hints`). After enough deletes (at least [`COMPACT_AFTER_DELETES`]), a background
/// thread flushes the memtable and compacts the index tables down to the last level, where the
/// tombstones disappear.
///
/// Committed writes reach RocksDB through a write-back layer ([`Recent`]): most rows live for
/// a few milliseconds (an instance's element instances, variables and job), and a row put and
/// deleted again before the layer is flushed never costs RocksDB an insert and a tombstone.
/// Readers see the layer over RocksDB. It is flushed, with the applied index it holds, in one
/// batch when it grows past [`FLUSH_AT_ROWS`] and before every checkpoint; losing it in a crash
/// loses no more than losing RocksDB's memtable did (the log is replayed from the applied
/// index RocksDB has).
pub struct RocksStore {
    db: Arc<DB>,
    deletes: AtomicU64,
    compacting: Arc<AtomicBool>,
    /// Keys in the store after the last compaction (RocksDB's estimate).
    live_keys: Arc<AtomicU64>,
    hints: ScanHints,
    recent: RwLock<Recent>,
}

/// Committed writes not yet in RocksDB: the newest value of each key written since the last
/// flush (`None`: delete it from RocksDB).
#[derive(Default)]
struct Recent {
    rows: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
}

/// Rows the write-back layer holds before it is flushed to RocksDB. Well above the rows of the
/// instances in flight under load (W2: ~256 instances of ~15 rows), so that most rows are
/// deleted before a flush; a flush of this many rows takes a few milliseconds.
pub const FLUSH_AT_ROWS: usize = 16_384;

/// Deletes between two compactions of the index tables, at least; with more state, a
/// compaction waits for as many deletes as half the keys it holds (a compaction rewrites every
/// key, so each costs at most two rewrites per delete).
pub const COMPACT_AFTER_DELETES: u64 = 20_000;

/// Key prefixes of the tables that behave as queues (see the engine's `tables.rs`).
const QUEUE_PREFIXES: &[&[u8]] = &[b"A/", b"B/", b"C/", b"D/", b"DR/", b"F/", b"MD/", b"O/", b"TD/", b"TE/"];

/// The smallest key greater than every key that starts with `prefix` (None: no such key).
fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < u8::MAX {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

impl RocksStore {
    pub fn open(dir: &Path) -> Result<Self, StateError> {
        let mut opts = Options::default();
        opts.create_if_missing(true);
        opts.set_compression_type(rocksdb::DBCompressionType::Lz4);
        opts.increase_parallelism(2);
        // most point reads ask for keys a table file does not hold (state is short-lived):
        // bloom filters answer those without searching the file's index and data blocks
        let mut table = BlockBasedOptions::default();
        // (index and filter blocks stay in the table readers: in the small default block cache
        // they evicted data blocks and halved the timer storm's firing rate)
        table.set_bloom_filter(10.0, false);
        opts.set_block_based_table_factory(&table);
        opts.set_memtable_whole_key_filtering(true);
        opts.set_memtable_prefix_bloom_ratio(0.05);
        // table files are synced a megabyte at a time while written, not all at once at the end
        // (a burst the partition's journal fdatasyncs would queue behind)
        opts.set_bytes_per_sync(1 << 20);
        // compactions (the queue tables' included) run at a lower CPU and IO priority than the
        // partition's processing thread: on a small machine they otherwise take its core
        if let Ok(mut env) = rocksdb::Env::new() {
            env.lower_thread_pool_cpu_priority();
            env.lower_thread_pool_io_priority();
            opts.set_env(&env);
        }
        let db = DB::open(&opts, dir)?;
        Ok(Self {
            db: Arc::new(db),
            deletes: AtomicU64::new(0),
            compacting: Arc::new(AtomicBool::new(false)),
            live_keys: Arc::new(AtomicU64::new(0)),
            hints: ScanHints::default(),
            recent: RwLock::default(),
        })
    }

    /// Writes the write-back layer to RocksDB now (tests; checkpoints do it themselves).
    pub fn flush_write_back(&self) -> Result<(), StateError> {
        self.flush_recent(&mut self.recent_mut())
    }

    /// Keys under `prefix` that RocksDB itself holds, without the write-back layer (tests).
    #[cfg(test)]
    pub(crate) fn stored_keys(&self, prefix: &[u8]) -> Vec<String> {
        self.scan_stored(prefix).map(|(k, _)| String::from_utf8_lossy(&k).into_owned()).collect()
    }

    fn recent_mut(&self) -> RwLockWriteGuard<'_, Recent> {
        self.recent.write().expect("state write-back lock")
    }

    /// Writes the write-back layer to RocksDB in one batch and empties it.
    fn flush_recent(&self, recent: &mut Recent) -> Result<(), StateError> {
        if recent.rows.is_empty() {
            return Ok(());
        }
        let mut batch = WriteBatch::default();
        let mut deletes = 0u64;
        for (k, v) in &recent.rows {
            match v {
                Some(v) => batch.put(k, v),
                None => {
                    batch.delete(k);
                    deletes += 1;
                }
            }
        }
        let mut opts = WriteOptions::default();
        opts.disable_wal(true);
        {
            // readers of hints wait for the write and its hint updates (see `scan_hints`)
            let mut hints = self.hints.lock();
            self.db.write_opt(batch, &opts)?;
            hints.committed(recent.rows.iter().filter(|(_, v)| v.is_some()).map(|(k, _)| k.as_slice()));
        }
        recent.rows.clear();
        let threshold = COMPACT_AFTER_DELETES.max(self.live_keys.load(Ordering::Relaxed) / 2);
        if self.deletes.fetch_add(deletes, Ordering::Relaxed) + deletes >= threshold {
            self.deletes.store(0, Ordering::Relaxed);
            self.compact_queues();
        }
        Ok(())
    }

    /// Starts a background compaction of the queue tables unless one is running.
    fn compact_queues(&self) {
        if self.compacting.swap(true, Ordering::SeqCst) {
            return;
        }
        let (db, compacting, live_keys) = (self.db.clone(), self.compacting.clone(), self.live_keys.clone());
        let spawned = std::thread::Builder::new().name("state-compaction".into()).spawn(move || {
            if let Err(e) = db.flush() {
                tracing::warn!(error = %e, "state flush before compaction failed");
            }
            // one range over every queue table: the tables interleave in one key space, so
            // the files overlapping one queue overlap them all, and a compaction per table
            // rewrote the same files once per table. The level-0 files merge into the last
            // level, where their tombstones disappear; files already there have none left.
            let (first, last) = (QUEUE_PREFIXES.iter().min(), QUEUE_PREFIXES.iter().max());
            db.compact_range_opt(first, last.and_then(|p| prefix_end(p)), &CompactOptions::default());
            if let Ok(Some(keys)) = db.property_int_value("rocksdb.estimate-num-keys") {
                live_keys.store(keys, Ordering::Relaxed);
            }
            compacting.store(false, Ordering::SeqCst);
        });
        if spawned.is_err() {
            self.compacting.store(false, Ordering::SeqCst);
        }
    }

    /// Writes a consistent checkpoint (hard links where possible) into `dir`, which must not
    /// exist. Flushes the write-back layer and the memtable first, so the checkpoint holds every
    /// committed write.
    pub fn checkpoint(&self, dir: &Path) -> Result<(), StateError> {
        self.flush_recent(&mut self.recent_mut())?;
        self.db.flush()?;
        Checkpoint::new(&self.db)?.create_checkpoint(dir)?;
        Ok(())
    }
}

impl KvRead for RocksStore {
    fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        // held while RocksDB is read: no flush moves the key from the layer to RocksDB meanwhile
        let recent = self.recent.read().expect("state write-back lock");
        if let Some(row) = recent.rows.get(key) {
            return row.clone();
        }
        match self.db.get(key) {
            Ok(v) => v,
            Err(e) => panic!("state read failed (partition must restart): {e}"),
        }
    }

    fn scan_prefix(&self, prefix: &[u8]) -> KvIter<'_> {
        // the layer's rows and RocksDB's iterator are taken together: no flush in between
        let recent = self.recent.read().expect("state write-back lock");
        let staged: Vec<(Vec<u8>, Option<Vec<u8>>)> =
            recent.rows.range(prefix.to_vec()..).take_while(|(k, _)| k.starts_with(prefix)).map(|(k, v)| (k.clone(), v.clone())).collect();
        let stored = self.scan_stored(prefix);
        drop(recent);
        if staged.is_empty() {
            stored
        } else {
            Box::new(Merge::new(stored, staged))
        }
    }
}

impl RocksStore {
    /// The pairs RocksDB itself holds under `prefix` (without the write-back layer).
    fn scan_stored(&self, prefix: &[u8]) -> KvIter<'_> {
        let end = prefix_end(prefix);
        // bounded: past the prefix, the iterator must not walk on through tombstones
        let mut opts = ReadOptions::default();
        if let Some(end) = &end {
            opts.set_iterate_upper_bound(end.clone());
        }
        let hinted = is_hinted(prefix) && end.is_some();
        let within = prefix.to_vec();
        let (generation, snapshot, from) = if hinted {
            // the hint and the state the scan reads are taken together: no commit between them
            // (see `scan_hints`); the seek past the tombstones happens after the lock
            let hints = self.hints.lock();
            let (generation, seek) = hints.start(prefix);
            (generation, Some(self.db.snapshot()), seek.unwrap_or_else(|| prefix.to_vec()))
        } else {
            (0, None, prefix.to_vec())
        };
        let mode = IteratorMode::From(&from, Direction::Forward);
        let iter = match &snapshot {
            Some(snapshot) => snapshot.iterator_opt(mode, opts),
            None => self.db.iterator_opt(mode, opts),
        };
        let mut iter = iter
            .map(move |item| {
                let _reads_at = &snapshot; // released with the iterator
                match item {
                    Ok((k, v)) => (k.into_vec(), v.into_vec()),
                    Err(e) => panic!("state scan failed (partition must restart): {e}"),
                }
            })
            .take_while(move |(k, _)| k.starts_with(&within));
        let first = iter.next();
        if let (true, Some(end)) = (hinted, end) {
            let learned = first.as_ref().map_or(end, |(k, _)| k.clone());
            self.hints.learn(prefix, generation, learned);
        }
        Box::new(first.into_iter().chain(iter))
    }
}

impl Drop for RocksStore {
    /// A store closed cleanly keeps its write-back layer (a crash loses it; see the type).
    fn drop(&mut self) {
        if let Err(e) = self.flush_write_back() {
            tracing::warn!(error = %e, "state write-back flush at close failed; the log replays it");
        }
    }
}

impl KvStore for RocksStore {
    fn commit(&self, writes: &WriteSet) -> Result<(), StateError> {
        let mut recent = self.recent_mut();
        for (k, v) in writes.iter() {
            match v {
                Some(v) => {
                    recent.rows.insert(k.clone(), Some(v.clone()));
                }
                // a row put since the last flush that RocksDB does not have is simply dropped
                None => match recent.rows.get_mut(k) {
                    Some(row @ Some(_)) => {
                        if self.db.key_may_exist(k) {
                            *row = None;
                        } else {
                            recent.rows.remove(k);
                        }
                    }
                    Some(None) => {}
                    None => {
                        recent.rows.insert(k.clone(), None);
                    }
                },
            }
        }
        if recent.rows.len() >= FLUSH_AT_ROWS {
            self.flush_recent(&mut recent)?;
        }
        Ok(())
    }
}
