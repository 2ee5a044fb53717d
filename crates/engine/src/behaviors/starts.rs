//! How process instances begin: at the none start event (CreateProcessInstance), at given
//! elements (start instructions), or by a timer, message or signal start event. Also the
//! start-event subscriptions a deployment opens, and the signal broadcast a throw event asks for.

use waggle_bpmn::{ElementKind, EventTrigger, Process};
use waggle_protocol::value::{
    MessageRecord, MessageRelocationRecord, MessageStartEventSubscriptionRecord, ProcessEventRecord, ProcessInstanceRecord, ProcessRecord,
    RelocatedStart, SignalRecord, SignalSubscriptionRecord, TimerRecord,
};
use waggle_protocol::{Intent, RecordValue};

use crate::behaviors::expressions::string_of;
use crate::behaviors::waits::{schedule_next_cycle, timer_due};
use crate::distribution::{self, Route};
use crate::json_doc::{document_texts, VariableTexts};
use crate::processing::P;
use crate::variables;

/// Starts an instance of process `definition_key` (new key `pi_key`): the process activates
/// (a follow-up command), with `variables` set on it, and then `starts` (element indexes; the
/// none start event when `None`).
pub(crate) fn start_instance(
    p: P,
    definition: &ProcessRecord,
    definition_key: i64,
    pi_key: i64,
    starts: Option<Vec<usize>>,
    variables: VariableTexts,
) {
    start(p, definition, definition_key, pi_key, starts, variables, (-1, -1))
}

/// Starts an instance of process `definition_key` (new key `pi_key`) for the call activity
/// instance `call_activity` of `caller`: its records carry both as their parent, and it starts at
/// its none start event with `variables`.
pub(crate) fn start_called_instance(
    p: P,
    definition: &ProcessRecord,
    definition_key: i64,
    pi_key: i64,
    caller: &ProcessInstanceRecord,
    call_activity: i64,
    variables: VariableTexts,
) {
    start(p, definition, definition_key, pi_key, None, variables, (caller.process_instance_key, call_activity))
}

/// `parents`: (parent process instance key, parent element instance key), -1 for none.
fn start(
    p: P,
    definition: &ProcessRecord,
    definition_key: i64,
    pi_key: i64,
    starts: Option<Vec<usize>>,
    variables: VariableTexts,
    parents: (i64, i64),
) {
    let model = p.process_model(definition_key);
    let pi = ProcessInstanceRecord {
        bpmn_process_id: definition.bpmn_process_id.as_str().into(),
        version: definition.version,
        process_definition_key: definition_key,
        process_instance_key: pi_key,
        element_id: model.id.as_str().into(),
        flow_scope_key: -1,
        bpmn_element_type: waggle_protocol::SharedStr::from_static("PROCESS"),
        parent_process_instance_key: parents.0,
        tenant_id: definition.tenant_id.as_str().into(),
        parent_element_instance_key: parents.1,
    };
    if let Some(starts) = starts {
        p.set_start_elements(pi_key, starts);
    }
    variables::create_in_new_instance(p, &pi, variables);
    p.command(pi_key, Intent::ActivateElement, RecordValue::ProcessInstance(pi));
}

/// Starts an instance at the start event `target` of the definition a start subscription
/// belongs to, if that definition is still deployed. Returns the new instance's key.
pub(crate) fn start_at_event(p: P, definition_key: i64, target: &str, variables: VariableTexts) -> Option<i64> {
    let definition = p.process_record(definition_key)?;
    let model = p.process_model(definition_key);
    let start = model.element(target)?;
    let pi_key = p.new_key();
    start_triggering(p, &definition, definition_key, pi_key, target, &variables);
    start_instance(p, &definition, definition_key, pi_key, Some(vec![start]), variables);
    Some(pi_key)
}

