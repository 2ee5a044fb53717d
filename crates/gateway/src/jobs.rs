//! Job activation: `ActivateJobs` with long polling, and `StreamActivatedJobs` (job push).

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::Stream;
use tokio::sync::{broadcast, mpsc, oneshot};
use tokio::time::Instant;
use tonic::Status;
use waggle_broker::{BrokerError, PushedJob, StreamId, StreamSettings};
use waggle_engine::Command;
use waggle_protocol::gateway as pb;
use waggle_protocol::value::{JobBatchRecord, JobRecord};
use waggle_protocol::{Intent, PartitionId, Record, RecordValue};

use crate::status;
use crate::Backend;

/// Jobs buffered per stream between the partition and the gRPC stream (flow control window). A
/// batch can activate many jobs at once: with 32, a W2 run with 128 concurrent creations pushed
/// 96 % of its jobs and the rest waited for the worker's next poll; with 256, W2 with 512
/// instances in flight pushed 95.9 %, with 512 and 1,024 in flight 99.4 %. The channel allocates
/// as it fills, not up front; a client that stops reading leaves at most this many jobs (and
/// their variables) here, the rest stay activatable.
const STREAM_BUFFER_JOBS: usize = 512;

pub fn validate_activation(req: &pb::ActivateJobsRequest) -> Result<(), Status> {
    // Zeebe 8.5.8's wording; a maxJobsToActivate below 1 is not an error there (see
    // `activate_with_long_polling`), so it is not one here either
    if req.r#type.trim().is_empty() {
        return Err(status::invalid(
            "Command 'ACTIVATE' rejected with code 'INVALID_ARGUMENT': Expected to activate job batch with type to be present, but it was blank",
        ));
    }
    if req.timeout < 1 {
        return Err(status::invalid(format!(
            "Command 'ACTIVATE' rejected with code 'INVALID_ARGUMENT': Expected to activate job batch with timeout to be greater than zero, but it was '{}'",
            req.timeout
        )));
    }
    Ok(())
}

pub fn to_activated(key: i64, job: JobRecord) -> pb::ActivatedJob {
    pb::ActivatedJob {
        key,
        r#type: job.job_type.into(),
        process_instance_key: job.process_instance_key,
        bpmn_process_id: job.bpmn_process_id.into(),
        process_definition_version: job.process_definition_version,
        process_definition_key: job.process_definition_key,
        element_id: job.element_id.into(),
        element_instance_key: job.element_instance_key,
        custom_headers: if job.custom_headers.is_empty() { "{}".into() } else { job.custom_headers.into() },
        worker: job.worker.into(),
        retries: job.retries,
        deadline: job.deadline_ms,
        variables: if job.variables.is_empty() { "{}".into() } else { job.variables.into() },
        tenant_id: if job.tenant_id.is_empty() { "<default>".into() } else { job.tenant_id.into() },
    }
}

/// Activated jobs as the responses of an `ActivateJobs` stream: as many jobs per response as fit
/// in `max_message_bytes` encoded (Zeebe's gateway, too, answers in several responses), so that a
/// client whose limit is the default 4 MB can decode each (1,000 jobs carrying 50 kB of
/// variables each made one 50 MB response). A job larger than the limit alone goes alone.
pub fn split_responses(jobs: Vec<pb::ActivatedJob>, max_message_bytes: usize) -> Vec<pb::ActivateJobsResponse> {
    use prost::Message as _;
    let mut responses = Vec::new();
    let mut current = pb::ActivateJobsResponse::default();
    let mut size = 0;
    for job in jobs {
        // a repeated field's element: its length-delimited encoding and a tag byte
        let job_size = job.encoded_len() + prost::length_delimiter_len(job.encoded_len()) + 1;
        if !current.jobs.is_empty() && size + job_size > max_message_bytes {
            responses.push(std::mem::take(&mut current));
            size = 0;
        }
        size += job_size;
        current.jobs.push(job);
    }
    if !current.jobs.is_empty() {
        responses.push(current);
    }
    responses
}

/// Jobs one activation command takes at most: a larger request is split into several commands,
/// so that the partition processes other commands between them (an activation of 1,000 jobs in
/// one batch held every command behind it for its whole processing and commit).
const ACTIVATION_CHUNK_JOBS: usize = 64;

