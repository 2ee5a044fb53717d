//! The query store in PostgreSQL on the real binary (issue 27, `--query-store postgres://…`):
//! a throw-away server from Debian's package ([`waggle_store::test_cluster`]; without it the
//! test fails, naming `scripts/install-system-deps.sh`), a node with two partitions exporting
//! into it; instances created, completed and failed into an incident over gRPC are found
//! through `/v2/.../search` with filters (`$or` included), sorting, paging and gets. Then
//! `kill -9` and a restart: each instance is still in the database once; PostgreSQL stopped and
//! started again under the node: the store catches up; and SIGTERM: a clean exit. The start-up
//! log names the store's schema version.

mod common;

use std::collections::HashSet;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::{deploy_one_task, Node};
use serde_json::{json, Value};
use waggle_protocol::gateway::*;
use waggle_store::test_cluster::TestCluster;
use waggle_store::{Connection, Location};

/// An HTTP/1.0 request with a JSON body: (status, body).
fn http(port: u16, method: &str, path: &str, body: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect to the REST port");
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        stream,
        "{method} {path} HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let status = response.split_whitespace().nth(1).and_then(|s| s.parse().ok()).expect("status");
    (status, response.split_once("\r\n\r\n").map_or("", |(_, b)| b).to_owned())
}

fn search(node: &Node, entity: &str, request: Value) -> Value {
    let (status, body) = http(node.rest_port, "POST", &format!("/v2/{entity}/search"), &request.to_string());
    assert_eq!(status, 200, "{entity} search {request}: {body}");
    serde_json::from_str(&body).expect("search json")
}

fn keys(result: &Value, field: &str) -> Vec<i64> {
    result["items"].as_array().expect("items").iter().map(|i| i[field].as_str().expect("string key").parse().unwrap()).collect()
}

