//! MESSAGE_RELOCATION: moving correlation keys to a grown partition count, exactly once (issue
//! 31; the step Zeebe 8.8 plans as `AWAIT_RELOCATION_COMPLETION`, "message correlation key
//! relocation").
//!
//! State kept by correlation key `k` lives on `hash(k) % count + 1`. Once the partition count
//! grew from `n` to `m` (and every new partition holds the deployments: SCALE SCALED_UP), the
//! cluster's coordinator sends MESSAGE_RELOCATION RELOCATE (`n`, `m`) to each old partition
//! (again until it is done; a copy is refused ALREADY_EXISTS). Its processing, in one batch:
//! - RELOCATING: the partition keeps the counts (`X/relocation`); from this batch on, every
//!   correlation key whose partition under `m` is another one is not here
//!   ([`distribution::route_of_correlation_key`]);
//! - for each such key with state here: MOVING takes its buffered messages (keys, deadlines and
//!   ids kept, with the processes each was correlated to), its message subscriptions (one
//!   CORRELATING included: the process partition's answer comes here, which answers a
//!   client's correlation waiting for it and forwards it), and its message start
//!   markers out of this partition and notes the key as on its way (`RK/`); MOVE carries them
//!   to the key's new partition through the exactly-once distribution, which writes them back
//!   as MOVED in the batch that processes it. The acknowledgement (its applier) ends the `RK/`;
//! - RELOCATED once no key is on its way: at once when nothing moved, else in the batch that
//!   takes the last acknowledgement ([`after_acknowledgement`]). The broker reports it; once
//!   every old partition did, the cluster's message count becomes `m`.
//!
//! Commands for a key that is not here ([`turns_away`], [`reroute`]), for as long as the
//! partition lives (stale gateways, a process partition's subscription opened by the old count,
//! distributions sent again):
//! - a client's publication or correlation is refused UNAVAILABLE, unwritten (the gateway
//!   retries by the count it learns);
//! - a command from another partition for a key on its way is not taken and not acknowledged
//!   (its sender sends it again); once the key arrived, it is acknowledged and forwarded to the
//!   key's partition (distributed exactly once again);
//! - a follow-up command of this partition goes through its own outbox while the key is on its
//!   way, and is forwarded once it arrived;
//! - a key this partition did not hold under the count before (a subscription opened two
//!   growths ago) is forwarded to its partition under that count, which holds it or forwards it
//!   on.
//!
//! So at every log position a key's state is in exactly one place (or on its way, while nothing
//! touches it), and a command reaches a key's new partition only after its state did.

use std::collections::BTreeMap;

use waggle_protocol::keys::partition_of_correlation_key;
use waggle_protocol::value::{MessageRelocationRecord, RelocatedMessage, RelocatedStart};
use waggle_protocol::{Intent, Record, RecordValue, RejectionType};

use crate::batch::{Command, RequestId};
use crate::behaviors::starts;
use crate::distribution::{self, Route};
use crate::processing::P;
use crate::processors::subscription;

/// The correlation key of a command that must be processed where its key's state is.
pub(crate) fn correlation_key_of(value: &RecordValue, intent: Intent) -> Option<&str> {
    match (value, intent) {
        (RecordValue::Message(m), Intent::Publish) => Some(&m.correlation_key),
        (RecordValue::MessageCorrelation(c), Intent::Correlate) => Some(&c.correlation_key),
        (RecordValue::MessageSubscription(s), Intent::Create | Intent::Correlate | Intent::Delete | Intent::Reject) => {
            Some(&s.correlation_key)
        }
        (RecordValue::MessageRelocation(r), Intent::Release) => Some(&r.correlation_key),
        _ => None,
    }
}

/// Before a command from outside is taken: whether it is not processed here now. A client's
/// command for a key that is not here is refused UNAVAILABLE (unwritten); a distributed one for
/// a key on its way is left unacknowledged. A distributed one for a key that moved is taken
/// (acknowledged, then forwarded by [`reroute`]).
pub(crate) fn turns_away(p: P, command: &Command) -> bool {
    let Some(key) = correlation_key_of(&command.value, command.intent) else { return false };
    match distribution::route_of_correlation_key(p, key) {
        Route::Here => false,
        Route::Forward(_) if command.distribution.is_some() => false,
        Route::Hold if command.distribution.is_some() => true,
        Route::Hold | Route::Forward(_) => {
            if let Some(request) = command.request_id {
                let reason = format!(
                    "Expected to handle the command for correlation key '{key}' on partition {}, but the key moves to another \
                     partition as the partition count grew; retry",
                    p.partition
                );
                p.reject_unwritten(request, command.intent, command.value.clone(), RejectionType::Unavailable, reason);
            }
            true
        }
    }
}

/// A command taken here for a key that is not here: forwarded, or sent again later (see the
/// module doc). Returns whether it was.
pub(crate) fn reroute(p: P, command: &Record) -> bool {
    let Some(key) = correlation_key_of(&command.value, command.intent) else { return false };
    let route = distribution::route_of_correlation_key(p, key);
    if route == Route::Here {
        return false;
    }
    // a client's correlation that started here, before its key moved, is answered here (the
    // request waits in this partition's memory)
    if let RecordValue::MessageSubscription(s) = &command.value {
        match command.intent {
            Intent::Correlate => subscription::answer_correlated(p, s.message_key, s.process_instance_key),
            Intent::Reject => subscription::answer_not_correlated(p, s.message_key),
            _ => {}
        }
    }
    distribution::reroute(p, route, command.key, command.intent, command.value.clone());
    true
}

