//! Multi-tenancy at the gateway over a real broker: the tenant checks of Zeebe 8.5's gateway
//! (`MultiTenancyEnabledTest`, `MultiTenancyDisabledTest`; `MultiTenancyOverIdentityIT` for
//! an authenticated caller's tenants) with a `Caller` in a request's extensions, as the
//! authentication layer puts it there, and without one (authentication off: every tenant).

use futures::StreamExt;
use tonic::{Code, Request};
use waggle_broker::{Broker, BrokerConfig};
use waggle_gateway::{Caller, GatewayConfig, GatewayService};
use waggle_protocol::gateway as pb;
use waggle_protocol::gateway::gateway_server::Gateway;

const ONE_TASK: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<bpmn:definitions xmlns:bpmn="http://www.omg.org/spec/BPMN/20100524/MODEL" xmlns:zeebe="http://camunda.org/schema/zeebe/1.0" id="d" targetNamespace="t">
  <bpmn:process id="tenanted" isExecutable="true">
    <bpmn:startEvent id="start" />
    <bpmn:sequenceFlow id="f1" sourceRef="start" targetRef="task" />
    <bpmn:serviceTask id="task"><bpmn:extensionElements><zeebe:taskDefinition type="t" /></bpmn:extensionElements></bpmn:serviceTask>
    <bpmn:sequenceFlow id="f2" sourceRef="task" targetRef="end" />
    <bpmn:endEvent id="end" />
  </bpmn:process>
</bpmn:definitions>"#;

fn gateway(dir: &std::path::Path, multi_tenancy: bool) -> GatewayService {
    let registry = prometheus::Registry::new();
    let broker = Broker::start(BrokerConfig { data_dir: dir.to_path_buf(), ..Default::default() }, &registry).unwrap();
    GatewayService::new(broker, GatewayConfig { multi_tenancy, ..Default::default() }, &registry)
}

fn as_caller<T>(message: T, tenants: &[&str]) -> Request<T> {
    let mut request = Request::new(message);
    request.extensions_mut().insert(Caller { name: "worker-a".into(), tenants: tenants.iter().map(|t| t.to_string()).collect() });
    request
}

fn deploy(tenant: &str) -> pb::DeployResourceRequest {
    pb::DeployResourceRequest {
        resources: vec![pb::Resource { name: "tenanted.bpmn".into(), content: ONE_TASK.as_bytes().to_vec() }],
        tenant_id: tenant.into(),
    }
}

fn create(tenant: &str) -> pb::CreateProcessInstanceRequest {
    pb::CreateProcessInstanceRequest { bpmn_process_id: "tenanted".into(), version: -1, tenant_id: tenant.into(), ..Default::default() }
}

fn activation(tenants: &[&str]) -> pb::ActivateJobsRequest {
    pb::ActivateJobsRequest {
        r#type: "t".into(),
        worker: "w".into(),
        timeout: 60_000,
        max_jobs_to_activate: 10,
        request_timeout: -1,
        tenant_ids: tenants.iter().map(|t| t.to_string()).collect(),
        ..Default::default()
    }
}

