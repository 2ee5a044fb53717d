//! Interrupting events that wait for what they interrupt (Zeebe's `EventTriggerBehavior` and
//! PROCESS_EVENT records): an interrupting boundary event (a timer, message, signal, or a caught
//! error or escalation) on an activity that is or holds, at any depth, a multi-instance body with
//! more inner instances than one batch terminates (`flows::terminates_in_batches`,
//! [`holds_wide_body`]), or an interrupting event subprocess whose scope holds such a body,
//! writes PROCESS_EVENT TRIGGERING (the trigger kept in state, `PE/<scope>`, by its applier),
//! terminates them over later batches (PROCESS_INSTANCE_BATCH TERMINATE; the scopes in between
//! stay TERMINATING), and is entered once the last has terminated: TRIGGERED, then the boundary
//! event or the event subprocess activates with the event's variables
//! (`events::enter_waiting_boundary`, `events::start_waiting_event_subprocess`). The trigger is
//! durable, so a restart between two chunks goes on the same way; a scope that is
//! terminated meanwhile (a cancelled instance) takes its trigger with it.

use serde_json::Value as Json;
use waggle_bpmn::{ElementKind, EventTrigger, Process};
use waggle_protocol::value::ProcessEventRecord;
use waggle_protocol::{Intent, RecordValue};

use crate::behaviors::flows::terminates_in_batches;
use crate::processing::P;
use crate::tables::ElementInstance;

/// PROCESS_EVENT TRIGGERING: `target` (a boundary event, an event subprocess's start event)
/// waits on `scope` with `variables` (name, JSON text) until what it interrupts has terminated.
pub(crate) fn triggering(p: P, scope: &ElementInstance, target: &str, variables: &[(String, String)]) {
    let record = ProcessEventRecord {
        scope_key: scope.key,
        target_element_id: target.to_string(),
        variables: document(variables),
        process_definition_key: scope.record.process_definition_key,
        process_instance_key: scope.record.process_instance_key,
        tenant_id: scope.record.tenant_id.to_string(),
    };
    let key = p.new_key();
    p.event(key, Intent::Triggering, RecordValue::ProcessEvent(record));
}

/// Whether an interrupting event subprocess starting in `scope` must wait: one of the scope's
/// children holds a multi-instance body too wide to terminate in one batch (see
/// [`holds_wide_body`]).
pub(crate) fn scope_terminates_in_batches(p: P, scope: i64) -> bool {
    let children = p.view().children(scope);
    children.into_iter().any(|c| holds_wide_body(p, c))
}

/// Whether element instance `key` is, or holds at any depth (inside subprocesses, inner
/// instances, called instances), a multi-instance body too wide to terminate in one batch
/// (`flows::terminates_in_batches`): an interrupting event on it must wait for it. Walks the
/// subtree until it finds one (a body's inner instances only when it is narrow), reading what
/// terminating it would read anyway.
pub(crate) fn holds_wide_body(p: P, key: i64) -> bool {
    let view = p.view();
    let mut stack = vec![key];
    while let Some(key) = stack.pop() {
        let Some(instance) = view.element(key) else { continue };
        if terminates_in_batches(&instance) {
            return true;
        }
        if instance.active_children > 0 {
            stack.extend(view.children(key));
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

/// Variables as a JSON object's text (empty: none).
fn document(variables: &[(String, String)]) -> String {
    if variables.is_empty() {
        return String::new();
    }
    let mut text = String::from("{");
    for (i, (name, value)) in variables.iter().enumerate() {
        if i > 0 {
            text.push(',');
        }
        text.push_str(&Json::String(name.clone()).to_string());
        text.push(':');
        text.push_str(value);
    }
    text.push('}');
    text
}
