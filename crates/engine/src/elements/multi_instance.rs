//! Multi-instance activities (service tasks so far), as Zeebe runs them
//! (https://docs.camunda.io/docs/components/modeler/bpmn/multi-instance/): a token entering the
//! activity activates its multi-instance body (`MULTI_INSTANCE_BODY`, the instance boundary
//! events belong to), which evaluates the input collection and activates one inner instance per
//! item, all at once (parallel) or one after another (sequential). Each inner instance has its
//! item in the input element variable and its position (from 1) in `loopCounter`, both local.
//! When an inner instance completes, the output element is written at its position in the
//! output collection (a local variable of the body, a list of nulls at first, propagated when
//! the body completes) and the completion condition, if any, is evaluated with
//! `numberOfInstances`, `numberOfActiveInstances`, `numberOfCompletedInstances` and
//! `numberOfTerminatedInstances`: when it holds, the other inner instances terminate and the
//! body completes; otherwise the body completes with its last inner instance.

use serde_json::Value as Json;
use waggle_bpmn::{Element, MultiInstance, Process};
use waggle_feel::Value;
use waggle_protocol::value::ProcessInstanceRecord;
use waggle_protocol::{Intent, RecordValue};

use crate::behaviors::expressions::type_error;
use crate::behaviors::flows::child_record;
use crate::behaviors::incidents::{error_type, incident};
use crate::behaviors::waits;
use crate::elements::behavior::{Activation, ElementBehavior, Transitions};
use crate::json_doc::json_text;
use crate::processing::P;
use crate::tables::ElementState;
use crate::variables::{self, evaluate, Vars};

/// Most items an input collection may have: a body activates its inner instances (all of
/// them, in parallel) within the batch that activates it, so this bounds that batch (C10). A
/// longer collection is an incident naming the limit. Zeebe has no such bound (it spreads the
/// activations over batches, which Waggle does not do yet).
pub const MAX_MULTI_INSTANCE_ITEMS: usize = 10_000;

/// The multi-instance body of an activity.
pub(crate) struct MultiInstanceBody;

impl ElementBehavior for MultiInstanceBody {
    /// The input collection evaluated (not a list: an incident), the output collection
    /// initialised, the boundary events' waits opened, ACTIVATED, then the inner instances (all,
    /// or the first), or completion at once for an empty collection.
    fn on_activate(&self, p: P, a: Activation<'_>, _t: Transitions) {
        let Activation { model, idx, key, record: body, waits, .. } = a;
        let element = &model.elements[idx];
        let Some(mi) = &element.multi_instance else { return };
        let items = match input_items(p, key, mi) {
            Ok(items) => items,
            Err(message) => return incident(p, &body, key, -1, error_type::EXTRACT_VALUE_ERROR, message),
        };
        if let Some(name) = &mi.output_collection {
            variables::set_local_text(p, key, name, json_text(&Json::Array(vec![Json::Null; items.len()])));
        }
        waits::open(p, &body, key, waits);
        p.event(key, Intent::ElementActivated, RecordValue::ProcessInstance(body.clone()));
        if items.is_empty() {
            return p.command(key, Intent::CompleteElement, RecordValue::ProcessInstance(body));
        }
        let count = if mi.sequential { 1 } else { items.len() };
        for (i, item) in items.into_iter().take(count).enumerate() {
            activate_inner(p, element, &body, key, i + 1, item);
        }
    }
}

/// The input collection's items (as JSON texts), evaluated in `scope`.
fn input_items(p: P, scope: i64, mi: &MultiInstance) -> Result<Vec<String>, String> {
    match evaluate(p, scope, &mi.input_collection)? {
        Value::List(items) if items.len() > MAX_MULTI_INSTANCE_ITEMS => Err(format!(
            "Expected the input collection '{}' to have at most {MAX_MULTI_INSTANCE_ITEMS} items, but it has {} (the limit on a multi-instance body's items)",
            mi.input_collection.source(),
            items.len()
        )),
        Value::List(items) => Ok(items.iter().map(|v| json_text(&v.to_json())).collect()),
        other => Err(type_error(&mi.input_collection, "ARRAY", &other)),
    }
}

/// ACTIVATE_ELEMENT for the inner instance with `loop_counter` (from 1) and its item.
fn activate_inner(p: P, element: &Element, body: &ProcessInstanceRecord, body_key: i64, loop_counter: usize, item: String) {
    let record = child_record(body, body_key, &element.id, element.kind.bpmn_element_type());
    let key = p.new_key();
    p.set_loop_item(key, loop_counter, item);
    p.command(key, Intent::ActivateElement, RecordValue::ProcessInstance(record));
}

