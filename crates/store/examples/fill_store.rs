//! Fills a query store with finished process instances for issue 28's benchmark
//! (docs/performance.md, "A million finished instances"; `scripts/bigstore-bench.sh` runs it).
//!
//!   cargo run -p waggle-store --example fill_store -- LOCATION INSTANCES
//!
//! LOCATION is an SQLite file or a `postgres://` URL. The records are real: Waggle's engine
//! runs the instances in memory (no log, no network: the fastest way to a million), and every
//! record it writes, commands and events, goes through the store's real exporter in rounds as
//! the broker's export runner hands them over. Five one-task processes (`order-1` to
//! `order-5`, `order-1` in two versions); instances start evenly over the 30 days before
//! 2026-11-01, 500 per engine batch; of each batch 90 % complete their job (with a variable)
//! and 10 % are cancelled. Then 1,000 instances are left active, every other one with an
//! incident (its job failed with no retries left). Each instance stores 1 instance row, 4
//! element rows, 1 job and 2-3 variables.
//!
//! `FILL_FLUSH_EACH=1` flushes the exporter after every engine batch (creations, activations,
//! completions each a commit, so an instance's end updates its row, as under W2's load)
//! instead of after every 500 instances' three batches (their ends folded into the inserts).
//!
//! The records are partition 2's, so that a one-partition node serving the store makes no key
//! of theirs. Prints the exporter's wall time and its thread's CPU time per record (all records
//! handed over, as the export-lag figures count them; the CPU time from Linux's
//! `/proc/thread-self/schedstat`, so a loaded machine's waits are left out: issue 27's
//! harness, docs/performance.md "Data lag of the query store"), then drops the exporter's
//! stored position (running it again writes the same instances again: the engine makes the
//! same keys).

use std::time::{Duration, Instant};

use serde_json::json;
use waggle_engine::{Command, Engine, NoJobStreams, ProcessingContext};
use waggle_exporter::{Context, Controller, Exporter};
use waggle_protocol::record::Intent;
use waggle_protocol::value::{
    DeploymentRecord, DeploymentResource, JobBatchRecord, JobRecord, ProcessInstanceCreationRecord, ProcessInstanceRecord,
};
use waggle_protocol::{Record, RecordValue};
use waggle_state::{KvStore, MemoryStore, Overlay};
use waggle_store::exporter::{self, StoreConfig};
use waggle_store::{Connection, Location};

const ONE_TASK: &str = include_str!("../../../workloads/one_task.bpmn");
const BATCH: usize = 500;
/// The records are partition 2's (keys and rows): a single-partition node opening the store
/// makes no key of theirs.
const PARTITION: u16 = 2;
const PROCESSES: usize = 5;
/// 2026-10-02T00:00:00Z: the first instance's start.
const FIRST_START_MS: i64 = 1_790_899_200_000;
const DAYS_MS: i64 = 30 * 86_400_000;

struct Fill {
    engine: Engine,
    state: MemoryStore,
    exporter: Box<dyn Exporter>,
    controller: Controller,
    position: u64,
    records: u64,
    export_time: Duration,
    /// The exporter's CPU time on this thread (zero where Linux's schedstat is missing).
    export_cpu: Duration,
    /// Flush after every engine batch (`FILL_FLUSH_EACH=1`).
    flush_each: bool,
}

/// This thread's CPU time so far (`/proc/thread-self/schedstat`'s first field, in ns), or
/// zero where it is missing.
fn thread_cpu() -> Duration {
    let ns = std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|n| n.parse::<u64>().ok()))
        .unwrap_or(0);
    Duration::from_nanos(ns)
}

impl Fill {
    /// Runs commands as one engine batch at `now_ms` and hands its records to the exporter.
    fn run(&mut self, now_ms: i64, commands: Vec<Command>) -> Vec<Record> {
        let ctx = ProcessingContext { now_ms, job_streams: &NoJobStreams, partition_count: 2, message_partition_count: 0 };
        let mut overlay = Overlay::new(&self.state);
        let output = self.engine.process_batch(&mut overlay, &ctx, commands);
        let writes = overlay.into_writes();
        self.state.commit(&writes).expect("commit");
        let mut records = output.entry().map(|e| e.records).unwrap_or_default();
        let (started, cpu) = (Instant::now(), thread_cpu());
        for r in &mut records {
            self.position += 1;
            r.position = self.position;
            self.exporter.export(r, &mut self.controller).expect("export");
        }
        self.export_time += started.elapsed();
        self.export_cpu += thread_cpu().saturating_sub(cpu);
        self.records += records.len() as u64;
        if self.flush_each {
            self.flush();
        }
        records
    }

    fn flush(&mut self) {
        let (started, cpu) = (Instant::now(), thread_cpu());
        self.exporter.flush(&mut self.controller).expect("flush");
        self.export_time += started.elapsed();
        self.export_cpu += thread_cpu().saturating_sub(cpu);
    }
}

fn process_xml(n: usize, version: usize) -> String {
    ONE_TASK
        .replace("id=\"benchmark\"", &format!("id=\"order-{n}\" name=\"Order {n} v{version}\""))
        .replace("bpmnElement=\"benchmark\"", &format!("bpmnElement=\"order-{n}\""))
        .replace("benchmark-task", &format!("task-{n}"))
}

fn create(process: &str, i: u64) -> Command {
    let variables = json!({"orderId": format!("ORD-{i:07}"), "amount": (i * 37) % 1000});
    let value = ProcessInstanceCreationRecord {
        bpmn_process_id: process.into(),
        version: -1,
        variables: variables.to_string(),
        ..Default::default()
    };
    Command::new(-1, Intent::Create, RecordValue::ProcessInstanceCreation(value))
}

