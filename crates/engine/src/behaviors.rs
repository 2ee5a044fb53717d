//! BPMN element behaviours: one lifecycle (activate → complete, or terminate) with a hook per
//! element kind. Failures that Zeebe raises as incidents become INCIDENT CREATED events and
//! leave the element where it stopped; resolving the incident resumes from there.

use std::sync::Arc;

use serde_json::{Map, Value as Json};
use waggle_bpmn::{ElementKind, ExprOrStatic, Process};
use waggle_feel::{Expression, Value};
use waggle_protocol::value::{IncidentRecord, JobBatchRecord, JobRecord, ProcessInstanceRecord, ProcessInstanceResultRecord};
use waggle_protocol::{Intent, Record, RecordType, RecordValue, SharedStr, ValueType};

use crate::events;
use crate::processing::{Processing, SideEffect};
use crate::tables::ElementState;
use crate::variables::{self, ScopeLookup};

/// Zeebe's incident error types used so far.
pub(crate) mod error_type {
    pub const JOB_NO_RETRIES: &str = "JOB_NO_RETRIES";
    pub const IO_MAPPING_ERROR: &str = "IO_MAPPING_ERROR";
    pub const EXTRACT_VALUE_ERROR: &str = "EXTRACT_VALUE_ERROR";
    pub const CONDITION_ERROR: &str = "CONDITION_ERROR";
    pub const UNHANDLED_ERROR_EVENT: &str = "UNHANDLED_ERROR_EVENT";
}

type P<'a, 'b, 'c, 'd> = &'a mut Processing<'b, 'c, 'd>;

fn element_idx(model: &Process, id: &str) -> Option<usize> {
    model.element(id)
}

/// ACTIVATE_ELEMENT: the element instance is born (ACTIVATING), then activation continues.
pub(crate) fn activate(p: P, command: &Record) {
    let RecordValue::ProcessInstance(pi) = &command.value else { return };
    if pi.flow_scope_key > 0 {
        // a token into a scope that was terminated, or taken over by an interrupting event
        // subprocess, meanwhile goes nowhere
        let Some(scope) = p.view().element(pi.flow_scope_key).filter(|s| s.state == ElementState::Activated) else { return };
        let model = p.process_model(pi.process_definition_key);
        if interrupted(p, &model, &scope) {
            return;
        }
        if let Some(idx) = model.element(&pi.element_id) {
            let e = &model.elements[idx];
            if matches!(e.kind, ElementKind::InclusiveGateway { .. })
                && e.incoming.len() > 1
                && !inclusive_join_ready(p, &model, pi.flow_scope_key, idx)
            {
                return; // more tokens may still arrive
            }
        }
    }
    p.event(command.key, Intent::ElementActivating, RecordValue::ProcessInstance(pi.clone()));
    continue_activation(p, command.key);
}

