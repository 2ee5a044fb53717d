//! An interrupting message boundary event on a parallel multi-instance body over 10,000 items,
//! on the real binary (issue 26): the body's inner instances terminate a chunk per batch
//! (PROCESS_INSTANCE_BATCH TERMINATE) while PROCESS_EVENT TRIGGERING keeps the trigger, then the
//! boundary path is taken with the message's variables (Zeebe's `EventTriggerBehavior`,
//! `ProcessInstanceBatchTerminateProcessor`). The node is killed (`kill -9`) in the middle of the
//! termination and restarted: it finishes the termination and enters the boundary event once.
//! The same with the body nested two subprocesses down and the boundary event on the outer one:
//! the subprocesses terminate after the body, then the boundary event is entered. A
//! modification terminating the body, and a completion condition that holds with 9,999 other
//! inner instances active, are resumed across a kill the same way. What was written is read
//! from the debug exporter's file.

mod common;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::Node;
use serde_json::Value;
use tonic::transport::Channel;
use waggle_protocol::gateway::*;

const ITEMS: usize = 10_000;
/// Inner instances one batch terminates at most (`waggle_engine::MI_TERMINATIONS_PER_BATCH`).
const PER_BATCH: usize = 500;

/// The body `work` (service tasks of type `mi-stop-item`) with the interrupting message boundary
/// event `stopped` on it (`nested: false`), or inside subprocess `inner` inside subprocess
/// `outer`, the boundary event on `outer` (`nested: true`); `condition`: the body completes
/// once one inner instance has.
fn model(nested: bool, condition: bool) -> String {
    let condition = match condition {
        true => "<bpmn:completionCondition>=numberOfCompletedInstances &gt;= 1</bpmn:completionCondition>",
        false => "",
    };
    let work = format!(
        r#"<bpmn:serviceTask id="work"><bpmn:extensionElements><zeebe:taskDefinition type="mi-stop-item"/></bpmn:extensionElements>
<bpmn:multiInstanceLoopCharacteristics><bpmn:extensionElements><zeebe:loopCharacteristics inputCollection="=for i in 1..n return i" inputElement="item"/></bpmn:extensionElements>{condition}</bpmn:multiInstanceLoopCharacteristics></bpmn:serviceTask>"#
    );
    let (activity, attached) = match nested {
        false => (work, "work"),
        true => (
            format!(
                r#"<bpmn:subProcess id="outer"><bpmn:startEvent id="s1"/><bpmn:sequenceFlow id="g1" sourceRef="s1" targetRef="inner"/>
<bpmn:subProcess id="inner"><bpmn:startEvent id="s2"/><bpmn:sequenceFlow id="h1" sourceRef="s2" targetRef="work"/>{work}<bpmn:sequenceFlow id="h2" sourceRef="work" targetRef="e3"/><bpmn:endEvent id="e3"/></bpmn:subProcess>
<bpmn:sequenceFlow id="g2" sourceRef="inner" targetRef="e4"/><bpmn:endEvent id="e4"/></bpmn:subProcess>"#
            ),
            "outer",
        ),
    };
    format!(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<bpmn:definitions xmlns:bpmn="http://www.omg.org/spec/BPMN/20100524/MODEL" xmlns:zeebe="http://camunda.org/schema/zeebe/1.0" id="d">
<bpmn:process id="mi-stop" isExecutable="true"><bpmn:startEvent id="s"/><bpmn:sequenceFlow id="f1" sourceRef="s" targetRef="{attached}"/>
{activity}
<bpmn:sequenceFlow id="f2" sourceRef="{attached}" targetRef="e"/><bpmn:endEvent id="e"/>
<bpmn:boundaryEvent id="stopped" attachedToRef="{attached}" cancelActivity="true"><bpmn:messageEventDefinition messageRef="m"/></bpmn:boundaryEvent>
<bpmn:sequenceFlow id="f3" sourceRef="stopped" targetRef="after"/>
<bpmn:serviceTask id="after"><bpmn:extensionElements><zeebe:taskDefinition type="mi-stop-after"/></bpmn:extensionElements></bpmn:serviceTask>
<bpmn:sequenceFlow id="f4" sourceRef="after" targetRef="e2"/><bpmn:endEvent id="e2"/></bpmn:process>
<bpmn:message id="m" name="mi-stop"><bpmn:extensionElements><zeebe:subscription correlationKey="=key"/></bpmn:extensionElements></bpmn:message>
</bpmn:definitions>"#
    )
}

