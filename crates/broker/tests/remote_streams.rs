//! Job push across brokers (crates/broker/src/remote_streams.rs), between two real brokers over
//! loopback: a stream opened at one broker gets the jobs the other's partition activates; a job
//! its client cannot take goes back to the other broker's pool at once; when the session ends,
//! the other broker stops pushing to it.

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use common::{creation, deployment, ONE_TASK};
use tokio::sync::mpsc;
use waggle_broker::remote_streams::{JobStreamsService, StreamAnnouncer};
use waggle_broker::{Broker, BrokerConfig, PushedJob};
use waggle_engine::Command;
use waggle_protocol::value::JobBatchRecord;
use waggle_protocol::{Intent, RecordValue};

struct Started {
    broker: Arc<Broker>,
    _dir: tempfile::TempDir,
}

fn broker() -> Started {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = BrokerConfig { data_dir: dir.path().to_path_buf(), partitions: 1, ..Default::default() };
    Started { broker: Broker::start(config, &prometheus::Registry::new()).expect("broker"), _dir: dir }
}

/// Serves `broker`'s job streams service on a free loopback port.
async fn serve(broker: &Arc<Broker>) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    let yielding = broker.clone();
    let service = JobStreamsService::new(
        broker.job_streams().clone(),
        Arc::new(move |jobs: Vec<PushedJob>| yielding.yield_jobs(jobs)),
        broker.jobs_available_sender(),
    );
    tokio::spawn(async move {
        tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener))
            .await
            .expect("serve");
    });
    addr
}

/// Starts `gateway_side`'s session with `partition_side`.
async fn announce(gateway_side: &Arc<Broker>, partition_side: &Arc<Broker>) -> StreamAnnouncer {
    let peers = vec![serve(partition_side).await];
    StreamAnnouncer::start(
        &tokio::runtime::Handle::current(),
        gateway_side.job_streams().clone(),
        peers,
        gateway_side.jobs_available_sender(),
        None,
    )
}

/// Starts an instance of `forwarded` on `broker` and returns its key.
async fn start_instance(broker: &Broker) -> i64 {
    let created = broker.submit(1, creation("forwarded")).await.expect("created");
    match created.value {
        RecordValue::ProcessInstanceCreation(c) => c.process_instance_key,
        other => panic!("not a creation: {other:?}"),
    }
}

/// Activates (polls) every activatable job of type `t` on `broker`'s partition; their instances.
async fn poll(broker: &Broker) -> Vec<i64> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let batch = JobBatchRecord {
            job_type: "t".into(),
            worker: "poller".into(),
            timeout_ms: 60_000,
            max_jobs_to_activate: 10,
            ..Default::default()
        };
        let answer = broker.submit(1, Command::new(-1, Intent::Activate, RecordValue::JobBatch(batch))).await.expect("activation");
        let RecordValue::JobBatch(b) = answer.value else { panic!("not a job batch: {answer:?}") };
        if !b.jobs.is_empty() || tokio::time::Instant::now() > deadline {
            return b.jobs.iter().map(|j| j.process_instance_key).collect();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn next_job(jobs: &mut mpsc::Receiver<PushedJob>, what: &str) -> PushedJob {
    tokio::time::timeout(Duration::from_secs(10), jobs.recv())
        .await
        .unwrap_or_else(|_| panic!("no job {what}"))
        .expect("the stream is open")
}

/// Waits until `broker` has registered `n` streams (the announcement travels asynchronously).
async fn streams_registered(broker: &Broker, n: usize) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while broker.job_streams().len() != n {
        assert!(tokio::time::Instant::now() < deadline, "{} streams registered, not {n}", broker.job_streams().len());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_opened_at_one_broker_gets_the_other_brokers_jobs() {
    let (gateway_side, partition_side) = (broker(), broker());
    partition_side.broker.deploy(deployment(ONE_TASK)).await.expect("deployed");
    let announcer = announce(&gateway_side.broker, &partition_side.broker).await;

    // a client's stream at the gateway side, with room for one job
    let (sender, mut jobs) = mpsc::channel(1);
    let _stream = gateway_side.broker.job_streams().register("t".into(), "remote-worker".into(), 60_000, vec![], sender);
    streams_registered(&partition_side.broker, 1).await;

    let instance = start_instance(&partition_side.broker).await;
    let job = next_job(&mut jobs, "pushed across brokers").await;
    assert_eq!((job.record.process_instance_key, job.record.worker.as_ref()), (instance, "remote-worker"));

    // the client's stream takes one more job; the one after that finds it full, goes back to the
    // other broker's pool at once (not at its time-out), and a poll there gets it
    let second = start_instance(&partition_side.broker).await;
    let third = start_instance(&partition_side.broker).await;
    let polled = poll(&partition_side.broker).await;
    assert_eq!(polled, vec![third], "the job the full stream could not take");
    let buffered = next_job(&mut jobs, "buffered in the client's stream").await;
    assert_eq!(buffered.record.process_instance_key, second);
    assert_eq!(gateway_side.broker.job_streams().len(), 1, "the client's stream stays open");
    drop(announcer);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn when_the_session_ends_the_other_broker_forgets_its_streams() {
    let (gateway_side, partition_side) = (broker(), broker());
    let announcer = announce(&gateway_side.broker, &partition_side.broker).await;
    let (sender, _jobs) = mpsc::channel(8);
    gateway_side.broker.job_streams().register("t".into(), "remote-worker".into(), 60_000, vec![], sender);
    streams_registered(&partition_side.broker, 1).await;
    drop(announcer);
    streams_registered(&partition_side.broker, 0).await;
}

/// A long poll waiting at one broker wakes for jobs of a partition led by another: the other
/// broker's "jobs available" notice comes through the session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_available_at_the_other_broker_wake_this_brokers_long_polls() {
    let (gateway_side, partition_side) = (broker(), broker());
    partition_side.broker.deploy(deployment(ONE_TASK)).await.expect("deployed");
    let mut woken = gateway_side.broker.subscribe_jobs_available();
    let _announcer = announce(&gateway_side.broker, &partition_side.broker).await;
    // no stream anywhere: the new job waits for a poll, and the notice goes out
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        start_instance(&partition_side.broker).await;
        match tokio::time::timeout(Duration::from_millis(500), woken.recv()).await {
            Ok(Ok(job_type)) => {
                assert_eq!(job_type, "t");
                break;
            }
            Ok(Err(e)) => panic!("the notices stopped: {e}"),
            // the session may not be up yet for the first instance
            Err(_) => assert!(tokio::time::Instant::now() < deadline, "no notice reached the other broker"),
        }
    }
}
