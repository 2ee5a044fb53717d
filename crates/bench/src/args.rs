//! Command-line arguments of `waggle bench`.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand};

use crate::workload::{self, parse_duration, Pace, Workload};

/// `waggle bench`: Zeebe's benchmark over the Zeebe gRPC protocol, against Waggle.
#[derive(Debug, Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub command: BenchCommand,
}

#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Run one workload against a running server.
    Run(RunArgs),
    /// Start (or attach to) Waggle, run the workloads on it and on the open-source peers (Flowable
    /// 7.2, Camunda 7.24 CE) in turn, print them side by side.
    Compare(CompareArgs),
    /// Many timers due at the same moment, and the latency of job completions beside them.
    TimerStorm(crate::timer_storm::TimerStormArgs),
    /// Creation time and partition stall against variable count and payload size.
    VariableScaling(crate::variable_scaling::VariableScalingArgs),
    /// A few seconds of one-task instances on a fresh Waggle: fails unless all complete (for CI).
    Smoke(SmokeArgs),
    /// Start a cluster of brokers and measure it: W7 (W2 on the cluster beside the single node),
    /// failover after a leader's kill -9, a stopped broker's catch-up.
    Cluster(Box<crate::cluster_bench::ClusterBenchArgs>),
    /// Fill a running server's state with parked instances (a message catch event, a timer a day
    /// away, an un-worked job) until its RocksDB state holds --state-gb (the large-state benchmark).
    Fill(crate::fill::FillArgs),
    /// Run a workload (W1 by default) on a fresh Waggle for a long time, sampling its RSS, its
    /// data folder's disk use and each interval's p99 into a CSV, plotted as SVG at the end.
    Soak(Box<crate::soak::SoakArgs>),
}

#[derive(Debug, Args)]
pub struct SmokeArgs {
    /// The waggle binary to start.
    #[arg(long)]
    pub waggle_bin: PathBuf,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Gateway address of the server (loopback only).
    #[arg(long, default_value = "127.0.0.1:26500")]
    pub target: String,
    /// W1..W6, W2-25, W8 (business rule tasks), W9 (multi-instance over 10,000 items), or custom
    /// (then --model and --payload).
    #[arg(long, default_value = "W1")]
    pub workload: String,
    /// Pid of the server, to report its CPU time and memory from /proc.
    #[arg(long)]
    pub pid: Option<u32>,
    #[command(flatten)]
    pub phases: PhaseArgs,
    #[command(flatten)]
    pub overrides: Overrides,
    /// Also write the report as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Also plot throughput and latency over the run as `<workload>.svg` in this folder.
    #[arg(long)]
    pub plots: Option<PathBuf>,
    /// Connect over TLS, trusting this CA (PEM); the server's certificate must name the
    /// target's host.
    #[arg(long, value_name = "PEM")]
    pub tls_ca: Option<PathBuf>,
    /// Send this OAuth 2 access token on every call (`authorization: Bearer <token>`); also
    /// `WAGGLE_BENCH_TOKEN`. It must outlive the run.
    #[arg(long, value_name = "JWT", hide_env_values = true)]
    pub token: Option<String>,
}

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// Workloads to run, comma-separated.
    #[arg(long, default_value = "W1,W2", value_delimiter = ',')]
    pub workloads: Vec<String>,
    /// Waggle binary to start fresh (temp data dir, free ports) for each workload.
    #[arg(long, conflicts_with = "waggle_address")]
    pub waggle_bin: Option<PathBuf>,
    /// Attach to a running Waggle instead of starting one.
    #[arg(long)]
    pub waggle_address: Option<String>,
    /// Pid of the attached Waggle, for CPU and memory.
    #[arg(long, requires = "waggle_address")]
    pub waggle_pid: Option<u32>,
    /// Open-source peers to run each workload on after Waggle, comma-separated: `flowable`
    /// (Flowable 7.2), `camunda7` (Camunda 7.24 CE), or `none` (Waggle only).
    #[arg(long, default_value = "flowable,camunda7", value_delimiter = ',')]
    pub peers: Vec<String>,
    /// Script that runs a workload on a peer (`run ENGINE ARGS`; its folder's ../peers/models
    /// holds the peers' models).
    #[arg(long, default_value = "scripts/peers.sh")]
    pub peers_script: PathBuf,
    #[command(flatten)]
    pub phases: PhaseArgs,
    #[command(flatten)]
    pub overrides: Overrides,
    /// Write every report as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write the comparison table as Markdown to this file.
    #[arg(long)]
    pub markdown: Option<PathBuf>,
    /// Plot each workload's throughput and latency over the run, a column per server, as
    /// `<workload>.svg` in this folder.
    #[arg(long)]
    pub plots: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct PhaseArgs {
    /// Measurement window (e.g. 30s, 2m).
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub duration: Duration,
    /// Load before the window, not measured [default: 30s for an as-fast-as-it-holds workload
    /// (W2, W6), whose rate on a JVM rises for its first ~30 s; 5s for the others].
    #[arg(long, value_parser = parse_duration)]
    pub warmup: Option<Duration>,
    /// Longest wait after the window for measured instances to finish.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub drain: Duration,
}

