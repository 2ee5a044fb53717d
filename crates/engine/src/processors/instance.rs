use waggle_bpmn::{ElementKind, Process};
use waggle_protocol::value::{ProcessInstanceCreationRecord, UpdateSemantics, VariableDocumentRecord};
use waggle_protocol::{Intent, Record, RecordValue, RejectionType};

use crate::batch::RequestId;
use crate::behaviors::jobs::job_became_activatable;
use crate::behaviors::{starts, waits};
use crate::elements::{self, ThrownError};
use crate::json_doc::VariableTexts;
use crate::processing::P;
use crate::tables::{same_tenant, ElementState};
use crate::variables::{self, Vars};

/// PROCESS_INSTANCE_CREATION CREATE: resolves the process, sets the variables on the new
/// instance and activates it. With `await_result`, the answer waits for the instance to end.
pub(crate) fn create(p: P, command: &Record, request: Option<RequestId>, await_result: bool) {
    let RecordValue::ProcessInstanceCreation(creation) = &command.value else { return };
    let definition_key = if creation.process_definition_key > 0 {
        Some(creation.process_definition_key)
    } else if creation.version > 0 {
        p.view().process_by_version(&creation.tenant_id, &creation.bpmn_process_id, creation.version)
    } else {
        p.view().latest_process(&creation.tenant_id, &creation.bpmn_process_id).map(|(_, k)| k)
    };
    // a definition of another tenant is one this tenant cannot see (Zeebe 8.5 looks a key up
    // within the creation's tenant)
    let found =
        definition_key.and_then(|k| p.process_record(k).map(|r| (k, r))).filter(|(_, r)| same_tenant(&r.tenant_id, &creation.tenant_id));
    let Some((definition_key, process)) = found else {
        let reason = if creation.process_definition_key > 0 {
            format!("Expected to find process definition with key '{}', but none found", creation.process_definition_key)
        } else if creation.version > 0 {
            format!(
                "Expected to find process definition with process ID '{}' and version '{}', but none found",
                creation.bpmn_process_id, creation.version
            )
        } else {
            format!("Expected to find process definition with process ID '{}', but none found", creation.bpmn_process_id)
        };
        return p.reject(command, request, RejectionType::NotFound, reason);
    };
    let doc = match p.client_document(&creation.variables) {
        Ok(doc) => doc,
        Err(e) => {
            let reason = format!("Expected to set variables from document, but the document is invalid: {e}");
            return p.reject(command, request, RejectionType::InvalidArgument, reason);
        }
    };
    let model = p.process_model(definition_key);
    let starts = if creation.start_instructions.is_empty() {
        if model.start.is_none() {
            let reason = "Expected to create instance of process with none start event, but there is no such event".to_string();
            return p.reject(command, request, RejectionType::InvalidState, reason);
        }
        None
    } else {
        // as Zeebe 8.5.8 validates them: every element exists, then every one has a type that
        // can be started at, then none waits behind an event-based gateway
        let mut starts = Vec::new();
        for id in &creation.start_instructions {
            let Some(idx) = model.element(id) else {
                if model.flows.iter().any(|f| f.id == *id) {
                    starts.push(None);
                    continue;
                }
                let reason = format!("Expected to create instance of process with start instructions but no element found with id '{id}'.");
                return p.reject(command, request, RejectionType::InvalidArgument, reason);
            };
            starts.push(Some(idx));
        }
        for (id, idx) in creation.start_instructions.iter().zip(&starts) {
            let element_type = idx.map_or("SEQUENCE_FLOW", |i| model.elements[i].kind.bpmn_element_type());
            if matches!(element_type, "START_EVENT" | "BOUNDARY_EVENT" | "SEQUENCE_FLOW") {
                let reason = format!(
                    "Expected to create instance of process with start instructions but the element with id '{id}' targets unsupported element type '{element_type}'. Supported element types are: {START_INSTRUCTION_TYPES}"
                );
                return p.reject(command, request, RejectionType::InvalidArgument, reason);
            }
        }
        let starts: Vec<usize> = starts.into_iter().flatten().collect();
        for &idx in &starts {
            if waits::after_event_gateway(&model, idx) {
                let reason = format!(
                    "Expected to create instance of process with start instructions but the element with id '{}' belongs to an event-based gateway. The creation of elements belonging to an event-based gateway is not supported.",
                    model.elements[idx].id
                );
                return p.reject(command, request, RejectionType::InvalidArgument, reason);
            }
        }
        if let Err(reason) = check_flow_scope_subscriptions(p, &model, &starts, &doc) {
            return p.reject(command, request, RejectionType::InvalidArgument, reason);
        }
        Some(starts)
    };
    let pi_key = p.new_key();
    starts::start_instance(p, &process, definition_key, pi_key, starts, doc);
    let created = ProcessInstanceCreationRecord {
        bpmn_process_id: process.bpmn_process_id.clone(),
        version: process.version,
        process_definition_key: definition_key,
        process_instance_key: pi_key,
        // the variables are the VARIABLE CREATED events before it: the log never kept them in
        // the creation's records (see `log_value`), and its answer has none
        variables: String::new(),
        fetch_variables: creation.fetch_variables.clone(),
        start_instructions: creation.start_instructions.clone(),
        tenant_id: process.tenant_id.clone(),
    };
    let event = p.event_record(pi_key, Intent::Created, RecordValue::ProcessInstanceCreation(created));
    match (await_result, request) {
        (true, Some(request)) => p.await_result(pi_key, request, creation.fetch_variables.clone()),
        _ => p.respond(request, event),
    }
}

