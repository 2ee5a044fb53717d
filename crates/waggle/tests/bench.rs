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
