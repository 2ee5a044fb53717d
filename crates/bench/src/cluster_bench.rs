//! `waggle bench cluster`: the replicated cluster's benchmarks (issue 25), on brokers the bench
//! starts itself ([`crate::cluster`]).
//!
//! - **W7**: W2 on 3 brokers × 3 partitions × replication factor 3, beside W2 on the single node
//!   in the same run. The client talks to broker 0's embedded gateway only, as Zeebe's benchmark
//!   talks to one gateway; that gateway routes each command to its partition's leader.
//! - **Failover**: `kill -9` of a partition's leader until the first successful command on that
//!   partition, a `PublishMessage` whose correlation key hashes to it, sent through a surviving
//!   broker's gateway; the killed broker is restarted and caught up before the next kill.
//! - **Catch-up**: under W2, one broker is stopped for a while, then restarted; the time until it
//!   is a healthy, caught-up replica of every partition again.
//!
//! - **Scaling**: the brokers scaled up and back down, without load and under W2
//!   ([`crate::scaling_bench`]).
//!
//! Figures only: nothing here asserts a time. Method: docs/bench.md.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use serde::Serialize;
use tokio::task::JoinSet;
use waggle_protocol::gateway::PublishMessageRequest;
use waggle_protocol::keys::partition_of_correlation_key;

use crate::args::{Overrides, PhaseArgs};
use crate::client;
use crate::cluster::{Cluster, Shape};
use crate::report::{self, RunReport};
use crate::runner::{self, Phases, ServerInfo};
use crate::scaling_bench::{self, ScalingReport, ScalingSettings};
use crate::server::Server;
use crate::stats::{Samples, Summary};
use crate::workload::{parse_duration, Pace, Workload};

/// The scenarios, in the order they run.
pub const SCENARIOS: [&str; 4] = ["w7", "failover", "catchup", "scaling"];

