//! The gRPC gateway: Zeebe 8.5's `gateway_protocol.Gateway` service over the broker.
//!
//! Owns: request validation (INVALID_ARGUMENT with a message, as Zeebe's gateway), routing by
//! partition (the key's partition, round robin for new instances, the correlation key's hash
//! for messages), long polling for `ActivateJobs`, job streams, gRPC status mapping.
//! Does not own: processing (the broker and engine).
// Every fallible function here answers a gRPC call, and tonic's `Status` is the answer: boxing it
// would only add an allocation on the error path.
#![allow(clippy::result_large_err)]

pub mod authenticate;
mod backend;
pub mod caller;
mod coalescing_io;
mod jobs;
mod metrics;
mod status;
pub mod tenancy;
mod topology;
mod transport;
mod user_tasks;

use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::Stream;
use prost::Message;
use tonic::{Request, Response, Status};
use waggle_broker::{Broker, BrokerError, RemoteCluster};
use waggle_engine::Command;
use waggle_protocol::gateway as pb;
use waggle_protocol::gateway::gateway_server::Gateway;
use waggle_protocol::value::*;
use waggle_protocol::{Intent, PartitionId, Record, RecordValue, DEFAULT_TENANT};

pub use authenticate::{Authentication, Authenticator};
pub use backend::Backend;
pub use caller::Caller;
pub use coalescing_io::CoalescingIo;
pub use metrics::GatewayMetrics;
pub use pb::gateway_server::GatewayServer;
pub use topology::{
    ClusterTopology, PartitionHealth, PartitionRole, StandaloneTopology, TopologyBroker, TopologyPartition, TopologySource,
};
pub use transport::GrpcServer;

/// Gateway settings.
#[derive(Debug, Clone)]
pub struct GatewayConfig {
    /// Largest accepted request, in bytes (Zeebe's default: 4 MB).
    pub max_message_bytes: usize,
    /// Long-polling time for `ActivateJobs` when the request gives none.
    pub long_polling_timeout: Duration,
    pub host: String,
    pub port: u16,
    /// Multi-tenancy (Zeebe's `multiTenancy.enabled`): requests name their tenant; off, only
    /// the default tenant is accepted (see [`tenancy`]).
    pub multi_tenancy: bool,
}

impl Default for GatewayConfig {
    fn default() -> Self {
        Self {
            max_message_bytes: 4 * 1024 * 1024,
            long_polling_timeout: Duration::from_secs(10),
            host: "127.0.0.1".into(),
            port: 26500,
            multi_tenancy: false,
        }
    }
}

/// How long a new instance waits for its partition's leader before it is tried on the next
/// partition (in a cluster: a failover takes 0.5-1 s, and finding the new leader a few tries).
const CREATE_PARTITION_WINDOW: Duration = Duration::from_millis(500);
/// How long a new instance is tried on partition after partition before it fails as unavailable.
const CREATE_WINDOW: Duration = Duration::from_secs(8);
/// How long a message command refused because its correlation key is moving to another
/// partition (a partition count that grew) is asked again, by the count the gateway knows at
/// each try, and how long between tries.
const RELOCATION_WINDOW: Duration = Duration::from_secs(10);
const RELOCATION_RETRY: Duration = Duration::from_millis(100);

pub struct GatewayService {
    broker: Backend,
    config: GatewayConfig,
    metrics: Arc<GatewayMetrics>,
    /// What `Topology` answers.
    topology: Arc<dyn TopologySource>,
}

type Stream_<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send + 'static>>;

impl GatewayService {
    pub fn new(broker: Arc<Broker>, config: GatewayConfig, registry: &prometheus::Registry) -> Self {
        let topology = Arc::new(StandaloneTopology { broker: broker.clone(), host: config.host.clone(), port: config.port });
        Self { broker: Backend::Broker(broker), config, metrics: Arc::new(GatewayMetrics::new(registry)), topology }
    }

    /// A standalone gateway in front of `cluster`, describing it with `topology`.
    pub fn remote(
        cluster: Arc<RemoteCluster>,
        config: GatewayConfig,
        registry: &prometheus::Registry,
        topology: Arc<dyn TopologySource>,
    ) -> Self {
        Self { broker: Backend::Remote(cluster), config, metrics: Arc::new(GatewayMetrics::new(registry)), topology }
    }

    /// Answers `Topology` from `source` instead of the standalone node's description.
    pub fn with_topology(mut self, source: Arc<dyn TopologySource>) -> Self {
        self.topology = source;
        self
    }

    /// The tonic server for this service, with the message size limit applied.
    fn tonic_server(self: &Arc<Self>) -> GatewayServer<GatewayService> {
        // Zeebe's gateway takes gzip-compressed requests (the Node SDK sends them) and answers
        // compressed to clients that ask for it
        GatewayServer::from_arc(self.clone())
            .max_decoding_message_size(self.decode_limit())
            .max_encoding_message_size(usize::MAX)
            .accept_compressed(tonic::codec::CompressionEncoding::Gzip)
            .send_compressed(tonic::codec::CompressionEncoding::Gzip)
    }

