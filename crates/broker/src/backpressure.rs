//! Back pressure: an adaptive limit on a partition's client commands in flight, after Zeebe's
//! command rate limiter and its default algorithm (AIMD: additive increase, multiplicative
//! decrease).
//!
//! A client command is *in flight* from the moment the partition takes it until the batch that
//! processed it reaches the gateway's runtime (queued, processed, written, passed on: a busy
//! gateway makes commands slower too), just before the batch's answers are handed over, so that
//! a client that sends its next command on an answer finds the slot free. As on Zeebe, an answer that waits for the
//! instance to complete (`CreateProcessInstanceWithResult`) is not counted while it waits. A command offered while the partition has `limit` or
//! more in flight is refused ([`crate::BrokerError::Overloaded`], which the gateway answers with
//! RESOURCE_EXHAUSTED), unless it lets work drain (completing or failing a job, activating jobs,
//! cancelling an instance, a deployment), which is always taken, and counted.
//!
//! The limit moves as TCP's congestion window does:
//! - it grows by one for every `limit` commands processed faster than the request timeout that
//!   were taken while at least half of it was in use (one step per round of the window);
//! - it shrinks by the back-off ratio on *congestion*: a command processed more slowly than the
//!   request timeout, one that could not be queued, or a [`SaturationWindow`] in which many new jobs found every
//!   job stream of their type full (the workers, or the gateway's path to them, take jobs more
//!   slowly than the partition makes them, so the instances it takes on would wait); at most once
//!   per [`CUT_AT_MOST_EVERY`], as one episode shows in many commands.
//!
//! Zeebe's AIMD grows the limit by one per answer and cuts it once per window of answers, and
//! Zeebe refuses job activations too. The job streams as a signal, the step per window and job
//! activations always taken are Waggle's: without them an open-loop load of twice the capacity
//! kept the limit at its maximum while the jobs of the instances it took piled up behind full
//! streams, waiting for polls (docs/performance-history.md, finding 36). The limit bounds how many
//! commands wait, not how fast they come: while the partition answers in milliseconds, only a
//! small limit slows a flood down, and the job streams' signal is what takes it there.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use prometheus::{IntCounter, IntGauge};

use crate::streams::PushCounts;
use waggle_engine::Command;
use waggle_protocol::{Intent, RecordValue};

/// One congestion episode cuts the limit once, however many commands show it.
pub const CUT_AT_MOST_EVERY: Duration = Duration::from_millis(10);

/// The AIMD parameters (Zeebe's names).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BackpressureConfig {
    /// Off: every command is taken (the queue's capacity still bounds them).
    pub enabled: bool,
    /// A command in flight longer than this is congestion.
    pub request_timeout: Duration,
    pub initial_limit: usize,
    pub min_limit: usize,
    pub max_limit: usize,
    /// The factor congestion multiplies the limit by (0 < ratio < 1).
    pub backoff_ratio: f64,
}

impl Default for BackpressureConfig {
    /// Zeebe 8.5.8's AIMD defaults (200 ms, ratio 0.9, minimum 1) but for the initial and maximum
    /// limits (Zeebe: 100 and 1,000): Waggle answers a command in milliseconds, and W2's 1,024
    /// instances in flight keep ~1,000 commands in a partition at once (finding 36).
    fn default() -> Self {
        Self {
            enabled: true,
            request_timeout: Duration::from_millis(200),
            initial_limit: 2048,
            min_limit: 1,
            max_limit: 4096,
            backoff_ratio: 0.9,
        }
    }
}

/// Job push saturation is judged over windows this long.
const SATURATION_WINDOW: Duration = Duration::from_millis(100);
/// A window is congested when at least this share of the partition's new jobs (for types with an open stream)
/// found every stream full, and at least [`SATURATED_JOBS_MIN`] did: a batch of creations can fill
/// a stream for a moment (W2: ~0.1 % of jobs) without the workers falling behind. Each such share
/// is one cut of the limit (all of them full: eight cuts, ×0.43), so that a flood is met within a
/// few windows.
const SATURATED_SHARE_MIN: f64 = 0.125;
const SATURATED_JOBS_MIN: u64 = 32;

/// Job push counts since the start of the current window.
pub(crate) struct SaturationWindow {
    start: Instant,
    counts: PushCounts,
}

impl SaturationWindow {
    pub fn new(counts: PushCounts) -> Self {
        Self { start: Instant::now(), counts }
    }

