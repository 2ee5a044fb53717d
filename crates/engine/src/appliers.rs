//! Event appliers: the only code that changes state (C2). Each is a function of (state, event);
//! once released, an applier's behaviour never changes (a new behaviour gets a new intent or
//! record version).

use waggle_protocol::value::{
    JobRecord, MessageSubscriptionRecord, ProcessEventRecord, ProcessInstanceRecord, ProcessRecord, UserTaskRecord,
};
use waggle_protocol::{Intent, Record, RecordValue};
use waggle_state::{KvRead, Overlay};

use crate::processes::ProcessCache;
use crate::tables::*;

/// A deleted version of a graph, decision or form leaves the version index; the newest version
/// left (if any) becomes the latest.
fn unversion(state: &mut Overlay<'_>, table: &[u8], latest_key: Vec<u8>, tenant: &str, id: &str, version: i32) {
    state.delete(version_key(table, tenant, id, version));
    match StateView::new(state).newest_version(table, tenant, id) {
        Some(newest) => state.put(latest_key, encode(&newest)),
        None => state.delete(latest_key),
    }
}

/// PROCESS DELETED: the definition leaves every index; the newest version left (if any) becomes
/// the latest, and the deleted version stays reserved (`P/n/`) when it was the latest.
fn delete_process(state: &mut Overlay<'_>, processes: &mut ProcessCache, p: &ProcessRecord) {
    let key = p.process_definition_key;
    let id = p.bpmn_process_id.as_str();
    let tenant = p.tenant_id.as_str();
    let tag = StateView::new(state).process(key).and_then(|_| processes.get(key, StateView::new(state)).version_tag.clone());
    if StateView::new(state).latest_process(tenant, id).is_some_and(|(v, _)| v == p.version) {
        state.put(process_deleted_version_key(tenant, id), encode(&p.version));
    }
    state.delete(process_key(key));
    unversion(state, b"P/", process_latest_key(tenant, id), tenant, id, p.version);
    if let Some(tag) = tag {
        let tagged = process_version_tag_key(tenant, id, &tag);
        if StateView::new(state).get_raw::<(i32, i64)>(&tagged).is_some_and(|(_, k)| k == key) {
            // the newest version left with the same tag, if any
            let versions: Vec<(i32, i64)> = {
                let prefix = version_prefix(b"P/", tenant, id);
                state
                    .scan_prefix(&prefix)
                    .filter_map(|(k, v)| Some((i32::from_be_bytes(k.get(prefix.len()..)?.try_into().ok()?), decode::<i64>(&v))))
                    .collect()
            };
            let newest = versions
                .into_iter()
                .rev()
                .find(|&(_, k)| processes.get(k, StateView::new(state)).version_tag.as_deref() == Some(tag.as_str()));
            match newest {
                Some(found) => state.put(tagged, encode(&found)),
                None => state.delete(tagged),
            }
        }
    }
    if let Some(deployment) = StateView::new(state).get_raw::<i64>(&process_deployment_key(key)) {
        state.delete(process_deployment_key(key));
        if StateView::new(state).get_raw::<i64>(&deployment_process_key(deployment, id)) == Some(key) {
            state.delete(deployment_process_key(deployment, id));
        }
    }
    state.delete(running_instances_key(key));
    processes.remove(key);
}

/// Counts a process instance of `definition` starting (+1) or ending (-1) (`PR/`).
fn count_instance(state: &mut Overlay<'_>, definition: i64, delta: i64) {
    let key = running_instances_key(definition);
    let n = StateView::new(state).running_instances(definition) + delta;
    if n > 0 {
        state.put(key, encode(&n));
    } else {
        state.delete(key);
    }
}

