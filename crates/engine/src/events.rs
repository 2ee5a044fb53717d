//! Events an element instance waits for: timers, message subscriptions, and the error catch
//! events an error is thrown to. Opening happens when an element activates, closing when it
//! completes or terminates; a trigger completes a catch event or activates a boundary event.

use waggle_bpmn::timer::{self, Interval};
use waggle_bpmn::{ElementKind, EventTrigger, ExprOrStatic, MessageDefinition, Process, TimerDefinition, WaitKinds};
use waggle_feel::Value;
use waggle_protocol::keys::partition_of_correlation_key;
use waggle_protocol::value::{
    MessageSubscriptionRecord, ProcessInstanceRecord, ProcessMessageSubscriptionRecord, SignalSubscriptionRecord, TimerRecord,
};
use waggle_protocol::{partition_of, Intent, RecordValue};

use crate::behaviors;
use crate::processing::Processing;
use crate::tables::{ElementInstance, ElementState};
use crate::variables;

type P<'a, 'b, 'c, 'd> = &'a mut Processing<'b, 'c, 'd>;

/// One thing to wait for, evaluated and ready to open.
pub(crate) enum Wait {
    Timer { target: String, due_ms: i64, repetitions: i32 },
    Message { target: String, name: String, correlation_key: String, interrupting: bool },
    Signal { target: String, name: String },
}

/// Evaluates what `element` (instance `key`) waits for: its own timer, message or signal, those
/// of its boundary events, the catch events after an event-based gateway, and the start events
/// of the event subprocesses of a scope. An error message (for an incident) when an
/// expression fails.
pub(crate) fn waits_of<'v>(p: P, model: &Process, element: usize, key: impl Into<Vars<'v>>) -> Result<Vec<Wait>, String> {
    let key = key.into();
    let e = &model.elements[element];
    let mut waits = Vec::new();
    match &e.kind {
        ElementKind::IntermediateCatchEvent(trigger) if !after_event_gateway(model, element) => {
            waits.extend(wait_for(p, key, &e.id, trigger, true)?)
        }
        ElementKind::ReceiveTask(message) => waits.push(message_wait(p, key, &e.id, message, true)?),
        ElementKind::EventBasedGateway => {
            for &f in &e.outgoing {
                let target = &model.elements[model.flows[f].target];
                if let ElementKind::IntermediateCatchEvent(trigger) = &target.kind {
                    waits.extend(wait_for(p, key, &target.id, trigger, true)?);
                }
            }
        }
        ElementKind::SubProcess { .. } | ElementKind::EventSubProcess { .. } => {
            waits.extend(event_subprocess_waits(p, model, Some(element), key)?)
        }
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

/// The timer, message and signal start events of the event subprocesses in a scope (`None`:
/// the process), waited on by the scope's instance `key`.
pub(crate) fn event_subprocess_waits<'v>(
    p: P,
    model: &Process,
    scope: Option<usize>,
    key: impl Into<Vars<'v>>,
) -> Result<Vec<Wait>, String> {
    let key = key.into();
    let mut waits = Vec::new();
    for esp in model.event_subprocesses(scope) {
        let Some(start) = model.event_subprocess_start(esp) else { continue };
        if let ElementKind::EventStartEvent { trigger, interrupting } = &model.elements[start].kind {
            waits.extend(wait_for(p, key, &model.elements[start].id, trigger, *interrupting)?);
        }
    }
    Ok(waits)
}

/// A catch event whose (only) incoming flow comes from an event-based gateway: the gateway
/// waits for it, and it completes as soon as it is activated.
pub(crate) fn after_event_gateway(model: &Process, element: usize) -> bool {
    model.elements[element].incoming.iter().any(|&f| matches!(model.elements[model.flows[f].source].kind, ElementKind::EventBasedGateway))
}

fn wait_for(p: P, scope: Vars<'_>, target: &str, trigger: &EventTrigger, interrupting: bool) -> Result<Option<Wait>, String> {
    Ok(match trigger {
        EventTrigger::Timer(def) => {
            let (due_ms, repetitions) = timer_due(p, scope, def, p.now_ms)?;
            Some(Wait::Timer { target: target.to_string(), due_ms, repetitions })
        }
        EventTrigger::Message(message) => Some(message_wait(p, scope, target, message, interrupting)?),
        EventTrigger::Signal { name } => Some(Wait::Signal { target: target.to_string(), name: string_of(p, scope, name)? }),
        EventTrigger::Error { .. } | EventTrigger::Escalation { .. } => None,
    })
}

/// A static value, or a FEEL expression that must give a string.
pub(crate) fn string_of<'v>(p: P, scope: impl Into<Vars<'v>>, value: &ExprOrStatic) -> Result<String, String> {
    match value {
        ExprOrStatic::Static(s) => Ok(s.clone()),
        ExprOrStatic::Expression(e) => match evaluate(p, scope, e)? {
            Value::String(s) => Ok(s),
            other => Err(format!("Expected result of the expression '{}' to be 'STRING', but was '{}'.", e.source(), other.type_name())),
        },
    }
}

