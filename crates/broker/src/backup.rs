//! Backups of partitions into a file system store, and restoring a data folder from one, after
//! Zeebe's backup management API (docs.camunda.io, "Backup and restore" / "Zeebe backup
//! management API": `POST /actuator/backups`, `GET /actuator/backups[/{id}]`,
//! `DELETE /actuator/backups/{id}`; its JSON is `BackupInfo` / `PartitionBackupInfo`).
//!
//! A partition's backup is taken as Zeebe's is: the request (on any broker) writes a
//! CHECKPOINT CREATE command (the backup id as its `checkpointId`) into every partition's log
//! through its leader, retried on the next leader while none took it. It is CREATED if the id
//! is greater than the partition's last checkpoint, IGNORED otherwise (then the partition's
//! backup fails). The checkpoint is an entry of the replicated log: every replica applies it,
//! and right after applying its entry, before any later one, keeps a RocksDB checkpoint of its
//! state (a memtable flush and hard links: the state at exactly that entry, the same on every
//! replica; the backup's `checkpointPosition` is the entry's index) under `backups/<id>` in
//! the partition's folder ([`keep_checkpoint`]). Whichever broker leads the partition uploads
//! its copy into the store and records the part COMPLETED ([`upload_pending`]): the leader at
//! the time, or, when it failed before doing so, the next one. Replicas drop their copies once
//! the part is COMPLETED (or the backup deleted). A backup id not greater than a partition's
//! last checkpoint is refused before anything is written ([`BackupError::CheckpointNotNewer`]).
//! The log is not copied: every entry up to the position is in the checkpoint's state, and a
//! restored partition's log starts after it.
//!
//! The store is a directory or an S3-compatible bucket ([`objects`], through `object_store`).
//! Its layout (keys, `/`-separated): `<backupId>/backup.json` (the partition count, and in a
//! cluster the topology in force when the backup was taken: [`BackupStore::topology`]),
//! `<backupId>/partitions/<id>/partition.json`, `<backupId>/partitions/<id>/state-<broker>/<file>`
//! (each uploading broker's files apart: `partition.json` names the broker whose files it
//! describes; backups of earlier versions have `state/<file>`), and
//! `deleted/<backupId>` for each deleted backup (its id is not taken again, as Zeebe's).

mod objects;

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use objects::Objects;
pub use objects::{S3Config, StoreConfig};
use serde::{Deserialize, Serialize};
use waggle_protocol::PartitionId;

use crate::topology::{ReplicaState, Topology};

