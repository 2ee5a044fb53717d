//! Compensation as Zeebe 8.5 runs it (https://docs.camunda.io/docs/components/modeler/bpmn/compensation-handler/,
//! .../bpmn/compensation-events/; facts from its engine test
//! `bpmn/compensation/CompensationEventExecutionTest.java`):
//! - an activity with a compensation boundary event that completes gets a COMPENSATION_SUBSCRIPTION
//!   (CREATED), once per completion; a multi-instance activity once, when its body completed
//!   (its handler "is invoked only once, rather than for each item");
//! - a subprocess (or a multi-instance body) that completes while subscriptions of the
//!   activities inside exist gets one too, with no handler: compensating it compensates them (a
//!   multi-instance subprocess's inner instances each hold those of their own activities);
//! - a compensation throw event (intermediate or end) triggers the subscriptions of its scope
//!   (the scope of its event subprocess, when it is in one), or those of its `activityRef`:
//!   TRIGGERED, the boundary event passes (ACTIVATING … COMPLETED), the handler is activated in
//!   the throw event's scope and runs with its variables; the throw event waits until every
//!   handler it invoked completed (COMPLETED for each; a subprocess's subscription completes with
//!   its last one), then completes. With nothing to compensate, it passes through;
//! - a subscription is triggered once; the rest are DELETED when the process instance ends or
//!   the subprocess they belong to is terminated.

use waggle_bpmn::{ElementKind, Process};
use waggle_protocol::value::{CompensationSubscriptionRecord, ProcessInstanceRecord};
use waggle_protocol::{Intent, RecordValue};

use crate::behaviors::flows::{child_record, is_multi_instance_body};
use crate::elements::behavior::{Activation, ElementBehavior, Transitions};
use crate::processing::P;
use crate::tables::{ElementInstance, ElementState};

/// A compensation boundary event: never waited for (see [`trigger`]).
pub(crate) struct CompensationBoundaryEvent;

impl ElementBehavior for CompensationBoundaryEvent {}

/// A compensation intermediate throw event or end event.
pub(crate) struct CompensationThrowEvent;

impl ElementBehavior for CompensationThrowEvent {
    /// ACTIVATED, then the subscriptions it compensates are triggered; it completes when their
    /// handlers have (at once when there are none).
    fn on_activate(&self, p: P, a: Activation<'_>, _t: Transitions) {
        let Activation { model, idx, key, record, .. } = a;
        let ElementKind::CompensationThrowEvent { activity, .. } = model.elements[idx].kind else { return };
        p.event(key, Intent::ElementActivated, RecordValue::ProcessInstance(record.clone()));
        let scope = compensation_scope(p, model, record.flow_scope_key);
        let activity_id = activity.map(|a| model.elements[a].id.as_str());
        let targets: Vec<(i64, CompensationSubscriptionRecord)> = p
            .view()
            .compensation_subscriptions(record.process_instance_key)
            .into_iter()
            .filter(|(_, s)| s.throw_event_instance_key <= 0 && s.compensable_activity_scope_key == scope)
            .filter(|(_, s)| activity_id.is_none_or(|id| s.compensable_activity_id == id))
            .collect();
        if targets.is_empty() {
            p.command(key, Intent::CompleteElement, RecordValue::ProcessInstance(record));
            return;
        }
        let throw = Throw { id: &model.elements[idx].id, key, record: &record };
        for (sub_key, sub) in targets {
            trigger(p, model, &throw, sub_key, sub);
        }
    }
}

/// The instance whose completed activities a throw event in `flow_scope` compensates: that
/// scope, or for an event subprocess, the scope it belongs to.
fn compensation_scope(p: P, model: &Process, flow_scope: i64) -> i64 {
    let Some(scope) = p.view().element(flow_scope) else { return flow_scope };
    match model.element(&scope.record.element_id).map(|i| &model.elements[i].kind) {
        Some(ElementKind::EventSubProcess { .. }) => scope.record.flow_scope_key,
        _ => flow_scope,
    }
}

/// The throw event compensating: its element id, instance key and record.
struct Throw<'a> {
    id: &'a str,
    key: i64,
    record: &'a ProcessInstanceRecord,
}

/// TRIGGERED for `sub`; a subprocess's subscription triggers those of its activities, an
/// activity's enters its compensation boundary event and activates the handler in the throw
/// event's scope.
fn trigger(p: P, model: &Process, throw: &Throw<'_>, sub_key: i64, sub: CompensationSubscriptionRecord) {
    let mut triggered = CompensationSubscriptionRecord { throw_event_id: throw.id.to_string(), throw_event_instance_key: throw.key, ..sub };
    if triggered.compensation_handler_id.is_empty() {
        let inner = triggered.compensable_activity_instance_key;
        p.event(sub_key, Intent::Triggered, RecordValue::CompensationSubscription(triggered.clone()));
        let children: Vec<(i64, CompensationSubscriptionRecord)> = p
            .view()
            .compensation_subscriptions(triggered.process_instance_key)
            .into_iter()
            .filter(|(_, s)| s.throw_event_instance_key <= 0 && s.compensable_activity_scope_key == inner)
            .collect();
        if children.is_empty() {
            p.event(sub_key, Intent::Completed, RecordValue::CompensationSubscription(triggered));
        }
        for (child_key, child) in children {
            trigger(p, model, throw, child_key, child);
        }
        return;
    }
    let Some(activity) = model.element(&triggered.compensable_activity_id) else { return };
    let Some((boundary, handler)) = model.compensation_of(activity) else { return };
    let handler_key = p.new_key();
    triggered.compensation_handler_instance_key = handler_key;
    p.event(sub_key, Intent::Triggered, RecordValue::CompensationSubscription(triggered));
    let scope = throw.record.flow_scope_key;
    let boundary_record = child_record(throw.record, scope, &model.elements[boundary].id, "BOUNDARY_EVENT");
    let boundary_key = p.new_key();
    for intent in [Intent::ElementActivating, Intent::ElementActivated, Intent::ElementCompleting, Intent::ElementCompleted] {
        p.event(boundary_key, intent, RecordValue::ProcessInstance(boundary_record.clone()));
    }
    let handler = &model.elements[handler];
    let handler_record = child_record(throw.record, scope, &handler.id, handler.entered_type());
    p.command(handler_key, Intent::ActivateElement, RecordValue::ProcessInstance(handler_record));
}

