//! The worker: takes jobs by job push (StreamActivatedJobs) or long polling (ActivateJobs),
//! waits the configured delay and completes them.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_stream::StreamExt;
use waggle_protocol::gateway::{ActivateJobsRequest, ActivatedJob, CompleteJobRequest, StreamActivatedJobsRequest};

use crate::calls::CallClient;
use crate::client::Client;
use crate::recorder::{Event, Recorder};

const JOB_TIMEOUT_MS: i64 = 60_000;
const POLL_TIMEOUT_MS: i64 = 10_000;
const BACKUP_POLL_JOBS: usize = 32;
/// Pause after a poll that got no job (or failed); after one that got jobs, the next poll
/// follows at once, as in Zeebe's Java client.
const POLL_PAUSE: Duration = Duration::from_millis(100);

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// One worker: `capacity` jobs in hand at most.
#[derive(Clone)]
pub struct Worker {
    pub client: Client,
    /// The job stream and the per-job call (completion).
    pub calls: CallClient,
    pub job_type: String,
    pub delay: Duration,
    pub capacity: usize,
    /// Element ids whose job completion completes the instance.
    pub last_tasks: Arc<[String]>,
    pub recorder: Arc<Recorder>,
    /// Released by one for every finished instance (closed-loop starter).
    pub outstanding: Option<Arc<Semaphore>>,
    /// Instances are started by messages: each job's variables tell which one (see
    /// [`crate::starter::START_VARIABLE`]).
    pub started_by_message: bool,
}

impl Worker {
    /// Works until the task is dropped or aborted; reconnects the stream or poll when it ends.
    /// With job push, a poller runs beside the stream as in Zeebe's Java client: it picks up jobs
    /// the server could not push (no stream with room when the job was created).
    pub async fn run(self, stream: bool) {
        let slots = Arc::new(Semaphore::new(self.capacity));
        if stream {
            let me = self.clone();
            let backup_slots = slots.clone();
            let backup = tokio::spawn(async move {
                loop {
                    if me.poll(&backup_slots, false).await == 0 {
                        tokio::time::sleep(POLL_PAUSE).await;
                    }
                }
            });
            let _abort_backup = AbortOnDrop(backup);
            loop {
                self.stream(&slots).await;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        } else {
            loop {
                if self.poll(&slots, true).await == 0 {
                    tokio::time::sleep(POLL_PAUSE).await;
                }
            }
        }
    }

    async fn stream(&self, slots: &Arc<Semaphore>) {
        let request = StreamActivatedJobsRequest {
            r#type: self.job_type.clone(),
            worker: "waggle-bench".into(),
            timeout: JOB_TIMEOUT_MS,
            ..Default::default()
        };
        let mut jobs = self.calls.stream_activated_jobs(&request);
        while let Some(job) = jobs.next().await {
            let activated = Instant::now();
            match job {
                Ok(job) => {
                    self.recorder.pushed.fetch_add(1, Ordering::Relaxed);
                    let slot = slots.clone().acquire_owned().await.expect("semaphore closed");
                    self.spawn(job, activated, slot);
                }
                Err(s) => return self.recorder.error("stream jobs", &s),
            }
        }
    }

    /// One long poll; returns how many jobs it got. The main poller asks for as many jobs as it
    /// has free slots and holds them; the backup poller beside a stream asks for a few and holds
    /// none, so the stream keeps room.
    async fn poll(&self, slots: &Arc<Semaphore>, main: bool) -> usize {
        let mut held = vec![];
        if main {
            held.push(slots.clone().acquire_owned().await.expect("semaphore closed"));
            while let Ok(p) = slots.clone().try_acquire_owned() {
                held.push(p);
            }
        }
        let max = if main { held.len() } else { BACKUP_POLL_JOBS };
        let request = ActivateJobsRequest {
            r#type: self.job_type.clone(),
            worker: "waggle-bench".into(),
            timeout: JOB_TIMEOUT_MS,
            max_jobs_to_activate: max as i32,
            request_timeout: POLL_TIMEOUT_MS,
            ..Default::default()
        };
        let mut responses = match self.client.clone().activate_jobs(request).await {
            Ok(r) => r.into_inner(),
            // back pressure on activation: poll again after the pause in `run`
            Err(s) if s.code() == tonic::Code::ResourceExhausted => return 0,
            Err(s) => {
                self.recorder.error("activate jobs", &s);
                return 0;
            }
        };
        let mut got = 0;
        while let Some(response) = responses.next().await {
            let activated = Instant::now();
            match response {
                Ok(r) => {
                    got += r.jobs.len();
                    self.recorder.polled.fetch_add(r.jobs.len() as u64, Ordering::Relaxed);
                    for job in r.jobs {
                        match held.pop() {
                            Some(slot) => self.spawn(job, activated, slot),
                            None => self.spawn(job, activated, slots.clone().acquire_owned().await.expect("semaphore closed")),
                        }
                    }
                }
                Err(s) if s.code() == tonic::Code::ResourceExhausted => break,
                Err(s) => {
                    self.recorder.error("activate jobs", &s);
                    break;
                }
            }
        }
        got
    }

    fn spawn(&self, job: ActivatedJob, activated: Instant, slot: OwnedSemaphorePermit) {
        let me = self.clone();
        tokio::spawn(async move {
            me.handle(job, activated).await;
            drop(slot);
        });
    }

    async fn handle(&self, job: ActivatedJob, activated: Instant) {
        if !self.delay.is_zero() {
            crate::delay::sleep(self.delay).await;
        }
        let complete_sent = Instant::now();
        let request = CompleteJobRequest { job_key: job.key, variables: String::new() };
        if let Err(s) = self.calls.complete_job(&request).await {
            return self.recorder.error("complete job", &s);
        }
        let acked = Instant::now();
        let pi = job.process_instance_key;
        if self.started_by_message {
            if let Some(seq) = start_number(&job.variables) {
                self.recorder.record(Event::Started { pi, seq });
            }
        }
        self.recorder.record(Event::Job { pi, activated, complete_sent, acked });
        if self.last_tasks.contains(&job.element_id) {
            self.recorder.record(Event::Finished { pi, at: acked });
            if let Some(s) = &self.outstanding {
                s.add_permits(1);
            }
        }
    }
}

/// The start message's number in a job's variables (see [`crate::starter::START_VARIABLE`]); read
/// only in a run started by messages.
fn start_number(variables: &str) -> Option<u64> {
    let variables: serde_json::Map<String, serde_json::Value> = serde_json::from_str(variables).ok()?;
    variables.get(crate::starter::START_VARIABLE)?.as_u64()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_start_number_from_the_variables() {
        assert_eq!(start_number(r#"{"a": [1, {"benchStart": 3}], "benchStart": 12, "z": "x"}"#), Some(12));
        assert_eq!(start_number(r#"{"a": 1}"#), None);
        assert_eq!(start_number("not json"), None);
    }
}
