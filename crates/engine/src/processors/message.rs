use waggle_protocol::value::{MessageCorrelationRecord, MessageRecord};
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
    if !message.message_id.is_empty()
        && p.view().message_by_id(&message.tenant_id, &message.name, &message.correlation_key, &message.message_id).is_some()
    {
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

/// MESSAGE_CORRELATION CORRELATE (Zeebe 8.8's MessageCorrelationCorrelateProcessor; REST
/// `POST /v2/messages/correlation`, docs.camunda.io/docs/8.8/apis-tools/orchestration-cluster-api-rest/specifications/correlate-message/):
/// publishes the message without time to live (MESSAGE PUBLISHED, then CORRELATING), correlates
/// it to the subscriptions waiting now and to message start events, and expires it. A started
/// instance answers at once (CORRELATED, its key); a waiting element's answer comes when its
/// partition confirms the correlation (see `subscription::message_subscription`). When nothing
/// waits, the message expires and the command is rejected NOT_FOUND with Zeebe's reason (Zeebe
/// leaves the message to its TTL checker; it expires at once either way).
pub(crate) fn correlate(p: &mut Processing<'_, '_, '_>, command: &Record, request: Option<RequestId>) {
    let RecordValue::MessageCorrelation(given) = &command.value else { return };
    if let Err(e) = p.client_document(&given.variables) {
        let reason = format!("Expected to correlate message with valid variables, but the document is invalid: {e}");
        return p.reject(command, request, RejectionType::InvalidArgument, reason);
    }
    let message = MessageRecord {
        name: given.name.clone(),
        correlation_key: given.correlation_key.clone(),
        time_to_live_ms: -1,
        message_id: String::new(),
        variables: given.variables.clone(),
        deadline_ms: p.now_ms,
        tenant_id: given.tenant_id.clone(),
    };
    let key = p.new_key();
    p.event(key, Intent::Published, RecordValue::Message(message.clone()));
    let mut record = MessageCorrelationRecord { message_key: key, process_instance_key: -1, ..given.clone() };
    p.event(key, Intent::Correlating, RecordValue::MessageCorrelation(record.clone()));
    let waiting = subscription::correlate_published(p, key);
    let started = starts::correlate_message_starts(p, key, &message);
    match (started, request) {
        (Some(process_instance_key), _) => {
            record.process_instance_key = process_instance_key;
            let event = p.event_record(key, Intent::Correlated, RecordValue::MessageCorrelation(record));
            p.respond(request, event);
        }
        (None, Some(request)) if waiting > 0 => p.await_correlation(key, request, record, waiting),
        (None, _) if waiting > 0 => {}
        (None, _) => {
            p.event(key, Intent::Expired, RecordValue::Message(message));
            let reason = subscription::not_found_reason(&given.name, &given.correlation_key);
            return p.reject(command, request, RejectionType::NotFound, reason);
        }
    }
    p.event(key, Intent::Expired, RecordValue::Message(message));
}