/// The part of activation that may stop at an incident (mappings, job properties).
pub(crate) fn continue_activation(p: P, key: i64) {
    let Some(instance) = p.view().element(key) else { return };
    let pi = instance.record.clone();
    let model = p.process_model(pi.process_definition_key);
    if pi.element_id == model.id {
        let waits = match events::event_subprocess_waits(p, &model, None, key) {
            Ok(waits) => waits,
            Err(message) => return incident(p, &pi, key, -1, error_type::EXTRACT_VALUE_ERROR, message),
        };
        events::open(p, &pi, key, waits);
        p.event(key, Intent::ElementActivated, RecordValue::ProcessInstance(pi.clone()));
        let starts = p.take_start_elements(key).unwrap_or_else(|| model.start.into_iter().collect());
        start_inside(p, &model, &pi, key, None, starts);
        return;
    }
    let Some(idx) = element_idx(&model, &pi.element_id) else { return };
    let element = &model.elements[idx];
    // a (sub)process activated only as the flow scope of start instructions' targets
    let instructed = p.take_start_elements(key);
    if !element.inputs.is_empty() && instructed.is_none() {
        match evaluate_mappings(p, key, &element.inputs) {
            Ok(doc) => variables::merge_local(p, key, &variables::texts_of(&doc)),
            Err(message) => return incident(p, &pi, key, -1, error_type::IO_MAPPING_ERROR, message),
        }
    }
    let waits = match events::waits_of(p, &model, idx, key) {
        Ok(waits) => waits,
        Err(message) => return incident(p, &pi, key, -1, error_type::EXTRACT_VALUE_ERROR, message),
    };
    match &element.kind {
        ElementKind::ServiceTask(def) | ElementKind::JobElement { def, .. } => {
            let lookup_scope = key;
            let job_type = match events::string_of(p, lookup_scope, &def.job_type) {
                Ok(t) => t,
                Err(message) => return incident(p, &pi, key, -1, error_type::EXTRACT_VALUE_ERROR, message),
            };
            let retries = match eval_number(p, lookup_scope, &def.retries) {
                Ok(r) => r,
                Err(message) => return incident(p, &pi, key, -1, error_type::EXTRACT_VALUE_ERROR, message),
            };
            let mut headers = Map::new();
            for (name, value) in &def.headers {
                let text = match value {
                    ExprOrStatic::Static(s) => s.clone(),
                    ExprOrStatic::Expression(e) => match evaluate(p, lookup_scope, e) {
                        Err(message) => return incident(p, &pi, key, -1, error_type::EXTRACT_VALUE_ERROR, message),
                        Ok(Value::String(s)) => s,
                        Ok(Value::Null) => continue,
                        // lists (candidate groups and users) and dates as Zeebe writes them
                        Ok(other) => match other.to_json() {
                            Json::String(s) => s,
                            json => json.to_string(),
                        },
                    },
                };
                headers.insert(name.clone(), Json::String(text));
            }
            let job = JobRecord {
                job_type: job_type.into(),
                retries,
                deadline_ms: -1,
                custom_headers: Json::Object(headers).to_string().into(),
                variables: "{}".into(),
                bpmn_process_id: pi.bpmn_process_id.clone(),
                process_definition_key: pi.process_definition_key,
                process_definition_version: pi.version,
                process_instance_key: pi.process_instance_key,
                element_id: pi.element_id.clone(),
                element_instance_key: key,
                tenant_id: pi.tenant_id.clone(),
                ..Default::default()
            };
            let job_key = p.new_key();
            p.event(job_key, Intent::Created, RecordValue::Job(job));
            events::open(p, &pi, key, waits);
            p.event(key, Intent::ElementActivated, RecordValue::ProcessInstance(pi));
            job_became_activatable(p, job_key);
        }
        ElementKind::IntermediateCatchEvent(_) if events::after_event_gateway(&model, idx) => {
            // the gateway already waited for this event: it happened
            p.event(key, Intent::ElementActivated, RecordValue::ProcessInstance(pi.clone()));
            p.command(key, Intent::CompleteElement, RecordValue::ProcessInstance(pi));
        }
        ElementKind::IntermediateCatchEvent(_) | ElementKind::ReceiveTask(_) | ElementKind::EventBasedGateway => {
            events::open(p, &pi, key, waits);
            p.event(key, Intent::ElementActivated, RecordValue::ProcessInstance(pi));
        }
        ElementKind::EscalationThrowEvent { code, .. } => {
            p.event(key, Intent::ElementActivated, RecordValue::ProcessInstance(pi.clone()));
            if let Some(found) = events::find_catch(p, &model, key, events::escalation_matcher(code)) {
                events::catch(p, &model, found, &[]);
            }
            // an uncaught or non-interrupting escalation lets the throw event go on
            if events::is_active(p, key) {
                p.command(key, Intent::CompleteElement, RecordValue::ProcessInstance(pi));
            }
        }
        ElementKind::SignalThrowEvent { name, .. } => {
            let name = match events::string_of(p, key, name) {
                Ok(name) => name,
                Err(message) => return incident(p, &pi, key, -1, error_type::EXTRACT_VALUE_ERROR, message),
            };
            p.event(key, Intent::ElementActivated, RecordValue::ProcessInstance(pi.clone()));
            crate::starts::broadcast_signal(p, &name, &pi.tenant_id);
            if events::is_active(p, key) {
                p.command(key, Intent::CompleteElement, RecordValue::ProcessInstance(pi));
            }
        }
        ElementKind::SubProcess { start } | ElementKind::EventSubProcess { start } => {
            events::open(p, &pi, key, waits);
            p.event(key, Intent::ElementActivated, RecordValue::ProcessInstance(pi.clone()));
            let starts = instructed.unwrap_or_else(|| vec![*start]);
            start_inside(p, &model, &pi, key, Some(idx), starts);
        }
        ElementKind::ErrorEndEvent { error_code } => {
            p.event(key, Intent::ElementActivated, RecordValue::ProcessInstance(pi.clone()));
            let error = ThrownError { code: error_code, message: "", variables: &[], job_key: -1 };
            throw_error(p, &model, key, &pi, &error);
        }
        _ => {
            p.event(key, Intent::ElementActivated, RecordValue::ProcessInstance(pi.clone()));
            p.command(key, Intent::CompleteElement, RecordValue::ProcessInstance(pi));
        }
    }
}

