//! The process itself: its activation opens its event subprocesses' start events and enters
//! its start event (or where start instructions say); its completion answers a creation that
//! awaits the result; its end lets a buffered message start the next instance.

use waggle_bpmn::Process;
use waggle_protocol::value::{ProcessInstanceRecord, ProcessInstanceResultRecord};
use waggle_protocol::{Intent, Record, RecordType, RecordValue, ValueType};

use crate::behaviors::flows::start_inside;
use crate::behaviors::incidents::{error_type, incident};
use crate::behaviors::{starts, waits};
use crate::processing::P;
use crate::variables;

/// Activation of the process instance `key` (ACTIVATING written).
pub(crate) fn activate(p: P, model: &Process, key: i64, pi: ProcessInstanceRecord) {
    let waits = match waits::event_subprocess_waits(p, model, None, key) {
        Ok(waits) => waits,
        Err(message) => return incident(p, &pi, key, -1, error_type::EXTRACT_VALUE_ERROR, message),
    };
    waits::open(p, &pi, key, waits);
    p.event(key, Intent::ElementActivated, RecordValue::ProcessInstance(pi.clone()));
    let starts = p.take_start_elements(key).unwrap_or_else(|| model.start.into_iter().collect());
    start_inside(p, model, &pi, key, None, starts);
}

/// Completion of the process instance `key` (COMPLETING written): COMPLETED, and the answer
/// to a creation awaiting the result.
pub(crate) fn complete(p: P, model: &Process, key: i64, pi: ProcessInstanceRecord) {
    let awaiting = p.take_awaiting_result(key);
    let result_vars = awaiting.as_ref().map(|(_, names)| variables::visible_variables(p.view(), key, names));
    let started_by = p.view().started_by_message(key);
    let pi_tenant = pi.tenant_id.to_string();
    waits::close(p, model, &pi.element_id, key);
    let completed = p.event_record(key, Intent::ElementCompleted, RecordValue::ProcessInstance(pi.clone()));
    if let Some((bpmn_process_id, correlation_key)) = started_by {
        starts::message_started_instance_ended(p, &pi_tenant, &bpmn_process_id, &correlation_key, key);
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

/// The process instance `key` terminates (TERMINATING written, everything inside terminated,
/// its waits closed): TERMINATED; a creation awaiting its result gets no answer.
pub(crate) fn terminated(p: P, key: i64, record: &ProcessInstanceRecord) {
    let started_by = p.view().started_by_message(key);
    let pi_tenant = record.tenant_id.to_string();
    p.event(key, Intent::ElementTerminated, RecordValue::ProcessInstance(record.clone()));
    if let Some((bpmn_process_id, correlation_key)) = started_by {
        starts::message_started_instance_ended(p, &pi_tenant, &bpmn_process_id, &correlation_key, key);
    }
    // nobody will see a result
    let _ = p.take_awaiting_result(key);
}