    /// How many cuts of the limit the window that `now` closes calls for (a new window starts
    /// then): 0 while the window is open or if it was not congested.
    pub fn cuts(&mut self, counts: PushCounts, now: Instant) -> u32 {
        if now.duration_since(self.start) < SATURATION_WINDOW {
            return 0;
        }
        let offered = counts.offered - self.counts.offered;
        let saturated = counts.saturated - self.counts.saturated;
        *self = Self { start: now, counts };
        if saturated < SATURATED_JOBS_MIN || offered == 0 {
            return 0;
        }
        (saturated as f64 / offered as f64 / SATURATED_SHARE_MIN) as u32
    }
}

/// One partition's limiter; shared by every caller submitting to the partition.
pub(crate) struct Limiter {
    config: BackpressureConfig,
    in_flight: AtomicUsize,
    limit: AtomicUsize,
    /// Fast commands counted towards the limit's next step up.
    fast_commands: AtomicUsize,
    /// When the limit was last cut, in nanoseconds after `epoch` (0: never).
    last_cut_ns: AtomicU64,
    epoch: Instant,
    metrics: LimiterMetrics,
}

/// What the limiter shows on `/metrics` (Zeebe's names, see [`crate::BrokerMetrics`]).
pub(crate) struct LimiterMetrics {
    pub in_flight: IntGauge,
    pub limit: IntGauge,
    /// Commands refused.
    pub refused: IntCounter,
}

/// A command taken: its slot is given back with [`Limiter::processed`] when the batch that
/// processed it reaches the gateway's runtime, before its answers are handed over (an answer that waits for the instance to complete is
/// not waited for), or with [`Limiter::dropped`] if it never got to the partition.
#[must_use = "a permit holds a slot until given back"]
#[derive(Debug)]
pub(crate) struct Permit {
    start: Instant,
    /// Commands in flight, this one included, when it was taken.
    in_flight: usize,
}

impl Limiter {
    pub fn new(config: BackpressureConfig, metrics: LimiterMetrics) -> Self {
        let initial = config.initial_limit.clamp(config.min_limit.max(1), config.max_limit.max(1));
        metrics.limit.set(initial as i64);
        Self {
            config,
            in_flight: AtomicUsize::new(0),
            limit: AtomicUsize::new(initial),
            fast_commands: AtomicUsize::new(0),
            last_cut_ns: AtomicU64::new(0),
            epoch: Instant::now(),
            metrics,
        }
    }

    /// Takes a slot for `command`, or `None` if the partition has its limit in flight already
    /// and the command is not one that is always taken.
    pub fn try_acquire(&self, command: &Command) -> Option<Permit> {
        let in_flight = self.in_flight.fetch_add(1, Ordering::Relaxed) + 1;
        if self.config.enabled && in_flight > self.limit.load(Ordering::Relaxed) && !always_taken(command) {
            self.in_flight.fetch_sub(1, Ordering::Relaxed);
            self.metrics.refused.inc();
            return None;
        }
        self.metrics.in_flight.inc();
        Some(Permit { start: Instant::now(), in_flight })
    }

    /// The permit's command was processed and its batch reached the gateway's runtime: its time
    /// in flight adjusts the limit.
    pub fn processed(&self, permit: Permit) {
        self.release(Some((permit.start.elapsed(), permit.in_flight)));
    }

    /// The permit's command did not reach the partition (its queue was full, or it is gone):
    /// congestion.
    pub fn dropped(&self, permit: Permit) {
        self.release(Some((Duration::MAX, permit.in_flight)));
    }

    /// The permit's command will not be processed by this partition (no longer the leader): its
    /// slot is given back without a sample.
    pub fn abandoned(&self, permit: Permit) {
        let _ = permit;
        self.release(None);
    }

    /// The workers or the path to them fall behind (job streams full): cuts the limit `times`
    /// over, as one slow command cuts it once.
    pub fn congested(&self, times: u32) {
        if times > 0 {
            self.cut(self.epoch.elapsed(), self.config.backoff_ratio.powi(times as i32));
        }
    }

    #[cfg(test)]
    fn limit(&self) -> usize {
        self.limit.load(Ordering::Relaxed)
    }

