//! The binary's command line: `--help`, the config file and `WAGGLE_*` variables, graceful
//! shutdown on SIGTERM, the request size limit, and metrics.

mod common;

use std::process::Command;
use std::time::Duration;

use common::{deploy_one_task, one_task_activation, one_task_creation, run_with_timeout, Node};
use tonic::Code;
use waggle_protocol::gateway::gateway_client::GatewayClient;
use waggle_protocol::gateway::*;

fn waggle() -> Command {
    Command::new(env!("CARGO_BIN_EXE_waggle"))
}

fn partitions_of(node: &Node) -> usize {
    let (code, body) = node.get("/actuator/cluster");
    assert_eq!(code, 200, "{body}");
    let cluster: serde_json::Value = serde_json::from_str(&body).expect("cluster JSON");
    cluster["brokers"][0]["partitions"].as_array().expect("partitions").len()
}

#[test]
fn help_explains_every_flag() {
    let output = run_with_timeout(waggle().arg("--help"), Duration::from_secs(20));
    assert!(output.status.success());
    let help = String::from_utf8_lossy(&output.stdout);
    for flag in [
        "--config",
        "--data-dir",
        "--partitions",
        "--host",
        "--port",
        "--management-port",
        "--max-message-size",
        "--long-polling-timeout-ms",
        "--queue-capacity",
        "--snapshot-every-entries",
        "--backpressure",
        "--backpressure-initial-limit",
        "--backpressure-max-limit",
        "--backpressure-request-timeout-ms",
        "--exporters-debug-path",
        "--query-store",
        "--query-store-history-ttl-secs",
        "--rest-port",
        "--exporter-stuck-after-ms",
        "standalone",
    ] {
        assert!(help.contains(flag), "--help does not mention {flag}:\n{help}");
    }
    assert!(help.contains("WAGGLE_PARTITIONS"), "--help does not name the environment variables:\n{help}");
}

#[test]
fn bad_flags_and_bad_config_files_are_clear_errors() {
    let output = run_with_timeout(waggle().args(["--partitions", "zero"]), Duration::from_secs(20));
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("--partitions"), "{}", String::from_utf8_lossy(&output.stderr));

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("waggle.toml");
    std::fs::write(&file, "partitons = 2\n").unwrap();
    let output = run_with_timeout(waggle().arg("--config").arg(&file), Duration::from_secs(20));
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("partitons"), "{}", String::from_utf8_lossy(&output.stderr));
}

#[test]
fn config_file_and_environment_set_the_partitions() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("waggle.toml");
    std::fs::write(&file, "partitions = 3\n").unwrap();
    let node = Node::start(&["--config", file.to_str().unwrap()]);
    assert_eq!(partitions_of(&node), 3);
    drop(node);

    let node = Node::start_with_env(&[], &[("WAGGLE_PARTITIONS", "2")]);
    assert_eq!(partitions_of(&node), 2);
}

#[test]
fn sigterm_shuts_down_gracefully_and_keeps_the_data() {
    let mut node = Node::start(&[]);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let key = runtime.block_on(async {
        let mut client = GatewayClient::connect(node.endpoint()).await.expect("connect");
        deploy_one_task(&mut client).await;
        let created = client.create_process_instance(one_task_creation()).await.expect("create");
        created.into_inner().process_instance_key
    });
    let status = node.terminate();
    assert!(status.success(), "exit status after SIGTERM: {status}; log:\n{}", node.log());
    assert!(node.log().contains("stopped"), "no orderly stop in the log:\n{}", node.log());

    node.restart();
    runtime.block_on(async {
        let mut client = GatewayClient::connect(node.endpoint()).await.expect("connect");
        let jobs = client
            .activate_jobs(one_task_activation(10))
            .await
            .expect("activate")
            .into_inner()
            .message()
            .await
            .expect("stream")
            .expect("a response");
        assert_eq!(jobs.jobs.iter().map(|j| j.process_instance_key).collect::<Vec<_>>(), vec![key]);
    });
}

#[test]
fn requests_over_the_size_limit_are_resource_exhausted() {
    let node = Node::start(&["--max-message-size", "65536"]);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let mut client = GatewayClient::connect(node.endpoint()).await.expect("connect");
        deploy_one_task(&mut client).await;
        let big = format!(r#"{{"blob": "{}"}}"#, "x".repeat(100_000));
        let err = client
            .create_process_instance(CreateProcessInstanceRequest {
                bpmn_process_id: "benchmark".into(),
                version: -1,
                variables: big,
                ..Default::default()
            })
            .await
            .expect_err("a request over the limit");
        assert_eq!(err.code(), Code::ResourceExhausted, "{err:?}");
        assert!(err.message().contains("65536"), "{err:?}");
        // the node still serves requests under the limit
        let small = format!(r#"{{"blob": "{}"}}"#, "x".repeat(10_000));
        client
            .create_process_instance(CreateProcessInstanceRequest {
                bpmn_process_id: "benchmark".into(),
                version: -1,
                variables: small,
                ..Default::default()
            })
            .await
            .expect("a request under the limit");
    });
}

