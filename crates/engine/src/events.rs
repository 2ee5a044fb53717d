//! Events an element instance waits for: timers, message subscriptions, and the error catch
//! events an error is thrown to. Opening happens when an element activates, closing when it
//! completes or terminates; a trigger completes a catch event or activates a boundary event.

use serde_json::{Map, Value as Json};
use waggle_bpmn::timer::{self, Interval};
use waggle_bpmn::{ElementKind, EventTrigger, ExprOrStatic, MessageDefinition, Process, TimerDefinition};
use waggle_feel::Value;
use waggle_protocol::keys::partition_of_correlation_key;
use waggle_protocol::value::{MessageSubscriptionRecord, ProcessInstanceRecord, ProcessMessageSubscriptionRecord, TimerRecord};
use waggle_protocol::{partition_of, Intent, RecordValue};

use crate::behaviors;
use crate::processing::Processing;
use crate::tables::ElementInstance;
use crate::variables::{self, ScopeLookup};

type P<'a, 'b, 'c, 'd> = &'a mut Processing<'b, 'c, 'd>;

/// One thing to wait for, evaluated and ready to open.
pub(crate) enum Wait {
    Timer { target: String, due_ms: i64, repetitions: i32 },
    Message { target: String, name: String, correlation_key: String, interrupting: bool },
}

/// Evaluates what `element` (instance `key`) waits for: its own timer or message, and those
/// of its boundary events. An error message (for an incident) when an expression fails.
pub(crate) fn waits_of(p: P, model: &Process, element: usize, key: i64) -> Result<Vec<Wait>, String> {
    let e = &model.elements[element];
    let mut waits = Vec::new();
    match &e.kind {
        ElementKind::IntermediateCatchEvent(trigger) => waits.extend(wait_for(p, key, &e.id, trigger, true)?),
        ElementKind::ReceiveTask(message) => waits.push(message_wait(p, key, &e.id, message, true)?),
        _ => {}
    }
    for &b in &e.boundary_events {
        let boundary = &model.elements[b];
        if let ElementKind::BoundaryEvent { cancel_activity, trigger, .. } = &boundary.kind {
            waits.extend(wait_for(p, key, &boundary.id, trigger, *cancel_activity)?);
        }
    }
    Ok(waits)
}

fn wait_for(p: P, scope: i64, target: &str, trigger: &EventTrigger, interrupting: bool) -> Result<Option<Wait>, String> {
    Ok(match trigger {
        EventTrigger::Timer(def) => {
            let (due_ms, repetitions) = timer_due(p, scope, def, p.now_ms)?;
            Some(Wait::Timer { target: target.to_string(), due_ms, repetitions })
        }
        EventTrigger::Message(message) => Some(message_wait(p, scope, target, message, interrupting)?),
        EventTrigger::Error { .. } => None,
    })
}

fn evaluate(p: P, scope: i64, expr: &waggle_feel::Expression) -> Value {
    let lookup = ScopeLookup::new(p.view(), scope);
    expr.evaluate_with(&lookup, &waggle_feel::EvalContext { now_millis: Some(p.now_ms), seed: None })
}

/// The text of a timer definition: static, or a FEEL result (a string, or a temporal value).
fn timer_text(p: P, scope: i64, value: &ExprOrStatic) -> Result<(String, Value), String> {
    match value {
        ExprOrStatic::Static(s) => Ok((s.clone(), Value::String(s.clone()))),
        ExprOrStatic::Expression(e) => {
            let v = evaluate(p, scope, e);
            match &v {
                Value::String(s) => Ok((s.clone(), v.clone())),
                Value::Null => Err(format!(
                    "Expected result of the expression '{}' to be one of '[DURATION, PERIOD, STRING]', but was 'NULL'",
                    e.source()
                )),
                other => Ok((other.to_json().as_str().map(str::to_string).unwrap_or_default(), v)),
            }
        }
    }
}

