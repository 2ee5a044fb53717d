//! Call activities: activating one creates an instance of the called process on this partition
//! (Zeebe creates it on the caller's partition too), whose records name the caller as their
//! parent; the call activity waits for it. When it completes, its variables go to the call
//! activity and the call activity completes; terminating the call activity terminates it (it is
//! the call activity's child in the `C/` table). Errors and escalations thrown in it and not
//! caught there reach the call activity (`behaviors::catches`).
//!
//! Zeebe 8.5: docs.camunda.io/docs/components/modeler/bpmn/call-activities/, and the engine's
//! `CallActivityTest` (zeebe/engine/src/test/java/io/camunda/zeebe/engine/processing/bpmn/
//! activity/CallActivityTest.java), whose incident messages these are.

use std::sync::Arc;

use waggle_bpmn::{CalledBinding, CalledElement, ElementKind, Process};
use waggle_protocol::value::{ProcessInstanceRecord, ProcessRecord};
use waggle_protocol::{Intent, RecordValue};

use crate::behaviors::expressions::string_of;
use crate::behaviors::incidents::{error_type, incident};
use crate::behaviors::{starts, waits};
use crate::elements::behavior::{Activation, ElementBehavior, Transitions};
use crate::processing::P;
use crate::tables::{ElementInstance, ElementState};
use crate::variables;

/// A call activity.
pub(crate) struct CallActivity;

impl ElementBehavior for CallActivity {
    /// Finds the called process (an incident when it cannot), opens the boundary events'
    /// waits, ACTIVATED, then creates the called instance with the variables it gets.
    fn on_activate(&self, p: P, a: Activation<'_>, _t: Transitions) {
        let Activation { model, idx, key, record: pi, waits, .. } = a;
        let element = &model.elements[idx];
        let ElementKind::CallActivity(called) = &element.kind else { return };
        let (definition_key, definition) = match called_process(p, key, &pi, called) {
            Ok(found) => found,
            Err((kind, message)) => return incident(p, &pi, key, -1, kind, message),
        };
        waits::open(p, &pi, key, waits);
        p.event(key, Intent::ElementActivated, RecordValue::ProcessInstance(pi.clone()));
        // every variable visible here, or only the input mappings' results (local to it)
        let variables = if called.propagate_all_parent_variables {
            variables::visible_variable_texts(p.view(), key, &[])
        } else if !element.inputs.is_empty() {
            p.view().variables_of(key)
        } else {
            Vec::new()
        };
        let child_key = p.new_key();
        starts::start_called_instance(p, &definition, definition_key, child_key, &pi, key, variables);
    }

    /// The variables the called instance left: local to the call activity when it has output
    /// mappings (they read them), else merged from it outwards, as Zeebe merges them.
    fn on_completing(&self, p: P, model: &Process, idx: usize, key: i64) {
        let Some(left) = p.take_called_result(key) else { return };
        if model.elements[idx].outputs.is_empty() {
            variables::merge_propagate(p, key, &left);
        } else {
            variables::merge_local(p, key, &left);
        }
    }
}

