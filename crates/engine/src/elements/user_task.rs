//! Zeebe user tasks (`zeebe:userTask`), as Zeebe 8.5 runs them: no job; on activation the
//! task's assignee, candidate groups and users, due and follow-up dates, linked form and
//! external form reference are evaluated and USER_TASK CREATING, CREATED written; the task then
//! waits for the COMPLETE command (`processors::user_task`). A failed evaluation is an
//! EXTRACT_VALUE_ERROR incident, a linked form not deployed a FORM_NOT_FOUND one (resolving
//! either evaluates again). Terminating the element cancels the task (CANCELING, CANCELED).
//! (https://docs.camunda.io/docs/components/modeler/bpmn/user-tasks/, Zeebe's
//! `processing/usertask/*Test.java` and `BpmnUserTaskBehavior`.)

use serde_json::{Map, Value as Json};
use waggle_bpmn::{ElementKind, ExprOrStatic, UserTaskProperties};
use waggle_feel::Value;
use waggle_protocol::value::{ProcessInstanceRecord, UserTaskRecord};
use waggle_protocol::{Intent, RecordValue};

use crate::behaviors::expressions::string_of;
use crate::behaviors::incidents::{error_type, incident};
use crate::behaviors::waits;
use crate::elements::behavior::{Activation, ElementBehavior, Transitions};
use crate::processing::P;
use crate::tables::{ElementInstance, UserTaskState};
use crate::variables::evaluate;

/// Zeebe's incident type for a linked form that is not deployed.
const FORM_NOT_FOUND: &str = "FORM_NOT_FOUND";

pub(crate) struct ZeebeUserTask;

impl ElementBehavior for ZeebeUserTask {
    fn on_activate(&self, p: P, a: Activation<'_>, _t: Transitions) {
        let Activation { model, idx, key, record: pi, waits, .. } = a;
        let ElementKind::ZeebeUserTask(props) = &model.elements[idx].kind else { return };
        let record = match user_task_record(p, key, &pi, props) {
            Ok(record) => record,
            Err((kind, message)) => return incident(p, &pi, key, -1, kind, message),
        };
        let task_key = p.new_key();
        let record = UserTaskRecord { user_task_key: task_key, ..record };
        p.event(task_key, Intent::Creating, RecordValue::UserTask(record.clone()));
        p.event(task_key, Intent::Created, RecordValue::UserTask(record));
        waits::open(p, &pi, key, waits);
        p.event(key, Intent::ElementActivated, RecordValue::ProcessInstance(pi));
    }

    fn on_terminate(&self, p: P, instance: &ElementInstance) {
        if instance.job_key <= 0 {
            return;
        }
        let Some(task) = p.view().user_task(instance.job_key) else { return };
        if task.state != UserTaskState::Canceling {
            p.event(instance.job_key, Intent::Canceling, RecordValue::UserTask(task.record.clone()));
            p.event(instance.job_key, Intent::Canceled, RecordValue::UserTask(task.record));
        }
    }
}

