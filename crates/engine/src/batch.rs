//! What goes into and comes out of a batch: commands (from clients, the scheduler and other
//! partitions), the context the caller gives, and the records, answers and side effects it gets
//! back. Plain data, below everything else in the engine.

use std::borrow::Cow;

use waggle_protocol::codec::Entry;
use waggle_protocol::value::JobRecord;
use waggle_protocol::{Intent, PartitionId, Record, RecordType, RecordValue, SharedStr, ValueType};

/// Where a command from another partition comes from (see `distribution`). Re-sent copies carry
/// the same key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Distribution {
    /// The sending partition.
    pub source: PartitionId,
    /// The distribution key on the sender (its DISTRIBUTING record's key).
    pub key: i64,
    /// The sender's oldest unacknowledged distribution key for this receiver when it sent.
    pub acknowledged_below: i64,
}

/// Identifies a pending client request within one broker run.
pub type RequestId = u64;

/// A command from outside the engine (a client request or the scheduler).
#[derive(Debug, Clone, PartialEq)]
pub struct Command {
    /// Where to send the answer; `None` for commands nobody waits on (scheduler).
    pub request_id: Option<RequestId>,
    /// The key the command is about (-1 when it creates something new).
    pub key: i64,
    pub intent: Intent,
    pub value: RecordValue,
    /// Set on a command another partition sent (processed once, however often it arrives).
    pub distribution: Option<Distribution>,
    /// The tenants the client may act for (Zeebe 8.5's record metadata `authorizations`,
    /// `authorized_tenants`): an entity of another tenant is rejected as if it did not exist.
    /// `None`: no limit (the scheduler, other partitions, a client with authentication or
    /// multi-tenancy off). Runtime only: the log does not store it, as logged commands are
    /// never processed again (replay applies events, C1).
    pub authorized_tenants: Option<Vec<String>>,
}

impl Command {
    /// A command nobody waits on, from within this partition or from a client.
    pub fn new(key: i64, intent: Intent, value: RecordValue) -> Self {
        Self { request_id: None, key, intent, value, distribution: None, authorized_tenants: None }
    }
}

/// A worker's job stream that can take a job right now.
#[derive(Debug, Clone)]
pub struct JobStreamTarget {
    pub stream_id: u64,
    pub worker: SharedStr,
    pub timeout_ms: i64,
    pub fetch_variables: Vec<String>,
}

/// Read-only view of the job streams open on this partition.
pub trait JobStreams {
    /// A stream of `job_type` open for the default tenant.
    fn stream_for(&self, job_type: &str) -> Option<JobStreamTarget>;
    /// A stream of `job_type` open for `tenant` (a stream gets only jobs of the tenants its
    /// worker asked for). By default: the default tenant's streams, none for another tenant.
    fn stream_for_tenant(&self, job_type: &str, tenant: &str) -> Option<JobStreamTarget> {
        if waggle_protocol::is_default_tenant(tenant) {
            self.stream_for(job_type)
        } else {
            None
        }
    }
}

/// No streams (tests, replay).
pub struct NoJobStreams;
impl JobStreams for NoJobStreams {
    fn stream_for(&self, _job_type: &str) -> Option<JobStreamTarget> {
        None
    }
}

/// What the engine needs from the outside world for one batch.
pub struct ProcessingContext<'a> {
    pub now_ms: i64,
    pub job_streams: &'a dyn JobStreams,
    /// Partitions of the cluster: signals and deployments go to all of them.
    pub partition_count: u32,
    /// The partitions messages are spread over by their correlation key (0: all of them). It
    /// stays at the count the cluster had before its partition count grew until the keys moved
    /// to the grown count (`processors::relocation`); a partition that moved a key forwards what
    /// a sender with the old count still sends it.
    pub message_partition_count: u32,
}

/// Work for the broker to do once the batch is committed.
#[derive(Debug, Clone, PartialEq)]
pub enum SideEffect {
    /// Jobs of this type became activatable: wake long-polling requests.
    JobsAvailable { job_type: String },
    /// Push an activated job to a worker's stream.
    PushJob { stream_id: u64, job_key: i64, job: Box<JobRecord> },
    /// Deliver a command to another partition (message subscriptions, signal broadcasts,
    /// deployments, and the acknowledgements of such commands).
    SendCommand { partition: PartitionId, command: Box<Command> },
}

/// The outcome of a batch.
#[derive(Debug, Default)]
pub struct BatchOutput {
    /// Records to append, in position order.
    pub records: Vec<Record>,
    /// Answers to client requests: the event or rejection that answers each.
    pub responses: Vec<(RequestId, Record)>,
    pub side_effects: Vec<SideEffect>,
    pub next_key_counter: i64,
}

impl BatchOutput {
    /// The log entry for this batch (None when the batch wrote nothing): its records in their
    /// [`log_form`].
    pub fn entry(&self) -> Option<Entry> {
        (!self.records.is_empty()).then(|| Entry {
            next_key_counter: self.next_key_counter,
            records: self.records.iter().map(|r| log_form(r).into_owned()).collect(),
        })
    }

