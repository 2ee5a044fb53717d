//! DMN in the store, as Camunda 8.8's API shows it: decision definitions and decision
//! requirements (`/v2/decision-definitions`, `/v2/decision-requirements`) and decision
//! instances (`/v2/decision-instances`,
//! <https://docs.camunda.io/docs/8.8/apis-tools/orchestration-cluster-api-rest/specifications/search-decision-instances/>).
//!
//! A DECISION_EVALUATION event (a business rule task's or EvaluateDecision's) becomes one
//! decision instance per evaluated decision, as 8.8's exporters write it (camunda/camunda
//! `zeebe/exporters/rdbms-exporter/.../DecisionInstanceExportHandler.java`): its id is
//! `<evaluation key>-<place from 1>` (`decisionEvaluationInstanceKey`), the evaluation key is
//! `decisionEvaluationKey`, and of a FAILED evaluation the last decision is FAILED with the
//! evaluation's failure message, the ones before it EVALUATED. (8.8's RDBMS exporter skips
//! failed evaluations; its Elasticsearch exporter, behind Operate, keeps them: so does Waggle.)

use serde_json::{json, Value};
use waggle_protocol::value::{DecisionEvaluationRecord, DecisionRecord, DecisionRequirementsRecord};
use waggle_protocol::PartitionId;

use crate::db::{Connection, ToValue, Value as Sql};
use crate::query::{f, invalid, item, Entity, Kind};
use crate::{params, StoreError};

pub static DECISION_DEFINITION: Entity = Entity {
    name: "decision definition",
    table: "decision_definition",
    key: "t.decision_definition_key",
    fields: &[
        f("decisionDefinitionKey", "t.decision_definition_key", Kind::Key),
        f("decisionDefinitionId", "t.decision_definition_id", Kind::Str),
        f("name", "t.name", Kind::Str),
        f("version", "t.version", Kind::Int),
        f("decisionRequirementsId", "t.decision_requirements_id", Kind::Str),
        f("decisionRequirementsKey", "t.decision_requirements_key", Kind::Key),
        f("tenantId", "t.tenant_id", Kind::Str),
    ],
};

pub static DECISION_REQUIREMENTS: Entity = Entity {
    name: "decision requirements",
    table: "decision_requirements",
    key: "t.decision_requirements_key",
    fields: &[
        f("decisionRequirementsKey", "t.decision_requirements_key", Kind::Key),
        f("decisionRequirementsId", "t.decision_requirements_id", Kind::Str),
        f("decisionRequirementsName", "t.name", Kind::Str),
        f("version", "t.version", Kind::Int),
        f("resourceName", "t.resource_name", Kind::Str),
        f("tenantId", "t.tenant_id", Kind::Str),
    ],
};

/// The fields of 8.8's `DecisionInstanceResult` (searches); a get adds [`DETAILS`].
const INSTANCE_FIELDS: [crate::query::Field; 15] = [
    f("decisionEvaluationInstanceKey", "t.decision_instance_id", Kind::Str),
    f("state", "t.state", Kind::Str),
    f("evaluationDate", "t.evaluation_date", Kind::Date),
    f("evaluationFailure", "t.evaluation_failure", Kind::Str),
    f("decisionDefinitionId", "t.decision_definition_id", Kind::Str),
    f("decisionDefinitionName", "t.decision_definition_name", Kind::Str),
    f("decisionDefinitionVersion", "t.decision_definition_version", Kind::Int),
    f("decisionDefinitionType", "t.decision_type", Kind::Str),
    f("result", "t.result", Kind::Str),
    f("tenantId", "t.tenant_id", Kind::Str),
    f("decisionEvaluationKey", "t.decision_instance_key", Kind::Key),
    f("processDefinitionKey", "t.process_definition_key", Kind::Key),
    f("processInstanceKey", "t.process_instance_key", Kind::Key),
    f("decisionDefinitionKey", "t.decision_definition_key", Kind::Key),
    f("elementInstanceKey", "t.flow_node_instance_key", Kind::Key),
];

/// Decision instances. Their last sort criterion is the evaluation's key, then the decision's
/// place in it (`key` holds both columns).
pub static DECISION_INSTANCE: Entity = Entity {
    name: "decision instance",
    table: "decision_instance",
    key: "t.decision_instance_key, t.evaluation_index",
    fields: &INSTANCE_FIELDS,
};

/// What 8.8's `DecisionInstanceGetQueryResult` adds: the evaluated inputs and matched rules.
const DETAILS: [crate::query::Field; 2] =
    [f("evaluatedInputs", "t.evaluated_inputs", Kind::Json), f("matchedRules", "t.matched_rules", Kind::Json)];

