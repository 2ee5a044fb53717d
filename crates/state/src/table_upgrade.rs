//! Table files written before index and filter blocks were partitioned (`rocks::table_options`),
//! rewritten once, in the background.
//!
//! RocksDB reads a table file with the options it was written with: a file from before keeps
//! one whole index block and one whole filter block, and in the bounded block cache those are
//! loaded and evicted again and again once the state is large (10 GB written before: W5's p99
//! 3.4–59 ms against 1.2, docs/performance.md, "Large state"). Compactions rewrite files in
//! time, but the bottom level, where most parked state lies, only when new data reaches it. So a
//! partition's store that has table files and no mark compacts every file once (a manual
//! compaction of the whole key space, the bottom level included, beside RocksDB's own) and then
//! leaves a mark file in its folder (RocksDB ignores files it did not write). A store without
//! table files is marked at once; checkpoints of a marked store carry the mark.

use std::fs::File;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use rocksdb::{BottommostLevelCompaction, CompactOptions, DB};

use crate::StateError;

/// The mark: every table file in the folder was written with partitioned index and filters.
const MARK: &str = "WAGGLE-PARTITIONED-TABLES";

/// A rewrite under way; [`TableUpgrade::stop`] cancels it (the next open starts it again).
pub(crate) struct TableUpgrade {
    closing: Arc<AtomicBool>,
    thread: JoinHandle<()>,
}

/// Whether `dir` (a RocksDB folder, or a checkpoint of one) carries the mark.
pub(crate) fn is_marked(dir: &Path) -> bool {
    dir.join(MARK).exists()
}

/// Leaves the mark in `dir`, durably.
pub(crate) fn mark(dir: &Path) -> Result<(), StateError> {
    File::create(dir.join(MARK))?.sync_all()?;
    File::open(dir)?.sync_all()?;
    Ok(())
}

/// Starts the rewrite of `db`'s table files unless `dir` is marked; marks a store without any.
pub(crate) fn start(db: &Arc<DB>, dir: &Path) -> Result<Option<TableUpgrade>, StateError> {
    if is_marked(dir) {
        return Ok(None);
    }
    if db.live_files()?.is_empty() {
        mark(dir)?;
        return Ok(None);
    }
    tracing::info!(
        dir = %dir.display(),
        "rewriting the state's table files once, in the background, with partitioned index and filter blocks (they were written by an earlier Waggle)"
    );
    let closing = Arc::new(AtomicBool::new(false));
    let (db, dir, stop) = (db.clone(), dir.to_path_buf(), closing.clone());
    let thread = std::thread::Builder::new().name("state-upgrade".into()).spawn(move || rewrite(&db, &dir, &stop))?;
    Ok(Some(TableUpgrade { closing, thread }))
}

fn rewrite(db: &DB, dir: &Path, closing: &AtomicBool) {
    let started = Instant::now();
    let mut opts = CompactOptions::default();
    opts.set_bottommost_level_compaction(BottommostLevelCompaction::Force);
    // RocksDB's own compactions go on meanwhile (an exclusive one would hold them, and the
    // partition's writes would stall behind level 0)
    opts.set_exclusive_manual_compaction(false);
    db.compact_range_opt(None::<&[u8]>, None::<&[u8]>, &opts);
    if closing.load(Ordering::SeqCst) {
        return; // cancelled by the store's close: not every file was rewritten
    }
    match mark(dir) {
        Ok(()) => tracing::info!(dir = %dir.display(), seconds = started.elapsed().as_secs_f64(), "state table files rewritten"),
        Err(e) => {
            tracing::warn!(dir = %dir.display(), error = %e, "state table files rewritten, but not marked: the next start rewrites them again")
        }
    }
}

impl TableUpgrade {
    /// Cancels the rewrite if it still runs (RocksDB's background work is stopped: call only
    /// when the store closes) and waits for its thread, so that the database can be opened again.
    pub(crate) fn stop(self, db: &DB) {
        if !self.thread.is_finished() {
            self.closing.store(true, Ordering::SeqCst);
            db.cancel_all_background_work(true);
        }
        let _ = self.thread.join();
    }
}