/// (due date, repetitions) of a timer definition, counted from `from_ms`.
fn timer_due(p: P, scope: i64, def: &TimerDefinition, from_ms: i64) -> Result<(i64, i32), String> {
    match def {
        TimerDefinition::Duration(v) => {
            let (text, value) = timer_text(p, scope, v)?;
            let interval = interval_of(&value).or_else(|| timer::parse_duration(&text));
            interval
                .map(|i| (i.after(from_ms), 1))
                .ok_or_else(|| format!("Invalid duration format '{text}' for expression '{}'", source(v)))
        }
        TimerDefinition::Date(v) => {
            let (text, value) = timer_text(p, scope, v)?;
            let at = match &value {
                Value::DateTime(d) => d.epoch_millis(),
                _ => timer::parse_date(&text),
            };
            at.map(|at| (at, 1)).ok_or_else(|| format!("Invalid date-time format '{text}' for expression '{}'", source(v)))
        }
        TimerDefinition::Cycle(v) => {
            let (text, _) = timer_text(p, scope, v)?;
            timer::parse_cycle(&text)
                .map(|(repetitions, i)| (i.after(from_ms), repetitions))
                .ok_or_else(|| format!("Invalid timer cycle '{text}' for expression '{}': expected R<n>/<duration>", source(v)))
        }
    }
}

fn source(v: &ExprOrStatic) -> String {
    match v {
        ExprOrStatic::Static(s) => s.clone(),
        ExprOrStatic::Expression(e) => e.source().to_string(),
    }
}

fn interval_of(value: &Value) -> Option<Interval> {
    match value {
        Value::DayTimeDuration(d) => i64::try_from(d.nanos() / 1_000_000).ok().filter(|ms| *ms >= 0).map(Interval::Millis),
        Value::YearMonthDuration(m) => Some(Interval::Months(m.months())),
        _ => None,
    }
}

fn message_wait(p: P, scope: i64, target: &str, message: &MessageDefinition, interrupting: bool) -> Result<Wait, String> {
    let name = match &message.name {
        ExprOrStatic::Static(s) => s.clone(),
        ExprOrStatic::Expression(e) => match evaluate(p, scope, e) {
            Value::String(s) => s,
            other => {
                return Err(format!("Expected result of the expression '{}' to be 'STRING', but was '{}'.", e.source(), other.type_name()))
            }
        },
    };
    let correlation_key = match evaluate(p, scope, &message.correlation_key) {
        Value::String(s) => s,
        Value::Number(n) => n.to_string(),
        other => {
            return Err(format!(
                "Failed to extract the correlation key for '{}': The value must be either a string or a number, but was '{}'.",
                message.correlation_key.source(),
                other.type_name()
            ))
        }
    };
    Ok(Wait::Message { target: target.to_string(), name, correlation_key, interrupting })
}

/// Opens evaluated waits for element instance `key`.
pub(crate) fn open(p: P, pi: &ProcessInstanceRecord, key: i64, waits: Vec<Wait>) {
    for wait in waits {
        match wait {
            Wait::Timer { target, due_ms, repetitions } => {
                let record = TimerRecord {
                    element_instance_key: key,
                    process_instance_key: pi.process_instance_key,
                    process_definition_key: pi.process_definition_key,
                    target_element_id: target,
                    due_date_ms: due_ms,
                    repetitions,
                    tenant_id: pi.tenant_id.clone(),
                };
                let timer_key = p.new_key();
                p.event(timer_key, Intent::Created, RecordValue::Timer(record));
            }
            Wait::Message { target, name, correlation_key, interrupting } => {
                let partition = partition_of_correlation_key(&correlation_key, p.partition_count);
                let record = ProcessMessageSubscriptionRecord {
                    process_instance_key: pi.process_instance_key,
                    element_instance_key: key,
                    bpmn_process_id: pi.bpmn_process_id.clone(),
                    element_id: target,
                    message_name: name.clone(),
                    correlation_key: correlation_key.clone(),
                    message_key: -1,
                    variables: String::new(),
                    interrupting,
                    subscription_partition_id: partition,
                    tenant_id: pi.tenant_id.clone(),
                };
                let subscription_key = p.new_key();
                p.event(subscription_key, Intent::Created, RecordValue::ProcessMessageSubscription(record.clone()));
                p.send(partition, -1, Intent::Create, RecordValue::MessageSubscription(message_side(&record)));
            }
        }
    }
}

fn message_side(s: &ProcessMessageSubscriptionRecord) -> MessageSubscriptionRecord {
    MessageSubscriptionRecord {
        process_instance_key: s.process_instance_key,
        element_instance_key: s.element_instance_key,
        bpmn_process_id: s.bpmn_process_id.clone(),
        message_name: s.message_name.clone(),
        correlation_key: s.correlation_key.clone(),
        message_key: s.message_key,
        variables: s.variables.clone(),
        interrupting: s.interrupting,
        tenant_id: s.tenant_id.clone(),
    }
}

