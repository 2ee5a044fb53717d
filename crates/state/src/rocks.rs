use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock, RwLockWriteGuard};

use rocksdb::{
    checkpoint::Checkpoint, BlockBasedIndexType, BlockBasedOptions, Cache, CompactOptions, Direction, IteratorMode, Options, ReadOptions,
    WriteBatch, WriteOptions, DB,
};

use crate::generation::Generation;
use crate::key::Key;
use crate::overlay::{newer_wins, Merge, StagedWrite};
use crate::scan_hints::{is_hinted, ScanHints};
use crate::table_upgrade::{self, TableUpgrade};
use crate::{KvIter, KvRead, KvStore, PointTables, Row, StateError, WriteSet};

/// Which rows RocksDB cannot hold, by the key counter of the state it has: a row owned by an
/// entity created after the last write-back flush is in the layer or nowhere, so a read that
/// misses the layer need not ask RocksDB (a point read, and above all a scan's iterator).
pub struct StoredAbsence {
    /// The row every commit of the engine writes with its next key counter (an `i64`, big
    /// endian). A commit without it makes the state RocksDB will hold unknown again (nothing is
    /// then taken as absent until a flush of commits that carry it).
    pub counter_key: &'static [u8],
    /// Whether a row under `key` (a whole key, or with `false` a scan's prefix) can only belong to
    /// entities whose key counter is at or above `counter`.
    pub absent: OwnedSince,
}

/// See [`StoredAbsence::absent`]: (key or prefix, whole key, key counter) → absent.
pub type OwnedSince = Box<dyn Fn(&[u8], bool, i64) -> bool + Send + Sync>;

/// The key counter of state no RocksDB row can be newer than, when it is not known.
const COUNTER_UNKNOWN: i64 = i64::MAX;

/// Size of one RocksDB memtable.
const WRITE_BUFFER_BYTES: usize = 8 << 20;

/// Size of a store's block cache: data blocks, and the index and filter blocks that RocksDB
/// would otherwise hold outside any bound (see [`table_options`]). RocksDB's own default size.
const BLOCK_CACHE_BYTES: usize = 32 << 20;

/// How hard RocksDB tries to erase an obsolete table file's blocks from the block cache when the
/// file goes (its `uncache_aggressiveness`; 300 is the value its authors expect to make the
/// default). With 0, RocksDB's default, the blocks of files that compactions replaced stay
/// until the LRU evicts them: a long-lived node with little state filled its whole cache with
/// them, and its RSS rose by the cache's size over the first hour of a soak.
const UNCACHE_AGGRESSIVENESS: &str = "300";

/// How table files are written and read: bloom filters, and every index and filter block in
/// one bounded block cache, so that a store's memory does not grow with its size.
///
/// Most point reads ask for keys a table file does not hold (state is short-lived): bloom
/// filters answer those without searching the file's index and data blocks. Indexes and filters
/// are partitioned (RocksDB's "Partitioned Index/Filters"): only each file's small top level is
/// pinned, and the partitions a read needs come and go in the cache. Whole index and filter
/// blocks kept outside the cache grew by ~11 MB per GB of state; whole ones kept inside a small
/// cache evicted data blocks and halved the timer storm's firing rate. They are cached with high
/// priority (half of an LRU cache is kept for them), and those of level-0 files, the newest and
/// most read, are pinned.
fn table_options() -> BlockBasedOptions {
    let mut table = BlockBasedOptions::default();
    table.set_bloom_filter(10.0, false);
    table.set_block_cache(&Cache::new_lru_cache(BLOCK_CACHE_BYTES));
    table.set_index_type(BlockBasedIndexType::TwoLevelIndexSearch);
    table.set_partition_filters(true);
    table.set_cache_index_and_filter_blocks(true);
    table.set_cache_index_and_filter_blocks_with_high_priority(true);
    table.set_pin_top_level_index_and_filter(true);
    table.set_pin_l0_filter_and_index_blocks_in_cache(true);
    table
}

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
    absence: Option<StoredAbsence>,
    point_tables: PointTables,
    /// The RocksDB folder.
    dir: PathBuf,
    /// The rewrite of table files from before partitioned index and filters, if under way
    /// (see [`RocksStore::upgrade_tables`]).
    upgrade: Option<TableUpgrade>,
}