/// Zeebe 8.5.8 activates the flow scopes of start instructions' targets (the process, and each
/// (sub)process that contains a target) within the creation, and rejects the creation when one
/// of them cannot subscribe to its events (a boundary timer's expression fails, say), where an
/// element activated by a command raises an incident. Checks them with the creation's
/// variables (a flow scope activated so has no input mappings), outermost first, as Zeebe
/// activates them.
fn check_flow_scope_subscriptions(p: P, model: &Process, targets: &[usize], doc: &VariableTexts) -> Result<(), String> {
    let mut checked: Vec<Option<usize>> = Vec::new();
    for &target in targets {
        let mut scopes = vec![None];
        let mut scope = model.elements[target].scope;
        while let Some(idx) = scope {
            scopes.insert(1, Some(idx));
            scope = model.elements[idx].scope;
        }
        for scope in scopes {
            if checked.contains(&scope) {
                continue;
            }
            checked.push(scope);
            let subscribed = match scope {
                None => waits::event_subprocess_waits(p, model, None, Vars::Document(doc)),
                Some(idx) => elements::waits_of(p, model, idx, Vars::Document(doc)),
            };
            if let Err(message) = subscribed {
                let id = scope.map_or(model.id.as_str(), |idx| model.elements[idx].id.as_str());
                return Err(format!("Expected to subscribe to catch event(s) of '{id}' but {message}"));
            }
        }
    }
    Ok(())
}

/// The element types a start instruction may target, as Zeebe 8.5.8 lists them.
const START_INSTRUCTION_TYPES: &str = "[PARALLEL_GATEWAY, USER_TASK, PROCESS, EVENT_BASED_GATEWAY, EXCLUSIVE_GATEWAY, BUSINESS_RULE_TASK, SCRIPT_TASK, SEND_TASK, CALL_ACTIVITY, EVENT_SUB_PROCESS, RECEIVE_TASK, SUB_PROCESS, INCLUSIVE_GATEWAY, END_EVENT, INTERMEDIATE_THROW_EVENT, TASK, MULTI_INSTANCE_BODY, INTERMEDIATE_CATCH_EVENT, MANUAL_TASK, SERVICE_TASK]";

/// PROCESS_INSTANCE CANCEL: terminates the instance and everything in it.
pub(crate) fn cancel(p: P, command: &Record, request: Option<RequestId>) {
    let instance = p.view().element(command.key).filter(|e| e.record.flow_scope_key < 0 && p.may_access(&e.record.tenant_id));
    let Some(instance) = instance else {
        let reason = format!("Expected to cancel a process instance with key '{}', but no such process was found", command.key);
        return p.reject(command, request, RejectionType::NotFound, reason);
    };
    if instance.record.parent_process_instance_key > 0 {
        let reason = format!(
            "Expected to cancel a process instance with key '{}', but it is created by a parent process instance. Cancel the root process instance '{}' instead.",
            command.key,
            root_instance(p, &instance.record)
        );
        return p.reject(command, request, RejectionType::InvalidState, reason);
    }
    if instance.state == ElementState::Terminating {
        let reason = format!("Expected to cancel a process instance with key '{}', but it is already being terminated", command.key);
        return p.reject(command, request, RejectionType::InvalidState, reason);
    }
    elements::terminate_in_batches(p, command.key);
    let mut answer = command.clone();
    answer.value = RecordValue::ProcessInstance(instance.record);
    answer.intent = Intent::ElementTerminated;
    p.respond(request, answer);
}

