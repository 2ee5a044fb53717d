//! PROCESS_INSTANCE_MODIFICATION MODIFY (the ModifyProcessInstance RPC), as Zeebe 8.5 runs it
//! (https://docs.camunda.io/docs/components/concepts/process-instance-modification/, and its
//! engine's `ModifyProcessInstanceRejectionTest` for the rejections): activate elements inside
//! an instance of one of their flow scopes (existing, or created on the way), with variables
//! local to the scopes and elements activated; terminate element instances, and with them each
//! flow scope left with nothing active that no activation needs.
//!
//! Everything is validated before anything is written: a modification is done whole or
//! rejected.
//!
//! Terminations are spread over batches as a cancellation's are (`elements::terminate_in_batches`:
//! at most `MI_TERMINATIONS_PER_BATCH` element instances a batch, a wide multi-instance body a
//! chunk a batch); an emptied flow scope starts terminating at once and ends after what it
//! waits for. Zeebe 8.5 ends them in the modification's own batch, so an instance still
//! terminating here is one Zeebe no longer has: a later modification sees it (and everything
//! in it) as gone — a terminate instruction or an ancestor naming it is refused as not found,
//! an activation does not choose it as flow scope, and a process instance being cancelled is
//! not found.

use std::collections::HashSet;

use waggle_bpmn::Process;
use waggle_protocol::value::{ActivateInstruction, ProcessInstanceModificationRecord, ProcessInstanceRecord};
use waggle_protocol::{Intent, Record, RecordValue, RejectionType};

use crate::batch::RequestId;
use crate::behaviors::flows::{child_record, is_multi_instance_body};
use crate::behaviors::waits;
use crate::elements;
use crate::processing::P;
use crate::tables::{ElementInstance, ElementState};
use crate::variables::{self, Vars};

/// Element types no activate instruction may target (Zeebe's list).
const UNSUPPORTED_TYPES: [&str; 3] = ["START_EVENT", "SEQUENCE_FLOW", "BOUNDARY_EVENT"];

/// The element types an activate instruction may target, as Zeebe lists them.
const SUPPORTED_TYPES: &str = "[PROCESS, SUB_PROCESS, EVENT_SUB_PROCESS, INTERMEDIATE_CATCH_EVENT, INTERMEDIATE_THROW_EVENT, END_EVENT, SERVICE_TASK, RECEIVE_TASK, USER_TASK, MANUAL_TASK, TASK, EXCLUSIVE_GATEWAY, PARALLEL_GATEWAY, EVENT_BASED_GATEWAY, INCLUSIVE_GATEWAY, MULTI_INSTANCE_BODY, CALL_ACTIVITY, BUSINESS_RULE_TASK, SCRIPT_TASK, SEND_TASK]";

/// How one activate instruction is carried out: the existing instance it activates inside
/// (`ancestor`), the flow scopes to create between it and the element (outermost first).
struct Plan {
    element: usize,
    ancestor: ElementInstance,
    create: Vec<usize>,
}

/// A refusal: INVALID_ARGUMENT with this reason.
type Refusal = String;

pub(crate) fn modify(p: P, command: &Record, request: Option<RequestId>) {
    let RecordValue::ProcessInstanceModification(modification) = &command.value else { return };
    let event_key = if command.key > 0 { command.key } else { modification.process_instance_key };
    let instance = p
        .view()
        .element(modification.process_instance_key)
        .filter(|e| e.record.flow_scope_key < 0 && !being_terminated(p, e.key) && p.may_access(&e.record.tenant_id));
    let Some(instance) = instance else {
        let reason = format!("Expected to modify process instance but no process instance found with key '{event_key}'");
        return p.reject(command, request, RejectionType::NotFound, reason);
    };
    let model = p.process_model(instance.record.process_definition_key);
    let plans = match validate(p, &model, &instance, modification) {
        Ok(plans) => plans,
        Err(reason) => return p.reject(command, request, RejectionType::InvalidArgument, reason),
    };
    let mut extended = ProcessInstanceModificationRecord { process_instance_key: modification.process_instance_key, ..Default::default() };
    let mut required: HashSet<i64> = HashSet::new();
    for (instruction, plan) in modification.activate_instructions.iter().zip(&plans) {
        let scope_keys = activate(p, &model, &instance, instruction, plan);
        required.extend(scope_keys.iter().copied());
        extended.activate_instructions.push(ActivateInstruction { ancestor_scope_keys: scope_keys, ..instruction.clone() });
    }
    for &key in &modification.terminate_instructions {
        extended.terminate_instructions.push(key);
        let Some(target) = p.view().element(key).filter(|e| terminable(e.state)) else { continue };
        elements::terminate_in_batches(p, key);
        terminate_emptied_scopes(p, target.record.flow_scope_key, &required);
    }
    let event = p.event_record(event_key, Intent::Modified, RecordValue::ProcessInstanceModification(extended));
    p.respond(request, event);
}

