//! `waggle bench variable-scaling`: what one large creation costs the server, and the stall it
//! causes for everyone else on its partition (the hostile-input issue's benchmark).
//!
//! For each size, a creation of a one-task instance whose variables are a flat object of that
//! many keys (`{"k0":0,"k1":1,...}`), then a creation whose variables are one string of that many
//! bytes, each `--repeat` times. Meanwhile a probe creates small instances of a start-to-end model
//! one after the other and times each creation; the stall of a large creation is the longest
//! probe creation that overlapped it. After each large creation its instance is cancelled and the
//! bench waits for the probe to be quick again, so the next one starts from a calm partition.
//!
//! Prints creation time and stall per size (medians over the repeats) and draws both against the
//! key count and against the payload size as one SVG.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use serde::Serialize;
use waggle_protocol::gateway::{CancelProcessInstanceRequest, CreateProcessInstanceRequest};

use crate::client;
use crate::plot::{self, Chart, Series};
use crate::server::Server;

const MODEL: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<bpmn:definitions xmlns:bpmn="http://www.omg.org/spec/BPMN/20100524/MODEL" xmlns:zeebe="http://camunda.org/schema/zeebe/1.0" id="scaling" targetNamespace="https://waggle.dev/bench">
  <bpmn:process id="scaling-large" isExecutable="true">
    <bpmn:startEvent id="start"/>
    <bpmn:sequenceFlow id="f1" sourceRef="start" targetRef="task"/>
    <bpmn:serviceTask id="task"><bpmn:extensionElements><zeebe:taskDefinition type="scaling-task"/></bpmn:extensionElements></bpmn:serviceTask>
    <bpmn:sequenceFlow id="f2" sourceRef="task" targetRef="end"/>
    <bpmn:endEvent id="end"/>
  </bpmn:process>
  <bpmn:process id="scaling-probe" isExecutable="true">
    <bpmn:startEvent id="probe_start"/>
    <bpmn:sequenceFlow id="p1" sourceRef="probe_start" targetRef="probe_end"/>
    <bpmn:endEvent id="probe_end"/>
  </bpmn:process>
</bpmn:definitions>"#;

