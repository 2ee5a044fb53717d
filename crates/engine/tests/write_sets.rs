//! What a batch stages for the store: a delete is staged only for a row that is there (a
//! tombstone for a missing row would still be committed, flushed and compacted away).

use waggle_engine::{Command, Engine, JobStreamTarget, JobStreams, ProcessingContext, SideEffect};
use waggle_protocol::value::{DeploymentRecord, DeploymentResource, JobRecord, ProcessInstanceCreationRecord};
use waggle_protocol::{Intent, RecordValue};
use waggle_state::{KvRead, KvStore, MemoryStore, Overlay, WriteSet};

const MODEL: &str = include_str!("../../../workloads/one_task.bpmn");

/// Every job is pushed to one stream as it is created.
struct PushAll;

impl JobStreams for PushAll {
    fn stream_for(&self, _job_type: &str) -> Option<JobStreamTarget> {
        Some(JobStreamTarget { stream_id: 1, worker: "w".into(), timeout_ms: 60_000, fetch_variables: vec![] })
    }
}

fn run(engine: &mut Engine, store: &MemoryStore, commands: Vec<Command>) -> (Vec<SideEffect>, WriteSet) {
    let ctx = ProcessingContext { now_ms: 1_000, job_streams: &PushAll, partition_count: 1, message_partition_count: 0 };
    let mut overlay = Overlay::new(store);
    let output = engine.process_batch(&mut overlay, &ctx, commands);
    (output.side_effects, overlay.into_writes())
}

/// The keys of `writes`' deletes that `store` does not hold.
fn missing_deletes(store: &MemoryStore, writes: &WriteSet) -> Vec<String> {
    writes.iter().filter(|(k, v)| v.is_none() && store.get(k).is_none()).map(|(k, _)| String::from_utf8_lossy(k).into_owned()).collect()
}

#[test]
fn completing_a_pushed_job_stages_deletes_only_of_rows_that_are_there() {
    let store = MemoryStore::new();
    let mut engine = Engine::new(1);
    let deploy = DeploymentRecord {
        resources: vec![DeploymentResource { resource_name: "one_task.bpmn".into(), resource: MODEL.as_bytes().to_vec() }],
        ..Default::default()
    };
    let (_, writes) = run(&mut engine, &store, vec![Command::new(-1, Intent::Create, RecordValue::Deployment(deploy))]);
    store.commit(&writes).unwrap();

    let create = ProcessInstanceCreationRecord {
        bpmn_process_id: "benchmark".into(),
        version: -1,
        variables: r#"{"a":1,"b":"two"}"#.into(),
        ..Default::default()
    };
    let (effects, writes) = run(&mut engine, &store, vec![Command::new(-1, Intent::Create, RecordValue::ProcessInstanceCreation(create))]);
    assert_eq!(missing_deletes(&store, &writes), Vec::<String>::new());
    store.commit(&writes).unwrap();
    let pushed: Vec<i64> = effects
        .iter()
        .filter_map(|e| match e {
            SideEffect::PushJob { job_key, .. } => Some(*job_key),
            _ => None,
        })
        .collect();
    assert_eq!(pushed.len(), 1, "the job is pushed as it is created");

    let before = store.dump();
    let complete = Command::new(pushed[0], Intent::Complete, RecordValue::Job(JobRecord::default()));
    let (_, writes) = run(&mut engine, &store, vec![complete]);
    assert_eq!(missing_deletes(&store, &writes), Vec::<String>::new(), "no tombstone for a row that is not there");
    store.commit(&writes).unwrap();
    assert!(store.dump().len() < before.len(), "the completed instance's rows are deleted");
}