pub(crate) fn apply(state: &mut Overlay<'_>, processes: &mut ProcessCache, record: &Record) {
    debug_assert!(record.is_event(), "only events are applied");
    match &record.value {
        RecordValue::Process(p) if record.intent == Intent::Created => {
            state.put(process_key(record.key), encode(p));
            let tenant = p.tenant_id.as_str();
            state.put(process_version_key(tenant, &p.bpmn_process_id, p.version), encode(&record.key));
            let newer = StateView::new(state).latest_process(tenant, &p.bpmn_process_id).is_none_or(|(v, _)| v < p.version);
            if newer {
                state.put(process_latest_key(tenant, &p.bpmn_process_id), encode(&(p.version, record.key)));
            }
            // the model is parsed once per run (the deployment put it in the cache already)
            if let Some(tag) = processes.get(record.key, StateView::new(state)).version_tag.clone() {
                let tagged = process_version_tag_key(tenant, &p.bpmn_process_id, &tag);
                if StateView::new(state).get_raw::<(i32, i64)>(&tagged).is_none_or(|(v, _)| v < p.version) {
                    state.put(tagged, encode(&(p.version, record.key)));
                }
            }
        }
        RecordValue::Process(p) if record.intent == Intent::Deleted => delete_process(state, processes, p),
        // which deployment holds which process version (a call activity's `deployment` binding)
        RecordValue::Deployment(d) if matches!(record.intent, Intent::Created | Intent::Distributed) => {
            for m in &d.processes_metadata {
                state.put(deployment_process_key(record.key, &m.bpmn_process_id), encode(&m.process_definition_key));
                if !m.duplicate {
                    state.put(process_deployment_key(m.process_definition_key), encode(&record.key));
                }
            }
        }
        RecordValue::DecisionRequirements(r) if record.intent == Intent::Created => {
            state.put(drg_key(record.key), encode(r));
            let tenant = r.tenant_id.as_str();
            state.put(version_key(b"DQ/", tenant, &r.decision_requirements_id, r.decision_requirements_version), encode(&record.key));
            let newer = StateView::new(state)
                .latest_drg(tenant, &r.decision_requirements_id)
                .is_none_or(|(v, _)| v < r.decision_requirements_version);
            if newer {
                state.put(drg_latest_key(tenant, &r.decision_requirements_id), encode(&(r.decision_requirements_version, record.key)));
            }
        }
        RecordValue::Decision(d) if record.intent == Intent::Created => {
            state.put(decision_key(record.key), encode(d));
            state.put(version_key(b"DC/", &d.tenant_id, &d.decision_id, d.version), encode(&record.key));
            state.put(decision_in_drg_key(d.decision_requirements_key, &d.decision_id), encode(&record.key));
            let newer = StateView::new(state).latest_decision(&d.tenant_id, &d.decision_id).is_none_or(|(v, _)| v < d.version);
            if newer {
                state.put(decision_latest_key(&d.tenant_id, &d.decision_id), encode(&(d.version, record.key)));
            }
        }
        RecordValue::Form(f) if record.intent == Intent::Created => {
            state.put(form_key(record.key), encode(f));
            state.put(version_key(b"FO/", &f.tenant_id, &f.form_id, f.version), encode(&record.key));
            let newer = StateView::new(state).latest_form(&f.tenant_id, &f.form_id).is_none_or(|(v, _)| v < f.version);
            if newer {
                state.put(form_latest_key(&f.tenant_id, &f.form_id), encode(&(f.version, record.key)));
            }
        }
        RecordValue::DecisionRequirements(r) if record.intent == Intent::Deleted => {
            state.delete(drg_key(record.key));
            unversion(
                state,
                b"DQ/",
                drg_latest_key(&r.tenant_id, &r.decision_requirements_id),
                &r.tenant_id,
                &r.decision_requirements_id,
                r.decision_requirements_version,
            );
        }
        RecordValue::Decision(d) if record.intent == Intent::Deleted => {
            state.delete(decision_key(record.key));
            state.delete(decision_in_drg_key(d.decision_requirements_key, &d.decision_id));
            unversion(state, b"DC/", decision_latest_key(&d.tenant_id, &d.decision_id), &d.tenant_id, &d.decision_id, d.version);
        }
        RecordValue::Form(f) if record.intent == Intent::Deleted => {
            state.delete(form_key(record.key));
            unversion(state, b"FO/", form_latest_key(&f.tenant_id, &f.form_id), &f.tenant_id, &f.form_id, f.version);
        }
        RecordValue::ProcessInstance(pi) => {
            apply_multi_instance(state, processes, record.key, record.intent, pi);
            apply_element(state, processes, record.key, record.intent, pi)
        }
        RecordValue::ProcessInstanceBatch(batch) if record.intent == Intent::Activated => {
            update_mi_body(state, batch.batch_element_instance_key, |b| b.activating = false);
        }
        // an active scope terminates its children over later batches (Waggle's own event): a
        // restart asks for the next chunk again until the last is TERMINATED
        RecordValue::ProcessInstanceBatch(batch) if record.intent == Intent::Terminating => {
            state.put(terminating_scope_key(batch.batch_element_instance_key), encode(&true));
        }
        RecordValue::ProcessInstanceBatch(batch) if record.intent == Intent::Terminated => {
            let scope = batch.batch_element_instance_key;
            let view = StateView::new(state);
            if view.element_with(scope, |e| e.state == ElementState::Activated) == Some(true) && view.terminates_children(scope) {
                state.delete(terminating_scope_key(scope));
            }
        }
        RecordValue::Job(job) => apply_job(state, record.key, record.intent, job),
        RecordValue::JobBatch(batch) if record.intent == Intent::Activated => {
            for (key, job) in batch.job_keys.iter().zip(&batch.jobs) {
                let Some(before) = StateView::new(state).job_with(*key, JobIndex::of) else { continue };
                unindex_job(state, *key, &before);
                update_job(state, *key, |stored| {
                    stored.state = JobState::Activated;
                    stored.record.deadline_ms = job.deadline_ms;
                    stored.record.worker = job.worker.clone();
                    stored.record.timeout_ms = job.timeout_ms;
                });
                state.put(deadline_key(job.deadline_ms, *key), vec![]);
            }
        }
        RecordValue::Variable(v) => {
            state.put(variable_key(v.scope_key, &v.name), encode(&StoredVariable { key: record.key, value: v.value.clone() }));
            if record.intent == Intent::Created {
                mark_has_variables(state, v.scope_key);
            }
        }
        RecordValue::Incident(incident) => match record.intent {
            Intent::Created => {
                state.put(incident_key(record.key), encode(incident));
                if incident.job_key > 0 {
                    state.put(job_incident_key(incident.job_key), encode(&record.key));
                } else {
                    state.put(element_incident_key(incident.element_instance_key), encode(&record.key));
                }
            }
            Intent::Migrated => state.put(incident_key(record.key), encode(incident)),
            Intent::Resolved => {
                state.delete(incident_key(record.key));
                if incident.job_key > 0 {
                    state.delete(job_incident_key(incident.job_key));
                    if let Some(job) = StateView::new(state).job_with(incident.job_key, JobIndex::of) {
                        if job.state == JobState::Failed && job.retries > 0 {
                            unindex_job(state, incident.job_key, &job);
                            update_job(state, incident.job_key, |j| j.state = JobState::Activatable);
                            state.put(activatable_key(&job.job_type, incident.job_key), vec![]);
                        }
                    }
                } else {
                    state.delete(element_incident_key(incident.element_instance_key));
                }
            }
            _ => {}
        },
        RecordValue::Message(m) => match record.intent {
            Intent::Published => {
                state.put(message_key(record.key), encode(m));
                state.put(message_name_key(&m.tenant_id, &m.name, &m.correlation_key, record.key), vec![]);
                if !m.message_id.is_empty() {
                    state.put(message_id_key(&m.tenant_id, &m.name, &m.correlation_key, &m.message_id), encode(&record.key));
                }
                state.put(message_deadline_key(m.deadline_ms, record.key), vec![]);
            }
            Intent::Expired => {
                state.delete(message_key(record.key));
                state.delete(message_name_key(&m.tenant_id, &m.name, &m.correlation_key, record.key));
                let marks: Vec<Vec<u8>> = state.scan_prefix(&message_correlated_prefix(record.key)).map(|(k, _)| k).collect();
                for mark in marks {
                    state.delete(mark);
                }
                if !m.message_id.is_empty() {
                    state.delete(message_id_key(&m.tenant_id, &m.name, &m.correlation_key, &m.message_id));
                }
                state.delete(message_deadline_key(m.deadline_ms, record.key));
            }
            _ => {}
        },
        RecordValue::Timer(t) => match record.intent {
            Intent::Created => {
                state.put(timer_key(record.key), encode(t));
                state.put(timer_due_key(t.due_date_ms, record.key), vec![]);
                state.put(element_timer_key(t.element_instance_key, record.key), vec![]);
            }
            Intent::Triggered | Intent::Canceled => {
                state.delete(timer_key(record.key));
                state.delete(timer_due_key(t.due_date_ms, record.key));
                state.delete(element_timer_key(t.element_instance_key, record.key));
            }
            _ => {}
        },
        RecordValue::ProcessMessageSubscription(s) => match record.intent {
            Intent::Created => state.put(process_subscription_key(s.element_instance_key, &s.element_id), encode(s)),
            Intent::Correlated if s.interrupting => state.delete(process_subscription_key(s.element_instance_key, &s.element_id)),
            Intent::Deleted => state.delete(process_subscription_key(s.element_instance_key, &s.element_id)),
            _ => {}
        },
        RecordValue::MessageSubscription(s) => {
            let key = message_subscription_key(&s.tenant_id, &s.message_name, &s.correlation_key, s.element_instance_key);
            match record.intent {
                Intent::Created => state.put(key, encode(s)),
                Intent::Correlating => {
                    state.put(key, encode(s));
                    state.put(message_correlated_key(s.message_key, &s.bpmn_process_id), vec![]);
                }
                Intent::Correlated if s.interrupting => state.delete(key),
                Intent::Correlated => {
                    let open = MessageSubscriptionRecord { message_key: -1, variables: String::new(), ..s.clone() };
                    state.put(key, encode(&open));
                }
                Intent::Rejected => {
                    state.delete(message_correlated_key(s.message_key, &s.bpmn_process_id));
                    let open = MessageSubscriptionRecord { message_key: -1, variables: String::new(), ..s.clone() };
                    state.put(key, encode(&open));
                }
                Intent::Deleted => state.delete(key),
                _ => {}
            }
        }
        RecordValue::MessageStartEventSubscription(m) => match record.intent {
            Intent::Created => {
                state.put(message_start_key(&m.tenant_id, &m.message_name, &m.bpmn_process_id, &m.start_event_id), encode(m))
            }
            Intent::Deleted => state.delete(message_start_key(&m.tenant_id, &m.message_name, &m.bpmn_process_id, &m.start_event_id)),
            Intent::Correlated => {
                state.put(message_correlated_key(m.message_key, &m.bpmn_process_id), vec![]);
                if !m.correlation_key.is_empty() {
                    state.put(message_started_key(&m.tenant_id, &m.bpmn_process_id, &m.correlation_key), encode(&m.process_instance_key));
                    state.put(
                        message_started_reverse_key(m.process_instance_key),
                        encode(&(m.bpmn_process_id.clone(), m.correlation_key.clone())),
                    );
                }
            }
            _ => {}
        },
        RecordValue::SignalSubscription(s) => match record.intent {
            Intent::Created => {
                state.put(signal_key(s), encode(s));
                state.put(element_signal_key(s), encode(s));
            }
            Intent::Deleted => {
                state.delete(signal_key(s));
                state.delete(element_signal_key(s));
            }
            _ => {}
        },
        RecordValue::CommandDistribution(d) => match record.intent {
            Intent::Distributing => state.put(outbox_key(d.partition_id, record.key), encode(d)),
            Intent::Acknowledged => {
                state.delete(outbox_key(d.partition_id, record.key));
                // a correlation key's state reached its new partition: commands for it go there
                if let (Intent::Move, Some(RecordValue::MessageRelocation(r))) = (d.intent, d.command_value.as_deref()) {
                    state.delete(relocating_key(&r.correlation_key));
                }
            }
            Intent::Received => {
                state.put(received_key(d.partition_id, record.key), vec![]);
                if d.acknowledged_below > StateView::new(state).distributions_acknowledged_below(d.partition_id) {
                    let prefix = received_prefix(d.partition_id);
                    let forgotten: Vec<Vec<u8>> = state
                        .scan_prefix(&prefix)
                        .map(|(k, _)| k)
                        .take_while(|k| i64::from_be_bytes(k[prefix.len()..].try_into().expect("received key")) < d.acknowledged_below)
                        .collect();
                    for key in forgotten {
                        state.delete(key);
                    }
                    state.put(received_below_key(d.partition_id), encode(&d.acknowledged_below));
                }
            }
            _ => {}
        },
        RecordValue::CompensationSubscription(c) => match record.intent {
            Intent::Created | Intent::Triggered => state.put(compensation_key(c.process_instance_key, record.key), encode(c)),
            Intent::Completed | Intent::Deleted => state.delete(compensation_key(c.process_instance_key, record.key)),
            _ => {}
        },
        RecordValue::UserTask(u) => apply_user_task(state, record.key, record.intent, u),
        RecordValue::ProcessEvent(e) => match record.intent {
            // a trigger already waiting on the scope stays (an event that does not wait, such as
            // a non-interrupting boundary event, is TRIGGERED at once); TRIGGERED removes its own
            Intent::Triggering if e.scope_key == e.process_definition_key => {} // a start event's
            Intent::Triggering if StateView::new(state).get_raw::<(i64, ProcessEventRecord)>(&process_event_key(e.scope_key)).is_none() => {
                state.put(process_event_key(e.scope_key), encode(&(record.key, e.clone())))
            }
            Intent::Triggered => {
                let stored = StateView::new(state).get_raw::<(i64, ProcessEventRecord)>(&process_event_key(e.scope_key));
                if stored.is_some_and(|(key, _)| key == record.key) {
                    state.delete(process_event_key(e.scope_key));
                }
            }
            _ => {}
        },
        RecordValue::Checkpoint(c) if record.intent == Intent::Created => state.put(LAST_CHECKPOINT.to_vec(), encode(c)),
        // the scale-up under way (SCALING_UP) and done (SCALED_UP)
        RecordValue::Scale(s) if matches!(record.intent, Intent::ScalingUp | Intent::ScaledUp) => {
            state.put(SCALE.to_vec(), encode(&(record.key, s, record.intent == Intent::ScaledUp)))
        }
        RecordValue::MessageRelocation(r) => apply_relocation(state, record.intent, r),
        // DEPLOYMENT CREATED, PROCESS_INSTANCE_CREATION CREATED, VARIABLE_DOCUMENT UPDATED,
        // PROCESS_INSTANCE_MODIFICATION MODIFIED, PROCESS_INSTANCE_MIGRATION MIGRATED and
        // JOB_BATCH records carry no state of their own.
        _ => {}
    }
}

