//! The `/v2` routes (and, in `user_tasks`, 8.5's `/v1/user-tasks`).

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use bytes::Bytes;
use serde_json::{json, Value};
use waggle_gateway::{PartitionHealth, PartitionRole};
use waggle_protocol::gateway as pb;
use waggle_protocol::gateway::gateway_server::Gateway as _;
use waggle_store::query::{self, Entity};

use crate::input;
use crate::{Problem, RestState};

pub(crate) type S = State<Arc<RestState>>;
pub(crate) type Answer = Result<Response, Problem>;

/// The API's routes (the caller serves them, on port 8080 by default).
pub fn router(state: Arc<RestState>) -> Router {
    let router = Router::new()
        .route("/v2/topology", get(topology))
        .route("/v2/process-instances", post(create_process_instance))
        .route("/v2/process-instances/search", post(|s: S, c: CallerOf, b: Bytes| search(s, c, &query::PROCESS_INSTANCE, b)))
        .route("/v2/process-instances/:key", get(|s: S, c: CallerOf, k: Path<String>| by_key(s, c, &query::PROCESS_INSTANCE, k)))
        .route("/v2/process-instances/:key/cancellation", post(cancel_process_instance))
        .route("/v2/process-instances/:key/sequence-flows", get(sequence_flows))
        .route("/v2/process-definitions/search", post(|s: S, c: CallerOf, b: Bytes| search(s, c, &query::PROCESS_DEFINITION, b)))
        .route("/v2/process-definitions/:key", get(|s: S, c: CallerOf, k: Path<String>| by_key(s, c, &query::PROCESS_DEFINITION, k)))
        .route("/v2/process-definitions/:key/xml", get(process_definition_xml))
        .route("/v2/element-instances/search", post(|s: S, c: CallerOf, b: Bytes| search(s, c, &query::ELEMENT_INSTANCE, b)))
        .route("/v2/element-instances/:key", get(|s: S, c: CallerOf, k: Path<String>| by_key(s, c, &query::ELEMENT_INSTANCE, k)))
        .route("/v2/variables/search", post(|s: S, c: CallerOf, b: Bytes| search(s, c, &query::VARIABLE, b)))
        .route("/v2/variables/:key", get(|s: S, c: CallerOf, k: Path<String>| by_key(s, c, &query::VARIABLE, k)))
        .route("/v2/incidents/search", post(|s: S, c: CallerOf, b: Bytes| search(s, c, &query::INCIDENT, b)))
        .route("/v2/incidents/:key", get(|s: S, c: CallerOf, k: Path<String>| by_key(s, c, &query::INCIDENT, k)))
        .route("/v2/jobs/search", post(|s: S, c: CallerOf, b: Bytes| search(s, c, &query::JOB, b)))
        .route("/v2/user-tasks/search", post(|s: S, c: CallerOf, b: Bytes| search(s, c, &query::USER_TASK, b)))
        .route("/v2/user-tasks/:key", get(|s: S, c: CallerOf, k: Path<String>| by_key(s, c, &query::USER_TASK, k)))
        .merge(crate::deployments::routes())
        .merge(crate::jobs::routes())
        .merge(crate::messages::routes())
        .merge(crate::decisions::routes())
        .merge(crate::statistics::routes())
        .merge(crate::instances::routes())
        .merge(crate::ui::routes());
    crate::user_tasks::routes(router).fallback(|| async { Problem::not_found("no such endpoint") }).with_state(state)
}

/// A request body as JSON (empty: `null`); malformed JSON is a 400.
pub(crate) fn body(bytes: &Bytes) -> Result<Value, Problem> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(Value::Null);
    }
    serde_json::from_slice(bytes).map_err(|e| Problem::bad_request(format!("the request body is not valid JSON: {e}")))
}

pub(crate) fn key(text: &str) -> Result<i64, Problem> {
    text.parse::<i64>().ok().filter(|k| *k > 0).ok_or_else(|| Problem::bad_request(format!("'{text}' is not a key")))
}

/// Runs a store read off the async threads (503 when the store is off).
pub(crate) async fn read<T: Send + 'static>(
    state: &RestState,
    f: impl FnOnce(&waggle_store::Connection) -> Result<T, waggle_store::StoreError> + Send + 'static,
) -> Result<T, Problem> {
    let Some(store) = state.store.clone() else {
        return Err(Problem::new(StatusCode::SERVICE_UNAVAILABLE, "UNAVAILABLE", "the query store is off on this node"));
    };
    tokio::task::spawn_blocking(move || store.with(f))
        .await
        .map_err(|e| Problem::new(StatusCode::INTERNAL_SERVER_ERROR, "INTERNAL", e.to_string()))?
        .map_err(Problem::from)
}