/// One pass over every partition, taking at most `max_jobs_to_activate` jobs in all. A partition
/// that cannot answer (no leader here, overloaded) is skipped, as Zeebe's gateway skips it: the
/// jobs other partitions activated are handed out, not dropped (they would stay locked until
/// their time-out). Only when no partition answered is its error returned.
async fn activate_once(broker: &Backend, req: &pb::ActivateJobsRequest) -> Result<Vec<pb::ActivatedJob>, Status> {
    // held here until returned: if this future is dropped (the client went away), they go back
    let mut jobs = Undelivered::new(broker.clone());
    let mut answered = false;
    let mut failure = None;
    let first = broker.next_partition();
    let n = broker.partition_count();
    let wanted = req.max_jobs_to_activate.max(0) as usize;
    for i in 0..n {
        let partition = (first - 1 + i) % n + 1;
        // chunk after chunk while the partition has jobs and the request wants more
        while jobs.jobs.len() < wanted {
            let chunk = (wanted - jobs.jobs.len()).min(ACTIVATION_CHUNK_JOBS);
            let batch = JobBatchRecord {
                job_type: req.r#type.clone(),
                worker: req.worker.clone(),
                timeout_ms: req.timeout,
                max_jobs_to_activate: chunk as i32,
                fetch_variables: req.fetch_variable.clone(),
                tenant_ids: req.tenant_ids.clone(),
                ..Default::default()
            };
            let command = Command::new(-1, Intent::Activate, RecordValue::JobBatch(batch));
            let record = match submit_activation(broker, partition, command).await {
                Ok(record) => record,
                Err(e) => {
                    failure = Some(status::broker(e));
                    break;
                }
            };
            answered = true;
            if record.rejection.is_some() {
                return Err(status::rejection(&record));
            }
            let RecordValue::JobBatch(b) = record.value else { break };
            let taken = b.job_keys.len();
            jobs.jobs.extend(b.job_keys.into_iter().zip(b.jobs).map(|(k, j)| to_activated(k, j)));
            if taken < chunk {
                break; // the partition has no more
            }
        }
    }
    match failure {
        Some(error) if !answered => Err(error),
        _ => Ok(jobs.take()),
    }
}

/// Submits one activation so that its jobs are never stranded: the command runs in a task of its
/// own, and if the request waiting for it has gone by the time it answers (the client cancelled
/// its long poll, or went away), the jobs it activated go straight back to the pool.
async fn submit_activation(broker: &Backend, partition: PartitionId, command: Command) -> Result<Record, BrokerError> {
    let (tx, rx) = oneshot::channel();
    let owner = broker.clone();
    tokio::spawn(async move {
        if let Err(Ok(record)) = tx.send(owner.submit(partition, command).await) {
            if let RecordValue::JobBatch(batch) = record.value {
                let mut stranded = Undelivered::new(owner);
                stranded.jobs.extend(batch.job_keys.into_iter().zip(batch.jobs).map(|(k, j)| to_activated(k, j)));
            }
        }
    });
    rx.await.map_err(|_| BrokerError::Unavailable(partition))?
}

/// What a failed-back job says: Zeebe's gateway's message for activated jobs it could not send.
pub const NOT_SENT_MESSAGE: &str = "Failed to send activated jobs to client";

/// Activated jobs not yet handed to a client. Dropped with jobs still in it (the client went away
/// before they were sent, or the request was cancelled part-way), it fails each back to its
/// pool with its retries unchanged and no back-off, as Zeebe's gateway does, instead of leaving
/// it locked to nobody until its time-out.
pub struct Undelivered {
    broker: Backend,
    pub jobs: Vec<pb::ActivatedJob>,
}

impl Undelivered {
    pub fn new(broker: Backend) -> Self {
        Self { broker, jobs: Vec::new() }
    }

    /// The jobs, now the caller's to deliver.
    pub fn take(&mut self) -> Vec<pb::ActivatedJob> {
        std::mem::take(&mut self.jobs)
    }
}

impl Drop for Undelivered {
    fn drop(&mut self) {
        let jobs = self.take();
        if jobs.is_empty() {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::warn!(jobs = jobs.len(), "activated jobs not sent and not failed back: no runtime; they wait for their time-out");
            return;
        };
        let broker = self.broker.clone();
        runtime.spawn(async move {
            for job in jobs {
                let Some(partition) = broker.partition_of_key(job.key) else { continue };
                let value = RecordValue::Job(JobRecord {
                    retries: job.retries,
                    error_message: NOT_SENT_MESSAGE.into(),
                    retry_backoff_ms: 0,
                    deadline_ms: -1,
                    element_instance_key: -1,
                    process_instance_key: job.key,
                    ..Default::default()
                });
                if let Err(e) = broker.submit(partition, Command::new(job.key, Intent::Fail, value)).await {
                    tracing::info!(job = job.key, error = %e, "could not fail back a job the client did not receive; it waits for its time-out");
                }
            }
        });
    }
}

/// The responses of one `ActivateJobs` call. Those the client has not taken when the stream is
/// dropped (it went away) fail their jobs back to the pool.
pub struct ActivatedResponses {
    responses: std::collections::VecDeque<pb::ActivateJobsResponse>,
    broker: Backend,
}

impl ActivatedResponses {
    pub fn new(broker: Backend, responses: Vec<pb::ActivateJobsResponse>) -> Self {
        Self { responses: responses.into(), broker }
    }
}

impl Stream for ActivatedResponses {
    type Item = Result<pb::ActivateJobsResponse, Status>;

    fn poll_next(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        Poll::Ready(self.responses.pop_front().map(Ok))
    }
}

impl Drop for ActivatedResponses {
    fn drop(&mut self) {
        let mut unsent = Undelivered::new(self.broker.clone());
        unsent.jobs.extend(self.responses.drain(..).flat_map(|r| r.jobs));
    }
}

