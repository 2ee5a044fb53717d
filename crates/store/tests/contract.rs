//! The query store's contract, one suite run against both databases (issue 27: "the same
//! searches against SQLite and PostgreSQL return the same results"). The real engine runs a
//! scenario (deployments, instances completed, failed into an incident, cancelled, left
//! active); its log records go through the real store exporter into an SQLite file and into a
//! throw-away PostgreSQL server ([`waggle_store::test_cluster`]); then every search (each
//! entity, every filter operator including `$or`, sorting, paging with from/limit/after/before,
//! gets and 404s, malformed requests) must give the expected instances on both, and the same
//! JSON answer from both. Re-exporting everything (the stored positions dropped) must change
//! no answer: every write is an idempotent upsert. History clean-up deletes the same on both.
//! Zeebe user tasks (assigned, completed, updated, cancelled) have a scenario of their own;
//! element statistics and decisions (definitions, requirements, instances evaluated and failed,
//! from a business rule task and on their own) a third.

use std::collections::BTreeMap;

use serde_json::{json, Value};
use waggle_engine::{Command, Engine, NoJobStreams, ProcessingContext};
use waggle_exporter::{Context, Controller};
use waggle_protocol::record::{Intent, ValueType};
use waggle_protocol::value::{
    DecisionEvaluationRecord, DeploymentRecord, DeploymentResource, JobBatchRecord, JobRecord, ProcessInstanceCreationRecord,
    ProcessInstanceRecord, UserTaskRecord,
};
use waggle_protocol::{Record, RecordValue};
use waggle_state::{KvStore, MemoryStore, Overlay};
use waggle_store::exporter::{self, StoreConfig};
use waggle_store::query::{self, Entity};
use waggle_store::test_cluster::TestCluster;
use waggle_store::{decisions, statistics};
use waggle_store::{Connection, Location, StoreError};

const ONE_TASK: &str = include_str!("../../../workloads/one_task.bpmn");