/// `waggle bench cluster`.
#[derive(Debug, Args)]
pub struct ClusterBenchArgs {
    /// The waggle binary: its `waggle broker` processes form the cluster, and it is W7's single
    /// node.
    #[arg(long)]
    pub waggle_bin: PathBuf,
    /// What to run, comma-separated: w7, failover, catchup, scaling (not run unless named).
    #[arg(long, default_value = "w7,failover,catchup", value_delimiter = ',')]
    pub scenarios: Vec<String>,
    /// Brokers in the cluster.
    #[arg(long, default_value_t = 3)]
    pub brokers: usize,
    /// Partitions of the cluster.
    #[arg(long, default_value_t = 3)]
    pub partitions: u16,
    /// Brokers holding each partition.
    #[arg(long, default_value_t = 3)]
    pub replication_factor: usize,
    /// W7's phases (each of its two runs); --warmup defaults to W2's 30 s.
    #[command(flatten)]
    pub phases: PhaseArgs,
    /// Changes to W2, the load of W7 and of the catch-up.
    #[command(flatten)]
    pub overrides: Overrides,
    /// Failover: leaders killed, one after another.
    #[arg(long, default_value_t = 10)]
    pub kills: usize,
    /// Catch-up: how long the broker stays stopped.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub stop_for: Duration,
    /// Catch-up: W2 load before the broker is stopped.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub catchup_lead: Duration,
    /// Catch-up: W2 load after the broker is restarted (the catch-up is timed on beyond it).
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub load_after_restart: Duration,
    /// Catch-up and failover: longest wait for a restarted broker to catch up.
    #[arg(long, default_value = "5m", value_parser = parse_duration)]
    pub catchup_limit: Duration,
    /// Short phases for a check that everything runs (2 kills, 3 s stop, a light load); fails
    /// unless every figure was taken.
    #[arg(long)]
    pub smoke: bool,
    /// Scaling: the brokers the cluster is scaled to from --brokers (and back).
    #[arg(long, default_value_t = 6)]
    pub scale_to: usize,
    /// Scaling: the cluster's partitions (Zeebe's documented example has 6).
    #[arg(long, default_value_t = 6)]
    pub scale_partitions: u16,
    /// Scaling: W2 load before the scale-up, between the two changes and after the scale-down.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub scale_hold: Duration,
    /// Scaling: longest wait for one change to complete (the load's window allows two).
    #[arg(long, default_value = "3m", value_parser = parse_duration)]
    pub scale_limit: Duration,
    /// Scaling: write the plot of W2's rate and the brokers in use (`scaling.svg`) into this folder.
    #[arg(long)]
    pub plots: Option<PathBuf>,
    /// Also write the report as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// W7's two runs.
#[derive(Debug, Clone, Serialize)]
pub struct W7Report {
    pub single: RunReport,
    pub cluster: RunReport,
    /// Spawn of the brokers → every partition has a leader.
    pub cluster_startup_s: f64,
    /// Each broker's peak RSS (VmHWM) at the end of the run, by node id.
    pub broker_peak_rss_mb: Vec<(usize, f64)>,
    /// Completed PI/s of the cluster over the single node's.
    pub rate_ratio: Option<f64>,
    /// Execution p99 of the cluster over the single node's.
    pub p99_ratio: Option<f64>,
}

/// One kill of the failover scenario.
#[derive(Debug, Clone, Serialize)]
pub struct Kill {
    pub partition: u16,
    /// The broker killed (the partition's leader) and the one whose gateway was probed.
    pub victim: usize,
    pub via: usize,
    /// `kill -9` → the first successful command on the partition; `None` if none within the limit.
    pub ms: Option<f64>,
    /// Commands sent until then (one every [`PROBE_EVERY`]).
    pub attempts: usize,
    /// The partition's leader after the failover.
    pub new_leader: Option<usize>,
}

#[derive(Debug, Clone, Serialize)]
pub struct FailoverReport {
    pub kills: Vec<Kill>,
    /// Over the kills that recovered.
    pub summary: Option<Summary>,
    /// Kills after which no command succeeded within the limit.
    pub unrecovered: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct CatchupReport {
    /// The broker stopped (SIGTERM) and the partitions it led then.
    pub stopped: usize,
    pub led: Vec<u16>,
    pub stopped_for_s: f64,
    /// Log entries its partitions' leaders had applied beyond its own, summed, at its restart.
    pub entries_behind: u64,
    /// Restart → its `/health` answers UP.
    pub ready_s: Option<f64>,
    /// Restart → a healthy replica caught up on every partition; `None` if not within the limit.
    pub caught_up_s: Option<f64>,
    /// Whether it caught up while the load still ran.
    pub under_load: Option<bool>,
    /// The W2 load that ran meanwhile (its window spans the stop).
    pub load: RunReport,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct ClusterReport {
    pub shape: String,
    pub w7: Option<W7Report>,
    pub failover: Option<FailoverReport>,
    pub catchup: Option<CatchupReport>,
    pub scaling: Option<ScalingReport>,
}

/// How often the failover probe sends a command while none succeeded.
pub const PROBE_EVERY: Duration = Duration::from_millis(20);
/// Longest a single probe command may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest wait for the first successful command after a kill.
const FAILOVER_LIMIT: Duration = Duration::from_secs(60);
/// Pause after a restarted broker caught up, before the next kill.
const SETTLE: Duration = Duration::from_secs(1);

/// Runs the scenarios of `args`, prints each as it ends, and returns the report.
pub async fn run(args: &ClusterBenchArgs) -> anyhow::Result<ClusterReport> {
    let settings = Settings::from_args(args)?;
    let mut report = ClusterReport { shape: settings.shape_text(), ..Default::default() };
    for s in &args.scenarios {
        match s.trim().to_ascii_lowercase().as_str() {
            "w7" => {
                let r = w7(&settings).await.context("W7")?;
                print!("{}", render_w7(&r));
                report.w7 = Some(r);
            }
            "failover" => {
                let r = failover(&settings).await.context("failover")?;
                print!("{}", render_failover(&r));
                report.failover = Some(r);
            }
            "catchup" | "catch-up" => {
                let r = catchup(&settings).await.context("catch-up")?;
                print!("{}", render_catchup(&r));
                report.catchup = Some(r);
            }
            "scaling" => {
                let r = scaling_bench::run(&settings.scaling(args)).await.context("scaling")?;
                print!("{}", scaling_bench::render(&r));
                report.scaling = Some(r);
            }
            other => anyhow::bail!("unknown scenario {other:?}: expected {}", SCENARIOS.join(", ")),
        }
    }
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&report)?).with_context(|| format!("writing {}", path.display()))?;
    }
    if args.smoke {
        check_smoke(&report)?;
    }
    Ok(report)
}