/// Closes everything element instance `key` waits for (it completes or terminates).
pub(crate) fn close(p: P, key: i64) {
    for timer_key in p.view().timers_of(key) {
        if let Some(timer) = p.view().timer(timer_key) {
            p.event(timer_key, Intent::Canceled, RecordValue::Timer(timer));
        }
    }
    for subscription in p.view().process_subscriptions_of(key) {
        let subscription_key = p.new_key();
        p.event(subscription_key, Intent::Deleted, RecordValue::ProcessMessageSubscription(subscription.clone()));
        p.send(subscription.subscription_partition_id, -1, Intent::Delete, RecordValue::MessageSubscription(message_side(&subscription)));
    }
}

/// A timer or message fired for `instance` (the waiting element instance): completes a catch
/// event, or activates the boundary event `target` (terminating the activity first when it
/// interrupts). `variables` come with a message.
pub(crate) fn trigger(p: P, instance: &ElementInstance, target: &str, variables: &Map<String, Json>) {
    let model = p.process_model(instance.record.process_definition_key);
    if instance.record.element_id == target {
        let outputs = model.element(target).is_some_and(|i| !model.elements[i].outputs.is_empty());
        set_event_variables(p, instance.key, instance.record.flow_scope_key, outputs, variables);
        p.command(instance.key, Intent::CompleteElement, RecordValue::ProcessInstance(instance.record.clone()));
        return;
    }
    let Some(boundary) = model.element(target) else { return };
    activate_boundary(p, &model, instance, boundary, variables);
}

/// Activates boundary event `boundary` of `activity`; an interrupting one terminates the
/// activity first.
pub(crate) fn activate_boundary(p: P, model: &Process, activity: &ElementInstance, boundary: usize, variables: &Map<String, Json>) {
    let element = &model.elements[boundary];
    let interrupting = matches!(element.kind, ElementKind::BoundaryEvent { cancel_activity: true, .. });
    if interrupting {
        behaviors::terminate(p, activity.key);
    }
    let record = behaviors::child_record(&activity.record, activity.record.flow_scope_key, &element.id, element.kind.bpmn_element_type());
    let key = p.new_key();
    p.event(key, Intent::ElementActivating, RecordValue::ProcessInstance(record));
    set_event_variables(p, key, activity.record.flow_scope_key, !element.outputs.is_empty(), variables);
    behaviors::continue_activation(p, key);
}

/// The variables an event brings (message, thrown error): local to the event when it has
/// output mappings (they read them), else propagated from its flow scope, as Zeebe does.
fn set_event_variables(p: P, event: i64, flow_scope: i64, has_outputs: bool, variables: &Map<String, Json>) {
    if variables.is_empty() {
        return;
    }
    if has_outputs {
        variables::merge_local(p, event, variables);
    } else {
        variables::merge_propagate(p, flow_scope, variables);
    }
}

/// TIMER TRIGGER (from the scheduler): fires a due timer; a cycle schedules its next repetition.
pub(crate) fn trigger_timer(p: P, command: &waggle_protocol::Record) {
    let Some(timer) = p.view().timer(command.key) else { return };
    if timer.due_date_ms > p.now_ms {
        return; // never early
    }
    let Some(instance) = p.view().element(timer.element_instance_key) else { return };
    p.event(command.key, Intent::Triggered, RecordValue::Timer(timer.clone()));
    let model = p.process_model(timer.process_definition_key);
    let repeats = timer.repetitions != 1 && instance.record.element_id != timer.target_element_id;
    let non_interrupting = model
        .element(&timer.target_element_id)
        .is_some_and(|b| matches!(model.elements[b].kind, ElementKind::BoundaryEvent { cancel_activity: false, .. }));
    if repeats && non_interrupting {
        if let Some(ElementKind::BoundaryEvent { trigger: EventTrigger::Timer(TimerDefinition::Cycle(v)), .. }) =
            model.element(&timer.target_element_id).map(|b| &model.elements[b].kind)
        {
            if let Ok((text, _)) = timer_text(p, instance.key, v) {
                if let Some((_, interval)) = timer::parse_cycle(&text) {
                    let next = TimerRecord {
                        due_date_ms: interval.after(timer.due_date_ms),
                        repetitions: if timer.repetitions < 0 { -1 } else { timer.repetitions - 1 },
                        ..timer.clone()
                    };
                    let next_key = p.new_key();
                    p.event(next_key, Intent::Created, RecordValue::Timer(next));
                }
            }
        }
    }
    trigger(p, &instance, &timer.target_element_id, &Map::new());
}

