//! Multi-tenancy in the engine, as Zeebe 8.5 has it (docs.camunda.io/docs/8.5/components/concepts/multi-tenancy/;
//! the behaviour `MultiTenancyOverIdentityIT` in camunda/zeebe's `qa/integration-tests`
//! checks end to end): a deployment's resources belong to its tenant, so versions and the
//! latest version count per tenant and the same BPMN process id in two tenants is two
//! processes; an instance, its jobs and its children (call activities) are its process's
//! tenant's; a worker activates only jobs of the tenants it names; a message correlates, and
//! starts instances, only within its tenant; a signal reaches only its tenant's subscriptions.
//! The default tenant keeps the state layout of the versions before multi-tenancy.

use std::path::PathBuf;

use waggle_engine::{Command, Engine, NoJobStreams, ProcessingContext, SideEffect};
use waggle_protocol::codec::Entry;
use waggle_protocol::value::*;
use waggle_protocol::{Intent, PartitionId, Record, RecordType, RecordValue};
use waggle_state::{KvRead, KvStore, MemoryStore, Overlay};

struct Partition {
    engine: Engine,
    store: MemoryStore,
    entries: Vec<Entry>,
    records: Vec<Record>,
}

/// Two partitions over in-memory stores; commands between them are delivered at once.
struct Cluster {
    partitions: Vec<Partition>,
    now_ms: i64,
}

fn model(name: &str) -> Vec<u8> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    std::fs::read(dir.join("tests/models").join(name)).unwrap()
}

impl Cluster {
    fn new() -> Self {
        let partitions =
            (1..=2).map(|id| Partition { engine: Engine::new(id), store: MemoryStore::new(), entries: vec![], records: vec![] }).collect();
        Self { partitions, now_ms: 1_000 }
    }

    /// Processes `command` on `partition`, then everything it sends other partitions, until
    /// nothing is in flight; returns the records of the first batch.
    fn submit(&mut self, partition: PartitionId, command: Command) -> Vec<Record> {
        let mut queue = std::collections::VecDeque::from([(partition, command)]);
        let mut first = None;
        while let Some((to, command)) = queue.pop_front() {
            let p = &mut self.partitions[to as usize - 1];
            let ctx = ProcessingContext { now_ms: self.now_ms, job_streams: &NoJobStreams, partition_count: 2, message_partition_count: 0 };
            let mut overlay = Overlay::new(&p.store);
            let output = p.engine.process_batch(&mut overlay, &ctx, vec![command]);
            p.store.commit(&overlay.into_writes()).unwrap();
            if let Some(entry) = output.entry() {
                p.entries.push(entry);
            }
            p.records.extend(output.records.iter().cloned());
            for effect in output.side_effects {
                if let SideEffect::SendCommand { partition, command } = effect {
                    queue.push_back((partition, *command));
                }
            }
            first.get_or_insert(output.records);
        }
        first.unwrap_or_default()
    }

    fn deploy(&mut self, file: &str, tenant: &str) -> DeploymentRecord {
        let resources = vec![DeploymentResource { resource_name: file.into(), resource: model(file) }];
        let value = RecordValue::Deployment(DeploymentRecord { resources, tenant_id: tenant.into(), ..Default::default() });
        let records = self.submit(1, Command::new(-1, Intent::Create, value));
        let created = records.into_iter().find_map(|r| match r.value {
            RecordValue::Deployment(d) if r.record_type == RecordType::Event && r.intent == Intent::Created => Some(d),
            _ => None,
        });
        created.expect("deployment created")
    }

    /// Creates an instance of the latest version of `id` in `tenant` on `partition`: its
    /// CREATED creation record, or the rejection.
    fn create(&mut self, partition: PartitionId, id: &str, tenant: &str, variables: &str) -> Record {
        let value = ProcessInstanceCreationRecord {
            bpmn_process_id: id.into(),
            version: -1,
            variables: variables.into(),
            tenant_id: tenant.into(),
            ..Default::default()
        };
        let records = self.submit(partition, Command::new(-1, Intent::Create, RecordValue::ProcessInstanceCreation(value)));
        records
            .into_iter()
            .find(|r| matches!(r.value, RecordValue::ProcessInstanceCreation(_)) && r.record_type != RecordType::Command)
            .expect("an answer to the creation")
    }

