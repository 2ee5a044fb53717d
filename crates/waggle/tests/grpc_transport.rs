//! The gateway's HTTP/2 transport (`waggle_gateway::GrpcServer`): calls it answers itself and
//! calls it hands to tonic (compressed, malformed, streaming) get the same answers, and a long
//! poll its client gives up on, or that outlives its `grpc-timeout`, takes no job; jobs pushed to
//! a job stream whose client went away return to the pool at once; a creation naming no process
//! is NOT_FOUND on either path.

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::raw_h2::{framed, raw_call, raw_call_with, unread_call};
use common::{deploy_one_task, grpc_client, Node};
use prost::Message;
use tonic::codec::CompressionEncoding;
use tonic::transport::Channel;
use tonic::Code;
use waggle_protocol::gateway::gateway_client::GatewayClient;
use waggle_protocol::gateway::*;

/// An instance of the deployed one-task model.
fn one_task_instance() -> CreateProcessInstanceRequest {
    CreateProcessInstanceRequest { bpmn_process_id: "benchmark".into(), version: -1, ..Default::default() }
}

/// A long poll for the one-task model's jobs.
fn activation(max_jobs_to_activate: i32, request_timeout: i64) -> ActivateJobsRequest {
    ActivateJobsRequest {
        r#type: "benchmark-task".into(),
        worker: "transport-test".into(),
        timeout: 60_000,
        max_jobs_to_activate,
        request_timeout,
        ..Default::default()
    }
}

/// Creates a one-task instance and activates jobs: its job is the one answered, no job being
/// left out for (or held by) a call that has gone.
async fn only_the_new_job_is_activated(client: &mut GatewayClient<Channel>) {
    let created = client.create_process_instance(one_task_instance()).await.expect("create").into_inner();
    let mut answers = client.activate_jobs(activation(10, 5_000)).await.expect("activate").into_inner();
    let jobs = answers.message().await.expect("stream").expect("an answer with the job");
    assert_eq!(jobs.jobs.iter().map(|j| j.process_instance_key).collect::<Vec<_>>(), vec![created.process_instance_key]);
}

#[test]
fn direct_and_tonic_answers_agree() {
    let node = Node::start(&[]);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let mut plain = grpc_client(&node).await;
        deploy_one_task(&mut plain).await;

        // an error answered directly (no compression) and by tonic (gzip both ways)
        let mut gzip = plain.clone().send_compressed(CompressionEncoding::Gzip).accept_compressed(CompressionEncoding::Gzip);
        let unknown = || CompleteJobRequest { job_key: 2251799813685249, variables: String::new() };
        let direct = plain.complete_job(unknown()).await.expect_err("unknown job");
        let via_tonic = gzip.complete_job(unknown()).await.expect_err("unknown job");
        assert_eq!(direct.code(), Code::NotFound, "{direct:?}");
        assert_eq!((direct.code(), direct.message()), (via_tonic.code(), via_tonic.message()));

        // a success answered directly and by tonic
        let request = || CreateProcessInstanceRequest { bpmn_process_id: "benchmark".into(), version: -1, ..Default::default() };
        let a = plain.create_process_instance(request()).await.expect("create").into_inner();
        let b = gzip.create_process_instance(request()).await.expect("create, gzip").into_inner();
        assert_eq!((a.bpmn_process_id.as_str(), a.version), ("benchmark", 1));
        assert_eq!((b.bpmn_process_id.as_str(), b.version, b.process_definition_key), ("benchmark", 1, a.process_definition_key));
        assert_ne!(a.process_instance_key, b.process_instance_key);

        // a body that is not one request message goes to tonic, which says what is wrong
        let address = node.address();
        let (status, message) = raw_call(&address, "CompleteJob", framed(&[0xff, 0xff, 0xff])).await;
        assert_eq!(status, (Code::Internal as i32).to_string(), "{message}");
        assert!(!message.is_empty());
        let mut two = framed(b"").to_vec();
        two.extend_from_slice(&framed(b""));
        let (status, _) = raw_call(&address, "CompleteJob", two.into()).await;
        assert_ne!(status, "0", "two messages in a unary request");
        let (status, message) = raw_call(&address, "CompleteJob", Bytes::from_static(&[0, 0, 0])).await;
        assert_ne!(status, "0", "a truncated frame: {message}");

        // an unknown method is UNIMPLEMENTED, as tonic answers it
        let (status, _) = raw_call(&address, "NoSuchCall", framed(b"")).await;
        assert_eq!(status, (Code::Unimplemented as i32).to_string());
    });
}

