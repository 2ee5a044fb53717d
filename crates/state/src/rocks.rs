use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock, RwLockWriteGuard};

use rocksdb::{
    checkpoint::Checkpoint, BlockBasedOptions, CompactOptions, Direction, IteratorMode, Options, ReadOptions, WriteBatch, WriteOptions, DB,
};

use crate::generation::{Generation, PointTables};
use crate::key::Key;
use crate::overlay::{newer_wins, Merge, StagedWrite};
use crate::scan_hints::{is_hinted, ScanHints};
use crate::{KvIter, KvRead, KvStore, Row, StateError, WriteSet};

/// Size of one RocksDB memtable.
const WRITE_BUFFER_BYTES: usize = 8 << 20;

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
/// Committed writes reach RocksDB through a write-back layer (`Recent`, two `Generation`s; the
/// rows of point tables, see [`RocksStore::open_with_point_tables`], in a hash map): most rows live
/// for a few milliseconds (an instance's element instances, variables and job), and a row put
/// and deleted again before the layer is flushed never costs RocksDB an insert and a tombstone.
/// Readers see the layer over RocksDB. It is flushed, with the applied index it holds, in one
/// batch: by a thread of its own when it grows past [`FLUSH_AT_ROWS`] (the committing thread
/// goes on, and readers see the rows being written until RocksDB has them), and before every
/// checkpoint and when the store is dropped. Losing it in a crash loses no more than losing
/// RocksDB's memtable did (the log is replayed from the applied index RocksDB has).
pub struct RocksStore {
    backing: Backing,
    recent: Arc<RwLock<Recent>>,
}

/// What writing rows to RocksDB needs: shared with the threads that flush the write-back layer
/// and compact the queue tables.
#[derive(Clone)]
struct Backing {
    db: Arc<DB>,
    deletes: Arc<AtomicU64>,
    compacting: Arc<AtomicBool>,
    /// Keys in the store after the last compaction (RocksDB's estimate).
    live_keys: Arc<AtomicU64>,
    hints: Arc<ScanHints>,
}

/// Committed writes not yet in RocksDB (`None`: delete the key from RocksDB), newest first:
/// `rows` since the last flush began, then `flushing`, the rows a flush is writing to RocksDB
/// (readers see them until RocksDB has them).
struct Recent {
    rows: Generation,
    flushing: Option<Arc<Generation>>,
}

impl Recent {
    fn new(point_tables: PointTables) -> Self {
        Self { rows: Generation::new(point_tables), flushing: None }
    }

    /// The newest value the layer holds for `key`: `Some(None)` when it deletes the key.
    fn get(&self, key: &[u8]) -> Option<&Option<Vec<u8>>> {
        self.rows.get(key).or_else(|| self.flushing.as_ref().and_then(|f| f.get(key))).map(|r| &r.value)
    }

    /// The layer's rows under `prefix`, newest value per key, in key order.
    fn range_prefix(&self, prefix: &[u8]) -> Vec<StagedWrite> {
        let older = self.flushing.as_deref().map(|f| f.range_prefix(prefix)).unwrap_or_default();
        newer_wins(older, self.rows.range_prefix(prefix))
    }

    /// Takes back rows a flush did not write, under the rows committed since it began.
    fn unfreeze(&mut self, frozen: Arc<Generation>) {
        self.flushing = None;
        let empty = Generation::new(self.rows.point_tables());
        let newer = std::mem::replace(&mut self.rows, empty);
        self.rows = Arc::try_unwrap(frozen).unwrap_or_else(|shared| (*shared).clone());
        self.rows.extend(newer);
    }
}

/// Rows the write-back layer holds before it is flushed to RocksDB. Well above the rows of the
/// instances in flight under load (W2: ~256 instances of ~15 rows), so that most rows are
/// deleted before a flush. (Written on the committing thread, a flush of this many rows held
/// it ~10 ms: the timer storm's CompleteJob p99 went from 3.4-4.5 to 7.2-11.4 ms.)
pub const FLUSH_AT_ROWS: usize = 16_384;

