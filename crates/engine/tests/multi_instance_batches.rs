//! Parallel multi-instance bodies over many items (issue 26): the inner instances are activated
//! a chunk per batch (PROCESS_INSTANCE_BATCH ACTIVATE commands the engine hands back to its own
//! partition, as Zeebe's `ProcessInstanceBatchActivateProcessor` writes follow-up batch
//! commands), so every batch stays bounded whatever the collection's size; the output collection
//! is written once past `MAX_REWRITTEN_OUTPUT_COLLECTION` items, not at every completion; state
//! rebuilt from the log alone equals the processed state (C1).

use std::collections::VecDeque;

use waggle_engine::{Command, Engine, NoJobStreams, ProcessingContext, SideEffect, MI_ACTIVATIONS_PER_BATCH, MI_TERMINATIONS_PER_BATCH};
use waggle_protocol::codec::Entry;
use waggle_protocol::value::*;
use waggle_protocol::{Intent, Record, RecordType, RecordValue};
use waggle_state::{KvStore, MemoryStore, Overlay};

/// A parallel multi-instance activity over `=for i in 1..n return i`: an embedded subprocess
/// with nothing to wait for (`wait: false`: every inner instance completes in the batch that
/// activates it), or a service task of type `item`. The output collection `results` takes
/// `item * 2`.
fn model(wait: bool) -> String {
    let inner = if wait {
        r#"<bpmn:serviceTask id="t"><bpmn:extensionElements><zeebe:taskDefinition type="item"/></bpmn:extensionElements>LOOP</bpmn:serviceTask>"#
    } else {
        r#"<bpmn:subProcess id="t">LOOP<bpmn:startEvent id="is"/><bpmn:endEvent id="ie"/><bpmn:sequenceFlow id="i1" sourceRef="is" targetRef="ie"/></bpmn:subProcess>"#
    };
    let lc = r#"<bpmn:multiInstanceLoopCharacteristics><bpmn:extensionElements><zeebe:loopCharacteristics inputCollection="=for i in 1..n return i" inputElement="item" outputCollection="results" outputElement="=item * 2"/></bpmn:extensionElements></bpmn:multiInstanceLoopCharacteristics>"#;
    format!(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<bpmn:definitions xmlns:bpmn="http://www.omg.org/spec/BPMN/20100524/MODEL" xmlns:zeebe="http://camunda.org/schema/zeebe/1.0" id="d">
<bpmn:process id="wide" isExecutable="true"><bpmn:startEvent id="s"/><bpmn:sequenceFlow id="f1" sourceRef="s" targetRef="t"/>
{}<bpmn:sequenceFlow id="f2" sourceRef="t" targetRef="e"/><bpmn:endEvent id="e"/></bpmn:process></bpmn:definitions>"#,
        inner.replace("LOOP", lc)
    )
}

/// One partition's engine over a memory store, as the broker drives it: a batch at a time, the
/// commands a batch hands back to its own partition queued for later batches.
struct Partition {
    engine: Engine,
    store: MemoryStore,
    entries: Vec<Entry>,
    queue: VecDeque<Command>,
    /// The largest batch: records, and encoded bytes.
    largest: (usize, usize),
    /// Inner instances activated per batch, at most.
    most_activations: usize,
    /// Inner instances terminated per batch, at most.
    most_terminations: usize,
    /// Element instances of any kind that started terminating (ELEMENT_TERMINATING) per batch,
    /// at most.
    most_terminating: usize,
    batches: usize,
}

impl Partition {
    fn new() -> Self {
        Self {
            engine: Engine::new(1),
            store: MemoryStore::new(),
            entries: vec![],
            queue: VecDeque::new(),
            largest: (0, 0),
            most_activations: 0,
            most_terminations: 0,
            most_terminating: 0,
            batches: 0,
        }
    }

    /// Processes `commands` as one batch; returns its records.
    fn batch(&mut self, commands: Vec<Command>) -> Vec<Record> {
        let ctx = ProcessingContext { now_ms: 0, job_streams: &NoJobStreams, partition_count: 1, message_partition_count: 0 };
        let mut overlay = Overlay::new(&self.store);
        let output = self.engine.process_batch(&mut overlay, &ctx, commands);
        self.store.commit(&overlay.into_writes()).unwrap();
        self.batches += 1;
        if let Some(entry) = output.entry() {
            let bytes = output.encoded_entry().expect("bytes").len();
            self.largest = (self.largest.0.max(entry.records.len()), self.largest.1.max(bytes));
            self.entries.push(entry);
        }
        let activations = output
            .records
            .iter()
            .filter(|r| {
                r.intent == Intent::ActivateElement
                    && matches!(&r.value, RecordValue::ProcessInstance(pi) if pi.element_id.as_str() == "t" && pi.bpmn_element_type.as_str() != "MULTI_INSTANCE_BODY")
            })
            .count();
        self.most_activations = self.most_activations.max(activations);
        let terminations = output
            .records
            .iter()
            .filter(|r| {
                r.intent == Intent::ElementTerminated
                    && matches!(&r.value, RecordValue::ProcessInstance(pi) if pi.element_id.as_str() == "t" && pi.bpmn_element_type.as_str() != "MULTI_INSTANCE_BODY")
            })
            .count();
        self.most_terminations = self.most_terminations.max(terminations);
        let terminating = output.records.iter().filter(|r| r.intent == Intent::ElementTerminating).count();
        self.most_terminating = self.most_terminating.max(terminating);
        for effect in output.side_effects {
            if let SideEffect::SendCommand { partition: 1, command } = effect {
                self.queue.push_back(*command);
            }
        }
        output.records
    }

    /// Runs the queued commands (up to 512 a batch, as the broker takes them) until none is left;
    /// returns every record written.
    fn drain(&mut self) -> Vec<Record> {
        let mut records = Vec::new();
        while !self.queue.is_empty() {
            let n = self.queue.len().min(512);
            let commands: Vec<Command> = self.queue.drain(..n).collect();
            records.extend(self.batch(commands));
        }
        records
    }

    fn deploy(&mut self, xml: String) {
        let resources = vec![DeploymentResource { resource_name: "wide.bpmn".into(), resource: xml.into_bytes() }];
        self.batch(vec![Command::new(-1, Intent::Create, RecordValue::Deployment(DeploymentRecord { resources, ..Default::default() }))]);
    }

