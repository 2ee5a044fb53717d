//! Management HTTP API on port 9600: health, readiness, Prometheus metrics, open incidents, the
//! partitions this node holds and a digest of their state.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use prometheus::{Encoder, Registry, TextEncoder};
use serde_json::json;
use waggle_broker::backup::BackupError;
use waggle_broker::{Broker, ChangeRequest};
use waggle_gateway::{ClusterTopology, TopologySource};

#[derive(Clone)]
pub struct ManagementState {
    pub broker: Arc<Broker>,
    pub registry: Registry,
    /// This node's id in `/actuator/cluster` (0 for the standalone node).
    pub node_id: u64,
    /// The cluster as `/actuator/cluster` shows it (the gateway's `Topology` answers the same).
    pub topology: Arc<dyn TopologySource>,
}

pub fn router(state: ManagementState) -> Router {
    Router::new()
        .route("/health", get(health))
        .route("/ready", get(ready))
        .route("/metrics", get(metrics))
        .route("/actuator/cluster", get(cluster).patch(reconfigure))
        .route("/actuator/cluster/brokers", post(scale_brokers))
        .route("/actuator/cluster/brokers/:broker", post(add_broker).delete(remove_broker))
        .route("/actuator/cluster/brokers/:broker/partitions/:partition", post(join_partition).delete(leave_partition))
        .route("/actuator/rebalance", post(rebalance))
        .route("/actuator/backups", post(take_backup).get(list_backups))
        .route("/actuator/backups/:id", get(backup_status).delete(delete_backup))
        .route("/v1/incidents", get(incidents))
        .route("/v1/partitions", get(partitions))
        .route("/v1/partitions/:id/digest", get(digest))
        .with_state(state)
}

