//! The store's tables, after Camunda's RDBMS exporter schema (camunda/camunda,
//! `db/rdbms-schema/src/main/resources/db/changelog/rdbms-exporter/changesets/8.8.0.xml`):
//! the same entities and column names where Waggle has the data, keys as 64-bit integers,
//! dates as epoch milliseconds. `partition_id` says which partition's exporter wrote a row.

/// Idempotent: run on every open.
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
CREATE INDEX IF NOT EXISTS process_instance_definition ON process_instance (process_definition_id, state);
-- a process definition's element statistics find its instances by key (statistics.rs)
CREATE INDEX IF NOT EXISTS process_instance_definition_key ON process_instance (process_definition_key);
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
"#;