/// The "order" process: a payment service task; version 2 carries a version tag.
fn order(tag: Option<&str>) -> String {
    let tag =
        tag.map(|t| format!(r#"<bpmn:extensionElements><zeebe:versionTag value="{t}"/></bpmn:extensionElements>"#)).unwrap_or_default();
    format!(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<bpmn:definitions xmlns:bpmn="http://www.omg.org/spec/BPMN/20100524/MODEL" xmlns:zeebe="http://camunda.org/schema/zeebe/1.0" id="d" targetNamespace="t">
  <bpmn:process id="order" name="Order process" isExecutable="true">{tag}
    <bpmn:startEvent id="start"/>
    <bpmn:sequenceFlow id="f1" sourceRef="start" targetRef="pay"/>
    <bpmn:serviceTask id="pay"><bpmn:extensionElements><zeebe:taskDefinition type="payment" retries="3"/></bpmn:extensionElements></bpmn:serviceTask>
    <bpmn:sequenceFlow id="f2" sourceRef="pay" targetRef="end"/>
    <bpmn:endEvent id="end"/>
  </bpmn:process>
</bpmn:definitions>"#
    )
}

/// The "review" process: a Zeebe user task with candidate groups and a due date.
const REVIEW: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<bpmn:definitions xmlns:bpmn="http://www.omg.org/spec/BPMN/20100524/MODEL" xmlns:zeebe="http://camunda.org/schema/zeebe/1.0" id="r" targetNamespace="t">
  <bpmn:process id="review" isExecutable="true">
    <bpmn:startEvent id="start"/>
    <bpmn:sequenceFlow id="f1" sourceRef="start" targetRef="approve"/>
    <bpmn:userTask id="approve">
      <bpmn:extensionElements>
        <zeebe:userTask/>
        <zeebe:assignmentDefinition candidateGroups="managers"/>
        <zeebe:taskSchedule dueDate="2030-01-01T09:00:00Z"/>
      </bpmn:extensionElements>
    </bpmn:userTask>
    <bpmn:sequenceFlow id="f2" sourceRef="approve" targetRef="end"/>
    <bpmn:endEvent id="end"/>
  </bpmn:process>
</bpmn:definitions>"#;

/// The engine, a state, a clock: runs commands and keeps the log's records.
struct Run {
    engine: Engine,
    state: MemoryStore,
    log: Vec<Record>,
}

impl Run {
    /// Runs one command at `now_ms`; returns the records it wrote.
    fn command(&mut self, now_ms: i64, key: i64, intent: Intent, value: RecordValue) -> Vec<Record> {
        let ctx = ProcessingContext { now_ms, job_streams: &NoJobStreams, partition_count: 1, message_partition_count: 0 };
        let mut overlay = Overlay::new(&self.state);
        let output = self.engine.process_batch(&mut overlay, &ctx, vec![Command::new(key, intent, value)]);
        let writes = overlay.into_writes();
        self.state.commit(&writes).expect("commit");
        let records = output.entry().map(|e| e.records).unwrap_or_default();
        self.log.extend(records.iter().cloned());
        records
    }

    fn deploy(&mut self, now_ms: i64, name: &str, xml: &str) {
        let deploy = DeploymentRecord {
            resources: vec![DeploymentResource { resource_name: name.into(), resource: xml.as_bytes().to_vec() }],
            ..Default::default()
        };
        let records = self.command(now_ms, -1, Intent::Create, RecordValue::Deployment(deploy));
        assert!(records.iter().any(|r| r.value_type == ValueType::Process), "{name} deployed: {records:?}");
    }

    /// Creates an instance; returns its key.
    fn create(&mut self, now_ms: i64, process: &str, version: i32, variables: Value) -> i64 {
        let create = ProcessInstanceCreationRecord {
            bpmn_process_id: process.into(),
            version,
            variables: variables.to_string(),
            ..Default::default()
        };
        let records = self.command(now_ms, -1, Intent::Create, RecordValue::ProcessInstanceCreation(create));
        records
            .iter()
            .find_map(|r| match &r.value {
                RecordValue::ProcessInstance(pi) if r.intent == Intent::ElementActivating && pi.bpmn_element_type == "PROCESS" => {
                    Some(pi.process_instance_key)
                }
                _ => None,
            })
            .unwrap_or_else(|| panic!("{process} created: {records:?}"))
    }

    /// Activates up to 10 jobs of `job_type`; returns (instance key, job key) pairs.
    fn activate(&mut self, now_ms: i64, job_type: &str) -> BTreeMap<i64, i64> {
        let batch = JobBatchRecord {
            job_type: job_type.into(),
            worker: "w1".into(),
            timeout_ms: 600_000,
            max_jobs_to_activate: 10,
            ..Default::default()
        };
        let records = self.command(now_ms, -1, Intent::Activate, RecordValue::JobBatch(batch));
        let mut jobs = BTreeMap::new();
        for r in &records {
            if let RecordValue::JobBatch(b) = &r.value {
                for (key, job) in b.job_keys.iter().zip(&b.jobs) {
                    jobs.insert(job.process_instance_key, *key);
                }
            }
        }
        jobs
    }
}

/// The instances of the scenario, by name.
struct Scenario {
    log: Vec<Record>,
    names: BTreeMap<&'static str, i64>,
}

fn scenario() -> Scenario {
    let (run, names) = order_run();
    Scenario { log: run.log, names }
}

/// The order scenario's run, to go on with.
fn order_run() -> (Run, BTreeMap<&'static str, i64>) {
    let mut run = Run { engine: Engine::new(1), state: MemoryStore::new(), log: Vec::new() };
    run.deploy(1_000, "order.bpmn", &order(None));
    run.deploy(2_000, "one_task.bpmn", ONE_TASK);
    run.deploy(2_500, "order.bpmn", &order(Some("v2")));
    let mut names = BTreeMap::new();
    names.insert("a", run.create(3_000, "order", -1, json!({"amount": 10, "customer": "Alice"})));
    names.insert("b", run.create(4_000, "order", 1, json!({"amount": 20, "customer": "bob"})));
    names.insert("c", run.create(5_000, "order", -1, json!({"amount": 30, "customer": "Carol"})));
    names.insert("d", run.create(6_000, "benchmark", -1, json!({"i": 1})));
    names.insert("e", run.create(7_000, "benchmark", -1, json!({"i": 2})));
    let jobs = run.activate(10_000, "payment");
    assert_eq!(jobs.len(), 3, "three payment jobs activated");
    let complete = JobRecord { variables: r#"{"paid": true}"#.into(), ..Default::default() };
    run.command(11_000, jobs[&names["a"]], Intent::Complete, RecordValue::Job(complete));
    let fail = JobRecord { retries: 0, error_message: "boom".into(), ..Default::default() };
    run.command(12_000, jobs[&names["b"]], Intent::Fail, RecordValue::Job(fail));
    run.command(13_000, names["c"], Intent::Cancel, RecordValue::ProcessInstance(ProcessInstanceRecord::default()));
    (run, names)
}

/// Three "review" instances: f's task assigned to alice, g's completed, h's candidate users
/// updated, then h cancelled. Names are of the instances.
fn user_task_scenario() -> Scenario {
    let mut run = Run { engine: Engine::new(1), state: MemoryStore::new(), log: Vec::new() };
    run.deploy(1_000, "review.bpmn", REVIEW);
    let mut names = BTreeMap::new();
    for (n, name) in ["f", "g", "h"].into_iter().enumerate() {
        names.insert(name, run.create(2_000 + 1_000 * n as i64, "review", -1, json!({})));
    }
    let tasks: BTreeMap<i64, i64> = run
        .log
        .iter()
        .filter_map(|r| match &r.value {
            RecordValue::UserTask(t) if r.intent == Intent::Created => Some((t.process_instance_key, r.key)),
            _ => None,
        })
        .collect();
    assert_eq!(tasks.len(), 3, "three user tasks created");
    let command = |run: &mut Run, now_ms: i64, name: &str, intent: Intent, task: UserTaskRecord| {
        let records = run.command(now_ms, tasks[&names[name]], intent, RecordValue::UserTask(task));
        assert!(records.iter().all(|r| r.record_type != waggle_protocol::record::RecordType::CommandRejection), "{records:?}");
    };
    command(&mut run, 5_000, "f", Intent::Assign, UserTaskRecord { assignee: "alice".into(), ..Default::default() });
    command(&mut run, 6_000, "g", Intent::Complete, UserTaskRecord { variables: "{}".into(), ..Default::default() });
    let update =
        UserTaskRecord { candidate_users: vec!["ann".into()], changed_attributes: vec!["candidateUsersList".into()], ..Default::default() };
    command(&mut run, 7_000, "h", Intent::Update, update);
    run.command(8_000, names["h"], Intent::Cancel, RecordValue::ProcessInstance(ProcessInstanceRecord::default()));
    Scenario { log: run.log, names }
}

/// Exports `records` through the store exporter, as the broker's runner does.
fn export(location: &Location, records: &[Record]) {
    let factory = exporter::factory("query-store", StoreConfig { location: location.clone(), history_ttl: None }).expect("store");
    let mut e = factory.make();
    e.configure(&Context { exporter_id: "query-store".into(), partition_id: 1 }).unwrap();
    let mut c = Controller::new(0);
    e.open(&mut c).unwrap();
    // in two flushes, as the runner flushes as it goes
    let half = records.len() / 2;
    for r in &records[..half] {
        e.export(r, &mut c).unwrap();
    }
    e.flush(&mut c).unwrap();
    for r in &records[half..] {
        e.export(r, &mut c).unwrap();
    }
    e.flush(&mut c).unwrap();
    let last = records.last().unwrap().position;
    match location {
        // every PostgreSQL commit is durable: acknowledged at once
        Location::Postgres(_) => assert_eq!(c.last_acknowledged(), last, "PostgreSQL: acknowledged after its commit"),
        // SQLite's commit right after a synced one is not synced: a sync due within
        // DURABLE_EVERY acknowledges it
        Location::Sqlite(_) => {
            if c.last_acknowledged() < last {
                std::thread::sleep(exporter::DURABLE_EVERY);
                for task in c.take_due(std::time::Instant::now()) {
                    e.on_scheduled(task, &mut c).unwrap();
                }
            }
            assert_eq!(c.last_acknowledged(), last, "SQLite: acknowledged by the synced commit");
        }
    }
    e.close();
}

/// The two stores under test.
struct Stores {
    sqlite: Connection,
    postgres: Connection,
}

impl Stores {
    /// Runs a search on both: the same answer, returned.
    fn search(&self, entity: &Entity, request: &Value) -> Value {
        let lite = query::search(&self.sqlite, entity, request).unwrap_or_else(|e| panic!("SQLite {request}: {e}"));
        let pg = query::search(&self.postgres, entity, request).unwrap_or_else(|e| panic!("PostgreSQL {request}: {e}"));
        assert_eq!(lite, pg, "{} search {request}: SQLite and PostgreSQL differ", entity.name);
        lite
    }

    fn get(&self, entity: &Entity, key: i64) -> Result<Value, String> {
        let lite = query::get(&self.sqlite, entity, key);
        let pg = query::get(&self.postgres, entity, key);
        match (lite, pg) {
            (Ok(a), Ok(b)) => {
                assert_eq!(a, b, "{} {key}: SQLite and PostgreSQL differ", entity.name);
                Ok(a)
            }
            (Err(StoreError::NotFound(a)), Err(StoreError::NotFound(b))) => {
                assert_eq!(a, b);
                Err(a)
            }
            (a, b) => panic!("{} {key}: SQLite {a:?}, PostgreSQL {b:?}", entity.name),
        }
    }

    /// An instance's taken sequence flows from both: the same answer, returned.
    fn sequence_flows(&self, process_instance_key: i64) -> Value {
        let lite = query::sequence_flows(&self.sqlite, process_instance_key).expect("SQLite sequence flows");
        let pg = query::sequence_flows(&self.postgres, process_instance_key).expect("PostgreSQL sequence flows");
        assert_eq!(lite, pg, "sequence flows of {process_instance_key}: SQLite and PostgreSQL differ");
        lite
    }

    fn invalid(&self, entity: &Entity, request: &Value) {
        for (db, conn) in [("SQLite", &self.sqlite), ("PostgreSQL", &self.postgres)] {
            let r = query::search(conn, entity, request);
            assert!(matches!(r, Err(StoreError::Invalid(_))), "{db}: {request} gave {r:?}");
        }
    }
}

/// An ISO date of the scenario's clock.
fn at(ms: i64) -> String {
    query::iso(ms)
}

/// Every answer of the suite, for comparing two runs.
fn suite(stores: &Stores, names: &BTreeMap<&'static str, i64>) -> Vec<Value> {
    let answers = std::cell::RefCell::new(Vec::new());
    let name_of = |key: &str| -> String {
        let key: i64 = key.parse().unwrap();
        names.iter().find(|(_, k)| **k == key).map_or_else(|| key.to_string(), |(n, _)| n.to_string())
    };
    let pi = &query::PROCESS_INSTANCE;
    let check = |entity: &Entity, field: &str, request: Value, expected: &[&str]| {
        let r = stores.search(entity, &request);
        let got: Vec<String> =
            r["items"].as_array().unwrap().iter().map(|i| i[field].as_str().map_or_else(|| i[field].to_string(), name_of)).collect();
        assert_eq!(got, expected, "{} {request}: {r}", entity.name);
        answers.borrow_mut().push(r);
    };
    let k = |n: &str| names[n].to_string();

    // process instances: every operator on every kind of field
    check(pi, "processInstanceKey", json!({}), &["a", "b", "c", "d", "e"]);
    check(pi, "processInstanceKey", json!({"filter": {"state": "ACTIVE"}}), &["b", "d", "e"]);
    check(pi, "processInstanceKey", json!({"filter": {"state": {"$eq": "COMPLETED"}}}), &["a"]);
    check(pi, "processInstanceKey", json!({"filter": {"state": {"$neq": "ACTIVE"}}}), &["a", "c"]);
    check(pi, "processInstanceKey", json!({"filter": {"processDefinitionId": {"$in": ["order", "nope"]}}}), &["a", "b", "c"]);
    check(pi, "processInstanceKey", json!({"filter": {"processDefinitionId": {"$notIn": ["order"]}}}), &["d", "e"]);
    check(pi, "processInstanceKey", json!({"filter": {"processDefinitionId": {"$like": "ord*"}}}), &["a", "b", "c"]);
    check(pi, "processInstanceKey", json!({"filter": {"processDefinitionId": {"$like": "bench?ark"}}}), &["d", "e"]);
    check(pi, "processInstanceKey", json!({"filter": {"processDefinitionId": {"$like": "ORD*"}}}), &[]);
    check(pi, "processInstanceKey", json!({"filter": {"processDefinitionVersion": {"$gte": 2}}}), &["a", "c"]);
    check(pi, "processInstanceKey", json!({"filter": {"processDefinitionVersion": {"$lt": 2}}}), &["b", "d", "e"]);
    check(pi, "processInstanceKey", json!({"filter": {"startDate": {"$gt": at(5_000)}}}), &["d", "e"]);
    check(pi, "processInstanceKey", json!({"filter": {"startDate": {"$gte": at(4_000), "$lte": at(6_000)}}}), &["b", "c", "d"]);
    check(pi, "processInstanceKey", json!({"filter": {"endDate": {"$exists": true}}}), &["a", "c"]);
    check(pi, "processInstanceKey", json!({"filter": {"endDate": {"$exists": false}}}), &["b", "d", "e"]);
    check(pi, "processInstanceKey", json!({"filter": {"processInstanceKey": {"$in": [k("e"), k("a")]}}}), &["a", "e"]);
    check(pi, "processInstanceKey", json!({"filter": {"processInstanceKey": {"$gt": k("c")}}}), &["d", "e"]);
    check(pi, "processInstanceKey", json!({"filter": {"processInstanceKey": names["b"]}}), &["b"]);
    check(pi, "processInstanceKey", json!({"filter": {"hasIncident": true}}), &["b"]);
    check(pi, "processInstanceKey", json!({"filter": {"hasIncident": false, "processDefinitionId": "order"}}), &["a", "c"]);
    check(pi, "processInstanceKey", json!({"filter": {"processDefinitionName": "Order process"}}), &["a", "b", "c"]);
    check(pi, "processInstanceKey", json!({"filter": {"processDefinitionVersionTag": "v2"}}), &["a", "c"]);
    check(pi, "processInstanceKey", json!({"filter": {"parentProcessInstanceKey": {"$exists": false}}}), &["a", "b", "c", "d", "e"]);
    check(pi, "processInstanceKey", json!({"filter": {"tenantId": "<default>"}}), &["a", "b", "c", "d", "e"]);
    // $or: alternatives, ANDed with the other fields; empty means no condition
    check(pi, "processInstanceKey", json!({"filter": {"$or": [{"state": "COMPLETED"}, {"hasIncident": true}]}}), &["a", "b"]);
    check(
        pi,
        "processInstanceKey",
        json!({"filter": {"state": "ACTIVE", "$or": [{"processDefinitionId": "benchmark"}, {"processDefinitionId": "order", "processDefinitionVersion": 1}]}}),
        &["b", "d", "e"],
    );
    check(
        pi,
        "processInstanceKey",
        json!({"filter": {"$or": [{"startDate": {"$lt": at(4_000)}}, {"processInstanceKey": {"$in": [k("e")]}, "state": {"$neq": "COMPLETED"}}]}}),
        &["a", "e"],
    );
    // by element (issue 28, 8.8's elementId / elementInstanceState / hasElementInstanceIncident:
    // together they hold for one element instance) and by variable value (`variables`)
    check(pi, "processInstanceKey", json!({"filter": {"elementId": "pay"}}), &["a", "b", "c"]);
    check(pi, "processInstanceKey", json!({"filter": {"elementId": "pay", "elementInstanceState": "ACTIVE"}}), &["b"]);
    check(pi, "processInstanceKey", json!({"filter": {"elementId": "pay", "hasElementInstanceIncident": true}}), &["b"]);
    check(
        pi,
        "processInstanceKey",
        json!({"filter": {"elementId": "pay", "elementInstanceState": "ACTIVE", "hasElementInstanceIncident": false}}),
        &[],
    );
    check(
        pi,
        "processInstanceKey",
        json!({"filter": {"elementId": {"$like": "pa?"}, "elementInstanceState": {"$in": ["COMPLETED", "TERMINATED"]}}}),
        &["a", "c"],
    );
    check(
        pi,
        "processInstanceKey",
        json!({"filter": {"elementId": "start", "elementInstanceState": "COMPLETED", "processDefinitionId": "order"}}),
        &["a", "b", "c"],
    );
    check(pi, "processInstanceKey", json!({"filter": {"variables": [{"name": "customer", "value": "\"bob\""}]}}), &["b"]);
    check(pi, "processInstanceKey", json!({"filter": {"variables": [{"name": "amount", "value": {"$in": ["10", "30"]}}]}}), &["a", "c"]);
    check(pi, "processInstanceKey", json!({"filter": {"variables": [{"name": "customer", "value": {"$like": "*o*"}}]}}), &["b", "c"]);
    check(
        pi,
        "processInstanceKey",
        json!({"filter": {"variables": [{"name": "amount", "value": "10"}, {"name": "paid", "value": "true"}]}}),
        &["a"],
    );
    check(
        pi,
        "processInstanceKey",
        json!({"filter": {"variables": [{"name": "amount", "value": "20"}, {"name": "paid", "value": "true"}]}}),
        &[],
    );
    check(
        pi,
        "processInstanceKey",
        json!({"filter": {"$or": [{"elementId": "pay", "hasElementInstanceIncident": true}, {"variables": [{"name": "i", "value": "2"}]}]}}),
        &["b", "e"],
    );
    check(pi, "processInstanceKey", json!({"filter": {"$or": []}}), &["a", "b", "c", "d", "e"]);
    check(pi, "processInstanceKey", json!({"filter": {"$or": [{}], "state": "TERMINATED"}}), &["c"]);
    // the 8.8 Java client's unset filters
    check(
        pi,
        "processInstanceKey",
        json!({"filter": {"state": {"$eq": "ACTIVE", "$in": []}, "tags": [], "$or": []}, "sort": []}),
        &["b", "d", "e"],
    );

    // sorting: text bytewise, missing values first ascending and last descending, the key last
    check(
        pi,
        "processInstanceKey",
        json!({"sort": [{"field": "processDefinitionId"}, {"field": "startDate", "order": "DESC"}]}),
        &["e", "d", "c", "b", "a"],
    );
    check(pi, "processInstanceKey", json!({"sort": [{"field": "endDate", "order": "ASC"}]}), &["b", "d", "e", "a", "c"]);
    check(pi, "processInstanceKey", json!({"sort": [{"field": "endDate", "order": "desc"}]}), &["c", "a", "b", "d", "e"]);
    check(pi, "processInstanceKey", json!({"sort": [{"field": "state", "order": "DESC"}]}), &["c", "a", "b", "d", "e"]);
    check(
        pi,
        "processInstanceKey",
        json!({"sort": [{"field": "hasIncident", "order": "DESC"}, {"field": "processInstanceKey", "order": "DESC"}]}),
        &["b", "e", "d", "c", "a"],
    );
    check(pi, "processInstanceKey", json!({"sort": [{"field": "processDefinitionVersionTag"}]}), &["b", "d", "e", "a", "c"]);

    // paging: from/limit, cursors forwards and back
    let first = stores.search(pi, &json!({"page": {"limit": 2}}));
    assert_eq!(first["page"]["totalItems"], 5);
    check(pi, "processInstanceKey", json!({"page": {"limit": 2}}), &["a", "b"]);
    check(pi, "processInstanceKey", json!({"page": {"limit": 2, "after": first["page"]["endCursor"]}}), &["c", "d"]);
    let second = stores.search(pi, &json!({"page": {"limit": 2, "after": first["page"]["endCursor"]}}));
    let third = stores.search(pi, &json!({"page": {"limit": 2, "after": second["page"]["endCursor"]}}));
    assert_eq!(third["page"]["totalItems"], 5);
    check(pi, "processInstanceKey", json!({"page": {"limit": 2, "after": second["page"]["endCursor"]}}), &["e"]);
    check(pi, "processInstanceKey", json!({"page": {"limit": 2, "before": third["page"]["startCursor"]}}), &["c", "d"]);
    check(pi, "processInstanceKey", json!({"page": {"from": 3, "limit": 10}}), &["d", "e"]);
    check(pi, "processInstanceKey", json!({"page": {"from": 5}}), &[]);
    check(
        pi,
        "processInstanceKey",
        json!({"filter": {"state": "ACTIVE"}, "sort": [{"field": "processInstanceKey", "order": "DESC"}], "page": {"from": 1, "limit": 1}}),
        &["d"],
    );
    // keyset cursors (issue 28): walking every order one row at a time, forwards from the
    // first row and backwards from the last, gives the order's rows, whatever the sort
    // (missing values, text, descending, booleans, the key itself)
    for sort in [
        json!([]),
        json!([{"field": "processInstanceKey", "order": "DESC"}]),
        json!([{"field": "endDate", "order": "ASC"}]),
        json!([{"field": "endDate", "order": "DESC"}]),
        json!([{"field": "processDefinitionId"}, {"field": "startDate", "order": "DESC"}]),
        json!([{"field": "state", "order": "DESC"}, {"field": "endDate"}]),
        json!([{"field": "hasIncident", "order": "DESC"}]),
        json!([{"field": "processDefinitionVersionTag"}]),
    ] {
        let all = stores.search(pi, &json!({"sort": sort}));
        let expected: Vec<Value> = all["items"].as_array().unwrap().iter().map(|i| i["processInstanceKey"].clone()).collect();
        let mut forwards = Vec::new();
        let mut page = stores.search(pi, &json!({"sort": sort, "page": {"limit": 1}}));
        while let Some(item) = page["items"].get(0) {
            forwards.push(item["processInstanceKey"].clone());
            page = stores.search(pi, &json!({"sort": sort, "page": {"limit": 1, "after": page["page"]["endCursor"]}}));
        }
        assert_eq!(forwards, expected, "forwards by {sort}");
        let mut backwards = Vec::new();
        let mut page = stores.search(pi, &json!({"sort": sort, "page": {"from": 4, "limit": 1}}));
        while let Some(item) = page["items"].get(0) {
            backwards.insert(0, item["processInstanceKey"].clone());
            page = stores.search(pi, &json!({"sort": sort, "page": {"limit": 1, "before": page["page"]["startCursor"]}}));
        }
        assert_eq!(backwards, expected, "backwards by {sort}");
        // a cursor of a sort with other terms is refused
        let other = json!([{"field": "endDate"}, {"field": "state"}, {"field": "startDate"}]);
        stores.invalid(pi, &json!({"page": {"after": all["page"]["endCursor"]}, "sort": other}));
    }
    let empty = stores.search(pi, &json!({"page": {"from": 5}}));
    assert_eq!((empty["page"]["totalItems"].clone(), empty["page"]["endCursor"].clone()), (json!(5), Value::Null));

    // process definitions
    let pd = &query::PROCESS_DEFINITION;
    let defs = stores.search(pd, &json!({"filter": {"processDefinitionId": "order"}, "sort": [{"field": "version", "order": "DESC"}]}));
    let versions: Vec<&Value> = defs["items"].as_array().unwrap().iter().map(|d| &d["version"]).collect();
    assert_eq!(versions, [&json!(2), &json!(1)]);
    assert_eq!(defs["items"][0]["versionTag"], "v2");
    assert!(defs["items"][1].get("versionTag").is_none());
    assert_eq!(defs["items"][0]["name"], "Order process");
    assert_eq!(defs["items"][0]["hasStartForm"], false);
    answers.borrow_mut().push(defs.clone());
    let benchmark = stores.search(pd, &json!({"filter": {"$or": [{"name": {"$exists": false}}, {"resourceName": {"$like": "one_*"}}]}}));
    assert_eq!(benchmark["page"]["totalItems"], 1, "{benchmark}");
    assert_eq!(benchmark["items"][0]["processDefinitionId"], "benchmark");
    answers.borrow_mut().push(benchmark);
    let def_key: i64 = defs["items"][0]["processDefinitionKey"].as_str().unwrap().parse().unwrap();
    assert_eq!(stores.get(pd, def_key).unwrap()["version"], 2);
    let lite_xml = query::process_definition_xml(&stores.sqlite, def_key).unwrap();
    assert_eq!(lite_xml, query::process_definition_xml(&stores.postgres, def_key).unwrap());
    assert!(lite_xml.contains(r#"versionTag value="v2""#));
    for conn in [&stores.sqlite, &stores.postgres] {
        assert!(matches!(query::process_definition_xml(conn, 1), Err(StoreError::NotFound(_))));
    }

    // element instances
    let ei = &query::ELEMENT_INSTANCE;
    check(ei, "processInstanceKey", json!({"filter": {"type": "SERVICE_TASK"}}), &["a", "b", "c", "d", "e"]);
    check(ei, "processInstanceKey", json!({"filter": {"elementId": "pay", "state": {"$in": ["COMPLETED", "TERMINATED"]}}}), &["a", "c"]);
    check(ei, "processInstanceKey", json!({"filter": {"hasIncident": true}}), &["b"]);
    check(
        ei,
        "processInstanceKey",
        json!({"filter": {"processInstanceKey": k("a"), "endDate": {"$lte": at(11_000)}}, "sort": [{"field": "elementId"}]}),
        &["a", "a", "a", "a"],
    );
    let pay_of_a = stores.search(ei, &json!({"filter": {"processInstanceKey": k("a"), "elementId": "pay"}}));
    assert_eq!(pay_of_a["items"][0]["startDate"], at(3_000));
    assert_eq!(pay_of_a["items"][0]["endDate"], at(11_000));
    answers.borrow_mut().push(pay_of_a.clone());
    let pay_key: i64 = pay_of_a["items"][0]["elementInstanceKey"].as_str().unwrap().parse().unwrap();
    assert_eq!(stores.get(ei, pay_key).unwrap()["state"], "COMPLETED");

    // variables: the values are JSON text, sorted bytewise ("Alice" < "Carol" < "bob")
    let var = &query::VARIABLE;
    check(var, "processInstanceKey", json!({"filter": {"name": "customer"}, "sort": [{"field": "value"}]}), &["a", "c", "b"]);
    check(var, "processInstanceKey", json!({"filter": {"name": "amount", "value": {"$in": ["10", "30"]}}}), &["a", "c"]);
    check(
        var,
        "processInstanceKey",
        json!({"filter": {"$or": [{"name": "i"}, {"name": "paid"}]}, "sort": [{"field": "name"}, {"field": "value", "order": "DESC"}]}),
        &["e", "d", "a"],
    );
    let paid = stores.search(var, &json!({"filter": {"name": "paid"}}));
    assert_eq!(paid["items"][0]["value"], "true");
    let var_key: i64 = paid["items"][0]["variableKey"].as_str().unwrap().parse().unwrap();
    assert_eq!(stores.get(var, var_key).unwrap()["name"], "paid");
    answers.borrow_mut().push(paid);

    // incidents
    let inc = &query::INCIDENT;
    let incidents = stores.search(inc, &json!({"filter": {"state": "ACTIVE", "errorType": "JOB_NO_RETRIES"}}));
    assert_eq!(incidents["page"]["totalItems"], 1, "{incidents}");
    assert_eq!(incidents["items"][0]["processInstanceKey"], k("b"));
    assert_eq!(incidents["items"][0]["errorMessage"], "boom");
    assert_eq!(incidents["items"][0]["creationTime"], at(12_000));
    let incident_key: i64 = incidents["items"][0]["incidentKey"].as_str().unwrap().parse().unwrap();
    assert_eq!(stores.get(inc, incident_key).unwrap()["elementId"], "pay");
    answers.borrow_mut().push(incidents);

    // jobs
    let job = &query::JOB;
    check(job, "processInstanceKey", json!({"filter": {"type": "payment"}}), &["a", "b", "c"]);
    check(job, "processInstanceKey", json!({"filter": {"worker": "w1", "state": {"$neq": "CANCELED"}}}), &["a", "b"]);
    check(job, "processInstanceKey", json!({"filter": {"worker": {"$exists": false}}}), &["d", "e"]);
    check(job, "processInstanceKey", json!({"filter": {"state": "FAILED", "retries": 0}}), &["b"]);
    check(job, "processInstanceKey", json!({"filter": {"hasFailedWithRetriesLeft": false, "endTime": {"$exists": true}}}), &["a", "c"]);
    check(
        job,
        "processInstanceKey",
        json!({"filter": {"$or": [{"state": "COMPLETED"}, {"state": "CANCELED"}]}, "sort": [{"field": "state"}]}),
        &["c", "a"],
    );
    let completed = stores.search(job, &json!({"filter": {"state": "COMPLETED"}}));
    assert_eq!(completed["items"][0]["customHeaders"], json!({}));
    answers.borrow_mut().push(completed);

    // gets: found and not found
    assert_eq!(stores.get(pi, names["c"]).unwrap()["state"], "TERMINATED");
    assert_eq!(stores.get(pi, names["a"]).unwrap()["endDate"], at(11_000));
    for entity in [pi, pd, ei, var, inc] {
        assert!(stores.get(entity, 1).is_err(), "{} 1 is not found", entity.name);
    }

    // malformed requests are invalid on both
    for bad in [
        json!({"filter": {"$or": {"state": "ACTIVE"}}}),
        json!({"filter": {"$or": ["ACTIVE"]}}),
        json!({"filter": {"$or": [{"$or": [{"state": "ACTIVE"}]}]}}),
        json!({"filter": {"$or": [{"nope": 1}]}}),
        json!({"filter": {"state": {"$gt": "A"}}}),
        json!({"filter": {"processInstanceKey": {"$like": "1*"}}}),
        json!({"sort": [{"field": "state", "order": "UP"}]}),
        json!({"page": {"from": 0, "after": "eyJpIjoxfQ"}}),
    ] {
        stores.invalid(pi, &bad);
    }

    // the sequence flows each instance took, once each (8.8's `sequence-flows`): a went through,
    // b's payment failed, c was cancelled at it, d and e wait in their task
    for (name, expected) in [("a", &["f1", "f2"][..]), ("b", &["f1"][..]), ("c", &["f1"][..]), ("d", &["f1"][..]), ("e", &["f1"][..])] {
        let r = stores.sequence_flows(names[name]);
        let ids: Vec<&str> = r["items"].as_array().unwrap().iter().map(|i| i["elementId"].as_str().unwrap()).collect();
        assert_eq!(ids, expected, "{name}: {r}");
        let first = &r["items"][0];
        assert_eq!(first["sequenceFlowId"], format!("{}_f1", names[name]), "{r}");
        assert_eq!(first["processInstanceKey"], k(name), "{r}");
        assert_eq!(first["tenantId"], "<default>", "{r}");
        assert!(first["processDefinitionKey"].as_str().is_some_and(|k| k.parse::<i64>().is_ok()), "{r}");
        answers.borrow_mut().push(r);
    }
    assert_eq!(stores.sequence_flows(1), json!({"items": []}), "an unknown instance took no flow");
    answers.into_inner()
}

/// Every user task search of the suite (8.8's `/v2/user-tasks/search`), its answers.
fn user_task_suite(stores: &Stores, names: &BTreeMap<&'static str, i64>) -> Vec<Value> {
    let ut = &query::USER_TASK;
    let mut answers = Vec::new();
    let mut check = |request: Value, expected: &[&str]| {
        let r = stores.search(ut, &request);
        let got: Vec<&str> = r["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| {
                let key: i64 = i["processInstanceKey"].as_str().unwrap().parse().unwrap();
                *names.iter().find(|(_, k)| **k == key).expect("a scenario instance").0
            })
            .collect();
        assert_eq!(got, expected, "user task {request}: {r}");
        answers.push(r);
    };
    check(json!({}), &["f", "g", "h"]);
    check(json!({"filter": {"state": "CREATED"}}), &["f"]);
    check(json!({"filter": {"state": "COMPLETED"}}), &["g"]);
    check(json!({"filter": {"state": "CANCELED"}}), &["h"]);
    check(json!({"filter": {"assignee": "alice"}}), &["f"]);
    check(json!({"filter": {"assignee": {"$exists": false}}}), &["g", "h"]);
    check(json!({"filter": {"completionDate": {"$exists": true}}}), &["g", "h"]);
    check(json!({"filter": {"$or": [{"state": "COMPLETED"}, {"assignee": "alice"}]}}), &["f", "g"]);
    check(json!({"filter": {"elementId": "approve", "processDefinitionId": {"$like": "rev*"}}}), &["f", "g", "h"]);
    check(json!({"sort": [{"field": "state", "order": "DESC"}]}), &["f", "g", "h"]);
    check(json!({"sort": [{"field": "state"}]}), &["h", "g", "f"]);
    check(json!({"filter": {"processInstanceKey": names["g"]}}), &["g"]);
    let h = stores.search(ut, &json!({"filter": {"processInstanceKey": names["h"].to_string()}}));
    let task = &h["items"][0];
    assert_eq!((task["candidateGroups"].clone(), task["candidateUsers"].clone()), (json!(["managers"]), json!(["ann"])), "{task}");
    assert_eq!((task["dueDate"].as_str(), task["completionDate"].as_str()), (Some("2030-01-01T09:00Z"), Some(at(8_000).as_str())));
    assert_eq!(task["creationDate"], at(4_000));
    let key: i64 = task["userTaskKey"].as_str().unwrap().parse().unwrap();
    assert_eq!(stores.get(ut, key).unwrap()["state"], "CANCELED");
    assert!(stores.get(ut, 1).is_err(), "user task 1 is not found");
    answers.push(h);
    stores.invalid(ut, &json!({"filter": {"nope": 1}}));
    answers
}

#[test]
fn user_tasks_give_the_same_answers_on_sqlite_and_postgresql() {
    let Scenario { log, names } = user_task_scenario();
    let dir = tempfile::tempdir().unwrap();
    let sqlite = Location::Sqlite(dir.path().join("store.sqlite"));
    let cluster = TestCluster::start();
    let postgres = Location::Postgres(cluster.database("user_tasks"));
    for location in [&sqlite, &postgres] {
        export(location, &log);
    }
    let stores = Stores { sqlite: Connection::open(&sqlite).unwrap(), postgres: Connection::open(&postgres).unwrap() };
    let answers = user_task_suite(&stores, &names);
    for location in [&sqlite, &postgres] {
        Connection::open(location).unwrap().execute("DELETE FROM exporter_position", &[]).unwrap();
        export(location, &log);
    }
    assert_eq!(user_task_suite(&stores, &names), answers, "re-exporting changed an answer");
    // history clean-up takes the ended instances' tasks
    for conn in [&stores.sqlite, &stores.postgres] {
        assert_eq!(exporter::clean_up(conn, 1, 100_000).unwrap(), 2, "instances g and h ended");
    }
    let left = stores.search(&query::USER_TASK, &json!({}));
    assert_eq!(left["page"]["totalItems"], 1, "{left}");
    assert_eq!(left["items"][0]["processInstanceKey"], names["f"].to_string());
}

#[test]
fn the_same_searches_give_the_same_answers_on_sqlite_and_postgresql() {
    let Scenario { log, names } = scenario();
    let dir = tempfile::tempdir().unwrap();
    let sqlite = Location::Sqlite(dir.path().join("store.sqlite"));
    let cluster = TestCluster::start();
    // a linguistic collation, as production databases have ("bob" < "Carol"): the answers must
    // still be SQLite's, text sorted bytewise
    let postgres =
        Location::Postgres(cluster.database_with("contract", &["--template=template0", "--locale-provider=icu", "--icu-locale=en-US"]));
    for location in [&sqlite, &postgres] {
        export(location, &log);
    }
    let stores = Stores { sqlite: Connection::open(&sqlite).unwrap(), postgres: Connection::open(&postgres).unwrap() };
    let answers = suite(&stores, &names);

    // at-least-once delivery: everything exported again, over what is there, changes nothing
    for location in [&sqlite, &postgres] {
        Connection::open(location).unwrap().execute("DELETE FROM exporter_position", &[]).unwrap();
        export(location, &log);
    }
    assert_eq!(suite(&stores, &names), answers, "re-exporting changed an answer");

    // history clean-up: the instance that ended before the cut goes with everything of it
    for conn in [&stores.sqlite, &stores.postgres] {
        assert_eq!(exporter::clean_up(conn, 1, 12_000).unwrap(), 1, "only instance a ended before 12 s");
    }
    let left = stores.search(&query::PROCESS_INSTANCE, &json!({}));
    let left: Vec<&str> = left["items"].as_array().unwrap().iter().map(|i| i["processInstanceKey"].as_str().unwrap()).collect();
    let expected: Vec<String> = ["b", "c", "d", "e"].iter().map(|n| names[n].to_string()).collect();
    assert_eq!(left, expected);
    let a_elements = stores.search(&query::ELEMENT_INSTANCE, &json!({"filter": {"processInstanceKey": names["a"].to_string()}}));
    assert_eq!(a_elements["page"]["totalItems"], 0);
    assert_eq!(stores.search(&query::VARIABLE, &json!({"filter": {"processInstanceKey": names["c"]}}))["page"]["totalItems"], 2);
    assert_eq!(stores.sequence_flows(names["a"]), json!({"items": []}), "a's sequence flows went with it");
    assert_eq!(stores.sequence_flows(names["b"])["items"].as_array().map(Vec::len), Some(1), "b's stay");

    // what the exporter stored as its position is its last record's, on both
    for conn in [&stores.sqlite, &stores.postgres] {
        let row = conn.query_row("SELECT last_exported_position FROM exporter_position WHERE partition_id = ?", &[1i64.into()]).unwrap();
        assert_eq!(row.unwrap()[0].as_i64(), Some(log.last().unwrap().position as i64));
    }
}

/// A DRG of two decisions: "outer" (a literal expression) requires "inner" (a UNIQUE decision
/// table: an amount under 5 matches both rules, which fails the evaluation).
const CHECKS: &str = r##"<?xml version="1.0" encoding="UTF-8"?>
<definitions xmlns="https://www.omg.org/spec/DMN/20191111/MODEL/" id="checks" name="Checks" namespace="t">
  <decision id="inner" name="Inner">
    <decisionTable id="t1" hitPolicy="UNIQUE">
      <input id="i1" label="Amount"><inputExpression id="e1" typeRef="number"><text>amount</text></inputExpression></input>
      <output id="o1" name="size" typeRef="string"/>
      <rule id="small"><inputEntry id="s1"><text>&lt; 10</text></inputEntry><outputEntry id="s2"><text>"small"</text></outputEntry></rule>
      <rule id="tiny"><inputEntry id="t1i"><text>&lt; 5</text></inputEntry><outputEntry id="t1o"><text>"tiny"</text></outputEntry></rule>
    </decisionTable>
  </decision>
  <decision id="outer" name="Outer">
    <informationRequirement id="r1"><requiredDecision href="#inner"/></informationRequirement>
    <literalExpression id="l1"><text>inner + "!"</text></literalExpression>
  </decision>
</definitions>"##;

/// The order scenario (statistics), plus: the CHECKS graph evaluated on its own (amount 7:
/// evaluated; amount 3: failed in "inner"), and one "rules" instance whose business rule task
/// evaluates `rules.dmn`. Names: the order scenario's, "r" the rules instance, "ok" and "bad"
/// the two evaluations' keys.
fn decision_scenario() -> Scenario {
    let (run, names) = decision_run();
    Scenario { log: run.log, names }
}

/// [`decision_scenario`]'s run, to go on with.
fn decision_run() -> (Run, BTreeMap<&'static str, i64>) {
    let (mut run, mut names) = order_run();
    let deploy = DeploymentRecord {
        resources: vec![
            DeploymentResource { resource_name: "checks.dmn".into(), resource: CHECKS.as_bytes().to_vec() },
            DeploymentResource { resource_name: "rules.dmn".into(), resource: include_bytes!("../../../workloads/rules.dmn").to_vec() },
            DeploymentResource { resource_name: "rules.bpmn".into(), resource: include_bytes!("../../../workloads/rules.bpmn").to_vec() },
        ],
        ..Default::default()
    };
    let records = run.command(20_000, -1, Intent::Create, RecordValue::Deployment(deploy));
    assert!(records.iter().any(|r| r.value_type == ValueType::Decision), "decisions deployed: {records:?}");
    for (name, amount, intent) in [("ok", 7, Intent::Evaluated), ("bad", 3, Intent::Failed)] {
        let ask = DecisionEvaluationRecord {
            decision_id: "outer".into(),
            variables: json!({"amount": amount}).to_string(),
            ..Default::default()
        };
        let records = run.command(21_000, -1, Intent::Evaluate, RecordValue::DecisionEvaluation(ask));
        let evaluation = records.iter().find(|r| r.value_type == ValueType::DecisionEvaluation && r.is_event()).expect("evaluation");
        assert_eq!(evaluation.intent, intent, "{records:?}");
        names.insert(name, evaluation.key);
    }
    names.insert("r", run.create(22_000, "rules", -1, json!({"approved": true, "amount": 50})));
    (run, names)
}

/// The statistics and decision answers (on both stores, the same).
fn decision_suite(stores: &Stores, names: &BTreeMap<&'static str, i64>) -> Vec<Value> {
    let mut answers = Vec::new();
    let both = |f: &dyn Fn(&Connection) -> Result<Value, StoreError>| -> Result<Value, String> {
        match (f(&stores.sqlite), f(&stores.postgres)) {
            (Ok(a), Ok(b)) => {
                assert_eq!(a, b, "SQLite and PostgreSQL differ");
                Ok(a)
            }
            (Err(StoreError::Invalid(a)), Err(StoreError::Invalid(_))) => Err(format!("invalid: {a}")),
            (Err(StoreError::NotFound(a)), Err(StoreError::NotFound(_))) => Err(format!("not found: {a}")),
            (a, b) => panic!("SQLite {a:?}, PostgreSQL {b:?}"),
        }
    };
    let stat = |id: &str, active: i64, canceled: i64, incidents: i64, completed: i64| json!({"elementId": id, "active": active, "canceled": canceled, "incidents": incidents, "completed": completed});

    // element statistics of "order": version 1 has b (an incident at pay), version 2 a
    // (completed) and c (cancelled at pay)
    let defs =
        stores.search(&query::PROCESS_DEFINITION, &json!({"filter": {"processDefinitionId": "order"}, "sort": [{"field": "version"}]}));
    let key_of = |i: usize| defs["items"][i]["processDefinitionKey"].as_str().unwrap().parse::<i64>().unwrap();
    let (v1, v2) = (key_of(0), key_of(1));
    let by_definition = |key: i64, request: Value| both(&|c| statistics::process_definition(c, key, &request));
    let mut check = |key: i64, request: Value, expected: Vec<Value>| {
        let r = by_definition(key, request.clone()).unwrap();
        assert_eq!(r, json!({ "items": expected }), "statistics of {key} {request}");
        answers.push(r);
    };
    check(v1, Value::Null, vec![stat("pay", 0, 0, 1, 0), stat("start", 0, 0, 0, 1)]);
    check(v2, json!({}), vec![stat("end", 0, 0, 0, 1), stat("pay", 0, 1, 0, 1), stat("start", 0, 0, 0, 2)]);
    check(v2, json!({"filter": {"state": "COMPLETED"}}), vec![stat("end", 0, 0, 0, 1), stat("pay", 0, 0, 0, 1), stat("start", 0, 0, 0, 1)]);
    check(
        v2,
        json!({"filter": {"elementId": "pay", "processInstanceKey": {"$in": [names["c"].to_string()]}}}),
        vec![stat("pay", 0, 1, 0, 0)],
    );
    check(v2, json!({"filter": {"elementInstanceState": {"$neq": "COMPLETED"}}}), vec![stat("pay", 0, 1, 0, 0)]);
    check(v1, json!({"filter": {"hasIncident": true, "hasElementInstanceIncident": true}}), vec![stat("pay", 0, 0, 1, 0)]);
    check(v1, json!({"filter": {"$or": [{"state": "COMPLETED"}, {"hasRetriesLeft": true}]}}), vec![]);
    check(
        v2,
        json!({"filter": {"startDate": {"$gte": at(4_000)}, "variables": []}}),
        vec![stat("pay", 0, 1, 0, 0), stat("start", 0, 0, 0, 1)],
    );
    // 8.8's filter fields on other tables: b's incident says "boom" (Java's "boom".hashCode() is
    // 3029739); b's customer is "bob", a's amount 10; no instance is in a batch operation
    let b_only = || vec![stat("pay", 0, 0, 1, 0), stat("start", 0, 0, 0, 1)];
    check(v1, json!({"filter": {"errorMessage": "boom"}}), b_only());
    check(v1, json!({"filter": {"errorMessage": {"$like": "bo*", "$neq": "x"}}}), b_only());
    check(v1, json!({"filter": {"errorMessage": "nope"}}), vec![]);
    check(v1, json!({"filter": {"incidentErrorHashCode": 3_029_739}}), b_only());
    check(v1, json!({"filter": {"incidentErrorHashCode": {"$in": [1, 3_029_739]}}}), b_only());
    check(v1, json!({"filter": {"incidentErrorHashCode": {"$gt": 3_029_739}}}), vec![]);
    check(v1, json!({"filter": {"$or": [{"state": "COMPLETED"}, {"incidentErrorHashCode": 3_029_739}]}}), b_only());
    check(v1, json!({"filter": {"batchOperationId": "42"}}), vec![]);
    check(v1, json!({"filter": {"variables": [{"name": "customer", "value": "\"bob\""}]}}), b_only());
    check(v1, json!({"filter": {"variables": [{"name": "customer", "value": {"$like": "*Carol*"}}]}}), vec![]);
    check(
        v2,
        json!({"filter": {"variables": [{"name": "amount", "value": {"$in": ["10", "11"]}}]}}),
        vec![stat("end", 0, 0, 0, 1), stat("pay", 0, 0, 0, 1), stat("start", 0, 0, 0, 1)],
    );
    for bad in [
        json!({"filter": {"nope": 1}}),
        json!({"sort": []}),
        json!("x"),
        json!({"filter": {"state": 1}}),
        json!({"filter": {"incidentErrorHashCode": "boom"}}),
        json!({"filter": {"incidentErrorHashCode": {"$like": "1*"}}}),
        json!({"filter": {"errorMessage": 1}}),
        json!({"filter": {"batchOperationId": {"$gt": "1"}}}),
        json!({"filter": {"variables": [{"name": "amount"}]}}),
    ] {
        assert!(by_definition(v2, bad.clone()).unwrap_err().starts_with("invalid"), "{bad}");
    }
    // of one instance: element instances, not instances
    let by_instance = |key: i64| both(&|c| statistics::process_instance(c, key)).unwrap();
    assert_eq!(by_instance(names["b"]), json!({"items": [stat("pay", 0, 0, 1, 0), stat("start", 0, 0, 0, 1)]}));
    assert_eq!(by_instance(names["d"])["items"].as_array().unwrap().len(), 2, "{}", by_instance(names["d"]));
    assert_eq!(by_instance(1), json!({"items": []}));

    // decision definitions and requirements
    let dd = &decisions::DECISION_DEFINITION;
    let defs = stores.search(dd, &json!({"sort": [{"field": "decisionDefinitionId"}]}));
    let ids: Vec<&str> = defs["items"].as_array().unwrap().iter().map(|d| d["decisionDefinitionId"].as_str().unwrap()).collect();
    assert_eq!(ids, ["discount", "inner", "outer"], "{defs}");
    assert_eq!(defs["items"][2]["name"], "Outer");
    assert_eq!(defs["items"][2]["version"], 1);
    assert_eq!(defs["items"][2]["decisionRequirementsId"], "checks");
    let outer_key: i64 = defs["items"][2]["decisionDefinitionKey"].as_str().unwrap().parse().unwrap();
    assert_eq!(stores.get(dd, outer_key).unwrap(), defs["items"][2]);
    answers.push(defs);
    let drs = stores.search(&decisions::DECISION_REQUIREMENTS, &json!({"filter": {"decisionRequirementsName": "Checks"}}));
    assert_eq!(drs["page"]["totalItems"], 1, "{drs}");
    assert_eq!(drs["items"][0]["resourceName"], "checks.dmn");
    let drg_key: i64 = drs["items"][0]["decisionRequirementsKey"].as_str().unwrap().parse().unwrap();
    for (key, by_definition) in [(outer_key, true), (drg_key, false)] {
        assert_eq!(both(&|c| decisions::xml(c, key, by_definition).map(Value::String)).unwrap(), json!(CHECKS));
    }
    assert!(both(&|c| decisions::xml(c, 1, true).map(Value::String)).unwrap_err().starts_with("not found"));
    answers.push(drs);

    // decision instances: ok (inner, outer), bad (inner failed), the rules task's (discount)
    let di = &decisions::DECISION_INSTANCE;
    let all = stores.search(di, &json!({}));
    let listed: Vec<(String, &str, &str)> = all["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            let id = d["decisionEvaluationInstanceKey"].as_str().unwrap().to_owned();
            (id, d["decisionDefinitionId"].as_str().unwrap(), d["state"].as_str().unwrap())
        })
        .collect();
    let (ok, bad) = (names["ok"], names["bad"]);
    let expected =
        [(format!("{ok}-1"), "inner", "EVALUATED"), (format!("{ok}-2"), "outer", "EVALUATED"), (format!("{bad}-1"), "inner", "FAILED")];
    assert_eq!(listed[..3], expected, "{all}");
    assert_eq!((listed[3].1, listed[3].2), ("discount", "EVALUATED"), "{all}");
    assert_eq!(all["page"]["totalItems"], 4);
    let failed = &all["items"][2];
    assert!(failed["evaluationFailure"].as_str().unwrap().contains("UNIQUE"), "{failed}");
    assert_eq!(all["items"][1]["result"], "\"small!\"");
    assert_eq!(all["items"][1]["decisionDefinitionType"], "LITERAL_EXPRESSION");
    assert_eq!(all["items"][1]["processInstanceKey"], "-1", "evaluated on its own (8.8 answers -1)");
    assert_eq!(all["items"][3]["processInstanceKey"], names["r"].to_string());
    assert_eq!(all["items"][3]["result"], "5");
    answers.push(all);
    let mut search = |request: Value, expected: usize| {
        let r = stores.search(di, &request);
        assert_eq!(r["items"].as_array().unwrap().len(), expected, "{request}: {r}");
        answers.push(r);
    };
    search(json!({"filter": {"state": "FAILED"}}), 1);
    search(json!({"filter": {"decisionEvaluationKey": ok.to_string()}}), 2);
    search(json!({"filter": {"processInstanceKey": names["r"].to_string(), "decisionDefinitionType": "DECISION_TABLE"}}), 1);
    search(json!({"filter": {"decisionDefinitionId": {"$in": ["inner"]}}, "sort": [{"field": "evaluationDate", "order": "DESC"}]}), 2);
    search(json!({"sort": [{"field": "decisionDefinitionName", "order": "DESC"}], "page": {"limit": 1, "from": 1}}), 1);
    stores.invalid(di, &json!({"filter": {"evaluatedInputs": []}, "sort": [{"field": "nope"}]}));
    // a get carries the inputs and the matched rules
    let got = both(&|c| decisions::get_instance(c, &format!("{ok}-1"))).unwrap();
    assert_eq!(got["evaluatedInputs"], json!([{"inputId": "i1", "inputName": "Amount", "inputValue": "7"}]), "{got}");
    assert_eq!(got["matchedRules"][0]["ruleId"], "small", "{got}");
    assert_eq!(got["matchedRules"][0]["evaluatedOutputs"][0]["outputValue"], "\"small\"", "{got}");
    assert!(both(&|c| decisions::get_instance(c, &format!("{ok}-9"))).unwrap_err().starts_with("not found"));
    assert!(both(&|c| decisions::get_instance(c, "nope")).unwrap_err().starts_with("invalid"));
    answers.push(got);
    answers
}

#[test]
fn statistics_and_decisions_give_the_same_answers_on_sqlite_and_postgresql() {
    let Scenario { log, names } = decision_scenario();
    let dir = tempfile::tempdir().unwrap();
    let sqlite = Location::Sqlite(dir.path().join("store.sqlite"));
    let cluster = TestCluster::start();
    let postgres =
        Location::Postgres(cluster.database_with("decisions", &["--template=template0", "--locale-provider=icu", "--icu-locale=en-US"]));
    for location in [&sqlite, &postgres] {
        export(location, &log);
    }
    let stores = Stores { sqlite: Connection::open(&sqlite).unwrap(), postgres: Connection::open(&postgres).unwrap() };
    let answers = decision_suite(&stores, &names);
    for location in [&sqlite, &postgres] {
        Connection::open(location).unwrap().execute("DELETE FROM exporter_position", &[]).unwrap();
        export(location, &log);
    }
    assert_eq!(decision_suite(&stores, &names), answers, "re-exporting changed an answer");
    // the rules instance's decision goes with it at clean-up; evaluations on their own stay
    for conn in [&stores.sqlite, &stores.postgres] {
        exporter::clean_up(conn, 1, i64::MAX).unwrap();
    }
    assert_eq!(stores.search(&decisions::DECISION_INSTANCE, &json!({}))["page"]["totalItems"], 3);
}

/// A job's new timeout is its deadline in the store (JOB TIMEOUT_UPDATED), a job created,
/// activated and completed between two flushes is one row with all of it, and a deleted DRG
/// (DeleteResource) takes its decision definitions and requirements out of the store, while
/// its evaluations stay (8.8 keeps decision instances as history).
#[test]
fn job_timeouts_and_deleted_decisions_reach_both_stores() {
    let (mut run, names) = decision_run();
    let jobs = run.activate(30_000, "benchmark-task");
    assert_eq!(jobs.len(), 2, "d's and e's jobs activated");
    let timeout = JobRecord { timeout_ms: 5_000, ..Default::default() };
    let updated = run.command(31_000, jobs[&names["d"]], Intent::UpdateTimeout, RecordValue::Job(timeout));
    assert!(updated.iter().any(|r| r.intent == Intent::TimeoutUpdated), "{updated:?}");
    let complete = JobRecord { variables: "{}".into(), ..Default::default() };
    run.command(32_000, jobs[&names["e"]], Intent::Complete, RecordValue::Job(complete));
    let drg = run
        .log
        .iter()
        .find_map(|r| match &r.value {
            RecordValue::DecisionRequirements(d) if d.decision_requirements_id == "checks" => Some(r.key),
            _ => None,
        })
        .expect("the checks DRG");
    let deletion = waggle_protocol::value::ResourceDeletionRecord { resource_key: drg, ..Default::default() };
    let deleted = run.command(33_000, -1, Intent::Delete, RecordValue::ResourceDeletion(deletion));
    assert!(deleted.iter().any(|r| r.value_type == ValueType::Decision && r.intent == Intent::Deleted), "{deleted:?}");

    let dir = tempfile::tempdir().unwrap();
    let sqlite = Location::Sqlite(dir.path().join("store.sqlite"));
    let cluster = TestCluster::start();
    let postgres = Location::Postgres(cluster.database("deletions"));
    for location in [&sqlite, &postgres] {
        export(location, &run.log);
    }
    let stores = Stores { sqlite: Connection::open(&sqlite).unwrap(), postgres: Connection::open(&postgres).unwrap() };
    let job_of = |name: &str| {
        let r = stores.search(&query::JOB, &json!({"filter": {"processInstanceKey": names[name].to_string()}}));
        assert_eq!(r["page"]["totalItems"], 1, "{r}");
        r["items"][0].clone()
    };
    let d = job_of("d");
    assert_eq!(
        (d["deadline"].as_str(), d["worker"].as_str(), d["state"].as_str()),
        (Some(&*at(36_000)), Some("w1"), Some("CREATED")),
        "{d}"
    );
    let e = job_of("e");
    assert_eq!(
        (e["deadline"].as_str(), e["worker"].as_str(), e["state"].as_str()),
        (Some(&*at(630_000)), Some("w1"), Some("COMPLETED")),
        "{e}"
    );
    assert!(e["endTime"].is_string(), "{e}");

    let defs = stores.search(&decisions::DECISION_DEFINITION, &json!({}));
    let ids: Vec<&str> = defs["items"].as_array().unwrap().iter().map(|d| d["decisionDefinitionId"].as_str().unwrap()).collect();
    assert_eq!(ids, ["discount"], "only rules.dmn's decision is left: {defs}");
    let drs = stores.search(&decisions::DECISION_REQUIREMENTS, &json!({"filter": {"decisionRequirementsId": "checks"}}));
    assert_eq!(drs["page"]["totalItems"], 0, "{drs}");
    assert!(stores.get(&decisions::DECISION_REQUIREMENTS, drg).is_err(), "the DRG is gone");
    for conn in [&stores.sqlite, &stores.postgres] {
        assert!(matches!(decisions::xml(conn, drg, false), Err(StoreError::NotFound(_))), "its XML is gone");
    }
    assert_eq!(stores.search(&decisions::DECISION_INSTANCE, &json!({}))["page"]["totalItems"], 4, "evaluations stay");
}

/// Exports `records` through the store exporter, flushing after every `every` records (a
/// transaction each; all in one when `every` is larger than the log).
fn export_every(location: &Location, records: &[Record], every: usize) {
    let factory = exporter::factory("query-store", StoreConfig { location: location.clone(), history_ttl: None }).expect("store");
    let mut e = factory.make();
    e.configure(&Context { exporter_id: "query-store".into(), partition_id: 1 }).unwrap();
    let mut c = Controller::new(0);
    e.open(&mut c).unwrap();
    for chunk in records.chunks(every) {
        for r in chunk {
            e.export(r, &mut c).unwrap();
        }
        e.flush(&mut c).unwrap();
    }
    e.close();
}

/// The count rows (the non-zero ones) against the rows they count, sorted.
fn counts_and_rows(conn: &Connection) -> [Vec<Vec<waggle_store::db::Value>>; 4] {
    let rows = |sql: &str| {
        let mut rows = conn.query(sql, &[]).unwrap();
        rows.sort_by_key(|r| format!("{r:?}"));
        rows
    };
    [
        rows("SELECT process_definition_key, state, partition_id, n FROM process_instance_count WHERE n <> 0"),
        rows("SELECT process_definition_key, state, partition_id, COUNT(*) FROM process_instance GROUP BY process_definition_key, state, partition_id"),
        rows("SELECT process_definition_key, flow_node_id, state, incident, partition_id, n FROM flow_node_count WHERE n <> 0"),
        rows(
            "SELECT process_definition_key, flow_node_id, state, CASE WHEN incident_key IS NULL THEN 0 ELSE 1 END, partition_id, COUNT(*)
             FROM flow_node_instance WHERE type <> 'PROCESS'
             GROUP BY process_definition_key, flow_node_id, state, CASE WHEN incident_key IS NULL THEN 0 ELSE 1 END, partition_id",
        ),
    ]
}

/// Asserts the counts are the rows' (issue 27: SQLite's exporter keeps them per transaction,
/// PostgreSQL's triggers per statement); returns them.
fn counted(conn: &Connection, when: &str) -> [Vec<Vec<waggle_store::db::Value>>; 2] {
    let [instances, instance_rows, elements, element_rows] = counts_and_rows(conn);
    assert_eq!(instances, instance_rows, "{when}: the instance counts are not the rows'");
    assert_eq!(elements, element_rows, "{when}: the element counts are not the rows'");
    assert!(!instances.is_empty() && !elements.is_empty(), "{when}: something is counted");
    [instances, elements]
}

/// The counts behind the UI's badges equal what the rows say, on both databases, however the
/// records come in transactions: all in one (instances created and ended in one transaction:
/// their ends folded into the inserts), one record each (every end an update of a committed
/// row), seven each; exported again over what is there (nothing counted twice); after an
/// incident is resolved (b's task: with an incident, then without); after history clean-up.
#[test]
fn counts_follow_the_rows_whatever_the_transactions_on_sqlite_and_postgresql() {
    let (mut run, names) = order_run();
    let (incident, job) = run
        .log
        .iter()
        .find_map(|r| match &r.value {
            RecordValue::Incident(i) if r.intent == Intent::Created && i.process_instance_key == names["b"] => Some((r.key, i.job_key)),
            _ => None,
        })
        .expect("b's job failed without retries: an incident");
    let counted_with_incident = run.log.len();
    run.command(14_000, job, Intent::UpdateRetries, RecordValue::Job(JobRecord { retries: 1, ..Default::default() }));
    let resolved = run.command(15_000, incident, Intent::Resolve, RecordValue::Incident(Default::default()));
    assert!(resolved.iter().any(|r| r.value_type == ValueType::Incident && r.intent == Intent::Resolved), "{resolved:?}");
    let log = run.log;
    let dir = tempfile::tempdir().unwrap();
    let cluster = TestCluster::start();
    let stores = [
        (Location::Sqlite(dir.path().join("one.sqlite")), usize::MAX),
        (Location::Sqlite(dir.path().join("each.sqlite")), 1),
        (Location::Sqlite(dir.path().join("seven.sqlite")), 7),
        (Location::Postgres(cluster.database("counts")), 7),
    ];
    let mut answers = Vec::new();
    for (location, every) in &stores {
        // up to b's incident: b's task is counted with an incident
        export_every(location, &log[..counted_with_incident], *every);
        let conn = Connection::open(location).unwrap();
        let [_, elements] = counted(&conn, &format!("{location} every {every}, before the resolve"));
        assert!(elements.iter().any(|r| r[3].as_i64() == Some(1) && r[5].as_i64() == Some(1)), "{location}: one with an incident");
        export_every(location, &log[counted_with_incident..], *every);
        let exported = counted(&conn, &format!("{location} every {every}"));
        assert!(exported[1].iter().all(|r| r[3].as_i64() == Some(0)), "{location}: the incident is resolved: {:?}", exported[1]);
        conn.execute("DELETE FROM exporter_position", &[]).unwrap();
        export_every(location, &log, *every);
        assert_eq!(counted(&conn, &format!("{location} every {every}, again")), exported, "{location}: re-export counted again");
        assert_eq!(exporter::clean_up(&conn, 1, 12_000).unwrap(), 1, "only instance a ended before 12 s");
        let cleaned = counted(&conn, &format!("{location} every {every}, cleaned up"));
        answers.push((exported, cleaned));
    }
    for (answer, (location, _)) in answers.iter().zip(&stores).skip(1) {
        assert_eq!(answer, &answers[0], "{location} counts otherwise than {}", stores[0].0);
    }
}