/// How long a full flush waits for a flush under way (it takes milliseconds).
const FLUSH_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

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
        Self::open_with_point_tables(dir, &[])
    }

    /// As [`Self::open`], declaring the tables (by key prefix) that are only ever read by key,
    /// never scanned: the write-back layer keeps their rows in a hash map (see `generation`). A
    /// hint for speed; scans of them stay correct.
    pub fn open_with_point_tables(dir: &Path, point_tables: &[&[u8]]) -> Result<Self, StateError> {
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
        // memtables of 8 MB instead of RocksDB's 64: what reaches RocksDB is the write-back
        // layer's survivors and tombstones, and a memtable's arena is memory held until it is
        // flushed (W2's peak RSS rose with the run's length: 82.5 MB after 60 s, 64.3 with 8 MB)
        opts.set_write_buffer_size(WRITE_BUFFER_BYTES);
        // compactions (the queue tables' included) run at a lower CPU and IO priority than the
        // partition's processing thread: on a small machine they otherwise take its core
        if let Ok(mut env) = rocksdb::Env::new() {
            env.lower_thread_pool_cpu_priority();
            env.lower_thread_pool_io_priority();
            opts.set_env(&env);
        }
        let db = DB::open(&opts, dir)?;
        let backing = Backing {
            db: Arc::new(db),
            deletes: Arc::default(),
            compacting: Arc::default(),
            live_keys: Arc::default(),
            hints: Arc::default(),
        };
        let point_tables = point_tables.iter().map(|p| p.to_vec()).collect();
        Ok(Self { backing, recent: Arc::new(RwLock::new(Recent::new(point_tables))) })
    }

    /// Writes the whole write-back layer to RocksDB now, after any flush under way (checkpoints,
    /// a store being dropped, tests).
    pub fn flush_write_back(&self) -> Result<(), StateError> {
        let deadline = std::time::Instant::now() + FLUSH_WAIT;
        loop {
            let frozen = {
                let mut recent = self.recent_mut();
                if recent.flushing.is_some() {
                    None
                } else if recent.rows.is_empty() {
                    return Ok(());
                } else {
                    Some(freeze(&mut recent))
                }
            };
            match frozen {
                Some(frozen) => return write_frozen(&self.backing, &self.recent, frozen),
                None if std::time::Instant::now() > deadline => {
                    return Err(StateError::Io(std::io::Error::other("a write-back flush under way did not finish")))
                }
                None => std::thread::sleep(std::time::Duration::from_millis(1)),
            }
        }
    }

    /// Keys under `prefix` that RocksDB itself holds, without the write-back layer (tests).
    #[cfg(test)]
    pub(crate) fn stored_keys(&self, prefix: &[u8]) -> Vec<String> {
        self.scan_stored(prefix).map(|(k, _)| String::from_utf8_lossy(&k).into_owned()).collect()
    }

    fn recent_mut(&self) -> RwLockWriteGuard<'_, Recent> {
        self.recent.write().expect("state write-back lock")
    }

    /// Starts writing the layer's rows to RocksDB on a thread of their own, unless a flush is
    /// under way (the rows then wait for the next commit after it).
    fn start_flush(&self, recent: &mut Recent) {
        if recent.flushing.is_some() {
            return;
        }
        let frozen = freeze(recent);
        let (backing, layer) = (self.backing.clone(), self.recent.clone());
        let spawned = std::thread::Builder::new().name("state-flush".into()).spawn(move || {
            if let Err(e) = write_frozen(&backing, &layer, frozen) {
                // the rows stay readable in the layer; the next flush or checkpoint tries again
                tracing::error!(error = %e, "state write-back flush failed");
            }
        });
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "state flush thread did not start; rows stay in the write-back layer");
            let frozen = recent.flushing.take().expect("just frozen");
            recent.unfreeze(frozen);
        }
    }

    /// Writes a consistent checkpoint (hard links where possible) into `dir`, which must not
    /// exist. Flushes the write-back layer and the memtable first, so the checkpoint holds every
    /// committed write.
    pub fn checkpoint(&self, dir: &Path) -> Result<(), StateError> {
        self.flush_write_back()?;
        self.backing.db.flush()?;
        Checkpoint::new(&self.backing.db)?.create_checkpoint(dir)?;
        Ok(())
    }
}

