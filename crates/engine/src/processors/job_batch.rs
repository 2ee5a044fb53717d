use serde_json::Value as Json;
use waggle_protocol::value::JobBatchRecord;
use waggle_protocol::{Intent, Record, RecordValue};

use crate::processing::{Command, Processing, RequestId};
use crate::variables;

/// True when an activation command would find no job: it is then answered without a record.
pub(crate) fn nothing_to_activate(p: &Processing<'_, '_, '_>, command: &Command) -> bool {
    match &command.value {
        RecordValue::JobBatch(batch) => p.view().activatable_jobs(&batch.job_type, 1).is_empty(),
        _ => false,
    }
}

/// JOB_BATCH ACTIVATE: activates up to `max_jobs_to_activate` jobs of the type, oldest first,
/// each with the variables visible from its element (or only `fetch_variables`).
pub(crate) fn activate(p: &mut Processing<'_, '_, '_>, command: &Record, request: Option<RequestId>) {
    let RecordValue::JobBatch(batch) = &command.value else { return };
    let max = batch.max_jobs_to_activate.max(0) as usize;
    let keys = p.view().activatable_jobs(&batch.job_type, max);
    let mut jobs = Vec::with_capacity(keys.len());
    for key in &keys {
        let Some(job) = p.view().job(*key) else { continue };
        let mut record = job.record;
        let vars = variables::visible_variables(p.view(), record.element_instance_key, &batch.fetch_variables);
        record.variables = Json::Object(vars).to_string();
        record.worker = batch.worker.clone();
        record.timeout_ms = batch.timeout_ms;
        record.deadline_ms = p.now_ms + batch.timeout_ms;
        jobs.push(record);
    }
    let activated = JobBatchRecord { job_keys: keys, jobs, ..batch.clone() };
    let key = p.new_key();
    let event = p.event_record(key, Intent::Activated, RecordValue::JobBatch(activated));
    p.respond(request, event);
}
