//! What the broker's integration tests share: a one-task model and the commands that deploy and
//! start it, free local addresses for a cluster's members, and a broker's start.
#![allow(dead_code)]

use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::time::{Duration, Instant};

use waggle_broker::{Broker, BrokerConfig, BrokerError};
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

/// `n` local addresses free a moment ago (for a cluster's members' internal ports).
pub fn free_addrs(n: usize) -> Vec<SocketAddr> {
    let listeners: Vec<TcpListener> = (0..n).map(|_| TcpListener::bind("127.0.0.1:0").unwrap()).collect();
    listeners.iter().map(|l| l.local_addr().unwrap()).collect()
}

/// Starts a broker, retrying for up to 20 s while its internal port is still held by a
/// predecessor.
pub fn start(config: &BrokerConfig) -> Arc<Broker> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match Broker::start(config.clone(), &prometheus::Registry::new()) {
            Ok(broker) => return broker,
            Err(BrokerError::Cluster(e)) if Instant::now() < deadline => {
                eprintln!("retrying the start: {e}");
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) => panic!("broker did not start: {e}"),
        }
    }
}
