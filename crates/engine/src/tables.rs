//! The engine's tables over the ordered key-value store: key layout, stored types, and
//! read-only accessors. Writes live in `appliers` only (constraint C2).
//!
//! Key layout (all integers big-endian so prefix scans come out in numeric order):
//! - `P/k/<process key>`                 → ProcessRecord
//! - `P/v/<bpmn id>\0<version>`          → process key
//! - `P/l/<bpmn id>`                     → latest version (i32) + key
//! - `P/t/<bpmn id>\0<version tag>`      → latest version (i32) + key with that `zeebe:versionTag`
//! - `P/d/<process key>`                 → key of the deployment that created the process
//! - `P/D/<deployment key><bpmn id>`     → key of the process of that id in the deployment
//! - `P/n/<bpmn id>`                     → highest version (i32) of a process id that was deleted
//!   while it was the latest (versions are never given twice)
//! - `PR/<process key>`                  → i64: how many process instances of that definition
//!   are active (a deletion is refused while any are)
//! - `DQ/k/<drg key>`                   → DecisionRequirementsRecord (with its resource)
//! - `DQ/l/<drg id>`                    → latest version (i32) + key
//! - `DQ/v/<drg id>\0<version>`         → key (every version still deployed)
//! - `DC/k/<decision key>`              → DecisionRecord
//! - `DC/l/<decision id>`               → latest version (i32) + key
//! - `DC/v/<decision id>\0<version>`    → key
//! - `DC/r/<drg key>/<decision id>`     → decision key (the decisions of a DRG)
//! - `FO/k/<form key>`                  → FormRecord (with its resource)
//! - `FO/l/<form id>`                   → latest version (i32) + key
//! - `FO/v/<form id>\0<version>`        → key
//! - `E/<element instance key>`          → ElementInstance
//! - `C/<flow scope key>/<child key>`    → () (children of a scope)
//! - `V/<scope key>/<name>`              → StoredVariable
//! - `J/<job key>`                       → StoredJob
//! - `A/<job type>\0<job key>`           → () activatable jobs
//! - `D/<deadline ms>/<job key>`         → () activated jobs by deadline
//! - `B/<recurring ms>/<job key>`        → () failed jobs waiting for their back-off
//! - `I/<incident key>`                  → IncidentRecord
//! - `IE/<element instance key>`         → incident key (element incidents)
//! - `IJ/<job key>`                      → incident key (job incidents)
//! - `M/<message key>`                   → MessageRecord
//! - `MI/<name>\0<correlation key>\0<message id>` → message key (de-duplication)
//! - `MD/<deadline ms>/<message key>`    → () messages by expiry
//! - `F/<flow scope key>/<flow id>`      → u32 taken count (parallel joins)
//! - `T/<timer key>`                     → TimerRecord
//! - `TD/<due ms>/<timer key>`           → () timers by due date
//! - `TE/<element instance key>/<timer key>` → () timers of an element instance
//! - `PS/<element instance key>/<event id>` → ProcessMessageSubscriptionRecord
//! - `MS/<name>\0<correlation key>\0<element instance key>` → MessageSubscriptionRecord
//! - `MN/<name>\0<correlation key>\0<message key>` → () buffered messages, oldest first
//! - `MC/<message key>/<bpmn process id>` → () a message correlated to a process
//! - `MSS/<message name>\0<bpmn process id>\0<start event id>` → MessageStartEventSubscriptionRecord
//! - `MA/<bpmn process id>\0<correlation key>` → process instance key started by a message
//! - `MAR/<process instance key>`      → (bpmn process id, correlation key) of the above
//! - `SS/<signal name>\0<instance key>/<definition key>/<event id>` → SignalSubscriptionRecord
//! - `SE/<instance key>/<definition key>/<event id>` → SignalSubscriptionRecord (by element
//!   instance; instance key -1: start events of a process definition)
//! - `O/<partition u16>/<distribution key>` → CommandDistributionRecord: commands sent to
//!   another partition and not acknowledged yet (the outbox, re-sent until acknowledged)
//! - `DR/<partition u16>/<distribution key>` → () commands received from a partition and processed
//! - `DL/<partition u16>`                 → i64: that partition had every command below this key
//!   acknowledged (`DR/` rows below it are gone; a copy below it is a duplicate)
//! - `MB/<body key>`                     → MultiInstanceBody: counters of a multi-instance body
//! - `CS/<process instance key>/<subscription key>` → CompensationSubscriptionRecord
//! - `MO/<body key>/<loop counter u32>`  → JSON text: an inner instance's output element, for a
//!   body whose output collection is too long to rewrite at each completion
//! - `PE/<scope key>`                    → (event key, ProcessEventRecord): an event triggered on
//!   the scope (PROCESS_EVENT TRIGGERING until TRIGGERED, or until its scope terminates; the
//!   first kept while another comes): an interrupting event waiting for the element instances
//!   it interrupts to terminate, a catch event until it completes
//! - `TS/<scope key>`                    → (): a scope that was terminating with children inside
//!   (from its ELEMENT_TERMINATING to its ELEMENT_TERMINATED), or an active scope terminating
//!   its children over later batches (from PROCESS_INSTANCE_BATCH TERMINATING to TERMINATED): a
//!   restart asks for the next PROCESS_INSTANCE_BATCH TERMINATE of those still holding
//!   children to terminate
//! - `RK/<correlation key>`              → (): a correlation key whose state was sent to its new
//!   partition (MESSAGE_RELOCATION MOVING) and not acknowledged yet; commands for it wait
//! - `X/relocation`                      → (count, desired count, done): the relocation of
//!   correlation keys (MESSAGE_RELOCATION RELOCATING, RELOCATED)
//! - `X/...`                             → broker metadata (applied index, counters)
//! - `X/last_checkpoint`                 → CheckpointRecord: the partition's last backup
//!   checkpoint (CHECKPOINT CREATED)
//!
//! Tenants: the rows that name a process, decision, graph or form by its id, and a message or
//! signal by its name (`P/v`, `P/l`, `P/t`, `P/n`, `DQ/`, `DC/`, `FO/` `l`/`v`, `MI/`, `MS/`,
//! `MN/`, `MSS/`, `MA/`, `SS/`) hold the tenant's part ([`tenant_part`]) before the id: nothing
//! for the default tenant (its rows are where they were before multi-tenancy), `0xFF <tenant>
//! 0xFF` for another. Activatable jobs (`A/`) are not split: activation reads each job's tenant.

use serde::{de::DeserializeOwned, Deserialize, Serialize};
use waggle_protocol::value::{
    CommandDistributionRecord, CompensationSubscriptionRecord, DecisionRecord, DecisionRequirementsRecord, FormRecord, IncidentRecord,
    JobRecord, MessageRecord, MessageStartEventSubscriptionRecord, MessageSubscriptionRecord, ProcessEventRecord, ProcessInstanceRecord,
    ProcessMessageSubscriptionRecord, ProcessRecord, SignalSubscriptionRecord, TimerRecord, UserTaskRecord,
};
use waggle_protocol::{key_counter, partition_of, PartitionId};
use waggle_state::{AbsentFromBase, DecodedValue, KvRead};

