//! Multi-instance activities (every task and the embedded subprocess), as Zeebe runs them
//! (https://docs.camunda.io/docs/components/modeler/bpmn/multi-instance/; Zeebe's
//! `MultiInstanceActivityTest`, `ProcessInstanceBatchActivateProcessor`): a token entering the
//! activity activates its multi-instance body (`MULTI_INSTANCE_BODY`, the instance boundary
//! events belong to), which evaluates the input collection and activates one inner instance per
//! item, one after another (sequential) or all (parallel). Each inner instance has its item in
//! the input element variable and its position (from 1) in `loopCounter`, both local.
//!
//! A parallel body activates its inner instances through PROCESS_INSTANCE_BATCH ACTIVATE
//! commands: each activates at most what is left of the batch's
//! [`MI_ACTIVATIONS_PER_BATCH`](crate::limits::MI_ACTIVATIONS_PER_BATCH) and, while items are
//! left, asks for the next chunk with another ACTIVATE command handed back to this partition
//! after the batch is committed (a later batch); the last writes ACTIVATED (Zeebe's ACTIVATE
//! activates one inner instance and writes the next ACTIVATE, its batches bounded by their size
//! in bytes; Waggle's activates a chunk, `index` still the count left). State keeps which
//! bodies are still activating (`MB/`), so a partition that restarts or changes leader sends
//! their next command again ([`crate::pending_commands`]); a command for a body that completed,
//! terminated or advanced meanwhile only goes on from where the body is.
//!
//! An activity kind becomes multi-instance by `ElementKind::supports_multi_instance` (the
//! parser reads its loop characteristics): its inner instance is an instance of the kind, run by
//! the kind's own behaviour (a call activity's inner instance calls its process), except that
//! its boundary events are the body's.
//!
//! When an inner instance completes, the output element goes into the output collection (a
//! local variable of the body, a list of nulls at first, propagated when the body completes) and
//! the completion condition, if any, is evaluated with `numberOfInstances` (inner instances
//! activated so far), `numberOfActiveInstances`, `numberOfCompletedInstances` (counting this
//! one) and `numberOfTerminatedInstances`: when it holds, the other inner instances terminate
//! and the body completes; otherwise the body completes with its last inner instance.

use serde_json::Value as Json;
use waggle_bpmn::{Element, MultiInstance, Process};
use waggle_feel::Value;
use waggle_protocol::value::{ProcessInstanceBatchRecord, ProcessInstanceRecord};
use waggle_protocol::{Intent, Record, RecordValue, RejectionType};

use crate::batch::Command;
use crate::behaviors::expressions::type_error;
use crate::behaviors::flows::child_record;
use crate::behaviors::incidents::{error_type, incident};
use crate::behaviors::waits;
use crate::elements::behavior::{Activation, ElementBehavior, Transitions};
use crate::json_doc::json_text;
use crate::limits::{MAX_INPUT_COLLECTION_ITEMS, MAX_REWRITTEN_OUTPUT_COLLECTION, MI_ACTIVATIONS_PER_BATCH, MI_TERMINATIONS_PER_BATCH};
use crate::processing::P;
use crate::tables::{ElementInstance, ElementState, MultiInstanceBody as Counters};
use crate::variables::{self, evaluate, Vars};

/// The multi-instance body of an activity.
pub(crate) struct MultiInstanceBody;

impl ElementBehavior for MultiInstanceBody {
    /// The input collection evaluated (not a list: an incident), the output collection
    /// initialised, the boundary events' waits opened, ACTIVATED, then the first inner instance
    /// (sequential) or the first PROCESS_INSTANCE_BATCH ACTIVATE (parallel), or completion at
    /// once for an empty collection.
    fn on_activate(&self, p: P, a: Activation<'_>, _t: Transitions) {
        let Activation { model, idx, key, record: body, waits, .. } = a;
        let element = &model.elements[idx];
        let Some(mi) = &element.multi_instance else { return };
        let items = match input_list(p, key, mi) {
            Ok(items) => items,
            Err(message) => return incident(p, &body, key, -1, error_type::EXTRACT_VALUE_ERROR, message),
        };
        if let Some(name) = &mi.output_collection {
            variables::set_local_text(p, key, name, nulls(items.len()));
        }
        waits::open(p, &body, key, waits);
        p.event(key, Intent::ElementActivated, RecordValue::ProcessInstance(body.clone()));
        if items.is_empty() {
            return p.command(key, Intent::CompleteElement, RecordValue::ProcessInstance(body));
        }
        if mi.sequential {
            return activate_inner(p, element, &body, key, 1, json_text(&items[0].to_json()));
        }
        let batch = batch_record(&body, key, items.len());
        let batch_key = p.new_key();
        p.command(batch_key, Intent::Activate, RecordValue::ProcessInstanceBatch(batch));
    }
}

