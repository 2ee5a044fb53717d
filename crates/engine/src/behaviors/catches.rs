//! Where a thrown error or escalation is caught: the catch events from the throwing element
//! instance outwards.

use waggle_bpmn::{ElementKind, EventTrigger, Process};

use crate::behaviors::flows::is_inner_instance;
use crate::processing::P;
use crate::tables::ElementInstance;

/// Where a thrown error or escalation is caught.
pub(crate) enum Catch {
    /// A boundary event (index) of the activity instance.
    Boundary(ElementInstance, usize),
    /// An event subprocess (index) inside the scope instance.
    EventSubProcess(ElementInstance, usize),
}

/// The catch event for an error or escalation thrown at element instance `from`: from `from`
/// outwards, at each level the event subprocesses inside it and then its boundary events; an
/// exact match (`matches(trigger) == Some(true)`) before a catch-all (`Some(false)`). From a
/// process instance a call activity created, the search goes on at that call activity, in the
/// calling process (as Zeebe propagates errors and escalations to the caller).
pub(crate) fn find_catch(p: P, from: i64, matches: impl Fn(&EventTrigger) -> Option<bool>) -> Option<Catch> {
    let mut current = p.view().element(from);
    while let Some(instance) = current {
        let model = p.process_model(instance.record.process_definition_key);
        let model: &Process = &model;
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
            // an inner instance of a multi-instance activity: its boundary events are its body's
            if let Some(i) = idx.filter(|&i| !is_inner_instance(&model.elements[i], &instance.record)) {
                for &b in &model.elements[i].boundary_events {
                    if let ElementKind::BoundaryEvent { trigger, .. } = &model.elements[b].kind {
                        if matches(trigger) == Some(exact) {
                            return Some(Catch::Boundary(instance, b));
                        }
                    }
                }
            }
        }
        let next = match instance.record.flow_scope_key {
            scope if scope > 0 => scope,
            _ => instance.record.parent_element_instance_key,
        };
        current = (next > 0).then(|| p.view().element(next)).flatten();
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