    fn activate(&mut self, partition: PartitionId, job_type: &str, tenants: &[&str]) -> Vec<JobRecord> {
        let batch = JobBatchRecord {
            job_type: job_type.into(),
            worker: "w".into(),
            timeout_ms: 60_000,
            max_jobs_to_activate: 10,
            tenant_ids: tenants.iter().map(|t| t.to_string()).collect(),
            ..Default::default()
        };
        let records = self.submit(partition, Command::new(-1, Intent::Activate, RecordValue::JobBatch(batch)));
        records
            .into_iter()
            .find_map(|r| match r.value {
                RecordValue::JobBatch(b) if r.intent == Intent::Activated => Some(b.jobs),
                _ => None,
            })
            .unwrap_or_default()
    }

    fn publish(&mut self, name: &str, correlation_key: &str, tenant: &str) {
        let value = MessageRecord {
            name: name.into(),
            correlation_key: correlation_key.into(),
            time_to_live_ms: 3_600_000,
            variables: "{}".into(),
            tenant_id: tenant.into(),
            ..Default::default()
        };
        let partition = waggle_protocol::keys::partition_of_correlation_key(correlation_key, 2);
        self.submit(partition, Command::new(-1, Intent::Publish, RecordValue::Message(value)));
    }

    /// Process instance events of the element `element_id` with `intent`, as (tenant, bpmn process id).
    fn elements(&self, element_id: &str, intent: Intent) -> Vec<(String, String)> {
        self.partitions
            .iter()
            .flat_map(|p| &p.records)
            .filter(|r| r.record_type == RecordType::Event && r.intent == intent)
            .filter_map(|r| match &r.value {
                RecordValue::ProcessInstance(pi) if &*pi.element_id == element_id => {
                    Some((pi.tenant_id.to_string(), pi.bpmn_process_id.to_string()))
                }
                _ => None,
            })
            .collect()
    }

    /// C1 on every partition: its log's events rebuild its state.
    fn check_replay(&self) {
        for (i, p) in self.partitions.iter().enumerate() {
            let replayed = MemoryStore::new();
            let mut engine = Engine::new(i as PartitionId + 1);
            for entry in &p.entries {
                let mut overlay = Overlay::new(&replayed);
                engine.replay(&mut overlay, entry);
                replayed.commit(&overlay.into_writes()).unwrap();
            }
            assert!(p.store.dump() == replayed.dump(), "partition {}: replayed state differs", i + 1);
        }
    }
}

fn process_key(d: &DeploymentRecord) -> i64 {
    d.processes_metadata[0].process_definition_key
}

fn rejection(r: &Record) -> Option<&str> {
    r.rejection.as_ref().map(|r| r.reason.as_str())
}

#[test]
fn the_same_process_id_in_two_tenants_is_two_processes_with_their_own_versions() {
    let mut c = Cluster::new();
    let a = c.deploy("one_task.bpmn", "tenant-a");
    let b = c.deploy("one_task.bpmn", "tenant-b");
    assert_eq!(a.tenant_id, "tenant-a");
    assert_eq!((a.processes_metadata[0].version, b.processes_metadata[0].version), (1, 1), "versions count per tenant");
    assert!(!b.processes_metadata[0].duplicate, "not a duplicate of another tenant's resource");
    assert_ne!(process_key(&a), process_key(&b));
    // the same resource again in tenant-a: a duplicate there
    assert!(c.deploy("one_task.bpmn", "tenant-a").processes_metadata[0].duplicate);

    let created = c.create(2, "benchmark", "tenant-b", "{}");
    let RecordValue::ProcessInstanceCreation(creation) = &created.value else { unreachable!() };
    assert_eq!((creation.process_definition_key, creation.tenant_id.as_str()), (process_key(&b), "tenant-b"));
    assert_eq!(c.elements("task", Intent::ElementActivated), vec![("tenant-b".to_string(), "benchmark".to_string())]);

    // a tenant without the process, and the default tenant, do not see the others' processes
    let none = c.create(1, "benchmark", "tenant-c", "{}");
    assert_eq!(rejection(&none), Some("Expected to find process definition with process ID 'benchmark', but none found"));
    assert!(rejection(&c.create(1, "benchmark", "<default>", "{}")).is_some());
    // nor one by key
    let by_key =
        ProcessInstanceCreationRecord { process_definition_key: process_key(&a), tenant_id: "tenant-b".into(), ..Default::default() };
    let records = c.submit(1, Command::new(-1, Intent::Create, RecordValue::ProcessInstanceCreation(by_key)));
    let answer = records.iter().find(|r| r.record_type == RecordType::CommandRejection).expect("rejected");
    assert_eq!(
        rejection(answer),
        Some(format!("Expected to find process definition with key '{}', but none found", process_key(&a)).as_str())
    );
    c.check_replay();
}

