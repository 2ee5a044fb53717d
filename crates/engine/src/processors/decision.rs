//! DECISION_EVALUATION EVALUATE (the EvaluateDecision RPC): evaluates the decision by key, or
//! the newest version of a decision id, with the command's variables, and answers with
//! EVALUATED or FAILED (a failed evaluation is an answer, not a rejection)
//! (https://docs.camunda.io/docs/apis-tools/zeebe-api/gateway-service/#evaluatedecision-rpc;
//! Zeebe's `StandaloneDecisionEvaluationTest` for the rejections and their messages).

use waggle_protocol::{Intent, Record, RecordValue, RejectionType};

use crate::batch::RequestId;
use crate::behaviors::decisions;
use crate::json_doc;
use crate::processing::P;
use crate::tables::same_tenant;

pub(crate) fn evaluate(p: P, command: &Record, request: Option<RequestId>) {
    let RecordValue::DecisionEvaluation(asked) = &command.value else { return };
    let decision = if asked.decision_key > 0 {
        // a decision of another tenant is one this tenant cannot see
        let decision = p.view().decision(asked.decision_key).filter(|d| same_tenant(&d.tenant_id, &asked.tenant_id));
        let Some(decision) = decision else {
            let key = asked.decision_key;
            let reason = format!("Expected to evaluate decision '{key}', but no decision found for key '{key}'");
            return p.reject(command, request, RejectionType::NotFound, reason);
        };
        decision
    } else if !asked.decision_id.is_empty() {
        let Some(decision) = decisions::latest(p, &asked.tenant_id, &asked.decision_id) else {
            return p.reject(command, request, RejectionType::NotFound, decisions::not_found_by_id(&asked.decision_id));
        };
        decision
    } else {
        let reason = "Expected either a decision id or a valid decision key, but none provided".to_string();
        return p.reject(command, request, RejectionType::InvalidArgument, reason);
    };
    let variables = match json_doc::parse_document(&asked.variables) {
        Ok(variables) => variables,
        Err(reason) => return p.reject(command, request, RejectionType::InvalidArgument, reason),
    };
    let drg = decisions::drg_of(p, &decision);
    let evaluated = decisions::evaluate(p, drg.as_deref(), &decision, &variables);
    let intent = if evaluated.output.is_ok() { Intent::Evaluated } else { Intent::Failed };
    let key = p.new_key();
    let event = p.event_record(key, intent, RecordValue::DecisionEvaluation(evaluated.record));
    p.respond(request, event);
}
