//! What the starter and the worker observed, timestamped at the source, and what it adds up to.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
#[cfg(test)]
use std::time::Duration;
use std::time::Instant;

use crate::stats::Samples;

/// One observation. Times are taken on the bench's monotonic clock.
#[derive(Debug, Clone, Copy)]
pub enum Event {
    /// The creation request of this instance was sent at `sent` and accepted.
    Created { pi: i64, sent: Instant },
    /// A message for this instance was published (request sent at `sent`) and accepted.
    Published { pi: i64, sent: Instant },
    /// The message that is to start instance number `seq` at a message start event was published
    /// (request sent at `sent`) and accepted; its instance's key is not known yet.
    StartPublished { seq: u64, sent: Instant },
    /// Instance `pi` is the one message number `seq` started (seen in its job's variables).
    Started { pi: i64, seq: u64 },
    /// A job reached the worker at `activated`; its completion was sent at `complete_sent` and
    /// acknowledged at `acked`.
    Job { pi: i64, activated: Instant, complete_sent: Instant, acked: Instant },
    /// The instance completed: its last job's completion acknowledged, or its
    /// CreateProcessInstanceWithResult call answered.
    Finished { pi: i64, at: Instant },
}

/// Shared by the starter and the worker for one run.
#[derive(Debug, Default)]
pub struct Recorder {
    events: Mutex<Vec<Event>>,
    pub created: AtomicU64,
    pub finished: AtomicU64,
    pub rejected: AtomicU64,
    pub errors: AtomicU64,
    /// Creations the starter could not even send at the fixed rate (too many requests in flight).
    pub skipped: AtomicU64,
    /// Jobs that reached the worker by job push.
    pub pushed: AtomicU64,
    /// Jobs that reached the worker by polling (ActivateJobs).
    pub polled: AtomicU64,
    first_errors: Mutex<Vec<String>>,
}

/// Cumulative counters at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Counts {
    pub created: u64,
    pub finished: u64,
    pub rejected: u64,
    pub errors: u64,
    pub skipped: u64,
}

impl Recorder {
    pub fn record(&self, e: Event) {
        match e {
            Event::Created { .. } | Event::StartPublished { .. } => self.created.fetch_add(1, Ordering::Relaxed),
            Event::Finished { .. } => self.finished.fetch_add(1, Ordering::Relaxed),
            _ => 0,
        };
        self.events.lock().expect("recorder events lock (a recording thread panicked)").push(e);
    }

    pub fn reject(&self) {
        self.rejected.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts an unexpected error; the first few messages are kept for the report.
    pub fn error(&self, what: &str, status: &tonic::Status) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        let mut first = self.first_errors.lock().expect("recorder errors lock (a recording thread panicked)");
        if first.len() < 5 {
            first.push(format!("{what}: {:?}: {}", status.code(), status.message()));
        }
    }

    pub fn first_errors(&self) -> Vec<String> {
        self.first_errors.lock().expect("recorder errors lock (a recording thread panicked)").clone()
    }

    pub fn counts(&self) -> Counts {
        Counts {
            created: self.created.load(Ordering::Relaxed),
            finished: self.finished.load(Ordering::Relaxed),
            rejected: self.rejected.load(Ordering::Relaxed),
            errors: self.errors.load(Ordering::Relaxed),
            skipped: self.skipped.load(Ordering::Relaxed),
        }
    }

    pub fn events(&self) -> Vec<Event> {
        self.events.lock().expect("recorder events lock (a recording thread panicked)").clone()
    }

    /// The events recorded after the first `from` (a soak reads only what came since its last
    /// look).
    pub fn events_from(&self, from: usize) -> Vec<Event> {
        let events = self.events.lock().expect("recorder events lock (a recording thread panicked)");
        events.get(from..).map_or_else(Vec::new, <[Event]>::to_vec)
    }
}

/// Latencies of the instances created inside the measurement window.
#[derive(Debug, Default)]
pub struct Latencies {
    /// Instances created in the window.
    pub measured: usize,
    /// Of those, instances not finished when the run ended.
    pub unfinished: usize,
    /// Creation request sent → instance finished.
    pub execution: Samples,
    /// The same, by the second of the window the creation was sent in.
    pub execution_by_second: Vec<Samples>,
    /// Job reached the worker → its completion acknowledged (includes the worker delay).
    pub job_lifetime: Samples,
    /// What made the job (creation sent, message published, previous job's completion sent) →
    /// the job reached the worker.
    pub activation: Samples,
    /// Message publish sent → the job after the catch event reached the worker.
    pub correlation: Samples,
}

#[derive(Default)]
struct Track {
    created: Option<Instant>,
    published: Option<Instant>,
    finished: Option<Instant>,
    jobs: Vec<(Instant, Instant, Instant)>,
}

