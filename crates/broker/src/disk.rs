//! Disk watermarks, after Zeebe's (docs.camunda.io, "Disk space":
//! `zeebe.broker.data.disk.freeSpace.processing` / `.replication`, `monitoringInterval`).
//!
//! A thread reads the free space of the file system that holds the data folder every
//! `monitoring_interval`. Below `free_space_processing`, a partition led here refuses the
//! client commands that add work (creating instances, publishing messages, deploying, ...) with
//! [`crate::BrokerError::DiskSpaceLow`] (RESOURCE_EXHAUSTED, Zeebe's message "Cannot accept
//! requests for partition N. Broker is out of disk space"); the commands that finish work (job
//! completion, failure and error, incident resolution, cancellation, job activation) are still
//! taken, so that instances drain and state shrinks. Below `free_space_replication` (the last
//! reserve) every client command is refused. Zeebe refuses every client command below the
//! processing watermark; Waggle lets draining ones through until the replication watermark.
//! Above the watermark again, commands are taken at once (the next reading): nothing to restart.
//! Internal work (timers, message correlation between partitions, Raft replication) goes on.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

use prometheus::{IntGauge, Registry};
use waggle_engine::Command;
use waggle_protocol::{Intent, RecordValue};

/// Disk watermark settings (Zeebe's names and defaults).
#[derive(Debug, Clone)]
pub struct DiskConfig {
    /// Watch the free space at all (Zeebe's `enableMonitoring`).
    pub enabled: bool,
    /// Below this many free bytes, commands that add work are refused (Zeebe's default 2 GB).
    pub free_space_processing: u64,
    /// Below this many free bytes, every client command is refused (Zeebe's default 1 GB);
    /// at most `free_space_processing`.
    pub free_space_replication: u64,
    /// How often the free space is read (Zeebe's default 1 s).
    pub monitoring_interval: Duration,
}

impl Default for DiskConfig {
    fn default() -> Self {
        Self { enabled: true, free_space_processing: 2 << 30, free_space_replication: 1 << 30, monitoring_interval: Duration::from_secs(1) }
    }
}

/// Where the free space stands against the watermarks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiskLevel {
    /// Above both watermarks.
    Ok = 0,
    /// Below `free_space_processing`: only draining commands are taken.
    LowProcessing = 1,
    /// Below `free_space_replication`: no client command is taken.
    LowReplication = 2,
}

impl DiskLevel {
    pub fn name(self) -> &'static str {
        match self {
            DiskLevel::Ok => "OK",
            DiskLevel::LowProcessing => "LOW_PROCESSING",
            DiskLevel::LowReplication => "LOW_REPLICATION",
        }
    }

    fn from_u8(v: u8) -> Self {
        match v {
            1 => DiskLevel::LowProcessing,
            2 => DiskLevel::LowReplication,
            _ => DiskLevel::Ok,
        }
    }
}

/// What the monitor last read, shared with the command path and `/health`.
pub struct DiskMonitor {
    config: DiskConfig,
    path: PathBuf,
    level: AtomicU8,
    free_bytes: AtomicU64,
    total_bytes: AtomicU64,
    stop: AtomicBool,
    free_gauge: IntGauge,
    available_gauge: IntGauge,
}

/// A snapshot of the monitor's reading (for `/health`).
#[derive(Debug, Clone)]
pub struct DiskStatus {
    pub enabled: bool,
    pub level: DiskLevel,
    pub free_bytes: u64,
    pub total_bytes: u64,
    pub free_space_processing: u64,
    pub free_space_replication: u64,
}

impl DiskMonitor {
    /// Reads the free space of `path`'s file system once and, if monitoring is on, starts the
    /// thread that reads it every interval (it ends once the monitor is dropped or
    /// [`Self::stop`]ped).
    pub fn start(config: DiskConfig, path: &Path, registry: &Registry) -> Arc<DiskMonitor> {
        let free_gauge =
            IntGauge::new("waggle_disk_free_bytes", "Free bytes on the data folder's file system (last reading)").expect("metric");
        let available_gauge = IntGauge::new(
            "waggle_disk_space_available",
            "1 while the data folder's free space is above the processing watermark (new work is taken), 0 below it",
        )
        .expect("metric");
        for g in [&free_gauge, &available_gauge] {
            let _ = registry.register(Box::new(g.clone()));
        }
        let monitor = Arc::new(DiskMonitor {
            config,
            path: path.to_path_buf(),
            level: AtomicU8::new(DiskLevel::Ok as u8),
            free_bytes: AtomicU64::new(0),
            total_bytes: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            free_gauge,
            available_gauge,
        });
        monitor.read();
        if monitor.config.enabled {
            let weak = Arc::downgrade(&monitor);
            let interval = monitor.config.monitoring_interval.max(Duration::from_millis(10));
            std::thread::Builder::new()
                .name("disk-monitor".into())
                .spawn(move || loop {
                    std::thread::sleep(interval);
                    match weak.upgrade() {
                        Some(m) if !m.stop.load(Ordering::Relaxed) => m.read(),
                        _ => return,
                    }
                })
                .expect("spawning the disk monitor");
        }
        monitor
    }

