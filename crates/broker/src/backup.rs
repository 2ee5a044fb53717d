//! Backups of partitions into a file system store, and restoring a data folder from one, after
//! Zeebe's backup management API (docs.camunda.io, "Backup and restore" / "Zeebe backup
//! management API": `POST /actuator/backups`, `GET /actuator/backups[/{id}]`,
//! `DELETE /actuator/backups/{id}`; its JSON is `BackupInfo` / `PartitionBackupInfo`).
//!
//! A partition's backup starts as Zeebe's does, with a CHECKPOINT CREATE command (the backup
//! id as its `checkpointId`) in the partition's log: CREATED if the id is greater than the
//! partition's last checkpoint, IGNORED otherwise (then the partition's backup fails). Every
//! replica applies it, so the last checkpoint survives a failover. Once the CREATED entry is
//! applied, and before any later entry is, the leader's partition thread takes a RocksDB
//! checkpoint (so it holds the state at exactly the checkpoint's entry, a point in the log all
//! replicas agree on: the backup's `checkpointPosition`), then copied into the store off the
//! partition thread. A backup id not greater than a led partition's last checkpoint is refused
//! before anything is written ([`BackupError::CheckpointNotNewer`]). The log is not copied: every entry up
//! to the position is in the checkpoint's state, and a restored partition's log starts after
//! it. Each broker backs up the partitions it leads; a partition's files and its
//! `partition.json` (state, position, the state's digest) are its own, so brokers sharing a
//! store never write the same file.
//!
//! The store is a directory or an S3-compatible bucket ([`objects`], through `object_store`).
//! Its layout (keys, `/`-separated): `<backupId>/backup.json` (the partition count),
//! `<backupId>/partitions/<id>/partition.json`, `<backupId>/partitions/<id>/state/<file>`, and
//! `deleted/<backupId>` for each deleted backup (its id is not taken again, as Zeebe's).

mod objects;

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use objects::Objects;
pub use objects::{S3Config, StoreConfig};
use serde::{Deserialize, Serialize};
use waggle_protocol::PartitionId;

/// How long a partition's checkpoint may take to be taken by its thread.
const CHECKPOINT_WAIT: Duration = Duration::from_secs(120);

#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    #[error("no backup store is configured (set backup_store / --backup-store)")]
    NotConfigured,
    #[error("a backup with id {0} already exists, or one with a higher id was taken or deleted ({1}): backup ids must increase")]
    Conflict(u64, u64),
    /// Zeebe's rule for a checkpoint: its id must be greater than the partition's last one.
    #[error("backup id {id} is not greater than partition {partition}'s last checkpoint {last}: backup ids must increase")]
    CheckpointNotNewer { id: u64, partition: PartitionId, last: i64 },
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

/// The backups in a store (a directory or a bucket, see [`StoreConfig`]). Its calls block:
/// call them from a plain thread or `spawn_blocking`.
#[derive(Debug, Clone)]
pub struct BackupStore {
    objects: Objects,
}

