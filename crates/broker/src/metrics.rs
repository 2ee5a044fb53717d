//! Partition metrics, named as Zeebe names them where Zeebe has one.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, RwLock, Weak};

use prometheus::core::{Collector, Desc};
use prometheus::proto::MetricFamily;
use prometheus::{Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry};
use waggle_protocol::PartitionId;
use waggle_state::{RocksStore, StoreMemory};

use crate::partition::StoreSlot;

use crate::backpressure::LimiterMetrics;

pub struct BrokerMetrics {
    pub processed_records: IntCounterVec,
    pub batches: IntCounterVec,
    pub process_instance_execution_time: HistogramVec,
    pub job_life_time: HistogramVec,
    /// Per batch: processing (engine), and log append + fsync + state commit.
    pub batch_processing: HistogramVec,
    pub batch_commit: HistogramVec,
    /// Commands per batch taken from the queue (client and scheduled ones).
    pub batch_commands: HistogramVec,
    /// Back pressure: client commands in flight, the limit, and commands refused.
    pub backpressure_in_flight: IntGaugeVec,
    pub backpressure_limit: IntGaugeVec,
    pub dropped_requests: IntCounterVec,
    /// Exporters, by exporter id and partition (see `export.rs`).
    exporter_last_exported_position: IntGaugeVec,
    exporter_acknowledged_position: IntGaugeVec,
    exporter_lag_entries: IntGaugeVec,
    exporter_unacknowledged_entries: IntGaugeVec,
    exporter_unacknowledged_records: IntGaugeVec,
    exporter_stuck: IntGaugeVec,
    exporter_health: IntGaugeVec,
    exporter_panics: IntCounterVec,
    exporter_skipped_entries: IntGaugeVec,
    exporter_errors: IntCounterVec,
    /// New process instances refused while an exporter's backlog was above its bound.
    pub(crate) export_backpressure_refused: IntCounterVec,
    /// Each partition's health as Zeebe's `zeebe_health` gauge has it: 1 healthy, 0 unhealthy
    /// (restarting after a panic or an error), -1 dead (left down: see `partition/supervise.rs`).
    pub health: IntGaugeVec,
    /// Each partition's state store memory, read at each scrape.
    pub(crate) store_memory: StoreMemoryCollector,
}

const BATCH_BUCKETS_S: &[f64] = &[0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0];

const TIME_BUCKETS_S: &[f64] = &[0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0];