/// Notes on the scope's element instance that it holds variables (read before written: most
/// variables go to a scope that already has some).
fn mark_has_variables(state: &mut Overlay<'_>, scope: i64) {
    if StateView::new(state).element_with(scope, |e| !e.has_variables) == Some(true) {
        update_element(state, scope, |e| e.has_variables = true);
    }
}

/// Changes an element instance in place (kept decoded by the overlay); nothing when it is gone.
fn update_element(state: &mut Overlay<'_>, key: i64, f: impl FnOnce(&mut ElementInstance)) {
    update_decoded(state, &element_key_bytes(key), f);
}

/// Changes the row of `key`, decoded as a `T`, in place; nothing when there is no such row.
fn update_decoded<T: serde::de::DeserializeOwned + waggle_state::DecodedValue>(
    state: &mut Overlay<'_>,
    key: &[u8],
    f: impl FnOnce(&mut T),
) {
    let mut f = Some(f);
    state.update_decoded(key, &decode_boxed::<T>, &mut |value| {
        if let Some(f) = f.take() {
            f(value.as_any_mut().downcast_mut::<T>().expect("the table's type"));
        }
    });
}

fn update_mi_body(state: &mut Overlay<'_>, body: i64, f: impl FnOnce(&mut MultiInstanceBody)) {
    if let Some(mut row) = StateView::new(state).mi_body(body) {
        f(&mut row);
        state.put(mi_body_key(body), encode(&row));
    }
}