#[test]
fn a_long_poll_given_up_takes_no_job() {
    let node = Node::start(&[]);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let mut client = grpc_client(&node).await;
        deploy_one_task(&mut client).await;
        let poll = |request_timeout: i64| activation(1, request_timeout);
        // the client gives up on a 30 s long poll after 300 ms (its stream is reset)
        let mut quitter = client.clone();
        let given_up = tokio::time::timeout(Duration::from_millis(300), async move { quitter.activate_jobs(poll(30_000)).await }).await;
        assert!(given_up.is_err(), "the long poll answered early");
        // time for the server to read the reset (a loaded CI machine is slow)
        tokio::time::sleep(Duration::from_millis(1_000)).await;

        only_the_new_job_is_activated(&mut client).await;
    });
}

#[test]
fn a_long_poll_past_its_grpc_timeout_ends_and_takes_no_job() {
    let node = Node::start(&[]);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let mut client = grpc_client(&node).await;
        deploy_one_task(&mut client).await;
        // a 30 s long poll whose client allows 300 ms (`grpc-timeout`) and keeps its stream
        // open: the server ends the call itself, with tonic's answer
        let request = activation(1, 30_000).encode_to_vec();
        let address = node.address();
        let call = raw_call_with(&address, "ActivateJobs", framed(&request), &[("grpc-timeout", "300m")]);
        let (status, message) =
            tokio::time::timeout(Duration::from_secs(20), call).await.expect("the call ended at its grpc-timeout, not its 30 s");
        // CANCELLED, as tonic answers; the message as it goes on the wire (percent-encoded)
        assert_eq!((status.as_str(), message.as_str()), ("1", "Timeout%20expired"));

        only_the_new_job_is_activated(&mut client).await;
    });
}

#[test]
fn a_job_stream_whose_client_went_away_takes_no_job() {
    let node = Node::start(&[]);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let mut client = grpc_client(&node).await;
        deploy_one_task(&mut client).await;
        let stream_request = StreamActivatedJobsRequest {
            r#type: "benchmark-task".into(),
            worker: "transport-test".into(),
            timeout: 60_000,
            ..Default::default()
        };

        // a worker on its own connection streams jobs and gets one pushed
        let mut gone = grpc_client(&node).await;
        let mut jobs = gone.stream_activated_jobs(stream_request.clone()).await.expect("stream").into_inner();
        let first = client.create_process_instance(one_task_instance()).await.expect("create").into_inner();
        let pushed =
            tokio::time::timeout(Duration::from_secs(5), jobs.message()).await.expect("a pushed job").expect("stream").expect("job");
        assert_eq!(pushed.process_instance_key, first.process_instance_key);

        // its connection closes: the server's side of the stream ends with it
        drop(jobs);
        drop(gone);
        tokio::time::sleep(Duration::from_millis(1_000)).await;

        only_the_new_job_is_activated(&mut client).await;
    });
}

#[test]
fn a_creation_naming_no_process_is_not_found() {
    let node = Node::start(&[]);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let mut plain = grpc_client(&node).await;
        deploy_one_task(&mut plain).await;
        let mut gzip = plain.clone().send_compressed(CompressionEncoding::Gzip).accept_compressed(CompressionEncoding::Gzip);
        // neither a process id nor a key: Zeebe 8.5.8 looks up the key 0 (gRPC's default)
        let neither = CreateProcessInstanceRequest::default;
        let not_found = "Command 'CREATE' rejected with code 'NOT_FOUND': Expected to find process definition with key '0', but none found";
        for (path, status) in [
            ("answered directly", plain.create_process_instance(neither()).await.expect_err("no process")),
            ("answered by tonic", gzip.create_process_instance(neither()).await.expect_err("no process")),
            (
                "with result",
                plain
                    .create_process_instance_with_result(CreateProcessInstanceWithResultRequest {
                        request: Some(neither()),
                        ..Default::default()
                    })
                    .await
                    .expect_err("no process"),
            ),
        ] {
            assert_eq!((status.code(), status.message()), (Code::NotFound, not_found), "{path}");
        }
        // a negative key with no process id is the one request Zeebe's engine calls invalid
        let negative = CreateProcessInstanceRequest { process_definition_key: -1, ..Default::default() };
        let status = plain.create_process_instance(negative).await.expect_err("negative key");
        assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
        assert!(status.message().ends_with("Expected at least a bpmnProcessId or a key greater than -1, but none given"), "{status:?}");
    });
}

