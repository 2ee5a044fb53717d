//! The record model: commands, events and rejections, each with a value type and an intent.

use serde::{Deserialize, Serialize};

use crate::value::RecordValue;

/// Whether a record asks for something, states a fact, or refuses a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum RecordType {
    Command,
    Event,
    CommandRejection,
}

/// Why a command was rejected (Zeebe's RejectionType).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum RejectionType {
    InvalidArgument,
    NotFound,
    AlreadyExists,
    InvalidState,
    ProcessingError,
    ExceededBatchRecordSize,
    /// Waggle's own (appended), never written to the log: the command's correlation key is
    /// moving to another partition; retry (the gateway does, by the partition count it learns).
    Unavailable,
}

impl RejectionType {
    pub fn as_str(self) -> &'static str {
        match self {
            RejectionType::InvalidArgument => "INVALID_ARGUMENT",
            RejectionType::NotFound => "NOT_FOUND",
            RejectionType::AlreadyExists => "ALREADY_EXISTS",
            RejectionType::InvalidState => "INVALID_STATE",
            RejectionType::ProcessingError => "PROCESSING_ERROR",
            RejectionType::ExceededBatchRecordSize => "EXCEEDED_BATCH_RECORD_SIZE",
            RejectionType::Unavailable => "UNAVAILABLE",
        }
    }
}

macro_rules! names {
    ($(#[$m:meta])* $vis:vis enum $name:ident { $($variant:ident => $text:literal,)* }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        $vis enum $name { $($variant,)* }
        impl $name {
            /// The name Zeebe uses for this value in exported records.
            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text,)* }
            }
        }
        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

names! {
    /// What a record is about (Zeebe's ValueType).
    pub enum ValueType {
        Deployment => "DEPLOYMENT",
        Process => "PROCESS",
        ProcessInstance => "PROCESS_INSTANCE",
        ProcessInstanceCreation => "PROCESS_INSTANCE_CREATION",
        ProcessInstanceResult => "PROCESS_INSTANCE_RESULT",
        Job => "JOB",
        JobBatch => "JOB_BATCH",
        Variable => "VARIABLE",
        VariableDocument => "VARIABLE_DOCUMENT",
        Incident => "INCIDENT",
        Message => "MESSAGE",
        Timer => "TIMER",
        MessageSubscription => "MESSAGE_SUBSCRIPTION",
        ProcessMessageSubscription => "PROCESS_MESSAGE_SUBSCRIPTION",
        MessageStartEventSubscription => "MESSAGE_START_EVENT_SUBSCRIPTION",
        Signal => "SIGNAL",
        SignalSubscription => "SIGNAL_SUBSCRIPTION",
        CommandDistribution => "COMMAND_DISTRIBUTION",
        ProcessInstanceModification => "PROCESS_INSTANCE_MODIFICATION",
        ProcessInstanceMigration => "PROCESS_INSTANCE_MIGRATION",
        ProcessInstanceBatch => "PROCESS_INSTANCE_BATCH",
        // DMN and forms (appended: the log stores value types by position)
        DecisionRequirements => "DECISION_REQUIREMENTS",
        Decision => "DECISION",
        DecisionEvaluation => "DECISION_EVALUATION",
        Form => "FORM",
        ResourceDeletion => "RESOURCE_DELETION",
        CompensationSubscription => "COMPENSATION_SUBSCRIPTION",
        // Zeebe user tasks (8.5; appended)
        UserTask => "USER_TASK",
        MessageCorrelation => "MESSAGE_CORRELATION",
        // an interrupting event waiting for what it interrupts to terminate (appended)
        ProcessEvent => "PROCESS_EVENT",
        // a backup's checkpoint in every partition's log (Zeebe's CheckpointRecord; appended)
        Checkpoint => "CHECKPOINT",
        // growing the partition count (Zeebe 8.8's ScaleRecord; appended)
        Scale => "SCALE",
        // moving correlation keys to a grown partition count (Waggle's own; appended)
        MessageRelocation => "MESSAGE_RELOCATION",
    }
}

