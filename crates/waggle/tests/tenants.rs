//! Multi-tenancy against the real binary (docs/security.md, "Multi-tenancy"): the Java client
//! 8.5.8 with its own tenant settings (`tests/clients/TenantDriver.java`) with multi-tenancy on
//! and off, raw gRPC requests for message correlation within a tenant, the REST API's tenant
//! ids, and a data folder written with multi-tenancy off opened with it on.

mod common;

use std::process::Command;
use std::time::Duration;

use common::{client_models, grpc_client, http_json, peers, repo_root, run_with_timeout, Node};
use waggle_protocol::gateway as pb;

fn java_driver(mode: &str, args: &[&str]) {
    let lib = peers().join("java-client/lib");
    assert!(lib.exists(), "{} missing: run scripts/install-clients.sh", lib.display());
    let node = Node::start(args);
    let mut command = Command::new("java");
    command
        .arg("-cp")
        .arg(format!("{}/*", lib.display()))
        .arg(repo_root().join("tests/clients/TenantDriver.java"))
        .arg("--address")
        .arg(node.address())
        .arg("--models")
        .arg(client_models())
        .arg("--mode")
        .arg(mode);
    let output = run_with_timeout(&mut command, Duration::from_secs(180));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let expected: &[&str] = if mode == "on" {
        &["deploy-per-tenant", "create-per-tenant", "other-tenants-invisible", "jobs-by-tenant", "message-and-signal", "invalid-tenant"]
    } else {
        &["refused", "default"]
    };
    let done: Vec<&str> = stdout.lines().filter_map(|l| l.strip_prefix("OK ")).collect();
    assert!(
        output.status.success() && done == expected,
        "TenantDriver --mode {mode} exited {}; steps done {done:?}\nstdout:\n{stdout}\nstderr:\n{}\nwaggle log:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr),
        node.log()
    );
}

#[test]
fn java_client_with_multi_tenancy_on() {
    java_driver("on", &["--multi-tenancy", "true"]);
}

#[test]
fn java_client_with_multi_tenancy_off() {
    java_driver("off", &[]);
}

const WAITING: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<bpmn:definitions xmlns:bpmn="http://www.omg.org/spec/BPMN/20100524/MODEL" xmlns:zeebe="http://camunda.org/schema/zeebe/1.0" id="d" targetNamespace="t">
  <bpmn:message id="paid" name="paid"><bpmn:extensionElements><zeebe:subscription correlationKey="=orderId"/></bpmn:extensionElements></bpmn:message>
  <bpmn:process id="waiting" isExecutable="true">
    <bpmn:startEvent id="start"/>
    <bpmn:sequenceFlow id="f1" sourceRef="start" targetRef="wait"/>
    <bpmn:intermediateCatchEvent id="wait"><bpmn:messageEventDefinition messageRef="paid"/></bpmn:intermediateCatchEvent>
    <bpmn:sequenceFlow id="f2" sourceRef="wait" targetRef="end"/>
    <bpmn:endEvent id="end"/>
  </bpmn:process>
</bpmn:definitions>"#;

fn deploy(tenant: &str) -> pb::DeployResourceRequest {
    pb::DeployResourceRequest {
        resources: vec![pb::Resource { name: "waiting.bpmn".into(), content: WAITING.as_bytes().to_vec() }],
        tenant_id: tenant.into(),
    }
}

fn create(tenant: &str) -> pb::CreateProcessInstanceWithResultRequest {
    pb::CreateProcessInstanceWithResultRequest {
        request: Some(pb::CreateProcessInstanceRequest {
            bpmn_process_id: "waiting".into(),
            version: -1,
            variables: r#"{"orderId":"o-1"}"#.into(),
            tenant_id: tenant.into(),
            ..Default::default()
        }),
        request_timeout: 20_000,
        fetch_variables: vec![],
    }
}