    #[cfg(test)]
    fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Relaxed)
    }

    fn release(&self, sample: Option<(Duration, usize)>) {
        self.in_flight.fetch_sub(1, Ordering::Relaxed);
        self.metrics.in_flight.dec();
        let Some((rtt, in_flight)) = sample else { return };
        if rtt > self.config.request_timeout {
            self.cut(self.epoch.elapsed(), self.config.backoff_ratio);
            return;
        }
        let limit = self.limit.load(Ordering::Relaxed);
        if in_flight * 2 < limit || limit >= self.config.max_limit {
            return; // the limit is not what holds the partition back
        }
        if self.fast_commands.fetch_add(1, Ordering::Relaxed) + 1 >= limit {
            self.fast_commands.store(0, Ordering::Relaxed);
            self.set_limit(|l| l + 1);
        }
    }

    /// Multiplies the limit by `factor`, unless it was cut less than [`CUT_AT_MOST_EVERY`] before
    /// `now` (since `epoch`).
    fn cut(&self, now: Duration, factor: f64) {
        let now_ns = (now.as_nanos() as u64).max(1);
        let last = self.last_cut_ns.load(Ordering::Relaxed);
        if last != 0 && now_ns.saturating_sub(last) < CUT_AT_MOST_EVERY.as_nanos() as u64 {
            return;
        }
        if self.last_cut_ns.compare_exchange(last, now_ns, Ordering::Relaxed, Ordering::Relaxed).is_err() {
            return; // another caller cut it just now
        }
        self.fast_commands.store(0, Ordering::Relaxed);
        self.set_limit(|l| (l as f64 * factor) as usize);
    }

    fn set_limit(&self, step: impl Fn(usize) -> usize) {
        let (min, max) = (self.config.min_limit.max(1), self.config.max_limit.max(1));
        let mut next = 0;
        let _ = self.limit.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |l| {
            next = step(l).clamp(min, max);
            Some(next)
        });
        self.metrics.limit.set(next as i64);
    }
}

