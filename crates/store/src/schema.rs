//! The store's tables, after Camunda's RDBMS exporter schema (camunda/camunda,
//! `db/rdbms-schema/src/main/resources/db/changelog/rdbms-exporter/changesets/8.8.0.xml`):
//! the same entities and column names where Waggle has the data, keys as 64-bit integers,
//! dates as epoch milliseconds. `partition_id` says which partition's exporter wrote a row.
//!
//! Issue 28 (a million finished instances, docs/performance.md): the instance list's filters
//! have indexes ending in the instance key (the list's order); `process_instance_count`
//! keeps the instances per definition, state and partition, and `flow_node_count` the element
//! instances (the process itself left out) per definition, element, state, incident (0 or 1)
//! and partition, so the UI's counts read a few rows instead of every instance. PostgreSQL
//! keeps them by statement triggers (whoever writes the rows); SQLite's exporter keeps them
//! itself, one upsert per changed count row per transaction instead of one per written row
//! (issue 27: [`crate::counts`]; whoever else writes rows there recounts). The partition is in
//! its key so that partitions exporting into one PostgreSQL database never wait on each
//! other's counter rows.

use crate::dialect::Dialect;

/// The whole schema in `dialect`: [`SCHEMA`], and on PostgreSQL the triggers keeping the
/// instance counts (SQLite's exporter keeps them itself: [`crate::counts`]). Idempotent: run
/// on every open.
pub fn ddl(dialect: Dialect) -> String {
    match dialect {
        Dialect::Sqlite => format!("{SCHEMA}{COUNTS_BACKFILL}"),
        Dialect::Postgres => format!("{}{COUNTS_POSTGRES}{COUNTS_BACKFILL}", dialect.schema(SCHEMA)),
    }
}