/// Zeebe's checks, in its order; then the plan of each activation (which may still refuse: a
/// flow scope with several instances, a multi-instance on the way, a flow scope that cannot
/// subscribe to its events), then whether the terminations would end a called instance.
fn validate(p: P, model: &Process, instance: &ElementInstance, m: &ProcessInstanceModificationRecord) -> Result<Vec<Plan>, Refusal> {
    let process_id = model.id.as_str();
    let refuse = |what: &str| format!("Expected to modify instance of process '{process_id}' but it contains one or more {what}");
    for v in m.activate_instructions.iter().flat_map(|i| i.variable_instructions.iter()) {
        if let Err(e) = p.client_document(&v.variables) {
            return Err(format!(
                "Expected to modify instance of process '{process_id}' but the variables of a variable instruction are invalid: {e}"
            ));
        }
    }
    let unknown: Vec<&str> = distinct(m.activate_instructions.iter().map(|i| i.element_id.as_str()))
        .into_iter()
        .filter(|id| model.element(id).is_none())
        .collect();
    if !unknown.is_empty() {
        return Err(refuse(&format!("activate instructions with an element that could not be found: '{}'", unknown.join("', '"))));
    }
    let targets: Vec<usize> = m.activate_instructions.iter().filter_map(|i| model.element(&i.element_id)).collect();
    let behind_gateway: Vec<&str> =
        distinct(targets.iter().filter(|&&t| waits::after_event_gateway(model, t)).map(|&t| model.elements[t].id.as_str()));
    if !behind_gateway.is_empty() {
        return Err(refuse(&format!(
            "activate instructions for elements that are unsupported: '{}'. The activation of events belonging to an event-based gateway is not supported.",
            behind_gateway.join("', '")
        )));
    }
    let unsupported: Vec<usize> =
        targets.iter().copied().filter(|&t| UNSUPPORTED_TYPES.contains(&model.elements[t].kind.bpmn_element_type())).collect();
    if !unsupported.is_empty() {
        let ids = distinct(unsupported.iter().map(|&t| model.elements[t].id.as_str()));
        let types = distinct(unsupported.iter().map(|&t| model.elements[t].kind.bpmn_element_type()));
        return Err(refuse(&format!(
            "activate instructions for elements that are unsupported: '{}'. The activation of elements with type '{}' is not supported. Supported element types are: {SUPPORTED_TYPES}.",
            ids.join("', '"),
            types.join("', '")
        )));
    }
    let missing: Vec<String> = distinct(m.terminate_instructions.iter().copied())
        .into_iter()
        .filter(|&key| p.view().element(key).is_none() || being_terminated(p, key))
        .map(|key| key.to_string())
        .collect();
    if !missing.is_empty() {
        return Err(refuse(&format!(
            "terminate instructions with an element instance that could not be found: '{}'",
            missing.join("', '")
        )));
    }
    let scope_ids = distinct(m.activate_instructions.iter().flat_map(|i| i.variable_instructions.iter()).map(|v| v.element_id.as_str()));
    let unknown_scopes: Vec<&str> =
        scope_ids.into_iter().filter(|id| !id.is_empty() && model.element(id).is_none() && *id != process_id).collect();
    if !unknown_scopes.is_empty() {
        return Err(refuse(&format!(
            "variable instructions with a scope element id that could not be found: '{}'",
            unknown_scopes.join("', '")
        )));
    }
    for (instruction, &target) in m.activate_instructions.iter().zip(&targets) {
        for v in &instruction.variable_instructions {
            if !(v.element_id.is_empty() || v.element_id == instruction.element_id || is_flow_scope_of(model, target, &v.element_id)) {
                return Err(refuse("variable instructions with a scope element that doesn't belong to the activating element's flow scope. These variables should be set before or after the modification."));
            }
        }
    }
    check_ancestors(p, model, instance, m, &targets).map_err(|what| refuse(&what))?;
    let mut plans = Vec::new();
    for (instruction, &target) in m.activate_instructions.iter().zip(&targets) {
        plans.push(plan(p, model, instance, instruction.ancestor_scope_key, target).map_err(|what| refuse(&what))?);
    }
    for plan in &plans {
        for &scope in &plan.create {
            if let Err(message) = elements::waits_of(p, model, scope, Vars::Scope(plan.ancestor.key)) {
                return Err(format!("Expected to subscribe to catch event(s) of '{}' but {message}", model.elements[scope].id));
            }
        }
    }
    if instance.record.parent_process_instance_key > 0 {
        let required: HashSet<i64> = plans.iter().flat_map(|plan| ancestry(p, plan.ancestor.key)).collect();
        if would_end_instance(p, instance.key, &m.terminate_instructions, &required) {
            return Err(format!(
                "Expected to modify instance of process '{process_id}' but the given instructions would terminate the instance. The instance was created by a call activity in the parent process. To terminate this instance please modify the parent process instead."
            ));
        }
    }
    Ok(plans)
}