/// UP while every partition is healthy (`partitions`: each one's status, `health` HEALTHY,
/// UNHEALTHY while it restarts after a failure or DEAD once left down, and its last `failure`),
/// no exporter is stuck (behind, and nothing
/// acknowledged for longer than `exporter_stuck_after_ms`: its log cannot be compacted, so it is
/// reported long before the disk fills) or down after a panic (`status` DOWN while it restarts,
/// DEAD once left down, with its `lastPanic`) and the data folder's free space is above the disk
/// watermarks (`disk`: its level, free bytes and the watermarks); the exporters are listed when
/// there are any.
async fn health(State(s): State<ManagementState>) -> Response {
    let exporters = s.broker.exporters();
    let disk = s.broker.disk();
    let disk_ok = disk.level == waggle_broker::disk::DiskLevel::Ok;
    let healthy = s.broker.status().iter().all(|p| p.healthy) && !exporters.iter().any(|e| e.stuck || e.down) && disk_ok;
    let code = if healthy { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    let mut body = json!({ "status": if healthy { "UP" } else { "DOWN" } });
    body["disk"] = json!({
        "status": disk.level.name(),
        "monitoring": disk.enabled,
        "freeBytes": disk.free_bytes,
        "totalBytes": disk.total_bytes,
        "freeSpaceProcessing": disk.free_space_processing,
        "freeSpaceReplication": disk.free_space_replication,
    });
    body["partitions"] = s
        .broker
        .status()
        .iter()
        .map(|p| {
            let mut partition = json!({
                "partitionId": p.partition_id,
                "status": if p.healthy { "UP" } else { "DOWN" },
                "health": if p.healthy { "HEALTHY" } else if p.dead { "DEAD" } else { "UNHEALTHY" },
            });
            if let Some(failure) = &p.failure {
                partition["failure"] = json!(failure);
            }
            partition
        })
        .collect();
    if !exporters.is_empty() {
        body["exporters"] = exporters
            .iter()
            .map(|e| {
                json!({
                    "exporter": e.exporter,
                    "partitionId": e.partition_id,
                    "status": if e.dead {
                        "DEAD"
                    } else if e.down {
                        "DOWN"
                    } else if e.stuck {
                        "STUCK"
                    } else if e.running {
                        "EXPORTING"
                    } else {
                        "IDLE"
                    },
                    "lastExportedPosition": e.last_exported_position,
                    "acknowledgedPosition": e.acknowledged_position,
                    "lagEntries": e.lag_entries,
                    "unacknowledgedEntries": e.unacknowledged_entries,
                    "unacknowledgedRecords": e.unacknowledged_records,
                    "errors": e.errors,
                    "lastError": e.last_error,
                    "panics": e.panics,
                    "lastPanic": e.last_panic,
                })
            })
            .collect();
    }
    (code, Json(body)).into_response()
}

/// Ready once every partition is open (they are, by the time the server listens) and healthy
/// (an exporter's state does not count: it tells in `/health`).
async fn ready(State(s): State<ManagementState>) -> Response {
    let healthy = s.broker.status().iter().all(|p| p.healthy);
    let code = if healthy { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    (code, Json(json!({ "status": if healthy { "UP" } else { "DOWN" } }))).into_response()
}

/// Moves every partition's leadership back to its preferred broker, as Zeebe's endpoint does:
/// best effort, always 200 OK with no body (the log names the partitions asked; progress shows
/// in `/actuator/cluster`). The standalone node has nothing to move.
async fn rebalance(State(s): State<ManagementState>) -> StatusCode {
    let asked = s.broker.rebalance().await;
    tracing::info!(partitions = ?asked, "rebalance asked");
    StatusCode::OK
}

async fn metrics(State(s): State<ManagementState>) -> Response {
    prometheus_text(&s.registry)
}

/// `/metrics`: the registry's metrics in Prometheus' text format (brokers and the standalone
/// gateway alike).
pub fn prometheus_text(registry: &Registry) -> Response {
    let mut buf = Vec::new();
    if let Err(e) = TextEncoder::new().encode(&registry.gather(), &mut buf) {
        return (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response();
    }
    ([("content-type", "text/plain; version=0.0.4")], buf).into_response()
}

/// The cluster as the gateway's `Topology` describes it (the brokers known and alive, by node id),
/// with this node's applied and snapshot indexes in each of its partitions.
async fn cluster(State(s): State<ManagementState>) -> Json<serde_json::Value> {
    let local: HashMap<u16, (u64, u64)> =
        s.broker.status().into_iter().map(|p| (p.partition_id, (p.applied_index, p.snapshot_index))).collect();
    let mut body =
        cluster_json(&s.topology.topology(), |node_id, partition| local.get(&partition).filter(|_| node_id == s.node_id).copied());
    if let Some(topology) = s.broker.cluster_topology() {
        merge_topology(&mut body, &topology);
    }
    Json(body)
}

/// Adds the cluster topology to `/actuator/cluster`'s body in Zeebe 8.5's shape (its
/// `GetTopologyResponse`: `version`, `brokers` with `id`, `state` and `partitions` with `id`,
/// `state` and `priority`, `lastChange`, `pendingChange`), beside what the gateway's `Topology`
/// reports: each broker and partition of the topology gets those fields (a broker or partition
/// the topology names and the gateway does not know alive is listed with them alone).
fn merge_topology(body: &mut serde_json::Value, topology: &waggle_broker::topology::Topology) {
    body["version"] = json!(topology.version);
    let (last, pending) = topology.changes_json();
    body["lastChange"] = last;
    body["pendingChange"] = pending;
    // after a growth of the partition count: where instances and messages go (Waggle's own)
    if let Some(routing) = topology.routing {
        body["routingState"] = json!(routing);
    }
    let Some(brokers) = body["brokers"].as_array_mut() else { return };
    for (&node, partitions) in &topology.brokers {
        let at = match brokers.iter().position(|b| b["nodeId"] == node) {
            Some(at) => at,
            None => {
                brokers.push(json!({ "nodeId": node, "partitions": [] }));
                brokers.len() - 1
            }
        };
        let broker = &mut brokers[at];
        broker["id"] = json!(node);
        broker["state"] = json!("ACTIVE");
        let listed = broker["partitions"].as_array_mut().expect("an array");
        // the gateway's view lists the replicas running; the topology's are the cluster's
        listed.retain(|p| p["partitionId"].as_u64().is_some_and(|id| partitions.contains_key(&(id as u16))));
        for (&partition, replica) in partitions {
            let at = match listed.iter().position(|p| p["partitionId"] == partition) {
                Some(at) => at,
                None => {
                    listed.push(json!({ "partitionId": partition }));
                    listed.len() - 1
                }
            };
            listed[at]["id"] = json!(partition);
            listed[at]["state"] = json!(replica.state.name());
            listed[at]["priority"] = json!(replica.priority);
        }
    }
}

/// The body of a partition join: `{"priority": n}` (Zeebe's; optional here: 1 by default).
#[derive(serde::Deserialize, Default)]
struct JoinBody {
    priority: Option<u32>,
}

/// `POST /actuator/cluster/brokers/{brokerId}/partitions/{partitionId}`: plans the broker
/// joining the partition (202 with the planned change; 409 while another change runs; 400 for
/// an unknown broker or partition).
async fn join_partition(
    State(s): State<ManagementState>,
    Path((broker, partition)): Path<(u64, u16)>,
    Query(q): Query<DryRun>,
    body: axum::body::Bytes,
) -> Response {
    let body: JoinBody = match parse_body(&body, "{\"priority\": n}") {
        Ok(b) => b.unwrap_or_default(),
        Err(answer) => return *answer,
    };
    let request = ChangeRequest::JoinPartition { broker, partition, priority: body.priority.unwrap_or(1) };
    planned_answer(s.broker.request_change(request, q.dry_run).await)
}

/// `DELETE /actuator/cluster/brokers/{brokerId}/partitions/{partitionId}`: plans the broker
/// leaving the partition (202; 409 while another change runs; 400 for an unknown broker or
/// partition, a broker that does not replicate it, or its last replica).
async fn leave_partition(
    State(s): State<ManagementState>,
    Path((broker, partition)): Path<(u64, u16)>,
    Query(q): Query<DryRun>,
) -> Response {
    planned_answer(s.broker.request_change(ChangeRequest::LeavePartition { broker, partition }, q.dry_run).await)
}

/// `?dryRun=true`: the change is planned and answered, and nothing changes.
#[derive(serde::Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct DryRun {
    #[serde(default)]
    dry_run: bool,
}

/// `body` as JSON of `T` (`None` when empty), or a 400 answer naming the shape expected.
fn parse_body<T: serde::de::DeserializeOwned>(body: &[u8], shape: &str) -> Result<Option<T>, Box<Response>> {
    if body.is_empty() {
        return Ok(None);
    }
    serde_json::from_slice(body).map(Some).map_err(|e| {
        Box::new((StatusCode::BAD_REQUEST, Json(json!({ "message": format!("the body must be {shape}: {e}") }))).into_response())
    })
}

/// `POST /actuator/cluster/brokers` with the wanted broker ids (Zeebe 8.5's scaling request,
/// e.g. `[0, 1, 2, 3, 4]`): the partitions are spread round-robin over exactly these brokers
/// with the same replication factor; brokers added join before the brokers removed leave.
async fn scale_brokers(State(s): State<ManagementState>, Query(q): Query<DryRun>, body: axum::body::Bytes) -> Response {
    let wanted: Vec<u64> = match parse_body(&body, "the wanted broker ids, e.g. [0, 1, 2]") {
        Ok(Some(ids)) => ids,
        Ok(None) => {
            return (StatusCode::BAD_REQUEST, Json(json!({ "message": "the body must be the wanted broker ids, e.g. [0, 1, 2]" })))
                .into_response()
        }
        Err(answer) => return *answer,
    };
    planned_answer(s.broker.request_change(ChangeRequest::Brokers(wanted.into_iter().collect()), q.dry_run).await)
}

/// `POST /actuator/cluster/brokers/{brokerId}`: adds the broker (it takes its share of the
/// partitions' replicas).
async fn add_broker(State(s): State<ManagementState>, Path(broker): Path<u64>, Query(q): Query<DryRun>) -> Response {
    planned_answer(s.broker.request_change(ChangeRequest::AddBroker(broker), q.dry_run).await)
}

/// `DELETE /actuator/cluster/brokers/{brokerId}`: removes the broker once its replicas moved
/// to the others (400 when fewer brokers than the replication factor would be left).
async fn remove_broker(State(s): State<ManagementState>, Path(broker): Path<u64>, Query(q): Query<DryRun>) -> Response {
    planned_answer(s.broker.request_change(ChangeRequest::RemoveBroker(broker), q.dry_run).await)
}

/// The body of Zeebe 8.8's `PATCH /actuator/cluster`.
#[derive(serde::Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct ReconfigureBody {
    #[serde(default)]
    brokers: ReconfigureBrokers,
    #[serde(default)]
    partitions: ReconfigurePartitions,
}

#[derive(serde::Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct ReconfigureBrokers {
    #[serde(default)]
    add: Vec<u64>,
    #[serde(default)]
    remove: Vec<u64>,
    count: Option<u64>,
}

