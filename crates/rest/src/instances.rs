//! Commands on running instances and deployed resources of the 8.8 API, each through the gRPC
//! gateway's handler of the same command: incident resolution, setting variables on an element
//! instance, process instance modification and migration, resource deletion
//! (<https://docs.camunda.io/docs/8.8/apis-tools/orchestration-cluster-api-rest/specifications/resolve-incident/>,
//! `create-element-instance-variables`, `modify-process-instance`, `migrate-process-instance`,
//! `delete-resource`).

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{post, put};
use axum::Router;
use bytes::Bytes;
use serde::Deserialize;
use serde_json::{Map, Value};
use waggle_protocol::gateway as pb;
use waggle_protocol::gateway::gateway_server::Gateway as _;

use crate::input::{self, parse, path_key};
use crate::{Problem, RestState};

type S = State<Arc<RestState>>;
type Answer = Result<Response, Problem>;

/// The routes.
pub fn routes() -> Router<Arc<RestState>> {
    Router::new()
        .route("/v2/incidents/:key/resolution", post(resolve_incident))
        .route("/v2/element-instances/:key/variables", put(set_variables))
        .route("/v2/process-instances/:key/modification", post(modify))
        .route("/v2/process-instances/:key/migration", post(migrate))
        .route("/v2/resources/:key/deletion", post(delete_resource))
}

/// A body of only an optional `operationReference` (empty allowed).
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct OperationOnly {
    #[allow(dead_code)]
    operation_reference: Option<u64>,
}

/// `POST /v2/incidents/{incidentKey}/resolution`: 204.
async fn resolve_incident(
    State(state): S,
    Path(text): Path<String>,
    caller: Option<axum::Extension<waggle_gateway::Caller>>,
    bytes: Bytes,
) -> Answer {
    let incident_key = path_key(&text)?;
    parse::<OperationOnly>(&bytes, true)?;
    state.gateway.resolve_incident(input::grpc(caller, pb::ResolveIncidentRequest { incident_key })).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct SetVariables {
    variables: Map<String, Value>,
    local: Option<bool>,
    #[allow(dead_code)]
    operation_reference: Option<u64>,
}

/// `PUT /v2/element-instances/{elementInstanceKey}/variables`: 204; `variables` is required.
async fn set_variables(
    State(state): S,
    Path(text): Path<String>,
    caller: Option<axum::Extension<waggle_gateway::Caller>>,
    bytes: Bytes,
) -> Answer {
    let element_instance_key = path_key(&text)?;
    let req: SetVariables = parse(&bytes, false)?;
    let request = pb::SetVariablesRequest {
        element_instance_key,
        variables: input::variables(&Some(req.variables)),
        local: req.local.unwrap_or(false),
    };
    state.gateway.set_variables(input::grpc(caller, request)).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Modification {
    #[allow(dead_code)]
    operation_reference: Option<u64>,
    #[serde(default)]
    activate_instructions: Vec<Activate>,
    #[serde(default)]
    terminate_instructions: Vec<Terminate>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Activate {
    element_id: String,
    #[serde(default)]
    variable_instructions: Vec<VariableInstruction>,
    /// Absent or -1: the engine finds the flow scope.
    ancestor_element_instance_key: Option<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct VariableInstruction {
    variables: Map<String, Value>,
    scope_id: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Terminate {
    #[serde(deserialize_with = "input::key")]
    element_instance_key: i64,
}

/// An ancestor key: a key, or absent / "-1" / -1 for none (0 in the gRPC request).
fn ancestor(v: Option<Value>) -> Result<i64, Problem> {
    match v {
        None | Some(Value::Null) => Ok(0),
        Some(Value::String(s)) if s == "-1" => Ok(0),
        Some(Value::Number(n)) if n.as_i64() == Some(-1) => Ok(0),
        Some(v) => input::key(v).map_err(|e| Problem::bad_request(format!("ancestorElementInstanceKey: {e}"))),
    }
}

/// `POST /v2/process-instances/{processInstanceKey}/modification`: 204.
async fn modify(
    State(state): S,
    Path(text): Path<String>,
    caller: Option<axum::Extension<waggle_gateway::Caller>>,
    bytes: Bytes,
) -> Answer {
    let process_instance_key = path_key(&text)?;
    let req: Modification = parse(&bytes, false)?;
    let mut activate_instructions = Vec::new();
    for a in req.activate_instructions {
        activate_instructions.push(pb::modify_process_instance_request::ActivateInstruction {
            element_id: a.element_id,
            ancestor_element_instance_key: ancestor(a.ancestor_element_instance_key)?,
            variable_instructions: a
                .variable_instructions
                .into_iter()
                .map(|v| pb::modify_process_instance_request::VariableInstruction {
                    variables: input::variables(&Some(v.variables)),
                    scope_id: v.scope_id.unwrap_or_default(),
                })
                .collect(),
        });
    }
    let terminate_instructions = req
        .terminate_instructions
        .into_iter()
        .map(|t| pb::modify_process_instance_request::TerminateInstruction { element_instance_key: t.element_instance_key })
        .collect();
    let request = pb::ModifyProcessInstanceRequest { process_instance_key, activate_instructions, terminate_instructions };
    state.gateway.modify_process_instance(input::grpc(caller, request)).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Migration {
    #[serde(deserialize_with = "input::key")]
    target_process_definition_key: i64,
    mapping_instructions: Vec<Mapping>,
    #[allow(dead_code)]
    operation_reference: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Mapping {
    source_element_id: String,
    target_element_id: String,
}

/// `POST /v2/process-instances/{processInstanceKey}/migration`: 204.
async fn migrate(
    State(state): S,
    Path(text): Path<String>,
    caller: Option<axum::Extension<waggle_gateway::Caller>>,
    bytes: Bytes,
) -> Answer {
    let process_instance_key = path_key(&text)?;
    let req: Migration = parse(&bytes, false)?;
    let plan = pb::migrate_process_instance_request::MigrationPlan {
        target_process_definition_key: req.target_process_definition_key,
        mapping_instructions: req
            .mapping_instructions
            .into_iter()
            .map(|m| pb::migrate_process_instance_request::MappingInstruction {
                source_element_id: m.source_element_id,
                target_element_id: m.target_element_id,
            })
            .collect(),
    };
    let request = pb::MigrateProcessInstanceRequest { process_instance_key, migration_plan: Some(plan) };
    state.gateway.migrate_process_instance(input::grpc(caller, request)).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// `POST /v2/resources/{resourceKey}/deletion`: 200 with an empty body ("The resource is
/// deleted.") once the deletion is committed.
async fn delete_resource(
    State(state): S,
    Path(text): Path<String>,
    caller: Option<axum::Extension<waggle_gateway::Caller>>,
    bytes: Bytes,
) -> Answer {
    let resource_key = path_key(&text)?;
    parse::<OperationOnly>(&bytes, true)?;
    state.gateway.delete_resource(input::grpc(caller, pb::DeleteResourceRequest { resource_key })).await?;
    Ok(StatusCode::OK.into_response())
}
