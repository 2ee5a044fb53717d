//! Aggregates for the web UI's process view (counts the searches of [`crate::query`] do not
//! give): per process definition, its instances by state; per element of a definition, its
//! element instances by state, as Operate's diagram badges show them.

use serde_json::{json, Map, Value};

use crate::db::{Connection, Value as Cell};
use crate::StoreError;

/// Instance counts per process definition key:
/// `{"<key>": {active, incidents, completed, canceled}}`, `incidents` counting the active
/// instances with an active incident (a subset of `active`).
pub fn definition_counts(conn: &Connection) -> Result<Value, StoreError> {
    // the states from the counts the store keeps (schema.rs): a few rows per definition,
    // not one per instance (cast: PostgreSQL's sum of bigints is a numeric)
    let rows = conn.query(
        "SELECT process_definition_key,
                CAST(SUM(CASE WHEN state = 'ACTIVE' THEN n ELSE 0 END) AS BIGINT),
                CAST(SUM(CASE WHEN state = 'COMPLETED' THEN n ELSE 0 END) AS BIGINT),
                CAST(SUM(CASE WHEN state = 'TERMINATED' THEN n ELSE 0 END) AS BIGINT)
         FROM process_instance_count GROUP BY process_definition_key",
        &[],
    )?;
    // the active instances with an active incident, from the (few) active incidents
    let incidents = conn.query(
        "SELECT t.process_definition_key, COUNT(*) FROM process_instance t
         WHERE t.state = 'ACTIVE' AND t.process_instance_key IN (SELECT i.process_instance_key FROM incident i WHERE i.state = 'ACTIVE')
         GROUP BY t.process_definition_key",
        &[],
    )?;
    let incidents: std::collections::HashMap<i64, i64> =
        incidents.iter().filter_map(|r| Some((r[0].as_i64()?, r[1].as_i64().unwrap_or(0)))).collect();
    let mut out = Map::new();
    for row in rows {
        let Some(key) = row[0].as_i64() else { continue };
        let n = |i: usize| row[i].as_i64().unwrap_or(0);
        if n(1) == 0 && n(2) == 0 && n(3) == 0 {
            // every instance of it deleted (history clean-up)
            continue;
        }
        let sums = [n(1), incidents.get(&key).copied().unwrap_or(0), n(2), n(3)].map(Cell::Integer);
        out.insert(key.to_string(), counts(&sums));
    }
    Ok(Value::Object(out))
}

/// Element instance counts of one process definition per element id (the process itself
/// left out): `{"<elementId>": {active, incidents, completed, canceled}}`; `active` counts the
/// active element instances without an incident, `incidents` those with one, `canceled` the
/// terminated ones.
pub fn element_counts(conn: &Connection, process_definition_key: i64) -> Result<Value, StoreError> {
    // from the counts the store keeps (schema.rs), not the element instances
    let rows = conn.query(
        "SELECT flow_node_id,
                CAST(SUM(CASE WHEN state = 'ACTIVE' AND incident = 0 THEN n ELSE 0 END) AS BIGINT),
                CAST(SUM(CASE WHEN state = 'ACTIVE' AND incident = 1 THEN n ELSE 0 END) AS BIGINT),
                CAST(SUM(CASE WHEN state = 'COMPLETED' THEN n ELSE 0 END) AS BIGINT),
                CAST(SUM(CASE WHEN state = 'TERMINATED' THEN n ELSE 0 END) AS BIGINT)
         FROM flow_node_count
         WHERE process_definition_key = ?1
         GROUP BY flow_node_id
         HAVING SUM(n) > 0",
        crate::params![process_definition_key],
    )?;
    let mut out = Map::new();
    for row in rows {
        let Cell::Text(id) = &row[0] else { continue };
        out.insert(id.clone(), counts(&row[1..]));
    }
    Ok(Value::Object(out))
}

/// The flow scope of each element instance of one process instance, for the UI's element
/// instance tree (8.8's element instance result has no scope key):
/// `{"<elementInstanceKey>": "<flowScopeKey>"}`, the process's own instance left out.
pub fn flow_scopes(conn: &Connection, process_instance_key: i64) -> Result<Value, StoreError> {
    let rows = conn.query(
        "SELECT t.flow_node_instance_key, t.flow_scope_key FROM flow_node_instance t
         WHERE t.process_instance_key = ?1 AND t.flow_scope_key IS NOT NULL",
        crate::params![process_instance_key],
    )?;
    let mut out = Map::new();
    for row in rows {
        if let (Some(key), Some(scope)) = (row[0].as_i64(), row[1].as_i64()) {
            out.insert(key.to_string(), Value::String(scope.to_string()));
        }
    }
    Ok(Value::Object(out))
}