    /// tonic's limit for a request message: above ours, so that an oversized request gets
    /// Zeebe's RESOURCE_EXHAUSTED from `check_size` rather than tonic's OUT_OF_RANGE.
    fn decode_limit(&self) -> usize {
        self.config.max_message_bytes.saturating_mul(2).max(1024)
    }

    fn check_size<M: Message>(&self, message: &M) -> Result<(), Status> {
        let len = message.encoded_len();
        if len > self.config.max_message_bytes {
            return Err(Status::resource_exhausted(format!("gRPC message exceeds maximum size {}: {len}", self.config.max_message_bytes)));
        }
        Ok(())
    }

    async fn submit(&self, partition: PartitionId, key: i64, intent: Intent, value: RecordValue) -> Result<Record, Status> {
        self.submit_as(partition, key, intent, value, None).await
    }

    /// Submits a command acting only on entities of `tenants` (see [`Self::authorized_tenants`];
    /// `None`: any): the engine rejects one on another tenant's entity NOT_FOUND.
    async fn submit_as(
        &self,
        partition: PartitionId,
        key: i64,
        intent: Intent,
        value: RecordValue,
        tenants: Option<Vec<String>>,
    ) -> Result<Record, Status> {
        let command = Command { authorized_tenants: tenants, ..Command::new(key, intent, value) };
        let record = self.broker.submit(partition, command).await.map_err(status::broker)?;
        if record.rejection.is_some() {
            return Err(status::rejection(&record));
        }
        Ok(record)
    }