/// An inner instance activates (ACTIVATING written): its input element and `loopCounter`, local.
pub(crate) fn inner_activating(p: P, element: &Element, key: i64) {
    let (Some(mi), Some((loop_counter, item))) = (&element.multi_instance, p.take_loop_item(key)) else { return };
    if let Some(name) = &mi.input_element {
        variables::set_local_text(p, key, name, item);
    }
    variables::set_local_text(p, key, "loopCounter", loop_counter.to_string());
}

/// What an inner instance's completion decided, before its COMPLETED.
pub(crate) struct InnerCompletion {
    loop_counter: usize,
    /// The completion condition held: the body completes now.
    satisfied: bool,
}

/// An inner instance completes (COMPLETING written, output mappings applied): its output
/// element goes into the body's output collection, and the completion condition is evaluated.
/// An error message for an incident.
pub(crate) fn inner_completing(p: P, element: &Element, key: i64, inner: &ProcessInstanceRecord) -> Result<InnerCompletion, String> {
    let Some(mi) = &element.multi_instance else { return Ok(InnerCompletion { loop_counter: 0, satisfied: false }) };
    let body_key = inner.flow_scope_key;
    let loop_counter = p.view().variable(key, "loopCounter").and_then(|v| v.value.parse::<usize>().ok()).unwrap_or(0);
    if let (Some(name), Some(output)) = (&mi.output_collection, &mi.output_element) {
        let value = evaluate(p, key, output)?.to_json();
        let mut collection: Vec<Json> =
            p.view().variable(body_key, name).and_then(|v| serde_json::from_str(&v.value).ok()).unwrap_or_default();
        if let Some(slot) = loop_counter.checked_sub(1).and_then(|i| collection.get_mut(i)) {
            *slot = value;
            variables::set_local_text(p, body_key, name, json_text(&Json::Array(collection)));
        }
    }
    let Some(condition) = &mi.completion_condition else { return Ok(InnerCompletion { loop_counter, satisfied: false }) };
    let instances = input_items(p, body_key, mi)?.len();
    let active = p.view().element(body_key).map_or(0, |b| b.active_children as usize).saturating_sub(1);
    let completed = if mi.sequential { loop_counter } else { instances.saturating_sub(active) };
    let numbers = [
        ("numberOfInstances".to_string(), instances.to_string()),
        ("numberOfActiveInstances".to_string(), active.to_string()),
        ("numberOfCompletedInstances".to_string(), completed.to_string()),
        ("numberOfTerminatedInstances".to_string(), "0".to_string()),
    ];
    match evaluate(p, Vars::ScopeWith(key, &numbers), condition)? {
        Value::Bool(satisfied) => Ok(InnerCompletion { loop_counter, satisfied }),
        other => Err(type_error(condition, "BOOLEAN", &other)),
    }
}

/// After an inner instance's COMPLETED: the body completes when the completion condition held
/// (the other inner instances terminated first) or no inner instance is left; a sequential
/// body activates the next one.
pub(crate) fn inner_completed(p: P, model: &Process, idx: usize, inner: &ProcessInstanceRecord, done: InnerCompletion, t: Transitions) {
    let element = &model.elements[idx];
    let Some(mi) = &element.multi_instance else { return };
    let Some(body) = p.view().element(inner.flow_scope_key).filter(|b| b.state == ElementState::Activated) else { return };
    if done.satisfied {
        for child in p.view().children(body.key) {
            t.terminate(p, child);
        }
        return p.command(body.key, Intent::CompleteElement, RecordValue::ProcessInstance(body.record));
    }
    if mi.sequential {
        match input_items(p, body.key, mi) {
            Ok(items) if done.loop_counter < items.len() => {
                let item = items.into_iter().nth(done.loop_counter).unwrap_or_default();
                return activate_inner(p, element, &body.record, body.key, done.loop_counter + 1, item);
            }
            Ok(_) => {}
            Err(message) => return incident(p, &body.record, body.key, -1, error_type::EXTRACT_VALUE_ERROR, message),
        }
    }
    if body.active_children == 0 {
        p.command(body.key, Intent::CompleteElement, RecordValue::ProcessInstance(body.record));
    }
}

/// The body completes (COMPLETING written): its output collection goes to its flow scope.
pub(crate) fn body_completing(p: P, element: &Element, key: i64, body: &ProcessInstanceRecord) {
    let Some(name) = element.multi_instance.as_ref().and_then(|mi| mi.output_collection.as_ref()) else { return };
    if let Some(collection) = p.view().variable(key, name) {
        variables::merge_propagate(p, body.flow_scope_key, &[(name.clone(), collection.value)]);
    }
}