impl BrokerMetrics {
    pub fn new(registry: &Registry) -> Self {
        let processed_records = IntCounterVec::new(
            Opts::new("waggle_processed_records_total", "Records written by the stream processor"),
            &["partition", "recordType"],
        )
        .expect("metric");
        let batches =
            IntCounterVec::new(Opts::new("waggle_committed_batches_total", "Processed batches committed to the log"), &["partition"])
                .expect("metric");
        let process_instance_execution_time = HistogramVec::new(
            HistogramOpts::new("zeebe_process_instance_execution_time", "Time from process instance creation to completion, in seconds")
                .buckets(TIME_BUCKETS_S.to_vec()),
            &["partition"],
        )
        .expect("metric");
        let job_life_time = HistogramVec::new(
            HistogramOpts::new("zeebe_job_life_time", "Time from job creation to completion, in seconds").buckets(TIME_BUCKETS_S.to_vec()),
            &["partition", "type"],
        )
        .expect("metric");
        let batch_histogram = |name: &str, help: &str, buckets: &[f64]| {
            HistogramVec::new(HistogramOpts::new(name, help).buckets(buckets.to_vec()), &["partition"]).expect("metric")
        };
        let batch_processing =
            batch_histogram("waggle_batch_processing_seconds", "Time the engine took to process a batch of commands", BATCH_BUCKETS_S);
        let batch_commit = batch_histogram(
            "waggle_batch_commit_seconds",
            "Time from a processed batch to its records being durable in the log and its state committed",
            BATCH_BUCKETS_S,
        );
        let batch_commands = batch_histogram(
            "waggle_batch_commands",
            "Commands taken from the queue into one batch",
            &[1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0],
        );
        let partition_gauge = |name: &str, help: &str| IntGaugeVec::new(Opts::new(name, help), &["partition"]).expect("metric");
        let backpressure_in_flight = partition_gauge(
            "zeebe_backpressure_inflight_requests_count",
            "Client commands the partition has taken whose batch has not reached the delivery task yet",
        );
        let backpressure_limit =
            partition_gauge("zeebe_backpressure_requests_limit", "Client commands the partition takes in flight at most (adaptive)");
        let dropped_requests = IntCounterVec::new(
            Opts::new("zeebe_dropped_request_count_total", "Client commands refused by back pressure (RESOURCE_EXHAUSTED)"),
            &["partition"],
        )
        .expect("metric");
        let health = partition_gauge("zeebe_health", "Shows current health of the partition (1 = healthy, 0 = unhealthy, -1 = dead)");
        let exporter_gauge = |name: &str, help: &str| IntGaugeVec::new(Opts::new(name, help), &["exporter", "partition"]).expect("metric");
        let exporter_last_exported_position =
            exporter_gauge("zeebe_exporter_last_exported_position", "Position of the last record handed to the exporter");
        let exporter_acknowledged_position = exporter_gauge(
            "zeebe_exporter_last_updated_exported_position",
            "Position the exporter last acknowledged (exported durably; the log is kept after it)",
        );
        let exporter_lag_entries = exporter_gauge("waggle_exporter_lag_entries", "Committed log entries not yet handed to the exporter");
        let exporter_unacknowledged_entries = exporter_gauge(
            "waggle_exporter_unacknowledged_entries",
            "Committed log entries whose records the exporter has not acknowledged (the log cannot be compacted past them)",
        );
        let exporter_unacknowledged_records = exporter_gauge(
            "waggle_exporter_unacknowledged_records",
            "Committed records (positions) the exporter has not acknowledged: the export backlog exporter_max_backlog_records bounds",
        );
        let exporter_health = exporter_gauge(
            "waggle_exporter_health",
            "The exporter's health on the partition: 1 = healthy, 0 = restarting after a panic, -1 = dead (panicked too often, left down)",
        );
        let exporter_panics = IntCounterVec::new(
            Opts::new(
                "waggle_exporter_panics_total",
                "Panics of the exporter's thread (each one restarts the exporter from its acknowledged position)",
            ),
            &["exporter", "partition"],
        )
        .expect("metric");
        let exporter_stuck = exporter_gauge(
            "waggle_exporter_stuck",
            "1 while the exporter is behind and acknowledged nothing for longer than exporter_stuck_after_ms",
        );
        let exporter_skipped_entries = exporter_gauge(
            "waggle_exporter_skipped_entries",
            "Log entries compacted before the exporter exported them (a new leader in a cluster)",
        );
        let exporter_errors = IntCounterVec::new(
            Opts::new("waggle_exporter_errors_total", "Failed exporter calls (each retried with back-off)"),
            &["exporter", "partition"],
        )
        .expect("metric");
        let export_backpressure_refused = IntCounterVec::new(
            Opts::new(
                "waggle_export_backpressure_refused_total",
                "New process instances refused (RESOURCE_EXHAUSTED) while an exporter had more unacknowledged records than exporter_max_backlog_records",
            ),
            &["partition"],
        )
        .expect("metric");
        for m in [
            &export_backpressure_refused as &dyn Collect,
            &processed_records,
            &exporter_last_exported_position,
            &exporter_acknowledged_position,
            &exporter_lag_entries,
            &exporter_unacknowledged_entries,
            &exporter_unacknowledged_records,
            &exporter_health,
            &exporter_panics,
            &exporter_stuck,
            &exporter_skipped_entries,
            &exporter_errors,
            &batches,
            &process_instance_execution_time,
            &job_life_time,
            &batch_processing,
            &batch_commit,
            &batch_commands,
            &backpressure_in_flight,
            &backpressure_limit,
            &dropped_requests,
            &health,
        ] {
            m.register(registry);
        }
        let store_memory = StoreMemoryCollector::new();
        store_memory.register(registry);
        Self {
            processed_records,
            batches,
            process_instance_execution_time,
            job_life_time,
            batch_processing,
            batch_commit,
            batch_commands,
            backpressure_in_flight,
            backpressure_limit,
            dropped_requests,
            exporter_last_exported_position,
            exporter_acknowledged_position,
            exporter_lag_entries,
            exporter_unacknowledged_entries,
            exporter_unacknowledged_records,
            exporter_health,
            exporter_panics,
            exporter_stuck,
            exporter_skipped_entries,
            exporter_errors,
            export_backpressure_refused,
            health,
            store_memory,
        }
    }
}

