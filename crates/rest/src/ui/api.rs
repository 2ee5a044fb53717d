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
use crate::routes::{read, readable_tenants, CallerOf};
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
/// (With multi-tenancy and authentication on, here and below: the caller's tenants' only.)
async fn processes(State(state): S, caller: CallerOf) -> Answer {
    let tenants = readable_tenants(&state, caller);
    let out = read(&state, move |c| {
        let definitions = query::search_in(
            c,
            &query::PROCESS_DEFINITION,
            &json!({
                "sort": [{"field": "processDefinitionId"}, {"field": "version", "order": "DESC"}],
                "page": {"limit": 10_000},
            }),
            tenants.as_deref(),
        )?;
        // the counts of the definitions listed only
        let listed: std::collections::HashSet<&str> =
            definitions["items"].as_array().into_iter().flatten().filter_map(|d| d["processDefinitionKey"].as_str()).collect();
        let mut counts = overview::definition_counts(c)?;
        if let Value::Object(map) = &mut counts {
            map.retain(|k, _| listed.contains(k.as_str()));
        }
        Ok(json!({ "definitions": definitions["items"], "counts": counts }))
    })
    .await?;
    Ok(Json(out).into_response())
}

/// `GET /ui/api/processes/{key}`: `{definition, counts, elements}`: its instances by state,
/// and the element instances by state per element id for the diagram's badges.
async fn process(State(state): S, caller: CallerOf, Path(text): Path<String>) -> Answer {
    let key = path_key(&text)?;
    let tenants = readable_tenants(&state, caller);
    let out = read(&state, move |c| {
        let definition = query::get_in(c, &query::PROCESS_DEFINITION, key, tenants.as_deref())?;
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
async fn instance(State(state): S, caller: CallerOf, Path(text): Path<String>) -> Answer {
    let key = path_key(&text)?;
    let tenants = readable_tenants(&state, caller);
    let out = read(&state, move |c| {
        // what belongs to the instance is its tenant's; its children are found per tenant
        let instance = query::get_in(c, &query::PROCESS_INSTANCE, key, tenants.as_deref())?;
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
            "children": query::search_in(
                c,
                &query::PROCESS_INSTANCE,
                &json!({ "filter": { "parentProcessInstanceKey": key.to_string() }, "page": { "limit": 100 } }),
                tenants.as_deref(),
            )?["items"],
        }))
    })
    .await?;
    Ok(Json(out).into_response())
}

/// `POST /ui/api/incidents/{key}/retry`: Operate's retry. A job's incident (its retries ran
/// out) first gets the job one retry back (`UpdateJobRetries`), then the incident is resolved
/// (`ResolveIncident`); 204 once both are committed.
async fn retry(State(state): S, caller: CallerOf, Path(text): Path<String>) -> Answer {
    let key = path_key(&text)?;
    let tenants = readable_tenants(&state, caller.clone());
    let incident = read(&state, move |c| query::get_in(c, &query::INCIDENT, key, tenants.as_deref())).await?;
    if let Some(job_key) = incident.get("jobKey").and_then(Value::as_str).and_then(|k| k.parse::<i64>().ok()).filter(|k| *k > 0) {
        let request = crate::input::grpc(caller.clone(), pb::UpdateJobRetriesRequest { job_key, retries: 1 });
        state.gateway.update_job_retries(request).await?;
    }
    state.gateway.resolve_incident(crate::input::grpc(caller, pb::ResolveIncidentRequest { incident_key: key })).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}