/// Repeats a search until its `totalItems` is `expected` (export is asynchronous), within 30 s.
fn eventually(node: &Node, entity: &str, request: Value, expected: u64) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let r = search(node, entity, request.clone());
        if r["page"]["totalItems"] == expected {
            return r;
        }
        assert!(Instant::now() < deadline, "{entity} {request}: {expected} expected, got {r}\nnode log:\n{}", node.log());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Rows of `table` in the database itself (on a thread of its own: the synchronous client must
/// not run on the test's async threads).
fn rows(url: &str, table: &str) -> i64 {
    let (url, sql) = (url.to_owned(), format!("SELECT COUNT(*) FROM {table}"));
    std::thread::spawn(move || {
        let conn = Connection::open(&Location::Postgres(url)).expect("connect");
        let row = conn.query_row(&sql, &[]).expect("count").expect("a row");
        row[0].as_i64().expect("a count")
    })
    .join()
    .expect("count thread")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rest_v2_searches_a_postgresql_query_store() {
    let cluster = TestCluster::start();
    let url = cluster.database("waggle");
    let mut node = Node::start(&["--partitions", "2", "--query-store", &url]);
    assert!(!node.data_dir.join("query-store.sqlite").exists(), "no embedded store beside PostgreSQL");
    // the store's schema version is in the start-up log (waggle_store::version)
    let version = format!("schema_version={}", waggle_store::version::SCHEMA_VERSION);
    assert!(node.log().contains("query store opened") && node.log().contains(&version), "{}", node.log());
    let mut c = common::grpc_client(&node).await;
    deploy_one_task(&mut c).await;
    let mut created = Vec::new();
    for i in 0..8 {
        let request = CreateProcessInstanceRequest { variables: format!(r#"{{"i": {i}}}"#), ..common::one_task_creation() };
        created.push(c.create_process_instance(request).await.expect("create").into_inner().process_instance_key);
    }
    created.sort();
    let mut completed = HashSet::new();
    let mut failed = None;
    while completed.len() < 3 || failed.is_none() {
        let mut stream = c.activate_jobs(common::one_task_activation(4)).await.expect("activate").into_inner();
        while let Some(batch) = stream.message().await.expect("jobs") {
            for job in batch.jobs {
                if completed.len() < 3 {
                    c.complete_job(CompleteJobRequest { job_key: job.key, variables: "{}".into() }).await.expect("complete");
                    completed.insert(job.process_instance_key);
                } else if failed.is_none() {
                    let request = FailJobRequest { job_key: job.key, retries: 0, error_message: "boom".into(), ..Default::default() };
                    c.fail_job(request).await.expect("fail");
                    failed = Some(job.process_instance_key);
                }
            }
        }
    }
    let failed = failed.unwrap();
    let done = eventually(&node, "process-instances", json!({"filter": {"state": "COMPLETED"}}), 3);
    assert_eq!(keys(&done, "processInstanceKey").into_iter().collect::<HashSet<_>>(), completed);
    eventually(&node, "incidents", json!({"filter": {"state": "ACTIVE"}}), 1);
    eventually(&node, "process-instances", json!({}), 8);

    // filters, $or, sorting, paging, gets, over REST
    let all = search(&node, "process-instances", json!({}));
    assert_eq!(keys(&all, "processInstanceKey"), created);
    let either = search(&node, "process-instances", json!({"filter": {"$or": [{"state": "COMPLETED"}, {"hasIncident": true}]}}));
    let mut expected: Vec<i64> = completed.iter().copied().chain([failed]).collect();
    expected.sort();
    assert_eq!(keys(&either, "processInstanceKey"), expected);
    let active_or = search(
        &node,
        "process-instances",
        json!({"filter": {"state": "ACTIVE", "$or": [{"hasIncident": true}, {"processInstanceKey": {"$in": [created[7].to_string()]}}]}}),
    );
    let mut expected = vec![failed];
    if !completed.contains(&created[7]) && created[7] != failed {
        expected.push(created[7]);
    }
    expected.sort();
    assert_eq!(keys(&active_or, "processInstanceKey"), expected);
    let desc = search(&node, "process-instances", json!({"sort": [{"field": "processInstanceKey", "order": "DESC"}]}));
    assert_eq!(keys(&desc, "processInstanceKey"), created.iter().rev().copied().collect::<Vec<_>>());
    let mut paged = Vec::new();
    let mut r = search(&node, "process-instances", json!({"page": {"limit": 3}}));
    while !r["items"].as_array().unwrap().is_empty() {
        assert_eq!(r["page"]["totalItems"], 8);
        paged.extend(keys(&r, "processInstanceKey"));
        r = search(&node, "process-instances", json!({"page": {"limit": 3, "after": r["page"]["endCursor"]}}));
    }
    assert_eq!(paged, created, "paging with after cursors walks every instance once");
    let vars = search(&node, "variables", json!({"filter": {"name": "i"}, "sort": [{"field": "value", "order": "DESC"}]}));
    assert_eq!(vars["page"]["totalItems"], 8);
    assert_eq!(vars["items"][0]["value"], "7");
    let incident = &search(&node, "incidents", json!({"filter": {"state": "ACTIVE"}}))["items"][0];
    assert_eq!((incident["errorType"].as_str(), incident["errorMessage"].as_str()), (Some("JOB_NO_RETRIES"), Some("boom")));
    assert_eq!(incident["processInstanceKey"], failed.to_string());
    let jobs = search(&node, "jobs", json!({"filter": {"state": {"$in": ["COMPLETED", "FAILED"]}, "type": {"$like": "benchmark-*"}}}));
    assert_eq!(jobs["page"]["totalItems"], 4, "{jobs}");
    let (status, body) = http(node.rest_port, "GET", &format!("/v2/process-instances/{}", created[0]), "");
    assert_eq!(status, 200, "{body}");
    assert_eq!(serde_json::from_str::<Value>(&body).unwrap()["processDefinitionId"], "benchmark");
    let defs = search(&node, "process-definitions", json!({"filter": {"processDefinitionId": "benchmark"}}));
    let def_key = defs["items"][0]["processDefinitionKey"].as_str().unwrap().to_owned();
    let (status, xml) = http(node.rest_port, "GET", &format!("/v2/process-definitions/{def_key}/xml"), "");
    assert_eq!(status, 200);
    assert!(xml.contains("benchmark-task"));
    assert_eq!(http(node.rest_port, "GET", "/v2/process-instances/1", "").0, 404);
    assert_eq!(http(node.rest_port, "POST", "/v2/process-instances/search", r#"{"filter": {"$or": {"state": "ACTIVE"}}}"#).0, 400);

    // the rows are in PostgreSQL, with both partitions' positions
    assert_eq!(rows(&url, "process_instance"), 8);
    assert_eq!(rows(&url, "exporter_position"), 2);

    // kill -9 and a restart: the exporters resume from the stored positions, nothing twice
    node.kill9();
    node.restart();
    for _ in 0..4 {
        c = common::grpc_client(&node).await;
        let _ = c.create_process_instance(common::one_task_creation()).await.expect("create after restart");
    }
    eventually(&node, "process-instances", json!({}), 12);
    eventually(&node, "element-instances", json!({"filter": {"type": "PROCESS"}}), 12);
    assert_eq!(rows(&url, "process_instance"), 12);
    assert_eq!(rows(&url, "variable"), 8, "each variable once");

    // PostgreSQL stopped under the node: the engine goes on, searches fail (500), the exporters
    // retry; once it is back, the readers and the exporters connect again and catch up
    cluster.stop();
    for _ in 0..2 {
        let _ = c.create_process_instance(common::one_task_creation()).await.expect("create while PostgreSQL is down");
    }
    let (status, body) = http(node.rest_port, "POST", "/v2/process-instances/search", "{}");
    assert_eq!(status, 500, "{body}");
    assert!(body.contains("PostgreSQL"), "{body}");
    tokio::time::sleep(Duration::from_secs(1)).await;
    cluster.resume();
    eventually(&node, "process-instances", json!({}), 14);
    assert_eq!(rows(&url, "process_instance"), 14);

    // SIGTERM: the node closes its PostgreSQL connections and exits cleanly
    let status = node.terminate();
    assert!(status.success(), "exit {status}; log:\n{}", node.log());
}

/// A PostgreSQL server that cannot be reached: the node refuses to start, saying why.
#[test]
fn an_unreachable_postgresql_stops_the_start() {
    let port = common::free_port();
    let mut node = Node::start(&[]);
    let output = node.run_instead(&["--query-store", &format!("postgres://waggle@127.0.0.1:{port}/none")]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "started without its store: {stderr}");
    assert!(stderr.contains("query store") && stderr.contains(&format!("127.0.0.1:{port}")), "{stderr}");
}
