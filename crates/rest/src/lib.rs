//! Camunda 8.8's REST API v2, the Orchestration Cluster API
//! (<https://docs.camunda.io/docs/apis-tools/orchestration-cluster-api-rest/orchestration-cluster-api-rest-overview/>),
//! under `/v2` on its own port (8080 by default).
//!
//! Searches and gets read the query store ([`waggle_store`]); commands go through the gRPC
//! gateway's own handlers (the same submission, routing and back pressure). Keys are strings;
//! every error is an RFC 9457 problem detail (`application/problem+json`): a malformed request
//! is 400, an unknown key 404, back pressure 503 with the title `RESOURCE_EXHAUSTED`.

mod decisions;
mod deployments;
mod input;
mod instances;
mod jobs;
mod messages;
mod problem;
mod routes;
mod statistics;
mod ui;
mod user_tasks;

use std::sync::Arc;

use waggle_gateway::{GatewayService, TopologySource};
use waggle_store::Reader;

pub use problem::Problem;
pub use routes::router;

/// What the routes use.
pub struct RestState {
    /// The query store; `None` when it is off (searches answer 503).
    pub store: Option<Arc<Reader>>,
    /// Where commands go (the gRPC gateway's handlers).
    pub gateway: Arc<GatewayService>,
    /// What `/v2/topology` describes.
    pub topology: Arc<dyn TopologySource>,
}
