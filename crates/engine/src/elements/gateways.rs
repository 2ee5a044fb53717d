//! Gateways: exclusive and inclusive (which flows to take), parallel (a join waits for every
//! incoming flow), inclusive joins (wait while more tokens may arrive), and the event-based
//! gateway (waits for the first of its events).

use waggle_bpmn::{ElementKind, Process};
use waggle_feel::Value;
use waggle_protocol::{Intent, RecordValue};

use crate::behaviors::expressions::type_error;
use crate::behaviors::flows::{child_record, flow_taken};
use crate::behaviors::waits::{self, wait_for, Wait};
use crate::elements::behavior::{wait, Activation, ElementBehavior, Transitions};
use crate::elements::event_trigger;
use crate::processing::P;
use crate::tables::ElementInstance;
use crate::variables::{self, evaluate, Vars};

/// Takes the first flow whose condition holds, else the default flow.
pub(crate) struct ExclusiveGateway;

impl ElementBehavior for ExclusiveGateway {
    fn outgoing(&self, p: P, model: &Process, idx: usize, key: i64) -> Result<Vec<usize>, String> {
        let element = &model.elements[idx];
        let ElementKind::ExclusiveGateway { default_flow } = element.kind else { return Ok(element.outgoing.clone()) };
        choose_flow(p, key, model, &element.outgoing, default_flow).map(|flow| flow.into_iter().collect())
    }
}

/// Takes every flow whose condition holds (else the default flow); as a join, waits while a
/// token may still arrive on an incoming flow.
pub(crate) struct InclusiveGateway;

impl ElementBehavior for InclusiveGateway {
    fn ready_to_activate(&self, p: P, model: &Process, idx: usize, scope: i64) -> bool {
        model.elements[idx].incoming.len() <= 1 || inclusive_join_ready(p, model, scope, idx)
    }

    fn outgoing(&self, p: P, model: &Process, idx: usize, key: i64) -> Result<Vec<usize>, String> {
        let element = &model.elements[idx];
        let ElementKind::InclusiveGateway { default_flow } = element.kind else { return Ok(element.outgoing.clone()) };
        choose_flows(p, key, model, &element.outgoing, default_flow)
    }
}

/// Forks on every outgoing flow; as a join, is entered once every incoming flow has a token.
pub(crate) struct ParallelGateway;

impl ElementBehavior for ParallelGateway {
    fn takes_token(&self, p: P, model: &Process, idx: usize, scope: i64) -> bool {
        let target = &model.elements[idx];
        target.incoming.len() <= 1 || target.incoming.iter().all(|i| p.view().taken_flows(scope, &model.flows[*i].id) > 0)
    }
}

/// Waits for the first of the catch events its flows lead to.
pub(crate) struct EventBasedGateway;

impl ElementBehavior for EventBasedGateway {
    /// The events of the catch events its flows lead to.
    fn own_waits(&self, p: P, model: &Process, idx: usize, vars: Vars<'_>) -> Result<Vec<Wait>, String> {
        let mut waits = Vec::new();
        for &f in &model.elements[idx].outgoing {
            let target = &model.elements[model.flows[f].target];
            if let ElementKind::IntermediateCatchEvent(trigger) = &target.kind {
                waits.extend(wait_for(p, vars, &target.id, trigger, true)?);
            }
        }
        Ok(waits)
    }

    fn on_activate(&self, p: P, a: Activation<'_>, _t: Transitions) {
        wait(p, a)
    }
}

/// An event-based gateway's event happened: the gateway completes, takes the flow to the
/// event, and the event completes at once (with the variables it brought).
pub(crate) fn continue_after_event_gateway(
    p: P,
    model: &Process,
    gateway: &ElementInstance,
    event: usize,
    variables: &[(String, String)],
    t: Transitions,
) {
    let Some(&flow) = model.elements[event].incoming.first() else { return };
    // PROCESS_EVENT TRIGGERING on the gateway; TRIGGERED just before the event's ACTIVATING
    // (Zeebe's `EventTriggerBehavior.activateTriggeredEvent`)
    let (event_key, trigger) = event_trigger::triggering(p, gateway, &model.elements[event].id, variables);
    p.event(gateway.key, Intent::ElementCompleting, RecordValue::ProcessInstance(gateway.record.clone()));
    waits::close(p, model, &gateway.record.element_id, gateway.key);
    p.event(gateway.key, Intent::ElementCompleted, RecordValue::ProcessInstance(gateway.record.clone()));
    flow_taken(p, model, &gateway.record, flow);
    let element = &model.elements[event];
    let record = child_record(&gateway.record, gateway.record.flow_scope_key, &element.id, element.kind.bpmn_element_type());
    let key = p.new_key();
    event_trigger::triggered(p, event_key, trigger);
    p.event(key, Intent::ElementActivating, RecordValue::ProcessInstance(record));
    variables::set_event_variables(p, key, gateway.record.flow_scope_key, !element.outputs.is_empty(), variables);
    t.continue_activation(p, key);
}