#[derive(serde::Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ReconfigurePartitions {
    count: Option<u32>,
    replication_factor: Option<u32>,
}

/// `PATCH /actuator/cluster` (Zeebe 8.8): `{"brokers": {"add": [..], "remove": [..]} or
/// {"count": n}, "partitions": {"replicationFactor": n}}`, planned as the broker scaling is;
/// or `{"partitions": {"count": n}}` with more partitions than there are (on its own): the
/// new partitions are bootstrapped, get every deployment, then take new instances (a smaller
/// count is refused with 400, as Zeebe 8.8 refuses it).
async fn reconfigure(State(s): State<ManagementState>, Query(q): Query<DryRun>, body: axum::body::Bytes) -> Response {
    let shape =
        "{\"brokers\": {\"add\": [ids], \"remove\": [ids], \"count\": n}, \"partitions\": {\"count\": n, \"replicationFactor\": n}}";
    let body: ReconfigureBody = match parse_body(&body, shape) {
        Ok(b) => b.unwrap_or_default(),
        Err(answer) => return *answer,
    };
    let request = ChangeRequest::Reconfigure {
        add: body.brokers.add,
        remove: body.brokers.remove,
        count: body.brokers.count,
        replication_factor: body.partitions.replication_factor,
        partition_count: body.partitions.count,
    };
    planned_answer(s.broker.request_change(request, q.dry_run).await)
}

