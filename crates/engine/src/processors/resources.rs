//! The DMN and form resources of a deployment: parsed and checked with the rest of the
//! deployment (all succeed or none), then written as DECISION_REQUIREMENTS, DECISION and FORM
//! CREATED with their versions, and distributed with the deployment to the other partitions
//! (https://docs.camunda.io/docs/apis-tools/zeebe-api/gateway-service/#deployresource-rpc;
//! Zeebe's `DmnResourceTransformer`, `FormResourceTransformer` and their tests in
//! `zeebe/engine/src/test/java/io/camunda/zeebe/engine/processing/deployment/`).

use std::collections::HashMap;
use std::sync::Arc;

use waggle_dmn::Drg;
use waggle_protocol::value::{DecisionRecord, DecisionRequirementsRecord, DeploymentRecord, DeploymentResource, FormRecord, ProcessRecord};
use waggle_protocol::{Intent, Record, RecordValue, RejectionType};

use crate::batch::RequestId;
use crate::behaviors::starts;
use crate::distribution;
use crate::processing::Processing;
use crate::tables::same_tenant;

/// A DMN resource's decision requirements graph, or why it can not be deployed.
pub(crate) fn parse_dmn(bytes: &[u8]) -> Result<Drg, String> {
    let xml = std::str::from_utf8(bytes).map_err(|_| "Expected the DMN resource to be UTF-8 text, but it is not".to_string())?;
    waggle_dmn::parse(xml).map_err(|e| e.message)
}

/// A form's id: the `id` of its JSON object (Zeebe's `FormResourceTransformer`).
pub(crate) fn form_id(bytes: &[u8]) -> Result<String, String> {
    let json: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| format!("Failed to parse the form's JSON: {e}"))?;
    match json.get("id").and_then(|id| id.as_str()) {
        Some(id) if !id.is_empty() => Ok(id.to_string()),
        _ => Err("Expected the form id to be present, but none given".to_string()),
    }
}

/// Rejects decision requirements, decision and form ids that occur in two resources of the
/// deployment, with Zeebe's messages.
pub(crate) fn check_unique_ids(drgs: &[(&DeploymentResource, Drg)], forms: &[(&DeploymentResource, String)]) -> Result<(), String> {
    let mut drg_ids: HashMap<&str, &str> = HashMap::new();
    let mut decision_ids: HashMap<&str, &str> = HashMap::new();
    for (resource, drg) in drgs {
        let name = resource.resource_name.as_str();
        if let Some(first) = drg_ids.insert(&drg.id, name) {
            return Err(format!(
                "Expected the decision requirements ids to be unique within a deployment but found a duplicated id '{}' in the resources '{first}' and '{name}'.",
                drg.id
            ));
        }
        for decision in drg.decisions() {
            if let Some(first) = decision_ids.insert(&decision.id, name) {
                return Err(format!(
                    "Expected the decision ids to be unique within a deployment but found a duplicated id '{}' in the resources '{first}' and '{name}'.",
                    decision.id
                ));
            }
        }
    }
    let mut form_ids: HashMap<&str, &str> = HashMap::new();
    for (resource, id) in forms {
        let name = resource.resource_name.as_str();
        if let Some(first) = form_ids.insert(id, name) {
            return Err(format!(
                "Expected the form ids to be unique within a deployment but found a duplicated id '{id}' in the resources '{first}' and '{name}'."
            ));
        }
    }
    Ok(())
}

/// Writes a DMN resource's graph and decisions: DECISION_REQUIREMENTS CREATED and DECISION
/// CREATED for a new version (the graph's next version; each decision's next version), or,
/// when the newest version of the graph has the same resource name and content, the existing
/// ones as duplicates. Adds them to the deployment's metadata.
pub(crate) fn create_drg(p: &mut Processing<'_, '_, '_>, resource: &DeploymentResource, drg: Drg, deployment: &mut DeploymentRecord) {
    let checksum = crc32fast::hash(&resource.resource);
    let tenant = deployment.tenant_id.clone();
    let latest = p.view().latest_drg(&tenant, &drg.id);
    // a duplicate: the latest version has the same name and content, and is still where the
    // latest version of each of its decisions lives (Zeebe's DmnResourceTransformer)
    let duplicate = latest.and_then(|(_, key)| p.view().drg(key)).filter(|stored| {
        stored.checksum == checksum
            && stored.resource_name == resource.resource_name
            && drg.decisions().iter().all(|d| {
                let latest_decision = p.view().latest_decision(&tenant, &d.id).and_then(|(_, k)| p.view().decision(k));
                latest_decision.is_some_and(|l| l.decision_requirements_key == stored.decision_requirements_key)
            })
    });
    if let Some(stored) = duplicate {
        let key = stored.decision_requirements_key;
        for decision in drg.decisions() {
            if let Some(record) = p.view().decision_in_drg(key, &decision.id).and_then(|k| p.view().decision(k)) {
                deployment.decisions_metadata.push(DecisionRecord { duplicate: true, ..record });
            }
        }
        deployment.decision_requirements_metadata.push(DecisionRequirementsRecord { resource: Vec::new(), duplicate: true, ..stored });
        return;
    }
    let key = p.new_key();
    let record = DecisionRequirementsRecord {
        decision_requirements_id: drg.id.clone(),
        decision_requirements_name: drg.name.clone().unwrap_or_default(),
        decision_requirements_version: latest.map_or(1, |(v, _)| v + 1),
        decision_requirements_key: key,
        namespace: drg.namespace.clone().unwrap_or_default(),
        resource_name: resource.resource_name.clone(),
        checksum,
        resource: resource.resource.clone(),
        duplicate: false,
        tenant_id: tenant.clone(),
    };
    let decisions: Vec<DecisionRecord> = drg
        .decisions()
        .iter()
        .map(|decision| DecisionRecord {
            decision_id: decision.id.clone(),
            decision_name: decision.name.clone().unwrap_or_default(),
            version: p.view().latest_decision(&tenant, &decision.id).map_or(1, |(v, _)| v + 1),
            decision_key: p.new_key(),
            decision_requirements_id: record.decision_requirements_id.clone(),
            decision_requirements_key: key,
            duplicate: false,
            tenant_id: tenant.clone(),
        })
        .collect();
    write_drg(p, Arc::new(drg), &record, &decisions);
    deployment.decision_requirements_metadata.push(DecisionRequirementsRecord { resource: Vec::new(), ..record });
    deployment.decisions_metadata.extend(decisions);
}