/// MESSAGE_SUBSCRIPTION CREATE (message partition): opens the subscription and correlates a
/// buffered message to it, if one waits.
pub(crate) fn create_message_subscription(p: P, command: &waggle_protocol::Record) {
    let RecordValue::MessageSubscription(s) = &command.value else { return };
    let key = p.new_key();
    p.event(key, Intent::Created, RecordValue::MessageSubscription(s.clone()));
    let buffered = p.view().buffered_messages(&s.message_name, &s.correlation_key);
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
    p.send(partition_of(s.element_instance_key), -1, Intent::Correlate, RecordValue::ProcessMessageSubscription(command));
}

/// After MESSAGE PUBLISHED: correlates the message to the open subscriptions of its name and
/// correlation key, at most one per process (bpmn process id).
pub(crate) fn correlate_published(p: P, message_key: i64) {
    let Some(message) = p.view().message(message_key) else { return };
    let mut processes: Vec<String> = Vec::new();
    for s in p.view().message_subscriptions(&message.name, &message.correlation_key) {
        if s.message_key > 0 || processes.contains(&s.bpmn_process_id) || p.view().message_correlated_to(message_key, &s.bpmn_process_id) {
            continue;
        }
        processes.push(s.bpmn_process_id.clone());
        let key = p.new_key();
        correlate(p, key, &s, message_key, &message.variables);
    }
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
        p.send(given.subscription_partition_id, -1, Intent::Reject, RecordValue::MessageSubscription(rejected));
        return;
    };
    let correlated =
        ProcessMessageSubscriptionRecord { message_key: given.message_key, variables: given.variables.clone(), ..subscription.clone() };
    let key = p.new_key();
    p.event(key, Intent::Correlated, RecordValue::ProcessMessageSubscription(correlated.clone()));
    p.send(subscription.subscription_partition_id, -1, Intent::Correlate, RecordValue::MessageSubscription(message_side(&correlated)));
    let vars = variables::parse_document(&given.variables).unwrap_or_default();
    trigger(p, &instance, &subscription.element_id, &vars);
}

/// MESSAGE_SUBSCRIPTION CORRELATE / DELETE / REJECT (message partition).
pub(crate) fn message_subscription(p: P, command: &waggle_protocol::Record) {
    let RecordValue::MessageSubscription(given) = &command.value else { return };
    let Some(stored) = p.view().message_subscription(&given.message_name, &given.correlation_key, given.element_instance_key) else {
        return;
    };
    let key = p.new_key();
    match command.intent {
        Intent::Correlate => {
            p.event(key, Intent::Correlated, RecordValue::MessageSubscription(MessageSubscriptionRecord { ..stored }));
        }
        Intent::Delete => {
            p.event(key, Intent::Deleted, RecordValue::MessageSubscription(stored));
        }
        Intent::Reject => {
            let rejected = MessageSubscriptionRecord { message_key: given.message_key, ..stored };
            p.event(key, Intent::Rejected, RecordValue::MessageSubscription(rejected));
        }
        _ => {}
    }
}

/// The boundary event that catches an error thrown at element instance `from`: the nearest
/// (from `from` outwards) with the error code, else the nearest catch-all. (instance, boundary)
pub(crate) fn find_error_catch(p: P, model: &Process, from: i64, code: &str) -> Option<(ElementInstance, usize)> {
    let mut current = p.view().element(from);
    while let Some(instance) = current {
        if let Some(idx) = model.element(&instance.record.element_id) {
            let boundaries = &model.elements[idx].boundary_events;
            let matching = |exact: bool| {
                boundaries.iter().copied().find(|&b| match &model.elements[b].kind {
                    ElementKind::BoundaryEvent { trigger: EventTrigger::Error { error_code }, .. } => {
                        if exact {
                            error_code.as_deref() == Some(code)
                        } else {
                            error_code.is_none()
                        }
                    }
                    _ => false,
                })
            };
            if let Some(b) = matching(true).or_else(|| matching(false)) {
                return Some((instance, b));
            }
        }
        current = (instance.record.flow_scope_key > 0).then(|| p.view().element(instance.record.flow_scope_key)).flatten();
    }
    None
}