static DECISION_INSTANCE_DETAILS: Entity = Entity {
    name: "decision instance",
    table: "decision_instance",
    key: "t.decision_instance_id",
    fields: &[
        INSTANCE_FIELDS[0],
        INSTANCE_FIELDS[1],
        INSTANCE_FIELDS[2],
        INSTANCE_FIELDS[3],
        INSTANCE_FIELDS[4],
        INSTANCE_FIELDS[5],
        INSTANCE_FIELDS[6],
        INSTANCE_FIELDS[7],
        INSTANCE_FIELDS[8],
        INSTANCE_FIELDS[9],
        INSTANCE_FIELDS[10],
        INSTANCE_FIELDS[11],
        INSTANCE_FIELDS[12],
        INSTANCE_FIELDS[13],
        INSTANCE_FIELDS[14],
        DETAILS[0],
        DETAILS[1],
    ],
};

/// One decision instance by its `decisionEvaluationInstanceKey` (`<key>-<n>`), with its
/// evaluated inputs and matched rules; a malformed id is invalid, an unknown one not found.
pub fn get_instance(conn: &Connection, id: &str) -> Result<Value, StoreError> {
    let well_formed =
        id.split_once('-').is_some_and(|(k, n)| k.parse::<i64>().is_ok_and(|k| k > 0) && n.parse::<u32>().is_ok_and(|n| n > 0));
    if !well_formed {
        return Err(invalid(format!("'{id}' is not a decision evaluation instance key (<key>-<number>)")));
    }
    let e = &DECISION_INSTANCE_DETAILS;
    let columns = e.fields.iter().map(|f| f.sql).collect::<Vec<_>>().join(", ");
    let row =
        conn.query_row(&format!("SELECT {columns} FROM decision_instance t WHERE t.decision_instance_id = ?1"), &[Sql::Text(id.into())])?;
    row.map(|r| item(e, r)).ok_or_else(|| StoreError::NotFound(format!("decision instance with key {id}")))
}

/// The DMN XML of a decision definition's requirements (`by_definition`) or of decision
/// requirements, by key.
pub fn xml(conn: &Connection, key: i64, by_definition: bool) -> Result<String, StoreError> {
    let (sql, what) = if by_definition {
        (
            "SELECT r.xml FROM decision_definition d JOIN decision_requirements r ON r.decision_requirements_key = d.decision_requirements_key
             WHERE d.decision_definition_key = ?1",
            "decision definition",
        )
    } else {
        ("SELECT xml FROM decision_requirements WHERE decision_requirements_key = ?1", "decision requirements")
    };
    match conn.query_row(sql, &[Sql::Integer(key)])?.and_then(|r| r.into_iter().next()) {
        Some(Sql::Text(xml)) => Ok(xml),
        _ => Err(StoreError::NotFound(format!("{what} with key {key}"))),
    }
}

fn tenant(t: &str) -> &str {
    if t.is_empty() {
        "<default>"
    } else {
        t
    }
}

fn set(key: i64) -> Option<i64> {
    (key > 0).then_some(key)
}

fn non_empty(t: &str) -> Option<&str> {
    (!t.is_empty()).then_some(t)
}

/// Inserts a row of `(column, value)` pairs into `table`, unless a row with the first column's
/// value (the table's key) is there already: an event exported again changes nothing.
fn insert_once(tx: &Connection, table: &str, row: &[(&str, &dyn ToValue)]) -> Result<(), StoreError> {
    let columns: Vec<&str> = row.iter().map(|(c, _)| *c).collect();
    let placeholders: Vec<String> = (1..=row.len()).map(|i| format!("?{i}")).collect();
    let values: Vec<Sql> = row.iter().map(|(_, v)| v.to_value()).collect();
    let sql = format!(
        "INSERT INTO {table} ({}) VALUES ({}) ON CONFLICT ({}) DO NOTHING",
        columns.join(", "),
        placeholders.join(", "),
        columns.first().copied().unwrap_or_default()
    );
    tx.execute(&sql, &values)?;
    Ok(())
}

/// A DECISION_REQUIREMENTS CREATED event: the requirements and their XML.
pub(crate) fn export_requirements(tx: &Connection, r: &DecisionRequirementsRecord) -> Result<(), StoreError> {
    let xml = String::from_utf8_lossy(&r.resource);
    insert_once(
        tx,
        "decision_requirements",
        &[
            ("decision_requirements_key", &r.decision_requirements_key),
            ("decision_requirements_id", &r.decision_requirements_id),
            ("name", &non_empty(&r.decision_requirements_name)),
            ("resource_name", &r.resource_name),
            ("version", &r.decision_requirements_version),
            ("xml", &xml.as_ref()),
            ("tenant_id", &tenant(&r.tenant_id)),
        ],
    )
}

