//! `waggle bench` smoke run against the real binary: instances are created and every one
//! completes (no timing assertions; figures come from `waggle bench` runs, not tests).

use std::path::Path;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_smoke_run_completes_every_instance() {
    let report = waggle_bench::smoke(Path::new(env!("CARGO_BIN_EXE_waggle"))).await.expect("smoke run");
    println!("{report:?}");
}

/// `--plots`: a real run's report drawn as `<workload>.svg` (an SVG document with both charts,
/// the run's seconds in it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_is_plotted_as_svg() {
    let report = waggle_bench::smoke(Path::new(env!("CARGO_BIN_EXE_waggle"))).await.expect("smoke run");
    assert!(!report.series.is_empty(), "the run has per-second figures to plot");
    let dir = tempfile::tempdir().unwrap();
    let path = waggle_bench::plot::write_workload(&dir.path().join("plots"), &[&report]).expect("plot");
    assert_eq!(path.file_name().unwrap().to_str().unwrap(), format!("{}.svg", report.workload.name));
    let svg = std::fs::read_to_string(&path).unwrap();
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"), "not an SVG document: {}", &svg[..80.min(svg.len())]);
    for text in ["completed per second", "execution time (ms)", "PI/s", "p99"] {
        assert!(svg.contains(text), "{text} missing from {}", path.display());
    }
    assert!(svg.contains("<polyline"), "the lines are drawn");
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

/// `waggle bench cluster --smoke`, W7: W2 on the single node and on 3 brokers × 3 partitions ×
/// RF 3 (a light load, short phases); checks that the figures were taken, not their values.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_bench_w7_smoke_run_takes_every_figure() {
    let report = waggle_bench::smoke_cluster(Path::new(env!("CARGO_BIN_EXE_waggle")), "w7").await.expect("W7 smoke run");
    let w7 = report.w7.expect("W7's figures");
    assert!(w7.cluster.completed_per_s > 0.0 && w7.single.completed_per_s > 0.0);
    assert_eq!(w7.broker_peak_rss_mb.len(), 3, "every broker's memory");
}

/// `waggle bench cluster --smoke`, failover: two leaders killed with `kill -9`, each time a command
/// on their partition succeeds again through another broker and the killed broker catches up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_bench_failover_smoke_run_takes_every_figure() {
    let report = waggle_bench::smoke_cluster(Path::new(env!("CARGO_BIN_EXE_waggle")), "failover").await.expect("failover smoke run");
    let failover = report.failover.expect("failover figures");
    assert_eq!(failover.kills.len(), 2);
    assert!(failover.kills.iter().all(|k| k.ms.is_some() && k.victim != k.via));
}

/// `waggle bench cluster --smoke`, catch-up: a broker stopped for 3 s under load rejoins and
/// catches up on every partition.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_bench_catchup_smoke_run_takes_every_figure() {
    let report = waggle_bench::smoke_cluster(Path::new(env!("CARGO_BIN_EXE_waggle")), "catchup").await.expect("catch-up smoke run");
    let catchup = report.catchup.expect("catch-up figures");
    assert!(catchup.caught_up_s.is_some() && catchup.ready_s.is_some());
    assert_ne!(catchup.stopped, 0, "the client's gateway stays up");
}

/// `waggle bench cluster --smoke`, scaling: 4 brokers started, scaled to 3, then 3 -> 4 -> 3 without
/// load and again under a light W2 load; every change completes and broker 3 held replicas.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_bench_scaling_smoke_run_takes_every_figure() {
    let report = waggle_bench::smoke_cluster(Path::new(env!("CARGO_BIN_EXE_waggle")), "scaling").await.expect("scaling smoke run");
    let scaling = report.scaling.expect("scaling figures");
    assert_eq!(scaling.idle.len(), 3);
    assert_eq!(scaling.loaded.iter().map(|c| (c.from, c.to)).collect::<Vec<_>>(), [(3, 4), (4, 3)]);
    assert!(
        scaling.load.errors == 0 || scaling.load.first_errors.iter().all(|e| e.to_ascii_lowercase().contains("unavailable")),
        "{:?}",
        scaling.load.first_errors
    );
}
