//! A record as Zeebe exports it in JSON (`Record#toJson`, the shape the Elasticsearch exporter
//! writes and Operate reads): the one serializer every exporter uses.
//!
//! Field names follow Zeebe's protocol (the Elasticsearch exporter's index templates,
//! `zeebe/exporters/elasticsearch-exporter/src/main/resources/zeebe-record-*-template.json` in
//! camunda/camunda, which map every exported field strictly), as of Zeebe 8.5:
//! - top level: `partitionId`, `position`, `sourceRecordPosition` (-1 for a command from
//!   outside), `key`, `timestamp`, `recordType`, `valueType`, `intent`, `rejectionType`
//!   (`NULL_VAL` unless a rejection), `rejectionReason`, `brokerVersion`, `recordVersion`, `value`;
//! - variable documents as JSON objects, a variable's `value` as JSON text, byte arrays
//!   (resources, checksums) in base64, as Jackson writes them.
//!
//! Where Waggle's records hold less than Zeebe's, the field is still written with Zeebe's
//! "unset" value: `bpmnEventType` is `UNSPECIFIED` (the log does not carry it); a process
//! checksum is Waggle's 32-bit checksum (4 bytes) rather than
//! an MD5 digest; a command's variables are `{}` when the log form left them out (they live in
//! the VARIABLE events that follow). COMMAND_DISTRIBUTION's Waggle-only RECEIVED intent is
//! exported as it is.

use base64::Engine as _;
use serde_json::{json, Map, Value};
use waggle_protocol::record::{RecordType, Rejection};
use waggle_protocol::value::{self as v, RecordValue};
use waggle_protocol::{PartitionId, Record};

/// The broker version exported records carry: the Zeebe version whose protocol Waggle speaks.
pub const BROKER_VERSION: &str = "8.5.0";
/// Zeebe's record version of every value type Waggle writes.
pub const RECORD_VERSION: i32 = 1;
const DEFAULT_TENANT: &str = "<default>";

/// The record as one line of JSON (no line break).
pub fn to_json(partition_id: PartitionId, record: &Record) -> String {
    to_value(partition_id, record).to_string()
}

/// The record as a JSON value in Zeebe's exported shape.
pub fn to_value(partition_id: PartitionId, record: &Record) -> Value {
    let (rejection_type, rejection_reason) = match &record.rejection {
        Some(Rejection { rejection_type, reason }) => (rejection_type.as_str(), reason.as_str()),
        None => ("NULL_VAL", ""),
    };
    let source = if record.source_position == 0 { -1 } else { record.source_position as i64 };
    json!({
        "partitionId": partition_id,
        "position": record.position,
        "sourceRecordPosition": source,
        "key": record.key,
        "timestamp": record.timestamp_ms,
        "recordType": record_type(record.record_type),
        "valueType": record.value_type.as_str(),
        "intent": record.intent.as_str(),
        "rejectionType": rejection_type,
        "rejectionReason": rejection_reason,
        "brokerVersion": BROKER_VERSION,
        "recordVersion": RECORD_VERSION,
        "value": value(&record.value),
    })
}

fn record_type(t: RecordType) -> &'static str {
    match t {
        RecordType::Command => "COMMAND",
        RecordType::Event => "EVENT",
        RecordType::CommandRejection => "COMMAND_REJECTION",
    }
}

/// A variables document (JSON object text; empty when none) as a JSON object.
fn document(text: &str) -> Value {
    if text.trim().is_empty() {
        return Value::Object(Map::new());
    }
    serde_json::from_str(text).unwrap_or_else(|_| Value::Object(Map::new()))
}

fn tenant(t: &str) -> &str {
    if t.is_empty() {
        DEFAULT_TENANT
    } else {
        t
    }
}

