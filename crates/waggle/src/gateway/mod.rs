//! `waggle gateway`: a standalone gateway in front of a cluster of `waggle broker` processes, as
//! Zeebe's standalone gateway. It holds no data and no partition.
//!
//! It joins the brokers' gossip ([`cluster`]) to learn the cluster's shape, its brokers and each
//! partition's leader, and serves the gRPC gateway over a [`RemoteCluster`]: every command is
//! sent to its partition's leader over the broker's internal port (retried on the next leader
//! while certainly not taken), and its job streams and long polls get jobs from every broker
//! through a `JobStreams` session with each. Its management port answers `/health` (up while it
//! runs), `/ready` (once every partition has a known leader), `/metrics`, `/actuator/cluster` and
//! `POST /actuator/rebalance` (as on Zeebe's gateway).

mod cluster;
pub mod config;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::json;
use waggle_broker::RemoteCluster;
use waggle_gateway::{GatewayService, GrpcServer, TopologySource};

use cluster::GossipCluster;
use config::GatewayArgs;

/// Runs the gateway until SIGTERM or SIGINT.
pub fn run(args: &GatewayArgs) -> anyhow::Result<()> {
    let config = args.resolve()?;
    tokio::runtime::Builder::new_multi_thread().enable_all().build()?.block_on(serve(config))
}

async fn serve(config: config::GatewayConfig) -> anyhow::Result<()> {
    let started = Instant::now();
    let grpc_addr: SocketAddr = format!("{}:{}", config.host, config.port).parse().context("gateway address")?;
    let mgmt_addr: SocketAddr =
        format!("{}:{}", config.management_host, config.management_port).parse().context("management address (--management-host)")?;
    let internal_tls = config.internal_tls.as_ref().map(crate::security::network::load).transpose()?;
    let cluster_id = crate::security::network::gossip_cluster_id(internal_tls.as_deref());
    // nothing listens before the cluster's shape is known: the partition count comes from it
    let (membership, shape) = tokio::select! {
        joined = cluster::join(&config, &cluster_id) => joined.context("joining the cluster's gossip")?,
        () = crate::shutdown_signal() => return Ok(()),
    };
    let known = Arc::new(GossipCluster { view: membership.subscribe(), shape, remote: Default::default() });
    let partitions = u16::try_from(shape.partitions_count).context("the cluster's partition count")?;
    let remote = RemoteCluster::start_with(partitions, known.clone(), internal_tls.as_ref().map(|tls| tls.connector()));
    let _ = known.remote.set(Arc::downgrade(&remote));
    let registry = prometheus::Registry::new();
    let gateway = GatewayService::remote(
        remote.clone(),
        waggle_gateway::GatewayConfig {
            max_message_bytes: config.max_message_size,
            long_polling_timeout: Duration::from_millis(config.long_polling_timeout_ms),
            host: config.host.clone(),
            port: config.port,
            multi_tenancy: config.multi_tenancy,
        },
        &registry,
        known.clone(),
    );
    let grpc_listener = tokio::net::TcpListener::bind(grpc_addr).await.with_context(|| format!("binding gRPC on {grpc_addr}"))?;
    let mgmt_listener = tokio::net::TcpListener::bind(mgmt_addr).await.with_context(|| format!("binding management on {mgmt_addr}"))?;
    let tls = crate::Acceptors::of(&config.security)?;
    let auth = crate::authentication(&config.security)?;
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let grpc_server = crate::with_authentication(GrpcServer::new(gateway), auth.as_ref());
    let grpc = tokio::spawn(crate::serve_grpc(grpc_listener, grpc_server, tls.grpc, stop_rx.clone()));
    let mgmt_router = crate::protect_management(router(Management { cluster: known, remote: remote.clone(), registry }), auth.as_ref());
    let mgmt = tokio::spawn(crate::security::serve::http(mgmt_listener, mgmt_router, tls.http, crate::stopped(stop_rx.clone())));
    crate::log_management(mgmt_addr);
    tracing::info!(
        grpc = %grpc_addr, management = %mgmt_addr, gossip = %membership.gossip_addr(), brokers = shape.cluster_size,
        partitions = shape.partitions_count, replication_factor = shape.replication_factor, tls = config.security.tls.is_some(),
        ready_ms = started.elapsed().as_millis() as u64, build = env!("WAGGLE_BUILD"),
        "waggle gateway is ready"
    );
    crate::shutdown_signal().await;
    tracing::info!("shutting down");
    let _ = stop_tx.send(true);
    let _ = tokio::time::timeout(Duration::from_secs(10), grpc).await;
    let _ = tokio::time::timeout(Duration::from_secs(5), mgmt).await;
    remote.shutdown();
    if let Err(e) = membership.shutdown().await {
        tracing::warn!(error = %e, "stopping the gossip failed");
    }
    tracing::info!("stopped");
    Ok(())
}

#[derive(Clone)]
struct Management {
    cluster: Arc<GossipCluster>,
    remote: Arc<RemoteCluster>,
    registry: prometheus::Registry,
}

fn router(state: Management) -> Router {
    Router::new()
        .route("/health", get(health))
        .route("/ready", get(ready))
        .route("/metrics", get(metrics))
        .route("/actuator/cluster", get(cluster))
        .route("/actuator/rebalance", post(rebalance))
        .with_state(state)
}

/// Up while the gateway runs (it listens only once it has heard from a broker).
async fn health() -> Response {
    (StatusCode::OK, Json(json!({ "status": "UP" }))).into_response()
}

/// Ready once the gossip names a leader for every partition (Zeebe's gateway: it knows where to
/// send each command); otherwise 503 with the partitions that have none.
async fn ready(State(s): State<Management>) -> Response {
    let leaderless = s.cluster.leaderless();
    if leaderless.is_empty() {
        (StatusCode::OK, Json(json!({ "status": "UP" }))).into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, Json(json!({ "status": "DOWN", "partitionsWithoutLeader": leaderless }))).into_response()
    }
}

/// Moves every partition's leadership back to its preferred broker: best effort, always 200 OK
/// with no body, as Zeebe's gateway answers.
async fn rebalance(State(s): State<Management>) -> StatusCode {
    let asked = s.remote.rebalance().await;
    tracing::info!(partitions = ?asked, "rebalance asked");
    StatusCode::OK
}

async fn metrics(State(s): State<Management>) -> Response {
    crate::management::prometheus_text(&s.registry)
}

/// The cluster as `Topology` describes it (the alive brokers), in a broker's `/actuator/cluster`
/// form.
async fn cluster(State(s): State<Management>) -> Json<serde_json::Value> {
    Json(crate::management::cluster_json(&s.cluster.topology(), |_, _| None))
}