/// Metadata keys the engine keeps beside its tables: the key counter and the last position.
pub(crate) const META_NEXT_KEY: &[u8] = b"X/next_key";
pub(crate) const META_LAST_POSITION: &[u8] = b"X/last_position";
pub(crate) const LAST_CHECKPOINT: &[u8] = b"X/last_checkpoint";
/// The partition count's growth this (deployment) partition carries out or carried out last
/// (SCALE SCALING_UP and SCALED_UP): the event's key, its record and whether it is done.
pub(crate) const SCALE: &[u8] = b"X/scale";
/// The relocation of correlation keys this (old message) partition carries out or carried out
/// last (MESSAGE_RELOCATION RELOCATING and RELOCATED): (count, desired count, done).
pub(crate) const RELOCATION: &[u8] = b"X/relocation";

/// Whether rows of `table` (a key's prefix up to and including its first `/`) have keys that
/// start, after the table prefix, with the key of what owns the row (element instance, scope,
/// job, timer, incident, message, process instance): rows that can only be written once their
/// owner's key was generated. (Slice patterns, not a list of prefixes: this runs for every
/// read of an overlay, and comparing with a list took ~40 memcmp calls per instance read.)
fn owned_by_key(table: &[u8]) -> bool {
    matches!(
        table,
        [b'E' | b'C' | b'V' | b'F' | b'J' | b'T' | b'I' | b'M', b'/']
            | [b'T', b'E', b'/']
            | [b'P', b'S', b'/']
            | [b'I', b'E' | b'J', b'/']
            | [b'M', b'C', b'/']
            | [b'M', b'A', b'R', b'/']
            | [b'M', b'B' | b'O', b'/']
            | [b'C', b'S', b'/']
            | [b'U', b'T', b'/']
            | [b'P', b'E', b'/']
            | [b'T', b'S', b'/']
    )
}

/// Whether whole keys of `table` end with the key of what owns the row (a child, a job, a
/// timer, a message): indexes by type or due date.
fn ends_with_owner_key(table: &[u8]) -> bool {
    matches!(table, [b'C' | b'A' | b'D' | b'B', b'/'] | [b'T', b'E' | b'D', b'/'] | [b'M', b'D', b'/'])
}

/// A key's table prefix: up to and including its first `/` (within the first four bytes).
fn table_of(key: &[u8]) -> Option<&[u8]> {
    key.iter().take(4).position(|&b| b == b'/').map(|end| &key[..=end])
}

/// For an overlay over state whose key counter stands at `next_counter`: rows (and prefixes)
/// owned by a key this partition generated at or after that counter cannot be in that state,
/// so reading them skips the store (most rows a batch touches belong to instances it created).
pub(crate) fn absent_from_state(partition: PartitionId, next_counter: i64) -> AbsentFromBase {
    Box::new(move |key: &[u8], whole_key: bool| owned_since(partition, key, whole_key, next_counter))
}

/// For a store: which rows its RocksDB cannot hold, by the key counter of the state RocksDB has
/// (the rule of [`absent_from_state`]; every commit writes the counter's row).
pub fn stored_absence(partition: PartitionId) -> waggle_state::StoredAbsence {
    waggle_state::StoredAbsence {
        counter_key: META_NEXT_KEY,
        absent: Box::new(move |key: &[u8], whole_key: bool, counter: i64| owned_since(partition, key, whole_key, counter)),
    }
}

/// Whether `key` (a whole key, or a prefix) is owned by a key this partition generated at or
/// after `counter`.
fn owned_since(partition: PartitionId, key: &[u8], whole_key: bool, counter: i64) -> bool {
    let generated_since = |owner: &[u8]| {
        let owner = i64::from_be_bytes(owner.try_into().expect("eight bytes"));
        partition_of(owner) == partition && key_counter(owner) >= counter
    };
    let Some(table) = table_of(key) else { return false };
    let first = owned_by_key(table) && key.get(table.len()..table.len() + 8).is_some_and(generated_since);
    first || whole_key && ends_with_owner_key(table) && key.len() >= table.len() + 8 && generated_since(&key[key.len() - 8..])
}

pub(crate) fn be(key: i64) -> [u8; 8] {
    (key as u64).to_be_bytes()
}

pub(crate) fn k(parts: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::with_capacity(parts.iter().map(|p| p.len()).sum());
    for p in parts {
        out.extend_from_slice(p);
    }
    out
}