fn publish(tenant: &str) -> pb::PublishMessageRequest {
    pb::PublishMessageRequest {
        name: "paid".into(),
        correlation_key: "o-1".into(),
        time_to_live: 0,
        tenant_id: tenant.into(),
        ..Default::default()
    }
}

/// Two instances in two tenants wait for the same message name and correlation key: a message
/// of tenant-b completes only tenant-b's (its creation with result answers), tenant-a's still
/// waits until tenant-a's message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_completes_only_its_tenants_instance() {
    let node = Node::start(&["--multi-tenancy", "true", "--partitions", "2"]);
    let mut client = grpc_client(&node).await;
    client.deploy_resource(deploy("tenant-a")).await.unwrap();
    client.deploy_resource(deploy("tenant-b")).await.unwrap();
    let (mut ca, mut cb) = (client.clone(), client.clone());
    let a = tokio::spawn(async move { ca.create_process_instance_with_result(create("tenant-a")).await });
    let b = tokio::spawn(async move { cb.create_process_instance_with_result(create("tenant-b")).await });
    tokio::time::sleep(Duration::from_millis(500)).await; // both wait at the catch event
    client.publish_message(publish("tenant-b")).await.unwrap();
    let b = tokio::time::timeout(Duration::from_secs(10), b).await.expect("tenant-b's instance completes").unwrap().unwrap();
    assert_eq!(b.into_inner().tenant_id, "tenant-b");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!a.is_finished(), "tenant-a's instance still waits: another tenant's message is not its");
    client.publish_message(publish("tenant-a")).await.unwrap();
    let a = tokio::time::timeout(Duration::from_secs(10), a).await.expect("tenant-a's instance completes").unwrap().unwrap();
    assert_eq!(a.into_inner().tenant_id, "tenant-a");
}

