//! Element statistics of the 8.8 API, read from the query store ([`waggle_store::statistics`]):
//! `POST /v2/process-definitions/{processDefinitionKey}/statistics/element-instances` (a
//! `{filter}` body, optional) and `GET /v2/process-instances/{processInstanceKey}/statistics/element-instances`,
//! both answering `{items: [{elementId, active, canceled, incidents, completed}]}`.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use axum::{Json, Router};
use bytes::Bytes;
use waggle_store::{query, statistics};

use crate::routes::{body, key, read, readable_tenants, visible, Answer, CallerOf, S};
use crate::RestState;

/// The statistics routes.
pub fn routes() -> Router<Arc<RestState>> {
    Router::new()
        .route("/v2/process-definitions/:key/statistics/element-instances", post(of_definition))
        .route("/v2/process-instances/:key/statistics/element-instances", get(of_instance))
}

// another tenant's definition or instance (multi-tenancy) is answered as one that does not
// exist (key 0 is nobody's)

async fn of_definition(State(state): S, caller: CallerOf, Path(text): Path<String>, bytes: Bytes) -> Answer {
    let k = key(&text)?;
    let request = body(&bytes)?;
    let tenants = readable_tenants(&state, caller);
    let result = read(&state, move |c| {
        let k = if visible(c, &query::PROCESS_DEFINITION, k, tenants.as_deref())? { k } else { 0 };
        statistics::process_definition(c, k, &request)
    })
    .await?;
    Ok(Json(result).into_response())
}

async fn of_instance(State(state): S, caller: CallerOf, Path(text): Path<String>) -> Answer {
    let k = key(&text)?;
    let tenants = readable_tenants(&state, caller);
    let result = read(&state, move |c| {
        let k = if visible(c, &query::PROCESS_INSTANCE, k, tenants.as_deref())? { k } else { 0 };
        statistics::process_instance(c, k)
    })
    .await?;
    Ok(Json(result).into_response())
}