thread_local! {
    /// Where [`encode`] writes a value before copying it out: its capacity outlives the call.
    static ENCODE_SCRATCH: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A state value in postcard, allocated once at its exact size (not grown while written).
pub(crate) fn encode<T: Serialize>(v: &T) -> Vec<u8> {
    ENCODE_SCRATCH.with_borrow_mut(|scratch| waggle_protocol::postcard_vec::to_exact_vec(v, scratch))
}

/// A state value decoded. A row that does not decode is corrupt state: the panic names the
/// row's type and is contained to the partition, which restarts and, if it keeps failing, is
/// left down (the broker's `partition/supervise.rs`).
pub(crate) fn decode<T: DeserializeOwned>(bytes: &[u8]) -> T {
    postcard::from_bytes(bytes)
        .unwrap_or_else(|e| panic!("corrupt state row: a {} of {} bytes does not decode: {e}", std::any::type_name::<T>(), bytes.len()))
}

/// The tenant's part of a key naming a tenant's process, decision, form, message or signal by
/// its id or name: nothing for the default tenant (so its rows are where they were before
/// multi-tenancy, and data folders of older versions read the same), else `0xFF`, the tenant,
/// `0xFF`. No UTF-8 text holds the byte 0xFF, so no id of the default tenant begins so, and
/// no prefix scan of one tenant's ids reaches another's.
pub(crate) fn tenant_part(tenant: &str) -> Vec<u8> {
    if waggle_protocol::is_default_tenant(tenant) {
        return Vec::new();
    }
    k(&[b"\xFF", tenant.as_bytes(), b"\xFF"])
}

pub(crate) fn process_key(key: i64) -> Vec<u8> {
    k(&[b"P/k/", &be(key)])
}
pub(crate) fn process_version_key(tenant: &str, id: &str, version: i32) -> Vec<u8> {
    k(&[b"P/v/", &tenant_part(tenant), id.as_bytes(), b"\0", &version.to_be_bytes()])
}
pub(crate) fn process_latest_key(tenant: &str, id: &str) -> Vec<u8> {
    k(&[b"P/l/", &tenant_part(tenant), id.as_bytes()])
}
pub(crate) fn process_version_tag_key(tenant: &str, id: &str, tag: &str) -> Vec<u8> {
    k(&[b"P/t/", &tenant_part(tenant), id.as_bytes(), b"\0", tag.as_bytes()])
}
pub(crate) fn process_deleted_version_key(tenant: &str, id: &str) -> Vec<u8> {
    k(&[b"P/n/", &tenant_part(tenant), id.as_bytes()])
}
pub(crate) fn running_instances_key(process: i64) -> Vec<u8> {
    k(&[b"PR/", &be(process)])
}
pub(crate) fn process_deployment_key(process: i64) -> Vec<u8> {
    k(&[b"P/d/", &be(process)])
}
pub(crate) fn deployment_process_key(deployment: i64, id: &str) -> Vec<u8> {
    k(&[b"P/D/", &be(deployment), id.as_bytes()])
}
pub(crate) fn drg_key(key: i64) -> Vec<u8> {
    k(&[b"DQ/k/", &be(key)])
}
pub(crate) fn drg_latest_key(tenant: &str, id: &str) -> Vec<u8> {
    k(&[b"DQ/l/", &tenant_part(tenant), id.as_bytes()])
}
pub(crate) fn decision_key(key: i64) -> Vec<u8> {
    k(&[b"DC/k/", &be(key)])
}
pub(crate) fn decision_latest_key(tenant: &str, id: &str) -> Vec<u8> {
    k(&[b"DC/l/", &tenant_part(tenant), id.as_bytes()])
}
pub(crate) fn decision_in_drg_key(drg: i64, id: &str) -> Vec<u8> {
    k(&[b"DC/r/", &be(drg), b"/", id.as_bytes()])
}
/// The version index of a decision requirements graph (`DQ/`), decision (`DC/`) or form
/// (`FO/`) id: `<table>v/<id>\0` then the version.
pub(crate) fn version_prefix(table: &[u8], tenant: &str, id: &str) -> Vec<u8> {
    k(&[table, b"v/", &tenant_part(tenant), id.as_bytes(), b"\0"])
}
pub(crate) fn version_key(table: &[u8], tenant: &str, id: &str, version: i32) -> Vec<u8> {
    k(&[table, b"v/", &tenant_part(tenant), id.as_bytes(), b"\0", &version.to_be_bytes()])
}
pub(crate) fn form_key(key: i64) -> Vec<u8> {
    k(&[b"FO/k/", &be(key)])
}
pub(crate) fn form_latest_key(tenant: &str, id: &str) -> Vec<u8> {
    k(&[b"FO/l/", &tenant_part(tenant), id.as_bytes()])
}
/// A Zeebe user task by its key (`UT/`).
pub(crate) fn user_task_key(key: i64) -> Vec<u8> {
    k(&[b"UT/", &be(key)])
}
/// Tables only ever read by key, never scanned (element instances, jobs): a store may keep
/// their rows unordered (`RocksStore::open_with_point_tables`).
pub const POINT_TABLES: &[&[u8]] = &[b"E/", b"J/"];

pub(crate) fn element_key(key: i64) -> Vec<u8> {
    element_key_bytes(key).to_vec()
}
/// [`element_key`] on the stack, for reads (they need no owned key).
pub(crate) fn element_key_bytes(key: i64) -> [u8; 10] {
    table_key(*b"E/", key)
}
pub(crate) fn child_prefix(scope: i64) -> Vec<u8> {
    k(&[b"C/", &be(scope), b"/"])
}
pub(crate) fn child_key(scope: i64, child: i64) -> Vec<u8> {
    k(&[b"C/", &be(scope), b"/", &be(child)])
}
pub(crate) fn variable_prefix(scope: i64) -> Vec<u8> {
    k(&[b"V/", &be(scope), b"/"])
}
pub(crate) fn variable_key(scope: i64, name: &str) -> Vec<u8> {
    k(&[b"V/", &be(scope), b"/", name.as_bytes()])
}
pub(crate) fn job_key(key: i64) -> Vec<u8> {
    job_key_bytes(key).to_vec()
}
/// [`job_key`] on the stack, for reads.
pub(crate) fn job_key_bytes(key: i64) -> [u8; 10] {
    table_key(*b"J/", key)
}
/// A two-byte table prefix and a key.
fn table_key(table: [u8; 2], key: i64) -> [u8; 10] {
    let mut out = [0u8; 10];
    out[..2].copy_from_slice(&table);
    out[2..].copy_from_slice(&be(key));
    out
}
pub(crate) fn activatable_prefix(job_type: &str) -> Vec<u8> {
    k(&[b"A/", job_type.as_bytes(), b"\0"])
}
pub(crate) fn activatable_key(job_type: &str, key: i64) -> Vec<u8> {
    k(&[b"A/", job_type.as_bytes(), b"\0", &be(key)])
}
pub(crate) fn deadline_key(deadline_ms: i64, key: i64) -> Vec<u8> {
    k(&[b"D/", &be(deadline_ms), b"/", &be(key)])
}
pub(crate) fn backoff_key(due_ms: i64, key: i64) -> Vec<u8> {
    k(&[b"B/", &be(due_ms), b"/", &be(key)])
}
pub(crate) fn mi_body_key(body: i64) -> Vec<u8> {
    k(&[b"MB/", &be(body)])
}
/// `PE/<scope>`: the interrupting event waiting on element instance `scope`.
pub(crate) fn process_event_key(scope: i64) -> Vec<u8> {
    k(&[b"PE/", &be(scope)])
}
/// `TS/<scope>`: a scope terminating with children inside.
pub(crate) fn terminating_scope_key(scope: i64) -> Vec<u8> {
    k(&[b"TS/", &be(scope)])
}
pub(crate) fn mi_output_prefix(body: i64) -> Vec<u8> {
    k(&[b"MO/", &be(body), b"/"])
}
pub(crate) fn mi_output_key(body: i64, loop_counter: u32) -> Vec<u8> {
    k(&[b"MO/", &be(body), b"/", &loop_counter.to_be_bytes()])
}
/// `CS/<process instance>/<subscription>`: the compensation subscriptions of a process instance.
pub(crate) fn compensation_prefix(process_instance: i64) -> Vec<u8> {
    k(&[b"CS/", &be(process_instance), b"/"])
}
pub(crate) fn compensation_key(process_instance: i64, subscription: i64) -> Vec<u8> {
    k(&[b"CS/", &be(process_instance), b"/", &be(subscription)])
}
pub(crate) fn incident_key(key: i64) -> Vec<u8> {
    k(&[b"I/", &be(key)])
}
pub(crate) fn element_incident_key(element: i64) -> Vec<u8> {
    k(&[b"IE/", &be(element)])
}
pub(crate) fn job_incident_key(job: i64) -> Vec<u8> {
    k(&[b"IJ/", &be(job)])
}
pub(crate) fn message_key(key: i64) -> Vec<u8> {
    k(&[b"M/", &be(key)])
}
pub(crate) fn message_id_key(tenant: &str, name: &str, correlation: &str, id: &str) -> Vec<u8> {
    k(&[b"MI/", &tenant_part(tenant), name.as_bytes(), b"\0", correlation.as_bytes(), b"\0", id.as_bytes()])
}
pub(crate) fn message_deadline_key(deadline_ms: i64, key: i64) -> Vec<u8> {
    k(&[b"MD/", &be(deadline_ms), b"/", &be(key)])
}
pub(crate) fn taken_flow_key(scope: i64, flow_id: &str) -> Vec<u8> {
    k(&[b"F/", &be(scope), b"/", flow_id.as_bytes()])
}

pub(crate) fn timer_key(key: i64) -> Vec<u8> {
    k(&[b"T/", &be(key)])
}
pub(crate) fn timer_due_key(due_ms: i64, key: i64) -> Vec<u8> {
    k(&[b"TD/", &be(due_ms), b"/", &be(key)])
}
pub(crate) fn element_timer_prefix(element: i64) -> Vec<u8> {
    k(&[b"TE/", &be(element), b"/"])
}
pub(crate) fn element_timer_key(element: i64, key: i64) -> Vec<u8> {
    k(&[b"TE/", &be(element), b"/", &be(key)])
}
pub(crate) fn process_subscription_prefix(element: i64) -> Vec<u8> {
    k(&[b"PS/", &be(element), b"/"])
}
pub(crate) fn process_subscription_key(element: i64, event_id: &str) -> Vec<u8> {
    k(&[b"PS/", &be(element), b"/", event_id.as_bytes()])
}
pub(crate) fn message_subscription_prefix(tenant: &str, name: &str, correlation: &str) -> Vec<u8> {
    k(&[b"MS/", &tenant_part(tenant), name.as_bytes(), b"\0", correlation.as_bytes(), b"\0"])
}
pub(crate) fn message_subscription_key(tenant: &str, name: &str, correlation: &str, element: i64) -> Vec<u8> {
    k(&[b"MS/", &tenant_part(tenant), name.as_bytes(), b"\0", correlation.as_bytes(), b"\0", &be(element)])
}
pub(crate) fn message_name_prefix(tenant: &str, name: &str, correlation: &str) -> Vec<u8> {
    k(&[b"MN/", &tenant_part(tenant), name.as_bytes(), b"\0", correlation.as_bytes(), b"\0"])
}
pub(crate) fn message_name_key(tenant: &str, name: &str, correlation: &str, key: i64) -> Vec<u8> {
    k(&[b"MN/", &tenant_part(tenant), name.as_bytes(), b"\0", correlation.as_bytes(), b"\0", &be(key)])
}
pub(crate) fn message_correlated_prefix(message: i64) -> Vec<u8> {
    k(&[b"MC/", &be(message), b"/"])
}
pub(crate) fn message_correlated_key(message: i64, bpmn_process_id: &str) -> Vec<u8> {
    k(&[b"MC/", &be(message), b"/", bpmn_process_id.as_bytes()])
}
pub(crate) fn message_start_prefix(tenant: &str, name: &str) -> Vec<u8> {
    k(&[b"MSS/", &tenant_part(tenant), name.as_bytes(), b"\0"])
}
pub(crate) fn message_start_key(tenant: &str, name: &str, bpmn_process_id: &str, event_id: &str) -> Vec<u8> {
    k(&[b"MSS/", &tenant_part(tenant), name.as_bytes(), b"\0", bpmn_process_id.as_bytes(), b"\0", event_id.as_bytes()])
}
pub(crate) fn message_started_key(tenant: &str, bpmn_process_id: &str, correlation: &str) -> Vec<u8> {
    k(&[b"MA/", &tenant_part(tenant), bpmn_process_id.as_bytes(), b"\0", correlation.as_bytes()])
}
pub(crate) fn relocating_key(correlation: &str) -> Vec<u8> {
    k(&[b"RK/", correlation.as_bytes()])
}
pub(crate) fn message_started_reverse_key(process_instance: i64) -> Vec<u8> {
    k(&[b"MAR/", &be(process_instance)])
}
pub(crate) fn signal_prefix(tenant: &str, name: &str) -> Vec<u8> {
    k(&[b"SS/", &tenant_part(tenant), name.as_bytes(), b"\0"])
}
pub(crate) fn signal_key(s: &SignalSubscriptionRecord) -> Vec<u8> {
    k(&[
        b"SS/",
        &tenant_part(&s.tenant_id),
        s.signal_name.as_bytes(),
        b"\0",
        &be(s.catch_event_instance_key),
        b"/",
        &be(s.process_definition_key),
        b"/",
        s.catch_event_id.as_bytes(),
    ])
}
pub(crate) fn element_signal_prefix(element: i64) -> Vec<u8> {
    k(&[b"SE/", &be(element), b"/"])
}
pub(crate) fn element_signal_key(s: &SignalSubscriptionRecord) -> Vec<u8> {
    k(&[b"SE/", &be(s.catch_event_instance_key), b"/", &be(s.process_definition_key), b"/", s.catch_event_id.as_bytes()])
}
pub(crate) fn outbox_prefix(partition: u16) -> Vec<u8> {
    k(&[b"O/", &partition.to_be_bytes(), b"/"])
}
pub(crate) fn outbox_key(partition: u16, key: i64) -> Vec<u8> {
    k(&[b"O/", &partition.to_be_bytes(), b"/", &be(key)])
}
pub(crate) fn received_prefix(source: u16) -> Vec<u8> {
    k(&[b"DR/", &source.to_be_bytes(), b"/"])
}
pub(crate) fn received_key(source: u16, key: i64) -> Vec<u8> {
    k(&[b"DR/", &source.to_be_bytes(), b"/", &be(key)])
}
pub(crate) fn received_below_key(source: u16) -> Vec<u8> {
    k(&[b"DL/", &source.to_be_bytes()])
}

/// Whether two tenant ids name the same tenant (an empty one, as older records carry, is the
/// default tenant).
pub(crate) fn same_tenant(a: &str, b: &str) -> bool {
    a == b || (waggle_protocol::is_default_tenant(a) && waggle_protocol::is_default_tenant(b))
}

/// Whether a job of `tenant` belongs to one of `tenants` (a job of an older version's data,
/// without a tenant, is the default tenant's).
pub(crate) fn job_of_tenants(tenant: &str, tenants: &[&str]) -> bool {
    let tenant = if tenant.is_empty() { waggle_protocol::DEFAULT_TENANT } else { tenant };
    tenants.contains(&tenant)
}

/// Lifecycle state of an element instance (Zeebe's ProcessInstanceIntent states).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ElementState {
    Activating,
    Activated,
    Completing,
    Completed,
    Terminating,
    Terminated,
}

