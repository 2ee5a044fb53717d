//! The variables a creation sets are records of the new instance: like Zeebe's
//! `ProcessInstanceCreationCreateProcessor`, each VARIABLE CREATED carries the instance's key,
//! its process definition's key, its BPMN process id and tenant.

use waggle_engine::{Command, Engine, JobStreamTarget, JobStreams, ProcessingContext};
use waggle_protocol::value::{DeploymentRecord, DeploymentResource, ProcessInstanceCreationRecord, VariableRecord};
use waggle_protocol::{Intent, Record, RecordValue};
use waggle_state::{KvStore, MemoryStore, Overlay};

const MODEL: &str = include_str!("../../../workloads/one_task.bpmn");

struct NoStreams;

impl JobStreams for NoStreams {
    fn stream_for(&self, _job_type: &str) -> Option<JobStreamTarget> {
        None
    }
}

fn run(engine: &mut Engine, store: &MemoryStore, command: Command) -> Vec<Record> {
    let ctx = ProcessingContext { now_ms: 1_000, job_streams: &NoStreams, partition_count: 1, message_partition_count: 0 };
    let mut overlay = Overlay::new(store);
    let output = engine.process_batch(&mut overlay, &ctx, vec![command]);
    store.commit(&overlay.into_writes()).unwrap();
    output.records
}

#[test]
fn a_creations_variables_carry_the_instances_keys() {
    let store = MemoryStore::new();
    let mut engine = Engine::new(1);
    let deploy = DeploymentRecord {
        resources: vec![DeploymentResource { resource_name: "one_task.bpmn".into(), resource: MODEL.as_bytes().to_vec() }],
        ..Default::default()
    };
    run(&mut engine, &store, Command::new(-1, Intent::Create, RecordValue::Deployment(deploy)));
    let create = ProcessInstanceCreationRecord {
        bpmn_process_id: "benchmark".into(),
        version: -1,
        variables: r#"{"a":1,"b":"two","a2":[1,2]}"#.into(),
        ..Default::default()
    };
    let records = run(&mut engine, &store, Command::new(-1, Intent::Create, RecordValue::ProcessInstanceCreation(create)));
    let created = records
        .iter()
        .find_map(|r| match &r.value {
            RecordValue::ProcessInstanceCreation(c) if r.intent == Intent::Created => Some(c.clone()),
            _ => None,
        })
        .expect("the creation is answered");
    let variables: Vec<(Intent, &VariableRecord)> = records
        .iter()
        .filter_map(|r| match &r.value {
            RecordValue::Variable(v) => Some((r.intent, v)),
            _ => None,
        })
        .collect();
    let names: Vec<&str> = variables.iter().map(|(_, v)| v.name.as_str()).collect();
    assert_eq!(names, ["a", "b", "a2"], "in document order");
    for (intent, v) in variables {
        assert_eq!(intent, Intent::Created);
        assert_eq!(v.scope_key, created.process_instance_key, "{}", v.name);
        assert_eq!(v.process_instance_key, created.process_instance_key, "{}", v.name);
        assert_eq!(v.process_definition_key, created.process_definition_key, "{}", v.name);
        assert_eq!(v.bpmn_process_id, "benchmark", "{}", v.name);
        assert_eq!(v.tenant_id, "<default>", "{}", v.name);
    }
}
