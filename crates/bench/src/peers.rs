//! The open-source peers of compare mode: Flowable 7.2 and Camunda 7.24 CE, each embedded in the
//! Java harness of `peers/` on PostgreSQL and run one workload at a time by `scripts/peers.sh`,
//! which prints the run's figures as JSON in the shape of [`RunReport`].

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{bail, Context};
use serde::Deserialize;
use tokio::process::Command;

use crate::report::{RunReport, Second, ServerStats};
use crate::runner::Phases;
use crate::stats::Summary;
use crate::workload::{self, Pace, Workload};

/// One peer engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Peer {
    Flowable,
    Camunda7,
}

impl Peer {
    /// Its column head.
    pub fn label(self) -> &'static str {
        match self {
            Peer::Flowable => "Flowable 7.2",
            Peer::Camunda7 => "Camunda 7.24",
        }
    }

    /// Its name for `scripts/peers.sh` and its folder of models under `peers/models`.
    pub fn engine(self) -> &'static str {
        match self {
            Peer::Flowable => "flowable",
            Peer::Camunda7 => "camunda7",
        }
    }
}

/// `flowable`, `camunda7` (each once, in the order given), or `none` alone.
pub fn parse(list: &[String]) -> anyhow::Result<Vec<Peer>> {
    let mut peers = vec![];
    for name in list.iter().map(|n| n.trim()) {
        let peer = match name {
            "none" if list.len() == 1 => continue,
            "flowable" => Peer::Flowable,
            "camunda7" => Peer::Camunda7,
            other => bail!("--peers: unknown peer {other:?}: expected flowable, camunda7 (comma-separated), or none alone"),
        };
        if !peers.contains(&peer) {
            peers.push(peer);
        }
    }
    Ok(peers)
}

/// The harness's arguments for `w` (besides `--json`), or why the peers cannot run it: they run
/// the bench's own models only (`peers/models/<engine>/`), and no message start.
pub fn harness_args(peer: Peer, models: &Path, w: &Workload, phases: Phases, payload: &Path) -> Result<Vec<String>, String> {
    let model = models.join(peer.engine()).join(&w.model_name);
    if !model.is_file() {
        return Err(format!("the peers run the bench's own models only; there is no {}", model.display()));
    }
    if w.start_by_message {
        return Err("the peers' harness does not start instances by message".into());
    }
    let mut args: Vec<String> = vec!["--model".into(), model.display().to_string(), "--payload".into(), payload.display().to_string()];
    if let Some(d) = &w.decision {
        let decision = models.join(peer.engine()).join(&d.name);
        if !decision.is_file() {
            return Err(format!("the peers run the bench's own decisions only; there is no {}", decision.display()));
        }
        args.extend(["--decision".into(), decision.display().to_string()]);
    }
    match w.pace {
        Pace::Rate(r) => args.extend(["--rate".into(), r.to_string()]),
        Pace::Max { outstanding } => args.extend(["--rate".into(), "max".into(), "--outstanding".into(), outstanding.to_string()]),
    }
    args.extend(["--worker-delay-ms".into(), w.worker_delay.as_millis().to_string(), "--job-type".into(), w.job_type.clone()]);
    if w.publish_message {
        let info = workload::inspect(&w.model).map_err(|e| e.to_string())?;
        let name = info.message_name.ok_or("the workload publishes messages but the model declares none")?;
        args.extend(["--publish-message".into(), name]);
    }
    if let Some(t) = w.timer {
        args.extend(["--timer-ms".into(), t.as_millis().to_string()]);
    }
    for (flag, d) in [("--warmup-s", phases.warmup), ("--duration-s", phases.duration), ("--drain-s", phases.drain)] {
        args.extend([flag.into(), d.as_secs_f64().to_string()]);
    }
    Ok(args)
}

/// What the harness prints.
#[derive(Debug, Deserialize)]
struct Figures {
    engine: String,
    settings: String,
    window_s: f64,
    created_per_s: f64,
    completed_per_s: f64,
    errors: u64,
    skipped: u64,
    backlog_start: i64,
    backlog_end: i64,
    measured_instances: usize,
    unfinished_instances: usize,
    execution: Option<Summary>,
    job_lifetime: Option<Summary>,
    activation: Option<Summary>,
    correlation: Option<Summary>,
    timer_lateness: Option<Summary>,
    load_average: Vec<Option<f64>>,
    first_errors: Vec<String>,
    server: ServerStats,
    series: Vec<Second>,
}

