//! Messages and signals of the 8.8 API
//! (<https://docs.camunda.io/docs/8.8/apis-tools/orchestration-cluster-api-rest/specifications/publish-message/>,
//! `correlate-message`, `broadcast-signal`), through the gRPC gateway's handlers.

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Extension, Json, Router};
use bytes::Bytes;
use serde::Deserialize;
use serde_json::{json, Map, Value};
use waggle_gateway::Caller;
use waggle_protocol::gateway as pb;
use waggle_protocol::gateway::gateway_server::Gateway as _;
use waggle_protocol::RecordValue;

use crate::input::{self, parse};
use crate::{Problem, RestState};

type S = State<Arc<RestState>>;
type Answer = Result<Response, Problem>;

/// The message and signal routes.
pub fn routes() -> Router<Arc<RestState>> {
    Router::new()
        .route("/v2/messages/publication", post(publish))
        .route("/v2/messages/correlation", post(correlate))
        .route("/v2/signals/broadcast", post(broadcast))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Publication {
    name: String,
    correlation_key: Option<String>,
    time_to_live: Option<i64>,
    message_id: Option<String>,
    variables: Option<Map<String, Value>>,
    tenant_id: Option<String>,
}

/// `POST /v2/messages/publication`: `{messageKey, tenantId}` once MESSAGE PUBLISHED is committed.
async fn publish(State(state): S, caller: Option<Extension<Caller>>, bytes: Bytes) -> Answer {
    let req: Publication = parse(&bytes, false)?;
    let tenant_id = input::tenant(state.gateway.multi_tenancy(), &req.tenant_id)?;
    if req.name.is_empty() {
        return Err(Problem::bad_request("No name provided"));
    }
    let request = pb::PublishMessageRequest {
        name: req.name,
        correlation_key: req.correlation_key.unwrap_or_default(),
        time_to_live: req.time_to_live.unwrap_or(0),
        message_id: req.message_id.unwrap_or_default(),
        variables: input::variables(&req.variables),
        tenant_id,
    };
    let r = state.gateway.publish_message(input::grpc(caller, request)).await?.into_inner();
    Ok(Json(json!({ "messageKey": r.key.to_string(), "tenantId": r.tenant_id })).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Correlation {
    name: String,
    correlation_key: Option<String>,
    variables: Option<Map<String, Value>>,
    tenant_id: Option<String>,
}

/// `POST /v2/messages/correlation`: `{messageKey, tenantId, processInstanceKey}` once the
/// engine's MESSAGE_CORRELATION CORRELATED is committed (for a waiting element, after its
/// partition confirmed the correlation); a 404 problem when nothing waits for the message.
async fn correlate(State(state): S, caller: Option<Extension<Caller>>, bytes: Bytes) -> Answer {
    let req: Correlation = parse(&bytes, false)?;
    let tenant_id = input::tenant(state.gateway.multi_tenancy(), &req.tenant_id)?;
    if req.name.is_empty() {
        return Err(Problem::bad_request("No name provided"));
    }
    let variables = input::variables(&req.variables);
    let caller = caller.map(|Extension(c)| c);
    let record =
        state.gateway.correlate_message(req.name, req.correlation_key.unwrap_or_default(), variables, tenant_id, caller.as_ref()).await?;
    let RecordValue::MessageCorrelation(c) = &record.value else {
        return Err(Problem::new(StatusCode::INTERNAL_SERVER_ERROR, "INTERNAL", "unexpected answer to a message correlation"));
    };
    Ok(Json(json!({
        "messageKey": c.message_key.to_string(),
        "tenantId": c.tenant_id,
        "processInstanceKey": c.process_instance_key.to_string(),
    }))
    .into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Broadcast {
    signal_name: String,
    variables: Option<Map<String, Value>>,
    tenant_id: Option<String>,
}

/// `POST /v2/signals/broadcast`: `{signalKey, tenantId}` once SIGNAL BROADCASTED is committed.
async fn broadcast(State(state): S, caller: Option<Extension<Caller>>, bytes: Bytes) -> Answer {
    let req: Broadcast = parse(&bytes, false)?;
    let tenant_id = input::tenant(state.gateway.multi_tenancy(), &req.tenant_id)?;
    if req.signal_name.is_empty() {
        return Err(Problem::bad_request("No signalName provided"));
    }
    let request = pb::BroadcastSignalRequest { signal_name: req.signal_name, variables: input::variables(&req.variables), tenant_id };
    let r = state.gateway.broadcast_signal(input::grpc(caller, request)).await?.into_inner();
    Ok(Json(json!({ "signalKey": r.key.to_string(), "tenantId": r.tenant_id })).into_response())
}
