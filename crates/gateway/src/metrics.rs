//! Gateway request metrics.

use std::collections::HashMap;
use std::sync::RwLock;
use std::time::Duration;

use prometheus::{Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, Opts, Registry};
use tonic::Code;

pub struct GatewayMetrics {
    requests: IntCounterVec,
    latency: HistogramVec,
    /// Each method's counter of successful calls and its latency histogram, looked up by label
    /// once: `with_label_values` hashes the labels and takes the vector's lock on every call, ~10
    /// times the cost of the update itself, twice per call.
    succeeded: RwLock<HashMap<&'static str, (IntCounter, Histogram)>>,
}

impl GatewayMetrics {
    pub fn new(registry: &Registry) -> Self {
        let requests = IntCounterVec::new(
            Opts::new("waggle_gateway_requests_total", "gRPC requests handled, by method and status code"),
            &["method", "code"],
        )
        .expect("metric");
        let latency = HistogramVec::new(
            HistogramOpts::new("waggle_gateway_request_latency_seconds", "gRPC request latency, by method")
                .buckets(vec![0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0]),
            &["method"],
        )
        .expect("metric");
        let _ = registry.register(Box::new(requests.clone()));
        let _ = registry.register(Box::new(latency.clone()));
        Self { requests, latency, succeeded: RwLock::default() }
    }

    pub fn observe(&self, method: &'static str, error: Option<Code>, elapsed: Duration) {
        let seconds = elapsed.as_secs_f64();
        let Some(code) = error else {
            if let Some((count, latency)) = self.succeeded.read().expect("metrics lock").get(method) {
                count.inc();
                latency.observe(seconds);
                return;
            }
            let (count, latency) = (self.requests.with_label_values(&[method, "OK"]), self.latency.with_label_values(&[method]));
            count.inc();
            latency.observe(seconds);
            self.succeeded.write().expect("metrics lock").insert(method, (count, latency));
            return;
        };
        self.requests.with_label_values(&[method, &format!("{code:?}")]).inc();
        self.latency.with_label_values(&[method]).observe(seconds);
    }
}