fn base64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// The `value` object of a record, by value type.
pub fn value(value: &RecordValue) -> Value {
    match value {
        RecordValue::Deployment(d) => json!({
            "resources": d.resources.iter().map(|r| json!({
                "resourceName": r.resource_name,
                "resource": base64(&r.resource),
            })).collect::<Vec<_>>(),
            "processesMetadata": d.processes_metadata.iter().map(|p| json!({
                "bpmnProcessId": p.bpmn_process_id,
                "version": p.version,
                "processDefinitionKey": p.process_definition_key,
                "resourceName": p.resource_name,
                "checksum": base64(&p.checksum.to_be_bytes()),
                "duplicate": p.duplicate,
                "tenantId": tenant(&d.tenant_id),
            })).collect::<Vec<_>>(),
            "decisionRequirementsMetadata": d.decision_requirements_metadata.iter().map(|r| drg(r, false)).collect::<Vec<_>>(),
            "decisionsMetadata": d.decisions_metadata.iter().map(decision).collect::<Vec<_>>(),
            "formMetadata": d.form_metadata.iter().map(|f| form(f, false)).collect::<Vec<_>>(),
            "tenantId": tenant(&d.tenant_id),
        }),
        RecordValue::DecisionRequirements(r) => drg(r, true),
        RecordValue::Decision(d) => decision(d),
        RecordValue::Form(f) => form(f, true),
        RecordValue::ResourceDeletion(r) => json!({
            "resourceKey": r.resource_key,
            "tenantId": tenant(&r.tenant_id),
        }),
        RecordValue::DecisionEvaluation(e) => json!({
            "decisionKey": e.decision_key,
            "decisionId": e.decision_id,
            "decisionName": e.decision_name,
            "decisionVersion": e.decision_version,
            "decisionRequirementsId": e.decision_requirements_id,
            "decisionRequirementsKey": e.decision_requirements_key,
            "decisionOutput": e.decision_output,
            "variables": document(&e.variables),
            "bpmnProcessId": e.bpmn_process_id,
            "processDefinitionKey": e.process_definition_key,
            "processInstanceKey": e.process_instance_key,
            "elementId": e.element_id,
            "elementInstanceKey": e.element_instance_key,
            "evaluatedDecisions": e.evaluated_decisions.iter().map(|d| json!({
                "decisionId": d.decision_id,
                "decisionName": d.decision_name,
                "decisionKey": d.decision_key,
                "decisionVersion": d.decision_version,
                "decisionType": d.decision_type,
                "decisionOutput": d.decision_output,
                "evaluatedInputs": d.evaluated_inputs.iter().map(|i| json!({
                    "inputId": i.input_id,
                    "inputName": i.input_name,
                    "inputValue": i.input_value,
                })).collect::<Vec<_>>(),
                "matchedRules": d.matched_rules.iter().map(|r| json!({
                    "ruleId": r.rule_id,
                    "ruleIndex": r.rule_index,
                    "evaluatedOutputs": r.evaluated_outputs.iter().map(|o| json!({
                        "outputId": o.output_id,
                        "outputName": o.output_name,
                        "outputValue": o.output_value,
                    })).collect::<Vec<_>>(),
                })).collect::<Vec<_>>(),
                "tenantId": tenant(&d.tenant_id),
            })).collect::<Vec<_>>(),
            "evaluationFailureMessage": e.evaluation_failure_message,
            "failedDecisionId": e.failed_decision_id,
            "tenantId": tenant(&e.tenant_id),
        }),
        RecordValue::Process(p) => json!({
            "bpmnProcessId": p.bpmn_process_id,
            "version": p.version,
            "processDefinitionKey": p.process_definition_key,
            "resourceName": p.resource_name,
            "resource": base64(&p.resource),
            "checksum": base64(&p.checksum.to_be_bytes()),
            "duplicate": false,
            "tenantId": tenant(&p.tenant_id),
        }),
        RecordValue::ProcessInstance(p) => json!({
            "bpmnProcessId": &*p.bpmn_process_id,
            "version": p.version,
            "processDefinitionKey": p.process_definition_key,
            "processInstanceKey": p.process_instance_key,
            "elementId": &*p.element_id,
            "flowScopeKey": p.flow_scope_key,
            "bpmnElementType": &*p.bpmn_element_type,
            "bpmnEventType": "UNSPECIFIED",
            "parentProcessInstanceKey": p.parent_process_instance_key,
            "parentElementInstanceKey": p.parent_element_instance_key,
            "tenantId": tenant(&p.tenant_id),
        }),
        RecordValue::ProcessInstanceCreation(c) => json!({
            "bpmnProcessId": c.bpmn_process_id,
            "version": c.version,
            "processDefinitionKey": c.process_definition_key,
            "processInstanceKey": c.process_instance_key,
            "variables": document(&c.variables),
            "startInstructions": c.start_instructions.iter().map(|e| json!({ "elementId": e })).collect::<Vec<_>>(),
            "tenantId": tenant(&c.tenant_id),
        }),
        RecordValue::ProcessInstanceResult(r) => json!({
            "bpmnProcessId": r.bpmn_process_id,
            "version": r.version,
            "processDefinitionKey": r.process_definition_key,
            "processInstanceKey": r.process_instance_key,
            "variables": document(&r.variables),
            "tenantId": tenant(&r.tenant_id),
        }),
        RecordValue::Job(j) => job(j),
        RecordValue::JobBatch(b) => json!({
            "type": b.job_type,
            "worker": b.worker,
            "timeout": b.timeout_ms,
            "maxJobsToActivate": b.max_jobs_to_activate,
            "jobKeys": b.job_keys,
            "jobs": b.jobs.iter().map(job).collect::<Vec<_>>(),
            "truncated": b.truncated,
            "tenantIds": b.tenants(),
        }),
        RecordValue::Variable(x) => json!({
            "name": x.name,
            "value": x.value,
            "scopeKey": x.scope_key,
            "processInstanceKey": x.process_instance_key,
            "processDefinitionKey": x.process_definition_key,
            "bpmnProcessId": x.bpmn_process_id,
            "tenantId": tenant(&x.tenant_id),
        }),
        RecordValue::VariableDocument(d) => json!({
            "scopeKey": d.scope_key,
            "updateSemantics": match d.update_semantics {
                v::UpdateSemantics::Local => "LOCAL",
                v::UpdateSemantics::Propagate => "PROPAGATE",
            },
            "variables": document(&d.variables),
            "tenantId": DEFAULT_TENANT,
        }),
        RecordValue::Incident(i) => json!({
            "errorType": i.error_type,
            "errorMessage": i.error_message,
            "bpmnProcessId": i.bpmn_process_id,
            "processDefinitionKey": i.process_definition_key,
            "processInstanceKey": i.process_instance_key,
            "elementId": i.element_id,
            "elementInstanceKey": i.element_instance_key,
            "jobKey": i.job_key,
            "variableScopeKey": i.variable_scope_key,
            "tenantId": tenant(&i.tenant_id),
        }),
        RecordValue::Message(m) => json!({
            "name": m.name,
            "correlationKey": m.correlation_key,
            "timeToLive": m.time_to_live_ms,
            "messageId": m.message_id,
            "variables": document(&m.variables),
            "deadline": m.deadline_ms,
            "tenantId": tenant(&m.tenant_id),
        }),
        RecordValue::Timer(t) => json!({
            "elementInstanceKey": t.element_instance_key,
            "processInstanceKey": t.process_instance_key,
            "processDefinitionKey": t.process_definition_key,
            "targetElementId": t.target_element_id,
            "dueDate": t.due_date_ms,
            "repetitions": t.repetitions,
            "tenantId": tenant(&t.tenant_id),
        }),
        RecordValue::MessageSubscription(s) => json!({
            "processInstanceKey": s.process_instance_key,
            "elementInstanceKey": s.element_instance_key,
            "bpmnProcessId": s.bpmn_process_id,
            "messageName": s.message_name,
            "correlationKey": s.correlation_key,
            "messageKey": s.message_key,
            "variables": document(&s.variables),
            "interrupting": s.interrupting,
            "tenantId": tenant(&s.tenant_id),
        }),
        RecordValue::ProcessMessageSubscription(s) => json!({
            "processInstanceKey": s.process_instance_key,
            "elementInstanceKey": s.element_instance_key,
            "bpmnProcessId": s.bpmn_process_id,
            "elementId": s.element_id,
            "messageName": s.message_name,
            "correlationKey": s.correlation_key,
            "messageKey": s.message_key,
            "variables": document(&s.variables),
            "interrupting": s.interrupting,
            "tenantId": tenant(&s.tenant_id),
        }),
        RecordValue::MessageStartEventSubscription(s) => json!({
            "processDefinitionKey": s.process_definition_key,
            "bpmnProcessId": s.bpmn_process_id,
            "startEventId": s.start_event_id,
            "messageName": s.message_name,
            "messageKey": s.message_key,
            "correlationKey": s.correlation_key,
            "processInstanceKey": s.process_instance_key,
            "variables": document(&s.variables),
            "tenantId": tenant(&s.tenant_id),
        }),
        RecordValue::Signal(s) => json!({
            "signalName": s.signal_name,
            "variables": document(&s.variables),
            "tenantId": tenant(&s.tenant_id),
        }),
        RecordValue::SignalSubscription(s) => json!({
            "processDefinitionKey": s.process_definition_key,
            "bpmnProcessId": s.bpmn_process_id,
            "catchEventId": s.catch_event_id,
            "catchEventInstanceKey": s.catch_event_instance_key,
            "signalName": s.signal_name,
            "tenantId": tenant(&s.tenant_id),
        }),
        RecordValue::CommandDistribution(d) => json!({
            "partitionId": d.partition_id,
            "valueType": d.value_type.as_str(),
            "intent": d.intent.as_str(),
            "commandValue": d.command_value.as_deref().map_or_else(|| Value::Object(Map::new()), self::value),
        }),
        RecordValue::ProcessInstanceModification(m) => json!({
            "processInstanceKey": m.process_instance_key,
            "terminateInstructions": m.terminate_instructions.iter().map(|k| json!({"elementInstanceKey": k})).collect::<Vec<_>>(),
            "activateInstructions": m.activate_instructions.iter().map(|a| json!({
                "elementId": a.element_id,
                "ancestorScopeKey": a.ancestor_scope_key,
                "variableInstructions": a.variable_instructions.iter().map(|v| json!({
                    "elementId": v.element_id,
                    "variables": document(&v.variables),
                })).collect::<Vec<_>>(),
                "ancestorScopeKeys": a.ancestor_scope_keys,
            })).collect::<Vec<_>>(),
            "tenantId": DEFAULT_TENANT,
        }),
        RecordValue::ProcessInstanceBatch(b) => json!({
            "processInstanceKey": b.process_instance_key,
            "batchElementInstanceKey": b.batch_element_instance_key,
            "index": b.index,
            "tenantId": tenant(&b.tenant_id),
        }),
        RecordValue::ProcessInstanceMigration(m) => json!({
            "processInstanceKey": m.process_instance_key,
            "targetProcessDefinitionKey": m.target_process_definition_key,
            "mappingInstructions": m.mapping_instructions.iter().map(|(s, t)| json!({
                "sourceElementId": s,
                "targetElementId": t,
            })).collect::<Vec<_>>(),
            "tenantId": DEFAULT_TENANT,
        }),
        RecordValue::CompensationSubscription(c) => json!({
            "tenantId": tenant(&c.tenant_id),
            "processInstanceKey": c.process_instance_key,
            "processDefinitionKey": c.process_definition_key,
            "compensableActivityId": c.compensable_activity_id,
            "compensableActivityScopeId": c.compensable_activity_scope_id,
            "compensableActivityInstanceKey": c.compensable_activity_instance_key,
            "compensableActivityScopeKey": c.compensable_activity_scope_key,
            "throwEventId": c.throw_event_id,
            "throwEventInstanceKey": c.throw_event_instance_key,
            "compensationHandlerId": c.compensation_handler_id,
            "compensationHandlerInstanceKey": c.compensation_handler_instance_key,
            "variables": document(&c.variables),
        }),
        RecordValue::UserTask(u) => json!({
            "userTaskKey": u.user_task_key,
            "assignee": u.assignee,
            "candidateGroupsList": u.candidate_groups,
            "candidateUsersList": u.candidate_users,
            "dueDate": u.due_date,
            "followUpDate": u.follow_up_date,
            "formKey": u.form_key,
            "changedAttributes": u.changed_attributes,
            "variables": document(&u.variables),
            "bpmnProcessId": u.bpmn_process_id,
            "processDefinitionVersion": u.process_definition_version,
            "processDefinitionKey": u.process_definition_key,
            "processInstanceKey": u.process_instance_key,
            "elementId": u.element_id,
            "elementInstanceKey": u.element_instance_key,
            "tenantId": tenant(&u.tenant_id),
            "externalFormReference": u.external_form_reference,
            "customHeaders": document(&u.custom_headers),
            "action": u.action,
            "creationTimestamp": u.creation_timestamp,
        }),
        // Zeebe 8.8's MessageCorrelationRecord; request ids are the broker's and not logged
        RecordValue::MessageCorrelation(c) => json!({
            "name": c.name,
            "correlationKey": c.correlation_key,
            "variables": document(&c.variables),
            "tenantId": tenant(&c.tenant_id),
            "messageKey": c.message_key,
            "processInstanceKey": c.process_instance_key,
            "requestId": -1,
            "requestStreamId": -1,
        }),
        // Zeebe's ProcessEventRecord
        RecordValue::ProcessEvent(e) => json!({
            "scopeKey": e.scope_key,
            "targetElementId": e.target_element_id,
            "variables": document(&e.variables),
            "processDefinitionKey": e.process_definition_key,
            "processInstanceKey": e.process_instance_key,
            "tenantId": tenant(&e.tenant_id),
        }),
        // Zeebe's CheckpointRecord
        RecordValue::Checkpoint(c) => json!({
            "checkpointId": c.checkpoint_id,
            "checkpointPosition": c.checkpoint_position,
        }),
        // Zeebe 8.8's ScaleRecord
        RecordValue::Scale(s) => json!({
            "currentPartitionCount": s.current_partition_count,
            "desiredPartitionCount": s.desired_partition_count,
            "redistributedPartitions": s.redistributed_partitions,
        }),
        // Waggle's own: correlation keys moving to a grown partition count (each message and
        // subscription as its own record renders it)
        RecordValue::MessageRelocation(r) => json!({
            "partitionCount": r.partition_count,
            "desiredPartitionCount": r.desired_partition_count,
            "correlationKey": r.correlation_key,
            "messages": r.messages.iter().map(|m| {
                let mut message = crate::json::value(&RecordValue::Message(m.message.clone()));
                message["messageKey"] = json!(m.message_key);
                message["correlatedProcesses"] = json!(m.correlated_processes);
                message
            }).collect::<Vec<_>>(),
            "subscriptions": r.subscriptions.iter().map(|s| crate::json::value(&RecordValue::MessageSubscription(s.clone()))).collect::<Vec<_>>(),
            "startedInstances": r.started_instances.iter().map(|s| json!({
                "tenantId": tenant(&s.tenant_id),
                "bpmnProcessId": s.bpmn_process_id,
                "processInstanceKey": s.process_instance_key,
            })).collect::<Vec<_>>(),
        }),
    }
}