/// Activates elements inside scope instance `key` (of element `scope`; `None`: the process):
/// its start event, or what start instructions target. A target directly in the scope is
/// activated; for a target deeper down, the element of this scope that contains it is activated
/// once for all its targets, as their flow scope: as on Zeebe 8.5.8, without its input mappings
/// and without entering its start event.
fn start_inside(p: P, model: &Process, pi: &ProcessInstanceRecord, key: i64, scope: Option<usize>, targets: Vec<usize>) {
    // in the order of the instructions: an element to activate, and the targets inside it
    let mut children: Vec<(usize, Vec<usize>)> = Vec::new();
    for target in targets {
        let mut child = target;
        while model.elements[child].scope != scope {
            child = model.elements[child].scope.expect("a target lies inside the scope");
        }
        if child == target {
            children.push((child, Vec::new()));
        } else if let Some((_, inside)) = children.iter_mut().find(|(c, inside)| *c == child && !inside.is_empty()) {
            inside.push(target);
        } else {
            children.push((child, vec![target]));
        }
    }
    for (child, inside) in children {
        let element = &model.elements[child];
        let record = child_record(pi, key, &element.id, element.kind.bpmn_element_type());
        let child_key = p.new_key();
        if !inside.is_empty() {
            p.set_start_elements(child_key, inside);
        }
        p.command(child_key, Intent::ActivateElement, RecordValue::ProcessInstance(record));
    }
}

/// An error thrown by a worker (`job_key` > 0) or an error end event (`job_key` -1).
#[derive(Clone, Copy)]
pub(crate) struct ThrownError<'a> {
    pub code: &'a str,
    pub message: &'a str,
    pub variables: &'a [(String, String)],
    pub job_key: i64,
}

/// Throws an error at element instance `from`: the nearest matching error boundary event
/// catches it (with its variables), else an UNHANDLED_ERROR_EVENT incident (on the job when
/// there is one).
pub(crate) fn throw_error(p: P, model: &Process, from: i64, pi: &ProcessInstanceRecord, error: &ThrownError<'_>) {
    let ThrownError { code, message, variables, job_key } = *error;
    match events::find_catch(p, model, from, events::error_matcher(code)) {
        Some(found) => events::catch(p, model, found, variables),
        None => {
            let message = if job_key > 0 {
                format!(
                    "Expected to throw an error event with the code '{code}' with message '{message}', but it was not caught. No error events are available in the scope."
                )
            } else {
                format!("Expected to throw an error event with the code '{code}', but it was not caught. No error events are available in the scope.")
            };
            incident(p, pi, from, job_key, error_type::UNHANDLED_ERROR_EVENT, message);
        }
    }
}

/// A job can be taken: push it to an open job stream, or announce it to long-polling requests.
pub(crate) fn job_became_activatable(p: P, job_key: i64) {
    let Some(job) = p.view().job(job_key) else { return };
    match p.job_streams.stream_for(&job.record.job_type) {
        Some(stream) => {
            let mut record = job.record.clone();
            record.variables = variables::visible_variables(p.view(), record.element_instance_key, &stream.fetch_variables).into();
            record.worker = stream.worker.clone();
            record.timeout_ms = stream.timeout_ms;
            record.deadline_ms = p.now_ms + stream.timeout_ms;
            let batch = JobBatchRecord {
                job_type: record.job_type.to_string(),
                worker: stream.worker.to_string(),
                timeout_ms: stream.timeout_ms,
                max_jobs_to_activate: 1,
                fetch_variables: stream.fetch_variables.clone(),
                job_keys: vec![job_key],
                jobs: vec![record.clone()],
                truncated: false,
            };
            let batch_key = p.new_key();
            p.event(batch_key, Intent::Activated, RecordValue::JobBatch(batch));
            p.side_effect(SideEffect::PushJob { stream_id: stream.stream_id, job_key, job: Box::new(record) });
        }
        None => p.side_effect(SideEffect::JobsAvailable { job_type: job.record.job_type.into() }),
    }
}

