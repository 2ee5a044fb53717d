//! Embedded subprocesses and event subprocesses: a scope that starts at its start event (or
//! where start instructions say), and an event subprocess started by its start event's
//! trigger, which, when interrupting, takes its scope over.

use waggle_bpmn::{ElementKind, Process};
use waggle_protocol::{Intent, RecordValue};

use crate::behaviors::flows::{child_record, start_inside};
use crate::behaviors::waits::{self, close_where, event_subprocess_waits, Wait};
use crate::elements::behavior::{Activation, ElementBehavior, Transitions};
use crate::elements::event_trigger;
use crate::processing::P;
use crate::tables::ElementInstance;
use crate::variables::{self, Vars};

/// An embedded subprocess or an event subprocess.
pub(crate) struct SubProcess;

impl ElementBehavior for SubProcess {
    /// The timer, message and signal start events of its event subprocesses.
    fn own_waits(&self, p: P, model: &Process, idx: usize, vars: Vars<'_>) -> Result<Vec<Wait>, String> {
        event_subprocess_waits(p, model, Some(idx), vars)
    }

    /// Opens what it waits for (its boundary events, its event subprocesses' start events),
    /// ACTIVATED, then activates its start event, or the targets of start instructions.
    fn on_activate(&self, p: P, a: Activation<'_>, _t: Transitions) {
        let Activation { model, idx, key, record: pi, waits, instructed } = a;
        let (ElementKind::SubProcess { start } | ElementKind::EventSubProcess { start }) = model.elements[idx].kind else { return };
        waits::open(p, &pi, key, waits);
        p.event(key, Intent::ElementActivated, RecordValue::ProcessInstance(pi.clone()));
        let starts = instructed.unwrap_or_else(|| vec![start]);
        start_inside(p, model, &pi, key, Some(idx), starts);
    }
}

/// Starts event subprocess `esp` inside `scope` (the instance of its flow scope). An
/// interrupting one terminates everything else in the scope first (at most a batch's share of
/// `MI_TERMINATIONS_PER_BATCH` element instances a batch: `lifecycle::terminate_children`), and
/// the scope's other event subprocesses can no longer start; when terminating them does not end
/// in this batch, it starts once they have terminated (see `event_trigger`). PROCESS_EVENT TRIGGERING comes first,
/// TRIGGERED just before the event subprocess's ACTIVATING (Zeebe's
/// `EventTriggerBehavior.triggerEventSubProcess`). A scope already terminating discards the
/// event. `local`: the variables stay local to the event subprocess (an error's), else they
/// propagate.
pub(crate) fn start_event_subprocess(
    p: P,
    model: &Process,
    scope: &ElementInstance,
    esp: usize,
    variables: &[(String, String)],
    local: bool,
    t: Transitions,
) {
    let Some(start) = model.event_subprocess_start(esp) else { return };
    if scope.state == crate::tables::ElementState::Terminating {
        return; // the scope is ending (over later batches): the event is discarded
    }
    let interrupting = matches!(model.elements[start].kind, ElementKind::EventStartEvent { interrupting: true, .. });
    if interrupting {
        let starts: Vec<String> = model
            .event_subprocesses(model.element(&scope.record.element_id))
            .filter_map(|e| model.event_subprocess_start(e))
            .map(|s| model.elements[s].id.clone())
            .collect();
        close_where(p, scope.key, |target| starts.iter().any(|s| s == target));
    }
    let (event_key, trigger) = event_trigger::triggering(p, scope, &model.elements[start].id, variables);
    if interrupting {
        // a bounded share a batch: with children left for later batches, or holding what
        // terminates over later batches, the event subprocess starts once the last has
        // terminated (`events::start_waiting_event_subprocess`)
        let later = t.terminate_children(p, scope.key);
        if later || p.view().element_with(scope.key, |s| s.active_children > 0) == Some(true) {
            return;
        }
    }
    event_trigger::triggered(p, event_key, trigger);
    enter_event_subprocess(p, model, scope, esp, variables, local, t)
}

/// Enters event subprocess `esp` in `scope` (ACTIVATING, its variables, then activation goes
/// on), what it interrupts already terminated.
pub(crate) fn enter_event_subprocess(
    p: P,
    model: &Process,
    scope: &ElementInstance,
    esp: usize,
    variables: &[(String, String)],
    local: bool,
    t: Transitions,
) {
    let element = &model.elements[esp];
    let record = child_record(&scope.record, scope.key, &element.id, element.kind.bpmn_element_type());
    let esp_key = p.new_key();
    p.event(esp_key, Intent::ElementActivating, RecordValue::ProcessInstance(record.clone()));
    if local {
        variables::merge_local(p, esp_key, variables);
    } else if !variables.is_empty() {
        variables::merge_propagate(p, esp_key, variables);
    }
    t.continue_activation(p, esp_key);
}

/// Whether an interrupting event subprocess has taken over `scope` (only checked when the
/// scope has interrupting event subprocesses at all).
pub(crate) fn interrupted(p: P, model: &Process, scope: &ElementInstance) -> bool {
    let interrupting = model.interrupting_event_subprocesses(model.element(&scope.record.element_id));
    if interrupting.is_empty() {
        return false;
    }
    let view = p.view();
    let started = view
        .children(scope.key)
        .into_iter()
        .filter_map(|c| view.element(c))
        .any(|c| interrupting.iter().any(|&esp| model.elements[esp].id == c.record.element_id));
    // or one waits for the scope's other children to terminate
    started || {
        let starts: Vec<String> =
            interrupting.iter().filter_map(|&esp| model.event_subprocess_start(esp)).map(|s| model.elements[s].id.clone()).collect();
        event_trigger::waits_for_any(p, scope.key, &starts)
    }
}