/// After PROCESS CREATED of a new latest version: closes the start events of the version it
/// replaces and opens its own. Message start events open on every partition; timer and signal
/// start events only on the partition that took the deployment (`deploying`), so that one
/// timer or signal starts one instance.
pub(crate) fn open_start_events(
    p: P,
    model: &Process,
    definition_key: i64,
    record: &ProcessRecord,
    previous: Option<i64>,
    deploying: bool,
) {
    if let Some(previous) = previous {
        close_start_events(p, previous);
    }
    for start in model.event_start_events() {
        let element = &model.elements[start];
        let ElementKind::EventStartEvent { trigger, .. } = &element.kind else { continue };
        match trigger {
            EventTrigger::Message(message) => {
                let Ok(name) = string_of(p, -1, &message.name) else { continue };
                let subscription = MessageStartEventSubscriptionRecord {
                    process_definition_key: definition_key,
                    bpmn_process_id: record.bpmn_process_id.clone(),
                    start_event_id: element.id.clone(),
                    message_name: name,
                    message_key: -1,
                    process_instance_key: -1,
                    tenant_id: record.tenant_id.clone(),
                    ..Default::default()
                };
                let key = p.new_key();
                p.event(key, Intent::Created, RecordValue::MessageStartEventSubscription(subscription));
            }
            EventTrigger::Timer(def) if deploying => {
                let Ok((due_ms, repetitions)) = timer_due(p, -1, def, p.now_ms) else { continue };
                let timer = TimerRecord {
                    element_instance_key: -1,
                    process_instance_key: -1,
                    process_definition_key: definition_key,
                    target_element_id: element.id.clone(),
                    due_date_ms: due_ms,
                    repetitions,
                    tenant_id: record.tenant_id.clone(),
                };
                let key = p.new_key();
                p.event(key, Intent::Created, RecordValue::Timer(timer));
            }
            EventTrigger::Signal { name } if deploying => {
                let Ok(name) = string_of(p, -1, name) else { continue };
                let subscription = SignalSubscriptionRecord {
                    process_definition_key: definition_key,
                    bpmn_process_id: record.bpmn_process_id.clone(),
                    catch_event_id: element.id.clone(),
                    catch_event_instance_key: -1,
                    signal_name: name,
                    tenant_id: record.tenant_id.clone(),
                };
                let key = p.new_key();
                p.event(key, Intent::Created, RecordValue::SignalSubscription(subscription));
            }
            _ => {}
        }
    }
}

/// Closes the start events of a process definition that is no longer the latest.
pub(crate) fn close_start_events(p: P, definition_key: i64) {
    let model = p.process_model(definition_key);
    let tenant = p.process_record(definition_key).map(|d| d.tenant_id.clone()).unwrap_or_default();
    for start in model.event_start_events() {
        let ElementKind::EventStartEvent { trigger: EventTrigger::Message(message), .. } = &model.elements[start].kind else { continue };
        let Ok(name) = string_of(p, -1, &message.name) else { continue };
        let open = p
            .view()
            .message_start_subscriptions(&tenant, &name)
            .into_iter()
            .find(|s| s.process_definition_key == definition_key && s.start_event_id == model.elements[start].id);
        if let Some(subscription) = open {
            let key = p.new_key();
            p.event(key, Intent::Deleted, RecordValue::MessageStartEventSubscription(subscription));
        }
    }
    for timer_key in p.view().timers_of(-1) {
        if let Some(timer) = p.view().timer(timer_key).filter(|t| t.process_definition_key == definition_key) {
            p.event(timer_key, Intent::Canceled, RecordValue::Timer(timer));
        }
    }
    for subscription in p.view().signal_subscriptions_of(-1).into_iter().filter(|s| s.process_definition_key == definition_key) {
        let key = p.new_key();
        p.event(key, Intent::Deleted, RecordValue::SignalSubscription(subscription));
    }
}

/// A due timer of a timer start event: starts an instance; a cycle schedules the next one.
pub(crate) fn trigger_start_timer(p: P, timer_key: i64, timer: TimerRecord) {
    p.event(timer_key, Intent::Triggered, RecordValue::Timer(timer.clone()));
    let model = p.process_model(timer.process_definition_key);
    if timer.repetitions != 1 {
        let cycle = model.element(&timer.target_element_id).and_then(|s| match &model.elements[s].kind {
            ElementKind::EventStartEvent { trigger: EventTrigger::Timer(waggle_bpmn::TimerDefinition::Cycle(v)), .. } => Some(v.clone()),
            _ => None,
        });
        if let Some(v) = cycle {
            schedule_next_cycle(p, &timer, &v, -1);
        }
    }
    start_at_event(p, timer.process_definition_key, &timer.target_element_id, Vec::new());
}

/// After MESSAGE PUBLISHED: starts an instance of every process whose latest version has a
/// message start event of this name — at most one per process per message, and not while an
/// instance an earlier message with the same correlation key started is still active.
pub(crate) fn correlate_message_starts(p: P, message_key: i64, message: &MessageRecord) -> Option<i64> {
    let mut first = None;
    for subscription in p.view().message_start_subscriptions(&message.tenant_id, &message.name) {
        if p.view().message_correlated_to(message_key, &subscription.bpmn_process_id) {
            continue;
        }
        if !message.correlation_key.is_empty()
            && p.view().instance_started_by_message(&message.tenant_id, &subscription.bpmn_process_id, &message.correlation_key).is_some()
        {
            continue;
        }
        let started = start_by_message(p, &subscription, message_key, message);
        first = first.or(started);
    }
    first
}

