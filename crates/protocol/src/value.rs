//! Record values, one per value type, with Zeebe's field names (snake_case).
//!
//! Variable documents travel as JSON text (`variables`), parsed only where they are used.

use serde::{Deserialize, Serialize};

use crate::SharedStr;

/// The value of a record. The variant matches the record's value type.
///
/// In the log (postcard, which is not self-describing) a value is its variant's position and
/// its fields in order, so variants are only ever appended, and a struct stored in the log
/// never gains a field: a deployment with decisions or forms is written as a variant of its
/// own at the end ([`Wire`]), one without them exactly as before the DMN fields existed.
#[derive(Debug, Clone, PartialEq)]
pub enum RecordValue {
    Deployment(DeploymentRecord),
    Process(ProcessRecord),
    ProcessInstance(ProcessInstanceRecord),
    ProcessInstanceCreation(ProcessInstanceCreationRecord),
    ProcessInstanceResult(ProcessInstanceResultRecord),
    Job(JobRecord),
    JobBatch(JobBatchRecord),
    Variable(VariableRecord),
    VariableDocument(VariableDocumentRecord),
    Incident(IncidentRecord),
    Message(MessageRecord),
    Timer(TimerRecord),
    MessageSubscription(MessageSubscriptionRecord),
    ProcessMessageSubscription(ProcessMessageSubscriptionRecord),
    MessageStartEventSubscription(MessageStartEventSubscriptionRecord),
    Signal(SignalRecord),
    SignalSubscription(SignalSubscriptionRecord),
    CommandDistribution(CommandDistributionRecord),
    ProcessInstanceModification(ProcessInstanceModificationRecord),
    ProcessInstanceMigration(ProcessInstanceMigrationRecord),
    ProcessInstanceBatch(ProcessInstanceBatchRecord),
    DecisionRequirements(DecisionRequirementsRecord),
    Decision(DecisionRecord),
    DecisionEvaluation(DecisionEvaluationRecord),
    Form(FormRecord),
    ResourceDeletion(ResourceDeletionRecord),
    CompensationSubscription(CompensationSubscriptionRecord),
    UserTask(UserTaskRecord),
    MessageCorrelation(MessageCorrelationRecord),
    ProcessEvent(ProcessEventRecord),
    Checkpoint(CheckpointRecord),
    Scale(ScaleRecord),
    MessageRelocation(MessageRelocationRecord),
}