/// Moves the layer's rows to `flushing` and returns them for writing.
fn freeze(recent: &mut Recent) -> Arc<Generation> {
    let empty = Generation::new(recent.rows.point_tables());
    let frozen = Arc::new(std::mem::replace(&mut recent.rows, empty));
    recent.flushing = Some(frozen.clone());
    frozen
}

/// Writes `frozen` (the layer's rows up to a commit, with its applied index) to RocksDB in one
/// batch, then drops it from the layer.
fn write_frozen(backing: &Backing, layer: &RwLock<Recent>, frozen: Arc<Generation>) -> Result<(), StateError> {
    let mut batch = WriteBatch::default();
    let mut deletes = 0u64;
    for (k, row) in frozen.iter() {
        match &row.value {
            Some(v) => batch.put(k, v),
            None => {
                batch.delete(k);
                deletes += 1;
            }
        }
    }
    let mut opts = WriteOptions::default();
    opts.disable_wal(true);
    // Scans need not wait for the write (see `scan_hints`): until `flushing` is dropped below,
    // they see these rows in the layer whatever hint and snapshot RocksDB gives them, and the
    // hints are lowered before that. (Holding the hints' lock through a write of 16,384 rows
    // stalled the processing thread's queue scans for ~10 ms.)
    let written = backing.db.write_opt(batch, &opts);
    if written.is_ok() {
        backing.hints.lock().committed(frozen.iter().filter(|(_, r)| r.value.is_some()).map(|(k, _)| k));
    }
    let mut recent = layer.write().expect("state write-back lock");
    if let Err(e) = written {
        recent.unfreeze(frozen);
        return Err(e.into());
    }
    recent.flushing = None;
    drop(recent);
    let threshold = COMPACT_AFTER_DELETES.max(backing.live_keys.load(Ordering::Relaxed) / 2);
    if backing.deletes.fetch_add(deletes, Ordering::Relaxed) + deletes >= threshold {
        backing.deletes.store(0, Ordering::Relaxed);
        backing.compact_queues();
    }
    Ok(())
}

impl Backing {
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
}

impl KvRead for RocksStore {
    fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        // held while RocksDB is read: a flush drops rows from the layer only under the write lock,
        // once RocksDB has them
        let recent = self.recent.read().expect("state write-back lock");
        if let Some(row) = recent.get(key) {
            return row.clone();
        }
        match self.backing.db.get(key) {
            Ok(v) => v,
            Err(e) => panic!("state read failed (partition must restart): {e}"),
        }
    }

    fn scan_prefix(&self, prefix: &[u8]) -> KvIter<'_> {
        // the layer's rows and RocksDB's iterator are taken together: no flush in between
        let recent = self.recent.read().expect("state write-back lock");
        let staged = recent.range_prefix(prefix);
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
            let hints = self.backing.hints.lock();
            let (generation, seek) = hints.start(prefix);
            (generation, Some(self.backing.db.snapshot()), seek.unwrap_or_else(|| prefix.to_vec()))
        } else {
            (0, None, prefix.to_vec())
        };
        let mode = IteratorMode::From(&from, Direction::Forward);
        let iter = match &snapshot {
            Some(snapshot) => snapshot.iterator_opt(mode, opts),
            None => self.backing.db.iterator_opt(mode, opts),
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
            self.backing.hints.learn(prefix, generation, learned);
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
        self.commit_rows(writes.clone().into_rows())
    }

    fn commit_owned(&self, writes: WriteSet) -> Result<(), StateError> {
        self.commit_rows(writes.into_rows())
    }
}

impl RocksStore {
    /// Puts committed rows (`None`: deleted) into the write-back layer.
    fn commit_rows(&self, rows: impl Iterator<Item = (Key, Row)>) -> Result<(), StateError> {
        let mut recent = self.recent_mut();
        let Recent { rows: layer, flushing } = &mut *recent;
        for (k, row) in rows {
            layer.commit(k, row, |key| match flushing.as_ref().and_then(|f| f.get(key)) {
                Some(older) => older.value.is_some(),
                None => self.backing.db.key_may_exist(key),
            });
        }
        if recent.rows.len() >= FLUSH_AT_ROWS {
            self.start_flush(&mut recent);
        }
        Ok(())
    }
}