#[test]
fn jobs_pushed_to_a_stream_whose_client_went_away_return_at_once() {
    let node = Node::start(&[]);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let mut client = grpc_client(&node).await;
        deploy_one_task(&mut client).await;

        // a worker streams jobs for a minute each but reads none: its window is 0, so every job
        // pushed to it waits on the server's side
        let stream_request =
            StreamActivatedJobsRequest { r#type: "benchmark-task".into(), worker: "stuck".into(), timeout: 60_000, ..Default::default() };
        let (answer, send, connection) = unread_call(&node.address(), "StreamActivatedJobs", &stream_request.encode_to_vec()).await;

        const JOBS: usize = 20;
        let mut created = Vec::new();
        for _ in 0..JOBS {
            created.push(client.create_process_instance(one_task_instance()).await.expect("create").into_inner().process_instance_key);
        }
        // every job went to the stream: none is left to activate
        let mut none = client.activate_jobs(activation(100, -1)).await.expect("activate").into_inner();
        assert!(none.message().await.expect("stream").is_none(), "a job was not pushed to the stream");

        // the worker goes away: its jobs are activatable again at once, not after their minute
        drop(answer);
        drop(send);
        connection.abort();
        let mut activated = Vec::new();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while activated.len() < JOBS && tokio::time::Instant::now() < deadline {
            let mut answers = client.activate_jobs(activation(100, 1_000)).await.expect("activate").into_inner();
            while let Some(jobs) = answers.message().await.expect("stream") {
                activated.extend(jobs.jobs.iter().map(|j| j.process_instance_key));
            }
        }
        activated.sort_unstable();
        created.sort_unstable();
        assert_eq!(activated, created, "the jobs pushed to the gone worker are activatable again");
    });
}

/// Zeebe's gateway fails back, with their retries unchanged, the activated jobs it could not send
/// to the client ("Failed to send activated jobs to client"); so does Waggle's, instead of leaving
/// them locked to nobody until their time-out (issue 32: a job lost after clients come and go).
#[test]
fn activated_jobs_the_client_never_received_return_at_once() {
    let node = Node::start(&[]);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let mut client = grpc_client(&node).await;
        deploy_one_task(&mut client).await;
        const JOBS: usize = 20;
        let mut created = Vec::new();
        for _ in 0..JOBS {
            created.push(client.create_process_instance(one_task_instance()).await.expect("create").into_inner().process_instance_key);
        }

        // a worker activates them for a minute, but its window is 0: the answer cannot leave the
        // server, and the worker goes away before reading any of it
        let (answer, send, connection) = unread_call(&node.address(), "ActivateJobs", &activation(100, -1).encode_to_vec()).await;
        // the headers come once the activation has answered: every job is the stuck worker's
        let mut none = client.activate_jobs(activation(100, -1)).await.expect("activate").into_inner();
        assert!(none.message().await.expect("stream").is_none(), "a job was not activated for the stuck worker");
        drop(answer);
        drop(send);
        connection.abort();

        let mut activated = Vec::new();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while activated.len() < JOBS && tokio::time::Instant::now() < deadline {
            let mut answers = client.activate_jobs(activation(100, 1_000)).await.expect("activate").into_inner();
            while let Some(jobs) = answers.message().await.expect("stream") {
                for job in &jobs.jobs {
                    assert_eq!(job.retries, 3, "a job failed back keeps its retries");
                }
                activated.extend(jobs.jobs.iter().map(|j| j.process_instance_key));
            }
        }
        activated.sort_unstable();
        created.sort_unstable();
        assert_eq!(activated, created, "the jobs the gone worker never received are activatable again");
    });
}
