//! The element lifecycle every kind goes through (Zeebe's `BpmnStreamProcessor` with its
//! state transitions): ACTIVATE_ELEMENT → ACTIVATING → (input mappings, waits) → ACTIVATED;
//! COMPLETE_ELEMENT → COMPLETING → (output mappings, flows chosen) → COMPLETED → the token
//! leaves along its flows, or its scope completes; TERMINATING → everything inside terminated
//! → TERMINATED. The steps that differ per kind are hooks of its behaviour, found in
//! [`behavior_of`]. Failures that Zeebe raises as incidents become INCIDENT CREATED events and
//! leave the element where it stopped; resolving the incident resumes from there
//! ([`continue_activation`], [`continue_completion`]).

use waggle_bpmn::Process;
use waggle_protocol::value::ProcessInstanceRecord;
use waggle_protocol::{Intent, Record, RecordValue};

use crate::behaviors::expressions::evaluate_mappings;
use crate::behaviors::flows::{child_record, flow_taken, is_multi_instance_body, terminates_in_batches};
use crate::behaviors::incidents::{error_type, incident, resolve_incident_of};
use crate::behaviors::waits::{self, Wait};
use crate::elements::behavior::{Activation, ElementBehavior, Then, Transitions};
use crate::elements::events::{self, ThrownError};
use crate::elements::table::{behavior_for, behavior_of};
use crate::elements::{call_activity, compensation, event_trigger, gateways, multi_instance, process, subprocesses};
use crate::limits::MI_TERMINATIONS_PER_BATCH;
use crate::processing::P;
use crate::tables::{ElementInstance, ElementState};
use crate::variables::{self, Vars};

/// The lifecycle's transitions, as behaviours are handed them.
pub(crate) const TRANSITIONS: Transitions = Transitions { terminate, terminate_in_batches, terminate_children, continue_activation };

/// ACTIVATE_ELEMENT: the element instance is born (ACTIVATING), then activation continues.
pub(crate) fn activate(p: P, command: &Record) {
    let RecordValue::ProcessInstance(pi) = &command.value else { return };
    if pi.flow_scope_key > 0 {
        // a token into a scope that was terminated, or taken over by an interrupting event
        // subprocess, meanwhile goes nowhere
        let Some(scope) = p.view().element(pi.flow_scope_key).filter(|s| s.state == ElementState::Activated) else { return };
        let model = p.process_model(pi.process_definition_key);
        if subprocesses::interrupted(p, &model, &scope) {
            return;
        }
        if let Some(idx) = model.element(&pi.element_id) {
            if !behavior_for(&model.elements[idx], pi).ready_to_activate(p, &model, idx, pi.flow_scope_key) {
                return; // more tokens may still arrive
            }
        }
    }
    if pi.flow_scope_key == pi.process_instance_key {
        if let Some((event_key, trigger)) = p.take_start_trigger(pi.process_instance_key, &pi.element_id) {
            event_trigger::triggered(p, event_key, trigger);
        }
    }
    p.event(command.key, Intent::ElementActivating, RecordValue::ProcessInstance(pi.clone()));
    if let Some(locals) = p.take_modification_locals(pi.process_instance_key, &pi.element_id) {
        variables::merge_local(p, command.key, &locals);
    }
    if call_activity::caller_gone(p, pi) {
        // the call activity ended before its called instance began (an error thrown on a
        // parallel path interrupted it in the same batch): the instance ends at once, with the
        // variables it was given
        return terminate(p, command.key);
    }
    continue_activation(p, command.key);
}

/// The part of activation that may stop at an incident (mappings, what the element waits
/// for, job properties).
pub(crate) fn continue_activation(p: P, key: i64) {
    let Some(instance) = p.view().element(key) else { return };
    let pi = instance.record.clone();
    let model = p.process_model(pi.process_definition_key);
    if pi.element_id == model.id {
        return process::activate(p, &model, key, pi);
    }
    let Some(idx) = model.element(&pi.element_id) else { return };
    let element = &model.elements[idx];
    // a multi-instance activity: its body, or an inner instance (the mappings are its)
    let (body, inner) = match element.multi_instance {
        Some(_) => (is_multi_instance_body(&pi), !is_multi_instance_body(&pi)),
        None => (false, false),
    };
    // a (sub)process activated only as the flow scope of start instructions' targets
    let instructed = p.take_start_elements(key);
    if inner {
        multi_instance::inner_activating(p, element, key);
    }
    if !body && !element.inputs.is_empty() && instructed.is_none() {
        match evaluate_mappings(p, key, &element.inputs) {
            Ok(doc) => variables::merge_local(p, key, &variables::texts_of(&doc)),
            Err(message) => return incident(p, &pi, key, -1, error_type::IO_MAPPING_ERROR, message),
        }
    }
    let behavior = behavior_for(element, &pi);
    let waits = match waits_with(behavior, p, &model, idx, Vars::Scope(key), !inner) {
        Ok(waits) => waits,
        Err(message) => return incident(p, &pi, key, -1, error_type::EXTRACT_VALUE_ERROR, message),
    };
    let activation = Activation { model: &model, idx, key, record: pi, waits, instructed };
    behavior.on_activate(p, activation, TRANSITIONS);
}