    /// A message command on the partition of `correlation_key`: asked again while that
    /// partition refuses it as moving the key to another one (a rejection UNAVAILABLE: the
    /// partition count grew), each time on the partition by the count the gateway knows then,
    /// for at most [`RELOCATION_WINDOW`]; then the refusal is the answer (UNAVAILABLE, retryable).
    async fn submit_by_correlation_key(&self, correlation_key: &str, intent: Intent, value: RecordValue) -> Result<Record, Status> {
        let deadline = tokio::time::Instant::now() + RELOCATION_WINDOW;
        loop {
            let partition = self.broker.partition_of_correlation_key(correlation_key);
            let record = self.broker.submit(partition, Command::new(-1, intent, value.clone())).await.map_err(status::broker)?;
            match &record.rejection {
                Some(r) if r.rejection_type == waggle_protocol::RejectionType::Unavailable && tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(RELOCATION_RETRY).await;
                }
                Some(_) => return Err(status::rejection(&record)),
                None => return Ok(record),
            }
        }
    }

    /// Correlates a message at once (Zeebe 8.8's MESSAGE_CORRELATION CORRELATE, which the gRPC
    /// protocol lacks; REST's `POST /v2/messages/correlation`) on the partition of its
    /// correlation key: the CORRELATED record, with the message's key and the process instance
    /// it reached, once that is known; NOT_FOUND when nothing waits for it.
    /// `tenant_id`: the tenant asked for ("" for none), checked as for gRPC requests.
    pub async fn correlate_message(
        &self,
        name: String,
        correlation_key: String,
        variables: String,
        tenant_id: String,
        caller: Option<&Caller>,
    ) -> Result<Record, Status> {
        self.measured("CorrelateMessage", async {
            let tenant_id = self.tenant(caller, "CorrelateMessage", &tenant_id)?;
            status::check_variables("variables", &variables)?;
            let value = RecordValue::MessageCorrelation(MessageCorrelationRecord {
                name,
                correlation_key: correlation_key.clone(),
                variables,
                tenant_id,
                message_key: -1,
                process_instance_key: -1,
            });
            self.submit_by_correlation_key(&correlation_key, Intent::Correlate, value).await
        })
        .await
    }

    /// Updates a job's retries and timeout in one JOB UPDATE command (Camunda 8.8's, which the
    /// gRPC protocol lacks; REST's `PATCH /v2/jobs/{jobKey}`): `None` leaves an attribute as it
    /// is. The UPDATED record, or the rejection (every invalid part named) as a status.
    pub async fn update_job(
        &self,
        job_key: i64,
        retries: Option<i32>,
        timeout: Option<i64>,
        caller: Option<&Caller>,
    ) -> Result<Record, Status> {
        let tenants = self.authorized_tenants(caller);
        self.measured("UpdateJob", async {
            let partition = self.partition_of(job_key, "UPDATE")?;
            let value = RecordValue::Job(JobRecord {
                retries: retries.unwrap_or(JobRecord::UNCHANGED_RETRIES),
                timeout_ms: timeout.unwrap_or(JobRecord::UNCHANGED_TIMEOUT),
                ..job_value(job_key)
            });
            self.submit_as(partition, job_key, Intent::Update, value, tenants).await
        })
        .await
    }

    /// The tenant a request acts for (see [`tenancy::tenant_of`]).
    fn tenant(&self, caller: Option<&Caller>, rpc: &str, tenant_id: &str) -> Result<String, Status> {
        tenancy::tenant_of(self.config.multi_tenancy, caller, rpc, tenant_id)
    }

    /// The tenants a command by key from `caller` may touch (Zeebe 8.5's authorized tenants,
    /// sent with the command): the caller's, with multi-tenancy and authentication on; `None`
    /// (no limit) otherwise: without multi-tenancy everything is the default tenant's, and
    /// without a caller authentication is off.
    pub fn authorized_tenants(&self, caller: Option<&Caller>) -> Option<Vec<String>> {
        caller.filter(|_| self.config.multi_tenancy).map(|c| c.tenants.clone())
    }

    /// Whether multi-tenancy is on (REST decides its tenant checks by it).
    pub fn multi_tenancy(&self) -> bool {
        self.config.multi_tenancy
    }

    fn partition_of(&self, key: i64, what: &str) -> Result<PartitionId, Status> {
        self.broker.partition_of_key(key).ok_or_else(|| {
            Status::not_found(format!(
                "Command '{what}' rejected with code 'NOT_FOUND': Expected to find an entity with key '{key}', but the key does not belong to any partition"
            ))
        })
    }

    async fn measured<T>(&self, method: &'static str, f: impl std::future::Future<Output = Result<T, Status>>) -> Result<T, Status> {
        let start = Instant::now();
        let result = f.await;
        self.metrics.observe(method, result.as_ref().err().map(|s| s.code()), start.elapsed());
        result
    }

    async fn create_instance(
        &self,
        req: pb::CreateProcessInstanceRequest,
        awaiting: bool,
        fetch: Vec<String>,
        caller: Option<&Caller>,
    ) -> Result<Record, Status> {
        let rpc = if awaiting { "CreateProcessInstanceWithResult" } else { "CreateProcessInstance" };
        let tenant_id = self.tenant(caller, rpc, &req.tenant_id)?;
        status::check_variables("variables", &req.variables)?;
        if req.bpmn_process_id.is_empty() {
            // as Zeebe 8.5.8's engine: without a process id the key is looked up, and a key of 0
            // (gRPC's default, so also a request with neither) is one that names no process
            if req.process_definition_key == 0 {
                return Err(Status::not_found(
                    "Command 'CREATE' rejected with code 'NOT_FOUND': Expected to find process definition with key '0', but none found",
                ));
            }
            if req.process_definition_key < 0 {
                return Err(status::invalid(
                    "Command 'CREATE' rejected with code 'INVALID_ARGUMENT': Expected at least a bpmnProcessId or a key greater than -1, but none given",
                ));
            }
        }
        let value = RecordValue::ProcessInstanceCreation(ProcessInstanceCreationRecord {
            bpmn_process_id: req.bpmn_process_id,
            version: req.version,
            process_definition_key: req.process_definition_key,
            process_instance_key: -1,
            variables: req.variables,
            fetch_variables: fetch,
            start_instructions: req.start_instructions.into_iter().map(|i| i.element_id).collect(),
            tenant_id,
        });
        let intent = if awaiting { Intent::CreateWithAwaitingResult } else { Intent::Create };
        let partition = self.broker.next_partition();
        if !self.broker.routes() {
            return self.submit(partition, -1, intent, value).await;
        }
        self.create_anywhere(partition, Command::new(-1, intent, value)).await
    }

    /// A creation in a cluster: tried on `first`, and while its partition has no leader to take
    /// it (or is overloaded) on the next partitions in turn, as Zeebe's gateway does; only a
    /// command certainly not taken is sent again, so no instance is created twice.
    async fn create_anywhere(&self, first: PartitionId, command: Command) -> Result<Record, Status> {
        // (only partitions that hold every deployment)
        let n = self.broker.routed_partition_count();
        let deadline = tokio::time::Instant::now() + CREATE_WINDOW;
        let mut last = BrokerError::Unavailable(first);
        for attempt in 0u32.. {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if left.is_zero() {
                break;
            }
            let partition = ((u32::from(first) - 1 + attempt) % u32::from(n)) as PartitionId + 1;
            match self.broker.submit_within(partition, command.clone(), CREATE_PARTITION_WINDOW.min(left)).await {
                Ok(record) if record.rejection.is_some() => return Err(status::rejection(&record)),
                Ok(record) => return Ok(record),
                Err(e @ (BrokerError::NotLeader(_) | BrokerError::Overloaded | BrokerError::DiskSpaceLow(_))) => {
                    tracing::debug!(partition, error = %e, "a new instance goes to the next partition");
                    // every partition refused: give the cluster a moment before the next round
                    if matches!(e, BrokerError::Overloaded | BrokerError::DiskSpaceLow(_)) && (attempt + 1) % u32::from(n) == 0 {
                        tokio::time::sleep(Duration::from_millis(25)).await;
                    }
                    last = e;
                }
                Err(e) => return Err(status::broker(e)),
            }
        }
        Err(status::broker(match last {
            BrokerError::NotLeader(p) => BrokerError::Unavailable(p),
            other => other,
        }))
    }

    async fn deploy(&self, resources: Vec<DeploymentResource>, tenant_id: String) -> Result<(i64, DeploymentRecord), Status> {
        if resources.is_empty() {
            return Err(status::invalid("Expected to deploy at least one resource, but none given"));
        }
        let value = RecordValue::Deployment(DeploymentRecord { resources, processes_metadata: vec![], tenant_id, ..Default::default() });
        let command = Command::new(-1, Intent::Create, value);
        let record = self.broker.deploy(command).await.map_err(status::broker)?;
        if record.rejection.is_some() {
            return Err(status::rejection(&record));
        }
        match record.value {
            RecordValue::Deployment(d) => Ok((record.key, d)),
            _ => Err(Status::internal("unexpected answer to a deployment")),
        }
    }
}