#[test]
fn the_default_tenant_keeps_the_state_layout_of_older_versions() {
    let mut c = Cluster::new();
    c.deploy("one_task.bpmn", ""); // as older gateways sent it
    c.deploy("one_task.bpmn", "tenant-a");
    let store = &c.partitions[0].store;
    assert!(store.get(b"P/l/benchmark").is_some(), "the default tenant's latest version where it always was");
    let other: Vec<Vec<u8>> = store.scan_prefix(b"P/l/\xFF").map(|(k, _)| k).collect();
    assert_eq!(other, vec![b"P/l/\xFFtenant-a\xFFbenchmark".to_vec()]);
    assert_eq!(store.scan_prefix(b"P/l/").count(), 2);
}

#[test]
fn a_worker_activates_only_jobs_of_the_tenants_it_names() {
    let mut c = Cluster::new();
    c.deploy("one_task.bpmn", "tenant-a");
    c.deploy("one_task.bpmn", "tenant-b");
    c.deploy("one_task.bpmn", "<default>");
    for tenant in ["tenant-a", "tenant-b", "<default>"] {
        c.create(1, "benchmark", tenant, "{}");
    }
    let tenants = |jobs: Vec<JobRecord>| jobs.iter().map(|j| j.tenant_id.to_string()).collect::<Vec<_>>();
    assert_eq!(tenants(c.activate(1, "benchmark-task", &["tenant-b"])), vec!["tenant-b"]);
    assert_eq!(tenants(c.activate(1, "benchmark-task", &[])), vec!["<default>"], "no tenants named: the default one's");
    assert_eq!(tenants(c.activate(1, "benchmark-task", &["tenant-b"])), Vec::<String>::new(), "taken already");
    assert_eq!(tenants(c.activate(1, "benchmark-task", &["tenant-a", "tenant-b"])), vec!["tenant-a"]);
    c.check_replay();
}