fn store_err(e: String) -> BackupError {
    BackupError::Io(e)
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
    /// The store `config` names (a directory is created if missing; a bucket is not checked
    /// until used).
    pub fn open(config: &StoreConfig) -> Result<Self, BackupError> {
        Ok(Self { objects: Objects::open(config).map_err(store_err)? })
    }

    fn partition_key(id: u64, partition: PartitionId) -> String {
        format!("{id}/partitions/{partition}")
    }

    /// The ids of the backups in the store, ascending.
    pub fn ids(&self) -> Result<Vec<u64>, BackupError> {
        let mut ids = Vec::new();
        for id in self.objects.folders("").map_err(store_err)?.into_iter().filter_map(|f| f.parse::<u64>().ok()) {
            if self.objects.exists(&format!("{id}/backup.json")).map_err(store_err)? {
                ids.push(id);
            }
        }
        ids.sort_unstable();
        Ok(ids)
    }

    /// The highest id of a backup in the store or deleted from it.
    fn highest_id(&self) -> Result<Option<u64>, BackupError> {
        let deleted = self.objects.files("deleted").map_err(store_err)?.into_iter().filter_map(|f| f.parse::<u64>().ok()).max();
        Ok(self.ids()?.last().copied().max(deleted))
    }

    /// Checks that backup `id` can be taken: its id is above every backup's in the store and
    /// every deleted one's (Zeebe: "greater than the id of previous backups that are completed,
    /// failed, or deleted").
    pub fn check_new(&self, id: u64) -> Result<(), BackupError> {
        match self.highest_id()? {
            Some(highest) if id <= highest => Err(BackupError::Conflict(id, highest)),
            _ => Ok(()),
        }
    }

    /// Starts backup `id` of `partitions` (of a cluster of `partition_count`): refused unless
    /// `id` is new ([`Self::check_new`]), or is the newest backup and holds none of
    /// `partitions` yet (another broker of the cluster started it).
    pub fn begin(&self, id: u64, partition_count: u16, partitions: &[PartitionId]) -> Result<(), BackupError> {
        if let Some(highest) = self.highest_id()? {
            let mut joins = id == highest && self.objects.exists(&format!("{id}/backup.json")).map_err(store_err)?;
            for &p in partitions {
                joins = joins && !self.objects.exists(&format!("{}/partition.json", Self::partition_key(id, p))).map_err(store_err)?;
            }
            if id < highest || (id == highest && !joins) {
                return Err(BackupError::Conflict(id, highest));
            }
        }
        let meta = serde_json::to_vec_pretty(&BackupMeta { backup_id: id, partition_count }).expect("json");
        self.objects.put(&format!("{id}/backup.json"), meta).map_err(store_err)
    }

    fn write_partition(&self, id: u64, info: &PartitionBackup) -> Result<(), BackupError> {
        let key = format!("{}/partition.json", Self::partition_key(id, info.partition_id));
        self.objects.put(&key, serde_json::to_vec_pretty(info).expect("json")).map_err(store_err)
    }

    /// Part `partition` of backup `id`, if written. A store that is not atomic (s3rver streams
    /// an object while it is read) can show a half-written status: read again, a few times.
    fn read_partition(&self, id: u64, partition: PartitionId) -> Result<Option<PartitionBackup>, BackupError> {
        let key = format!("{}/partition.json", Self::partition_key(id, partition));
        let mut tries = 0;
        loop {
            let Some(bytes) = self.objects.get(&key).map_err(store_err)? else { return Ok(None) };
            match serde_json::from_slice::<PartitionBackup>(&bytes) {
                Ok(part) => return Ok(Some(part)),
                Err(_) if tries < 5 => {
                    tries += 1;
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(e) => return Err(BackupError::Io(format!("{key}: {e}"))),
            }
        }
    }

    /// Backup `id` as the store holds it.
    pub fn info(&self, id: u64) -> Result<BackupInfo, BackupError> {
        let meta: BackupMeta = match self.objects.get(&format!("{id}/backup.json")).map_err(store_err)? {
            Some(bytes) => serde_json::from_slice(&bytes).map_err(|e| BackupError::Io(format!("backup {id}'s backup.json: {e}")))?,
            None => return Err(BackupError::NotFound(id)),
        };
        let mut details = Vec::new();
        let mut missing = false;
        for p in 1..=meta.partition_count {
            match self.read_partition(id, p)? {
                Some(part) => details.push(part),
                None => {
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
    pub fn list(&self) -> Result<Vec<BackupInfo>, BackupError> {
        Ok(self.ids()?.into_iter().filter_map(|id| self.info(id).ok()).collect())
    }

    /// Removes backup `id`: records its id as deleted (never taken again), then removes its
    /// `backup.json` (so that a removal cut short leaves no backup that lists) and its files.
    pub fn delete(&self, id: u64) -> Result<(), BackupError> {
        if !self.objects.exists(&format!("{id}/backup.json")).map_err(store_err)? {
            return Err(BackupError::NotFound(id));
        }
        self.objects.put(&format!("deleted/{id}"), Vec::new()).map_err(store_err)?;
        self.objects.delete(&format!("{id}/backup.json")).map_err(store_err)?;
        self.objects.remove_all(&id.to_string()).map_err(store_err)
    }

    /// Uploads the files of the flat directory `from` as backup `id`'s state of `partition`.
    fn upload_state(&self, id: u64, partition: PartitionId, from: &Path) -> Result<(), String> {
        let prefix = format!("{}/state", Self::partition_key(id, partition));
        self.objects.remove_all(&prefix)?;
        for entry in fs::read_dir(from).map_err(|e| format!("{}: {e}", from.display()))? {
            let entry = entry.map_err(|e| format!("{}: {e}", from.display()))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            self.objects.upload(&entry.path(), &format!("{prefix}/{name}"))?;
        }
        Ok(())
    }

    /// Downloads backup `id`'s state of `partition` into the directory `to` (created).
    fn download_state(&self, id: u64, partition: PartitionId, to: &Path) -> Result<(), BackupError> {
        let prefix = format!("{}/state", Self::partition_key(id, partition));
        fs::create_dir_all(to).map_err(io(to.display()))?;
        let files = self.objects.files(&prefix).map_err(store_err)?;
        if files.is_empty() {
            return Err(BackupError::Io(format!("backup {id} holds no state files for partition {partition}")));
        }
        for name in files {
            self.objects.download(&format!("{prefix}/{name}"), &to.join(&name)).map_err(store_err)?;
        }
        Ok(())
    }
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
    /// Asks the partition thread for the checkpoint (backup id, where, answer).
    pub ask: Box<dyn FnOnce(u64, PathBuf, CheckpointReply) + Send>,
}

/// Where a partition thread answers a backup's checkpoint: the partition's Raft term, or why
/// it failed.
pub(crate) type CheckpointReply = mpsc::Sender<Result<u64, String>>;

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

/// Records `partitions` FAILED in backup `id` with `reason` (no broker took them).
pub(crate) fn fail_partitions(
    store: &BackupStore,
    id: u64,
    broker_id: u64,
    partitions: &[PartitionId],
    reason: &str,
) -> Result<(), BackupError> {
    for &partition_id in partitions {
        let now = now_iso();
        store.write_partition(
            id,
            &PartitionBackup {
                partition_id,
                state: "FAILED".into(),
                broker_id,
                broker_version: env!("CARGO_PKG_VERSION").into(),
                checkpoint_position: None,
                term: None,
                rows: None,
                hash: None,
                created_at: now.clone(),
                last_updated_at: now,
                failure_reason: Some(reason.to_string()),
            },
        )?;
    }
    Ok(())
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

/// Has the partition thread take its checkpoint (the thread pauses for a memtable flush and
/// hard links only), uploads the checkpoint's files, then reads the digest of the state they
/// hold (its applied index is the backup's position) from the checkpoint opened here, off the
/// partition thread.
fn backup_partition(store: &BackupStore, id: u64, job: PartitionJob) -> Result<(crate::StateDigest, u64), String> {
    let (tx, rx) = mpsc::channel();
    let scratch = job.scratch;
    (job.ask)(id, scratch.clone(), tx);
    let answer = rx.recv_timeout(CHECKPOINT_WAIT).map_err(|_| "the partition did not take its checkpoint".to_string())?;
    let done = answer.and_then(|term| {
        store.upload_state(id, job.partition, &scratch)?;
        let checkpoint = waggle_state::RocksStore::open(&scratch).map_err(|e| format!("opening the checkpoint: {e}"))?;
        Ok((crate::partition::digest_of(&checkpoint), term))
    });
    let _ = fs::remove_dir_all(&scratch);
    done
}

/// What `restore` rebuilt.
#[derive(Debug, Clone)]
pub struct Restored {
    pub partition: PartitionId,
    pub position: u64,
}

/// Rebuilds `data_dir` from backup `id` of `store`: each partition `hosts` names (a
/// standalone node's: all; a broker's: those it holds a replica of) gets its state from its checkpoint
/// (as the runtime state and as its newest snapshot) and a log that starts after the backup's
/// position. Refuses a `data_dir` that exists and is not empty, and a backup that is not
/// COMPLETED.
pub fn restore(store: &BackupStore, id: u64, data_dir: &Path, hosts: impl Fn(PartitionId) -> bool) -> Result<Vec<Restored>, BackupError> {
    let info = store.info(id)?;
    if info.state != "COMPLETED" {
        return Err(BackupError::Incomplete(id, info.state));
    }
    if fs::read_dir(data_dir).is_ok_and(|mut d| d.next().is_some()) {
        return Err(BackupError::TargetNotEmpty(data_dir.to_path_buf()));
    }
    let mut restored = Vec::new();
    for p in info.details.iter().filter(|p| hosts(p.partition_id)) {
        let position = p.checkpoint_position.unwrap_or(0);
        let term = p.term.unwrap_or(0);
        let base = data_dir.join("partitions").join(p.partition_id.to_string());
        let runtime = base.join("runtime");
        store.download_state(id, p.partition_id, &runtime)?;
        copy_files(&runtime, &base.join("snapshots").join(position.to_string())).map_err(io(runtime.display()))?;
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
        let store = BackupStore::open(&StoreConfig::Dir(dir.path().to_path_buf())).unwrap();
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
        assert_eq!(store.list().unwrap().len(), 1);
        store.delete(5).unwrap();
        assert!(matches!(store.info(5), Err(BackupError::NotFound(5))));
        assert!(store.list().unwrap().is_empty());
        assert!(!dir.path().join("5").exists(), "its files are gone");
        assert!(matches!(store.check_new(5), Err(BackupError::Conflict(5, 5))), "a deleted id is not taken again");
        assert!(matches!(store.begin(5, 2, &[1]), Err(BackupError::Conflict(5, 5))));
        store.check_new(6).unwrap();
    }
}