/// Activates one_task.bpmn's jobs into `jobs` (long polls, again while none come) until it
/// holds `count`.
async fn activate_until(client: &mut GatewayClient<tonic::transport::Channel>, jobs: &mut Vec<ActivatedJob>, count: usize) {
    while jobs.len() < count {
        let wanted = i32::try_from(count - jobs.len()).expect("a job count");
        let mut stream = client.activate_jobs(one_task_activation(wanted)).await.expect("activate").into_inner();
        while let Some(response) = stream.message().await.expect("stream") {
            jobs.extend(response.jobs);
        }
    }
}

/// A metric's value on `/metrics` for partition 1.
fn partition_metric(metrics: &str, name: &str) -> f64 {
    let prefix = format!("{name}{{partition=\"1\"}} ");
    let line = metrics.lines().find(|l| l.starts_with(&prefix)).unwrap_or_else(|| panic!("/metrics lacks {prefix}:\n{metrics}"));
    line[prefix.len()..].parse().expect("a number")
}

#[test]
fn overload_is_resource_exhausted_and_job_completions_are_always_taken() {
    // a partition that takes one client command at a time: a burst is over its limit
    let node = Node::start(&["--backpressure-initial-limit", "1", "--backpressure-max-limit", "1"]);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (created, refused, refused_before_the_burst) = runtime.block_on(async {
        let mut client = GatewayClient::connect(node.endpoint()).await.expect("connect");
        deploy_one_task(&mut client).await;
        let create =
            |mut client: GatewayClient<tonic::transport::Channel>| async move { client.create_process_instance(one_task_creation()).await };
        // a creation awaiting its result holds no slot while its instance runs (as on Zeebe);
        // it is sent again while refused (another command may hold the one slot)
        let mut awaiting_client = client.clone();
        let awaiting = tokio::spawn(async move {
            let mut refusals = 0;
            loop {
                let request = CreateProcessInstanceWithResultRequest {
                    request: Some(one_task_creation()),
                    request_timeout: 60_000,
                    fetch_variables: vec![],
                };
                match awaiting_client.create_process_instance_with_result(request).await {
                    Err(e) if e.code() == Code::ResourceExhausted => refusals += 1,
                    result => return (result, refusals),
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        });
        // its job, once its instance runs
        let mut jobs = vec![];
        activate_until(&mut client, &mut jobs, 1).await;
        // one at a time, every creation is taken: the awaiting one holds no slot
        for _ in 0..30 {
            create(client.clone()).await.expect("a creation alone is within the limit");
        }
        activate_until(&mut client, &mut jobs, 31).await;
        // a burst of creations beside the 31 completions: creations beyond the limit are refused,
        // completions (which let work drain) never are
        let mut calls = tokio::task::JoinSet::new();
        for job in jobs {
            let mut c = client.clone();
            calls.spawn(async move {
                (true, c.complete_job(CompleteJobRequest { job_key: job.key, variables: String::new() }).await.map(drop))
            });
        }
        for _ in 0..200 {
            let creation = create(client.clone());
            calls.spawn(async move { (false, creation.await.map(drop)) });
        }
        let (mut created, mut refused) = (0, 0);
        while let Some(joined) = calls.join_next().await {
            match joined.expect("call task") {
                (true, result) => result.expect("a job completion is always taken"),
                (false, Ok(())) => created += 1,
                (false, Err(e)) => {
                    assert_eq!(e.code(), Code::ResourceExhausted, "{e:?}");
                    assert!(e.message().contains("back pressure"), "{e:?}");
                    refused += 1;
                }
            }
        }
        let (awaited, refused_before_the_burst) = awaiting.await.expect("awaiting task");
        awaited.expect("the awaited instance completed");
        // the burst may be refused whole (the completions hold the one slot while it arrives);
        // once it has been answered, the slots are back and a creation alone is taken again
        create(client.clone()).await.expect("a creation alone after the burst is within the limit");
        (created, refused, refused_before_the_burst)
    });
    assert!(refused > 0, "200 creations at once against a limit of 1: none refused ({created} taken)");
    let (code, metrics) = node.get("/metrics");
    assert_eq!(code, 200);
    assert_eq!(partition_metric(&metrics, "zeebe_dropped_request_count_total"), (refused + refused_before_the_burst) as f64);
    assert_eq!(partition_metric(&metrics, "zeebe_backpressure_requests_limit"), 1.0);
    assert_eq!(partition_metric(&metrics, "zeebe_backpressure_inflight_requests_count"), 0.0, "every answered command left");
}

#[test]
fn metrics_count_requests_records_and_lifetimes() {
    let node = Node::start(&[]);
    let (_, before) = node.get("/metrics");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let mut client = GatewayClient::connect(node.endpoint()).await.expect("connect");
        deploy_one_task(&mut client).await;
        client.create_process_instance(one_task_creation()).await.expect("create");
        let mut stream = client.activate_jobs(one_task_activation(1)).await.expect("activate").into_inner();
        let job = stream.message().await.expect("stream").expect("response").jobs.remove(0);
        client.complete_job(CompleteJobRequest { job_key: job.key, variables: String::new() }).await.expect("complete");
    });
    let (code, metrics) = node.get("/metrics");
    assert_eq!(code, 200);
    for name in [
        "zeebe_process_instance_execution_time_bucket",
        "zeebe_job_life_time_bucket",
        "waggle_gateway_requests_total",
        "waggle_gateway_request_latency_seconds_bucket",
        "waggle_processed_records_total",
    ] {
        assert!(metrics.contains(name), "/metrics lacks {name}:\n{metrics}");
    }
    assert!(metrics.lines().any(|l| l.starts_with("zeebe_process_instance_execution_time_count") && !l.ends_with(" 0")), "{metrics}");
    // the state store's memory, read from RocksDB at each scrape: the instance's rows are in
    // the write-back layer or, flushed, in RocksDB's memtable (an empty one counts its arena)
    let stored =
        |m: &str| partition_metric(m, "zeebe_rocksdb_memory_cur_size_all_mem_tables") + partition_metric(m, "waggle_state_write_back_rows");
    assert!(stored(&metrics) > stored(&before), "no more rows or memtable bytes after an instance:\n{before}\n{metrics}");
    for name in [
        "zeebe_rocksdb_memory_block_cache_usage",
        "zeebe_rocksdb_memory_block_cache_pinned_usage",
        "zeebe_rocksdb_memory_estimate_table_readers_mem",
        "zeebe_rocksdb_sst_total_sst_files_size",
        "waggle_state_write_back_rows",
    ] {
        assert!(partition_metric(&metrics, name) >= 0.0);
    }
}