/// Reads what the file gained since `offset` (whole lines only); returns them and moves `offset`.
fn new_lines(path: &Path, offset: &mut u64) -> Vec<String> {
    let Ok(mut file) = std::fs::File::open(path) else { return vec![] };
    file.seek(SeekFrom::Start(*offset)).expect("seek");
    let mut text = String::new();
    file.read_to_string(&mut text).expect("read");
    let Some(end) = text.rfind('\n') else { return vec![] };
    *offset += end as u64 + 1;
    text[..end].lines().map(str::to_string).collect()
}

fn is_inner_terminated(line: &str) -> bool {
    line.contains(r#""intent":"ELEMENT_TERMINATED""#)
        && line.contains(r#""bpmnElementType":"SERVICE_TASK""#)
        && line.contains(r#""elementId":"work""#)
}

fn is_body_ended(line: &str) -> bool {
    (line.contains(r#""intent":"ELEMENT_TERMINATED""#) || line.contains(r#""intent":"ELEMENT_COMPLETED""#))
        && line.contains(r#""bpmnElementType":"MULTI_INSTANCE_BODY""#)
}

/// A node exporting to a debug file, with an instance of process `mi-stop` whose body has
/// [`ITEMS`] active inner instances.
struct Run {
    node: Node,
    _dir: tempfile::TempDir,
    path: PathBuf,
    /// How far the file has been read.
    offset: u64,
    instance: i64,
    /// The multi-instance body's key.
    body: i64,
}

impl Run {
    /// Starts a node, deploys `xml` (process `mi-stop`), creates an instance over [`ITEMS`]
    /// items and waits until every inner instance is active (the body's
    /// PROCESS_INSTANCE_BATCH ACTIVATED exported).
    async fn start(xml: String) -> Run {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("records.jsonl");
        let path_arg = path.to_str().expect("utf-8 path").to_string();
        let node = Node::start(&["--exporters-debug-path", &path_arg]);
        let mut c = common::grpc_client(&node).await;
        let resources = vec![Resource { name: "mi-stop.bpmn".into(), content: xml.into_bytes() }];
        c.deploy_resource(DeployResourceRequest { resources, tenant_id: String::new() }).await.expect("deploy");
        let request = CreateProcessInstanceRequest {
            bpmn_process_id: "mi-stop".into(),
            version: -1,
            variables: format!(r#"{{"n": {ITEMS}, "key": "k-1"}}"#),
            ..Default::default()
        };
        let instance = c.create_process_instance(request).await.expect("create").into_inner().process_instance_key;
        let mut run = Run { node, _dir: dir, path, offset: 0, instance, body: 0 };
        let deadline = Instant::now() + Duration::from_secs(180);
        loop {
            let lines = new_lines(&run.path, &mut run.offset);
            for line in &lines {
                if line.contains(r#""intent":"ELEMENT_ACTIVATED""#) && line.contains(r#""bpmnElementType":"MULTI_INSTANCE_BODY""#) {
                    let v: Value = serde_json::from_str(line).expect("JSON line");
                    run.body = v["key"].as_i64().expect("the body's key");
                }
            }
            if lines.iter().any(|l| l.contains(r#""valueType":"PROCESS_INSTANCE_BATCH""#) && l.contains(r#""intent":"ACTIVATED""#)) {
                return run;
            }
            assert!(Instant::now() < deadline, "the body never activated its inner instances");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn client(&self) -> gateway_client::GatewayClient<Channel> {
        common::grpc_client(&self.node).await
    }

    /// Once an inner instance has terminated (and the body has not ended yet), kills the node
    /// (`kill -9`) and restarts it. Returns when it was killed (ms since the epoch).
    async fn kill_9_mid_termination(&mut self) -> i64 {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let lines = new_lines(&self.path, &mut self.offset);
            assert!(!lines.iter().any(|l| is_body_ended(l)), "the body ended before the kill could land in the middle");
            if lines.iter().any(|l| is_inner_terminated(l)) {
                break;
            }
            assert!(Instant::now() < deadline, "no inner instance terminated");
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        self.node.kill9();
        let killed_at = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as i64;
        self.node.restart();
        killed_at
    }

    /// Activates one job of `job_type` (waiting for it up to two minutes).
    async fn job(&self, job_type: &str) -> ActivatedJob {
        let mut c = self.client().await;
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            assert!(Instant::now() < deadline, "no job of type {job_type} came");
            let activation = ActivateJobsRequest {
                r#type: job_type.into(),
                worker: "w".into(),
                timeout: 60_000,
                max_jobs_to_activate: 1,
                request_timeout: 1_000,
                ..Default::default()
            };
            let mut stream = c.activate_jobs(activation).await.expect("activate").into_inner();
            while let Some(batch) = stream.message().await.expect("jobs") {
                if let Some(job) = batch.jobs.into_iter().next() {
                    return job;
                }
            }
        }
    }

    async fn complete(&self, job: &ActivatedJob) {
        let mut c = self.client().await;
        c.complete_job(CompleteJobRequest { job_key: job.key, variables: String::new() }).await.expect("complete");
    }

    /// Every record exported once the instance has completed, by position (a record exported
    /// again after the restart counts once).
    async fn records_once_completed(&self) -> BTreeMap<u64, Value> {
        let deadline = Instant::now() + Duration::from_secs(120);
        let mut records: BTreeMap<u64, Value> = BTreeMap::new();
        let mut offset = 0;
        loop {
            for line in new_lines(&self.path, &mut offset) {
                let v: Value = serde_json::from_str(&line).expect("JSON line");
                records.insert(v["position"].as_u64().expect("position"), v);
            }
            if records.values().any(|v| v["key"] == self.instance && v["intent"] == "ELEMENT_COMPLETED") {
                return records;
            }
            assert!(Instant::now() < deadline, "the instance did not complete");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// Checks what the termination wrote across the kill: each inner instance terminated once (the
/// `expected` of them), some before the kill and some after, no command terminating more than
/// [`PER_BATCH`] or writing more than eight records each, and each inner instance's job canceled.
fn check_termination(records: &BTreeMap<u64, Value>, expected: usize, killed_at: i64) {
    let inner: Vec<&Value> = records.values().filter(|v| is_inner_terminated(&v.to_string())).collect();
    let distinct: HashSet<i64> = inner.iter().map(|v| v["key"].as_i64().unwrap()).collect();
    assert_eq!(inner.len(), expected, "every inner instance terminated, once");
    assert_eq!(distinct.len(), expected);
    let before = inner.iter().filter(|v| v["timestamp"].as_i64().unwrap() <= killed_at).count();
    assert!(before > 0 && before < expected, "{before} of {expected} terminated before the kill: it did not land mid-termination");
    assert_eq!(
        events(records, &|v| v["intent"] == "CANCELED" && v["valueType"] == "JOB" && v["value"]["type"] == "mi-stop-item"),
        expected
    );
    // no batch of work is one giant batch: the records each command's processing wrote, and the
    // element instances it began to terminate, stay bounded
    let mut per_source: HashMap<i64, (usize, usize)> = HashMap::new();
    for v in records.values() {
        let entry = per_source.entry(v["sourceRecordPosition"].as_i64().unwrap()).or_default();
        entry.0 += 1;
        entry.1 += usize::from(v["intent"] == "ELEMENT_TERMINATING");
    }
    let (most_records, most_terminating) = per_source.values().fold((0, 0), |(r, t), &(r2, t2)| (r.max(r2), t.max(t2)));
    println!("largest command: {most_records} records; at most {most_terminating} element instances began terminating in one command");
    assert!(most_terminating <= PER_BATCH, "{most_terminating} element instances terminating in one command");
    assert!(most_records <= 8 * PER_BATCH, "{most_records} records written by one command");
}

/// How many events `f` picks.
fn events(records: &BTreeMap<u64, Value>, f: &dyn Fn(&Value) -> bool) -> usize {
    records.values().filter(|v| v["recordType"] == "EVENT" && f(v)).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_boundary_event_on_a_body_of_10000_terminates_it_in_batches_across_a_kill_9() {
    interrupt_across_kill_9(false).await;
}

/// The body two subprocesses down, the boundary event on the outer one: TRIGGERING on the outer
/// subprocess, the body's inner instances a chunk per batch across the kill, then `inner`,
/// `outer` (each once), TRIGGERED and the boundary event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_boundary_event_on_a_subprocess_holding_a_body_of_10000_waits_for_it_across_a_kill_9() {
    let records = interrupt_across_kill_9(true).await;
    let events: Vec<&Value> = records.values().filter(|v| v["recordType"] == "EVENT").collect();
    let position = |f: &dyn Fn(&Value) -> bool| events.iter().position(|v| f(v)).expect("record exported");
    let count = |f: &dyn Fn(&Value) -> bool| events.iter().filter(|v| f(v)).count();
    let element = |intent: &'static str, id: &'static str| move |v: &Value| v["intent"] == intent && v["value"]["elementId"] == id;
    assert_eq!(count(&element("ELEMENT_TERMINATED", "inner")), 1);
    assert_eq!(count(&element("ELEMENT_TERMINATED", "outer")), 1);
    let outer = events[position(&element("ELEMENT_ACTIVATING", "outer"))]["key"].clone();
    let triggering = position(&|v| v["valueType"] == "PROCESS_EVENT" && v["intent"] == "TRIGGERING");
    assert_eq!(events[triggering]["value"]["scopeKey"], outer, "the trigger waits on the outer subprocess");
    let body = position(&|v| v["intent"] == "ELEMENT_TERMINATED" && v["value"]["bpmnElementType"] == "MULTI_INSTANCE_BODY");
    let inner = position(&element("ELEMENT_TERMINATED", "inner"));
    let outer_terminated = position(&element("ELEMENT_TERMINATED", "outer"));
    let triggered = position(&|v| v["valueType"] == "PROCESS_EVENT" && v["intent"] == "TRIGGERED");
    let entered = position(&element("ELEMENT_ACTIVATING", "stopped"));
    assert!(triggering < position(&element("ELEMENT_TERMINATING", "outer")));
    assert!(body < inner && inner < outer_terminated && outer_terminated < triggered && triggered < entered);
}

/// Runs an instance of [`model`] over [`ITEMS`] items, publishes the message once every inner
/// instance is active, kills the node (`kill -9`) once some have terminated, restarts it,
/// completes the boundary path's job and checks the termination: every inner instance once,
/// across the kill, bounded per command. Returns the exported records by position.
async fn interrupt_across_kill_9(nested: bool) -> BTreeMap<u64, Value> {
    let mut run = Run::start(model(nested, false)).await;
    // the message interrupts the body; kill -9 once some inner instances have terminated
    let publish = PublishMessageRequest {
        name: "mi-stop".into(),
        correlation_key: "k-1".into(),
        variables: r#"{"why": "stopped"}"#.into(),
        ..Default::default()
    };
    run.client().await.publish_message(publish).await.expect("publish");
    let killed_at = run.kill_9_mid_termination().await;

    // the boundary path goes on after the restart, with the message's variables
    let job = run.job("mi-stop-after").await;
    assert_eq!(job.process_instance_key, run.instance);
    let variables: Value = serde_json::from_str(&job.variables).expect("JSON");
    assert_eq!(variables["why"], "stopped", "{variables}");
    run.complete(&job).await;
    let records = run.records_once_completed().await;
    check_termination(&records, ITEMS, killed_at);
    assert_eq!(events(&records, &|v| v["intent"] == "ELEMENT_TERMINATED" && v["key"] == run.body), 1, "the body terminated once");
    assert_eq!(events(&records, &|v| v["valueType"] == "PROCESS_EVENT" && v["intent"] == "TRIGGERING"), 1);
    assert_eq!(events(&records, &|v| v["valueType"] == "PROCESS_EVENT" && v["intent"] == "TRIGGERED"), 1);
    assert_eq!(
        events(&records, &|v| v["intent"] == "ELEMENT_ACTIVATED" && v["value"]["elementId"] == "stopped"),
        1,
        "the boundary event entered once"
    );
    records
}

/// ModifyProcessInstance terminating the body of 10,000 (issue 26) while activating the task
/// `after` in the process: the inner instances terminate a chunk per batch, the node is killed
/// (`kill -9`) in the middle and restarted; every inner instance terminates once, no command
/// terminates more than [`PER_BATCH`], the body once, and the instance completes through `after`
/// (`e2`) once the body has ended (Zeebe's `ModifyProcessInstanceTerminationTest`
/// `shouldBeAbleToCompleteProcessInstanceAfterElementIsTerminated`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_modification_terminating_a_body_of_10000_goes_on_across_a_kill_9() {
    let mut run = Run::start(model(false, false)).await;
    let modification = ModifyProcessInstanceRequest {
        process_instance_key: run.instance,
        activate_instructions: vec![modify_process_instance_request::ActivateInstruction {
            element_id: "after".into(),
            ancestor_element_instance_key: 0,
            variable_instructions: vec![],
        }],
        terminate_instructions: vec![modify_process_instance_request::TerminateInstruction { element_instance_key: run.body }],
    };
    run.client().await.modify_process_instance(modification).await.expect("modify");
    let killed_at = run.kill_9_mid_termination().await;

    // the activated task's job, then the instance completes once the body has ended
    let job = run.job("mi-stop-after").await;
    assert_eq!(job.process_instance_key, run.instance);
    run.complete(&job).await;
    let records = run.records_once_completed().await;
    check_termination(&records, ITEMS, killed_at);
    assert_eq!(events(&records, &|v| v["intent"] == "ELEMENT_TERMINATED" && v["key"] == run.body), 1, "the body terminated once");
    assert_eq!(events(&records, &|v| v["intent"] == "ELEMENT_COMPLETED" && v["value"]["elementId"] == "after"), 1);
    assert_eq!(events(&records, &|v| v["intent"] == "ELEMENT_TERMINATED" && v["key"] == run.instance), 0, "completed, not terminated");
}

/// A completion condition that holds (`numberOfCompletedInstances >= 1`) once one of the body's
/// 10,000 active inner instances completes (issue 26): the other 9,999 terminate a chunk per
/// batch while the body stays active (PROCESS_INSTANCE_BATCH TERMINATING keeps that in state),
/// the node is killed (`kill -9`) in the middle and restarted; every inner instance is
/// completed or terminated exactly once, no command terminates more than [`PER_BATCH`], then
/// the body and the process complete, each once (Zeebe's `MultiInstanceActivityTest`: a
/// completion condition that holds terminates the other inner instances and completes the
/// body).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_completion_condition_on_a_body_of_10000_terminates_the_rest_across_a_kill_9() {
    let mut run = Run::start(model(false, true)).await;
    let job = run.job("mi-stop-item").await;
    run.complete(&job).await;
    let killed_at = run.kill_9_mid_termination().await;
    let records = run.records_once_completed().await;
    check_termination(&records, ITEMS - 1, killed_at);
    let completed: Vec<i64> = records
        .values()
        .filter(|v| {
            v["recordType"] == "EVENT"
                && v["intent"] == "ELEMENT_COMPLETED"
                && v["value"]["elementId"] == "work"
                && v["value"]["bpmnElementType"] == "SERVICE_TASK"
        })
        .map(|v| v["key"].as_i64().unwrap())
        .collect();
    assert_eq!(completed.len(), 1, "one inner instance completed");
    let terminated: HashSet<i64> =
        records.values().filter(|v| is_inner_terminated(&v.to_string())).map(|v| v["key"].as_i64().unwrap()).collect();
    assert!(!terminated.contains(&completed[0]), "the completed inner instance is not terminated too");
    let ended = |intent: &'static str| move |v: &Value| v["intent"] == intent && v["key"] == run.body;
    assert_eq!(events(&records, &ended("ELEMENT_COMPLETED")), 1, "the body completed once");
    assert_eq!(events(&records, &ended("ELEMENT_TERMINATED")), 0);
    assert_eq!(events(&records, &|v| v["intent"] == "ELEMENT_COMPLETED" && v["key"] == run.instance), 1, "the process completed once");
    let marked = |v: &Value| v["valueType"] == "PROCESS_INSTANCE_BATCH" && v["intent"] == "TERMINATING";
    assert_eq!(events(&records, &marked), 1, "PROCESS_INSTANCE_BATCH TERMINATING once");
}
