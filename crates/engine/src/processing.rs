//! One processing batch: the record writer, key and position counters, and the queue of
//! follow-up commands. Events are applied to state the moment they are written, so the logic
//! that follows sees them (as Zeebe's state writer does).

use std::borrow::Cow;
use std::collections::{HashMap, VecDeque};

use waggle_protocol::codec::Entry;
use waggle_protocol::record::Rejection;
use waggle_protocol::value::JobRecord;
use waggle_protocol::{encode_key, Intent, PartitionId, Record, RecordType, RecordValue, RejectionType, SharedStr, ValueType};
use waggle_state::{KvRead, Overlay};

use crate::distribution::{self, Distribution};
use crate::processes::ProcessCache;
use crate::tables::StateView;
use crate::{appliers, processors, META_LAST_POSITION, META_NEXT_KEY};

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
}

impl Command {
    /// A command nobody waits on, from within this partition or from a client.
    pub fn new(key: i64, intent: Intent, value: RecordValue) -> Self {
        Self { request_id: None, key, intent, value, distribution: None }
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
    fn stream_for(&self, job_type: &str) -> Option<JobStreamTarget>;
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
    /// Partitions of the cluster (messages live on the partition of their correlation key).
    pub partition_count: u32,
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

/// Requests waiting for a process instance's result, by process instance key. Runtime only:
/// request ids mean nothing after a restart, so this is not part of state.
pub(crate) type AwaitingResults = HashMap<i64, (RequestId, Vec<String>)>;

pub(crate) struct Processing<'o, 's, 'c> {
    pub(crate) partition: PartitionId,
    state: &'o mut Overlay<'s>,
    processes: &'o mut ProcessCache,
    awaiting: &'o mut AwaitingResults,
    pub(crate) now_ms: i64,
    pub(crate) job_streams: &'c dyn JobStreams,
    pub(crate) partition_count: u32,
    /// What a command may ask of the engine (set by [`crate::Engine`] for each batch).
    pub(crate) limits: crate::EngineLimits,
    next_key: i64,
    last_position: u64,
    source_position: u64,
    pending: VecDeque<Record>,
    /// Elements a new process instance (or a flow scope inside it) starts at instead of its
    /// start event, until its activation (a follow-up command of the same batch) takes them.
    start_elements: HashMap<i64, Vec<usize>>,
    /// Jobs found for the client's activation command before it was written.
    prefetched_activation: Option<Vec<i64>>,
    out: BatchOutput,
}

fn read_i64(state: &dyn KvRead, key: &[u8], default: i64) -> i64 {
    state.get(key).map(|b| i64::from_be_bytes(b.try_into().expect("meta value"))).unwrap_or(default)
}

impl<'o, 's, 'c> Processing<'o, 's, 'c> {
    pub fn new(
        partition: PartitionId,
        state: &'o mut Overlay<'s>,
        processes: &'o mut ProcessCache,
        awaiting: &'o mut AwaitingResults,
        ctx: &ProcessingContext<'c>,
        records: Vec<Record>,
    ) -> Self {
        let next_key = read_i64(state, META_NEXT_KEY, 1);
        let last_position = read_i64(state, META_LAST_POSITION, 0) as u64;
        state.set_absent_from_base(crate::tables::absent_from_state(partition, next_key));
        Self {
            partition,
            state,
            processes,
            awaiting,
            now_ms: ctx.now_ms,
            job_streams: ctx.job_streams,
            partition_count: ctx.partition_count.max(1),
            limits: crate::EngineLimits::default(),
            next_key,
            last_position,
            source_position: 0,
            pending: VecDeque::new(),
            start_elements: HashMap::new(),
            prefetched_activation: None,
            out: BatchOutput { records, ..Default::default() },
        }
    }

    /// Sizes the batch's answers for `count` client commands (at most one answer each).
    pub(crate) fn expect_commands(&mut self, count: usize) {
        self.out.responses.reserve(count);
    }

    pub fn view(&self) -> StateView<'_> {
        StateView::new(&*self.state)
    }

    pub fn process_model(&mut self, key: i64) -> std::sync::Arc<waggle_bpmn::Process> {
        self.processes.get(key, StateView::new(&*self.state))
    }

    /// The stored record of a deployed process, decoded once per run.
    pub fn process_record(&mut self, key: i64) -> Option<std::sync::Arc<waggle_protocol::value::ProcessRecord>> {
        self.processes.record(key, StateView::new(&*self.state))
    }

    pub fn processes_mut(&mut self) -> &mut ProcessCache {
        self.processes
    }

    /// Remembers that `request` waits for the result of process instance `pi`.
    pub fn await_result(&mut self, pi: i64, request: RequestId, fetch_variables: Vec<String>) {
        self.awaiting.insert(pi, (request, fetch_variables));
    }

    pub fn take_awaiting_result(&mut self, pi: i64) -> Option<(RequestId, Vec<String>)> {
        self.awaiting.remove(&pi)
    }

    pub fn set_start_elements(&mut self, pi: i64, elements: Vec<usize>) {
        self.start_elements.insert(pi, elements);
    }

    pub fn take_start_elements(&mut self, key: i64) -> Option<Vec<usize>> {
        if self.start_elements.is_empty() {
            return None; // nearly always: looked up for every element activated
        }
        self.start_elements.remove(&key)
    }