/// Evaluates what `element` waits for once active, with the variables `vars`: its own events
/// (see [`ElementBehavior::own_waits`]), then its boundary events'. An error message (for an
/// incident) when an expression fails.
pub(crate) fn waits_of(p: P, model: &Process, idx: usize, vars: Vars<'_>) -> Result<Vec<Wait>, String> {
    waits_with(behavior_of(&model.elements[idx].kind), p, model, idx, vars, true)
}

/// `boundary`: with the boundary events' (not for an inner instance of a multi-instance
/// activity: they are its body's).
fn waits_with(
    behavior: &dyn ElementBehavior,
    p: P,
    model: &Process,
    idx: usize,
    vars: Vars<'_>,
    boundary: bool,
) -> Result<Vec<Wait>, String> {
    let mut waits = behavior.own_waits(p, model, idx, vars)?;
    if boundary {
        waits::add_boundary_waits(p, model, idx, vars, &mut waits)?;
    }
    Ok(waits)
}

/// COMPLETE_ELEMENT: COMPLETING, then completion continues.
pub(crate) fn complete(p: P, command: &Record) {
    let Some(instance) = p.view().element(command.key) else { return };
    if instance.state != ElementState::Activated {
        return;
    }
    p.event(command.key, Intent::ElementCompleting, RecordValue::ProcessInstance(instance.record));
    continue_completion(p, command.key);
}

/// The part of completion that may stop at an incident (output mappings, conditions).
pub(crate) fn continue_completion(p: P, key: i64) {
    let Some(instance) = p.view().element(key) else { return };
    let pi = instance.record.clone();
    let model = p.process_model(pi.process_definition_key);
    if pi.element_id == model.id {
        compensation::process_ended(p, &model, key);
        // an instance a call activity created completes that call activity
        let caller = call_activity::child_completing(p, key, &pi);
        process::complete(p, &model, key, pi);
        if let Some(caller) = caller {
            call_activity::child_completed(p, caller);
        }
        return;
    }
    let Some(idx) = model.element(&pi.element_id) else { return };
    let element = &model.elements[idx];
    let body = element.multi_instance.is_some() && is_multi_instance_body(&pi);
    let behavior = behavior_for(element, &pi);
    if !body {
        behavior.on_completing(p, &model, idx, key);
        event_trigger::catch_event_completing(p, &model, idx, key);
    }
    if body {
        multi_instance::body_completing(p, element, key, &pi);
    } else if !element.outputs.is_empty() {
        match evaluate_mappings(p, key, &element.outputs) {
            Ok(doc) => variables::merge_propagate(p, pi.flow_scope_key, &variables::texts_of(&doc)),
            Err(message) => return incident(p, &pi, key, -1, error_type::IO_MAPPING_ERROR, message),
        }
    }
    if element.multi_instance.is_some() && !body {
        // an inner instance: its body goes on, not a flow
        let done = match multi_instance::inner_completing(p, element, key, &pi) {
            Ok(done) => done,
            Err(message) => return incident(p, &pi, key, -1, error_type::EXTRACT_VALUE_ERROR, message),
        };
        waits::close(p, &model, &pi.element_id, key);
        p.event(key, Intent::ElementCompleted, RecordValue::ProcessInstance(pi.clone()));
        compensation::completed(p, &model, idx, key, &pi);
        return multi_instance::inner_completed(p, &model, idx, &pi, done, TRANSITIONS);
    }
    let flows = match behavior.outgoing(p, &model, idx, key) {
        Ok(flows) => flows,
        Err(message) => return incident(p, &pi, key, -1, error_type::CONDITION_ERROR, message),
    };
    waits::close(p, &model, &pi.element_id, key);
    p.event(key, Intent::ElementCompleted, RecordValue::ProcessInstance(pi.clone()));
    compensation::completed(p, &model, idx, key, &pi);
    if behavior.on_completed(p, &model, idx, key, &pi, TRANSITIONS) == Then::Done {
        return;
    }
    if flows.is_empty() {
        maybe_complete_scope(p, pi.flow_scope_key);
    }
    for flow in flows {
        take_flow(p, &model, &pi, flow);
    }
}

