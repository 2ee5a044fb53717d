//! `waggle bench` smoke run against the real binary: instances are created and every one
//! completes (no timing assertions; figures come from `waggle bench` runs, not tests).

use std::path::Path;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_smoke_run_completes_every_instance() {
    let report = waggle_bench::smoke(Path::new(env!("CARGO_BIN_EXE_waggle"))).await.expect("smoke run");
    println!("{report:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_smoke_run_with_timers_completes_every_instance() {
    let report = waggle_bench::smoke_workload(Path::new(env!("CARGO_BIN_EXE_waggle")), "W4").await.expect("smoke run with a 1 s timer");
    println!("{report:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_smoke_run_with_message_correlation_completes_every_instance() {
    let report =
        waggle_bench::smoke_workload(Path::new(env!("CARGO_BIN_EXE_waggle")), "W5").await.expect("smoke run with message correlation");
    println!("{report:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timer_storm_smoke_run_fires_every_timer() {
    let server = waggle_bench::server::Server::start_waggle(Path::new(env!("CARGO_BIN_EXE_waggle"))).await.expect("start waggle");
    let args = waggle_bench::timer_storm::TimerStormArgs {
        target: server.address.clone(),
        timers: 500,
        lead: std::time::Duration::from_secs(4),
        probe_rate: 20.0,
        fired_batch: 100,
        json: None,
    };
    let report = waggle_bench::timer_storm::run(&args).await;
    server.stop().await.expect("stop waggle");
    let report = report.expect("timer storm");
    println!("{}", waggle_bench::timer_storm::render(&report));
    assert_eq!(report.created, 500);
    assert_eq!(report.fired, 500, "every timer fires once");
    assert!(report.complete_before.is_some() || report.complete_during.is_some(), "the probe completed jobs");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_smoke_run_started_by_messages_completes_every_instance() {
    let report = waggle_bench::smoke_message_start(Path::new(env!("CARGO_BIN_EXE_waggle"))).await.expect("smoke run started by messages");
    println!("{report:?}");
    assert!(report.created_per_s > 0.0, "the start messages count as creations");
}
