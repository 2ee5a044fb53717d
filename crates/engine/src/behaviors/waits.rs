//! Events an element instance waits for: timers, message and signal subscriptions. What an
//! element waits for is evaluated when it activates (its own trigger, those of its boundary
//! events, the catch events after an event-based gateway, the start events of a scope's event
//! subprocesses), opened once it may wait, and closed when it completes or terminates.

use waggle_bpmn::timer::{self, Interval};
use waggle_bpmn::{ElementKind, EventTrigger, ExprOrStatic, MessageDefinition, Process, TimerDefinition, WaitKinds};
use waggle_feel::Value;
use waggle_protocol::keys::partition_of_correlation_key;
use waggle_protocol::value::{
    MessageSubscriptionRecord, ProcessInstanceRecord, ProcessMessageSubscriptionRecord, SignalSubscriptionRecord, TimerRecord,
};
use waggle_protocol::{Intent, RecordValue};

use crate::behaviors::expressions::string_of;
use crate::distribution;
use crate::processing::P;
use crate::variables::{evaluate, Vars};

/// One thing to wait for, evaluated and ready to open.
pub(crate) enum Wait {
    Timer { target: String, due_ms: i64, repetitions: i32 },
    Message { target: String, name: String, correlation_key: String, interrupting: bool },
    Signal { target: String, name: String },
}

/// Adds what the boundary events of `element` wait for, evaluated in `vars`, to `waits` (what
/// the element itself waits for: see `ElementBehavior::own_waits`).
pub(crate) fn add_boundary_waits(p: P, model: &Process, element: usize, vars: Vars<'_>, waits: &mut Vec<Wait>) -> Result<(), String> {
    for &b in &model.elements[element].boundary_events {
        let boundary = &model.elements[b];
        if let ElementKind::BoundaryEvent { cancel_activity, trigger, .. } = &boundary.kind {
            waits.extend(wait_for(p, vars, &boundary.id, trigger, *cancel_activity)?);
        }
    }
    Ok(())
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

/// What a catch event with `trigger` waits for (`target`: its id), evaluated in `scope`; none
/// for an error or escalation (they are thrown to it).
pub(crate) fn wait_for(p: P, scope: Vars<'_>, target: &str, trigger: &EventTrigger, interrupting: bool) -> Result<Option<Wait>, String> {
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
            timer::parse_cycle(&text).map(|c| (c.first_due(from_ms), c.repetitions)).ok_or_else(|| {
                format!(
                    "Invalid timer cycle '{text}' for expression '{}': expected R<n>/<duration>, R<n>/<start>/<duration> or a cron expression",
                    source(v)
                )
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

/// The message subscription a catch event (`target`) waits on, evaluated in `scope`.
pub(crate) fn message_wait(p: P, scope: Vars<'_>, target: &str, message: &MessageDefinition, interrupting: bool) -> Result<Wait, String> {
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
                let partition = partition_of_correlation_key(&correlation_key, p.message_partition_count);
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
                distribution::send(p, partition, -1, Intent::Create, RecordValue::MessageSubscription(message_side(&record)));
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

/// The message partition's side of a process message subscription.
pub(crate) fn message_side(s: &ProcessMessageSubscriptionRecord) -> MessageSubscriptionRecord {
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
        distribution::send(
            p,
            subscription.subscription_partition_id,
            -1,
            Intent::Delete,
            RecordValue::MessageSubscription(message_side(&subscription)),
        );
    }
}

/// The next repetition of a cycle timer that just fired (`cycle` evaluated in `scope`).
pub(crate) fn schedule_next_cycle(p: P, fired: &TimerRecord, cycle: &ExprOrStatic, scope: i64) {
    let Ok((text, _)) = timer_text(p, Vars::Scope(scope), cycle) else { return };
    let Some(cycle) = timer::parse_cycle(&text) else { return };
    let next = TimerRecord {
        due_date_ms: cycle.interval.after(fired.due_date_ms),
        repetitions: if fired.repetitions < 0 { -1 } else { fired.repetitions - 1 },
        ..fired.clone()
    };
    let next_key = p.new_key();
    p.event(next_key, Intent::Created, RecordValue::Timer(next));
}
