//! One processing batch: the record writer, key and position counters, and the queue of
//! follow-up commands. Events are applied to state the moment they are written, so the logic
//! that follows sees them (as Zeebe's state writer does).

use std::collections::{HashMap, VecDeque};

use waggle_protocol::record::Rejection;
use waggle_protocol::value::MessageCorrelationRecord;
use waggle_protocol::{encode_key, Intent, PartitionId, Record, RecordType, RecordValue, RejectionType};
use waggle_state::{KvRead, Overlay};

use crate::appliers;
use crate::batch::{value_type_of, BatchOutput, Command, JobStreams, ProcessingContext, RequestId, SideEffect};
use crate::json_doc::VariableTexts;
use crate::processes::ProcessCache;
use crate::tables::{StateView, META_LAST_POSITION, META_NEXT_KEY};

/// The batch, as every step of command logic takes it.
pub(crate) type P<'a, 'b, 'c, 'd> = &'a mut Processing<'b, 'c, 'd>;

/// Requests waiting for a process instance's result, by process instance key. Runtime only:
/// request ids mean nothing after a restart, so this is not part of state.
pub(crate) type AwaitingResults = HashMap<i64, (RequestId, Vec<String>)>;

/// A message correlation's request waiting for a process partition to confirm (by the
/// message's key): the request, the MESSAGE_CORRELATION record to answer with, and how many
/// subscriptions were asked and have not refused yet. Runtime only, as [`AwaitingResults`].
pub(crate) type AwaitingCorrelations = HashMap<i64, (RequestId, MessageCorrelationRecord, usize)>;

