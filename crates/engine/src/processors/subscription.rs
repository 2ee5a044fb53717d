//! Message subscriptions between the partition of a waiting element and the partition of
//! the message (by its correlation key): opening one, correlating a message to it from either
//! side, and closing or rejecting it.

use waggle_protocol::value::{MessageCorrelationRecord, MessageSubscriptionRecord, ProcessMessageSubscriptionRecord};
use waggle_protocol::{partition_of, Intent, RecordValue};

use crate::behaviors::waits::message_side;
use crate::distribution;
use crate::elements;
use crate::processing::P;

/// MESSAGE_SUBSCRIPTION CREATE (message partition): opens the subscription and correlates a
/// buffered message to it, if one waits.
pub(crate) fn create_message_subscription(p: P, command: &waggle_protocol::Record) {
    let RecordValue::MessageSubscription(s) = &command.value else { return };
    let key = p.new_key();
    p.event(key, Intent::Created, RecordValue::MessageSubscription(s.clone()));
    let buffered = p.view().buffered_messages(&s.tenant_id, &s.message_name, &s.correlation_key);
    for message_key in buffered {
        if p.view().message_correlated_to(message_key, &s.bpmn_process_id) {
            continue;
        }
        let Some(message) = p.view().message(message_key) else { continue };
        if message.deadline_ms <= p.now_ms && message.time_to_live_ms > 0 {
            continue; // expired, not yet removed
        }
        correlate(p, key, s, message_key, &message.variables);
        break;
    }
}

/// Starts correlating `message_key` to subscription `s` (CORRELATING) and tells the process
/// partition.
fn correlate(p: P, key: i64, s: &MessageSubscriptionRecord, message_key: i64, variables: &str) {
    let correlating = MessageSubscriptionRecord { message_key, variables: variables.to_string(), ..s.clone() };
    p.event(key, Intent::Correlating, RecordValue::MessageSubscription(correlating.clone()));
    let command = ProcessMessageSubscriptionRecord {
        process_instance_key: s.process_instance_key,
        element_instance_key: s.element_instance_key,
        bpmn_process_id: s.bpmn_process_id.clone(),
        element_id: String::new(),
        message_name: s.message_name.clone(),
        correlation_key: s.correlation_key.clone(),
        message_key,
        variables: variables.to_string(),
        interrupting: s.interrupting,
        subscription_partition_id: p.partition,
        tenant_id: s.tenant_id.clone(),
    };
    distribution::send(p, partition_of(s.element_instance_key), -1, Intent::Correlate, RecordValue::ProcessMessageSubscription(command));
}

/// After MESSAGE PUBLISHED: correlates the message to the open subscriptions of its name and
/// correlation key, at most one per process (bpmn process id); returns how many.
pub(crate) fn correlate_published(p: P, message_key: i64) -> usize {
    let Some(message) = p.view().message(message_key) else { return 0 };
    let mut processes: Vec<String> = Vec::new();
    for s in p.view().message_subscriptions(&message.tenant_id, &message.name, &message.correlation_key) {
        if s.message_key > 0 || processes.contains(&s.bpmn_process_id) || p.view().message_correlated_to(message_key, &s.bpmn_process_id) {
            continue;
        }
        processes.push(s.bpmn_process_id.clone());
        let key = p.new_key();
        correlate(p, key, &s, message_key, &message.variables);
    }
    processes.len()
}

