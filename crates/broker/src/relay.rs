//! Commands between partitions across the brokers of a cluster (deployment distribution,
//! message subscriptions, signal broadcasts and their acknowledgements).
//!
//! A command for a partition not led on this broker travels over the cluster's Raft network,
//! in the `context` of a Raft message of a group of its own per receiving partition
//! ([`commands_group`]), to every other broker known (which brokers hold a partition changes at
//! run time: [`crate::topology`]; brokers started later are learned from the gossip:
//! [`AddressBook`]); there the partition's
//! thread takes it only while it leads (the others drop it). Best effort, as the network is:
//! the sender's outbox re-sends what stays unacknowledged (every 10 s) and the receiver
//! processes a command once however often it arrives (`engine::distribution`), so nothing
//! more is needed for exactly-once delivery.

use std::collections::HashMap;
use std::sync::mpsc::Receiver;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use waggle_engine::{Command, Distribution};
use waggle_protocol::{Intent, PartitionId, RecordValue};
use waggle_replication::net::{NetTransport, RaftNetwork};
use waggle_replication::{Message, Transport};

use crate::cluster::{raft_id, AddressBook};

/// The network group of the commands for partition `p`: above every partition's Raft group.
pub(crate) fn commands_group(partition: PartitionId) -> u64 {
    (1 << 40) | u64::from(partition)
}

/// A command on the wire (postcard, as the log's records were in codec version 1).
#[derive(Serialize, Deserialize)]
struct Wire {
    key: i64,
    intent: Intent,
    value: RecordValue,
    /// The sending partition, its distribution key, its oldest unacknowledged key for us.
    distribution: Option<(PartitionId, i64, i64)>,
}

/// Sends commands to the partitions led on other brokers.
pub(crate) struct Relay {
    /// The brokers it sends to (all but this one).
    book: Arc<AddressBook>,
    /// A transport per receiving partition (its commands' group).
    transports: Mutex<HashMap<PartitionId, NetTransport>>,
}

impl Relay {
    /// Registers the command groups of every partition of the cluster on `network` (their
    /// inboxes are dropped: a command for a partition this broker does not hold is dropped;
    /// a replica started here takes its inbox with [`inbox`]).
    pub fn new(book: Arc<AddressBook>, partitions: u16, network: &RaftNetwork) -> Relay {
        let mut transports = HashMap::new();
        for p in 1..=partitions {
            let (transport, _) = network.register(commands_group(p));
            transports.insert(p, transport);
        }
        Relay { book, transports: Mutex::new(transports) }
    }

    /// Registers the command group of `partition` if it has none yet (a partition a scale-up
    /// added); its inbox is dropped, as [`Self::new`]'s are.
    pub fn add_partition(&self, partition: PartitionId, network: &RaftNetwork) {
        let mut transports = self.transports.lock().expect("relay lock");
        transports.entry(partition).or_insert_with(|| network.register(commands_group(partition)).0);
    }

    /// Sends `command` to every other broker known (the one leading `partition` takes it; the
    /// others drop it): which brokers hold a partition changes at run time ([`crate::topology`]).
    pub fn send(&self, partition: PartitionId, command: &Command) {
        let wire = Wire {
            key: command.key,
            intent: command.intent,
            value: command.value.clone(),
            distribution: command.distribution.map(|d| (d.source, d.key, d.acknowledged_below)),
        };
        let context = match postcard::to_allocvec(&wire) {
            Ok(bytes) => bytes,
            Err(e) => return tracing::error!(partition, error = %e, "a command for another broker could not be encoded"),
        };
        let from = raft_id(self.book.node_id());
        let messages: Vec<Message> = self
            .book
            .nodes()
            .into_iter()
            .filter(|&node| node != self.book.node_id())
            .map(|node| Message { to: raft_id(node), from, context: context.clone(), ..Default::default() })
            .collect();
        if let Some(transport) = self.transports.lock().expect("relay lock").get_mut(&partition) {
            transport.send(messages);
        }
    }
}

/// The inbox of the commands other brokers send `partition`, for its replica starting here
/// (replacing any earlier one).
pub(crate) fn inbox(network: &RaftNetwork, partition: PartitionId) -> Receiver<Message> {
    network.register(commands_group(partition)).1
}

/// The command a relayed message carries, if it is one.
pub(crate) fn decode(message: &Message) -> Option<Command> {
    let wire: Wire = match postcard::from_bytes(&message.context) {
        Ok(wire) => wire,
        Err(e) => {
            tracing::warn!(from = message.from, error = %e, "an undecodable relayed command dropped");
            return None;
        }
    };
    let mut command = Command::new(wire.key, wire.intent, wire.value);
    command.distribution = wire.distribution.map(|(source, key, acknowledged_below)| Distribution { source, key, acknowledged_below });
    Some(command)
}
