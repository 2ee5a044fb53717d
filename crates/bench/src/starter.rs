//! The starter: creates process instances at a fixed rate or as fast as the server holds, and
//! publishes a correlated message after each creation when the workload asks for it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use waggle_protocol::gateway::{CreateProcessInstanceRequest, CreateProcessInstanceWithResultRequest, PublishMessageRequest};

use crate::calls::CallClient;
use crate::client::Client;
use crate::recorder::{Event, Recorder};
use crate::window::CreationWindow;
use crate::workload::Pace;

/// Most creation requests in flight at a fixed rate; beyond, creations are counted as skipped.
const MAX_IN_FLIGHT: usize = 4096;
/// Creations in flight when the closed loop starts (see [`CreationWindow`]).
const INITIAL_WINDOW: usize = 32;
/// The variable that tells which start message an instance came from (see [`Starter::start_message`]).
pub const START_VARIABLE: &str = "benchStart";
/// Pause of a creator after back pressure.
const BACKOFF: Duration = Duration::from_millis(10);

/// Everything a creation needs.
#[derive(Clone)]
pub struct Starter {
    pub client: Client,
    /// The per-instance calls (creation, publication).
    pub calls: CallClient,
    pub process_id: String,
    /// The payload, a JSON object.
    pub payload: Arc<str>,
    pub with_result: bool,
    /// The message name to publish after creation, correlated by the variable `correlationKey`.
    pub message: Option<String>,
    /// The message name to start instances with (a message start event) instead of creating
    /// them; each message carries its number as the variable [`START_VARIABLE`].
    pub start_message: Option<String>,
    pub recorder: Arc<Recorder>,
    /// Released by one when an instance finishes, in the closed loop.
    pub outstanding: Option<Arc<Semaphore>>,
    /// Tells correlation keys of different runs apart.
    pub run_id: u64,
}

enum Outcome {
    Done,
    Rejected,
    Failed,
}

/// A load's end brought forward by its caller ([`EarlyEnd::now`]); cloned handles share it.
#[derive(Debug, Clone, Default)]
pub struct EarlyEnd(Arc<AtomicU64>);