/// COMPLETE_ELEMENT: COMPLETING, then completion continues.
pub(crate) fn complete(p: P, command: &Record) {
    let Some(instance) = p.view().element(command.key) else { return };
    if instance.state != ElementState::Activated {
        return;
    }
    p.event(command.key, Intent::ElementCompleting, RecordValue::ProcessInstance(instance.record));
    continue_completion(p, command.key);
}

/// The part of completion that may stop at an incident (output mappings, conditions).
pub(crate) fn continue_completion(p: P, key: i64) {
    let Some(instance) = p.view().element(key) else { return };
    let pi = instance.record.clone();
    let model = p.process_model(pi.process_definition_key);
    if pi.element_id == model.id {
        return complete_process(p, &model, key, pi);
    }
    let Some(idx) = element_idx(&model, &pi.element_id) else { return };
    let element = &model.elements[idx];
    if !element.outputs.is_empty() {
        match evaluate_mappings(p, key, &element.outputs) {
            Ok(doc) => variables::merge_propagate(p, pi.flow_scope_key, &variables::texts_of(&doc)),
            Err(message) => return incident(p, &pi, key, -1, error_type::IO_MAPPING_ERROR, message),
        }
    }
    let flows: Vec<usize> = match &element.kind {
        ElementKind::ExclusiveGateway { default_flow } => match choose_flow(p, key, &model, &element.outgoing, *default_flow) {
            Ok(flow) => flow.into_iter().collect(),
            Err(message) => return incident(p, &pi, key, -1, error_type::CONDITION_ERROR, message),
        },
        ElementKind::InclusiveGateway { default_flow } => match choose_flows(p, key, &model, &element.outgoing, *default_flow) {
            Ok(flows) => flows,
            Err(message) => return incident(p, &pi, key, -1, error_type::CONDITION_ERROR, message),
        },
        _ => element.outgoing.clone(),
    };
    events::close(p, &model, &pi.element_id, key);
    p.event(key, Intent::ElementCompleted, RecordValue::ProcessInstance(pi.clone()));
    if let ElementKind::LinkThrowEvent { target } = element.kind {
        // the token continues at the link's catch event
        let target = &model.elements[target];
        let record = child_record(&pi, pi.flow_scope_key, &target.id, target.kind.bpmn_element_type());
        let target_key = p.new_key();
        p.event(target_key, Intent::ElementActivating, RecordValue::ProcessInstance(record));
        return continue_activation(p, target_key);
    }
    if matches!(element.kind, ElementKind::TerminateEndEvent) {
        for sibling in p.view().children(pi.flow_scope_key) {
            terminate(p, sibling);
        }
    }
    if flows.is_empty() {
        maybe_complete_scope(p, pi.flow_scope_key);
    }
    for flow in flows {
        take_flow(p, &model, &pi, flow);
    }
}

fn complete_process(p: P, model: &Process, key: i64, pi: ProcessInstanceRecord) {
    let awaiting = p.take_awaiting_result(key);
    let result_vars = awaiting.as_ref().map(|(_, names)| variables::visible_variables(p.view(), key, names));
    let started_by = p.view().started_by_message(key);
    events::close(p, model, &pi.element_id, key);
    let completed = p.event_record(key, Intent::ElementCompleted, RecordValue::ProcessInstance(pi.clone()));
    if let Some((bpmn_process_id, correlation_key)) = started_by {
        crate::starts::start_with_buffered_message(p, &bpmn_process_id, &correlation_key);
    }
    if let (Some((request, _)), Some(vars)) = (awaiting, result_vars) {
        let result = ProcessInstanceResultRecord {
            bpmn_process_id: pi.bpmn_process_id.to_string(),
            version: pi.version,
            process_definition_key: pi.process_definition_key,
            process_instance_key: key,
            variables: vars,
            tenant_id: pi.tenant_id.to_string(),
        };
        let record = Record {
            value_type: ValueType::ProcessInstanceResult,
            intent: Intent::Completed,
            record_type: RecordType::Event,
            value: RecordValue::ProcessInstanceResult(result),
            ..completed
        };
        p.respond(Some(request), record);
    }
}

