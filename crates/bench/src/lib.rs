//! `waggle bench`: Zeebe's benchmark over the Zeebe gRPC protocol (`gateway_protocol.Gateway`),
//! driving Waggle.
//!
//! A starter creates process instances (fixed rate, or as fast as the server holds), a worker
//! completes their jobs (job push or polling, with a delay), and both timestamp what they see;
//! the run then reports rates, latency percentiles and the server's CPU and memory. Compare mode
//! runs the workloads on a fresh Waggle for each and then on the open-source peers (Flowable 7.2,
//! Camunda 7.24 CE, embedded on PostgreSQL by `scripts/peers.sh`). `cluster` starts a cluster of
//! brokers itself and measures it: W2 beside the single node, failover, catch-up. Method:
//! docs/bench.md.

pub mod args;
pub mod calls;
pub mod client;
pub mod cluster;
pub mod cluster_bench;
pub mod compare;
pub mod delay;
pub mod fill;
pub mod hpack;
pub mod http2;
pub mod management;
pub mod peers;
pub mod plot;
pub mod recorder;
pub mod report;
pub mod runner;
pub mod scaling_bench;
pub mod secure;
pub mod server;
pub mod soak;
pub mod starter;
pub mod stats;
pub mod timer_storm;
pub mod variable_scaling;
pub mod window;
pub mod worker;
pub mod workload;

use std::path::Path;
use std::time::Duration;

use anyhow::Context;

pub use args::{BenchArgs, BenchCommand, CompareArgs, RunArgs, SmokeArgs};
pub use report::RunReport;

/// The runtime the bench runs on: one thread. The load generator shares the machine with the
/// server it measures, so it should take as little of it as it can; on one thread it does
/// without the cross-thread wake-ups of a work-stealing runtime (W2 on 2 cores: ~85 µs of
/// client CPU per instance on two worker threads, ~70 µs on one).
pub fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread().enable_all().build()
}

/// Runs `waggle bench run` or `waggle bench compare`.
pub async fn run(args: BenchArgs) -> anyhow::Result<()> {
    match args.command {
        BenchCommand::Run(a) => run_one(a).await,
        BenchCommand::Compare(a) => compare::compare(a).await,
        BenchCommand::TimerStorm(a) => {
            let report = timer_storm::run(&a).await?;
            if let Some(path) = &a.json {
                std::fs::write(path, serde_json::to_string_pretty(&report)?).with_context(|| format!("writing {}", path.display()))?;
            }
            print!("{}", timer_storm::render(&report));
            Ok(())
        }
        BenchCommand::VariableScaling(a) => {
            let report = variable_scaling::run(&a).await?;
            print!("{}", variable_scaling::render(&report));
            Ok(())
        }
        BenchCommand::Cluster(a) => cluster_bench::run(&a).await.map(|_| ()),
        BenchCommand::Fill(a) => {
            let r = fill::run(&a).await?;
            println!(
                "filled: instances={} state_bytes={} seconds={:.1} rate={:.0} rejected={} load=\"{}\"",
                r.instances,
                r.state_bytes,
                r.elapsed.as_secs_f64(),
                r.instances as f64 / r.elapsed.as_secs_f64(),
                r.rejected,
                fill::load_average()
            );
            Ok(())
        }
        BenchCommand::Soak(a) => soak::run(&a).await.map(|_| ()),
        BenchCommand::Smoke(a) => {
            let report = smoke(&a.waggle_bin).await?;
            print!("{}", report::render_run(&report));
            Ok(())
        }
    }
}

async fn run_one(args: RunArgs) -> anyhow::Result<()> {
    let token = args.token.clone().or_else(|| std::env::var("WAGGLE_BENCH_TOKEN").ok());
    secure::set(args.tls_ca.as_deref(), token.as_deref())?;
    let w = args.overrides.apply(&args.workload)?;
    let phases = args.phases.for_workload(&w);
    let info = runner::ServerInfo { label: "server".into(), pid: args.pid, others: vec![], startup: None };
    let report = runner::run(&w, &args.target, &info, phases).await?;
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&report)?).with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(dir) = &args.plots {
        eprintln!("plot: {}", plot::write_workload(dir, &[&report])?.display());
    }
    if let Some(u) = report.unsupported {
        anyhow::bail!("{} on {}: {u}", w.name, args.target);
    }
    print!("{}", report::render_run(&report));
    Ok(())
}