/// `w` on `peer`, through `script` (`scripts/peers.sh`), whose folder's `../peers/models` holds
/// the peers' models.
pub async fn run(peer: Peer, script: &Path, w: &Workload, phases: Phases) -> anyhow::Result<RunReport> {
    let mut report = RunReport::new(w, peer.label(), "embedded, PostgreSQL on loopback");
    let dir = tempfile::Builder::new().prefix("waggle-peers-").tempdir()?;
    let payload = dir.path().join("payload.json");
    std::fs::write(&payload, &w.payload)?;
    let models: PathBuf = script.parent().unwrap_or(Path::new(".")).join("../peers/models");
    let mut args = match harness_args(peer, &models, w, phases, &payload) {
        Ok(a) => a,
        Err(why) => {
            report.unsupported = Some(why);
            return Ok(report);
        }
    };
    let out = dir.path().join("figures.json");
    args.extend(["--json".into(), out.display().to_string()]);
    // the first run installs and builds (apt-get, mvn): minutes, not the run's own time
    let limit = phases.warmup + phases.duration + phases.drain + Duration::from_secs(900);
    let child = Command::new("bash")
        .arg(script)
        .arg("run")
        .arg(peer.engine())
        .args(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("running {}", script.display()))?;
    let output = tokio::time::timeout(limit, child.wait_with_output())
        .await
        .with_context(|| format!("{} run {} took longer than {} s", script.display(), peer.engine(), limit.as_secs()))??;
    if !output.status.success() {
        let err = String::from_utf8_lossy(&output.stderr);
        let tail: Vec<&str> = err.lines().filter(|l| !l.trim_start().starts_with("at ")).collect();
        bail!(
            "{} run {} failed ({}):\n{}",
            script.display(),
            peer.engine(),
            output.status,
            tail[tail.len().saturating_sub(15)..].join("\n")
        );
    }
    let text = std::fs::read_to_string(&out).with_context(|| format!("reading the harness's figures {}", out.display()))?;
    let f: Figures = serde_json::from_str(&text).with_context(|| format!("parsing the harness's figures {}", out.display()))?;
    fill(&mut report, f);
    Ok(report)
}