/// After ELEMENT_COMPLETED of `key` (element `idx`; `pi` its record): a compensation handler
/// completing finishes its subscription (and what waits for it; a multi-instance handler with
/// its body); an activity that can be compensated, or a subprocess or multi-instance body
/// holding subscriptions, gets a subscription of its own.
pub(crate) fn completed(p: P, model: &Process, idx: usize, key: i64, pi: &ProcessInstanceRecord) {
    if !model.has_compensation() {
        return;
    }
    let element = &model.elements[idx];
    let body = element.multi_instance.is_some() && is_multi_instance_body(pi);
    if model.is_compensation_handler(idx) {
        if element.multi_instance.is_none() || body {
            handler_completed(p, key, pi);
        }
        return;
    }
    let inner = element.multi_instance.is_some() && !body;
    let scope_like = matches!(element.kind, ElementKind::SubProcess { .. } | ElementKind::EventSubProcess { .. });
    let handler_id = match model.compensation_of(idx) {
        Some((_, handler)) if !inner => model.elements[handler].id.clone(),
        // a multi-instance activity is compensated once, when its body completed
        Some(_) => return,
        None if scope_like || body => {
            let subs = p.view().compensation_subscriptions(pi.process_instance_key);
            if !subs.iter().any(|(_, s)| s.compensable_activity_scope_key == key) {
                return;
            }
            String::new()
        }
        None => return,
    };
    let scope_key = pi.flow_scope_key;
    let scope_id = p.view().element(scope_key).map(|s| s.record.element_id.to_string()).unwrap_or_default();
    let sub = CompensationSubscriptionRecord {
        tenant_id: pi.tenant_id.to_string(),
        process_instance_key: pi.process_instance_key,
        process_definition_key: pi.process_definition_key,
        compensable_activity_id: element.id.clone(),
        compensable_activity_instance_key: key,
        compensable_activity_scope_id: scope_id,
        compensable_activity_scope_key: scope_key,
        throw_event_id: String::new(),
        throw_event_instance_key: -1,
        compensation_handler_id: handler_id,
        compensation_handler_instance_key: -1,
        variables: "{}".to_string(),
    };
    let sub_key = p.new_key();
    p.event(sub_key, Intent::Created, RecordValue::CompensationSubscription(sub));
}

/// Handler instance `key` completed: its subscription COMPLETED, then a subprocess's
/// subscription whose last activity this was, then the throw event once nothing it triggered
/// is left.
fn handler_completed(p: P, key: i64, pi: &ProcessInstanceRecord) {
    let subs = p.view().compensation_subscriptions(pi.process_instance_key);
    let Some((sub_key, sub)) = subs.into_iter().find(|(_, s)| s.compensation_handler_instance_key == key) else { return };
    let throw_key = sub.throw_event_instance_key;
    let mut parent_of = sub.compensable_activity_scope_key;
    p.event(sub_key, Intent::Completed, RecordValue::CompensationSubscription(sub));
    loop {
        let subs = p.view().compensation_subscriptions(pi.process_instance_key);
        if subs.iter().any(|(_, s)| s.compensable_activity_scope_key == parent_of) {
            break;
        }
        let parent =
            subs.into_iter().find(|(_, s)| s.compensable_activity_instance_key == parent_of && s.throw_event_instance_key == throw_key);
        let Some((parent_key, parent)) = parent else { break };
        parent_of = parent.compensable_activity_scope_key;
        p.event(parent_key, Intent::Completed, RecordValue::CompensationSubscription(parent));
    }
    let waiting = p.view().compensation_subscriptions(pi.process_instance_key).iter().any(|(_, s)| s.throw_event_instance_key == throw_key);
    if waiting {
        return;
    }
    if let Some(throw) = p.view().element(throw_key).filter(|t| t.state == ElementState::Activated) {
        p.command(throw_key, Intent::CompleteElement, RecordValue::ProcessInstance(throw.record));
    }
}

/// The process instance ends (completes or terminates): its subscriptions are DELETED.
pub(crate) fn process_ended(p: P, model: &Process, process_instance: i64) {
    if !model.has_compensation() {
        return;
    }
    for (key, sub) in p.view().compensation_subscriptions(process_instance) {
        p.event(key, Intent::Deleted, RecordValue::CompensationSubscription(sub));
    }
}

/// A subprocess instance terminates: the subscriptions of its activities (and theirs, for
/// subprocesses inside it) are DELETED.
pub(crate) fn scope_terminated(p: P, model: &Process, instance: &ElementInstance) {
    if !model.has_compensation() || !model.element(&instance.record.element_id).is_some_and(|i| model.is_scope(i)) {
        return;
    }
    let mut scopes = vec![instance.key];
    while let Some(scope) = scopes.pop() {
        for (key, sub) in p.view().compensation_subscriptions(instance.record.process_instance_key) {
            if sub.compensable_activity_scope_key == scope {
                if sub.compensation_handler_id.is_empty() {
                    scopes.push(sub.compensable_activity_instance_key);
                }
                p.event(key, Intent::Deleted, RecordValue::CompensationSubscription(sub));
            }
        }
    }
}