/// An element instance in flight.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ElementInstance {
    pub key: i64,
    pub state: ElementState,
    pub record: ProcessInstanceRecord,
    /// Element instances inside this one that have not completed or terminated.
    pub active_children: u32,
    /// Sequence flows taken inside this scope whose target has not been activated yet.
    pub active_flows: u32,
    /// The job of a service task (-1 when none); for a Zeebe user task, its user task's key.
    pub job_key: i64,
    /// Whether a variable was ever created in this scope. Scopes without one (most of them)
    /// are passed over by lookups and by the clean-up at completion without a prefix scan.
    pub has_variables: bool,
}

/// What state keeps of a multi-instance body beside its element instance (Zeebe keeps these
/// counters on the body's element instance): written by the appliers of its inner instances'
/// lifecycle events.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MultiInstanceBody {
    /// Inner instances activated so far (`numberOfInstances`; the last one's `loopCounter`).
    pub activated: u32,
    pub completed: u32,
    pub terminated: u32,
    /// A parallel body whose inner instances are still being activated, a chunk per batch
    /// (PROCESS_INSTANCE_BATCH ACTIVATE commands until ACTIVATED).
    pub activating: bool,
    /// Items of the output collection (0: none).
    pub outputs: u32,
}

/// Tables whose rows an overlay keeps decoded for a batch (see `Overlay::put_decoded`): element
/// instances change at every step of their lifecycle, jobs at creation, activation and
/// completion, mostly within a batch or two.
macro_rules! kept_decoded {
    ($($t:ty),*) => {$(
        impl DecodedValue for $t {
            fn encode(&self) -> Vec<u8> {
                encode(self)
            }
            fn as_any(&self) -> &dyn std::any::Any {
                self
            }
            fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
                self
            }
        }
    )*};
}
kept_decoded!(ElementInstance, StoredJob);