/// The counters of a multi-instance body (`MB/`) and its output elements kept apart (`MO/`),
/// before [`apply_element`] (which removes a completed instance's variables).
fn apply_multi_instance(state: &mut Overlay<'_>, processes: &mut ProcessCache, key: i64, intent: Intent, pi: &ProcessInstanceRecord) {
    const BODY: &str = "MULTI_INSTANCE_BODY";
    if pi.bpmn_element_type.as_str() == BODY {
        match intent {
            Intent::ElementActivating => state.put(mi_body_key(key), encode(&MultiInstanceBody::default())),
            Intent::ElementActivated => {
                let model = processes.get(pi.process_definition_key, StateView::new(state));
                let Some(mi) = model.element(&pi.element_id).and_then(|i| model.elements[i].multi_instance.as_ref()) else { return };
                // the output collection as the body initialised it: its length
                let outputs = mi
                    .output_collection
                    .as_ref()
                    .and_then(|name| StateView::new(state).variable(key, name))
                    .map_or(0, |v| serde_json::from_str::<Vec<serde::de::IgnoredAny>>(&v.value).map_or(0, |items| items.len() as u32));
                let parallel = !mi.sequential;
                update_mi_body(state, key, |b| {
                    b.activating = parallel;
                    b.outputs = outputs;
                });
            }
            Intent::ElementCompleted | Intent::ElementTerminated => {
                state.delete(mi_body_key(key));
                let kept: Vec<Vec<u8>> = state.scan_prefix(&mi_output_prefix(key)).map(|(k, _)| k).collect();
                for k in kept {
                    state.delete(k);
                }
            }
            _ => {}
        }
        return;
    }
    let scope = pi.flow_scope_key;
    // an element directly in its process (most of them) is no inner instance: no lookup
    if scope <= 0
        || scope == pi.process_instance_key
        || !matches!(intent, Intent::ElementActivating | Intent::ElementCompleted | Intent::ElementTerminated)
    {
        return;
    }
    let view = StateView::new(state);
    if view.element_with(scope, |s| s.record.bpmn_element_type.as_str() == BODY) != Some(true) {
        return;
    }
    let Some(body) = view.mi_body(scope) else { return };
    match intent {
        Intent::ElementActivating => update_mi_body(state, scope, |b| b.activated += 1),
        Intent::ElementTerminated => update_mi_body(state, scope, |b| b.terminated += 1),
        _ => {
            if body.outputs > crate::limits::MAX_REWRITTEN_OUTPUT_COLLECTION {
                let model = processes.get(pi.process_definition_key, StateView::new(state));
                let name = model.element(&pi.element_id).and_then(|i| model.elements[i].multi_instance.as_ref()?.output_collection.clone());
                let view = StateView::new(state);
                let output = name.and_then(|n| view.variable(key, &n));
                let counter = view.variable(key, "loopCounter").and_then(|v| v.value.parse::<u32>().ok());
                if let (Some(output), Some(counter)) = (output, counter) {
                    state.put(mi_output_key(scope, counter), encode(&output.value));
                }
            }
            update_mi_body(state, scope, |b| b.completed += 1);
        }
    }
}

