//! Backups of partitions into a file system store, and restoring a data folder from one, after
//! Zeebe's backup management API (docs.camunda.io, "Backup and restore" / "Zeebe backup
//! management API": `POST /actuator/backups`, `GET /actuator/backups[/{id}]`,
//! `DELETE /actuator/backups/{id}`; its JSON is `BackupInfo` / `PartitionBackupInfo`).
//!
//! A partition's backup is a RocksDB checkpoint its partition thread takes between two batches
//! (so it holds the state at exactly one applied index: the backup's `checkpointPosition`),
//! then copied into the store off the partition thread. The log is not copied: every entry up
//! to the position is in the checkpoint's state, and a restored partition's log starts after
//! it. Each broker backs up the partitions it leads; a partition's files and its
//! `partition.json` (state, position, the state's digest) are its own, so brokers sharing a
//! store never write the same file.
//!
//! Store layout: `<store>/<backupId>/backup.json` (the partition count) and
//! `<store>/<backupId>/partitions/<id>/{partition.json, state/}`.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use waggle_protocol::PartitionId;

/// How long a partition's checkpoint may take to be taken by its thread.
const CHECKPOINT_WAIT: Duration = Duration::from_secs(120);

#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    #[error("no backup store is configured (set backup_store / --backup-store)")]
    NotConfigured,
    #[error("a backup with id {0} already exists, or one with a higher id does ({1}): backup ids must increase")]
    Conflict(u64, u64),
    #[error("no backup with id {0}")]
    NotFound(u64),
    #[error("backup {0} is not complete ({1})")]
    Incomplete(u64, &'static str),
    #[error("the target data folder {0} is not empty: restore needs an empty or missing folder")]
    TargetNotEmpty(PathBuf),
    #[error("backup store: {0}")]
    Io(String),
}

fn io(context: impl std::fmt::Display) -> impl FnOnce(std::io::Error) -> BackupError {
    move |e| BackupError::Io(format!("{context}: {e}"))
}

/// A partition's backup as the store holds it (Zeebe's `PartitionBackupInfo`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct PartitionBackup {
    pub partition_id: PartitionId,
    /// `IN_PROGRESS`, `COMPLETED` or `FAILED`.
    pub state: String,
    pub broker_id: u64,
    pub broker_version: String,
    /// The applied index the checkpoint holds (restore gives the state at this position).
    pub checkpoint_position: Option<u64>,
    /// The Raft term the partition was in.
    pub term: Option<u64>,
    /// The checkpoint's state digest (rows and hash, as `/v1/partitions/{id}/digest`).
    pub rows: Option<u64>,
    pub hash: Option<String>,
    pub created_at: String,
    pub last_updated_at: String,
    pub failure_reason: Option<String>,
}

/// A backup across partitions (Zeebe's `BackupInfo`), aggregated as Zeebe does: COMPLETED when
/// every partition is, FAILED when one failed, INCOMPLETE when one is missing, else
/// IN_PROGRESS.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct BackupInfo {
    pub backup_id: u64,
    pub state: &'static str,
    pub failure_reason: Option<String>,
    pub details: Vec<PartitionBackup>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct BackupMeta {
    backup_id: u64,
    partition_count: u16,
}

/// The backups in a store directory.
#[derive(Debug, Clone)]
pub struct BackupStore {
    root: PathBuf,
}

fn now_iso() -> String {
    let ms = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0);
    chrono_like(ms)
}