pub(crate) struct Processing<'o, 's, 'c> {
    pub(crate) partition: PartitionId,
    state: &'o mut Overlay<'s>,
    processes: &'o mut ProcessCache,
    awaiting: &'o mut AwaitingResults,
    correlations: &'o mut AwaitingCorrelations,
    pub(crate) now_ms: i64,
    pub(crate) job_streams: &'c dyn JobStreams,
    pub(crate) partition_count: u32,
    /// The partitions of messages by correlation key ([`crate::ProcessingContext`]).
    pub(crate) message_partition_count: u32,
    /// What a command may ask of the engine (set by [`crate::Engine`] for each batch).
    pub(crate) limits: crate::EngineLimits,
    next_key: i64,
    last_position: u64,
    source_position: u64,
    pending: VecDeque<Record>,
    /// Elements a new process instance (or a flow scope inside it) starts at instead of its
    /// start event, until its activation (a follow-up command of the same batch) takes them.
    start_elements: HashMap<i64, Vec<usize>>,
    /// The PROCESS_EVENT TRIGGERING (key, record) of a timer, message or signal start event, by
    /// the process instance it starts, until its start event's activation writes TRIGGERED.
    start_triggers: HashMap<i64, (i64, waggle_protocol::value::ProcessEventRecord)>,
    /// The loop counter and item (JSON text) of an inner instance of a multi-instance body,
    /// from the body's ACTIVATE_ELEMENT command until the inner instance's activation takes them.
    loop_items: HashMap<i64, (usize, String)>,
    /// Variables a process instance modification sets local to element instances it is about
    /// to create: by (process instance, element id), in the order of its instructions, until
    /// the element's ACTIVATING takes them.
    modification_locals: HashMap<(i64, String), VecDeque<VariableTexts>>,
    /// Inner instances of parallel multi-instance bodies this batch activated (bounded by
    /// `limits::MI_ACTIVATIONS_PER_BATCH`).
    pub(crate) mi_activations: usize,
    /// Inner instances of multi-instance bodies this batch terminated through
    /// PROCESS_INSTANCE_BATCH TERMINATE (bounded by `limits::MI_TERMINATIONS_PER_BATCH`).
    pub(crate) mi_terminations: usize,
    /// The variables a called process instance left to its call activity (by the call
    /// activity's key), from the instance's completion until the call activity's completion
    /// takes them (a follow-up command of the same batch).
    called_results: HashMap<i64, Vec<(String, String)>>,
    /// Jobs found for the client's activation command before it was written.
    prefetched_activation: Option<Vec<i64>>,
    /// The tenants the command from outside being processed may act for (its
    /// `authorized_tenants`; `None` for its follow-ups and for unrestricted commands).
    authorized_tenants: Option<Vec<String>>,
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
        correlations: &'o mut AwaitingCorrelations,
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
            correlations,
            now_ms: ctx.now_ms,
            job_streams: ctx.job_streams,
            partition_count: ctx.partition_count.max(1),
            message_partition_count: if ctx.message_partition_count == 0 {
                ctx.partition_count.max(1)
            } else {
                ctx.message_partition_count.min(ctx.partition_count.max(1))
            },
            limits: crate::EngineLimits::default(),
            next_key,
            last_position,
            source_position: 0,
            pending: VecDeque::new(),
            start_elements: HashMap::new(),
            start_triggers: HashMap::new(),
            loop_items: HashMap::new(),
            modification_locals: HashMap::new(),
            mi_activations: 0,
            mi_terminations: 0,
            called_results: HashMap::new(),
            prefetched_activation: None,
            authorized_tenants: None,
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

    /// The parsed decision requirements graph `key` (None when not deployed).
    pub fn drg(&mut self, key: i64) -> Option<std::sync::Arc<waggle_dmn::Drg>> {
        self.processes.drg(key, StateView::new(&*self.state))
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

    /// Remembers that `request` waits for `pending` subscriptions' confirmation of the
    /// correlation of message `message_key`, to be answered with `record`.
    pub fn await_correlation(&mut self, message_key: i64, request: RequestId, record: MessageCorrelationRecord, pending: usize) {
        self.correlations.insert(message_key, (request, record, pending));
    }

    /// A subscription confirmed the correlation of `message_key`: the waiting request, if any.
    pub fn take_awaiting_correlation(&mut self, message_key: i64) -> Option<(RequestId, MessageCorrelationRecord)> {
        if self.correlations.is_empty() {
            return None;
        }
        self.correlations.remove(&message_key).map(|(request, record, _)| (request, record))
    }

    /// A subscription refused the correlation of `message_key`: the waiting request once no
    /// other subscription asked can still confirm it.
    pub fn refuse_awaiting_correlation(&mut self, message_key: i64) -> Option<(RequestId, MessageCorrelationRecord)> {
        let (_, _, pending) = self.correlations.get_mut(&message_key)?;
        *pending = pending.saturating_sub(1);
        if *pending > 0 {
            return None;
        }
        self.correlations.remove(&message_key).map(|(request, record, _)| (request, record))
    }

    pub fn set_start_elements(&mut self, pi: i64, elements: Vec<usize>) {
        self.start_elements.insert(pi, elements);
    }

    pub(crate) fn set_start_trigger(&mut self, pi: i64, trigger: (i64, waggle_protocol::value::ProcessEventRecord)) {
        self.start_triggers.insert(pi, trigger);
    }

    /// The start trigger of process instance `pi` when `element_id` is its target.
    pub(crate) fn take_start_trigger(&mut self, pi: i64, element_id: &str) -> Option<(i64, waggle_protocol::value::ProcessEventRecord)> {
        if self.start_triggers.is_empty() {
            return None; // nearly always: looked up for every element activated in a process
        }
        if self.start_triggers.get(&pi).is_some_and(|(_, e)| e.target_element_id == element_id) {
            return self.start_triggers.remove(&pi);
        }
        None
    }

    pub fn take_start_elements(&mut self, key: i64) -> Option<Vec<usize>> {
        if self.start_elements.is_empty() {
            return None; // nearly always: looked up for every element activated
        }
        self.start_elements.remove(&key)
    }

    /// Variables to set local to the next instance of `element_id` activated in process
    /// instance `pi` (see [`Self::take_modification_locals`]).
    pub fn add_modification_locals(&mut self, pi: i64, element_id: &str, variables: VariableTexts) {
        self.modification_locals.entry((pi, element_id.to_string())).or_default().push_back(variables);
    }

    /// The variables a modification set aside for this activation of `element_id`, if any.
    pub fn take_modification_locals(&mut self, pi: i64, element_id: &str) -> Option<VariableTexts> {
        if self.modification_locals.is_empty() {
            return None; // nearly always: looked up for every element activated
        }
        let key = (pi, element_id.to_string());
        let queue = self.modification_locals.get_mut(&key)?;
        let variables = queue.pop_front();
        if queue.is_empty() {
            self.modification_locals.remove(&key);
        }
        variables
    }

    pub fn set_loop_item(&mut self, key: i64, loop_counter: usize, item: String) {
        self.loop_items.insert(key, (loop_counter, item));
    }

    pub fn take_loop_item(&mut self, key: i64) -> Option<(usize, String)> {
        self.loop_items.remove(&key)
    }

    pub fn set_called_result(&mut self, call_activity: i64, variables: Vec<(String, String)>) {
        self.called_results.insert(call_activity, variables);
    }

    pub fn take_called_result(&mut self, call_activity: i64) -> Option<Vec<(String, String)>> {
        if self.called_results.is_empty() {
            return None; // nearly always: looked up for every call activity completing
        }
        self.called_results.remove(&call_activity)
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

    /// Answers `request` with a rejection of a command processed earlier (its answer waited),
    /// without writing it: the rejection is the answer, as Zeebe's response writer gives it.
    pub(crate) fn reject_unwritten(
        &mut self,
        request: RequestId,
        intent: Intent,
        value: RecordValue,
        rejection_type: RejectionType,
        reason: String,
    ) {
        let mut record = Self::make(-1, RecordType::CommandRejection, intent, value);
        record.rejection = Some(Rejection { rejection_type, reason });
        self.respond(Some(request), record);
    }

    /// Answers a command from outside without writing it (an activation that found no job:
    /// nothing goes to the log).
    pub(crate) fn answer_unwritten(&mut self, command: Command, intent: Intent) {
        let record = Self::make(-1, RecordType::Event, intent, command.value);
        self.respond(command.request_id, record);
    }

    /// Writes a command from outside, as the source of the records its processing writes;
    /// `prefetched`: the jobs found for it if it is an activation (see
    /// [`Self::take_prefetched_activation`]).
    pub(crate) fn begin_command(&mut self, command: Command, prefetched: Option<Vec<i64>>) -> Record {
        self.prefetched_activation = prefetched;
        self.authorized_tenants = command.authorized_tenants;
        self.source_position = 0;
        let record = self.append(Self::make(command.key, RecordType::Command, command.intent, command.value)).clone();
        self.source_position = record.position;
        record
    }

    /// Ends the processing of a command from outside: the prefetched jobs are forgotten.
    pub(crate) fn end_command(&mut self) {
        self.prefetched_activation = None;
        self.authorized_tenants = None;
    }

    /// Whether the command being processed may touch an entity of `tenant` (Zeebe 8.5's
    /// processors check the command's authorized tenants the same way: an entity of another
    /// tenant is "not found", e.g. `MultiTenantJobOperationsTest` in camunda/camunda's engine
    /// tests). Always true for follow-up and internal commands.
    pub(crate) fn may_access(&self, tenant: &str) -> bool {
        self.authorized_tenants.as_ref().is_none_or(|ts| ts.iter().any(|t| crate::tables::same_tenant(t, tenant)))
    }

    /// The next follow-up command to process, oldest first; the records it leads to have it as
    /// their source.
    pub(crate) fn next_follow_up(&mut self) -> Option<Record> {
        let next = self.pending.pop_front()?;
        self.source_position = next.position;
        Some(next)
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
