use waggle_protocol::value::JobRecord;
use waggle_protocol::{Intent, Record, RecordValue, RejectionType};

use crate::batch::RequestId;
use crate::behaviors::incidents::{error_type, incident};
use crate::behaviors::jobs::job_became_activatable;
use crate::elements::{self, ThrownError};
use crate::processing::P;
use crate::tables::{JobState, StoredJob};
use crate::variables;

pub(crate) fn process(p: P, command: &Record, request: Option<RequestId>) {
    let RecordValue::Job(given) = &command.value else { return };
    let verb = match command.intent {
        Intent::Complete => "complete",
        Intent::Fail => "fail",
        Intent::ThrowError => "throw an error for",
        Intent::TimeOut => "time out",
        Intent::UpdateRetries => "update retries for",
        Intent::UpdateTimeout => "update the timeout of",
        Intent::RecurAfterBackoff => "recur",
        Intent::Yield => "yield",
        Intent::Update => "update",
        _ => {
            let reason = format!("Unsupported command JOB {}", command.intent);
            return p.reject(command, request, RejectionType::InvalidArgument, reason);
        }
    };
    if command.intent == Intent::UpdateRetries && given.retries < 1 {
        // checked before the job exists, as Zeebe does
        let reason = format!(
            "Expected to update retries for job with key '{}' with a positive amount of retries, but the amount given was '{}'",
            command.key, given.retries
        );
        return p.reject(command, request, RejectionType::InvalidArgument, reason);
    }
    let Some(job) = p.view().job(command.key).filter(|j| p.may_access(&j.record.tenant_id)) else {
        let reason = format!("Expected to {verb} job with key '{}', but no such job was found", command.key);
        return p.reject(command, request, RejectionType::NotFound, reason);
    };
    match command.intent {
        Intent::Complete => complete(p, command, request, job, given),
        Intent::Fail => fail(p, command, request, job, given),
        Intent::ThrowError => throw_error(p, command, request, job, given),
        Intent::TimeOut => {
            if job.state != JobState::Activated || job.record.deadline_ms > p.now_ms {
                return; // already completed, failed or given more time
            }
            p.event(command.key, Intent::TimedOut, RecordValue::Job(job.record));
            job_became_activatable(p, command.key);
        }
        Intent::RecurAfterBackoff => {
            if job.state != JobState::Failed || job.record.recurring_time_ms == 0 || job.record.recurring_time_ms > p.now_ms {
                return;
            }
            p.event(command.key, Intent::RecurredAfterBackoff, RecordValue::Job(job.record));
            job_became_activatable(p, command.key);
        }
        Intent::Yield => {
            // a pushed job its stream could not take goes back to the pool
            if job.state != JobState::Activated {
                return;
            }
            p.event(command.key, Intent::Yielded, RecordValue::Job(job.record));
            job_became_activatable(p, command.key);
        }
        Intent::UpdateRetries => {
            let mut record = job.record;
            record.retries = given.retries;
            let event = p.event_record(command.key, Intent::RetriesUpdated, RecordValue::Job(record));
            p.respond(request, event);
        }
        Intent::Update => update(p, command, request, job, given),
        Intent::UpdateTimeout => {
            if job.state != JobState::Activated {
                let reason = format!("Expected to update the timeout of job with key '{}', but it is not active", command.key);
                return p.reject(command, request, RejectionType::NotFound, reason);
            }
            let mut record = job.record;
            record.deadline_ms = p.now_ms + given.timeout_ms;
            record.timeout_ms = given.timeout_ms;
            let event = p.event_record(command.key, Intent::TimeoutUpdated, RecordValue::Job(record));
            p.respond(request, event);
        }
        _ => unreachable!("filtered above"),
    }
}

/// JOB UPDATE (Camunda 8.8's `JobUpdateProcessor`): the changeset's retries (positive) and
/// timeout (a new deadline from now; the job must be activated) together, one UPDATED event,
/// or one INVALID_ARGUMENT rejection naming every part that is invalid.
fn update(p: P, command: &Record, request: Option<RequestId>, job: StoredJob, given: &JobRecord) {
    let mut record = job.record;
    let mut errors = Vec::new();
    if given.retries != JobRecord::UNCHANGED_RETRIES {
        if given.retries < 1 {
            errors.push(format!(
                "Expected to update retries for job with key '{}' with a positive amount of retries, but the amount given was '{}'",
                command.key, given.retries
            ));
        } else {
            record.retries = given.retries;
        }
    }
    if given.timeout_ms != JobRecord::UNCHANGED_TIMEOUT {
        if job.state != JobState::Activated {
            errors.push(format!("Expected to update the timeout of job with key '{}', but it is not active", command.key));
        } else {
            record.deadline_ms = p.now_ms.saturating_add(given.timeout_ms);
        }
    }
    if !errors.is_empty() {
        return p.reject(command, request, RejectionType::InvalidArgument, errors.join(", "));
    }
    let event = p.event_record(command.key, Intent::Updated, RecordValue::Job(record));
    p.respond(request, event);
}

