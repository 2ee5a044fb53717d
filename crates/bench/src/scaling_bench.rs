//! `waggle bench cluster --scenarios scaling`: the time to scale a running cluster from `--brokers`
//! to `--scale-to` brokers and back with Zeebe 8.5's broker scaling API (`POST
//! /actuator/cluster/brokers` with the wanted ids, then `GET /actuator/cluster` until the change is
//! `COMPLETED`), without load and with W2 running, and W2's rate before, during and after each
//! change (issue 31's benchmark; Zeebe's documentation measures the same example, 3 → 6 brokers).
//!
//! The bench starts `--scale-to` brokers (so each has its address in the contact points) and
//! first scales the cluster down to brokers `0..--brokers`, which is then where it starts from.
//! The client talks to broker 0's gateway only; broker 0 is never removed. Figures only: nothing
//! here asserts a time. Method: docs/bench.md.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use serde::Serialize;
use serde_json::Value;

use crate::cluster::{Cluster, Shape};
use crate::management;
use crate::plot::{self, Chart, Series};
use crate::report::RunReport;
use crate::runner::{self, Phases, ServerInfo};
use crate::starter::EarlyEnd;
use crate::workload::Workload;

/// What the scenario needs.
#[derive(Debug, Clone)]
pub struct ScalingSettings {
    pub bin: PathBuf,
    /// Brokers the cluster runs on before and after the change.
    pub from: usize,
    /// Brokers it is scaled to.
    pub to: usize,
    pub partitions: u16,
    pub replication_factor: usize,
    /// The load (W2 with the overrides) and its warm-up.
    pub w2: Workload,
    pub warmup: Duration,
    /// Under load: the load before the scale-up, between the two changes and after the scale-down.
    pub lead: Duration,
    pub hold: Duration,
    pub tail: Duration,
    /// Longest wait for one change to complete.
    pub limit: Duration,
    /// Where the plot goes (`scaling.svg`), if anywhere.
    pub plots: Option<PathBuf>,
}

/// One change of the brokers.
#[derive(Debug, Clone, Serialize)]
pub struct Change {
    pub from: usize,
    pub to: usize,
    pub under_load: bool,
    /// Operations the change was planned as (joins, leaves, broker adds and removes).
    pub operations: usize,
    /// `POST` → `COMPLETED`; `None` if not within the limit.
    pub seconds: Option<f64>,
    /// Under load: the second of the load's window it began in and the one it ended in.
    pub window_seconds: Option<(f64, f64)>,
}