/// The request's authenticated caller, if any.
pub(crate) type CallerOf = Option<axum::Extension<waggle_gateway::Caller>>;

/// The tenants whose rows a read by `caller` may see: with multi-tenancy on, an authenticated
/// caller's own (as the gateway limits its commands); `None` (all) otherwise.
pub(crate) fn readable_tenants(state: &RestState, caller: CallerOf) -> Option<Vec<String>> {
    state.gateway.authorized_tenants(caller.as_ref().map(|axum::Extension(c)| c))
}

/// Whether `key` of `entity` is one `tenants` may see (always when `None`); a missing one is
/// not.
pub(crate) fn visible(
    c: &waggle_store::Connection,
    entity: &Entity,
    key: i64,
    tenants: Option<&[String]>,
) -> Result<bool, waggle_store::StoreError> {
    if tenants.is_none() {
        return Ok(true);
    }
    match query::get_in(c, entity, key, tenants) {
        Ok(_) => Ok(true),
        Err(waggle_store::StoreError::NotFound(_)) => Ok(false),
        Err(e) => Err(e),
    }
}

/// A search, over the rows of the tenants the caller may see.
pub(crate) async fn search(State(state): S, caller: CallerOf, entity: &'static Entity, bytes: Bytes) -> Answer {
    let request = body(&bytes)?;
    let tenants = readable_tenants(&state, caller);
    let result = read(&state, move |c| query::search_in(c, entity, &request, tenants.as_deref())).await?;
    Ok(Json(result).into_response())
}

/// A get by key: 404 for an entity of a tenant the caller may not see, as for an absent one.
pub(crate) async fn by_key(State(state): S, caller: CallerOf, entity: &'static Entity, Path(text): Path<String>) -> Answer {
    let k = key(&text)?;
    let tenants = readable_tenants(&state, caller);
    let result = read(&state, move |c| query::get_in(c, entity, k, tenants.as_deref())).await?;
    Ok(Json(result).into_response())
}

/// `GET /v2/process-instances/{processInstanceKey}/sequence-flows`: the flows the instance took
/// (`waggle_store::query::sequence_flows`); an unknown instance has none, as 8.8 answers.
/// Another tenant's instance has none either.
async fn sequence_flows(State(state): S, caller: CallerOf, Path(text): Path<String>) -> Answer {
    let k = key(&text)?;
    let tenants = readable_tenants(&state, caller);
    let result = read(&state, move |c| {
        // key 0 is no instance's
        let k = if visible(c, &query::PROCESS_INSTANCE, k, tenants.as_deref())? { k } else { 0 };
        query::sequence_flows(c, k)
    })
    .await?;
    Ok(Json(result).into_response())
}

async fn process_definition_xml(State(state): S, caller: CallerOf, Path(text): Path<String>) -> Answer {
    let k = key(&text)?;
    let tenants = readable_tenants(&state, caller);
    let xml = read(&state, move |c| {
        query::get_in(c, &query::PROCESS_DEFINITION, k, tenants.as_deref())?;
        query::process_definition_xml(c, k)
    })
    .await?;
    Ok(([(header::CONTENT_TYPE, "text/xml")], xml).into_response())
}

