//! The settings a data folder was created with, kept in `<data_dir>/cluster.json`, so that a node
//! restarted with settings that contradict its data refuses to start instead of corrupting it.
//!
//! Contract: [`check_or_record`] runs before anything else opens the data folder. On a folder
//! without partition data it writes the file (atomically: a temporary file, fsync, rename, fsync
//! of the folder); on a folder with the file it compares, writes nothing, and refuses on any
//! contradiction with a [`PersistedError::Contradicts`] naming each setting with the stored and
//! the given value. A folder with partition data but no file predates it: a standalone node's,
//! whose partition count is that of its partition folders (`partitions/1..=N`); the file is
//! recorded when it agrees.

use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use waggle_broker::ClusterSpec;

/// The file's name in the data folder.
pub const FILE_NAME: &str = "cluster.json";
/// The format this build writes and reads.
pub const FORMAT_VERSION: u32 = 1;

/// What a data folder holds: how many partitions, and whose they are.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DataSettings {
    pub format_version: u32,
    /// The partition count of the node (standalone) or of the whole cluster (broker).
    pub partitions: u16,
    #[serde(flatten)]
    pub role: Role,
}

/// A standalone node's data, or a cluster broker's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Role {
    Standalone,
    Broker { node_id: u64, cluster_size: u32, replication_factor: u32 },
}

impl DataSettings {
    /// The settings of a node started with `partitions` and, for a broker, `cluster`.
    pub fn of(partitions: u16, cluster: Option<&ClusterSpec>) -> Self {
        let role = match cluster {
            None => Role::Standalone,
            Some(c) => Role::Broker { node_id: c.node_id, cluster_size: c.cluster_size() as u32, replication_factor: c.replication_factor },
        };
        DataSettings { format_version: FORMAT_VERSION, partitions, role }
    }

    /// The flags that start a node with these settings, e.g. `waggle broker --node-id 1 ...`.
    fn command(&self) -> String {
        match self.role {
            Role::Standalone => format!("`waggle --partitions {}` (the standalone node)", self.partitions),
            Role::Broker { node_id, cluster_size, replication_factor } => format!(
                "`waggle broker --node-id {node_id} --cluster-size {cluster_size} --partitions {} --replication-factor {replication_factor}`",
                self.partitions
            ),
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Role::Standalone => write!(f, "a standalone node"),
            Role::Broker { node_id, cluster_size, .. } => write!(f, "a cluster broker (node {node_id} of {cluster_size})"),
        }
    }
}

/// A setting that differs between the data folder and this start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Contradiction {
    /// The flag that sets it, e.g. `--partitions`.
    pub flag: &'static str,
    pub stored: String,
    pub given: String,
}

#[derive(Debug, thiserror::Error)]
pub enum PersistedError {
    #[error("{}", contradiction_message(.data_dir, .stored, .given, .contradictions))]
    Contradicts { data_dir: PathBuf, stored: DataSettings, given: DataSettings, contradictions: Vec<Contradiction> },
    #[error(
        "{path} was written by a newer Waggle (format version {found}; this one reads version {FORMAT_VERSION}): \
         refusing to start; run the newer Waggle, or point --data-dir at an empty folder"
    )]
    NewerFormat { path: PathBuf, found: u32 },
    #[error(
        "{path} is not a valid cluster configuration ({reason}): refusing to start; restore it, or point --data-dir at an empty folder"
    )]
    Invalid { path: PathBuf, reason: String },
    #[error("{action} {path}: {source}")]
    Io { action: &'static str, path: PathBuf, source: std::io::Error },
}

fn contradiction_message(data_dir: &Path, stored: &DataSettings, given: &DataSettings, contradictions: &[Contradiction]) -> String {
    let mut message =
        format!("the data folder {} was created with other settings; refusing to start (nothing in it was changed):", data_dir.display());
    for c in contradictions {
        message.push_str(&format!("\n  {}: the data folder has {}, this start gives {}", c.flag, c.stored, c.given));
    }
    let remedy = if matches!((&stored.role, &given.role), (Role::Standalone, Role::Standalone) | (Role::Broker { .. }, Role::Broker { .. }))
    {
        let flags: Vec<String> = contradictions.iter().map(|c| format!("{} {}", c.flag, c.stored)).collect();
        format!("Start with {} as before", flags.join(" "))
    } else {
        format!("Start it as {} as before", stored.command())
    };
    message.push_str(&format!("\n{remedy}, or point --data-dir at an empty folder."));
    message
}