/// Commands taken whatever the limit: they let work drain instead of adding to it. Zeebe's list
/// (job completion and failure, cancellation, deployment) and job activation: a worker polling
/// for the jobs that full streams could not take must get them, or they wait as the instances
/// behind them do.
fn always_taken(command: &Command) -> bool {
    matches!(
        (&command.value, command.intent),
        (RecordValue::Job(_), Intent::Complete | Intent::Fail)
            | (RecordValue::JobBatch(_), Intent::Activate)
            | (RecordValue::ProcessInstance(_), Intent::Cancel)
            | (RecordValue::Deployment(_), Intent::Create)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use waggle_protocol::value::{JobBatchRecord, JobRecord, ProcessInstanceCreationRecord};

    fn limiter(config: BackpressureConfig) -> Limiter {
        let metrics = LimiterMetrics {
            in_flight: IntGauge::new("in_flight", "h").unwrap(),
            limit: IntGauge::new("limit", "h").unwrap(),
            refused: IntCounter::new("refused", "h").unwrap(),
        };
        Limiter::new(config, metrics)
    }

    fn config(initial: usize, max: usize) -> BackpressureConfig {
        BackpressureConfig { initial_limit: initial, max_limit: max, ..Default::default() }
    }

    fn creation() -> Command {
        Command::new(-1, Intent::Create, RecordValue::ProcessInstanceCreation(ProcessInstanceCreationRecord::default()))
    }

    fn completion() -> Command {
        Command::new(1, Intent::Complete, RecordValue::Job(JobRecord::default()))
    }

    #[test]
    fn refuses_beyond_the_limit_but_always_takes_draining_commands() {
        let l = limiter(config(2, 10));
        let a = l.try_acquire(&creation()).expect("first");
        let b = l.try_acquire(&creation()).expect("second");
        assert!(l.try_acquire(&creation()).is_none(), "a third creation is over the limit of 2");
        let c = l.try_acquire(&completion()).expect("a job completion is always taken");
        let activation = Command::new(-1, Intent::Activate, RecordValue::JobBatch(JobBatchRecord::default()));
        let d = l.try_acquire(&activation).expect("a job activation is always taken");
        assert_eq!(l.in_flight(), 4);
        assert_eq!(l.metrics.in_flight.get(), 4);
        assert_eq!(l.metrics.refused.get(), 1);
        l.processed(c);
        l.processed(d);
        l.processed(b);
        let e = l.try_acquire(&creation()).expect("room again");
        l.abandoned(a);
        l.dropped(e);
        assert_eq!(l.in_flight(), 0, "every permit gave its slot back");
        assert_eq!(l.metrics.in_flight.get(), 0);
    }

    /// Processes `n` commands fast, each taken while `busy` others were in flight.
    fn process_fast(l: &Limiter, busy: usize, n: usize) {
        for _ in 0..n {
            let held: Vec<_> = (0..busy).map(|_| l.try_acquire(&completion()).unwrap()).collect();
            l.processed(l.try_acquire(&creation()).expect("within the limit"));
            held.into_iter().for_each(|p| l.abandoned(p));
        }
    }

    #[test]
    fn fast_commands_raise_the_limit_by_one_per_window_while_half_of_it_is_used() {
        let l = limiter(config(4, 6));
        process_fast(&l, 0, 10);
        assert_eq!(l.limit(), 4, "one command in flight of a limit of 4 is not enough use to grow");
        process_fast(&l, 1, 3);
        assert_eq!(l.limit(), 4, "three fast commands are not a window of 4");
        process_fast(&l, 1, 1);
        assert_eq!(l.limit(), 5, "the fourth completes the window");
        process_fast(&l, 2, 5 + 6 + 6);
        assert_eq!(l.limit(), 6, "capped at the maximum");
        assert_eq!(l.metrics.limit.get(), 6);
    }

    #[test]
    fn congestion_cuts_the_limit_by_the_ratio_once_per_episode_down_to_the_minimum() {
        let c = BackpressureConfig { min_limit: 5, ..config(100, 1000) };
        let l = limiter(c);
        l.dropped(l.try_acquire(&creation()).unwrap());
        assert_eq!(l.limit(), 90);
        assert_eq!(l.metrics.limit.get(), 90);
        // the same episode: slow answers and full streams within 10 ms cut no further
        l.dropped(l.try_acquire(&creation()).unwrap());
        l.congested(1);
        assert_eq!(l.limit(), 90);
        // later episodes each cut once more
        let later = l.epoch.elapsed() + CUT_AT_MOST_EVERY;
        l.cut(later, 0.9);
        assert_eq!(l.limit(), 81);
        // a severe one cuts as several
        l.cut(later + CUT_AT_MOST_EVERY, 0.9f64.powi(2));
        assert_eq!(l.limit(), 65);
        for i in 2..100 {
            l.cut(later + CUT_AT_MOST_EVERY * i, 0.9);
        }
        assert_eq!(l.limit(), 5, "never below the minimum");
        // an abandoned command gives its slot back and leaves the limit alone
        l.abandoned(l.try_acquire(&creation()).unwrap());
        assert_eq!((l.limit(), l.in_flight()), (5, 0));
    }

    #[test]
    fn an_answer_slower_than_the_request_timeout_is_congestion() {
        let l = limiter(BackpressureConfig { request_timeout: Duration::from_millis(5), ..config(100, 1000) });
        let permit = l.try_acquire(&creation()).unwrap();
        std::thread::sleep(Duration::from_millis(6));
        l.processed(permit);
        assert_eq!(l.limit(), 90);
    }

    #[test]
    fn a_window_calls_for_a_cut_per_eighth_of_new_jobs_that_found_their_streams_full() {
        let t0 = Instant::now();
        let counts = |offered, saturated| PushCounts { offered, saturated };
        let mut w = SaturationWindow { start: t0, counts: counts(1000, 10) };
        let later = |ms| t0 + Duration::from_millis(ms);
        assert_eq!(w.cuts(counts(2000, 500), later(50)), 0, "the window is still open");
        assert_eq!(w.cuts(counts(2000, 500), later(100)), 3, "490 of 1,000 saturated: three eighths and more");
        assert_eq!(w.cuts(counts(3000, 620), later(200)), 0, "120 of 1,000 is under an eighth");
        assert_eq!(w.cuts(counts(3100, 650), later(300)), 0, "30 of 100 is over an eighth, but too few jobs to tell");
        assert_eq!(w.cuts(counts(3200, 750), later(400)), 8, "all 100 saturated");
    }

    #[test]
    fn disabled_takes_everything() {
        let l = limiter(BackpressureConfig { enabled: false, ..config(1, 1) });
        let permits: Vec<_> = (0..10).map(|_| l.try_acquire(&creation()).expect("taken")).collect();
        assert_eq!(l.in_flight(), 10);
        permits.into_iter().for_each(|p| l.processed(p));
        assert_eq!(l.in_flight(), 0);
    }
}