/// SEQUENCE_FLOW_TAKEN for `flow`, leaving the element `from`: a token on the flow.
pub(crate) fn flow_taken(p: P, model: &Process, from: &ProcessInstanceRecord, flow: usize) {
    let mut taken = from.clone();
    taken.element_id = model.flows[flow].id.as_str().into();
    taken.bpmn_element_type = SharedStr::from_static("SEQUENCE_FLOW");
    let flow_key = p.new_key();
    p.event(flow_key, Intent::SequenceFlowTaken, RecordValue::ProcessInstance(taken));
}

fn take_flow(p: P, model: &Arc<Process>, from: &ProcessInstanceRecord, flow: usize) {
    flow_taken(p, model, from, flow);
    let f = &model.flows[flow];
    let target = &model.elements[f.target];
    let is_join = matches!(target.kind, ElementKind::ParallelGateway) && target.incoming.len() > 1;
    if is_join {
        let scope = from.flow_scope_key;
        let all_taken = target.incoming.iter().all(|i| p.view().taken_flows(scope, &model.flows[*i].id) > 0);
        if !all_taken {
            return;
        }
    }
    let next = child_record(from, from.flow_scope_key, &target.id, target.kind.bpmn_element_type());
    let next_key = p.new_key();
    p.command(next_key, Intent::ActivateElement, RecordValue::ProcessInstance(next));
}

/// Completes a scope once nothing inside it is active and no token is in flight; first, a
/// token waiting at an inclusive join may go on now that one more path has ended.
fn maybe_complete_scope(p: P, scope: i64) {
    let Some(s) = p.view().element(scope) else { return };
    if s.state != ElementState::Activated {
        return;
    }
    if s.active_flows > 0 {
        let model = p.process_model(s.record.process_definition_key);
        for &idx in model.inclusive_joins(model.element(&s.record.element_id)) {
            if inclusive_join_ready(p, &model, scope, idx) {
                let e = &model.elements[idx];
                let record = child_record(&s.record, scope, &e.id, e.kind.bpmn_element_type());
                let key = p.new_key();
                p.command(key, Intent::ActivateElement, RecordValue::ProcessInstance(record));
            }
        }
        return;
    }
    if s.active_children == 0 {
        p.command(scope, Intent::CompleteElement, RecordValue::ProcessInstance(s.record));
    }
}

