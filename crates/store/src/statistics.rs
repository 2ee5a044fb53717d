//! Element statistics of Camunda 8.8's API: per element id, how many element instances are
//! active, canceled, in an incident and completed
//! (<https://docs.camunda.io/docs/8.8/apis-tools/orchestration-cluster-api-rest/specifications/get-process-definition-statistics/>
//! and `get-process-instance-statistics`), computed as 8.8's RDBMS store does
//! (camunda/camunda `db/rdbms/src/main/resources/mapper/ProcessDefinitionMapper.xml`,
//! `flowNodeStatistics`):
//!
//! - an element instance is *active* when ACTIVE without an incident, *incidents* when ACTIVE
//!   with one, *canceled* when TERMINATED, *completed* when COMPLETED; the process itself is no
//!   element here (8.8 keeps no element instance of it);
//! - of one process instance, those four are counts of its element instances;
//! - of a process definition, they count **process instances**: an element is active in as many
//!   instances as have at least one active instance of it (likewise the others), over the
//!   instances the filter selects (8.8's `ProcessDefinitionStatisticsFilter`: the process
//!   instance's fields, and `elementId`, `elementInstanceState` and
//!   `hasElementInstanceIncident` of the element instances counted).
//!
//! Both read `flow_node_instance` through its process instance index; a definition's instances
//! are found by `process_instance_definition_key` (schema).

use serde_json::{json, Map, Value};

use crate::db::{Connection, Value as Sql};
use crate::query::{f, invalid, where_clause, Entity, Kind, HAS_INCIDENT_PI};
use crate::StoreError;

/// The filter of a process definition's statistics: over `process_instance t` joined to its
/// element instances `e`.
pub static PROCESS_DEFINITION_STATISTICS_FILTER: Entity = Entity {
    name: "process definition statistics filter",
    table: "process_instance",
    key: "t.process_instance_key",
    fields: &[
        f("processInstanceKey", "t.process_instance_key", Kind::Key),
        f("parentProcessInstanceKey", "t.parent_process_instance_key", Kind::Key),
        f("parentElementInstanceKey", "t.parent_element_instance_key", Kind::Key),
        f("startDate", "t.start_date", Kind::Date),
        f("endDate", "t.end_date", Kind::Date),
        f("state", "t.state", Kind::Str),
        f("hasIncident", HAS_INCIDENT_PI, Kind::Bool),
        f("tenantId", "t.tenant_id", Kind::Str),
        f(
            "hasRetriesLeft",
            "EXISTS (SELECT 1 FROM job j WHERE j.process_instance_key = t.process_instance_key \
             AND j.state IN ('FAILED', 'ERROR_THROWN') AND j.retries > 0)",
            Kind::Bool,
        ),
        f("elementId", "e.flow_node_id", Kind::Str),
        f("elementInstanceState", "e.state", Kind::Str),
        f("hasElementInstanceIncident", "(e.incident_key IS NOT NULL)", Kind::Bool),
    ],
};

const COUNTS: &str = "SUM(CASE WHEN e.state = 'ACTIVE' AND e.incident_key IS NULL THEN 1 ELSE 0 END) AS active, \
     SUM(CASE WHEN e.state = 'TERMINATED' THEN 1 ELSE 0 END) AS canceled, \
     SUM(CASE WHEN e.state = 'ACTIVE' AND e.incident_key IS NOT NULL THEN 1 ELSE 0 END) AS incidents, \
     SUM(CASE WHEN e.state = 'COMPLETED' THEN 1 ELSE 0 END) AS completed";

/// `{items: [{elementId, active, canceled, incidents, completed}]}` of a process definition's
/// instances selected by `request` (`{filter}`; absent or `null`: all), by element id.
pub fn process_definition(conn: &Connection, process_definition_key: i64, request: &Value) -> Result<Value, StoreError> {
    let filter = match request {
        Value::Null => None,
        Value::Object(o) => {
            if let Some(k) = o.keys().find(|k| k.as_str() != "filter") {
                return Err(invalid(format!("unknown request field '{k}' (expected filter)")));
            }
            o.get("filter")
        }
        other => return Err(invalid(format!("the request body must be an object, not {other}"))),
    };
    let (clause, mut args) = where_clause(&PROCESS_DEFINITION_STATISTICS_FILTER, filter, &[])?;
    let more = if clause.is_empty() { String::new() } else { format!(" AND {}", &clause[" WHERE ".len()..]) };
    args.insert(0, Sql::Integer(process_definition_key));
    let sql = format!(
        "SELECT s.flow_node_id,
           SUM(CASE WHEN s.active > 0 THEN 1 ELSE 0 END), SUM(CASE WHEN s.canceled > 0 THEN 1 ELSE 0 END),
           SUM(CASE WHEN s.incidents > 0 THEN 1 ELSE 0 END), SUM(CASE WHEN s.completed > 0 THEN 1 ELSE 0 END)
         FROM (SELECT e.process_instance_key, e.flow_node_id, {COUNTS}
               FROM process_instance t JOIN flow_node_instance e ON e.process_instance_key = t.process_instance_key
               WHERE t.process_definition_key = ? AND e.type <> 'PROCESS'{more}
               GROUP BY e.process_instance_key, e.flow_node_id) s
         GROUP BY s.flow_node_id ORDER BY {}",
        conn.dialect().order_term("s.flow_node_id", true, false)
    );
    items(conn.query(&sql, &args)?)
}

/// `{items: [...]}` of one process instance's element instances, by element id (no items for
/// an instance the store does not hold).
pub fn process_instance(conn: &Connection, process_instance_key: i64) -> Result<Value, StoreError> {
    let sql = format!(
        "SELECT e.flow_node_id, {COUNTS} FROM flow_node_instance e
         WHERE e.process_instance_key = ?1 AND e.type <> 'PROCESS'
         GROUP BY e.flow_node_id ORDER BY {}",
        conn.dialect().order_term("e.flow_node_id", true, false)
    );
    items(conn.query(&sql, &[Sql::Integer(process_instance_key)])?)
}

fn items(rows: Vec<Vec<Sql>>) -> Result<Value, StoreError> {
    let items: Vec<Value> = rows
        .into_iter()
        .map(|row| {
            let mut out = Map::new();
            let mut it = row.into_iter();
            let id = match it.next() {
                Some(Sql::Text(t)) => Value::String(t),
                _ => Value::Null,
            };
            out.insert("elementId".into(), id);
            for name in ["active", "canceled", "incidents", "completed"] {
                out.insert(name.into(), json!(it.next().and_then(|v| v.as_i64()).unwrap_or(0)));
            }
            Value::Object(out)
        })
        .collect();
    Ok(json!({ "items": items }))
}
