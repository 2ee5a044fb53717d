//! SCALE: growing the partition count of a running cluster (after Zeebe 8.8's partition
//! scaling: docs.camunda.io "Cluster scaling", 8.8; the camunda repository's `ScaleRecord`,
//! `ScaleIntent` and the dynamic configuration's `StartPartitionScaleUp` and
//! `AwaitRedistributionCompletion` operations).
//!
//! The cluster's coordinator starts the new partitions first, then sends SCALE SCALE_UP to the
//! deployment partition (1). Its processing:
//! - refuses another partition than 1, a count that does not grow, and a scale-up already
//!   asked for (or done) to that count or more (ALREADY_EXISTS: the coordinator asks again
//!   until it is done, and only the first is carried out);
//! - writes SCALING_UP (its applier keeps the scale-up in state, `X/scale`) and sends every
//!   resource deployed and not deleted (processes by deployment, decision requirements graphs
//!   with their decisions, forms) to each new partition as DEPLOYMENT DISTRIBUTE, through the
//!   exactly-once distribution ([`crate::distribution`]), with their keys and versions;
//! - writes SCALED_UP once no command for a new partition is left in the outbox: at once when
//!   there is nothing to send, else in the batch that takes the last acknowledgement
//!   ([`after_acknowledgement`]). The coordinator routes instances to the new partitions only
//!   after that (the broker reads [`crate::tables::StateView::scale`]).
//!
//! While a scale-up is under way or done, deployments and deletions on this partition go to
//! every partition up to the desired count (`distribution::partition_count`), whatever the
//! broker's count says.

use std::collections::BTreeMap;

use waggle_protocol::value::{DeploymentRecord, DeploymentResource, ProcessMetadata, ScaleRecord};
use waggle_protocol::{Intent, PartitionId, Record, RecordValue, RejectionType};

use crate::batch::RequestId;
use crate::distribution;
use crate::processing::P;

/// The partition that takes deployments and carries out a scale-up.
pub(crate) const DEPLOYMENT_PARTITION: PartitionId = 1;

/// SCALE SCALE_UP (see the module doc).
pub(crate) fn scale_up(p: P, command: &Record, request: Option<RequestId>) {
    let RecordValue::Scale(asked) = &command.value else { return };
    if p.partition != DEPLOYMENT_PARTITION {
        let reason =
            format!("Expected to scale up on the deployment partition {DEPLOYMENT_PARTITION}, but this is partition {}", p.partition);
        return p.reject(command, request, RejectionType::InvalidArgument, reason);
    }
    let (current, desired) = (asked.current_partition_count, asked.desired_partition_count);
    if current == 0 || desired <= current || desired > u32::from(u16::MAX) {
        let reason = format!("Expected the partition count to grow, but it would go from {current} to {desired}");
        return p.reject(command, request, RejectionType::InvalidArgument, reason);
    }
    if let Some((_, known, done)) = p.view().scale() {
        if known.desired_partition_count >= desired {
            let state = if done { "scaled up" } else { "scaling up" };
            let reason = format!(
                "Expected to scale up to {desired} partitions, but the cluster is {state} to {} already",
                known.desired_partition_count
            );
            return p.reject(command, request, RejectionType::AlreadyExists, reason);
        }
    }
    let key = p.new_key();
    let new_partitions: Vec<PartitionId> = (current as u16 + 1..=desired as u16).collect();
    let record = ScaleRecord { current_partition_count: current, desired_partition_count: desired, redistributed_partitions: Vec::new() };
    let event = p.event_record(key, Intent::ScalingUp, RecordValue::Scale(record));
    p.respond(request, event);
    for (deployment_key, deployment) in deployed_resources(p) {
        for &partition in &new_partitions {
            distribution::send(p, partition, deployment_key, Intent::Distribute, RecordValue::Deployment(deployment.clone()));
        }
    }
    finish_if_redistributed(p);
}

/// After an acknowledgement took a command out of the outbox: SCALED_UP once nothing for a new
/// partition is left.
pub(crate) fn after_acknowledgement(p: P) {
    finish_if_redistributed(p);
}

/// Writes SCALED_UP when a scale-up is under way and no command for its new partitions waits
/// in the outbox.
fn finish_if_redistributed(p: P) {
    let Some((key, record, false)) = p.view().scale() else { return };
    let new_partitions = record.current_partition_count as u16 + 1..=record.desired_partition_count as u16;
    if new_partitions.clone().any(|q| p.view().oldest_pending_distribution(q).is_some()) {
        return;
    }
    let done = ScaleRecord { redistributed_partitions: new_partitions.collect(), ..record };
    p.event(key, Intent::ScaledUp, RecordValue::Scale(done));
}

/// Every resource deployed here and not deleted, as the deployments that carry it to another
/// partition (by key): the processes of each deployment together (under the deployment's key,
/// as the deployment's distribution had them), each decision requirements graph with its
/// decisions and each form on its own (under its key).
fn deployed_resources(p: P) -> Vec<(i64, DeploymentRecord)> {
    let mut deployments: BTreeMap<i64, DeploymentRecord> = BTreeMap::new();
    for process in p.view().all_processes() {
        let key = process.process_definition_key;
        let deployment_key = p.view().deployment_of(key).unwrap_or(key);
        let deployment = deployments
            .entry(deployment_key)
            .or_insert_with(|| DeploymentRecord { tenant_id: process.tenant_id.clone(), ..Default::default() });
        if deployment.tenant_id != process.tenant_id {
            // (one deployment is one tenant's: a key shared by two would be a corrupt state)
            continue;
        }
        if !deployment.resources.iter().any(|r| r.resource_name == process.resource_name) {
            deployment
                .resources
                .push(DeploymentResource { resource_name: process.resource_name.clone(), resource: process.resource.clone() });
        }
        deployment.processes_metadata.push(ProcessMetadata {
            bpmn_process_id: process.bpmn_process_id.clone(),
            version: process.version,
            process_definition_key: key,
            resource_name: process.resource_name.clone(),
            checksum: process.checksum,
            duplicate: false,
        });
    }
    let mut out: Vec<(i64, DeploymentRecord)> = deployments.into_iter().collect();
    for drg in p.view().all_drgs() {
        let key = drg.decision_requirements_key;
        let decisions = p.view().decisions_of(key).into_iter().filter_map(|(_, d)| p.view().decision(d)).collect();
        let resource = DeploymentResource { resource_name: drg.resource_name.clone(), resource: drg.resource.clone() };
        let deployment = DeploymentRecord {
            resources: vec![resource],
            tenant_id: drg.tenant_id.clone(),
            decisions_metadata: decisions,
            decision_requirements_metadata: vec![waggle_protocol::value::DecisionRequirementsRecord {
                resource: Vec::new(),
                duplicate: false,
                ..drg
            }],
            ..Default::default()
        };
        out.push((key, deployment));
    }
    for form in p.view().all_forms() {
        let resource = DeploymentResource { resource_name: form.resource_name.clone(), resource: form.resource.clone() };
        let deployment = DeploymentRecord {
            resources: vec![resource],
            tenant_id: form.tenant_id.clone(),
            form_metadata: vec![waggle_protocol::value::FormRecord { resource: Vec::new(), duplicate: false, ..form.clone() }],
            ..Default::default()
        };
        out.push((form.form_key, deployment));
    }
    out
}
