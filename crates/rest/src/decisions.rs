//! DMN in the 8.8 API: `POST /v2/decision-definitions/evaluation`
//! (<https://docs.camunda.io/docs/8.8/apis-tools/orchestration-cluster-api-rest/specifications/evaluate-decision/>),
//! through the gRPC gateway's EvaluateDecision handler, and the decision searches and gets
//! (`search-decision-instances`, `get-decision-instance`, `search-decision-definitions`, ...)
//! over the query store.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use bytes::Bytes;
use serde::Deserialize;
use serde_json::{json, Map, Value};
use waggle_gateway::Caller;
use waggle_protocol::gateway as pb;
use waggle_protocol::gateway::gateway_server::Gateway as _;
use waggle_store::decisions;

use crate::input::{self, parse};
use crate::routes::{by_key, key, read, readable_tenants, search, CallerOf, S};
use crate::{Problem, RestState};

/// The decision routes: evaluation, and the searches and gets of decision definitions,
/// decision requirements (with their DMN XML) and decision instances, from the query store
/// ([`waggle_store::decisions`]).
pub fn routes() -> Router<Arc<RestState>> {
    Router::new()
        .route("/v2/decision-definitions/evaluation", post(evaluate))
        .route("/v2/decision-definitions/search", post(|s: S, c: CallerOf, b: Bytes| search(s, c, &decisions::DECISION_DEFINITION, b)))
        .route("/v2/decision-definitions/:key", get(|s: S, c: CallerOf, k: Path<String>| by_key(s, c, &decisions::DECISION_DEFINITION, k)))
        .route("/v2/decision-definitions/:key/xml", get(|s: S, c: CallerOf, k: Path<String>| xml(s, c, k, true)))
        .route("/v2/decision-requirements/search", post(|s: S, c: CallerOf, b: Bytes| search(s, c, &decisions::DECISION_REQUIREMENTS, b)))
        .route(
            "/v2/decision-requirements/:key",
            get(|s: S, c: CallerOf, k: Path<String>| by_key(s, c, &decisions::DECISION_REQUIREMENTS, k)),
        )
        .route("/v2/decision-requirements/:key/xml", get(|s: S, c: CallerOf, k: Path<String>| xml(s, c, k, false)))
        .route("/v2/decision-instances/search", post(|s: S, c: CallerOf, b: Bytes| search(s, c, &decisions::DECISION_INSTANCE, b)))
        .route("/v2/decision-instances/:key", get(instance))
}

/// `GET /v2/decision-instances/{decisionEvaluationInstanceKey}`: 8.8's
/// `DecisionInstanceGetQueryResult` (with evaluated inputs and matched rules).
/// Another tenant's (multi-tenancy) is 404, as a missing one.
async fn instance(State(state): S, caller: CallerOf, Path(id): Path<String>) -> Result<Response, Problem> {
    let tenants = readable_tenants(&state, caller);
    let result = read(&state, move |c| {
        let found = decisions::get_instance(c, &id)?;
        let tenant = found["tenantId"].as_str().unwrap_or(waggle_protocol::DEFAULT_TENANT);
        match tenants {
            Some(ts) if !ts.iter().any(|t| t == tenant) => {
                Err(waggle_store::StoreError::NotFound(format!("decision instance with key {id}")))
            }
            _ => Ok(found),
        }
    })
    .await?;
    Ok(Json(result).into_response())
}