#[test]
fn a_message_correlates_only_within_its_tenant() {
    let mut c = Cluster::new();
    c.deploy("messages.bpmn", "tenant-a");
    c.deploy("messages.bpmn", "tenant-b");
    c.create(1, "payment", "tenant-a", r#"{"orderId": "order-1"}"#);
    c.publish("order-paid", "order-1", "tenant-b");
    assert!(c.elements("wait_paid", Intent::ElementCompleted).is_empty(), "another tenant's message is not correlated");
    c.publish("order-paid", "order-1", "tenant-a");
    assert_eq!(c.elements("wait_paid", Intent::ElementCompleted), vec![("tenant-a".to_string(), "payment".to_string())]);
    // tenant-b's message waits (buffered) for tenant-b's instances only
    c.create(2, "payment", "tenant-b", r#"{"orderId": "order-1"}"#);
    let completed = c.elements("wait_paid", Intent::ElementCompleted);
    assert_eq!(completed.len(), 2);
    assert_eq!(completed[1].0, "tenant-b");
    c.check_replay();
}

#[test]
fn a_message_starts_instances_only_within_its_tenant() {
    let mut c = Cluster::new();
    c.deploy("start_events.bpmn", "tenant-a");
    c.publish("order-placed", "k", "tenant-b");
    assert!(c.elements("message_start", Intent::ElementActivated).is_empty());
    c.publish("order-placed", "k", "tenant-a");
    assert_eq!(c.elements("message_start", Intent::ElementActivated), vec![("tenant-a".to_string(), "message_start".to_string())]);
    c.check_replay();
}

#[test]
fn a_signal_reaches_only_its_tenant() {
    let mut c = Cluster::new();
    c.deploy("signals.bpmn", "tenant-a");
    c.deploy("signals.bpmn", "tenant-b");
    let signal = SignalRecord { signal_name: "go".into(), variables: "{}".into(), tenant_id: "tenant-b".into() };
    c.submit(1, Command::new(-1, Intent::Broadcast, RecordValue::Signal(signal)));
    assert_eq!(c.elements("signal_start", Intent::ElementActivated), vec![("tenant-b".to_string(), "signal_start".to_string())]);
    let signal = SignalRecord { signal_name: "go".into(), variables: "{}".into(), tenant_id: "<default>".into() };
    c.submit(1, Command::new(-1, Intent::Broadcast, RecordValue::Signal(signal)));
    assert_eq!(c.elements("signal_start", Intent::ElementActivated).len(), 1, "the default tenant has no such process");
    c.check_replay();
}

#[test]
fn a_call_activity_starts_its_child_in_the_parents_tenant() {
    let mut c = Cluster::new();
    c.deploy("call_activities.bpmn", "tenant-a");
    c.create(1, "call-parent", "tenant-a", r#"{"escalate": false}"#);
    assert_eq!(c.elements("call-child", Intent::ElementActivated), vec![("tenant-a".to_string(), "call-child".to_string())]);
    let jobs = c.activate(1, "child-work", &["tenant-a"]);
    assert_eq!(jobs.len(), 1);
    assert_eq!(&*jobs[0].tenant_id, "tenant-a");
    c.check_replay();
}

#[test]
fn a_decision_is_evaluated_within_its_tenant() {
    let mut c = Cluster::new();
    c.deploy("dish.dmn", "tenant-a");
    let evaluate = |tenant: &str| {
        RecordValue::DecisionEvaluation(DecisionEvaluationRecord {
            decision_id: "dish".into(),
            variables: r#"{"month": 12, "guestCount": 4}"#.into(),
            tenant_id: tenant.into(),
            ..Default::default()
        })
    };
    let records = c.submit(1, Command::new(-1, Intent::Evaluate, evaluate("tenant-a")));
    assert!(records.iter().any(|r| r.record_type == RecordType::Event), "evaluated in its tenant: {records:?}");
    let records = c.submit(1, Command::new(-1, Intent::Evaluate, evaluate("tenant-b")));
    let rejected = records.iter().find(|r| r.record_type == RecordType::CommandRejection).expect("rejected");
    assert_eq!(rejection(rejected), Some("Expected to evaluate decision 'dish', but no decision found for id 'dish'"));
}

/// A command from a client limited to some tenants (`Command::authorized_tenants`, Zeebe 8.5's
/// authorized tenants) finds only their entities: another tenant's job, instance or incident is
/// NOT_FOUND with the usual reason (camunda/camunda's `MultiTenantJobOperationsTest`:
/// `shouldRejectCompletionIfTenantIsUnauthorized`, `...ResolvingIncidentWithUnauthorizedTenant`);
/// the same command authorized for the entity's tenant, or unlimited, goes through.
#[test]
fn a_command_limited_to_other_tenants_finds_nothing() {
    let mut c = Cluster::new();
    c.deploy("one_task.bpmn", "tenant-a");
    let created = c.create(1, "benchmark", "tenant-a", "{}");
    let RecordValue::ProcessInstanceCreation(creation) = &created.value else { unreachable!() };
    let instance = creation.process_instance_key;
    let job = c
        .partitions
        .iter()
        .flat_map(|p| &p.records)
        .find(|r| r.intent == Intent::Created && matches!(r.value, RecordValue::Job(_)))
        .expect("a job")
        .key;
    let as_tenants = |command: Command, tenants: &[&str]| Command {
        authorized_tenants: Some(tenants.iter().map(|t| t.to_string()).collect()),
        request_id: Some(1),
        ..command
    };
    let answer = |records: Vec<Record>| records.into_iter().find(|r| r.record_type != RecordType::Command).expect("an answer");
    let retries = |n| Command::new(job, Intent::UpdateRetries, RecordValue::Job(JobRecord { retries: n, ..Default::default() }));
    let r = answer(c.submit(1, as_tenants(retries(5), &["tenant-b", "<default>"])));
    assert_eq!(r.rejection.as_ref().map(|r| r.rejection_type), Some(waggle_protocol::RejectionType::NotFound));
    assert_eq!(rejection(&r), Some(format!("Expected to update retries for job with key '{job}', but no such job was found").as_str()));
    let r = answer(c.submit(1, as_tenants(retries(5), &["tenant-b", "tenant-a"])));
    assert_eq!((r.intent, r.rejection.is_none()), (Intent::RetriesUpdated, true), "{r:?}");
    // no limit (the scheduler, other partitions, authentication off): as before
    let r = answer(c.submit(1, Command { request_id: Some(1), ..retries(6) }));
    assert_eq!(r.intent, Intent::RetriesUpdated);

    let cancel = || Command::new(instance, Intent::Cancel, RecordValue::ProcessInstance(ProcessInstanceRecord::default()));
    let r = answer(c.submit(1, as_tenants(cancel(), &[])));
    assert_eq!(
        rejection(&r),
        Some(format!("Expected to cancel a process instance with key '{instance}', but no such process was found").as_str())
    );
    // the instance still runs: the authorized tenant cancels it
    let r = answer(c.submit(1, as_tenants(cancel(), &["tenant-a"])));
    assert_eq!(r.record_type, RecordType::Event, "{r:?}");
    c.check_replay();
}
