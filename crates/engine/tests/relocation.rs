//! Correlation keys move to a grown partition count exactly once (issue 31 ★; the step Zeebe
//! 8.8 calls "message correlation key relocation", `AWAIT_RELOCATION_COMPLETION`).
//!
//! A seeded simulation in the style of `distribution.rs`: engines over in-memory stores, a
//! network that delivers, re-orders, duplicates and drops the commands partitions send each
//! other, partitions restarting between batches (their queue lost, their outbox sent again), and
//! the broker's periodic re-send. Two partitions hold instances waiting for messages
//! (subscriptions, some CORRELATING when the move starts), buffered messages with no
//! subscriber yet, and message start markers; the count grows to five (SCALE SCALE_UP, then
//! MESSAGE_RELOCATION RELOCATE on each old partition, asked again until done), while a client
//! keeps publishing by the count it knows and creating instances. Each partition's engine and the
//! client learn the new message count at their own moment after every old partition reported
//! RELOCATED (stale senders). The invariant ([`Ledger::problems`]): every published message
//! correlates exactly once, every subscription opened is closed (correlated or deleted) exactly
//! once, every instance completes once; plus empty outboxes, no key left in flight, every
//! message and subscription on the partition of its key under the new count, and C1.

mod sim_support;

use sim_support::{model, Rng};
use std::collections::{BTreeMap, VecDeque};

use waggle_engine::{pending_commands, Command, Engine, NoJobStreams, ProcessingContext, SideEffect, StateView};
use waggle_protocol::codec::Entry;
use waggle_protocol::keys::partition_of_correlation_key;
use waggle_protocol::value::*;
use waggle_protocol::{Intent, PartitionId, Record, RecordType, RecordValue, RejectionType};
use waggle_state::{KvRead, KvStore, MemoryStore, Overlay};

const OLD: u32 = 2;
const NEW: u32 = 5;

struct Partition {
    id: PartitionId,
    engine: Engine,
    store: MemoryStore,
    entries: Vec<Entry>,
    records: Vec<Record>,
    /// The message count this partition's broker gives its engine (learned at its own moment).
    message_count: u32,
}

impl Partition {
    fn new(id: PartitionId) -> Self {
        Self { id, engine: Engine::new(id), store: MemoryStore::new(), entries: vec![], records: vec![], message_count: OLD }
    }
}

struct Cluster {
    partitions: Vec<Partition>,
    network: Vec<(PartitionId, Command)>,
    now_ms: i64,
    next_request: u64,
    /// Every answer given, by request.
    responses: Vec<(u64, Record)>,
}

impl Cluster {
    fn new(count: u16) -> Self {
        Self {
            partitions: (1..=count).map(Partition::new).collect(),
            network: Vec::new(),
            now_ms: 1_000,
            next_request: 1,
            responses: Vec::new(),
        }
    }

    fn count(&self) -> u32 {
        self.partitions.len() as u32
    }

    /// One batch of one command, committed; its commands for partitions go on the network.
    /// Returns the answer to its request, if it has one.
    fn submit(&mut self, partition: PartitionId, command: Command) -> Option<Record> {
        let request = command.request_id;
        let count = self.count();
        self.now_ms += 1;
        let p = &mut self.partitions[partition as usize - 1];
        let ctx = ProcessingContext {
            now_ms: self.now_ms,
            job_streams: &NoJobStreams,
            partition_count: count,
            message_partition_count: p.message_count,
        };
        let mut overlay = Overlay::new(&p.store);
        let output = p.engine.process_batch(&mut overlay, &ctx, vec![command]);
        p.store.commit(&overlay.into_writes()).unwrap();
        if let Some(entry) = output.entry() {
            p.entries.push(entry);
        }
        p.records.extend(output.records.iter().cloned());
        for effect in output.side_effects {
            if let SideEffect::SendCommand { partition, command } = effect {
                self.network.push((partition, *command));
            }
        }
        self.responses.extend(output.responses.iter().cloned());
        output.responses.into_iter().find(|(id, _)| Some(*id) == request).map(|(_, r)| r)
    }

