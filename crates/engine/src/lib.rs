//! The pure per-partition engine: `(state, command) → records + responses + side effects`.
//!
//! Owns: command processors, one behaviour per BPMN element kind, and the event appliers — the
//! only code that changes state (constraint C2). Does not own: IO, clocks, randomness, the log,
//! networking. Time arrives in [`ProcessingContext::now_ms`]; job streams arrive as a read-only
//! view ([`JobStreams`]).
//!
//! Contract for callers (the broker):
//! - [`Engine::process_batch`] stages every state change in the given [`Overlay`]; the caller
//!   appends `BatchOutput::entry()` to the log and commits the overlay's writes only once that
//!   entry is durable, then delivers responses and side effects. It may hand the batch's record
//!   vector back with [`Engine::recycle`], for the next batch to write into.
//! - [`Engine::replay`] applies the events of a logged entry and nothing else (C1: replay never
//!   re-runs command logic); replaying every entry from empty state gives byte-identical state.
//! - Business failures (unknown keys, bad variables, FEEL errors) become rejections or incidents,
//!   never panics. A panic means a broken invariant.

mod appliers;
mod batch;
mod behaviors;
mod distribution;
mod elements;
mod json_doc;
mod limits;
mod processes;
mod processing;
mod processors;
mod tables;
mod variables;

pub use batch::{BatchOutput, Command, Distribution, JobStreamTarget, JobStreams, NoJobStreams, ProcessingContext, RequestId, SideEffect};
pub use limits::{
    EngineLimits, MAX_INPUT_COLLECTION_ITEMS, MAX_REWRITTEN_OUTPUT_COLLECTION, MI_ACTIVATIONS_PER_BATCH, MI_TERMINATIONS_PER_BATCH,
};
pub use tables::{stored_absence, ElementInstance, ElementState, JobState, StateView, StoredJob, POINT_TABLES};
pub use waggle_bpmn::ParseLimits;

use waggle_protocol::codec::Entry;
use waggle_protocol::PartitionId;
use waggle_state::{KvRead, Overlay};

use processes::ProcessCache;
use tables::{META_LAST_POSITION, META_NEXT_KEY};

/// The commands the broker must deliver again when a partition starts (after a restart, or in a
/// cluster when it starts leading), oldest first per receiver: the outbox of commands for other
/// partitions (see `distribution`), then, for this partition itself, the next
/// PROCESS_INSTANCE_BATCH ACTIVATE of each multi-instance body still activating its inner
/// instances, and TERMINATE of each scope terminating its children over several batches (see
/// `elements::multi_instance::pending_batches`).
pub fn pending_commands(state: StateView<'_>, source: PartitionId) -> Vec<(PartitionId, Command)> {
    let mut out = distribution::outbox_commands(state, source);
    out.extend(elements::multi_instance::pending_batches(state).into_iter().map(|c| (source, c)));
    out
}

/// One partition's engine. Holds only caches derived from state (parsed process models).
pub struct Engine {
    partition: PartitionId,
    processes: ProcessCache,
    awaiting: processing::AwaitingResults,
    correlations: processing::AwaitingCorrelations,
    limits: EngineLimits,
    /// An emptied record vector of an earlier batch, for the next batch to write into.
    spare_records: Vec<waggle_protocol::Record>,
}

/// Records a recycled vector may have room for (~1.4 MB): a larger one is freed instead of kept.
const MAX_SPARE_RECORDS: usize = 4_096;

impl Engine {
    /// An engine with the default [`EngineLimits`].
    pub fn new(partition: PartitionId) -> Self {
        Self::with_limits(partition, EngineLimits::default())
    }

    /// An engine that rejects commands beyond `limits`.
    pub fn with_limits(partition: PartitionId, limits: EngineLimits) -> Self {
        Self {
            partition,
            processes: ProcessCache::default(),
            awaiting: Default::default(),
            correlations: Default::default(),
            limits,
            spare_records: Vec::new(),
        }
    }

    pub fn partition(&self) -> PartitionId {
        self.partition
    }