/// DECISION_REQUIREMENTS (`with_resource`) or an entry of a deployment's metadata.
fn drg(r: &v::DecisionRequirementsRecord, with_resource: bool) -> Value {
    let mut value = json!({
        "decisionRequirementsId": r.decision_requirements_id,
        "decisionRequirementsName": r.decision_requirements_name,
        "decisionRequirementsVersion": r.decision_requirements_version,
        "decisionRequirementsKey": r.decision_requirements_key,
        "namespace": r.namespace,
        "resourceName": r.resource_name,
        "checksum": base64(&r.checksum.to_be_bytes()),
        "duplicate": r.duplicate,
        "tenantId": tenant(&r.tenant_id),
    });
    if with_resource {
        value["resource"] = json!(base64(&r.resource));
    }
    value
}

fn decision(d: &v::DecisionRecord) -> Value {
    json!({
        "decisionId": d.decision_id,
        "decisionName": d.decision_name,
        "version": d.version,
        "decisionKey": d.decision_key,
        "decisionRequirementsId": d.decision_requirements_id,
        "decisionRequirementsKey": d.decision_requirements_key,
        "duplicate": d.duplicate,
        "tenantId": tenant(&d.tenant_id),
    })
}

/// FORM (`with_resource`) or an entry of a deployment's metadata.
fn form(f: &v::FormRecord, with_resource: bool) -> Value {
    let mut value = json!({
        "formId": f.form_id,
        "version": f.version,
        "formKey": f.form_key,
        "resourceName": f.resource_name,
        "checksum": base64(&f.checksum.to_be_bytes()),
        "duplicate": f.duplicate,
        "tenantId": tenant(&f.tenant_id),
    });
    if with_resource {
        value["resource"] = json!(base64(&f.resource));
    }
    value
}

fn job(j: &v::JobRecord) -> Value {
    json!({
        "type": &*j.job_type,
        "worker": &*j.worker,
        "retries": j.retries,
        "retryBackoff": j.retry_backoff_ms,
        "recurringTime": j.recurring_time_ms,
        "deadline": j.deadline_ms,
        "timeout": j.timeout_ms,
        "errorMessage": j.error_message,
        "errorCode": j.error_code,
        "customHeaders": document(&j.custom_headers),
        "variables": document(&j.variables),
        "bpmnProcessId": &*j.bpmn_process_id,
        "processDefinitionKey": j.process_definition_key,
        "processDefinitionVersion": j.process_definition_version,
        "processInstanceKey": j.process_instance_key,
        "elementId": &*j.element_id,
        "elementInstanceKey": j.element_instance_key,
        "tenantId": tenant(&j.tenant_id),
    })
}

#[cfg(test)]
mod tests;