/// A planned change as Zeebe's `PlannedOperationsResponse` (`changeId`, `currentTopology`,
/// `plannedChanges`, `expectedTopology`), or the refusal: 409 while another change runs, 400
/// for an impossible one, 502 when the coordinator could not be reached.
fn planned_answer(planned: Result<waggle_broker::PlannedChange, waggle_broker::ChangeError>) -> Response {
    use waggle_broker::topology::TopologyError;
    use waggle_broker::ChangeError;
    match planned {
        Ok(p) => (
            StatusCode::ACCEPTED,
            Json(json!({
                "changeId": p.change_id,
                "currentTopology": p.current.brokers_json(),
                "plannedChanges": p.planned,
                "expectedTopology": p.expected.brokers_json(),
                "dryRun": p.dry_run,
            })),
        )
            .into_response(),
        Err(e) => {
            let code = match &e {
                ChangeError::Invalid(TopologyError::Conflict(_)) => StatusCode::CONFLICT,
                ChangeError::Invalid(_) | ChangeError::Unsupported(_) | ChangeError::NotClustered => StatusCode::BAD_REQUEST,
                ChangeError::CoordinatorUnreachable { .. } => StatusCode::BAD_GATEWAY,
                ChangeError::Io(_) => StatusCode::INTERNAL_SERVER_ERROR,
            };
            (code, Json(json!({ "message": e.to_string() }))).into_response()
        }
    }
}