/// A store's memory and size by kind (see [`RocksStore::memory`]): bytes, except the rows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StoreMemory {
    /// RocksDB's memtables (`rocksdb.cur-size-all-mem-tables`).
    pub memtables: u64,
    /// Blocks in RocksDB's block cache (`rocksdb.block-cache-usage`), and those pinned.
    pub block_cache: u64,
    pub block_cache_pinned: u64,
    /// What open table files hold outside the block cache (`rocksdb.estimate-table-readers-mem`):
    /// small, since index and filter blocks live in the cache (see [`table_options`]).
    pub table_readers: u64,
    /// The table files' size on disk (`rocksdb.total-sst-files-size`), not memory.
    pub sst_files: u64,
    /// Rows committed and not yet written to RocksDB (the write-back layer).
    pub write_back_rows: u64,
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
    /// The key counter written by the last commit into `rows` ([`COUNTER_UNKNOWN`] if it wrote
    /// none), and by the last one into `flushing`.
    rows_counter: i64,
    flushing_counter: i64,
    /// No row RocksDB holds belongs to an entity with this key counter or above (see
    /// [`StoredAbsence`]); [`COUNTER_UNKNOWN`] until a flush tells.
    stored_counter: i64,
}

impl Recent {
    fn new(point_tables: PointTables) -> Self {
        Self {
            rows: Generation::new(point_tables),
            flushing: None,
            rows_counter: COUNTER_UNKNOWN,
            flushing_counter: COUNTER_UNKNOWN,
            stored_counter: COUNTER_UNKNOWN,
        }
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
        // which commit came last is not worth tracking on this error path
        self.rows_counter = COUNTER_UNKNOWN;
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
        Self::open_with_point_tables(dir, &[], None)
    }

    /// As [`Self::open`], declaring the tables (by key prefix) that are only ever read by key,
    /// never scanned: the write-back layer keeps their rows in a hash map (see `generation`). A
    /// hint for speed; scans of them stay correct.
    /// `absence`, if given, lets reads skip RocksDB for rows it cannot hold (see [`StoredAbsence`]).
    pub fn open_with_point_tables(dir: &Path, point_tables: &[&[u8]], absence: Option<StoredAbsence>) -> Result<Self, StateError> {
        Self::open_with_table_options(dir, point_tables, absence, &table_options())
    }

    fn open_with_table_options(
        dir: &Path,
        point_tables: &[&[u8]],
        absence: Option<StoredAbsence>,
        table: &BlockBasedOptions,
    ) -> Result<Self, StateError> {
        let mut opts = Options::default();
        opts.create_if_missing(true);
        opts.set_compression_type(rocksdb::DBCompressionType::Lz4);
        opts.increase_parallelism(2);
        opts.set_block_based_table_factory(table);
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
        // a mutable option, set before the store writes anything (the C API's setter is not
        // wrapped by the `rocksdb` crate)
        db.set_options(&[("uncache_aggressiveness", UNCACHE_AGGRESSIVENESS)])?;
        let backing = Backing {
            db: Arc::new(db),
            deletes: Arc::default(),
            compacting: Arc::default(),
            live_keys: Arc::default(),
            hints: Arc::default(),
        };
        let point_tables: PointTables = point_tables.iter().map(|p| p.to_vec()).collect();
        let recent = Arc::new(RwLock::new(Recent::new(point_tables.clone())));
        Ok(Self { backing, recent, absence, point_tables, dir: dir.to_path_buf(), upgrade: None })
    }

    /// Rewrites, once and in the background, table files written before index and filter
    /// blocks were partitioned (see `table_upgrade`): for a store that lives on, such as a
    /// partition's, not one opened for a moment. Closing the store cancels it.
    pub fn upgrade_tables(&mut self) -> Result<(), StateError> {
        if self.upgrade.is_none() {
            self.upgrade = table_upgrade::start(&self.backing.db, &self.dir)?;
        }
        Ok(())
    }

