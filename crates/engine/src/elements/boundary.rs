//! Boundary events: entered when the event they wait for on their activity occurs (a timer,
//! message or signal, or an error or escalation thrown inside the activity); an interrupting
//! one terminates the activity first.

use waggle_bpmn::{ElementKind, Process};
use waggle_protocol::{Intent, RecordValue};

use crate::behaviors::flows::child_record;
use crate::elements::behavior::{ElementBehavior, Transitions};
use crate::elements::event_trigger;
use crate::processing::P;
use crate::tables::{ElementInstance, ElementState};
use crate::variables;

/// A boundary event: passes through once entered.
pub(crate) struct BoundaryEvent;

impl ElementBehavior for BoundaryEvent {
    fn on_event_occurred(
        &self,
        p: P,
        model: &Process,
        idx: usize,
        waiting: &ElementInstance,
        variables: &[(String, String)],
        t: Transitions,
    ) {
        activate(p, model, waiting, idx, variables, false, t)
    }
}

/// Activates boundary event `boundary` of `activity`; an interrupting one terminates the
/// activity first. `local`: the variables stay local to the event (an error's, as Zeebe does),
/// else they are local only when the event has output mappings. PROCESS_EVENT TRIGGERING comes
/// first and TRIGGERED just before the event's ACTIVATING (Zeebe 8.5's `BoundaryEventTest`
/// `shouldTerminateSubProcessBeforeTriggeringBoundaryEvent`: TRIGGERING, the activity's
/// termination, TRIGGERED, the boundary event). When the activity's termination does not end
/// in this batch (see `event_trigger`), the event waits for it; an activity already
/// terminating (its instance cancelled, or interrupted by another event) takes no boundary
/// event.
pub(crate) fn activate(
    p: P,
    model: &Process,
    activity: &ElementInstance,
    boundary: usize,
    variables: &[(String, String)],
    local: bool,
    t: Transitions,
) {
    if activity.state == ElementState::Terminating {
        return;
    }
    let element = &model.elements[boundary];
    let interrupting = matches!(element.kind, ElementKind::BoundaryEvent { cancel_activity: true, .. });
    if interrupting {
        if let Some((key, waiting)) = p.view().process_event(activity.key) {
            // an interrupting event subprocess inside the activity waited on it: it goes with
            // the activity, and this event waits there instead
            event_trigger::triggered(p, key, waiting);
        }
    }
    let (event_key, trigger) = event_trigger::triggering(p, activity, &element.id, variables);
    if interrupting && event_trigger::holds_wide_body(p, activity.key) {
        return t.terminate_in_batches(p, activity.key);
    }
    if interrupting {
        t.terminate(p, activity.key);
    }
    event_trigger::triggered(p, event_key, trigger);
    enter(p, model, activity, boundary, variables, local, t)
}

/// Enters boundary event `boundary` of `activity` (ACTIVATING, its variables, then activation
/// goes on), the activity already terminated if the event interrupts it.
pub(crate) fn enter(
    p: P,
    model: &Process,
    activity: &ElementInstance,
    boundary: usize,
    variables: &[(String, String)],
    local: bool,
    t: Transitions,
) {
    let element = &model.elements[boundary];
    let record = child_record(&activity.record, activity.record.flow_scope_key, &element.id, element.kind.bpmn_element_type());
    let key = p.new_key();
    p.event(key, Intent::ElementActivating, RecordValue::ProcessInstance(record));
    variables::set_event_variables(p, key, activity.record.flow_scope_key, local || !element.outputs.is_empty(), variables);
    t.continue_activation(p, key);
}
