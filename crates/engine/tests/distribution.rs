//! Commands between partitions are processed exactly once, whatever happens to them on the
//! way: lost with a crash, delivered twice, re-sent after a restart, delivered out of order.
//!
//! A small cluster of engines over in-memory stores, with a seeded "network" between them that
//! delivers, duplicates, drops and reorders the commands one partition sends another, crashes
//! partitions (their queue is lost, their caches rebuilt) and re-sends what their outbox holds,
//! as the broker does after a restart or when no acknowledgement came. Every seed must end with
//! each message correlated once, the instance completed once, empty outboxes, and state equal
//! to the state replayed from each partition's log (C1).

mod sim_support;

use sim_support::{model, Rng};
use std::collections::VecDeque;

use waggle_engine::{pending_commands, Command, Engine, NoJobStreams, ProcessingContext, SideEffect, StateView};
use waggle_protocol::codec::Entry;
use waggle_protocol::keys::partition_of_correlation_key;
use waggle_protocol::value::*;
use waggle_protocol::{Intent, PartitionId, Record, RecordType, RecordValue, RejectionType};
use waggle_state::{KvRead, KvStore, MemoryStore, Overlay};

struct Partition {
    id: PartitionId,
    engine: Engine,
    store: MemoryStore,
    entries: Vec<Entry>,
    records: Vec<Record>,
    /// Answers to requests, as the broker would send them.
    responses: Vec<(u64, Record)>,
}

struct Cluster {
    partitions: Vec<Partition>,
    /// Commands on their way to a partition.
    network: VecDeque<(PartitionId, Command)>,
    now_ms: i64,
    /// The partitions messages are spread over (0: all of them; the first count once grown).
    message_count: u32,
}

impl Cluster {
    fn new(count: u16) -> Self {
        let partitions = (1..=count)
            .map(|id| Partition {
                id,
                engine: Engine::new(id),
                store: MemoryStore::new(),
                entries: vec![],
                records: vec![],
                responses: vec![],
            })
            .collect();
        Self { partitions, network: VecDeque::new(), now_ms: 1_000, message_count: 0 }
    }

    /// New empty partitions up to `count`; messages stay on the partitions there were.
    fn grow(&mut self, count: u16) {
        if self.message_count == 0 {
            self.message_count = self.count();
        }
        for id in self.count() as u16 + 1..=count {
            self.partitions.push(Partition {
                id,
                engine: Engine::new(id),
                store: MemoryStore::new(),
                entries: vec![],
                records: vec![],
                responses: vec![],
            });
        }
    }

    fn count(&self) -> u32 {
        self.partitions.len() as u32
    }

    /// Processes one command on a partition as the broker does: one batch, committed, then its
    /// commands for other partitions go on the network.
    fn submit(&mut self, partition: PartitionId, command: Command) -> Vec<Record> {
        let count = self.count();
        let p = &mut self.partitions[partition as usize - 1];
        let ctx = ProcessingContext {
            now_ms: self.now_ms,
            job_streams: &NoJobStreams,
            partition_count: count,
            message_partition_count: self.message_count,
        };
        let mut overlay = Overlay::new(&p.store);
        let output = p.engine.process_batch(&mut overlay, &ctx, vec![command]);
        let writes = overlay.into_writes();
        p.store.commit(&writes).unwrap();
        if let Some(entry) = output.entry() {
            p.entries.push(entry);
        }
        p.records.extend(output.records.iter().cloned());
        p.responses.extend(output.responses.iter().cloned());
        for effect in output.side_effects {
            if let SideEffect::SendCommand { partition, command } = effect {
                self.network.push_back((partition, *command));
            }
        }
        output.records
    }

    /// A crash of a partition: what was on its way to it is lost, caches start empty, and what
    /// its outbox holds is sent again (as the broker does at start).
    fn restart(&mut self, partition: PartitionId) {
        self.network.retain(|(to, _)| *to != partition);
        let p = &mut self.partitions[partition as usize - 1];
        p.engine = Engine::new(partition);
        let pending = pending_commands(StateView::new(&p.store), partition);
        self.network.extend(pending);
    }

    /// What the broker's periodic re-send does: every partition sends its outbox again.
    fn resend_all(&mut self) {
        for p in &self.partitions {
            self.network.extend(pending_commands(StateView::new(&p.store), p.id));
        }
    }