/// The process a call activity instance (`key`, record `pi`) calls: (key, record), or the
/// incident's (error type, message), in Zeebe's order of checks: the depth of instances, the
/// process id, a version for the binding, a none start event.
fn called_process(
    p: P,
    key: i64,
    pi: &ProcessInstanceRecord,
    called: &CalledElement,
) -> Result<(i64, Arc<ProcessRecord>), (&'static str, String)> {
    let max = p.limits.max_process_depth;
    if depth_of(p, pi, max) + 1 > max {
        let message = format!(
            "The call activity has reached the maximum depth of {max}. This is likely due to a recursive call. Cancel the root process instance if this was unintentional. Otherwise, consider increasing the maximum depth, or use process instance modification to adjust the process instance."
        );
        return Err((error_type::CALLED_ELEMENT_ERROR, message));
    }
    let process_id = string_of(p, key, &called.process_id).map_err(|m| (error_type::EXTRACT_VALUE_ERROR, m))?;
    let view = p.view();
    let found = match &called.binding {
        CalledBinding::Latest => view.latest_process(&pi.tenant_id, &process_id).map(|(_, k)| k).ok_or_else(|| {
            format!("Expected process with BPMN process id '{process_id}' to be deployed, but not found.")
        }),
        CalledBinding::Deployment => {
            let deployment = view.deployment_of(pi.process_definition_key).unwrap_or(-1);
            view.process_in_deployment(deployment, &process_id).ok_or_else(|| {
                format!(
                    "Expected to call process with BPMN process id '{process_id}' with binding type 'deployment', but no such process found in the deployment with key {deployment} which contained the current process. To resolve this incident, migrate the process instance to a process definition that is deployed together with the intended process definition to call."
                )
            })
        }
        CalledBinding::VersionTag(tag) => view.process_by_version_tag(&pi.tenant_id, &process_id, tag).map(|(_, k)| k).ok_or_else(|| {
            format!(
                "Expected to call process with BPMN process id '{process_id}' and version tag '{tag}', but no such process found. To resolve this incident, deploy a process with the given process id and version tag."
            )
        }),
    };
    let definition_key = found.map_err(|m| (error_type::CALLED_ELEMENT_ERROR, m))?;
    let Some(definition) = p.process_record(definition_key) else {
        let message = format!("Expected process with BPMN process id '{process_id}' to be deployed, but not found.");
        return Err((error_type::CALLED_ELEMENT_ERROR, message));
    };
    if p.process_model(definition_key).start.is_none() {
        let message = format!("Expected process with BPMN process id '{process_id}' to have a none start event, but not found.");
        return Err((error_type::CALLED_ELEMENT_ERROR, message));
    }
    Ok((definition_key, definition))
}

/// How deep the process instance of element record `pi` is: 1 for a root instance, one more per
/// call activity above it (counted up to `max` + 1 at most: one read per level).
fn depth_of(p: P, pi: &ProcessInstanceRecord, max: usize) -> usize {
    let mut depth = 1;
    let mut call_activity = pi.parent_element_instance_key;
    while call_activity > 0 && depth <= max {
        depth += 1;
        call_activity = p.view().element_with(call_activity, |e| e.record.parent_element_instance_key).unwrap_or(-1);
    }
    depth
}

/// Whether `pi` is a called instance being activated whose call activity is no longer active.
pub(crate) fn caller_gone(p: P, pi: &ProcessInstanceRecord) -> bool {
    pi.flow_scope_key < 0
        && pi.parent_element_instance_key > 0
        && p.view().element_with(pi.parent_element_instance_key, |e| e.state == ElementState::Activated) != Some(true)
}

/// A process instance (`key`, record `pi`) completes, its COMPLETING written: when a call
/// activity that still waits created it, the variables it hands over are kept for the call
/// activity (read now: COMPLETED removes them), and the call activity is returned for
/// [`child_completed`].
pub(crate) fn child_completing(p: P, key: i64, pi: &ProcessInstanceRecord) -> Option<ElementInstance> {
    if pi.parent_element_instance_key <= 0 {
        return None;
    }
    let caller = p.view().element(pi.parent_element_instance_key).filter(|e| e.state == ElementState::Activated)?;
    let model = p.process_model(caller.record.process_definition_key);
    let element = &model.elements[model.element(&caller.record.element_id)?];
    let ElementKind::CallActivity(called) = &element.kind else { return None };
    // output mappings read the called instance's variables whatever propagateAllChildVariables says
    if called.propagate_all_child_variables || !element.outputs.is_empty() {
        let left = p.view().variables_of(key);
        p.set_called_result(caller.key, left);
    }
    Some(caller)
}

/// After the called instance's COMPLETED: the call activity completes.
pub(crate) fn child_completed(p: P, caller: ElementInstance) {
    p.command(caller.key, Intent::CompleteElement, RecordValue::ProcessInstance(caller.record));
}