/// A data folder written with multi-tenancy off (the default tenant's keys, as every older
/// version wrote them) opens with it on: its processes are the default tenant's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_data_folder_of_the_default_tenant_opens_with_multi_tenancy_on() {
    let mut node = Node::start(&[]);
    let mut client = grpc_client(&node).await;
    client.deploy_resource(deploy("")).await.unwrap();
    drop(client);
    node.restart_with(&["--multi-tenancy", "true"]);
    let mut client = grpc_client(&node).await;
    let none = client.create_process_instance(pb::CreateProcessInstanceRequest {
        bpmn_process_id: "waiting".into(),
        version: -1,
        tenant_id: "tenant-a".into(),
        ..Default::default()
    });
    assert_eq!(none.await.unwrap_err().code(), tonic::Code::NotFound, "not another tenant's");
    let created = client
        .create_process_instance(pb::CreateProcessInstanceRequest {
            bpmn_process_id: "waiting".into(),
            version: -1,
            tenant_id: "<default>".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!((created.tenant_id.as_str(), created.version), ("<default>", 1));
    // a deployment in another tenant starts at version 1 there; the default tenant's goes on
    let other = client.deploy_resource(deploy("tenant-a")).await.unwrap().into_inner();
    let version = |d: &pb::DeployResourceResponse| match &d.deployments[0].metadata {
        Some(pb::deployment::Metadata::Process(p)) => (p.version, p.tenant_id.clone()),
        other => panic!("{other:?}"),
    };
    assert_eq!(version(&other), (1, "tenant-a".to_string()));
}

#[test]
fn rest_takes_tenant_ids_with_multi_tenancy_on() {
    let node = Node::start(&["--multi-tenancy", "true"]);
    let (status, body) = http_json(node.rest_port, "POST", "/v2/messages/publication", r#"{"name":"m","tenantId":"tenant-a"}"#).unwrap();
    assert_eq!(status, 200, "{body}");
    let body: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["tenantId"], "tenant-a");
    let (status, body) = http_json(node.rest_port, "POST", "/v2/signals/broadcast", r#"{"signalName":"s","tenantId":"a b"}"#).unwrap();
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("tenant identifier contains illegal characters"), "{body}");
    let (status, body) = http_json(node.rest_port, "POST", "/v2/messages/publication", r#"{"name":"m"}"#).unwrap();
    assert_eq!(status, 400, "a tenant must be named: {body}");
}

/// The flags of a node with multi-tenancy on and two Basic users: `alice` of tenant-a, `bob`
/// of tenant-b.
const TWO_TENANTS: &[&str] = &[
    "--multi-tenancy",
    "true",
    "--security-authentication-method",
    "basic",
    "--security-initialization-users",
    "alice:pa,bob:pb",
    "--security-initialization-user-tenants",
    "alice:tenant-a,bob:tenant-b",
];

/// A gRPC request with `user`'s Basic credentials.
fn as_user<T>(user: &str, message: T) -> tonic::Request<T> {
    use base64::Engine as _;
    let password = if user == "alice" { "pa" } else { "pb" };
    let credentials = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    let mut request = tonic::Request::new(message);
    request.metadata_mut().insert("authorization", format!("Basic {credentials}").parse().expect("header value"));
    request
}

/// A REST call with `user`'s Basic credentials (curl): (status, body).
fn rest_as(node: &Node, user: &str, method: &str, path: &str, body: &str) -> (u16, String) {
    let password = if user == "alice" { "pa" } else { "pb" };
    let mut command = Command::new("curl");
    command.args(["-s", "--max-time", "10", "-o", "-", "-w", "\n%{http_code}", "-X", method, "-u", &format!("{user}:{password}")]);
    command.args(["-H", "Content-Type: application/json", "--data-binary", body]);
    let output = run_with_timeout(command.arg(format!("http://127.0.0.1:{}{path}", node.rest_port)), Duration::from_secs(20));
    let text = String::from_utf8_lossy(&output.stdout).to_string();
    let (body, status) = text.rsplit_once('\n').unwrap_or(("", &text));
    (status.trim().parse().unwrap_or(0), body.to_string())
}

/// `user`'s REST search of `entity` until it has `count` items (the store exports
/// asynchronously); the items.
fn search_until(node: &Node, user: &str, entity: &str, filter: &str, count: usize) -> Vec<serde_json::Value> {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let (status, body) = rest_as(node, user, "POST", &format!("/v2/{entity}/search"), &format!(r#"{{"filter":{filter}}}"#));
        assert_eq!(status, 200, "{user}'s {entity} search: {body}");
        let items = serde_json::from_str::<serde_json::Value>(&body).expect("search JSON")["items"].as_array().cloned().unwrap_or_default();
        if items.len() == count || std::time::Instant::now() > deadline {
            assert_eq!(items.len(), count, "{user}'s {entity} search {filter}: {body}");
            return items;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn assert_not_found<T: std::fmt::Debug>(what: &str, answer: Result<T, tonic::Status>, says: &str) {
    let status = answer.expect_err(what);
    assert_eq!(status.code(), tonic::Code::NotFound, "{what}: {status:?}");
    assert!(status.message().contains(says), "{what}: {:?} does not say {says:?}", status.message());
}

/// Commands by key are limited to the caller's tenants (issue 29; Zeebe 8.5's engine rejects a
/// command on an entity of a tenant the command's authorized tenants lack as if it did not
/// exist, e.g. `MultiTenantJobOperationsTest` in camunda/camunda's engine tests): bob, of
/// tenant-b, gets NOT_FOUND with Zeebe's usual reason for every command on alice's (tenant-a)
/// job, instance, incident, user task and process over gRPC, and 404 over REST; his searches
/// never show tenant-a's rows, and a get by key of one is 404. Alice's own commands work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_of_tenant_b_cannot_touch_or_see_tenant_as_entities() {
    let node = Node::start(TWO_TENANTS);
    let mut client = grpc_client(&node).await;
    let read = |name: &str| std::fs::read(client_models().join(name)).expect("model");
    let deploy = pb::DeployResourceRequest {
        resources: vec![
            pb::Resource { name: "one_task.bpmn".into(), content: read("one_task.bpmn") },
            pb::Resource { name: "review.bpmn".into(), content: read("review.bpmn") },
        ],
        tenant_id: "tenant-a".into(),
    };
    let deployed = client.deploy_resource(as_user("alice", deploy)).await.expect("alice deploys to tenant-a").into_inner();
    let definition = deployed
        .deployments
        .iter()
        .find_map(|d| match &d.metadata {
            Some(pb::deployment::Metadata::Process(p)) if p.bpmn_process_id == "benchmark" => Some(p.process_definition_key),
            _ => None,
        })
        .expect("benchmark deployed");
    let create = |id: &str| pb::CreateProcessInstanceRequest {
        bpmn_process_id: id.into(),
        version: -1,
        tenant_id: "tenant-a".into(),
        ..Default::default()
    };
    let instance = client.create_process_instance(as_user("alice", create("benchmark"))).await.unwrap().into_inner().process_instance_key;
    let review = client.create_process_instance(as_user("alice", create("review"))).await.unwrap().into_inner().process_instance_key;
    let activate = pb::ActivateJobsRequest {
        r#type: "benchmark-task".into(),
        worker: "alice".into(),
        timeout: 60_000,
        max_jobs_to_activate: 1,
        request_timeout: 5_000,
        tenant_ids: vec!["tenant-a".into()],
        ..Default::default()
    };
    let mut stream = client.activate_jobs(as_user("alice", activate)).await.expect("alice activates").into_inner();
    let job = stream.message().await.unwrap().expect("a batch").jobs[0].key;

    // bob's gRPC commands on alice's entities: NOT_FOUND, as for keys that do not exist
    let no_job = format!("job with key '{job}', but no such job was found");
    let r = client.complete_job(as_user("bob", pb::CompleteJobRequest { job_key: job, variables: String::new() })).await;
    assert_not_found("CompleteJob", r, &format!("Expected to complete {no_job}"));
    let fail = pb::FailJobRequest { job_key: job, retries: 0, error_message: "bob".into(), ..Default::default() };
    assert_not_found("FailJob", client.fail_job(as_user("bob", fail)).await, &format!("Expected to fail {no_job}"));
    let error = pb::ThrowErrorRequest { job_key: job, error_code: "e".into(), ..Default::default() };
    assert_not_found("ThrowError", client.throw_error(as_user("bob", error)).await, &format!("Expected to throw an error for {no_job}"));
    let retries = pb::UpdateJobRetriesRequest { job_key: job, retries: 5 };
    let r = client.update_job_retries(as_user("bob", retries)).await;
    assert_not_found("UpdateJobRetries", r, &format!("Expected to update retries for {no_job}"));
    let timeout = pb::UpdateJobTimeoutRequest { job_key: job, timeout: 1_000 };
    let r = client.update_job_timeout(as_user("bob", timeout)).await;
    assert_not_found("UpdateJobTimeout", r, &format!("Expected to update the timeout of {no_job}"));
    let cancel = pb::CancelProcessInstanceRequest { process_instance_key: instance };
    let r = client.cancel_process_instance(as_user("bob", cancel)).await;
    assert_not_found("CancelProcessInstance", r, &format!("process instance with key '{instance}', but no such process was found"));
    let set = pb::SetVariablesRequest { element_instance_key: instance, variables: r#"{"x":1}"#.into(), ..Default::default() };
    let r = client.set_variables(as_user("bob", set)).await;
    assert_not_found("SetVariables", r, &format!("element with key '{instance}', but no such element was found"));
    let modify = pb::ModifyProcessInstanceRequest {
        process_instance_key: instance,
        activate_instructions: vec![pb::modify_process_instance_request::ActivateInstruction {
            element_id: "task".into(),
            ..Default::default()
        }],
        ..Default::default()
    };
    let r = client.modify_process_instance(as_user("bob", modify)).await;
    assert_not_found("ModifyProcessInstance", r, &format!("no process instance found with key '{instance}'"));
    let migrate = pb::MigrateProcessInstanceRequest {
        process_instance_key: instance,
        migration_plan: Some(pb::migrate_process_instance_request::MigrationPlan {
            target_process_definition_key: definition,
            mapping_instructions: vec![],
        }),
    };
    let r = client.migrate_process_instance(as_user("bob", migrate)).await;
    assert_not_found("MigrateProcessInstance", r, &format!("no process instance found with key '{instance}'"));
    let delete = pb::DeleteResourceRequest { resource_key: definition };
    let r = client.delete_resource(as_user("bob", delete)).await;
    assert_not_found("DeleteResource", r, &format!("no resource found with key `{definition}`"));

    // an incident of alice's: bob cannot resolve it
    let fail = pb::FailJobRequest { job_key: job, retries: 0, error_message: "no retries".into(), ..Default::default() };
    client.fail_job(as_user("alice", fail)).await.expect("alice fails her job");
    let incidents = search_until(&node, "alice", "incidents", &format!(r#"{{"processInstanceKey":"{instance}"}}"#), 1);
    let incident: i64 = incidents[0]["incidentKey"].as_str().expect("incident key").parse().unwrap();
    let r = client.resolve_incident(as_user("bob", pb::ResolveIncidentRequest { incident_key: incident })).await;
    assert_not_found("ResolveIncident", r, &format!("incident with key '{incident}', but no such incident was found"));

    // REST: bob's commands are 404s, his searches see nothing of tenant-a, his gets are 404s
    let tasks = search_until(&node, "alice", "user-tasks", &format!(r#"{{"processInstanceKey":"{review}"}}"#), 1);
    let task = tasks[0]["userTaskKey"].as_str().expect("user task key").to_string();
    for (path, body) in [
        (format!("/v2/jobs/{job}/completion"), "{}".to_string()),
        (format!("/v2/process-instances/{instance}/cancellation"), "{}".to_string()),
        (format!("/v2/incidents/{incident}/resolution"), "{}".to_string()),
        (format!("/v2/user-tasks/{task}/completion"), "{}".to_string()),
        (format!("/v1/user-tasks/{task}/assignment"), r#"{"assignee":"bob"}"#.to_string()),
    ] {
        let (status, answer) = rest_as(&node, "bob", "POST", &path, &body);
        assert_eq!(status, 404, "bob's POST {path}: {answer}");
    }
    let (status, answer) = rest_as(&node, "bob", "PATCH", &format!("/v2/jobs/{job}"), r#"{"changeset":{"retries":3}}"#);
    assert_eq!(status, 404, "bob's job update: {answer}");
    for entity in ["process-instances", "process-definitions", "element-instances", "incidents", "jobs", "user-tasks", "variables"] {
        search_until(&node, "bob", entity, "{}", 0);
    }
    search_until(&node, "alice", "process-instances", "{}", 2);
    for path in
        [format!("/v2/process-instances/{instance}"), format!("/v2/process-definitions/{definition}"), format!("/v2/incidents/{incident}")]
    {
        let (status, answer) = rest_as(&node, "bob", "GET", &path, "");
        assert_eq!(status, 404, "bob's GET {path}: {answer}");
        let (status, answer) = rest_as(&node, "alice", "GET", &path, "");
        assert_eq!(status, 200, "alice's GET {path}: {answer}");
    }

    // alice's own commands go through
    let retries = pb::UpdateJobRetriesRequest { job_key: job, retries: 1 };
    client.update_job_retries(as_user("alice", retries)).await.expect("alice updates her job's retries");
    client.resolve_incident(as_user("alice", pb::ResolveIncidentRequest { incident_key: incident })).await.expect("alice resolves");
    let (status, answer) = rest_as(&node, "alice", "POST", &format!("/v2/user-tasks/{task}/completion"), "{}");
    assert_eq!(status, 204, "alice completes her user task: {answer}");
    let cancel = pb::CancelProcessInstanceRequest { process_instance_key: instance };
    client.cancel_process_instance(as_user("alice", cancel)).await.expect("alice cancels her instance");
}
