//! The UI's JSON: what the pages poll (read from the query store) and the Retry action (through
//! the gateway's handlers, as the REST commands do).

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};
use waggle_protocol::gateway as pb;
use waggle_protocol::gateway::gateway_server::Gateway as _;
use waggle_store::{overview, query};

use crate::input::path_key;
use crate::routes::read;
use crate::{Problem, RestState};

type S = State<Arc<RestState>>;
type Answer = Result<Response, Problem>;

/// At most this many element instances and variables are shown for one instance.
const PER_INSTANCE: u64 = 10_000;

pub fn routes() -> Router<Arc<RestState>> {
    Router::new()
        .route("/ui/api/processes", get(processes))
        .route("/ui/api/processes/:key", get(process))
        .route("/ui/api/instances/:key", get(instance))
        .route("/ui/api/incidents/:key/retry", post(retry))
}

/// `GET /ui/api/processes`: `{definitions, counts}`, the definitions by id then newest version
/// first, `counts` their instances by state per definition key.
async fn processes(State(state): S) -> Answer {
    let out = read(&state, |c| {
        let definitions = query::search(
            c,
            &query::PROCESS_DEFINITION,
            &json!({
                "sort": [{"field": "processDefinitionId"}, {"field": "version", "order": "DESC"}],
                "page": {"limit": 10_000},
            }),
        )?;
        Ok(json!({ "definitions": definitions["items"], "counts": overview::definition_counts(c)? }))
    })
    .await?;
    Ok(Json(out).into_response())
}

/// `GET /ui/api/processes/{key}`: `{definition, counts, elements}`: its instances by state,
/// and the element instances by state per element id for the diagram's badges.
async fn process(State(state): S, Path(text): Path<String>) -> Answer {
    let key = path_key(&text)?;
    let out = read(&state, move |c| {
        let definition = query::get(c, &query::PROCESS_DEFINITION, key)?;
        let counts = overview::definition_counts(c)?.get(key.to_string()).cloned().unwrap_or(Value::Null);
        Ok(json!({ "definition": definition, "counts": counts, "elements": overview::element_counts(c, key)? }))
    })
    .await?;
    Ok(Json(out).into_response())
}

/// `GET /ui/api/instances/{key}`: one process instance with its element instances, variables,
/// active incidents and the instances it called (`children`), read together so a refresh
/// shows one moment of the store; `scopes` maps each element instance to its flow scope (the
/// element instance tree), `sequenceFlows` are the flows it took.
async fn instance(State(state): S, Path(text): Path<String>) -> Answer {
    let key = path_key(&text)?;
    let out = read(&state, move |c| {
        let instance = query::get(c, &query::PROCESS_INSTANCE, key)?;
        let of_instance = |entity: &query::Entity, extra: Value| {
            let mut filter = json!({ "processInstanceKey": key.to_string() });
            if let (Some(f), Value::Object(extra)) = (filter.as_object_mut(), extra) {
                f.extend(extra);
            }
            query::search(c, entity, &json!({ "filter": filter, "page": { "limit": PER_INSTANCE } })).map(|r| r["items"].clone())
        };
        Ok(json!({
            "instance": instance,
            "elements": of_instance(&query::ELEMENT_INSTANCE, Value::Null)?,
            "variables": of_instance(&query::VARIABLE, Value::Null)?,
            "incidents": of_instance(&query::INCIDENT, json!({ "state": "ACTIVE" }))?,
            "scopes": overview::flow_scopes(c, key)?,
            "sequenceFlows": query::sequence_flows(c, key)?["items"],
            "children": query::search(
                c,
                &query::PROCESS_INSTANCE,
                &json!({ "filter": { "parentProcessInstanceKey": key.to_string() }, "page": { "limit": 100 } }),
            )?["items"],
        }))
    })
    .await?;
    Ok(Json(out).into_response())
}

/// `POST /ui/api/incidents/{key}/retry`: Operate's retry. A job's incident (its retries ran
/// out) first gets the job one retry back (`UpdateJobRetries`), then the incident is resolved
/// (`ResolveIncident`); 204 once both are committed.
async fn retry(State(state): S, Path(text): Path<String>) -> Answer {
    let key = path_key(&text)?;
    let incident = read(&state, move |c| query::get(c, &query::INCIDENT, key)).await?;
    if let Some(job_key) = incident.get("jobKey").and_then(Value::as_str).and_then(|k| k.parse::<i64>().ok()).filter(|k| *k > 0) {
        state.gateway.update_job_retries(tonic::Request::new(pb::UpdateJobRetriesRequest { job_key, retries: 1 })).await?;
    }
    state.gateway.resolve_incident(tonic::Request::new(pb::ResolveIncidentRequest { incident_key: key })).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}