/// Changes to a workload's defaults.
#[derive(Debug, Args, Default)]
pub struct Overrides {
    /// BPMN model file (custom workload, or replaces the workload's model).
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// Payload file: a JSON object, the instance's variables.
    #[arg(long)]
    pub payload: Option<PathBuf>,
    /// Process instances per second, or `max` (as fast as back pressure and --outstanding allow).
    #[arg(long)]
    pub rate: Option<String>,
    /// With --rate max: most instances created and not finished.
    #[arg(long)]
    pub outstanding: Option<usize>,
    /// Worker's wait before completing a job.
    #[arg(long, value_parser = parse_duration)]
    pub worker_delay: Option<Duration>,
    /// Most jobs the worker holds at once.
    #[arg(long)]
    pub capacity: Option<usize>,
    /// Job type the worker takes.
    #[arg(long)]
    pub job_type: Option<String>,
    /// Job push (StreamActivatedJobs); the default.
    #[arg(long, conflicts_with = "poll")]
    pub stream: bool,
    /// Long polling (ActivateJobs) instead of job push.
    #[arg(long)]
    pub poll: bool,
    /// Measure completion with CreateProcessInstanceWithResult.
    #[arg(long)]
    pub with_result: bool,
    /// Publish a message (the model's first) after each creation, correlated by `correlationKey`.
    #[arg(long)]
    pub publish_message: bool,
    /// Start each instance by publishing the model's message to its message start event
    /// (instead of CreateProcessInstance).
    #[arg(long, conflicts_with_all = ["publish_message", "with_result"])]
    pub start_by_message: bool,
}

impl Overrides {
    /// The named workload (or custom) with these changes applied.
    pub fn apply(&self, name: &str) -> anyhow::Result<Workload> {
        let mut w = if name.eq_ignore_ascii_case("custom") {
            workload::custom(self.model.as_deref(), self.payload.as_deref())?
        } else {
            let mut w = workload::named(name)?;
            if self.model.is_some() || self.payload.is_some() {
                let c = workload::custom(self.model.as_deref(), self.payload.as_deref())?;
                if self.model.is_some() {
                    (w.model, w.model_name) = (c.model, c.model_name);
                }
                if self.payload.is_some() {
                    (w.payload, w.payload_bytes) = (c.payload, c.payload_bytes);
                }
            }
            w
        };
        if let Some(rate) = &self.rate {
            w.pace = parse_rate(rate, self.outstanding.unwrap_or(workload::DEFAULT_OUTSTANDING))?;
        } else if let (Pace::Max { .. }, Some(o)) = (w.pace, self.outstanding) {
            w.pace = Pace::Max { outstanding: o };
        }
        if let Some(d) = self.worker_delay {
            w.worker_delay = d;
        }
        if let Some(c) = self.capacity {
            anyhow::ensure!(c > 0, "--capacity must be at least 1");
            w.worker_capacity = c;
        }
        if let Some(t) = &self.job_type {
            w.job_type = t.clone();
        }
        if self.poll {
            w.stream = false;
        }
        w.with_result |= self.with_result;
        w.publish_message |= self.publish_message;
        w.start_by_message |= self.start_by_message;
        serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(&w.payload)
            .map_err(|e| anyhow::anyhow!("the payload is not a JSON object: {e}"))?;
        Ok(w)
    }
}

/// `150` or `max`.
pub fn parse_rate(text: &str, outstanding: usize) -> anyhow::Result<Pace> {
    if text.eq_ignore_ascii_case("max") {
        anyhow::ensure!(outstanding > 0, "--outstanding must be at least 1");
        return Ok(Pace::Max { outstanding });
    }
    let r: f64 = text.parse().map_err(|_| anyhow::anyhow!("--rate: expected a number of PI/s or `max`, got {text:?}"))?;
    anyhow::ensure!(r > 0.0 && r.is_finite(), "--rate must be positive");
    Ok(Pace::Rate(r))
}

impl PhaseArgs {
    /// The phases of a run of `w`: the warm-up given, else `w`'s default (see [`default_warmup`]).
    pub fn for_workload(&self, w: &Workload) -> crate::runner::Phases {
        if w.one_at_a_time {
            return crate::runner::Phases {
                warmup: Duration::ZERO,
                duration: Duration::from_secs(1),
                drain: self.drain.max(Duration::from_secs(600)),
            };
        }
        crate::runner::Phases { warmup: self.warmup.unwrap_or_else(|| default_warmup(w)), duration: self.duration, drain: self.drain }
    }
}

/// Warm-up before a run's window unless one is given: 30 s when the workload runs as fast as the
/// server holds (a JVM's rate rises while it warms up: Zeebe 8.5.8's W2 rate rose from ~200 to
/// ~400 PI/s over its first 30 s, recorded 2026-11, and a sustained rate is measured at steady
/// state), 5 s at a fixed rate.
pub fn default_warmup(w: &Workload) -> Duration {
    match w.pace {
        Pace::Max { .. } => Duration::from_secs(30),
        Pace::Rate(_) => Duration::from_secs(5),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overrides_change_the_workload() {
        let o = Overrides { rate: Some("20".into()), poll: true, worker_delay: Some(Duration::ZERO), ..Default::default() };
        let w = o.apply("W1").unwrap();
        assert_eq!(w.pace, Pace::Rate(20.0));
        assert!(!w.stream);
        assert!(w.worker_delay.is_zero());
        assert_eq!(Overrides { outstanding: Some(8), ..Default::default() }.apply("W2").unwrap().pace, Pace::Max { outstanding: 8 });
        let phases = PhaseArgs { duration: Duration::from_secs(20), warmup: None, drain: Duration::from_secs(10) };
        assert_eq!(phases.for_workload(&workload::named("W2").unwrap()).warmup, Duration::from_secs(30));
        assert_eq!(phases.for_workload(&workload::named("W1").unwrap()).warmup, Duration::from_secs(5));
        let given = PhaseArgs { warmup: Some(Duration::from_secs(2)), ..phases };
        assert_eq!(given.for_workload(&workload::named("W6").unwrap()).warmup, Duration::from_secs(2));
        assert!(parse_rate("fast", 1).is_err());
        assert!(parse_rate("0", 1).is_err());
    }
}
