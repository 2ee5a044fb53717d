use waggle_protocol::{Intent, Record, RecordValue, RejectionType};

use crate::batch::RequestId;
use crate::behaviors::starts;
use crate::processing::Processing;
use crate::processors::subscription;

/// MESSAGE PUBLISH: stores the message until its time to live ends; a message id may be used
/// once per name and correlation key while the first message lives.
pub(crate) fn publish(p: &mut Processing<'_, '_, '_>, command: &Record, request: Option<RequestId>) {
    let RecordValue::Message(message) = &command.value else { return };
    if let Err(e) = p.client_document(&message.variables) {
        let reason = format!("Expected to publish message with valid variables, but the document is invalid: {e}");
        return p.reject(command, request, RejectionType::InvalidArgument, reason);
    }
    if !message.message_id.is_empty() && p.view().message_by_id(&message.name, &message.correlation_key, &message.message_id).is_some() {
        let reason =
            format!("Expected to publish a new message with id '{}', but a message with that id was already published", message.message_id);
        return p.reject(command, request, RejectionType::AlreadyExists, reason);
    }
    let mut record = message.clone();
    record.deadline_ms = p.now_ms + message.time_to_live_ms.max(0);
    let key = p.new_key();
    let event = p.event_record(key, Intent::Published, RecordValue::Message(record.clone()));
    p.respond(request, event);
    subscription::correlate_published(p, key);
    starts::correlate_message_starts(p, key, &record);
    // a message without time to live correlates to what waits now, then expires at once
    if record.time_to_live_ms <= 0 {
        p.event(key, Intent::Expired, RecordValue::Message(record));
    }
}

/// MESSAGE EXPIRE (from the scheduler): removes a message whose time to live has passed.
pub(crate) fn expire(p: &mut Processing<'_, '_, '_>, command: &Record) {
    let Some(message) = p.view().message(command.key) else { return };
    if message.deadline_ms > p.now_ms {
        return;
    }
    p.event(command.key, Intent::Expired, RecordValue::Message(message));
}
