//! A process that calls itself is bounded (C10): the call activity that would create an instance
//! deeper than `EngineLimits::max_process_depth` raises a CALLED_ELEMENT_ERROR incident with
//! Zeebe's message (CallActivityTest.shouldLimitDescendantDepth), and the whole recursion runs
//! in one batch of bounded size; cancelling the root ends every level (over several batches, at
//! most `MI_TERMINATIONS_PER_BATCH` element instances a batch).

use waggle_engine::{Command, Engine, EngineLimits, NoJobStreams, ProcessingContext, SideEffect, StateView, MI_TERMINATIONS_PER_BATCH};
use waggle_protocol::value::{DeploymentRecord, DeploymentResource, ProcessInstanceCreationRecord, ProcessInstanceRecord};
use waggle_protocol::{Intent, Record, RecordType, RecordValue};
use waggle_state::{KvStore, MemoryStore, Overlay};

const MODEL: &str = include_str!("models/call_loop.bpmn");

/// Processes `command`, then the commands the engine hands back to its own partition (a
/// termination spread over batches), a batch each, until none is left; every batch starts
/// terminating at most `MI_TERMINATIONS_PER_BATCH` element instances.
fn run(engine: &mut Engine, store: &MemoryStore, command: Command) -> Vec<Record> {
    let ctx = ProcessingContext { now_ms: 1_000, job_streams: &NoJobStreams, partition_count: 1, message_partition_count: 0 };
    let mut records = Vec::new();
    let mut queue = std::collections::VecDeque::from([command]);
    while let Some(command) = queue.pop_front() {
        let mut overlay = Overlay::new(store);
        let output = engine.process_batch(&mut overlay, &ctx, vec![command]);
        store.commit(&overlay.into_writes()).unwrap();
        let terminating = output.records.iter().filter(|r| r.intent == Intent::ElementTerminating).count();
        assert!(terminating <= MI_TERMINATIONS_PER_BATCH, "{terminating} element instances terminating in one batch");
        for effect in output.side_effects {
            if let SideEffect::SendCommand { partition: 1, command } = effect {
                queue.push_back(*command);
            }
        }
        records.extend(output.records);
    }
    records
}

/// Deploys the loop and starts it with `depth` 1: the records of that batch, and the root's key.
fn start_loop(engine: &mut Engine, store: &MemoryStore) -> (Vec<Record>, i64) {
    let deploy = DeploymentRecord {
        resources: vec![DeploymentResource { resource_name: "call_loop.bpmn".into(), resource: MODEL.as_bytes().to_vec() }],
        ..Default::default()
    };
    run(engine, store, Command::new(-1, Intent::Create, RecordValue::Deployment(deploy)));
    let create = ProcessInstanceCreationRecord {
        bpmn_process_id: "loop".into(),
        version: -1,
        variables: r#"{"depth":1}"#.into(),
        ..Default::default()
    };
    let records = run(engine, store, Command::new(-1, Intent::Create, RecordValue::ProcessInstanceCreation(create)));
    let root = records
        .iter()
        .find_map(|r| match &r.value {
            RecordValue::ProcessInstanceCreation(c) if r.intent == Intent::Created => Some(c.process_instance_key),
            _ => None,
        })
        .expect("created");
    (records, root)
}

fn instances_created(records: &[Record]) -> usize {
    records
        .iter()
        .filter(|r| r.intent == Intent::ElementActivating)
        .filter(|r| matches!(&r.value, RecordValue::ProcessInstance(pi) if pi.bpmn_element_type == "PROCESS"))
        .count()
}

#[test]
fn a_process_calling_itself_stops_at_the_depth_limit_with_an_incident() {
    let store = MemoryStore::new();
    let mut engine = Engine::with_limits(1, EngineLimits { max_process_depth: 10, ..Default::default() });
    let (records, root) = start_loop(&mut engine, &store);
    assert_eq!(instances_created(&records), 10, "the root and nine levels below it");
    let incidents: Vec<_> = records
        .iter()
        .filter_map(|r| match &r.value {
            RecordValue::Incident(i) if r.intent == Intent::Created => Some(i.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(incidents.len(), 1);
    let incident = &incidents[0];
    assert_eq!(incident.error_type, "CALLED_ELEMENT_ERROR");
    assert_eq!(incident.element_id, "go-deeper");
    assert_eq!(
        incident.error_message,
        "The call activity has reached the maximum depth of 10. This is likely due to a recursive call. Cancel the root process instance if this was unintentional. Otherwise, consider increasing the maximum depth, or use process instance modification to adjust the process instance."
    );
    // the call activity that stopped holds depth 11 (its input mapping ran first, as in Zeebe)
    let view = StateView::new(&store);
    assert_eq!(view.variable(incident.element_instance_key, "depth").map(|v| v.value).as_deref(), Some("11"));

    // cancelling the root terminates every level
    let records =
        run(&mut engine, &store, Command::new(root, Intent::Cancel, RecordValue::ProcessInstance(ProcessInstanceRecord::default())));
    assert!(records.iter().all(|r| r.record_type != RecordType::CommandRejection));
    let terminated = records
        .iter()
        .filter(|r| r.intent == Intent::ElementTerminated)
        .filter(|r| matches!(&r.value, RecordValue::ProcessInstance(pi) if pi.bpmn_element_type == "PROCESS"))
        .count();
    assert_eq!(terminated, 10);
    let left: Vec<_> =
        store.dump().into_iter().filter(|(k, _)| k.starts_with(b"E/") || k.starts_with(b"C/") || k.starts_with(b"V/")).collect();
    assert!(left.is_empty(), "element instances, children and variables are gone: {} rows left", left.len());
    assert!(view.incidents().is_empty(), "the incident is resolved with its element");
}

#[test]
fn the_default_limit_bounds_the_recursion_too() {
    let store = MemoryStore::new();
    let mut engine = Engine::new(1);
    let limit = EngineLimits::default().max_process_depth;
    let (records, root) = start_loop(&mut engine, &store);
    assert_eq!(instances_created(&records), limit);
    assert!(records.iter().any(|r| matches!(&r.value, RecordValue::Incident(i) if i.error_type == "CALLED_ELEMENT_ERROR")));
    // cancelling terminates the thousand levels without recursing per level
    let records =
        run(&mut engine, &store, Command::new(root, Intent::Cancel, RecordValue::ProcessInstance(ProcessInstanceRecord::default())));
    let terminated = records.iter().filter(|r| r.intent == Intent::ElementTerminated).count();
    assert_eq!(terminated, 2 * limit, "every process instance and its call activity");
    assert!(store.dump().into_iter().all(|(k, _)| !k.starts_with(b"E/")), "no element instance is left");
}