/// `ms` since the epoch as an ISO-8601 UTC timestamp (`2024-01-02T03:04:05.678Z`).
fn chrono_like(ms: i64) -> String {
    let (secs, millis) = (ms.div_euclid(1000), ms.rem_euclid(1000));
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // civil from days (Howard Hinnant's algorithm)
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{millis:03}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

impl BackupStore {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    fn backup_dir(&self, id: u64) -> PathBuf {
        self.root.join(id.to_string())
    }

    fn partition_dir(&self, id: u64, partition: PartitionId) -> PathBuf {
        self.backup_dir(id).join("partitions").join(partition.to_string())
    }

    /// The ids of the backups in the store, ascending.
    pub fn ids(&self) -> Vec<u64> {
        let mut ids: Vec<u64> = fs::read_dir(&self.root)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.path().join("backup.json").is_file())
            .filter_map(|e| e.file_name().to_str()?.parse().ok())
            .collect();
        ids.sort_unstable();
        ids
    }

    /// Starts backup `id` of `partitions` (of a cluster of `partition_count`): refused unless
    /// `id` is above every backup's in the store (Zeebe's rule: ids increase), or is the newest
    /// backup and holds none of `partitions` yet (another broker of the cluster started it).
    pub fn begin(&self, id: u64, partition_count: u16, partitions: &[PartitionId]) -> Result<(), BackupError> {
        if let Some(&highest) = self.ids().last() {
            let joins = id == highest && partitions.iter().all(|&p| !self.partition_dir(id, p).join("partition.json").exists());
            if id < highest || (id == highest && !joins) {
                return Err(BackupError::Conflict(id, highest));
            }
        }
        let dir = self.backup_dir(id);
        fs::create_dir_all(dir.join("partitions")).map_err(io(dir.display()))?;
        let meta = serde_json::to_vec_pretty(&BackupMeta { backup_id: id, partition_count }).expect("json");
        write_atomically(&dir.join("backup.json"), &meta)
    }

    fn write_partition(&self, id: u64, info: &PartitionBackup) -> Result<(), BackupError> {
        let dir = self.partition_dir(id, info.partition_id);
        fs::create_dir_all(&dir).map_err(io(dir.display()))?;
        write_atomically(&dir.join("partition.json"), &serde_json::to_vec_pretty(info).expect("json"))
    }

    /// Backup `id` as the store holds it.
    pub fn info(&self, id: u64) -> Result<BackupInfo, BackupError> {
        let dir = self.backup_dir(id);
        let meta: BackupMeta = match fs::read(dir.join("backup.json")) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| BackupError::Io(format!("backup {id}'s backup.json: {e}")))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(BackupError::NotFound(id)),
            Err(e) => return Err(BackupError::Io(e.to_string())),
        };
        let mut details = Vec::new();
        let mut missing = false;
        for p in 1..=meta.partition_count {
            match fs::read(self.partition_dir(id, p).join("partition.json")) {
                Ok(bytes) => details.push(serde_json::from_slice::<PartitionBackup>(&bytes).map_err(|e| BackupError::Io(e.to_string()))?),
                Err(_) => {
                    missing = true;
                    details.push(PartitionBackup {
                        partition_id: p,
                        state: "DOES_NOT_EXIST".into(),
                        broker_id: 0,
                        broker_version: String::new(),
                        checkpoint_position: None,
                        term: None,
                        rows: None,
                        hash: None,
                        created_at: String::new(),
                        last_updated_at: String::new(),
                        failure_reason: None,
                    })
                }
            }
        }
        let failed = details.iter().find(|d| d.state == "FAILED");
        let state = if failed.is_some() {
            "FAILED"
        } else if details.iter().all(|d| d.state == "COMPLETED") {
            "COMPLETED"
        } else if missing {
            "INCOMPLETE"
        } else {
            "IN_PROGRESS"
        };
        let failure_reason = failed.and_then(|d| d.failure_reason.clone());
        Ok(BackupInfo { backup_id: id, state, failure_reason, details })
    }

    /// Every backup in the store, by id.
    pub fn list(&self) -> Vec<BackupInfo> {
        self.ids().into_iter().filter_map(|id| self.info(id).ok()).collect()
    }

    /// Removes backup `id` (its `backup.json` first, so that a removal cut short leaves no
    /// backup that lists).
    pub fn delete(&self, id: u64) -> Result<(), BackupError> {
        let dir = self.backup_dir(id);
        match fs::remove_file(dir.join("backup.json")) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(BackupError::NotFound(id)),
            Err(e) => return Err(BackupError::Io(e.to_string())),
        }
        fs::remove_dir_all(&dir).map_err(io(dir.display()))
    }
}

