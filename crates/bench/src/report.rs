//! Results: one run's report, the metrics shown per workload, the side-by-side table, JSON and
//! Markdown output.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::stats::Summary;
use crate::workload::Workload;

/// Counts of one second of the measurement window.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Second {
    pub second: usize,
    pub created: u64,
    pub completed: u64,
    pub rejected: u64,
    /// Execution time of the instances created in this second that finished.
    pub execution_p50_ms: Option<f64>,
    pub execution_p99_ms: Option<f64>,
}

/// The server process's cost, from /proc (only with a known local pid).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ServerStats {
    pub pid: Option<u32>,
    /// Spawn → every partition has a healthy leader (servers the bench started).
    pub startup_s: Option<f64>,
    /// Resident memory once ready, before the load.
    pub idle_rss_mb: Option<f64>,
    /// Highest resident memory sampled (each second) in the window.
    pub window_max_rss_mb: Option<f64>,
    /// VmHWM after the drain: the peak since the process started.
    pub peak_rss_mb: Option<f64>,
    /// CPU time (user + system) spent in the window.
    pub cpu_s: Option<f64>,
    /// `cpu_s` divided by the window: average cores busy.
    pub cpu_cores: Option<f64>,
}

/// Everything measured in one run.
#[derive(Debug, Clone, Serialize)]
pub struct RunReport {
    pub workload: Workload,
    pub server_label: String,
    pub address: String,
    /// What the server is and how it was set up, when the run knows (the peers' engines).
    pub server_settings: Option<String>,
    /// Set when the server refused the model; nothing else is measured then.
    pub unsupported: Option<String>,
    pub window_s: f64,
    pub created_per_s: f64,
    pub completed_per_s: f64,
    /// Creations refused with RESOURCE_EXHAUSTED (back pressure), per second.
    pub rejected_per_s: f64,
    pub errors: u64,
    pub skipped: u64,
    /// Jobs the worker got by push and by polling over the whole run (warm-up and drain included).
    pub jobs_pushed: u64,
    pub jobs_polled: u64,
    pub first_errors: Vec<String>,
    pub backlog_start: i64,
    pub backlog_end: i64,
    pub measured_instances: usize,
    pub unfinished_instances: usize,
    pub execution: Option<Summary>,
    pub job_lifetime: Option<Summary>,
    pub activation: Option<Summary>,
    pub correlation: Option<Summary>,
    pub timer_lateness: Option<Summary>,
    /// As-fast-as-it-holds runs: p99 < 1 s, every measured instance finished, no errors.
    pub held: Option<bool>,
    pub client_cpu_s: f64,
    /// The machine's 1-minute load average when the window began and ended (other processes count).
    pub load_average: Option<(f64, f64)>,
    pub server: Option<ServerStats>,
    pub series: Vec<Second>,
}

impl RunReport {
    pub fn new(w: &Workload, label: &str, address: &str) -> Self {
        RunReport {
            workload: w.clone(),
            server_label: label.into(),
            address: address.into(),
            server_settings: None,
            unsupported: None,
            window_s: 0.0,
            created_per_s: 0.0,
            completed_per_s: 0.0,
            rejected_per_s: 0.0,
            errors: 0,
            skipped: 0,
            jobs_pushed: 0,
            jobs_polled: 0,
            first_errors: vec![],
            backlog_start: 0,
            backlog_end: 0,
            measured_instances: 0,
            unfinished_instances: 0,
            execution: None,
            job_lifetime: None,
            activation: None,
            correlation: None,
            timer_lateness: None,
            held: None,
            client_cpu_s: 0.0,
            load_average: None,
            server: None,
            series: vec![],
        }
    }
}

/// One number of a report, for tables.
#[derive(Debug, Clone, PartialEq)]
pub struct Metric {
    pub name: String,
    pub unit: &'static str,
    pub value: Option<f64>,
}

fn m(name: &str, unit: &'static str, value: Option<f64>) -> Metric {
    Metric { name: name.into(), unit, value }
}

fn pcts(out: &mut Vec<Metric>, label: &str, s: &Option<Summary>) {
    out.push(m(&format!("{label} p50"), "ms", s.as_ref().map(|s| s.p50_ms)));
    out.push(m(&format!("{label} p90"), "ms", s.as_ref().map(|s| s.p90_ms)));
    out.push(m(&format!("{label} p99"), "ms", s.as_ref().map(|s| s.p99_ms)));
    out.push(m(&format!("{label} max"), "ms", s.as_ref().map(|s| s.max_ms)));
}