/// Everything a scenario needs, resolved from the arguments.
#[derive(Debug, Clone)]
pub struct Settings {
    pub bin: PathBuf,
    pub shape: Shape,
    /// W2 with the overrides.
    pub w2: Workload,
    pub phases: Phases,
    pub kills: usize,
    pub stop_for: Duration,
    pub catchup_lead: Duration,
    pub load_after_restart: Duration,
    pub catchup_limit: Duration,
}

impl Settings {
    pub fn from_args(a: &ClusterBenchArgs) -> anyhow::Result<Settings> {
        anyhow::ensure!(a.brokers >= 2, "--brokers: a cluster has at least 2 brokers");
        anyhow::ensure!((1..=a.brokers).contains(&a.replication_factor), "--replication-factor must be between 1 and --brokers");
        anyhow::ensure!(a.partitions >= 1, "--partitions must be at least 1");
        let mut w2 = a.overrides.apply("W2")?;
        let mut s = Settings {
            bin: a.waggle_bin.clone(),
            shape: Shape { brokers: a.brokers, partitions: a.partitions, replication_factor: a.replication_factor },
            phases: a.phases.for_workload(&w2),
            w2: w2.clone(),
            kills: a.kills,
            stop_for: a.stop_for,
            catchup_lead: a.catchup_lead,
            load_after_restart: a.load_after_restart,
            catchup_limit: a.catchup_limit,
        };
        if a.smoke {
            // a light load: the smoke run checks that every figure is taken, on any build
            w2.pace = Pace::Max { outstanding: 32 };
            w2.worker_capacity = 32;
            s.w2 = w2;
            s.phases = Phases { warmup: Duration::from_secs(1), duration: Duration::from_secs(3), drain: Duration::from_secs(10) };
            s.kills = 2;
            s.stop_for = Duration::from_secs(3);
            s.catchup_lead = Duration::from_secs(2);
            s.load_after_restart = Duration::from_secs(2);
            s.catchup_limit = Duration::from_secs(120);
        }
        Ok(s)
    }

    /// The scaling scenario's settings: a light load and short stretches for the smoke run.
    fn scaling(&self, a: &ClusterBenchArgs) -> ScalingSettings {
        let mut s = ScalingSettings {
            bin: self.bin.clone(),
            from: a.brokers,
            to: a.scale_to,
            partitions: a.scale_partitions,
            replication_factor: a.replication_factor,
            w2: self.w2.clone(),
            warmup: self.phases.warmup,
            lead: a.scale_hold,
            hold: a.scale_hold,
            tail: a.scale_hold,
            limit: a.scale_limit,
            plots: a.plots.clone(),
        };
        if a.smoke {
            s.to = s.from + 1;
            s.partitions = 3;
            (s.lead, s.hold, s.tail) = (Duration::from_secs(2), Duration::from_secs(2), Duration::from_secs(2));
            s.limit = Duration::from_secs(120);
        }
        s
    }

    fn shape_text(&self) -> String {
        let s = self.shape;
        format!("{} brokers × {} partitions × replication factor {}", s.brokers, s.partitions, s.replication_factor)
    }
}

