//! Exporters: what copies a partition's committed records out of its log (Zeebe's exporter API,
//! <https://docs.camunda.io/docs/8.5/components/zeebe/technical-concepts/exporters/>).
//!
//! Owns the [`Exporter`] trait and its [`Controller`], the record JSON in Zeebe's exported shape
//! ([`json`]: one serializer for every exporter) and the debug exporter ([`debug`]). Does not
//! run exporters: the broker does (a thread per exporter and partition, on the partition's
//! leader, reading committed log entries after their commit, off the processing thread).
//!
//! Contract between the runner and an exporter:
//! - `configure`, then `open`, then `export` for each committed record in position order, with
//!   `flush` whenever the records available now were all handed over, and `close` at the end.
//! - Delivery is **at least once**: after a restart (or a failure) records after the last
//!   *acknowledged* position ([`Controller::acknowledge`]) are exported again, so an exporter
//!   must be idempotent (a store keys its rows by position or entity key).
//! - An exporter acknowledges only what is durable where it exports to (a batching exporter:
//!   after its transaction committed). The log is not compacted past the lowest acknowledged
//!   position of a partition's exporters.
//! - A call that returns an error is retried later with back-off (the same record, or the same
//!   flush); the exporter keeps whatever it had buffered. A failing exporter holds back only
//!   itself (and, once it is far behind, log compaction).

pub mod debug;
pub mod json;

use std::time::{Duration, Instant};

use waggle_protocol::{PartitionId, Record};

/// An exporter's failure: the runner retries the call with back-off and counts it in
/// `/metrics`.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error("exporter io: {0}")]
    Io(#[from] std::io::Error),
    #[error("{0}")]
    Other(String),
}

/// What an exporter is told before it opens.
#[derive(Debug, Clone)]
pub struct Context {
    /// The exporter's id (its name in the configuration, e.g. `debug`).
    pub exporter_id: String,
    pub partition_id: PartitionId,
}

/// One exporter instance, exporting one partition. Every method runs on the exporter's own
/// thread, never on the partition's processing thread.
pub trait Exporter: Send {
    /// Reads the exporter's settings; called once, before [`Exporter::open`].
    fn configure(&mut self, _context: &Context) -> Result<(), ExportError> {
        Ok(())
    }

    /// Prepares to export (opens files, connections). `controller.last_acknowledged()` is the
    /// position export resumes after.
    fn open(&mut self, _controller: &mut Controller) -> Result<(), ExportError> {
        Ok(())
    }

    /// Exports one committed record. Records come in position order; after a restart or a
    /// failure, records already exported may come again.
    fn export(&mut self, record: &Record, controller: &mut Controller) -> Result<(), ExportError>;

    /// Every record committed so far was handed over: a batching exporter writes its batch now
    /// (commits its transaction) and acknowledges its last position.
    fn flush(&mut self, _controller: &mut Controller) -> Result<(), ExportError> {
        Ok(())
    }

    /// A task scheduled with [`Controller::schedule`] is due.
    fn on_scheduled(&mut self, _task: u64, _controller: &mut Controller) -> Result<(), ExportError> {
        Ok(())
    }

    /// Export ends (shutdown, or the partition is no longer led here).
    fn close(&mut self) {}
}

/// How an exporter instance is made for each partition, under an id.
pub struct ExporterFactory {
    /// Unique among a node's exporters: names its metrics and its persisted position.
    pub id: String,
    make: Box<dyn Fn() -> Box<dyn Exporter> + Send + Sync>,
}

impl ExporterFactory {
    pub fn new(id: impl Into<String>, make: impl Fn() -> Box<dyn Exporter> + Send + Sync + 'static) -> Self {
        Self { id: id.into(), make: Box::new(make) }
    }

    /// A new instance (one per partition, and again when a partition is led here anew).
    pub fn make(&self) -> Box<dyn Exporter> {
        (self.make)()
    }
}

impl std::fmt::Debug for ExporterFactory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExporterFactory").field("id", &self.id).finish_non_exhaustive()
    }
}

/// What an exporter tells its runner: the position it has made durable, and work to be called
/// back for later (Zeebe's `Controller`).
#[derive(Debug, Default)]
pub struct Controller {
    acknowledged: u64,
    scheduled: Vec<(Instant, u64)>,
}

impl Controller {
    /// A controller resuming after `acknowledged` (0: nothing acknowledged yet).
    pub fn new(acknowledged: u64) -> Self {
        Self { acknowledged, scheduled: Vec::new() }
    }

    /// Every record up to `position` is exported durably: it need not come again after a
    /// restart, and the log may be compacted past it. Lower positions than the last are ignored.
    pub fn acknowledge(&mut self, position: u64) {
        self.acknowledged = self.acknowledged.max(position);
    }

    /// The highest position acknowledged (0: none).
    pub fn last_acknowledged(&self) -> u64 {
        self.acknowledged
    }

    /// Calls [`Exporter::on_scheduled`] with `task` once `delay` has passed (at the earliest).
    pub fn schedule(&mut self, delay: Duration, task: u64) {
        self.scheduled.push((Instant::now() + delay, task));
    }

    /// The tasks due at `now`, taken out (the runner calls them).
    pub fn take_due(&mut self, now: Instant) -> Vec<u64> {
        let mut due = Vec::new();
        self.scheduled.retain(|&(at, task)| {
            if at <= now {
                due.push(task);
                false
            } else {
                true
            }
        });
        due
    }

    /// When the next scheduled task is due, if any.
    pub fn next_due(&self) -> Option<Instant> {
        self.scheduled.iter().map(|&(at, _)| at).min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acknowledgements_only_go_up_and_tasks_come_due_once() {
        let mut c = Controller::new(5);
        c.acknowledge(3);
        assert_eq!(c.last_acknowledged(), 5);
        c.acknowledge(9);
        assert_eq!(c.last_acknowledged(), 9);
        c.schedule(Duration::ZERO, 1);
        c.schedule(Duration::from_secs(3600), 2);
        assert_eq!(c.take_due(Instant::now()), vec![1]);
        assert!(c.take_due(Instant::now()).is_empty());
        assert!(c.next_due().is_some());
    }
}