/// An inclusive join may activate when a token waits on at least one incoming flow and no
/// incoming flow without a token can still be reached from what is active in the scope.
pub(crate) fn inclusive_join_ready(p: P, model: &Process, scope: i64, join: usize) -> bool {
    let incoming = &model.elements[join].incoming;
    let view = p.view();
    let waiting: Vec<bool> = incoming.iter().map(|&f| view.taken_flows(scope, &model.flows[f].id) > 0).collect();
    if !waiting.contains(&true) {
        return false;
    }
    // where the other tokens are: active elements, and the targets of flows in flight
    let mut positions: Vec<usize> = view
        .children(scope)
        .into_iter()
        .filter_map(|c| view.element(c))
        .filter_map(|c| model.element(&c.record.element_id))
        .filter(|&e| e != join)
        .collect();
    for (i, f) in model.flows.iter().enumerate() {
        if !incoming.contains(&i) && view.taken_flows(scope, &f.id) > 0 {
            positions.push(f.target);
        }
    }
    let sources: Vec<usize> = incoming.iter().zip(&waiting).filter(|(_, w)| !**w).map(|(&f, _)| model.flows[f].source).collect();
    !reaches(model, &positions, &sources, join)
}

/// Whether any of `targets` can be reached from `from` along flows and boundary events,
/// without passing through `stop`.
fn reaches(model: &Process, from: &[usize], targets: &[usize], stop: usize) -> bool {
    let mut seen = vec![false; model.elements.len()];
    let mut stack: Vec<usize> = from.to_vec();
    while let Some(e) = stack.pop() {
        if e == stop || std::mem::replace(&mut seen[e], true) {
            continue;
        }
        if targets.contains(&e) {
            return true;
        }
        let element = &model.elements[e];
        stack.extend(element.outgoing.iter().map(|&f| model.flows[f].target));
        stack.extend(element.boundary_events.iter().copied());
    }
    false
}

/// The flow an exclusive gateway takes: the first outgoing flow (in Zeebe's order: reverse
/// document order, see the parser) whose condition is true, else the default flow; an
/// incident when neither exists.
fn choose_flow(p: P, scope: i64, model: &Process, outgoing: &[usize], default_flow: Option<usize>) -> Result<Option<usize>, String> {
    if outgoing.len() == 1 && model.flows[outgoing[0]].condition.is_none() {
        return Ok(Some(outgoing[0]));
    }
    for &f in outgoing {
        if Some(f) == default_flow {
            continue;
        }
        let Some(condition) = &model.flows[f].condition else { continue };
        match evaluate(p, scope, condition)? {
            Value::Bool(true) => return Ok(Some(f)),
            Value::Bool(false) => {}
            other => return Err(type_error(condition, "BOOLEAN", &other)),
        }
    }
    match default_flow {
        Some(f) => Ok(Some(f)),
        None if outgoing.is_empty() => Ok(None),
        None => Err("Expected at least one condition to evaluate to true, or to have a default flow".into()),
    }
}

/// The flows an inclusive gateway takes: every outgoing flow (in model order) whose condition
/// is true, else the default flow; an incident when neither exists.
fn choose_flows(p: P, scope: i64, model: &Process, outgoing: &[usize], default_flow: Option<usize>) -> Result<Vec<usize>, String> {
    if outgoing.len() == 1 && model.flows[outgoing[0]].condition.is_none() {
        return Ok(outgoing.to_vec());
    }
    let mut taken = Vec::new();
    for &f in outgoing {
        if Some(f) == default_flow {
            continue;
        }
        let Some(condition) = &model.flows[f].condition else {
            taken.push(f);
            continue;
        };
        match evaluate(p, scope, condition)? {
            Value::Bool(true) => taken.push(f),
            Value::Bool(false) => {}
            other => return Err(type_error(condition, "BOOLEAN", &other)),
        }
    }
    if !taken.is_empty() {
        return Ok(taken);
    }
    match default_flow {
        Some(f) => Ok(vec![f]),
        None if outgoing.is_empty() => Ok(vec![]),
        None => Err("Expected at least one condition to evaluate to true, or to have a default flow".into()),
    }
}
