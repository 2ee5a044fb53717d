//! Aggregates for the web UI's process view (counts the searches of [`crate::query`] do not
//! give): per process definition, its instances by state; per element of a definition, its
//! element instances by state, as Operate's diagram badges show them.

use rusqlite::Connection;
use serde_json::{json, Map, Value};

use crate::StoreError;

/// Instance counts per process definition key:
/// `{"<key>": {active, incidents, completed, canceled}}`, `incidents` counting the active
/// instances with an active incident (a subset of `active`).
pub fn definition_counts(conn: &Connection) -> Result<Value, StoreError> {
    let mut stmt = conn.prepare(
        "SELECT t.process_definition_key,
                SUM(t.state = 'ACTIVE'),
                SUM(t.state = 'ACTIVE' AND EXISTS (SELECT 1 FROM incident i
                    WHERE i.process_instance_key = t.process_instance_key AND i.state = 'ACTIVE')),
                SUM(t.state = 'COMPLETED'),
                SUM(t.state = 'TERMINATED')
         FROM process_instance t GROUP BY t.process_definition_key",
    )?;
    let rows = stmt.query_map([], |r| Ok((r.get::<_, i64>(0)?, counts(r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))))?;
    let mut out = Map::new();
    for row in rows {
        let (key, c) = row?;
        out.insert(key.to_string(), c);
    }
    Ok(Value::Object(out))
}

/// Element instance counts of one process definition per element id (the process itself
/// left out): `{"<elementId>": {active, incidents, completed, canceled}}`; `active` counts the
/// active element instances without an incident, `incidents` those with one, `canceled` the
/// terminated ones.
pub fn element_counts(conn: &Connection, process_definition_key: i64) -> Result<Value, StoreError> {
    let mut stmt = conn.prepare(
        "SELECT t.flow_node_id,
                SUM(t.state = 'ACTIVE' AND t.incident_key IS NULL),
                SUM(t.state = 'ACTIVE' AND t.incident_key IS NOT NULL),
                SUM(t.state = 'COMPLETED'),
                SUM(t.state = 'TERMINATED')
         FROM flow_node_instance t
         WHERE t.process_definition_key = ?1 AND t.type <> 'PROCESS'
         GROUP BY t.flow_node_id",
    )?;
    let rows =
        stmt.query_map([process_definition_key], |r| Ok((r.get::<_, String>(0)?, counts(r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))))?;
    let mut out = Map::new();
    for row in rows {
        let (id, c) = row?;
        out.insert(id, c);
    }
    Ok(Value::Object(out))
}

fn counts(active: Option<i64>, incidents: Option<i64>, completed: Option<i64>, canceled: Option<i64>) -> Value {
    json!({
        "active": active.unwrap_or(0),
        "incidents": incidents.unwrap_or(0),
        "completed": completed.unwrap_or(0),
        "canceled": canceled.unwrap_or(0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_instances_and_elements_by_state() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(crate::schema::SCHEMA).unwrap();
        conn.execute_batch(
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
        let d = definition_counts(&conn).unwrap();
        assert_eq!(d["10"], json!({"active": 2, "incidents": 1, "completed": 1, "canceled": 1}));
        assert_eq!(d["20"], json!({"active": 1, "incidents": 0, "completed": 0, "canceled": 0}));
        let e = element_counts(&conn, 10).unwrap();
        assert_eq!(e["task"], json!({"active": 1, "incidents": 1, "completed": 1, "canceled": 1}));
        assert_eq!(e["end"], json!({"active": 0, "incidents": 0, "completed": 1, "canceled": 0}));
        assert!(e.get("p").is_none(), "the process itself is no element of its diagram: {e}");
    }
}
