//! The exporter's writes (idempotent under re-export) and the searches over them.

use serde_json::{json, Value};
use waggle_exporter::{Context, Controller, Exporter};
use waggle_protocol::record::{Intent, RecordType, ValueType};
use waggle_protocol::value::{ProcessInstanceRecord, ProcessRecord, VariableRecord};
use waggle_protocol::{Record, RecordValue};

use crate::exporter::{self, StoreConfig};
use crate::query;

const XML: &str =
    r#"<definitions xmlns="http://www.omg.org/spec/BPMN/20100524/MODEL"><process id="order" name="Order process"/></definitions>"#;

fn event(position: u64, key: i64, timestamp_ms: i64, value_type: ValueType, intent: Intent, value: RecordValue) -> Record {
    Record { position, source_position: 0, key, timestamp_ms, record_type: RecordType::Event, value_type, intent, rejection: None, value }
}

fn element(position: u64, key: i64, pi: i64, element: &str, kind: &str, intent: Intent) -> Record {
    let value = RecordValue::ProcessInstance(ProcessInstanceRecord {
        bpmn_process_id: "order".into(),
        version: 1,
        process_definition_key: 10,
        process_instance_key: pi,
        element_id: element.into(),
        flow_scope_key: if kind == "PROCESS" { -1 } else { pi },
        bpmn_element_type: kind.into(),
        parent_process_instance_key: -1,
        parent_element_instance_key: -1,
        tenant_id: "".into(),
    });
    event(position, key, 1_000 * position as i64, ValueType::ProcessInstance, intent, value)
}

/// A deployment, then three instances: 100 and 200 complete, 300 stays active with a variable.
fn records() -> Vec<Record> {
    let mut r = vec![event(
        1,
        10,
        1_000,
        ValueType::Process,
        Intent::Created,
        RecordValue::Process(ProcessRecord {
            bpmn_process_id: "order".into(),
            version: 1,
            process_definition_key: 10,
            resource_name: "order.bpmn".into(),
            resource: XML.as_bytes().to_vec(),
            checksum: 1,
            tenant_id: String::new(),
        }),
    )];
    let mut pos = 2;
    for pi in [100, 200, 300] {
        r.push(element(pos, pi, pi, "order", "PROCESS", Intent::ElementActivating));
        r.push(element(pos + 1, pi + 1, pi, "start", "START_EVENT", Intent::ElementActivating));
        r.push(element(pos + 2, pi + 1, pi, "start", "START_EVENT", Intent::ElementCompleted));
        pos += 3;
        if pi != 300 {
            r.push(element(pos, pi, pi, "order", "PROCESS", Intent::ElementCompleted));
            pos += 1;
        }
    }
    let var = |value: &str| {
        RecordValue::Variable(VariableRecord {
            name: "amount".into(),
            value: value.into(),
            scope_key: 300,
            process_instance_key: 300,
            process_definition_key: 10,
            bpmn_process_id: "order".into(),
            tenant_id: String::new(),
        })
    };
    r.push(event(pos, 301_000, 1, ValueType::Variable, Intent::Created, var("1")));
    r.push(event(pos + 1, 301_000, 1, ValueType::Variable, Intent::Updated, var("2")));
    r
}

fn export(path: &std::path::Path, records: &[Record], acknowledged: u64) -> u64 {
    let factory =
        exporter::factory("query-store", StoreConfig { location: crate::Location::Sqlite(path.to_owned()), history_ttl: None }).unwrap();
    let mut e = factory.make();
    e.configure(&Context { exporter_id: "query-store".into(), partition_id: 1 }).unwrap();
    let mut c = Controller::new(acknowledged);
    e.open(&mut c).unwrap();
    for r in records {
        e.export(r, &mut c).unwrap();
    }
    e.flush(&mut c).unwrap();
    e.close();
    c.last_acknowledged()
}

#[test]
fn a_position_is_acknowledged_once_a_synced_commit_covers_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.sqlite");
    let all = records();
    let factory =
        exporter::factory("query-store", StoreConfig { location: crate::Location::Sqlite(path.clone()), history_ttl: None }).unwrap();
    let mut e = factory.make();
    e.configure(&Context { exporter_id: "query-store".into(), partition_id: 1 }).unwrap();
    let mut c = Controller::new(0);
    e.open(&mut c).unwrap();
    e.export(&all[0], &mut c).unwrap();
    e.flush(&mut c).unwrap();
    assert_eq!(c.last_acknowledged(), 1, "the first commit is synced");
    e.export(&all[1], &mut c).unwrap();
    e.flush(&mut c).unwrap();
    assert_eq!(c.last_acknowledged(), 1, "a commit right after a synced one is not synced");
    let conn = crate::open(&path).unwrap();
    let instances = search(&conn, &query::PROCESS_INSTANCE, Value::Null);
    assert_eq!(instances["page"]["totalItems"], 1, "searches see the unsynced commit");
    assert!(c.take_due(std::time::Instant::now()).is_empty());
    std::thread::sleep(exporter::DURABLE_EVERY);
    let due = c.take_due(std::time::Instant::now());
    assert_eq!(due.len(), 1, "a sync is scheduled");
    e.on_scheduled(due[0], &mut c).unwrap();
    assert_eq!(c.last_acknowledged(), 2);
}