    /// Processes client or scheduler commands, and every follow-up command they cause, until
    /// nothing is left to do (a wait state). All state changes are staged in `state`.
    pub fn process_batch(&mut self, state: &mut Overlay<'_>, ctx: &ProcessingContext<'_>, commands: Vec<Command>) -> BatchOutput {
        let records = std::mem::take(&mut self.spare_records);
        let mut p = processing::Processing::new(
            self.partition,
            state,
            &mut self.processes,
            &mut self.awaiting,
            &mut self.correlations,
            ctx,
            records,
        );
        p.limits = self.limits;
        p.expect_commands(commands.len());
        for command in commands {
            processors::run(&mut p, command);
        }
        p.finish()
    }

    /// Takes back a batch's records once the caller is done with them: they are dropped, and
    /// the next batch writes into their vector instead of growing a new one (a W2 batch writes
    /// ~1,000 records of ~350 bytes).
    pub fn recycle(&mut self, mut records: Vec<waggle_protocol::Record>) {
        records.clear();
        if records.capacity() <= MAX_SPARE_RECORDS {
            self.spare_records = records;
        }
    }

    /// Applies the events of an entry that is already in the log (recovery, followers).
    pub fn replay(&mut self, state: &mut Overlay<'_>, entry: &Entry) {
        // the counter staged so far is at or past the base's, which is all the rule needs
        let next_counter = state.get(META_NEXT_KEY).map(|b| i64::from_be_bytes(b.try_into().expect("next key"))).unwrap_or(1);
        state.set_absent_from_base(tables::absent_from_state(self.partition, next_counter));
        for record in &entry.records {
            if record.is_event() {
                appliers::apply(state, &mut self.processes, record);
            }
        }
        if let Some(last) = entry.records.last() {
            state.put(META_LAST_POSITION.to_vec(), last.position.to_be_bytes().to_vec());
        }
        state.put(META_NEXT_KEY.to_vec(), entry.next_key_counter.to_be_bytes().to_vec());
    }

    /// As [`Self::replay`], for the entry's bytes: each record is applied as it is decoded
    /// ([`waggle_protocol::codec::for_each_record`]), no entry built. When the bytes are not
    /// an entry, part of it may be staged: the caller discards the overlay. Returns the
    /// backup checkpoint the entry CREATED, if any (the broker keeps a copy of the state at
    /// that entry: see [`created_checkpoint`]).
    pub fn replay_encoded(
        &mut self,
        state: &mut Overlay<'_>,
        bytes: &[u8],
    ) -> Result<Option<waggle_protocol::value::CheckpointRecord>, waggle_protocol::codec::CodecError> {
        let next_counter = state.get(META_NEXT_KEY).map(|b| i64::from_be_bytes(b.try_into().expect("next key"))).unwrap_or(1);
        state.set_absent_from_base(tables::absent_from_state(self.partition, next_counter));
        let mut last_position = None;
        let mut checkpoint = None;
        let processes = &mut self.processes;
        let next_key_counter = waggle_protocol::codec::for_each_record(bytes, |record| {
            if record.is_event() {
                appliers::apply(state, processes, record);
                checkpoint = created_checkpoint(std::slice::from_ref(record)).or(checkpoint.take());
            }
            last_position = Some(record.position);
        })?;
        if let Some(last) = last_position {
            state.put(META_LAST_POSITION.to_vec(), last.to_be_bytes().to_vec());
        }
        state.put(META_NEXT_KEY.to_vec(), next_key_counter.to_be_bytes().to_vec());
        Ok(checkpoint)
    }

    /// Position of the last record in state (0 when empty).
    pub fn last_position(state: &dyn KvRead) -> u64 {
        state.get(META_LAST_POSITION).map(|b| u64::from_be_bytes(b.try_into().expect("position"))).unwrap_or(0)
    }
}

/// The backup checkpoint the last CHECKPOINT CREATED event among `records` holds, if any (two
/// backups' commands in one batch: the state after the entry is the later one's).
pub fn created_checkpoint(records: &[waggle_protocol::Record]) -> Option<waggle_protocol::value::CheckpointRecord> {
    records.iter().rev().find_map(|r| match &r.value {
        waggle_protocol::RecordValue::Checkpoint(c) if r.is_event() && r.intent == waggle_protocol::Intent::Created => Some(c.clone()),
        _ => None,
    })
}