/// Decodes a stored row into the value an overlay keeps.
pub(crate) fn decode_boxed<T: DeserializeOwned + DecodedValue>(bytes: &[u8]) -> Box<dyn DecodedValue> {
    Box::new(decode::<T>(bytes))
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredVariable {
    pub key: i64,
    /// JSON text.
    pub value: String,
}

/// Zeebe's job states.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum JobState {
    Activatable,
    Activated,
    Failed,
    ErrorThrown,
}

impl JobState {
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Activatable => "ACTIVATABLE",
            JobState::Activated => "ACTIVATED",
            JobState::Failed => "FAILED",
            JobState::ErrorThrown => "ERROR_THROWN",
        }
    }
}

/// Zeebe's user task lifecycle states (its `UserTaskState.LifecycleState`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum UserTaskState {
    Creating,
    Created,
    Assigning,
    Updating,
    Completing,
    Canceling,
}

impl UserTaskState {
    pub fn as_str(self) -> &'static str {
        match self {
            UserTaskState::Creating => "CREATING",
            UserTaskState::Created => "CREATED",
            UserTaskState::Assigning => "ASSIGNING",
            UserTaskState::Updating => "UPDATING",
            UserTaskState::Completing => "COMPLETING",
            UserTaskState::Canceling => "CANCELING",
        }
    }
}

/// A Zeebe user task in flight (`UT/`): its state and its record as last written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredUserTask {
    pub state: UserTaskState,
    pub record: UserTaskRecord,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredJob {
    pub state: JobState,
    pub record: JobRecord,
}

/// Read-only, typed view of the tables.
#[derive(Clone, Copy)]
pub struct StateView<'a> {
    pub(crate) kv: &'a dyn KvRead,
}

impl<'a> StateView<'a> {
    pub fn new(kv: &'a dyn KvRead) -> Self {
        Self { kv }
    }

    fn get<T: DeserializeOwned>(&self, key: &[u8]) -> Option<T> {
        self.kv.get(key).map(|b| decode(&b))
    }
    pub(crate) fn get_raw<T: DeserializeOwned>(&self, key: &[u8]) -> Option<T> {
        self.get(key)
    }