/// W2 on the single node, then on the cluster through broker 0's gateway.
pub async fn w7(s: &Settings) -> anyhow::Result<W7Report> {
    let server = Server::start_waggle(&s.bin).await?;
    let info = ServerInfo { label: "single node (1 partition)".into(), pid: server.pid, others: vec![], startup: server.startup };
    let single = runner::run(&s.w2, &server.address, &info, s.phases).await;
    server.stop().await?;
    let single = single?;
    eprint!("{}", report::render_run(&single));

    let spawned = Instant::now();
    let cluster = Cluster::start(&s.bin, s.shape).await?;
    let startup = spawned.elapsed();
    let pids = cluster.pids();
    let info = ServerInfo {
        label: format!("cluster ({}), client on broker 0's gateway", s.shape_text()),
        pid: pids.first().copied(),
        others: pids.iter().skip(1).copied().collect(),
        startup: Some(startup),
    };
    let gateway = cluster.brokers[0].gateway.clone();
    let result = runner::run(&s.w2, &gateway, &info, s.phases).await;
    let broker_peak_rss_mb = cluster.samples().into_iter().map(|(n, p)| (n, p.peak_rss_bytes as f64 / (1024.0 * 1024.0))).collect();
    cluster.stop().await?;
    let clustered = result?;
    eprint!("{}", report::render_run(&clustered));
    let rate_ratio = (single.completed_per_s > 0.0).then(|| clustered.completed_per_s / single.completed_per_s);
    let p99_ratio = match (&single.execution, &clustered.execution) {
        (Some(a), Some(b)) if a.p99_ms > 0.0 => Some(b.p99_ms / a.p99_ms),
        _ => None,
    };
    Ok(W7Report { single, cluster: clustered, cluster_startup_s: startup.as_secs_f64(), broker_peak_rss_mb, rate_ratio, p99_ratio })
}

/// A correlation key that hashes to `partition` (as the broker hashes it) among `partitions`.
pub fn key_for_partition(partition: u16, partitions: u16, salt: usize) -> String {
    (0u64..)
        .map(|n| format!("bench-failover-{salt}-{n}"))
        .find(|k| partition_of_correlation_key(k, partitions as u32) == partition)
        .expect("some key hashes to every partition")
}

fn probe_request(key: &str) -> PublishMessageRequest {
    PublishMessageRequest { name: "bench-failover".into(), correlation_key: key.into(), time_to_live: 0, ..Default::default() }
}

