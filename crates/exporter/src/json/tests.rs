//! Every value type against Zeebe's exported field names (the Elasticsearch exporter's
//! `zeebe-record-<value type>-template.json`, 8.5 fields; see the module's documentation).

use serde_json::Value;
use waggle_protocol::record::{Intent, RecordType, Rejection, RejectionType, ValueType};
use waggle_protocol::value::*;
use waggle_protocol::{Record, RecordValue};

use super::*;

fn record(value_type: ValueType, value: RecordValue) -> Record {
    Record {
        position: 7,
        source_position: 0,
        key: 2251799813685249,
        timestamp_ms: 1_700_000_000_000,
        record_type: RecordType::Event,
        value_type,
        intent: Intent::Created,
        rejection: None,
        value,
    }
}

fn keys(v: &Value) -> Vec<&str> {
    v.as_object().expect("an object").keys().map(String::as_str).collect()
}

fn job_record() -> JobRecord {
    JobRecord {
        job_type: "payment".into(),
        custom_headers: r#"{"h":"1"}"#.into(),
        variables: r#"{"a":1}"#.into(),
        tenant_id: "<default>".into(),
        ..Default::default()
    }
}

const JOB_FIELDS: &[&str] = &[
    "type",
    "worker",
    "retries",
    "retryBackoff",
    "recurringTime",
    "deadline",
    "timeout",
    "errorMessage",
    "errorCode",
    "customHeaders",
    "variables",
    "bpmnProcessId",
    "processDefinitionKey",
    "processDefinitionVersion",
    "processInstanceKey",
    "elementId",
    "elementInstanceKey",
    "tenantId",
];

#[test]
fn the_record_envelope_has_zeebes_fields() {
    let mut r = record(ValueType::ProcessInstance, RecordValue::ProcessInstance(ProcessInstanceRecord::default()));
    let v = to_value(3, &r);
    assert_eq!(
        keys(&v),
        [
            "partitionId",
            "position",
            "sourceRecordPosition",
            "key",
            "timestamp",
            "recordType",
            "valueType",
            "intent",
            "rejectionType",
            "rejectionReason",
            "brokerVersion",
            "recordVersion",
            "value"
        ]
    );
    assert_eq!(v["partitionId"], 3);
    assert_eq!(v["position"], 7);
    assert_eq!(v["sourceRecordPosition"], -1, "a command from outside has no source");
    assert_eq!(v["key"], 2251799813685249i64);
    assert_eq!(v["recordType"], "EVENT");
    assert_eq!(v["valueType"], "PROCESS_INSTANCE");
    assert_eq!(v["intent"], "CREATED");
    assert_eq!(v["rejectionType"], "NULL_VAL");
    assert_eq!(v["rejectionReason"], "");
    assert_eq!(v["brokerVersion"], BROKER_VERSION);
    assert_eq!(v["recordVersion"], 1);
    r.record_type = RecordType::CommandRejection;
    r.source_position = 5;
    r.rejection = Some(Rejection { rejection_type: RejectionType::NotFound, reason: "no such thing".into() });
    let v = to_value(1, &r);
    assert_eq!(v["recordType"], "COMMAND_REJECTION");
    assert_eq!(v["sourceRecordPosition"], 5);
    assert_eq!(v["rejectionType"], "NOT_FOUND");
    assert_eq!(v["rejectionReason"], "no such thing");
    let line = to_json(1, &r);
    assert!(!line.contains('\n'));
    assert_eq!(serde_json::from_str::<Value>(&line).unwrap(), v);
}