    fn deliver_all(&mut self) {
        while let Some((to, command)) = self.network.pop_front() {
            self.submit(to, command);
        }
    }

    fn events(&self, partition: PartitionId, f: impl Fn(&Record) -> bool) -> usize {
        self.partitions[partition as usize - 1].records.iter().filter(|r| r.record_type == RecordType::Event && f(r)).count()
    }

    fn rows(&self, partition: PartitionId, prefix: &[u8]) -> usize {
        self.partitions[partition as usize - 1].store.scan_prefix(prefix).count()
    }

    /// C1 on every partition: its log's events rebuild its state byte for byte.
    fn check_replay(&self) {
        for p in &self.partitions {
            let replayed = MemoryStore::new();
            let mut engine = Engine::new(p.id);
            for entry in &p.entries {
                let mut overlay = Overlay::new(&replayed);
                engine.replay(&mut overlay, entry);
                replayed.commit(&overlay.into_writes()).unwrap();
            }
            assert!(p.store.dump() == replayed.dump(), "partition {}: replayed state differs", p.id);
        }
    }

    fn deploy(&mut self, file: &str) {
        let resources = vec![DeploymentResource { resource_name: file.into(), resource: model(file) }];
        let value = RecordValue::Deployment(DeploymentRecord { resources, ..Default::default() });
        self.submit(1, Command::new(-1, Intent::Create, value));
    }
}

fn create(bpmn_process_id: &str, variables: &str) -> Command {
    let value = ProcessInstanceCreationRecord {
        bpmn_process_id: bpmn_process_id.into(),
        version: -1,
        variables: variables.into(),
        ..Default::default()
    };
    Command::new(-1, Intent::Create, RecordValue::ProcessInstanceCreation(value))
}

fn publish(name: &str, correlation_key: &str, id: &str) -> Command {
    let value = MessageRecord {
        name: name.into(),
        correlation_key: correlation_key.into(),
        time_to_live_ms: 3_600_000,
        message_id: id.into(),
        variables: "{}".into(),
        ..Default::default()
    };
    Command::new(-1, Intent::Publish, RecordValue::Message(value))
}

/// A correlation key whose messages live on `partition`.
fn key_on(partition: PartitionId, count: u32) -> String {
    (0..).map(|i| format!("order-{i}")).find(|k| partition_of_correlation_key(k, count) == partition).unwrap()
}

fn is_process(r: &Record, intent: Intent) -> bool {
    r.intent == intent && matches!(&r.value, RecordValue::ProcessInstance(pi) if pi.bpmn_element_type == "PROCESS")
}