/// Writes `bytes` to `path` through a temporary file and a rename.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), BackupError> {
    let tmp = path.with_extension("json.tmp");
    fs::write(&tmp, bytes).map_err(io(tmp.display()))?;
    fs::File::open(&tmp).and_then(|f| f.sync_all()).map_err(io(tmp.display()))?;
    fs::rename(&tmp, path).map_err(io(path.display()))
}

/// Copies the flat directory `from` into `to` (created), fsyncing each file.
fn copy_files(from: &Path, to: &Path) -> std::io::Result<()> {
    fs::create_dir_all(to)?;
    for entry in fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        fs::copy(entry.path(), &target)?;
        fs::File::open(&target)?.sync_all()?;
    }
    Ok(())
}

/// What backing up one partition needs of the broker.
pub(crate) struct PartitionJob {
    pub partition: PartitionId,
    /// Where the partition thread puts its checkpoint (the partition's folder, for hard links).
    pub scratch: PathBuf,
    /// Asks the partition thread for the checkpoint.
    pub ask: Box<dyn FnOnce(PathBuf, CheckpointReply) + Send>,
}

/// Where a partition thread answers a backup's checkpoint: the digest of the state it holds
/// and the partition's Raft term, or why it failed.
pub(crate) type CheckpointReply = mpsc::Sender<Result<(crate::StateDigest, u64), String>>;

/// A partition's backup recorded IN_PROGRESS, to be taken by [`run`].
pub(crate) struct Pending(PartitionJob, PartitionBackup);

/// Records each partition of `jobs` IN_PROGRESS in backup `id` of `store` (before the API
/// answers, so that a status read at once sees them).
pub(crate) fn begin_partitions(store: &BackupStore, id: u64, broker_id: u64, jobs: Vec<PartitionJob>) -> Vec<Pending> {
    jobs.into_iter()
        .filter_map(|job| {
            let now = now_iso();
            let info = PartitionBackup {
                partition_id: job.partition,
                state: "IN_PROGRESS".into(),
                broker_id,
                broker_version: env!("CARGO_PKG_VERSION").into(),
                checkpoint_position: None,
                term: None,
                rows: None,
                hash: None,
                created_at: now.clone(),
                last_updated_at: now,
                failure_reason: None,
            };
            match store.write_partition(id, &info) {
                Ok(()) => Some(Pending(job, info)),
                Err(e) => {
                    tracing::error!(backup = id, partition = job.partition, error = %e, "backup could not start");
                    None
                }
            }
        })
        .collect()
}

/// Backs up each partition of `pending`, one after another: COMPLETED with its position and
/// digest, or FAILED with the reason.
pub(crate) fn run(store: &BackupStore, id: u64, pending: Vec<Pending>) {
    for Pending(job, mut info) in pending {
        let partition = job.partition;
        let outcome = backup_partition(store, id, job);
        info.last_updated_at = now_iso();
        match outcome {
            Ok((digest, term)) => {
                info.state = "COMPLETED".into();
                info.checkpoint_position = Some(digest.applied_index);
                info.term = Some(term);
                info.rows = Some(digest.rows);
                info.hash = Some(digest.hash.to_string());
                tracing::info!(backup = id, partition, position = digest.applied_index, "partition backed up");
            }
            Err(reason) => {
                tracing::error!(backup = id, partition, error = %reason, "partition backup failed");
                info.state = "FAILED".into();
                info.failure_reason = Some(reason);
            }
        }
        if let Err(e) = store.write_partition(id, &info) {
            tracing::error!(backup = id, partition, error = %e, "backup status could not be written");
        }
    }
}

fn backup_partition(store: &BackupStore, id: u64, job: PartitionJob) -> Result<(crate::StateDigest, u64), String> {
    let (tx, rx) = mpsc::channel();
    let scratch = job.scratch;
    (job.ask)(scratch.clone(), tx);
    let answer = rx.recv_timeout(CHECKPOINT_WAIT).map_err(|_| "the partition did not take its checkpoint".to_string())?;
    let copied = answer.and_then(|(digest, term)| {
        let target = store.partition_dir(id, job.partition).join("state");
        let _ = fs::remove_dir_all(&target);
        copy_files(&scratch, &target).map_err(|e| format!("copying the checkpoint to {}: {e}", target.display()))?;
        Ok((digest, term))
    });
    let _ = fs::remove_dir_all(&scratch);
    copied
}

