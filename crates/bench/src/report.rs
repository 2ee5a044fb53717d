//! Results: one run's report, the metrics shown per workload, the side-by-side table, JSON and
//! Markdown output.

use std::fmt::Write as _;

use serde::Serialize;

use crate::stats::Summary;
use crate::workload::Workload;

/// Counts of one second of the measurement window.
#[derive(Debug, Clone, Serialize)]
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
#[derive(Debug, Clone, Serialize)]
pub struct ServerStats {
    pub pid: Option<u32>,
    /// Spawn → every partition has a healthy leader (servers the bench started).
    pub startup_s: Option<f64>,
    /// Resident memory once ready, before the load.
    pub idle_rss_mb: Option<f64>,
    /// Highest resident memory sampled (each second) in the window.
    pub window_max_rss_mb: Option<f64>,
    /// VmHWM at the end of the window: the peak since the process started.
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
        "W2" => out.push(m("sustained (completed)", "PI/s", Some(r.completed_per_s))),
        _ => {}
    }
    if r.workload.name != "W4" {
        pcts(&mut out, "execution", &r.execution);
    }
    if r.workload.name != "W2" {
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

/// One row of the comparison.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub workload: String,
    pub metric: String,
    pub waggle: String,
    pub zeebe: String,
    pub ratio: String,
}

/// Rows comparing Waggle's and Zeebe's reports of the same workloads (pairs in order).
pub fn compare_rows(pairs: &[(Option<RunReport>, Option<RunReport>)]) -> Vec<Row> {
    let mut rows = vec![];
    for (waggle, zeebe) in pairs {
        let name = waggle.as_ref().or(zeebe.as_ref()).map(|r| r.workload.name.clone()).unwrap_or_default();
        let side_note = |r: &Option<RunReport>| match r {
            None => Some("not run".to_string()),
            Some(r) => r.unsupported.clone().map(|_| "unsupported".to_string()),
        };
        let (wn, zn) = (side_note(waggle), side_note(zeebe));
        let wm = waggle.as_ref().filter(|_| wn.is_none()).map(metrics).unwrap_or_default();
        let zm = zeebe.as_ref().filter(|_| zn.is_none()).map(metrics).unwrap_or_default();
        let names: Vec<(String, &'static str)> = if wm.is_empty() { &zm } else { &wm }.iter().map(|x| (x.name.clone(), x.unit)).collect();
        if names.is_empty() {
            rows.push(Row {
                workload: name.clone(),
                metric: "-".into(),
                waggle: wn.unwrap_or_default(),
                zeebe: zn.unwrap_or_default(),
                ratio: "-".into(),
            });
            continue;
        }
        for (metric, unit) in names {
            let find = |ms: &[Metric]| ms.iter().find(|x| x.name == metric).and_then(|x| x.value);
            let (a, b) = (find(&wm), find(&zm));
            rows.push(Row {
                workload: name.clone(),
                metric: with_unit(&metric, unit),
                waggle: wn.clone().unwrap_or_else(|| num(a)),
                zeebe: zn.clone().unwrap_or_else(|| num(b)),
                ratio: ratio(a, b),
            });
        }
        for (label, r) in [("Waggle", waggle), ("Zeebe", zeebe)] {
            if let Some(u) = r.as_ref().and_then(|r| r.unsupported.as_ref()) {
                rows.push(Row {
                    workload: name.clone(),
                    metric: format!("{label}: {u}"),
                    waggle: String::new(),
                    zeebe: String::new(),
                    ratio: String::new(),
                });
            }
        }
    }
    rows
}

/// Waggle / Zeebe, when both are measured and Zeebe's is not zero.
pub fn ratio(waggle: Option<f64>, zeebe: Option<f64>) -> String {
    match (waggle, zeebe) {
        (Some(a), Some(b)) if b != 0.0 => format!("{:.2}", a / b),
        _ => "-".into(),
    }
}

/// The rows as an aligned text table.
pub fn render_table(rows: &[Row]) -> String {
    let header = ["workload", "metric", "Waggle", "peer", "Waggle/peer"];
    let cells: Vec<[&str; 5]> = rows.iter().map(|r| [r.workload.as_str(), &r.metric, &r.waggle, &r.zeebe, &r.ratio]).collect();
    let mut width = header.map(str::len);
    for c in &cells {
        for (w, cell) in width.iter_mut().zip(c) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |c: [&str; 5]| {
        format!(
            "{:<w0$}  {:<w1$}  {:>w2$}  {:>w3$}  {:>w4$}\n",
            c[0],
            c[1],
            c[2],
            c[3],
            c[4],
            w0 = width[0],
            w1 = width[1],
            w2 = width[2],
            w3 = width[3],
            w4 = width[4]
        )
    };
    let mut s = line(header);
    for c in cells {
        s += &line(c);
    }
    s
}

/// The rows as a Markdown table.
pub fn render_markdown(rows: &[Row]) -> String {
    let mut s = String::from("| workload | metric | Waggle | peer | Waggle/peer |\n|---|---|---:|---:|---:|\n");
    for r in rows {
        let _ = writeln!(s, "| {} | {} | {} | {} | {} |", r.workload, r.metric.replace('|', "\\|"), r.waggle, r.zeebe, r.ratio);
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
    }

    #[test]
    fn compares_side_by_side_and_marks_unsupported() {
        let mut unsupported = report("W4", "Waggle", 0.0, 0.0);
        unsupported.unsupported = Some("workload not supported by the server: timers".into());
        let pairs = vec![
            (Some(report("W2", "Waggle", 20.0, 2000.0)), Some(report("W2", "Zeebe", 40.0, 1000.0))),
            (Some(unsupported), Some(report("W4", "Zeebe", 5.0, 500.0))),
        ];
        let rows = compare_rows(&pairs);
        let sustained = rows.iter().find(|r| r.metric == "sustained (completed) (PI/s)").unwrap();
        assert_eq!((sustained.waggle.as_str(), sustained.zeebe.as_str(), sustained.ratio.as_str()), ("2000", "1000", "2.00"));
        let p99 = rows.iter().find(|r| r.workload == "W2" && r.metric == "execution p99 (ms)").unwrap();
        assert_eq!(p99.ratio, "0.50");
        assert!(rows.iter().any(|r| r.workload == "W4" && r.waggle == "unsupported"));
        assert!(rows.iter().any(|r| r.metric.contains("workload not supported by the server: timers")));
        let table = render_table(&rows);
        assert!(table.starts_with("workload"));
        assert_eq!(render_markdown(&rows).lines().count(), rows.len() + 2);
    }
}