fn job_value(job_key: i64) -> JobRecord {
    JobRecord { deadline_ms: -1, element_instance_key: -1, process_instance_key: job_key, ..Default::default() }
}

#[tonic::async_trait]
impl Gateway for GatewayService {
    type ActivateJobsStream = Stream_<pb::ActivateJobsResponse>;
    type StreamActivatedJobsStream = Stream_<pb::ActivatedJob>;

    async fn activate_jobs(&self, request: Request<pb::ActivateJobsRequest>) -> Result<Response<Self::ActivateJobsStream>, Status> {
        let caller = request.extensions().get::<Caller>().cloned();
        let mut req = request.into_inner();
        self.measured("ActivateJobs", async {
            self.check_size(&req)?;
            req.tenant_ids = tenancy::tenants_of(self.config.multi_tenancy, caller.as_ref(), "ActivateJobs", &req.tenant_ids)?;
            jobs::validate_activation(&req)?;
            let jobs = jobs::activate_with_long_polling(&self.broker, &req, self.config.long_polling_timeout).await?;
            let responses = jobs::split_responses(jobs, self.config.max_message_bytes);
            Ok(Response::new(Box::pin(jobs::ActivatedResponses::new(self.broker.clone(), responses)) as Self::ActivateJobsStream))
        })
        .await
    }

    async fn stream_activated_jobs(
        &self,
        request: Request<pb::StreamActivatedJobsRequest>,
    ) -> Result<Response<Self::StreamActivatedJobsStream>, Status> {
        let caller = request.extensions().get::<Caller>().cloned();
        let mut req = request.into_inner();
        self.measured("StreamActivatedJobs", async {
            req.tenant_ids = tenancy::tenants_of(self.config.multi_tenancy, caller.as_ref(), "StreamActivatedJobs", &req.tenant_ids)?;
            let stream = jobs::open_job_stream(&self.broker, req)?;
            Ok(Response::new(stream))
        })
        .await
    }

    async fn cancel_process_instance(
        &self,
        request: Request<pb::CancelProcessInstanceRequest>,
    ) -> Result<Response<pb::CancelProcessInstanceResponse>, Status> {
        let tenants = self.authorized_tenants(request.extensions().get::<Caller>());
        let req = request.into_inner();
        self.measured("CancelProcessInstance", async {
            let key = req.process_instance_key;
            let partition = self.partition_of(key, "CANCEL")?;
            let value = RecordValue::ProcessInstance(ProcessInstanceRecord { process_instance_key: key, ..Default::default() });
            self.submit_as(partition, key, Intent::Cancel, value, tenants).await?;
            Ok(Response::new(pb::CancelProcessInstanceResponse {}))
        })
        .await
    }

    async fn complete_job(&self, request: Request<pb::CompleteJobRequest>) -> Result<Response<pb::CompleteJobResponse>, Status> {
        let tenants = self.authorized_tenants(request.extensions().get::<Caller>());
        let req = request.into_inner();
        self.measured("CompleteJob", async {
            self.check_size(&req)?;
            status::check_variables("variables", &req.variables)?;
            let partition = self.partition_of(req.job_key, "COMPLETE")?;
            let value = RecordValue::Job(JobRecord { variables: (&req.variables).into(), ..job_value(req.job_key) });
            self.submit_as(partition, req.job_key, Intent::Complete, value, tenants).await?;
            Ok(Response::new(pb::CompleteJobResponse {}))
        })
        .await
    }

    async fn create_process_instance(
        &self,
        request: Request<pb::CreateProcessInstanceRequest>,
    ) -> Result<Response<pb::CreateProcessInstanceResponse>, Status> {
        let caller = request.extensions().get::<Caller>().cloned();
        let req = request.into_inner();
        self.measured("CreateProcessInstance", async {
            self.check_size(&req)?;
            let record = self.create_instance(req, false, vec![], caller.as_ref()).await?;
            let RecordValue::ProcessInstanceCreation(c) = record.value else {
                return Err(Status::internal("unexpected answer to a process instance creation"));
            };
            Ok(Response::new(pb::CreateProcessInstanceResponse {
                process_definition_key: c.process_definition_key,
                bpmn_process_id: c.bpmn_process_id,
                version: c.version,
                process_instance_key: c.process_instance_key,
                tenant_id: c.tenant_id,
            }))
        })
        .await
    }