    /// A crash between batches: what was on its way to the partition is lost, its caches start
    /// empty, and its outbox is sent again (as the broker does at start).
    fn restart(&mut self, partition: PartitionId) {
        self.network.retain(|(to, _)| *to != partition);
        let p = &mut self.partitions[partition as usize - 1];
        p.engine = Engine::new(partition);
        self.network.extend(pending_commands(StateView::new(&p.store), partition));
    }

    /// The broker's periodic re-send of every outbox.
    fn resend_all(&mut self) {
        for p in &self.partitions {
            self.network.extend(pending_commands(StateView::new(&p.store), p.id));
        }
    }

    fn deliver(&mut self, index: usize) {
        let (to, command) = self.network.remove(index);
        self.submit(to, command);
    }

    /// Delivers until nothing is on its way, sending every outbox again until all are empty.
    fn settle(&mut self) {
        for _ in 0..100 {
            while !self.network.is_empty() {
                self.deliver(0);
            }
            if self.partitions.iter().all(|p| p.store.scan_prefix(b"O/").next().is_none()) {
                return;
            }
            self.resend_all();
        }
        panic!("outboxes never emptied");
    }

    fn events(&self) -> impl Iterator<Item = (PartitionId, &Record)> + '_ {
        self.partitions.iter().flat_map(|p| p.records.iter().filter(|r| r.record_type == RecordType::Event).map(move |r| (p.id, r)))
    }

    fn relocation(&self, partition: PartitionId) -> Option<(u32, u32, bool)> {
        StateView::new(&self.partitions[partition as usize - 1].store).message_relocation()
    }

    fn scaled_up(&self) -> bool {
        StateView::new(&self.partitions[0].store).scale().is_some_and(|(_, _, done)| done)
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
}

