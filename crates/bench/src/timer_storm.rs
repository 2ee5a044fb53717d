//! `waggle bench timer-storm`: many timers due at the same moment, and what that does to the
//! latency of job completions running beside them (the BPMN issue's scheduling benchmark).
//!
//! 1. Creates `--timers` instances of a model whose timer catch event waits until one date
//!    (`--lead` after the start), then activates a job of type `storm-fired`.
//! 2. Meanwhile a probe creates one-task instances at `--probe-rate` and completes their jobs
//!    at once, timing each CompleteJob call.
//! 3. When the timers are due, a worker takes the `storm-fired` jobs in large batches (and
//!    leaves them: completing 100,000 jobs is not what is measured).
//!
//! Reports the CompleteJob latency of the probe before, during (from the due date until the
//! last timer's job was taken) and after the storm, and how late the timers' jobs were taken.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use clap::Args;
use serde::Serialize;
use waggle_protocol::gateway::{ActivateJobsRequest, CompleteJobRequest, CreateProcessInstanceRequest};

use crate::client::{self, Client};
use crate::stats::{Samples, Summary};

const STORM_MODEL: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<bpmn:definitions xmlns:bpmn="http://www.omg.org/spec/BPMN/20100524/MODEL" xmlns:zeebe="http://camunda.org/schema/zeebe/1.0" id="storm" targetNamespace="https://waggle.dev/bench">
  <bpmn:process id="timer-storm" isExecutable="true">
    <bpmn:startEvent id="start"/>
    <bpmn:sequenceFlow id="f1" sourceRef="start" targetRef="wait"/>
    <bpmn:intermediateCatchEvent id="wait"><bpmn:timerEventDefinition><bpmn:timeDate>=due</bpmn:timeDate></bpmn:timerEventDefinition></bpmn:intermediateCatchEvent>
    <bpmn:sequenceFlow id="f2" sourceRef="wait" targetRef="fired"/>
    <bpmn:serviceTask id="fired"><bpmn:extensionElements><zeebe:taskDefinition type="storm-fired"/></bpmn:extensionElements></bpmn:serviceTask>
    <bpmn:sequenceFlow id="f3" sourceRef="fired" targetRef="end"/>
    <bpmn:endEvent id="end"/>
  </bpmn:process>
  <bpmn:process id="storm-probe" isExecutable="true">
    <bpmn:startEvent id="probe_start"/>
    <bpmn:sequenceFlow id="p1" sourceRef="probe_start" targetRef="probe"/>
    <bpmn:serviceTask id="probe"><bpmn:extensionElements><zeebe:taskDefinition type="storm-probe"/></bpmn:extensionElements></bpmn:serviceTask>
    <bpmn:sequenceFlow id="p2" sourceRef="probe" targetRef="probe_end"/>
    <bpmn:endEvent id="probe_end"/>
  </bpmn:process>
</bpmn:definitions>"#;

#[derive(Debug, Args)]
pub struct TimerStormArgs {
    /// Gateway address of the server (loopback only).
    #[arg(long, default_value = "127.0.0.1:26500")]
    pub target: String,
    /// Timers due at the same moment.
    #[arg(long, default_value_t = 100_000)]
    pub timers: u64,
    /// How long after the start the timers are due (creating them must fit in it).
    #[arg(long, default_value = "60s", value_parser = crate::workload::parse_duration)]
    pub lead: Duration,
    /// Probe instances per second whose job completions are timed.
    #[arg(long, default_value_t = 100.0)]
    pub probe_rate: f64,
    /// Jobs the storm worker asks for per ActivateJobs (one activation command on the server).
    #[arg(long, default_value_t = 1000)]
    pub fired_batch: i32,
    /// Also write the report as JSON to this file.
    #[arg(long)]
    pub json: Option<std::path::PathBuf>,
}