#[test]
fn the_write_connection_keeps_statement_journals_in_memory() {
    let dir = tempfile::tempdir().unwrap();
    let conn = crate::Connection::open(&crate::Location::Sqlite(dir.path().join("store.sqlite"))).unwrap();
    let temp_store = |conn: &crate::Connection| conn.query_row("PRAGMA temp_store", &[]).unwrap().unwrap()[0].as_i64();
    assert_eq!(temp_store(&conn), Some(0), "a reader keeps SQLite's default");
    conn.tune_for_writing().unwrap();
    assert_eq!(temp_store(&conn), Some(2), "MEMORY: no temporary file per statement journal");
}

fn search(conn: &crate::Connection, entity: &query::Entity, request: Value) -> Value {
    query::search(conn, entity, &request).unwrap()
}

fn keys(result: &Value, field: &str) -> Vec<String> {
    result["items"].as_array().unwrap().iter().map(|i| i[field].as_str().unwrap().to_owned()).collect()
}

#[test]
fn re_export_leaves_each_entity_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.sqlite");
    let all = records();
    let last = all.last().unwrap().position;
    assert_eq!(export(&path, &all[..7], 0), 7);
    // as after a kill -9: the runner resumes from an older position than the store's
    assert_eq!(export(&path, &all, 3), last);
    assert_eq!(export(&path, &all, 0), last, "records the store has are skipped");
    let conn = crate::open(&path).unwrap();
    let instances = search(&conn, &query::PROCESS_INSTANCE, Value::Null);
    assert_eq!(instances["page"]["totalItems"], 3);
    assert_eq!(keys(&instances, "processInstanceKey"), ["100", "200", "300"]);
    assert_eq!(instances["items"][0]["state"], "COMPLETED");
    assert_eq!(instances["items"][0]["processDefinitionName"], "Order process");
    assert_eq!(instances["items"][2]["state"], "ACTIVE");
    assert!(instances["items"][2].get("endDate").is_none());
    assert_eq!(instances["items"][0]["startDate"], "1970-01-01T00:00:02.000Z");
    let elements = search(&conn, &query::ELEMENT_INSTANCE, json!({"filter": {"type": "START_EVENT"}}));
    assert_eq!(elements["page"]["totalItems"], 3);
    let vars = search(&conn, &query::VARIABLE, Value::Null);
    assert_eq!(vars["page"]["totalItems"], 1);
    assert_eq!(vars["items"][0]["value"], "2", "the update wins");
    assert_eq!(query::process_definition_xml(&conn, 10).unwrap(), XML);
}

#[test]
fn filters_sort_and_pages() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.sqlite");
    export(&path, &records(), 0);
    let conn = crate::open(&path).unwrap();
    let pi = &query::PROCESS_INSTANCE;
    let r = search(&conn, pi, json!({"filter": {"state": {"$neq": "ACTIVE"}}, "sort": [{"field": "processInstanceKey", "order": "DESC"}]}));
    assert_eq!(keys(&r, "processInstanceKey"), ["200", "100"]);
    let r = search(&conn, pi, json!({"filter": {"processInstanceKey": {"$in": ["100", "300"]}}}));
    assert_eq!(keys(&r, "processInstanceKey"), ["100", "300"]);
    let r = search(&conn, pi, json!({"filter": {"processDefinitionId": {"$like": "ord*"}, "endDate": {"$exists": false}}}));
    assert_eq!(keys(&r, "processInstanceKey"), ["300"]);
    let r = search(&conn, pi, json!({"filter": {"startDate": {"$gt": "1970-01-01T00:00:02.000Z", "$lte": "1970-01-01T00:00:06.000Z"}}}));
    assert_eq!(keys(&r, "processInstanceKey"), ["200"]);
    // the Java client's shape: unset operators and filters as empty values
    let r = search(
        &conn,
        pi,
        json!({"sort": [], "filter": {"processDefinitionId": {"$eq": "order", "$in": [], "$notIn": []}, "tags": [], "$or": []}}),
    );
    assert_eq!(r["page"]["totalItems"], 3);
    let r = search(&conn, pi, json!({"filter": {"processInstanceKey": 200, "hasIncident": false}}));
    assert_eq!(keys(&r, "processInstanceKey"), ["200"]);
    // pages: from/limit, then cursors forwards and back
    let first = search(&conn, pi, json!({"page": {"limit": 2}}));
    assert_eq!(keys(&first, "processInstanceKey"), ["100", "200"]);
    assert_eq!(first["page"]["totalItems"], 3);
    let next = search(&conn, pi, json!({"page": {"limit": 2, "after": first["page"]["endCursor"]}}));
    assert_eq!(keys(&next, "processInstanceKey"), ["300"]);
    let back = search(&conn, pi, json!({"page": {"limit": 1, "before": next["page"]["startCursor"]}}));
    assert_eq!(keys(&back, "processInstanceKey"), ["200"]);
    let from = search(&conn, pi, json!({"page": {"from": 1, "limit": 1}}));
    assert_eq!(keys(&from, "processInstanceKey"), ["200"]);
    assert_eq!(query::get(&conn, pi, 300).unwrap()["state"], "ACTIVE");
    assert!(matches!(query::get(&conn, pi, 999), Err(crate::StoreError::NotFound(_))));
}