/// A token leaves `from` along `flow`: SEQUENCE_FLOW_TAKEN, and the target is activated once
/// it takes the token.
fn take_flow(p: P, model: &Process, from: &ProcessInstanceRecord, flow: usize) {
    flow_taken(p, model, from, flow);
    let target_idx = model.flows[flow].target;
    let target = &model.elements[target_idx];
    if !behavior_of(&target.kind).takes_token(p, model, target_idx, from.flow_scope_key) {
        return;
    }
    let next = child_record(from, from.flow_scope_key, &target.id, target.entered_type());
    let next_key = p.new_key();
    p.command(next_key, Intent::ActivateElement, RecordValue::ProcessInstance(next));
}

/// Completes a scope once nothing inside it is active and no token is in flight; first, a
/// token waiting at an inclusive join may go on now that one more path has ended.
fn maybe_complete_scope(p: P, scope: i64) {
    let Some(s) = p.view().element(scope) else { return };
    if s.state != ElementState::Activated {
        return;
    }
    if s.active_flows > 0 {
        let model = p.process_model(s.record.process_definition_key);
        for &idx in model.inclusive_joins(model.element(&s.record.element_id)) {
            if gateways::inclusive_join_ready(p, &model, scope, idx) {
                let e = &model.elements[idx];
                let record = child_record(&s.record, scope, &e.id, e.kind.bpmn_element_type());
                let key = p.new_key();
                p.command(key, Intent::ActivateElement, RecordValue::ProcessInstance(record));
            }
        }
        return;
    }
    // a scope terminating its children over later batches goes on after the last chunk
    if s.active_children == 0 && !p.view().terminates_children(scope) {
        p.command(scope, Intent::CompleteElement, RecordValue::ProcessInstance(s.record));
    }
}

/// Terminates an element instance and everything inside it: TERMINATING, then each child's
/// whole termination in turn, then the instance's own end. Walks the tree with a stack of its
/// own, not by recursion: through call activities, the instances below one can be as deep as
/// `max_process_depth` times the nesting of scopes a model may have.
pub(crate) fn terminate(p: P, key: i64) {
    terminate_walk(p, key, false)
}

/// [`terminate`] spread over batches (a cancelled process instance, an interrupting event that
/// waits, a terminate end event's siblings, inner instances a completion condition or a chunk
/// ends, a modification's terminate instructions): at most [`MI_TERMINATIONS_PER_BATCH`]
/// element instances terminate a batch, whatever their nesting. `key` always starts
/// terminating; an instance inside it reached once the batch's share is used up waits, with its
/// siblings not yet terminating, for a PROCESS_INSTANCE_BATCH TERMINATE of their scope in a
/// later batch ([`terminate_batch`]); a multi-instance body with more than
/// [`MI_TERMINATIONS_PER_BATCH`] active inner instances always terminates them so. The scopes
/// above end once their last child has (Zeebe 8.5's `ProcessInstanceBatchTerminateProcessor`;
/// see [`finish_terminating`]); [`crate::elements::event_trigger::terminates_later`] tells in
/// advance whether a termination ends in this batch.
pub(crate) fn terminate_in_batches(p: P, key: i64) {
    terminate_walk(p, key, true)
}

/// Terminates the children of active scope `scope`, which stays active (an interrupting event
/// subprocess takes it over, a terminate end event ends it, a multi-instance body's completion
/// condition held), each with what it holds ([`terminate_in_batches`]), oldest first, while the
/// batch's share of [`MI_TERMINATIONS_PER_BATCH`] lasts (the first child always starts). With
/// children left: PROCESS_INSTANCE_BATCH TERMINATING (Waggle's own; state keeps the scope in
/// `TS/`, so a restart asks again) and TERMINATE of the scope for a later batch
/// ([`terminate_batch`]); the scope goes on (the event subprocess starts, the scope completes)
/// only once the last chunk is TERMINATED and nothing inside it is left. A few children end as
/// they always did, in this batch, with the same records. Whether children are left for later
/// batches.
pub(crate) fn terminate_children(p: P, scope: i64) -> bool {
    let room = MI_TERMINATIONS_PER_BATCH.saturating_sub(p.mi_terminations).max(1);
    let children = p.view().first_children_not_terminating(scope, room + 1);
    for (i, &child) in children.iter().enumerate() {
        if i > 0 && p.mi_terminations >= MI_TERMINATIONS_PER_BATCH {
            let Some(s) = p.view().element(scope) else { return false };
            multi_instance::request_children_termination(p, &s.record, scope, child);
            return true;
        }
        terminate_in_batches(p, child);
    }
    false
}

