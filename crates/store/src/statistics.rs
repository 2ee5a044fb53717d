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
//! - the filter's fields on other tables are 8.8's RDBMS ones (`ProcessInstanceMapper.xml`,
//!   `searchFilter`): `variables` as the process instance search has it
//!   ([`crate::instance_filter::variables`]); `errorMessage`, per operator: the instance has an
//!   incident (any state) whose message matches; `incidentErrorHashCode`: it has an incident
//!   whose message's hash code (Java's `String.hashCode`, 8.8's `ERROR_MESSAGE_HASH`) matches,
//!   found by hashing the store's distinct incident messages ([`resolve_hash_codes`]);
//!   `batchOperationId`: the instance is an item of that batch operation, which no instance is
//!   here (Waggle runs no batch operations), so it matches none.
//!
//! Both read `flow_node_instance` through its process instance index; a definition's instances
//! are found by `process_instance_definition_key` (schema).

use serde_json::{json, Map, Value};

use crate::db::{Connection, Value as Sql};
use crate::query::{f, field_conditions, invalid, where_clause, Entity, Field, Kind, HAS_INCIDENT_PI};
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

/// Whether `name` is a field of the statistics filter handled by [`condition`] (not a column).
pub(crate) fn handles(name: &str) -> bool {
    matches!(name, "variables" | "errorMessage" | "incidentErrorHashCode" | "batchOperationId")
}

const ERROR_MESSAGE: Field = Field { api: "errorMessage", sql: "i.error_message", kind: Kind::Str };
const BATCH_OPERATION_ID: Field = Field { api: "batchOperationId", sql: "b.batch_operation_id", kind: Kind::Str };
/// Where [`resolve_hash_codes`] puts the incident messages a hash code filter matches.
const MESSAGES: &str = "$messages";

/// The conditions of one field [`handles`] (its parameters appended in placeholder order).
pub(crate) fn condition(name: &str, value: &Value, conds: &mut Vec<String>, args: &mut Vec<Sql>) -> Result<(), StoreError> {
    let incident =
        |cond: &str| format!("EXISTS (SELECT 1 FROM incident i WHERE i.process_instance_key = t.process_instance_key AND {cond})");
    match name {
        "variables" => crate::instance_filter::variables(value, conds, args),
        "errorMessage" => {
            let mut each = Vec::new();
            field_conditions(&ERROR_MESSAGE, name, value, &mut each, args)?;
            conds.extend(each.iter().map(|c| incident(c)));
            Ok(())
        }
        "incidentErrorHashCode" => {
            let messages = value.get(MESSAGES).and_then(Value::as_array).ok_or_else(|| invalid("'incidentErrorHashCode' is unresolved"))?;
            if messages.is_empty() {
                conds.push("1 = 0".into());
            } else {
                conds.push(incident(&format!("i.error_message IN ({})", vec!["?"; messages.len()].join(", "))));
                args.extend(messages.iter().map(|m| Sql::Text(m.as_str().unwrap_or_default().to_owned())));
            }
            Ok(())
        }
        _ => {
            // checked as 8.8 takes it, then false: no instance is an item of a batch operation
            field_conditions(&BATCH_OPERATION_ID, name, value, &mut Vec::new(), &mut Vec::new())?;
            conds.push("1 = 0".into());
            Ok(())
        }
    }
}

/// Java's `String.hashCode` of `text` (over its UTF-16 units), the hash 8.8 keeps of an
/// incident's error message.
pub fn error_hash_code(text: &str) -> i32 {
    text.encode_utf16().fold(0i32, |h, unit| h.wrapping_mul(31).wrapping_add(i32::from(unit)))
}