/// CompleteJob latency of the probe, per phase, and the lateness of the timers' jobs.
#[derive(Debug, Serialize)]
pub struct StormReport {
    pub timers: u64,
    pub created: u64,
    pub creation_seconds: f64,
    pub creation_rejections: u64,
    /// Taken by the storm worker (each is one fired timer).
    pub fired: u64,
    /// From the due date until the last timer's job was taken.
    pub storm_seconds: f64,
    /// How late after the due date each timer's job was taken (ms).
    pub fired_lateness: Option<Summary>,
    pub complete_before: Option<Summary>,
    pub complete_during: Option<Summary>,
    pub complete_after: Option<Summary>,
}

fn epoch_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

fn rfc3339(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms).map(|d| d.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()).unwrap_or_default()
}

pub async fn run(args: &TimerStormArgs) -> anyhow::Result<StormReport> {
    client::check_loopback(&args.target)?;
    let mut c = client::connect(&args.target).await?;
    client::deploy(&mut c, "timer-storm.bpmn", STORM_MODEL).await?;
    let start = Instant::now();
    let due_ms = epoch_ms() + args.lead.as_millis() as i64;
    let due_at = start + args.lead;
    let done = Arc::new(AtomicBool::new(false));
    // probe: completions timed, stamped with when they happened
    let completions: Arc<Mutex<Vec<(Instant, Duration)>>> = Arc::default();
    let probe = tokio::spawn(probe(args.target.clone(), args.probe_rate, done.clone(), completions.clone()));
    // the storm worker
    let fired: Arc<Mutex<Vec<Instant>>> = Arc::default();
    let worker = tokio::spawn(storm_worker(args.target.clone(), args.fired_batch, done.clone(), fired.clone()));
    // creations, 16 at a time
    let next = Arc::new(AtomicU64::new(0));
    let rejected = Arc::new(AtomicU64::new(0));
    let variables = format!(r#"{{"due": "{}"}}"#, rfc3339(due_ms));
    let mut creators = Vec::new();
    for _ in 0..16 {
        let (next, rejected, variables, target, n) = (next.clone(), rejected.clone(), variables.clone(), args.target.clone(), args.timers);
        creators.push(tokio::spawn(async move {
            let mut c = client::connect(&target).await?;
            while next.fetch_add(1, Ordering::Relaxed) < n {
                loop {
                    let request = CreateProcessInstanceRequest {
                        bpmn_process_id: "timer-storm".into(),
                        version: -1,
                        variables: variables.clone(),
                        ..Default::default()
                    };
                    match c.create_process_instance(request).await {
                        Ok(_) => break,
                        Err(s) if s.code() == tonic::Code::ResourceExhausted => {
                            rejected.fetch_add(1, Ordering::Relaxed);
                            tokio::time::sleep(Duration::from_millis(5)).await;
                        }
                        Err(s) => anyhow::bail!("creating a timer instance: {:?}: {}", s.code(), s.message()),
                    }
                }
            }
            anyhow::Ok(())
        }));
    }
    for creator in creators {
        creator.await??;
    }
    let creation_seconds = start.elapsed().as_secs_f64();
    if Instant::now() > due_at {
        eprintln!("timer-storm: creating {} instances took {creation_seconds:.1} s, longer than --lead: raise it", args.timers);
    }
    // wait for every timer's job, or give up two minutes after the due date
    let give_up = due_at + Duration::from_secs(120);
    while fired.lock().expect("fired").len() < args.timers as usize && Instant::now() < give_up {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let storm_end = fired.lock().expect("fired").iter().max().copied().unwrap_or(due_at);
    // a few seconds of calm after the storm
    tokio::time::sleep(Duration::from_secs(3)).await;
    done.store(true, Ordering::Relaxed);
    probe.await.context("probe")??;
    worker.await.context("worker")??;

    let (mut before, mut during, mut after) = (Samples::new(), Samples::new(), Samples::new());
    for (at, latency) in completions.lock().expect("completions").iter() {
        let phase = if *at < due_at {
            &mut before
        } else if *at <= storm_end {
            &mut during
        } else {
            &mut after
        };
        phase.push(*latency);
    }
    let fired = fired.lock().expect("fired").clone();
    let mut lateness = Samples::new();
    for at in &fired {
        lateness.push_ms(at.saturating_duration_since(due_at).as_secs_f64() * 1000.0);
    }
    Ok(StormReport {
        timers: args.timers,
        created: args.timers.min(next.load(Ordering::Relaxed)),
        creation_seconds,
        creation_rejections: rejected.load(Ordering::Relaxed),
        fired: fired.len() as u64,
        storm_seconds: storm_end.saturating_duration_since(due_at).as_secs_f64(),
        fired_lateness: lateness.summary(),
        complete_before: before.summary(),
        complete_during: during.summary(),
        complete_after: after.summary(),
    })
}

/// Creates probe instances at `rate` and completes their jobs at once, timing CompleteJob.
async fn probe(target: String, rate: f64, done: Arc<AtomicBool>, completions: Arc<Mutex<Vec<(Instant, Duration)>>>) -> anyhow::Result<()> {
    let mut creator = client::connect(&target).await?;
    let creating = {
        let done = done.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate.max(0.1)));
            while !done.load(Ordering::Relaxed) {
                tick.tick().await;
                let request = CreateProcessInstanceRequest { bpmn_process_id: "storm-probe".into(), version: -1, ..Default::default() };
                let _ = creator.create_process_instance(request).await;
            }
        })
    };
    let mut c = client::connect(&target).await?;
    while !done.load(Ordering::Relaxed) {
        let jobs = activate(&mut c, "storm-probe", 32, 200, 60_000).await?;
        for key in jobs {
            let t = Instant::now();
            c.complete_job(CompleteJobRequest { job_key: key, variables: String::new() }).await.context("completing a probe job")?;
            completions.lock().expect("completions").push((Instant::now(), t.elapsed()));
        }
    }
    creating.abort();
    Ok(())
}