fn apply_element(state: &mut Overlay<'_>, processes: &mut ProcessCache, key: i64, intent: Intent, pi: &ProcessInstanceRecord) {
    let scope = pi.flow_scope_key;
    match intent {
        Intent::ElementActivating => {
            let instance = ElementInstance {
                key,
                state: ElementState::Activating,
                record: pi.clone(),
                active_children: 0,
                active_flows: 0,
                job_key: -1,
                // a process instance's variables are created before it activates
                has_variables: scope <= 0,
            };
            state.put_decoded(element_key(key), Box::new(instance));
            if scope > 0 {
                state.put(child_key(scope, key), vec![]);
                // the tokens that led here are consumed: one per incoming flow at a parallel
                // join, one per waiting incoming flow at an inclusive join, else one
                let model = processes.get(pi.process_definition_key, StateView::new(state));
                // (flow, tokens on it) for each flow a token is taken from, each count read once
                let consumed: Vec<(usize, u32)> = match model.element(&pi.element_id) {
                    Some(idx) => {
                        let element = &model.elements[idx];
                        let view = StateView::new(state);
                        let mut tokens = element.incoming.iter().map(|&f| (f, view.taken_flows(scope, &model.flows[f].id)));
                        match element.kind {
                            waggle_bpmn::ElementKind::ParallelGateway if element.incoming.len() > 1 => tokens.collect(),
                            waggle_bpmn::ElementKind::InclusiveGateway { .. } if element.incoming.len() > 1 => {
                                tokens.filter(|&(_, taken)| taken > 0).collect()
                            }
                            _ => tokens.find(|&(_, taken)| taken > 0).into_iter().collect(),
                        }
                    }
                    None => vec![],
                };
                for &(flow, taken) in &consumed {
                    let flow_id = &model.flows[flow].id;
                    let left = taken.saturating_sub(1);
                    if left == 0 {
                        state.delete(taken_flow_key(scope, flow_id));
                    } else {
                        state.put(taken_flow_key(scope, flow_id), encode(&left));
                    }
                }
                let n = consumed.len() as u32;
                // an interrupting event subprocess takes over its scope: tokens still on the
                // scope's flows go nowhere
                let interrupts = model.element(&pi.element_id).and_then(|i| model.event_subprocess_start(i)).is_some_and(|start| {
                    matches!(model.elements[start].kind, waggle_bpmn::ElementKind::EventStartEvent { interrupting: true, .. })
                });
                if interrupts {
                    let flows: Vec<Vec<u8>> = state.scan_prefix(&k(&[b"F/", &be(scope), b"/"])).map(|(k, _)| k).collect();
                    for f in flows {
                        state.delete(f);
                    }
                }
                update_element(state, scope, |s| {
                    s.active_children += 1;
                    s.active_flows = if interrupts { 0 } else { s.active_flows.saturating_sub(n) };
                });
            } else if pi.parent_element_instance_key > 0 {
                // an instance a call activity created is the call activity's child: terminating
                // the call activity terminates it
                let parent = pi.parent_element_instance_key;
                state.put(child_key(parent, key), vec![]);
                update_element(state, parent, |s| s.active_children += 1);
            }
            if scope <= 0 {
                count_instance(state, pi.process_definition_key, 1);
            }
        }
        Intent::ElementActivated => update_element(state, key, |e| e.state = ElementState::Activated),
        Intent::ElementMigrated => {
            if scope <= 0 {
                let before = StateView::new(state).element_with(key, |e| e.record.process_definition_key);
                if let Some(before) = before.filter(|b| *b != pi.process_definition_key) {
                    count_instance(state, before, -1);
                    count_instance(state, pi.process_definition_key, 1);
                }
            }
            update_element(state, key, |e| e.record = pi.clone())
        }
        Intent::ElementCompleting => update_element(state, key, |e| e.state = ElementState::Completing),
        Intent::ElementTerminating => {
            let holds_children = StateView::new(state).element_with(key, |e| e.active_children > 0) == Some(true);
            update_element(state, key, |e| e.state = ElementState::Terminating);
            if holds_children {
                // its children may terminate over later batches: a restart asks for them again
                state.put(terminating_scope_key(key), encode(&true));
            }
        }
        Intent::ElementCompleted | Intent::ElementTerminated => {
            // only scopes that hold variables or tokens on their flows have rows to remove
            // (tokens on flows and taken counts move together: see SequenceFlowTaken)
            let (has_variables, has_flows) =
                StateView::new(state).element_with(key, |e| (e.has_variables, e.active_flows > 0)).unwrap_or((true, true));
            state.delete(element_key(key));
            if has_variables {
                let vars: Vec<Vec<u8>> = state.scan_prefix(&variable_prefix(key)).map(|(k, _)| k).collect();
                for v in vars {
                    state.delete(v);
                }
            }
            if has_flows {
                let flows: Vec<Vec<u8>> = state.scan_prefix(&k(&[b"F/", &be(key), b"/"])).map(|(k, _)| k).collect();
                for f in flows {
                    state.delete(f);
                }
            }
            if scope <= 0 {
                count_instance(state, pi.process_definition_key, -1);
            }
            if intent == Intent::ElementTerminated && may_hold_process_event(pi) {
                // an interrupting event still waiting here goes with it
                if StateView::new(state).get_raw::<(i64, waggle_protocol::value::ProcessEventRecord)>(&process_event_key(key)).is_some() {
                    state.delete(process_event_key(key));
                }
                if StateView::new(state).get_raw::<bool>(&terminating_scope_key(key)).is_some() {
                    state.delete(terminating_scope_key(key));
                }
            }
            if scope > 0 {
                state.delete(child_key(scope, key));
                update_element(state, scope, |s| s.active_children = s.active_children.saturating_sub(1));
            } else if pi.parent_element_instance_key > 0 {
                let parent = pi.parent_element_instance_key;
                state.delete(child_key(parent, key));
                update_element(state, parent, |s| s.active_children = s.active_children.saturating_sub(1));
            } else if let Some((bpmn_id, correlation)) =
                StateView::new(state).get_raw::<(String, String)>(&message_started_reverse_key(key))
            {
                // a message may start this process for the correlation key again
                state.delete(message_started_reverse_key(key));
                state.delete(message_started_key(&pi.tenant_id, &bpmn_id, &correlation));
            }
        }
        Intent::SequenceFlowTaken => {
            let taken = StateView::new(state).taken_flows(scope, &pi.element_id) + 1;
            update_element(state, scope, |s| s.active_flows += 1);
            state.put(taken_flow_key(scope, &pi.element_id), encode(&taken));
        }
        _ => {}
    }
}