/// The checks of the ancestors activate instructions name: active, of this process instance,
/// an instance of one of the element's flow scopes, and no flow scope that is terminated too.
fn check_ancestors(
    p: P,
    model: &Process,
    instance: &ElementInstance,
    m: &ProcessInstanceModificationRecord,
    targets: &[usize],
) -> Result<(), String> {
    let named = distinct(m.activate_instructions.iter().map(|i| i.ancestor_scope_key).filter(|k| *k > 0));
    let inactive: Vec<String> = named
        .iter()
        .filter(|&&k| p.view().element(k).is_none_or(|e| e.state != ElementState::Activated) || being_terminated(p, k))
        .map(|k| k.to_string())
        .collect();
    if !inactive.is_empty() {
        return Err(format!(
            "activate instructions with an ancestor scope key that does not exist, or is not in an active state: '{}'",
            inactive.join("', '")
        ));
    }
    let foreign: Vec<String> = named
        .iter()
        .filter(|&&k| p.view().element(k).is_some_and(|e| e.record.process_instance_key != instance.key))
        .map(|k| k.to_string())
        .collect();
    if !foreign.is_empty() {
        return Err(format!(
            "activate instructions with an ancestor scope key that does not belong to the modified process instance: '{}'",
            foreign.join("', '")
        ));
    }
    let mut not_ancestors = String::new();
    for (instruction, &target) in m.activate_instructions.iter().zip(targets) {
        if instruction.ancestor_scope_key <= 0 {
            continue;
        }
        let Some(ancestor) = p.view().element(instruction.ancestor_scope_key) else { continue };
        if !is_flow_scope_of(model, target, &ancestor.record.element_id) {
            not_ancestors.push_str(&format!(
                "\n- instance '{}' of element '{}' is not an ancestor of element '{}'",
                ancestor.key, ancestor.record.element_id, instruction.element_id
            ));
        }
    }
    if !not_ancestors.is_empty() {
        return Err(format!(
            "activate instructions with an ancestor scope key that is not an ancestor of the element to activate:{not_ancestors}"
        ));
    }
    let mut conflicts = Vec::new();
    for &terminated in &distinct(m.terminate_instructions.iter().copied()) {
        let Some(t) = p.view().element(terminated) else { continue };
        for (instruction, &target) in m.activate_instructions.iter().zip(targets) {
            let conflict = if instruction.ancestor_scope_key > 0 {
                instruction.ancestor_scope_key == terminated
            } else {
                is_flow_scope_of(model, target, &t.record.element_id)
            };
            if conflict {
                conflicts.push(format!(
                    "element '{}' requires flow scope instance '{terminated}' which is being terminated",
                    instruction.element_id
                ));
            }
        }
    }
    if !conflicts.is_empty() {
        return Err(format!(
            "activate instructions for elements whose required flow scope instance is also being terminated: {}. Please provide a valid ancestor scope key for the activation or avoid terminating the required flow scope.",
            conflicts.join(", ")
        ));
    }
    Ok(())
}