fn fill(r: &mut RunReport, f: Figures) {
    r.server_settings = Some(format!("{}: {}", f.engine, f.settings));
    r.window_s = f.window_s;
    r.created_per_s = f.created_per_s;
    r.completed_per_s = f.completed_per_s;
    r.errors = f.errors;
    r.skipped = f.skipped;
    r.backlog_start = f.backlog_start;
    r.backlog_end = f.backlog_end;
    r.measured_instances = f.measured_instances;
    r.unfinished_instances = f.unfinished_instances;
    r.execution = f.execution;
    r.job_lifetime = f.job_lifetime;
    r.activation = f.activation;
    r.correlation = f.correlation;
    r.timer_lateness = f.timer_lateness;
    r.load_average = match f.load_average[..] {
        [Some(a), Some(b)] => Some((a, b)),
        _ => None,
    };
    r.first_errors = f.first_errors;
    r.server = Some(f.server);
    r.series = f.series;
    // a rate held at p99 under 1 s; not for one long instance at a time (W9)
    if let (Pace::Max { .. }, false) = (r.workload.pace, r.workload.one_at_a_time) {
        let p99_ok = r.execution.as_ref().is_some_and(|e| e.p99_ms < 1000.0);
        r.held = Some(p99_ok && r.unfinished_instances == 0 && r.errors == 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_list_of_peers() {
        let list = |s: &str| s.split(',').map(String::from).collect::<Vec<_>>();
        assert_eq!(parse(&list("flowable,camunda7")).unwrap(), vec![Peer::Flowable, Peer::Camunda7]);
        assert_eq!(parse(&list("camunda7,camunda7")).unwrap(), vec![Peer::Camunda7]);
        assert!(parse(&list("none")).unwrap().is_empty());
        assert!(parse(&list("none,flowable")).is_err());
        assert!(parse(&list("zeebe")).unwrap_err().to_string().contains("unknown peer \"zeebe\""));
    }

    #[test]
    fn harness_arguments_follow_the_workload() {
        let models = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../peers/models");
        let phases = Phases { warmup: Duration::from_secs(5), duration: Duration::from_secs(20), drain: Duration::from_secs(10) };
        let payload = Path::new("/tmp/p.json");
        let w5 = harness_args(Peer::Camunda7, &models, &workload::named("W5").unwrap(), phases, payload).unwrap();
        let text = w5.join(" ");
        assert!(text.contains("camunda7/message_one_task.bpmn"), "{text}");
        assert!(text.contains("--rate 500 ") && text.contains("--publish-message benchmark-message"), "{text}");
        assert!(text.contains("--warmup-s 5 --duration-s 20 --drain-s 10"), "{text}");
        let w2 = harness_args(Peer::Flowable, &models, &workload::named("W2").unwrap(), phases, payload).unwrap().join(" ");
        assert!(
            w2.contains("flowable/one_task.bpmn") && w2.contains("--rate max --outstanding 1024") && w2.contains("--worker-delay-ms 0"),
            "{w2}"
        );
        let w8 = harness_args(Peer::Camunda7, &models, &workload::named("W8").unwrap(), phases, payload).unwrap().join(" ");
        assert!(w8.contains("camunda7/rules.bpmn") && w8.contains("--decision ") && w8.contains("camunda7/rules.dmn"), "{w8}");
        let w4 = harness_args(Peer::Flowable, &models, &workload::named("W4").unwrap(), phases, payload).unwrap().join(" ");
        assert!(w4.contains("flowable/timer.bpmn") && w4.contains("--timer-ms 1000"), "{w4}");
        // every named workload has its models
        for name in workload::NAMES {
            for peer in [Peer::Flowable, Peer::Camunda7] {
                assert!(harness_args(peer, &models, &workload::named(name).unwrap(), phases, payload).is_ok(), "{name} on {peer:?}");
            }
        }
        let mut custom = workload::named("W1").unwrap();
        custom.model_name = "mine.bpmn".into();
        assert!(harness_args(Peer::Flowable, &models, &custom, phases, payload).unwrap_err().contains("own models only"));
    }

    #[test]
    fn reads_the_harness_figures() {
        let json = r#"{"engine":"Camunda 7.24.0 CE","settings":"history level audit","window_s":10.0,"created_per_s":154.0,
            "completed_per_s":153.9,"errors":0,"skipped":0,"backlog_start":22,"backlog_end":23,"measured_instances":1540,
            "unfinished_instances":0,"execution":{"count":1540,"mean_ms":160.2,"p50_ms":155.9,"p90_ms":205.2,"p99_ms":267.4,"max_ms":346.4},
            "job_lifetime":null,"activation":null,"correlation":null,"timer_lateness":null,"load_average":[3.89,4.98],"first_errors":[],
            "server":{"pid":1,"startup_s":4.2,"idle_rss_mb":171.0,"window_max_rss_mb":361.1,"peak_rss_mb":467.6,"cpu_s":8.2,"cpu_cores":0.82},
            "series":[{"second":1,"created":150,"completed":149,"rejected":0,"execution_p50_ms":150.0,"execution_p99_ms":null}]}"#;
        let f: Figures = serde_json::from_str(json).unwrap();
        let mut r = RunReport::new(&workload::named("W2").unwrap(), "Camunda 7.24", "embedded");
        fill(&mut r, f);
        assert_eq!(r.completed_per_s, 153.9);
        assert_eq!(r.execution.as_ref().unwrap().p99_ms, 267.4);
        assert_eq!(r.load_average, Some((3.89, 4.98)));
        assert_eq!(r.server.as_ref().unwrap().idle_rss_mb, Some(171.0));
        assert_eq!(r.held, Some(true));
        assert_eq!(r.series.len(), 1);
        assert!(r.server_settings.as_deref().unwrap().starts_with("Camunda 7.24.0 CE: "));
    }
}
