//! PROCESS_INSTANCE_MIGRATION MIGRATE (the MigrateProcessInstance RPC), as Zeebe 8.5 runs it
//! (https://docs.camunda.io/docs/8.5/components/concepts/process-instance-migration/; the
//! rejection texts are those of Zeebe 8.5's `ProcessInstanceMigrationPreconditions`): every
//! active element instance moves to the element its mapping instruction names in the target
//! process definition, keeping its key, variables and job.
//!
//! What Zeebe 8.5 migrates: the process, service tasks, job-based user tasks, embedded
//! subprocesses and call activities, their jobs and incidents. Waggle refuses, as Zeebe 8.5
//! does, event subprocesses (in the source or the target), a changed element type or flow
//! scope, an unmapped active element and a token on its way, and boundary events of any type
//! but message on an active element or its target. Message boundary events ("Dealing with
//! attached boundary events"): the source element's subscriptions close and the target
//! element's open (their name and correlation key evaluated with the element instance's
//! variables); a mapping instruction from or to one of those boundary events, and a target
//! boundary event whose message the element instance is already subscribed to, are refused.

use std::collections::HashMap;

use waggle_bpmn::{ElementKind, EventTrigger, Process};
use waggle_protocol::value::{IncidentRecord, ProcessInstanceRecord};
use waggle_protocol::{Intent, Record, RecordValue, RejectionType};

use crate::batch::RequestId;
use crate::behaviors::expressions::string_of;
use crate::behaviors::waits::{self, Wait};
use crate::processing::P;
use crate::tables::{ElementInstance, ElementState};
use crate::variables::Vars;

/// Element types an active element instance may have (Zeebe 8.5's list).
const SUPPORTED_TYPES: [&str; 5] = ["PROCESS", "SERVICE_TASK", "USER_TASK", "SUB_PROCESS", "CALL_ACTIVITY"];

pub(crate) fn migrate(p: P, command: &Record, request: Option<RequestId>) {
    let RecordValue::ProcessInstanceMigration(migration) = &command.value else { return };
    let key = migration.process_instance_key;
    let Some(root) = p.view().element(key).filter(|e| e.record.flow_scope_key < 0 && p.may_access(&e.record.tenant_id)) else {
        let reason = format!("Expected to migrate process instance but no process instance found with key '{key}'");
        return p.reject(command, request, RejectionType::NotFound, reason);
    };
    let target_key = migration.target_process_definition_key;
    let Some(target_definition) = p.process_record(target_key) else {
        let reason =
            format!("Expected to migrate process instance to process definition but no process definition found with key '{target_key}'");
        return p.reject(command, request, RejectionType::NotFound, reason);
    };
    let source = p.process_model(root.record.process_definition_key);
    let target = p.process_model(target_key);
    let instances = active_instances(p, &root);
    let mapping: HashMap<&str, &str> = migration.mapping_instructions.iter().map(|(s, t)| (s.as_str(), t.as_str())).collect();
    if let Err((rejection, reason)) = check(p, &source, &target, &instances, migration.mapping_instructions.as_slice(), &mapping, key) {
        return p.reject(command, request, rejection, reason);
    }
    // what each target element's message boundary events wait for, evaluated before anything
    // is written
    let mut target_waits = Vec::with_capacity(instances.len());
    for instance in &instances {
        let waits = match instance.key == key {
            true => Vec::new(),
            false => {
                let target_id = mapping[instance.record.element_id.as_str()];
                let target_idx = target.element(target_id).expect("checked");
                let mut waits = Vec::new();
                if let Err(message) = waits::add_boundary_waits(p, &target, target_idx, Vars::Scope(instance.key), &mut waits) {
                    let reason = subscribe_failure(key, &instance.record.element_id, target_id, &message);
                    return p.reject(command, request, RejectionType::InvalidState, reason);
                }
                waits
            }
        };
        target_waits.push(waits);
    }
    for (instance, waits) in instances.iter().zip(target_waits) {
        let element_id = if instance.key == key { target.id.as_str() } else { mapping[instance.record.element_id.as_str()] };
        let record = ProcessInstanceRecord {
            bpmn_process_id: target_definition.bpmn_process_id.as_str().into(),
            version: target_definition.version,
            process_definition_key: target_key,
            element_id: element_id.into(),
            ..instance.record.clone()
        };
        p.event(instance.key, Intent::ElementMigrated, RecordValue::ProcessInstance(record.clone()));
        if instance.job_key > 0 {
            if let Some(job) = p.view().job(instance.job_key) {
                let mut migrated = job.record;
                migrated.bpmn_process_id = record.bpmn_process_id.clone();
                migrated.process_definition_key = target_key;
                migrated.process_definition_version = target_definition.version;
                migrated.element_id = record.element_id.clone();
                p.event(instance.job_key, Intent::Migrated, RecordValue::Job(migrated));
            } else if let Some(task) = p.view().user_task(instance.job_key) {
                // a Zeebe user task moves with its element (USER_TASK MIGRATED, as Zeebe 8.5)
                let mut migrated = task.record;
                migrated.bpmn_process_id = record.bpmn_process_id.to_string();
                migrated.process_definition_key = target_key;
                migrated.process_definition_version = target_definition.version;
                migrated.element_id = record.element_id.to_string();
                p.event(instance.job_key, Intent::Migrated, RecordValue::UserTask(migrated));
            }
        }
        let incidents =
            [p.view().element_incident(instance.key), (instance.job_key > 0).then(|| p.view().job_incident(instance.job_key)).flatten()];
        for incident_key in incidents.into_iter().flatten() {
            if let Some(incident) = p.view().incident(incident_key) {
                let migrated = IncidentRecord {
                    bpmn_process_id: record.bpmn_process_id.to_string(),
                    process_definition_key: target_key,
                    element_id: element_id.to_string(),
                    ..incident
                };
                p.event(incident_key, Intent::Migrated, RecordValue::Incident(migrated));
            }
        }
        if instance.key != key {
            migrate_subscriptions(p, &source, instance, &record, waits);
        }
    }
    let event = p.event_record(key, Intent::Migrated, command.value.clone());
    p.respond(request, event);
}