impl BrokerMetrics {
    /// The back pressure handles of one partition.
    pub(crate) fn limiter(&self, id: PartitionId) -> LimiterMetrics {
        let p = id.to_string();
        LimiterMetrics {
            in_flight: self.backpressure_in_flight.with_label_values(&[&p]),
            limit: self.backpressure_limit.with_label_values(&[&p]),
            refused: self.dropped_requests.with_label_values(&[&p]),
        }
    }

    /// The handles of one partition, labelled once: the processing thread updates them per
    /// batch and per record without looking labels up.
    pub(crate) fn for_partition(&self, id: PartitionId) -> PartitionMetrics {
        let p = id.to_string();
        let records = |kind: &str| self.processed_records.with_label_values(&[&p, kind]);
        PartitionMetrics {
            batches: self.batches.with_label_values(&[&p]),
            batch_processing: self.batch_processing.with_label_values(&[&p]),
            batch_commit: self.batch_commit.with_label_values(&[&p]),
            batch_commands: self.batch_commands.with_label_values(&[&p]),
            commands: records("COMMAND"),
            events: records("EVENT"),
            rejections: records("COMMAND_REJECTION"),
            process_instance_execution_time: self.process_instance_execution_time.with_label_values(&[&p]),
            job_life_time: self.job_life_time.clone(),
            health: self.health.with_label_values(&[&p]),
            partition: p,
        }
    }
}

impl BrokerMetrics {
    /// The handles of one exporter on one partition.
    pub(crate) fn exporter(&self, exporter: &str, id: PartitionId) -> ExporterMetrics {
        let labels = [exporter, &id.to_string()];
        ExporterMetrics {
            last_exported_position: self.exporter_last_exported_position.with_label_values(&labels),
            acknowledged_position: self.exporter_acknowledged_position.with_label_values(&labels),
            lag_entries: self.exporter_lag_entries.with_label_values(&labels),
            unacknowledged_entries: self.exporter_unacknowledged_entries.with_label_values(&labels),
            unacknowledged_records: self.exporter_unacknowledged_records.with_label_values(&labels),
            health: self.exporter_health.with_label_values(&labels),
            panics: self.exporter_panics.with_label_values(&labels),
            stuck: self.exporter_stuck.with_label_values(&labels),
            skipped: self.exporter_skipped_entries.with_label_values(&labels),
            errors: self.exporter_errors.with_label_values(&labels),
        }
    }
}

/// One exporter's metrics on one partition (see [`BrokerMetrics::exporter`]).
pub(crate) struct ExporterMetrics {
    pub last_exported_position: IntGauge,
    pub acknowledged_position: IntGauge,
    pub lag_entries: IntGauge,
    pub unacknowledged_entries: IntGauge,
    pub unacknowledged_records: IntGauge,
    /// 1 healthy, 0 restarting after a panic, -1 dead (as `zeebe_health`).
    pub health: IntGauge,
    pub panics: IntCounter,
    pub stuck: IntGauge,
    pub skipped: IntGauge,
    pub errors: IntCounter,
}

/// One partition's metrics (see [`BrokerMetrics::for_partition`]).
pub(crate) struct PartitionMetrics {
    pub batches: IntCounter,
    pub batch_processing: Histogram,
    pub batch_commit: Histogram,
    pub batch_commands: Histogram,
    pub commands: IntCounter,
    pub events: IntCounter,
    pub rejections: IntCounter,
    pub process_instance_execution_time: Histogram,
    /// Labelled by job type too, so per observation.
    job_life_time: HistogramVec,
    /// `zeebe_health` of the partition.
    pub health: IntGauge,
    partition: String,
}