    /// Where the store's memory is, for the node's metrics: RocksDB's own accounting (its
    /// properties: memtables, block cache, table readers' index and filter blocks) and the rows
    /// the write-back layer holds. Reads a few counters; cheap enough for every scrape.
    pub fn memory(&self) -> StoreMemory {
        let db = &self.backing.db;
        let property = |name: &str| db.property_int_value(name).ok().flatten().unwrap_or(0);
        let write_back_rows = {
            let recent = self.recent.read().expect("write-back layer lock");
            recent.rows.len() + recent.flushing.as_ref().map_or(0, |f| f.len())
        };
        StoreMemory {
            memtables: property("rocksdb.cur-size-all-mem-tables"),
            block_cache: property("rocksdb.block-cache-usage"),
            block_cache_pinned: property("rocksdb.block-cache-pinned-usage"),
            table_readers: property("rocksdb.estimate-table-readers-mem"),
            sst_files: property("rocksdb.total-sst-files-size"),
            write_back_rows: write_back_rows as u64,
        }
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
        if table_upgrade::is_marked(&self.dir) {
            table_upgrade::mark(dir)?;
        }
        Ok(())
    }
}

/// Moves the layer's rows to `flushing` and returns them for writing.
fn freeze(recent: &mut Recent) -> Arc<Generation> {
    let empty = Generation::new(recent.rows.point_tables());
    let frozen = Arc::new(std::mem::replace(&mut recent.rows, empty));
    recent.flushing = Some(frozen.clone());
    recent.flushing_counter = std::mem::replace(&mut recent.rows_counter, COUNTER_UNKNOWN);
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
    recent.stored_counter = recent.flushing_counter;
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
    fn point_tables(&self) -> PointTables {
        self.point_tables.clone()
    }

    fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        // held while RocksDB is read: a flush drops rows from the layer only under the write lock,
        // once RocksDB has them
        let recent = self.recent.read().expect("state write-back lock");
        if let Some(row) = recent.get(key) {
            return row.clone();
        }
        if self.cannot_hold(key, true, &recent) {
            return None;
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
        if self.cannot_hold(prefix, false, &recent) {
            return Box::new(staged.into_iter().filter_map(|(k, v)| Some((k, v?))));
        }
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
    /// Whether RocksDB cannot hold a row under `key` (a whole key, or a scan's prefix).
    fn cannot_hold(&self, key: &[u8], whole_key: bool, recent: &Recent) -> bool {
        self.absence.as_ref().is_some_and(|a| recent.stored_counter != COUNTER_UNKNOWN && (a.absent)(key, whole_key, recent.stored_counter))
    }

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

impl RocksStore {
    /// Closes the store (flushing its write-back layer, as dropping it does) and waits, up to
    /// `wait`, until its background threads (a flush, a compaction) have let go of RocksDB, so
    /// that the folder can be opened again at once; `false` if they still hold it.
    pub fn close(self, wait: std::time::Duration) -> bool {
        let db = self.backing.db.clone();
        drop(self);
        let deadline = std::time::Instant::now() + wait;
        while Arc::strong_count(&db) > 1 {
            if std::time::Instant::now() > deadline {
                return false;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        true
    }
}

impl Drop for RocksStore {
    /// A store closed cleanly keeps its write-back layer (a crash loses it; see the type).
    fn drop(&mut self) {
        if let Err(e) = self.flush_write_back() {
            tracing::warn!(error = %e, "state write-back flush at close failed; the log replays it");
        }
        if let Some(upgrade) = self.upgrade.take() {
            upgrade.stop(&self.backing.db);
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
    /// Commits rows as [`WriteSet::rows`] gives them (key, `None` for a delete, freshness),
    /// each as if committed on its own, in order: the rows of several write sets, each set's
    /// keys distinct, commit as the sets would one after the other. Atomic as a commit is.
    pub fn commit_changes(&self, rows: impl IntoIterator<Item = (Vec<u8>, Option<Vec<u8>>, bool)>) -> Result<(), StateError> {
        self.commit_rows(rows.into_iter().map(|(key, value, fresh)| (Key(key), Row { fresh: fresh && value.is_some(), value })))
    }

    /// Puts committed rows (`None`: deleted) into the write-back layer.
    fn commit_rows(&self, rows: impl Iterator<Item = (Key, Row)>) -> Result<(), StateError> {
        let mut recent = self.recent_mut();
        let Recent { rows: layer, flushing, rows_counter, .. } = &mut *recent;
        let counter_key = self.absence.as_ref().map(|a| a.counter_key);
        let mut counter = COUNTER_UNKNOWN;
        for (k, row) in rows {
            if counter_key.is_some_and(|c| k.0 == c) {
                counter = row.value.as_deref().and_then(|v| v.try_into().ok()).map_or(COUNTER_UNKNOWN, i64::from_be_bytes);
            }
            layer.commit(k, row, |key| match flushing.as_ref().and_then(|f| f.get(key)) {
                Some(older) => older.value.is_some(),
                None => self.backing.db.key_may_exist(key),
            });
        }
        *rows_counter = counter;
        // Until a flush of commits that carry the key counter, nothing is known absent from
        // RocksDB and every read that misses the layer asks it (a W2 instance's completion
        // opened an iterator for its variables): such a flush starts at once, however small the
        // layer, which may otherwise not fill for a whole run (its rows are put and deleted).
        let learns_counter = recent.stored_counter == COUNTER_UNKNOWN && counter != COUNTER_UNKNOWN;
        if recent.rows.len() >= FLUSH_AT_ROWS || learns_counter {
            self.start_flush(&mut recent);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rows `o/<owner: i64 BE>/...` are owned by their owner key; the counter is in `X/c`.
    fn owned_rule() -> StoredAbsence {
        StoredAbsence {
            counter_key: b"X/c",
            absent: Box::new(|key: &[u8], _whole: bool, counter: i64| {
                key.strip_prefix(b"o/")
                    .and_then(|rest| rest.get(..8))
                    .is_some_and(|owner| i64::from_be_bytes(owner.try_into().unwrap()) >= counter)
            }),
        }
    }

    fn owned(owner: i64, name: &str) -> Vec<u8> {
        [&b"o/"[..], &owner.to_be_bytes(), b"/", name.as_bytes()].concat()
    }

    fn commit(store: &RocksStore, rows: &[(Vec<u8>, &str)], counter: Option<i64>) {
        let mut writes = WriteSet::default();
        for (k, v) in rows {
            writes.put(k.clone(), v.as_bytes().to_vec());
        }
        if let Some(c) = counter {
            writes.put(b"X/c".to_vec(), c.to_be_bytes().to_vec());
        }
        store.commit_owned(writes).unwrap();
    }

    fn scan(store: &RocksStore, owner: i64) -> Vec<Vec<u8>> {
        store.scan_prefix(&owned(owner, "")).map(|(k, _)| k).collect()
    }

    /// RocksDB 8.10 could leave a checkpoint asleep (it missed a wake-up, facebook/rocksdb#14069,
    /// fixed in RocksDB 10.9; docs/performance.md, "Large state", run 4): checkpoints taken while
    /// other threads write, flush, compact and drop iterators (each dropped iterator can look for
    /// obsolete files) all finish, and so do those taken once everything is idle again. The race
    /// is rare: this never caught it on 8.10; a node after a 10 GB run did.
    #[test]
    fn checkpoints_finish_while_rocksdb_flushes_compacts_and_purges_and_once_it_idles() {
        use std::time::{Duration, Instant};
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(RocksStore::open(&dir.path().join("db")).unwrap());
        let stop = Arc::new(AtomicBool::new(false));
        let churn: Vec<_> = (0..3)
            .map(|thread| {
                let (store, stop) = (store.clone(), stop.clone());
                std::thread::spawn(move || {
                    let mut round = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        let mut writes = WriteSet::default();
                        for i in 0..200u64 {
                            let key = format!("A/{thread}/{:012}", round * 200 + i).into_bytes();
                            writes.put(key, vec![b'x'; 100]);
                            if round > 0 {
                                writes.delete(format!("A/{thread}/{:012}", (round - 1) * 200 + i).into_bytes());
                            }
                        }
                        store.commit_owned(writes).unwrap();
                        // iterators opened and dropped while files come and go
                        let _ = store.scan_prefix(format!("A/{thread}/").as_bytes()).take(3).count();
                        if round.is_multiple_of(5) {
                            store.flush_write_back().unwrap();
                            store.backing.db.flush().unwrap();
                        }
                        if round.is_multiple_of(25) && thread == 0 {
                            store.backing.db.compact_range(None::<&[u8]>, None::<&[u8]>);
                        }
                        round += 1;
                    }
                })
            })
            .collect();
        // a checkpoint left asleep never returns: it runs on a thread of its own
        let checkpoint = |n: usize| {
            let (store, path) = (store.clone(), dir.path().join(format!("cp-{n}")));
            let (done, taken) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                store.checkpoint(&path).unwrap();
                std::fs::remove_dir_all(&path).unwrap();
                let _ = done.send(());
            });
            taken.recv_timeout(Duration::from_secs(20)).unwrap_or_else(|_| panic!("checkpoint {n} did not finish in 20 s"));
        };
        let until = Instant::now() + Duration::from_secs(6);
        let mut n = 0;
        while Instant::now() < until {
            checkpoint(n);
            n += 1;
        }
        stop.store(true, Ordering::Relaxed);
        churn.into_iter().for_each(|t| t.join().unwrap());
        for _ in 0..20 {
            checkpoint(n);
            n += 1;
        }
    }

    /// `words` pseudo-random 64-bit words in hex (xorshift from `seed`): values that do not
    /// compress, so that table files have many blocks.
    fn random_hex(seed: &mut u64, words: usize) -> String {
        (0..words)
            .map(|_| {
                *seed ^= *seed << 13;
                *seed ^= *seed >> 7;
                *seed ^= *seed << 17;
                format!("{:016x}", *seed)
            })
            .collect()
    }

    /// Writes `rows` rows `E/{i:012}` of 128 bytes that do not compress away (so that the table
    /// files have many blocks) and compacts them into table files.
    fn fill_tables(store: &RocksStore, rows: u64) {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        for chunk in 0..rows.div_ceil(10_000) {
            let mut writes = WriteSet::default();
            for i in chunk * 10_000..((chunk + 1) * 10_000).min(rows) {
                let value = random_hex(&mut seed, 8);
                writes.put(format!("E/{i:012}").into_bytes(), value.into_bytes());
            }
            store.commit_owned(writes).unwrap();
        }
        store.flush_write_back().unwrap();
        store.backing.db.flush().unwrap();
        store.backing.db.compact_range(None::<&[u8]>, None::<&[u8]>);
    }

    /// Every row `fill_tables` wrote is found, and keys beside them are not.
    fn assert_filled(store: &RocksStore, rows: u64) {
        for i in (0..rows).step_by(997) {
            assert!(store.get(format!("E/{i:012}").as_bytes()).is_some(), "row {i} not found");
            assert_eq!(store.get(format!("E/{i:012}x").as_bytes()), None);
        }
    }

    /// The index partitions of all the store's table files (0 for files with a whole index).
    fn index_partitions(store: &RocksStore) -> u64 {
        let properties = store.backing.db.property_value("rocksdb.aggregated-table-properties").unwrap().unwrap();
        // (RocksDB leaves the property out when no file has a partitioned index)
        properties
            .split("# index partitions=")
            .nth(1)
            .map_or(0, |count| count.split(|c: char| !c.is_ascii_digit()).next().unwrap().parse().unwrap())
    }

    /// A store's index and filter blocks live in its bounded block cache, not beside it: what
    /// the open table files hold outside the cache stays small however much state there is
    /// (docs/performance.md, "Large state": ~11 MB per GB when they were kept outside), and
    /// reads of rows present and absent still find their way.
    #[test]
    fn index_and_filter_blocks_are_held_in_the_bounded_block_cache() {
        let dir = tempfile::tempdir().unwrap();
        let rows = 200_000u64;
        fill_tables(&RocksStore::open(dir.path()).unwrap(), rows);
        let store = RocksStore::open(dir.path()).unwrap();
        assert_filled(&store, rows);
        let memory = store.memory();
        assert!(memory.sst_files > 20 << 20, "the test needs tens of MB of table files: {memory:?}");
        // whole index and filter blocks for these files come to ~0.5 MB
        assert!(memory.table_readers < 64 << 10, "index or filter blocks held outside the block cache: {memory:?}");
        assert!(memory.block_cache > 0 && memory.block_cache <= BLOCK_CACHE_BYTES as u64, "{memory:?}");
        assert!(index_partitions(&store) >= store.backing.db.live_files().unwrap().len() as u64);
    }

    /// The blocks of table files that compactions replaced leave the block cache with their
    /// files: a store whose rows are rewritten again and again holds about what its live files
    /// need, not a cache full of dead files' blocks (the soak's RSS rose by the cache's size).
    #[test]
    fn blocks_of_replaced_table_files_leave_the_block_cache() {
        let dir = tempfile::tempdir().unwrap();
        let store = RocksStore::open(dir.path()).unwrap();
        let db = &store.backing.db;
        let rows = 2_000u32;
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        for _round in 0..30 {
            for i in 0..rows {
                let value = random_hex(&mut seed, 16);
                db.put(format!("E/{i:08}"), value).unwrap();
            }
            db.flush().unwrap();
            db.compact_range(None::<&[u8]>, None::<&[u8]>);
            // every row read: the live file's blocks come into the cache
            for i in 0..rows {
                assert!(db.get(format!("E/{i:08}")).unwrap().is_some());
            }
        }
        let memory = store.memory();
        assert_eq!(db.live_files().unwrap().len(), 1, "{memory:?}");
        // 30 rounds of ~0.3 MB of blocks each: ~9 MB in the cache if dead files' blocks stayed
        assert!(memory.block_cache < memory.sst_files + (1 << 20), "dead files' blocks still cached: {memory:?}");
    }

    /// Table files written before partitioned index and filters (whole blocks, which thrash a
    /// bounded cache) are rewritten once in the background and the folder marked; a store
    /// closed while the rewrite runs opens again, and checkpoints carry the mark.
    #[test]
    fn table_files_from_before_partitioned_index_and_filters_are_rewritten_once() {
        let dir = tempfile::tempdir().unwrap();
        let rows = 100_000u64;
        let mut before = BlockBasedOptions::default();
        before.set_bloom_filter(10.0, false);
        fill_tables(&RocksStore::open_with_table_options(dir.path(), &[], None, &before).unwrap(), rows);
        assert_eq!(index_partitions(&RocksStore::open(dir.path()).unwrap()), 0, "written with whole index blocks");
        assert!(!table_upgrade::is_marked(dir.path()));

        // closed at once: the rewrite is cancelled (or done), and the folder opens again
        RocksStore::open(dir.path()).unwrap().upgrade_tables().unwrap();
        let mut store = RocksStore::open(dir.path()).unwrap();
        store.upgrade_tables().unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while !table_upgrade::is_marked(dir.path()) {
            assert!(std::time::Instant::now() < deadline, "the table files were not rewritten in 60 s");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(index_partitions(&store) >= store.backing.db.live_files().unwrap().len() as u64, "every file partitioned");
        assert_filled(&store, rows);
        store.checkpoint(&dir.path().join("checkpoint")).unwrap();
        assert!(table_upgrade::is_marked(&dir.path().join("checkpoint")), "a checkpoint of a marked store is marked");

        // a store without table files has nothing to rewrite: marked at once
        let fresh = tempfile::tempdir().unwrap();
        RocksStore::open(fresh.path()).unwrap().upgrade_tables().unwrap();
        assert!(table_upgrade::is_marked(fresh.path()));
    }

    #[test]
    fn rows_of_entities_newer_than_what_rocksdb_has_are_not_read_from_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = RocksStore::open_with_point_tables(dir.path(), &[], Some(owned_rule())).unwrap();
        // before any flush nothing is known absent: a row RocksDB holds is found
        store.backing.db.put(owned(9, "early"), b"x").unwrap();
        assert_eq!(store.get(&owned(9, "early")), Some(b"x".to_vec()));
        assert_eq!(scan(&store, 9), vec![owned(9, "early")]);

        // entity 1 created, next counter 2; flushed: RocksDB has it, and reads find it there
        commit(&store, &[(owned(1, "a"), "v")], Some(2));
        store.flush_write_back().unwrap();
        assert_eq!(store.stored_keys(b"o/"), [owned(1, "a"), owned(9, "early")].map(|k| String::from_utf8_lossy(&k).into_owned()));
        assert_eq!(store.get(&owned(1, "a")), Some(b"v".to_vec()));
        assert_eq!(scan(&store, 1), vec![owned(1, "a")]);
        // entity 9 is at or above the counter RocksDB's state has: RocksDB is not asked
        assert_eq!(store.get(&owned(9, "early")), None, "a row RocksDB cannot hold by the rule is not read from it");
        assert!(scan(&store, 9).is_empty());

        // entity 5 lives in the layer: found there, before and after its flush
        commit(&store, &[(owned(5, "b"), "w")], Some(6));
        assert_eq!(store.get(&owned(5, "b")), Some(b"w".to_vec()));
        store.flush_write_back().unwrap();
        assert_eq!(store.get(&owned(5, "b")), Some(b"w".to_vec()));
        assert_eq!(scan(&store, 5), vec![owned(5, "b")]);

        // a commit without the counter makes RocksDB's state unknown again once flushed
        commit(&store, &[(owned(7, "c"), "z")], None);
        store.flush_write_back().unwrap();
        assert_eq!(store.get(&owned(7, "c")), Some(b"z".to_vec()));
        assert_eq!(scan(&store, 7), vec![owned(7, "c")]);
        assert_eq!(store.get(&owned(9, "early")), Some(b"x".to_vec()), "nothing taken as absent while unknown");
    }

    #[test]
    fn the_first_commit_with_a_counter_is_flushed_at_once_so_that_absence_is_known() {
        let dir = tempfile::tempdir().unwrap();
        let store = RocksStore::open_with_point_tables(dir.path(), &[], Some(owned_rule())).unwrap();
        store.backing.db.put(owned(9, "early"), b"x").unwrap();
        assert_eq!(store.get(&owned(9, "early")), Some(b"x".to_vec()), "unknown before any commit");
        // a commit without the counter teaches nothing: no flush
        commit(&store, &[(owned(1, "a"), "v")], None);
        assert!(store.recent.read().unwrap().flushing.is_none() && store.stored_keys(b"o/1").is_empty());
        commit(&store, &[(owned(1, "b"), "w")], Some(2));
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while store.recent.read().unwrap().stored_counter == COUNTER_UNKNOWN {
            assert!(std::time::Instant::now() < deadline, "no flush of the first commit with a counter");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert_eq!(store.recent.read().unwrap().stored_counter, 2);
        assert_eq!(scan(&store, 1), vec![owned(1, "a"), owned(1, "b")]);
        assert_eq!(store.get(&owned(9, "early")), None, "entity 9 is newer than RocksDB's state: RocksDB is not asked");
        assert!(scan(&store, 9).is_empty());
    }

    /// A follower commits the rows of a leader's write sets (`commit_changes`): the state is
    /// the state the leader's commits of those sets gave, flushed or not in between.
    #[test]
    fn rows_committed_as_changes_give_the_state_of_the_write_sets_committed() {
        let sets = || {
            let mut first = WriteSet::default();
            first.put_fresh(owned(1, "new"), b"1".to_vec());
            first.put(owned(2, "old"), b"2".to_vec());
            first.put(b"X/c".to_vec(), 3i64.to_be_bytes().to_vec());
            let mut second = WriteSet::default();
            second.delete(owned(1, "new"));
            second.delete(owned(2, "old"));
            second.put(owned(2, "other"), b"3".to_vec());
            second.delete(b"o/flushed".to_vec());
            let mut third = WriteSet::default();
            third.put_fresh(owned(4, "late"), b"4".to_vec());
            [first, second, third]
        };
        let leader_dir = tempfile::tempdir().unwrap();
        let follower_dir = tempfile::tempdir().unwrap();
        let leader = RocksStore::open_with_point_tables(leader_dir.path(), &[], Some(owned_rule())).unwrap();
        let follower = RocksStore::open_with_point_tables(follower_dir.path(), &[], Some(owned_rule())).unwrap();
        for store in [&leader, &follower] {
            commit(store, &[(owned(2, "old"), "0"), (b"o/flushed".to_vec(), "f")], Some(3));
            store.flush_write_back().unwrap();
        }
        for (i, set) in sets().into_iter().enumerate() {
            let rows: Vec<_> = set.rows().map(|(k, v, fresh)| (k.to_vec(), v.map(<[u8]>::to_vec), fresh)).collect();
            leader.commit_owned(set).unwrap();
            follower.commit_changes(rows).unwrap();
            if i == 1 {
                leader.flush_write_back().unwrap();
            }
        }
        assert_eq!(follower.dump(), leader.dump());
        follower.flush_write_back().unwrap();
        leader.flush_write_back().unwrap();
        assert_eq!(follower.dump(), leader.dump());
        assert_eq!(follower.get(&owned(1, "new")), None);
        assert_eq!(follower.get(&owned(2, "other")), Some(b"3".to_vec()));
        assert_eq!(follower.get(b"o/flushed"), None);
    }
}