/// The root of the process instances call activities created, up from `record`'s instance.
fn root_instance(p: P, record: &waggle_protocol::value::ProcessInstanceRecord) -> i64 {
    let mut root = record.process_instance_key;
    let mut parent = record.parent_process_instance_key;
    while parent > 0 {
        root = parent;
        parent = p.view().element_with(parent, |e| e.record.parent_process_instance_key).unwrap_or(-1);
    }
    root
}

/// VARIABLE_DOCUMENT UPDATE (SetVariables): local or propagated merge into an element's scope.
pub(crate) fn set_variables(p: P, command: &Record, request: Option<RequestId>) {
    let RecordValue::VariableDocument(doc) = &command.value else { return };
    if !p.view().element(doc.scope_key).is_some_and(|e| p.may_access(&e.record.tenant_id)) {
        let reason = format!("Expected to update variables for element with key '{}', but no such element was found", doc.scope_key);
        return p.reject(command, request, RejectionType::NotFound, reason);
    }
    let vars = match p.client_document(&doc.variables) {
        Ok(v) => v,
        Err(e) => {
            let reason = format!("Expected to merge variables for element with key '{}', but the document is invalid: {e}", doc.scope_key);
            return p.reject(command, request, RejectionType::InvalidArgument, reason);
        }
    };
    match doc.update_semantics {
        UpdateSemantics::Local => variables::merge_local(p, doc.scope_key, &vars),
        UpdateSemantics::Propagate => variables::merge_propagate(p, doc.scope_key, &vars),
    }
    let key = p.new_key();
    let updated = VariableDocumentRecord { ..doc.clone() };
    let event = p.event_record(key, Intent::Updated, RecordValue::VariableDocument(updated));
    p.respond(request, event);
}

/// INCIDENT RESOLVE: marks the incident resolved and resumes where it stopped (a job incident
/// makes the job activatable again once it has retries).
pub(crate) fn resolve_incident(p: P, command: &Record, request: Option<RequestId>) {
    let Some(incident) = p.view().incident(command.key).filter(|i| p.may_access(&i.tenant_id)) else {
        let reason = format!("Expected to resolve incident with key '{}', but no such incident was found", command.key);
        return p.reject(command, request, RejectionType::NotFound, reason);
    };
    if incident.job_key > 0 {
        let retries = p.view().job(incident.job_key).map(|j| j.record.retries).unwrap_or(0);
        let event = p.event_record(command.key, Intent::Resolved, RecordValue::Incident(incident.clone()));
        p.respond(request, event);
        if retries > 0 {
            job_became_activatable(p, incident.job_key);
        }
        return;
    }
    let event = p.event_record(command.key, Intent::Resolved, RecordValue::Incident(incident.clone()));
    p.respond(request, event);
    let Some(element) = p.view().element(incident.element_instance_key) else { return };
    match element.state {
        ElementState::Activating => elements::continue_activation(p, incident.element_instance_key),
        ElementState::Completing => elements::continue_completion(p, incident.element_instance_key),
        ElementState::Activated => {
            // an error end event whose error nobody caught throws it again (caught now, or a
            // new incident)
            let model = p.process_model(element.record.process_definition_key);
            let error_end = model.element(&element.record.element_id).and_then(|i| match &model.elements[i].kind {
                ElementKind::ErrorEndEvent { error_code } => Some(error_code.clone()),
                _ => None,
            });
            if let Some(code) = error_end {
                let error = ThrownError { code: &code, message: "", variables: &[], job_key: -1 };
                elements::throw_error(p, element.key, &element.record, &error);
            }
            if crate::behaviors::flows::is_multi_instance_body(&element.record) {
                // a body whose next chunk of inner instances failed to evaluate its collection
                crate::elements::multi_instance::resume_after_incident(p, &element);
            }
        }
        _ => {}
    }
}
