//! SIGNAL BROADCAST: from a client, a throw event or another partition.

use waggle_protocol::{Intent, Record, RecordValue};

use crate::batch::RequestId;
use crate::behaviors::starts::start_at_event;
use crate::distribution;
use crate::elements;
use crate::processing::P;
use crate::tables::ElementState;

/// SIGNAL BROADCAST: from a client or a throw event (key -1: this partition broadcasts it to
/// the others too), or from another partition (its key). Triggers every subscription of the
/// signal's name on this partition.
pub(crate) fn broadcast(p: P, command: &Record, request: Option<RequestId>) {
    let RecordValue::Signal(signal) = &command.value else { return };
    let variables = match p.client_document(&signal.variables) {
        Ok(v) => v,
        Err(e) => {
            let reason = format!("Expected to broadcast signal with valid variables, but the document is invalid: {e}");
            return p.reject(command, request, waggle_protocol::RejectionType::InvalidArgument, reason);
        }
    };
    let original = command.key <= 0;
    let key = if original { p.new_key() } else { command.key };
    let event = p.event_record(key, Intent::Broadcasted, RecordValue::Signal(signal.clone()));
    p.respond(request, event);
    if original {
        for partition in 1..=p.partition_count as u16 {
            if partition != p.partition {
                distribution::send(p, partition, key, Intent::Broadcast, RecordValue::Signal(signal.clone()));
            }
        }
    }
    for subscription in p.view().signal_subscriptions(&signal.tenant_id, &signal.signal_name) {
        if subscription.catch_event_instance_key < 0 {
            start_at_event(p, subscription.process_definition_key, &subscription.catch_event_id, variables.clone());
            continue;
        }
        // an earlier trigger of this broadcast may have ended the element meanwhile
        let still_open = p.view().signal_subscriptions_of(subscription.catch_event_instance_key).contains(&subscription);
        let Some(instance) = p.view().element(subscription.catch_event_instance_key).filter(|e| e.state == ElementState::Activated) else {
            continue;
        };
        if still_open {
            elements::event_occurred(p, &instance, &subscription.catch_event_id, &variables);
        }
    }
}
