//! Tasks: those that create a job (service, send, script, business rule and user tasks, and
//! message throw and end events, which Zeebe also serves with jobs), the receive task, the
//! script task and the business rule task the engine evaluates itself, and undefined and
//! manual tasks.

use waggle_bpmn::{Element, ElementKind, Process};
use waggle_protocol::value::ProcessInstanceRecord;
use waggle_protocol::{Intent, RecordValue};

use crate::behaviors::decisions;
use crate::behaviors::expressions;
use crate::behaviors::incidents::{error_type, incident};
use crate::behaviors::jobs;
use crate::behaviors::waits::{self, message_wait, Wait};
use crate::elements::behavior::{pass_through, wait, Activation, ElementBehavior, Transitions};
use crate::json_doc::json_text;
use crate::processing::P;
use crate::tables::ElementInstance;
use crate::variables::{self, Vars};

/// An element that creates a job and waits for it to be completed.
pub(crate) struct JobTask;

impl ElementBehavior for JobTask {
    /// JOB CREATED, the element's waits opened, ACTIVATED, and the job handed to a worker.
    fn on_activate(&self, p: P, a: Activation<'_>, _t: Transitions) {
        let Activation { model, idx, key, record: pi, waits, .. } = a;
        let (ElementKind::ServiceTask(def) | ElementKind::JobElement { def, .. }) = &model.elements[idx].kind else { return };
        let job = match jobs::job_record(p, key, &pi, def) {
            Ok(job) => job,
            Err(message) => return incident(p, &pi, key, -1, error_type::EXTRACT_VALUE_ERROR, message),
        };
        let job_key = p.new_key();
        p.event(job_key, Intent::Created, RecordValue::Job(job));
        waits::open(p, &pi, key, waits);
        p.event(key, Intent::ElementActivated, RecordValue::ProcessInstance(pi));
        jobs::job_became_activatable(p, job_key);
    }

    fn on_terminate(&self, p: P, instance: &ElementInstance) {
        if instance.job_key > 0 {
            jobs::cancel(p, instance.job_key);
        }
    }
}

/// A receive task: waits for its message.
pub(crate) struct ReceiveTask;

impl ElementBehavior for ReceiveTask {
    fn own_waits(&self, p: P, model: &Process, idx: usize, vars: Vars<'_>) -> Result<Vec<Wait>, String> {
        let e = &model.elements[idx];
        let ElementKind::ReceiveTask(message) = &e.kind else { return Ok(Vec::new()) };
        Ok(vec![message_wait(p, vars, &e.id, message, true)?])
    }

    fn on_activate(&self, p: P, a: Activation<'_>, _t: Transitions) {
        wait(p, a)
    }
}

/// A script task with `zeebe:script`: its expression is evaluated once input mappings are
/// applied; the result goes to the result variable (merged into the process instance, or local
/// to the task when it has output mappings, which then decide), and the task completes. A
/// failed evaluation is an incident; resolving it evaluates again
/// (https://docs.camunda.io/docs/components/modeler/bpmn/script-tasks/).
pub(crate) struct ScriptTask;

impl ElementBehavior for ScriptTask {
    fn on_activate(&self, p: P, a: Activation<'_>, _t: Transitions) {
        let Activation { model, idx, key, record: pi, waits, .. } = a;
        let element = &model.elements[idx];
        let ElementKind::ScriptTask { expression, result_variable } = &element.kind else { return };
        let result = match variables::evaluate(p, key, expression) {
            Ok(value) => json_text(&value.to_json()),
            Err(message) => return incident(p, &pi, key, -1, error_type::EXTRACT_VALUE_ERROR, message),
        };
        complete_with_result(p, element, key, pi, waits, result_variable, result);
    }
}

/// A business rule task with `zeebe:calledDecision`: once input mappings are applied, the
/// newest version of the decision (its id static or an expression) is evaluated with the
/// task's variables: DECISION_EVALUATION EVALUATED, the output in the result variable (as a
/// script task's result), and the task completes. A decision id that does not evaluate is an
/// EXTRACT_VALUE_ERROR incident, a decision not deployed a CALLED_DECISION_ERROR one, a failed
/// evaluation DECISION_EVALUATION FAILED and a DECISION_EVALUATION_ERROR incident; resolving
/// one evaluates again (https://docs.camunda.io/docs/components/modeler/bpmn/business-rule-tasks/,
/// Zeebe's `BusinessRuleTaskTest` and `BusinessRuleTaskIncidentTest`).
pub(crate) struct BusinessRuleTask;

impl ElementBehavior for BusinessRuleTask {
    fn on_activate(&self, p: P, a: Activation<'_>, _t: Transitions) {
        let Activation { model, idx, key, record: pi, waits, .. } = a;
        let element = &model.elements[idx];
        let ElementKind::BusinessRuleTask { decision_id, result_variable } = &element.kind else { return };
        let decision_id = match expressions::string_of(p, key, decision_id) {
            Ok(id) => id,
            Err(message) => return incident(p, &pi, key, -1, error_type::EXTRACT_VALUE_ERROR, message),
        };
        let Some(decision) = decisions::latest(p, &pi.tenant_id, &decision_id) else {
            return incident(p, &pi, key, -1, error_type::CALLED_DECISION_ERROR, decisions::not_found_by_id(&decision_id));
        };
        let drg = decisions::drg_of(p, &decision);
        let lookup = variables::ScopeLookup::new(p.view(), key);
        let mut evaluated = decisions::evaluate(p, drg.as_deref(), &decision, &lookup);
        drop(lookup);
        evaluated.record.bpmn_process_id = pi.bpmn_process_id.to_string();
        evaluated.record.process_definition_key = pi.process_definition_key;
        evaluated.record.process_instance_key = pi.process_instance_key;
        evaluated.record.element_id = pi.element_id.to_string();
        evaluated.record.element_instance_key = key;
        let evaluation_key = p.new_key();
        let output = match evaluated.output {
            Ok(output) => {
                p.event(evaluation_key, Intent::Evaluated, RecordValue::DecisionEvaluation(evaluated.record));
                output
            }
            Err(message) => {
                p.event(evaluation_key, Intent::Failed, RecordValue::DecisionEvaluation(evaluated.record));
                return incident(p, &pi, key, -1, error_type::DECISION_EVALUATION_ERROR, message);
            }
        };
        complete_with_result(p, element, key, pi, waits, result_variable, output);
    }
}

/// A task the engine evaluated itself (script, business rule): its result (a JSON text) goes
/// to the result variable, merged into the process instance, or local to the task when it has
/// output mappings (which then decide what leaves it); then the task's waits open, ACTIVATED,
/// and it completes.
fn complete_with_result(
    p: P,
    element: &Element,
    key: i64,
    pi: ProcessInstanceRecord,
    waits: Vec<Wait>,
    result_variable: &str,
    result: String,
) {
    let result = [(result_variable.to_string(), result)];
    if element.outputs.is_empty() {
        variables::merge_propagate(p, key, &result);
    } else {
        variables::merge_local(p, key, &result);
    }
    waits::open(p, &pi, key, waits);
    pass_through(p, key, pi);
}

/// An undefined (`bpmn:task`) or manual task: nothing to do, it passes through.
pub(crate) struct PlainTask;

impl ElementBehavior for PlainTask {}