/// Takes the fired timers' jobs in batches, noting when each was taken. They are not completed
/// (a slow completer would hold back the next activation and hide when the timers fired); a
/// long job timeout keeps them from coming back.
async fn storm_worker(target: String, batch: i32, done: Arc<AtomicBool>, fired: Arc<Mutex<Vec<Instant>>>) -> anyhow::Result<()> {
    let mut c = client::connect(&target).await?;
    while !done.load(Ordering::Relaxed) {
        let jobs = activate(&mut c, "storm-fired", batch, 500, 3_600_000).await?;
        let taken = Instant::now();
        fired.lock().expect("fired").extend(std::iter::repeat_n(taken, jobs.len()));
    }
    Ok(())
}

async fn activate(c: &mut Client, job_type: &str, max: i32, request_timeout_ms: i64, job_timeout_ms: i64) -> anyhow::Result<Vec<i64>> {
    let request = ActivateJobsRequest {
        r#type: job_type.into(),
        worker: "timer-storm".into(),
        timeout: job_timeout_ms,
        max_jobs_to_activate: max,
        request_timeout: request_timeout_ms,
        ..Default::default()
    };
    let mut stream = c.activate_jobs(request).await.context("activating jobs")?.into_inner();
    let mut keys = Vec::new();
    while let Some(response) = stream.message().await.context("activating jobs")? {
        keys.extend(response.jobs.iter().map(|j| j.key));
    }
    Ok(keys)
}

/// The report as text.
pub fn render(r: &StormReport) -> String {
    let line = |name: &str, s: &Option<Summary>| match s {
        Some(s) => format!("  {name:<28} n={:<7} p50 {:>8.2} ms  p99 {:>8.2} ms  max {:>8.2} ms\n", s.count, s.p50_ms, s.p99_ms, s.max_ms),
        None => format!("  {name:<28} (no samples)\n"),
    };
    let mut out = format!(
        "timer storm: {} timers due at once (created {} in {:.1} s, {} back-pressure rejections); {} fired, the last {:.2} s after the due date\n",
        r.timers, r.created, r.creation_seconds, r.creation_rejections, r.fired, r.storm_seconds
    );
    out.push_str(&line("timer job taken after due", &r.fired_lateness));
    out.push_str(&line("CompleteJob before the storm", &r.complete_before));
    out.push_str(&line("CompleteJob during the storm", &r.complete_during));
    out.push_str(&line("CompleteJob after the storm", &r.complete_after));
    out
}