/// What the client asks for, in its order.
#[derive(Debug, Clone)]
enum Op {
    /// An instance of `wait`, waiting for `go` with the key.
    Wait(String),
    /// A message with the key (`go`, `begin`, `finish`), with a time to live of an hour.
    Publish(&'static str, String),
}

/// The client (a gateway and its application): publishes by the message count it knows,
/// creates instances on the partitions that take them, and asks again what was refused
/// UNAVAILABLE.
struct Client {
    ops: VecDeque<Op>,
    message_count: u32,
    routed: u32,
    /// Messages acknowledged PUBLISHED: (key, name).
    published: Vec<(i64, &'static str)>,
    /// Instances of `wait` acknowledged CREATED.
    created: Vec<i64>,
    unavailable: usize,
}

impl Client {
    fn next(&mut self, c: &mut Cluster, rng: &mut Rng) {
        let Some(op) = self.ops.pop_front() else { return };
        let (partition, command) = match &op {
            Op::Wait(key) => {
                let value = ProcessInstanceCreationRecord {
                    bpmn_process_id: "wait".into(),
                    version: -1,
                    variables: format!(r#"{{"key": "{key}"}}"#),
                    ..Default::default()
                };
                (
                    rng.below(self.routed as usize) as PartitionId + 1,
                    Command::new(-1, Intent::Create, RecordValue::ProcessInstanceCreation(value)),
                )
            }
            Op::Publish(name, key) => {
                let value = MessageRecord {
                    name: name.to_string(),
                    correlation_key: key.clone(),
                    time_to_live_ms: 3_600_000,
                    variables: format!(r#"{{"key": "{key}"}}"#),
                    ..Default::default()
                };
                (partition_of_correlation_key(key, self.message_count), Command::new(-1, Intent::Publish, RecordValue::Message(value)))
            }
        };
        c.next_request += 1;
        let command = Command { request_id: Some(c.next_request), ..command };
        let answer = c.submit(partition, command).expect("every client command is answered");
        match (&op, answer.rejection.as_ref()) {
            (_, Some(r)) if r.rejection_type == RejectionType::Unavailable => {
                self.unavailable += 1;
                self.ops.push_back(op);
            }
            (_, Some(r)) => panic!("{op:?} rejected: {r:?}"),
            (Op::Wait(_), None) => self.created.push(answer.key),
            (Op::Publish(name, _), None) => self.published.push((answer.key, name)),
        }
    }
}

/// The invariant's ledger, from every partition's events: messages published (their keys),
/// correlations (message key → the element or instance it reached), subscriptions opened and
/// closed (message side, by element instance key).
#[derive(Default)]
struct Ledger {
    published: Vec<i64>,
    correlations: Vec<(i64, i64)>,
    opened: Vec<i64>,
    closed: Vec<i64>,
}

impl Ledger {
    fn of(c: &Cluster, published: &[(i64, &'static str)]) -> Self {
        let mut ledger = Ledger { published: published.iter().map(|(k, _)| *k).collect(), ..Default::default() };
        for (_, r) in c.events() {
            match (&r.value, r.intent) {
                (RecordValue::ProcessMessageSubscription(s), Intent::Correlated) => {
                    ledger.correlations.push((s.message_key, s.element_instance_key))
                }
                (RecordValue::MessageStartEventSubscription(s), Intent::Correlated) => {
                    ledger.correlations.push((s.message_key, s.process_instance_key))
                }
                (RecordValue::MessageSubscription(s), Intent::Created) => ledger.opened.push(s.element_instance_key),
                (RecordValue::MessageSubscription(s), Intent::Correlated) if s.interrupting => ledger.closed.push(s.element_instance_key),
                (RecordValue::MessageSubscription(s), Intent::Deleted) => ledger.closed.push(s.element_instance_key),
                _ => {}
            }
        }
        ledger
    }

    /// What breaks the invariant: a message correlated other than once (none, or twice), a
    /// correlation of a message nobody published, a subscription closed other than once.
    fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        let mut correlated: BTreeMap<i64, usize> = BTreeMap::new();
        for (message, _) in &self.correlations {
            *correlated.entry(*message).or_default() += 1;
        }
        for message in &self.published {
            let times = correlated.remove(message).unwrap_or(0);
            if times != 1 {
                problems.push(format!("message {message} correlated {times} times"));
            }
        }
        for (message, times) in correlated {
            problems.push(format!("message {message}, never published, correlated {times} times"));
        }
        let mut closed: BTreeMap<i64, usize> = BTreeMap::new();
        for element in &self.closed {
            *closed.entry(*element).or_default() += 1;
        }
        for element in &self.opened {
            let times = closed.remove(element).unwrap_or(0);
            if times != 1 {
                problems.push(format!("subscription of element {element} closed {times} times"));
            }
        }
        for (element, times) in closed {
            problems.push(format!("subscription of element {element}, never opened, closed {times} times"));
        }
        problems
    }
}

/// How the simulation's gateways learn the new count: after every old partition reported
/// RELOCATED (right), or as soon as the relocation was asked (wrong: a message can reach the
/// key's new partition before the key's subscriptions do).
#[derive(Clone, Copy, PartialEq)]
enum Switch {
    AfterRelocated,
    Early,
}

struct Outcome {
    problems: Vec<String>,
    cluster: Cluster,
    client: Client,
}

/// One seeded run (see the module doc).
fn run(seed: u64, switch: Switch) -> Outcome {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut c = Cluster::new(OLD as u16);
    let resources = vec![DeploymentResource { resource_name: "relocation.bpmn".into(), resource: model("relocation.bpmn") }];
    c.submit(1, Command::new(-1, Intent::Create, RecordValue::Deployment(DeploymentRecord { resources, ..Default::default() })));
    c.settle();
    let key = |i: usize| format!("key-{i}");
    let mut client = Client { ops: VecDeque::new(), message_count: OLD, routed: OLD, published: vec![], created: vec![], unavailable: 0 };
    // before the growth: instances waiting (subscriptions), messages buffered with no
    // subscriber yet, message starts (the second of each key waits for the first instance)
    client.ops.extend((0..10).map(|i| Op::Wait(key(i))));
    client.ops.extend((10..20).map(|i| Op::Publish("go", key(i))));
    for i in 20..24 {
        client.ops.extend([Op::Publish("begin", key(i)), Op::Publish("begin", key(i)), Op::Publish("finish", key(i))]);
    }
    // during and after: their counterparts, and keys new to the cluster
    let mut later: VecDeque<Op> = VecDeque::new();
    later.extend((0..10).map(|i| Op::Publish("go", key(i))));
    later.extend((10..20).map(|i| Op::Wait(key(i))));
    later.extend((20..24).map(|i| Op::Publish("finish", key(i))));
    for i in 24..30 {
        later.extend([Op::Wait(key(i)), Op::Publish("go", key(i))]);
    }

    let mut relocation_asked = false;
    let mut switch_at: Vec<Option<usize>> = vec![None; NEW as usize + 1];
    for step in 0..1_500 {
        if step == 150 {
            for id in OLD as u16 + 1..=NEW as u16 {
                c.partitions.push(Partition::new(id));
            }
            client.ops.extend(later.drain(..));
        }
        // the coordinator: the scale-up, then the relocation on each old partition, asked again
        // until done; the new count once every old partition reported RELOCATED
        if step >= 150 && step % 40 == 0 {
            if !c.scaled_up() {
                let value = ScaleRecord { current_partition_count: OLD, desired_partition_count: NEW, ..Default::default() };
                c.submit(1, Command::new(-1, Intent::ScaleUp, RecordValue::Scale(value)));
            } else {
                client.routed = NEW;
                for p in 1..=OLD as PartitionId {
                    if !c.relocation(p).is_some_and(|(_, _, done)| done) {
                        let value = MessageRelocationRecord { partition_count: OLD, desired_partition_count: NEW, ..Default::default() };
                        c.submit(p, Command::new(-1, Intent::Relocate, RecordValue::MessageRelocation(value)));
                        relocation_asked = true;
                    }
                }
            }
        }
        let relocated = (1..=OLD as PartitionId).all(|p| c.relocation(p).is_some_and(|(_, _, done)| done));
        if (relocated || switch == Switch::Early && relocation_asked) && switch_at[0].is_none() {
            // each broker and the client learn the count at their own moment
            for at in switch_at.iter_mut() {
                *at = Some(step + rng.below(200));
            }
        }
        for (i, at) in switch_at.iter().enumerate() {
            if *at == Some(step) {
                match i {
                    0 => client.message_count = NEW,
                    p => c.partitions[p - 1].message_count = NEW,
                }
            }
        }
        // the network and the client
        match rng.below(20) {
            0..=5 => client.next(&mut c, &mut rng),
            _ if c.network.is_empty() => {}
            6..=12 => c.deliver(0),
            13..=15 => {
                let i = rng.below(c.network.len());
                c.deliver(i);
            }
            16 => {
                let i = rng.below(c.network.len());
                let copy = c.network[i].clone();
                c.network.push(copy);
            }
            17 => {
                let i = rng.below(c.network.len());
                c.network.remove(i);
            }
            18 => {
                let p = rng.below(c.partitions.len()) as PartitionId + 1;
                c.restart(p);
            }
            _ => c.resend_all(),
        }
    }
    // the end: everything delivered, the coordinator done, every count learned, the client done
    for round in 0.. {
        assert!(round < 200, "seed {seed}: the run never settled");
        c.settle();
        if !c.scaled_up() {
            let value = ScaleRecord { current_partition_count: OLD, desired_partition_count: NEW, ..Default::default() };
            c.submit(1, Command::new(-1, Intent::ScaleUp, RecordValue::Scale(value)));
            continue;
        }
        client.routed = NEW;
        let mut relocated = true;
        for p in 1..=OLD as PartitionId {
            if !c.relocation(p).is_some_and(|(_, _, done)| done) {
                relocated = false;
                let value = MessageRelocationRecord { partition_count: OLD, desired_partition_count: NEW, ..Default::default() };
                c.submit(p, Command::new(-1, Intent::Relocate, RecordValue::MessageRelocation(value)));
            }
        }
        if relocated {
            client.message_count = NEW;
            for p in &mut c.partitions {
                p.message_count = NEW;
            }
        }
        if client.ops.is_empty() && relocated && c.network.is_empty() {
            break;
        }
        while !client.ops.is_empty() {
            client.next(&mut c, &mut rng);
            if client.unavailable > 10_000 {
                panic!("seed {seed}: refused without end");
            }
            if !relocated {
                break;
            }
        }
    }
    let problems = Ledger::of(&c, &client.published).problems();
    Outcome { problems, cluster: c, client }
}

/// What the runs went through (see the test).
#[derive(Debug, Default)]
struct Stats {
    correlating_moved: usize,
    sent_later: usize,
    distributed_subscription_commands: usize,
    released: usize,
}

/// The invariant over many seeds, and the state left behind.
#[test]
fn correlation_keys_move_to_the_grown_count_exactly_once() {
    let mut moved_keys = 0;
    let mut refused = 0;
    let mut stats = Stats::default();
    for seed in 0..40 {
        let Outcome { problems, cluster: c, client } = run(seed, Switch::AfterRelocated);
        assert!(problems.is_empty(), "seed {seed}: {problems:#?}");
        assert_eq!(client.published.len(), 10 + 8 + 4 + 10 + 4 + 6, "seed {seed}: every message published");
        assert_eq!(client.created.len(), 26, "seed {seed}: every instance created");
        refused += client.unavailable;
        let completed = |id: &str| {
            c.events()
                .filter(|(_, r)| {
                    r.intent == Intent::ElementCompleted
                        && matches!(&r.value, RecordValue::ProcessInstance(pi) if pi.bpmn_element_type == "PROCESS" && pi.bpmn_process_id == id)
                })
                .count()
        };
        assert_eq!(completed("wait"), 26, "seed {seed}: each waiting instance completed once");
        assert_eq!(completed("started"), 8, "seed {seed}: each message start once, one instance per key at a time");
        for p in &c.partitions {
            let view = StateView::new(&p.store);
            assert!(p.store.scan_prefix(b"O/").next().is_none(), "seed {seed}: partition {}'s outbox", p.id);
            assert!(p.store.scan_prefix(b"RK/").next().is_none(), "seed {seed}: partition {}: a key in flight", p.id);
            assert!(p.store.scan_prefix(b"MS/").next().is_none(), "seed {seed}: partition {}: a subscription left open", p.id);
            assert!(p.store.scan_prefix(b"MA/").next().is_none(), "seed {seed}: partition {}: a start marker left", p.id);
            for (_, value) in p.store.scan_prefix(b"M/") {
                let message: MessageRecord = postcard::from_bytes(&value).unwrap();
                assert_eq!(partition_of_correlation_key(&message.correlation_key, NEW), p.id, "seed {seed}: a message off its partition");
            }
            if p.id <= OLD as PartitionId {
                assert_eq!(view.message_relocation(), Some((OLD, NEW, true)), "seed {seed}: partition {}", p.id);
            }
        }
        moved_keys += c.events().filter(|(p, r)| *p > OLD as PartitionId && r.intent == Intent::Moved).count();
        // what the runs went through: keys moving while a subscription correlated, commands
        // forwarded by an old partition, commands its own batch sent through its outbox
        for (p, r) in c.events() {
            match (&r.value, r.intent) {
                (RecordValue::MessageRelocation(m), Intent::Moving) if m.subscriptions.iter().any(|s| s.message_key > 0) => {
                    stats.correlating_moved += 1
                }
                (RecordValue::CommandDistribution(d), Intent::Distributing)
                    if p <= OLD as PartitionId && d.value_type == waggle_protocol::ValueType::MessageSubscription =>
                {
                    if d.partition_id == p {
                        stats.sent_later += 1
                    } else if d.partition_id > OLD as PartitionId || c.relocation(p).is_some() {
                        stats.distributed_subscription_commands += 1
                    }
                }
                (RecordValue::MessageRelocation(_), Intent::Released) => stats.released += 1,
                _ => {}
            }
        }
        c.check_replay();
    }
    eprintln!("keys moved to the new partitions: {moved_keys}; publications refused while their key moved: {refused}; {stats:?}");
    assert!(moved_keys > 40, "keys moved to the new partitions: {moved_keys}");
    // the runs reach every path: a subscription CORRELATING when its key moved, a command of
    // an old partition's own batch for a key on its way (through its outbox), commands from
    // other partitions forwarded, a message start marker released on the key's new partition
    assert!(stats.correlating_moved > 0 && stats.sent_later > 0 && stats.distributed_subscription_commands > 0 && stats.released > 0);
    assert!(refused > 0, "no publication met a key on its way (the simulation does not reach the case)");
}

/// The check can fail: gateways publishing by the new count as soon as the relocation is asked
/// (before the old partitions reported RELOCATED) let a message reach a key's new partition
/// before the key's subscription does, and it is never correlated.
#[test]
fn switching_before_every_key_moved_breaks_the_invariant() {
    let failing = (0..10).filter(|&seed| !run(seed, Switch::Early).problems.is_empty()).count();
    assert!(failing > 0, "no seed broke the invariant with gateways switching early");
}

/// The checker itself: a message correlated twice, one never correlated, a subscription closed
/// twice and one never closed are each reported.
#[test]
fn the_ledger_reports_each_kind_of_break() {
    let fine = Ledger { published: vec![1, 2], correlations: vec![(1, 10), (2, 11)], opened: vec![10, 11], closed: vec![10, 11] };
    assert!(fine.problems().is_empty());
    let broken = Ledger {
        published: vec![1, 2, 3],
        correlations: vec![(1, 10), (1, 12), (2, 11), (4, 13)],
        opened: vec![10, 11, 12],
        closed: vec![10, 10, 11],
    };
    let problems = broken.problems();
    for expected in [
        "message 1 correlated 2 times",
        "message 3 correlated 0 times",
        "message 4, never published, correlated 1 times",
        "subscription of element 10 closed 2 times",
        "subscription of element 12 closed 0 times",
    ] {
        assert!(problems.iter().any(|p| p == expected), "{expected} missing from {problems:#?}");
    }
}

/// RELOCATE itself: refused on a partition beyond the old count and for a count that does not
/// grow, carried out once (a copy is refused ALREADY_EXISTS, as the coordinator asks again);
/// a client's publication for a key on its way is refused UNAVAILABLE without being written,
/// and once the key arrived the old partition still refuses it (the client asks the new one).
#[test]
fn a_relocation_is_carried_out_once_and_refuses_what_it_cannot_do() {
    let mut c = Cluster::new(OLD as u16);
    let resources = vec![DeploymentResource { resource_name: "relocation.bpmn".into(), resource: model("relocation.bpmn") }];
    c.submit(1, Command::new(-1, Intent::Create, RecordValue::Deployment(DeploymentRecord { resources, ..Default::default() })));
    c.settle();
    for id in OLD as u16 + 1..=NEW as u16 {
        c.partitions.push(Partition::new(id));
    }
    // a key of partition 1 under the old count and of another one under the new
    let key = (0..)
        .map(|i| format!("key-{i}"))
        .find(|k| partition_of_correlation_key(k, OLD) == 1 && partition_of_correlation_key(k, NEW) != 1)
        .unwrap();
    let target = partition_of_correlation_key(&key, NEW);
    let publish = |c: &mut Cluster, partition: PartitionId| {
        c.next_request += 1;
        let value = MessageRecord {
            name: "go".into(),
            correlation_key: key.clone(),
            time_to_live_ms: 60_000,
            message_id: "once".into(),
            variables: "{}".into(),
            ..Default::default()
        };
        c.submit(partition, Command { request_id: Some(c.next_request), ..Command::new(-1, Intent::Publish, RecordValue::Message(value)) })
            .expect("answered")
    };
    let buffered = publish(&mut c, 1);
    assert!(buffered.rejection.is_none(), "{buffered:?}");
    let relocate = |c: &mut Cluster, partition: PartitionId, count: u32, desired: u32| {
        c.next_request += 1;
        let value = MessageRelocationRecord { partition_count: count, desired_partition_count: desired, ..Default::default() };
        let command =
            Command { request_id: Some(c.next_request), ..Command::new(-1, Intent::Relocate, RecordValue::MessageRelocation(value)) };
        c.submit(partition, command).expect("answered")
    };
    let rejected = |r: &Record| r.rejection.as_ref().map(|r| r.rejection_type);
    assert_eq!(rejected(&relocate(&mut c, 3, OLD, NEW)), Some(RejectionType::InvalidArgument), "partition 3 had no keys");
    assert_eq!(rejected(&relocate(&mut c, 1, OLD, OLD)), Some(RejectionType::InvalidArgument), "the count does not grow");
    let started = relocate(&mut c, 1, OLD, NEW);
    assert_eq!((started.intent, rejected(&started)), (Intent::Relocating, None), "{started:?}");
    assert_eq!(rejected(&relocate(&mut c, 1, OLD, NEW)), Some(RejectionType::AlreadyExists), "asked again");
    // on its way: the publication is refused, nothing written
    let written = c.partitions[0].records.len();
    let refused = publish(&mut c, 1);
    assert_eq!(rejected(&refused), Some(RejectionType::Unavailable), "{refused:?}");
    assert_eq!(c.partitions[0].records.len(), written, "a refusal is not written");
    assert_eq!(c.relocation(1), Some((OLD, NEW, false)));
    c.settle();
    assert_eq!(c.relocation(1), Some((OLD, NEW, true)), "RELOCATED with the acknowledgement");
    assert_eq!(rejected(&publish(&mut c, 1)), Some(RejectionType::Unavailable), "the old partition does not take it");
    // the key's new partition has the message, its id too
    let again = publish(&mut c, target);
    assert_eq!(rejected(&again), Some(RejectionType::AlreadyExists), "the message id moved with the key: {again:?}");
    assert_eq!(
        StateView::new(&c.partitions[target as usize - 1].store).message(buffered.key).map(|m| m.correlation_key),
        Some(key.clone())
    );
    c.check_replay();
}

/// A client's correlation (MESSAGE_CORRELATION CORRELATE) whose subscription is CORRELATING
/// when its key moves is answered by the partition it asked, once the instance's partition
/// confirms (the confirmation reaches the old partition, which answers and forwards it).
#[test]
fn a_correlation_under_way_when_its_key_moves_is_answered() {
    let mut c = Cluster::new(OLD as u16);
    let resources = vec![DeploymentResource { resource_name: "relocation.bpmn".into(), resource: model("relocation.bpmn") }];
    c.submit(1, Command::new(-1, Intent::Create, RecordValue::Deployment(DeploymentRecord { resources, ..Default::default() })));
    c.settle();
    for id in OLD as u16 + 1..=NEW as u16 {
        c.partitions.push(Partition::new(id));
    }
    let key = (0..)
        .map(|i| format!("key-{i}"))
        .find(|k| partition_of_correlation_key(k, OLD) == 1 && partition_of_correlation_key(k, NEW) != 1)
        .unwrap();
    // an instance on partition 2 waits; its subscription lives on partition 1
    let value = ProcessInstanceCreationRecord {
        bpmn_process_id: "wait".into(),
        version: -1,
        variables: format!(r#"{{"key": "{key}"}}"#),
        ..Default::default()
    };
    let instance =
        c.submit(2, Command { request_id: Some(7), ..Command::new(-1, Intent::Create, RecordValue::ProcessInstanceCreation(value)) });
    let instance = instance.expect("created").key;
    c.settle();
    let value = MessageCorrelationRecord { name: "go".into(), correlation_key: key.clone(), variables: "{}".into(), ..Default::default() };
    let asked = c.submit(1, Command { request_id: Some(8), ..Command::new(-1, Intent::Correlate, RecordValue::MessageCorrelation(value)) });
    assert!(asked.is_none(), "answered once the instance's partition confirms");
    let value = MessageRelocationRecord { partition_count: OLD, desired_partition_count: NEW, ..Default::default() };
    c.submit(1, Command::new(-1, Intent::Relocate, RecordValue::MessageRelocation(value)));
    c.settle();
    let answer = c.responses.iter().find(|(id, _)| *id == 8).map(|(_, r)| r.clone()).expect("the correlation is answered");
    assert!(answer.rejection.is_none() && answer.intent == Intent::Correlated, "{answer:?}");
    let RecordValue::MessageCorrelation(correlated) = &answer.value else { panic!("{answer:?}") };
    assert_eq!(correlated.process_instance_key, instance);
    let ledger = Ledger::of(&c, &[(correlated.message_key, "go")]);
    assert!(ledger.problems().is_empty(), "{:#?}", ledger.problems());
    assert_eq!(c.relocation(1), Some((OLD, NEW, true)));
    c.check_replay();
}

/// Two growths (2 -> 4 -> 5): an instance waiting since before the first keeps naming the
/// key's first partition, which sends the instance partition's confirmation to the key's
/// partition of the second count while that one has not moved it yet (not to its partition
/// under the third count, a new one, which does not have it): the subscription closes once,
/// and the message correlates once.
#[test]
fn a_subscription_from_before_two_growths_closes_once() {
    let mut c = Cluster::new(2);
    let resources = vec![DeploymentResource { resource_name: "relocation.bpmn".into(), resource: model("relocation.bpmn") }];
    c.submit(1, Command::new(-1, Intent::Create, RecordValue::Deployment(DeploymentRecord { resources, ..Default::default() })));
    c.settle();
    let key = (0..)
        .map(|i| format!("key-{i}"))
        .find(|k| {
            partition_of_correlation_key(k, 2) == 1 && partition_of_correlation_key(k, 4) == 3 && partition_of_correlation_key(k, 5) > 3
        })
        .unwrap();
    let value = ProcessInstanceCreationRecord {
        bpmn_process_id: "wait".into(),
        version: -1,
        variables: format!(r#"{{"key": "{key}"}}"#),
        ..Default::default()
    };
    c.submit(2, Command::new(-1, Intent::Create, RecordValue::ProcessInstanceCreation(value)));
    c.settle();
    let relocate = |c: &mut Cluster, partition: PartitionId, count: u32, desired: u32| {
        let value = MessageRelocationRecord { partition_count: count, desired_partition_count: desired, ..Default::default() };
        c.submit(partition, Command::new(-1, Intent::Relocate, RecordValue::MessageRelocation(value)));
        c.settle();
    };
    // 2 -> 4: the subscription moves from partition 1 to 3
    for id in 3..=4 {
        c.partitions.push(Partition::new(id));
    }
    relocate(&mut c, 1, 2, 4);
    relocate(&mut c, 2, 2, 4);
    for p in &mut c.partitions {
        p.message_count = 4;
    }
    // 4 -> 5: partition 1 moved on (it has nothing of the key), partition 3 not yet
    c.partitions.push(Partition::new(5));
    relocate(&mut c, 1, 4, 5);
    c.next_request += 1;
    let value = MessageRecord {
        name: "go".into(),
        correlation_key: key.clone(),
        time_to_live_ms: 60_000,
        variables: "{}".into(),
        ..Default::default()
    };
    let published =
        c.submit(3, Command { request_id: Some(c.next_request), ..Command::new(-1, Intent::Publish, RecordValue::Message(value)) });
    let published = published.expect("answered");
    assert!(published.rejection.is_none(), "{published:?}");
    c.settle();
    for p in 2..=4 {
        relocate(&mut c, p, 4, 5);
    }
    let ledger = Ledger::of(&c, &[(published.key, "go")]);
    assert!(ledger.problems().is_empty(), "{:#?}", ledger.problems());
    for p in &c.partitions {
        assert!(p.store.scan_prefix(b"MS/").next().is_none(), "partition {}: a subscription left open", p.id);
    }
    c.check_replay();
}
