//! One measured run of one workload against one server: deploy, warm up, measure, drain.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use tokio::sync::Semaphore;

use crate::calls;
use crate::client::{self, Unsupported};
use crate::recorder::{self, Counts, Recorder};
use crate::report::{RunReport, Second, ServerStats};
use crate::server::{self, ProcSample};
use crate::starter::{EarlyEnd, Starter, Until};
use crate::worker::Worker;
use crate::workload::{self, Pace, Workload};

/// How long each phase lasts.
#[derive(Debug, Clone, Copy)]
pub struct Phases {
    /// Load before measuring (not counted).
    pub warmup: Duration,
    /// The measurement window: instances created in it are measured.
    pub duration: Duration,
    /// After the window, how long to wait for measured instances to finish.
    pub drain: Duration,
}

/// What the runner knows about the server process, if anything.
#[derive(Debug, Clone, Default)]
pub struct ServerInfo {
    pub label: String,
    pub pid: Option<u32>,
    /// Further processes of the same server (a cluster's other brokers): their CPU time and
    /// memory are added to `pid`'s.
    pub others: Vec<u32>,
    pub startup: Option<Duration>,
}

impl ServerInfo {
    /// CPU time and memory of the server's processes, summed; `None` without a pid or when one
    /// cannot be read.
    fn sample(&self) -> Option<ProcSample> {
        let pid = self.pid?;
        let mut total = server::sample(pid).ok()?;
        for &other in &self.others {
            let s = server::sample(other).ok()?;
            total.cpu_s += s.cpu_s;
            total.rss_bytes += s.rss_bytes;
            total.peak_rss_bytes += s.peak_rss_bytes;
        }
        Some(total)
    }
}

/// Runs `w` against `address`. A deployment the server rejects yields a report marked unsupported.
pub async fn run(w: &Workload, address: &str, server_info: &ServerInfo, phases: Phases) -> anyhow::Result<RunReport> {
    run_observed(w, address, server_info, phases, &mut |_| {}).await
}

/// As [`run`], calling `observe` with the run's recorder once a second during the window (a
/// soak samples the server and the latencies of each interval from it).
pub async fn run_observed(
    w: &Workload,
    address: &str,
    server_info: &ServerInfo,
    phases: Phases,
    observe: &mut (dyn FnMut(&Recorder) + Send),
) -> anyhow::Result<RunReport> {
    run_inner(w, address, server_info, phases, observe, &EarlyEnd::default()).await
}

/// As [`run`], with a window that ends early once `end` is told to (the load stops then, and the
/// report covers the window up to there).
pub async fn run_ending(
    w: &Workload,
    address: &str,
    server_info: &ServerInfo,
    phases: Phases,
    end: &EarlyEnd,
) -> anyhow::Result<RunReport> {
    run_inner(w, address, server_info, phases, &mut |_| {}, end).await
}