/// Multi-tenancy: a search over some tenants counts and pages their rows only, and a get by key
/// of another tenant's entity is `NotFound` (the records above are the default tenant's).
#[test]
fn searches_and_gets_within_tenants() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.sqlite");
    export(&path, &records(), 0);
    let conn = crate::open(&path).unwrap();
    let pi = &query::PROCESS_INSTANCE;
    let default = ["<default>".to_string()];
    let others = ["tenant-a".to_string(), "tenant-b".to_string()];
    let mine = query::search_in(&conn, pi, &json!({"page": {"limit": 2}}), Some(&default)).unwrap();
    assert_eq!((keys(&mine, "processInstanceKey"), mine["page"]["totalItems"].clone()), (vec!["100".into(), "200".into()], json!(3)));
    let next = query::search_in(&conn, pi, &json!({"page": {"limit": 2, "after": mine["page"]["endCursor"]}}), Some(&default)).unwrap();
    assert_eq!(keys(&next, "processInstanceKey"), ["300"]);
    let nobody: &[String] = &[];
    for tenants in [&others[..], nobody] {
        let none = query::search_in(&conn, pi, &json!({"filter": {"state": "ACTIVE"}}), Some(tenants)).unwrap();
        assert_eq!((none["items"].clone(), none["page"]["totalItems"].clone()), (json!([]), json!(0)), "{tenants:?}");
        let none = query::search_in(&conn, &query::VARIABLE, &Value::Null, Some(tenants)).unwrap();
        assert_eq!(none["items"], json!([]));
        assert!(matches!(query::get_in(&conn, pi, 300, Some(tenants)), Err(crate::StoreError::NotFound(_))));
    }
    assert_eq!(query::get_in(&conn, pi, 300, Some(&default)).unwrap()["tenantId"], "<default>");
    assert_eq!(query::get_in(&conn, &query::PROCESS_DEFINITION, 10, None).unwrap()["processDefinitionKey"], "10");
}

#[test]
fn malformed_requests_are_invalid() {
    let dir = tempfile::tempdir().unwrap();
    let conn = crate::open(&dir.path().join("store.sqlite")).unwrap();
    for bad in [
        json!([]),
        json!({"filter": {"nope": 1}}),
        json!({"filter": {"processInstanceKey": "abc"}}),
        json!({"filter": {"state": {"$gt": "A"}}}),
        json!({"filter": {"state": {"$foo": "A"}}}),
        json!({"filter": {"startDate": "yesterday"}}),
        json!({"sort": [{"field": "state", "order": "UP"}]}),
        json!({"page": {"limit": -1}}),
        json!({"page": {"after": "!!"}}),
        json!({"page": {"from": 0, "after": "eyJpIjoxfQ"}}),
        json!({"extra": 1}),
        json!({"filter": {"variables": {"name": "a", "value": "1"}}}),
        json!({"filter": {"variables": [{"name": "a"}]}}),
        json!({"filter": {"variables": [{"value": "1"}]}}),
        json!({"filter": {"variables": [{"name": "a", "value": "1", "scope": "x"}]}}),
        json!({"filter": {"elementInstanceState": {"$gt": "ACTIVE"}}}),
        json!({"filter": {"hasElementInstanceIncident": "yes"}}),
    ] {
        let r = query::search(&conn, &query::PROCESS_INSTANCE, &bad);
        assert!(matches!(r, Err(crate::StoreError::Invalid(_))), "{bad} gave {r:?}");
    }
}