    /// Ends the monitoring thread (at its next wake-up).
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    fn read(&self) {
        let Some((free, total)) = free_space(&self.path) else {
            return;
        };
        self.free_bytes.store(free, Ordering::Relaxed);
        self.total_bytes.store(total, Ordering::Relaxed);
        self.free_gauge.set(free.min(i64::MAX as u64) as i64);
        let level = if !self.config.enabled {
            DiskLevel::Ok
        } else if free < self.config.free_space_replication {
            DiskLevel::LowReplication
        } else if free < self.config.free_space_processing {
            DiskLevel::LowProcessing
        } else {
            DiskLevel::Ok
        };
        let before = DiskLevel::from_u8(self.level.swap(level as u8, Ordering::Relaxed));
        self.available_gauge.set(i64::from(level == DiskLevel::Ok));
        if before != level {
            match level {
                DiskLevel::Ok => tracing::info!(free, "disk space available again: new commands are taken"),
                DiskLevel::LowProcessing => tracing::warn!(
                    free,
                    watermark = self.config.free_space_processing,
                    "disk space low: commands that add work are refused until space is freed"
                ),
                DiskLevel::LowReplication => tracing::error!(
                    free,
                    watermark = self.config.free_space_replication,
                    "disk space very low: every client command is refused until space is freed"
                ),
            }
        }
    }

    pub fn level(&self) -> DiskLevel {
        DiskLevel::from_u8(self.level.load(Ordering::Relaxed))
    }

    /// Whether a client command may be taken at the current level.
    pub fn admits(&self, command: &Command) -> bool {
        match self.level() {
            DiskLevel::Ok => true,
            DiskLevel::LowProcessing => drains(command),
            DiskLevel::LowReplication => false,
        }
    }

    pub fn status(&self) -> DiskStatus {
        DiskStatus {
            enabled: self.config.enabled,
            level: self.level(),
            free_bytes: self.free_bytes.load(Ordering::Relaxed),
            total_bytes: self.total_bytes.load(Ordering::Relaxed),
            free_space_processing: self.config.free_space_processing,
            free_space_replication: self.config.free_space_replication,
        }
    }
}

/// Commands that finish work rather than add it: taken while the disk is low.
fn drains(command: &Command) -> bool {
    matches!(
        (&command.value, command.intent),
        (RecordValue::Job(_), Intent::Complete | Intent::Fail | Intent::ThrowError)
            | (RecordValue::JobBatch(_), Intent::Activate)
            | (RecordValue::ProcessInstance(_), Intent::Cancel)
            | (RecordValue::Incident(_), Intent::Resolve)
    )
}

/// Free (available to this user) and total bytes of the file system holding `path` (the
/// nearest existing ancestor), or `None` when it cannot be read.
#[allow(clippy::unnecessary_cast)] // the field types differ between platforms
fn free_space(path: &Path) -> Option<(u64, u64)> {
    let mut at = path;
    while !at.exists() {
        at = at.parent()?;
    }
    let c_path = std::ffi::CString::new(std::os::unix::ffi::OsStrExt::as_bytes(at.as_os_str())).ok()?;
    let mut stat = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: `c_path` is a valid NUL-terminated string and `stat` is written by statvfs
    // before it is read (only on success).
    let stat = unsafe {
        if libc::statvfs(c_path.as_ptr(), stat.as_mut_ptr()) != 0 {
            return None;
        }
        stat.assume_init()
    };
    let block = stat.f_frsize as u64;
    Some(((stat.f_bavail as u64).saturating_mul(block), (stat.f_blocks as u64).saturating_mul(block)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use waggle_protocol::value::{JobRecord, ProcessInstanceCreationRecord};

    fn monitor(processing: u64, replication: u64) -> Arc<DiskMonitor> {
        let config = DiskConfig {
            free_space_processing: processing,
            free_space_replication: replication,
            monitoring_interval: Duration::from_secs(3600),
            ..Default::default()
        };
        DiskMonitor::start(config, Path::new("."), &Registry::new())
    }

    #[test]
    fn levels_follow_the_watermarks_and_low_space_takes_only_draining_commands() {
        let creation = Command::new(-1, Intent::Create, RecordValue::ProcessInstanceCreation(ProcessInstanceCreationRecord::default()));
        let completion = Command::new(1, Intent::Complete, RecordValue::Job(JobRecord::default()));
        let ok = monitor(0, 0);
        assert!(ok.status().free_bytes > 0);
        assert_eq!(ok.level(), DiskLevel::Ok);
        assert!(ok.admits(&creation) && ok.admits(&completion));
        let low = monitor(u64::MAX, 0);
        assert_eq!(low.level(), DiskLevel::LowProcessing);
        assert!(!low.admits(&creation) && low.admits(&completion));
        let very_low = monitor(u64::MAX, u64::MAX);
        assert_eq!(very_low.level(), DiskLevel::LowReplication);
        assert!(!very_low.admits(&creation) && !very_low.admits(&completion));
    }
}