/// Instance keys of the created instances in `records`.
fn created(records: &[Record]) -> Vec<i64> {
    records
        .iter()
        .filter_map(|r| match &r.value {
            RecordValue::ProcessInstance(pi) if r.intent == Intent::ElementActivating && &*pi.bpmn_element_type == "PROCESS" => {
                Some(pi.process_instance_key)
            }
            _ => None,
        })
        .collect()
}

/// Activates the jobs of `job_type`; returns (instance key, job key) pairs.
fn activate(fill: &mut Fill, now_ms: i64, job_type: &str, max: usize) -> Vec<(i64, i64)> {
    let batch = JobBatchRecord {
        job_type: job_type.into(),
        worker: "fill".into(),
        timeout_ms: 600_000,
        max_jobs_to_activate: max as i32,
        ..Default::default()
    };
    let records = fill.run(now_ms, vec![Command::new(-1, Intent::Activate, RecordValue::JobBatch(batch))]);
    let mut jobs = Vec::new();
    for r in &records {
        if let RecordValue::JobBatch(b) = &r.value {
            jobs.extend(b.job_keys.iter().zip(&b.jobs).map(|(key, job)| (job.process_instance_key, *key)));
        }
    }
    jobs
}

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let (Some(location), Some(instances)) = (args.next(), args.next()) else {
        anyhow::bail!("usage: fill_store LOCATION INSTANCES");
    };
    let instances: u64 = instances.parse()?;
    let location = if Location::is_postgres_url(&location) { Location::Postgres(location) } else { Location::Sqlite(location.into()) };
    let factory = exporter::factory("query-store", StoreConfig { location: location.clone(), history_ttl: None })?;
    let mut exporter = factory.make();
    exporter.configure(&Context { exporter_id: "query-store".into(), partition_id: PARTITION })?;
    let mut controller = Controller::new(0);
    exporter.open(&mut controller)?;
    let mut fill = Fill {
        engine: Engine::new(PARTITION),
        state: MemoryStore::new(),
        exporter,
        controller,
        position: 0,
        records: 0,
        export_time: Duration::ZERO,
        export_cpu: Duration::ZERO,
        flush_each: std::env::var_os("FILL_FLUSH_EACH").is_some_and(|v| v == "1"),
    };
    let started = Instant::now();
    let mut now = FIRST_START_MS - 3_600_000;
    for n in 1..=PROCESSES {
        for version in 1..=(if n == 1 { 2 } else { 1 }) {
            let deploy = DeploymentRecord {
                resources: vec![DeploymentResource {
                    resource_name: format!("order-{n}.bpmn"),
                    resource: process_xml(n, version).into_bytes(),
                }],
                ..Default::default()
            };
            fill.run(now, vec![Command::new(-1, Intent::Create, RecordValue::Deployment(deploy))]);
            now += 1_000;
        }
    }
    fill.flush();
    let step = DAYS_MS / instances.max(1) as i64;
    let mut done = 0u64;
    while done < instances {
        let n = BATCH.min((instances - done) as usize);
        // one process per batch, in turn: the jobs of a batch are of one type
        let process = 1 + (done / BATCH as u64) as usize % PROCESSES;
        now = FIRST_START_MS + done as i64 * step;
        let records = fill.run(now, (0..n as u64).map(|i| create(&format!("order-{process}"), done + i)).collect());
        let keys = created(&records);
        assert_eq!(keys.len(), n, "instances created: {records:?}");
        let jobs = activate(&mut fill, now + 1_000, &format!("task-{process}"), n);
        assert_eq!(jobs.len(), n, "jobs activated");
        let mut commands = Vec::with_capacity(n);
        for (i, (instance, job)) in jobs.into_iter().enumerate() {
            commands.push(if i % 10 == 9 {
                Command::new(instance, Intent::Cancel, RecordValue::ProcessInstance(ProcessInstanceRecord::default()))
            } else {
                Command::new(
                    job,
                    Intent::Complete,
                    RecordValue::Job(JobRecord { variables: r#"{"approved":true}"#.into(), ..Default::default() }),
                )
            });
        }
        fill.run(now + 2_000 + (done % 7_000) as i64, commands);
        fill.flush();
        done += n as u64;
        if done.is_multiple_of(100_000) {
            eprintln!("{done} instances, {:.0} s", started.elapsed().as_secs_f64());
        }
    }
    // 1,000 left active, every other one with an incident
    now = FIRST_START_MS + DAYS_MS;
    let records = fill.run(now, (0..1_000).map(|i| create("order-1", instances + i)).collect());
    assert_eq!(created(&records).len(), 1_000);
    let jobs = activate(&mut fill, now + 1_000, "task-1", 1_000);
    let fail = |job: i64| {
        Command::new(job, Intent::Fail, RecordValue::Job(JobRecord { retries: 0, error_message: "no stock".into(), ..Default::default() }))
    };
    fill.run(now + 2_000, jobs.iter().step_by(2).map(|(_, job)| fail(*job)).collect());
    fill.flush();
    let elapsed = started.elapsed();
    let mut exporter = fill.exporter;
    exporter.close();
    let conn = Connection::open(&location)?;
    conn.execute("DELETE FROM exporter_position", &[])?;
    println!(
        "{} instances, {} records in {:.1} s; exporter {:.1} s: {:.2} µs per record (wall, {location}), {:.2} µs CPU per record",
        instances + 1_000,
        fill.records,
        elapsed.as_secs_f64(),
        fill.export_time.as_secs_f64(),
        fill.export_time.as_secs_f64() * 1e6 / fill.records as f64,
        fill.export_cpu.as_secs_f64() * 1e6 / fill.records as f64
    );
    Ok(())
}