fn write_drg(p: &mut Processing<'_, '_, '_>, drg: Arc<Drg>, record: &DecisionRequirementsRecord, decisions: &[DecisionRecord]) {
    p.processes_mut().insert_drg(record.decision_requirements_key, drg);
    p.event(record.decision_requirements_key, Intent::Created, RecordValue::DecisionRequirements(record.clone()));
    for decision in decisions {
        p.event(decision.decision_key, Intent::Created, RecordValue::Decision(decision.clone()));
    }
}

/// Writes a form: FORM CREATED with the next version, or, when the newest version has the
/// same resource name and content, the existing one as a duplicate.
pub(crate) fn create_form(
    p: &mut Processing<'_, '_, '_>,
    resource: &DeploymentResource,
    form_id: String,
    deployment: &mut DeploymentRecord,
) {
    let checksum = crc32fast::hash(&resource.resource);
    let tenant = deployment.tenant_id.clone();
    let latest = p.view().latest_form(&tenant, &form_id);
    let duplicate = latest
        .and_then(|(_, key)| p.view().form(key))
        .filter(|stored| stored.checksum == checksum && stored.resource_name == resource.resource_name);
    if let Some(stored) = duplicate {
        deployment.form_metadata.push(FormRecord { resource: Vec::new(), duplicate: true, ..stored });
        return;
    }
    let key = p.new_key();
    let record = FormRecord {
        form_id,
        version: latest.map_or(1, |(v, _)| v + 1),
        form_key: key,
        resource_name: resource.resource_name.clone(),
        checksum,
        resource: resource.resource.clone(),
        duplicate: false,
        tenant_id: tenant,
    };
    p.event(key, Intent::Created, RecordValue::Form(record.clone()));
    deployment.form_metadata.push(FormRecord { resource: Vec::new(), ..record });
}

/// DEPLOYMENT DISTRIBUTE: the graphs, decisions and forms another partition created, written
/// here with the same keys and versions (those already here are left alone).
pub(crate) fn distribute(p: &mut Processing<'_, '_, '_>, deployment: &DeploymentRecord) -> Result<(), String> {
    for meta in deployment.decision_requirements_metadata.iter().filter(|m| !m.duplicate) {
        if p.view().drg(meta.decision_requirements_key).is_some() {
            continue;
        }
        let Some(resource) = deployment.resources.iter().find(|r| r.resource_name == meta.resource_name) else { continue };
        let drg = parse_dmn(&resource.resource).map_err(|e| {
            format!("Expected to distribute decision requirements '{}', but they do not parse: {e}", meta.decision_requirements_id)
        })?;
        let record = DecisionRequirementsRecord { resource: resource.resource.clone(), ..meta.clone() };
        let decisions: Vec<DecisionRecord> = deployment
            .decisions_metadata
            .iter()
            .filter(|d| d.decision_requirements_key == meta.decision_requirements_key && !d.duplicate)
            .cloned()
            .collect();
        write_drg(p, Arc::new(drg), &record, &decisions);
    }
    for meta in deployment.form_metadata.iter().filter(|m| !m.duplicate) {
        if p.view().form(meta.form_key).is_some() {
            continue;
        }
        let Some(resource) = deployment.resources.iter().find(|r| r.resource_name == meta.resource_name) else { continue };
        let record = FormRecord { resource: resource.resource.clone(), ..meta.clone() };
        p.event(meta.form_key, Intent::Created, RecordValue::Form(record));
    }
    Ok(())
}