type Failure = (&'static str, String);

/// The task element instance `key` creates, its properties evaluated in its scope.
fn user_task_record(p: P, key: i64, pi: &ProcessInstanceRecord, props: &UserTaskProperties) -> Result<UserTaskRecord, Failure> {
    let extract = |message: String| (error_type::EXTRACT_VALUE_ERROR, message);
    let assignee = props.assignee.as_ref().map(|a| string_of(p, key, a)).transpose().map_err(extract)?;
    let candidate_groups = props.candidate_groups.as_ref().map(|v| string_list(p, key, v)).transpose().map_err(extract)?;
    let candidate_users = props.candidate_users.as_ref().map(|v| string_list(p, key, v)).transpose().map_err(extract)?;
    let due_date = props.due_date.as_ref().map(|v| date_time(p, key, v)).transpose().map_err(extract)?.flatten();
    let follow_up_date = props.follow_up_date.as_ref().map(|v| date_time(p, key, v)).transpose().map_err(extract)?.flatten();
    let form_key = match &props.form_id {
        None => -1,
        Some(id) => {
            let id = string_of(p, key, id).map_err(extract)?;
            match p.view().latest_form(&pi.tenant_id, &id) {
                Some((_, form_key)) => form_key,
                None => return Err((FORM_NOT_FOUND, form_not_found(&id))),
            }
        }
    };
    let external_form_reference = props.external_reference.as_ref().map(|r| string_of(p, key, r)).transpose().map_err(extract)?;
    let headers: Map<String, Json> = props.headers.iter().map(|(k, v)| (k.clone(), Json::String(v.clone()))).collect();
    Ok(UserTaskRecord {
        user_task_key: -1,
        assignee: assignee.unwrap_or_default(),
        candidate_groups: candidate_groups.unwrap_or_default(),
        candidate_users: candidate_users.unwrap_or_default(),
        due_date: due_date.unwrap_or_default(),
        follow_up_date: follow_up_date.unwrap_or_default(),
        form_key,
        external_form_reference: external_form_reference.unwrap_or_default(),
        custom_headers: Json::Object(headers).to_string(),
        variables: "{}".into(),
        changed_attributes: Vec::new(),
        action: String::new(),
        bpmn_process_id: pi.bpmn_process_id.to_string(),
        process_definition_version: pi.version,
        process_definition_key: pi.process_definition_key,
        process_instance_key: pi.process_instance_key,
        element_id: pi.element_id.to_string(),
        element_instance_key: key,
        tenant_id: pi.tenant_id.to_string(),
        creation_timestamp: p.now_ms,
    })
}

/// Zeebe's FORM_NOT_FOUND message for a linked form (binding `latest`).
pub(crate) fn form_not_found(form_id: &str) -> String {
    format!(
        "Expected to find a form with id '{form_id}', but no form with this id is found, at least a form with this id should be available. To resolve the Incident please deploy a form with the same id"
    )
}

/// A static list (kept as a JSON array's text) or an expression giving a list of strings.
fn string_list(p: P, scope: i64, value: &ExprOrStatic) -> Result<Vec<String>, String> {
    let expr = match value {
        ExprOrStatic::Static(text) => return Ok(serde_json::from_str(text).unwrap_or_default()),
        ExprOrStatic::Expression(e) => e,
    };
    match evaluate(p, scope, expr)? {
        Value::List(items) => items
            .into_iter()
            .map(|item| match item {
                Value::String(s) => Ok(s),
                _ => Err(format!(
                    "Expected result of the expression '{}' to be 'ARRAY' containing 'STRING' items, but was 'ARRAY' containing at least one non-'STRING' item.",
                    expr.source()
                )),
            })
            .collect(),
        other => Err(format!("Expected result of the expression '{}' to be 'ARRAY', but was '{}'.", expr.source(), other.type_name())),
    }
}

/// A due or follow-up date: a zoned date-time, or a string holding one (None: null), in
/// Java's `ZonedDateTime.toString()` form as Zeebe writes it.
fn date_time(p: P, scope: i64, value: &ExprOrStatic) -> Result<Option<String>, String> {
    let (text, source) = match value {
        ExprOrStatic::Static(text) => (text.clone(), text.clone()),
        ExprOrStatic::Expression(e) => match evaluate(p, scope, e)? {
            Value::Null => return Ok(None),
            Value::DateTime(dt) => (dt.to_string(), e.source().to_string()),
            Value::String(s) => (s, e.source().to_string()),
            other => {
                return Err(format!(
                    "Expected result of the expression '{}' to be one of '[DATE_TIME, STRING]', but was '{}'.",
                    e.source(),
                    other.type_name()
                ))
            }
        },
    };
    waggle_bpmn::zoned_date_time(&text).map(Some).ok_or_else(|| format!("Invalid date-time format '{text}' for expression '{source}'."))
}