names! {
    /// The intent of a record; the valid intents depend on the value type, as in Zeebe.
    pub enum Intent {
        // DEPLOYMENT / PROCESS / PROCESS_INSTANCE_CREATION / VARIABLE / INCIDENT / JOB
        Create => "CREATE",
        Created => "CREATED",
        // PROCESS_INSTANCE
        Cancel => "CANCEL",
        ActivateElement => "ACTIVATE_ELEMENT",
        CompleteElement => "COMPLETE_ELEMENT",
        TerminateElement => "TERMINATE_ELEMENT",
        ElementActivating => "ELEMENT_ACTIVATING",
        ElementActivated => "ELEMENT_ACTIVATED",
        ElementCompleting => "ELEMENT_COMPLETING",
        ElementCompleted => "ELEMENT_COMPLETED",
        ElementTerminating => "ELEMENT_TERMINATING",
        ElementTerminated => "ELEMENT_TERMINATED",
        SequenceFlowTaken => "SEQUENCE_FLOW_TAKEN",
        // PROCESS_INSTANCE_CREATION with result
        CreateWithAwaitingResult => "CREATE_WITH_AWAITING_RESULT",
        // PROCESS_INSTANCE_RESULT
        Completed => "COMPLETED",
        // JOB
        Complete => "COMPLETE",
        Fail => "FAIL",
        Failed => "FAILED",
        ThrowError => "THROW_ERROR",
        ErrorThrown => "ERROR_THROWN",
        TimeOut => "TIME_OUT",
        TimedOut => "TIMED_OUT",
        UpdateRetries => "UPDATE_RETRIES",
        RetriesUpdated => "RETRIES_UPDATED",
        UpdateTimeout => "UPDATE_TIMEOUT",
        TimeoutUpdated => "TIMEOUT_UPDATED",
        Canceled => "CANCELED",
        RecurAfterBackoff => "RECUR_AFTER_BACKOFF",
        RecurredAfterBackoff => "RECURRED_AFTER_BACKOFF",
        Yield => "YIELD",
        Yielded => "YIELDED",
        // JOB_BATCH
        Activate => "ACTIVATE",
        Activated => "ACTIVATED",
        // VARIABLE / VARIABLE_DOCUMENT
        Update => "UPDATE",
        Updated => "UPDATED",
        // INCIDENT
        Resolve => "RESOLVE",
        Resolved => "RESOLVED",
        // DEPLOYMENT to the other partitions
        Distribute => "DISTRIBUTE",
        Distributed => "DISTRIBUTED",
        // MESSAGE
        Publish => "PUBLISH",
        Published => "PUBLISHED",
        Expire => "EXPIRE",
        Expired => "EXPIRED",
        // TIMER
        Trigger => "TRIGGER",
        Triggered => "TRIGGERED",
        // (PROCESS_)MESSAGE_SUBSCRIPTION
        Correlate => "CORRELATE",
        Correlating => "CORRELATING",
        Correlated => "CORRELATED",
        Delete => "DELETE",
        Deleted => "DELETED",
        Reject => "REJECT",
        Rejected => "REJECTED",
        // SIGNAL
        Broadcast => "BROADCAST",
        Broadcasted => "BROADCASTED",
        // COMMAND_DISTRIBUTION (commands between partitions; RECEIVED is Waggle's own: the
        // receiving partition notes a command it processed, so a re-sent copy is not run twice)
        Distributing => "DISTRIBUTING",
        Acknowledge => "ACKNOWLEDGE",
        Acknowledged => "ACKNOWLEDGED",
        Received => "RECEIVED",
        // PROCESS_INSTANCE_MODIFICATION (appended: the log stores intents by position)
        Modify => "MODIFY",
        Modified => "MODIFIED",
        // PROCESS_INSTANCE_MIGRATION; ELEMENT_MIGRATED (PROCESS_INSTANCE), MIGRATED (JOB, INCIDENT)
        Migrate => "MIGRATE",
        Migrated => "MIGRATED",
        ElementMigrated => "ELEMENT_MIGRATED",
        // DECISION_EVALUATION (EVALUATE from EvaluateDecision; EVALUATED or FAILED)
        Evaluate => "EVALUATE",
        Evaluated => "EVALUATED",
        // RESOURCE_DELETION and PROCESS (a deletion under way); PROCESS_INSTANCE_BATCH
        // (terminating a multi-instance body's inner instances a chunk at a time)
        Deleting => "DELETING",
        Terminate => "TERMINATE",
        Terminated => "TERMINATED",
        // USER_TASK (Zeebe 8.5's UserTaskIntent; CREATED, COMPLETE, COMPLETED, CANCELED, UPDATE,
        // UPDATED and MIGRATED are shared with the intents above)
        Creating => "CREATING",
        Completing => "COMPLETING",
        Canceling => "CANCELING",
        Assign => "ASSIGN",
        Assigning => "ASSIGNING",
        Assigned => "ASSIGNED",
        Claim => "CLAIM",
        Updating => "UPDATING",
        // MESSAGE_CORRELATION (CORRELATE, CORRELATING, CORRELATED above)
        NotCorrelated => "NOT_CORRELATED",
        // PROCESS_EVENT (TRIGGERED above; appended)
        Triggering => "TRIGGERING",
        // CHECKPOINT (Zeebe's CheckpointIntent: CREATE, CREATED above; appended)
        Ignored => "IGNORED",
        // PROCESS_INSTANCE_BATCH TERMINATING, Waggle's own (appended): a scope that stays
        // active terminates its children over later batches (an interrupting event subprocess,
        // a terminate end event, a completion condition); kept in state until TERMINATED, so a
        // restart asks for the next chunk again
        Terminating => "TERMINATING",
        // SCALE (Zeebe 8.8's ScaleIntent; appended): the partition count grows
        ScaleUp => "SCALE_UP",
        ScalingUp => "SCALING_UP",
        ScaledUp => "SCALED_UP",
        // MESSAGE_RELOCATION (Waggle's own; appended)
        Relocate => "RELOCATE",
        Relocating => "RELOCATING",
        Relocated => "RELOCATED",
        Move => "MOVE",
        Moving => "MOVING",
        Moved => "MOVED",
        Release => "RELEASE",
        Released => "RELEASED",
    }
}

/// One record of a partition's log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// Position in the partition's log; strictly increasing.
    pub position: u64,
    /// Position of the command this record follows from (0 for a command from outside).
    pub source_position: u64,
    /// The key of the entity the record is about (-1 when there is none).
    pub key: i64,
    pub timestamp_ms: i64,
    pub record_type: RecordType,
    pub value_type: ValueType,
    pub intent: Intent,
    /// Set on rejections only.
    pub rejection: Option<Rejection>,
    pub value: RecordValue,
}

/// Why a command was refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rejection {
    pub rejection_type: RejectionType,
    pub reason: String,
}

impl Record {
    pub fn is_event(&self) -> bool {
        self.record_type == RecordType::Event
    }
    pub fn is_command(&self) -> bool {
        self.record_type == RecordType::Command
    }
}