/// `n` nulls as a JSON list's text.
fn nulls(n: usize) -> String {
    let mut text = String::with_capacity(2 + n * 5);
    text.push('[');
    for i in 0..n {
        text.push_str(if i == 0 { "null" } else { ",null" });
    }
    text.push(']');
    text
}

fn batch_record(body: &ProcessInstanceRecord, body_key: i64, remaining: usize) -> ProcessInstanceBatchRecord {
    ProcessInstanceBatchRecord {
        process_instance_key: body.process_instance_key,
        batch_element_instance_key: body_key,
        index: remaining as i64,
        tenant_id: body.tenant_id.clone(),
    }
}

/// Whether a PROCESS_INSTANCE_BATCH ACTIVATE (TERMINATE) from outside must wait for a later
/// batch: this batch activated (terminated) its share of inner instances already. It is handed
/// back unwritten.
pub(crate) fn defer_if_full(p: P, command: &Command) -> bool {
    let full = matches!(command.value, RecordValue::ProcessInstanceBatch(_))
        && match command.intent {
            Intent::Activate => p.mi_activations >= MI_ACTIVATIONS_PER_BATCH,
            Intent::Terminate => p.mi_terminations >= MI_TERMINATIONS_PER_BATCH,
            _ => false,
        };
    if full {
        let own = p.partition;
        p.deliver(own, command.clone());
    }
    full
}

/// PROCESS_INSTANCE_BATCH ACTIVATE: the next chunk of a parallel body's inner instances (from
/// the body's count of those activated so far), then the next ACTIVATE for a later batch while
/// items are left, else ACTIVATED. A body no longer active or activating: rejected (NOT_FOUND,
/// as Zeebe rejects a batch whose parent is gone).
pub(crate) fn activate_batch(p: P, command: &Record) {
    let RecordValue::ProcessInstanceBatch(batch) = &command.value else { return };
    let body_key = batch.batch_element_instance_key;
    let view = p.view();
    let body = view.element(body_key).filter(|b| b.state == ElementState::Activated);
    let counters = view.mi_body(body_key).filter(|c| c.activating);
    let (Some(body), Some(counters)) = (body, counters) else {
        let reason = format!(
            "Expected to activate the inner instances of multi-instance body '{body_key}', but it is not active or has activated them all"
        );
        return p.reject(command, None, RejectionType::NotFound, reason);
    };
    if p.view().element_incident(body_key).is_some() {
        // its collection failed to evaluate: resolving the incident asks for the chunk again
        let reason = format!("Expected to activate the inner instances of multi-instance body '{body_key}', but it has an incident");
        return p.reject(command, None, RejectionType::InvalidState, reason);
    }
    let model = p.process_model(body.record.process_definition_key);
    let Some(idx) = model.element(&body.record.element_id) else { return };
    let element = &model.elements[idx];
    let Some(mi) = &element.multi_instance else { return };
    let items = match input_list(p, body_key, mi) {
        Ok(items) => items,
        Err(message) => return incident(p, &body.record, body_key, -1, error_type::EXTRACT_VALUE_ERROR, message),
    };
    let start = (counters.activated as usize).min(items.len());
    let room = MI_ACTIVATIONS_PER_BATCH.saturating_sub(p.mi_activations).max(1);
    let end = items.len().min(start + room);
    for (i, item) in items[start..end].iter().enumerate() {
        activate_inner(p, element, &body.record, body_key, start + i + 1, json_text(&item.to_json()));
    }
    p.mi_activations += end - start;
    if end < items.len() {
        let next = Command::new(
            p.new_key(),
            Intent::Activate,
            RecordValue::ProcessInstanceBatch(batch_record(&body.record, body_key, items.len() - end)),
        );
        let own = p.partition;
        p.deliver(own, next);
    } else {
        p.event(command.key, Intent::Activated, command.value.clone());
        if start == end && body.active_children == 0 {
            // the collection shrank meanwhile: no inner instance left to complete the body
            p.command(body_key, Intent::CompleteElement, RecordValue::ProcessInstance(body.record));
        }
    }
}