/// The metrics that matter for the report's workload, headline first.
pub fn metrics(r: &RunReport) -> Vec<Metric> {
    let mut out = vec![];
    let srv = r.server.as_ref();
    match r.workload.name.as_str() {
        "W4" => pcts(&mut out, "timer lateness", &r.timer_lateness),
        "W5" => pcts(&mut out, "correlation latency", &r.correlation),
        "W6" => {
            out.push(m("start-up to ready", "s", srv.and_then(|s| s.startup_s)));
            out.push(m("idle RSS", "MB", srv.and_then(|s| s.idle_rss_mb)));
            out.push(m("RSS under W2 (max sampled)", "MB", srv.and_then(|s| s.window_max_rss_mb)));
        }
        "W2" | "W8" => out.push(m("sustained (completed)", "PI/s", Some(r.completed_per_s))),
        "W9" => out.push(m("time to complete one instance (p50)", "ms", r.execution.as_ref().map(|e| e.p50_ms))),
        _ => {}
    }
    if r.workload.name != "W4" {
        pcts(&mut out, "execution", &r.execution);
    }
    if r.workload.name != "W2" && r.workload.name != "W8" {
        out.push(m("completed", "PI/s", Some(r.completed_per_s)));
    }
    out.push(m("created", "PI/s", Some(r.created_per_s)));
    out.push(m("rejected (back pressure)", "/s", Some(r.rejected_per_s)));
    if r.job_lifetime.is_some() {
        out.push(m("job lifetime p99", "ms", r.job_lifetime.as_ref().map(|s| s.p99_ms)));
        out.push(m("job activation p99", "ms", r.activation.as_ref().map(|s| s.p99_ms)));
    }
    if r.jobs_pushed + r.jobs_polled > 0 {
        out.push(m("jobs by push (whole run)", "%", Some(100.0 * r.jobs_pushed as f64 / (r.jobs_pushed + r.jobs_polled) as f64)));
    }
    out.push(m("unfinished instances", "", Some(r.unfinished_instances as f64)));
    out.push(m("errors", "", Some(r.errors as f64)));
    out.push(m("server CPU", "cores", srv.and_then(|s| s.cpu_cores)));
    out.push(m("server peak RSS", "MB", srv.and_then(|s| s.peak_rss_mb)));
    out.push(m("bench client CPU", "cores", Some(r.client_cpu_s / r.window_s.max(1e-9))));
    out.push(m("machine load average at end", "1 min", r.load_average.map(|l| l.1)));
    out
}

fn num(v: Option<f64>) -> String {
    match v {
        None => "-".into(),
        Some(v) if v.abs() >= 100.0 || v.fract() == 0.0 => format!("{v:.0}"),
        Some(v) if v.abs() >= 10.0 => format!("{v:.1}"),
        Some(v) => format!("{v:.2}"),
    }
}

fn with_unit(name: &str, unit: &str) -> String {
    if unit.is_empty() {
        name.into()
    } else {
        format!("{name} ({unit})")
    }
}

/// A plain-text listing of one report.
pub fn render_run(r: &RunReport) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "{} on {} ({}): {}", r.workload.name, r.server_label, r.address, r.workload.description);
    if let Some(settings) = &r.server_settings {
        let _ = writeln!(s, "  {settings}");
    }
    if let Some(u) = &r.unsupported {
        let _ = writeln!(s, "  {u}");
        return s;
    }
    let _ = write!(s, "  window {:.0} s, {} instances measured", r.window_s, r.measured_instances);
    if let Some((a, b)) = r.load_average {
        let _ = write!(
            s,
            ", machine load average {a:.1} -> {b:.1} ({} cores)",
            std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0)
        );
    }
    s.push('\n');
    for metric in metrics(r) {
        let _ = writeln!(s, "  {:<38} {:>10}", with_unit(&metric.name, metric.unit), num(metric.value));
    }
    if let Some(h) = r.held {
        let _ = writeln!(s, "  held (p99 < 1 s, all finished, no errors): {}", if h { "yes" } else { "NO" });
    }
    for e in &r.first_errors {
        let _ = writeln!(s, "  error: {e}");
    }
    s
}

/// One row of the comparison: a metric of one workload on every server.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub workload: String,
    pub metric: String,
    /// One cell per server, in the order of the labels (Waggle first).
    pub values: Vec<String>,
    /// Waggle's value over the better peer's (see [`ratio_to_best`]), or `-`.
    pub ratio: String,
}

/// Whether a larger value of a metric in this unit is the better one (rates of finished
/// work); for every other metric (times, memory, CPU, counts of failures) the smaller is.
pub fn higher_is_better(unit: &str) -> bool {
    unit == "PI/s"
}