fn reject_state(p: P, command: &Record, request: Option<RequestId>, verb: &str, job: &StoredJob) {
    let reason = format!("Expected to {verb} job with key '{}', but it is in state '{}'", command.key, job.state.as_str());
    p.reject(command, request, RejectionType::InvalidState, reason);
}

fn complete(p: P, command: &Record, request: Option<RequestId>, job: StoredJob, given: &JobRecord) {
    if !matches!(job.state, JobState::Activatable | JobState::Activated) {
        return reject_state(p, command, request, "complete", &job);
    }
    let vars = match p.client_document(&given.variables) {
        Ok(v) => v,
        Err(e) => {
            let reason = format!("Expected to complete job with key '{}', but the variables are invalid: {e}", command.key);
            return p.reject(command, request, RejectionType::InvalidArgument, reason);
        }
    };
    let mut record = job.record;
    record.variables = if given.variables.trim().is_empty() { "{}".into() } else { given.variables.clone() };
    let event = p.event_record(command.key, Intent::Completed, RecordValue::Job(record.clone()));
    p.respond(request, event);
    let Some(element) = p.view().element(record.element_instance_key) else { return };
    let model = p.process_model(element.record.process_definition_key);
    let has_outputs = model.element(&element.record.element_id).is_some_and(|i| !model.elements[i].outputs.is_empty());
    if has_outputs {
        variables::merge_local(p, element.key, &vars);
    } else {
        variables::merge_propagate(p, element.key, &vars);
    }
    p.command(element.key, Intent::CompleteElement, RecordValue::ProcessInstance(element.record));
}

fn fail(p: P, command: &Record, request: Option<RequestId>, job: StoredJob, given: &JobRecord) {
    if job.state != JobState::Activated {
        return reject_state(p, command, request, "fail", &job);
    }
    let vars = match p.client_document(&given.variables) {
        Ok(v) => v,
        Err(e) => {
            let reason = format!("Expected to fail job with key '{}', but the variables are invalid: {e}", command.key);
            return p.reject(command, request, RejectionType::InvalidArgument, reason);
        }
    };
    let mut record = job.record;
    record.retries = given.retries;
    record.error_message = given.error_message.clone();
    record.retry_backoff_ms = given.retry_backoff_ms;
    record.recurring_time_ms = if given.retries > 0 && given.retry_backoff_ms > 0 { p.now_ms + given.retry_backoff_ms } else { 0 };
    record.variables = if given.variables.trim().is_empty() { "{}".into() } else { given.variables.clone() };
    let event = p.event_record(command.key, Intent::Failed, RecordValue::Job(record.clone()));
    p.respond(request, event);
    if !vars.is_empty() {
        variables::merge_local(p, record.element_instance_key, &vars);
    }
    if record.retries > 0 {
        if record.recurring_time_ms == 0 {
            job_became_activatable(p, command.key);
        }
        return;
    }
    let Some(element) = p.view().element(record.element_instance_key) else { return };
    let message = if record.error_message.is_empty() { "No more retries left.".to_string() } else { record.error_message.clone() };
    incident(p, &element.record, element.key, command.key, error_type::JOB_NO_RETRIES, message);
}

fn throw_error(p: P, command: &Record, request: Option<RequestId>, job: StoredJob, given: &JobRecord) {
    if !matches!(job.state, JobState::Activatable | JobState::Activated) {
        return reject_state(p, command, request, "throw an error for", &job);
    }
    // variables that are not a document are left out, as before; too many are refused
    let vars = crate::json_doc::document_texts(&given.variables).unwrap_or_default();
    let max = p.limits.max_document_variables;
    if vars.len() > max {
        let reason = format!(
            "Expected to throw an error for job with key '{}', but the variables are invalid: it holds {} variables, more than the limit of {max} (max_document_variables)",
            command.key,
            vars.len()
        );
        return p.reject(command, request, RejectionType::InvalidArgument, reason);
    }
    let mut record = job.record;
    record.error_code = given.error_code.clone();
    record.error_message = given.error_message.clone();
    let event = p.event_record(command.key, Intent::ErrorThrown, RecordValue::Job(record.clone()));
    p.respond(request, event);
    let Some(element) = p.view().element(record.element_instance_key) else { return };
    let error = ThrownError { code: &record.error_code, message: &record.error_message, variables: &vars, job_key: command.key };
    elements::throw_error(p, element.key, &element.record, &error);
}