/// The four sums of a row (active, incidents, completed, canceled) as the UI's counts.
fn counts(sums: &[Cell]) -> Value {
    let n = |i: usize| sums.get(i).and_then(Cell::as_i64).unwrap_or(0);
    json!({ "active": n(0), "incidents": n(1), "completed": n(2), "canceled": n(3) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_instances_and_elements_by_state() {
        let conn = Connection::Sqlite(rusqlite::Connection::open_in_memory().unwrap());
        conn.batch(&crate::schema::ddl(crate::dialect::Dialect::Sqlite)).unwrap();
        conn.batch(
            "INSERT INTO process_instance (process_instance_key, process_definition_id, process_definition_key, state, tenant_id, partition_id)
               VALUES (1, 'p', 10, 'ACTIVE', '', 1), (2, 'p', 10, 'ACTIVE', '', 1), (3, 'p', 10, 'COMPLETED', '', 1),
                      (4, 'p', 10, 'TERMINATED', '', 1), (5, 'q', 20, 'ACTIVE', '', 1);
             INSERT INTO incident (incident_key, process_instance_key, flow_node_instance_key, state, tenant_id, partition_id)
               VALUES (100, 1, 11, 'ACTIVE', '', 1), (101, 2, 21, 'RESOLVED', '', 1);
             INSERT INTO flow_node_instance (flow_node_instance_key, process_instance_key, process_definition_key, process_definition_id,
                 flow_node_id, type, state, incident_key, tenant_id, partition_id)
               VALUES (1, 1, 10, 'p', 'p', 'PROCESS', 'ACTIVE', NULL, '', 1),
                      (11, 1, 10, 'p', 'task', 'SERVICE_TASK', 'ACTIVE', 100, '', 1),
                      (21, 2, 10, 'p', 'task', 'SERVICE_TASK', 'ACTIVE', NULL, '', 1),
                      (31, 3, 10, 'p', 'task', 'SERVICE_TASK', 'COMPLETED', NULL, '', 1),
                      (41, 4, 10, 'p', 'task', 'SERVICE_TASK', 'TERMINATED', NULL, '', 1),
                      (32, 3, 10, 'p', 'end', 'END_EVENT', 'COMPLETED', NULL, '', 1),
                      (51, 5, 20, 'q', 'task', 'SERVICE_TASK', 'ACTIVE', NULL, '', 1);",
        )
        .unwrap();
        // rows written past the exporter: counted again
        crate::counts::recount(&conn).unwrap();
        let d = definition_counts(&conn).unwrap();
        assert_eq!(d["10"], json!({"active": 2, "incidents": 1, "completed": 1, "canceled": 1}));
        assert_eq!(d["20"], json!({"active": 1, "incidents": 0, "completed": 0, "canceled": 0}));
        let e = element_counts(&conn, 10).unwrap();
        assert_eq!(e["task"], json!({"active": 1, "incidents": 1, "completed": 1, "canceled": 1}));
        assert_eq!(e["end"], json!({"active": 0, "incidents": 0, "completed": 1, "canceled": 0}));
        assert!(e.get("p").is_none(), "the process itself is no element of its diagram: {e}");
    }

    #[test]
    fn flow_scopes_nest_element_instances() {
        let conn = Connection::Sqlite(rusqlite::Connection::open_in_memory().unwrap());
        conn.batch(crate::schema::SCHEMA).unwrap();
        conn.batch(
            "INSERT INTO flow_node_instance (flow_node_instance_key, process_instance_key, process_definition_key, process_definition_id,
                 flow_node_id, type, state, flow_scope_key, tenant_id, partition_id)
               VALUES (1, 1, 10, 'p', 'p', 'PROCESS', 'ACTIVE', NULL, '', 1),
                      (2, 1, 10, 'p', 'sub', 'SUB_PROCESS', 'ACTIVE', 1, '', 1),
                      (3, 1, 10, 'p', 'task', 'SERVICE_TASK', 'ACTIVE', 2, '', 1),
                      (9, 5, 10, 'p', 'task', 'SERVICE_TASK', 'ACTIVE', 8, '', 1);",
        )
        .unwrap();
        assert_eq!(flow_scopes(&conn, 1).unwrap(), json!({"2": "1", "3": "2"}));
    }
}