/// The instance whose child list holds `record`'s instance: its flow scope, or for a called
/// process instance its call activity.
pub(crate) fn container_of(record: &ProcessInstanceRecord) -> i64 {
    if record.flow_scope_key > 0 {
        record.flow_scope_key
    } else {
        record.parent_element_instance_key
    }
}

fn terminate_walk(p: P, root: i64, in_batches: bool) {
    enum Step {
        Enter(i64),
        Leave(Box<ElementInstance>),
    }
    let mut steps = vec![Step::Enter(root)];
    // scopes whose children not yet terminating wait for a later batch
    let mut deferred: Vec<i64> = Vec::new();
    while let Some(step) = steps.pop() {
        match step {
            Step::Enter(key) => {
                let Some(instance) = p.view().element(key) else { continue };
                if matches!(instance.state, ElementState::Terminating | ElementState::Terminated | ElementState::Completed) {
                    continue;
                }
                if in_batches && key != root && p.mi_terminations >= MI_TERMINATIONS_PER_BATCH {
                    // the batch's share is used up: the rest of this scope's children later
                    let scope = container_of(&instance.record);
                    if !deferred.contains(&scope) {
                        deferred.push(scope);
                        if let Some(s) = p.view().element(scope) {
                            multi_instance::request_termination_batch(p, &s.record, scope, key);
                        }
                    }
                    continue;
                }
                p.event(key, Intent::ElementTerminating, RecordValue::ProcessInstance(instance.record.clone()));
                p.mi_terminations += 1;
                if in_batches && terminates_in_batches(&instance) {
                    let first = p.view().first_children(key, 1).first().copied().unwrap_or(-1);
                    multi_instance::request_termination_batch(p, &instance.record, key, first);
                    continue;
                }
                steps.push(Step::Leave(Box::new(instance)));
                // the first child ends first
                steps.extend(p.view().children(key).into_iter().rev().map(Step::Enter));
            }
            // a scope above children that terminate over later batches ends after them
            Step::Leave(instance) if p.view().element_with(instance.key, |e| e.active_children > 0) == Some(true) => {}
            Step::Leave(instance) => terminated(p, *instance),
        }
    }
}

/// PROCESS_INSTANCE_BATCH TERMINATE: terminates the next children of a scope (a multi-instance
/// body's inner instances, the children of any terminating scope a bounded termination left
/// for later, or of an active scope [`terminate_children`] left for later), each with what it
/// holds, while the batch's share of [`MI_TERMINATIONS_PER_BATCH`] lasts; with children left,
/// it asks for the next chunk with another TERMINATE for a later batch; the last writes
/// TERMINATED, then the scope goes on ([`finish_terminating`]): a terminating scope ends with
/// the scopes above it that waited for it; an active one starts the interrupting event
/// subprocess that waited, or completes. A scope that is gone, or active without terminating
/// its children (a copy of a command whose work is done): rejected (NOT_FOUND).
pub(crate) fn terminate_batch(p: P, command: &Record) {
    let RecordValue::ProcessInstanceBatch(batch) = &command.value else { return };
    let body_key = batch.batch_element_instance_key;
    let body = p.view().element(body_key).filter(|b| match b.state {
        ElementState::Terminating => true,
        ElementState::Activated => p.view().terminates_children(body_key),
        _ => false,
    });
    let Some(body) = body else {
        let reason = format!("Expected to terminate the children of element instance '{body_key}', but it is not terminating them");
        return p.reject(command, None, waggle_protocol::RejectionType::NotFound, reason);
    };
    let room = MI_TERMINATIONS_PER_BATCH.saturating_sub(p.mi_terminations).max(1);
    // a child holding children that terminate over later batches stays terminating meanwhile:
    // the next chunk passes it by
    let children = p.view().first_children_not_terminating(body_key, room + 1);
    for (i, &child) in children.iter().enumerate() {
        if i > 0 && p.mi_terminations >= MI_TERMINATIONS_PER_BATCH {
            return multi_instance::request_termination_batch(p, &body.record, body_key, child);
        }
        terminate_in_batches(p, child);
    }
    if children.len() > room {
        let next = p.view().first_children_not_terminating(body_key, 1);
        if let Some(&next) = next.first() {
            return multi_instance::request_termination_batch(p, &body.record, body_key, next);
        }
    }
    // (its applier takes an active scope out of `TS/`: it may go on now)
    p.event(command.key, Intent::Terminated, command.value.clone());
    finish_terminating(p, body_key);
}