    async fn create_process_instance_with_result(
        &self,
        request: Request<pb::CreateProcessInstanceWithResultRequest>,
    ) -> Result<Response<pb::CreateProcessInstanceWithResultResponse>, Status> {
        let caller = request.extensions().get::<Caller>().cloned();
        let mut req = request.into_inner();
        self.measured("CreateProcessInstanceWithResult", async {
            self.check_size(&req)?;
            let Some(inner) = req.request.take() else {
                return Err(status::invalid("Expected a process instance creation request, but none given"));
            };
            // Zeebe: the request timeout, or the gateway's default (10 s) when 0
            let timeout = if req.request_timeout > 0 { Duration::from_millis(req.request_timeout as u64) } else { Duration::from_secs(10) };
            let result = tokio::time::timeout(timeout, self.create_instance(inner, true, req.fetch_variables, caller.as_ref())).await;
            let record = match result {
                Ok(r) => r?,
                Err(_) => {
                    return Err(Status::deadline_exceeded(format!(
                        "Time out between gateway and broker: Request timed out after {}",
                        humantime(timeout)
                    )))
                }
            };
            match record.value {
                RecordValue::ProcessInstanceResult(r) => Ok(Response::new(pb::CreateProcessInstanceWithResultResponse {
                    process_definition_key: r.process_definition_key,
                    bpmn_process_id: r.bpmn_process_id,
                    version: r.version,
                    process_instance_key: r.process_instance_key,
                    variables: r.variables,
                    tenant_id: r.tenant_id,
                })),
                _ => Err(Status::internal("unexpected answer to a process instance creation with result")),
            }
        })
        .await
    }

    /// Evaluates a decision by key, or the newest version of a decision id, on any partition
    /// (deployments reach them all); a failed evaluation is an answer carrying the failure
    /// (https://docs.camunda.io/docs/apis-tools/zeebe-api/gateway-service/#evaluatedecision-rpc).
    async fn evaluate_decision(
        &self,
        request: Request<pb::EvaluateDecisionRequest>,
    ) -> Result<Response<pb::EvaluateDecisionResponse>, Status> {
        let caller = request.extensions().get::<Caller>().cloned();
        let req = request.into_inner();
        self.measured("EvaluateDecision", async {
            self.check_size(&req)?;
            let tenant_id = self.tenant(caller.as_ref(), "EvaluateDecision", &req.tenant_id)?;
            status::check_variables("variables", &req.variables)?;
            let value = RecordValue::DecisionEvaluation(DecisionEvaluationRecord {
                decision_key: req.decision_key,
                decision_id: req.decision_id,
                variables: req.variables,
                tenant_id,
                ..Default::default()
            });
            let partition = self.broker.next_partition();
            let record = self.submit(partition, -1, Intent::Evaluate, value).await?;
            let RecordValue::DecisionEvaluation(e) = record.value else {
                return Err(Status::internal("unexpected answer to a decision evaluation"));
            };
            Ok(Response::new(evaluation_response(record.key, e)))
        })
        .await
    }

    async fn deploy_process(&self, request: Request<pb::DeployProcessRequest>) -> Result<Response<pb::DeployProcessResponse>, Status> {
        let caller = request.extensions().get::<Caller>().cloned();
        let req = request.into_inner();
        self.measured("DeployProcess", async {
            self.check_size(&req)?;
            // the deprecated RPC names no tenant: the default one's (Zeebe's RequestMapper)
            let tenant_id = self.tenant(caller.as_ref(), "DeployProcess", DEFAULT_TENANT)?;
            let resources =
                req.processes.into_iter().map(|p| DeploymentResource { resource_name: p.name, resource: p.definition }).collect();
            let (key, deployment) = self.deploy(resources, tenant_id).await?;
            let processes = deployment
                .processes_metadata
                .into_iter()
                .map(|m| pb::ProcessMetadata {
                    bpmn_process_id: m.bpmn_process_id,
                    version: m.version,
                    process_definition_key: m.process_definition_key,
                    resource_name: m.resource_name,
                    tenant_id: deployment.tenant_id.clone(),
                })
                .collect();
            Ok(Response::new(pb::DeployProcessResponse { key, processes }))
        })
        .await
    }

    async fn deploy_resource(&self, request: Request<pb::DeployResourceRequest>) -> Result<Response<pb::DeployResourceResponse>, Status> {
        let caller = request.extensions().get::<Caller>().cloned();
        let req = request.into_inner();
        self.measured("DeployResource", async {
            self.check_size(&req)?;
            let tenant_id = self.tenant(caller.as_ref(), "DeployResource", &req.tenant_id)?;
            let resources = req.resources.into_iter().map(|r| DeploymentResource { resource_name: r.name, resource: r.content }).collect();
            let (key, deployment) = self.deploy(resources, tenant_id).await?;
            Ok(Response::new(deploy_response(key, deployment)))
        })
        .await
    }