/// The node raises its soft limit of open files to the hard limit (a login session's 1,024 is
/// too few for a big state: RocksDB keeps its table files open, snapshot transfers hold theirs).
#[test]
fn the_open_files_limit_is_raised_to_the_hard_limit() {
    use std::os::unix::process::CommandExt;
    let dir = tempfile::tempdir().unwrap();
    let (port, management) = (common::free_port(), common::free_port());
    let mut command = waggle();
    command
        .args(["--data-dir", &dir.path().join("data").display().to_string()])
        .args(["--host", "127.0.0.1", "--port", &port.to_string(), "--management-port", &management.to_string()])
        .args(["--rest-port", &common::free_port().to_string()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        command.pre_exec(|| {
            let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
            libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit);
            limit.rlim_cur = 256.min(limit.rlim_max);
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
            Ok(())
        });
    }
    let mut child = command.spawn().expect("spawn waggle");
    let limits = || std::fs::read_to_string(format!("/proc/{}/limits", child.id())).unwrap_or_default();
    let open_files = |text: &str| -> Option<(String, String)> {
        let line = text.lines().find(|l| l.starts_with("Max open files"))?;
        let mut fields = line["Max open files".len()..].split_whitespace();
        Some((fields.next()?.to_string(), fields.next()?.to_string()))
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let (soft, hard) = loop {
        if common::http_get(management, "/ready").is_some_and(|(code, _)| code == 200) {
            break open_files(&limits()).expect("Max open files in /proc/PID/limits");
        }
        assert!(std::time::Instant::now() < deadline, "the node did not become ready");
        std::thread::sleep(Duration::from_millis(100));
    };
    let _ = child.kill();
    let _ = child.wait();
    assert_ne!(hard, "256", "the hard limit must be above the 256 the test starts the node with");
    assert_eq!(soft, hard, "the soft limit of open files was not raised");
}