/// Activates jobs; with none available, waits (long polling) until jobs of the type appear or
/// the request timeout passes: `requestTimeout` > 0 is that time in ms, 0 means the gateway's
/// default, < 0 means no long polling (as Zeebe).
pub async fn activate_with_long_polling(
    broker: &Backend,
    req: &pb::ActivateJobsRequest,
    default_timeout: Duration,
) -> Result<Vec<pb::ActivatedJob>, Status> {
    let timeout = match req.request_timeout {
        t if t > 0 => Duration::from_millis(t as u64),
        0 => default_timeout,
        _ => Duration::ZERO,
    };
    let deadline = Instant::now() + timeout;
    // as Zeebe 8.5.8: a negative maxJobsToActivate answers at once with no jobs, zero waits out
    // the long poll and answers with no jobs
    if req.max_jobs_to_activate < 0 {
        return Ok(vec![]);
    }
    if req.max_jobs_to_activate == 0 {
        tokio::time::sleep_until(deadline).await;
        return Ok(vec![]);
    }
    // subscribe before looking, so a job created in between is not missed
    let mut available = broker.subscribe_jobs_available();
    loop {
        let jobs = activate_once(broker, req).await?;
        if !jobs.is_empty() || timeout.is_zero() {
            return Ok(jobs);
        }
        loop {
            // notices may keep coming (other job types, other workers' jobs): the deadline holds
            if Instant::now() >= deadline {
                return Ok(vec![]);
            }
            match tokio::time::timeout_at(deadline, available.recv()).await {
                Err(_) => return Ok(vec![]),
                Ok(Ok(job_type)) if job_type == req.r#type => break,
                Ok(Ok(_)) => continue,
                Ok(Err(broadcast::error::RecvError::Lagged(_))) => break,
                Ok(Err(broadcast::error::RecvError::Closed)) => return Ok(vec![]),
            }
        }
    }
}

type JobStream = Pin<Box<dyn Stream<Item = Result<pb::ActivatedJob, Status>> + Send + 'static>>;

/// Registers a job stream with the broker; the client reads the jobs the partitions push. The
/// stream is removed when the client goes away (tonic drops the response stream).
pub fn open_job_stream(broker: &Backend, req: pb::StreamActivatedJobsRequest) -> Result<JobStream, Status> {
    if req.r#type.trim().is_empty() {
        return Err(status::invalid("Expected to stream jobs with a non-empty type, but it was empty"));
    }
    if req.timeout < 1 {
        return Err(status::invalid(format!("Expected to stream jobs with a timeout greater than zero, but it was {}", req.timeout)));
    }
    let (tx, jobs) = mpsc::channel::<PushedJob>(STREAM_BUFFER_JOBS);
    let settings = StreamSettings {
        job_type: req.r#type,
        worker: req.worker,
        timeout_ms: req.timeout,
        fetch_variables: req.fetch_variable,
        tenant_ids: req.tenant_ids,
    };
    let id = broker.job_streams().register_for_tenants(settings, tx);
    Ok(Box::pin(PushedJobs { jobs, broker: broker.clone(), id }))
}

/// The response stream of `StreamActivatedJobs`: the jobs pushed to one registered stream. When
/// the client goes away, the jobs still buffered for it return to the pool at once.
struct PushedJobs {
    jobs: mpsc::Receiver<PushedJob>,
    broker: Backend,
    id: StreamId,
}

impl Stream for PushedJobs {
    type Item = Result<pb::ActivatedJob, Status>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.jobs.poll_recv(cx).map(|job| job.map(|job| Ok(to_activated(job.key, job.record))))
    }
}

impl Drop for PushedJobs {
    fn drop(&mut self) {
        // unregistered first: a push after this finds no stream and yields the job itself, so
        // what is buffered now is all the stream will ever hold
        self.broker.job_streams().remove(self.id);
        self.jobs.close();
        let mut buffered = Vec::new();
        while let Ok(job) = self.jobs.try_recv() {
            buffered.push(job);
        }
        tracing::debug!(stream = self.id, buffered = buffered.len(), "job stream closed: its buffered jobs return to the pool");
        self.broker.yield_jobs(buffered);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message as _;

    #[test]
    fn activated_jobs_are_split_into_responses_within_the_message_limit() {
        let job = |i: i64| pb::ActivatedJob { key: i, variables: format!(r#"{{"v":"{}"}}"#, "x".repeat(1_000)), ..Default::default() };
        let responses = split_responses((0..100).map(job).collect(), 10_000);
        assert!(responses.len() > 1);
        assert!(responses.iter().all(|r| r.encoded_len() <= 10_000), "{:?}", responses.iter().map(|r| r.encoded_len()).collect::<Vec<_>>());
        let keys: Vec<i64> = responses.iter().flat_map(|r| r.jobs.iter().map(|j| j.key)).collect();
        assert_eq!(keys, (0..100).collect::<Vec<_>>(), "every job once, in order");
        // a job larger than the limit goes alone; none at all gives no response
        assert_eq!(split_responses(vec![job(1), job(2)], 10).len(), 2);
        assert!(split_responses(vec![], 10).is_empty());
    }
}