    /// The encoded log entry of the batch: it decodes as `entry()`, encoded without copying the
    /// records that the log keeps whole.
    pub fn encoded_entry(&self) -> Option<Vec<u8>> {
        if self.records.is_empty() {
            return None;
        }
        // a guess at the encoded size (W2's records take ~60 bytes): one allocation, no growing
        let capacity = self.records.len() * ENCODED_BYTES_PER_RECORD;
        Some(waggle_protocol::codec::encode_entry(self.next_key_counter, &self.records, capacity, log_value))
    }
}

/// Bytes per record an entry's buffer starts with (see [`BatchOutput::encoded_entry`]).
const ENCODED_BYTES_PER_RECORD: usize = 96;

/// A record as the log keeps it. Replay applies events only, and no applier reads the variables
/// of a command (or its rejection), of a process instance creation or of jobs handed to a
/// worker: those are left out, so a payload is logged once, as VARIABLE events, instead of up to
/// four times (W1's 46 KB payload made ~190 KB log entries). Answers and pushed jobs keep them.
pub fn log_form(record: &Record) -> Cow<'_, Record> {
    match log_value(record) {
        Cow::Borrowed(_) => Cow::Borrowed(record),
        Cow::Owned(value) => Cow::Owned(Record {
            position: record.position,
            source_position: record.source_position,
            key: record.key,
            timestamp_ms: record.timestamp_ms,
            record_type: record.record_type,
            value_type: record.value_type,
            intent: record.intent,
            rejection: record.rejection.clone(),
            value,
        }),
    }
}

/// The value of a record's [`log_form`].
pub fn log_value(record: &Record) -> Cow<'_, RecordValue> {
    let command = record.record_type != RecordType::Event;
    Cow::Owned(match &record.value {
        RecordValue::ProcessInstanceCreation(c) if !c.variables.is_empty() => RecordValue::ProcessInstanceCreation(c.without_variables()),
        RecordValue::JobBatch(b) if b.jobs.iter().any(|j| !j.variables.is_empty()) => RecordValue::JobBatch(b.without_variables()),
        RecordValue::Job(j) if command && !j.variables.is_empty() => RecordValue::Job(j.without_variables()),
        RecordValue::Message(m) if command && !m.variables.is_empty() => RecordValue::Message(m.without_variables()),
        RecordValue::VariableDocument(d) if command && !d.variables.is_empty() => RecordValue::VariableDocument(d.without_variables()),
        value => return Cow::Borrowed(value),
    })
}

pub(crate) fn value_type_of(value: &RecordValue) -> ValueType {
    match value {
        RecordValue::Deployment(_) => ValueType::Deployment,
        RecordValue::Process(_) => ValueType::Process,
        RecordValue::ProcessInstance(_) => ValueType::ProcessInstance,
        RecordValue::ProcessInstanceCreation(_) => ValueType::ProcessInstanceCreation,
        RecordValue::ProcessInstanceResult(_) => ValueType::ProcessInstanceResult,
        RecordValue::Job(_) => ValueType::Job,
        RecordValue::JobBatch(_) => ValueType::JobBatch,
        RecordValue::Variable(_) => ValueType::Variable,
        RecordValue::VariableDocument(_) => ValueType::VariableDocument,
        RecordValue::Incident(_) => ValueType::Incident,
        RecordValue::Message(_) => ValueType::Message,
        RecordValue::Timer(_) => ValueType::Timer,
        RecordValue::MessageSubscription(_) => ValueType::MessageSubscription,
        RecordValue::ProcessMessageSubscription(_) => ValueType::ProcessMessageSubscription,
        RecordValue::MessageStartEventSubscription(_) => ValueType::MessageStartEventSubscription,
        RecordValue::Signal(_) => ValueType::Signal,
        RecordValue::SignalSubscription(_) => ValueType::SignalSubscription,
        RecordValue::CommandDistribution(_) => ValueType::CommandDistribution,
        RecordValue::ProcessInstanceModification(_) => ValueType::ProcessInstanceModification,
        RecordValue::ProcessInstanceMigration(_) => ValueType::ProcessInstanceMigration,
        RecordValue::ProcessInstanceBatch(_) => ValueType::ProcessInstanceBatch,
        RecordValue::DecisionRequirements(_) => ValueType::DecisionRequirements,
        RecordValue::Decision(_) => ValueType::Decision,
        RecordValue::DecisionEvaluation(_) => ValueType::DecisionEvaluation,
        RecordValue::Form(_) => ValueType::Form,
        RecordValue::ResourceDeletion(_) => ValueType::ResourceDeletion,
        RecordValue::CompensationSubscription(_) => ValueType::CompensationSubscription,
        RecordValue::UserTask(_) => ValueType::UserTask,
        RecordValue::MessageCorrelation(_) => ValueType::MessageCorrelation,
        RecordValue::ProcessEvent(_) => ValueType::ProcessEvent,
        RecordValue::Checkpoint(_) => ValueType::Checkpoint,
        RecordValue::Scale(_) => ValueType::Scale,
        RecordValue::MessageRelocation(_) => ValueType::MessageRelocation,
    }
}