/// From now, a command every [`PROBE_EVERY`] (each waiting for its own answer) until one
/// succeeds: the time to that answer and the commands sent, or `None` after `limit`.
async fn first_success(client: &client::Client, key: &str, limit: Duration) -> (Option<Duration>, usize) {
    let start = Instant::now();
    let mut probes = JoinSet::new();
    let mut tick = tokio::time::interval(PROBE_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut sent = 0;
    loop {
        tokio::select! {
            _ = tick.tick() => {
                if start.elapsed() > limit {
                    return (None, sent);
                }
                sent += 1;
                let (mut c, request) = (client.clone(), probe_request(key));
                probes.spawn(async move { tokio::time::timeout(PROBE_TIMEOUT, c.publish_message(request)).await });
            }
            Some(done) = probes.join_next() => {
                if let Ok(Ok(Ok(_))) = done {
                    return (Some(start.elapsed()), sent);
                }
            }
        }
    }
}

/// Waits until broker `node` is a caught-up replica of every partition, and every partition has
/// a leader; the time it took, or `None` after `limit`.
async fn wait_caught_up(cluster: &Cluster, node: usize, limit: Duration) -> Option<Duration> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if cluster.caught_up(node).await && cluster.leaders(None).await.is_some() {
            return Some(start.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    None
}

/// `kill -9` of a partition's leader, `s.kills` times, each partition in turn.
pub async fn failover(s: &Settings) -> anyhow::Result<FailoverReport> {
    let mut cluster = Cluster::start(&s.bin, s.shape).await?;
    let result = kill_leaders(&mut cluster, s).await;
    cluster.stop().await?;
    let kills = result?;
    let mut samples = Samples::new();
    kills.iter().filter_map(|k| k.ms).for_each(|ms| samples.push_ms(ms));
    let unrecovered = kills.iter().filter(|k| k.ms.is_none()).count();
    Ok(FailoverReport { summary: samples.summary(), unrecovered, kills })
}

async fn kill_leaders(cluster: &mut Cluster, s: &Settings) -> anyhow::Result<Vec<Kill>> {
    let n = s.shape.brokers;
    let mut kills = vec![];
    for k in 0..s.kills {
        let leaders = cluster.wait_leaders(Duration::from_secs(60), None).await?;
        let partition = (k % s.shape.partitions as usize) as u16 + 1;
        let victim = leaders[partition as usize - 1];
        let via = (victim + 1) % n;
        let key = key_for_partition(partition, s.shape.partitions, k);
        let client = client::connect(&cluster.brokers[via].gateway).await?;
        // the partition answers through that gateway before the kill
        let (before, _) = first_success(&client, &key, FAILOVER_LIMIT).await;
        anyhow::ensure!(before.is_some(), "partition {partition} took no command through broker {via} before the kill");

        let killed = Instant::now();
        cluster.kill9(victim).await?;
        let (after, attempts) = first_success(&client, &key, FAILOVER_LIMIT.saturating_sub(killed.elapsed())).await;
        let recovered = after.map(|_| killed.elapsed());
        let new_leader = cluster.leader_of(partition, Some(victim)).await;
        let kill = Kill { partition, victim, via, ms: recovered.map(|d| d.as_secs_f64() * 1000.0), attempts, new_leader };
        eprintln!(
            "kill {}/{}: broker {victim}, leader of partition {partition}: first success through broker {via} after {} ({attempts} commands)",
            k + 1,
            s.kills,
            kill.ms.map(|ms| format!("{ms:.0} ms")).unwrap_or_else(|| "none".into())
        );
        kills.push(kill);

        cluster.spawn(victim)?;
        wait_caught_up(cluster, victim, s.catchup_limit)
            .await
            .with_context(|| format!("broker {victim} did not catch up within {:?} of its restart", s.catchup_limit))?;
        tokio::time::sleep(SETTLE).await;
    }
    Ok(kills)
}

/// Under W2 through broker 0's gateway: stops a broker (one that leads nothing if there is one,
/// never broker 0), restarts it after `s.stop_for`, and times its catch-up.
pub async fn catchup(s: &Settings) -> anyhow::Result<CatchupReport> {
    let mut cluster = Cluster::start(&s.bin, s.shape).await?;
    let leaders = cluster.leaders(None).await.context("no leader for every partition")?;
    let stopped = (1..s.shape.brokers).rev().find(|b| !leaders.contains(b)).unwrap_or(s.shape.brokers - 1);
    let led: Vec<u16> = leaders.iter().enumerate().filter(|(_, l)| **l == stopped).map(|(p, _)| p as u16 + 1).collect();
    let phases = Phases { warmup: s.catchup_lead, duration: s.stop_for + s.load_after_restart, drain: s.phases.drain };
    let gateway = cluster.brokers[0].gateway.clone();
    // no CPU or memory figures: a broker's process changes in the middle of the run
    let info = ServerInfo { label: format!("cluster ({}), broker {stopped} stopped", s.shape_text()), ..Default::default() };
    let load = runner::run(&s.w2, &gateway, &info, phases);
    let control = stop_and_restart(&mut cluster, stopped, s);
    let (load, timing) = tokio::join!(load, control);
    cluster.stop().await?;
    let (entries_behind, ready, caught_up) = timing?;
    let load = load?;
    Ok(CatchupReport {
        stopped,
        led,
        stopped_for_s: s.stop_for.as_secs_f64(),
        entries_behind,
        ready_s: ready.map(|d| d.as_secs_f64()),
        caught_up_s: caught_up.map(|d| d.as_secs_f64()),
        under_load: caught_up.map(|d| d < s.load_after_restart),
        load,
    })
}

/// The catch-up's control beside the load: entries behind at the restart, restart → `/health`
/// UP, restart → caught up.
async fn stop_and_restart(cluster: &mut Cluster, node: usize, s: &Settings) -> anyhow::Result<(u64, Option<Duration>, Option<Duration>)> {
    tokio::time::sleep(s.catchup_lead).await;
    let own_before = crate::management::partitions(cluster.brokers[node].management_port).await?;
    cluster.terminate(node).await?;
    eprintln!("catch-up: broker {node} stopped for {:?}", s.stop_for);
    tokio::time::sleep(s.stop_for).await;
    let replicas = cluster.replicas().await;
    let entries_behind = own_before
        .iter()
        .map(|mine| {
            let leader =
                replicas.values().flatten().filter(|r| r.partition_id == mine.partition_id && r.is_leader()).map(|r| r.applied_index);
            leader.max().unwrap_or(0).saturating_sub(mine.applied_index)
        })
        .sum();
    cluster.spawn(node)?;
    let restarted = Instant::now();
    let mut ready = None;
    while restarted.elapsed() < s.catchup_limit {
        if ready.is_none() && crate::management::healthy(cluster.brokers[node].management_port).await {
            ready = Some(restarted.elapsed());
        }
        if ready.is_some() && cluster.caught_up(node).await {
            let caught = restarted.elapsed();
            eprintln!(
                "catch-up: broker {node} caught up {:.2} s after its restart ({entries_behind} entries behind)",
                caught.as_secs_f64()
            );
            return Ok((entries_behind, ready, Some(caught)));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok((entries_behind, ready, None))
}

fn ms(v: Option<f64>) -> String {
    v.map(|v| format!("{v:.0} ms")).unwrap_or_else(|| "-".into())
}

fn ratio(v: Option<f64>) -> String {
    v.map(|v| format!("{v:.2}")).unwrap_or_else(|| "-".into())
}

pub fn render_w7(r: &W7Report) -> String {
    let p = |r: &RunReport, f: fn(&Summary) -> f64| r.execution.as_ref().map(f);
    let cpu = |r: &RunReport| r.server.as_ref().and_then(|s| s.cpu_cores);
    let rss = |r: &RunReport| r.server.as_ref().and_then(|s| s.window_max_rss_mb);
    let num = |v: Option<f64>| v.map(|v| format!("{v:.1}")).unwrap_or_else(|| "-".into());
    let mut s = format!("W7: W2 on the {} beside the {}\n", r.cluster.server_label, r.single.server_label);
    s += &format!("  {:<34} {:>12} {:>12} {:>10}\n", "", "single node", "cluster", "ratio");
    s += &format!(
        "  {:<34} {:>12.0} {:>12.0} {:>10}\n",
        "sustained (completed) PI/s",
        r.single.completed_per_s,
        r.cluster.completed_per_s,
        ratio(r.rate_ratio)
    );
    s += &format!("  {:<34} {:>12} {:>12}\n", "execution p50 (ms)", num(p(&r.single, |e| e.p50_ms)), num(p(&r.cluster, |e| e.p50_ms)));
    s += &format!(
        "  {:<34} {:>12} {:>12} {:>10}\n",
        "execution p99 (ms)",
        num(p(&r.single, |e| e.p99_ms)),
        num(p(&r.cluster, |e| e.p99_ms)),
        ratio(r.p99_ratio)
    );
    s += &format!("  {:<34} {:>12} {:>12}\n", "server CPU, all processes (cores)", num(cpu(&r.single)), num(cpu(&r.cluster)));
    s += &format!("  {:<34} {:>12} {:>12}\n", "RSS, all processes (MB, max)", num(rss(&r.single)), num(rss(&r.cluster)));
    let peaks: Vec<String> = r.broker_peak_rss_mb.iter().map(|(n, mb)| format!("broker {n} {mb:.0} MB")).collect();
    s += &format!("  brokers' peak RSS: {}; cluster start-up {:.2} s\n", peaks.join(", "), r.cluster_startup_s);
    s += &format!(
        "  bench client CPU: {:.2} / {:.2} cores",
        r.single.client_cpu_s / r.single.window_s.max(1e-9),
        r.cluster.client_cpu_s / r.cluster.window_s.max(1e-9)
    );
    if let Some((_, b)) = r.cluster.load_average {
        s += &format!("; machine load average at end {b:.1}");
    }
    s += "\n";
    s
}

pub fn render_failover(r: &FailoverReport) -> String {
    let mut s = format!(
        "Failover: kill -9 of a partition's leader until the first successful PublishMessage on that partition through a surviving broker's gateway, {} kills\n",
        r.kills.len()
    );
    if let Some(sum) = &r.summary {
        s += &format!(
            "  p50 {}, p99 {}, max {} ({} recovered)\n",
            ms(Some(sum.p50_ms)),
            ms(Some(sum.p99_ms)),
            ms(Some(sum.max_ms)),
            sum.count
        );
    }
    if r.unrecovered > 0 {
        s += &format!("  NO successful command within {} s after {} kills\n", FAILOVER_LIMIT.as_secs(), r.unrecovered);
    }
    for (i, k) in r.kills.iter().enumerate() {
        let new = k.new_leader.map(|l| format!(", new leader broker {l}")).unwrap_or_default();
        s += &format!(
            "  kill {}: partition {} leader broker {} -> {} through broker {} ({} commands{new})\n",
            i + 1,
            k.partition,
            k.victim,
            ms(k.ms),
            k.via,
            k.attempts
        );
    }
    s
}

pub fn render_catchup(r: &CatchupReport) -> String {
    let led = if r.led.is_empty() { "no partition".to_string() } else { format!("partitions {:?}", r.led) };
    let mut s = format!(
        "Catch-up: broker {} (leading {led}) stopped (SIGTERM) for {:.0} s under W2, then restarted, {} entries behind\n",
        r.stopped, r.stopped_for_s, r.entries_behind
    );
    let secs = |v: Option<f64>| v.map(|v| format!("{v:.2} s")).unwrap_or_else(|| "not within the limit".into());
    s += &format!("  restart -> health UP: {}\n", secs(r.ready_s));
    s += &format!(
        "  restart -> healthy follower caught up on every partition: {}{}\n",
        secs(r.caught_up_s),
        match r.under_load {
            Some(true) => " (the load still running)",
            Some(false) => " (after the load ended)",
            None => "",
        }
    );
    s += &format!(
        "  W2 meanwhile: {:.0} PI/s completed, execution p99 {}, {} errors, {} unfinished\n",
        r.load.completed_per_s,
        ms(r.load.execution.as_ref().map(|e| e.p99_ms)),
        r.load.errors,
        r.load.unfinished_instances
    );
    s
}

/// The smoke run's check: every scenario run gave its figures (their values are not judged).
pub fn check_smoke(r: &ClusterReport) -> anyhow::Result<()> {
    if let Some(w7) = &r.w7 {
        for run in [&w7.single, &w7.cluster] {
            anyhow::ensure!(
                run.measured_instances > 0 && run.completed_per_s > 0.0,
                "W7: no instance completed on the {}",
                run.server_label
            );
            anyhow::ensure!(run.execution.is_some(), "W7: no execution time on the {}", run.server_label);
            anyhow::ensure!(run.server.as_ref().and_then(|s| s.cpu_cores).is_some(), "W7: no CPU figure on the {}", run.server_label);
        }
        anyhow::ensure!(w7.rate_ratio.is_some() && w7.p99_ratio.is_some(), "W7: no ratio");
    }
    if let Some(f) = &r.failover {
        anyhow::ensure!(
            !f.kills.is_empty() && f.unrecovered == 0,
            "failover: {} of {} kills without a successful command",
            f.unrecovered,
            f.kills.len()
        );
        anyhow::ensure!(f.summary.is_some(), "failover: no figures");
    }
    if let Some(c) = &r.catchup {
        anyhow::ensure!(c.caught_up_s.is_some(), "catch-up: broker {} did not catch up", c.stopped);
        anyhow::ensure!(c.load.measured_instances > 0, "catch-up: no load ran");
    }
    if let Some(sc) = &r.scaling {
        for c in sc.idle.iter().chain(&sc.loaded) {
            anyhow::ensure!(c.seconds.is_some(), "scaling: {} -> {} brokers did not complete", c.from, c.to);
        }
        anyhow::ensure!(sc.load.measured_instances > 0 && sc.rates.scaled_up.is_some(), "scaling: no load ran while scaled up");
        anyhow::ensure!(sc.brokers_by_second.iter().any(|&(_, n)| n > sc.loaded[0].from), "scaling: the new brokers never held a replica");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_hash_to_the_partition_asked_for() {
        for p in 1..=3 {
            let key = key_for_partition(p, 3, 7);
            assert_eq!(partition_of_correlation_key(&key, 3), p);
        }
        assert_eq!(key_for_partition(1, 1, 0), "bench-failover-0-0");
    }
}