/// One record of every value type, its value's field names, and a few values.
#[test]
fn every_value_type_has_zeebes_field_names() {
    let cases: Vec<(RecordValue, &[&str])> = vec![
        (
            RecordValue::Deployment(DeploymentRecord {
                resources: vec![DeploymentResource { resource_name: "a.bpmn".into(), resource: b"<xml/>".to_vec() }],
                processes_metadata: vec![ProcessMetadata {
                    bpmn_process_id: "p".into(),
                    version: 1,
                    process_definition_key: 9,
                    resource_name: "a.bpmn".into(),
                    checksum: 1,
                    duplicate: false,
                }],
                tenant_id: "<default>".into(),
                ..Default::default()
            }),
            &["resources", "processesMetadata", "decisionRequirementsMetadata", "decisionsMetadata", "formMetadata", "tenantId"],
        ),
        (
            RecordValue::Process(ProcessRecord {
                bpmn_process_id: "p".into(),
                version: 1,
                process_definition_key: 9,
                resource_name: "a.bpmn".into(),
                resource: b"<xml/>".to_vec(),
                checksum: 1,
                tenant_id: "<default>".into(),
            }),
            &["bpmnProcessId", "version", "processDefinitionKey", "resourceName", "resource", "checksum", "duplicate", "tenantId"],
        ),
        (
            RecordValue::ProcessInstance(ProcessInstanceRecord::default()),
            &[
                "bpmnProcessId",
                "version",
                "processDefinitionKey",
                "processInstanceKey",
                "elementId",
                "flowScopeKey",
                "bpmnElementType",
                "bpmnEventType",
                "parentProcessInstanceKey",
                "parentElementInstanceKey",
                "tenantId",
            ],
        ),
        (
            RecordValue::ProcessInstanceCreation(ProcessInstanceCreationRecord {
                variables: r#"{"x":1}"#.into(),
                start_instructions: vec!["task".into()],
                ..Default::default()
            }),
            &["bpmnProcessId", "version", "processDefinitionKey", "processInstanceKey", "variables", "startInstructions", "tenantId"],
        ),
        (
            RecordValue::ProcessInstanceResult(ProcessInstanceResultRecord::default()),
            &["bpmnProcessId", "version", "processDefinitionKey", "processInstanceKey", "variables", "tenantId"],
        ),
        (RecordValue::Job(job_record()), JOB_FIELDS),
        (
            RecordValue::JobBatch(JobBatchRecord { job_keys: vec![1], jobs: vec![job_record()], ..Default::default() }),
            &["type", "worker", "timeout", "maxJobsToActivate", "jobKeys", "jobs", "truncated", "tenantIds"],
        ),
        (
            RecordValue::Variable(VariableRecord { name: "x".into(), value: "\"text\"".into(), ..Default::default() }),
            &["name", "value", "scopeKey", "processInstanceKey", "processDefinitionKey", "bpmnProcessId", "tenantId"],
        ),
        (
            RecordValue::VariableDocument(VariableDocumentRecord {
                scope_key: 1,
                update_semantics: UpdateSemantics::Local,
                variables: "{}".into(),
            }),
            &["scopeKey", "updateSemantics", "variables", "tenantId"],
        ),
        (
            RecordValue::Incident(IncidentRecord::default()),
            &[
                "errorType",
                "errorMessage",
                "bpmnProcessId",
                "processDefinitionKey",
                "processInstanceKey",
                "elementId",
                "elementInstanceKey",
                "jobKey",
                "variableScopeKey",
                "tenantId",
            ],
        ),
        (
            RecordValue::Message(MessageRecord::default()),
            &["name", "correlationKey", "timeToLive", "messageId", "variables", "deadline", "tenantId"],
        ),
        (
            RecordValue::Timer(TimerRecord::default()),
            &["elementInstanceKey", "processInstanceKey", "processDefinitionKey", "targetElementId", "dueDate", "repetitions", "tenantId"],
        ),
        (
            RecordValue::MessageSubscription(MessageSubscriptionRecord::default()),
            &[
                "processInstanceKey",
                "elementInstanceKey",
                "bpmnProcessId",
                "messageName",
                "correlationKey",
                "messageKey",
                "variables",
                "interrupting",
                "tenantId",
            ],
        ),
        (
            RecordValue::ProcessMessageSubscription(ProcessMessageSubscriptionRecord::default()),
            &[
                "processInstanceKey",
                "elementInstanceKey",
                "bpmnProcessId",
                "elementId",
                "messageName",
                "correlationKey",
                "messageKey",
                "variables",
                "interrupting",
                "tenantId",
            ],
        ),
        (
            RecordValue::MessageStartEventSubscription(MessageStartEventSubscriptionRecord::default()),
            &[
                "processDefinitionKey",
                "bpmnProcessId",
                "startEventId",
                "messageName",
                "messageKey",
                "correlationKey",
                "processInstanceKey",
                "variables",
                "tenantId",
            ],
        ),
        (RecordValue::Signal(SignalRecord::default()), &["signalName", "variables", "tenantId"]),
        (
            RecordValue::SignalSubscription(SignalSubscriptionRecord::default()),
            &["processDefinitionKey", "bpmnProcessId", "catchEventId", "catchEventInstanceKey", "signalName", "tenantId"],
        ),
        (
            RecordValue::CommandDistribution(CommandDistributionRecord {
                partition_id: 2,
                value_type: ValueType::Deployment,
                intent: Intent::Create,
                command_key: 5,
                command_value: Some(Box::new(RecordValue::Signal(SignalRecord::default()))),
                acknowledged_below: 0,
            }),
            &["partitionId", "valueType", "intent", "commandValue"],
        ),
        (
            RecordValue::ProcessInstanceModification(ProcessInstanceModificationRecord {
                process_instance_key: 1,
                activate_instructions: vec![ActivateInstruction {
                    element_id: "task".into(),
                    ancestor_scope_key: -1,
                    variable_instructions: vec![VariableInstruction { element_id: "".into(), variables: r#"{"x":1}"#.into() }],
                    ancestor_scope_keys: vec![1],
                }],
                terminate_instructions: vec![2],
            }),
            &["processInstanceKey", "terminateInstructions", "activateInstructions", "tenantId"],
        ),
        (
            RecordValue::ProcessInstanceMigration(ProcessInstanceMigrationRecord {
                process_instance_key: 1,
                target_process_definition_key: 2,
                mapping_instructions: vec![("a".into(), "b".into())],
            }),
            &["processInstanceKey", "targetProcessDefinitionKey", "mappingInstructions", "tenantId"],
        ),
        (
            RecordValue::ProcessInstanceBatch(ProcessInstanceBatchRecord {
                process_instance_key: 1,
                batch_element_instance_key: 2,
                index: 3,
                tenant_id: "".into(),
            }),
            &["processInstanceKey", "batchElementInstanceKey", "index", "tenantId"],
        ),
        (
            RecordValue::DecisionRequirements(DecisionRequirementsRecord::default()),
            &[
                "decisionRequirementsId",
                "decisionRequirementsName",
                "decisionRequirementsVersion",
                "decisionRequirementsKey",
                "namespace",
                "resourceName",
                "checksum",
                "duplicate",
                "tenantId",
                "resource",
            ],
        ),
        (
            RecordValue::Decision(DecisionRecord::default()),
            &[
                "decisionId",
                "decisionName",
                "version",
                "decisionKey",
                "decisionRequirementsId",
                "decisionRequirementsKey",
                "duplicate",
                "tenantId",
            ],
        ),
        (
            RecordValue::DecisionEvaluation(DecisionEvaluationRecord {
                variables: r#"{"x":1}"#.into(),
                evaluated_decisions: vec![EvaluatedDecisionValue {
                    evaluated_inputs: vec![EvaluatedInputValue::default()],
                    matched_rules: vec![MatchedRuleValue {
                        evaluated_outputs: vec![EvaluatedOutputValue::default()],
                        ..Default::default()
                    }],
                    ..Default::default()
                }],
                ..Default::default()
            }),
            &[
                "decisionKey",
                "decisionId",
                "decisionName",
                "decisionVersion",
                "decisionRequirementsId",
                "decisionRequirementsKey",
                "decisionOutput",
                "variables",
                "bpmnProcessId",
                "processDefinitionKey",
                "processInstanceKey",
                "elementId",
                "elementInstanceKey",
                "evaluatedDecisions",
                "evaluationFailureMessage",
                "failedDecisionId",
                "tenantId",
            ],
        ),
        (
            RecordValue::Form(FormRecord::default()),
            &["formId", "version", "formKey", "resourceName", "checksum", "duplicate", "tenantId", "resource"],
        ),
        (RecordValue::ResourceDeletion(ResourceDeletionRecord { resource_key: 5, tenant_id: "".into() }), &["resourceKey", "tenantId"]),
        (
            RecordValue::CompensationSubscription(CompensationSubscriptionRecord {
                process_instance_key: 1,
                compensable_activity_id: "A".into(),
                compensation_handler_id: "undo-A".into(),
                throw_event_instance_key: -1,
                ..Default::default()
            }),
            &[
                "tenantId",
                "processInstanceKey",
                "processDefinitionKey",
                "compensableActivityId",
                "compensableActivityScopeId",
                "compensableActivityInstanceKey",
                "compensableActivityScopeKey",
                "throwEventId",
                "throwEventInstanceKey",
                "compensationHandlerId",
                "compensationHandlerInstanceKey",
                "variables",
            ],
        ),
        (
            RecordValue::UserTask(UserTaskRecord { user_task_key: 1, assignee: "a".into(), form_key: -1, ..Default::default() }),
            &[
                "userTaskKey",
                "assignee",
                "candidateGroupsList",
                "candidateUsersList",
                "dueDate",
                "followUpDate",
                "formKey",
                "changedAttributes",
                "variables",
                "bpmnProcessId",
                "processDefinitionVersion",
                "processDefinitionKey",
                "processInstanceKey",
                "elementId",
                "elementInstanceKey",
                "tenantId",
                "externalFormReference",
                "customHeaders",
                "action",
                "creationTimestamp",
            ],
        ),
        (
            RecordValue::MessageCorrelation(MessageCorrelationRecord {
                name: "m".into(),
                correlation_key: "k".into(),
                variables: "{}".into(),
                tenant_id: "".into(),
                message_key: 3,
                process_instance_key: -1,
            }),
            &["name", "correlationKey", "variables", "tenantId", "messageKey", "processInstanceKey", "requestId", "requestStreamId"],
        ),
        (
            RecordValue::ProcessEvent(ProcessEventRecord {
                scope_key: 5,
                target_element_id: "b".into(),
                variables: r#"{"x":1}"#.into(),
                process_definition_key: 2,
                process_instance_key: 4,
                tenant_id: "".into(),
            }),
            &["scopeKey", "targetElementId", "variables", "processDefinitionKey", "processInstanceKey", "tenantId"],
        ),
    ];
    assert_eq!(cases.len(), 30, "one case per value type");
    let evaluation = super::value(&cases[23].0);
    assert_eq!(
        keys(&evaluation["evaluatedDecisions"][0]),
        [
            "decisionId",
            "decisionName",
            "decisionKey",
            "decisionVersion",
            "decisionType",
            "decisionOutput",
            "evaluatedInputs",
            "matchedRules",
            "tenantId"
        ]
    );
    assert_eq!(keys(&evaluation["evaluatedDecisions"][0]["evaluatedInputs"][0]), ["inputId", "inputName", "inputValue"]);
    assert_eq!(keys(&evaluation["evaluatedDecisions"][0]["matchedRules"][0]), ["ruleId", "ruleIndex", "evaluatedOutputs"]);
    assert_eq!(
        keys(&evaluation["evaluatedDecisions"][0]["matchedRules"][0]["evaluatedOutputs"][0]),
        ["outputId", "outputName", "outputValue"]
    );
    for (value, fields) in &cases {
        let v = super::value(value);
        assert_eq!(keys(&v), *fields, "{value:?}");
        if let Some(tenant) = v.get("tenantId") {
            assert_eq!(tenant, "<default>", "{value:?}: an empty tenant is the default one");
        }
        if let Some(variables) = v.get("variables") {
            assert!(variables.is_object(), "{value:?}: variables are an object");
        }
    }
    let deployment = super::value(&cases[0].0);
    assert_eq!(deployment["resources"][0]["resource"], "PHhtbC8+", "bytes in base64");
    assert_eq!(
        keys(&deployment["processesMetadata"][0]),
        ["bpmnProcessId", "version", "processDefinitionKey", "resourceName", "checksum", "duplicate", "tenantId"]
    );
    let modification = super::value(&cases[18].0);
    assert_eq!(
        keys(&modification["activateInstructions"][0]),
        ["elementId", "ancestorScopeKey", "variableInstructions", "ancestorScopeKeys"]
    );
    assert_eq!(modification["activateInstructions"][0]["variableInstructions"][0]["variables"]["x"], 1);
    assert_eq!(modification["terminateInstructions"][0]["elementInstanceKey"], 2);
    let migration = super::value(&cases[19].0);
    assert_eq!(keys(&migration["mappingInstructions"][0]), ["sourceElementId", "targetElementId"]);
    let creation = super::value(&cases[3].0);
    assert_eq!(creation["variables"]["x"], 1);
    assert_eq!(creation["startInstructions"][0]["elementId"], "task");
    let job = super::value(&cases[5].0);
    assert_eq!(job["customHeaders"]["h"], "1");
    assert_eq!(job["variables"]["a"], 1);
    let batch = super::value(&cases[6].0);
    assert_eq!(keys(&batch["jobs"][0]), JOB_FIELDS);
    let variable = super::value(&cases[7].0);
    assert_eq!(variable["value"], "\"text\"", "a variable's value is its JSON text");
    assert_eq!(super::value(&cases[8].0)["updateSemantics"], "LOCAL");
    let distribution = super::value(&cases[17].0);
    assert_eq!(distribution["valueType"], "DEPLOYMENT");
    assert_eq!(keys(&distribution["commandValue"]), ["signalName", "variables", "tenantId"]);
}