/// Zeebe 8.5's preconditions, in its order: a rejection type and reason for the first that fails.
fn check(
    p: P,
    source: &Process,
    target: &Process,
    instances: &[ElementInstance],
    instructions: &[(String, String)],
    mapping: &HashMap<&str, &str>,
    key: i64,
) -> Result<(), (RejectionType, String)> {
    let invalid_state = |reason: String| Err((RejectionType::InvalidState, reason));
    let invalid_argument = |reason: String| Err((RejectionType::InvalidArgument, reason));
    if has_event_subprocess(source) {
        return invalid_state("Expected to migrate process instance but process instance has an event subprocess. Process instances with event subprocesses cannot be migrated yet.".into());
    }
    if has_event_subprocess(target) {
        return invalid_state("Expected to migrate process instance but target process has an event subprocess. Target processes with event subprocesses cannot be migrated yet.".into());
    }
    let mut seen: Vec<&str> = Vec::new();
    let mut duplicates: Vec<&str> = Vec::new();
    for (s, _) in instructions {
        if seen.contains(&s.as_str()) && !duplicates.contains(&s.as_str()) {
            duplicates.push(s);
        }
        seen.push(s);
    }
    if !duplicates.is_empty() {
        return invalid_argument(format!(
            "Expected to migrate process instance '{key}' but the mapping instructions contain duplicate source element ids '[{}]'.",
            duplicates.join(", ")
        ));
    }
    for (s, t) in instructions {
        if source.element(s).is_none() {
            return invalid_argument(format!(
                "Expected to migrate process instance '{key}' but mapping instructions contain a non-existing source element id '{s}'. Elements provided in mapping instructions must exist in the source process definition."
            ));
        }
        if target.element(t).is_none() {
            return invalid_argument(format!(
                "Expected to migrate process instance '{key}' but mapping instructions contain a non-existing target element id '{t}'. Elements provided in mapping instructions must exist in the target process definition."
            ));
        }
    }
    for instance in instances {
        let record = &instance.record;
        let element_type = record.bpmn_element_type.as_str();
        if !SUPPORTED_TYPES.contains(&element_type) {
            return invalid_state(format!(
                "Expected to migrate process instance '{key}' but active element with id '{}' has an unsupported type. The migration of a {element_type} is not supported.",
                record.element_id
            ));
        }
        if instance.key == key {
            continue; // the process itself moves to the target process
        }
        let source_id = record.element_id.as_str();
        let Some(&target_id) = mapping.get(source_id) else {
            return invalid_state(format!(
                "Expected to migrate process instance '{key}' but no mapping instruction defined for active element with id '{source_id}'. Elements cannot be migrated without a mapping."
            ));
        };
        let target_idx = target.element(target_id).expect("checked");
        let target_type = target.elements[target_idx].entered_type();
        if target_type != element_type {
            return invalid_state(format!(
                "Expected to migrate process instance '{key}' but active element with id '{source_id}' and type '{element_type}' is mapped to an element with id '{target_id}' and different type '{target_type}'. Elements must be mapped to elements of the same type."
            ));
        }
        if element_type == "USER_TASK" {
            // a job-based user task and a Zeebe user task share the type, not the implementation
            // (Zeebe 8.5's `requireSameUserTaskImplementation`)
            let source_implementation = user_task_implementation(source, source.element(source_id).expect("an active element's"));
            let target_implementation = user_task_implementation(target, target_idx);
            if source_implementation != target_implementation {
                return invalid_state(format!(
                    "Expected to migrate process instance '{key}' but active user task with id '{source_id}' and implementation '{source_implementation}' is mapped to an user task with id '{target_id}' and different implementation '{target_implementation}'. Elements must be mapped to elements of the same implementation."
                ));
            }
        }
        if let Some(scope) = p.view().element(record.flow_scope_key) {
            // the flow scope migrates first (it is checked first): to the target process, or
            // to the element its own mapping names
            let expected = if scope.record.flow_scope_key < 0 {
                target.id.as_str()
            } else {
                mapping.get(scope.record.element_id.as_str()).copied().unwrap_or_default()
            };
            let actual = target.elements[target_idx].scope.map_or(target.id.as_str(), |s| target.elements[s].id.as_str());
            if expected != actual {
                return invalid_state(format!(
                    "Expected to migrate process instance '{key}' but the flow scope of active element with id '{source_id}' is changed. The flow scope of the active element is expected to be '{expected}' but was '{actual}'. The flow scope of an element cannot be changed during migration yet."
                ));
            }
        }
        let source_idx = source.element(source_id).expect("an active element's");
        if let Some(types) = unsupported_boundary_event_types(source, source_idx) {
            return invalid_state(format!(
                "Expected to migrate process instance '{key}' but active element with id '{source_id}' has one or more boundary events of types '{types}'. Migrating active elements with boundary events of these types is not possible yet."
            ));
        }
        if let Some(types) = unsupported_boundary_event_types(target, target_idx) {
            return invalid_state(format!(
                "Expected to migrate process instance '{key}' but target element with id '{target_id}' has one or more boundary events of types '{types}'. Migrating target elements with boundary events of these types is not possible yet."
            ));
        }
        check_message_boundary_events(p, target, instance, target_idx, mapping, key)?;
    }
    if instances.iter().any(|i| i.active_flows > 0 || i.state != ElementState::Activated) {
        return invalid_state(format!(
            "Expected to migrate process instance '{key}' but a concurrent command was executed on the process instance. Please retry the migration."
        ));
    }
    Ok(())
}

