//! `POST /v2/deployments`
//! (<https://docs.camunda.io/docs/8.8/apis-tools/orchestration-cluster-api-rest/specifications/create-deployment/>):
//! `multipart/form-data` with one or more `resources` file parts and an optional `tenantId`,
//! deployed through the gRPC gateway's DeployResource handler.

use std::sync::Arc;

use axum::extract::multipart::MultipartError;
use axum::extract::{DefaultBodyLimit, Multipart, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Extension, Json, Router};
use serde_json::{json, Value};
use waggle_gateway::Caller;
use waggle_protocol::gateway as pb;
use waggle_protocol::gateway::deployment::Metadata;
use waggle_protocol::gateway::gateway_server::Gateway as _;

use crate::input;
use crate::{Problem, RestState};

/// The largest multipart body taken: the gateway's default maximum message size (4 MB), where
/// axum's default would stop at 2 MB.
const MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

/// The deployment route.
pub fn routes() -> Router<Arc<RestState>> {
    Router::new().route("/v2/deployments", post(deploy).layer(DefaultBodyLimit::max(MAX_BODY_BYTES)))
}

/// A multipart error: 413 past the size limit, else 400.
fn malformed(e: MultipartError) -> Problem {
    match e.status() {
        StatusCode::PAYLOAD_TOO_LARGE => Problem::new(StatusCode::PAYLOAD_TOO_LARGE, "PAYLOAD_TOO_LARGE", e.body_text()),
        _ => Problem::bad_request(format!("the multipart request is malformed: {}", e.body_text())),
    }
}

/// Deploys the `resources` parts; answers `{deploymentKey, tenantId, deployments: [...]}`, each
/// deployment one of `processDefinition`, `decisionDefinition`, `decisionRequirements`, `form`.
/// A body that is not multipart, has no `resources` part or another field is a 400.
async fn deploy(
    State(state): State<Arc<RestState>>,
    caller: Option<Extension<Caller>>,
    multipart: Result<Multipart, axum::extract::multipart::MultipartRejection>,
) -> Result<Response, Problem> {
    let mut multipart = multipart.map_err(|e| Problem::bad_request(e.body_text()))?;
    let mut resources = Vec::new();
    let mut tenant = None;
    while let Some(field) = multipart.next_field().await.map_err(malformed)? {
        match field.name() {
            Some("resources") => {
                let name = field.file_name().unwrap_or_default().to_owned();
                let content = field.bytes().await.map_err(malformed)?;
                resources.push(pb::Resource { name, content: content.to_vec() });
            }
            Some("tenantId") => tenant = Some(field.text().await.map_err(malformed)?),
            other => return Err(Problem::bad_request(format!("unexpected part '{}'", other.unwrap_or_default()))),
        }
    }
    let tenant_id = input::tenant(state.gateway.multi_tenancy(), &tenant)?;
    if resources.is_empty() {
        return Err(Problem::bad_request("Expected to deploy at least one resource, but none given (the 'resources' part)"));
    }
    let request = pb::DeployResourceRequest { resources, tenant_id };
    let r = state.gateway.deploy_resource(input::grpc(caller, request)).await?.into_inner();
    let deployments: Vec<Value> = r.deployments.into_iter().filter_map(|d| d.metadata).map(deployment).collect();
    Ok(Json(json!({ "deploymentKey": r.key.to_string(), "tenantId": r.tenant_id, "deployments": deployments })).into_response())
}

/// One deployed resource as 8.8's `DeploymentMetadataResult`.
fn deployment(m: Metadata) -> Value {
    match m {
        Metadata::Process(p) => json!({ "processDefinition": {
            "processDefinitionId": p.bpmn_process_id,
            "processDefinitionVersion": p.version,
            "resourceName": p.resource_name,
            "tenantId": p.tenant_id,
            "processDefinitionKey": p.process_definition_key.to_string(),
        }}),
        Metadata::Decision(d) => json!({ "decisionDefinition": {
            "decisionDefinitionId": d.dmn_decision_id,
            "version": d.version,
            "name": d.dmn_decision_name,
            "tenantId": d.tenant_id,
            "decisionRequirementsId": d.dmn_decision_requirements_id,
            "decisionDefinitionKey": d.decision_key.to_string(),
            "decisionRequirementsKey": d.decision_requirements_key.to_string(),
        }}),
        Metadata::DecisionRequirements(d) => json!({ "decisionRequirements": {
            "decisionRequirementsId": d.dmn_decision_requirements_id,
            "version": d.version,
            "decisionRequirementsName": d.dmn_decision_requirements_name,
            "tenantId": d.tenant_id,
            "resourceName": d.resource_name,
            "decisionRequirementsKey": d.decision_requirements_key.to_string(),
        }}),
        Metadata::Form(f) => json!({ "form": {
            "formId": f.form_id,
            "version": f.version,
            "resourceName": f.resource_name,
            "tenantId": f.tenant_id,
            "formKey": f.form_key.to_string(),
        }}),
    }
}