/// A short end-to-end run for CI: starts `bin` (a waggle binary) fresh, runs one-task instances
/// at 20 PI/s for 3 s with a small payload, and fails unless instances were created and all of
/// them completed without errors. Asserts no timings.
pub async fn smoke(bin: &Path) -> anyhow::Result<RunReport> {
    smoke_workload(bin, "W1").await
}

/// The cluster benchmarks' smoke run of `scenario` (`w7`, `failover`, `catchup` or `scaling`, see
/// [`cluster_bench`]) on brokers of `bin`: short phases and a light load; fails unless every
/// figure was taken. Asserts no timings.
pub async fn smoke_cluster(bin: &Path, scenario: &str) -> anyhow::Result<cluster_bench::ClusterReport> {
    use clap::Parser;
    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: cluster_bench::ClusterBenchArgs,
    }
    let bin = bin.display().to_string();
    let cli = Cli::try_parse_from(["cluster", "--smoke", "--waggle-bin", bin.as_str(), "--scenarios", scenario])?;
    cluster_bench::run(&cli.args).await
}

/// [`smoke`] with the model of another workload (W1..W5) at the smoke run's rate and payload.
pub async fn smoke_workload(bin: &Path, workload_id: &str) -> anyhow::Result<RunReport> {
    let mut w = workload::named(workload_id)?;
    w.name = format!("smoke {workload_id}");
    w.description = format!("{workload_id}'s model, 54 B payload, 20 PI/s, worker delay 10 ms");
    smoke_with(bin, w).await
}

/// The smoke run with instances started by a message (`--start-by-message`, on
/// `workloads/message_start_one_task.bpmn`).
pub async fn smoke_message_start(bin: &Path) -> anyhow::Result<RunReport> {
    let mut w = workload::named("W1")?;
    w.name = "smoke message start".into();
    w.description = "one task after a message start event, 54 B payload, 20 PI/s, worker delay 10 ms".into();
    w.model = workload::MESSAGE_START_ONE_TASK.into();
    w.model_name = "message_start_one_task.bpmn".into();
    w.start_by_message = true;
    smoke_with(bin, w).await
}

/// Runs `w` with a small payload at 20 PI/s and a 10 ms worker delay on a fresh Waggle; an error
/// unless instances were measured and every one finished without errors.
async fn smoke_with(bin: &Path, mut w: workload::Workload) -> anyhow::Result<RunReport> {
    w.payload = workload::PAYLOAD_SMALL.trim().into();
    w.payload_bytes = w.payload.len();
    w.pace = workload::Pace::Rate(20.0);
    w.worker_delay = Duration::from_millis(10);
    let server = server::Server::start_waggle(bin).await?;
    let info = runner::ServerInfo { label: "Waggle".into(), pid: server.pid, others: vec![], startup: server.startup };
    let phases = runner::Phases { warmup: Duration::from_secs(1), duration: Duration::from_secs(3), drain: Duration::from_secs(10) };
    let result = runner::run(&w, &server.address, &info, phases).await;
    server.stop().await?;
    let report = result?;
    anyhow::ensure!(report.unsupported.is_none(), "{}", report.unsupported.unwrap_or_default());
    anyhow::ensure!(report.errors == 0, "errors during the smoke run: {:?}", report.first_errors);
    anyhow::ensure!(report.measured_instances > 0, "no instance was created in the window");
    anyhow::ensure!(
        report.unfinished_instances == 0,
        "{} of {} instances did not complete",
        report.unfinished_instances,
        report.measured_instances
    );
    Ok(report)
}