/// Where `target` is activated: inside the named ancestor, or else inside the one active
/// instance of its nearest flow scope that has one (the process instance at the latest).
fn plan(p: P, model: &Process, instance: &ElementInstance, ancestor_key: i64, target: usize) -> Result<Plan, String> {
    let scopes = flow_scopes(model, target); // innermost first
    let (ancestor, depth) = if ancestor_key > 0 {
        let ancestor = p.view().element(ancestor_key).expect("checked");
        let depth = match model.element(&ancestor.record.element_id) {
            Some(idx) => scopes.iter().position(|&s| s == idx).expect("checked: a flow scope"),
            None => scopes.len(), // the process instance
        };
        (ancestor, depth)
    } else {
        let mut found = None;
        for (depth, &scope) in scopes.iter().enumerate() {
            let active: Vec<ElementInstance> = instances_of(p, instance.key, &model.elements[scope].id)
                .into_iter()
                .filter(|e| !is_multi_instance_body(&e.record) && e.state == ElementState::Activated)
                .collect();
            match active.len() {
                0 => continue,
                1 => {
                    found = Some((active.into_iter().next().expect("one"), depth));
                    break;
                }
                _ => {
                    return Err(format!(
                        "activate instructions for an element that has a flow scope with more than one active instance: '{}'. Can't decide in which instance of the flow scope the element should be activated. Please specify an ancestor element instance key for this activate instruction.",
                        model.elements[scope].id
                    ))
                }
            }
        }
        found.unwrap_or_else(|| (instance.clone(), scopes.len()))
    };
    let multi_instance = |idx: usize| {
        format!(
            "activate instructions that would result in the activation of multi-instance element '{}', which is currently unsupported.",
            model.elements[idx].id
        )
    };
    if is_multi_instance_body(&ancestor.record) {
        let idx = model.element(&ancestor.record.element_id).expect("a body's element");
        return Err(multi_instance(idx));
    }
    let create: Vec<usize> = scopes[..depth].iter().rev().copied().collect();
    if let Some(&mi) = create.iter().find(|&&s| model.elements[s].multi_instance.is_some()) {
        return Err(multi_instance(mi));
    }
    Ok(Plan { element: target, ancestor, create })
}

/// Carries out one activation: variables set (now on existing scopes; on scopes and the
/// element to create when they are activated), then ACTIVATE_ELEMENT for the outermost
/// element to create. Returns the keys of the existing flow scope instances it uses.
fn activate(p: P, model: &Process, instance: &ElementInstance, instruction: &ActivateInstruction, plan: &Plan) -> Vec<i64> {
    let existing = ancestry(p, plan.ancestor.key);
    for v in &instruction.variable_instructions {
        let Ok(doc) = p.client_document(&v.variables) else { continue };
        let scope_id = if v.element_id.is_empty() { model.id.as_str() } else { v.element_id.as_str() };
        let existing_scope =
            existing.iter().copied().find(|&k| p.view().element(k).is_some_and(|e| e.record.element_id.as_str() == scope_id));
        match existing_scope {
            Some(key) => variables::merge_local(p, key, &doc),
            None => p.add_modification_locals(instance.key, scope_id, doc),
        }
    }
    let first = plan.create.first().copied().unwrap_or(plan.element);
    let element = &model.elements[first];
    let record: ProcessInstanceRecord = child_record(&plan.ancestor.record, plan.ancestor.key, &element.id, element.entered_type());
    let key = p.new_key();
    if !plan.create.is_empty() {
        p.set_start_elements(key, vec![plan.element]);
    }
    p.command(key, Intent::ActivateElement, RecordValue::ProcessInstance(record));
    existing
}