/// PROCESS_MESSAGE_SUBSCRIPTION CORRELATE (process partition): the message reached the
/// waiting element; trigger it and acknowledge, or reject when the element no longer waits.
pub(crate) fn correlate_process_subscription(p: P, command: &waggle_protocol::Record) {
    let RecordValue::ProcessMessageSubscription(given) = &command.value else { return };
    let found = p
        .view()
        .process_subscriptions_of(given.element_instance_key)
        .into_iter()
        .find(|s| s.message_name == given.message_name && s.correlation_key == given.correlation_key);
    let instance = p.view().element(given.element_instance_key).filter(|e| e.state == crate::tables::ElementState::Activated);
    let (Some(subscription), Some(instance)) = (found, instance) else {
        let reason = format!(
            "Expected to correlate a message to element instance '{}', but it is no longer waiting for message '{}'",
            given.element_instance_key, given.message_name
        );
        p.reject(command, None, waggle_protocol::RejectionType::InvalidState, reason);
        let rejected = MessageSubscriptionRecord { message_key: given.message_key, ..message_side(given) };
        distribution::send(p, given.subscription_partition_id, -1, Intent::Reject, RecordValue::MessageSubscription(rejected));
        return;
    };
    let correlated =
        ProcessMessageSubscriptionRecord { message_key: given.message_key, variables: given.variables.clone(), ..subscription.clone() };
    let key = p.new_key();
    p.event(key, Intent::Correlated, RecordValue::ProcessMessageSubscription(correlated.clone()));
    distribution::send(
        p,
        subscription.subscription_partition_id,
        -1,
        Intent::Correlate,
        RecordValue::MessageSubscription(message_side(&correlated)),
    );
    let vars = crate::json_doc::document_texts(&given.variables).unwrap_or_default();
    elements::event_occurred(p, &instance, &subscription.element_id, &vars);
}

/// MESSAGE_SUBSCRIPTION CORRELATE / DELETE / REJECT (message partition). A confirmation or
/// refusal of a message a client's correlation published answers that client (Zeebe 8.8's
/// MessageSubscriptionCorrelateProcessor and MessageSubscriptionRejectProcessor): CORRELATED
/// with the process instance, or, once every subscription asked refused, NOT_CORRELATED and a
/// NOT_FOUND rejection; also when the subscription was deleted meanwhile (the instance ended).
pub(crate) fn message_subscription(p: P, command: &waggle_protocol::Record) {
    let RecordValue::MessageSubscription(given) = &command.value else { return };
    let stored = p.view().message_subscription(&given.tenant_id, &given.message_name, &given.correlation_key, given.element_instance_key);
    match (command.intent, stored) {
        (Intent::Correlate, stored) => {
            if let Some(stored) = stored {
                let key = p.new_key();
                p.event(key, Intent::Correlated, RecordValue::MessageSubscription(stored));
            }
            answer_correlated(p, given.message_key, given.process_instance_key);
        }
        (Intent::Delete, Some(stored)) => {
            let key = p.new_key();
            p.event(key, Intent::Deleted, RecordValue::MessageSubscription(stored));
        }
        (Intent::Reject, stored) => {
            if let Some(stored) = stored {
                let key = p.new_key();
                let rejected = MessageSubscriptionRecord { message_key: given.message_key, ..stored };
                p.event(key, Intent::Rejected, RecordValue::MessageSubscription(rejected));
            }
            answer_not_correlated(p, given.message_key);
        }
        _ => {}
    }
}

/// A process partition confirmed message `message_key`: its correlation's request, if one
/// waits, gets MESSAGE_CORRELATION CORRELATED with `process_instance_key`.
pub(crate) fn answer_correlated(p: P, message_key: i64, process_instance_key: i64) {
    if let Some((request, record)) = p.take_awaiting_correlation(message_key) {
        let correlated = MessageCorrelationRecord { process_instance_key, ..record };
        let event = p.event_record(message_key, Intent::Correlated, RecordValue::MessageCorrelation(correlated));
        p.respond(Some(request), event);
    }
}

/// A process partition refused message `message_key`: once no subscription asked can confirm
/// it, its correlation's request gets NOT_CORRELATED and a NOT_FOUND rejection.
pub(crate) fn answer_not_correlated(p: P, message_key: i64) {
    if let Some((request, record)) = p.refuse_awaiting_correlation(message_key) {
        let reason = not_found_reason(&record.name, &record.correlation_key);
        p.event(message_key, Intent::NotCorrelated, RecordValue::MessageCorrelation(record.clone()));
        let value = RecordValue::MessageCorrelation(record);
        p.reject_unwritten(request, Intent::Correlate, value, waggle_protocol::RejectionType::NotFound, reason);
    }
}

/// Zeebe's reason for a correlation that reached no subscription (MessageCorrelationCorrelateProcessor).
pub(crate) fn not_found_reason(name: &str, correlation_key: &str) -> String {
    format!("Expected to find subscription for message with name '{name}' and correlation key '{correlation_key}', but none was found.")
}