/// `/actuator/cluster`'s body for `topology` (brokers and the standalone gateway alike);
/// `indexes` gives a partition's applied and snapshot indexes where the node knows them (a
/// broker, of its own replicas).
pub fn cluster_json(topology: &ClusterTopology, indexes: impl Fn(u64, u16) -> Option<(u64, u64)>) -> serde_json::Value {
    let brokers: Vec<_> = topology
        .brokers
        .iter()
        .map(|b| {
            let partitions: Vec<_> = b
                .partitions
                .iter()
                .map(|p| {
                    let mut partition = json!({
                        "partitionId": p.partition_id,
                        "role": p.role.name(),
                        "health": p.health.name(),
                        "healthy": p.health == waggle_gateway::PartitionHealth::Healthy,
                        "term": p.term,
                    });
                    if let Some((applied, snapshot)) = indexes(b.node_id, p.partition_id) {
                        partition["appliedIndex"] = json!(applied);
                        partition["snapshotIndex"] = json!(snapshot);
                    }
                    partition
                })
                .collect();
            json!({ "nodeId": b.node_id, "host": b.host, "port": b.port, "version": b.version, "partitions": partitions })
        })
        .collect();
    json!({
        "brokers": brokers,
        "clusterSize": topology.cluster_size,
        "partitionsCount": topology.partitions_count,
        "replicationFactor": topology.replication_factor,
    })
}

/// Open incidents as `{"items": [...]}` (`?processInstanceKey=` to filter). Keys are decimal strings, as JSON numbers
/// lose precision above 2^53.
async fn incidents(State(s): State<ManagementState>, Query(q): Query<HashMap<String, String>>) -> Response {
    let pi = match q.get("processInstanceKey").map(|v| v.parse::<i64>()) {
        None => None,
        Some(Ok(k)) => Some(k),
        Some(Err(_)) => return (StatusCode::BAD_REQUEST, "processInstanceKey must be a number").into_response(),
    };
    let list: Vec<_> = s
        .broker
        .incidents(pi)
        .into_iter()
        .map(|(key, i)| {
            json!({
                "key": key.to_string(),
                "processInstanceKey": i.process_instance_key.to_string(),
                "elementInstanceKey": i.element_instance_key.to_string(),
                "elementId": i.element_id,
                "jobKey": i.job_key.to_string(),
                "errorType": i.error_type,
                "errorMessage": i.error_message,
            })
        })
        .collect();
    Json(json!({ "items": list })).into_response()
}

/// The partitions this node holds, each with its role, the leader it knows of and its term.
async fn partitions(State(s): State<ManagementState>) -> Json<serde_json::Value> {
    let items: Vec<_> = s
        .broker
        .status()
        .into_iter()
        .map(|p| {
            let checkpoint = s.broker.last_checkpoint(p.partition_id).ok().flatten();
            json!({
                "partitionId": p.partition_id,
                "role": p.role,
                "leader": p.leader,
                "term": p.term,
                "appliedIndex": p.applied_index,
                // the last backup checkpoint this replica applied (CHECKPOINT CREATED)
                "lastCheckpointId": checkpoint.as_ref().map(|c| c.checkpoint_id),
                "lastCheckpointPosition": checkpoint.as_ref().map(|c| c.checkpoint_position),
            })
        })
        .collect();
    Json(json!({ "nodeId": s.node_id, "items": items }))
}

