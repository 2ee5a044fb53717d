//! Gateway request metrics.

use std::time::Duration;

use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, Opts, Registry};
use tonic::Code;

pub struct GatewayMetrics {
    requests: IntCounterVec,
    latency: HistogramVec,
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
        Self { requests, latency }
    }

    pub fn observe(&self, method: &str, error: Option<Code>, elapsed: Duration) {
        let code = match error {
            None => "OK".to_string(),
            Some(c) => format!("{c:?}"),
        };
        self.requests.with_label_values(&[method, &code]).inc();
        self.latency.with_label_values(&[method]).observe(elapsed.as_secs_f64());
    }
}
