//! Events: start and end events, intermediate catch and throw events (timer, message, signal,
//! link, escalation, error, terminate), and throwing errors and escalations to where they are
//! caught.

use waggle_bpmn::{ElementKind, Process};
use waggle_protocol::value::{ProcessEventRecord, ProcessInstanceRecord};
use waggle_protocol::{Intent, RecordValue};

use crate::behaviors::catches::{self, Catch};
use crate::behaviors::expressions::string_of;
use crate::behaviors::flows::{child_record, is_active};
use crate::behaviors::incidents::{error_type, incident};
use crate::behaviors::starts;
use crate::behaviors::waits::{after_event_gateway, wait_for, Wait};
use crate::elements::behavior::{pass_through, wait, Activation, ElementBehavior, Then, Transitions};
use crate::elements::{boundary, event_trigger, gateways, subprocesses};
use crate::json_doc::document_texts;
use crate::processing::P;
use crate::tables::{ElementInstance, ElementState};
use crate::variables::Vars;

/// A none start event, an end event, a none intermediate throw event, a link catch event:
/// they pass through.
pub(crate) struct PassThroughEvent;

impl ElementBehavior for PassThroughEvent {}

/// The start event of an event subprocess (or a timer, message or signal start event of the
/// process, which starts instances: see `behaviors::starts`).
pub(crate) struct EventStartEvent;

impl ElementBehavior for EventStartEvent {
    /// Its trigger occurred in its event subprocess's flow scope: the event subprocess starts.
    fn on_event_occurred(
        &self,
        p: P,
        model: &Process,
        idx: usize,
        waiting: &ElementInstance,
        variables: &[(String, String)],
        t: Transitions,
    ) {
        let Some(esp) = model.elements[idx].scope else { return };
        subprocesses::start_event_subprocess(p, model, waiting, esp, variables, false, t);
    }
}

/// A timer, message or signal intermediate catch event.
pub(crate) struct IntermediateCatchEvent;

impl ElementBehavior for IntermediateCatchEvent {
    /// Its timer, message or signal, unless an event-based gateway waits for it.
    fn own_waits(&self, p: P, model: &Process, idx: usize, vars: Vars<'_>) -> Result<Vec<Wait>, String> {
        let e = &model.elements[idx];
        let mut waits = Vec::new();
        if let ElementKind::IntermediateCatchEvent(trigger) = &e.kind {
            if !after_event_gateway(model, idx) {
                waits.extend(wait_for(p, vars, &e.id, trigger, true)?);
            }
        }
        Ok(waits)
    }

    fn on_activate(&self, p: P, a: Activation<'_>, _t: Transitions) {
        if after_event_gateway(a.model, a.idx) {
            // the gateway already waited for this event: it happened
            return pass_through(p, a.key, a.record);
        }
        wait(p, a)
    }

    /// The event an event-based gateway waited for occurred: the gateway goes on here.
    fn on_event_occurred(
        &self,
        p: P,
        model: &Process,
        idx: usize,
        waiting: &ElementInstance,
        variables: &[(String, String)],
        t: Transitions,
    ) {
        gateways::continue_after_event_gateway(p, model, waiting, idx, variables, t);
    }
}

/// A link throw event: the token continues at its link catch event.
pub(crate) struct LinkThrowEvent;

impl ElementBehavior for LinkThrowEvent {
    fn on_completed(&self, p: P, model: &Process, idx: usize, _key: i64, pi: &ProcessInstanceRecord, t: Transitions) -> Then {
        let ElementKind::LinkThrowEvent { target } = model.elements[idx].kind else { return Then::TakeFlows };
        let target = &model.elements[target];
        let record = child_record(pi, pi.flow_scope_key, &target.id, target.kind.bpmn_element_type());
        let target_key = p.new_key();
        p.event(target_key, Intent::ElementActivating, RecordValue::ProcessInstance(record));
        t.continue_activation(p, target_key);
        Then::Done
    }
}

/// A terminate end event: everything else in its scope terminates, then the scope completes
/// (Zeebe's `EndEventProcessor`: the flow scope's children are terminated and it completes once
/// none is left). Many siblings terminate a bounded share a batch, and a wide multi-instance
/// body among them over later batches; the scope completes after the last
/// (`lifecycle::terminate_children`, `lifecycle::finish_terminating`).
pub(crate) struct TerminateEndEvent;

impl ElementBehavior for TerminateEndEvent {
    fn on_completed(&self, p: P, _model: &Process, _idx: usize, _key: i64, pi: &ProcessInstanceRecord, t: Transitions) -> Then {
        t.terminate_children(p, pi.flow_scope_key);
        Then::TakeFlows
    }
}

/// An error end event: throws its error (caught, or an incident).
pub(crate) struct ErrorEndEvent;

impl ElementBehavior for ErrorEndEvent {
    fn on_activate(&self, p: P, a: Activation<'_>, t: Transitions) {
        let Activation { model, idx, key, record: pi, .. } = a;
        let ElementKind::ErrorEndEvent { error_code } = &model.elements[idx].kind else { return };
        p.event(key, Intent::ElementActivated, RecordValue::ProcessInstance(pi.clone()));
        let error = ThrownError { code: error_code, message: "", variables: &[], job_key: -1 };
        throw_error(p, key, &pi, &error, t);
    }
}

/// An escalation intermediate throw or end event: the escalation goes to its catch event, if
/// any; an uncaught or non-interrupting one lets the event go on.
pub(crate) struct EscalationThrowEvent;