    /// Creates an instance with `n` items: the batch that activates the body (and the first
    /// chunk of its inner instances).
    fn create(&mut self, n: usize) -> Vec<Record> {
        let creation = ProcessInstanceCreationRecord {
            bpmn_process_id: "wide".into(),
            version: -1,
            variables: format!(r#"{{"n": {n}}}"#),
            ..Default::default()
        };
        self.batch(vec![Command::new(-1, Intent::Create, RecordValue::ProcessInstanceCreation(creation))])
    }

    fn check_replay(&self) {
        let replayed = MemoryStore::new();
        let mut engine = Engine::new(1);
        for entry in &self.entries {
            let mut overlay = Overlay::new(&replayed);
            engine.replay(&mut overlay, entry);
            replayed.commit(&overlay.into_writes()).unwrap();
        }
        assert!(self.store.dump() == replayed.dump(), "state rebuilt from the log differs from the processed state");
    }
}

/// Restarts the partition (or a new leader takes over): the commands it had handed back to
/// itself are lost and the engine starts anew; returns what `pending_commands` gives it to
/// deliver again, all for itself.
fn restart(partition: &mut Partition) -> Vec<Command> {
    partition.queue.clear();
    partition.engine = Engine::new(1);
    let pending = waggle_engine::pending_commands(waggle_engine::StateView::new(&partition.store), 1);
    assert!(pending.iter().all(|(target, _)| *target == 1), "{pending:?}");
    pending.into_iter().map(|(_, command)| command).collect()
}

/// The bounds every batch of a termination keeps, and its end: no batch terminated more than
/// `MI_TERMINATIONS_PER_BATCH` inner instances or started terminating more element instances,
/// or wrote more than eight records for each; nothing is left to ask for after a restart.
fn check_bounded(partition: &Partition, what: &str) {
    let most = MI_TERMINATIONS_PER_BATCH;
    assert!(partition.most_terminations <= most, "{what}: {} inner instances terminated in one batch", partition.most_terminations);
    assert!(partition.most_terminating <= most, "{what}: {} element instances began terminating in one batch", partition.most_terminating);
    assert!(partition.largest.0 <= 8 * most, "{what}: a batch of {} records", partition.largest.0);
    let pending = waggle_engine::pending_commands(waggle_engine::StateView::new(&partition.store), 1);
    assert!(pending.is_empty(), "{what}: still asked for after a restart: {pending:?}");
}

/// How many instances of `element_id` (of type `element_type`) terminated, after checking that
/// none terminated twice.
fn terminated_each_once(records: &[Record], element_id: &str, element_type: &str) -> usize {
    let keys: Vec<i64> = records
        .iter()
        .filter(|r| {
            element_event(r, Intent::ElementTerminated, element_id)
                && matches!(&r.value, RecordValue::ProcessInstance(pi) if pi.bpmn_element_type.as_str() == element_type)
        })
        .map(|r| r.key)
        .collect();
    let distinct: std::collections::HashSet<i64> = keys.iter().copied().collect();
    assert_eq!(distinct.len(), keys.len(), "an instance of `{element_id}` terminated twice");
    distinct.len()
}

fn completed(records: &[Record], element_type: &str) -> usize {
    records
        .iter()
        .filter(|r| {
            r.intent == Intent::ElementCompleted
                && matches!(&r.value, RecordValue::ProcessInstance(pi) if pi.bpmn_element_type.as_str() == element_type)
        })
        .count()
}

/// The last value the records gave variable `results`, and the bytes of all its values.
fn results(records: &[Record]) -> (Vec<u64>, usize) {
    let values: Vec<&VariableRecord> = records
        .iter()
        .filter_map(|r| match &r.value {
            RecordValue::Variable(v) if r.record_type == RecordType::Event && v.name == "results" => Some(v),
            _ => None,
        })
        .collect();
    let bytes = values.iter().map(|v| v.value.len()).sum();
    let last: serde_json::Value = serde_json::from_str(&values.last().expect("results written").value).unwrap();
    (last.as_array().unwrap().iter().map(|v| v.as_u64().expect("a number")).collect(), bytes)
}

/// Bounds every batch must keep, whatever the collection's size: an inner subprocess that runs
/// through its start and end event writes 22 records; the last batch writes the output
/// collection once (~7 bytes an item for 100,000 items).
const MAX_BATCH_RECORDS: usize = 24 * MI_ACTIVATIONS_PER_BATCH;
const MAX_BATCH_BYTES: usize = 4 << 20;

fn run_to_completion(n: usize) -> Partition {
    let mut partition = Partition::new();
    partition.deploy(model(false));
    let mut records = partition.create(n);
    records.extend(partition.drain());
    assert_eq!(completed(&records, "SUB_PROCESS"), n, "every inner instance completed");
    assert_eq!(completed(&records, "MULTI_INSTANCE_BODY"), 1);
    assert_eq!(completed(&records, "PROCESS"), 1, "the instance completed");
    let (results, bytes) = results(&records);
    assert_eq!(results.len(), n);
    assert!(results.iter().enumerate().all(|(i, &r)| r == 2 * (i as u64 + 1)), "results out of place");
    // written twice (the initial nulls, the final list), not once per completion
    let final_len = serde_json::to_string(&results).unwrap().len();
    assert!(bytes <= 3 * final_len, "the output collection took {bytes} bytes of records for a final {final_len}");
    assert!(partition.most_activations <= MI_ACTIVATIONS_PER_BATCH, "{} activations in one batch", partition.most_activations);
    assert!(partition.largest.0 <= MAX_BATCH_RECORDS, "a batch of {} records", partition.largest.0);
    assert!(partition.largest.1 <= MAX_BATCH_BYTES, "a batch of {} bytes", partition.largest.1);
    assert!(partition.batches >= n / MI_ACTIVATIONS_PER_BATCH, "{} batches for {n} items", partition.batches);
    let left: Vec<String> = partition
        .store
        .dump()
        .into_iter()
        .filter(|(k, _)| [&b"E/"[..], b"MB/", b"MO/", b"V/"].iter().any(|t| k.starts_with(t)))
        .map(|(k, _)| String::from_utf8_lossy(&k).into_owned())
        .collect();
    assert!(left.is_empty(), "left in state: {:?}", &left[..left.len().min(5)]);
    partition
}

#[test]
fn a_parallel_body_over_2000_items_activates_them_a_chunk_per_batch() {
    let partition = run_to_completion(2_000);
    partition.check_replay();
}

/// 100,000 inner instances (issue 26): every batch stays under the bounds above; prints the
/// time and the largest batch.
#[test]
fn a_parallel_body_over_100000_items_completes_with_bounded_batches() {
    let started = std::time::Instant::now();
    let partition = run_to_completion(100_000);
    println!(
        "100,000 inner instances in {:?}: {} batches, the largest {} records / {} bytes, at most {} activations a batch",
        started.elapsed(),
        partition.batches,
        partition.largest.0,
        partition.largest.1,
        partition.most_activations
    );
}

/// Inner instances that wait (jobs), completed by a worker while the body is still activating
/// the rest; the output collection (over `MAX_REWRITTEN_OUTPUT_COLLECTION` items) is kept apart
/// and put together once.
#[test]
fn jobs_completed_while_the_body_still_activates_are_collected() {
    let n = 1_500;
    let mut partition = Partition::new();
    partition.deploy(model(true));
    let mut records = partition.create(n);
    let mut jobs: Vec<i64> = Vec::new();
    let mut done = 0;
    let mut all = records.clone();
    loop {
        jobs.extend(records.iter().filter(|r| r.intent == Intent::Created && matches!(r.value, RecordValue::Job(_))).map(|r| r.key));
        // complete the jobs there are before the body's next chunk comes
        let completions: Vec<Command> =
            jobs.drain(..).map(|key| Command::new(key, Intent::Complete, RecordValue::Job(JobRecord::default()))).collect();
        done += completions.len();
        let mut next = if completions.is_empty() { vec![] } else { partition.batch(completions) };
        if let Some(command) = partition.queue.pop_front() {
            next.extend(partition.batch(vec![command]));
        }
        if next.is_empty() {
            break;
        }
        all.extend(next.iter().cloned());
        records = next;
        if completed(&records, "PROCESS") == 1 {
            break;
        }
    }
    assert_eq!(done, n);
    assert_eq!(completed(&all, "PROCESS"), 1, "the instance completed");
    assert!(partition.most_activations <= MI_ACTIVATIONS_PER_BATCH);
    let (results, _) = results(&all);
    assert_eq!(results.len(), n);
    assert!(results.iter().enumerate().all(|(i, &r)| r == 2 * (i as u64 + 1)), "results out of place");
    partition.check_replay();
}

/// A partition that restarts (or changes leader) between two chunks loses the command it had
/// handed back to itself: `pending_commands` finds the body still activating in state and gives
/// its next command again; a duplicate copy only goes on from where the body is.
#[test]
fn after_a_restart_the_next_chunk_is_asked_for_again() {
    let n = 1_200;
    let mut partition = Partition::new();
    partition.deploy(model(false));
    let mut records = partition.create(n);
    assert_eq!(partition.queue.len(), 1, "the next chunk handed back");
    let pending = restart(&mut partition);
    assert_eq!(pending.len(), 1, "{pending:?}");
    let command = pending.into_iter().next().unwrap();
    assert!(matches!(command.value, RecordValue::ProcessInstanceBatch(_)));
    // delivered twice: the copy continues where the first left the body
    partition.queue.push_back(command.clone());
    partition.queue.push_back(command);
    records.extend(partition.drain());
    assert_eq!(completed(&records, "SUB_PROCESS"), n, "every inner instance completed, once");
    assert_eq!(completed(&records, "PROCESS"), 1);
    let (results, _) = results(&records);
    assert!(results.iter().enumerate().all(|(i, &r)| r == 2 * (i as u64 + 1)), "results out of place");
    assert!(waggle_engine::pending_commands(waggle_engine::StateView::new(&partition.store), 1).is_empty());
    let rejected = records.iter().filter(|r| r.record_type == RecordType::CommandRejection).count();
    assert!(rejected <= 2, "{rejected} rejected copies");
    partition.check_replay();
}

/// The input collection fails to evaluate when a later chunk is due: an incident on the body
/// (no copy of the command raises a second one); once the variable is fixed and the incident
/// resolved, the body asks for the chunk again and completes.
#[test]
fn a_collection_failing_between_chunks_is_an_incident_and_resolving_it_goes_on() {
    let n = 1_200;
    let mut partition = Partition::new();
    partition.deploy(model(false));
    let mut records = partition.create(n);
    let instance = records
        .iter()
        .find_map(|r| match &r.value {
            RecordValue::ProcessInstance(pi) if r.intent == Intent::ElementActivating && pi.bpmn_element_type.as_str() == "PROCESS" => {
                Some(r.key)
            }
            _ => None,
        })
        .expect("the instance");
    let set = |n: &str| {
        let document = VariableDocumentRecord {
            scope_key: instance,
            update_semantics: UpdateSemantics::Propagate,
            variables: format!(r#"{{"n": {n}}}"#),
        };
        Command::new(-1, Intent::Update, RecordValue::VariableDocument(document))
    };
    records.extend(partition.batch(vec![set(r#""x""#)]));
    let next = partition.queue.front().cloned().expect("the next chunk");
    records.extend(partition.drain());
    let incidents: Vec<i64> =
        records.iter().filter(|r| r.intent == Intent::Created && matches!(r.value, RecordValue::Incident(_))).map(|r| r.key).collect();
    assert_eq!(incidents.len(), 1, "one incident on the body");
    // a copy of the command (a restart) while the incident is open: refused, no second incident
    partition.queue.push_back(next);
    let copy = partition.drain();
    assert!(copy.iter().any(|r| r.record_type == RecordType::CommandRejection));
    assert!(!copy.iter().any(|r| matches!(r.value, RecordValue::Incident(_))));
    records.extend(partition.batch(vec![set(&n.to_string())]));
    records.extend(partition.batch(vec![Command::new(incidents[0], Intent::Resolve, RecordValue::Incident(IncidentRecord::default()))]));
    records.extend(partition.drain());
    assert_eq!(completed(&records, "SUB_PROCESS"), n);
    assert_eq!(completed(&records, "PROCESS"), 1);
    partition.check_replay();
}

/// Cancelling an instance whose body has 10,000 active inner instances (jobs): the inner
/// instances terminate a chunk per batch (PROCESS_INSTANCE_BATCH TERMINATE, as Zeebe 8.5's
/// `ProcessInstanceBatchTerminateProcessor`), the body and the process once the last has; every
/// job is canceled and nothing is left in state. The partition restarts between two chunks: the
/// next is asked for again, and a copy only goes on from where the body is.
#[test]
fn cancelling_a_wide_body_terminates_every_inner_instance_a_chunk_per_batch() {
    let n = 10_000;
    let mut partition = Partition::new();
    partition.deploy(model(true));
    let mut records = partition.create(n);
    records.extend(partition.drain());
    let jobs = records.iter().filter(|r| r.intent == Intent::Created && matches!(r.value, RecordValue::Job(_))).count();
    assert_eq!(jobs, n);
    let instance = records
        .iter()
        .find_map(|r| match &r.value {
            RecordValue::ProcessInstance(pi) if r.intent == Intent::ElementActivating && pi.bpmn_element_type.as_str() == "PROCESS" => {
                Some(r.key)
            }
            _ => None,
        })
        .expect("the instance");
    let largest_before = partition.largest;
    partition.largest = (0, 0);
    let mut cancel =
        partition.batch(vec![Command::new(instance, Intent::Cancel, RecordValue::ProcessInstance(ProcessInstanceRecord::default()))]);
    assert!(!cancel.iter().any(|r| r.record_type == RecordType::CommandRejection));
    assert_eq!(terminated(&cancel, "PROCESS"), 0, "the process ends with its body's last inner instance");
    // a chunk, then a restart: the command handed back is lost and asked for again (twice)
    let first = partition.queue.pop_front().expect("the first chunk");
    cancel.extend(partition.batch(vec![first]));
    assert_eq!(partition.queue.len(), 1, "the next chunk handed back");
    let pending = restart(&mut partition);
    assert_eq!(pending.len(), 1, "{pending:?}");
    let command = pending.into_iter().next().unwrap();
    assert_eq!(command.intent, Intent::Terminate);
    partition.queue.push_back(command.clone());
    partition.queue.push_back(command);
    cancel.extend(partition.drain());
    let canceled = cancel.iter().filter(|r| r.intent == Intent::Canceled && matches!(r.value, RecordValue::Job(_))).count();
    assert_eq!(canceled, n, "every job canceled");
    assert_eq!(terminated(&cancel, "SERVICE_TASK"), n, "every inner instance terminated, once");
    assert_eq!(terminated(&cancel, "MULTI_INSTANCE_BODY"), 1);
    assert_eq!(terminated(&cancel, "PROCESS"), 1);
    assert!(partition.batches >= n / MI_TERMINATIONS_PER_BATCH, "{} batches", partition.batches);
    println!(
        "cancelling {n} inner instances: the largest batch {} records / {} bytes (the largest activation batch: {} records / {} bytes)",
        partition.largest.0, partition.largest.1, largest_before.0, largest_before.1
    );
    check_bounded(&partition, "cancelled");
    let left: Vec<Vec<u8>> = partition
        .store
        .dump()
        .into_iter()
        .map(|(k, _)| k)
        .filter(|k| [&b"E/"[..], b"MB/", b"MO/", b"V/", b"J/", b"A/", b"PR/"].iter().any(|t| k.starts_with(t)))
        .collect();
    assert!(left.is_empty(), "{} rows left", left.len());
    partition.check_replay();
}

fn terminated(records: &[Record], element_type: &str) -> usize {
    records
        .iter()
        .filter(|r| {
            r.intent == Intent::ElementTerminated
                && matches!(&r.value, RecordValue::ProcessInstance(pi) if pi.bpmn_element_type.as_str() == element_type)
        })
        .count()
}

/// A completion condition that holds while a parallel body has more than
/// `MI_TERMINATIONS_PER_BATCH` other inner instances active (and is still activating the rest):
/// no more are activated, the others terminate a chunk per batch (PROCESS_INSTANCE_BATCH
/// TERMINATING, Waggle's own event, then TERMINATE of the body), then the body and the process
/// complete (`MultiInstanceActivityTest`: a completion condition that holds terminates the
/// other inner instances and completes the body). The partition restarts between two chunks:
/// the body is still active, but state keeps it as terminating its inner instances, so the next
/// chunk is asked for again (delivered twice: the copy goes on from where the body is).
#[test]
fn a_completion_condition_terminates_a_wide_body_a_chunk_per_batch() {
    let n = 4_000;
    let mut partition = Partition::new();
    let xml = model(true).replace(
        "</bpmn:extensionElements></bpmn:multiInstanceLoopCharacteristics>",
        "</bpmn:extensionElements><bpmn:completionCondition>=numberOfCompletedInstances &gt;= 1</bpmn:completionCondition></bpmn:multiInstanceLoopCharacteristics>",
    );
    partition.deploy(xml);
    let mut records = partition.create(n);
    // three chunks activated (1,500 inner instances), the fourth still to come
    for _ in 0..2 {
        let next = partition.queue.pop_front().expect("the next chunk");
        records.extend(partition.batch(vec![next]));
    }
    let job = records.iter().find(|r| r.intent == Intent::Created && matches!(r.value, RecordValue::Job(_))).expect("a job").key;
    partition.largest = (0, 0);
    // the condition holds: a chunk terminates with it, another one later, then a restart
    let complete = Command::new(job, Intent::Complete, RecordValue::Job(JobRecord::default()));
    let ended = run_with_restart(&mut partition, complete, 1, false);
    records.extend(ended.iter().cloned());
    let activated = records
        .iter()
        .filter(|r| {
            r.intent == Intent::ElementActivated
                && matches!(&r.value, RecordValue::ProcessInstance(pi) if pi.bpmn_element_type.as_str() == "SERVICE_TASK")
        })
        .count();
    assert_eq!(activated, 1_500, "no inner instance activated once the condition held");
    assert_eq!(terminated_each_once(&records, "t", "SERVICE_TASK"), activated - 1);
    assert_eq!(terminated(&records, "SERVICE_TASK"), activated - 1);
    let marked =
        ended.iter().filter(|r| r.intent == Intent::Terminating && matches!(r.value, RecordValue::ProcessInstanceBatch(_))).count();
    assert_eq!(marked, 1, "PROCESS_INSTANCE_BATCH TERMINATING once");
    assert_eq!(completed(&records, "MULTI_INSTANCE_BODY"), 1);
    assert_eq!(completed(&records, "PROCESS"), 1);
    check_bounded(&partition, "a completion condition");
    assert_eq!(rows_left(&partition), 0, "rows left in state");
    partition.check_replay();
}

/// A parallel multi-instance service task over `=for i in 1..n return i` in process `wide`,
/// interrupted by message `stop` (correlation key `=key`): an interrupting boundary event `b`
/// on the body (`esp: false`), or an interrupting event subprocess `esp` of the process
/// (`esp: true`); either path leads to a service task of type `after`.
fn interrupted_model(esp: bool) -> String {
    let task = r#"<bpmn:serviceTask id="t"><bpmn:extensionElements><zeebe:taskDefinition type="item"/></bpmn:extensionElements><bpmn:multiInstanceLoopCharacteristics><bpmn:extensionElements><zeebe:loopCharacteristics inputCollection="=for i in 1..n return i" inputElement="item"/></bpmn:extensionElements></bpmn:multiInstanceLoopCharacteristics></bpmn:serviceTask>"#;
    let after = r#"<bpmn:serviceTask id="after"><bpmn:extensionElements><zeebe:taskDefinition type="after"/></bpmn:extensionElements></bpmn:serviceTask>"#;
    let interruption = if esp {
        format!(
            r#"<bpmn:subProcess id="esp" triggeredByEvent="true"><bpmn:startEvent id="es" isInterrupting="true"><bpmn:messageEventDefinition messageRef="m"/></bpmn:startEvent>
<bpmn:sequenceFlow id="e1" sourceRef="es" targetRef="after"/>{after}<bpmn:sequenceFlow id="e2" sourceRef="after" targetRef="ee"/><bpmn:endEvent id="ee"/></bpmn:subProcess>"#
        )
    } else {
        format!(
            r#"<bpmn:boundaryEvent id="b" attachedToRef="t" cancelActivity="true"><bpmn:messageEventDefinition messageRef="m"/></bpmn:boundaryEvent>
<bpmn:sequenceFlow id="f3" sourceRef="b" targetRef="after"/>{after}<bpmn:sequenceFlow id="f4" sourceRef="after" targetRef="e2"/><bpmn:endEvent id="e2"/>"#
        )
    };
    format!(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<bpmn:definitions xmlns:bpmn="http://www.omg.org/spec/BPMN/20100524/MODEL" xmlns:zeebe="http://camunda.org/schema/zeebe/1.0" id="d">
<bpmn:process id="wide" isExecutable="true"><bpmn:startEvent id="s"/><bpmn:sequenceFlow id="f1" sourceRef="s" targetRef="t"/>
{task}<bpmn:sequenceFlow id="f2" sourceRef="t" targetRef="e"/><bpmn:endEvent id="e"/>{interruption}</bpmn:process>
<bpmn:message id="m" name="stop"><bpmn:extensionElements><zeebe:subscription correlationKey="=key"/></bpmn:extensionElements></bpmn:message></bpmn:definitions>"#
    )
}

fn create_keyed(partition: &mut Partition, n: usize) -> Vec<Record> {
    let creation = ProcessInstanceCreationRecord {
        bpmn_process_id: "wide".into(),
        version: -1,
        variables: format!(r#"{{"n": {n}, "key": "k1"}}"#),
        ..Default::default()
    };
    partition.batch(vec![Command::new(-1, Intent::Create, RecordValue::ProcessInstanceCreation(creation))])
}

fn publish_stop() -> Command {
    let message = MessageRecord {
        name: "stop".into(),
        correlation_key: "k1".into(),
        variables: r#"{"why": "stopped"}"#.into(),
        ..Default::default()
    };
    Command::new(-1, Intent::Publish, RecordValue::Message(message))
}

fn position_of(records: &[Record], f: impl Fn(&Record) -> bool) -> usize {
    records.iter().position(f).expect("record written")
}

fn element_event(r: &Record, intent: Intent, element_id: &str) -> bool {
    r.intent == intent && matches!(&r.value, RecordValue::ProcessInstance(pi) if pi.element_id.as_str() == element_id)
}

/// Jobs of type `job_type` the records created.
fn jobs_of(records: &[Record], job_type: &str) -> Vec<i64> {
    records
        .iter()
        .filter(|r| r.intent == Intent::Created && matches!(&r.value, RecordValue::Job(j) if j.job_type == job_type))
        .map(|r| r.key)
        .collect()
}

/// Rows of the tables an instance uses, left in state.
fn rows_left(partition: &Partition) -> usize {
    partition
        .store
        .dump()
        .into_iter()
        .filter(|(k, _)| [&b"E/"[..], b"MB/", b"MO/", b"V/", b"J/", b"A/", b"PR/", b"PE/", b"PS/"].iter().any(|t| k.starts_with(t)))
        .count()
}

/// Runs an instance over `n` items to the interruption (message `stop`): every inner instance
/// activated first, then the message published; the partition restarts between two chunks of
/// the termination (the command handed back is lost, `pending_commands` asks for it again,
/// twice). Returns the records from the publication on.
fn interrupt_wide_body(partition: &mut Partition, n: usize, esp: bool) -> Vec<Record> {
    partition.deploy(interrupted_model(esp));
    let mut records = create_keyed(partition, n);
    records.extend(partition.drain());
    assert_eq!(jobs_of(&records, "item").len(), n);
    partition.largest = (0, 0);
    partition.most_terminations = 0;
    partition.most_terminating = 0;
    // two chunks (and whatever else is queued), one command a batch, then a restart
    let interrupted = run_with_restart(partition, publish_stop(), 2, false);
    assert!(interrupted.iter().any(|r| r.intent == Intent::Triggering), "the trigger waits");
    interrupted
}

/// An interrupting message boundary event on a parallel body with 10,000 active inner instances
/// (issue 26): PROCESS_EVENT TRIGGERING keeps the trigger while the inner instances terminate a
/// chunk per batch; once the body has terminated, TRIGGERED, the boundary event is entered with
/// the message's variables and the flow goes on (Zeebe's `EventTriggerBehavior`;
/// `BoundaryEventTest`, `MultiInstanceActivityTest.shouldTerminateInstancesOnBoundaryEvent`).
/// Survives a restart mid-termination; state rebuilt from the log equals the processed state.
#[test]
fn a_message_boundary_event_on_a_wide_body_terminates_it_a_chunk_per_batch() {
    let n = 10_000;
    let mut partition = Partition::new();
    let records = interrupt_wide_body(&mut partition, n, false);
    assert_eq!(terminated(&records, "SERVICE_TASK"), n, "every inner instance terminated, once");
    assert_eq!(terminated(&records, "MULTI_INSTANCE_BODY"), 1);
    let canceled = records.iter().filter(|r| r.intent == Intent::Canceled && matches!(r.value, RecordValue::Job(_))).count();
    assert_eq!(canceled, n, "every job canceled");
    check_bounded(&partition, "a boundary event");
    // the order: TRIGGERING, the body TERMINATING, ..., the body TERMINATED, TRIGGERED, the
    // boundary event entered
    let process_event = |intent: Intent| {
        move |r: &Record| {
            r.intent == intent
                && matches!(&r.value, RecordValue::ProcessEvent(e) if e.target_element_id == "b" && r.record_type == RecordType::Event)
        }
    };
    let triggering = position_of(&records, process_event(Intent::Triggering));
    let body_terminating = position_of(&records, |r| {
        r.intent == Intent::ElementTerminating
            && matches!(&r.value, RecordValue::ProcessInstance(pi) if pi.bpmn_element_type.as_str() == "MULTI_INSTANCE_BODY")
    });
    let body_terminated = position_of(&records, |r| {
        r.intent == Intent::ElementTerminated
            && matches!(&r.value, RecordValue::ProcessInstance(pi) if pi.bpmn_element_type.as_str() == "MULTI_INSTANCE_BODY")
    });
    let triggered = position_of(&records, process_event(Intent::Triggered));
    let entered = position_of(&records, |r| element_event(r, Intent::ElementActivating, "b"));
    assert!(triggering < body_terminating && body_terminated < triggered && triggered < entered);
    assert_eq!(records.iter().filter(|r| process_event(Intent::Triggering)(r)).count(), 1);
    let RecordValue::ProcessEvent(trigger) = &records[triggering].value else { unreachable!() };
    assert_eq!(serde_json::from_str::<serde_json::Value>(&trigger.variables).unwrap(), serde_json::json!({"why": "stopped"}));
    assert!(records.iter().any(|r| element_event(r, Intent::ElementCompleted, "b")));
    assert!(
        records.iter().any(|r| r.intent == Intent::Created && matches!(&r.value, RecordValue::Variable(v) if v.name == "why")),
        "the message's variables"
    );
    let after = jobs_of(&records, "after");
    assert_eq!(after.len(), 1, "the boundary path goes on");
    let done = partition.batch(vec![Command::new(after[0], Intent::Complete, RecordValue::Job(JobRecord::default()))]);
    assert_eq!(completed(&done, "PROCESS"), 1);
    assert_eq!(rows_left(&partition), 0, "rows left in state");
    partition.check_replay();
}

/// An interrupting message event subprocess of a process whose parallel body has 10,000 active
/// inner instances: the event subprocess starts once they have terminated, a chunk per batch
/// (`EventSubProcessTest`: an interrupting event subprocess terminates the scope's other
/// element instances, then is activated).
#[test]
fn an_interrupting_event_subprocess_waits_for_a_wide_body_to_terminate() {
    let n = 10_000;
    let mut partition = Partition::new();
    let records = interrupt_wide_body(&mut partition, n, true);
    assert_eq!(terminated(&records, "SERVICE_TASK"), n);
    assert_eq!(terminated(&records, "MULTI_INSTANCE_BODY"), 1);
    check_bounded(&partition, "an event subprocess");
    let body_terminated = position_of(&records, |r| {
        r.intent == Intent::ElementTerminated
            && matches!(&r.value, RecordValue::ProcessInstance(pi) if pi.bpmn_element_type.as_str() == "MULTI_INSTANCE_BODY")
    });
    let started = position_of(&records, |r| element_event(r, Intent::ElementActivating, "esp"));
    assert!(body_terminated < started);
    assert_eq!(records.iter().filter(|r| element_event(r, Intent::ElementActivating, "esp")).count(), 1);
    let after = jobs_of(&records, "after");
    assert_eq!(after.len(), 1, "the event subprocess runs");
    let done = partition.batch(vec![Command::new(after[0], Intent::Complete, RecordValue::Job(JobRecord::default()))]);
    assert_eq!(completed(&done, "EVENT_SUB_PROCESS"), 1);
    assert_eq!(completed(&done, "PROCESS"), 1);
    assert_eq!(rows_left(&partition), 0, "rows left in state");
    partition.check_replay();
}

/// The instance is cancelled while an interrupting boundary event waits for the body's inner
/// instances to terminate: the boundary event is never entered, the instance terminates, and
/// the trigger goes with the body.
#[test]
fn cancelling_while_a_boundary_event_waits_drops_the_trigger() {
    let n = 1_500;
    let mut partition = Partition::new();
    partition.deploy(interrupted_model(false));
    let mut records = create_keyed(&mut partition, n);
    records.extend(partition.drain());
    let instance = records
        .iter()
        .find(|r| {
            r.intent == Intent::ElementActivating
                && matches!(&r.value, RecordValue::ProcessInstance(pi) if pi.bpmn_element_type.as_str() == "PROCESS")
        })
        .expect("the instance")
        .key;
    let mut after = partition.batch(vec![publish_stop()]);
    while !after.iter().any(|r| r.intent == Intent::Triggering) {
        let next = partition.queue.pop_front().expect("the correlation");
        after.extend(partition.batch(vec![next]));
    }
    let cancel = Command::new(instance, Intent::Cancel, RecordValue::ProcessInstance(ProcessInstanceRecord::default()));
    after.extend(partition.batch(vec![cancel]));
    after.extend(partition.drain());
    assert_eq!(terminated(&after, "SERVICE_TASK"), n);
    assert_eq!(terminated(&after, "PROCESS"), 1);
    assert!(!after.iter().any(|r| element_event(r, Intent::ElementActivating, "b")), "the boundary event is not entered");
    assert!(!after.iter().any(|r| r.intent == Intent::Triggered && matches!(r.value, RecordValue::ProcessEvent(_))));
    assert_eq!(rows_left(&partition), 0, "rows left in state");
    partition.check_replay();
}

/// What ends a wide body nested in subprocesses (issue 26's last gap).
#[derive(Clone, Copy, PartialEq, Debug)]
enum Nested {
    /// An interrupting message boundary event on the outer subprocess.
    MessageBoundary,
    /// An error thrown by a job beside the body, caught by an error boundary event on the
    /// outer subprocess.
    ErrorBoundary,
    /// An interrupting message event subprocess of the process.
    MessageEsp,
    /// An error thrown by a job beside the body, caught by an error event subprocess of the
    /// process.
    ErrorEsp,
    /// A terminate end event in the outer subprocess, beside the subprocess holding the body.
    TerminateSub,
    /// A terminate end event of the process, beside the outer subprocess.
    TerminateProcess,
    /// The instance cancelled.
    Cancel,
}

fn service(id: &str, job_type: &str) -> String {
    format!(
        r#"<bpmn:serviceTask id="{id}"><bpmn:extensionElements><zeebe:taskDefinition type="{job_type}"/></bpmn:extensionElements></bpmn:serviceTask>"#
    )
}

/// Process `wide`: the parallel multi-instance service task `t` over `=for i in 1..n return i`
/// inside subprocess `sub2` inside subprocess `sub1`, beside a service task `side` (type `side`)
/// in `sub1` after a parallel fork; `sub1` is followed by task `done` (type `after`). What ends
/// the body is `v`'s: its paths lead to a task `after` of type `after` (the boundary events and
/// event subprocesses), or a terminate end event after `side` (in `sub1`) or after `pside`
/// (type `pside`, beside `sub1` in the process).
fn nested_model(v: Nested) -> String {
    let t = r#"<bpmn:serviceTask id="t"><bpmn:extensionElements><zeebe:taskDefinition type="item"/></bpmn:extensionElements><bpmn:multiInstanceLoopCharacteristics><bpmn:extensionElements><zeebe:loopCharacteristics inputCollection="=for i in 1..n return i" inputElement="item"/></bpmn:extensionElements></bpmn:multiInstanceLoopCharacteristics></bpmn:serviceTask>"#;
    let sub2 = format!(
        r#"<bpmn:subProcess id="sub2"><bpmn:startEvent id="s2"/><bpmn:sequenceFlow id="g1" sourceRef="s2" targetRef="t"/>{t}<bpmn:sequenceFlow id="g2" sourceRef="t" targetRef="e2"/><bpmn:endEvent id="e2"/></bpmn:subProcess>"#
    );
    let side_end = match v {
        Nested::TerminateSub => r#"<bpmn:endEvent id="se"><bpmn:terminateEventDefinition/></bpmn:endEvent>"#,
        _ => r#"<bpmn:endEvent id="se"/>"#,
    };
    let side = service("side", "side");
    let sub1 = format!(
        r#"<bpmn:subProcess id="sub1"><bpmn:startEvent id="s1"/><bpmn:sequenceFlow id="h1" sourceRef="s1" targetRef="fork"/><bpmn:parallelGateway id="fork"/>
<bpmn:sequenceFlow id="h2" sourceRef="fork" targetRef="sub2"/>{sub2}<bpmn:sequenceFlow id="h3" sourceRef="sub2" targetRef="e1"/><bpmn:endEvent id="e1"/>
<bpmn:sequenceFlow id="h4" sourceRef="fork" targetRef="side"/>{side}<bpmn:sequenceFlow id="h5" sourceRef="side" targetRef="se"/>{side_end}</bpmn:subProcess>"#
    );
    let start = match v {
        Nested::TerminateProcess => format!(
            r#"<bpmn:sequenceFlow id="f1" sourceRef="s" targetRef="pf"/><bpmn:parallelGateway id="pf"/><bpmn:sequenceFlow id="f0" sourceRef="pf" targetRef="sub1"/>
<bpmn:sequenceFlow id="p1" sourceRef="pf" targetRef="pside"/>{}<bpmn:sequenceFlow id="p2" sourceRef="pside" targetRef="pe"/><bpmn:endEvent id="pe"><bpmn:terminateEventDefinition/></bpmn:endEvent>"#,
            service("pside", "pside")
        ),
        _ => r#"<bpmn:sequenceFlow id="f1" sourceRef="s" targetRef="sub1"/>"#.to_string(),
    };
    let after = service("after", "after");
    let definition = match v {
        Nested::MessageBoundary | Nested::MessageEsp => r#"<bpmn:messageEventDefinition messageRef="m"/>"#,
        _ => r#"<bpmn:errorEventDefinition errorRef="err"/>"#,
    };
    let interruption = match v {
        Nested::MessageBoundary | Nested::ErrorBoundary => format!(
            r#"<bpmn:boundaryEvent id="b" attachedToRef="sub1" cancelActivity="true">{definition}</bpmn:boundaryEvent>
<bpmn:sequenceFlow id="f3" sourceRef="b" targetRef="after"/>{after}<bpmn:sequenceFlow id="f4" sourceRef="after" targetRef="eb"/><bpmn:endEvent id="eb"/>"#
        ),
        Nested::MessageEsp | Nested::ErrorEsp => format!(
            r#"<bpmn:subProcess id="esp" triggeredByEvent="true"><bpmn:startEvent id="es" isInterrupting="true">{definition}</bpmn:startEvent>
<bpmn:sequenceFlow id="x1" sourceRef="es" targetRef="after"/>{after}<bpmn:sequenceFlow id="x2" sourceRef="after" targetRef="ee"/><bpmn:endEvent id="ee"/></bpmn:subProcess>"#
        ),
        _ => String::new(),
    };
    format!(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<bpmn:definitions xmlns:bpmn="http://www.omg.org/spec/BPMN/20100524/MODEL" xmlns:zeebe="http://camunda.org/schema/zeebe/1.0" id="d">
<bpmn:process id="wide" isExecutable="true"><bpmn:startEvent id="s"/>{start}
{sub1}<bpmn:sequenceFlow id="f2" sourceRef="sub1" targetRef="done"/>{}<bpmn:sequenceFlow id="f5" sourceRef="done" targetRef="e"/><bpmn:endEvent id="e"/>{interruption}</bpmn:process>
<bpmn:message id="m" name="stop"><bpmn:extensionElements><zeebe:subscription correlationKey="=key"/></bpmn:extensionElements></bpmn:message>
<bpmn:error id="err" errorCode="E"/></bpmn:definitions>"#,
        service("done", "after")
    )
}

/// The key of the first ELEMENT_ACTIVATING of `element_id`.
fn activating_key(records: &[Record], element_id: &str) -> i64 {
    records[position_of(records, |r| element_event(r, Intent::ElementActivating, element_id))].key
}

/// The process instance's key.
fn instance_key(records: &[Record]) -> i64 {
    records
        .iter()
        .find_map(|r| match &r.value {
            RecordValue::ProcessInstance(pi) => Some(pi.process_instance_key),
            _ => None,
        })
        .expect("the instance")
}

/// Runs an instance of [`nested_model`] over `n` items until every inner instance is active,
/// then ends the body `v`'s way; the partition restarts after two chunks of the termination
/// (as [`interrupt_wide_body`]). Returns the records from the start and from the interruption
/// on.
fn end_nested_body(partition: &mut Partition, n: usize, v: Nested) -> (Vec<Record>, Vec<Record>) {
    partition.deploy(nested_model(v));
    let mut records = create_keyed(partition, n);
    records.extend(partition.drain());
    assert_eq!(jobs_of(&records, "item").len(), n);
    partition.largest = (0, 0);
    partition.most_terminations = 0;
    let side = jobs_of(&records, "side")[0];
    let command = match v {
        Nested::MessageBoundary | Nested::MessageEsp => publish_stop(),
        Nested::ErrorBoundary | Nested::ErrorEsp => {
            let job = JobRecord { error_code: "E".into(), variables: r#"{"why": "failed"}"#.into(), ..Default::default() };
            Command::new(side, Intent::ThrowError, RecordValue::Job(job))
        }
        Nested::TerminateSub => Command::new(side, Intent::Complete, RecordValue::Job(JobRecord::default())),
        Nested::TerminateProcess => Command::new(jobs_of(&records, "pside")[0], Intent::Complete, RecordValue::Job(JobRecord::default())),
        Nested::Cancel => {
            Command::new(instance_key(&records), Intent::Cancel, RecordValue::ProcessInstance(ProcessInstanceRecord::default()))
        }
    };
    let ended = end_with_restart(partition, command);
    (records, ended)
}

/// Processes `command`, which ends a wide body over later batches, then two chunks of the
/// termination (one command a batch), then restarts the partition (the commands handed back are
/// lost; `pending_commands` asks for the next chunk again, twice) and runs what is queued to
/// the end. Returns the records from `command` on.
fn end_with_restart(partition: &mut Partition, command: Command) -> Vec<Record> {
    run_with_restart(partition, command, 2, true)
}

/// [`end_with_restart`] restarting after `chunks_before` chunks; `subprocesses_after`: no
/// subprocess terminates in `command`'s batch.
fn run_with_restart(partition: &mut Partition, command: Command, chunks_before: usize, subprocesses_after: bool) -> Vec<Record> {
    let mut ended = partition.batch(vec![command]);
    assert!(!ended.iter().any(|r| r.record_type == RecordType::CommandRejection), "rejected");
    if subprocesses_after {
        assert_eq!(terminated(&ended, "SUB_PROCESS"), 0, "the subprocesses end after the body");
    }
    let mut chunks = 0;
    while chunks < chunks_before {
        let next = partition.queue.pop_front().expect("a command queued");
        chunks += usize::from(next.intent == Intent::Terminate && matches!(next.value, RecordValue::ProcessInstanceBatch(_)));
        ended.extend(partition.batch(vec![next]));
    }
    let pending = restart(partition);
    let terminate = pending.iter().find(|c| c.intent == Intent::Terminate).expect("the next chunk asked for again").clone();
    partition.queue.extend(pending);
    partition.queue.push_back(terminate);
    ended.extend(partition.drain());
    ended
}

/// Bounds and exactly-once for a nested body's termination: every inner instance terminated
/// once, no batch terminating more than `MI_TERMINATIONS_PER_BATCH`, each scope ended once and
/// in order (body, `sub2`, then `sub1` if it terminates).
fn check_nested_termination(partition: &Partition, ended: &[Record], n: usize, v: Nested) {
    assert_eq!(terminated_each_once(ended, "t", "SERVICE_TASK"), n, "{v:?}: every inner instance terminated");
    // and `side` unless it completed to the terminate end event
    assert_eq!(terminated(ended, "SERVICE_TASK"), n + usize::from(v != Nested::TerminateSub), "{v:?}: each once");
    check_bounded(partition, &format!("{v:?}"));
    assert!(partition.batches >= n / MI_TERMINATIONS_PER_BATCH);
    assert_eq!(terminated(ended, "MULTI_INSTANCE_BODY"), 1);
    let body = position_of(ended, |r| {
        r.intent == Intent::ElementTerminated
            && matches!(&r.value, RecordValue::ProcessInstance(pi) if pi.bpmn_element_type.as_str() == "MULTI_INSTANCE_BODY")
    });
    let sub2 = position_of(ended, |r| element_event(r, Intent::ElementTerminated, "sub2"));
    assert!(body < sub2, "{v:?}: the body ends before its subprocess");
    assert_eq!(ended.iter().filter(|r| element_event(r, Intent::ElementTerminated, "sub2")).count(), 1);
    if v != Nested::TerminateSub {
        let sub1 = position_of(ended, |r| element_event(r, Intent::ElementTerminated, "sub1"));
        assert!(sub2 < sub1, "{v:?}: `sub2` ends before `sub1`");
        assert_eq!(ended.iter().filter(|r| element_event(r, Intent::ElementTerminated, "sub1")).count(), 1);
        let terminating = position_of(ended, |r| element_event(r, Intent::ElementTerminating, "sub1"));
        let body_terminating = position_of(ended, |r| {
            r.intent == Intent::ElementTerminating
                && matches!(&r.value, RecordValue::ProcessInstance(pi) if pi.bpmn_element_type.as_str() == "MULTI_INSTANCE_BODY")
        });
        assert!(terminating < body_terminating, "{v:?}: terminated from the top down");
    }
}

fn process_event(r: &Record, intent: Intent, target: &str) -> bool {
    r.intent == intent
        && r.record_type == RecordType::Event
        && matches!(&r.value, RecordValue::ProcessEvent(e) if e.target_element_id == target)
}

/// Checks an interrupting event's PROCESS_EVENT records around the terminated scope: TRIGGERING
/// (on `scope_key`, with `variables`) before `sub1` TERMINATING, TRIGGERED after `sub1`
/// TERMINATED and before `entered` is entered, each once (Zeebe 8.5's `EventTriggerBehavior`
/// order, as on the body itself).
fn check_trigger(ended: &[Record], target: &str, entered: &str, scope_key: i64, variables: serde_json::Value) {
    let triggering = position_of(ended, |r| process_event(r, Intent::Triggering, target));
    let triggered = position_of(ended, |r| process_event(r, Intent::Triggered, target));
    let sub1_terminating = position_of(ended, |r| element_event(r, Intent::ElementTerminating, "sub1"));
    let sub1_terminated = position_of(ended, |r| element_event(r, Intent::ElementTerminated, "sub1"));
    let entered = position_of(ended, |r| element_event(r, Intent::ElementActivating, entered));
    assert!(triggering < sub1_terminating && sub1_terminated < triggered && triggered < entered);
    assert_eq!(ended.iter().filter(|r| r.intent == Intent::Triggering && r.record_type == RecordType::Event).count(), 1);
    assert_eq!(ended.iter().filter(|r| r.intent == Intent::Triggered && matches!(r.value, RecordValue::ProcessEvent(_))).count(), 1);
    let RecordValue::ProcessEvent(trigger) = &ended[triggering].value else { unreachable!() };
    assert_eq!(trigger.scope_key, scope_key);
    assert_eq!(serde_json::from_str::<serde_json::Value>(&trigger.variables).unwrap(), variables);
}

/// Completes the one job of type `after` and checks the instance completes and leaves nothing
/// in state; state rebuilt from the log equals the processed state.
fn finish_after(partition: &mut Partition, ended: &[Record]) {
    let after = jobs_of(ended, "after");
    assert_eq!(after.len(), 1, "the path after goes on");
    let done = partition.batch(vec![Command::new(after[0], Intent::Complete, RecordValue::Job(JobRecord::default()))]);
    assert_eq!(completed(&done, "PROCESS"), 1);
    assert_eq!(rows_left(partition), 0, "rows left in state");
    partition.check_replay();
}

/// (a) An interrupting message boundary event on a subprocess holding, two levels down, a body
/// with 10,000 active inner instances: TRIGGERING on the subprocess, everything inside
/// terminated (the body a chunk per batch, its subprocesses after it), then TRIGGERED and the
/// boundary event entered with the message's variables (`BoundaryEventTest`: an interrupting
/// boundary event terminates its activity, then is activated; `EventTriggerBehavior`).
#[test]
fn a_boundary_event_on_a_subprocess_holding_a_wide_body_waits_for_it() {
    let n = 10_000;
    let mut partition = Partition::new();
    let (records, ended) = end_nested_body(&mut partition, n, Nested::MessageBoundary);
    check_nested_termination(&partition, &ended, n, Nested::MessageBoundary);
    check_trigger(&ended, "b", "b", activating_key(&records, "sub1"), serde_json::json!({"why": "stopped"}));
    assert!(!ended.iter().any(|r| element_event(r, Intent::ElementActivating, "done")), "`sub1` did not complete");
    finish_after(&mut partition, &ended);
}

/// (b) An error thrown by a job beside the nested body, caught by an error boundary event on
/// the outer subprocess: as (a), the error's variables local to the boundary event.
#[test]
fn an_error_caught_outside_a_subprocess_holding_a_wide_body_waits_for_it() {
    let n = 2_000;
    let mut partition = Partition::new();
    let (records, ended) = end_nested_body(&mut partition, n, Nested::ErrorBoundary);
    check_nested_termination(&partition, &ended, n, Nested::ErrorBoundary);
    check_trigger(&ended, "b", "b", activating_key(&records, "sub1"), serde_json::json!({"why": "failed"}));
    finish_after(&mut partition, &ended);
}

/// (a) An interrupting message event subprocess of the process, the body two subprocesses down:
/// the event subprocess starts once `sub1` has terminated (`EventSubProcessTest`).
#[test]
fn an_event_subprocess_waits_for_a_wide_body_nested_in_subprocesses() {
    let n = 2_000;
    let mut partition = Partition::new();
    let (records, ended) = end_nested_body(&mut partition, n, Nested::MessageEsp);
    check_nested_termination(&partition, &ended, n, Nested::MessageEsp);
    check_trigger(&ended, "es", "esp", instance_key(&records), serde_json::json!({"why": "stopped"}));
    assert_eq!(ended.iter().filter(|r| element_event(r, Intent::ElementActivating, "esp")).count(), 1);
    finish_after(&mut partition, &ended);
}

/// (b) An error thrown beside the nested body, caught by an error event subprocess of the
/// process.
#[test]
fn an_error_event_subprocess_waits_for_a_wide_body_nested_in_subprocesses() {
    let n = 2_000;
    let mut partition = Partition::new();
    let (records, ended) = end_nested_body(&mut partition, n, Nested::ErrorEsp);
    check_nested_termination(&partition, &ended, n, Nested::ErrorEsp);
    check_trigger(&ended, "es", "esp", instance_key(&records), serde_json::json!({"why": "failed"}));
    finish_after(&mut partition, &ended);
}

/// (c) A terminate end event in the outer subprocess: its other children (the subprocess
/// holding the body) terminate, the body a chunk per batch, then the outer subprocess
/// completes and the flow goes on (Zeebe's `EndEventProcessor`, `TerminateEndEventTest`); no
/// PROCESS_EVENT (no event is triggered).
#[test]
fn a_terminate_end_event_beside_a_wide_body_completes_its_scope_after_it() {
    let n = 2_000;
    let mut partition = Partition::new();
    let (_, ended) = end_nested_body(&mut partition, n, Nested::TerminateSub);
    check_nested_termination(&partition, &ended, n, Nested::TerminateSub);
    let sub2 = position_of(&ended, |r| element_event(r, Intent::ElementTerminated, "sub2"));
    let sub1 = position_of(&ended, |r| element_event(r, Intent::ElementCompleted, "sub1"));
    assert!(sub2 < sub1, "`sub1` completes after `sub2` terminated");
    assert_eq!(ended.iter().filter(|r| element_event(r, Intent::ElementCompleted, "sub1")).count(), 1);
    assert!(!ended.iter().any(|r| matches!(r.value, RecordValue::ProcessEvent(_))));
    finish_after(&mut partition, &ended);
}

/// (c) A terminate end event of the process: `sub1` (and all inside) terminates, the body a
/// chunk per batch, then the process instance completes.
#[test]
fn a_terminate_end_event_of_the_process_completes_it_after_a_nested_wide_body() {
    let n = 2_000;
    let mut partition = Partition::new();
    let (_, ended) = end_nested_body(&mut partition, n, Nested::TerminateProcess);
    check_nested_termination(&partition, &ended, n, Nested::TerminateProcess);
    let sub1 = position_of(&ended, |r| element_event(r, Intent::ElementTerminated, "sub1"));
    let process = position_of(&ended, |r| {
        r.intent == Intent::ElementCompleted
            && matches!(&r.value, RecordValue::ProcessInstance(pi) if pi.bpmn_element_type.as_str() == "PROCESS")
    });
    assert!(sub1 < process);
    assert_eq!(completed(&ended, "PROCESS"), 1);
    assert!(jobs_of(&ended, "after").is_empty());
    assert_eq!(rows_left(&partition), 0, "rows left in state");
    partition.check_replay();
}

/// (d) Cancelling the instance: the nested body terminates a chunk per batch, then `sub2`,
/// `sub1` and the process.
#[test]
fn cancelling_an_instance_with_a_nested_wide_body_terminates_it_in_batches() {
    let n = 2_000;
    let mut partition = Partition::new();
    let (_, ended) = end_nested_body(&mut partition, n, Nested::Cancel);
    check_nested_termination(&partition, &ended, n, Nested::Cancel);
    let sub1 = position_of(&ended, |r| element_event(r, Intent::ElementTerminated, "sub1"));
    let process = position_of(&ended, |r| {
        r.intent == Intent::ElementTerminated
            && matches!(&r.value, RecordValue::ProcessInstance(pi) if pi.bpmn_element_type.as_str() == "PROCESS")
    });
    assert!(sub1 < process);
    assert!(!ended.iter().any(|r| matches!(r.value, RecordValue::ProcessEvent(_))));
    assert_eq!(rows_left(&partition), 0, "rows left in state");
    partition.check_replay();
}

/// A call activity whose called instance holds a body with 2,000 active inner instances,
/// interrupted by a message boundary event on the call activity: TRIGGERING on the call
/// activity, the body a chunk per batch, then the called instance and the call activity
/// terminate, TRIGGERED and the boundary event is entered (`CallActivityTest`: the called
/// instance is terminated with its call activity).
#[test]
fn a_boundary_event_on_a_call_activity_waits_for_a_wide_body_in_the_called_instance() {
    let n = 2_000;
    let mut partition = Partition::new();
    let child = model(true).replace(r#"<bpmn:process id="wide""#, r#"<bpmn:process id="child""#);
    let task = r#"<bpmn:serviceTask id="t"><bpmn:extensionElements><zeebe:taskDefinition type="item"/></bpmn:extensionElements><bpmn:multiInstanceLoopCharacteristics><bpmn:extensionElements><zeebe:loopCharacteristics inputCollection="=for i in 1..n return i" inputElement="item"/></bpmn:extensionElements></bpmn:multiInstanceLoopCharacteristics></bpmn:serviceTask>"#;
    let call = r#"<bpmn:callActivity id="call"><bpmn:extensionElements><zeebe:calledElement processId="child"/></bpmn:extensionElements></bpmn:callActivity>"#;
    let parent = interrupted_model(false);
    assert!(parent.contains(task));
    // the call activity is `call` (the harness counts terminated `t`s as inner instances)
    let parent = parent.replace(task, call).replace(r#"Ref="t""#, r#"Ref="call""#);
    let resources = vec![
        DeploymentResource { resource_name: "child.bpmn".into(), resource: child.into_bytes() },
        DeploymentResource { resource_name: "wide.bpmn".into(), resource: parent.into_bytes() },
    ];
    let deployed = partition.batch(vec![Command::new(
        -1,
        Intent::Create,
        RecordValue::Deployment(DeploymentRecord { resources, ..Default::default() }),
    )]);
    assert!(!deployed.iter().any(|r| r.record_type == RecordType::CommandRejection), "{deployed:?}");
    let mut records = create_keyed(&mut partition, n);
    records.extend(partition.drain());
    assert_eq!(jobs_of(&records, "item").len(), n);
    partition.largest = (0, 0);
    partition.most_terminations = 0;
    let ended = end_with_restart(&mut partition, publish_stop());
    assert_eq!(terminated(&ended, "SERVICE_TASK"), n, "every inner instance terminated, once");
    assert!(partition.most_terminations <= MI_TERMINATIONS_PER_BATCH, "{}", partition.most_terminations);
    assert!(partition.largest.0 <= 8 * MI_TERMINATIONS_PER_BATCH, "a batch of {} records", partition.largest.0);
    let body = position_of(&ended, |r| {
        r.intent == Intent::ElementTerminated
            && matches!(&r.value, RecordValue::ProcessInstance(pi) if pi.bpmn_element_type.as_str() == "MULTI_INSTANCE_BODY")
    });
    let called = position_of(&ended, |r| {
        r.intent == Intent::ElementTerminated
            && matches!(&r.value, RecordValue::ProcessInstance(pi) if pi.bpmn_element_type.as_str() == "PROCESS")
    });
    let call = position_of(&ended, |r| {
        r.intent == Intent::ElementTerminated
            && matches!(&r.value, RecordValue::ProcessInstance(pi) if pi.bpmn_element_type.as_str() == "CALL_ACTIVITY")
    });
    let triggering = position_of(&ended, |r| process_event(r, Intent::Triggering, "b"));
    let triggered = position_of(&ended, |r| process_event(r, Intent::Triggered, "b"));
    let entered = position_of(&ended, |r| element_event(r, Intent::ElementActivating, "b"));
    assert!(triggering < body && body < called && called < call && call < triggered && triggered < entered);
    let RecordValue::ProcessEvent(trigger) = &ended[triggering].value else { unreachable!() };
    assert_eq!(trigger.scope_key, activating_key(&records, "call"), "the trigger waits on the call activity");
    assert_eq!(terminated(&ended, "PROCESS"), 1, "the called instance");
    assert!(waggle_engine::pending_commands(waggle_engine::StateView::new(&partition.store), 1).is_empty());
    finish_after(&mut partition, &ended);
}

/// A parallel multi-instance subprocess over two items, each inner instance holding a body
/// with 1,200 active inner instances, interrupted by a message boundary event on the outer
/// body: the trigger waits on the outer body, both inner bodies terminate a chunk per batch,
/// then the inner subprocesses and the outer body, TRIGGERED and the boundary event.
#[test]
fn a_boundary_event_on_a_narrow_body_holding_wide_bodies_waits_for_them() {
    let n = 1_200;
    let mut partition = Partition::new();
    let task = r#"<bpmn:serviceTask id="t"><bpmn:extensionElements><zeebe:taskDefinition type="item"/></bpmn:extensionElements><bpmn:multiInstanceLoopCharacteristics><bpmn:extensionElements><zeebe:loopCharacteristics inputCollection="=for i in 1..n return i" inputElement="item"/></bpmn:extensionElements></bpmn:multiInstanceLoopCharacteristics></bpmn:serviceTask>"#;
    let outer = format!(
        r#"<bpmn:subProcess id="outer"><bpmn:multiInstanceLoopCharacteristics><bpmn:extensionElements><zeebe:loopCharacteristics inputCollection="=[1, 2]" inputElement="part"/></bpmn:extensionElements></bpmn:multiInstanceLoopCharacteristics><bpmn:startEvent id="s2"/><bpmn:sequenceFlow id="g1" sourceRef="s2" targetRef="t"/>{task}<bpmn:sequenceFlow id="g2" sourceRef="t" targetRef="e3"/><bpmn:endEvent id="e3"/></bpmn:subProcess>"#
    );
    let xml = interrupted_model(false);
    assert!(xml.contains(task));
    let xml = xml.replace(r#"Ref="t""#, r#"Ref="outer""#).replace(task, &outer);
    partition.deploy(xml);
    let mut records = create_keyed(&mut partition, n);
    records.extend(partition.drain());
    assert_eq!(jobs_of(&records, "item").len(), 2 * n);
    partition.largest = (0, 0);
    partition.most_terminations = 0;
    let ended = end_with_restart(&mut partition, publish_stop());
    assert_eq!(terminated(&ended, "SERVICE_TASK"), 2 * n, "every inner instance terminated, once");
    assert!(partition.most_terminations <= MI_TERMINATIONS_PER_BATCH, "{}", partition.most_terminations);
    assert!(partition.largest.0 <= 8 * MI_TERMINATIONS_PER_BATCH, "a batch of {} records", partition.largest.0);
    assert_eq!(terminated(&ended, "MULTI_INSTANCE_BODY"), 3);
    assert_eq!(terminated(&ended, "SUB_PROCESS"), 2);
    let outer_body = records
        .iter()
        .find(|r| {
            element_event(r, Intent::ElementActivating, "outer")
                && matches!(&r.value, RecordValue::ProcessInstance(pi) if pi.bpmn_element_type.as_str() == "MULTI_INSTANCE_BODY")
        })
        .expect("the outer body")
        .key;
    let triggering = position_of(&ended, |r| process_event(r, Intent::Triggering, "b"));
    let RecordValue::ProcessEvent(trigger) = &ended[triggering].value else { unreachable!() };
    assert_eq!(trigger.scope_key, outer_body, "the trigger waits on the outer body");
    let outer_terminated = position_of(&ended, |r| r.key == outer_body && r.intent == Intent::ElementTerminated);
    let triggered = position_of(&ended, |r| process_event(r, Intent::Triggered, "b"));
    let entered = position_of(&ended, |r| element_event(r, Intent::ElementActivating, "b"));
    assert!(triggering < outer_terminated && outer_terminated < triggered && triggered < entered);
    assert!(waggle_engine::pending_commands(waggle_engine::StateView::new(&partition.store), 1).is_empty());
    finish_after(&mut partition, &ended);
}

/// Process `wide`: a parallel multi-instance subprocess `outer` over `=for i in 1..n return i`,
/// each inner instance holding the parallel multi-instance service task `t` (type `item`) over
/// `=for j in 1..m return j`: `n` narrow bodies of `m` inside a narrow body.
fn nested_narrow_model() -> String {
    let t = r#"<bpmn:serviceTask id="t"><bpmn:extensionElements><zeebe:taskDefinition type="item"/></bpmn:extensionElements><bpmn:multiInstanceLoopCharacteristics><bpmn:extensionElements><zeebe:loopCharacteristics inputCollection="=for j in 1..m return j" inputElement="j"/></bpmn:extensionElements></bpmn:multiInstanceLoopCharacteristics></bpmn:serviceTask>"#;
    format!(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<bpmn:definitions xmlns:bpmn="http://www.omg.org/spec/BPMN/20100524/MODEL" xmlns:zeebe="http://camunda.org/schema/zeebe/1.0" id="d">
<bpmn:process id="wide" isExecutable="true"><bpmn:startEvent id="s"/><bpmn:sequenceFlow id="f1" sourceRef="s" targetRef="outer"/>
<bpmn:subProcess id="outer"><bpmn:multiInstanceLoopCharacteristics><bpmn:extensionElements><zeebe:loopCharacteristics inputCollection="=for i in 1..n return i" inputElement="i"/></bpmn:extensionElements></bpmn:multiInstanceLoopCharacteristics>
<bpmn:startEvent id="s2"/><bpmn:sequenceFlow id="g1" sourceRef="s2" targetRef="t"/>{t}<bpmn:sequenceFlow id="g2" sourceRef="t" targetRef="e2"/><bpmn:endEvent id="e2"/></bpmn:subProcess>
<bpmn:sequenceFlow id="f2" sourceRef="outer" targetRef="e"/><bpmn:endEvent id="e"/>
<bpmn:boundaryEvent id="b" attachedToRef="outer" cancelActivity="true"><bpmn:messageEventDefinition messageRef="m"/></bpmn:boundaryEvent>
<bpmn:sequenceFlow id="f3" sourceRef="b" targetRef="after"/>{}<bpmn:sequenceFlow id="f4" sourceRef="after" targetRef="eb"/><bpmn:endEvent id="eb"/></bpmn:process>
<bpmn:message id="m" name="stop"><bpmn:extensionElements><zeebe:subscription correlationKey="=key"/></bpmn:extensionElements></bpmn:message></bpmn:definitions>"#,
        service("after", "after")
    )
}

/// Runs an instance of [`nested_narrow_model`] with `n` × `m` jobs until every one is active.
fn nested_narrow(partition: &mut Partition, n: usize, m: usize) -> Vec<Record> {
    partition.deploy(nested_narrow_model());
    let creation = ProcessInstanceCreationRecord {
        bpmn_process_id: "wide".into(),
        version: -1,
        variables: format!(r#"{{"n": {n}, "m": {m}, "key": "k1"}}"#),
        ..Default::default()
    };
    let mut records = partition.batch(vec![Command::new(-1, Intent::Create, RecordValue::ProcessInstanceCreation(creation))]);
    records.extend(partition.drain());
    assert_eq!(jobs_of(&records, "item").len(), n * m);
    partition.largest = (0, 0);
    partition.most_terminations = 0;
    partition.most_terminating = 0;
    records
}

/// Every element instance the termination ended: each `t` once, each narrow body and
/// subprocess once, no batch starting to terminate more than `MI_TERMINATIONS_PER_BATCH`
/// element instances, nothing left to ask for.
fn check_nested_narrow(partition: &Partition, ended: &[Record], n: usize, m: usize) {
    assert_eq!(terminated_each_once(ended, "t", "SERVICE_TASK"), n * m, "every inner instance terminated");
    assert_eq!(terminated(ended, "SERVICE_TASK"), n * m, "each once");
    assert_eq!(terminated(ended, "SUB_PROCESS"), n);
    assert_eq!(terminated(ended, "MULTI_INSTANCE_BODY"), n + 1);
    assert_eq!(ended.iter().filter(|r| r.intent == Intent::Canceled && matches!(r.value, RecordValue::Job(_))).count(), n * m);
    check_bounded(partition, "narrow bodies");
    assert!(partition.batches >= (n * m) / MI_TERMINATIONS_PER_BATCH);
}

/// Issue 26: 30 narrow bodies of 30 inside a narrow body of 30 (961 element instances, none of
/// the bodies wide) cancelled: the termination is spread over batches by the number of element
/// instances it ends (PROCESS_INSTANCE_BATCH TERMINATE of the scopes left for later), with a
/// restart between two chunks; the process ends last, nothing is left in state, and state
/// rebuilt from the log equals the processed state.
#[test]
fn cancelling_30_narrow_bodies_of_30_nested_stays_within_the_per_batch_bound() {
    let (n, m) = (30, 30);
    let mut partition = Partition::new();
    let records = nested_narrow(&mut partition, n, m);
    let cancel = Command::new(instance_key(&records), Intent::Cancel, RecordValue::ProcessInstance(ProcessInstanceRecord::default()));
    let mut ended = partition.batch(vec![cancel]);
    assert!(!ended.iter().any(|r| r.record_type == RecordType::CommandRejection));
    assert_eq!(terminated(&ended, "PROCESS"), 0, "the process ends after everything inside it");
    let first = partition.queue.pop_front().expect("a chunk handed back");
    ended.extend(partition.batch(vec![first]));
    let pending = restart(&mut partition);
    assert!(!pending.is_empty(), "the chunks left asked for again");
    for command in pending {
        partition.queue.push_back(command.clone());
        partition.queue.push_back(command);
    }
    ended.extend(partition.drain());
    check_nested_narrow(&partition, &ended, n, m);
    assert_eq!(terminated(&ended, "PROCESS"), 1);
    let process = position_of(&ended, |r| {
        r.intent == Intent::ElementTerminated
            && matches!(&r.value, RecordValue::ProcessInstance(pi) if pi.bpmn_element_type.as_str() == "PROCESS")
    });
    assert_eq!(process, ended.iter().rposition(|r| r.intent == Intent::ElementTerminated).unwrap(), "the process ends last");
    assert_eq!(rows_left(&partition), 0, "rows left in state");
    partition.check_replay();
}

/// The same nesting interrupted by a message boundary event on the outer body: the trigger
/// waits (PROCESS_EVENT TRIGGERING on the body), everything terminates within the bound, then
/// TRIGGERED and the boundary event once, with the message's variables.
#[test]
fn a_boundary_event_on_30_narrow_bodies_of_30_waits_within_the_per_batch_bound() {
    let (n, m) = (30, 30);
    let mut partition = Partition::new();
    let records = nested_narrow(&mut partition, n, m);
    let ended = run_with_restart(&mut partition, publish_stop(), 1, false);
    check_nested_narrow(&partition, &ended, n, m);
    let outer_body = records
        .iter()
        .find(|r| {
            element_event(r, Intent::ElementActivating, "outer")
                && matches!(&r.value, RecordValue::ProcessInstance(pi) if pi.bpmn_element_type.as_str() == "MULTI_INSTANCE_BODY")
        })
        .expect("the outer body")
        .key;
    let triggering = position_of(&ended, |r| process_event(r, Intent::Triggering, "b"));
    let outer_terminated = position_of(&ended, |r| r.key == outer_body && r.intent == Intent::ElementTerminated);
    let triggered = position_of(&ended, |r| process_event(r, Intent::Triggered, "b"));
    let entered = position_of(&ended, |r| element_event(r, Intent::ElementActivating, "b"));
    assert!(triggering < outer_terminated && outer_terminated < triggered && triggered < entered);
    assert_eq!(ended.iter().filter(|r| element_event(r, Intent::ElementActivating, "b")).count(), 1);
    finish_after(&mut partition, &ended);
}

fn modify(instance: i64, terminate: Vec<i64>, activate: Vec<ActivateInstruction>) -> Command {
    let modification = ProcessInstanceModificationRecord {
        process_instance_key: instance,
        activate_instructions: activate,
        terminate_instructions: terminate,
    };
    Command::new(-1, Intent::Modify, RecordValue::ProcessInstanceModification(modification))
}

fn body_key(records: &[Record], element_id: &str) -> i64 {
    records
        .iter()
        .find(|r| {
            element_event(r, Intent::ElementActivating, element_id)
                && matches!(&r.value, RecordValue::ProcessInstance(pi) if pi.bpmn_element_type.as_str() == "MULTI_INSTANCE_BODY")
        })
        .expect("the body")
        .key
}

/// Issue 26: ModifyProcessInstance terminating a body with 2,000 active inner instances, its
/// process's only child: the inner instances terminate a chunk per batch (a restart between two
/// chunks), the emptied process instance is terminated after the body, not completed (Zeebe's
/// `ModifyProcessInstanceTerminationTest`: `shouldTerminateAllElementsInRootScope`,
/// `shouldNotCompleteFlowScopeIfElementsAreTerminated`), each once.
#[test]
fn a_modification_terminates_a_wide_body_a_chunk_per_batch() {
    let n = 2_000;
    let mut partition = Partition::new();
    partition.deploy(model(true));
    let mut records = partition.create(n);
    records.extend(partition.drain());
    partition.largest = (0, 0);
    partition.most_terminations = 0;
    let instance = instance_key(&records);
    let ended = end_with_restart(&mut partition, modify(instance, vec![body_key(&records, "t")], vec![]));
    assert!(ended.iter().any(|r| r.intent == Intent::Modified));
    assert_eq!(terminated(&ended, "SERVICE_TASK"), n, "every inner instance terminated, once");
    check_bounded(&partition, "a modification");
    let body = position_of(&ended, |r| {
        r.intent == Intent::ElementTerminated
            && matches!(&r.value, RecordValue::ProcessInstance(pi) if pi.bpmn_element_type.as_str() == "MULTI_INSTANCE_BODY")
    });
    let process = position_of(&ended, |r| r.key == instance && r.intent == Intent::ElementTerminated);
    assert!(body < process, "the process ends after the body");
    assert_eq!(terminated(&ended, "PROCESS"), 1);
    assert_eq!(completed(&ended, "PROCESS"), 0, "terminated, not completed");
    assert_eq!(rows_left(&partition), 0, "rows left in state");
    partition.check_replay();
}

/// A modification terminating 30 narrow bodies of 30 (the outer body) while activating the
/// end event `e` in the process: the termination stays within the per-batch bound, `e` keeps
/// the process alive until the outer body has ended, then the process completes.
#[test]
fn a_modification_terminating_30_narrow_bodies_of_30_stays_within_the_bound() {
    let (n, m) = (30, 30);
    let mut partition = Partition::new();
    let records = nested_narrow(&mut partition, n, m);
    let instance = instance_key(&records);
    let activate = ActivateInstruction { element_id: "e".into(), ancestor_scope_key: -1, ..Default::default() };
    let ended = run_with_restart(&mut partition, modify(instance, vec![body_key(&records, "outer")], vec![activate]), 1, false);
    check_nested_narrow(&partition, &ended, n, m);
    assert_eq!(completed(&ended, "PROCESS"), 1, "the process completes once the body has ended");
    assert_eq!(terminated(&ended, "PROCESS"), 0);
    assert_eq!(rows_left(&partition), 0, "rows left in state");
    partition.check_replay();
}

/// While a modification's termination of `sub2` (holding a body of 2,000) goes on over later
/// batches, a second modification sees `sub2` and what it holds as gone, as Zeebe 8.5 (which
/// ends them in the first modification's batch) would: terminating one of its inner instances
/// or naming it as ancestor is refused as not found; activating `e2` (inside `sub2`) without an
/// ancestor creates a new `sub2` in `sub1`.
#[test]
fn a_modification_during_a_batched_termination_sees_its_scope_as_gone() {
    let n = 2_000;
    let mut partition = Partition::new();
    partition.deploy(nested_model(Nested::MessageBoundary));
    let mut records = create_keyed(&mut partition, n);
    records.extend(partition.drain());
    let instance = instance_key(&records);
    let sub2 = activating_key(&records, "sub2");
    let sub1 = activating_key(&records, "sub1");
    let first = partition.batch(vec![modify(instance, vec![sub2], vec![])]);
    assert!(first.iter().any(|r| r.intent == Intent::Modified));
    assert!(!first.iter().any(|r| element_event(r, Intent::ElementTerminated, "sub2")), "sub2 ends over later batches");
    let inner = *jobs_of(&records, "item").last().unwrap();
    let inner_instance = records
        .iter()
        .find_map(|r| match &r.value {
            RecordValue::Job(j) if r.key == inner && r.intent == Intent::Created => Some(j.element_instance_key),
            _ => None,
        })
        .unwrap();
    let refused = partition.batch(vec![modify(instance, vec![inner_instance], vec![])]);
    let rejection = refused.iter().find(|r| r.record_type == RecordType::CommandRejection).expect("refused");
    let reason = &rejection.rejection.as_ref().unwrap().reason;
    assert!(reason.contains("could not be found"), "{reason}");
    let named = ActivateInstruction { element_id: "e2".into(), ancestor_scope_key: sub2, ..Default::default() };
    let refused = partition.batch(vec![modify(instance, vec![], vec![named])]);
    let rejection = refused.iter().find(|r| r.record_type == RecordType::CommandRejection).expect("refused");
    let reason = &rejection.rejection.as_ref().unwrap().reason;
    assert!(reason.contains("not in an active state"), "{reason}");
    let e2 = ActivateInstruction { element_id: "e2".into(), ancestor_scope_key: -1, ..Default::default() };
    let again = partition.batch(vec![modify(instance, vec![], vec![e2])]);
    assert!(again.iter().any(|r| r.intent == Intent::Modified), "{again:?}");
    let new_sub2 = again.iter().find(|r| element_event(r, Intent::ElementActivating, "sub2")).expect("a new sub2");
    let RecordValue::ProcessInstance(pi) = &new_sub2.value else { unreachable!() };
    assert_eq!(pi.flow_scope_key, sub1, "in sub1");
    assert_ne!(new_sub2.key, sub2);
    let rest = partition.drain();
    assert_eq!(terminated(&rest, "SERVICE_TASK") + terminated(&first, "SERVICE_TASK"), n);
    assert_eq!(rest.iter().filter(|r| r.key == sub2 && r.intent == Intent::ElementTerminated).count(), 1);
    partition.check_replay();
}

/// Process `wide` whose scope has thousands of direct children: the non-interrupting event
/// subprocess `tick` (signal `tick`; the service task `tw` of type `tick` inside) starts once
/// per broadcast, beside the service task `main` (type `main`) followed by a terminate end event
/// `te` (`terminate: true`) or a none end event; the interrupting event subprocess `esp`
/// (message `stop`, correlation key `=key`; start event `es`) leads to a task of type `after`.
fn first_level_model(terminate: bool) -> String {
    let end = match terminate {
        true => r#"<bpmn:endEvent id="te"><bpmn:terminateEventDefinition/></bpmn:endEvent>"#,
        false => r#"<bpmn:endEvent id="te"/>"#,
    };
    format!(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<bpmn:definitions xmlns:bpmn="http://www.omg.org/spec/BPMN/20100524/MODEL" xmlns:zeebe="http://camunda.org/schema/zeebe/1.0" id="d">
<bpmn:process id="wide" isExecutable="true"><bpmn:startEvent id="s"/><bpmn:sequenceFlow id="f1" sourceRef="s" targetRef="main"/>{main}
<bpmn:sequenceFlow id="f2" sourceRef="main" targetRef="te"/>{end}
<bpmn:subProcess id="tick" triggeredByEvent="true"><bpmn:startEvent id="ts" isInterrupting="false"><bpmn:signalEventDefinition signalRef="sig"/></bpmn:startEvent>
<bpmn:sequenceFlow id="t1" sourceRef="ts" targetRef="tw"/>{tw}<bpmn:sequenceFlow id="t2" sourceRef="tw" targetRef="tend"/><bpmn:endEvent id="tend"/></bpmn:subProcess>
<bpmn:subProcess id="esp" triggeredByEvent="true"><bpmn:startEvent id="es" isInterrupting="true"><bpmn:messageEventDefinition messageRef="m"/></bpmn:startEvent>
<bpmn:sequenceFlow id="e1" sourceRef="es" targetRef="after"/>{after}<bpmn:sequenceFlow id="e2" sourceRef="after" targetRef="ee"/><bpmn:endEvent id="ee"/></bpmn:subProcess></bpmn:process>
<bpmn:signal id="sig" name="tick"/>
<bpmn:message id="m" name="stop"><bpmn:extensionElements><zeebe:subscription correlationKey="=key"/></bpmn:extensionElements></bpmn:message></bpmn:definitions>"#,
        main = service("main", "main"),
        tw = service("tw", "tick"),
        after = service("after", "after"),
    )
}

/// Creates an instance of [`first_level_model`] and broadcasts signal `tick` `m` times (as the
/// broker takes commands, 512 a batch): `m` instances of `tick` wait beside `main`, each on its
/// job. Returns the records.
fn start_ticks(partition: &mut Partition, m: usize, terminate: bool) -> Vec<Record> {
    partition.deploy(first_level_model(terminate));
    let mut records = create_keyed(partition, 0);
    let tick = SignalRecord { signal_name: "tick".into(), ..Default::default() };
    partition.queue.extend((0..m).map(|_| Command::new(-1, Intent::Broadcast, RecordValue::Signal(tick.clone()))));
    records.extend(partition.drain());
    assert_eq!(jobs_of(&records, "tick").len(), m, "an instance of `tick` per broadcast");
    partition.largest = (0, 0);
    partition.most_terminations = 0;
    partition.most_terminating = 0;
    records
}

/// The scope's direct children ended: each of the `m` instances of `tick` and its task once,
/// within the per-batch bound (the first level too), over several batches.
fn check_first_level(partition: &Partition, ended: &[Record], m: usize, what: &str) {
    assert_eq!(terminated_each_once(ended, "tick", "EVENT_SUB_PROCESS"), m, "{what}: every `tick` terminated");
    assert_eq!(terminated_each_once(ended, "tw", "SERVICE_TASK"), m, "{what}: every `tw` terminated");
    let canceled = ended.iter().filter(|r| r.intent == Intent::Canceled && matches!(&r.value, RecordValue::Job(j) if j.job_type == "tick"));
    assert_eq!(canceled.count(), m, "{what}: every job canceled");
    check_bounded(partition, what);
    assert!(partition.batches >= 2 * m / MI_TERMINATIONS_PER_BATCH, "{what}: {} batches", partition.batches);
}

/// Issue 26: an interrupting event subprocess triggered in a process with 2,000 instances of a
/// non-interrupting event subprocess beside its task (4,001 element instances on its first two
/// levels): the process's other children terminate at most `MI_TERMINATIONS_PER_BATCH` element
/// instances a batch (PROCESS_INSTANCE_BATCH TERMINATING, then TERMINATE of the process for
/// later batches), with a restart between two chunks (the next asked for again, twice); the
/// event subprocess starts once the last has terminated, TRIGGERING before and TRIGGERED after
/// them (`EventSubProcessTest`: an interrupting event subprocess terminates the other element
/// instances of its scope, then is activated; `EventTriggerBehavior`).
#[test]
fn an_interrupting_event_subprocess_terminates_thousands_of_siblings_a_share_per_batch() {
    let m = 2_000;
    let mut partition = Partition::new();
    start_ticks(&mut partition, m, false);
    let ended = run_with_restart(&mut partition, publish_stop(), 1, false);
    check_first_level(&partition, &ended, m, "an event subprocess");
    assert_eq!(terminated_each_once(&ended, "main", "SERVICE_TASK"), 1);
    let marked = ended.iter().filter(|r| r.intent == Intent::Terminating && matches!(r.value, RecordValue::ProcessInstanceBatch(_)));
    assert_eq!(marked.count(), 1, "PROCESS_INSTANCE_BATCH TERMINATING once");
    let triggering = position_of(&ended, |r| process_event(r, Intent::Triggering, "es"));
    let first = position_of(&ended, |r| element_event(r, Intent::ElementTerminating, "tick"));
    let last = ended.iter().rposition(|r| element_event(r, Intent::ElementTerminated, "tick")).unwrap();
    let triggered = position_of(&ended, |r| process_event(r, Intent::Triggered, "es"));
    let started = position_of(&ended, |r| element_event(r, Intent::ElementActivating, "esp"));
    assert!(triggering < first && last < triggered && triggered < started, "TRIGGERING, the others terminated, TRIGGERED, started");
    assert_eq!(ended.iter().filter(|r| element_event(r, Intent::ElementActivating, "esp")).count(), 1);
    finish_after(&mut partition, &ended);
}

/// Issue 26: a terminate end event reached in a process with 2,000 instances of a
/// non-interrupting event subprocess: they terminate at most `MI_TERMINATIONS_PER_BATCH`
/// element instances a batch, with a restart between two chunks, then the process completes
/// (`TerminateEndEventTest`: a terminate end event terminates the other element instances of
/// its scope and completes the scope), each once.
#[test]
fn a_terminate_end_event_terminates_thousands_of_siblings_a_share_per_batch() {
    let m = 2_000;
    let mut partition = Partition::new();
    let records = start_ticks(&mut partition, m, true);
    let main = Command::new(jobs_of(&records, "main")[0], Intent::Complete, RecordValue::Job(JobRecord::default()));
    let ended = run_with_restart(&mut partition, main, 1, false);
    check_first_level(&partition, &ended, m, "a terminate end event");
    assert_eq!(completed(&ended, "PROCESS"), 1, "the process completes");
    assert_eq!(terminated(&ended, "PROCESS"), 0);
    let last = ended.iter().rposition(|r| element_event(r, Intent::ElementTerminated, "tick")).unwrap();
    let end = position_of(&ended, |r| {
        r.intent == Intent::ElementCompleted
            && matches!(&r.value, RecordValue::ProcessInstance(pi) if pi.bpmn_element_type.as_str() == "PROCESS")
    });
    assert!(last < end, "the process completes after the last");
    assert_eq!(rows_left(&partition), 0, "rows left in state");
    partition.check_replay();
}