/// W2's completed instances per second in each stretch of the loaded run.
#[derive(Debug, Clone, Serialize)]
pub struct Rates {
    pub before: Option<f64>,
    pub scaling_up: Option<f64>,
    pub scaled_up: Option<f64>,
    pub scaling_down: Option<f64>,
    pub after: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ScalingReport {
    pub shape: String,
    /// Without load: the set-up's scale-down from every broker, then up and down again.
    pub idle: Vec<Change>,
    /// With W2 running: up, then down.
    pub loaded: Vec<Change>,
    pub rates: Rates,
    /// Brokers holding replicas, sampled once a second of the load's window (second, brokers).
    pub brokers_by_second: Vec<(f64, usize)>,
    pub load: RunReport,
    pub plot: Option<PathBuf>,
}

/// Runs the scenario on a cluster it starts and stops.
pub async fn run(s: &ScalingSettings) -> anyhow::Result<ScalingReport> {
    anyhow::ensure!(s.to > s.from, "--scale-to ({}) must be above --brokers ({})", s.to, s.from);
    anyhow::ensure!(s.replication_factor <= s.from, "--replication-factor must be at most --brokers");
    let shape = Shape { brokers: s.to, partitions: s.partitions, replication_factor: s.replication_factor };
    let mut cluster = Cluster::start(&s.bin, shape).await?;
    let result = scenario(&mut cluster, s).await;
    cluster.stop().await?;
    result
}

async fn scenario(cluster: &mut Cluster, s: &ScalingSettings) -> anyhow::Result<ScalingReport> {
    let port = cluster.brokers[0].management_port;
    let (small, big): (Vec<usize>, Vec<usize>) = ((0..s.from).collect(), (0..s.to).collect());
    let mut idle = vec![];
    for (wanted, from) in [(&small, s.to), (&big, s.from), (&small, s.to)] {
        let change = scale(port, from, wanted, s.limit, None).await?;
        eprintln!("scaling: {} -> {} brokers without load: {}", change.from, change.to, secs(change.seconds));
        anyhow::ensure!(change.seconds.is_some(), "the change to brokers {wanted:?} did not complete within {:?}", s.limit);
        idle.push(change);
    }
    cluster.wait_leaders(s.limit, None).await?;

    // the longest the load can last: it ends once both changes are done and `tail` has passed
    let duration = s.lead + s.limit + s.hold + s.limit + s.tail;
    let phases = Phases { warmup: s.warmup, duration, drain: Duration::from_secs(10) };
    let info = ServerInfo { label: format!("cluster scaled {} -> {} -> {} brokers", s.from, s.to, s.from), ..Default::default() };
    let gateway = cluster.brokers[0].gateway.clone();
    // the window's start as the runner will have it, to within the time the deployment takes
    let window_start = Instant::now() + s.warmup;
    let end = EarlyEnd::default();
    let load = runner::run_ending(&s.w2, &gateway, &info, phases, &end);
    let control = async {
        tokio::time::sleep_until(window_start.into()).await;
        let sampler = tokio::spawn(sample_brokers(port, window_start, end.clone()));
        tokio::time::sleep_until((window_start + s.lead).into()).await;
        let changes = async {
            let up = scale(port, s.from, &big, s.limit, Some(window_start)).await?;
            eprintln!("scaling: {} -> {} brokers under W2: {}", s.from, s.to, secs(up.seconds));
            anyhow::ensure!(up.seconds.is_some(), "the change to brokers {big:?} did not complete within {:?}", s.limit);
            tokio::time::sleep(s.hold).await;
            let down = scale(port, s.to, &small, s.limit, Some(window_start)).await?;
            eprintln!("scaling: {} -> {} brokers under W2: {}", s.to, s.from, secs(down.seconds));
            tokio::time::sleep(s.tail).await;
            anyhow::Ok((up, down))
        };
        let changes = changes.await;
        // the load ends here, also when a change failed
        end.now();
        let samples = sampler.await.unwrap_or_default();
        changes.map(|(up, down)| (up, down, samples))
    };
    let (load, control) = tokio::join!(load, control);
    let (up, down, brokers_by_second) = control?;
    let load = load?;
    let rates = rates(&load, &up, &down);
    let shape = format!("{} partitions × replication factor {}, brokers {} -> {}", s.partitions, s.replication_factor, s.from, s.to);
    let mut report = ScalingReport { shape, idle, loaded: vec![up, down], rates, brokers_by_second, load, plot: None };
    if let Some(dir) = &s.plots {
        report.plot = Some(write_plot(dir, &report)?);
    }
    Ok(report)
}

/// Asks broker 0 (management port `port`) for the brokers `wanted` and waits until the change
/// completed; `window_start` places it in the load's window.
async fn scale(port: u16, from: usize, wanted: &[usize], limit: Duration, window_start: Option<Instant>) -> anyhow::Result<Change> {
    let body = serde_json::to_string(wanted)?;
    let began = Instant::now();
    let (status, answer) = management::request(port, "POST", "/actuator/cluster/brokers", &body).await?;
    if status != 202 {
        bail!("POST /actuator/cluster/brokers {body}: {status} {answer}");
    }
    let planned: Value = serde_json::from_str(&answer).with_context(|| format!("the planned change: {answer}"))?;
    let id = planned["changeId"].as_u64().with_context(|| format!("no changeId in {answer}"))?;
    let operations = planned["plannedChanges"].as_array().map_or(0, Vec::len);
    let at = |t: Instant| window_start.map(|w| t.saturating_duration_since(w).as_secs_f64());
    let mut change = Change { from, to: wanted.len(), under_load: window_start.is_some(), operations, seconds: None, window_seconds: None };
    while began.elapsed() < limit {
        if let Ok((200, text)) = management::get(port, "/actuator/cluster").await {
            let cluster: Value = serde_json::from_str(&text).with_context(|| format!("GET /actuator/cluster: {text}"))?;
            if cluster["pendingChange"].is_null() && cluster["lastChange"]["id"].as_u64() == Some(id) {
                anyhow::ensure!(cluster["lastChange"]["status"] == "COMPLETED", "change {id} ended as {}", cluster["lastChange"]);
                let ended = Instant::now();
                change.seconds = Some((ended - began).as_secs_f64());
                change.window_seconds = at(began).zip(at(ended));
                return Ok(change);
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(change)
}

/// Brokers holding a replica in a `GET /actuator/cluster` body's topology.
pub fn brokers_holding(cluster: &Value) -> usize {
    let holds = |b: &Value| b["id"].is_u64() && b["partitions"].as_array().is_some_and(|p| p.iter().any(|p| p["id"].is_u64()));
    cluster["brokers"].as_array().map_or(0, |bs| bs.iter().filter(|b| holds(b)).count())
}

/// Brokers holding replicas, once a second until the load's `end`, at seconds from `window_start`.
async fn sample_brokers(port: u16, window_start: Instant, end: EarlyEnd) -> Vec<(f64, usize)> {
    let mut samples = vec![];
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    while end.at().is_none() {
        tick.tick().await;
        if let Ok((200, text)) = management::get(port, "/actuator/cluster").await {
            if let Ok(cluster) = serde_json::from_str::<Value>(&text) {
                samples.push((window_start.elapsed().as_secs_f64(), brokers_holding(&cluster)));
            }
        }
    }
    samples
}

/// W2's completed PI/s over the seconds of the window in `[from, to)`.
fn rate_between(load: &RunReport, from: f64, to: f64) -> Option<f64> {
    let seconds: Vec<u64> =
        load.series.iter().filter(|s| (s.second as f64) > from && (s.second as f64) <= to).map(|s| s.completed).collect();
    (!seconds.is_empty()).then(|| seconds.iter().sum::<u64>() as f64 / seconds.len() as f64)
}

fn rates(load: &RunReport, up: &Change, down: &Change) -> Rates {
    let end = load.series.len() as f64;
    match (up.window_seconds, down.window_seconds) {
        (Some((u0, u1)), Some((d0, d1))) => Rates {
            before: rate_between(load, 0.0, u0),
            scaling_up: rate_between(load, u0, u1),
            scaled_up: rate_between(load, u1, d0),
            scaling_down: rate_between(load, d0, d1),
            after: rate_between(load, d1, end),
        },
        _ => Rates { before: None, scaling_up: None, scaled_up: None, scaling_down: None, after: None },
    }
}

/// `<dir>/scaling.svg`: W2's completed instances per second above the brokers holding replicas.
fn write_plot(dir: &Path, r: &ScalingReport) -> anyhow::Result<PathBuf> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let path = dir.join("scaling.svg");
    let rate = Chart {
        title: format!("W2 completed per second while scaling ({})", r.shape),
        x_label: "second".into(),
        series: vec![Series {
            name: "PI/s".into(),
            color: plot::BLUE,
            points: r.load.series.iter().map(|s| (s.second as f64, s.completed as f64)).collect(),
        }],
    };
    let brokers = Chart {
        title: "brokers holding replicas".into(),
        x_label: "second".into(),
        series: vec![Series {
            name: "brokers".into(),
            color: plot::GREEN,
            points: r.brokers_by_second.iter().map(|&(t, n)| (t, n as f64)).collect(),
        }],
    };
    plot::write_svg(&path, None, 1, (900, 320), &[rate, brokers])?;
    Ok(path)
}

fn secs(v: Option<f64>) -> String {
    v.map(|v| format!("{v:.1} s")).unwrap_or_else(|| "not within the limit".into())
}

fn rate(v: Option<f64>) -> String {
    v.map(|v| format!("{v:.0}")).unwrap_or_else(|| "-".into())
}

pub fn render(r: &ScalingReport) -> String {
    let mut s = format!("Scaling: {}\n", r.shape);
    for c in r.idle.iter().chain(&r.loaded) {
        s += &format!(
            "  {} -> {} brokers {:<14} {:>20} ({} operations)\n",
            c.from,
            c.to,
            if c.under_load { "under W2" } else { "without load" },
            secs(c.seconds),
            c.operations
        );
    }
    let x = &r.rates;
    s += &format!(
        "  W2 completed PI/s: before {}, scaling up {}, scaled up {}, scaling down {}, after {}\n",
        rate(x.before),
        rate(x.scaling_up),
        rate(x.scaled_up),
        rate(x.scaling_down),
        rate(x.after)
    );
    s += &format!(
        "  W2 over the window: {:.0} PI/s, {} errors, {} unfinished{}\n",
        r.load.completed_per_s,
        r.load.errors,
        r.load.unfinished_instances,
        r.plot.as_ref().map(|p| format!("; plot {}", p.display())).unwrap_or_default()
    );
    if let Some((a, b)) = r.load.load_average {
        s += &format!("  machine load average {a:.1} at the window's start, {b:.1} at its end\n");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_the_brokers_the_topology_gives_replicas() {
        let cluster = serde_json::json!({"brokers": [
            {"nodeId": 0, "id": 0, "partitions": [{"partitionId": 1, "id": 1}]},
            {"nodeId": 1, "id": 1, "partitions": []},
            {"nodeId": 2, "partitions": [{"partitionId": 1}]},
            {"nodeId": 3, "id": 3, "partitions": [{"partitionId": 2, "id": 2}]}
        ]});
        assert_eq!(brokers_holding(&cluster), 2);
        assert_eq!(brokers_holding(&serde_json::json!({})), 0);
    }
}