/// Joins the events per instance; only instances whose creation was sent in `[from, to)` count.
pub fn latencies(events: &[Event], from: Instant, to: Instant) -> Latencies {
    let start_sent: HashMap<u64, Instant> =
        events.iter().filter_map(|e| if let Event::StartPublished { seq, sent } = *e { Some((seq, sent)) } else { None }).collect();
    let mut started: HashSet<u64> = HashSet::new();
    let mut by_pi: HashMap<i64, Track> = HashMap::new();
    for e in events {
        match *e {
            Event::Created { pi, sent } => by_pi.entry(pi).or_default().created = Some(sent),
            // an instance started by a message was "created" when that message was sent
            Event::Started { pi, seq } => {
                started.insert(seq);
                if let Some(&sent) = start_sent.get(&seq) {
                    by_pi.entry(pi).or_default().created = Some(sent);
                }
            }
            Event::StartPublished { .. } => {}
            Event::Published { pi, sent } => by_pi.entry(pi).or_default().published = Some(sent),
            Event::Job { pi, activated, complete_sent, acked } => by_pi.entry(pi).or_default().jobs.push((activated, complete_sent, acked)),
            Event::Finished { pi, at } => by_pi.entry(pi).or_default().finished = Some(at),
        }
    }
    let mut out = Latencies::default();
    // a start message sent in the window whose instance never showed a job: measured, unfinished
    let never_started = start_sent.iter().filter(|(seq, sent)| **sent >= from && **sent < to && !started.contains(seq)).count();
    out.measured += never_started;
    out.unfinished += never_started;
    for t in by_pi.values_mut() {
        let Some(created) = t.created.filter(|c| *c >= from && *c < to) else { continue };
        out.measured += 1;
        match t.finished {
            Some(f) => {
                let took = f.saturating_duration_since(created);
                out.execution.push(took);
                let second = created.saturating_duration_since(from).as_secs() as usize;
                if out.execution_by_second.len() <= second {
                    out.execution_by_second.resize_with(second + 1, Samples::new);
                }
                out.execution_by_second[second].push(took);
            }
            None => out.unfinished += 1,
        }
        t.jobs.sort_by_key(|j| j.0);
        let mut cause = t.published.unwrap_or(created).max(created);
        for (i, &(activated, complete_sent, acked)) in t.jobs.iter().enumerate() {
            out.job_lifetime.push(acked.saturating_duration_since(activated));
            out.activation.push(activated.saturating_duration_since(cause));
            if i == 0 {
                if let Some(p) = t.published {
                    out.correlation.push(activated.saturating_duration_since(p));
                }
            }
            cause = complete_sent;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn joins_events_per_instance_inside_the_window() {
        let t0 = Instant::now();
        let at = |n| t0 + ms(n);
        let events = [
            // finished before its creation response was recorded: order of events does not matter
            Event::Job { pi: 1, activated: at(105), complete_sent: at(155), acked: at(160) },
            Event::Finished { pi: 1, at: at(160) },
            Event::Created { pi: 1, sent: at(100) },
            // two jobs: the second job's activation counts from the first job's completion
            Event::Created { pi: 2, sent: at(200) },
            Event::Job { pi: 2, activated: at(270), complete_sent: at(280), acked: at(290) },
            Event::Job { pi: 2, activated: at(210), complete_sent: at(260), acked: at(262) },
            Event::Finished { pi: 2, at: at(290) },
            // created in the window, never finished
            Event::Created { pi: 3, sent: at(300) },
            // created before the window: ignored
            Event::Created { pi: 4, sent: at(10) },
            Event::Finished { pi: 4, at: at(20) },
        ];
        let l = latencies(&events, at(50), at(1000));
        assert_eq!((l.measured, l.unfinished), (3, 1));
        let exec = l.execution.summary().unwrap();
        assert_eq!((exec.count, exec.p50_ms, exec.max_ms), (2, 60.0, 90.0));
        let act = l.activation.summary().unwrap();
        assert_eq!((act.count, act.max_ms), (3, 10.0));
        assert_eq!(l.job_lifetime.summary().unwrap().max_ms, 55.0);
        assert!(l.correlation.is_empty());
    }

    #[test]
    fn an_instance_started_by_a_message_counts_from_that_message() {
        let t0 = Instant::now();
        let at = |n| t0 + ms(n);
        let events = [
            Event::StartPublished { seq: 4, sent: at(10) },
            Event::Job { pi: 9, activated: at(14), complete_sent: at(14), acked: at(16) },
            Event::Started { pi: 9, seq: 4 },
            Event::Finished { pi: 9, at: at(16) },
            // a message whose instance was never seen: measured, unfinished
            Event::StartPublished { seq: 5, sent: at(20) },
        ];
        let l = latencies(&events, at(0), at(100));
        assert_eq!((l.measured, l.unfinished), (2, 1), "the instance's creation is its message's");
        assert_eq!(l.execution.summary().unwrap().p50_ms, 6.0);
        assert_eq!(l.activation.summary().unwrap().p50_ms, 4.0);
        let r = Recorder::default();
        r.record(events[0]);
        assert_eq!(r.counts().created, 1);
    }

    #[test]
    fn correlation_counts_from_the_publish() {
        let t0 = Instant::now();
        let at = |n| t0 + ms(n);
        let events = [
            Event::Created { pi: 7, sent: at(0) },
            Event::Published { pi: 7, sent: at(5) },
            Event::Job { pi: 7, activated: at(25), complete_sent: at(25), acked: at(27) },
            Event::Finished { pi: 7, at: at(27) },
        ];
        let l = latencies(&events, at(0), at(100));
        assert_eq!(l.correlation.summary().unwrap().p99_ms, 20.0);
        assert_eq!(l.activation.summary().unwrap().p99_ms, 20.0);
    }

    #[test]
    fn counters_follow_events() {
        let r = Recorder::default();
        let now = Instant::now();
        r.record(Event::Created { pi: 1, sent: now });
        r.record(Event::Finished { pi: 1, at: now });
        r.reject();
        r.error("create", &tonic::Status::internal("boom"));
        let c = r.counts();
        assert_eq!((c.created, c.finished, c.rejected, c.errors), (1, 1, 1, 1));
        assert_eq!(r.first_errors(), vec!["create: Internal: boom".to_string()]);
    }
}