impl ElementBehavior for EscalationThrowEvent {
    fn on_activate(&self, p: P, a: Activation<'_>, t: Transitions) {
        let Activation { model, idx, key, record: pi, .. } = a;
        let ElementKind::EscalationThrowEvent { code, .. } = &model.elements[idx].kind else { return };
        p.event(key, Intent::ElementActivated, RecordValue::ProcessInstance(pi.clone()));
        let mut waits = false;
        if let Some(found) = catches::find_catch(p, key, catches::escalation_matcher(code)) {
            let catcher = match &found {
                Catch::Boundary(instance, _) | Catch::EventSubProcess(instance, _) => instance.key,
            };
            catch(p, found, &[], t);
            // an interrupting catch waiting for a wide multi-instance body (holding this event)
            // to terminate over later batches
            waits = p.view().process_event(catcher).is_some();
        }
        // an uncaught or non-interrupting escalation lets the throw event go on
        if is_active(p, key) && !waits {
            p.command(key, Intent::CompleteElement, RecordValue::ProcessInstance(pi));
        }
    }
}

/// A signal intermediate throw or end event: broadcasts its signal.
pub(crate) struct SignalThrowEvent;

impl ElementBehavior for SignalThrowEvent {
    fn on_activate(&self, p: P, a: Activation<'_>, _t: Transitions) {
        let Activation { model, idx, key, record: pi, .. } = a;
        let ElementKind::SignalThrowEvent { name, .. } = &model.elements[idx].kind else { return };
        let name = match string_of(p, key, name) {
            Ok(name) => name,
            Err(message) => return incident(p, &pi, key, -1, error_type::EXTRACT_VALUE_ERROR, message),
        };
        p.event(key, Intent::ElementActivated, RecordValue::ProcessInstance(pi.clone()));
        starts::broadcast_signal(p, &name, &pi.tenant_id);
        if is_active(p, key) {
            p.command(key, Intent::CompleteElement, RecordValue::ProcessInstance(pi));
        }
    }
}

/// An error thrown by a worker (`job_key` > 0) or an error end event (`job_key` -1).
#[derive(Clone, Copy)]
pub(crate) struct ThrownError<'a> {
    pub code: &'a str,
    pub message: &'a str,
    pub variables: &'a [(String, String)],
    pub job_key: i64,
}

/// Throws an error at element instance `from`: the nearest matching error boundary event
/// catches it (with its variables), else an UNHANDLED_ERROR_EVENT incident (on the job when
/// there is one).
pub(crate) fn throw_error(p: P, from: i64, pi: &ProcessInstanceRecord, error: &ThrownError<'_>, t: Transitions) {
    let ThrownError { code, message, variables, job_key } = *error;
    match catches::find_catch(p, from, catches::error_matcher(code)) {
        Some(found) => catch(p, found, variables, t),
        None => {
            let message = if job_key > 0 {
                format!(
                    "Expected to throw an error event with the code '{code}' with message '{message}', but it was not caught. No error events are available in the scope."
                )
            } else {
                format!("Expected to throw an error event with the code '{code}', but it was not caught. No error events are available in the scope.")
            };
            incident(p, pi, from, job_key, error_type::UNHANDLED_ERROR_EVENT, message);
        }
    }
}

/// Activates the catch event found for a thrown error or escalation (in the model of the
/// instance that catches it: the thrower's, or a calling process's); the variables of the
/// throw stay local to the catching event.
pub(crate) fn catch(p: P, found: Catch, variables: &[(String, String)], t: Transitions) {
    match found {
        Catch::Boundary(instance, boundary) => {
            let model = p.process_model(instance.record.process_definition_key);
            boundary::activate(p, &model, &instance, boundary, variables, true, t)
        }
        Catch::EventSubProcess(scope, esp) => {
            let model = p.process_model(scope.record.process_definition_key);
            subprocesses::start_event_subprocess(p, &model, &scope, esp, variables, true, t)
        }
    }
}

/// After activity `body` (a multi-instance body, a subprocess, a call activity) terminated: the
/// interrupting boundary event that waited on it (`waiting`, read before its TERMINATED removed
/// it) is entered, if the activity's flow scope is still active. Whether it was (a trigger
/// for an event subprocess inside the activity is not entered: it went with the activity).
pub(crate) fn enter_waiting_boundary(p: P, body: &ElementInstance, waiting: (i64, ProcessEventRecord), t: Transitions) -> bool {
    let active = p.view().element_with(body.record.flow_scope_key, |s| s.state == ElementState::Activated) == Some(true);
    let model = p.process_model(body.record.process_definition_key);
    let (event_key, record) = waiting;
    let boundary = |&idx: &usize| matches!(model.elements[idx].kind, ElementKind::BoundaryEvent { .. });
    let Some(idx) = model.element(&record.target_element_id).filter(boundary).filter(|_| active) else { return false };
    let variables = document_texts(&record.variables).unwrap_or_default();
    let local = event_trigger::caught_locally(&model, idx);
    event_trigger::triggered(p, event_key, record);
    boundary::enter(p, &model, body, idx, &variables, local, t);
    true
}

/// After a child of `scope` terminated: an interrupting event subprocess that waited on the
/// scope starts once nothing else is left in it. Whether it did.
pub(crate) fn start_waiting_event_subprocess(p: P, scope: i64, t: Transitions) -> bool {
    let Some(instance) = p.view().element(scope).filter(|s| s.state == ElementState::Activated && s.active_children == 0) else {
        return false;
    };
    let Some((event_key, record)) = p.view().process_event(scope) else { return false };
    let model = p.process_model(instance.record.process_definition_key);
    let Some(start) = model.element(&record.target_element_id) else { return false };
    let Some(esp) = model.elements[start].scope else { return false };
    let variables = document_texts(&record.variables).unwrap_or_default();
    let local = event_trigger::caught_locally(&model, start);
    event_trigger::triggered(p, event_key, record);
    subprocesses::enter_event_subprocess(p, &model, &instance, esp, &variables, local, t);
    true
}
