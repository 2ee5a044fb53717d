//! PROCESS_EVENT records (Zeebe 8.5's `EventHandle`, `EventTriggerBehavior`): every triggered
//! event writes TRIGGERING on the instance it is caught on, with the event's variables, and
//! TRIGGERED when it is taken (see [`triggering`], [`catch_event_completing`],
//! `behaviors::starts::start_triggering`; docs/compatibility.md lists where each comes).
//!
//! Interrupting events that wait for what they interrupt: an interrupting boundary event (a
//! timer, message, signal, or a caught error or escalation) on an activity whose termination
//! does not end in this batch (it is or holds, at any depth, a multi-instance body with more
//! inner instances than one batch terminates, or more element instances in all than the
//! batch's share: [`terminates_later`]), or an interrupting event subprocess whose scope's
//! children are so, or too many to start terminating in one batch
//! (`lifecycle::terminate_children`), keeps its TRIGGERING in state (`PE/<scope>`, by its applier), terminates
//! them over later batches (PROCESS_INSTANCE_BATCH TERMINATE; the scopes in between stay
//! TERMINATING), and is entered once the last has terminated: TRIGGERED, then the boundary
//! event or the event subprocess activates with the event's variables
//! (`events::enter_waiting_boundary`, `events::start_waiting_event_subprocess`). The trigger is
//! durable, so a restart between two chunks goes on the same way; a scope that is
//! terminated meanwhile (a cancelled instance) takes its trigger with it.

use waggle_bpmn::{ElementKind, EventTrigger, Process};
use waggle_protocol::value::ProcessEventRecord;
use waggle_protocol::{Intent, RecordValue};

use crate::behaviors::flows::terminates_in_batches;
use crate::limits::MI_TERMINATIONS_PER_BATCH;
use crate::processing::P;
use crate::tables::{ElementInstance, ElementState};

/// PROCESS_EVENT TRIGGERING: the event of `target` (a boundary event, an event subprocess's
/// start event, a catch event, an event after an event-based gateway) occurred on `scope` (the
/// instance it is caught on: the boundary event's activity, the event subprocess's flow scope,
/// the catch event or gateway itself) with `variables` (name, JSON text). Zeebe 8.5 writes it
/// for every triggered event (`EventHandle.triggerEvent`, `EventTriggerBehavior`); its applier
/// keeps the trigger in `PE/<scope>` until TRIGGERED (a trigger already waiting there stays).
/// Returns its key and record, for the TRIGGERED.
pub(crate) fn triggering(p: P, scope: &ElementInstance, target: &str, variables: &[(String, String)]) -> (i64, ProcessEventRecord) {
    let record = ProcessEventRecord {
        scope_key: scope.key,
        target_element_id: target.to_string(),
        variables: crate::json_doc::object_text(variables),
        process_definition_key: scope.record.process_definition_key,
        process_instance_key: scope.record.process_instance_key,
        tenant_id: scope.record.tenant_id.to_string(),
    };
    let key = p.new_key();
    p.event(key, Intent::Triggering, RecordValue::ProcessEvent(record.clone()));
    (key, record)
}

/// A triggered catch event or receive task completes (COMPLETING written): PROCESS_EVENT
/// TRIGGERED for the trigger that completes it, as Zeebe writes it when it applies the
/// event's output (`BpmnVariableMappingBehavior.applyOutputMappings`).
pub(crate) fn catch_event_completing(p: P, model: &Process, idx: usize, key: i64) {
    if !matches!(model.elements[idx].kind, ElementKind::IntermediateCatchEvent(_) | ElementKind::ReceiveTask(_)) {
        return;
    }
    if let Some((event_key, record)) = p.view().process_event(key).filter(|(_, e)| e.scope_key == key) {
        triggered(p, event_key, record);
    }
}

/// Whether an interrupting event on element instance `key` must wait for it: terminating it
/// does not end in this batch (see [`terminates_later`]).
pub(crate) fn holds_wide_body(p: P, key: i64) -> bool {
    terminates_later(p, &[key])
}

/// Whether terminating `roots` one after another (`lifecycle::terminate_in_batches`) leaves
/// something for a later batch: one holds, at any depth (inside subprocesses, inner instances,
/// called instances), a multi-instance body too wide to terminate in one batch
/// (`flows::terminates_in_batches`) or an instance terminating already, or, counted as the
/// termination counts them, more element instances than the batch's share of
/// `MI_TERMINATIONS_PER_BATCH` has room for (a root always starts terminating). Reads what
/// terminating them would read anyway, and stops once the answer is known.
pub(crate) fn terminates_later(p: P, roots: &[i64]) -> bool {
    let view = p.view();
    let mut used = p.mi_terminations;
    for &root in roots {
        let mut stack = vec![root];
        while let Some(key) = stack.pop() {
            let Some(instance) = view.element(key) else { continue };
            match instance.state {
                ElementState::Terminated | ElementState::Completed => continue,
                // it ends in a later batch
                ElementState::Terminating => return true,
                _ => {}
            }
            if terminates_in_batches(&instance) || (key != root && used >= MI_TERMINATIONS_PER_BATCH) {
                return true;
            }
            used += 1;
            if instance.active_children > 0 {
                stack.extend(view.children(key));
            }
        }
    }
    false
}

/// Whether the trigger `scope` waits for enters one of `targets` (an interrupting event
/// subprocess has taken the scope over while its other children terminate).
pub(crate) fn waits_for_any(p: P, scope: i64, targets: &[String]) -> bool {
    p.view().process_event(scope).is_some_and(|(_, e)| targets.contains(&e.target_element_id))
}

/// PROCESS_EVENT TRIGGERED (the key of its TRIGGERING; no variables, as Zeebe writes it).
pub(crate) fn triggered(p: P, event_key: i64, record: ProcessEventRecord) {
    let record = ProcessEventRecord { variables: String::new(), ..record };
    p.event(event_key, Intent::Triggered, RecordValue::ProcessEvent(record));
}

/// An error or escalation's variables stay local to the catching event (as `events::catch`
/// hands them); a timer's, message's or signal's are the event's own.
pub(crate) fn caught_locally(model: &Process, idx: usize) -> bool {
    matches!(
        &model.elements[idx].kind,
        ElementKind::BoundaryEvent { trigger: EventTrigger::Error { .. } | EventTrigger::Escalation { .. }, .. }
            | ElementKind::EventStartEvent { trigger: EventTrigger::Error { .. } | EventTrigger::Escalation { .. }, .. }
    )
}