/// An inclusive join may activate when a token waits on at least one incoming flow and no
/// incoming flow without a token can still be reached from what is active in the scope.
fn inclusive_join_ready(p: P, model: &Process, scope: i64, join: usize) -> bool {
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

/// Whether an interrupting event subprocess has taken over `scope` (only checked when the
/// scope has interrupting event subprocesses at all).
fn interrupted(p: P, model: &Process, scope: &crate::tables::ElementInstance) -> bool {
    let interrupting = model.interrupting_event_subprocesses(model.element(&scope.record.element_id));
    if interrupting.is_empty() {
        return false;
    }
    let view = p.view();
    view.children(scope.key)
        .into_iter()
        .filter_map(|c| view.element(c))
        .any(|c| interrupting.iter().any(|&esp| model.elements[esp].id == c.record.element_id))
}

/// Terminates an element instance and everything inside it (cancel).
pub(crate) fn terminate(p: P, key: i64) {
    let Some(instance) = p.view().element(key) else { return };
    if matches!(instance.state, ElementState::Terminating | ElementState::Terminated | ElementState::Completed) {
        return;
    }
    p.event(key, Intent::ElementTerminating, RecordValue::ProcessInstance(instance.record.clone()));
    for child in p.view().children(key) {
        terminate(p, child);
    }
    if instance.job_key > 0 {
        if let Some(job) = p.view().job(instance.job_key) {
            resolve_incident_of(p, p.view().job_incident(instance.job_key));
            p.event(instance.job_key, Intent::Canceled, RecordValue::Job(job.record));
        }
    }
    resolve_incident_of(p, p.view().element_incident(key));
    let model = p.process_model(instance.record.process_definition_key);
    events::close(p, &model, &instance.record.element_id, key);
    let started_by = if instance.record.flow_scope_key < 0 { p.view().started_by_message(key) } else { None };
    p.event(key, Intent::ElementTerminated, RecordValue::ProcessInstance(instance.record.clone()));
    if let Some((bpmn_process_id, correlation_key)) = started_by {
        crate::starts::start_with_buffered_message(p, &bpmn_process_id, &correlation_key);
    }
    if instance.record.flow_scope_key < 0 {
        // the process itself: nobody will see a result
        if let Some((request, _)) = p.take_awaiting_result(key) {
            let _ = request;
        }
    }
}

fn resolve_incident_of(p: P, incident_key: Option<i64>) {
    let Some(incident_key) = incident_key else { return };
    if let Some(incident) = p.view().incident(incident_key) {
        p.event(incident_key, Intent::Resolved, RecordValue::Incident(incident));
    }
}

/// Raises an incident for an element (job_key -1) or a job.
pub(crate) fn incident(p: P, pi: &ProcessInstanceRecord, element_key: i64, job_key: i64, error_type: &str, message: String) {
    let record = IncidentRecord {
        error_type: error_type.to_string(),
        error_message: message,
        bpmn_process_id: pi.bpmn_process_id.to_string(),
        process_definition_key: pi.process_definition_key,
        process_instance_key: pi.process_instance_key,
        element_id: pi.element_id.to_string(),
        element_instance_key: element_key,
        job_key,
        variable_scope_key: element_key,
        tenant_id: pi.tenant_id.to_string(),
    };
    let key = p.new_key();
    p.event(key, Intent::Created, RecordValue::Incident(record));
}

pub(crate) fn child_record(
    parent: &ProcessInstanceRecord,
    flow_scope_key: i64,
    element_id: &str,
    element_type: &'static str,
) -> ProcessInstanceRecord {
    ProcessInstanceRecord {
        element_id: element_id.into(),
        flow_scope_key,
        bpmn_element_type: SharedStr::from_static(element_type),
        ..parent.clone()
    }
}

fn evaluate_mappings(p: P, scope: i64, mappings: &[waggle_bpmn::Mapping]) -> Result<Map<String, Json>, String> {
    let mut doc = Map::new();
    for m in mappings {
        let value = evaluate(p, scope, &m.source)?;
        set_path(&mut doc, &m.target, value.to_json(), p, scope);
    }
    Ok(doc)
}

/// Sets `a.b.c` in a document; the first segment starts from the variable's current value.
fn set_path(doc: &mut Map<String, Json>, target: &str, value: Json, p: P, scope: i64) {
    let mut parts = target.split('.');
    let first = parts.next().unwrap_or(target).to_string();
    let rest: Vec<&str> = parts.collect();
    if rest.is_empty() {
        doc.insert(first, value);
        return;
    }
    let mut root = doc.remove(&first).unwrap_or_else(|| {
        let lookup = ScopeLookup::new(p.view(), scope);
        lookup.stored_json(&first).unwrap_or(Json::Null)
    });
    let mut cursor = &mut root;
    for part in rest {
        if !cursor.is_object() {
            *cursor = Json::Object(Map::new());
        }
        cursor = cursor.as_object_mut().expect("object").entry(part.to_string()).or_insert(Json::Null);
    }
    *cursor = value;
    doc.insert(first, root);
}

use variables::evaluate;

fn type_error(expr: &Expression, expected: &str, got: &Value) -> String {
    format!("Expected result of the expression '{}' to be '{}', but was '{}'.", expr.source(), expected, got.type_name())
}

fn eval_number(p: P, scope: i64, v: &ExprOrStatic) -> Result<i32, String> {
    match v {
        ExprOrStatic::Static(s) => {
            s.trim().parse::<i32>().map_err(|_| format!("Expected result of the expression '{s}' to be 'NUMBER', but was 'STRING'."))
        }
        ExprOrStatic::Expression(e) => match evaluate(p, scope, e)? {
            Value::Number(n) => Ok(n.to_f64() as i32),
            other => Err(type_error(e, "NUMBER", &other)),
        },
    }
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
