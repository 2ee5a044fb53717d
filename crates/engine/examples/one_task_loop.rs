//! The engine alone on W2's pattern, for profiling its CPU cost per process instance without
//! the gateway, Raft or a client: batches of creations (one-task model, 0.5 KB payload, jobs
//! pushed to a stream) and batches of completions, each batch's writes committed to RocksDB
//! and its log entry encoded, as the broker does.
//!
//! `cargo run --example one_task_loop -- [instances] [batch]`; prints µs per instance.

use std::time::Instant;

use waggle_engine::{Command, Engine, JobStreamTarget, JobStreams, ProcessingContext, SideEffect};
use waggle_protocol::value::{DeploymentRecord, DeploymentResource, JobRecord, ProcessInstanceCreationRecord};
use waggle_protocol::{Intent, RecordValue};
use waggle_state::{KvStore, Overlay, RocksStore};

const MODEL: &str = include_str!("../../../workloads/one_task.bpmn");
const PAYLOAD: &str = include_str!("../../../workloads/payload_typical.json");

struct OneStream;

impl JobStreams for OneStream {
    fn stream_for(&self, _job_type: &str) -> Option<JobStreamTarget> {
        Some(JobStreamTarget { stream_id: 1, worker: "loop".into(), timeout_ms: 60_000, fetch_variables: vec![] })
    }
}

fn run_batch(engine: &mut Engine, store: &RocksStore, now_ms: i64, commands: Vec<Command>) -> Vec<i64> {
    let ctx = ProcessingContext { now_ms, job_streams: &OneStream, partition_count: 1, message_partition_count: 0 };
    let mut overlay = Overlay::new(store);
    let output = engine.process_batch(&mut overlay, &ctx, commands);
    let writes = overlay.into_writes();
    std::hint::black_box(output.encoded_entry());
    store.commit_owned(writes).expect("commit");
    engine.recycle(output.records);
    output
        .side_effects
        .into_iter()
        .filter_map(|e| match e {
            SideEffect::PushJob { job_key, .. } => Some(job_key),
            _ => None,
        })
        .collect()
}

fn main() {
    let mut args = std::env::args().skip(1);
    let instances: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(50_000);
    let batch: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(16);
    let dir = std::env::temp_dir().join(format!("waggle-one-task-loop-{}", std::process::id()));
    let store =
        RocksStore::open_with_point_tables(&dir, waggle_engine::POINT_TABLES, Some(waggle_engine::stored_absence(1))).expect("open store");
    let mut engine = Engine::new(1);
    let deploy = DeploymentRecord {
        resources: vec![DeploymentResource { resource_name: "one_task.bpmn".into(), resource: MODEL.as_bytes().to_vec() }],
        ..Default::default()
    };
    run_batch(&mut engine, &store, 0, vec![Command::new(-1, Intent::Create, RecordValue::Deployment(deploy))]);
    // the deployment's commit is flushed at once by a thread of the store's (so that the key
    // counter of RocksDB's state is known); waiting for it keeps the count of instructions
    // independent of when that thread runs
    store.flush_write_back().expect("flush");
    let create = || {
        let value = ProcessInstanceCreationRecord {
            bpmn_process_id: "benchmark".into(),
            version: -1,
            variables: PAYLOAD.trim().into(),
            ..Default::default()
        };
        Command::new(-1, Intent::Create, RecordValue::ProcessInstanceCreation(value))
    };
    let started = Instant::now();
    let mut done = 0;
    let mut jobs = Vec::new();
    while done < instances {
        let now = started.elapsed().as_millis() as i64 + 1;
        let n = batch.min(instances - done);
        jobs.extend(run_batch(&mut engine, &store, now, (0..n).map(|_| create()).collect()));
        let completes = jobs.drain(..).map(|key| Command::new(key, Intent::Complete, RecordValue::Job(JobRecord::default()))).collect();
        run_batch(&mut engine, &store, now, completes);
        done += n;
    }
    let elapsed = started.elapsed();
    println!(
        "{instances} instances in batches of {batch}: {:.1} µs per instance ({:.0} instances/s)",
        elapsed.as_secs_f64() * 1e6 / instances as f64,
        instances as f64 / elapsed.as_secs_f64()
    );
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
}