/// What `restore` rebuilt.
#[derive(Debug, Clone)]
pub struct Restored {
    pub partition: PartitionId,
    pub position: u64,
}

/// Rebuilds `data_dir` from backup `id` of `store`: each partition's state from its checkpoint
/// (as the runtime state and as its newest snapshot) and a log that starts after the backup's
/// position. Refuses a `data_dir` that exists and is not empty, and a backup that is not
/// COMPLETED.
pub fn restore(store: &BackupStore, id: u64, data_dir: &Path) -> Result<Vec<Restored>, BackupError> {
    let info = store.info(id)?;
    if info.state != "COMPLETED" {
        return Err(BackupError::Incomplete(id, info.state));
    }
    if fs::read_dir(data_dir).is_ok_and(|mut d| d.next().is_some()) {
        return Err(BackupError::TargetNotEmpty(data_dir.to_path_buf()));
    }
    let mut restored = Vec::new();
    for p in &info.details {
        let position = p.checkpoint_position.unwrap_or(0);
        let term = p.term.unwrap_or(0);
        let source = store.partition_dir(id, p.partition_id).join("state");
        let base = data_dir.join("partitions").join(p.partition_id.to_string());
        copy_files(&source, &base.join("runtime")).map_err(io(source.display()))?;
        copy_files(&source, &base.join("snapshots").join(position.to_string())).map_err(io(source.display()))?;
        let log = base.join("log");
        fs::create_dir_all(&log).map_err(io(log.display()))?;
        let mut journal =
            waggle_log::Journal::open(&log, waggle_log::JournalConfig::default()).map_err(|e| BackupError::Io(e.to_string()))?;
        journal.reset_to_snapshot(position, term).map_err(|e| BackupError::Io(e.to_string()))?;
        journal
            .set_hard_state(waggle_log::HardState { term, vote: 0, commit: position })
            .and_then(|()| journal.flush())
            .map_err(|e| BackupError::Io(e.to_string()))?;
        restored.push(Restored { partition: p.partition_id, position });
    }
    Ok(restored)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_iso_8601_utc() {
        assert_eq!(chrono_like(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(chrono_like(1_709_251_199_123), "2024-02-29T23:59:59.123Z");
    }

    #[test]
    fn ids_increase_and_a_backup_aggregates_its_partitions() {
        let dir = tempfile::tempdir().unwrap();
        let store = BackupStore::new(dir.path());
        store.begin(5, 2, &[1]).unwrap();
        assert!(matches!(store.begin(4, 2, &[2]), Err(BackupError::Conflict(4, 5))));
        assert_eq!(store.info(5).unwrap().state, "INCOMPLETE");
        let done = |p| PartitionBackup {
            partition_id: p,
            state: "COMPLETED".into(),
            broker_id: 0,
            broker_version: "x".into(),
            checkpoint_position: Some(3),
            term: Some(1),
            rows: Some(1),
            hash: Some("1".into()),
            created_at: now_iso(),
            last_updated_at: now_iso(),
            failure_reason: None,
        };
        store.write_partition(5, &done(1)).unwrap();
        assert!(matches!(store.begin(5, 2, &[1]), Err(BackupError::Conflict(5, 5))), "partition 1 is in it");
        store.begin(5, 2, &[2]).unwrap();
        store.write_partition(5, &PartitionBackup { state: "IN_PROGRESS".into(), ..done(2) }).unwrap();
        assert_eq!(store.info(5).unwrap().state, "IN_PROGRESS");
        store.write_partition(5, &done(2)).unwrap();
        assert_eq!(store.info(5).unwrap().state, "COMPLETED");
        assert_eq!(store.list().len(), 1);
        store.delete(5).unwrap();
        assert!(matches!(store.info(5), Err(BackupError::NotFound(5))));
        assert!(store.list().is_empty());
    }
}