/// A DECISION CREATED event: the decision definition.
pub(crate) fn export_decision(tx: &Connection, d: &DecisionRecord) -> Result<(), StoreError> {
    insert_once(
        tx,
        "decision_definition",
        &[
            ("decision_definition_key", &d.decision_key),
            ("decision_definition_id", &d.decision_id),
            ("name", &non_empty(&d.decision_name)),
            ("version", &d.version),
            ("decision_requirements_key", &set(d.decision_requirements_key)),
            ("decision_requirements_id", &d.decision_requirements_id),
            ("tenant_id", &tenant(&d.tenant_id)),
        ],
    )
}

/// A DECISION DELETED event (DeleteResource on its DRG; the record's key is the decision's): the definition's row goes, so that
/// searches and gets no longer find it, as the deleted decision's own lookups fail in 8.8.
pub(crate) fn delete_decision(tx: &Connection, decision_key: i64) -> Result<(), StoreError> {
    tx.execute("DELETE FROM decision_definition WHERE decision_definition_key = ?1", params![decision_key])?;
    Ok(())
}

/// A DECISION_REQUIREMENTS DELETED event: the requirements' row (with its XML) goes.
pub(crate) fn delete_requirements(tx: &Connection, decision_requirements_key: i64) -> Result<(), StoreError> {
    tx.execute("DELETE FROM decision_requirements WHERE decision_requirements_key = ?1", params![decision_requirements_key])?;
    Ok(())
}

/// A DECISION_EVALUATION EVALUATED or FAILED event (`failed`): a row per evaluated decision.
pub(crate) fn export_evaluation(
    tx: &Connection,
    partition: PartitionId,
    key: i64,
    timestamp: i64,
    failed: bool,
    v: &DecisionEvaluationRecord,
) -> Result<(), StoreError> {
    let count = v.evaluated_decisions.len();
    for (i, d) in v.evaluated_decisions.iter().enumerate() {
        let failed_here = failed && i + 1 == count;
        let inputs: Vec<Value> = d
            .evaluated_inputs
            .iter()
            .map(|x| json!({"inputId": x.input_id, "inputName": x.input_name, "inputValue": x.input_value}))
            .collect();
        let rules: Vec<Value> = d
            .matched_rules
            .iter()
            .map(|m| {
                json!({
                    "ruleId": m.rule_id,
                    "ruleIndex": m.rule_index,
                    "evaluatedOutputs": m.evaluated_outputs.iter().map(|o| json!({
                        "outputId": o.output_id, "outputName": o.output_name, "outputValue": o.output_value,
                    })).collect::<Vec<_>>(),
                })
            })
            .collect();
        let place = (i + 1) as i64;
        insert_once(
            tx,
            "decision_instance",
            &[
                ("decision_instance_id", &format!("{key}-{place}")),
                ("decision_instance_key", &key),
                ("evaluation_index", &place),
                ("state", &if failed_here { "FAILED" } else { "EVALUATED" }),
                ("evaluation_date", &timestamp),
                ("evaluation_failure", &failed_here.then_some(v.evaluation_failure_message.as_str())),
                ("result", &d.decision_output),
                ("decision_definition_key", &set(d.decision_key)),
                ("decision_definition_id", &d.decision_id),
                ("decision_definition_name", &non_empty(&d.decision_name)),
                ("decision_definition_version", &d.decision_version),
                ("decision_type", &non_empty(&d.decision_type)),
                ("decision_requirements_key", &set(v.decision_requirements_key)),
                ("decision_requirements_id", &non_empty(&v.decision_requirements_id)),
                // -1 of an evaluation on its own, as 8.8 stores and answers them (its Java
                // client reads these keys as numbers)
                ("process_definition_key", &v.process_definition_key),
                ("process_definition_id", &non_empty(&v.bpmn_process_id)),
                ("process_instance_key", &v.process_instance_key),
                ("flow_node_instance_key", &v.element_instance_key),
                ("flow_node_id", &non_empty(&v.element_id)),
                ("evaluated_inputs", &Value::Array(inputs).to_string()),
                ("matched_rules", &Value::Array(rules).to_string()),
                ("tenant_id", &tenant(&d.tenant_id)),
                ("partition_id", &partition),
            ],
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn malformed_ids_are_invalid() {
        let conn = crate::open(std::path::Path::new(":memory:")).unwrap();
        for id in ["", "12", "x-1", "12-", "12-0", "-1-1", "12-1-1"] {
            assert!(matches!(super::get_instance(&conn, id), Err(crate::StoreError::Invalid(_))), "{id}");
        }
        assert!(matches!(super::get_instance(&conn, "12-1"), Err(crate::StoreError::NotFound(_))));
    }
}
