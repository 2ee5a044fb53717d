//! TIMER TRIGGER (from the scheduler): a due timer fires for the element that waits for it, or
//! starts an instance at a timer start event.

use waggle_bpmn::{ElementKind, EventTrigger, TimerDefinition};
use waggle_protocol::{Intent, RecordValue};

use crate::behaviors::starts;
use crate::behaviors::waits::schedule_next_cycle;
use crate::elements;
use crate::processing::P;

/// TIMER TRIGGER (from the scheduler): fires a due timer; a cycle schedules its next repetition.
pub(crate) fn trigger_timer(p: P, command: &waggle_protocol::Record) {
    let Some(timer) = p.view().timer(command.key) else { return };
    if timer.due_date_ms > p.now_ms {
        return; // never early
    }
    if timer.element_instance_key < 0 {
        return starts::trigger_start_timer(p, command.key, timer);
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
    elements::event_occurred(p, &instance, &timer.target_element_id, &[]);
}