/// Whether a PROCESS_EVENT TRIGGERING can wait on an instance of this kind (`PE/`): an
/// activity that can hold a multi-instance body (its interrupting boundary event: a body, a
/// subprocess, a call activity), a scope (its interrupting event subprocess), or a catch event,
/// receive task or event-based gateway (triggered, and terminated before it completed). Other
/// kinds are not looked up when they end.
fn may_hold_process_event(pi: &ProcessInstanceRecord) -> bool {
    matches!(
        pi.bpmn_element_type.as_str(),
        "MULTI_INSTANCE_BODY"
            | "PROCESS"
            | "SUB_PROCESS"
            | "EVENT_SUB_PROCESS"
            | "CALL_ACTIVITY"
            | "INTERMEDIATE_CATCH_EVENT"
            | "RECEIVE_TASK"
            | "EVENT_BASED_GATEWAY"
    )
}

/// What a job's index rows are made of.
struct JobIndex {
    job_type: String,
    state: JobState,
    deadline_ms: i64,
    recurring_time_ms: i64,
    retries: i32,
}

impl JobIndex {
    fn of(job: &StoredJob) -> Self {
        JobIndex {
            job_type: job.record.job_type.to_string(),
            state: job.state,
            deadline_ms: job.record.deadline_ms,
            recurring_time_ms: job.record.recurring_time_ms,
            retries: job.record.retries,
        }
    }
}