    pub fn process(&self, key: i64) -> Option<ProcessRecord> {
        self.get(&process_key(key))
    }
    /// (version, key) of the newest version of a process.
    pub fn latest_process(&self, tenant: &str, bpmn_id: &str) -> Option<(i32, i64)> {
        self.get(&process_latest_key(tenant, bpmn_id))
    }
    /// The version the next deployment of a process id gets: one above the newest version,
    /// deleted ones included.
    pub fn next_process_version(&self, tenant: &str, bpmn_id: &str) -> i32 {
        let latest = self.latest_process(tenant, bpmn_id).map_or(0, |(v, _)| v);
        let deleted = self.get::<i32>(&process_deleted_version_key(tenant, bpmn_id)).unwrap_or(0);
        latest.max(deleted) + 1
    }
    /// (version, key) of the newest version of a process below `version`.
    pub fn process_version_before(&self, tenant: &str, bpmn_id: &str, version: i32) -> Option<(i32, i64)> {
        let prefix = version_prefix(b"P/", tenant, bpmn_id);
        self.kv
            .scan_prefix(&prefix)
            .filter_map(|(key, value)| {
                let v = i32::from_be_bytes(key.get(prefix.len()..)?.try_into().ok()?);
                (v < version).then(|| (v, decode::<i64>(&value)))
            })
            .last()
    }
    /// How many process instances of definition `process` are active.
    pub fn running_instances(&self, process: i64) -> i64 {
        self.get(&running_instances_key(process)).unwrap_or(0)
    }
    pub fn process_by_version(&self, tenant: &str, bpmn_id: &str, version: i32) -> Option<i64> {
        self.get(&process_version_key(tenant, bpmn_id, version))
    }
    /// (version, key) of the newest version of a process with a `zeebe:versionTag`.
    pub fn process_by_version_tag(&self, tenant: &str, bpmn_id: &str, tag: &str) -> Option<(i32, i64)> {
        self.get(&process_version_tag_key(tenant, bpmn_id, tag))
    }
    /// The key of the deployment that created a process version.
    pub fn deployment_of(&self, process: i64) -> Option<i64> {
        self.get(&process_deployment_key(process))
    }
    /// The key of the process `bpmn_id` a deployment holds (new or unchanged).
    pub fn process_in_deployment(&self, deployment: i64, bpmn_id: &str) -> Option<i64> {
        self.get(&deployment_process_key(deployment, bpmn_id))
    }
    pub fn drg(&self, key: i64) -> Option<DecisionRequirementsRecord> {
        self.get(&drg_key(key))
    }
    /// (version, key) of the newest version of a decision requirements graph.
    pub fn latest_drg(&self, tenant: &str, id: &str) -> Option<(i32, i64)> {
        self.get(&drg_latest_key(tenant, id))
    }
    pub fn decision(&self, key: i64) -> Option<DecisionRecord> {
        self.get(&decision_key(key))
    }
    /// (version, key) of the newest version of a decision.
    pub fn latest_decision(&self, tenant: &str, id: &str) -> Option<(i32, i64)> {
        self.get(&decision_latest_key(tenant, id))
    }
    /// The key of decision `id` of the decision requirements graph `drg`.
    pub fn decision_in_drg(&self, drg: i64, id: &str) -> Option<i64> {
        self.get(&decision_in_drg_key(drg, id))
    }
    /// (version, key) of the newest version of `id` still deployed in a versioned table
    /// (`DQ/`, `DC/`, `FO/`: see [`version_key`]).
    pub fn newest_version(&self, table: &[u8], tenant: &str, id: &str) -> Option<(i32, i64)> {
        let prefix = version_prefix(table, tenant, id);
        self.kv
            .scan_prefix(&prefix)
            .filter_map(|(key, value)| {
                let version = i32::from_be_bytes(key.get(prefix.len()..)?.try_into().ok()?);
                Some((version, decode::<i64>(&value)))
            })
            .last()
    }
    /// The decisions of the decision requirements graph `drg`: (decision id, key).
    pub fn decisions_of(&self, drg: i64) -> Vec<(String, i64)> {
        let prefix = k(&[b"DC/r/", &be(drg), b"/"]);
        self.kv
            .scan_prefix(&prefix)
            .map(|(key, value)| (String::from_utf8_lossy(&key[prefix.len()..]).into_owned(), decode::<i64>(&value)))
            .collect()
    }
    pub fn form(&self, key: i64) -> Option<FormRecord> {
        self.get(&form_key(key))
    }
    /// (version, key) of the newest version of a form.
    pub fn latest_form(&self, tenant: &str, id: &str) -> Option<(i32, i64)> {
        self.get(&form_latest_key(tenant, id))
    }
    pub fn element(&self, key: i64) -> Option<ElementInstance> {
        self.element_with(key, ElementInstance::clone)
    }
    /// What `f` takes from an element instance, without copying the instance. `f` must not
    /// read state itself.
    pub fn element_with<R>(&self, key: i64, f: impl FnOnce(&ElementInstance) -> R) -> Option<R> {
        self.decoded_with(&element_key_bytes(key), f)
    }
    /// What `f` takes from the row of `key` decoded as a `T`, without copying it.
    fn decoded_with<T: DeserializeOwned + DecodedValue, R>(&self, key: &[u8], f: impl FnOnce(&T) -> R) -> Option<R> {
        let mut f = Some(f);
        let mut out = None;
        self.kv.read_decoded(key, &decode_boxed::<T>, &mut |value| {
            if let (Some(value), Some(f)) = (value, f.take()) {
                out = Some(f(value.as_any().downcast_ref::<T>().expect("the table's type")));
            }
        });
        out
    }
    /// The first `n` children of a scope, oldest first.
    pub fn first_children(&self, scope: i64, n: usize) -> Vec<i64> {
        let prefix = child_prefix(scope);
        self.kv
            .scan_prefix(&prefix)
            .take(n)
            .map(|(key, _)| i64::from_be_bytes(key[prefix.len()..].try_into().expect("child key")))
            .collect()
    }
    /// The first `n` children of `scope` (oldest first) that are not terminating already (one
    /// holding a wide multi-instance body waits for it).
    pub fn first_children_not_terminating(&self, scope: i64, n: usize) -> Vec<i64> {
        let prefix = child_prefix(scope);
        self.kv
            .scan_prefix(&prefix)
            .map(|(key, _)| i64::from_be_bytes(key[prefix.len()..].try_into().expect("child key")))
            .filter(|&key| self.element(key).is_some_and(|e| e.state != ElementState::Terminating))
            .take(n)
            .collect()
    }
    pub fn children(&self, scope: i64) -> Vec<i64> {
        let prefix = child_prefix(scope);
        self.kv.scan_prefix(&prefix).map(|(key, _)| i64::from_be_bytes(key[prefix.len()..].try_into().expect("child key"))).collect()
    }
    /// The compensation subscriptions of a process instance, oldest first: (key, record).
    pub fn compensation_subscriptions(&self, process_instance: i64) -> Vec<(i64, CompensationSubscriptionRecord)> {
        let prefix = compensation_prefix(process_instance);
        self.kv
            .scan_prefix(&prefix)
            .map(|(key, v)| (i64::from_be_bytes(key[prefix.len()..].try_into().expect("subscription key")), decode(&v)))
            .collect()
    }
    pub fn variable(&self, scope: i64, name: &str) -> Option<StoredVariable> {
        self.get(&variable_key(scope, name))
    }
    /// Local variables of a scope: (name, JSON text).
    pub fn variables_of(&self, scope: i64) -> Vec<(String, String)> {
        let prefix = variable_prefix(scope);
        self.kv
            .scan_prefix(&prefix)
            .map(|(key, v)| {
                let name = String::from_utf8_lossy(&key[prefix.len()..]).into_owned();
                (name, decode::<StoredVariable>(&v).value)
            })
            .collect()
    }
    pub fn user_task(&self, key: i64) -> Option<StoredUserTask> {
        self.get(&user_task_key(key))
    }
    pub fn job(&self, key: i64) -> Option<StoredJob> {
        self.job_with(key, StoredJob::clone)
    }
    /// What `f` takes from a job, without copying the job. `f` must not read state itself.
    pub fn job_with<R>(&self, key: i64, f: impl FnOnce(&StoredJob) -> R) -> Option<R> {
        self.decoded_with(&job_key_bytes(key), f)
    }
    /// Up to `limit` activatable job keys of a type whose tenant is one of `tenants`, oldest
    /// first.
    pub fn activatable_jobs(&self, job_type: &str, tenants: &[&str], limit: usize) -> Vec<i64> {
        let prefix = activatable_prefix(job_type);
        self.kv
            .scan_prefix(&prefix)
            .map(|(key, _)| i64::from_be_bytes(key[prefix.len()..].try_into().expect("job key")))
            .filter(|&key| self.job_with(key, |j| job_of_tenants(&j.record.tenant_id, tenants)).unwrap_or(false))
            .take(limit)
            .collect()
    }
    pub fn incident(&self, key: i64) -> Option<IncidentRecord> {
        self.get(&incident_key(key))
    }
    pub fn element_incident(&self, element: i64) -> Option<i64> {
        self.get(&element_incident_key(element))
    }
    pub fn job_incident(&self, job: i64) -> Option<i64> {
        self.get(&job_incident_key(job))
    }
    /// All open incidents (for the management API).
    pub fn incidents(&self) -> Vec<(i64, IncidentRecord)> {
        self.kv.scan_prefix(b"I/").map(|(key, v)| (i64::from_be_bytes(key[2..10].try_into().expect("incident key")), decode(&v))).collect()
    }
    pub fn message(&self, key: i64) -> Option<MessageRecord> {
        self.get(&message_key(key))
    }
    pub fn message_by_id(&self, tenant: &str, name: &str, correlation: &str, id: &str) -> Option<i64> {
        self.get(&message_id_key(tenant, name, correlation, id))
    }
    pub fn timer(&self, key: i64) -> Option<TimerRecord> {
        self.get(&timer_key(key))
    }
    /// Keys of the timers an element instance waits on.
    pub fn timers_of(&self, element: i64) -> Vec<i64> {
        let prefix = element_timer_prefix(element);
        self.kv.scan_prefix(&prefix).map(|(key, _)| i64::from_be_bytes(key[prefix.len()..].try_into().expect("timer key"))).collect()
    }
    /// Timers due at `now_ms`: (due date, timer key).
    pub fn due_timers(&self, now_ms: i64, limit: usize) -> Vec<(i64, i64)> {
        self.due(b"TD/", now_ms, limit)
    }
    /// The earliest due date of any timer, job deadline, back-off or message expiry.
    pub fn next_due(&self) -> Option<i64> {
        [&b"TD/"[..], b"D/", b"B/", b"MD/"]
            .iter()
            .filter_map(|prefix| {
                self.kv
                    .scan_prefix(prefix)
                    .next()
                    .map(|(key, _)| i64::from_be_bytes(key[prefix.len()..prefix.len() + 8].try_into().expect("due")))
            })
            .min()
    }
    pub fn process_subscription(&self, element: i64, event_id: &str) -> Option<ProcessMessageSubscriptionRecord> {
        self.get(&process_subscription_key(element, event_id))
    }
    pub fn process_subscriptions_of(&self, element: i64) -> Vec<ProcessMessageSubscriptionRecord> {
        self.kv.scan_prefix(&process_subscription_prefix(element)).map(|(_, v)| decode(&v)).collect()
    }
    pub fn message_subscription(&self, tenant: &str, name: &str, correlation: &str, element: i64) -> Option<MessageSubscriptionRecord> {
        self.get(&message_subscription_key(tenant, name, correlation, element))
    }
    /// Open message subscriptions for a name and correlation key, oldest element first.
    pub fn message_subscriptions(&self, tenant: &str, name: &str, correlation: &str) -> Vec<MessageSubscriptionRecord> {
        self.kv.scan_prefix(&message_subscription_prefix(tenant, name, correlation)).map(|(_, v)| decode(&v)).collect()
    }
    /// Buffered (live) messages for a name and correlation key, oldest first.
    pub fn buffered_messages(&self, tenant: &str, name: &str, correlation: &str) -> Vec<i64> {
        let prefix = message_name_prefix(tenant, name, correlation);
        self.kv.scan_prefix(&prefix).map(|(key, _)| i64::from_be_bytes(key[prefix.len()..].try_into().expect("message key"))).collect()
    }
    pub fn message_correlated_to(&self, message: i64, bpmn_process_id: &str) -> bool {
        self.kv.get(&message_correlated_key(message, bpmn_process_id)).is_some()
    }
    /// Message start events open for a message name, one per (process, start event).
    pub fn message_start_subscriptions(&self, tenant: &str, name: &str) -> Vec<MessageStartEventSubscriptionRecord> {
        self.kv.scan_prefix(&message_start_prefix(tenant, name)).map(|(_, v)| decode(&v)).collect()
    }
    /// (bpmn process id, correlation key) of the message that started an active instance.
    pub fn started_by_message(&self, process_instance: i64) -> Option<(String, String)> {
        self.get(&message_started_reverse_key(process_instance))
    }
    /// The active instance a message with this correlation key started, if any.
    pub fn instance_started_by_message(&self, tenant: &str, bpmn_process_id: &str, correlation: &str) -> Option<i64> {
        self.get(&message_started_key(tenant, bpmn_process_id, correlation))
    }
    pub fn signal_subscriptions(&self, tenant: &str, name: &str) -> Vec<SignalSubscriptionRecord> {
        self.kv.scan_prefix(&signal_prefix(tenant, name)).map(|(_, v)| decode(&v)).collect()
    }
    /// Signal subscriptions of an element instance (-1: of process start events).
    pub fn signal_subscriptions_of(&self, element: i64) -> Vec<SignalSubscriptionRecord> {
        self.kv.scan_prefix(&element_signal_prefix(element)).map(|(_, v)| decode(&v)).collect()
    }
    /// Commands sent to other partitions and not acknowledged yet, by receiver and then key:
    /// (distribution key, record).
    /// The counters of multi-instance body `body`.
    pub(crate) fn mi_body(&self, body: i64) -> Option<MultiInstanceBody> {
        self.get(&mi_body_key(body))
    }
    /// Multi-instance bodies whose inner instances are still being activated.
    /// Every multi-instance body's key.
    pub(crate) fn mi_bodies(&self) -> Vec<i64> {
        self.kv.scan_prefix(b"MB/").map(|(key, _)| i64::from_be_bytes(key[3..11].try_into().expect("body key"))).collect()
    }
    /// The scopes that were terminating with children inside (`TS/`), oldest first.
    pub(crate) fn terminating_scopes(&self) -> Vec<i64> {
        self.kv.scan_prefix(b"TS/").map(|(key, _)| i64::from_be_bytes(key[3..11].try_into().expect("scope key"))).collect()
    }
    /// Whether `scope` is indexed in `TS/`: for an active scope, it terminates its children
    /// over later batches (PROCESS_INSTANCE_BATCH TERMINATING until TERMINATED) and goes on
    /// only after the last chunk.
    pub(crate) fn terminates_children(&self, scope: i64) -> bool {
        self.kv.get(&terminating_scope_key(scope)).is_some()
    }
    pub(crate) fn activating_mi_bodies(&self) -> Vec<i64> {
        self.kv
            .scan_prefix(b"MB/")
            .filter(|(_, v)| decode::<MultiInstanceBody>(v).activating)
            .map(|(key, _)| i64::from_be_bytes(key[3..11].try_into().expect("body key")))
            .collect()
    }
    /// The interrupting event waiting on element instance `scope` (PROCESS_EVENT TRIGGERING):
    /// its event key and record.
    /// The partition's last backup checkpoint (CHECKPOINT CREATED), if any.
    pub fn last_checkpoint(&self) -> Option<waggle_protocol::value::CheckpointRecord> {
        self.get(LAST_CHECKPOINT)
    }
    /// The partition count's growth under way or done last here (SCALE SCALING_UP, SCALED_UP):
    /// its key, record and whether it is done.
    pub fn scale(&self) -> Option<(i64, waggle_protocol::value::ScaleRecord, bool)> {
        self.get(SCALE)
    }
    /// The relocation of correlation keys under way or done last here (MESSAGE_RELOCATION
    /// RELOCATING, RELOCATED): (count, desired count, done).
    pub fn message_relocation(&self) -> Option<(u32, u32, bool)> {
        self.get(RELOCATION)
    }
    /// Whether the state of a correlation key left for its new partition and is not
    /// acknowledged yet.
    pub(crate) fn relocating(&self, correlation: &str) -> bool {
        self.kv.get(&relocating_key(correlation)).is_some()
    }
    /// Whether any correlation key's state is on its way to its new partition.
    pub(crate) fn any_relocating(&self) -> bool {
        self.kv.scan_prefix(b"RK/").next().is_some()
    }
    /// Every live message, oldest key first: (key, message).
    pub(crate) fn all_messages(&self) -> Vec<(i64, MessageRecord)> {
        self.kv.scan_prefix(b"M/").map(|(key, v)| (i64::from_be_bytes(key[2..10].try_into().expect("message key")), decode(&v))).collect()
    }
    /// The processes a message was correlated to (`MC/`).
    pub(crate) fn correlated_processes(&self, message: i64) -> Vec<String> {
        let prefix = message_correlated_prefix(message);
        self.kv.scan_prefix(&prefix).map(|(key, _)| String::from_utf8_lossy(&key[prefix.len()..]).into_owned()).collect()
    }
    /// Every message subscription (message side), in key order.
    pub(crate) fn all_message_subscriptions(&self) -> Vec<MessageSubscriptionRecord> {
        self.kv.scan_prefix(b"MS/").map(|(_, v)| decode(&v)).collect()
    }
    /// Every "one active instance per correlation key" marker of message start events:
    /// (tenant, bpmn process id, correlation key, process instance key).
    pub(crate) fn all_message_starts(&self) -> Vec<(String, String, String, i64)> {
        self.kv
            .scan_prefix(b"MA/")
            .filter_map(|(key, v)| {
                let rest = &key[3..];
                let (tenant, rest) = match rest.first() {
                    Some(0xFF) => {
                        let end = rest[1..].iter().position(|&b| b == 0xFF)? + 1;
                        (String::from_utf8_lossy(&rest[1..end]).into_owned(), &rest[end + 1..])
                    }
                    _ => (waggle_protocol::DEFAULT_TENANT.to_string(), rest),
                };
                let split = rest.iter().position(|&b| b == 0)?;
                let bpmn = String::from_utf8_lossy(&rest[..split]).into_owned();
                let correlation = String::from_utf8_lossy(&rest[split + 1..]).into_owned();
                Some((tenant, bpmn, correlation, decode::<i64>(&v)))
            })
            .collect()
    }
    /// Every process definition deployed and not deleted, oldest key first.
    pub(crate) fn all_processes(&self) -> Vec<ProcessRecord> {
        self.kv.scan_prefix(b"P/k/").map(|(_, v)| decode(&v)).collect()
    }
    /// Every decision requirements graph deployed and not deleted, oldest key first.
    pub(crate) fn all_drgs(&self) -> Vec<DecisionRequirementsRecord> {
        self.kv.scan_prefix(b"DQ/k/").map(|(_, v)| decode(&v)).collect()
    }
    /// Every form deployed and not deleted, oldest key first.
    pub(crate) fn all_forms(&self) -> Vec<FormRecord> {
        self.kv.scan_prefix(b"FO/k/").map(|(_, v)| decode(&v)).collect()
    }
    pub(crate) fn process_event(&self, scope: i64) -> Option<(i64, ProcessEventRecord)> {
        self.get(&process_event_key(scope))
    }
    /// The output elements kept apart for body `body`: (loop counter, JSON text), in order.
    pub(crate) fn mi_outputs(&self, body: i64) -> Vec<(u32, String)> {
        let prefix = mi_output_prefix(body);
        self.kv
            .scan_prefix(&prefix)
            .map(|(key, v)| (u32::from_be_bytes(key[prefix.len()..].try_into().expect("loop counter")), decode(&v)))
            .collect()
    }
    pub fn pending_distributions(&self) -> Vec<(i64, CommandDistributionRecord)> {
        self.kv
            .scan_prefix(b"O/")
            .map(|(key, v)| (i64::from_be_bytes(key[key.len() - 8..].try_into().expect("outbox key")), decode(&v)))
            .collect()
    }
    pub fn pending_distribution(&self, partition: u16, key: i64) -> Option<CommandDistributionRecord> {
        self.get(&outbox_key(partition, key))
    }
    /// The oldest unacknowledged distribution key for a partition, if any.
    pub fn oldest_pending_distribution(&self, partition: u16) -> Option<i64> {
        let prefix = outbox_prefix(partition);
        self.kv.scan_prefix(&prefix).next().map(|(key, _)| i64::from_be_bytes(key[prefix.len()..].try_into().expect("outbox key")))
    }
    /// Whether the command `key` from partition `source` was processed here already.
    pub fn distribution_received(&self, source: u16, key: i64) -> bool {
        key < self.distributions_acknowledged_below(source) || self.kv.get(&received_key(source, key)).is_some()
    }
    pub fn distributions_acknowledged_below(&self, source: u16) -> i64 {
        self.get(&received_below_key(source)).unwrap_or(i64::MIN)
    }