/// MESSAGE_RELOCATION RELOCATE (see the module doc).
pub(crate) fn relocate(p: P, command: &Record, request: Option<RequestId>) {
    let RecordValue::MessageRelocation(asked) = &command.value else { return };
    let (count, desired) = (asked.partition_count, asked.desired_partition_count);
    if count == 0 || desired <= count || desired > u32::from(u16::MAX) || u32::from(p.partition) > count {
        let reason = format!(
            "Expected to relocate the correlation keys of partition {} from {count} to more partitions, but the counts do not allow it",
            p.partition
        );
        return p.reject(command, request, RejectionType::InvalidArgument, reason);
    }
    if let Some((_, known, done)) = p.view().message_relocation() {
        if known >= desired {
            let state = if done { "relocated" } else { "relocating" };
            let reason = format!("Expected to relocate correlation keys to {desired} partitions, but they are {state} to {known} already");
            return p.reject(command, request, RejectionType::AlreadyExists, reason);
        }
    }
    let key = p.new_key();
    let record = MessageRelocationRecord { partition_count: count, desired_partition_count: desired, ..Default::default() };
    let event = p.event_record(key, Intent::Relocating, RecordValue::MessageRelocation(record.clone()));
    p.respond(request, event);
    for (correlation_key, moving) in moving_keys(p, &record) {
        let target = partition_of_correlation_key(&correlation_key, desired);
        let key = p.new_key();
        p.event(key, Intent::Moving, RecordValue::MessageRelocation(moving.clone()));
        distribution::send(p, target, key, Intent::Move, RecordValue::MessageRelocation(moving));
    }
    finish_if_moved(p);
}

/// The state of every correlation key here whose partition under the desired count is another
/// one, by key.
fn moving_keys(p: P, relocation: &MessageRelocationRecord) -> BTreeMap<String, MessageRelocationRecord> {
    let desired = relocation.desired_partition_count;
    let own = p.partition;
    let moves = |key: &str| partition_of_correlation_key(key, desired) != own;
    let mut keys: BTreeMap<String, MessageRelocationRecord> = BTreeMap::new();
    for (message_key, message) in p.view().all_messages() {
        if moves(&message.correlation_key) {
            let correlated_processes = p.view().correlated_processes(message_key);
            let moving = keys.entry(message.correlation_key.clone()).or_insert_with(|| template(relocation, &message.correlation_key));
            moving.messages.push(RelocatedMessage { message_key, message, correlated_processes });
        }
    }
    for subscription in p.view().all_message_subscriptions() {
        if moves(&subscription.correlation_key) {
            let moving =
                keys.entry(subscription.correlation_key.clone()).or_insert_with(|| template(relocation, &subscription.correlation_key));
            moving.subscriptions.push(subscription);
        }
    }
    for (tenant_id, bpmn_process_id, correlation_key, process_instance_key) in p.view().all_message_starts() {
        if moves(&correlation_key) {
            let moving = keys.entry(correlation_key.clone()).or_insert_with(|| template(relocation, &correlation_key));
            moving.started_instances.push(RelocatedStart { tenant_id, bpmn_process_id, process_instance_key });
        }
    }
    keys
}

fn template(relocation: &MessageRelocationRecord, correlation_key: &str) -> MessageRelocationRecord {
    MessageRelocationRecord { correlation_key: correlation_key.to_string(), ..relocation.clone() }
}

/// After an acknowledgement took a command out of the outbox: RELOCATED once no key is on its way.
pub(crate) fn after_acknowledgement(p: P) {
    finish_if_moved(p);
}

/// Writes RELOCATED when a relocation is under way and no key is on its way.
fn finish_if_moved(p: P) {
    let Some((count, desired, false)) = p.view().message_relocation() else { return };
    if p.view().any_relocating() {
        return;
    }
    let key = p.new_key();
    let record = MessageRelocationRecord { partition_count: count, desired_partition_count: desired, ..Default::default() };
    p.event(key, Intent::Relocated, RecordValue::MessageRelocation(record));
}

/// MESSAGE_RELOCATION MOVE (on the key's new partition): its state is here from now on.
pub(crate) fn moved(p: P, command: &Record) {
    let RecordValue::MessageRelocation(_) = &command.value else { return };
    let key = p.new_key();
    p.event(key, Intent::Moved, command.value.clone());
}

/// MESSAGE_RELOCATION RELEASE (on the key's partition, rerouted there by [`reroute`]): an
/// instance a message with the key started ended on the old partition; its marker goes, and the
/// oldest buffered message may start the next one.
pub(crate) fn release(p: P, command: &Record) {
    let RecordValue::MessageRelocation(released) = &command.value else { return };
    let key = p.new_key();
    p.event(key, Intent::Released, command.value.clone());
    for started in &released.started_instances {
        starts::start_with_buffered_message(p, &started.tenant_id, &started.bpmn_process_id, &released.correlation_key);
    }
}
