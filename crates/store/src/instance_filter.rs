//! The process instance filter's conditions on other tables (issue 28's list filters), as 8.8's
//! `ProcessInstanceFilter` defines them (the Orchestration Cluster API's "Search process
//! instances", <https://docs.camunda.io/docs/8.8/apis-tools/orchestration-cluster-api-rest/specifications/search-process-instances/>):
//!
//! - **by element** (Operate's flow-node filter): `elementId`, `elementInstanceState` (`ACTIVE`,
//!   `COMPLETED`, `TERMINATED`) and `hasElementInstanceIncident`, each a filter property like a
//!   field's; given together they hold for **one** element instance of the process instance
//!   (as Camunda's search client puts all three in one query on the element instances):
//!   `{"elementId": "charge", "hasElementInstanceIncident": true}` is the instances with an
//!   incident at `charge`.
//! - **by variable value**: `variables`, an array of `{name, value}`, `value` a string filter
//!   property on the variable's JSON text (a string's value has its quotes: `"\"declined\""`);
//!   each item must hold for some variable of the instance (any scope).

use serde_json::Value;

use crate::db::Value as Sql;
use crate::query::{field_conditions, Field, Kind};
use crate::StoreError;

const ELEMENT_ID: Field = Field { api: "elementId", sql: "e.flow_node_id", kind: Kind::Str };
const ELEMENT_STATE: Field = Field { api: "elementInstanceState", sql: "e.state", kind: Kind::Str };
const ELEMENT_INCIDENT: Field = Field { api: "hasElementInstanceIncident", sql: "(e.incident_key IS NOT NULL)", kind: Kind::Bool };
const VARIABLE_VALUE: Field = Field { api: "value", sql: "v.value", kind: Kind::Str };

/// Whether `name` is one of the fields handled here (not a column of the instance's row).
pub fn handles(name: &str) -> bool {
    matches!(name, "elementId" | "elementInstanceState" | "hasElementInstanceIncident" | "variables")
}

fn invalid(msg: impl Into<String>) -> StoreError {
    StoreError::Invalid(msg.into())
}

/// Appends the conditions of the fields handled here found in one filter object (in the order
/// of their placeholders, as [`crate::query`] does).
pub fn conditions(map: &serde_json::Map<String, Value>, conds: &mut Vec<String>, args: &mut Vec<Sql>) -> Result<(), StoreError> {
    let given = |name: &str| map.get(name).filter(|v| !crate::query::is_empty(v));
    let mut element = Vec::new();
    for fd in [&ELEMENT_ID, &ELEMENT_STATE, &ELEMENT_INCIDENT] {
        if let Some(value) = given(fd.api) {
            field_conditions(fd, fd.api, value, &mut element, args)?;
        }
    }
    if !element.is_empty() {
        conds.push(format!(
            "EXISTS (SELECT 1 FROM flow_node_instance e WHERE e.process_instance_key = t.process_instance_key AND {})",
            element.join(" AND ")
        ));
    }
    if let Some(items) = given("variables") {
        variables(items, conds, args)?;
    }
    Ok(())
}

/// The conditions of a `variables` filter value (an array of `{name, value}`) on the process
/// instance `t` (also the process definition statistics' filter, 8.8's
/// `ProcessDefinitionStatisticsFilter`).
pub fn variables(items: &Value, conds: &mut Vec<String>, args: &mut Vec<Sql>) -> Result<(), StoreError> {
    let items = items.as_array().ok_or_else(|| invalid("'variables' takes an array of {name, value}"))?;
    for item in items {
        let obj = item.as_object().ok_or_else(|| invalid(format!("a 'variables' item must be {{name, value}}, not {item}")))?;
        if let Some(k) = obj.keys().find(|k| !matches!(k.as_str(), "name" | "value")) {
            return Err(invalid(format!("unknown field '{k}' in a 'variables' item (expected name, value)")));
        }
        let name = obj.get("name").and_then(Value::as_str).ok_or_else(|| invalid("a 'variables' item needs a 'name' string"))?;
        let mut inner = vec!["v.name = ?".to_owned()];
        args.push(Sql::Text(name.to_owned()));
        match obj.get("value") {
            Some(value) if !crate::query::is_empty(value) => field_conditions(&VARIABLE_VALUE, "value", value, &mut inner, args)?,
            _ => return Err(invalid(format!("the 'variables' item of '{name}' needs a 'value'"))),
        }
        conds.push(format!(
            "EXISTS (SELECT 1 FROM variable v WHERE v.process_instance_key = t.process_instance_key AND {})",
            inner.join(" AND ")
        ));
    }
    Ok(())
}
