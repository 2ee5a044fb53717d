//! Forwarded commands (crates/broker/src/forward.rs) over a real socket to a real broker: a
//! deployment and a creation submitted through the `CommandApi` come back as the committed
//! records the broker answers locally, and refusals come back as the broker's errors.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

mod common;

use common::{creation, deployment, ONE_TASK};
use waggle_broker::forward::{self, Forwarder};
use waggle_broker::{Broker, BrokerConfig, BrokerError};
use waggle_protocol::{Intent, RecordValue};

/// Serves `broker`'s partitions through the `CommandApi` on a free loopback port.
async fn serve(broker: Arc<Broker>) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    let service = forward::service(broker);
    tokio::spawn(async move {
        tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener))
            .await
            .expect("serve");
    });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forwarded_deployment_and_creation_are_answered_with_the_committed_records() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = BrokerConfig { data_dir: dir.path().to_path_buf(), partitions: 2, ..Default::default() };
    let broker = Broker::start(config, &prometheus::Registry::new()).expect("broker");
    let addr = serve(broker.clone()).await;
    let forwarder = Forwarder::default();
    let timeout = Duration::from_secs(10);

    let deployed = forwarder.submit(addr, 1, true, deployment(ONE_TASK), timeout).await.expect("the deployment is answered");
    assert_eq!((deployed.intent, deployed.rejection.is_none()), (Intent::Created, true), "{deployed:?}");
    let RecordValue::Deployment(d) = &deployed.value else { panic!("not a deployment: {deployed:?}") };
    assert_eq!(d.processes_metadata[0].bpmn_process_id, "forwarded");

    // a creation on each partition: the deployment reached both
    for partition in [1, 2] {
        let created = forwarder.submit(addr, partition, false, creation("forwarded"), timeout).await.expect("the creation is answered");
        let RecordValue::ProcessInstanceCreation(c) = &created.value else { panic!("not a creation: {created:?}") };
        assert_eq!(waggle_protocol::partition_of(c.process_instance_key), partition, "{created:?}");
    }
    // a rejection is an answer too, with its reason
    let rejected = forwarder.submit(addr, 1, false, creation("missing"), timeout).await.expect("answered");
    assert!(rejected.rejection.as_ref().is_some_and(|r| r.reason.contains("missing")), "{rejected:?}");

    // refusals come back as the broker's errors
    let refused = forwarder.submit(addr, 9, false, creation("forwarded"), timeout).await;
    assert!(matches!(refused, Err(BrokerError::NoSuchPartition(9))), "{refused:?}");
    broker.shutdown();
    let unanswered = forwarder.submit(addr, 1, false, creation("forwarded"), timeout).await;
    assert!(matches!(unanswered, Err(BrokerError::Unavailable(1))), "{unanswered:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_that_cannot_be_reached_is_not_leader_within_the_timeout() {
    let nobody: SocketAddr = "127.0.0.1:9".parse().expect("address");
    let started = std::time::Instant::now();
    let answer = Forwarder::default().submit(nobody, 1, false, creation("x"), Duration::from_secs(2)).await;
    // no connection: certainly not taken, so it may be sent to another broker
    assert!(matches!(answer, Err(BrokerError::NotLeader(1))), "{answer:?}");
    assert!(started.elapsed() < Duration::from_secs(3), "took {:?}", started.elapsed());
}

/// Many commands at once through one forwarder share its stream to the broker (coalesced into
/// batches both ways): each still gets its own answer, from the partition it was sent to.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_forwarded_commands_each_get_their_own_answer() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = BrokerConfig { data_dir: dir.path().to_path_buf(), partitions: 2, ..Default::default() };
    let broker = Broker::start(config, &prometheus::Registry::new()).expect("broker");
    let addr = serve(broker.clone()).await;
    let forwarder = Arc::new(Forwarder::default());
    let timeout = Duration::from_secs(20);
    forwarder.submit(addr, 1, true, deployment(ONE_TASK), timeout).await.expect("the deployment is answered");

    let mut calls = tokio::task::JoinSet::new();
    for i in 0..400u32 {
        let forwarder = forwarder.clone();
        // every fifth one names a process that does not exist: its answer is a rejection
        let process = if i % 5 == 0 { "missing" } else { "forwarded" };
        let partition = (i % 2 + 1) as u16;
        calls.spawn(async move { (i, partition, forwarder.submit(addr, partition, false, creation(process), timeout).await) });
    }
    let mut instances = std::collections::HashSet::new();
    while let Some(call) = calls.join_next().await {
        let (i, partition, answer) = call.expect("the call ran");
        let record = answer.unwrap_or_else(|e| panic!("command {i} not answered: {e}"));
        if i % 5 == 0 {
            assert!(record.rejection.as_ref().is_some_and(|r| r.reason.contains("missing")), "command {i}: {record:?}");
            continue;
        }
        let RecordValue::ProcessInstanceCreation(c) = &record.value else { panic!("command {i}: not a creation: {record:?}") };
        assert_eq!(waggle_protocol::partition_of(c.process_instance_key), partition, "command {i}: {record:?}");
        assert!(instances.insert(c.process_instance_key), "command {i}: an answer given twice: {record:?}");
    }
    assert_eq!(instances.len(), 320);
    broker.shutdown();
}
