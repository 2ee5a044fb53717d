//! Jobs of the elements that create them: the job a task definition describes, handing a job
//! that can be taken to a worker's stream (or announcing it), and cancelling one.

use serde_json::{Map, Value as Json};
use waggle_bpmn::{ExprOrStatic, TaskDefinition};
use waggle_feel::Value;
use waggle_protocol::value::{JobBatchRecord, JobRecord, ProcessInstanceRecord};
use waggle_protocol::{Intent, RecordValue};

use crate::batch::SideEffect;
use crate::behaviors::expressions::{eval_number, string_of};
use crate::behaviors::incidents::resolve_incident_of;
use crate::processing::P;
use crate::variables::{self, evaluate};

/// The job element instance `key` (of `pi`) creates, with its type, retries and headers
/// evaluated in its scope; an error message (for an incident) when an expression fails.
pub(crate) fn job_record(p: P, key: i64, pi: &ProcessInstanceRecord, def: &TaskDefinition) -> Result<JobRecord, String> {
    let lookup_scope = key;
    let job_type = string_of(p, lookup_scope, &def.job_type)?;
    let retries = eval_number(p, lookup_scope, &def.retries)?;
    let mut headers = Map::new();
    for (name, value) in &def.headers {
        let text = match value {
            ExprOrStatic::Static(s) => s.clone(),
            ExprOrStatic::Expression(e) => match evaluate(p, lookup_scope, e)? {
                Value::String(s) => s,
                Value::Null => continue,
                // lists (candidate groups and users) and dates as Zeebe writes them
                other => match other.to_json() {
                    Json::String(s) => s,
                    json => json.to_string(),
                },
            },
        };
        headers.insert(name.clone(), Json::String(text));
    }
    Ok(JobRecord {
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
    })
}

/// Cancels a job whose element instance terminates, resolving its incident first.
pub(crate) fn cancel(p: P, job_key: i64) {
    if let Some(job) = p.view().job(job_key) {
        resolve_incident_of(p, p.view().job_incident(job_key));
        p.event(job_key, Intent::Canceled, RecordValue::Job(job.record));
    }
}

/// A job can be taken: push it to an open job stream, or announce it to long-polling requests.
pub(crate) fn job_became_activatable(p: P, job_key: i64) {
    let Some(job) = p.view().job(job_key) else { return };
    match p.job_streams.stream_for_tenant(&job.record.job_type, &job.record.tenant_id) {
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
                // the job's tenant (the default one's batch keeps its layout: see JobBatchRecord)
                tenant_ids: if waggle_protocol::is_default_tenant(&record.tenant_id) {
                    Vec::new()
                } else {
                    vec![record.tenant_id.to_string()]
                },
            };
            let batch_key = p.new_key();
            p.event(batch_key, Intent::Activated, RecordValue::JobBatch(batch));
            p.side_effect(SideEffect::PushJob { stream_id: stream.stream_id, job_key, job: Box::new(record) });
        }
        None => p.side_effect(SideEffect::JobsAvailable { job_type: job.record.job_type.into() }),
    }
}