#[derive(Debug, Args)]
pub struct VariableScalingArgs {
    /// A waggle binary to start fresh (temp data dir, free ports) for the run.
    #[arg(long, conflicts_with = "target")]
    pub waggle_bin: Option<PathBuf>,
    /// Attach to a running server instead (loopback only).
    #[arg(long)]
    pub target: Option<String>,
    /// Key counts of the flat variable documents, comma-separated.
    #[arg(long, default_value = "1000,10000,100000,200000", value_delimiter = ',')]
    pub keys: Vec<usize>,
    /// Sizes in KB of the one-string variable documents, comma-separated.
    #[arg(long, default_value = "1,256,1024,2048,3584", value_delimiter = ',')]
    pub payload_kb: Vec<usize>,
    /// Creations per size (medians are reported).
    #[arg(long, default_value_t = 3)]
    pub repeat: usize,
    /// Write the plot to this SVG file.
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// Also write the report as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// One size's figures: medians over the repeats, in milliseconds.
#[derive(Debug, Clone, Serialize)]
pub struct Point {
    /// Keys of the document, or its size in KB (see [`ScalingReport`]).
    pub size: usize,
    pub document_bytes: usize,
    pub creation_ms: f64,
    /// The longest probe creation overlapping the large one.
    pub stall_ms: f64,
}

#[derive(Debug, Serialize)]
pub struct ScalingReport {
    /// Probe creation time on the calm partition (median, ms).
    pub probe_baseline_ms: f64,
    pub by_keys: Vec<Point>,
    pub by_payload_kb: Vec<Point>,
}

/// A flat object of `keys` numbered keys.
pub fn flat_document(keys: usize) -> String {
    let mut text = String::with_capacity(keys * 16 + 2);
    text.push('{');
    for i in 0..keys {
        if i > 0 {
            text.push(',');
        }
        text.push_str(&format!("\"k{i}\":{i}"));
    }
    text.push('}');
    text
}

/// An object of one string variable, `bytes` long in all.
pub fn payload_document(bytes: usize) -> String {
    format!("{{\"payload\":\"{}\"}}", "x".repeat(bytes.saturating_sub(14)))
}

/// Probe creations: (started, took), one after the other until `done`.
type ProbeLog = Arc<Mutex<Vec<(Instant, Duration)>>>;

pub async fn run(args: &VariableScalingArgs) -> anyhow::Result<ScalingReport> {
    let server = match (&args.waggle_bin, &args.target) {
        (Some(bin), _) => Some(Server::start_waggle(bin).await?),
        (None, _) => None,
    };
    let target = match (&server, &args.target) {
        (Some(s), _) => s.address.clone(),
        (None, Some(t)) => t.clone(),
        (None, None) => anyhow::bail!("give --waggle-bin or --target"),
    };
    client::check_loopback(&target)?;
    let result = measure(args, &target).await;
    if let Some(s) = server {
        s.stop().await?;
    }
    result
}

async fn measure(args: &VariableScalingArgs, target: &str) -> anyhow::Result<ScalingReport> {
    let mut c = client::connect(target).await?;
    client::deploy(&mut c, "variable-scaling.bpmn", MODEL).await?;
    let done = Arc::new(AtomicBool::new(false));
    let probes: ProbeLog = Arc::default();
    let probe = tokio::spawn(probe(target.to_string(), done.clone(), probes.clone()));
    tokio::time::sleep(Duration::from_secs(1)).await;
    let probe_baseline_ms = median(probes.lock().expect("probes").iter().map(|(_, d)| ms(*d)).collect());
    let mut by_keys = Vec::new();
    for &keys in &args.keys {
        by_keys.push(point(&mut c, &probes, keys, &flat_document(keys), args.repeat, probe_baseline_ms).await?);
    }
    let mut by_payload_kb = Vec::new();
    for &kb in &args.payload_kb {
        by_payload_kb.push(point(&mut c, &probes, kb, &payload_document(kb * 1024), args.repeat, probe_baseline_ms).await?);
    }
    done.store(true, Ordering::Relaxed);
    probe.await.context("probe")??;
    let report = ScalingReport { probe_baseline_ms, by_keys, by_payload_kb };
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&report)?).with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(path) = &args.plot {
        plot::write_svg(path, None, 2, (640, 400), &charts(&report))?;
        eprintln!("plot: {}", path.display());
    }
    Ok(report)
}

/// Creates an instance with `document` `repeat` times; medians of creation time and stall.
async fn point(
    c: &mut client::Client,
    probes: &ProbeLog,
    size: usize,
    document: &str,
    repeat: usize,
    calm_ms: f64,
) -> anyhow::Result<Point> {
    let (mut creations, mut stalls) = (Vec::new(), Vec::new());
    for _ in 0..repeat.max(1) {
        let request = CreateProcessInstanceRequest {
            bpmn_process_id: "scaling-large".into(),
            version: -1,
            variables: document.to_string(),
            ..Default::default()
        };
        let started = Instant::now();
        let created =
            c.create_process_instance(request).await.with_context(|| format!("creating with {size} ({} bytes)", document.len()))?;
        let ended = Instant::now();
        creations.push(ms(ended - started));
        // the longest probe creation that overlapped [started, ended], the one running at the end included
        wait_for_probe_after(probes, ended).await;
        let stall = probes
            .lock()
            .expect("probes")
            .iter()
            .filter(|(at, took)| *at <= ended && *at + *took >= started)
            .map(|(_, took)| ms(*took))
            .fold(0.0, f64::max);
        stalls.push(stall);
        let key = created.into_inner().process_instance_key;
        c.cancel_process_instance(CancelProcessInstanceRequest { process_instance_key: key }).await.context("cancelling")?;
        settle(probes, calm_ms).await;
    }
    Ok(Point { size, document_bytes: document.len(), creation_ms: median(creations), stall_ms: median(stalls) })
}

