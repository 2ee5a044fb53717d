//! A partition's snapshots: checkpoints of its state in `<partition>/snapshots/<index>` (the
//! newest only), the [`SnapshotSource`] its Raft group sends them from, and a snapshot received
//! from the leader taken into the partition.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Instant;

use waggle_replication::{InstalledSnapshot, SnapshotSource};
use waggle_state::{KvRead, KvStore, RocksStore, WriteSet};

use super::META_APPLIED_INDEX;

/// Rows written to the live store per commit while a received snapshot is loaded into it.
const LOAD_ROWS_PER_COMMIT: usize = 16_384;

/// Names `<dir>/<index>`, a checkpoint of the state at `index` or later, while it is kept (the
/// log is compacted to a snapshot's index only, so Raft asks for that one).
pub(super) struct CheckpointSource {
    pub dir: PathBuf,
}

impl SnapshotSource for CheckpointSource {
    fn files_at(&self, index: u64, _term: u64) -> Option<PathBuf> {
        let dir = self.dir.join(index.to_string());
        dir.is_dir().then_some(dir)
    }
}

/// The newest snapshot: (index, dir).
pub(super) fn newest(dir: &Path) -> Option<(u64, PathBuf)> {
    fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str()?.parse::<u64>().ok().map(|i| (i, e.path())))
        .max_by_key(|(i, _)| *i)
}

pub(super) fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    fs::create_dir_all(to)?;
    for entry in fs::read_dir(from)? {
        let entry = entry?;
        fs::copy(entry.path(), to.join(entry.file_name()))?;
    }
    Ok(())
}

/// Deletes every entry of `dir` but `keep`.
fn remove_others(dir: &Path, keep: &Path) {
    if let Ok(entries) = fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.path() != keep {
                let _ = remove_snapshot(&e.path());
            }
        }
    }
}

/// Deletes the snapshot directory `path`, renamed away first (to `<name>.removed`, which is no
/// snapshot's name): the Raft group may be listing and opening its files to offer them to a
/// follower ([`SnapshotSource`]'s contract), and a directory emptied in place could be listed
/// without some of them (a follower was sent an empty "snapshot", and its replica failed).
fn remove_snapshot(path: &Path) -> std::io::Result<()> {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    if name.parse::<u64>().is_err() {
        // a checkpoint cut short (`.tmp`) or one renamed away before: no snapshot's name
        return fs::remove_dir_all(path);
    }
    let away = path.with_file_name(format!("{name}.removed"));
    let _ = fs::remove_dir_all(&away);
    fs::rename(path, &away)?;
    fs::remove_dir_all(&away)
}

/// Checkpoints `store` into `dir/<index>` and deletes older snapshots. The checkpoint holds at
/// least the state at `index` (commits racing with it may be in it too: it carries its own
/// applied index, which recovery reads), so the log may be compacted up to `index`.
pub(super) fn take(store: &RocksStore, dir: &Path, index: u64) -> Result<(), String> {
    let tmp = dir.join(format!("{index}.tmp"));
    let _ = fs::remove_dir_all(&tmp);
    let started = Instant::now();
    store.checkpoint(&tmp).map_err(|e| e.to_string())?;
    // info: the large-state benchmark reads the time from here (scripts/bigstate-bench.sh)
    tracing::info!(index, checkpoint_ms = started.elapsed().as_millis() as u64, "checkpoint written");
    let done = dir.join(index.to_string());
    fs::rename(&tmp, &done).map_err(|e| e.to_string())?;
    remove_others(dir, &done);
    Ok(())
}

/// Moves the files of a snapshot the Raft group installed into `dir/<index>` (a rename: the
/// group's received directory is on the same file system), where it is the newest snapshot
/// (older ones are deleted), and returns that path. Once it returns, a crash before the state
/// holds the snapshot is recovered from there: the journal starts after `index`, past the
/// state's applied index, so recovery restores the newest snapshot.
pub(super) fn keep_installed(dir: &Path, installed: &InstalledSnapshot) -> std::io::Result<PathBuf> {
    let to = dir.join(installed.index.to_string());
    if to.exists() {
        remove_snapshot(&to)?;
    }
    fs::rename(&installed.dir, &to)?;
    fs::File::open(dir)?.sync_all()?;
    remove_others(dir, &to);
    Ok(to)
}

/// Makes `store`'s rows those of the checkpoint in `snapshot` (opened from a copy in
/// `scratch`): deletes the rows it lacks, puts every one of its rows, a commit per
/// [`LOAD_ROWS_PER_COMMIT`] rows, its applied index in the last commit (until then the store's
/// applied index is the old one, behind the journal: a crash meanwhile restores the snapshot
/// at the next start). Returns the snapshot's applied index and its row count.
///
/// The live store stays the one the partition's handle and scheduler read (replacing it would
/// mean sharing a swappable store with them); the cost is a rewrite of the state's rows.
pub(super) fn load_into(store: &RocksStore, snapshot: &Path, scratch: &Path) -> Result<(u64, u64), String> {
    let _ = fs::remove_dir_all(scratch);
    copy_dir(snapshot, scratch).map_err(|e| format!("copying snapshot {}: {e}", snapshot.display()))?;
    let loaded = load_rows(store, scratch);
    let _ = fs::remove_dir_all(scratch);
    loaded
}

fn load_rows(store: &RocksStore, scratch: &Path) -> Result<(u64, u64), String> {
    let source = RocksStore::open(scratch).map_err(|e| format!("opening the received snapshot: {e}"))?;
    let applied = source.get(META_APPLIED_INDEX).ok_or("the received snapshot has no applied index")?;
    let mut writes = WriteSet::default();
    let flush = |writes: &mut WriteSet| store.commit_owned(std::mem::take(writes)).map_err(|e| e.to_string());
    let stale: Vec<Vec<u8>> =
        store.scan_prefix(b"").map(|(k, _)| k).filter(|k| k.as_slice() != META_APPLIED_INDEX && source.get(k).is_none()).collect();
    for key in stale {
        writes.delete(key);
        if writes.len() >= LOAD_ROWS_PER_COMMIT {
            flush(&mut writes)?;
        }
    }
    let mut rows = 0u64;
    for (key, value) in source.scan_prefix(b"") {
        if key.as_slice() == META_APPLIED_INDEX {
            continue;
        }
        rows += 1;
        writes.put(key, value);
        if writes.len() >= LOAD_ROWS_PER_COMMIT {
            flush(&mut writes)?;
        }
    }
    writes.put(META_APPLIED_INDEX.to_vec(), applied.clone());
    flush(&mut writes)?;
    let applied = u64::from_be_bytes(applied.as_slice().try_into().map_err(|_| "the received snapshot's applied index is malformed")?);
    Ok((applied, rows))
}
