//! Statistics over recorded samples: exact percentiles (nearest rank) and rates.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Percentiles of a set of durations, in milliseconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub count: usize,
    pub mean_ms: f64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

/// Samples kept in full and sorted on demand: exact, and small enough at benchmark rates.
#[derive(Debug, Default, Clone)]
pub struct Samples {
    values: Vec<f64>,
}

impl Samples {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn push(&mut self, d: Duration) {
        self.values.push(d.as_secs_f64() * 1000.0);
    }

    pub fn push_ms(&mut self, ms: f64) {
        self.values.push(ms);
    }

    pub fn len(&self) -> usize {
        self.values.len()
    }

    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// Every sample plus `ms` (e.g. minus a timer's duration, to get its lateness).
    pub fn shifted(&self, ms: f64) -> Samples {
        Samples { values: self.values.iter().map(|v| v + ms).collect() }
    }

    /// The summary, or `None` without samples.
    pub fn summary(&self) -> Option<Summary> {
        if self.values.is_empty() {
            return None;
        }
        let mut sorted = self.values.clone();
        sorted.sort_by(f64::total_cmp);
        Some(Summary {
            count: sorted.len(),
            mean_ms: sorted.iter().sum::<f64>() / sorted.len() as f64,
            p50_ms: percentile(&sorted, 50.0),
            p90_ms: percentile(&sorted, 90.0),
            p99_ms: percentile(&sorted, 99.0),
            max_ms: sorted[sorted.len() - 1],
        })
    }
}

/// The `p`-th percentile (0 < p <= 100) of ascending `sorted` by the nearest-rank method: the
/// smallest sample such that at least p % of the samples are less than or equal to it.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    assert!(!sorted.is_empty(), "percentile of no samples");
    let rank = (p / 100.0 * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Events per second over a window; 0 for an empty window.
pub fn rate(count: u64, window: Duration) -> f64 {
    let secs = window.as_secs_f64();
    if secs <= 0.0 {
        0.0
    } else {
        count as f64 / secs
    }
}

/// Differences between consecutive cumulative counts: per-interval counts.
pub fn deltas(cumulative: &[u64]) -> Vec<u64> {
    cumulative.windows(2).map(|w| w[1].saturating_sub(w[0])).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let sorted: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&sorted, 50.0), 50.0);
        assert_eq!(percentile(&sorted, 90.0), 90.0);
        assert_eq!(percentile(&sorted, 99.0), 99.0);
        assert_eq!(percentile(&sorted, 100.0), 100.0);
        assert_eq!(percentile(&sorted, 0.1), 1.0);
    }

    #[test]
    fn percentiles_of_few_samples() {
        assert_eq!(percentile(&[7.0], 50.0), 7.0);
        assert_eq!(percentile(&[7.0], 99.0), 7.0);
        let sorted = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(percentile(&sorted, 50.0), 2.0);
        assert_eq!(percentile(&sorted, 75.0), 3.0);
        assert_eq!(percentile(&sorted, 76.0), 4.0);
        assert_eq!(percentile(&sorted, 99.0), 4.0);
    }

    #[test]
    fn summary_sorts_unordered_samples() {
        let mut s = Samples::new();
        for ms in [30.0, 10.0, 20.0, 40.0] {
            s.push_ms(ms);
        }
        s.push(Duration::from_millis(1000));
        let sum = s.summary().unwrap();
        assert_eq!(sum.count, 5);
        assert_eq!(sum.p50_ms, 30.0);
        assert_eq!(sum.p90_ms, 1000.0);
        assert_eq!(sum.max_ms, 1000.0);
        assert_eq!(sum.mean_ms, 220.0);
        assert!(Samples::new().summary().is_none());
        assert_eq!(s.shifted(-10.0).summary().unwrap().p50_ms, 20.0);
    }

    #[test]
    fn rates_and_deltas() {
        assert_eq!(rate(300, Duration::from_secs(2)), 150.0);
        assert_eq!(rate(5, Duration::from_millis(500)), 10.0);
        assert_eq!(rate(5, Duration::ZERO), 0.0);
        assert_eq!(deltas(&[0, 10, 25, 25]), vec![10, 15, 0]);
        assert!(deltas(&[3]).is_empty());
    }
}