    /// Tokens on a sequence flow of a scope: taken, target not yet activated (or waiting at a join).
    pub fn taken_flows(&self, scope: i64, flow_id: &str) -> u32 {
        // a scope counts the tokens on its flows: without any, there is no row to read
        if self.element_with(scope, |e| e.active_flows == 0) == Some(true) {
            return 0;
        }
        self.get(&taken_flow_key(scope, flow_id)).unwrap_or(0)
    }

    /// Keys in a time index (`D/`, `B/`, `MD/`) due at or before `now_ms`, at most `limit`.
    /// Entries of a due-date index (`prefix` + due time + key) due at `now_ms`: (due time, key).
    fn due(&self, prefix: &[u8], now_ms: i64, limit: usize) -> Vec<(i64, i64)> {
        self.kv
            .scan_prefix(prefix)
            .map(|(key, _)| {
                let due = i64::from_be_bytes(key[prefix.len()..prefix.len() + 8].try_into().expect("due"));
                (due, i64::from_be_bytes(key[key.len() - 8..].try_into().expect("due key")))
            })
            .take_while(|(due, _)| *due <= now_ms)
            .take(limit)
            .collect()
    }
    /// Activated jobs whose deadline has passed: (deadline, job key).
    pub fn timed_out_jobs(&self, now_ms: i64, limit: usize) -> Vec<(i64, i64)> {
        self.due(b"D/", now_ms, limit)
    }
    /// Failed jobs whose retry back-off has elapsed: (due time, job key).
    pub fn jobs_due_after_backoff(&self, now_ms: i64, limit: usize) -> Vec<(i64, i64)> {
        self.due(b"B/", now_ms, limit)
    }
    /// Messages whose time to live has elapsed: (expiry, message key).
    pub fn expired_messages(&self, now_ms: i64, limit: usize) -> Vec<(i64, i64)> {
        self.due(b"MD/", now_ms, limit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use waggle_protocol::encode_key;

    #[test]
    fn stack_keys_are_the_stored_layout() {
        let key = encode_key(1, 0x0102_0304_0506);
        assert_eq!(element_key(key), [b"E/".as_slice(), &be(key)].concat());
        assert_eq!(job_key(key), [b"J/".as_slice(), &be(key)].concat());
        assert_eq!(element_key_bytes(-1).to_vec(), element_key(-1));
    }

    #[test]
    fn rows_of_keys_generated_after_the_state_are_absent_from_it() {
        let rule = absent_from_state(1, 100);
        let absent = |key: &[u8]| rule(key, true);
        let new = encode_key(1, 100);
        let old = encode_key(1, 99);
        assert!(absent(&element_key(new)));
        assert!(rule(&variable_prefix(new), false));
        assert!(absent(&child_key(new, old)));
        assert!(absent(&child_key(old, new)), "a new child of an old scope");
        assert!(!rule(&child_prefix(old), false));
        assert!(absent(&element_incident_key(new)));
        assert!(absent(&activatable_key("t", new)));
        assert!(absent(&deadline_key(5, new)));
        assert!(!absent(&deadline_key(5, old)));
        assert!(!rule(&activatable_key("t", new), false), "the end of a prefix is not an owner's key");
        assert!(!absent(&element_key(old)));
        assert!(!absent(&element_key(encode_key(2, 500))), "keys of other partitions");
        assert!(!absent(&element_key(-1)));
        assert!(!rule(b"E/", false), "a prefix shorter than the owner's key");
        assert!(!absent(&taken_flow_key(old, "f")), "tables not owned by a key");
        assert!(rule(&compensation_prefix(new), false), "a new process instance's compensation subscriptions");
        assert!(!absent(&compensation_key(old, new)), "a new subscription of an old process instance");
    }
}