/// The instant the bench's early ends are counted from.
fn epoch() -> Instant {
    static EPOCH: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

impl EarlyEnd {
    /// Ends the load now (a second call keeps the first end).
    pub fn now(&self) {
        let at = epoch().elapsed().as_nanos().max(1) as u64;
        let _ = self.0.compare_exchange(0, at, Ordering::Relaxed, Ordering::Relaxed);
    }

    /// When it was ended, if it was.
    pub fn at(&self) -> Option<Instant> {
        match self.0.load(Ordering::Relaxed) {
            0 => None,
            n => Some(epoch() + Duration::from_nanos(n)),
        }
    }
}

/// The end of a load: planned, or earlier if its [`EarlyEnd`] came first.
#[derive(Debug, Clone)]
pub struct Until {
    planned: Instant,
    early: EarlyEnd,
}

impl Until {
    pub fn new(planned: Instant, early: EarlyEnd) -> Until {
        epoch();
        Until { planned, early }
    }

    pub fn get(&self) -> Instant {
        self.early.at().map_or(self.planned, |e| e.min(self.planned))
    }
}

impl Starter {
    /// Starts instances at `pace` until `until`; returns once every started request was answered.
    pub async fn run(self, pace: Pace, until: Until) {
        match pace {
            Pace::Rate(rate) => self.fixed_rate(rate, until).await,
            Pace::Max { outstanding } => self.closed_loop(outstanding, until).await,
        }
    }

    async fn fixed_rate(self, rate: f64, until: Until) {
        let in_flight = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
        let mut tasks = JoinSet::new();
        let start = tokio::time::Instant::now();
        let period = Duration::from_secs_f64(1.0 / rate.max(0.001));
        for seq in 0u64.. {
            let due = start + period.mul_f64(seq as f64);
            if due.into_std() >= until.get() {
                break;
            }
            tokio::time::sleep_until(due).await;
            while tasks.try_join_next().is_some() {}
            let Ok(permit) = in_flight.clone().try_acquire_owned() else {
                self.recorder.skipped.fetch_add(1, Ordering::Relaxed);
                continue;
            };
            let me = self.clone();
            tasks.spawn(async move {
                me.create(seq).await;
                drop(permit);
            });
        }
        while tasks.join_next().await.is_some() {}
    }

    /// One creator per instance allowed outstanding: each waits for a free slot and for room in
    /// the creation window (see [`CreationWindow`]), then creates. Every slot freed by a
    /// finished instance is refilled as soon as the window allows, however long a creation's
    /// answer takes.
    async fn closed_loop(self, creators: usize, until: Until) {
        let outstanding = self.outstanding.clone().expect("closed loop without an outstanding limit");
        let window = Arc::new(CreationWindow::new(INITIAL_WINDOW, creators));
        let creators = creators as u64;
        let mut tasks = JoinSet::new();
        for creator in 0..creators {
            let me = self.clone();
            let (outstanding, window, until) = (outstanding.clone(), window.clone(), until.clone());
            tasks.spawn(async move {
                let mut seq = creator;
                while Instant::now() < until.get() {
                    let Ok(permit) = tokio::time::timeout_at(until.get().into(), outstanding.clone().acquire_owned()).await else { break };
                    let permit = permit.expect("semaphore closed");
                    if tokio::time::timeout_at(until.get().into(), window.acquire()).await.is_err() {
                        break;
                    }
                    let sent = Instant::now();
                    let outcome = me.create(seq).await;
                    window.release(!matches!(outcome, Outcome::Done), sent.elapsed(), Instant::now());
                    match outcome {
                        // released by whoever sees the instance finish
                        Outcome::Done => permit.forget(),
                        Outcome::Rejected => {
                            drop(permit);
                            tokio::time::sleep(BACKOFF).await;
                        }
                        Outcome::Failed => {
                            drop(permit);
                            tokio::time::sleep(BACKOFF * 10).await;
                        }
                    }
                    seq += creators;
                }
            });
        }
        while tasks.join_next().await.is_some() {}
    }

    fn variables(&self, correlation_key: Option<&str>) -> String {
        match correlation_key {
            None => self.payload.to_string(),
            Some(key) => with_variable(&self.payload, "correlationKey", key),
        }
    }

    /// Publishes start message number `seq` (its key unique in the run, as Zeebe starts one
    /// instance per correlation key at a time).
    async fn start_by_message(&self, name: &str, seq: u64) -> Outcome {
        let request = PublishMessageRequest {
            name: name.to_string(),
            correlation_key: format!("bench-start-{}-{seq}", self.run_id),
            variables: with_variable(&self.payload, START_VARIABLE, seq),
            ..Default::default()
        };
        let sent = Instant::now();
        match self.calls.publish_message(&request).await {
            Ok(_) => {
                self.recorder.record(Event::StartPublished { seq, sent });
                Outcome::Done
            }
            Err(s) => self.failed("publish start message", &s),
        }
    }

    async fn create(&self, seq: u64) -> Outcome {
        if let Some(name) = &self.start_message {
            return self.start_by_message(name, seq).await;
        }
        let correlation_key = self.message.as_ref().map(|_| format!("bench-{}-{seq}", self.run_id));
        let request = CreateProcessInstanceRequest {
            bpmn_process_id: self.process_id.clone(),
            version: -1,
            variables: self.variables(correlation_key.as_deref()),
            ..Default::default()
        };
        let sent = Instant::now();
        let pi = if self.with_result {
            let request =
                CreateProcessInstanceWithResultRequest { request: Some(request), request_timeout: 120_000, fetch_variables: vec![] };
            match self.client.clone().create_process_instance_with_result(request).await {
                Ok(r) => {
                    let at = Instant::now();
                    let pi = r.into_inner().process_instance_key;
                    self.recorder.record(Event::Created { pi, sent });
                    self.recorder.record(Event::Finished { pi, at });
                    if let Some(s) = &self.outstanding {
                        s.add_permits(1);
                    }
                    pi
                }
                Err(s) => return self.failed("create with result", &s),
            }
        } else {
            match self.calls.create_process_instance(&request).await {
                Ok(r) => {
                    let pi = r.process_instance_key;
                    self.recorder.record(Event::Created { pi, sent });
                    pi
                }
                Err(s) => return self.failed("create", &s),
            }
        };
        if let (Some(name), Some(key)) = (&self.message, correlation_key) {
            let request = PublishMessageRequest { name: name.clone(), correlation_key: key, time_to_live: 60_000, ..Default::default() };
            let sent = Instant::now();
            match self.calls.publish_message(&request).await {
                Ok(_) => self.recorder.record(Event::Published { pi, sent }),
                Err(s) => {
                    self.failed("publish", &s);
                }
            }
        }
        Outcome::Done
    }

    fn failed(&self, what: &str, status: &tonic::Status) -> Outcome {
        if status.code() == tonic::Code::ResourceExhausted {
            self.recorder.reject();
            Outcome::Rejected
        } else {
            self.recorder.error(what, status);
            Outcome::Failed
        }
    }
}

/// `object` (a JSON object's text) with one more variable, without re-serialising it.
pub fn with_variable(object: &str, name: &str, value: impl Into<serde_json::Value>) -> String {
    let body = object.trim().strip_prefix('{').unwrap_or("}").trim_start();
    let field = format!("{}:{}", serde_json::Value::from(name), value.into());
    if body.starts_with('}') {
        format!("{{{field}}}")
    } else {
        format!("{{{field},{body}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adds_a_variable_to_a_json_object() {
        let v: serde_json::Value = serde_json::from_str(&with_variable(r#"{"a": 1}"#, "correlationKey", "k-1")).unwrap();
        assert_eq!(v, serde_json::json!({"correlationKey": "k-1", "a": 1}));
        let v: serde_json::Value = serde_json::from_str(&with_variable(" { } ", "k", "x\"y")).unwrap();
        assert_eq!(v, serde_json::json!({"k": "x\"y"}));
        let v: serde_json::Value = serde_json::from_str(&with_variable("{}", START_VARIABLE, 7u64)).unwrap();
        assert_eq!(v, serde_json::json!({"benchStart": 7}));
    }
}