    async fn fail_job(&self, request: Request<pb::FailJobRequest>) -> Result<Response<pb::FailJobResponse>, Status> {
        let tenants = self.authorized_tenants(request.extensions().get::<Caller>());
        let req = request.into_inner();
        self.measured("FailJob", async {
            self.check_size(&req)?;
            status::check_variables("variables", &req.variables)?;
            let partition = self.partition_of(req.job_key, "FAIL")?;
            let value = RecordValue::Job(JobRecord {
                retries: req.retries,
                error_message: req.error_message.clone(),
                retry_backoff_ms: req.retry_back_off,
                variables: (&req.variables).into(),
                ..job_value(req.job_key)
            });
            self.submit_as(partition, req.job_key, Intent::Fail, value, tenants).await?;
            Ok(Response::new(pb::FailJobResponse {}))
        })
        .await
    }

    async fn throw_error(&self, request: Request<pb::ThrowErrorRequest>) -> Result<Response<pb::ThrowErrorResponse>, Status> {
        let tenants = self.authorized_tenants(request.extensions().get::<Caller>());
        let req = request.into_inner();
        self.measured("ThrowError", async {
            self.check_size(&req)?;
            status::check_variables("variables", &req.variables)?;
            // an empty error code is accepted, as by Zeebe 8.5.8: no catch event matches it
            let partition = self.partition_of(req.job_key, "THROW_ERROR")?;
            let value = RecordValue::Job(JobRecord {
                error_code: req.error_code.clone(),
                error_message: req.error_message.clone(),
                variables: (&req.variables).into(),
                ..job_value(req.job_key)
            });
            self.submit_as(partition, req.job_key, Intent::ThrowError, value, tenants).await?;
            Ok(Response::new(pb::ThrowErrorResponse {}))
        })
        .await
    }

    async fn publish_message(&self, request: Request<pb::PublishMessageRequest>) -> Result<Response<pb::PublishMessageResponse>, Status> {
        let caller = request.extensions().get::<Caller>().cloned();
        let req = request.into_inner();
        self.measured("PublishMessage", async {
            self.check_size(&req)?;
            let tenant_id = self.tenant(caller.as_ref(), "PublishMessage", &req.tenant_id)?;
            // an empty name is accepted, as by Zeebe 8.5.8 (docs/compatibility.md)
            status::check_variables("variables", &req.variables)?;
            let value = RecordValue::Message(MessageRecord {
                name: req.name.clone(),
                correlation_key: req.correlation_key.clone(),
                time_to_live_ms: req.time_to_live,
                message_id: req.message_id.clone(),
                variables: req.variables.clone(),
                deadline_ms: -1,
                tenant_id: tenant_id.clone(),
            });
            let record = self.submit_by_correlation_key(&req.correlation_key, Intent::Publish, value).await?;
            Ok(Response::new(pb::PublishMessageResponse { key: record.key, tenant_id }))
        })
        .await
    }

    async fn resolve_incident(
        &self,
        request: Request<pb::ResolveIncidentRequest>,
    ) -> Result<Response<pb::ResolveIncidentResponse>, Status> {
        let tenants = self.authorized_tenants(request.extensions().get::<Caller>());
        let req = request.into_inner();
        self.measured("ResolveIncident", async {
            let partition = self.partition_of(req.incident_key, "RESOLVE")?;
            let value = RecordValue::Incident(IncidentRecord::default());
            self.submit_as(partition, req.incident_key, Intent::Resolve, value, tenants).await?;
            Ok(Response::new(pb::ResolveIncidentResponse {}))
        })
        .await
    }

    async fn set_variables(&self, request: Request<pb::SetVariablesRequest>) -> Result<Response<pb::SetVariablesResponse>, Status> {
        let tenants = self.authorized_tenants(request.extensions().get::<Caller>());
        let req = request.into_inner();
        self.measured("SetVariables", async {
            self.check_size(&req)?;
            if req.variables.trim().is_empty() {
                return Err(status::invalid("Expected to set variables, but the document was empty"));
            }
            status::check_variables("variables", &req.variables)?;
            let partition = self.partition_of(req.element_instance_key, "UPDATE")?;
            let value = RecordValue::VariableDocument(VariableDocumentRecord {
                scope_key: req.element_instance_key,
                update_semantics: if req.local { UpdateSemantics::Local } else { UpdateSemantics::Propagate },
                variables: req.variables.clone(),
            });
            let record = self.submit_as(partition, -1, Intent::Update, value, tenants).await?;
            Ok(Response::new(pb::SetVariablesResponse { key: record.key }))
        })
        .await
    }

    async fn topology(&self, _request: Request<pb::TopologyRequest>) -> Result<Response<pb::TopologyResponse>, Status> {
        self.measured("Topology", async { Ok(Response::new(self.topology.topology().to_response())) }).await
    }

    async fn update_job_retries(
        &self,
        request: Request<pb::UpdateJobRetriesRequest>,
    ) -> Result<Response<pb::UpdateJobRetriesResponse>, Status> {
        let tenants = self.authorized_tenants(request.extensions().get::<Caller>());
        let req = request.into_inner();
        self.measured("UpdateJobRetries", async {
            let partition = self.partition_of(req.job_key, "UPDATE_RETRIES")?;
            let value = RecordValue::Job(JobRecord { retries: req.retries, ..job_value(req.job_key) });
            self.submit_as(partition, req.job_key, Intent::UpdateRetries, value, tenants).await?;
            Ok(Response::new(pb::UpdateJobRetriesResponse {}))
        })
        .await
    }

