//! Job commands of the 8.8 API
//! (<https://docs.camunda.io/docs/8.8/apis-tools/orchestration-cluster-api-rest/specifications/activate-jobs/>
//! and its siblings `complete-job`, `fail-job`, `throw-job-error`, `update-job`): activation
//! with long polling, completion, failure, error, and the retries/timeout changeset, each
//! through the gRPC gateway's handler of the same command.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{patch, post};
use axum::{Extension, Json, Router};
use bytes::Bytes;
use futures::StreamExt;
use serde::Deserialize;
use serde_json::{json, Map, Value};
use waggle_gateway::Caller;
use waggle_protocol::gateway as pb;
use waggle_protocol::gateway::gateway_server::Gateway as _;
use waggle_protocol::value::JobRecord;

use crate::input::{self, parse, path_key};
use crate::{Problem, RestState};

type S = State<Arc<RestState>>;
type Answer = Result<Response, Problem>;

/// The job routes.
pub fn routes() -> Router<Arc<RestState>> {
    Router::new()
        .route("/v2/jobs/activation", post(activate))
        .route("/v2/jobs/:key", patch(update))
        .route("/v2/jobs/:key/completion", post(complete))
        .route("/v2/jobs/:key/failure", post(fail))
        .route("/v2/jobs/:key/error", post(throw_error))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Activation {
    r#type: String,
    worker: Option<String>,
    timeout: i64,
    max_jobs_to_activate: i32,
    fetch_variable: Option<Vec<String>>,
    request_timeout: Option<i64>,
    tenant_ids: Option<Vec<String>>,
}

/// `POST /v2/jobs/activation`: `{jobs: [...]}`, waiting up to `requestTimeout` ms (0 or absent:
/// the gateway's long-polling default, negative: no waiting) for jobs of the type.
async fn activate(State(state): S, caller: Option<Extension<Caller>>, bytes: Bytes) -> Answer {
    let req: Activation = parse(&bytes, false)?;
    let mut tenant_ids = Vec::new();
    for t in req.tenant_ids.iter().flatten() {
        let t = input::tenant(state.gateway.multi_tenancy(), &Some(t.clone()))?;
        if !t.is_empty() {
            tenant_ids.push(t);
        }
    }
    let request = pb::ActivateJobsRequest {
        r#type: req.r#type,
        worker: req.worker.unwrap_or_default(),
        timeout: req.timeout,
        max_jobs_to_activate: req.max_jobs_to_activate,
        fetch_variable: req.fetch_variable.unwrap_or_default(),
        request_timeout: req.request_timeout.unwrap_or(0),
        tenant_ids,
    };
    let mut responses = state.gateway.activate_jobs(input::grpc(caller, request)).await?.into_inner();
    let mut jobs = Vec::new();
    while let Some(response) = responses.next().await {
        jobs.extend(response?.jobs.into_iter().map(activated_job));
    }
    Ok(Json(json!({ "jobs": jobs })).into_response())
}

/// An activated job as 8.8's `ActivatedJobResult` (keys as strings, documents as objects).
fn activated_job(j: pb::ActivatedJob) -> Value {
    json!({
        "type": j.r#type,
        "processDefinitionId": j.bpmn_process_id,
        "processDefinitionVersion": j.process_definition_version,
        "elementId": j.element_id,
        "customHeaders": input::document(&j.custom_headers),
        "worker": j.worker,
        "retries": j.retries,
        "deadline": j.deadline,
        "variables": input::document(&j.variables),
        "tenantId": j.tenant_id,
        "jobKey": j.key.to_string(),
        "processInstanceKey": j.process_instance_key.to_string(),
        "processDefinitionKey": j.process_definition_key.to_string(),
        "elementInstanceKey": j.element_instance_key.to_string(),
        "kind": "BPMN_ELEMENT",
        "listenerEventType": "UNSPECIFIED",
        "tags": [],
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Completion {
    variables: Option<Map<String, Value>>,
    /// Results for user task listeners and ad-hoc sub-processes: not supported (400 unless null).
    result: Option<Value>,
}

/// `POST /v2/jobs/{jobKey}/completion`: 204.
async fn complete(
    State(state): S,
    Path(text): Path<String>,
    caller: Option<axum::Extension<waggle_gateway::Caller>>,
    bytes: Bytes,
) -> Answer {
    let job_key = path_key(&text)?;
    let req: Completion = parse(&bytes, true)?;
    if req.result.as_ref().is_some_and(|r| !r.is_null()) {
        return Err(Problem::bad_request("a job result (user task listeners, ad-hoc sub-processes) is not supported by Waggle"));
    }
    let variables = input::variables(&req.variables);
    state.gateway.complete_job(input::grpc(caller, pb::CompleteJobRequest { job_key, variables })).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Failure {
    retries: Option<i32>,
    error_message: Option<String>,
    retry_back_off: Option<i64>,
    variables: Option<Map<String, Value>>,
}

/// `POST /v2/jobs/{jobKey}/failure`: 204; `retries` defaults to 0 (an incident), as in 8.8.
async fn fail(State(state): S, Path(text): Path<String>, caller: Option<axum::Extension<waggle_gateway::Caller>>, bytes: Bytes) -> Answer {
    let job_key = path_key(&text)?;
    let req: Failure = parse(&bytes, true)?;
    let request = pb::FailJobRequest {
        job_key,
        retries: req.retries.unwrap_or(0),
        error_message: req.error_message.unwrap_or_default(),
        retry_back_off: req.retry_back_off.unwrap_or(0),
        variables: input::variables(&req.variables),
    };
    state.gateway.fail_job(input::grpc(caller, request)).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct JobError {
    error_code: String,
    error_message: Option<String>,
    variables: Option<Map<String, Value>>,
}

/// `POST /v2/jobs/{jobKey}/error`: 204; `errorCode` is required.
async fn throw_error(
    State(state): S,
    Path(text): Path<String>,
    caller: Option<axum::Extension<waggle_gateway::Caller>>,
    bytes: Bytes,
) -> Answer {
    let job_key = path_key(&text)?;
    let req: JobError = parse(&bytes, false)?;
    if req.error_code.trim().is_empty() {
        return Err(Problem::bad_request("No errorCode provided"));
    }
    let request = pb::ThrowErrorRequest {
        job_key,
        error_code: req.error_code,
        error_message: req.error_message.unwrap_or_default(),
        variables: input::variables(&req.variables),
    };
    state.gateway.throw_error(input::grpc(caller, request)).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Update {
    changeset: Changeset,
    operation_reference: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Changeset {
    retries: Option<i32>,
    timeout: Option<i64>,
}

/// `PATCH /v2/jobs/{jobKey}`: 204. The changeset's retries and timeout go to the engine as one
/// JOB UPDATE command, as in 8.8: both change or neither, and a rejection names every invalid
/// part (400). An empty changeset is a 400.
async fn update(
    State(state): S,
    Path(text): Path<String>,
    caller: Option<axum::Extension<waggle_gateway::Caller>>,
    bytes: Bytes,
) -> Answer {
    let job_key = path_key(&text)?;
    let req: Update = parse(&bytes, false)?;
    let _ = req.operation_reference;
    let Changeset { retries, timeout } = req.changeset;
    if retries.is_none() && timeout.is_none() {
        return Err(Problem::bad_request("No update data provided: the changeset needs retries or timeout"));
    }
    // the command marks an attribute left out with these values (JobRecord::UNCHANGED_*)
    if retries == Some(JobRecord::UNCHANGED_RETRIES) || timeout == Some(JobRecord::UNCHANGED_TIMEOUT) {
        return Err(Problem::bad_request("The changeset's retries or timeout is out of range"));
    }
    let caller = caller.map(|axum::Extension(c)| c);
    state.gateway.update_job(job_key, retries, timeout, caller.as_ref()).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}