/// Changes a job in place (kept decoded by the overlay); nothing when it is gone.
fn update_job(state: &mut Overlay<'_>, key: i64, f: impl FnOnce(&mut StoredJob)) {
    update_decoded(state, &job_key_bytes(key), f);
}

/// Removes a job from the activatable, deadline and back-off indexes.
fn unindex_job(state: &mut Overlay<'_>, key: i64, job: &JobIndex) {
    // only an activatable job has an activatable row (every state change keeps it so): a delete
    // of a row that is not there would still be staged, committed and flushed as a tombstone
    if job.state == JobState::Activatable {
        state.delete(activatable_key(&job.job_type, key));
    }
    if job.deadline_ms >= 0 {
        state.delete(deadline_key(job.deadline_ms, key));
    }
    if job.recurring_time_ms > 0 {
        state.delete(backoff_key(job.recurring_time_ms, key));
    }
}

/// A Zeebe user task's lifecycle (Zeebe 8.5's `UserTask*Applier`s): the transitional states
/// CREATING, ASSIGNING, UPDATING, COMPLETING, CANCELING, back to CREATED once assigned or
/// updated (with the new assignee or the changed attributes), gone once completed or canceled.
fn apply_user_task(state: &mut Overlay<'_>, key: i64, intent: Intent, task: &UserTaskRecord) {
    let row = user_task_key(key);
    if intent == Intent::Creating {
        let stored = StoredUserTask { state: UserTaskState::Creating, record: UserTaskRecord { variables: String::new(), ..task.clone() } };
        state.put(row, encode(&stored));
        update_element(state, task.element_instance_key, |e| e.job_key = key);
        return;
    }
    if matches!(intent, Intent::Completed | Intent::Canceled) {
        state.delete(row);
        return;
    }
    let Some(mut stored) = StateView::new(state).user_task(key) else { return };
    match intent {
        Intent::Created => stored.state = UserTaskState::Created,
        Intent::Assigning => stored.state = UserTaskState::Assigning,
        Intent::Updating => stored.state = UserTaskState::Updating,
        Intent::Completing => stored.state = UserTaskState::Completing,
        Intent::Canceling => stored.state = UserTaskState::Canceling,
        Intent::Migrated => stored.record = UserTaskRecord { variables: String::new(), ..task.clone() },
        Intent::Assigned => {
            stored.state = UserTaskState::Created;
            stored.record.assignee = task.assignee.clone();
        }
        Intent::Updated => {
            stored.state = UserTaskState::Created;
            for attribute in &task.changed_attributes {
                match attribute.as_str() {
                    "dueDate" => stored.record.due_date = task.due_date.clone(),
                    "followUpDate" => stored.record.follow_up_date = task.follow_up_date.clone(),
                    "candidateGroupsList" => stored.record.candidate_groups = task.candidate_groups.clone(),
                    "candidateUsersList" => stored.record.candidate_users = task.candidate_users.clone(),
                    _ => {}
                }
            }
        }
        _ => return,
    }
    state.put(row, encode(&stored));
}

