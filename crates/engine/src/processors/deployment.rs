use std::sync::Arc;

use waggle_protocol::value::{DeploymentRecord, ProcessMetadata, ProcessRecord};
use waggle_protocol::{Intent, Record, RecordValue, RejectionType};

use crate::batch::RequestId;
use crate::behaviors::starts;
use crate::distribution;
use crate::processing::Processing;
use crate::processors::resources;

/// Errors a rejected resource lists; the rest are counted (a model of 50,000 faulty elements
/// would otherwise be rejected with megabytes of text).
const MAX_LISTED_ERRORS: usize = 100;

/// DEPLOYMENT CREATE: validates every resource (BPMN, DMN, forms: all succeed or the command is
/// rejected), then writes PROCESS CREATED per new process version, DECISION_REQUIREMENTS and
/// DECISION CREATED per new DMN resource, FORM CREATED per new form, and DEPLOYMENT CREATED. An
/// unchanged resource is a duplicate: same keys and versions.
pub(crate) fn create(p: &mut Processing<'_, '_, '_>, command: &Record, request: Option<RequestId>) {
    let RecordValue::Deployment(deployment) = &command.value else { return };
    if deployment.resources.is_empty() {
        return p.reject(
            command,
            request,
            RejectionType::InvalidArgument,
            "Expected to deploy at least one resource, but none given".into(),
        );
    }
    let mut errors = String::new();
    let mut parsed = Vec::new();
    let mut drgs = Vec::new();
    let mut forms = Vec::new();
    for resource in &deployment.resources {
        let name = &resource.resource_name;
        if name.ends_with(".dmn") {
            match resources::parse_dmn(&resource.resource) {
                Ok(drg) => drgs.push((resource, drg)),
                Err(message) => errors.push_str(&format!("\n'{name}': {message}")),
            }
            continue;
        }
        if name.ends_with(".form") {
            match resources::form_id(&resource.resource) {
                Ok(id) => forms.push((resource, id)),
                Err(message) => errors.push_str(&format!("\n'{name}': {message}")),
            }
            continue;
        }
        if !(name.ends_with(".bpmn") || name.ends_with(".xml")) {
            errors.push_str(&format!(
                "\n'{name}': Expected the resource to be a BPMN model (.bpmn or .xml), a DMN model (.dmn) or a form (.form)"
            ));
            continue;
        }
        match waggle_bpmn::parse_definitions_with(&resource.resource, &p.limits.bpmn) {
            Ok(processes) => parsed.push((resource, processes)),
            Err(errs) => {
                errors.push_str(&format!("\n'{name}':"));
                for e in errs.iter().take(MAX_LISTED_ERRORS) {
                    errors.push_str(&format!("\n{e}"));
                }
                if errs.len() > MAX_LISTED_ERRORS {
                    errors.push_str(&format!("\n... and {} more errors", errs.len() - MAX_LISTED_ERRORS));
                }
            }
        }
    }
    if !errors.is_empty() {
        let reason = format!("Expected to deploy new resources, but encountered the following errors:{errors}");
        return p.reject(command, request, RejectionType::InvalidArgument, reason);
    }
    let process_bytes: usize = parsed.iter().map(|(resource, processes)| resource.resource.len().saturating_mul(processes.len())).sum();
    let max = p.limits.max_deployment_process_bytes;
    if process_bytes > max {
        let processes: usize = parsed.iter().map(|(_, processes)| processes.len()).sum();
        let reason = format!(
            "Expected to deploy new resources, but its {processes} processes would write {process_bytes} bytes of process records (each carries its whole resource), more than the limit of {max} (max_deployment_process_bytes); deploy fewer processes per resource"
        );
        return p.reject(command, request, RejectionType::InvalidArgument, reason);
    }
    let mut seen = std::collections::HashSet::new();
    for (_, processes) in &parsed {
        for process in processes {
            if !seen.insert(process.id.clone()) {
                let reason = format!(
                    "Expected to deploy new resources, but encountered the following errors:\nDuplicated process id in resources '{}'",
                    process.id
                );
                return p.reject(command, request, RejectionType::InvalidArgument, reason);
            }
        }
    }
    if let Err(message) = resources::check_unique_ids(&drgs, &forms) {
        let reason = format!("Expected to deploy new resources, but encountered the following errors:\n{message}");
        return p.reject(command, request, RejectionType::InvalidArgument, reason);
    }
    let deployment_key = p.new_key();
    // the deployment's tenant owns every resource in it: versions count per tenant
    let tenant = if deployment.tenant_id.is_empty() { waggle_protocol::DEFAULT_TENANT.to_string() } else { deployment.tenant_id.clone() };
    let mut metadata = Vec::new();
    for (resource, processes) in parsed {
        let checksum = crc32fast::hash(&resource.resource);
        for process in processes {
            let latest = p.view().latest_process(&tenant, &process.id);
            let duplicate = latest.and_then(|(version, key)| {
                let stored = p.view().process(key)?;
                (stored.checksum == checksum && stored.resource_name == resource.resource_name).then_some((version, key))
            });
            if let Some((version, key)) = duplicate {
                metadata.push(ProcessMetadata {
                    bpmn_process_id: process.id.clone(),
                    version,
                    process_definition_key: key,
                    resource_name: resource.resource_name.clone(),
                    checksum,
                    duplicate: true,
                });
                continue;
            }
            // deleted versions are not given again (docs.camunda.io, "Resource deletion")
            let version = p.view().next_process_version(&tenant, &process.id);
            let key = p.new_key();
            let record = ProcessRecord {
                bpmn_process_id: process.id.clone(),
                version,
                process_definition_key: key,
                resource_name: resource.resource_name.clone(),
                resource: resource.resource.clone(),
                checksum,
                tenant_id: tenant.clone(),
            };
            let model = Arc::new(process.clone());
            p.processes_mut().insert(key, model.clone());
            p.event(key, Intent::Created, RecordValue::Process(record.clone()));
            starts::open_start_events(p, &model, key, &record, latest.map(|(_, k)| k), true);
            metadata.push(ProcessMetadata {
                bpmn_process_id: process.id.clone(),
                version,
                process_definition_key: key,
                resource_name: resource.resource_name.clone(),
                checksum,
                duplicate: false,
            });
        }
    }
    let mut record = DeploymentRecord {
        resources: deployment.resources.clone(),
        processes_metadata: metadata,
        tenant_id: tenant.clone(),
        ..Default::default()
    };
    for (resource, drg) in drgs {
        resources::create_drg(p, resource, drg, &mut record);
    }
    for (resource, form_id) in forms {
        resources::create_form(p, resource, form_id, &mut record);
    }
    let created = p.event_record(deployment_key, Intent::Created, RecordValue::Deployment(record.clone()));
    p.respond(request, created);
    // every other partition gets the new versions with the same keys (durably: see `distribution`)
    let anything_new = record.processes_metadata.iter().any(|m| !m.duplicate)
        || record.decision_requirements_metadata.iter().any(|m| !m.duplicate)
        || record.form_metadata.iter().any(|m| !m.duplicate);
    if anything_new {
        let this = p.partition;
        let count = distribution::partition_count(p) as u16;
        for partition in (1..=count).filter(|q| *q != this) {
            distribution::send(p, partition, deployment_key, Intent::Distribute, RecordValue::Deployment(record.clone()));
        }
    }
}