/// `GET /v2/topology`: the cluster as the gateway's `Topology` describes it.
async fn topology(State(state): S) -> Json<Value> {
    let t = state.topology.topology();
    let brokers: Vec<Value> = t
        .brokers
        .iter()
        .map(|b| {
            json!({
                "nodeId": b.node_id,
                "host": b.host,
                "port": b.port,
                "version": b.version,
                "partitions": b.partitions.iter().map(|p| json!({
                    "partitionId": p.partition_id,
                    "role": match p.role { PartitionRole::Leader => "leader", PartitionRole::Follower => "follower", PartitionRole::Inactive => "inactive" },
                    "health": match p.health { PartitionHealth::Healthy => "healthy", PartitionHealth::Unhealthy => "unhealthy", PartitionHealth::Dead => "dead" },
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    Json(json!({
        "brokers": brokers,
        "clusterSize": t.cluster_size,
        "partitionsCount": t.partitions_count,
        "replicationFactor": t.replication_factor,
        "gatewayVersion": env!("CARGO_PKG_VERSION"),
        "lastCompletedChangeId": "-1",
    }))
}

pub(crate) fn opt_str<'a>(v: &'a Value, field: &str) -> Result<Option<&'a str>, Problem> {
    match v.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(Problem::bad_request(format!("'{field}' must be a string, not {other}"))),
    }
}

/// `POST /v2/process-instances`: by `processDefinitionKey`, or `processDefinitionId` with an
/// optional `processDefinitionVersion` (-1: the latest); `awaitCompletion` waits for the result
/// as `CreateProcessInstanceWithResult` does.
async fn create_process_instance(State(state): S, caller: Option<axum::Extension<waggle_gateway::Caller>>, bytes: Bytes) -> Answer {
    let req = body(&bytes)?;
    if !req.is_object() {
        return Err(Problem::bad_request("the request body must be an object"));
    }
    let process_definition_key = opt_str(&req, "processDefinitionKey")?.map(key).transpose()?.unwrap_or(0);
    let bpmn_process_id = opt_str(&req, "processDefinitionId")?.unwrap_or_default().to_owned();
    if process_definition_key == 0 && bpmn_process_id.is_empty() {
        return Err(Problem::bad_request("one of processDefinitionKey and processDefinitionId is required"));
    }
    let version = match req.get("processDefinitionVersion") {
        None | Some(Value::Null) => -1,
        Some(v) => v
            .as_i64()
            .and_then(|v| i32::try_from(v).ok())
            .ok_or_else(|| Problem::bad_request("processDefinitionVersion must be an integer"))?,
    };
    let variables = match req.get("variables") {
        None | Some(Value::Null) => String::new(),
        Some(v @ Value::Object(_)) => v.to_string(),
        Some(_) => return Err(Problem::bad_request("variables must be an object")),
    };
    let start_instructions = match req.get("startInstructions") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|i| {
                i.get("elementId")
                    .and_then(Value::as_str)
                    .map(|e| pb::ProcessInstanceCreationStartInstruction { element_id: e.to_owned() })
                    .ok_or_else(|| Problem::bad_request("a start instruction needs an elementId"))
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(Problem::bad_request("startInstructions must be an array")),
    };
    let request = pb::CreateProcessInstanceRequest {
        process_definition_key,
        bpmn_process_id,
        version,
        variables,
        start_instructions,
        tenant_id: input::tenant(state.gateway.multi_tenancy(), &opt_str(&req, "tenantId")?.map(str::to_owned))?,
    };
    if req.get("awaitCompletion").and_then(Value::as_bool).unwrap_or(false) {
        let fetch_variables = req
            .get("fetchVariables")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).map(str::to_owned).collect())
            .unwrap_or_default();
        let request_timeout = req.get("requestTimeout").and_then(Value::as_i64).unwrap_or(0);
        let r = state
            .gateway
            .create_process_instance_with_result(input::grpc(
                caller,
                pb::CreateProcessInstanceWithResultRequest { request: Some(request), request_timeout, fetch_variables },
            ))
            .await?
            .into_inner();
        let variables: Value = serde_json::from_str(&r.variables).unwrap_or_else(|_| json!({}));
        return Ok(Json(json!({
            "processDefinitionKey": r.process_definition_key.to_string(),
            "processDefinitionId": r.bpmn_process_id,
            "processDefinitionVersion": r.version,
            "processInstanceKey": r.process_instance_key.to_string(),
            "tenantId": r.tenant_id,
            "variables": variables,
        }))
        .into_response());
    }
    let r = state.gateway.create_process_instance(input::grpc(caller, request)).await?.into_inner();
    Ok(Json(json!({
        "processDefinitionKey": r.process_definition_key.to_string(),
        "processDefinitionId": r.bpmn_process_id,
        "processDefinitionVersion": r.version,
        "processInstanceKey": r.process_instance_key.to_string(),
        "tenantId": r.tenant_id,
        "variables": {},
    }))
    .into_response())
}

/// `POST /v2/process-instances/{key}/cancellation`: 204 once the cancellation is committed.
async fn cancel_process_instance(
    State(state): S,
    Path(text): Path<String>,
    caller: Option<axum::Extension<waggle_gateway::Caller>>,
    bytes: Bytes,
) -> Answer {
    let k = key(&text)?;
    body(&bytes)?;
    state.gateway.cancel_process_instance(input::grpc(caller, pb::CancelProcessInstanceRequest { process_instance_key: k })).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}