async fn run_inner(
    w: &Workload,
    address: &str,
    server_info: &ServerInfo,
    phases: Phases,
    observe: &mut (dyn FnMut(&Recorder) + Send),
    end: &EarlyEnd,
) -> anyhow::Result<RunReport> {
    client::check_loopback(address)?;
    let info = workload::inspect(&w.model)?;
    let mut control = client::connect(address).await?;
    if !client::is_ready(&mut control).await {
        client::wait_ready(address, Duration::from_secs(30)).await?;
    }
    let mut report = RunReport::new(w, &server_info.label, address);
    let idle = match server_info.pid {
        Some(_) => Some(server_info.sample().context("reading the server's /proc")?),
        None => None,
    };
    let mut resources = vec![(w.model_name.as_str(), w.model.as_str())];
    if let Some(d) = &w.decision {
        resources.push((d.name.as_str(), d.content.as_str()));
    }
    match client::deploy_all(&mut control, &resources).await {
        Ok(_) => {}
        Err(e) => match e.downcast::<Unsupported>() {
            Ok(u) => {
                report.unsupported = Some(u.to_string());
                return Ok(report);
            }
            Err(e) => return Err(e),
        },
    }
    let message = if w.publish_message {
        Some(info.message_name.clone().context("the workload publishes messages but the model declares none")?)
    } else {
        None
    };
    let start_message = if w.start_by_message {
        anyhow::ensure!(!w.with_result && !w.publish_message, "--start-by-message goes with neither --with-result nor --publish-message");
        anyhow::ensure!(
            info.message_start && info.has_tasks,
            "--start-by-message needs a model whose process has a message start event and a service task"
        );
        Some(info.message_name.clone().context("the model declares no message to start it with")?)
    } else {
        None
    };
    if info.has_tasks && info.last_tasks.is_empty() && !w.with_result {
        bail!("no service task of the model leads to an end event: use --with-result to measure completion");
    }
    if !info.has_tasks && !w.with_result {
        bail!("the model has no service task: completion is only visible with --with-result");
    }

    let recorder = Arc::new(Recorder::default());
    let outstanding = match w.pace {
        Pace::Max { outstanding } => Some(Arc::new(Semaphore::new(outstanding))),
        Pace::Rate(_) => None,
    };
    let worker = if info.has_tasks {
        let worker = Worker {
            client: client::connect(address).await?,
            calls: calls::connect(address).await?,
            job_type: w.job_type.clone(),
            delay: w.worker_delay,
            capacity: w.worker_capacity,
            // with a result, the creation call itself tells the instance finished
            last_tasks: if w.with_result { Arc::from([]) } else { info.last_tasks.clone().into() },
            recorder: recorder.clone(),
            outstanding: if w.with_result { None } else { outstanding.clone() },
            started_by_message: w.start_by_message,
        };
        Some(tokio::spawn(worker.run(w.stream)))
    } else {
        None
    };
    // let the job stream register before the first job exists
    tokio::time::sleep(Duration::from_millis(200)).await;

    let starter = Starter {
        client: client::connect(address).await?,
        calls: calls::connect(address).await?,
        process_id: info.process_id.clone(),
        payload: w.payload.as_str().into(),
        with_result: w.with_result,
        message,
        start_message,
        recorder: recorder.clone(),
        outstanding: outstanding.clone(),
        run_id: std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0),
    };
    let begin = Instant::now();
    let t0 = begin + phases.warmup;
    let until = Until::new(t0 + phases.duration, end.clone());
    let mut starting = tokio::spawn(starter.run(w.pace, until.clone()));

    tokio::time::sleep_until(t0.into()).await;
    let c0 = recorder.counts();
    let load0 = server::load_average();
    let s0 = server_info.sample();
    // the bench's own CPU over the window, as the server's (not its deployment, warm-up or drain)
    let client0 = server::sample(std::process::id())?;
    let mut series = vec![c0];
    let mut max_rss = s0.map(|s| s.rss_bytes);
    let mut tick = tokio::time::interval_at((t0 + Duration::from_secs(1)).into(), Duration::from_secs(1));
    while Instant::now() + Duration::from_millis(500) < until.get() {
        tick.tick().await;
        series.push(recorder.counts());
        if let Some(s) = server_info.sample() {
            max_rss = max_rss.max(Some(s.rss_bytes));
        }
        observe(&recorder);
    }
    tokio::time::sleep_until(until.get().into()).await;
    let t1 = until.get();
    let c1 = recorder.counts();
    let load1 = server::load_average();
    let s1 = server_info.sample();
    let client1 = server::sample(std::process::id())?;
    if series.last() != Some(&c1) {
        series.push(c1);
    }

    // drain: measured instances may still be running
    let drain_end = Instant::now() + phases.drain;
    let _ = tokio::time::timeout_at(drain_end.into(), &mut starting).await;
    starting.abort();
    while Instant::now() < drain_end {
        let c = recorder.counts();
        if c.finished >= c.created {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    if let Some(worker) = worker {
        worker.abort();
    }
    // the peak since the server started, read after the drain: a long instance (W9) peaks there
    let peak_rss = server_info.sample().map(|s| s.peak_rss_bytes);

    let window = t1 - t0;
    let lat = recorder::latencies(&recorder.events(), t0, t1);
    fill(&mut report, w, window, c0, c1, &series, &lat, &recorder);
    report.client_cpu_s = client1.cpu_s - client0.cpu_s;
    report.load_average = load0.zip(load1);
    report.server = server_stats(server_info, idle, s0, s1, max_rss, window);
    if let (Some(server), Some(peak)) = (report.server.as_mut(), peak_rss) {
        server.peak_rss_mb = Some(mb(peak));
    }
    Ok(report)
}

#[allow(clippy::too_many_arguments)]
fn fill(
    report: &mut RunReport,
    w: &Workload,
    window: Duration,
    c0: Counts,
    c1: Counts,
    series: &[Counts],
    lat: &recorder::Latencies,
    rec: &Recorder,
) {
    use crate::stats::rate;
    report.window_s = window.as_secs_f64();
    report.created_per_s = rate(c1.created - c0.created, window);
    report.completed_per_s = rate(c1.finished - c0.finished, window);
    report.rejected_per_s = rate(c1.rejected - c0.rejected, window);
    report.errors = c1.errors - c0.errors;
    report.skipped = c1.skipped - c0.skipped;
    report.backlog_start = c0.created as i64 - c0.finished as i64;
    report.backlog_end = c1.created as i64 - c1.finished as i64;
    report.measured_instances = lat.measured;
    report.unfinished_instances = lat.unfinished;
    report.execution = lat.execution.summary();
    report.job_lifetime = lat.job_lifetime.summary();
    report.activation = lat.activation.summary();
    report.correlation = lat.correlation.summary();
    report.timer_lateness = w.timer.and_then(|t| lat.execution.shifted(-t.as_secs_f64() * 1000.0).summary());
    report.series = series
        .windows(2)
        .enumerate()
        .map(|(i, p)| {
            let execution = lat.execution_by_second.get(i).and_then(|s| s.summary());
            Second {
                second: i + 1,
                created: p[1].created - p[0].created,
                completed: p[1].finished - p[0].finished,
                rejected: p[1].rejected - p[0].rejected,
                execution_p50_ms: execution.as_ref().map(|e| e.p50_ms),
                execution_p99_ms: execution.as_ref().map(|e| e.p99_ms),
            }
        })
        .collect();
    report.first_errors = rec.first_errors();
    report.jobs_pushed = rec.pushed.load(std::sync::atomic::Ordering::Relaxed);
    report.jobs_polled = rec.polled.load(std::sync::atomic::Ordering::Relaxed);
    // a rate held at p99 under 1 s; not for one long instance at a time (W9)
    if let (Pace::Max { .. }, false) = (w.pace, w.one_at_a_time) {
        let p99_ok = report.execution.as_ref().is_some_and(|e| e.p99_ms < 1000.0);
        report.held = Some(p99_ok && report.unfinished_instances == 0 && report.errors == 0);
    }
}

fn server_stats(
    info: &ServerInfo,
    idle: Option<ProcSample>,
    s0: Option<ProcSample>,
    s1: Option<ProcSample>,
    max_rss: Option<u64>,
    window: Duration,
) -> Option<ServerStats> {
    info.pid?;
    let cpu_s = match (s0, s1) {
        (Some(a), Some(b)) => Some(b.cpu_s - a.cpu_s),
        _ => None,
    };
    Some(ServerStats {
        pid: info.pid,
        startup_s: info.startup.map(|d| d.as_secs_f64()),
        idle_rss_mb: idle.map(|s| mb(s.rss_bytes)),
        window_max_rss_mb: max_rss.map(mb),
        peak_rss_mb: s1.map(|s| mb(s.peak_rss_bytes)),
        cpu_s,
        cpu_cores: cpu_s.map(|c| c / window.as_secs_f64()),
    })
}

fn mb(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}