/// DEPLOYMENT DISTRIBUTE: another partition's deployment, with its keys and versions, written
/// here as it was there (so process keys are the same on every partition).
pub(crate) fn distribute(p: &mut Processing<'_, '_, '_>, command: &Record, request: Option<RequestId>) {
    let RecordValue::Deployment(deployment) = &command.value else { return };
    for meta in deployment.processes_metadata.iter().filter(|m| !m.duplicate) {
        if p.view().process(meta.process_definition_key).is_some() {
            continue;
        }
        let Some(resource) = deployment.resources.iter().find(|r| r.resource_name == meta.resource_name) else { continue };
        let Some(process) = crate::processes::parse_one(&resource.resource, &meta.bpmn_process_id) else {
            let reason = format!("Expected to distribute process '{}', but it does not parse", meta.bpmn_process_id);
            return p.reject(command, request, RejectionType::InvalidArgument, reason);
        };
        let model = Arc::new(process);
        p.processes_mut().insert(meta.process_definition_key, model.clone());
        let previous =
            p.view().latest_process(&deployment.tenant_id, &meta.bpmn_process_id).filter(|(v, _)| *v < meta.version).map(|(_, k)| k);
        let record = ProcessRecord {
            bpmn_process_id: meta.bpmn_process_id.clone(),
            version: meta.version,
            process_definition_key: meta.process_definition_key,
            resource_name: meta.resource_name.clone(),
            resource: resource.resource.clone(),
            checksum: meta.checksum,
            tenant_id: deployment.tenant_id.clone(),
        };
        p.event(meta.process_definition_key, Intent::Created, RecordValue::Process(record.clone()));
        let latest = p.view().latest_process(&deployment.tenant_id, &meta.bpmn_process_id).is_some_and(|(v, _)| v == meta.version);
        if latest {
            starts::open_start_events(p, &model, meta.process_definition_key, &record, previous, false);
        }
    }
    if let Err(reason) = resources::distribute(p, deployment) {
        return p.reject(command, request, RejectionType::InvalidArgument, reason);
    }
    let event = p.event_record(command.key, Intent::Distributed, RecordValue::Deployment(deployment.clone()));
    p.respond(request, event);
}