/// After a termination: the flow scope `scope`, and each one above it, is terminated too when
/// nothing is active in it any more (its children, if any, are all terminating: over later
/// batches), no token is on its way in it, and no activation needs it. A scope whose children
/// still terminate starts terminating now and ends after them.
fn terminate_emptied_scopes(p: P, mut scope: i64, required: &HashSet<i64>) {
    while let Some(s) = p.view().element(scope) {
        if s.state != ElementState::Activated || s.active_flows > 0 || required.contains(&scope) {
            return;
        }
        if s.active_children > 0 {
            let children = p.view().children(scope);
            if children.iter().any(|&c| p.view().element(c).is_some_and(|c| c.state != ElementState::Terminating)) {
                return;
            }
        }
        elements::terminate_in_batches(p, scope);
        scope = s.record.flow_scope_key;
    }
}

/// Whether element instance `key`, or an instance it lies in (up through call activities), is
/// terminating: Zeebe 8.5 would have ended it with the modification, cancellation or
/// interruption that began it.
fn being_terminated(p: P, key: i64) -> bool {
    let mut next = p.view().element(key);
    while let Some(e) = next {
        if e.state == ElementState::Terminating {
            return true;
        }
        let up = elements::container_of(&e.record);
        next = if up > 0 { p.view().element(up) } else { None };
    }
    false
}

/// Whether terminating `terminated` would, with the emptied scopes above them, end the process
/// instance `root` (counted before anything is written).
fn would_end_instance(p: P, root: i64, terminated: &[i64], required: &HashSet<i64>) -> bool {
    let mut ended: HashSet<i64> = HashSet::new();
    let mut remaining: std::collections::HashMap<i64, i64> = std::collections::HashMap::new();
    for &key in terminated {
        if !ended.insert(key) {
            continue;
        }
        if key == root {
            return true;
        }
        let Some(mut e) = p.view().element(key) else { continue };
        loop {
            let scope_key = e.record.flow_scope_key;
            let Some(scope) = p.view().element(scope_key) else { break };
            let left = remaining.entry(scope_key).or_insert(scope.active_children as i64);
            *left -= 1;
            if *left > 0 || scope.active_flows > 0 || required.contains(&scope_key) || !ended.insert(scope_key) {
                break;
            }
            if scope_key == root {
                return true;
            }
            e = scope;
        }
    }
    false
}

fn terminable(state: ElementState) -> bool {
    !matches!(state, ElementState::Terminating | ElementState::Terminated | ElementState::Completed)
}

/// The flow scopes of `element` in the model, innermost first (the process itself not included).
fn flow_scopes(model: &Process, element: usize) -> Vec<usize> {
    let mut scopes = Vec::new();
    let mut scope = model.elements[element].scope;
    while let Some(idx) = scope {
        scopes.push(idx);
        scope = model.elements[idx].scope;
    }
    scopes
}

/// Whether `id` names a flow scope of `element` (or the process).
fn is_flow_scope_of(model: &Process, element: usize, id: &str) -> bool {
    id == model.id || flow_scopes(model, element).iter().any(|&s| model.elements[s].id == id)
}

/// Element instance `key` and the instances it lies in, up to its process instance.
fn ancestry(p: P, key: i64) -> Vec<i64> {
    let mut keys = Vec::new();
    let mut next = p.view().element(key);
    while let Some(e) = next {
        keys.push(e.key);
        next = if e.record.flow_scope_key > 0 { p.view().element(e.record.flow_scope_key) } else { None };
    }
    keys
}

/// The instances of element `id` inside process instance `root` (a walk over its tree).
fn instances_of(p: P, root: i64, id: &str) -> Vec<ElementInstance> {
    let mut found = Vec::new();
    let mut stack = vec![root];
    while let Some(key) = stack.pop() {
        for child in p.view().children(key) {
            if let Some(e) = p.view().element(child).filter(|e| e.state != ElementState::Terminating) {
                if e.record.element_id.as_str() == id {
                    found.push(e.clone());
                }
                stack.push(child);
            }
        }
    }
    found
}

/// The items in first-seen order, each once.
fn distinct<T: PartialEq>(items: impl Iterator<Item = T>) -> Vec<T> {
    let mut out: Vec<T> = Vec::new();
    for item in items {
        if !out.contains(&item) {
            out.push(item);
        }
    }
    out
}