/// The DMN XML of a decision definition's requirements or of decision requirements.
async fn xml(State(state): S, caller: CallerOf, Path(text): Path<String>, by_definition: bool) -> Result<Response, Problem> {
    let k = key(&text)?;
    let tenants = readable_tenants(&state, caller);
    let xml = read(&state, move |c| {
        let entity = if by_definition { &decisions::DECISION_DEFINITION } else { &decisions::DECISION_REQUIREMENTS };
        waggle_store::query::get_in(c, entity, k, tenants.as_deref())?;
        decisions::xml(c, k, by_definition)
    })
    .await?;
    Ok(([(header::CONTENT_TYPE, "text/xml")], xml).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Instruction {
    decision_definition_id: Option<String>,
    #[serde(default, deserialize_with = "input::opt_key")]
    decision_definition_key: Option<i64>,
    variables: Option<Map<String, Value>>,
    tenant_id: Option<String>,
}

/// Evaluates by `decisionDefinitionKey` or `decisionDefinitionId` (the latest version), exactly
/// one of them; answers 8.8's `EvaluateDecisionResult`. A failed evaluation is a 200 carrying
/// `failedDecisionDefinitionId` and `failureMessage`, as the gRPC answer carries it.
async fn evaluate(State(state): S, caller: Option<Extension<Caller>>, bytes: Bytes) -> Result<Response, Problem> {
    let req: Instruction = parse(&bytes, false)?;
    let tenant_id = input::tenant(state.gateway.multi_tenancy(), &req.tenant_id)?;
    let id = req.decision_definition_id.filter(|i| !i.is_empty());
    let (decision_key, decision_id) = match (req.decision_definition_key, id) {
        (Some(_), Some(_)) => return Err(Problem::bad_request("Only one of [decisionDefinitionId, decisionDefinitionKey] is allowed")),
        (None, None) => return Err(Problem::bad_request("At least one of [decisionDefinitionId, decisionDefinitionKey] is required")),
        (Some(k), None) => (k, String::new()),
        (None, Some(i)) => (0, i),
    };
    let request = pb::EvaluateDecisionRequest { decision_key, decision_id, variables: input::variables(&req.variables), tenant_id };
    let r = state.gateway.evaluate_decision(input::grpc(caller, request)).await?.into_inner();
    Ok(Json(result(r)).into_response())
}

/// The gRPC answer as 8.8's `EvaluateDecisionResult` (keys as strings; outputs stay JSON texts).
fn result(r: pb::EvaluateDecisionResponse) -> Value {
    let evaluation_key = r.decision_instance_key;
    let evaluated: Vec<Value> = r
        .evaluated_decisions
        .into_iter()
        .enumerate()
        .map(|(i, d)| {
            json!({
                "decisionDefinitionId": d.decision_id,
                "decisionDefinitionName": d.decision_name,
                "decisionDefinitionVersion": d.decision_version,
                "decisionDefinitionType": d.decision_type,
                "output": d.decision_output,
                "tenantId": d.tenant_id,
                "matchedRules": d.matched_rules.into_iter().map(|m| json!({
                    "ruleId": m.rule_id,
                    "ruleIndex": m.rule_index,
                    "evaluatedOutputs": m.evaluated_outputs.into_iter().map(|o| json!({
                        "outputId": o.output_id, "outputName": o.output_name, "outputValue": o.output_value,
                    })).collect::<Vec<_>>(),
                })).collect::<Vec<_>>(),
                "evaluatedInputs": d.evaluated_inputs.into_iter().map(|e| json!({
                    "inputId": e.input_id, "inputName": e.input_name, "inputValue": e.input_value,
                })).collect::<Vec<_>>(),
                "decisionDefinitionKey": d.decision_key.to_string(),
                "decisionEvaluationInstanceKey": format!("{evaluation_key}-{}", i + 1),
            })
        })
        .collect();
    json!({
        "decisionDefinitionId": r.decision_id,
        "decisionDefinitionName": r.decision_name,
        "decisionDefinitionVersion": r.decision_version,
        "decisionRequirementsId": r.decision_requirements_id,
        "output": r.decision_output,
        "failedDecisionDefinitionId": r.failed_decision_id,
        "failureMessage": r.failure_message,
        "tenantId": r.tenant_id,
        "decisionDefinitionKey": r.decision_key.to_string(),
        "decisionRequirementsKey": r.decision_requirements_key.to_string(),
        "decisionInstanceKey": evaluation_key.to_string(),
        "decisionEvaluationKey": evaluation_key.to_string(),
        "evaluatedDecisions": evaluated,
    })
}
