//! The closed loop's creation window: how many creations may wait for their answer at once,
//! adapted to back pressure as TCP adapts its congestion window. It starts small and grows by
//! one per answered creation (slow start) until the first refusal; from then on it grows by one
//! per window of answers and halves on a refusal, at most once per round trip.
//!
//! A server that answers every creation lets the window grow to the loop's outstanding bound,
//! so a creation's round trip does not bound the rate. A server that refuses creations
//! (RESOURCE_EXHAUSTED) sees fewer of them in flight, instead of every creator retrying into
//! it: with a fixed 256 creators, Zeebe 8.5.8 answered ~5,000 refusals a second in W2 and
//! completed 92 PI/s, where 32 creators had given it 325.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio::sync::Notify;

/// Adaptive limit on creations in flight (see the module's documentation).
pub struct CreationWindow {
    state: Mutex<WindowState>,
    changed: Notify,
    max: f64,
}

#[derive(Debug)]
struct WindowState {
    limit: f64,
    in_flight: usize,
    slow_start: bool,
    /// Smoothed round trip of answered creations.
    round_trip: Option<Duration>,
    last_decrease: Option<Instant>,
}

impl WindowState {
    fn free(&self) -> usize {
        (self.limit.floor() as usize).saturating_sub(self.in_flight)
    }
}

impl CreationWindow {
    /// A window of `initial` creations that grows to `max` at most (both at least 1).
    pub fn new(initial: usize, max: usize) -> Self {
        let max = max.max(1) as f64;
        let state =
            WindowState { limit: (initial.max(1) as f64).min(max), in_flight: 0, slow_start: true, round_trip: None, last_decrease: None };
        Self { state: Mutex::new(state), changed: Notify::new(), max }
    }

    /// Waits for room in the window and takes it; give it back with [`Self::release`].
    pub async fn acquire(&self) {
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.try_acquire() {
                return;
            }
            notified.await;
        }
    }

    fn try_acquire(&self) -> bool {
        let mut s = self.state.lock().expect("window lock");
        if s.free() == 0 {
            return false;
        }
        s.in_flight += 1;
        true
    }

    /// Gives back a creation's room: `refused` when the server answered with back pressure,
    /// `round_trip` how long the answer took, `now` the time of the answer.
    pub fn release(&self, refused: bool, round_trip: Duration, now: Instant) {
        let free = {
            let mut s = self.state.lock().expect("window lock");
            s.in_flight = s.in_flight.saturating_sub(1);
            if refused {
                let rtt = s.round_trip.unwrap_or(round_trip);
                if s.last_decrease.is_none_or(|t| now.duration_since(t) >= rtt) {
                    s.limit = (s.limit / 2.0).max(1.0);
                    s.slow_start = false;
                    s.last_decrease = Some(now);
                }
            } else {
                s.round_trip = Some(match s.round_trip {
                    None => round_trip,
                    Some(srtt) => srtt.mul_f64(0.875) + round_trip.mul_f64(0.125),
                });
                let step = if s.slow_start { 1.0 } else { 1.0 / s.limit };
                s.limit = (s.limit + step).min(self.max);
            }
            s.free()
        };
        for _ in 0..free.min(2) {
            self.changed.notify_one();
        }
    }

    /// The current limit (whole creations).
    pub fn limit(&self) -> usize {
        self.state.lock().expect("window lock").limit.floor() as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[tokio::test]
    async fn grows_by_one_per_answer_until_the_first_refusal_then_halves_once_per_round_trip() {
        let w = CreationWindow::new(2, 100);
        let t0 = Instant::now();
        for _ in 0..10 {
            w.acquire().await;
            w.release(false, 10 * MS, t0);
        }
        assert_eq!(w.limit(), 12);
        w.acquire().await;
        w.release(true, 10 * MS, t0);
        assert_eq!(w.limit(), 6);
        // a second refusal within the round trip (10 ms) does not halve again
        w.acquire().await;
        w.release(true, 10 * MS, t0 + 5 * MS);
        assert_eq!(w.limit(), 6);
        w.acquire().await;
        w.release(true, 10 * MS, t0 + 11 * MS);
        assert_eq!(w.limit(), 3);
        // after slow start: one more per window of answers
        for _ in 0..3 {
            w.acquire().await;
            w.release(false, 10 * MS, t0);
        }
        assert_eq!(w.limit(), 3);
        w.acquire().await;
        w.release(false, 10 * MS, t0);
        assert_eq!(w.limit(), 4);
    }

    #[tokio::test]
    async fn never_exceeds_its_bounds() {
        let w = CreationWindow::new(500, 4);
        assert_eq!(w.limit(), 4);
        let t0 = Instant::now();
        for i in 0..10 {
            w.acquire().await;
            w.release(true, MS, t0 + 10 * i * MS);
        }
        assert_eq!(w.limit(), 1);
    }

    #[tokio::test]
    async fn a_full_window_admits_the_next_creation_when_one_is_answered() {
        let w = std::sync::Arc::new(CreationWindow::new(1, 1));
        w.acquire().await;
        let waiting = tokio::spawn({
            let w = w.clone();
            async move { w.acquire().await }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiting.is_finished(), "the window holds one creation");
        w.release(false, MS, Instant::now());
        tokio::time::timeout(Duration::from_secs(5), waiting).await.expect("admitted").unwrap();
    }
}