    async fn update_job_timeout(
        &self,
        request: Request<pb::UpdateJobTimeoutRequest>,
    ) -> Result<Response<pb::UpdateJobTimeoutResponse>, Status> {
        let tenants = self.authorized_tenants(request.extensions().get::<Caller>());
        let req = request.into_inner();
        self.measured("UpdateJobTimeout", async {
            let partition = self.partition_of(req.job_key, "UPDATE_TIMEOUT")?;
            let value = RecordValue::Job(JobRecord { timeout_ms: req.timeout, ..job_value(req.job_key) });
            self.submit_as(partition, req.job_key, Intent::UpdateTimeout, value, tenants).await?;
            Ok(Response::new(pb::UpdateJobTimeoutResponse {}))
        })
        .await
    }

    async fn modify_process_instance(
        &self,
        request: Request<pb::ModifyProcessInstanceRequest>,
    ) -> Result<Response<pb::ModifyProcessInstanceResponse>, Status> {
        let tenants = self.authorized_tenants(request.extensions().get::<Caller>());
        let req = request.into_inner();
        self.measured("ModifyProcessInstance", async {
            self.check_size(&req)?;
            let key = req.process_instance_key;
            let mut value = ProcessInstanceModificationRecord { process_instance_key: key, ..Default::default() };
            for activate in &req.activate_instructions {
                let mut variable_instructions = Vec::new();
                for v in &activate.variable_instructions {
                    status::check_variables("variables", &v.variables)?;
                    variable_instructions.push(VariableInstruction { element_id: v.scope_id.clone(), variables: v.variables.clone() });
                }
                value.activate_instructions.push(ActivateInstruction {
                    element_id: activate.element_id.clone(),
                    ancestor_scope_key: activate.ancestor_element_instance_key,
                    variable_instructions,
                    ancestor_scope_keys: Vec::new(),
                });
            }
            value.terminate_instructions = req.terminate_instructions.iter().map(|t| t.element_instance_key).collect();
            let partition = self.partition_of(key, "MODIFY")?;
            self.submit_as(partition, key, Intent::Modify, RecordValue::ProcessInstanceModification(value), tenants).await?;
            Ok(Response::new(pb::ModifyProcessInstanceResponse {}))
        })
        .await
    }

    async fn migrate_process_instance(
        &self,
        request: Request<pb::MigrateProcessInstanceRequest>,
    ) -> Result<Response<pb::MigrateProcessInstanceResponse>, Status> {
        let tenants = self.authorized_tenants(request.extensions().get::<Caller>());
        let req = request.into_inner();
        self.measured("MigrateProcessInstance", async {
            self.check_size(&req)?;
            let key = req.process_instance_key;
            let plan = req.migration_plan.unwrap_or_default();
            let value = ProcessInstanceMigrationRecord {
                process_instance_key: key,
                target_process_definition_key: plan.target_process_definition_key,
                mapping_instructions: plan.mapping_instructions.into_iter().map(|m| (m.source_element_id, m.target_element_id)).collect(),
            };
            let partition = self.partition_of(key, "MIGRATE")?;
            self.submit_as(partition, key, Intent::Migrate, RecordValue::ProcessInstanceMigration(value), tenants).await?;
            Ok(Response::new(pb::MigrateProcessInstanceResponse {}))
        })
        .await
    }

    /// Deletes a decision requirements graph (with its decisions) or a form by key, on
    /// partition 1, which distributes the deletion to the others
    /// (https://docs.camunda.io/docs/apis-tools/zeebe-api/gateway-service/#deleteresource-rpc).
    async fn delete_resource(&self, request: Request<pb::DeleteResourceRequest>) -> Result<Response<pb::DeleteResourceResponse>, Status> {
        let tenants = self.authorized_tenants(request.extensions().get::<Caller>());
        let req = request.into_inner();
        self.measured("DeleteResource", async {
            // the RPC names no tenant: with multi-tenancy on the resource is found in any
            // tenant the caller may use (its authorized tenants)
            let tenant_id = if self.config.multi_tenancy { String::new() } else { DEFAULT_TENANT.to_string() };
            let value = RecordValue::ResourceDeletion(ResourceDeletionRecord { resource_key: req.resource_key, tenant_id });
            let command = Command { authorized_tenants: tenants, ..Command::new(req.resource_key, Intent::Delete, value) };
            let record = self.broker.deploy(command).await.map_err(status::broker)?;
            if record.rejection.is_some() {
                return Err(status::rejection(&record));
            }
            Ok(Response::new(pb::DeleteResourceResponse {}))
        })
        .await
    }