/// The filter with each `incidentErrorHashCode` (at the top and in `$or` items) replaced by
/// the incident messages of the store whose hash code its operators select
/// (`{"$messages": [...]}`), as 8.8 resolves hash codes into messages before searching.
fn resolve_hash_codes(conn: &Connection, filter: &Value) -> Result<Value, StoreError> {
    let mut filter = filter.clone();
    let mut hashed: Option<Vec<(i32, String)>> = None;
    let mut resolve = |object: &mut Map<String, Value>| -> Result<(), StoreError> {
        let Some(value) = object.get_mut("incidentErrorHashCode").filter(|v| !crate::query::is_empty(v)) else { return Ok(()) };
        int_matches(value, 0)?; // a malformed property is invalid, whatever the store holds
        if hashed.is_none() {
            let rows = conn.query("SELECT DISTINCT error_message FROM incident WHERE error_message IS NOT NULL", &[])?;
            hashed = Some(
                rows.into_iter()
                    .filter_map(|r| match r.into_iter().next() {
                        Some(Sql::Text(m)) => Some((error_hash_code(&m), m)),
                        _ => None,
                    })
                    .collect(),
            );
        }
        let mut messages = Vec::new();
        for (hash, message) in hashed.as_deref().unwrap_or_default() {
            if int_matches(value, i64::from(*hash))? {
                messages.push(Value::String(message.clone()));
            }
        }
        *value = Value::Object(Map::from_iter([(MESSAGES.to_owned(), Value::Array(messages))]));
        Ok(())
    };
    if let Value::Object(top) = &mut filter {
        resolve(top)?;
        if let Some(Value::Array(groups)) = top.get_mut("$or") {
            for group in groups.iter_mut() {
                if let Value::Object(group) = group {
                    resolve(group)?;
                }
            }
        }
    }
    Ok(filter)
}

/// Whether `n` satisfies an integer filter property (a value, or 8.8's `$eq`, `$neq`,
/// `$exists`, `$gt`, `$gte`, `$lt`, `$lte`, `$in`, `$notIn`).
fn int_matches(property: &Value, n: i64) -> Result<bool, StoreError> {
    let int = |v: &Value| v.as_i64().ok_or_else(|| invalid(format!("the filter value {v} of 'incidentErrorHashCode' is not an integer")));
    let ops: Vec<(&str, &Value)> = match property {
        Value::Object(o) => o.iter().map(|(k, v)| (k.as_str(), v)).collect(),
        v => vec![("$eq", v)],
    };
    let mut all = true;
    for (op, v) in ops {
        if crate::query::is_empty(v) {
            continue;
        }
        all &= match op {
            "$eq" => n == int(v)?,
            "$neq" => n != int(v)?,
            "$gt" => n > int(v)?,
            "$gte" => n >= int(v)?,
            "$lt" => n < int(v)?,
            "$lte" => n <= int(v)?,
            "$exists" => v.as_bool().ok_or_else(|| invalid("$exists of 'incidentErrorHashCode' takes a boolean"))?,
            "$in" | "$notIn" => {
                let items = v.as_array().ok_or_else(|| invalid(format!("{op} of 'incidentErrorHashCode' takes an array")))?;
                let found = items.iter().map(int).collect::<Result<Vec<_>, _>>()?.contains(&n);
                found == (op == "$in")
            }
            other => return Err(invalid(format!("unknown filter operator '{other}' on 'incidentErrorHashCode'"))),
        };
    }
    Ok(all)
}

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
    let filter = match filter {
        Some(f) => Some(resolve_hash_codes(conn, f)?),
        None => None,
    };
    let (clause, mut args) = where_clause(&PROCESS_DEFINITION_STATISTICS_FILTER, filter.as_ref(), &[])?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_hash_codes_are_javas_string_hash_codes() {
        // "hello".hashCode() == 99162322 in Java; an empty string's is 0; "€" is one UTF-16 unit
        assert_eq!(error_hash_code("hello"), 99_162_322);
        assert_eq!(error_hash_code(""), 0);
        assert_eq!(error_hash_code("€"), 0x20AC);
        // overflowing as Java's int does: "Hello World".hashCode() == -862545276
        assert_eq!(error_hash_code("Hello World"), -862_545_276);
    }

    #[test]
    fn hash_code_properties_take_integer_operators() {
        assert!(int_matches(&json!(5), 5).unwrap());
        assert!(int_matches(&json!({"$gte": 5, "$lt": 6}), 5).unwrap());
        assert!(!int_matches(&json!({"$in": [1, 2]}), 5).unwrap());
        assert!(int_matches(&json!({"$notIn": [1, 2]}), 5).unwrap());
        assert!(int_matches(&json!({"$exists": true}), 5).unwrap());
        assert!(int_matches(&json!({"$like": "5"}), 5).is_err());
        assert!(int_matches(&json!("5"), 5).is_err());
    }
}