/// The folder, in a partition's folder, where its replica keeps the checkpoint of each
/// backup it applied (`<id>/state`, and `<id>/term` once complete) until the store holds the
/// partition's part.
pub(crate) const PENDING_DIR: &str = "backups";

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
    /// Zeebe 8.8 ("Cluster scaling"): "Backups are disallowed during partition scaling".
    #[error("backups are not taken while the partition count grows (topology change {0}): take it before or after")]
    Scaling(u64),
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
    /// The cluster topology when the backup was taken (absent: the standalone node's, or a
    /// backup of an earlier version, restored by the static placement).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    topology: Option<Topology>,
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
    crate::topology::rfc3339(ms)
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

    /// Starts backup `id` of `partitions` (of a cluster of `partition_count`, whose `topology`
    /// it records): refused unless `id` is new ([`Self::check_new`]), or is the newest backup
    /// and holds none of `partitions` yet (another broker of the cluster started it).
    pub fn begin(&self, id: u64, partition_count: u16, partitions: &[PartitionId], topology: Option<&Topology>) -> Result<(), BackupError> {
        if let Some(highest) = self.highest_id()? {
            let mut joins = id == highest && self.objects.exists(&format!("{id}/backup.json")).map_err(store_err)?;
            for &p in partitions {
                joins = joins && !self.objects.exists(&format!("{}/partition.json", Self::partition_key(id, p))).map_err(store_err)?;
            }
            if id < highest || (id == highest && !joins) {
                return Err(BackupError::Conflict(id, highest));
            }
        }
        let meta = BackupMeta { backup_id: id, partition_count, topology: topology.cloned() };
        let meta = serde_json::to_vec_pretty(&meta).expect("json");
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

    fn meta(&self, id: u64) -> Result<BackupMeta, BackupError> {
        match self.objects.get(&format!("{id}/backup.json")).map_err(store_err)? {
            Some(bytes) => serde_json::from_slice(&bytes).map_err(|e| BackupError::Io(format!("backup {id}'s backup.json: {e}"))),
            None => Err(BackupError::NotFound(id)),
        }
    }

    /// The cluster topology backup `id` recorded when it was taken, settled for a restore
    /// ([`settled`]); `None` for a standalone node's backup, or one of an earlier version.
    pub fn topology(&self, id: u64) -> Result<Option<Topology>, BackupError> {
        Ok(self.meta(id)?.topology.map(settled))
    }

    /// Backup `id` as the store holds it.
    pub fn info(&self, id: u64) -> Result<BackupInfo, BackupError> {
        let meta = self.meta(id)?;
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

    /// Uploads the files of the flat directory `from` as backup `id`'s state of `partition`
    /// from broker `broker`.
    fn upload_state(&self, id: u64, partition: PartitionId, broker: u64, from: &Path) -> Result<(), String> {
        let prefix = format!("{}/state-{broker}", Self::partition_key(id, partition));
        self.objects.remove_all(&prefix)?;
        for entry in fs::read_dir(from).map_err(|e| format!("{}: {e}", from.display()))? {
            let entry = entry.map_err(|e| format!("{}: {e}", from.display()))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            self.objects.upload(&entry.path(), &format!("{prefix}/{name}"))?;
        }
        Ok(())
    }

    /// Downloads backup `id`'s state of `partition`, uploaded by broker `broker`, into the
    /// directory `to` (created).
    fn download_state(&self, id: u64, partition: PartitionId, broker: u64, to: &Path) -> Result<(), BackupError> {
        let mut prefix = format!("{}/state-{broker}", Self::partition_key(id, partition));
        fs::create_dir_all(to).map_err(io(to.display()))?;
        let mut files = self.objects.files(&prefix).map_err(store_err)?;
        if files.is_empty() {
            // a backup of an earlier version: one folder
            prefix = format!("{}/state", Self::partition_key(id, partition));
            files = self.objects.files(&prefix).map_err(store_err)?;
        }
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

fn part(partition_id: PartitionId, state: &str, broker_id: u64, failure_reason: Option<String>) -> PartitionBackup {
    let now = now_iso();
    PartitionBackup {
        partition_id,
        state: state.into(),
        broker_id,
        broker_version: env!("CARGO_PKG_VERSION").into(),
        checkpoint_position: None,
        term: None,
        rows: None,
        hash: None,
        created_at: now.clone(),
        last_updated_at: now,
        failure_reason,
    }
}

/// Records `partitions` IN_PROGRESS in backup `id` (before their checkpoint commands are
/// written, so that a status read at once sees them and no part a leader completed is
/// overwritten).
pub(crate) fn begin_partitions(store: &BackupStore, id: u64, broker_id: u64, partitions: &[PartitionId]) -> Result<(), BackupError> {
    for &p in partitions {
        store.write_partition(id, &part(p, "IN_PROGRESS", broker_id, None))?;
    }
    Ok(())
}

/// Records `partition` FAILED in backup `id` with `reason` (its checkpoint was not created),
/// unless its part is COMPLETED already.
pub(crate) fn fail_partition(
    store: &BackupStore,
    id: u64,
    broker_id: u64,
    partition: PartitionId,
    reason: &str,
) -> Result<(), BackupError> {
    if store.read_partition(id, partition)?.is_some_and(|p| p.state == "COMPLETED") {
        return Ok(());
    }
    store.write_partition(id, &part(partition, "FAILED", broker_id, Some(reason.to_string())))
}

/// Keeps a RocksDB checkpoint of `state` (a memtable flush and hard links, so on the data
/// folder's file system) as backup `id`'s copy in `pending` (a partition's [`PENDING_DIR`]):
/// `<id>/state`, then `<id>/term` holding `term` (the checkpoint entry's), which marks the copy
/// complete. An earlier copy of the same id is replaced.
pub(crate) fn keep_checkpoint(state: &waggle_state::RocksStore, pending: &Path, id: i64, term: u64) -> Result<(), String> {
    let dir = pending.join(id.to_string());
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    state.checkpoint(&dir.join("state")).map_err(|e| format!("checkpoint: {e}"))?;
    let term_file = dir.join("term");
    fs::write(&term_file, term.to_string())
        .and_then(|()| fs::File::open(&term_file)?.sync_all())
        .map_err(|e| format!("{}: {e}", term_file.display()))
}

/// Goes through the backup copies a replica of `partition` keeps in `pending` (see
/// [`keep_checkpoint`]): a copy whose backup is gone from the store, or whose part in it is
/// COMPLETED, is removed; while this broker (`broker_id`) leads the partition (`leads`), it
/// uploads every other complete copy and records the part COMPLETED, with the checkpoint's
/// position (its applied index), term and digest, or FAILED with the reason.
pub(crate) fn upload_pending(store: &BackupStore, broker_id: u64, partition: PartitionId, pending: &Path, leads: impl Fn() -> bool) {
    let Ok(entries) = fs::read_dir(pending) else { return };
    let mut ids: Vec<u64> = entries.flatten().filter_map(|e| e.file_name().to_str()?.parse().ok()).collect();
    ids.sort_unstable();
    for id in ids {
        let dir = pending.join(id.to_string());
        let in_store = match store.objects.exists(&format!("{id}/backup.json")) {
            Ok(exists) => exists,
            Err(e) => {
                tracing::warn!(backup = id, partition, error = %e, "the backup store could not be read");
                return;
            }
        };
        let existing = if in_store { store.read_partition(id, partition).ok().flatten() } else { None };
        if !in_store || existing.as_ref().is_some_and(|p| p.state == "COMPLETED") {
            let _ = fs::remove_dir_all(&dir);
            continue;
        }
        let Some(term) = fs::read_to_string(dir.join("term")).ok().and_then(|t| t.trim().parse::<u64>().ok()) else { continue };
        if !leads() {
            continue;
        }
        let mut info = existing.unwrap_or_else(|| part(partition, "IN_PROGRESS", broker_id, None));
        let uploaded = store.upload_state(id, partition, broker_id, &dir.join("state")).and_then(|()| {
            // opened after the upload: opening writes into the folder
            let checkpoint = waggle_state::RocksStore::open(&dir.join("state")).map_err(|e| format!("opening the checkpoint: {e}"))?;
            Ok(crate::partition::digest_of(&checkpoint))
        });
        (info.broker_id, info.broker_version, info.last_updated_at) = (broker_id, env!("CARGO_PKG_VERSION").into(), now_iso());
        match uploaded {
            Ok(digest) => {
                info.state = "COMPLETED".into();
                info.checkpoint_position = Some(digest.applied_index);
                info.term = Some(term);
                info.rows = Some(digest.rows);
                info.hash = Some(digest.hash.to_string());
                info.failure_reason = None;
                tracing::info!(backup = id, partition, position = digest.applied_index, "partition backed up");
            }
            Err(reason) => {
                tracing::error!(backup = id, partition, error = %reason, "partition backup failed");
                info.state = "FAILED".into();
                info.failure_reason = Some(reason);
            }
        }
        match store.write_partition(id, &info) {
            Ok(()) => {
                let _ = fs::remove_dir_all(&dir);
            }
            Err(e) => tracing::error!(backup = id, partition, error = %e, "backup status could not be written"),
        }
    }
}

/// `t` as a restored cluster starts with it: a change that was under way when the backup was
/// taken is dropped with what it had begun (a joining replica is not restored, a leaving one
/// is kept), since every restored replica holds the same state and the change is asked again
/// if still wanted.
pub fn settled(mut t: Topology) -> Topology {
    if t.pending.take().is_some() {
        for replicas in t.brokers.values_mut() {
            replicas.retain(|_, r| r.state != ReplicaState::Joining);
            for r in replicas.values_mut() {
                r.state = ReplicaState::Active;
            }
        }
    }
    t
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
        store.download_state(id, p.partition_id, p.broker_id, &runtime)?;
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
        assert_eq!(crate::topology::rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(crate::topology::rfc3339(1_709_251_199_123), "2024-02-29T23:59:59.123Z");
    }

    #[test]
    fn ids_increase_and_a_backup_aggregates_its_partitions() {
        let dir = tempfile::tempdir().unwrap();
        let store = BackupStore::open(&StoreConfig::Dir(dir.path().to_path_buf())).unwrap();
        store.begin(5, 2, &[1], None).unwrap();
        assert!(matches!(store.begin(4, 2, &[2], None), Err(BackupError::Conflict(4, 5))));
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
        assert!(matches!(store.begin(5, 2, &[1], None), Err(BackupError::Conflict(5, 5))), "partition 1 is in it");
        store.begin(5, 2, &[2], None).unwrap();
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
        assert!(matches!(store.begin(5, 2, &[1], None), Err(BackupError::Conflict(5, 5))));
        store.check_new(6).unwrap();
    }

    #[test]
    fn a_backup_records_the_topology_settled_for_a_restore() {
        use crate::topology::Operation;
        let dir = tempfile::tempdir().unwrap();
        let store = BackupStore::open(&StoreConfig::Dir(dir.path().to_path_buf())).unwrap();
        store.begin(1, 3, &[], None).unwrap();
        assert_eq!(store.topology(1).unwrap(), None, "the standalone node's, or an earlier version's: none");
        let members = (0..3).map(|i| std::net::SocketAddr::from(([127, 0, 0, 1], 26502 + i))).collect();
        let spec = crate::ClusterSpec { node_id: 0, members, replication_factor: 2, own_address: None };
        let mut t = Topology::initial(&spec, 3);
        // broker 3 added, and its replica of partition 1 joining when the backup is taken
        let join = Operation::PartitionJoin { broker_id: 3, partition_id: 1, priority: 1 };
        t.plan_operations(vec![Operation::BrokerAdd { broker_id: 3 }, join], 0, 0).unwrap();
        t.complete_next(1);
        assert_eq!(t.replica(3, 1).map(|r| r.state), Some(ReplicaState::Joining));
        store.begin(2, 3, &[], Some(&t)).unwrap();
        let restored = store.topology(2).unwrap().expect("recorded");
        assert_eq!((restored.pending.clone(), restored.version), (None, t.version));
        assert!(restored.brokers.contains_key(&3) && restored.replica(3, 1).is_none(), "the joining replica is not restored");
        assert_eq!((1..=3).map(|p| restored.voters(p)).collect::<Vec<_>>(), (1..=3).map(|p| t.voters(p)).collect::<Vec<_>>());
        assert_eq!(store.info(2).unwrap().details.len(), 3);
    }

    #[test]
    fn a_kept_copy_waits_for_a_leader_then_is_uploaded_restorable_and_dropped() {
        use waggle_state::{KvStore, WriteSet};
        let dir = tempfile::tempdir().unwrap();
        let store = BackupStore::open(&StoreConfig::Dir(dir.path().join("store"))).unwrap();
        let state = waggle_state::RocksStore::open(&dir.path().join("runtime")).unwrap();
        let mut writes = WriteSet::default();
        writes.put(b"X/applied_index".to_vec(), 42u64.to_be_bytes().to_vec());
        writes.put(b"a/row".to_vec(), b"value".to_vec());
        state.commit_owned(writes).unwrap();
        let pending = dir.path().join("partition").join(PENDING_DIR);
        keep_checkpoint(&state, &pending, 3, 7).unwrap();
        assert!(pending.join("3/term").exists());

        // no backup 3 in the store (deleted, say): the copy is dropped
        upload_pending(&store, 1, 2, &pending, || true);
        assert!(!pending.join("3").exists(), "a copy of no backup is dropped");

        keep_checkpoint(&state, &pending, 3, 7).unwrap();
        store.begin(3, 2, &[], None).unwrap();
        begin_partitions(&store, 3, 0, &[1, 2]).unwrap();
        upload_pending(&store, 1, 2, &pending, || false);
        assert!(pending.join("3/term").exists(), "a follower keeps its copy");
        assert_eq!(store.info(3).unwrap().details[1].state, "IN_PROGRESS");

        upload_pending(&store, 1, 2, &pending, || true);
        assert!(!pending.join("3").exists(), "the uploaded copy is dropped");
        let part = store.info(3).unwrap().details[1].clone();
        assert_eq!((part.state.as_str(), part.broker_id, part.checkpoint_position, part.term), ("COMPLETED", 1, Some(42), Some(7)));
        let digest = crate::partition::digest_of(&state);
        assert_eq!((part.rows, part.hash), (Some(digest.rows), Some(digest.hash.to_string())));

        // another replica's copy of a completed part is dropped without an upload
        let other = dir.path().join("other").join(PENDING_DIR);
        keep_checkpoint(&state, &other, 3, 7).unwrap();
        upload_pending(&store, 2, 2, &other, || true);
        assert!(!other.join("3").exists());
        assert_eq!(store.info(3).unwrap().details[1].broker_id, 1, "not uploaded again");

        // a part recorded FAILED (its checkpoint command was not answered) is not overwritten
        // by the request once completed, and restores once every part is done
        fail_partition(&store, 3, 0, 2, "no leader").unwrap();
        assert_eq!(store.info(3).unwrap().details[1].state, "COMPLETED");
        keep_checkpoint(&state, &pending, 3, 7).unwrap();
        upload_pending(&store, 1, 1, &pending, || true);
        assert_eq!(store.info(3).unwrap().state, "COMPLETED");
        let restored = restore(&store, 3, &dir.path().join("restored"), |_| true).unwrap();
        assert_eq!(restored.iter().map(|r| (r.partition, r.position)).collect::<Vec<_>>(), [(1, 42), (2, 42)]);
        let back = waggle_state::RocksStore::open(&dir.path().join("restored/partitions/2/runtime")).unwrap();
        assert_eq!(crate::partition::digest_of(&back), digest);
    }
}
