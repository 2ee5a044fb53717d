//! Zeebe user task commands: Zeebe 8.5's `/v1/user-tasks` (the "Zeebe API (REST)") and Camunda
//! 8.8's `/v2/user-tasks` (same bodies): completion `{variables, action}`, assignment
//! `{assignee, allowOverride, action}` (`allowOverride: false` claims: refused when someone
//! else has the task), unassignment, and update `{changeset: {dueDate, followUpDate,
//! candidateUsers, candidateGroups}, action}`. Each answers 204 once committed, or a problem
//! detail: 404 for an unknown task, 409 for one in the wrong state, 400 for a bad request
//! (https://docs.camunda.io/docs/8.5/apis-tools/zeebe-api-rest/specifications/complete-a-user-task/
//! and its siblings).

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, patch, post};
use axum::Router;
use bytes::Bytes;
use serde_json::Value;
use waggle_gateway::Caller;
use waggle_protocol::value::UserTaskRecord;
use waggle_protocol::Intent;

use crate::routes::{body, key, opt_str};
use crate::{Problem, RestState};

type S = State<Arc<RestState>>;
type Answer = Result<Response, Problem>;

/// The command routes under `/v1/user-tasks` and `/v2/user-tasks`.
pub fn routes(router: Router<Arc<RestState>>) -> Router<Arc<RestState>> {
    let mut router = router;
    for version in ["v1", "v2"] {
        router = router
            .route(&format!("/{version}/user-tasks/:key/completion"), post(complete))
            .route(&format!("/{version}/user-tasks/:key/assignment"), post(assign))
            .route(&format!("/{version}/user-tasks/:key/assignee"), delete(unassign))
            .route(&format!("/{version}/user-tasks/:key"), patch(update));
    }
    router
}

fn object(bytes: &Bytes) -> Result<Value, Problem> {
    match body(bytes)? {
        Value::Null => Ok(Value::Object(Default::default())),
        v @ Value::Object(_) => Ok(v),
        _ => Err(Problem::bad_request("the request body must be an object")),
    }
}

