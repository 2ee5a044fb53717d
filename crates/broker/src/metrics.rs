//! Partition metrics, named as Zeebe names them where Zeebe has one.

use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, Opts, Registry};

pub struct BrokerMetrics {
    pub processed_records: IntCounterVec,
    pub batches: IntCounterVec,
    pub process_instance_execution_time: HistogramVec,
    pub job_life_time: HistogramVec,
}

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
        for m in [&processed_records as &dyn Collect, &batches, &process_instance_execution_time, &job_life_time] {
            m.register(registry);
        }
        Self { processed_records, batches, process_instance_execution_time, job_life_time }
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