/// A digest of a partition's committed state on this node (it reads every row: diagnostics and
/// tests): replicas at the same applied index have the same `rows` and `hash`.
async fn digest(State(s): State<ManagementState>, Path(id): Path<u16>) -> Response {
    let broker = s.broker.clone();
    match tokio::task::spawn_blocking(move || broker.state_digest(id)).await {
        Ok(Ok(d)) => {
            Json(json!({ "partitionId": id, "appliedIndex": d.applied_index, "rows": d.rows, "hash": d.hash.to_string() })).into_response()
        }
        Ok(Err(e)) => (StatusCode::NOT_FOUND, e.to_string()).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

/// A backup error as the backup API answers it: 404 for an unknown backup, 409 for an id not
/// above the store's newest or a led partition's last checkpoint or while the partition count
/// grows, 400 when no store is configured or the backup is not complete.
fn backup_error(e: BackupError) -> Response {
    let code = match &e {
        BackupError::NotFound(_) => StatusCode::NOT_FOUND,
        BackupError::Conflict(..) | BackupError::CheckpointNotNewer { .. } | BackupError::Scaling(_) => StatusCode::CONFLICT,
        BackupError::NotConfigured | BackupError::Incomplete(..) | BackupError::TargetNotEmpty(_) => StatusCode::BAD_REQUEST,
        BackupError::Io(_) => StatusCode::INTERNAL_SERVER_ERROR,
    };
    (code, Json(json!({ "message": e.to_string() }))).into_response()
}

/// `POST /actuator/backups` with `{"backupId": N}` (Zeebe's): 202 once every partition's
/// CHECKPOINT command is answered (in a cluster, on any broker: whichever broker leads a
/// partition when its checkpoint applies, or after a failover, uploads its part); its progress
/// shows in `GET /actuator/backups/N`.
async fn take_backup(State(s): State<ManagementState>, body: axum::body::Bytes) -> Response {
    let id = serde_json::from_slice::<serde_json::Value>(&body).ok().and_then(|v| v.get("backupId").and_then(|id| id.as_u64()));
    let Some(id) = id else {
        return (StatusCode::BAD_REQUEST, Json(json!({ "message": "expected a body {\"backupId\": <a positive integer>}" })))
            .into_response();
    };
    match s.broker.take_backup(id).await {
        Ok(()) => (
            StatusCode::ACCEPTED,
            Json(json!({ "message": format!("A backup with id {id} has been scheduled. Use GET actuator/backups/{id} to monitor the status.") })),
        )
            .into_response(),
        Err(e) => backup_error(e),
    }
}

/// Runs `f` on the backup store (its calls block) off the async threads.
async fn with_store<T: Send + 'static>(
    s: &ManagementState,
    f: impl FnOnce(&waggle_broker::backup::BackupStore) -> Result<T, BackupError> + Send + 'static,
) -> Result<T, BackupError> {
    let broker = s.broker.clone();
    tokio::task::spawn_blocking(move || f(broker.backup_store().ok_or(BackupError::NotConfigured)?))
        .await
        .map_err(|e| BackupError::Io(e.to_string()))?
}

/// `GET /actuator/backups`: every backup in the store, each as `GET /actuator/backups/{id}`.
async fn list_backups(State(s): State<ManagementState>) -> Response {
    match with_store(&s, |store| store.list()).await {
        Ok(list) => Json(serde_json::to_value(list).expect("json")).into_response(),
        Err(e) => backup_error(e),
    }
}

/// `GET /actuator/backups/{id}`: the backup's state (COMPLETED, IN_PROGRESS, FAILED,
/// INCOMPLETE) and each partition's (`details`), as every partition's leader recorded it in
/// the shared store.
async fn backup_status(State(s): State<ManagementState>, Path(id): Path<u64>) -> Response {
    match with_store(&s, move |store| store.info(id)).await {
        Ok(info) => Json(serde_json::to_value(info).expect("json")).into_response(),
        Err(e) => backup_error(e),
    }
}

/// `DELETE /actuator/backups/{id}`: removes every part of the backup from the store (204); its
/// id is not taken again.
async fn delete_backup(State(s): State<ManagementState>, Path(id): Path<u64>) -> Response {
    match with_store(&s, move |store| store.delete(id)).await {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(e) => backup_error(e),
    }
}