/// A user task's implementation, as Zeebe 8.5 names it in a migration's rejection.
fn user_task_implementation(model: &Process, idx: usize) -> &'static str {
    match model.elements[idx].kind {
        ElementKind::ZeebeUserTask(_) => "zeebe user task",
        _ => "job worker",
    }
}

/// The process instance and every element instance inside it, outermost first.
fn active_instances(p: P, root: &ElementInstance) -> Vec<ElementInstance> {
    let mut found = vec![root.clone()];
    let mut next = 0;
    while next < found.len() {
        let key = found[next].key;
        next += 1;
        for child in p.view().children(key) {
            if let Some(e) = p.view().element(child) {
                found.push(e);
            }
        }
    }
    found
}

fn has_event_subprocess(model: &Process) -> bool {
    model.elements.iter().any(|e| matches!(e.kind, ElementKind::EventSubProcess { .. }))
}

/// The event types of the boundary events attached to element `idx` that Zeebe 8.5 can not
/// migrate, all but message (Zeebe's names, joined by commas), if it has any.
fn unsupported_boundary_event_types(model: &Process, idx: usize) -> Option<String> {
    let types: Vec<&str> = model.elements[idx]
        .boundary_events
        .iter()
        .filter_map(|&b| match &model.elements[b].kind {
            ElementKind::BoundaryEvent { trigger, .. } => match trigger {
                EventTrigger::Timer(_) => Some("TIMER"),
                EventTrigger::Message(_) => None,
                EventTrigger::Error { .. } => Some("ERROR"),
                EventTrigger::Escalation { .. } => Some("ESCALATION"),
                EventTrigger::Signal { .. } => Some("SIGNAL"),
            },
            ElementKind::CompensationBoundaryEvent { .. } => Some("COMPENSATION"),
            _ => None,
        })
        .collect();
    (!types.is_empty()).then(|| types.join(","))
}