fn apply_job(state: &mut Overlay<'_>, key: i64, intent: Intent, job: &JobRecord) {
    if intent == Intent::Created {
        let stored = StoredJob { state: JobState::Activatable, record: job.clone() };
        state.put_decoded(job_key(key), Box::new(stored));
        state.put(activatable_key(&job.job_type, key), vec![]);
        update_element(state, job.element_instance_key, |e| e.job_key = key);
        return;
    }
    let Some(before) = StateView::new(state).job_with(key, JobIndex::of) else { return };
    unindex_job(state, key, &before);
    if matches!(intent, Intent::Completed | Intent::Canceled) {
        state.delete(job_key(key));
        return;
    }
    let mut after = None;
    update_job(state, key, |stored| {
        match intent {
            Intent::Failed => {
                stored.record.retries = job.retries;
                stored.record.error_message = job.error_message.clone();
                stored.record.retry_backoff_ms = job.retry_backoff_ms;
                stored.record.recurring_time_ms = job.recurring_time_ms;
                stored.record.deadline_ms = -1;
                if job.retries > 0 && job.retry_backoff_ms > 0 {
                    stored.state = JobState::Failed;
                } else if job.retries > 0 {
                    stored.state = JobState::Activatable;
                    stored.record.recurring_time_ms = 0;
                } else {
                    stored.state = JobState::Failed;
                    stored.record.recurring_time_ms = 0;
                }
            }
            Intent::TimedOut | Intent::RecurredAfterBackoff | Intent::Yielded => {
                stored.state = JobState::Activatable;
                stored.record.deadline_ms = -1;
                stored.record.recurring_time_ms = 0;
            }
            Intent::RetriesUpdated => stored.record.retries = job.retries,
            Intent::Migrated => {
                stored.record.bpmn_process_id = job.bpmn_process_id.clone();
                stored.record.process_definition_key = job.process_definition_key;
                stored.record.process_definition_version = job.process_definition_version;
                stored.record.element_id = job.element_id.clone();
            }
            Intent::TimeoutUpdated => stored.record.deadline_ms = job.deadline_ms,
            // JOB UPDATE: the retries and the deadline as the changeset left them
            Intent::Updated => {
                stored.record.retries = job.retries;
                stored.record.deadline_ms = job.deadline_ms;
            }
            Intent::ErrorThrown => {
                stored.state = JobState::ErrorThrown;
                stored.record.error_code = job.error_code.clone();
                stored.record.error_message = job.error_message.clone();
                stored.record.deadline_ms = -1;
            }
            _ => {}
        }
        after = Some(JobIndex::of(stored));
    });
    let Some(after) = after else { return };
    match after.state {
        JobState::Activatable => state.put(activatable_key(&after.job_type, key), vec![]),
        JobState::Activated => state.put(deadline_key(after.deadline_ms, key), vec![]),
        JobState::Failed if after.recurring_time_ms > 0 => state.put(backoff_key(after.recurring_time_ms, key), vec![]),
        _ => {}
    }
}

/// MESSAGE_RELOCATION: RELOCATING / RELOCATED keep the relocation's counts (and whether it is
/// done); MOVING takes a correlation key's state out of this partition (its messages with their
/// ids, deadlines and correlated processes, its subscriptions, its message start markers; the
/// instances' own `MAR/` rows stay with them) and notes the key as on its way (`RK/`); MOVED
/// puts that state into the new partition; RELEASED drops a moved start marker whose instance
/// ended on the old partition.
fn apply_relocation(state: &mut Overlay<'_>, intent: Intent, r: &waggle_protocol::value::MessageRelocationRecord) {
    match intent {
        Intent::Relocating | Intent::Relocated => {
            state.put(RELOCATION.to_vec(), encode(&(r.partition_count, r.desired_partition_count, intent == Intent::Relocated)))
        }
        Intent::Moving => {
            for m in &r.messages {
                let (key, msg) = (m.message_key, &m.message);
                state.delete(message_key(key));
                state.delete(message_name_key(&msg.tenant_id, &msg.name, &msg.correlation_key, key));
                if !msg.message_id.is_empty() {
                    state.delete(message_id_key(&msg.tenant_id, &msg.name, &msg.correlation_key, &msg.message_id));
                }
                state.delete(message_deadline_key(msg.deadline_ms, key));
                for process in &m.correlated_processes {
                    state.delete(message_correlated_key(key, process));
                }
            }
            for s in &r.subscriptions {
                state.delete(message_subscription_key(&s.tenant_id, &s.message_name, &s.correlation_key, s.element_instance_key));
            }
            for started in &r.started_instances {
                state.delete(message_started_key(&started.tenant_id, &started.bpmn_process_id, &r.correlation_key));
            }
            state.put(relocating_key(&r.correlation_key), vec![]);
        }
        Intent::Moved => {
            for m in &r.messages {
                let (key, msg) = (m.message_key, &m.message);
                state.put(message_key(key), encode(msg));
                state.put(message_name_key(&msg.tenant_id, &msg.name, &msg.correlation_key, key), vec![]);
                if !msg.message_id.is_empty() {
                    state.put(message_id_key(&msg.tenant_id, &msg.name, &msg.correlation_key, &msg.message_id), encode(&key));
                }
                state.put(message_deadline_key(msg.deadline_ms, key), vec![]);
                for process in &m.correlated_processes {
                    state.put(message_correlated_key(key, process), vec![]);
                }
            }
            for s in &r.subscriptions {
                let key = message_subscription_key(&s.tenant_id, &s.message_name, &s.correlation_key, s.element_instance_key);
                state.put(key, encode(s));
            }
            for started in &r.started_instances {
                let key = message_started_key(&started.tenant_id, &started.bpmn_process_id, &r.correlation_key);
                state.put(key, encode(&started.process_instance_key));
            }
        }
        Intent::Released => {
            for started in &r.started_instances {
                let key = message_started_key(&started.tenant_id, &started.bpmn_process_id, &r.correlation_key);
                if StateView::new(state).get_raw::<i64>(&key) == Some(started.process_instance_key) {
                    state.delete(key);
                }
            }
        }
        _ => {}
    }
}
