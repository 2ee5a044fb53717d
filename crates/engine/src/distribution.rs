//! Commands between partitions, delivered exactly once across crashes (Zeebe's command
//! distribution, with receiver-side de-duplication).
//!
//! - The sender writes COMMAND_DISTRIBUTION DISTRIBUTING in the batch that decides to send: the
//!   command waits in the sender's outbox (`O/`) from then on, and the broker delivers it after
//!   the batch commits, again after a restart, and again when no acknowledgement came in time.
//! - The receiver processes a distributed command once: it writes COMMAND_DISTRIBUTION RECEIVED
//!   (marker `DR/`) in the batch that processes it, and a copy it already processed is only
//!   acknowledged. Either way it answers with COMMAND_DISTRIBUTION ACKNOWLEDGE, which takes the
//!   command out of the sender's outbox (ACKNOWLEDGED).
//! - Each copy carries the sender's oldest unacknowledged key for the receiver; markers below
//!   it are dropped (`DL/` remembers the bound), so the receiver's markers stay bounded by what
//!   is in flight.

use waggle_protocol::value::CommandDistributionRecord;
use waggle_protocol::{Intent, PartitionId, Record, RecordValue};

use crate::batch::{value_type_of, Command, Distribution};
use crate::processing::Processing;
use crate::tables::StateView;

/// Sends a command to a partition: a follow-up command of this batch when it is this
/// partition, else a distributed command (outbox, delivered after the batch is committed until
/// acknowledged: see the module doc).
pub(crate) fn send(p: &mut Processing<'_, '_, '_>, partition: PartitionId, key: i64, intent: Intent, value: RecordValue) {
    if partition == p.partition {
        p.command(key, intent, value);
    } else {
        send_to_other(p, partition, key, intent, value);
    }
}

/// Sends a command to this partition itself through the outbox: it is processed in a later
/// batch, when the broker delivers it (again every time it is not acknowledged). A command for a
/// correlation key on its way to another partition waits so (see `processors::relocation`).
pub(crate) fn send_later(p: &mut Processing<'_, '_, '_>, key: i64, intent: Intent, value: RecordValue) {
    let own = p.partition;
    send_to_other(p, own, key, intent, value);
}

/// Sends a command to another partition through the outbox.
fn send_to_other(p: &mut Processing<'_, '_, '_>, partition: PartitionId, key: i64, intent: Intent, value: RecordValue) {
    let distribution_key = p.new_key();
    let record = CommandDistributionRecord {
        partition_id: partition,
        value_type: value_type_of(&value),
        intent,
        command_key: key,
        command_value: Some(Box::new(value.clone())),
        acknowledged_below: 0,
    };
    p.event(distribution_key, Intent::Distributing, RecordValue::CommandDistribution(record));
    let acknowledged_below = p.view().oldest_pending_distribution(partition).unwrap_or(distribution_key);
    let distribution = Distribution { source: p.partition, key: distribution_key, acknowledged_below };
    p.deliver(partition, Command { distribution: Some(distribution), ..Command::new(key, intent, value) });
}

/// Where the state of a correlation key is, for a command about it on this partition (see
/// `processors::relocation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Route {
    /// Here: no relocation moved it away (or it moved here).
    Here,
    /// On its way to its new partition (sent, not acknowledged): the command waits.
    Hold,
    /// On its new partition, which takes the command.
    Forward(PartitionId),
}

/// Where the state of `correlation_key` is: here, unless this partition relocated its keys to a
/// grown partition count (MESSAGE_RELOCATION RELOCATING) and the key's partition under that
/// count is another one; then on its way there until acknowledged (`RK/`), there after. A key
/// this partition did not hold under the count before (a sender two growths behind, e.g. a
/// subscription opened before the first) goes to its partition under that count, which holds
/// it or knows where it went.
pub(crate) fn route_of_correlation_key(p: &Processing<'_, '_, '_>, correlation_key: &str) -> Route {
    let Some((count, desired, _)) = p.view().message_relocation() else { return Route::Here };
    let owner = waggle_protocol::keys::partition_of_correlation_key(correlation_key, desired);
    let before = waggle_protocol::keys::partition_of_correlation_key(correlation_key, count);
    if owner == p.partition {
        Route::Here
    } else if p.view().relocating(correlation_key) {
        Route::Hold
    } else if before != p.partition {
        Route::Forward(before)
    } else {
        Route::Forward(owner)
    }
}

