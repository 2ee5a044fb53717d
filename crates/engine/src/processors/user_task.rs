//! Commands on Zeebe user tasks (Zeebe 8.5's `UserTaskProcessor` with its COMPLETE, ASSIGN,
//! CLAIM and UPDATE processors; rejection texts as its `UserTaskCommandPreconditionChecker`):
//! the task must exist (NOT_FOUND) and be CREATED, not in another transition (INVALID_STATE);
//! CLAIM also refuses a task assigned to someone else. COMPLETE merges its variables as a job
//! completion does and completes the element; ASSIGN with an empty assignee unassigns; UPDATE
//! changes the attributes its `changed_attributes` name.

use waggle_protocol::value::UserTaskRecord;
use waggle_protocol::{Intent, Record, RecordValue, RejectionType};

use crate::batch::RequestId;
use crate::processing::P;
use crate::tables::{StoredUserTask, UserTaskState};
use crate::variables;

/// The attributes an UPDATE may change, by Zeebe's names.
pub const UPDATABLE_ATTRIBUTES: [&str; 4] = ["candidateGroupsList", "candidateUsersList", "dueDate", "followUpDate"];

pub(crate) fn process(p: P, command: &Record, request: Option<RequestId>) {
    let RecordValue::UserTask(given) = &command.value else { return };
    let verb = match command.intent {
        Intent::Complete => "complete",
        Intent::Assign => "assign",
        Intent::Claim => "claim",
        Intent::Update => "update",
        _ => {
            let reason = format!("Unsupported command USER_TASK {}", command.intent);
            return p.reject(command, request, RejectionType::InvalidArgument, reason);
        }
    };
    let key = command.key;
    let Some(task) = p.view().user_task(key).filter(|t| p.may_access(&t.record.tenant_id)) else {
        let reason = format!("Expected to {verb} user task with key '{key}', but no such user task was found");
        return p.reject(command, request, RejectionType::NotFound, reason);
    };
    if task.state != UserTaskState::Created {
        let reason = format!("Expected to {verb} user task with key '{key}', but it is in state '{}'", task.state.as_str());
        return p.reject(command, request, RejectionType::InvalidState, reason);
    }
    let action = if given.action.is_empty() { verb.to_string() } else { given.action.clone() };
    match command.intent {
        Intent::Complete => complete(p, command, request, task, given, action),
        Intent::Claim if !task.record.assignee.is_empty() && task.record.assignee != given.assignee => {
            let reason = format!("Expected to claim user task with key '{key}', but it has already been assigned");
            p.reject(command, request, RejectionType::InvalidState, reason)
        }
        Intent::Assign | Intent::Claim => {
            let record = UserTaskRecord { assignee: given.assignee.clone(), action, ..task.record };
            p.event(key, Intent::Assigning, RecordValue::UserTask(record.clone()));
            let event = p.event_record(key, Intent::Assigned, RecordValue::UserTask(record));
            p.respond(request, event);
        }
        Intent::Update => {
            let mut record = UserTaskRecord { action, changed_attributes: Vec::new(), ..task.record };
            for attribute in UPDATABLE_ATTRIBUTES {
                if !given.changed_attributes.iter().any(|a| a == attribute) {
                    continue;
                }
                match attribute {
                    "candidateGroupsList" => record.candidate_groups = given.candidate_groups.clone(),
                    "candidateUsersList" => record.candidate_users = given.candidate_users.clone(),
                    "dueDate" => record.due_date = given.due_date.clone(),
                    _ => record.follow_up_date = given.follow_up_date.clone(),
                }
                record.changed_attributes.push(attribute.to_string());
            }
            p.event(key, Intent::Updating, RecordValue::UserTask(record.clone()));
            let event = p.event_record(key, Intent::Updated, RecordValue::UserTask(record));
            p.respond(request, event);
        }
        _ => unreachable!("filtered above"),
    }
}

/// COMPLETING, COMPLETED (the answer), the variables merged into the element's scope (local
/// when it has output mappings, else propagated), then COMPLETE_ELEMENT.
fn complete(p: P, command: &Record, request: Option<RequestId>, task: StoredUserTask, given: &UserTaskRecord, action: String) {
    let vars = match p.client_document(&given.variables) {
        Ok(v) => v,
        Err(e) => {
            let reason = format!("Expected to complete user task with key '{}', but the variables are invalid: {e}", command.key);
            return p.reject(command, request, RejectionType::InvalidArgument, reason);
        }
    };
    let variables = if given.variables.trim().is_empty() { "{}".to_string() } else { given.variables.clone() };
    let record = UserTaskRecord { variables, action, ..task.record };
    let element_key = record.element_instance_key;
    p.event(command.key, Intent::Completing, RecordValue::UserTask(record.clone()));
    let event = p.event_record(command.key, Intent::Completed, RecordValue::UserTask(record));
    p.respond(request, event);
    let Some(element) = p.view().element(element_key) else { return };
    let model = p.process_model(element.record.process_definition_key);
    let has_outputs = model.element(&element.record.element_id).is_some_and(|i| !model.elements[i].outputs.is_empty());
    if has_outputs {
        variables::merge_local(p, element.key, &vars);
    } else {
        variables::merge_propagate(p, element.key, &vars);
    }
    p.command(element.key, Intent::CompleteElement, RecordValue::ProcessInstance(element.record));
}