/// Whether a ratio of a metric in this unit means something: rates, times, memory and CPU, not
/// counts (errors, unfinished instances), shares or the machine's load.
fn has_ratio(unit: &str) -> bool {
    matches!(unit, "PI/s" | "ms" | "s" | "MB" | "cores")
}

/// Rows comparing the reports of the same workloads: each group holds Waggle's run, then each
/// peer's, in the order of the table's labels (`None`: not run).
pub fn compare_rows(groups: &[Vec<Option<RunReport>>]) -> Vec<Row> {
    let mut rows = vec![];
    for runs in groups {
        let name = runs.iter().flatten().next().map(|r| r.workload.name.clone()).unwrap_or_default();
        let notes: Vec<Option<String>> = runs
            .iter()
            .map(|r| match r {
                None => Some("not run".to_string()),
                Some(r) => r.unsupported.clone().map(|_| "unsupported".to_string()),
            })
            .collect();
        let measured: Vec<Vec<Metric>> =
            runs.iter().zip(&notes).map(|(r, note)| r.as_ref().filter(|_| note.is_none()).map(metrics).unwrap_or_default()).collect();
        let names: Vec<(String, &'static str)> =
            measured.iter().find(|m| !m.is_empty()).map(|m| m.iter().map(|x| (x.name.clone(), x.unit)).collect()).unwrap_or_default();
        if names.is_empty() {
            rows.push(Row {
                workload: name.clone(),
                metric: "-".into(),
                values: notes.iter().map(|n| n.clone().unwrap_or_default()).collect(),
                ratio: "-".into(),
            });
        }
        for (metric, unit) in names {
            let values: Vec<Option<f64>> = measured.iter().map(|ms| ms.iter().find(|x| x.name == metric).and_then(|x| x.value)).collect();
            let cells = values.iter().zip(&notes).map(|(v, note)| note.clone().unwrap_or_else(|| num(*v))).collect();
            let ratio = match values.split_first() {
                Some((waggle, peers)) if has_ratio(unit) => ratio_to_best(*waggle, peers, higher_is_better(unit)),
                _ => "-".into(),
            };
            rows.push(Row { workload: name.clone(), metric: with_unit(&metric, unit), values: cells, ratio });
        }
        for r in runs.iter().flatten() {
            if let Some(u) = &r.unsupported {
                rows.push(Row {
                    workload: name.clone(),
                    metric: format!("{}: {u}", r.server_label),
                    values: vec![String::new(); runs.len()],
                    ratio: String::new(),
                });
            }
        }
    }
    rows
}

/// Waggle's value over the better of the peers' values (the larger when `higher_better`, else
/// the smaller), when Waggle's and a peer's are measured and the better one is not zero.
pub fn ratio_to_best(waggle: Option<f64>, peers: &[Option<f64>], higher_better: bool) -> String {
    let measured = peers.iter().flatten().copied();
    let best = if higher_better { measured.reduce(f64::max) } else { measured.reduce(f64::min) };
    ratio(waggle, best)
}

/// a / b, when both are measured and b is not zero.
pub fn ratio(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if b != 0.0 => format!("{:.2}", a / b),
        _ => "-".into(),
    }
}

/// The table's column heads: the metric's, one per server, and the ratio's when there are peers.
fn header(labels: &[String]) -> Vec<String> {
    let mut h = vec!["workload".to_string(), "metric".to_string()];
    h.extend(labels.iter().cloned());
    if labels.len() > 1 {
        h.push("Waggle / better peer".into());
    }
    h
}

fn cells(r: &Row, with_ratio: bool) -> Vec<String> {
    let mut c = vec![r.workload.clone(), r.metric.clone()];
    c.extend(r.values.iter().cloned());
    if with_ratio {
        c.push(r.ratio.clone());
    }
    c
}