/// Sends a command for a correlation key that is not here where it is taken (`route` is not
/// [`Route::Here`]): to the key's new partition, or back to this partition through the outbox
/// while the key's state is on its way (processed when delivered again, after the
/// acknowledgement: a command never reaches the new partition before the state does).
pub(crate) fn reroute(p: &mut Processing<'_, '_, '_>, route: Route, key: i64, intent: Intent, value: RecordValue) {
    match route {
        Route::Here => p.command(key, intent, value),
        Route::Hold => send_later(p, key, intent, value),
        Route::Forward(partition) => send(p, partition, key, intent, value),
    }
}

/// The partitions deployments and deletions go to: the batch context's count, or the count a
/// scale-up under way or done on this partition asked for when that is more (SCALE
/// SCALING_UP: see `processors::scale`).
pub(crate) fn partition_count(p: &Processing<'_, '_, '_>) -> u32 {
    let scaled = p.view().scale().map_or(0, |(_, r, _)| r.desired_partition_count);
    p.partition_count.max(scaled)
}

/// Whether a distributed command was processed here already; if so, acknowledges it again.
pub(crate) fn is_duplicate(p: &mut Processing<'_, '_, '_>, d: &Distribution) -> bool {
    let duplicate = p.view().distribution_received(d.source, d.key);
    if duplicate {
        acknowledge(p, d);
    }
    duplicate
}

/// Notes a distributed command as processed (before its processing, in the same batch) and
/// acknowledges it to the sender once the batch is committed.
pub(crate) fn received(p: &mut Processing<'_, '_, '_>, d: &Distribution, command: &Record) {
    let record = CommandDistributionRecord {
        partition_id: d.source,
        value_type: command.value_type,
        intent: command.intent,
        command_key: command.key,
        command_value: None,
        acknowledged_below: d.acknowledged_below,
    };
    p.event(d.key, Intent::Received, RecordValue::CommandDistribution(record));
    acknowledge(p, d);
}

fn acknowledge(p: &mut Processing<'_, '_, '_>, d: &Distribution) {
    let record = CommandDistributionRecord {
        partition_id: p.partition,
        value_type: waggle_protocol::ValueType::CommandDistribution,
        intent: Intent::Acknowledge,
        command_key: d.key,
        command_value: None,
        acknowledged_below: 0,
    };
    p.deliver(d.source, Command::new(d.key, Intent::Acknowledge, RecordValue::CommandDistribution(record)));
}

/// COMMAND_DISTRIBUTION ACKNOWLEDGE (from the receiver): the command leaves the outbox. An
/// acknowledgement of a command no longer there (a re-sent copy's) changes nothing.
pub(crate) fn acknowledged(p: &mut Processing<'_, '_, '_>, command: &Record) {
    let RecordValue::CommandDistribution(ack) = &command.value else { return };
    if let Some(pending) = p.view().pending_distribution(ack.partition_id, command.key) {
        p.event(command.key, Intent::Acknowledged, RecordValue::CommandDistribution(pending));
    }
}

/// Every command in the outbox, as the broker delivers it again (after a restart, or when no
/// acknowledgement came): (receiver, command), oldest first per receiver.
pub(crate) fn outbox_commands(state: StateView<'_>, source: PartitionId) -> Vec<(PartitionId, Command)> {
    let mut oldest: Option<(PartitionId, i64)> = None;
    let mut out = Vec::new();
    for (key, record) in state.pending_distributions() {
        let Some(value) = record.command_value else { continue };
        let receiver = record.partition_id;
        let acknowledged_below = match oldest {
            Some((partition, first)) if partition == receiver => first,
            _ => {
                oldest = Some((receiver, key));
                key
            }
        };
        let distribution = Distribution { source, key, acknowledged_below };
        out.push((receiver, Command { distribution: Some(distribution), ..Command::new(record.command_key, record.intent, *value) }));
    }
    out
}