#[test]
fn history_clean_up_deletes_finished_instances_only() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.sqlite");
    export(&path, &records(), 0);
    let conn = crate::open(&path).unwrap();
    // 100 ended at 5 s, 200 at 9 s; 300 is active
    assert_eq!(exporter::clean_up(&conn, 1, 6_000).unwrap(), 1);
    let r = search(&conn, &query::PROCESS_INSTANCE, Value::Null);
    assert_eq!(keys(&r, "processInstanceKey"), ["200", "300"]);
    let elements = search(&conn, &query::ELEMENT_INSTANCE, json!({"filter": {"processInstanceKey": "100"}}));
    assert_eq!(elements["page"]["totalItems"], 0);
    assert_eq!(exporter::clean_up(&conn, 1, i64::MAX).unwrap(), 1);
    assert_eq!(search(&conn, &query::VARIABLE, Value::Null)["page"]["totalItems"], 1, "the active instance keeps its variables");
}

#[test]
fn user_tasks_follow_their_events() {
    use waggle_protocol::value::UserTaskRecord;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.sqlite");
    let task = UserTaskRecord {
        user_task_key: 500,
        assignee: "demo".into(),
        candidate_groups: vec!["managers".into()],
        due_date: "2024-05-01T10:00+02:00".into(),
        form_key: -1,
        custom_headers: r#"{"k":"v"}"#.into(),
        variables: "{}".into(),
        bpmn_process_id: "order".into(),
        process_definition_key: 10,
        process_instance_key: 300,
        element_id: "review".into(),
        element_instance_key: 301,
        creation_timestamp: 7_000,
        ..Default::default()
    };
    let ut = |position: u64, intent: Intent, value: UserTaskRecord| {
        event(position, 500, 1_000 * position as i64, ValueType::UserTask, intent, RecordValue::UserTask(value))
    };
    let mut all = records();
    let next = all.last().unwrap().position + 1;
    all.push(ut(next, Intent::Creating, task.clone()));
    all.push(ut(next + 1, Intent::Created, task.clone()));
    all.push(ut(next + 2, Intent::Assigned, UserTaskRecord { assignee: String::new(), ..task.clone() }));
    let updated =
        UserTaskRecord { candidate_users: vec!["ann".into()], changed_attributes: vec!["candidateUsersList".into()], ..task.clone() };
    all.push(ut(next + 3, Intent::Updated, UserTaskRecord { assignee: String::new(), ..updated }));
    export(&path, &all, 0);
    let conn = crate::open(&path).unwrap();
    let r = search(&conn, &query::USER_TASK, json!({"filter": {"processInstanceKey": "300", "state": "CREATED"}}));
    assert_eq!(keys(&r, "userTaskKey"), ["500"]);
    let t = &r["items"][0];
    assert!(t.get("assignee").is_none(), "unassigned: {t}");
    assert_eq!((t["candidateGroups"].clone(), t["candidateUsers"].clone()), (json!(["managers"]), json!(["ann"])));
    assert_eq!((t["dueDate"].as_str(), t["elementId"].as_str()), (Some("2024-05-01T10:00+02:00"), Some("review")));
    assert_eq!((t["creationDate"].as_str(), t["customHeaders"].clone()), (Some("1970-01-01T00:00:07.000Z"), json!({"k": "v"})));
    all.push(ut(next + 4, Intent::Completed, task));
    export(&path, &all, 0);
    let done = query::get(&conn, &query::USER_TASK, 500).unwrap();
    assert_eq!(done["state"], "COMPLETED");
    assert!(done["completionDate"].is_string());
}

#[test]
fn an_emptied_batch_lets_go_of_a_bursts_room() {
    let dir = tempfile::tempdir().unwrap();
    let conn = crate::Connection::open(&crate::Location::Sqlite(dir.path().join("store.sqlite"))).unwrap();
    conn.tune_for_writing().unwrap();
    let conn = std::sync::Arc::new(std::sync::Mutex::new(conn));
    let mut e = exporter::StoreExporter::new(conn, "query-store".into(), None, crate::Changes::default());
    e.configure(&Context { exporter_id: "query-store".into(), partition_id: 1 }).unwrap();
    let mut c = Controller::new(0);
    e.open(&mut c).unwrap();
    let mut position = 0;
    let mut round = |e: &mut exporter::StoreExporter, instances: i64| {
        for _ in 0..instances {
            position += 1;
            let pi = 1_000 + position as i64;
            e.export(&element(position, pi, pi, "order", "PROCESS", Intent::ElementActivating), &mut c).unwrap();
        }
        e.flush(&mut c).unwrap();
    };
    round(&mut e, 5_000);
    let burst = e.batch_capacity();
    assert!(burst >= 5_000, "{burst}");
    round(&mut e, 4_000);
    assert_eq!(e.batch_capacity(), burst, "a round of about the same size keeps the room");
    round(&mut e, 3);
    assert!(e.batch_capacity() <= 1_024, "the burst's room is still held: {} rows", e.batch_capacity());
}