    async fn broadcast_signal(
        &self,
        request: Request<pb::BroadcastSignalRequest>,
    ) -> Result<Response<pb::BroadcastSignalResponse>, Status> {
        let caller = request.extensions().get::<Caller>().cloned();
        let req = request.into_inner();
        self.measured("BroadcastSignal", async {
            self.check_size(&req)?;
            let tenant_id = self.tenant(caller.as_ref(), "BroadcastSignal", &req.tenant_id)?;
            status::check_variables("variables", &req.variables)?;
            // the first partition takes the broadcast and hands it on to the others
            let value = RecordValue::Signal(SignalRecord {
                signal_name: req.signal_name.clone(),
                variables: if req.variables.is_empty() { "{}".into() } else { req.variables.clone() },
                tenant_id: tenant_id.clone(),
            });
            let record = self.submit(1, -1, Intent::Broadcast, value).await?;
            Ok(Response::new(pb::BroadcastSignalResponse { key: record.key, tenant_id }))
        })
        .await
    }
}

/// The DeployResource answer from DEPLOYMENT CREATED: processes, decisions, decision
/// requirements, then forms, as Zeebe's gateway lists them.
fn deploy_response(key: i64, d: DeploymentRecord) -> pb::DeployResourceResponse {
    use pb::deployment::Metadata;
    let tenant = d.tenant_id;
    let processes = d.processes_metadata.into_iter().map(|m| {
        Metadata::Process(pb::ProcessMetadata {
            bpmn_process_id: m.bpmn_process_id,
            version: m.version,
            process_definition_key: m.process_definition_key,
            resource_name: m.resource_name,
            tenant_id: tenant.clone(),
        })
    });
    let decisions = d.decisions_metadata.into_iter().map(|m| {
        Metadata::Decision(pb::DecisionMetadata {
            dmn_decision_id: m.decision_id,
            dmn_decision_name: m.decision_name,
            version: m.version,
            decision_key: m.decision_key,
            dmn_decision_requirements_id: m.decision_requirements_id,
            decision_requirements_key: m.decision_requirements_key,
            tenant_id: tenant.clone(),
        })
    });
    let drgs = d.decision_requirements_metadata.into_iter().map(|m| {
        Metadata::DecisionRequirements(pb::DecisionRequirementsMetadata {
            dmn_decision_requirements_id: m.decision_requirements_id,
            dmn_decision_requirements_name: m.decision_requirements_name,
            version: m.decision_requirements_version,
            decision_requirements_key: m.decision_requirements_key,
            resource_name: m.resource_name,
            tenant_id: tenant.clone(),
        })
    });
    let forms = d.form_metadata.into_iter().map(|m| {
        Metadata::Form(pb::FormMetadata {
            form_id: m.form_id,
            version: m.version,
            form_key: m.form_key,
            resource_name: m.resource_name,
            tenant_id: tenant.clone(),
        })
    });
    let deployments =
        processes.chain(decisions).chain(drgs).chain(forms).map(|metadata| pb::Deployment { metadata: Some(metadata) }).collect();
    pb::DeployResourceResponse { key, deployments, tenant_id: tenant }
}

/// The EvaluateDecision answer from DECISION_EVALUATION EVALUATED or FAILED (`key`: the
/// evaluation's, Zeebe's `decisionInstanceKey`).
fn evaluation_response(key: i64, e: DecisionEvaluationRecord) -> pb::EvaluateDecisionResponse {
    pb::EvaluateDecisionResponse {
        decision_key: e.decision_key,
        decision_id: e.decision_id,
        decision_name: e.decision_name,
        decision_version: e.decision_version,
        decision_requirements_id: e.decision_requirements_id,
        decision_requirements_key: e.decision_requirements_key,
        decision_output: e.decision_output,
        evaluated_decisions: e
            .evaluated_decisions
            .into_iter()
            .map(|d| pb::EvaluatedDecision {
                decision_key: d.decision_key,
                decision_id: d.decision_id,
                decision_name: d.decision_name,
                decision_version: d.decision_version,
                decision_type: d.decision_type,
                decision_output: d.decision_output,
                matched_rules: d
                    .matched_rules
                    .into_iter()
                    .map(|r| pb::MatchedDecisionRule {
                        rule_id: r.rule_id,
                        rule_index: r.rule_index,
                        evaluated_outputs: r
                            .evaluated_outputs
                            .into_iter()
                            .map(|o| pb::EvaluatedDecisionOutput {
                                output_id: o.output_id,
                                output_name: o.output_name,
                                output_value: o.output_value,
                            })
                            .collect(),
                    })
                    .collect(),
                evaluated_inputs: d
                    .evaluated_inputs
                    .into_iter()
                    .map(|i| pb::EvaluatedDecisionInput { input_id: i.input_id, input_name: i.input_name, input_value: i.input_value })
                    .collect(),
                tenant_id: d.tenant_id,
            })
            .collect(),
        failed_decision_id: e.failed_decision_id,
        failure_message: e.evaluation_failure_message,
        tenant_id: e.tenant_id,
        decision_instance_key: key,
    }
}

fn humantime(d: Duration) -> String {
    format!("PT{}S", d.as_secs_f64())
}