/// `caller`: the request's; a task of a tenant it may not use is a 404, as an unknown one.
async fn submit(state: &RestState, caller: Option<Caller>, key: i64, intent: Intent, value: UserTaskRecord) -> Answer {
    state.gateway.user_task_command(key, intent, value, caller.as_ref()).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// `POST …/user-tasks/{key}/completion`.
async fn complete(
    State(state): S,
    Path(text): Path<String>,
    caller: Option<axum::Extension<waggle_gateway::Caller>>,
    bytes: Bytes,
) -> Answer {
    let k = key(&text)?;
    let req = object(&bytes)?;
    let variables = match req.get("variables") {
        None | Some(Value::Null) => String::new(),
        Some(v @ Value::Object(_)) => v.to_string(),
        Some(_) => return Err(Problem::bad_request("variables must be an object")),
    };
    let action = opt_str(&req, "action")?.unwrap_or_default().to_owned();
    submit(&state, caller.map(|axum::Extension(c)| c), k, Intent::Complete, UserTaskRecord { variables, action, ..Default::default() })
        .await
}

/// `POST …/user-tasks/{key}/assignment`: ASSIGN, or CLAIM when `allowOverride` is false.
async fn assign(
    State(state): S,
    Path(text): Path<String>,
    caller: Option<axum::Extension<waggle_gateway::Caller>>,
    bytes: Bytes,
) -> Answer {
    let k = key(&text)?;
    let req = object(&bytes)?;
    let assignee = opt_str(&req, "assignee")?.filter(|a| !a.is_empty()).ok_or_else(|| Problem::bad_request("No assignee provided."))?;
    let allow_override = match req.get("allowOverride") {
        None | Some(Value::Null) => true,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(Problem::bad_request("allowOverride must be a boolean")),
    };
    let action = opt_str(&req, "action")?.unwrap_or_default().to_owned();
    let intent = if allow_override { Intent::Assign } else { Intent::Claim };
    submit(
        &state,
        caller.map(|axum::Extension(c)| c),
        k,
        intent,
        UserTaskRecord { assignee: assignee.to_owned(), action, ..Default::default() },
    )
    .await
}

/// `DELETE …/user-tasks/{key}/assignee`: ASSIGN to nobody, action `unassign`.
async fn unassign(State(state): S, Path(text): Path<String>, caller: Option<axum::Extension<waggle_gateway::Caller>>) -> Answer {
    let k = key(&text)?;
    submit(
        &state,
        caller.map(|axum::Extension(c)| c),
        k,
        Intent::Assign,
        UserTaskRecord { action: "unassign".into(), ..Default::default() },
    )
    .await
}

/// `PATCH …/user-tasks/{key}`: the changeset's attributes that are present (null: unchanged;
/// an empty date or list clears it).
async fn update(
    State(state): S,
    Path(text): Path<String>,
    caller: Option<axum::Extension<waggle_gateway::Caller>>,
    bytes: Bytes,
) -> Answer {
    let k = key(&text)?;
    let req = object(&bytes)?;
    let action = opt_str(&req, "action")?.unwrap_or_default().to_owned();
    let mut value = UserTaskRecord { action, ..Default::default() };
    let changeset = match req.get("changeset") {
        None | Some(Value::Null) => Value::Object(Default::default()),
        Some(v @ Value::Object(_)) => v.clone(),
        Some(_) => return Err(Problem::bad_request("changeset must be an object")),
    };
    for (field, attribute) in [("dueDate", "dueDate"), ("followUpDate", "followUpDate")] {
        let Some(date) = opt_str(&changeset, field)? else { continue };
        if !date.is_empty() && !is_rfc3339(date) {
            return Err(Problem::bad_request(format!(
                "The provided {} '{date}' cannot be parsed as a date according to RFC 3339, section 5.6.",
                if field == "dueDate" { "due date" } else { "follow-up date" }
            )));
        }
        if field == "dueDate" {
            value.due_date = date.to_owned();
        } else {
            value.follow_up_date = date.to_owned();
        }
        value.changed_attributes.push(attribute.to_owned());
    }
    for (field, attribute) in [("candidateGroups", "candidateGroupsList"), ("candidateUsers", "candidateUsersList")] {
        let list = match changeset.get(field) {
            None | Some(Value::Null) => continue,
            Some(Value::Array(items)) => items
                .iter()
                .map(|i| i.as_str().map(str::to_owned).ok_or_else(|| Problem::bad_request(format!("{field} must be a list of strings"))))
                .collect::<Result<Vec<_>, _>>()?,
            Some(_) => return Err(Problem::bad_request(format!("{field} must be a list of strings"))),
        };
        if field == "candidateGroups" {
            value.candidate_groups = list;
        } else {
            value.candidate_users = list;
        }
        value.changed_attributes.push(attribute.to_owned());
    }
    if value.changed_attributes.is_empty() && value.action.is_empty() {
        return Err(Problem::bad_request(
            "No update data provided. Provide at least an \"action\" or a non-null value for a supported attribute in the \"changeset\".",
        ));
    }
    submit(&state, caller.map(|axum::Extension(c)| c), k, Intent::Update, value).await
}

/// An RFC 3339 date-time (`2023-11-11T10:10:10+01:00`, `…Z`, with or without a fraction).
fn is_rfc3339(text: &str) -> bool {
    let b = text.as_bytes();
    let digits = |r: std::ops::Range<usize>| b.get(r).is_some_and(|s| s.iter().all(u8::is_ascii_digit));
    if b.len() < 20 || !digits(0..4) || b[4] != b'-' || !digits(5..7) || b[7] != b'-' || !digits(8..10) {
        return false;
    }
    if !matches!(b[10], b'T' | b't') || !digits(11..13) || b[13] != b':' || !digits(14..16) || b[16] != b':' || !digits(17..19) {
        return false;
    }
    let mut i = 19;
    if b[i] == b'.' {
        i += 1;
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == start {
            return false;
        }
    }
    match &b[i..] {
        [b'Z' | b'z'] => true,
        [b'+' | b'-', h1, h2, b':', m1, m2] => [h1, h2, m1, m2].iter().all(|c| c.is_ascii_digit()),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::is_rfc3339;

    #[test]
    fn dates_must_be_rfc_3339() {
        assert!(is_rfc3339("2023-11-11T10:10:10+01:00"));
        assert!(is_rfc3339("2023-11-11T10:10:10.123Z"));
        assert!(!is_rfc3339("2023-11-11T10:10+01:00"));
        assert!(!is_rfc3339("tomorrow"));
        assert!(!is_rfc3339("2023-11-11T10:10:10"));
    }
}