/// Starts an instance at the message start event of `subscription` with `message`.
fn start_by_message(p: P, subscription: &MessageStartEventSubscriptionRecord, message_key: i64, message: &MessageRecord) -> Option<i64> {
    let definition = p.process_record(subscription.process_definition_key)?;
    let model = p.process_model(subscription.process_definition_key);
    let start = model.element(&subscription.start_event_id)?;
    let variables = document_texts(&message.variables).unwrap_or_default();
    let pi_key = p.new_key();
    let correlated = MessageStartEventSubscriptionRecord {
        message_key,
        correlation_key: message.correlation_key.clone(),
        process_instance_key: pi_key,
        variables: message.variables.clone(),
        ..subscription.clone()
    };
    let key = p.new_key();
    p.event(key, Intent::Correlated, RecordValue::MessageStartEventSubscription(correlated));
    let target = &model.elements[start].id;
    start_triggering(p, &definition, subscription.process_definition_key, pi_key, target, &variables);
    start_instance(p, &definition, subscription.process_definition_key, pi_key, Some(vec![start]), variables);
    Some(pi_key)
}

/// An instance (`process_instance_key`) a message with `correlation_key` started has ended:
/// where the key's state is, the oldest buffered message for one of the process's message start
/// events starts the next; on the key's new partition once it moved (MESSAGE_RELOCATION RELEASE,
/// which also drops the marker moved there: `processors::relocation`).
pub(crate) fn message_started_instance_ended(p: P, tenant: &str, bpmn_process_id: &str, correlation_key: &str, process_instance_key: i64) {
    let route = distribution::route_of_correlation_key(p, correlation_key);
    if route == Route::Here {
        return start_with_buffered_message(p, tenant, bpmn_process_id, correlation_key);
    }
    let started = RelocatedStart { tenant_id: tenant.to_string(), bpmn_process_id: bpmn_process_id.to_string(), process_instance_key };
    let released =
        MessageRelocationRecord { correlation_key: correlation_key.to_string(), started_instances: vec![started], ..Default::default() };
    distribution::reroute(p, route, -1, Intent::Release, RecordValue::MessageRelocation(released));
}

/// An instance a message with `correlation_key` started has ended: the oldest buffered
/// message with that key for one of the process's message start events starts the next.
pub(crate) fn start_with_buffered_message(p: P, tenant: &str, bpmn_process_id: &str, correlation_key: &str) {
    let Some((_, definition_key)) = p.view().latest_process(tenant, bpmn_process_id) else { return };
    let model = p.process_model(definition_key);
    for start in model.event_start_events() {
        let ElementKind::EventStartEvent { trigger: EventTrigger::Message(message), .. } = &model.elements[start].kind else { continue };
        let Ok(name) = string_of(p, -1, &message.name) else { continue };
        let Some(subscription) =
            p.view().message_start_subscriptions(tenant, &name).into_iter().find(|s| s.process_definition_key == definition_key)
        else {
            continue;
        };
        for message_key in p.view().buffered_messages(tenant, &name, correlation_key) {
            if p.view().message_correlated_to(message_key, bpmn_process_id) {
                continue;
            }
            let Some(message) = p.view().message(message_key) else { continue };
            if message.deadline_ms <= p.now_ms {
                continue; // expired, not yet removed
            }
            start_by_message(p, &subscription, message_key, &message);
            return;
        }
    }
}

/// A signal throw or end event broadcasts: a SIGNAL BROADCAST follow-up command.
pub(crate) fn broadcast_signal(p: P, name: &str, tenant_id: &str) {
    let signal = SignalRecord { signal_name: name.to_string(), variables: "{}".into(), tenant_id: tenant_id.to_string() };
    p.command(-1, Intent::Broadcast, RecordValue::Signal(signal));
}

/// PROCESS_EVENT TRIGGERING for a timer, message or signal start event `target` of process
/// definition `definition` starting instance `pi_key`: its scope is the definition (Zeebe's
/// `EventHandle.triggerStartEvent`); TRIGGERED comes when the start event is activated, before
/// its ACTIVATING (`activateTriggeredStartEvent`). Not kept in state: the activation is a
/// follow-up command of the same batch.
fn start_triggering(p: P, definition: &ProcessRecord, definition_key: i64, pi_key: i64, target: &str, variables: &[(String, String)]) {
    let record = ProcessEventRecord {
        scope_key: definition_key,
        target_element_id: target.to_string(),
        variables: crate::json_doc::object_text(variables),
        process_definition_key: definition_key,
        process_instance_key: pi_key,
        tenant_id: definition.tenant_id.to_string(),
    };
    let key = p.new_key();
    p.event(key, Intent::Triggering, RecordValue::ProcessEvent(record.clone()));
    p.set_start_trigger(pi_key, (key, record));
}