/// The deployment reaches every partition, and an instance waits on partition 1 for two
/// messages that live on partition 2 (`payment`: a message catch event, then a receive task).
fn setup(cluster: &mut Cluster) -> String {
    cluster.deploy("messages.bpmn");
    cluster.deliver_all();
    assert_eq!(
        cluster.events(2, |r| r.intent == Intent::Created && matches!(r.value, RecordValue::Process(_))),
        1,
        "deployment not distributed"
    );
    let order = key_on(2, cluster.count());
    cluster.submit(1, create("payment", &format!(r#"{{"orderId": "{order}"}}"#)));
    order
}

#[test]
fn handshake_across_partitions_in_order() {
    let mut c = Cluster::new(2);
    let order = setup(&mut c);
    c.deliver_all();
    c.submit(2, publish("order-paid", &order, "first"));
    c.deliver_all();
    c.submit(2, publish("order-paid", &order, "second"));
    c.deliver_all();
    assert_eq!(c.events(1, |r| is_process(r, Intent::ElementCompleted)), 1);
    assert_eq!(c.events(1, |r| r.intent == Intent::Correlated && matches!(r.value, RecordValue::ProcessMessageSubscription(_))), 2);
    for p in 1..=2 {
        assert_eq!(c.rows(p, b"O/"), 0, "partition {p}: outbox not empty");
    }
    c.check_replay();
}

#[test]
fn a_lost_command_is_sent_again_after_a_restart() {
    let mut c = Cluster::new(2);
    let order = setup(&mut c);
    // partition 1 committed the subscription and crashed before partition 2 got the CREATE
    assert_eq!(c.network.len(), 1);
    c.network.clear();
    c.submit(2, publish("order-paid", &order, "first"));
    assert_eq!(c.events(1, |r| r.intent == Intent::Correlated), 0);
    c.restart(1);
    c.deliver_all();
    assert_eq!(c.events(1, |r| r.intent == Intent::Correlated && matches!(r.value, RecordValue::ProcessMessageSubscription(_))), 1);
    // partition 2 correlates the second message and crashes before partition 1 hears of it
    c.submit(2, publish("order-paid", &order, "second"));
    assert!(c.network.iter().any(|(to, cmd)| *to == 1 && cmd.intent == Intent::Correlate));
    c.network.clear();
    c.restart(2);
    c.deliver_all();
    assert_eq!(c.events(1, |r| is_process(r, Intent::ElementCompleted)), 1, "the instance did not complete");
    for p in 1..=2 {
        assert_eq!(c.rows(p, b"O/"), 0, "partition {p}: outbox not empty");
    }
    c.check_replay();
}

#[test]
fn copies_of_a_command_are_processed_once() {
    let mut c = Cluster::new(2);
    let order = setup(&mut c);
    let copies: Vec<_> = c.network.iter().cloned().collect();
    c.network.extend(copies.iter().cloned());
    c.network.extend(copies);
    c.deliver_all();
    assert_eq!(c.events(2, |r| r.intent == Intent::Created && matches!(r.value, RecordValue::MessageSubscription(_))), 1);
    c.submit(2, publish("order-paid", &order, "first"));
    let copies: Vec<_> = c.network.iter().cloned().collect();
    c.network.extend(copies);
    c.deliver_all();
    assert_eq!(c.events(1, |r| r.intent == Intent::Correlated && matches!(r.value, RecordValue::ProcessMessageSubscription(_))), 1);
    assert_eq!(c.events(2, |r| r.intent == Intent::Correlated && matches!(r.value, RecordValue::MessageSubscription(_))), 1);
    c.check_replay();
}

#[test]
fn received_markers_stay_bounded() {
    let mut c = Cluster::new(2);
    c.deploy("signals.bpmn");
    c.deliver_all();
    for _ in 0..200 {
        let signal = SignalRecord { signal_name: "go".into(), variables: "{}".into(), ..Default::default() };
        c.submit(1, Command::new(-1, Intent::Broadcast, RecordValue::Signal(signal)));
        // every copy twice: the second is only acknowledged
        let copies: Vec<_> = c.network.iter().cloned().collect();
        c.network.extend(copies);
        c.deliver_all();
    }
    // partition 2 processed each broadcast once (its signal start events belong to partition 1)
    assert_eq!(c.events(2, |r| r.intent == Intent::Broadcasted), 200, "broadcasts processed on partition 2");
    assert_eq!(c.events(1, |r| is_process(r, Intent::ElementActivated)), 200, "one instance per broadcast");
    assert!(c.rows(2, b"DR/") <= 2, "{} received markers kept", c.rows(2, b"DR/"));
    assert_eq!(c.rows(1, b"O/"), 0);
    c.check_replay();
}

/// The seeded network: any mix of delivery, duplication, loss, reordering and crashes ends
/// with every message correlated once and the instance completed once.
#[test]
fn simulated_faults_never_lose_or_repeat_a_command() {
    for seed in 1..=300u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let mut c = Cluster::new(3);
        let order = key_on(2, 3);
        c.deploy("messages.bpmn");
        // client commands arrive at random moments among the partitions' own traffic
        let mut clients: VecDeque<(PartitionId, Command)> = VecDeque::new();
        clients.push_back((1, create("payment", &format!(r#"{{"orderId": "{order}"}}"#))));
        clients.push_back((2, publish("order-paid", &order, "first")));
        clients.push_back((2, publish("order-paid", &order, "second")));
        let mut steps = 0;
        loop {
            steps += 1;
            assert!(steps < 10_000, "seed {seed}: no quiescence");
            if c.network.is_empty() {
                if let Some((to, command)) = clients.pop_front() {
                    c.submit(to, command);
                    continue;
                }
                c.resend_all();
                if c.network.is_empty() {
                    break;
                }
            }
            match rng.below(20) {
                0 => {
                    let i = rng.below(c.network.len());
                    c.network.remove(i); // lost
                }
                1 => {
                    let i = rng.below(c.network.len());
                    let copy = c.network[i].clone();
                    c.network.push_back(copy); // delivered twice
                }
                2 => c.restart(rng.below(3) as PartitionId + 1),
                3 if !clients.is_empty() => {
                    let (to, command) = clients.pop_front().unwrap();
                    c.submit(to, command);
                }
                _ => {
                    // mostly in order, sometimes not
                    let i = if rng.below(4) == 0 { rng.below(c.network.len()) } else { 0 };
                    let (to, command) = c.network.remove(i).unwrap();
                    c.submit(to, command);
                }
            }
        }
        let pms_correlated =
            c.events(1, |r| r.intent == Intent::Correlated && matches!(r.value, RecordValue::ProcessMessageSubscription(_)));
        assert_eq!(pms_correlated, 2, "seed {seed}: messages correlated");
        assert_eq!(c.events(1, |r| is_process(r, Intent::ElementCompleted)), 1, "seed {seed}: instance completions");
        for p in 1..=3 {
            assert_eq!(
                c.events(p, |r| r.intent == Intent::Created && matches!(r.value, RecordValue::Process(_))),
                1,
                "seed {seed}: p{p} deployment"
            );
            assert_eq!(c.rows(p, b"O/"), 0, "seed {seed}: partition {p}: outbox not empty");
        }
        c.check_replay();
    }
}

/// A deployment of BPMN, DMN and a form reaches every partition with the same keys and
/// versions (as Zeebe distributes deployments), a duplicate is not distributed again, and a
/// business rule task and EvaluateDecision work on the other partition after a restart (its
/// graph parsed again from state).
#[test]
fn decisions_and_forms_reach_every_partition() {
    let mut c = Cluster::new(3);
    let resources = ["business_rules.bpmn", "dish.dmn", "order.form"]
        .iter()
        .map(|f| DeploymentResource { resource_name: f.to_string(), resource: model(f) })
        .collect::<Vec<_>>();
    let deploy = |resources: Vec<DeploymentResource>| {
        Command::new(-1, Intent::Create, RecordValue::Deployment(DeploymentRecord { resources, ..Default::default() }))
    };
    c.submit(1, deploy(resources.clone()));
    c.deliver_all();
    let created = |c: &Cluster, p: PartitionId| -> Vec<(ValueTypeName, i64)> {
        c.partitions[p as usize - 1]
            .records
            .iter()
            .filter(|r| r.record_type == RecordType::Event && r.intent == Intent::Created)
            .filter(|r| matches!(r.value, RecordValue::DecisionRequirements(_) | RecordValue::Decision(_) | RecordValue::Form(_)))
            .map(|r| (r.value_type.as_str(), r.key))
            .collect()
    };
    let on_1 = created(&c, 1);
    assert_eq!(on_1.len(), 5, "1 graph, 3 decisions, 1 form: {on_1:?}");
    for p in 2..=3 {
        assert_eq!(created(&c, p), on_1, "partition {p} has the same records with the same keys");
    }
    // the same resources again: duplicates, nothing distributed
    c.submit(1, deploy(resources));
    assert!(c.network.is_empty(), "a duplicate deployment is not distributed");
    c.restart(3);
    c.deliver_all();
    c.submit(3, create("dinner", r#"{"month": 10, "guestCount": 4}"#));
    assert_eq!(c.events(3, |r| r.intent == Intent::Evaluated && matches!(r.value, RecordValue::DecisionEvaluation(_))), 1);
    let evaluate =
        DecisionEvaluationRecord { decision_id: "greeting".into(), variables: r#"{"name": "Ada"}"#.into(), ..Default::default() };
    let records = c.submit(2, Command::new(-1, Intent::Evaluate, RecordValue::DecisionEvaluation(evaluate)));
    let answer = records.iter().find(|r| r.intent == Intent::Evaluated).expect("evaluated on partition 2");
    let RecordValue::DecisionEvaluation(e) = &answer.value else { unreachable!() };
    assert_eq!(e.decision_output, r#""Hello Ada""#);
    c.check_replay();
}

type ValueTypeName = &'static str;

/// DeleteResource on partition 1 deletes the graph on every partition (the deletion is
/// distributed as the deployment was).
#[test]
fn a_deleted_graph_is_deleted_on_every_partition() {
    let mut c = Cluster::new(2);
    c.deploy("dish.dmn");
    c.deliver_all();
    let drg = c.partitions[0]
        .records
        .iter()
        .find(|r| r.intent == Intent::Created && matches!(r.value, RecordValue::DecisionRequirements(_)))
        .expect("created")
        .key;
    let value = RecordValue::ResourceDeletion(ResourceDeletionRecord { resource_key: drg, tenant_id: "<default>".into() });
    c.submit(1, Command::new(drg, Intent::Delete, value));
    c.deliver_all();
    for p in 1..=2 {
        assert_eq!(c.events(p, |r| r.intent == Intent::Deleted && matches!(r.value, RecordValue::Decision(_))), 3, "partition {p}");
        assert_eq!(c.events(p, |r| r.intent == Intent::Deleted && matches!(r.value, RecordValue::ResourceDeletion(_))), 1, "partition {p}");
        assert_eq!(c.rows(p, b"DC/"), 0, "partition {p}: no decision rows left");
        assert_eq!(c.rows(p, b"DQ/"), 0, "partition {p}: no graph rows left");
        assert_eq!(c.rows(p, b"O/"), 0, "partition {p}: outbox not empty");
    }
    c.check_replay();
}

/// A deleted process definition is deleted on every partition (Zeebe 8.5's
/// `ResourceDeletionMultiPartitionTest`): PROCESS DELETED on each, its rows and its message
/// start event subscription (open on every partition) gone.
#[test]
fn a_deleted_process_is_deleted_on_every_partition() {
    let mut c = Cluster::new(2);
    c.deploy("deletable_v1.bpmn");
    c.deliver_all();
    let process = c.partitions[0]
        .records
        .iter()
        .find(|r| r.intent == Intent::Created && matches!(r.value, RecordValue::Process(_)))
        .expect("created")
        .key;
    for p in 1..=2 {
        assert_eq!(c.rows(p, b"MSS/"), 1, "partition {p}: the message start event is open");
    }
    let value = RecordValue::ResourceDeletion(ResourceDeletionRecord { resource_key: process, tenant_id: "<default>".into() });
    c.submit(1, Command::new(process, Intent::Delete, value));
    c.deliver_all();
    for p in 1..=2 {
        assert_eq!(c.events(p, |r| r.intent == Intent::Deleted && matches!(r.value, RecordValue::Process(_))), 1, "partition {p}");
        assert_eq!(
            c.events(p, |r| r.intent == Intent::Deleting && matches!(r.value, RecordValue::ResourceDeletion(_))),
            1,
            "partition {p}"
        );
        assert_eq!(c.rows(p, b"P/k/"), 0, "partition {p}: no process rows left");
        assert_eq!(c.rows(p, b"P/l/"), 0, "partition {p}: no latest version left");
        assert_eq!(c.rows(p, b"MSS/"), 0, "partition {p}: the message start event is closed");
        assert_eq!(c.rows(p, b"O/"), 0, "partition {p}: outbox not empty");
    }
    c.check_replay();
}

/// A partition where instances of the deleted definition still run keeps it (Zeebe 8.5 refuses
/// the deletion there with the same INVALID_STATE rejection); the others delete it. The copy is
/// acknowledged either way, so the sender's outbox empties.
#[test]
fn a_partition_with_running_instances_keeps_a_deleted_process() {
    let mut c = Cluster::new(2);
    c.deploy("deletable_v2.bpmn");
    c.deliver_all();
    let process = c.partitions[0]
        .records
        .iter()
        .find(|r| r.intent == Intent::Created && matches!(r.value, RecordValue::Process(_)))
        .expect("created")
        .key;
    let creation = ProcessInstanceCreationRecord { bpmn_process_id: "deletable".into(), version: -1, ..Default::default() };
    c.submit(2, Command::new(-1, Intent::Create, RecordValue::ProcessInstanceCreation(creation)));
    c.deliver_all();
    let value = RecordValue::ResourceDeletion(ResourceDeletionRecord { resource_key: process, tenant_id: "<default>".into() });
    c.submit(1, Command::new(process, Intent::Delete, value));
    c.deliver_all();
    assert_eq!(c.events(1, |r| r.intent == Intent::Deleted && matches!(r.value, RecordValue::Process(_))), 1);
    assert_eq!(c.rows(1, b"P/k/"), 0);
    assert_eq!(c.events(2, |r| r.intent == Intent::Deleted && matches!(r.value, RecordValue::Process(_))), 0);
    assert_eq!(c.rows(2, b"P/k/"), 1, "partition 2 keeps the definition its instance runs on");
    let rejected = c.partitions[1].records.iter().any(|r| {
        r.rejection.as_ref().is_some_and(|x| x.reason.contains("there are still running instances"))
            && matches!(r.value, RecordValue::ResourceDeletion(_))
    });
    assert!(rejected, "partition 2 refused the copy");
    assert_eq!(c.rows(1, b"O/"), 0, "partition 1's outbox not empty");
    c.check_replay();
}

fn correlate(name: &str, correlation_key: &str, request: u64) -> Command {
    let value = MessageCorrelationRecord {
        name: name.into(),
        correlation_key: correlation_key.into(),
        variables: "{}".into(),
        message_key: -1,
        process_instance_key: -1,
        ..Default::default()
    };
    Command { request_id: Some(request), ..Command::new(-1, Intent::Correlate, RecordValue::MessageCorrelation(value)) }
}

/// Zeebe 8.8's MESSAGE_CORRELATION across partitions (MessageCorrelationCorrelateProcessor,
/// MessageSubscriptionCorrelateProcessor, MessageSubscriptionRejectProcessor): the message's
/// partition answers only once the instance's partition confirmed (CORRELATED, with the
/// instance's key); when the waiting element is gone by the time the correlation arrives, the
/// refusal comes back and the request gets NOT_CORRELATED's NOT_FOUND rejection.
#[test]
fn a_correlation_is_answered_once_the_process_partition_confirms_or_refuses() {
    let mut c = Cluster::new(2);
    let order = setup(&mut c);
    c.deliver_all();
    let instance = c.partitions[0]
        .records
        .iter()
        .find_map(|r| match &r.value {
            RecordValue::ProcessInstanceCreation(x) if r.intent == Intent::Created => Some(x.process_instance_key),
            _ => None,
        })
        .expect("the instance");
    let answer = |c: &Cluster, request: u64| c.partitions[1].responses.iter().find(|(id, _)| *id == request).map(|(_, r)| r.clone());

    c.submit(2, correlate("order-paid", &order, 7));
    assert!(answer(&c, 7).is_none(), "answered before the instance's partition confirmed");
    c.deliver_all();
    let correlated = answer(&c, 7).expect("an answer once confirmed");
    assert!(correlated.rejection.is_none() && correlated.intent == Intent::Correlated, "{correlated:?}");
    let RecordValue::MessageCorrelation(value) = &correlated.value else { panic!("{correlated:?}") };
    assert_eq!(value.process_instance_key, instance);
    assert_eq!(value.message_key, correlated.key);

    // the receive task waits now; the instance is cancelled before the correlation reaches it
    c.submit(2, correlate("order-paid", &order, 8));
    c.submit(1, Command::new(instance, Intent::Cancel, RecordValue::ProcessInstance(ProcessInstanceRecord::default())));
    c.deliver_all();
    let refused = answer(&c, 8).expect("an answer once refused");
    let rejection = refused.rejection.as_ref().expect("a rejection");
    assert_eq!(rejection.rejection_type.as_str(), "NOT_FOUND");
    assert!(rejection.reason.starts_with("Expected to find subscription for message with name 'order-paid'"), "{rejection:?}");
    assert_eq!(c.events(2, |r| r.intent == Intent::NotCorrelated), 1);
    for p in 1..=2 {
        assert_eq!(c.rows(p, b"O/"), 0, "partition {p}: outbox not empty");
    }
    c.check_replay();
}

fn scale_up(current: u32, desired: u32) -> Command {
    let value = ScaleRecord { current_partition_count: current, desired_partition_count: desired, ..Default::default() };
    Command::new(-1, Intent::ScaleUp, RecordValue::Scale(value))
}

/// Growing the partition count (issue 31; Zeebe 8.8's partition scaling): SCALE SCALE_UP on
/// partition 1 sends every resource deployed and not deleted (processes, decision requirements
/// graphs with their decisions, forms) to the new partitions with the same keys and versions,
/// exactly once (copies delivered twice, a restart re-sending the outbox), and records SCALED_UP
/// once the last new partition acknowledged. An instance on a new partition then waits for a
/// message that lives on an old partition (messages keep the first count) and correlates once.
#[test]
fn a_scale_up_redistributes_every_deployed_resource_to_the_new_partitions_once() {
    let mut c = Cluster::new(2);
    c.deploy("messages.bpmn");
    let resources = ["business_rules.bpmn", "dish.dmn", "order.form"]
        .iter()
        .map(|f| DeploymentResource { resource_name: f.to_string(), resource: model(f) })
        .collect::<Vec<_>>();
    c.submit(1, Command::new(-1, Intent::Create, RecordValue::Deployment(DeploymentRecord { resources, ..Default::default() })));
    c.deploy("deletable_v1.bpmn");
    c.deliver_all();
    let deleted = c.partitions[0]
        .records
        .iter()
        .find(|r| r.intent == Intent::Created && matches!(&r.value, RecordValue::Process(p) if p.resource_name == "deletable_v1.bpmn"))
        .expect("created")
        .key;
    let value = RecordValue::ResourceDeletion(ResourceDeletionRecord { resource_key: deleted, tenant_id: "<default>".into() });
    c.submit(1, Command::new(deleted, Intent::Delete, value));
    c.deliver_all();

    c.grow(4);
    let records = c.submit(1, scale_up(2, 4));
    let scaling = |c: &Cluster, intent: Intent| c.events(1, |r| r.intent == intent && matches!(r.value, RecordValue::Scale(_)));
    assert_eq!((scaling(&c, Intent::ScalingUp), scaling(&c, Intent::ScaledUp)), (1, 0), "{records:#?}");
    // asked again (the coordinator does, until it is done): refused, nothing sent twice
    let again = c.submit(1, scale_up(2, 4));
    let refused = again.iter().find_map(|r| r.rejection.as_ref()).map(|r| r.rejection_type);
    assert_eq!(refused, Some(RejectionType::AlreadyExists), "{again:#?}");
    // the network delivers every copy twice, and partition 1 restarts re-sending its outbox
    let copies: Vec<_> = c.network.iter().cloned().collect();
    c.network.extend(copies);
    c.restart(1);
    c.deliver_all();
    c.resend_all();
    c.deliver_all();
    assert_eq!(scaling(&c, Intent::ScaledUp), 1);
    assert_eq!(StateView::new(&c.partitions[0].store).scale().map(|(_, r, done)| (r.desired_partition_count, done)), Some((4, true)));
    let resources_of = |c: &Cluster, p: PartitionId| -> Vec<usize> {
        [&b"P/k/"[..], b"P/l/", b"DQ/k/", b"DC/k/", b"FO/k/"].iter().map(|prefix| c.rows(p, prefix)).collect()
    };
    for p in 3..=4 {
        assert_eq!(resources_of(&c, p), resources_of(&c, 1), "partition {p} holds what partition 1 holds");
        let keys = |q: PartitionId| -> Vec<(&'static str, i64)> {
            let mut keys: Vec<(&'static str, i64)> = c.partitions[q as usize - 1]
                .records
                .iter()
                .filter(|r| r.is_event() && r.intent == Intent::Created)
                .filter(|r| matches!(r.value, RecordValue::Process(_) | RecordValue::DecisionRequirements(_) | RecordValue::Form(_)))
                .map(|r| (r.value_type.as_str(), r.key))
                .filter(|(_, k)| *k != deleted)
                .collect();
            keys.sort();
            keys
        };
        assert_eq!(keys(p), keys(1), "partition {p}: the same keys");
        assert_eq!(c.events(p, |r| r.key == deleted), 0, "partition {p}: the deleted process is not sent");
    }
    assert_eq!(c.rows(1, b"O/"), 0, "partition 1's outbox is empty");

    // a deployment after the scale-up reaches the new partitions too
    c.deploy("one_task.bpmn");
    c.deliver_all();
    assert_eq!(resources_of(&c, 4), resources_of(&c, 1));

    // an instance on partition 4 waits for messages living on partition 2 (of the first count)
    let order = key_on(2, 2);
    c.submit(4, create("payment", &format!(r#"{{"orderId": "{order}"}}"#)));
    c.deliver_all();
    c.submit(2, publish("order-paid", &order, "first"));
    c.deliver_all();
    c.submit(2, publish("order-paid", &order, "second"));
    c.deliver_all();
    assert_eq!(c.events(4, |r| is_process(r, Intent::ElementCompleted)), 1);
    assert_eq!(c.events(4, |r| r.intent == Intent::Correlated && matches!(r.value, RecordValue::ProcessMessageSubscription(_))), 2);
    c.check_replay();
}