use variables::{evaluate, Vars};

/// The text of a timer definition: static, or a FEEL result (a string, or a temporal value).
fn timer_text(p: P, scope: Vars<'_>, value: &ExprOrStatic) -> Result<(String, Value), String> {
    match value {
        ExprOrStatic::Static(s) => Ok((s.clone(), Value::String(s.clone()))),
        ExprOrStatic::Expression(e) => {
            let v = evaluate(p, scope, e)?;
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
pub(crate) fn timer_due<'v>(p: P, scope: impl Into<Vars<'v>>, def: &TimerDefinition, from_ms: i64) -> Result<(i64, i32), String> {
    let scope = scope.into();
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
            timer::parse_cycle(&text).map(|(repetitions, i)| (i.after(from_ms), repetitions)).ok_or_else(|| {
                format!("Invalid timer cycle '{text}' for expression '{}': expected R<n>/<duration> or a cron expression", source(v))
            })
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

fn message_wait(p: P, scope: Vars<'_>, target: &str, message: &MessageDefinition, interrupting: bool) -> Result<Wait, String> {
    let name = string_of(p, scope, &message.name)?;
    let Some(correlation) = &message.correlation_key else {
        return Err(format!("Expected a correlation key for the message '{name}', but none is defined"));
    };
    let correlation_key = match evaluate(p, scope, correlation)? {
        Value::String(s) => s,
        Value::Number(n) => n.to_string(),
        other => {
            return Err(format!(
                "Failed to extract the correlation key for '{}': The value must be either a string or a number, but was '{}'.",
                correlation.source(),
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
                    tenant_id: pi.tenant_id.to_string(),
                };
                let timer_key = p.new_key();
                p.event(timer_key, Intent::Created, RecordValue::Timer(record));
            }
            Wait::Message { target, name, correlation_key, interrupting } => {
                let partition = partition_of_correlation_key(&correlation_key, p.partition_count);
                let record = ProcessMessageSubscriptionRecord {
                    process_instance_key: pi.process_instance_key,
                    element_instance_key: key,
                    bpmn_process_id: pi.bpmn_process_id.to_string(),
                    element_id: target,
                    message_name: name.clone(),
                    correlation_key: correlation_key.clone(),
                    message_key: -1,
                    variables: String::new(),
                    interrupting,
                    subscription_partition_id: partition,
                    tenant_id: pi.tenant_id.to_string(),
                };
                let subscription_key = p.new_key();
                p.event(subscription_key, Intent::Created, RecordValue::ProcessMessageSubscription(record.clone()));
                p.send(partition, -1, Intent::Create, RecordValue::MessageSubscription(message_side(&record)));
            }
            Wait::Signal { target, name } => {
                let record = SignalSubscriptionRecord {
                    process_definition_key: pi.process_definition_key,
                    bpmn_process_id: pi.bpmn_process_id.to_string(),
                    catch_event_id: target,
                    catch_event_instance_key: key,
                    signal_name: name,
                    tenant_id: pi.tenant_id.to_string(),
                };
                let subscription_key = p.new_key();
                p.event(subscription_key, Intent::Created, RecordValue::SignalSubscription(record));
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

/// Closes everything element instance `key` of `element_id` waits for (it completes or
/// terminates). Only the tables its element can have waits in are read (the model's
/// [`Process::wait_kinds`], derived at deployment).
pub(crate) fn close(p: P, model: &Process, element_id: &str, key: i64) {
    let kinds = if element_id == model.id {
        model.wait_kinds(None)
    } else {
        model.element(element_id).map_or(WaitKinds::ALL, |i| model.wait_kinds(Some(i)))
    };
    close_kinds(p, key, kinds, |_| true);
}

/// Closes what element instance `key` waits for on behalf of the events `target` accepts.
pub(crate) fn close_where(p: P, key: i64, target: impl Fn(&str) -> bool) {
    close_kinds(p, key, WaitKinds::ALL, target)
}

fn close_kinds(p: P, key: i64, kinds: WaitKinds, target: impl Fn(&str) -> bool) {
    let timers = if kinds.timers { p.view().timers_of(key) } else { Vec::new() };
    for timer_key in timers {
        if let Some(timer) = p.view().timer(timer_key).filter(|t| target(&t.target_element_id)) {
            p.event(timer_key, Intent::Canceled, RecordValue::Timer(timer));
        }
    }
    let signals = if kinds.signals { p.view().signal_subscriptions_of(key) } else { Vec::new() };
    for subscription in signals.into_iter().filter(|s| target(&s.catch_event_id)) {
        let subscription_key = p.new_key();
        p.event(subscription_key, Intent::Deleted, RecordValue::SignalSubscription(subscription));
    }
    let messages = if kinds.messages { p.view().process_subscriptions_of(key) } else { Vec::new() };
    for subscription in messages.into_iter().filter(|s| target(&s.element_id)) {
        let subscription_key = p.new_key();
        p.event(subscription_key, Intent::Deleted, RecordValue::ProcessMessageSubscription(subscription.clone()));
        p.send(subscription.subscription_partition_id, -1, Intent::Delete, RecordValue::MessageSubscription(message_side(&subscription)));
    }
}

/// A timer, message or signal fired for `instance` (the waiting element instance): completes
/// a catch event, continues an event-based gateway at the event, activates the boundary event
/// `target` (terminating the activity first when it interrupts), or starts the event
/// subprocess whose start event is `target`. `variables` come with a message or signal.
pub(crate) fn trigger(p: P, instance: &ElementInstance, target: &str, variables: &[(String, String)]) {
    let model = p.process_model(instance.record.process_definition_key);
    if instance.record.element_id == target {
        let outputs = model.element(target).is_some_and(|i| !model.elements[i].outputs.is_empty());
        set_event_variables(p, instance.key, instance.record.flow_scope_key, outputs, variables);
        p.command(instance.key, Intent::CompleteElement, RecordValue::ProcessInstance(instance.record.clone()));
        return;
    }
    let Some(target_idx) = model.element(target) else { return };
    match &model.elements[target_idx].kind {
        ElementKind::BoundaryEvent { .. } => activate_boundary(p, &model, instance, target_idx, variables, false),
        ElementKind::EventStartEvent { .. } => {
            let Some(esp) = model.elements[target_idx].scope else { return };
            activate_event_subprocess(p, &model, instance, esp, variables, false);
        }
        ElementKind::IntermediateCatchEvent(_) => continue_after_event_gateway(p, &model, instance, target_idx, variables),
        _ => {}
    }
}

/// An event-based gateway's event happened: the gateway completes, takes the flow to the
/// event, and the event completes at once (with the variables it brought).
fn continue_after_event_gateway(p: P, model: &Process, gateway: &ElementInstance, event: usize, variables: &[(String, String)]) {
    let Some(&flow) = model.elements[event].incoming.first() else { return };
    p.event(gateway.key, Intent::ElementCompleting, RecordValue::ProcessInstance(gateway.record.clone()));
    close(p, model, &gateway.record.element_id, gateway.key);
    p.event(gateway.key, Intent::ElementCompleted, RecordValue::ProcessInstance(gateway.record.clone()));
    behaviors::flow_taken(p, model, &gateway.record, flow);
    let element = &model.elements[event];
    let record = behaviors::child_record(&gateway.record, gateway.record.flow_scope_key, &element.id, element.kind.bpmn_element_type());
    let key = p.new_key();
    p.event(key, Intent::ElementActivating, RecordValue::ProcessInstance(record));
    set_event_variables(p, key, gateway.record.flow_scope_key, !element.outputs.is_empty(), variables);
    behaviors::continue_activation(p, key);
}

/// Starts event subprocess `esp` inside `scope` (the instance of its flow scope). An
/// interrupting one terminates everything else in the scope first, and the scope's other
/// event subprocesses can no longer start. `local`: the variables stay local to the event
/// subprocess (an error's), else they propagate.
pub(crate) fn activate_event_subprocess(
    p: P,
    model: &Process,
    scope: &ElementInstance,
    esp: usize,
    variables: &[(String, String)],
    local: bool,
) {
    let Some(start) = model.event_subprocess_start(esp) else { return };
    let interrupting = matches!(model.elements[start].kind, ElementKind::EventStartEvent { interrupting: true, .. });
    if interrupting {
        let starts: Vec<String> = model
            .event_subprocesses(model.element(&scope.record.element_id))
            .filter_map(|e| model.event_subprocess_start(e))
            .map(|s| model.elements[s].id.clone())
            .collect();
        close_where(p, scope.key, |target| starts.iter().any(|s| s == target));
        for child in p.view().children(scope.key) {
            behaviors::terminate(p, child);
        }
    }
    let element = &model.elements[esp];
    let record = behaviors::child_record(&scope.record, scope.key, &element.id, element.kind.bpmn_element_type());
    let esp_key = p.new_key();
    p.event(esp_key, Intent::ElementActivating, RecordValue::ProcessInstance(record.clone()));
    if local {
        variables::merge_local(p, esp_key, variables);
    } else if !variables.is_empty() {
        variables::merge_propagate(p, esp_key, variables);
    }
    behaviors::continue_activation(p, esp_key);
}

/// Activates boundary event `boundary` of `activity`; an interrupting one terminates the
/// activity first. `local`: the variables stay local to the event (an error's, as Zeebe does),
/// else they are local only when the event has output mappings.
pub(crate) fn activate_boundary(
    p: P,
    model: &Process,
    activity: &ElementInstance,
    boundary: usize,
    variables: &[(String, String)],
    local: bool,
) {
    let element = &model.elements[boundary];
    let interrupting = matches!(element.kind, ElementKind::BoundaryEvent { cancel_activity: true, .. });
    if interrupting {
        behaviors::terminate(p, activity.key);
    }
    let record = behaviors::child_record(&activity.record, activity.record.flow_scope_key, &element.id, element.kind.bpmn_element_type());
    let key = p.new_key();
    p.event(key, Intent::ElementActivating, RecordValue::ProcessInstance(record));
    set_event_variables(p, key, activity.record.flow_scope_key, local || !element.outputs.is_empty(), variables);
    behaviors::continue_activation(p, key);
}

/// The variables an event brings (message, thrown error): local to the event when it has
/// output mappings (they read them), else propagated from its flow scope, as Zeebe does.
fn set_event_variables(p: P, event: i64, flow_scope: i64, has_outputs: bool, variables: &[(String, String)]) {
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
    if timer.element_instance_key < 0 {
        return crate::starts::trigger_start_timer(p, command.key, timer);
    }
    let Some(instance) = p.view().element(timer.element_instance_key) else { return };
    p.event(command.key, Intent::Triggered, RecordValue::Timer(timer.clone()));
    let model = p.process_model(timer.process_definition_key);
    let repeats = timer.repetitions != 1 && instance.record.element_id != timer.target_element_id;
    let cycle = model.element(&timer.target_element_id).and_then(|b| match &model.elements[b].kind {
        ElementKind::BoundaryEvent { cancel_activity: false, trigger: EventTrigger::Timer(TimerDefinition::Cycle(v)), .. } => {
            Some(v.clone())
        }
        ElementKind::EventStartEvent { interrupting: false, trigger: EventTrigger::Timer(TimerDefinition::Cycle(v)) } => Some(v.clone()),
        _ => None,
    });
    if let (true, Some(v)) = (repeats, cycle) {
        schedule_next_cycle(p, &timer, &v, instance.key);
    }
    trigger(p, &instance, &timer.target_element_id, &[]);
}

/// The next repetition of a cycle timer that just fired (`cycle` evaluated in `scope`).
pub(crate) fn schedule_next_cycle(p: P, fired: &TimerRecord, cycle: &ExprOrStatic, scope: i64) {
    let Ok((text, _)) = timer_text(p, Vars::Scope(scope), cycle) else { return };
    let Some((_, interval)) = timer::parse_cycle(&text) else { return };
    let next = TimerRecord {
        due_date_ms: interval.after(fired.due_date_ms),
        repetitions: if fired.repetitions < 0 { -1 } else { fired.repetitions - 1 },
        ..fired.clone()
    };
    let next_key = p.new_key();
    p.event(next_key, Intent::Created, RecordValue::Timer(next));
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
    let vars = crate::json_doc::document_texts(&given.variables).unwrap_or_default();
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

/// Where a thrown error or escalation is caught.
pub(crate) enum Catch {
    /// A boundary event (index) of the activity instance.
    Boundary(ElementInstance, usize),
    /// An event subprocess (index) inside the scope instance.
    EventSubProcess(ElementInstance, usize),
}

/// The catch event for an error or escalation thrown at element instance `from`: from `from`
/// outwards, at each level the event subprocesses inside it and then its boundary events; an
/// exact match (`matches(trigger) == Some(true)`) before a catch-all (`Some(false)`).
pub(crate) fn find_catch(p: P, model: &Process, from: i64, matches: impl Fn(&EventTrigger) -> Option<bool>) -> Option<Catch> {
    let mut current = p.view().element(from);
    while let Some(instance) = current {
        let idx = model.element(&instance.record.element_id);
        let is_scope = idx.is_none_or(|i| model.is_scope(i));
        for exact in [true, false] {
            if is_scope {
                for esp in model.event_subprocesses(idx) {
                    let Some(start) = model.event_subprocess_start(esp) else { continue };
                    if let ElementKind::EventStartEvent { trigger, .. } = &model.elements[start].kind {
                        if matches(trigger) == Some(exact) {
                            return Some(Catch::EventSubProcess(instance, esp));
                        }
                    }
                }
            }
            if let Some(i) = idx {
                for &b in &model.elements[i].boundary_events {
                    if let ElementKind::BoundaryEvent { trigger, .. } = &model.elements[b].kind {
                        if matches(trigger) == Some(exact) {
                            return Some(Catch::Boundary(instance, b));
                        }
                    }
                }
            }
        }
        current = (instance.record.flow_scope_key > 0).then(|| p.view().element(instance.record.flow_scope_key)).flatten();
    }
    None
}

/// Matches error catch events for `code`.
pub(crate) fn error_matcher(code: &str) -> impl Fn(&EventTrigger) -> Option<bool> + '_ {
    move |trigger| match trigger {
        EventTrigger::Error { error_code } => match error_code {
            Some(c) if c == code => Some(true),
            Some(_) => None,
            None => Some(false),
        },
        _ => None,
    }
}

/// Matches escalation catch events for `code`.
pub(crate) fn escalation_matcher(code: &str) -> impl Fn(&EventTrigger) -> Option<bool> + '_ {
    move |trigger| match trigger {
        EventTrigger::Escalation { code: c } => match c {
            Some(c) if c == code => Some(true),
            Some(_) => None,
            None => Some(false),
        },
        _ => None,
    }
}

/// Activates the catch event found for a thrown error or escalation; the variables of the
/// throw stay local to the catching event.
pub(crate) fn catch(p: P, model: &Process, found: Catch, variables: &[(String, String)]) {
    match found {
        Catch::Boundary(instance, boundary) => activate_boundary(p, model, &instance, boundary, variables, true),
        Catch::EventSubProcess(scope, esp) => activate_event_subprocess(p, model, &scope, esp, variables, true),
    }
}

/// Whether an element instance is still active (not terminated by what just happened).
pub(crate) fn is_active(p: P, key: i64) -> bool {
    p.view().element(key).is_some_and(|e| e.state == ElementState::Activated)
}