async fn jobs(gateway: &GatewayService, request: Request<pb::ActivateJobsRequest>) -> Result<Vec<pb::ActivatedJob>, tonic::Status> {
    let mut stream = gateway.activate_jobs(request).await?.into_inner();
    let mut jobs = Vec::new();
    while let Some(response) = stream.next().await {
        jobs.extend(response?.jobs);
    }
    Ok(jobs)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_acts_only_for_its_tenants() {
    let dir = tempfile::tempdir().unwrap();
    let gateway = gateway(dir.path(), true);

    let deployed = gateway.deploy_resource(as_caller(deploy("tenant-a"), &["tenant-a"])).await.unwrap().into_inner();
    assert_eq!(deployed.tenant_id, "tenant-a");
    let denied = gateway.deploy_resource(as_caller(deploy("tenant-b"), &["tenant-a"])).await.unwrap_err();
    assert_eq!(denied.code(), Code::PermissionDenied);
    assert_eq!(
        denied.message(),
        "Expected to handle gRPC request DeployResource with tenant identifier 'tenant-b', but tenant is not authorized to perform this request"
    );
    // no caller: authentication is off, any tenant may be used
    gateway.deploy_resource(Request::new(deploy("tenant-b"))).await.unwrap();

    let a = gateway.create_process_instance(as_caller(create("tenant-a"), &["tenant-a"])).await.unwrap().into_inner();
    assert_eq!(a.tenant_id, "tenant-a");
    let b = gateway.create_process_instance(Request::new(create("tenant-b"))).await.unwrap().into_inner();
    assert_ne!(a.process_definition_key, b.process_definition_key, "one process per tenant");
    let denied = gateway.create_process_instance(as_caller(create("tenant-b"), &["tenant-a"])).await.unwrap_err();
    assert_eq!(denied.code(), Code::PermissionDenied);

    let missing = gateway.create_process_instance(as_caller(create(""), &["tenant-a"])).await.unwrap_err();
    assert_eq!(missing.code(), Code::InvalidArgument);
    assert_eq!(
        missing.message(),
        "Expected to handle gRPC request CreateProcessInstance with tenant identifier '', but no tenant identifier was provided."
    );

    // a worker asking for a tenant it is not authorised for gets nothing but the refusal
    let denied = jobs(&gateway, as_caller(activation(&["tenant-a", "tenant-b"]), &["tenant-a"])).await.unwrap_err();
    assert_eq!(denied.code(), Code::PermissionDenied);
    assert_eq!(
        denied.message(),
        "Expected to handle gRPC request ActivateJobs with tenant identifier 'tenant-b', but tenant is not authorized to perform this request"
    );
    let none = jobs(&gateway, as_caller(activation(&[]), &["tenant-a"])).await.unwrap_err();
    assert_eq!(none.code(), Code::InvalidArgument);
    let taken = jobs(&gateway, as_caller(activation(&["tenant-a"]), &["tenant-a"])).await.unwrap();
    let taken: Vec<(&str, i64)> = taken.iter().map(|j| (j.tenant_id.as_str(), j.process_instance_key)).collect();
    assert_eq!(taken, vec![("tenant-a", a.process_instance_key)]);
    let taken = jobs(&gateway, Request::new(activation(&["tenant-a", "tenant-b"]))).await.unwrap();
    assert_eq!(taken.iter().map(|j| j.tenant_id.as_str()).collect::<Vec<_>>(), vec!["tenant-b"]);

    let message =
        pb::PublishMessageRequest { name: "m".into(), correlation_key: "k".into(), tenant_id: "tenant-b".into(), ..Default::default() };
    assert_eq!(gateway.publish_message(as_caller(message.clone(), &["tenant-a"])).await.unwrap_err().code(), Code::PermissionDenied);
    assert_eq!(gateway.publish_message(as_caller(message, &["tenant-b"])).await.unwrap().into_inner().tenant_id, "tenant-b");
    let signal = pb::BroadcastSignalRequest { signal_name: "s".into(), tenant_id: "tenant-b".into(), ..Default::default() };
    assert_eq!(gateway.broadcast_signal(as_caller(signal, &["tenant-a"])).await.unwrap_err().code(), Code::PermissionDenied);
    let evaluation = pb::EvaluateDecisionRequest { decision_id: "d".into(), tenant_id: "tenant-b".into(), ..Default::default() };
    assert_eq!(gateway.evaluate_decision(as_caller(evaluation, &["tenant-a"])).await.unwrap_err().code(), Code::PermissionDenied);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn off_a_tenant_other_than_the_default_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let gateway = gateway(dir.path(), false);
    let refused = gateway.deploy_resource(Request::new(deploy("tenant-a"))).await.unwrap_err();
    assert_eq!(refused.code(), Code::InvalidArgument);
    assert_eq!(
        refused.message(),
        "Expected to handle gRPC request DeployResource with tenant identifier 'tenant-a', but multi-tenancy is disabled"
    );
    let deployed = gateway.deploy_resource(Request::new(deploy(""))).await.unwrap().into_inner();
    assert_eq!(deployed.tenant_id, "<default>");
    // a caller's tenants play no part with multi-tenancy off
    gateway.deploy_resource(as_caller(deploy("<default>"), &[])).await.unwrap();
    let created = gateway.create_process_instance(Request::new(create(""))).await.unwrap().into_inner();
    assert_eq!(created.tenant_id, "<default>");
    let refused = jobs(&gateway, Request::new(activation(&["tenant-a"]))).await.unwrap_err();
    assert_eq!(
        refused.message(),
        "Expected to handle gRPC request ActivateJobs with tenant identifier 'tenant-a', but multi-tenancy is disabled"
    );
    assert_eq!(jobs(&gateway, Request::new(activation(&[]))).await.unwrap().len(), 1);
    let signal = pb::BroadcastSignalRequest { signal_name: "s".into(), tenant_id: "x".into(), ..Default::default() };
    assert_eq!(gateway.broadcast_signal(Request::new(signal)).await.unwrap_err().code(), Code::InvalidArgument);
}