impl PartitionMetrics {
    pub fn job_life_time(&self, job_type: &str, secs: f64) {
        self.job_life_time.with_label_values(&[&self.partition, job_type]).observe(secs);
    }
}

trait Collect {
    fn register(&self, registry: &Registry);
}
impl<T: prometheus::core::Collector + Clone + 'static> Collect for T {
    fn register(&self, registry: &Registry) {
        // registering twice (several brokers in one test process) is harmless
        let _ = registry.register(Box::new(self.clone()));
    }
}

/// The partitions' state store memory and size (see [`waggle_state::RocksStore::memory`]),
/// read from their stores when scraped, named as Zeebe names RocksDB's (`zeebe_rocksdb_*`,
/// the property's name after `rocksdb.`), labelled by partition. A partition whose store is
/// closed (restarting, or its replica moved away) is left out. It holds the stores weakly: a
/// stopped replica's RocksDB must close (and release its lock) as before, or the replica could
/// not start again in this process.
#[derive(Clone)]
pub(crate) struct StoreMemoryCollector {
    stores: Arc<Mutex<BTreeMap<PartitionId, WeakSlot>>>,
    gauges: Vec<(IntGaugeVec, MemoryReading)>,
}

/// A partition's [`StoreSlot`], held weakly.
type WeakSlot = Weak<RwLock<Option<Arc<RocksStore>>>>;

/// Which of a [`StoreMemory`]'s figures a gauge shows.
type MemoryReading = fn(&StoreMemory) -> u64;

impl StoreMemoryCollector {
    fn new() -> Self {
        let gauge = |name: &str, help: &str| IntGaugeVec::new(Opts::new(name, help), &["partition"]).expect("metric");
        let gauges: Vec<(IntGaugeVec, MemoryReading)> = vec![
            (gauge("zeebe_rocksdb_memory_cur_size_all_mem_tables", "Bytes in RocksDB's memtables"), |m| m.memtables),
            (gauge("zeebe_rocksdb_memory_block_cache_usage", "Bytes in RocksDB's block cache (data, index and filter blocks)"), |m| {
                m.block_cache
            }),
            (gauge("zeebe_rocksdb_memory_block_cache_pinned_usage", "Bytes pinned in RocksDB's block cache"), |m| m.block_cache_pinned),
            (
                gauge(
                    "zeebe_rocksdb_memory_estimate_table_readers_mem",
                    "Bytes held by RocksDB's open table files outside the block cache",
                ),
                |m| m.table_readers,
            ),
            (gauge("zeebe_rocksdb_sst_total_sst_files_size", "Bytes of RocksDB's table files on disk"), |m| m.sst_files),
            (gauge("waggle_state_write_back_rows", "State rows committed and not yet written to RocksDB"), |m| m.write_back_rows),
        ];
        Self { stores: Arc::default(), gauges }
    }

    /// Reports partition `id`'s store from now on (replacing an earlier one of that id).
    pub(crate) fn watch(&self, id: PartitionId, store: &StoreSlot) {
        self.stores.lock().expect("store memory lock").insert(id, Arc::downgrade(store));
    }
}

impl Collector for StoreMemoryCollector {
    fn desc(&self) -> Vec<&Desc> {
        self.gauges.iter().flat_map(|(g, _)| g.desc()).collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        for (g, _) in &self.gauges {
            g.reset();
        }
        let mut stores = self.stores.lock().expect("store memory lock");
        stores.retain(|_, slot| slot.strong_count() > 0);
        for (id, slot) in stores.iter() {
            let Some(slot) = slot.upgrade() else { continue };
            let Some(store) = slot.read().unwrap_or_else(|e| e.into_inner()).clone() else { continue };
            let memory = store.memory();
            let p = id.to_string();
            for (g, value) in &self.gauges {
                g.with_label_values(&[&p]).set(i64::try_from(value(&memory)).unwrap_or(i64::MAX));
            }
        }
        self.gauges.iter().flat_map(|(g, _)| g.collect()).collect()
    }
}