    /// A client's variables document split into its variables (see
    /// [`crate::json_doc::document_texts`]); refused beyond the limit on its variables, whose
    /// records cost the partition ~3 µs each.
    pub(crate) fn client_document(&self, text: &str) -> Result<crate::json_doc::VariableTexts, String> {
        let texts = crate::json_doc::document_texts(text)?;
        let max = self.limits.max_document_variables;
        if texts.len() > max {
            return Err(format!("it holds {} variables, more than the limit of {max} (max_document_variables)", texts.len()));
        }
        Ok(texts)
    }

    pub fn new_key(&mut self) -> i64 {
        let key = encode_key(self.partition, self.next_key);
        self.next_key += 1;
        key
    }

    /// Gives `record` the next position and adds it to the batch's output.
    fn append(&mut self, mut record: Record) -> &Record {
        self.last_position += 1;
        record.position = self.last_position;
        record.source_position = self.source_position;
        record.timestamp_ms = self.now_ms;
        self.out.records.push(record);
        self.out.records.last().expect("just pushed")
    }

    fn make(key: i64, record_type: RecordType, intent: Intent, value: RecordValue) -> Record {
        Record {
            position: 0,
            source_position: 0,
            key,
            timestamp_ms: 0,
            record_type,
            value_type: value_type_of(&value),
            intent,
            rejection: None,
            value,
        }
    }

    /// Writes an event and applies it to state.
    pub fn event(&mut self, key: i64, intent: Intent, value: RecordValue) {
        self.append(Self::make(key, RecordType::Event, intent, value));
        let record = self.out.records.last().expect("just appended");
        appliers::apply(self.state, self.processes, record);
    }

    /// [`Self::event`], returning a copy of the record (to answer a request with it).
    pub fn event_record(&mut self, key: i64, intent: Intent, value: RecordValue) -> Record {
        self.event(key, intent, value);
        self.out.records.last().expect("just appended").clone()
    }

    /// Writes a follow-up command, processed later in this batch.
    pub fn command(&mut self, key: i64, intent: Intent, value: RecordValue) {
        let record = self.append(Self::make(key, RecordType::Command, intent, value)).clone();
        self.pending.push_back(record);
    }

    /// Sends a command to a partition: a follow-up command of this batch when it is this
    /// partition, else a distributed command (outbox, delivered after the batch is committed
    /// until acknowledged: see `distribution`).
    pub fn send(&mut self, partition: PartitionId, key: i64, intent: Intent, value: RecordValue) {
        if partition == self.partition {
            self.command(key, intent, value);
        } else {
            distribution::send(self, partition, key, intent, value);
        }
    }

    /// Writes a rejection of `command` and answers its request, if any.
    pub fn reject(&mut self, command: &Record, request: Option<RequestId>, rejection_type: RejectionType, reason: String) {
        let mut record = Self::make(command.key, RecordType::CommandRejection, command.intent, command.value.clone());
        record.rejection = Some(Rejection { rejection_type, reason });
        let record = self.append(record).clone();
        self.respond(request, record);
    }

    pub fn respond(&mut self, request: Option<RequestId>, record: Record) {
        if let Some(id) = request {
            self.out.responses.push((id, record));
        }
    }

    /// Hands a command to the broker for another partition (no de-duplication: each carries
    /// its own distribution key).
    pub(crate) fn deliver(&mut self, partition: PartitionId, command: Command) {
        self.out.side_effects.push(SideEffect::SendCommand { partition, command: Box::new(command) });
    }

    pub fn side_effect(&mut self, effect: SideEffect) {
        if !self.out.side_effects.contains(&effect) {
            self.out.side_effects.push(effect);
        }
    }

    /// Processes one command from outside, then all follow-up commands it caused.
    pub fn process_client_command(&mut self, command: Command) {
        if let Some(d) = &command.distribution {
            if distribution::is_duplicate(self, d) {
                return;
            }
        }
        // An activation that finds no job writes nothing: answer it without touching the log.
        let jobs = processors::job_batch::jobs_to_activate(self, &command);
        if jobs.as_ref().is_some_and(|j| j.is_empty()) {
            let record = Self::make(-1, RecordType::Event, Intent::Activated, command.value);
            self.respond(command.request_id, record);
            return;
        }
        self.prefetched_activation = jobs;
        self.source_position = 0;
        let record = self.append(Self::make(command.key, RecordType::Command, command.intent, command.value)).clone();
        self.source_position = record.position;
        if let Some(d) = &command.distribution {
            distribution::received(self, d, &record);
        }
        processors::process(self, &record, command.request_id);
        self.prefetched_activation = None;
        while let Some(next) = self.pending.pop_front() {
            self.source_position = next.position;
            processors::process(self, &next, None);
        }
    }

    /// The jobs found for the activation command being processed (see
    /// `job_batch::jobs_to_activate`), once.
    pub(crate) fn take_prefetched_activation(&mut self) -> Option<Vec<i64>> {
        self.prefetched_activation.take()
    }

    pub fn finish(mut self) -> BatchOutput {
        self.state.put(META_NEXT_KEY.to_vec(), self.next_key.to_be_bytes().to_vec());
        self.state.put(META_LAST_POSITION.to_vec(), (self.last_position as i64).to_be_bytes().to_vec());
        self.out.next_key_counter = self.next_key;
        self.out
    }
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
    }
}