/// The message boundary events of an active element and of its target (Zeebe 8.5's
/// `requireNoMappedCatchEventsInSource`, `requireNoMappedCatchEventsInTarget` and
/// `requireNoSubscriptionForMessage`): neither may be named by a mapping instruction, and the
/// target's may not wait for a message the element instance is subscribed to already.
fn check_message_boundary_events(
    p: P,
    target: &Process,
    instance: &ElementInstance,
    target_idx: usize,
    mapping: &HashMap<&str, &str>,
    key: i64,
) -> Result<(), (RejectionType, String)> {
    let source_id = instance.record.element_id.as_str();
    let target_id = target.elements[target_idx].id.as_str();
    let subscriptions = p.view().process_subscriptions_of(instance.key);
    for subscription in &subscriptions {
        if mapping.contains_key(subscription.element_id.as_str()) {
            return Err((
                RejectionType::InvalidState,
                format!(
                    "Expected to migrate process instance '{key}' but active element with id '{source_id}' is subscribed to mapped catch event with id '{}'. Migrating active elements with mapped catch events is not possible yet.",
                    subscription.element_id
                ),
            ));
        }
    }
    for &b in &target.elements[target_idx].boundary_events {
        let boundary = &target.elements[b];
        let ElementKind::BoundaryEvent { trigger: EventTrigger::Message(message), .. } = &boundary.kind else { continue };
        if mapping.values().any(|t| *t == boundary.id) {
            return Err((
                RejectionType::InvalidState,
                format!(
                    "Expected to migrate process instance '{key}' but active element with id '{source_id}' is mapped to element with id '{target_id}' that must be subscribed to mapped catch event with id '{}'. Migrating active elements with mapped catch events is not possible yet.",
                    boundary.id
                ),
            ));
        }
        let name = string_of(p, Vars::Scope(instance.key), &message.name)
            .map_err(|e| (RejectionType::InvalidState, subscribe_failure(key, source_id, target_id, &e)))?;
        if subscriptions.iter().any(|s| s.message_name == name) {
            return Err((
                RejectionType::InvalidState,
                format!(
                    "Expected to migrate process instance '{key}' but active element with id '{source_id}' attempts to subscribe to a message it is already subscribed to with name '{name}'. Migrating active elements that subscribe to a message they are already subscribed to is not possible yet. Please provide a mapping instruction to message catch event with id '{}' to migrate the respective message subscription.",
                    boundary.id
                ),
            ));
        }
    }
    Ok(())
}

/// Waggle's text for a target message boundary event whose name or correlation key does not
/// evaluate for the element instance.
fn subscribe_failure(key: i64, source_id: &str, target_id: &str, message: &str) -> String {
    format!(
        "Expected to migrate process instance '{key}' but active element with id '{source_id}' can not subscribe to the message boundary events of element '{target_id}': {message}"
    )
}

/// After an element instance's ELEMENT_MIGRATED (as `record`): the subscriptions of the source
/// element's message boundary events close, the target element's open.
fn migrate_subscriptions(p: P, source: &Process, instance: &ElementInstance, record: &ProcessInstanceRecord, waits: Vec<Wait>) {
    let source_idx = source.element(&instance.record.element_id);
    if source_idx.is_some_and(|i| !source.elements[i].boundary_events.is_empty()) {
        waits::close_where(p, instance.key, |_| true);
    }
    waits::open(p, record, instance.key, waits);
}
