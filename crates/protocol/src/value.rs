//! Record values, one per value type, with Zeebe's field names (snake_case).
//!
//! Variable documents travel as JSON text (`variables`), parsed only where they are used.

use serde::{Deserialize, Serialize};

use crate::SharedStr;

/// The value of a record. The variant matches the record's value type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
    // appended: the log stores variants by position
    CompensationSubscription(CompensationSubscriptionRecord),
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