/// Waits until a probe creation started after `at` has finished.
async fn wait_for_probe_after(probes: &ProbeLog, at: Instant) {
    let give_up = Instant::now() + Duration::from_secs(60);
    while Instant::now() < give_up && !probes.lock().expect("probes").iter().any(|(started, _)| *started > at) {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// Waits until five probe creations in a row took at most a few times the calm figure (or 30 s).
async fn settle(probes: &ProbeLog, calm_ms: f64) {
    let give_up = Instant::now() + Duration::from_secs(30);
    let quick = (calm_ms * 5.0).max(5.0);
    while Instant::now() < give_up {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let log = probes.lock().expect("probes");
        if log.len() >= 5 && log[log.len() - 5..].iter().all(|(_, d)| ms(*d) <= quick) {
            return;
        }
    }
}

/// Small creations one after the other on a connection of their own, each timed.
async fn probe(target: String, done: Arc<AtomicBool>, log: ProbeLog) -> anyhow::Result<()> {
    let mut c = client::connect(&target).await?;
    while !done.load(Ordering::Relaxed) {
        let request = CreateProcessInstanceRequest { bpmn_process_id: "scaling-probe".into(), version: -1, ..Default::default() };
        let started = Instant::now();
        c.create_process_instance(request).await.context("probe creation")?;
        log.lock().expect("probes").push((started, started.elapsed()));
    }
    Ok(())
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn median(mut values: Vec<f64>) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// Creation time and stall against the key count (left) and the payload size (right).
pub fn charts(r: &ScalingReport) -> [Chart; 2] {
    let chart = |title: &str, x_label: &str, points: &[Point], x: fn(&Point) -> f64| Chart {
        title: title.into(),
        x_label: x_label.into(),
        series: vec![
            Series { name: "creation ms".into(), color: plot::BLUE, points: points.iter().map(|p| (x(p), p.creation_ms)).collect() },
            Series { name: "stall ms".into(), color: plot::RED, points: points.iter().map(|p| (x(p), p.stall_ms)).collect() },
        ],
    };
    [
        chart("Flat variables: creation and stall", "thousand keys", &r.by_keys, |p| p.size as f64 / 1000.0),
        chart("One string variable: creation and stall", "MB", &r.by_payload_kb, |p| p.size as f64 / 1024.0),
    ]
}

/// The report as text.
pub fn render(r: &ScalingReport) -> String {
    let mut out = format!("variable scaling: probe creation on a calm partition {:.2} ms (median)\n", r.probe_baseline_ms);
    rows(&mut out, "flat variables", "keys", &r.by_keys);
    rows(&mut out, "one string    ", "KB  ", &r.by_payload_kb);
    out
}

/// One table of the report: a heading line, then a row per point, its size in `unit`.
fn rows(out: &mut String, heading: &str, unit: &str, points: &[Point]) {
    out.push_str(&format!("  {heading}      document     creation      stall\n"));
    for p in points {
        out.push_str(&format!(
            "  {:>9} {unit}  {:>9.2} MB  {:>8.1} ms  {:>7.1} ms\n",
            p.size,
            p.document_bytes as f64 / 1e6,
            p.creation_ms,
            p.stall_ms
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_have_the_asked_shape() {
        let doc: serde_json::Map<String, serde_json::Value> = serde_json::from_str(&flat_document(1000)).unwrap();
        assert_eq!((doc.len(), &doc["k999"]), (1000, &serde_json::json!(999)));
        assert_eq!(payload_document(1024).len(), 1024);
        assert!(serde_json::from_str::<serde_json::Value>(&payload_document(1024)).is_ok());
    }

    #[test]
    fn the_plot_has_both_charts() {
        let p = |size, ms| Point { size, document_bytes: 0, creation_ms: ms, stall_ms: ms / 2.0 };
        let r = ScalingReport {
            probe_baseline_ms: 1.0,
            by_keys: vec![p(1000, 1.0), p(200_000, 90.0)],
            by_payload_kb: vec![p(1, 1.0), p(3584, 40.0)],
        };
        let [keys, payload] = charts(&r);
        assert_eq!(keys.series[0].points, [(1.0, 1.0), (200.0, 90.0)]);
        assert_eq!(payload.series[1].points, [(1.0 / 1024.0, 0.5), (3.5, 20.0)]);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("variable-scaling.svg");
        plot::write_svg(&path, None, 2, (640, 400), &charts(&r)).unwrap();
        crate::plot::tests::assert_svg_with(&path, &["Flat variables: creation and stall", "stall ms", "thousand keys"]);
        assert!(render(&r).contains("200000 keys"));
    }
}