/// The settings that differ between `stored` and `given`.
pub fn contradictions(stored: &DataSettings, given: &DataSettings) -> Vec<Contradiction> {
    let mut found = Vec::new();
    let mut differ = |flag: &'static str, stored: String, given: String| {
        if stored != given {
            found.push(Contradiction { flag, stored, given });
        }
    };
    match (&stored.role, &given.role) {
        (Role::Standalone, Role::Standalone) => {}
        (
            Role::Broker { node_id: n1, cluster_size: s1, replication_factor: r1 },
            Role::Broker { node_id: n2, cluster_size: s2, replication_factor: r2 },
        ) => {
            differ("--node-id", n1.to_string(), n2.to_string());
            differ("--cluster-size", s1.to_string(), s2.to_string());
            differ("--replication-factor", r1.to_string(), r2.to_string());
        }
        (s, g) => differ("role", s.to_string(), g.to_string()),
    }
    differ("--partitions", stored.partitions.to_string(), given.partitions.to_string());
    found
}

/// Compares `given` with what `data_dir` holds and records it when the folder holds nothing yet
/// (see the module's contract). For a broker whose cluster's partition count may have grown at
/// run time, a stored partition count other than `given`'s is no contradiction when
/// `interchangeable(stored, given)` says so (its cluster topology runs with either: the count
/// the folder was created or restored with and the grown one).
pub fn check_or_record(data_dir: &Path, given: &DataSettings, interchangeable: impl Fn(u16, u16) -> bool) -> Result<(), PersistedError> {
    let path = data_dir.join(FILE_NAME);
    let (stored, recorded) = match std::fs::read(&path) {
        Ok(bytes) => (Some(parse(&path, &bytes)?), true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => (legacy_settings(data_dir)?, false),
        Err(source) => return Err(PersistedError::Io { action: "reading", path, source }),
    };
    if let Some(stored) = stored {
        let mut contradictions = contradictions(&stored, given);
        if interchangeable(stored.partitions, given.partitions) {
            contradictions.retain(|c| c.flag != "--partitions");
        }
        if !contradictions.is_empty() {
            return Err(PersistedError::Contradicts { data_dir: data_dir.to_path_buf(), stored, given: given.clone(), contradictions });
        }
    }
    if !recorded {
        record(data_dir, given)?;
    }
    Ok(())
}

fn parse(path: &Path, bytes: &[u8]) -> Result<DataSettings, PersistedError> {
    #[derive(Deserialize)]
    struct Version {
        format_version: u32,
    }
    let invalid = |e: serde_json::Error| PersistedError::Invalid { path: path.to_path_buf(), reason: e.to_string() };
    let version: Version = serde_json::from_slice(bytes).map_err(invalid)?;
    if version.format_version > FORMAT_VERSION {
        return Err(PersistedError::NewerFormat { path: path.to_path_buf(), found: version.format_version });
    }
    serde_json::from_slice(bytes).map_err(invalid)
}

/// The settings of a data folder written before `cluster.json` existed: a standalone node's,
/// with as many partitions as its highest partition folder; `None` if it holds no partition.
fn legacy_settings(data_dir: &Path) -> Result<Option<DataSettings>, PersistedError> {
    let partitions_dir = data_dir.join("partitions");
    let entries = match std::fs::read_dir(&partitions_dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(PersistedError::Io { action: "reading", path: partitions_dir, source }),
    };
    let mut highest = 0u16;
    for entry in entries {
        let entry = entry.map_err(|source| PersistedError::Io { action: "reading", path: partitions_dir.clone(), source })?;
        if let Some(id) = entry.file_name().to_str().and_then(|n| n.parse::<u16>().ok()) {
            highest = highest.max(id);
        }
    }
    Ok((highest > 0).then_some(DataSettings { format_version: FORMAT_VERSION, partitions: highest, role: Role::Standalone }))
}

/// Records `given` as the settings of a data folder `waggle restore` has just filled from a
/// backup: its partition folders are the backup's, not an older standalone node's (which is
/// what [`check_or_record`] takes a folder with partitions and no settings file to be).
pub fn record_restored(data_dir: &Path, given: &DataSettings) -> Result<(), PersistedError> {
    record(data_dir, given)
}

/// Writes `settings` to `data_dir/cluster.json` atomically (creating the folder).
fn record(data_dir: &Path, settings: &DataSettings) -> Result<(), PersistedError> {
    fn io<'a>(action: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> PersistedError + 'a {
        move |source| PersistedError::Io { action, path: path.to_path_buf(), source }
    }
    std::fs::create_dir_all(data_dir).map_err(io("creating", data_dir))?;
    let path = data_dir.join(FILE_NAME);
    let tmp = data_dir.join(format!("{FILE_NAME}.tmp"));
    let mut json = serde_json::to_vec_pretty(settings).expect("settings serialize");
    json.push(b'\n');
    let mut file = std::fs::File::create(&tmp).map_err(io("creating", &tmp))?;
    file.write_all(&json).map_err(io("writing", &tmp))?;
    file.sync_all().map_err(io("syncing", &tmp))?;
    drop(file);
    std::fs::rename(&tmp, &path).map_err(io("renaming to", &path))?;
    std::fs::File::open(data_dir).and_then(|d| d.sync_all()).map_err(io("syncing", data_dir))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use super::*;

    /// No two partition counts are interchangeable (a node that did not grow).
    const NONE_INTERCHANGEABLE: fn(u16, u16) -> bool = |_, _| false;

    fn broker(node_id: u64, size: usize, replication_factor: u32, partitions: u16) -> DataSettings {
        let members = (0..size).map(|i| SocketAddr::from(([127, 0, 0, 1], 26502 + i as u16))).collect();
        DataSettings::of(partitions, Some(&ClusterSpec { node_id, members, replication_factor, own_address: None }))
    }

    fn listing(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
        let mut files = Vec::new();
        let mut stack = vec![dir.to_path_buf()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    stack.push(p);
                } else {
                    files.push((p.clone(), std::fs::read(&p).unwrap()));
                }
            }
        }
        files.sort();
        files
    }

    #[test]
    fn the_first_start_records_and_later_starts_compare() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let given = broker(1, 3, 3, 3);
        check_or_record(&data, &given, NONE_INTERCHANGEABLE).unwrap();
        let text = std::fs::read_to_string(data.join(FILE_NAME)).unwrap();
        let stored: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            stored,
            serde_json::json!({"format_version": 1, "partitions": 3, "role": "broker", "node_id": 1, "cluster_size": 3, "replication_factor": 3})
        );
        assert!(!data.join("cluster.json.tmp").exists());
        check_or_record(&data, &given, NONE_INTERCHANGEABLE).unwrap();

        let before = listing(&data);
        let err = check_or_record(&data, &broker(2, 5, 3, 4), NONE_INTERCHANGEABLE).unwrap_err();
        let PersistedError::Contradicts { contradictions, .. } = &err else { panic!("{err}") };
        let flags: Vec<_> = contradictions.iter().map(|c| (c.flag, c.stored.as_str(), c.given.as_str())).collect();
        assert_eq!(flags, vec![("--node-id", "1", "2"), ("--cluster-size", "3", "5"), ("--partitions", "3", "4")]);
        let message = err.to_string();
        assert!(message.contains("--partitions: the data folder has 3, this start gives 4"), "{message}");
        assert!(
            message.contains("Start with --node-id 1 --cluster-size 3 --partitions 3 as before, or point --data-dir at an empty folder."),
            "{message}"
        );
        assert_eq!(listing(&data), before, "a refusal changes nothing");
    }

    #[test]
    fn a_grown_clusters_folder_takes_the_counts_the_caller_finds_interchangeable() {
        let dir = tempfile::tempdir().unwrap();
        check_or_record(dir.path(), &broker(1, 3, 3, 3), NONE_INTERCHANGEABLE).unwrap();
        let before = listing(dir.path());
        let grown = |stored, given| stored == 3 && given == 6;
        check_or_record(dir.path(), &broker(1, 3, 3, 6), grown).unwrap();
        check_or_record(dir.path(), &broker(1, 3, 3, 3), NONE_INTERCHANGEABLE).unwrap();
        let message = check_or_record(dir.path(), &broker(1, 3, 3, 5), grown).unwrap_err().to_string();
        assert!(message.contains("--partitions: the data folder has 3, this start gives 5"), "{message}");
        let message = check_or_record(dir.path(), &broker(2, 3, 3, 6), grown).unwrap_err().to_string();
        assert!(message.contains("--node-id: the data folder has 1, this start gives 2") && !message.contains("--partitions"), "{message}");
        assert!(
            check_or_record(dir.path(), &broker(1, 3, 3, 6), NONE_INTERCHANGEABLE).is_err(),
            "without a grown topology, the count is the folder's"
        );
        assert_eq!(listing(dir.path()), before, "nothing rewritten");
    }

    #[test]
    fn a_standalone_folder_is_not_a_brokers_and_the_reverse() {
        let dir = tempfile::tempdir().unwrap();
        let standalone = DataSettings::of(2, None);
        check_or_record(dir.path(), &standalone, NONE_INTERCHANGEABLE).unwrap();
        let message = check_or_record(dir.path(), &broker(0, 1, 1, 2), NONE_INTERCHANGEABLE).unwrap_err().to_string();
        assert!(
            message.contains("role: the data folder has a standalone node, this start gives a cluster broker (node 0 of 1)"),
            "{message}"
        );
        assert!(message.contains("Start it as `waggle --partitions 2` (the standalone node) as before"), "{message}");

        let dir = tempfile::tempdir().unwrap();
        check_or_record(dir.path(), &broker(0, 3, 2, 3), NONE_INTERCHANGEABLE).unwrap();
        let message = check_or_record(dir.path(), &DataSettings::of(3, None), NONE_INTERCHANGEABLE).unwrap_err().to_string();
        assert!(
            message.contains("role: the data folder has a cluster broker (node 0 of 3), this start gives a standalone node"),
            "{message}"
        );
        assert!(message.contains("`waggle broker --node-id 0 --cluster-size 3 --partitions 3 --replication-factor 2`"), "{message}");
    }

    #[test]
    fn a_folder_from_before_the_file_is_a_standalone_nodes_with_its_partition_folders() {
        let dir = tempfile::tempdir().unwrap();
        for p in ["1", "2", "3"] {
            std::fs::create_dir_all(dir.path().join("partitions").join(p)).unwrap();
        }
        let before = listing(dir.path());
        let message = check_or_record(dir.path(), &DataSettings::of(1, None), NONE_INTERCHANGEABLE).unwrap_err().to_string();
        assert!(message.contains("--partitions: the data folder has 3, this start gives 1"), "{message}");
        assert!(check_or_record(dir.path(), &broker(0, 1, 1, 3), NONE_INTERCHANGEABLE).is_err());
        assert_eq!(listing(dir.path()), before);
        check_or_record(dir.path(), &DataSettings::of(3, None), NONE_INTERCHANGEABLE).unwrap();
        assert!(dir.path().join(FILE_NAME).exists(), "recorded once it agrees");
    }

    #[test]
    fn newer_and_broken_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(FILE_NAME), r#"{"format_version": 9, "anything": true}"#).unwrap();
        let message = check_or_record(dir.path(), &DataSettings::of(1, None), NONE_INTERCHANGEABLE).unwrap_err().to_string();
        assert!(message.contains("newer Waggle (format version 9"), "{message}");
        std::fs::write(dir.path().join(FILE_NAME), "{").unwrap();
        let message = check_or_record(dir.path(), &DataSettings::of(1, None), NONE_INTERCHANGEABLE).unwrap_err().to_string();
        assert!(message.contains("is not a valid cluster configuration"), "{message}");
        assert_eq!(std::fs::read_to_string(dir.path().join(FILE_NAME)).unwrap(), "{");
    }
}