/// Ends the terminating instance `key` once nothing inside it is left, then each terminating
/// scope above it that waited only for it (through call activities too). An interrupting
/// boundary event that waited for one of them (PROCESS_EVENT TRIGGERING on a body, a
/// subprocess, a call activity) is entered then (see `events::enter_waiting_boundary`). The
/// first scope up that stayed active goes on once nothing is left in it: the interrupting
/// event subprocess that waited on it starts, or it completes (a terminate end event ended its
/// other children; a completion condition held), as Zeebe's container processors do when their
/// last child has terminated.
fn finish_terminating(p: P, mut key: i64) {
    loop {
        let Some(instance) = p.view().element(key) else { return };
        match instance.state {
            // one that terminates its children over later batches goes on after the last chunk
            ElementState::Activated if p.view().terminates_children(key) => return,
            ElementState::Activated => {
                if !events::start_waiting_event_subprocess(p, key, TRANSITIONS) {
                    maybe_complete_scope(p, key);
                }
                return;
            }
            ElementState::Terminating if instance.active_children == 0 => {}
            _ => return,
        }
        let up = container_of(&instance.record);
        let waiting = p.view().process_event(key);
        terminated(p, instance.clone());
        if let Some(waiting) = waiting {
            if events::enter_waiting_boundary(p, &instance, waiting, TRANSITIONS) {
                return;
            }
        }
        key = up;
    }
}

/// The end of a terminating instance once everything inside it has terminated.
fn terminated(p: P, instance: ElementInstance) {
    let key = instance.key;
    let model = p.process_model(instance.record.process_definition_key);
    if let Some(idx) = model.element(&instance.record.element_id) {
        behavior_for(&model.elements[idx], &instance.record).on_terminate(p, &instance);
    }
    resolve_incident_of(p, p.view().element_incident(key));
    waits::close(p, &model, &instance.record.element_id, key);
    if instance.record.flow_scope_key < 0 {
        compensation::process_ended(p, &model, key);
        return process::terminated(p, key, &instance.record);
    }
    compensation::scope_terminated(p, &model, &instance);
    p.event(key, Intent::ElementTerminated, RecordValue::ProcessInstance(instance.record));
}

/// A timer, message or signal fired for `instance` (the waiting element instance) on behalf of
/// `target`: a catch event or receive task waiting for it completes; otherwise the hook of the
/// element it belongs to goes on (a boundary event, an event subprocess's start event, the
/// event after an event-based gateway). `variables` come with a message or signal.
pub(crate) fn event_occurred(p: P, instance: &ElementInstance, target: &str, variables: &[(String, String)]) {
    let model = p.process_model(instance.record.process_definition_key);
    if instance.record.element_id == target {
        // PROCESS_EVENT TRIGGERING on the catch event itself; TRIGGERED when it completes
        // (`event_trigger::catch_event_completing`)
        event_trigger::triggering(p, instance, target, variables);
        let outputs = model.element(target).is_some_and(|i| !model.elements[i].outputs.is_empty());
        variables::set_event_variables(p, instance.key, instance.record.flow_scope_key, outputs, variables);
        p.command(instance.key, Intent::CompleteElement, RecordValue::ProcessInstance(instance.record.clone()));
        return;
    }
    let Some(target_idx) = model.element(target) else { return };
    behavior_of(&model.elements[target_idx].kind).on_event_occurred(p, &model, target_idx, instance, variables, TRANSITIONS);
}

/// Throws an error at element instance `from` (a worker's, or an error end event's again
/// after its incident is resolved): see [`events::throw_error`].
pub(crate) fn throw_error(p: P, from: i64, pi: &ProcessInstanceRecord, error: &ThrownError<'_>) {
    events::throw_error(p, from, pi, error, TRANSITIONS)
}