/// The rows as an aligned text table, under `labels` (Waggle's first, then the peers').
pub fn render_table(labels: &[String], rows: &[Row]) -> String {
    let head = header(labels);
    let body: Vec<Vec<String>> = rows.iter().map(|r| cells(r, labels.len() > 1)).collect();
    let mut width: Vec<usize> = head.iter().map(|h| h.chars().count()).collect();
    for c in &body {
        for (w, cell) in width.iter_mut().zip(c) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |c: &[String]| {
        let mut s = String::new();
        for (i, (cell, w)) in c.iter().zip(&width).enumerate() {
            if i > 0 {
                s += "  ";
            }
            // the workload and the metric to the left, figures to the right
            if i < 2 {
                let _ = write!(s, "{cell:<w$}");
            } else {
                let _ = write!(s, "{cell:>w$}");
            }
        }
        s.trim_end().to_string() + "\n"
    };
    let mut s = line(&head);
    for c in &body {
        s += &line(c);
    }
    s
}

/// The rows as a Markdown table, under `labels`.
pub fn render_markdown(labels: &[String], rows: &[Row]) -> String {
    let head = header(labels);
    let mut s = format!("| {} |\n|---|---|{}\n", head.join(" | "), "---:|".repeat(head.len() - 2));
    for r in rows {
        let c: Vec<String> = cells(r, labels.len() > 1).into_iter().map(|c| c.replace('|', "\\|")).collect();
        let _ = writeln!(s, "| {} |", c.join(" | "));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload;

    fn report(name: &str, label: &str, p99: f64, rate: f64) -> RunReport {
        let mut r = RunReport::new(&workload::named(name).unwrap(), label, "127.0.0.1:1");
        r.window_s = 10.0;
        r.completed_per_s = rate;
        r.execution = Some(Summary { count: 10, mean_ms: 1.0, p50_ms: 1.0, p90_ms: 2.0, p99_ms: p99, max_ms: p99 });
        r
    }

    #[test]
    fn ratios() {
        assert_eq!(ratio(Some(50.0), Some(100.0)), "0.50");
        assert_eq!(ratio(Some(1.0), Some(0.0)), "-");
        assert_eq!(ratio(None, Some(1.0)), "-");
        // a rate against the faster peer, a latency against the quicker one
        assert_eq!(ratio_to_best(Some(1000.0), &[Some(50.0), Some(100.0)], true), "10.00");
        assert_eq!(ratio_to_best(Some(10.0), &[Some(50.0), Some(100.0)], false), "0.20");
        assert_eq!(ratio_to_best(Some(10.0), &[None, Some(100.0)], false), "0.10");
        assert_eq!(ratio_to_best(Some(10.0), &[None, None], false), "-");
        assert!(higher_is_better("PI/s") && !higher_is_better("ms") && !higher_is_better("MB"));
    }

    #[test]
    fn compares_side_by_side_and_marks_unsupported() {
        let mut unsupported = report("W4", "Camunda 7.24", 0.0, 0.0);
        unsupported.unsupported = Some("workload not supported by the server: timers".into());
        let groups = vec![
            vec![
                Some(report("W2", "Waggle", 20.0, 2000.0)),
                Some(report("W2", "Flowable 7.2", 400.0, 50.0)),
                Some(report("W2", "Camunda 7.24", 200.0, 100.0)),
            ],
            vec![Some(report("W4", "Waggle", 5.0, 500.0)), None, Some(unsupported)],
        ];
        let rows = compare_rows(&groups);
        let sustained = rows.iter().find(|r| r.metric == "sustained (completed) (PI/s)").unwrap();
        assert_eq!(sustained.values, vec!["2000", "50", "100"]);
        assert_eq!(sustained.ratio, "20.00", "against the faster peer");
        let p99 = rows.iter().find(|r| r.workload == "W2" && r.metric == "execution p99 (ms)").unwrap();
        assert_eq!(p99.ratio, "0.10", "against the quicker peer");
        let w4 = rows.iter().find(|r| r.workload == "W4" && r.metric == "timer lateness p99 (ms)").unwrap();
        assert_eq!(w4.values[1..], ["not run".to_string(), "unsupported".to_string()]);
        assert_eq!(w4.ratio, "-");
        let errors = rows.iter().find(|r| r.workload == "W2" && r.metric == "errors").unwrap();
        assert_eq!(errors.ratio, "-", "no ratio of counts");
        assert!(rows.iter().any(|r| r.metric.contains("Camunda 7.24: workload not supported by the server: timers")));
        let labels: Vec<String> = ["Waggle", "Flowable 7.2", "Camunda 7.24"].map(String::from).to_vec();
        let table = render_table(&labels, &rows);
        assert!(table.starts_with("workload"));
        assert!(table.lines().next().unwrap().ends_with("Waggle / better peer"));
        let md = render_markdown(&labels, &rows);
        assert_eq!(md.lines().count(), rows.len() + 2);
        assert!(md.starts_with(
            "| workload | metric | Waggle | Flowable 7.2 | Camunda 7.24 | Waggle / better peer |\n|---|---|---:|---:|---:|---:|\n"
        ));
        // Waggle alone: no ratio column
        let alone = compare_rows(&[vec![Some(report("W1", "Waggle", 52.0, 150.0))]]);
        assert!(!render_table(&labels[..1], &alone).contains("better peer"));
    }
}