/// RESOURCE_DELETION DELETE (DeleteResource; DISTRIBUTE: the copy another partition sends):
/// RESOURCE_DELETION DELETING (the answer), then the resource's events, then RESOURCE_DELETION
/// DELETED; the command is distributed to every other partition. The resource is a process
/// definition (PROCESS DELETING and DELETED; refused while instances of it run), a decision
/// requirements graph with its decisions (DECISION DELETED each, DECISION_REQUIREMENTS DELETED)
/// or a form (FORM DELETED). The previous version of the id becomes the latest again; for a
/// process, its timer, message and signal start events open again. Zeebe 8.5's
/// `ResourceDeletionTest`; https://docs.camunda.io/docs/8.5/components/concepts/resource-deletion/
/// ("Limitations": a definition with running instances can not be deleted);
/// https://docs.camunda.io/docs/apis-tools/zeebe-api/gateway-service/#deleteresource-rpc.
pub(crate) fn delete(p: &mut Processing<'_, '_, '_>, command: &Record, request: Option<RequestId>) {
    let RecordValue::ResourceDeletion(deletion) = &command.value else { return };
    let key = deletion.resource_key;
    let distributed = command.intent == Intent::Distribute;
    // a resource of another tenant is one this tenant cannot see (Zeebe 8.5 looks the key up
    // within the command's tenant)
    // (no tenant: any; the gateway sends none with multi-tenancy on, the RPC naming none)
    // and the caller's authorized tenants: another tenant's resource is not found
    let mine = |tenant: &str| (deletion.tenant_id.is_empty() || same_tenant(tenant, &deletion.tenant_id)) && p.may_access(tenant);
    let process = p.view().process(key).filter(|r| mine(&r.tenant_id));
    let drg = if process.is_none() { p.view().drg(key).filter(|r| mine(&r.tenant_id)) } else { None };
    let form = if process.is_none() && drg.is_none() { p.view().form(key).filter(|r| mine(&r.tenant_id)) } else { None };
    if process.is_some() && p.view().running_instances(key) > 0 {
        // (a distributed copy too: this partition keeps the definition while its instances run,
        // as Zeebe 8.5's processor refuses it there)
        let reason = format!("Expected to delete resource with key `{key}` but there are still running instances");
        return p.reject(command, request, RejectionType::InvalidState, reason);
    }
    if process.is_none() && drg.is_none() && form.is_none() && !distributed {
        let reason = format!("Expected to delete resource but no resource found with key `{key}`");
        return p.reject(command, request, RejectionType::NotFound, reason);
    }
    // a distributed copy keeps the key the deleting partition gave the deletion
    let event_key = if distributed { command.key } else { p.new_key() };
    let value = RecordValue::ResourceDeletion(deletion.clone());
    let deleting = p.event_record(event_key, Intent::Deleting, value.clone());
    if let Some(process) = process {
        delete_process(p, process, distributed);
    } else if let Some(drg) = drg {
        for (_, decision_key) in p.view().decisions_of(key) {
            if let Some(decision) = p.view().decision(decision_key) {
                p.event(decision_key, Intent::Deleted, RecordValue::Decision(decision));
            }
        }
        p.event(key, Intent::Deleted, RecordValue::DecisionRequirements(drg));
        p.processes_mut().remove_drg(key);
    } else if let Some(form) = form {
        p.event(key, Intent::Deleted, RecordValue::Form(form));
    }
    // (a distributed copy of a resource this partition never had: nothing to delete)
    p.event(event_key, Intent::Deleted, value.clone());
    p.respond(request, deleting);
    if !distributed {
        let this = p.partition;
        let count = distribution::partition_count(p) as u16;
        for partition in (1..=count).filter(|q| *q != this) {
            distribution::send(p, partition, event_key, Intent::Distribute, value.clone());
        }
    }
}

/// PROCESS DELETING and DELETED (without the resource, as Zeebe writes them). When it was the
/// latest version, its start events close and those of the version before it open again (timer
/// and signal start events on the partition that took the command, as a deployment does).
fn delete_process(p: &mut Processing<'_, '_, '_>, process: ProcessRecord, distributed: bool) {
    let key = process.process_definition_key;
    let record = ProcessRecord { resource: Vec::new(), checksum: 0, ..process };
    p.event(key, Intent::Deleting, RecordValue::Process(record.clone()));
    let id = record.bpmn_process_id.clone();
    let tenant = record.tenant_id.clone();
    if p.view().latest_process(&tenant, &id).is_some_and(|(_, latest)| latest == key) {
        starts::close_start_events(p, key);
        if let Some((_, previous)) = p.view().process_version_before(&tenant, &id, record.version) {
            let model = p.process_model(previous);
            if let Some(previous_record) = p.process_record(previous) {
                starts::open_start_events(p, &model, previous, &previous_record, None, !distributed);
            }
        }
    }
    p.event(key, Intent::Deleted, RecordValue::Process(record));
}
