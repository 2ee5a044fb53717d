use waggle_protocol::value::JobBatchRecord;
use waggle_protocol::{Intent, Record, RecordValue};

use crate::batch::{Command, RequestId};
use crate::processing::Processing;
use crate::variables;

/// The jobs an activation command would take (up to its maximum, oldest first); `None` for
/// other commands. Read before the command is written: an activation that finds no job is
/// answered without a record, and one that finds jobs takes exactly these.
pub(crate) fn jobs_to_activate(p: &Processing<'_, '_, '_>, command: &Command) -> Option<Vec<i64>> {
    match &command.value {
        RecordValue::JobBatch(batch) if command.intent == Intent::Activate => {
            Some(p.view().activatable_jobs(&batch.job_type, &batch.tenants(), batch.max_jobs_to_activate.max(0) as usize))
        }
        _ => None,
    }
}

/// JOB_BATCH ACTIVATE: activates (the prefetched jobs, or) up to `max_jobs_to_activate` jobs of the type, oldest first,
/// of the batch's tenants only (Zeebe 8.5's `tenantIds`), each with the variables visible from its element (or only `fetch_variables`).
pub(crate) fn activate(p: &mut Processing<'_, '_, '_>, command: &Record, request: Option<RequestId>) {
    let RecordValue::JobBatch(batch) = &command.value else { return };
    let keys = match p.take_prefetched_activation() {
        Some(keys) => keys,
        None => p.view().activatable_jobs(&batch.job_type, &batch.tenants(), batch.max_jobs_to_activate.max(0) as usize),
    };
    let mut jobs = Vec::with_capacity(keys.len());
    for key in &keys {
        let Some(job) = p.view().job(*key) else { continue };
        let mut record = job.record;
        record.variables = variables::visible_variables(p.view(), record.element_instance_key, &batch.fetch_variables).into();
        record.worker = (&batch.worker).into();
        record.timeout_ms = batch.timeout_ms;
        record.deadline_ms = p.now_ms + batch.timeout_ms;
        jobs.push(record);
    }
    let activated = JobBatchRecord { job_keys: keys, jobs, ..batch.clone() };
    let key = p.new_key();
    let event = p.event_record(key, Intent::Activated, RecordValue::JobBatch(activated));
    p.respond(request, event);
}