/// The tables and indexes, in SQLite's form ([`Dialect::schema`] gives PostgreSQL's).
/// Idempotent.
pub const SCHEMA: &str = r#"
CREATE TABLE IF NOT EXISTS exporter_position (
    partition_id INTEGER PRIMARY KEY,
    exporter TEXT NOT NULL,
    last_exported_position INTEGER NOT NULL,
    last_updated INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS process_definition (
    process_definition_key INTEGER PRIMARY KEY,
    process_definition_id TEXT NOT NULL,
    name TEXT,
    resource_name TEXT,
    bpmn_xml TEXT,
    version INTEGER NOT NULL,
    version_tag TEXT,
    tenant_id TEXT NOT NULL
);
-- DMN (decisions.rs): definitions and requirements (with their XML) as deployed, and one row
-- per decision of an evaluation, its id `<evaluation key>-<place from 1>` as in 8.8;
-- evaluated inputs and matched rules as JSON text
CREATE TABLE IF NOT EXISTS decision_requirements (
    decision_requirements_key INTEGER PRIMARY KEY,
    decision_requirements_id TEXT NOT NULL,
    name TEXT,
    resource_name TEXT,
    version INTEGER NOT NULL,
    xml TEXT,
    tenant_id TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS decision_definition (
    decision_definition_key INTEGER PRIMARY KEY,
    decision_definition_id TEXT NOT NULL,
    name TEXT,
    version INTEGER NOT NULL,
    decision_requirements_key INTEGER,
    decision_requirements_id TEXT,
    tenant_id TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS decision_instance (
    decision_instance_id TEXT PRIMARY KEY,
    decision_instance_key INTEGER NOT NULL,
    evaluation_index INTEGER NOT NULL,
    state TEXT NOT NULL,
    evaluation_date INTEGER,
    evaluation_failure TEXT,
    result TEXT,
    decision_definition_key INTEGER,
    decision_definition_id TEXT,
    decision_definition_name TEXT,
    decision_definition_version INTEGER,
    decision_type TEXT,
    decision_requirements_key INTEGER,
    decision_requirements_id TEXT,
    process_definition_key INTEGER,
    process_definition_id TEXT,
    process_instance_key INTEGER,
    flow_node_instance_key INTEGER,
    flow_node_id TEXT,
    evaluated_inputs TEXT,
    matched_rules TEXT,
    tenant_id TEXT NOT NULL,
    partition_id INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS decision_instance_evaluation ON decision_instance (decision_instance_key, evaluation_index);
CREATE INDEX IF NOT EXISTS decision_instance_pi ON decision_instance (process_instance_key);
CREATE TABLE IF NOT EXISTS process_instance (
    process_instance_key INTEGER PRIMARY KEY,
    process_definition_id TEXT NOT NULL,
    process_definition_key INTEGER NOT NULL,
    version INTEGER,
    state TEXT NOT NULL,
    start_date INTEGER,
    end_date INTEGER,
    parent_process_instance_key INTEGER,
    parent_element_instance_key INTEGER,
    tenant_id TEXT NOT NULL,
    partition_id INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS process_instance_end ON process_instance (end_date);
DROP INDEX IF EXISTS process_instance_definition;
CREATE INDEX IF NOT EXISTS process_instance_by_id ON process_instance (process_definition_id, process_instance_key);
CREATE INDEX IF NOT EXISTS process_instance_by_id_state ON process_instance (process_definition_id, state, process_instance_key);
CREATE INDEX IF NOT EXISTS process_instance_by_id_state_start ON process_instance (process_definition_id, state, start_date);
CREATE INDEX IF NOT EXISTS process_instance_by_definition ON process_instance (process_definition_key, state, process_instance_key);
CREATE INDEX IF NOT EXISTS process_instance_by_state ON process_instance (state, process_instance_key);
CREATE INDEX IF NOT EXISTS process_instance_by_start ON process_instance (start_date, process_instance_key);
CREATE INDEX IF NOT EXISTS process_instance_by_parent ON process_instance (parent_process_instance_key);
CREATE TABLE IF NOT EXISTS process_instance_count (
    process_definition_key INTEGER NOT NULL,
    state TEXT NOT NULL,
    partition_id INTEGER NOT NULL,
    n INTEGER NOT NULL,
    PRIMARY KEY (process_definition_key, state, partition_id)
);
-- a process definition's element statistics find its instances by key (statistics.rs): process_instance_by_definition
CREATE TABLE IF NOT EXISTS flow_node_instance (
    flow_node_instance_key INTEGER PRIMARY KEY,
    process_instance_key INTEGER NOT NULL,
    process_definition_key INTEGER NOT NULL,
    process_definition_id TEXT NOT NULL,
    flow_node_id TEXT NOT NULL,
    type TEXT NOT NULL,
    state TEXT NOT NULL,
    start_date INTEGER,
    end_date INTEGER,
    flow_scope_key INTEGER,
    incident_key INTEGER,
    tenant_id TEXT NOT NULL,
    partition_id INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS flow_node_instance_pi ON flow_node_instance (process_instance_key);
CREATE TABLE IF NOT EXISTS flow_node_count (
    process_definition_key INTEGER NOT NULL,
    flow_node_id TEXT NOT NULL,
    state TEXT NOT NULL,
    incident INTEGER NOT NULL,
    partition_id INTEGER NOT NULL,
    n INTEGER NOT NULL,
    PRIMARY KEY (process_definition_key, flow_node_id, state, incident, partition_id)
);
CREATE TABLE IF NOT EXISTS variable (
    var_key INTEGER PRIMARY KEY,
    process_instance_key INTEGER NOT NULL,
    process_definition_id TEXT,
    scope_key INTEGER NOT NULL,
    name TEXT NOT NULL,
    value TEXT NOT NULL,
    tenant_id TEXT NOT NULL,
    partition_id INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS variable_pi ON variable (process_instance_key);
CREATE TABLE IF NOT EXISTS incident (
    incident_key INTEGER PRIMARY KEY,
    process_definition_key INTEGER,
    process_definition_id TEXT,
    process_instance_key INTEGER NOT NULL,
    flow_node_instance_key INTEGER,
    flow_node_id TEXT,
    job_key INTEGER,
    error_type TEXT,
    error_message TEXT,
    state TEXT NOT NULL,
    creation_date INTEGER,
    tenant_id TEXT NOT NULL,
    partition_id INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS incident_pi ON incident (process_instance_key, state);
CREATE INDEX IF NOT EXISTS incident_by_state ON incident (state, process_instance_key);
CREATE TABLE IF NOT EXISTS job (
    job_key INTEGER PRIMARY KEY,
    type TEXT NOT NULL,
    worker TEXT,
    state TEXT NOT NULL,
    kind TEXT NOT NULL,
    retries INTEGER,
    error_message TEXT,
    error_code TEXT,
    deadline INTEGER,
    end_time INTEGER,
    custom_headers TEXT,
    process_instance_key INTEGER NOT NULL,
    process_definition_key INTEGER,
    process_definition_id TEXT,
    element_id TEXT,
    element_instance_key INTEGER,
    tenant_id TEXT NOT NULL,
    partition_id INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS job_pi ON job (process_instance_key);
CREATE TABLE IF NOT EXISTS message_subscription (
    flow_node_instance_key INTEGER NOT NULL,
    message_name TEXT NOT NULL,
    process_instance_key INTEGER NOT NULL,
    process_definition_id TEXT,
    flow_node_id TEXT,
    correlation_key TEXT,
    state TEXT NOT NULL,
    date_time INTEGER,
    tenant_id TEXT NOT NULL,
    partition_id INTEGER NOT NULL,
    PRIMARY KEY (flow_node_instance_key, message_name)
);
CREATE INDEX IF NOT EXISTS message_subscription_pi ON message_subscription (process_instance_key);
CREATE TABLE IF NOT EXISTS user_task (
    user_task_key INTEGER PRIMARY KEY,
    flow_node_bpmn_id TEXT,
    process_definition_id TEXT,
    creation_date INTEGER,
    completion_date INTEGER,
    assignee TEXT,
    state TEXT NOT NULL,
    form_key INTEGER,
    process_definition_key INTEGER,
    process_instance_key INTEGER NOT NULL,
    element_instance_key INTEGER,
    tenant_id TEXT NOT NULL,
    due_date TEXT,
    follow_up_date TEXT,
    candidate_groups TEXT,
    candidate_users TEXT,
    external_form_reference TEXT,
    process_definition_version INTEGER,
    custom_headers TEXT,
    partition_id INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS user_task_pi ON user_task (process_instance_key);
CREATE TABLE IF NOT EXISTS sequence_flow (
    process_instance_key INTEGER NOT NULL,
    flow_node_id TEXT NOT NULL,
    process_definition_key INTEGER NOT NULL,
    process_definition_id TEXT NOT NULL,
    tenant_id TEXT NOT NULL,
    partition_id INTEGER NOT NULL,
    PRIMARY KEY (process_instance_key, flow_node_id)
);
"#;

/// PostgreSQL's: statement triggers over the transition tables, one counter upsert per
/// statement whatever its number of rows.
const COUNTS_POSTGRES: &str = r#"
CREATE OR REPLACE FUNCTION waggle_count_instances() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO process_instance_count AS c (process_definition_key, state, partition_id, n)
        SELECT process_definition_key, state, partition_id, COUNT(*) FROM new_rows GROUP BY 1, 2, 3
        ON CONFLICT (process_definition_key, state, partition_id) DO UPDATE SET n = c.n + excluded.n;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO process_instance_count AS c (process_definition_key, state, partition_id, n)
        SELECT process_definition_key, state, partition_id, -COUNT(*) FROM old_rows GROUP BY 1, 2, 3
        ON CONFLICT (process_definition_key, state, partition_id) DO UPDATE SET n = c.n + excluded.n;
    ELSE
        INSERT INTO process_instance_count AS c (process_definition_key, state, partition_id, n)
        SELECT d, s, p, SUM(x) FROM (
            SELECT o.process_definition_key AS d, o.state AS s, o.partition_id AS p, -1 AS x
              FROM old_rows o JOIN new_rows w ON w.process_instance_key = o.process_instance_key
             WHERE o.state <> w.state OR o.process_definition_key <> w.process_definition_key
            UNION ALL
            SELECT w.process_definition_key, w.state, w.partition_id, 1
              FROM old_rows o JOIN new_rows w ON w.process_instance_key = o.process_instance_key
             WHERE o.state <> w.state OR o.process_definition_key <> w.process_definition_key
        ) moved GROUP BY 1, 2, 3
        ON CONFLICT (process_definition_key, state, partition_id) DO UPDATE SET n = c.n + excluded.n;
    END IF;
    RETURN NULL;
END
$fn$;
CREATE OR REPLACE TRIGGER process_instance_counted AFTER INSERT ON process_instance
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION waggle_count_instances();
CREATE OR REPLACE TRIGGER process_instance_uncounted AFTER DELETE ON process_instance
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION waggle_count_instances();
CREATE OR REPLACE TRIGGER process_instance_recounted AFTER UPDATE ON process_instance
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION waggle_count_instances();
CREATE OR REPLACE FUNCTION waggle_count_elements() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO flow_node_count AS c (process_definition_key, flow_node_id, state, incident, partition_id, n)
        SELECT process_definition_key, flow_node_id, state, CASE WHEN incident_key IS NULL THEN 0 ELSE 1 END, partition_id, COUNT(*)
          FROM new_rows WHERE type <> 'PROCESS' GROUP BY 1, 2, 3, 4, 5
        ON CONFLICT (process_definition_key, flow_node_id, state, incident, partition_id) DO UPDATE SET n = c.n + excluded.n;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO flow_node_count AS c (process_definition_key, flow_node_id, state, incident, partition_id, n)
        SELECT process_definition_key, flow_node_id, state, CASE WHEN incident_key IS NULL THEN 0 ELSE 1 END, partition_id, -COUNT(*)
          FROM old_rows WHERE type <> 'PROCESS' GROUP BY 1, 2, 3, 4, 5
        ON CONFLICT (process_definition_key, flow_node_id, state, incident, partition_id) DO UPDATE SET n = c.n + excluded.n;
    ELSE
        INSERT INTO flow_node_count AS c (process_definition_key, flow_node_id, state, incident, partition_id, n)
        SELECT d, e, s, i, p, SUM(x) FROM (
            SELECT o.process_definition_key AS d, o.flow_node_id AS e, o.state AS s,
                   CASE WHEN o.incident_key IS NULL THEN 0 ELSE 1 END AS i, o.partition_id AS p, -1 AS x
              FROM old_rows o JOIN new_rows w ON w.flow_node_instance_key = o.flow_node_instance_key WHERE o.type <> 'PROCESS'
            UNION ALL
            SELECT w.process_definition_key, w.flow_node_id, w.state, CASE WHEN w.incident_key IS NULL THEN 0 ELSE 1 END, w.partition_id, 1
              FROM old_rows o JOIN new_rows w ON w.flow_node_instance_key = o.flow_node_instance_key WHERE o.type <> 'PROCESS'
        ) moved GROUP BY 1, 2, 3, 4, 5 HAVING SUM(x) <> 0
        ON CONFLICT (process_definition_key, flow_node_id, state, incident, partition_id) DO UPDATE SET n = c.n + excluded.n;
    END IF;
    RETURN NULL;
END
$fn$;
CREATE OR REPLACE TRIGGER flow_node_counted AFTER INSERT ON flow_node_instance
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION waggle_count_elements();
CREATE OR REPLACE TRIGGER flow_node_uncounted AFTER DELETE ON flow_node_instance
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION waggle_count_elements();
CREATE OR REPLACE TRIGGER flow_node_recounted AFTER UPDATE ON flow_node_instance
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION waggle_count_elements();
"#;

/// A store made before the counts (or whose counts table is new) counts what it holds once.
const COUNTS_BACKFILL: &str = r#"
INSERT INTO process_instance_count (process_definition_key, state, partition_id, n)
SELECT process_definition_key, state, partition_id, COUNT(*) FROM process_instance
WHERE NOT EXISTS (SELECT 1 FROM process_instance_count)
GROUP BY process_definition_key, state, partition_id;
INSERT INTO flow_node_count (process_definition_key, flow_node_id, state, incident, partition_id, n)
SELECT process_definition_key, flow_node_id, state, CASE WHEN incident_key IS NULL THEN 0 ELSE 1 END, partition_id, COUNT(*)
FROM flow_node_instance
WHERE type <> 'PROCESS' AND NOT EXISTS (SELECT 1 FROM flow_node_count)
GROUP BY process_definition_key, flow_node_id, state, CASE WHEN incident_key IS NULL THEN 0 ELSE 1 END, partition_id;
"#;
