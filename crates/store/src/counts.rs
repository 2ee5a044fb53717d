//! The instance counts on SQLite (`process_instance_count`, `flow_node_count`: see
//! [`crate::schema`]), kept by the exporter instead of per-row triggers (issue 27: the
//! triggers' upserts were a large part of SQLite's work per record).
//!
//! Contract: while a transaction writes rows, each write that changes a counted row's
//! (definition, state) or (definition, element, state, incident) adds +1/-1 to a [`Counts`] in
//! memory: the exporter's statements say what they changed (an insert's changed rows; for an
//! update, the row it moves out of `ACTIVE`, read just before it in the same transaction, or
//! its `RETURNING` when it moves a row to or from an incident), never what the
//! record says, so an event exported again (its row already there) or about a row the store
//! never held counts nothing. [`Counts::write`] then applies the sums in the same transaction,
//! one upsert per changed count row. History clean-up uncounts the rows it deletes in its own
//! transaction ([`uncount_finished`]). Whoever else writes the rows on SQLite (a test, a bulk
//! copy) calls [`recount`] after. PostgreSQL keeps its statement triggers (one upsert per
//! multi-row statement), which give the same counts.

use std::collections::HashMap;

use crate::db::{Connection, Value};
use crate::{params, StoreError};

/// Count changes of one transaction, per count row.
#[derive(Debug, Default)]
pub struct Counts {
    /// (definition key, state, partition) → change.
    instances: HashMap<(i64, String, i64), i64>,
    /// (definition key, element id, state, incident, partition) → change.
    elements: HashMap<(i64, String, String, bool, i64), i64>,
}

impl Counts {
    /// `by` more instances of `definition` in `state`.
    pub fn instance(&mut self, definition: i64, state: &str, partition: i64, by: i64) {
        *self.instances.entry((definition, state.to_owned(), partition)).or_default() += by;
    }

    /// `by` more element instances of `element` of `definition` in `state` (with an incident
    /// or not). The process's own element instance (type `PROCESS`) is not counted: the
    /// caller leaves it out.
    pub fn element(&mut self, definition: i64, element: &str, state: &str, incident: bool, partition: i64, by: i64) {
        *self.elements.entry((definition, element.to_owned(), state.to_owned(), incident, partition)).or_default() += by;
    }

    /// Adds the changes to the count rows (in the caller's transaction) and forgets them.
    pub fn write(&mut self, conn: &Connection) -> Result<(), StoreError> {
        for ((definition, state, partition), n) in self.instances.drain().filter(|(_, n)| *n != 0) {
            conn.execute(
                "INSERT INTO process_instance_count (process_definition_key, state, partition_id, n) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (process_definition_key, state, partition_id) DO UPDATE SET n = n + excluded.n",
                params![definition, state, partition, n],
            )?;
        }
        for ((definition, element, state, incident, partition), n) in self.elements.drain().filter(|(_, n)| *n != 0) {
            conn.execute(
                "INSERT INTO flow_node_count (process_definition_key, flow_node_id, state, incident, partition_id, n)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT (process_definition_key, flow_node_id, state, incident, partition_id) DO UPDATE SET n = n + excluded.n",
                params![definition, element, state, i64::from(incident), partition, n],
            )?;
        }
        Ok(())
    }
}

/// The columns an element's counted update returns (`RETURNING`), as a literal for
/// `concat!`: definition key, element id, type, state, incident (0 or 1), partition.
#[macro_export]
macro_rules! element_returning {
    () => {
        "RETURNING process_definition_key, flow_node_id, type, state, CASE WHEN incident_key IS NULL THEN 0 ELSE 1 END, partition_id"
    };
}

/// One row of [`element_returning!`] as `f(definition, element, state, incident, partition)`,
/// unless it is the process's own element instance (not counted).
pub fn returned_element(row: &[Value], f: impl FnOnce(i64, &str, &str, bool, i64)) {
    if let [Value::Integer(definition), Value::Text(element), Value::Text(kind), Value::Text(state), Value::Integer(incident), Value::Integer(partition)] =
        row
    {
        if kind != "PROCESS" {
            f(*definition, element, state, *incident != 0, *partition);
        }
    }
}

/// Subtracts from the counts the rows history clean-up is about to delete: partition
/// `partition`'s instances ended before `before` and their element instances (SQLite; in the
/// clean-up's transaction, before its deletes).
pub fn uncount_finished(conn: &Connection, partition: i64, before: i64) -> Result<(), StoreError> {
    conn.execute(
        "INSERT INTO flow_node_count (process_definition_key, flow_node_id, state, incident, partition_id, n)
         SELECT process_definition_key, flow_node_id, state, CASE WHEN incident_key IS NULL THEN 0 ELSE 1 END, partition_id, -COUNT(*)
         FROM flow_node_instance
         WHERE type <> 'PROCESS' AND process_instance_key IN (SELECT process_instance_key FROM process_instance
           WHERE partition_id = ?1 AND end_date IS NOT NULL AND end_date < ?2)
         GROUP BY 1, 2, 3, 4, 5
         ON CONFLICT (process_definition_key, flow_node_id, state, incident, partition_id) DO UPDATE SET n = n + excluded.n",
        params![partition, before],
    )?;
    conn.execute(
        "INSERT INTO process_instance_count (process_definition_key, state, partition_id, n)
         SELECT process_definition_key, state, partition_id, -COUNT(*) FROM process_instance
         WHERE partition_id = ?1 AND end_date IS NOT NULL AND end_date < ?2
         GROUP BY 1, 2, 3
         ON CONFLICT (process_definition_key, state, partition_id) DO UPDATE SET n = n + excluded.n",
        params![partition, before],
    )?;
    Ok(())
}

/// Counts every instance and element instance the store holds again, replacing the count
/// rows (one pass over both tables; a schema step and bulk copies run it).
pub const RECOUNT: &str = r#"
DELETE FROM process_instance_count;
DELETE FROM flow_node_count;
INSERT INTO process_instance_count (process_definition_key, state, partition_id, n)
SELECT process_definition_key, state, partition_id, COUNT(*) FROM process_instance
GROUP BY process_definition_key, state, partition_id;
INSERT INTO flow_node_count (process_definition_key, flow_node_id, state, incident, partition_id, n)
SELECT process_definition_key, flow_node_id, state, CASE WHEN incident_key IS NULL THEN 0 ELSE 1 END, partition_id, COUNT(*)
FROM flow_node_instance WHERE type <> 'PROCESS'
GROUP BY process_definition_key, flow_node_id, state, CASE WHEN incident_key IS NULL THEN 0 ELSE 1 END, partition_id;
"#;

/// Runs [`RECOUNT`] (in the caller's transaction, if any).
pub fn recount(conn: &Connection) -> Result<(), StoreError> {
    conn.batch(RECOUNT)
}
