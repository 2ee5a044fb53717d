//! Incidents: raising one where an element stopped, and resolving one when what it stopped
//! goes away.

use waggle_protocol::value::{IncidentRecord, ProcessInstanceRecord};
use waggle_protocol::{Intent, RecordValue};

use crate::processing::P;

/// Zeebe's incident error types used so far.
pub(crate) mod error_type {
    pub const JOB_NO_RETRIES: &str = "JOB_NO_RETRIES";
    pub const IO_MAPPING_ERROR: &str = "IO_MAPPING_ERROR";
    pub const EXTRACT_VALUE_ERROR: &str = "EXTRACT_VALUE_ERROR";
    pub const CONDITION_ERROR: &str = "CONDITION_ERROR";
    pub const UNHANDLED_ERROR_EVENT: &str = "UNHANDLED_ERROR_EVENT";
    pub const CALLED_ELEMENT_ERROR: &str = "CALLED_ELEMENT_ERROR";
    pub const CALLED_DECISION_ERROR: &str = "CALLED_DECISION_ERROR";
    pub const DECISION_EVALUATION_ERROR: &str = "DECISION_EVALUATION_ERROR";
}

/// Raises an incident for an element (job_key -1) or a job.
pub(crate) fn incident(p: P, pi: &ProcessInstanceRecord, element_key: i64, job_key: i64, error_type: &str, message: String) {
    let record = IncidentRecord {
        error_type: error_type.to_string(),
        error_message: message,
        bpmn_process_id: pi.bpmn_process_id.to_string(),
        process_definition_key: pi.process_definition_key,
        process_instance_key: pi.process_instance_key,
        element_id: pi.element_id.to_string(),
        element_instance_key: element_key,
        job_key,
        variable_scope_key: element_key,
        tenant_id: pi.tenant_id.to_string(),
    };
    let key = p.new_key();
    p.event(key, Intent::Created, RecordValue::Incident(record));
}

/// Resolves an incident (an element or job it belongs to ends).
pub(crate) fn resolve_incident_of(p: P, incident_key: Option<i64>) {
    let Some(incident_key) = incident_key else { return };
    if let Some(incident) = p.view().incident(incident_key) {
        p.event(incident_key, Intent::Resolved, RecordValue::Incident(incident));
    }
}