/// A value as the log lays it out (serialization side; see [`RecordValue`]).
#[derive(Serialize)]
#[serde(rename = "RecordValue")]
enum WireRef<'a> {
    Deployment(DeploymentV1Ref<'a>),
    Process(&'a ProcessRecord),
    ProcessInstance(&'a ProcessInstanceRecord),
    ProcessInstanceCreation(&'a ProcessInstanceCreationRecord),
    ProcessInstanceResult(&'a ProcessInstanceResultRecord),
    Job(&'a JobRecord),
    JobBatch(&'a JobBatchRecord),
    Variable(&'a VariableRecord),
    VariableDocument(&'a VariableDocumentRecord),
    Incident(&'a IncidentRecord),
    Message(&'a MessageRecord),
    Timer(&'a TimerRecord),
    MessageSubscription(&'a MessageSubscriptionRecord),
    ProcessMessageSubscription(&'a ProcessMessageSubscriptionRecord),
    MessageStartEventSubscription(&'a MessageStartEventSubscriptionRecord),
    Signal(&'a SignalRecord),
    SignalSubscription(&'a SignalSubscriptionRecord),
    CommandDistribution(&'a CommandDistributionRecord),
    ProcessInstanceModification(&'a ProcessInstanceModificationRecord),
    ProcessInstanceMigration(&'a ProcessInstanceMigrationRecord),
    ProcessInstanceBatch(&'a ProcessInstanceBatchRecord),
    DecisionRequirements(&'a DecisionRequirementsRecord),
    Decision(&'a DecisionRecord),
    DecisionEvaluation(&'a DecisionEvaluationRecord),
    Form(&'a FormRecord),
    ResourceDeletion(&'a ResourceDeletionRecord),
    /// A deployment with decisions, decision requirements or forms.
    DeploymentV2(&'a DeploymentRecord),
    CompensationSubscription(&'a CompensationSubscriptionRecord),
    UserTask(&'a UserTaskRecord),
    MessageCorrelation(&'a MessageCorrelationRecord),
    ProcessEvent(&'a ProcessEventRecord),
    /// A job batch naming tenants other than the default one (multi-tenancy).
    JobBatchTenants(&'a JobBatchRecord, &'a Vec<String>),
    Checkpoint(&'a CheckpointRecord),
    Scale(&'a ScaleRecord),
    MessageRelocation(&'a MessageRelocationRecord),
}

/// A value as the log lays it out (deserialization side; see [`RecordValue`]).
#[derive(Deserialize)]
#[serde(rename = "RecordValue")]
enum Wire {
    Deployment(DeploymentV1),
    Process(ProcessRecord),
    ProcessInstance(ProcessInstanceRecord),
    ProcessInstanceCreation(ProcessInstanceCreationRecord),
    ProcessInstanceResult(ProcessInstanceResultRecord),
    Job(JobRecord),
    JobBatch(JobBatchRecord),
    Variable(VariableRecord),
    VariableDocument(VariableDocumentRecord),
    Incident(IncidentRecord),
    Message(MessageRecord),
    Timer(TimerRecord),
    MessageSubscription(MessageSubscriptionRecord),
    ProcessMessageSubscription(ProcessMessageSubscriptionRecord),
    MessageStartEventSubscription(MessageStartEventSubscriptionRecord),
    Signal(SignalRecord),
    SignalSubscription(SignalSubscriptionRecord),
    CommandDistribution(CommandDistributionRecord),
    ProcessInstanceModification(ProcessInstanceModificationRecord),
    ProcessInstanceMigration(ProcessInstanceMigrationRecord),
    ProcessInstanceBatch(ProcessInstanceBatchRecord),
    DecisionRequirements(DecisionRequirementsRecord),
    Decision(DecisionRecord),
    DecisionEvaluation(DecisionEvaluationRecord),
    Form(FormRecord),
    ResourceDeletion(ResourceDeletionRecord),
    DeploymentV2(DeploymentRecord),
    CompensationSubscription(CompensationSubscriptionRecord),
    UserTask(UserTaskRecord),
    MessageCorrelation(MessageCorrelationRecord),
    ProcessEvent(ProcessEventRecord),
    JobBatchTenants(JobBatchRecord, Vec<String>),
    Checkpoint(CheckpointRecord),
    Scale(ScaleRecord),
    MessageRelocation(MessageRelocationRecord),
}

/// [`DeploymentRecord`] as it was before decisions and forms: how a deployment without them
/// is written (byte for byte as before), and how one of an older log is read.
#[derive(Deserialize)]
struct DeploymentV1 {
    resources: Vec<DeploymentResource>,
    processes_metadata: Vec<ProcessMetadata>,
    tenant_id: String,
}

#[derive(Serialize)]
struct DeploymentV1Ref<'a> {
    resources: &'a Vec<DeploymentResource>,
    processes_metadata: &'a Vec<ProcessMetadata>,
    tenant_id: &'a String,
}

impl Serialize for RecordValue {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let wire = match self {
            RecordValue::Deployment(d) if d.has_only_processes() => WireRef::Deployment(DeploymentV1Ref {
                resources: &d.resources,
                processes_metadata: &d.processes_metadata,
                tenant_id: &d.tenant_id,
            }),
            RecordValue::Deployment(d) => WireRef::DeploymentV2(d),
            RecordValue::Process(x) => WireRef::Process(x),
            RecordValue::ProcessInstance(x) => WireRef::ProcessInstance(x),
            RecordValue::ProcessInstanceCreation(x) => WireRef::ProcessInstanceCreation(x),
            RecordValue::ProcessInstanceResult(x) => WireRef::ProcessInstanceResult(x),
            RecordValue::Job(x) => WireRef::Job(x),
            RecordValue::JobBatch(x) if !x.names_other_tenants() => WireRef::JobBatch(x),
            RecordValue::JobBatch(x) => WireRef::JobBatchTenants(x, &x.tenant_ids),
            RecordValue::Variable(x) => WireRef::Variable(x),
            RecordValue::VariableDocument(x) => WireRef::VariableDocument(x),
            RecordValue::Incident(x) => WireRef::Incident(x),
            RecordValue::Message(x) => WireRef::Message(x),
            RecordValue::Timer(x) => WireRef::Timer(x),
            RecordValue::MessageSubscription(x) => WireRef::MessageSubscription(x),
            RecordValue::ProcessMessageSubscription(x) => WireRef::ProcessMessageSubscription(x),
            RecordValue::MessageStartEventSubscription(x) => WireRef::MessageStartEventSubscription(x),
            RecordValue::Signal(x) => WireRef::Signal(x),
            RecordValue::SignalSubscription(x) => WireRef::SignalSubscription(x),
            RecordValue::CommandDistribution(x) => WireRef::CommandDistribution(x),
            RecordValue::ProcessInstanceModification(x) => WireRef::ProcessInstanceModification(x),
            RecordValue::ProcessInstanceMigration(x) => WireRef::ProcessInstanceMigration(x),
            RecordValue::ProcessInstanceBatch(x) => WireRef::ProcessInstanceBatch(x),
            RecordValue::DecisionRequirements(x) => WireRef::DecisionRequirements(x),
            RecordValue::Decision(x) => WireRef::Decision(x),
            RecordValue::DecisionEvaluation(x) => WireRef::DecisionEvaluation(x),
            RecordValue::Form(x) => WireRef::Form(x),
            RecordValue::ResourceDeletion(x) => WireRef::ResourceDeletion(x),
            RecordValue::CompensationSubscription(x) => WireRef::CompensationSubscription(x),
            RecordValue::UserTask(x) => WireRef::UserTask(x),
            RecordValue::MessageCorrelation(x) => WireRef::MessageCorrelation(x),
            RecordValue::ProcessEvent(x) => WireRef::ProcessEvent(x),
            RecordValue::Checkpoint(x) => WireRef::Checkpoint(x),
            RecordValue::Scale(x) => WireRef::Scale(x),
            RecordValue::MessageRelocation(x) => WireRef::MessageRelocation(x),
        };
        wire.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for RecordValue {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(match Wire::deserialize(deserializer)? {
            Wire::Deployment(d) => RecordValue::Deployment(DeploymentRecord {
                resources: d.resources,
                processes_metadata: d.processes_metadata,
                tenant_id: d.tenant_id,
                ..Default::default()
            }),
            Wire::DeploymentV2(d) => RecordValue::Deployment(d),
            Wire::Process(x) => RecordValue::Process(x),
            Wire::ProcessInstance(x) => RecordValue::ProcessInstance(x),
            Wire::ProcessInstanceCreation(x) => RecordValue::ProcessInstanceCreation(x),
            Wire::ProcessInstanceResult(x) => RecordValue::ProcessInstanceResult(x),
            Wire::Job(x) => RecordValue::Job(x),
            Wire::JobBatch(x) => RecordValue::JobBatch(x),
            Wire::Variable(x) => RecordValue::Variable(x),
            Wire::VariableDocument(x) => RecordValue::VariableDocument(x),
            Wire::Incident(x) => RecordValue::Incident(x),
            Wire::Message(x) => RecordValue::Message(x),
            Wire::Timer(x) => RecordValue::Timer(x),
            Wire::MessageSubscription(x) => RecordValue::MessageSubscription(x),
            Wire::ProcessMessageSubscription(x) => RecordValue::ProcessMessageSubscription(x),
            Wire::MessageStartEventSubscription(x) => RecordValue::MessageStartEventSubscription(x),
            Wire::Signal(x) => RecordValue::Signal(x),
            Wire::SignalSubscription(x) => RecordValue::SignalSubscription(x),
            Wire::CommandDistribution(x) => RecordValue::CommandDistribution(x),
            Wire::ProcessInstanceModification(x) => RecordValue::ProcessInstanceModification(x),
            Wire::ProcessInstanceMigration(x) => RecordValue::ProcessInstanceMigration(x),
            Wire::ProcessInstanceBatch(x) => RecordValue::ProcessInstanceBatch(x),
            Wire::DecisionRequirements(x) => RecordValue::DecisionRequirements(x),
            Wire::Decision(x) => RecordValue::Decision(x),
            Wire::DecisionEvaluation(x) => RecordValue::DecisionEvaluation(x),
            Wire::Form(x) => RecordValue::Form(x),
            Wire::ResourceDeletion(x) => RecordValue::ResourceDeletion(x),
            Wire::CompensationSubscription(x) => RecordValue::CompensationSubscription(x),
            Wire::UserTask(x) => RecordValue::UserTask(x),
            Wire::MessageCorrelation(x) => RecordValue::MessageCorrelation(x),
            Wire::ProcessEvent(x) => RecordValue::ProcessEvent(x),
            Wire::JobBatchTenants(x, tenant_ids) => RecordValue::JobBatch(JobBatchRecord { tenant_ids, ..x }),
            Wire::Checkpoint(x) => RecordValue::Checkpoint(x),
            Wire::Scale(x) => RecordValue::Scale(x),
            Wire::MessageRelocation(x) => RecordValue::MessageRelocation(x),
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeploymentResource {
    pub resource_name: String,
    pub resource: Vec<u8>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessMetadata {
    pub bpmn_process_id: String,
    pub version: i32,
    pub process_definition_key: i64,
    pub resource_name: String,
    pub checksum: u32,
    /// True when an identical resource was already deployed: no new version was created.
    pub duplicate: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct DeploymentRecord {
    pub resources: Vec<DeploymentResource>,
    pub processes_metadata: Vec<ProcessMetadata>,
    pub tenant_id: String,
    /// The deployment's decisions (Zeebe's `decisionsMetadata`).
    pub decisions_metadata: Vec<DecisionRecord>,
    /// Its decision requirements graphs, without their resource (`decisionRequirementsMetadata`).
    pub decision_requirements_metadata: Vec<DecisionRequirementsRecord>,
    /// Its forms, without their resource (`formMetadata`).
    pub form_metadata: Vec<FormRecord>,
}

impl DeploymentRecord {
    /// Whether the deployment holds nothing but processes (then it is written in the log as
    /// deployments were before decisions and forms).
    pub fn has_only_processes(&self) -> bool {
        self.decisions_metadata.is_empty() && self.decision_requirements_metadata.is_empty() && self.form_metadata.is_empty()
    }
}

/// A deployed decision (Zeebe's DECISION record; also an entry of a deployment's
/// `decisionsMetadata`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct DecisionRecord {
    pub decision_id: String,
    pub decision_name: String,
    pub version: i32,
    pub decision_key: i64,
    pub decision_requirements_id: String,
    pub decision_requirements_key: i64,
    /// True when an identical resource was already deployed: no new version was created.
    pub duplicate: bool,
    pub tenant_id: String,
}

/// A deployed decision requirements graph, one DMN resource (Zeebe's DECISION_REQUIREMENTS
/// record; in a deployment's metadata without its resource).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct DecisionRequirementsRecord {
    pub decision_requirements_id: String,
    pub decision_requirements_name: String,
    pub decision_requirements_version: i32,
    pub decision_requirements_key: i64,
    pub namespace: String,
    pub resource_name: String,
    pub checksum: u32,
    pub resource: Vec<u8>,
    pub duplicate: bool,
    pub tenant_id: String,
}

/// A deployed form (Zeebe's FORM record; in a deployment's metadata without its resource).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct FormRecord {
    pub form_id: String,
    pub version: i32,
    pub form_key: i64,
    pub resource_name: String,
    pub checksum: u32,
    pub resource: Vec<u8>,
    pub duplicate: bool,
    pub tenant_id: String,
}

/// Zeebe's RESOURCE_DELETION: DELETE (DeleteResource) a decision requirements graph with its
/// decisions, or a form, by key; DELETED once done.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct ResourceDeletionRecord {
    pub resource_key: i64,
    pub tenant_id: String,
}

/// A decision evaluated (Zeebe's DECISION_EVALUATION: EVALUATE from EvaluateDecision,
/// EVALUATED or FAILED from it or from a business rule task). Outputs and values are JSON texts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct DecisionEvaluationRecord {
    pub decision_key: i64,
    pub decision_id: String,
    pub decision_name: String,
    pub decision_version: i32,
    pub decision_requirements_id: String,
    pub decision_requirements_key: i64,
    pub decision_output: String,
    /// The EVALUATE command's variables (a JSON object's text, "" for none).
    pub variables: String,
    pub bpmn_process_id: String,
    pub process_definition_key: i64,
    pub process_instance_key: i64,
    pub element_id: String,
    pub element_instance_key: i64,
    pub evaluated_decisions: Vec<EvaluatedDecisionValue>,
    pub evaluation_failure_message: String,
    pub failed_decision_id: String,
    pub tenant_id: String,
}

/// One decision of an evaluation (Zeebe's `EvaluatedDecisionValue`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct EvaluatedDecisionValue {
    pub decision_id: String,
    pub decision_name: String,
    pub decision_key: i64,
    pub decision_version: i32,
    /// `DECISION_TABLE` or `LITERAL_EXPRESSION`.
    pub decision_type: String,
    pub decision_output: String,
    pub evaluated_inputs: Vec<EvaluatedInputValue>,
    pub matched_rules: Vec<MatchedRuleValue>,
    pub tenant_id: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct EvaluatedInputValue {
    pub input_id: String,
    pub input_name: String,
    pub input_value: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct MatchedRuleValue {
    pub rule_id: String,
    /// From 1.
    pub rule_index: i32,
    pub evaluated_outputs: Vec<EvaluatedOutputValue>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct EvaluatedOutputValue {
    pub output_id: String,
    pub output_name: String,
    pub output_value: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessRecord {
    pub bpmn_process_id: String,
    pub version: i32,
    pub process_definition_key: i64,
    pub resource_name: String,
    pub resource: Vec<u8>,
    pub checksum: u32,
    pub tenant_id: String,
}

/// Encoded by `process_instance_serde`: the fields in order, `parent_element_instance_key` only
/// when `parent_process_instance_key` is a key (> 0), so that a record of an instance no call
/// activity created encodes exactly as before the field existed (state and log unchanged).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ProcessInstanceRecord {
    pub bpmn_process_id: SharedStr,
    pub version: i32,
    pub process_definition_key: i64,
    pub process_instance_key: i64,
    pub element_id: SharedStr,
    /// Key of the element instance that contains this one (-1 for the process itself).
    pub flow_scope_key: i64,
    /// Zeebe's BpmnElementType name, e.g. "SERVICE_TASK".
    pub bpmn_element_type: SharedStr,
    /// The process instance whose call activity created this instance (-1: none).
    pub parent_process_instance_key: i64,
    pub tenant_id: SharedStr,
    /// The call activity's element instance that created this instance (without a parent: the
    /// same as `parent_process_instance_key`, see `process_instance_serde`).
    pub parent_element_instance_key: i64,
}

/// Zeebe's PROCESS_INSTANCE_BATCH: the activation of a multi-instance body's inner instances,
/// spread over several batches (ACTIVATE commands, each activating a chunk and asking for the
/// next; ACTIVATED once every inner instance is activated).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct ProcessInstanceBatchRecord {
    pub process_instance_key: i64,
    /// The multi-instance body whose inner instances are activated.
    pub batch_element_instance_key: i64,
    /// The inner instances still to activate when the command was written.
    pub index: i64,
    pub tenant_id: SharedStr,
}

/// Zeebe's PROCESS_EVENT: an interrupting event that must wait until the element instances it
/// interrupts have terminated (Zeebe's `EventTriggerBehavior`): TRIGGERING keeps the trigger
/// (state `ET/`) while a multi-instance body's inner instances terminate over several batches;
/// TRIGGERED, written when the event is entered at last, removes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct ProcessEventRecord {
    /// The element instance the trigger waits on: the activity of a boundary event, the flow
    /// scope of an event subprocess.
    pub scope_key: i64,
    /// The boundary event, or the event subprocess's start event, that the trigger enters.
    pub target_element_id: String,
    /// The event's variables, a JSON object (empty: none).
    pub variables: String,
    pub process_definition_key: i64,
    pub process_instance_key: i64,
    pub tenant_id: String,
}

mod process_instance_serde;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct ProcessInstanceCreationRecord {
    pub bpmn_process_id: String,
    /// -1 for the latest version.
    pub version: i32,
    pub process_definition_key: i64,
    pub process_instance_key: i64,
    /// A JSON object as text ("" for none).
    pub variables: String,
    pub fetch_variables: Vec<String>,
    /// Element ids to start at instead of the none start event (start instructions).
    pub start_instructions: Vec<String>,
    pub tenant_id: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct ProcessInstanceResultRecord {
    pub bpmn_process_id: String,
    pub version: i32,
    pub process_definition_key: i64,
    pub process_instance_key: i64,
    pub variables: String,
    pub tenant_id: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct JobRecord {
    pub job_type: SharedStr,
    pub worker: SharedStr,
    pub retries: i32,
    pub retry_backoff_ms: i64,
    /// When a job failed with a back-off becomes activatable again (ms since the epoch).
    pub recurring_time_ms: i64,
    /// Activation deadline (ms since the epoch), -1 when not activated.
    pub deadline_ms: i64,
    pub timeout_ms: i64,
    pub error_message: String,
    pub error_code: String,
    /// Custom headers as a JSON object text.
    pub custom_headers: SharedStr,
    /// Variables as a JSON object text.
    pub variables: SharedStr,
    pub bpmn_process_id: SharedStr,
    pub process_definition_key: i64,
    pub process_definition_version: i32,
    pub process_instance_key: i64,
    pub element_id: SharedStr,
    pub element_instance_key: i64,
    pub tenant_id: SharedStr,
}

impl JobRecord {
    /// In a JOB UPDATE command (Camunda 8.8's single update, `PATCH /v2/jobs/{jobKey}`): the
    /// changeset leaves the retries as they are. Zeebe's record lists its `changedAttributes`;
    /// a record stored in the log never gains a field here, so an attribute the changeset
    /// leaves out carries this value instead.
    pub const UNCHANGED_RETRIES: i32 = i32::MIN;
    /// In a JOB UPDATE command: the changeset leaves the timeout (the deadline) as it is.
    pub const UNCHANGED_TIMEOUT: i64 = i64::MIN;
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct JobBatchRecord {
    pub job_type: String,
    pub worker: String,
    pub timeout_ms: i64,
    pub max_jobs_to_activate: i32,
    pub fetch_variables: Vec<String>,
    pub job_keys: Vec<i64>,
    pub jobs: Vec<JobRecord>,
    pub truncated: bool,
    /// The tenants whose jobs the batch may take (Zeebe 8.5's `tenantIds`); empty: only the
    /// default tenant's. Not in the struct's own layout: a batch naming tenants other than the
    /// default is written as the appended wire variant `JobBatchTenants` (see [`RecordValue`]).
    #[serde(skip)]
    pub tenant_ids: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct VariableRecord {
    pub name: String,
    /// The value as JSON text.
    pub value: String,
    pub scope_key: i64,
    pub process_instance_key: i64,
    pub process_definition_key: i64,
    pub bpmn_process_id: String,
    pub tenant_id: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum UpdateSemantics {
    Local,
    #[default]
    Propagate,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct VariableDocumentRecord {
    pub scope_key: i64,
    pub update_semantics: UpdateSemantics,
    pub variables: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct IncidentRecord {
    /// Zeebe's ErrorType name, e.g. "JOB_NO_RETRIES".
    pub error_type: String,
    pub error_message: String,
    pub bpmn_process_id: String,
    pub process_definition_key: i64,
    pub process_instance_key: i64,
    pub element_id: String,
    pub element_instance_key: i64,
    pub job_key: i64,
    pub variable_scope_key: i64,
    pub tenant_id: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct MessageRecord {
    pub name: String,
    pub correlation_key: String,
    pub time_to_live_ms: i64,
    pub message_id: String,
    pub variables: String,
    /// When the message expires (ms since the epoch).
    pub deadline_ms: i64,
    pub tenant_id: String,
}

/// A message correlated at once (Zeebe 8.8's MessageCorrelationRecord, REST
/// `POST /v2/messages/correlation`): published without time to live, it must reach a waiting
/// subscription or a message start event, else the command is rejected NOT_FOUND.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct MessageCorrelationRecord {
    pub name: String,
    pub correlation_key: String,
    pub variables: String,
    pub tenant_id: String,
    /// The key of the message the correlation published (-1 on the command).
    pub message_key: i64,
    /// The process instance the message reached (-1 until known).
    pub process_instance_key: i64,
}

/// A timer of a catch event or boundary event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct TimerRecord {
    /// The element instance that waits: the catch event itself, or the activity a boundary
    /// event is attached to.
    pub element_instance_key: i64,
    pub process_instance_key: i64,
    pub process_definition_key: i64,
    /// The event the timer triggers (the catch event or the boundary event).
    pub target_element_id: String,
    pub due_date_ms: i64,
    /// Repetitions left for a cycle (-1: unbounded; 1 for a single timer).
    pub repetitions: i32,
    pub tenant_id: String,
}

/// The message side of a subscription: lives on the partition of the correlation key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct MessageSubscriptionRecord {
    pub process_instance_key: i64,
    pub element_instance_key: i64,
    pub bpmn_process_id: String,
    pub message_name: String,
    pub correlation_key: String,
    /// The message being correlated (-1 before).
    pub message_key: i64,
    pub variables: String,
    pub interrupting: bool,
    pub tenant_id: String,
}

/// The process side of a subscription: lives on the partition of the process instance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct ProcessMessageSubscriptionRecord {
    pub process_instance_key: i64,
    pub element_instance_key: i64,
    pub bpmn_process_id: String,
    /// The catch event (or boundary event) that the message triggers.
    pub element_id: String,
    pub message_name: String,
    pub correlation_key: String,
    pub message_key: i64,
    pub variables: String,
    pub interrupting: bool,
    /// The partition that holds the message side.
    pub subscription_partition_id: u16,
    pub tenant_id: String,
}

/// A message start event of the latest version of a process, open on every partition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct MessageStartEventSubscriptionRecord {
    pub process_definition_key: i64,
    pub bpmn_process_id: String,
    pub start_event_id: String,
    pub message_name: String,
    /// Set when correlated: the message, its correlation key and the instance it started.
    pub message_key: i64,
    pub correlation_key: String,
    pub process_instance_key: i64,
    pub variables: String,
    pub tenant_id: String,
}

/// A broadcast signal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct SignalRecord {
    pub signal_name: String,
    pub variables: String,
    pub tenant_id: String,
}

/// A command one partition sends another, as Zeebe's COMMAND_DISTRIBUTION: DISTRIBUTING
/// (sender: the command waits in its outbox until acknowledged), ACKNOWLEDGE / ACKNOWLEDGED
/// (sender: the receiver processed it), RECEIVED (receiver: processed once, re-sent copies are
/// only acknowledged).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CommandDistributionRecord {
    /// The other partition: the receiver on the sender's records, the sender on RECEIVED.
    pub partition_id: u16,
    pub value_type: crate::record::ValueType,
    pub intent: crate::record::Intent,
    /// The key of the distributed command.
    pub command_key: i64,
    /// The distributed command's value (DISTRIBUTING only).
    pub command_value: Option<Box<RecordValue>>,
    /// RECEIVED only: every command of the sender below this distribution key was
    /// acknowledged to it (so the receiver can forget having processed them).
    pub acknowledged_below: i64,
}

/// A signal catch event, boundary event, event subprocess start or process start event that
/// waits for a signal by name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct SignalSubscriptionRecord {
    pub process_definition_key: i64,
    pub bpmn_process_id: String,
    pub catch_event_id: String,
    /// The element instance that waits (-1 for a start event of the process).
    pub catch_event_instance_key: i64,
    pub signal_name: String,
    pub tenant_id: String,
}

// Copies without the variables document, built field by field so that the document (possibly
// large) is never copied only to be dropped: the log's form of a record (see the engine's
// `log_form`).

impl ProcessInstanceCreationRecord {
    pub fn without_variables(&self) -> Self {
        Self {
            bpmn_process_id: self.bpmn_process_id.clone(),
            version: self.version,
            process_definition_key: self.process_definition_key,
            process_instance_key: self.process_instance_key,
            variables: String::new(),
            fetch_variables: self.fetch_variables.clone(),
            start_instructions: self.start_instructions.clone(),
            tenant_id: self.tenant_id.clone(),
        }
    }
}

impl JobRecord {
    pub fn without_variables(&self) -> Self {
        Self {
            job_type: self.job_type.clone(),
            worker: self.worker.clone(),
            retries: self.retries,
            retry_backoff_ms: self.retry_backoff_ms,
            recurring_time_ms: self.recurring_time_ms,
            deadline_ms: self.deadline_ms,
            timeout_ms: self.timeout_ms,
            error_message: self.error_message.clone(),
            error_code: self.error_code.clone(),
            custom_headers: self.custom_headers.clone(),
            variables: SharedStr::default(),
            bpmn_process_id: self.bpmn_process_id.clone(),
            process_definition_key: self.process_definition_key,
            process_definition_version: self.process_definition_version,
            process_instance_key: self.process_instance_key,
            element_id: self.element_id.clone(),
            element_instance_key: self.element_instance_key,
            tenant_id: self.tenant_id.clone(),
        }
    }
}

impl JobBatchRecord {
    /// Whether the batch names a tenant other than the default one (its log layout then
    /// carries the tenants).
    pub fn names_other_tenants(&self) -> bool {
        self.tenant_ids.iter().any(|t| t != crate::DEFAULT_TENANT)
    }

    /// The tenants the batch takes jobs of: its `tenant_ids`, or the default tenant alone.
    pub fn tenants(&self) -> Vec<&str> {
        if self.tenant_ids.is_empty() {
            vec![crate::DEFAULT_TENANT]
        } else {
            self.tenant_ids.iter().map(String::as_str).collect()
        }
    }

    /// The batch with every job's variables left out.
    pub fn without_variables(&self) -> Self {
        Self {
            job_type: self.job_type.clone(),
            worker: self.worker.clone(),
            timeout_ms: self.timeout_ms,
            max_jobs_to_activate: self.max_jobs_to_activate,
            fetch_variables: self.fetch_variables.clone(),
            job_keys: self.job_keys.clone(),
            jobs: self.jobs.iter().map(JobRecord::without_variables).collect(),
            truncated: self.truncated,
            tenant_ids: self.tenant_ids.clone(),
        }
    }
}

impl MessageRecord {
    pub fn without_variables(&self) -> Self {
        Self {
            name: self.name.clone(),
            correlation_key: self.correlation_key.clone(),
            time_to_live_ms: self.time_to_live_ms,
            message_id: self.message_id.clone(),
            variables: String::new(),
            deadline_ms: self.deadline_ms,
            tenant_id: self.tenant_id.clone(),
        }
    }
}

impl VariableDocumentRecord {
    pub fn without_variables(&self) -> Self {
        Self { scope_key: self.scope_key, update_semantics: self.update_semantics, variables: String::new() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `DeploymentRecord` as logs hold it from before decisions and forms, and the
    /// `RecordValue` it was in (variant 0).
    #[derive(Serialize)]
    struct OldDeploymentRecord {
        resources: Vec<DeploymentResource>,
        processes_metadata: Vec<ProcessMetadata>,
        tenant_id: String,
    }
    #[derive(Serialize)]
    enum OldRecordValue {
        Deployment(OldDeploymentRecord),
    }

    fn process_metadata() -> ProcessMetadata {
        ProcessMetadata {
            bpmn_process_id: "p".into(),
            version: 2,
            process_definition_key: 7,
            resource_name: "p.bpmn".into(),
            checksum: 9,
            duplicate: false,
        }
    }

    #[test]
    fn a_deployment_of_an_older_log_still_decodes_and_encodes_the_same() {
        let resources = vec![DeploymentResource { resource_name: "p.bpmn".into(), resource: b"<xml/>".to_vec() }];
        let old = OldRecordValue::Deployment(OldDeploymentRecord {
            resources: resources.clone(),
            processes_metadata: vec![process_metadata()],
            tenant_id: "<default>".into(),
        });
        let bytes = postcard::to_allocvec(&old).unwrap();
        let decoded: RecordValue = postcard::from_bytes(&bytes).unwrap();
        let expected = DeploymentRecord {
            resources,
            processes_metadata: vec![process_metadata()],
            tenant_id: "<default>".into(),
            ..Default::default()
        };
        assert_eq!(decoded, RecordValue::Deployment(expected));
        // a deployment of processes only is still written exactly as before
        assert_eq!(postcard::to_allocvec(&decoded).unwrap(), bytes);
    }

    #[test]
    fn a_deployment_with_decisions_and_forms_round_trips() {
        let value = RecordValue::Deployment(DeploymentRecord {
            processes_metadata: vec![process_metadata()],
            decisions_metadata: vec![DecisionRecord { decision_id: "d".into(), version: 1, decision_key: 3, ..Default::default() }],
            decision_requirements_metadata: vec![DecisionRequirementsRecord { decision_requirements_id: "r".into(), ..Default::default() }],
            form_metadata: vec![FormRecord { form_id: "f".into(), ..Default::default() }],
            tenant_id: "<default>".into(),
            ..Default::default()
        });
        let bytes = postcard::to_allocvec(&value).unwrap();
        assert_eq!(postcard::from_bytes::<RecordValue>(&bytes).unwrap(), value);
        let evaluation = RecordValue::DecisionEvaluation(DecisionEvaluationRecord {
            decision_id: "d".into(),
            evaluated_decisions: vec![EvaluatedDecisionValue {
                matched_rules: vec![MatchedRuleValue { rule_index: 1, ..Default::default() }],
                ..Default::default()
            }],
            ..Default::default()
        });
        let bytes = postcard::to_allocvec(&evaluation).unwrap();
        assert_eq!(postcard::from_bytes::<RecordValue>(&bytes).unwrap(), evaluation);
    }

    #[test]
    fn a_job_batch_keeps_its_layout_unless_it_names_other_tenants() {
        let plain = JobBatchRecord { job_type: "t".into(), max_jobs_to_activate: 2, ..Default::default() };
        let default_only = JobBatchRecord { tenant_ids: vec!["<default>".into()], ..plain.clone() };
        let bytes = postcard::to_allocvec(&RecordValue::JobBatch(plain.clone())).unwrap();
        assert_eq!(postcard::to_allocvec(&RecordValue::JobBatch(default_only)).unwrap(), bytes, "the default tenant: as before");
        let tenants = RecordValue::JobBatch(JobBatchRecord { tenant_ids: vec!["a".into(), "b".into()], ..plain });
        let other = postcard::to_allocvec(&tenants).unwrap();
        assert_ne!(other, bytes);
        assert_eq!(postcard::from_bytes::<RecordValue>(&other).unwrap(), tenants);
    }

    #[test]
    fn without_variables_keeps_everything_else() {
        let job = JobRecord {
            job_type: "t".into(),
            worker: "w".into(),
            retries: 3,
            deadline_ms: 9,
            custom_headers: "{\"h\":1}".into(),
            variables: "{\"a\":1}".into(),
            element_id: "task".into(),
            element_instance_key: 7,
            ..Default::default()
        };
        assert_eq!(job.without_variables(), JobRecord { variables: SharedStr::default(), ..job.clone() });
        let batch =
            JobBatchRecord { job_type: "t".into(), job_keys: vec![1, 2], jobs: vec![job.clone(), job.clone()], ..Default::default() };
        let stripped = batch.without_variables();
        assert_eq!(stripped.job_keys, vec![1, 2]);
        assert!(stripped.jobs.iter().all(|j| *j == job.without_variables()));
        let creation = ProcessInstanceCreationRecord {
            bpmn_process_id: "p".into(),
            variables: "{\"a\":1}".into(),
            start_instructions: vec!["s".into()],
            ..Default::default()
        };
        assert_eq!(creation.without_variables(), ProcessInstanceCreationRecord { variables: String::new(), ..creation.clone() });
        let message = MessageRecord { name: "m".into(), correlation_key: "k".into(), variables: "{}".into(), ..Default::default() };
        assert_eq!(message.without_variables(), MessageRecord { variables: String::new(), ..message.clone() });
        let doc = VariableDocumentRecord { scope_key: 5, update_semantics: UpdateSemantics::Local, variables: "{}".into() };
        assert_eq!(doc.without_variables(), VariableDocumentRecord { variables: String::new(), ..doc.clone() });
    }
}

/// A process instance modification (ModifyProcessInstance): elements to activate, element
/// instances to terminate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct ProcessInstanceModificationRecord {
    pub process_instance_key: i64,
    pub activate_instructions: Vec<ActivateInstruction>,
    /// Element instance keys.
    pub terminate_instructions: Vec<i64>,
}

/// Activates `element_id`, inside the instance `ancestor_scope_key` of one of its flow scopes
/// (-1 or 0: the one active instance of its nearest flow scope that has one).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct ActivateInstruction {
    pub element_id: String,
    pub ancestor_scope_key: i64,
    pub variable_instructions: Vec<VariableInstruction>,
    /// On the MODIFIED event: the flow scope instances the activation used or created (Zeebe's
    /// `ancestorScopeKeys`).
    pub ancestor_scope_keys: Vec<i64>,
}

/// Variables (a JSON object's text) set local to the instance of `element_id` (a flow scope
/// of the element activated, or the element itself; empty: the process instance).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct VariableInstruction {
    pub element_id: String,
    pub variables: String,
}

/// A process instance migration (MigrateProcessInstance): the instance moves to the target
/// process definition, each active element to the element its mapping instruction names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct ProcessInstanceMigrationRecord {
    pub process_instance_key: i64,
    pub target_process_definition_key: i64,
    /// (source element id, target element id).
    pub mapping_instructions: Vec<(String, String)>,
}

/// Zeebe's COMPENSATION_SUBSCRIPTION (8.5): a completed activity that can be compensated
/// (CREATED when it completes), its compensation triggered by a throw event (TRIGGERED), its
/// handler done (COMPLETED), or the instance over without compensation (DELETED). A completed
/// subprocess holding such subscriptions has one too, with an empty `compensation_handler_id`.
/// Fields as Zeebe's `CompensationSubscriptionRecordValue`
/// (zeebe/engine/src/test/.../bpmn/compensation/CompensationEventExecutionTest.java).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct CompensationSubscriptionRecord {
    pub tenant_id: String,
    pub process_instance_key: i64,
    pub process_definition_key: i64,
    pub compensable_activity_id: String,
    pub compensable_activity_instance_key: i64,
    /// The element id and instance of the scope the activity completed in.
    pub compensable_activity_scope_id: String,
    pub compensable_activity_scope_key: i64,
    /// Empty and -1 until a throw event triggers the subscription.
    pub throw_event_id: String,
    pub throw_event_instance_key: i64,
    /// Empty for a subprocess's subscription (its activities' handlers are invoked instead).
    pub compensation_handler_id: String,
    /// -1 until the handler is activated.
    pub compensation_handler_instance_key: i64,
    /// A JSON object (always `{}`: handlers run with the variables of their scope).
    pub variables: String,
}

/// Zeebe 8.5's USER_TASK: a Zeebe user task (`zeebe:userTask`). Events CREATING/CREATED when its
/// element activates, ASSIGNING/ASSIGNED, UPDATING/UPDATED, COMPLETING/COMPLETED,
/// CANCELING/CANCELED; commands COMPLETE, ASSIGN (also unassigning: an empty assignee), CLAIM
/// and UPDATE. Fields as Zeebe's `UserTaskRecordValue`
/// (https://docs.camunda.io/docs/components/modeler/bpmn/user-tasks/, Zeebe's
/// `zeebe/engine/src/test/.../processing/usertask/*Test.java`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct UserTaskRecord {
    pub user_task_key: i64,
    /// Empty: unassigned.
    pub assignee: String,
    pub candidate_groups: Vec<String>,
    pub candidate_users: Vec<String>,
    /// ISO 8601 date-time with offset, empty for none.
    pub due_date: String,
    pub follow_up_date: String,
    /// The linked form's key (-1: none).
    pub form_key: i64,
    pub external_form_reference: String,
    /// The task headers: a JSON object's text.
    pub custom_headers: String,
    /// A JSON object's text (the variables a COMPLETE command or its events carry; `{}` else).
    pub variables: String,
    /// On UPDATE/UPDATING/UPDATED: which attributes the changeset names (`dueDate`,
    /// `followUpDate`, `candidateUsersList`, `candidateGroupsList`).
    pub changed_attributes: Vec<String>,
    /// The client's action (`complete`, `assign`, `claim`, `unassign`, `update` by default).
    pub action: String,
    pub bpmn_process_id: String,
    pub process_definition_version: i32,
    pub process_definition_key: i64,
    pub process_instance_key: i64,
    pub element_id: String,
    pub element_instance_key: i64,
    pub tenant_id: String,
    pub creation_timestamp: i64,
}

/// A backup's checkpoint in a partition's log (Zeebe's `CheckpointRecord`, value type
/// CHECKPOINT): CREATE asks for checkpoint `checkpoint_id`; CREATED records it at
/// `checkpoint_position` (the command's position) when its id is greater than the partition's
/// last checkpoint's; IGNORED otherwise, carrying the last checkpoint.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckpointRecord {
    pub checkpoint_id: i64,
    pub checkpoint_position: i64,
}

/// Growing the partition count (after Zeebe 8.8's `ScaleRecord`, value type SCALE), on the
/// deployment partition: SCALE_UP asks to grow from `current_partition_count` to
/// `desired_partition_count`; SCALING_UP records the redistribution of every deployed resource
/// to the new partitions started; SCALED_UP records that every new partition acknowledged it
/// (`redistributed_partitions`: the new partitions), after which they may take instances.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScaleRecord {
    pub current_partition_count: u32,
    pub desired_partition_count: u32,
    pub redistributed_partitions: Vec<u16>,
}

/// Moving correlation keys to a grown partition count (value type MESSAGE_RELOCATION; Waggle's
/// own, after the step Zeebe 8.8 plans as `AWAIT_RELOCATION_COMPLETION`). On an old message
/// partition: RELOCATE asks it to move every correlation key whose partition differs under
/// `desired_partition_count` (RELOCATING records the counts, RELOCATED that every key it sent
/// was acknowledged); MOVING records one key's state leaving it, and MOVE carries that state to
/// the key's new partition, which records it as MOVED. RELEASE / RELEASED: an instance a message
/// started with the key ended on the old partition, so the new one may start the next
/// (`started_instances` names it).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MessageRelocationRecord {
    pub partition_count: u32,
    pub desired_partition_count: u32,
    pub correlation_key: String,
    pub messages: Vec<RelocatedMessage>,
    pub subscriptions: Vec<MessageSubscriptionRecord>,
    pub started_instances: Vec<RelocatedStart>,
}

/// A buffered message moving with its correlation key: its key (which keeps the old
/// partition's bits), the message (deadline and id kept) and the processes it was correlated to.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RelocatedMessage {
    pub message_key: i64,
    pub message: MessageRecord,
    pub correlated_processes: Vec<String>,
}

/// A process instance a message with the correlation key started and that is still active
/// (the "one active instance per correlation key" marker of a message start event).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RelocatedStart {
    pub tenant_id: String,
    pub bpmn_process_id: String,
    pub process_instance_key: i64,
}
