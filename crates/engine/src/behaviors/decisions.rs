//! Evaluating a deployed decision, for a business rule task or EvaluateDecision: waggle-dmn's
//! result as Zeebe's DECISION_EVALUATION record (evaluated decisions with their keys and
//! versions, inputs, matched rules, outputs; on failure the message and the failed decision).
//! https://docs.camunda.io/docs/components/modeler/bpmn/business-rule-tasks/ and
//! https://docs.camunda.io/docs/apis-tools/zeebe-api/gateway-service/#evaluatedecision-rpc

use std::sync::Arc;

use waggle_dmn::{DecisionEvaluation, Drg};
use waggle_feel::{Value, VariableLookup};
use waggle_protocol::value::{
    DecisionEvaluationRecord, DecisionRecord, EvaluatedDecisionValue, EvaluatedInputValue, EvaluatedOutputValue, MatchedRuleValue,
};

use crate::json_doc::json_text;
use crate::processing::{Processing, P};

/// Zeebe's message for a decision id with no deployed decision.
pub(crate) fn not_found_by_id(id: &str) -> String {
    format!("Expected to evaluate decision '{id}', but no decision found for id '{id}'")
}

/// The newest version of decision `id` of `tenant`.
pub(crate) fn latest(p: P, tenant: &str, id: &str) -> Option<DecisionRecord> {
    let (_, key) = p.view().latest_decision(tenant, id)?;
    p.view().decision(key)
}

/// The outcome of an evaluation: the record (for EVALUATED or FAILED), and the output's JSON
/// text when it succeeded.
pub(crate) struct Evaluated {
    pub record: DecisionEvaluationRecord,
    pub output: Result<String, String>,
}

/// The parsed graph of a deployed decision (None only if state lost it: a broken invariant
/// that [`evaluate`] reports as a failure).
pub(crate) fn drg_of(p: P, decision: &DecisionRecord) -> Option<Arc<Drg>> {
    p.drg(decision.decision_requirements_key)
}

/// Evaluates `decision` (its graph `drg`, from [`drg_of`]) with `vars`.
pub(crate) fn evaluate(p: &Processing<'_, '_, '_>, drg: Option<&Drg>, decision: &DecisionRecord, vars: &dyn VariableLookup) -> Evaluated {
    let Some(drg) = drg else {
        // a decision is only ever stored with its graph
        let message = format!("Expected to evaluate decision '{}', but its decision requirements are not deployed", decision.decision_id);
        return Evaluated { record: record_of(decision, Vec::new(), "null".into(), &message, &decision.decision_id), output: Err(message) };
    };
    let context = waggle_feel::EvalContext { now_millis: Some(p.now_ms), seed: None };
    let result = drg.evaluate(&decision.decision_id, vars, &context);
    let evaluated = evaluated_decisions(p, decision, &result);
    match result.failure {
        None => {
            let output = value_text(&result.output);
            Evaluated { record: record_of(decision, evaluated, output.clone(), "", ""), output: Ok(output) }
        }
        Some(failure) => Evaluated {
            record: record_of(decision, evaluated, "null".into(), &failure.message, &failure.failed_decision_id),
            output: Err(failure.message),
        },
    }
}

fn record_of(
    decision: &DecisionRecord,
    evaluated: Vec<EvaluatedDecisionValue>,
    output: String,
    failure: &str,
    failed: &str,
) -> DecisionEvaluationRecord {
    DecisionEvaluationRecord {
        decision_key: decision.decision_key,
        decision_id: decision.decision_id.clone(),
        decision_name: decision.decision_name.clone(),
        decision_version: decision.version,
        decision_requirements_id: decision.decision_requirements_id.clone(),
        decision_requirements_key: decision.decision_requirements_key,
        decision_output: output,
        process_definition_key: -1,
        process_instance_key: -1,
        element_instance_key: -1,
        evaluated_decisions: evaluated,
        evaluation_failure_message: failure.to_string(),
        failed_decision_id: failed.to_string(),
        tenant_id: decision.tenant_id.clone(),
        ..Default::default()
    }
}

/// The evaluated decisions, each with the key and version of its deployed decision (of the
/// same graph as `decision`).
fn evaluated_decisions(p: &Processing<'_, '_, '_>, decision: &DecisionRecord, result: &DecisionEvaluation) -> Vec<EvaluatedDecisionValue> {
    result
        .evaluated
        .iter()
        .map(|d| {
            let (key, version) = if d.decision_id == decision.decision_id {
                (decision.decision_key, decision.version)
            } else {
                p.view()
                    .decision_in_drg(decision.decision_requirements_key, &d.decision_id)
                    .and_then(|key| p.view().decision(key))
                    .map_or((-1, -1), |r| (r.decision_key, r.version))
            };
            EvaluatedDecisionValue {
                decision_id: d.decision_id.clone(),
                decision_name: d.decision_name.clone().unwrap_or_default(),
                decision_key: key,
                decision_version: version,
                decision_type: d.decision_type.to_string(),
                decision_output: value_text(&d.output),
                evaluated_inputs: d
                    .inputs
                    .iter()
                    .map(|i| EvaluatedInputValue {
                        input_id: i.input_id.clone().unwrap_or_default(),
                        input_name: i.input_name.clone().unwrap_or_default(),
                        input_value: value_text(&i.value),
                    })
                    .collect(),
                matched_rules: d
                    .matched_rules
                    .iter()
                    .map(|r| MatchedRuleValue {
                        rule_id: r.rule_id.clone().unwrap_or_default(),
                        rule_index: i32::try_from(r.rule_index).unwrap_or(i32::MAX),
                        evaluated_outputs: r
                            .outputs
                            .iter()
                            .map(|o| EvaluatedOutputValue {
                                output_id: o.output_id.clone().unwrap_or_default(),
                                output_name: o.output_name.clone().unwrap_or_default(),
                                output_value: value_text(&o.value),
                            })
                            .collect(),
                    })
                    .collect(),
                tenant_id: decision.tenant_id.clone(),
            }
        })
        .collect()
}

/// A FEEL value as the JSON text Zeebe writes for it.
fn value_text(value: &Value) -> String {
    json_text(&value.to_json())
}
