//! The worker's delay, kept to a fraction of a millisecond.
//!
//! Tokio's timer rounds every deadline up to its next 1 ms tick and parks in whole
//! milliseconds, so `tokio::time::sleep(50ms)` takes 51–52 ms. Across the ten tasks of W3 that
//! would add ~10 ms to every instance, on any server. One thread here sleeps with the OS's
//! precision (a condition variable's absolute timeout) and wakes each waiter when its deadline
//! has passed: never before it, typically within ~0.1 ms after it.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

struct Due {
    at: Instant,
    seq: u64,
    wake: oneshot::Sender<()>,
}

impl PartialEq for Due {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl Eq for Due {}
impl PartialOrd for Due {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Due {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

#[derive(Default)]
struct Queue {
    due: BinaryHeap<Reverse<Due>>,
    seq: u64,
}

struct Timer {
    queue: Mutex<Queue>,
    changed: Condvar,
}

fn timer() -> &'static Arc<Timer> {
    static TIMER: OnceLock<Arc<Timer>> = OnceLock::new();
    TIMER.get_or_init(|| {
        let t = Arc::new(Timer { queue: Mutex::new(Queue::default()), changed: Condvar::new() });
        let worker = t.clone();
        std::thread::Builder::new().name("bench-delay".into()).spawn(move || worker.run()).expect("starting the delay thread");
        t
    })
}

impl Timer {
    fn run(&self) {
        let mut q = self.queue.lock().expect("delay queue");
        loop {
            let now = Instant::now();
            while q.due.peek().is_some_and(|Reverse(d)| d.at <= now) {
                if let Some(Reverse(d)) = q.due.pop() {
                    let _ = d.wake.send(());
                }
            }
            q = match q.due.peek().map(|Reverse(d)| d.at) {
                Some(at) => self.changed.wait_timeout(q, at.saturating_duration_since(now)).expect("delay queue").0,
                None => self.changed.wait(q).expect("delay queue"),
            };
        }
    }
}

/// Waits `delay`: returns no earlier than `delay` after the call.
pub async fn sleep(delay: Duration) {
    let at = Instant::now() + delay;
    let (wake, woken) = oneshot::channel();
    let t = timer();
    {
        let mut q = t.queue.lock().expect("delay queue");
        q.seq += 1;
        let seq = q.seq;
        q.due.push(Reverse(Due { at, seq, wake }));
    }
    t.changed.notify_one();
    if woken.await.is_err() {
        // the timer thread is gone (it never is while the process runs): fall back to tokio
        tokio::time::sleep_until(at.into()).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn never_wakes_before_the_deadline_and_wakes_every_waiter() {
        let start = Instant::now();
        let mut tasks = Vec::new();
        for i in 0..50u64 {
            // out of order, some equal
            let d = Duration::from_millis((i * 7) % 23);
            tasks.push(tokio::spawn(async move {
                let before = Instant::now();
                sleep(d).await;
                before.elapsed() >= d
            }));
        }
        for t in tasks {
            assert!(t.await.unwrap(), "a waiter woke before its deadline");
        }
        assert!(start.elapsed() >= Duration::from_millis(22));
    }
}
