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
