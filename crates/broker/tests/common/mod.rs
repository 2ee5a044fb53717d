//! What the broker's integration tests share: a one-task model and the commands that deploy and
//! start it.
#![allow(dead_code)]

use waggle_engine::Command;
use waggle_protocol::value::{DeploymentRecord, DeploymentResource, ProcessInstanceCreationRecord};
use waggle_protocol::{Intent, RecordValue};

/// Process `forwarded`: one service task of job type `t`.
pub const ONE_TASK: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<bpmn:definitions xmlns:bpmn="http://www.omg.org/spec/BPMN/20100524/MODEL" xmlns:zeebe="http://camunda.org/schema/zeebe/1.0" id="d" targetNamespace="t">
  <bpmn:process id="forwarded" isExecutable="true">
    <bpmn:startEvent id="start" />
    <bpmn:sequenceFlow id="f1" sourceRef="start" targetRef="task" />
    <bpmn:serviceTask id="task"><bpmn:extensionElements><zeebe:taskDefinition type="t" /></bpmn:extensionElements></bpmn:serviceTask>
    <bpmn:sequenceFlow id="f2" sourceRef="task" targetRef="end" />
    <bpmn:endEvent id="end" />
  </bpmn:process>
</bpmn:definitions>"#;

/// A deployment of one BPMN resource.
pub fn deployment(xml: &str) -> Command {
    Command::new(
        -1,
        Intent::Create,
        RecordValue::Deployment(DeploymentRecord {
            resources: vec![DeploymentResource { resource_name: "model.bpmn".into(), resource: xml.as_bytes().to_vec() }],
            processes_metadata: vec![],
            tenant_id: "<default>".into(),
            ..Default::default()
        }),
    )
}

/// A creation of `process`'s latest version, without variables.
pub fn creation(process: &str) -> Command {
    Command::new(
        -1,
        Intent::Create,
        RecordValue::ProcessInstanceCreation(ProcessInstanceCreationRecord {
            bpmn_process_id: process.into(),
            version: -1,
            process_definition_key: -1,
            process_instance_key: -1,
            variables: String::new(),
            fetch_variables: vec![],
            start_instructions: vec![],
            tenant_id: "<default>".into(),
        }),
    )
}