/// The next PROCESS_INSTANCE_BATCH ACTIVATE of every body still activating its inner instances,
/// and TERMINATE of every body terminating them over several batches, of every terminating
/// scope with children not terminating yet (a bounded termination left them for a later batch;
/// `TS/`) and of every active scope terminating its children (PROCESS_INSTANCE_BATCH
/// TERMINATING), after a restart or a change of leader: what was handed back before is lost.
pub(crate) fn pending_batches(view: crate::tables::StateView<'_>) -> Vec<Command> {
    let activating = view.activating_mi_bodies().into_iter().filter_map(|body_key| {
        let body = view.element(body_key)?;
        let batch = batch_record(&body.record, body_key, 0);
        Some(Command::new(body_key, Intent::Activate, RecordValue::ProcessInstanceBatch(batch)))
    });
    let mut seen = std::collections::HashSet::new();
    let bodies = view.mi_bodies().into_iter().filter(|&key| view.element(key).is_some_and(|b| b.state == ElementState::Terminating));
    // an active scope in `TS/` goes on only after its last chunk: asked for even when no child is
    // left to terminate
    let scopes = view.terminating_scopes().into_iter().filter(|&key| {
        view.element(key).is_some_and(|s| match s.state {
            ElementState::Terminating => !view.first_children_not_terminating(key, 1).is_empty(),
            ElementState::Activated => true,
            _ => false,
        })
    });
    let terminating = bodies.chain(scopes).filter(move |&key| seen.insert(key)).filter_map(|key| {
        let scope = view.element(key)?;
        let batch = ProcessInstanceBatchRecord { index: -1, ..batch_record(&scope.record, key, 0) };
        Some(Command::new(key, Intent::Terminate, RecordValue::ProcessInstanceBatch(batch)))
    });
    activating.chain(terminating).collect()
}

/// Hands a PROCESS_INSTANCE_BATCH TERMINATE for body `body_key` back to this partition, for a
/// later batch; `index`: the key of the next inner instance to terminate (as Zeebe's record has
/// it; the command takes the oldest left).
pub(crate) fn request_termination_batch(p: P, body: &ProcessInstanceRecord, body_key: i64, next: i64) {
    let mut batch = batch_record(body, body_key, 0);
    batch.index = next;
    let command = Command::new(p.new_key(), Intent::Terminate, RecordValue::ProcessInstanceBatch(batch));
    let own = p.partition;
    p.deliver(own, command);
}

/// Active scope `scope` (its record `record`) terminates its children over later batches, from
/// `next` on: PROCESS_INSTANCE_BATCH TERMINATING (Waggle's own event: its applier indexes the
/// scope in `TS/` until the last chunk's TERMINATED, so a restart asks again), then the
/// TERMINATE for a later batch (see [`request_termination_batch`]).
pub(crate) fn request_children_termination(p: P, record: &ProcessInstanceRecord, scope: i64, next: i64) {
    let mut batch = batch_record(record, scope, 0);
    batch.index = next;
    let key = p.new_key();
    p.event(key, Intent::Terminating, RecordValue::ProcessInstanceBatch(batch));
    request_termination_batch(p, record, scope, next);
}

/// After an incident on a parallel body is resolved (its collection failed to evaluate when a
/// chunk was due): the next PROCESS_INSTANCE_BATCH ACTIVATE.
pub(crate) fn resume_after_incident(p: P, body: &ElementInstance) {
    if p.view().mi_body(body.key).is_some_and(|c| c.activating) {
        let batch = batch_record(&body.record, body.key, 0);
        let key = p.new_key();
        p.command(key, Intent::Activate, RecordValue::ProcessInstanceBatch(batch));
    }
}

/// The input collection's items, evaluated in `scope`.
fn input_list(p: P, scope: i64, mi: &MultiInstance) -> Result<Vec<Value>, String> {
    match evaluate(p, scope, &mi.input_collection)? {
        Value::List(items) if items.len() > MAX_INPUT_COLLECTION_ITEMS => Err(format!(
            "Expected the input collection '{}' to have at most {MAX_INPUT_COLLECTION_ITEMS} items, but it has {} (the limit on a multi-instance body's items)",
            mi.input_collection.source(),
            items.len()
        )),
        Value::List(items) => Ok(items),
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

/// An inner instance activates (ACTIVATING written): its input element, the variable an output
/// element that is just a variable (or a path into one) reads, as `null` (so that a worker's or
/// an inner flow's result lands in the inner instance, not in the process; not for the input
/// element or `loopCounter`), and `loopCounter`, all local, in that order (as Zeebe's
/// `MultiInstanceBodyProcessor` sets them).
pub(crate) fn inner_activating(p: P, element: &Element, key: i64) {
    let (Some(mi), Some((loop_counter, item))) = (&element.multi_instance, p.take_loop_item(key)) else { return };
    if let Some(name) = &mi.input_element {
        variables::set_local_text(p, key, name, item);
    }
    let output = mi.output_element.as_ref().and_then(|e| e.variable_name());
    if let Some(name) = output.filter(|n| Some(*n) != mi.input_element.as_deref() && *n != "loopCounter") {
        variables::set_local_text(p, key, name, "null".to_string());
    }
    variables::set_local_text(p, key, "loopCounter", loop_counter.to_string());
}

/// What an inner instance's completion decided, before its COMPLETED.
pub(crate) struct InnerCompletion {
    loop_counter: usize,
    /// The completion condition held: the body completes now.
    satisfied: bool,
    /// A sequential body's next item (JSON text), if any is left.
    next_item: Option<String>,
}

/// An inner instance completes (COMPLETING written, output mappings applied): its output
/// element goes into the body's output collection, and the completion condition is evaluated.
/// An error message for an incident.
///
/// The output collection is rewritten as a whole (as Zeebe does) while it has at most
/// [`MAX_REWRITTEN_OUTPUT_COLLECTION`] items; a longer one is written once, when the body
/// completes, from the output elements kept apart: the element is set as a local variable of
/// the inner instance (named as the collection), which its COMPLETED's applier keeps in `MO/`.
pub(crate) fn inner_completing(p: P, element: &Element, key: i64, inner: &ProcessInstanceRecord) -> Result<InnerCompletion, String> {
    let Some(mi) = &element.multi_instance else { return Ok(InnerCompletion { loop_counter: 0, satisfied: false, next_item: None }) };
    let body_key = inner.flow_scope_key;
    let counters = p.view().mi_body(body_key).unwrap_or_default();
    let loop_counter = p.view().variable(key, "loopCounter").and_then(|v| v.value.parse::<usize>().ok()).unwrap_or(0);
    if let (Some(name), Some(output)) = (&mi.output_collection, &mi.output_element) {
        let value = evaluate(p, key, output)?.to_json();
        if counters.outputs > MAX_REWRITTEN_OUTPUT_COLLECTION {
            variables::set_local_text(p, key, name, json_text(&value));
        } else {
            let mut collection = output_collection(p, body_key, name, loop_counter)?;
            collection[loop_counter - 1] = value;
            variables::set_local_text(p, body_key, name, json_text(&Json::Array(collection)));
        }
    }
    let satisfied = match &mi.completion_condition {
        None => false,
        Some(condition) => {
            let active = p.view().element(body_key).map_or(0, |b| b.active_children).saturating_sub(1);
            let numbers = completion_variables(&counters, active);
            match evaluate(p, Vars::ScopeWith(key, &numbers), condition)? {
                Value::Bool(satisfied) => satisfied,
                other => return Err(type_error(condition, "BOOLEAN", &other)),
            }
        }
    };
    // a sequential body's next item, read now: a collection that no longer evaluates to a list
    // is an incident on this inner instance, as on Zeebe (a parallel body does not read it
    // again at each completion, which would be quadratic)
    let next_item = match mi.sequential {
        true => input_list(p, body_key, mi)?.get(loop_counter).map(|item| json_text(&item.to_json())),
        false => None,
    };
    Ok(InnerCompletion { loop_counter, satisfied, next_item })
}

/// The body's output collection `name`, which must be a list with a place for `loop_counter`
/// (another element may have written the variable): else an error with Zeebe's message
/// (`MultiInstanceOutputCollectionBehavior`).
fn output_collection(p: P, body_key: i64, name: &str, loop_counter: usize) -> Result<Vec<Json>, String> {
    let Some(current) = p.view().variable(body_key, name) else {
        return Err(format!("Expected the output collection variable '{name}' to be of type list, but it was NIL"));
    };
    let items = match serde_json::from_str::<Json>(&current.value).unwrap_or(Json::Null) {
        Json::Array(items) => items,
        other => {
            let kind = match other {
                Json::Null => "NIL",
                Json::Bool(_) => "BOOLEAN",
                Json::Number(n) if n.is_i64() || n.is_u64() => "INTEGER",
                Json::Number(_) => "FLOAT",
                Json::String(_) => "STRING",
                _ => "MAP",
            };
            return Err(format!(
                "Unable to update an item in output collection '{name}' because the type of the output collection is: {kind}. This may happen when multiple BPMN elements write to the same variable."
            ));
        }
    };
    if loop_counter == 0 || loop_counter > items.len() {
        return Err(format!(
            "Unable to update an item in output collection '{name}' at position {loop_counter} because the size of the collection is: {}. This may happen when multiple BPMN elements write to the same variable.",
            items.len()
        ));
    }
    Ok(items)
}

/// The variables a completion condition sees when an inner instance completes (it counts as
/// completed, no longer active): the BPMN specification's multi-instance attributes, as Zeebe
/// names them.
fn completion_variables(counters: &Counters, active: u32) -> [(String, String); 4] {
    [
        ("numberOfInstances".to_string(), counters.activated.to_string()),
        ("numberOfActiveInstances".to_string(), active.to_string()),
        ("numberOfCompletedInstances".to_string(), (counters.completed + 1).to_string()),
        ("numberOfTerminatedInstances".to_string(), counters.terminated.to_string()),
    ]
}

/// After an inner instance's COMPLETED: the body completes when the completion condition held
/// (the other inner instances terminated first) or no inner instance is left (and none is still
/// to be activated); a sequential body activates the next one.
pub(crate) fn inner_completed(p: P, model: &Process, idx: usize, inner: &ProcessInstanceRecord, done: InnerCompletion, t: Transitions) {
    let element = &model.elements[idx];
    let Some(mi) = &element.multi_instance else { return };
    let Some(body) = p.view().element(inner.flow_scope_key).filter(|b| b.state == ElementState::Activated) else { return };
    if done.satisfied {
        if p.view().terminates_children(body.key) {
            return; // the condition held before: the chunks under way end the body
        }
        // no more inner instances are activated
        if p.view().mi_body(body.key).is_some_and(|c| c.activating) {
            let key = p.new_key();
            p.event(key, Intent::Activated, RecordValue::ProcessInstanceBatch(batch_record(&body.record, body.key, 0)));
        }
        // the others terminate, over later batches when there are too many (the body completes
        // after the last chunk: `lifecycle::terminate_batch`) or when one holds a wide body of
        // its own (the body completes after it: `lifecycle::finish_terminating`)
        if t.terminate_children(p, body.key) {
            return;
        }
        if p.view().element_with(body.key, |b| b.active_children == 0) == Some(true) {
            p.command(body.key, Intent::CompleteElement, RecordValue::ProcessInstance(body.record));
        }
        return;
    }
    if let Some(item) = done.next_item.filter(|_| mi.sequential) {
        return activate_inner(p, element, &body.record, body.key, done.loop_counter + 1, item);
    }
    let activating = p.view().mi_body(body.key).is_some_and(|c| c.activating);
    // while the others terminate (the condition held), the last chunk completes the body
    if body.active_children == 0 && !activating && !p.view().terminates_children(body.key) {
        p.command(body.key, Intent::CompleteElement, RecordValue::ProcessInstance(body.record));
    }
}

/// The body completes (COMPLETING written): its output collection, with the output elements
/// kept apart put in place, goes to its flow scope.
pub(crate) fn body_completing(p: P, element: &Element, key: i64, body: &ProcessInstanceRecord) {
    let Some(name) = element.multi_instance.as_ref().and_then(|mi| mi.output_collection.as_ref()) else { return };
    let Some(collection) = p.view().variable(key, name) else { return };
    let kept = p.view().mi_outputs(key);
    let text = if kept.is_empty() {
        collection.value
    } else {
        let mut items: Vec<Json> = serde_json::from_str(&collection.value).unwrap_or_default();
        for (loop_counter, output) in kept {
            if let Some(slot) = (loop_counter as usize).checked_sub(1).and_then(|i| items.get_mut(i)) {
                *slot = serde_json::from_str(&output).unwrap_or(Json::Null);
            }
        }
        json_text(&Json::Array(items))
    };
    variables::merge_propagate(p, body.flow_scope_key, &[(name.clone(), text)]);
}
