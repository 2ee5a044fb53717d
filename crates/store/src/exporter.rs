//! The query store's exporter: committed records into the tables of [`crate::schema`], in
//! SQLite or PostgreSQL.
//!
//! Every partition's instance shares one write connection. Records are buffered as they come
//! and written on `flush` (or every [`BATCH`] records) in one transaction that also stores the
//! partition's last exported position; the position is acknowledged only after the commit.
//! Records at or below the stored position are skipped (after a `kill -9` the runner resumes
//! from its own, possibly older, position), and every write is an upsert keyed by the
//! entity's key, so each entity is in the store once, whatever is exported again.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use serde_json::Value;
use waggle_exporter::{json, Context, Controller, ExportError, Exporter, ExporterFactory};
use waggle_protocol::record::RecordType;
use waggle_protocol::{PartitionId, Record};

use crate::{params, Connection, Location, StoreError};

/// Records written per transaction at most (a long catch-up writes as it goes).
pub const BATCH: usize = 5_000;
/// How often history clean-up runs.
const CLEANUP_EVERY: Duration = Duration::from_secs(60);
const CLEANUP_TASK: u64 = 1;

/// The store exporter's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreConfig {
    /// The SQLite file or the PostgreSQL database.
    pub location: Location,
    /// Finished process instances (and their elements, variables, incidents, jobs and
    /// subscriptions) whose end is older than this are deleted; `None` keeps them.
    pub history_ttl: Option<Duration>,
}

impl From<StoreError> for ExportError {
    fn from(e: StoreError) -> Self {
        ExportError::Other(e.to_string())
    }
}

fn sql(e: StoreError) -> ExportError {
    e.into()
}

/// The factory of store exporters sharing one write connection (opened here, creating the
/// file or database and its tables).
pub fn factory(id: impl Into<String>, config: StoreConfig) -> Result<ExporterFactory, StoreError> {
    let conn = Arc::new(Mutex::new(Connection::open(&config.location)?));
    let id = id.into();
    let exporter_id = id.clone();
    Ok(ExporterFactory::new(id, move || {
        Box::new(StoreExporter {
            conn: conn.clone(),
            id: exporter_id.clone(),
            partition: 0,
            stored: 0,
            batch: Vec::new(),
            history_ttl: config.history_ttl,
        }) as Box<dyn Exporter>
    }))
}

/// One record as the store needs it.
struct Pending {
    position: u64,
    key: i64,
    timestamp: i64,
    value_type: &'static str,
    intent: &'static str,
    value: Value,
}

/// One partition's store exporter.
pub struct StoreExporter {
    conn: Arc<Mutex<Connection>>,
    id: String,
    partition: PartitionId,
    /// The partition's last position in the store (records up to it are there).
    stored: u64,
    batch: Vec<Pending>,
    history_ttl: Option<Duration>,
}

impl Exporter for StoreExporter {
    fn configure(&mut self, context: &Context) -> Result<(), ExportError> {
        self.partition = context.partition_id;
        Ok(())
    }

    fn open(&mut self, controller: &mut Controller) -> Result<(), ExportError> {
        let conn = self.conn.lock().expect("store connection");
        let stored = conn
            .query_row("SELECT last_exported_position FROM exporter_position WHERE partition_id = ?1", params![self.partition])
            .map_err(sql)?
            .and_then(|row| row.first().and_then(crate::db::Value::as_i64));
        self.stored = stored.unwrap_or(0) as u64;
        // what the store holds need not come again
        controller.acknowledge(self.stored);
        if self.history_ttl.is_some() {
            controller.schedule(Duration::ZERO, CLEANUP_TASK);
        }
        Ok(())
    }

    fn export(&mut self, record: &Record, controller: &mut Controller) -> Result<(), ExportError> {
        if record.position <= self.stored {
            return Ok(());
        }
        // commands and rejections change no entity; they still advance the position
        let value = if record.record_type == RecordType::Event { json::value(&record.value) } else { Value::Null };
        self.batch.push(Pending {
            position: record.position,
            key: record.key,
            timestamp: record.timestamp_ms,
            value_type: record.value_type.as_str(),
            intent: record.intent.as_str(),
            value,
        });
        if self.batch.len() >= BATCH {
            self.write_out(controller)?;
        }
        Ok(())
    }

    fn flush(&mut self, controller: &mut Controller) -> Result<(), ExportError> {
        self.write_out(controller)
    }

    fn on_scheduled(&mut self, task: u64, controller: &mut Controller) -> Result<(), ExportError> {
        if task == CLEANUP_TASK {
            if let Some(ttl) = self.history_ttl {
                let before = chrono::Utc::now().timestamp_millis() - ttl.as_millis() as i64;
                let conn = self.conn.lock().expect("store connection");
                let deleted = clean_up(&conn, self.partition, before).map_err(sql)?;
                if deleted > 0 {
                    tracing::debug!(partition = self.partition, deleted, "query store history clean-up");
                }
            }
            controller.schedule(CLEANUP_EVERY, CLEANUP_TASK);
        }
        Ok(())
    }
}

impl StoreExporter {
    fn write_out(&mut self, controller: &mut Controller) -> Result<(), ExportError> {
        let Some(last) = self.batch.last().map(|p| p.position) else {
            return Ok(());
        };
        let conn = self.conn.lock().expect("store connection");
        conn.transaction(|tx| {
            for p in &self.batch {
                if !p.value.is_null() {
                    apply(tx, self.partition, p)?;
                }
            }
            tx.execute(
                "INSERT INTO exporter_position (partition_id, exporter, last_exported_position, last_updated)
                 VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (partition_id) DO UPDATE SET last_exported_position = excluded.last_exported_position,
                   last_updated = excluded.last_updated",
                params![self.partition, &self.id, last as i64, chrono::Utc::now().timestamp_millis()],
            )
        })
        .map_err(sql)?;
        self.batch.clear();
        self.stored = last;
        controller.acknowledge(last);
        Ok(())
    }
}

fn s(v: &Value, field: &str) -> Option<String> {
    v.get(field).and_then(Value::as_str).map(str::to_owned)
}

fn i(v: &Value, field: &str) -> Option<i64> {
    v.get(field).and_then(Value::as_i64)
}

/// A key that Zeebe writes as -1 (or 0) when unset.
fn k(v: &Value, field: &str) -> Option<i64> {
    i(v, field).filter(|&x| x > 0)
}

/// The process's name and version tag from its BPMN XML.
fn process_name_and_tag(xml: &str, process_id: &str) -> (Option<String>, Option<String>) {
    let Ok(doc) = roxmltree::Document::parse(xml) else {
        return (None, None);
    };
    let Some(process) = doc.descendants().find(|n| n.tag_name().name() == "process" && n.attribute("id") == Some(process_id)) else {
        return (None, None);
    };
    let name = process.attribute("name").map(str::to_owned);
    let tag = process.descendants().find(|n| n.tag_name().name() == "versionTag").and_then(|n| n.attribute("value")).map(str::to_owned);
    (name, tag)
}

/// Writes one event's effect (an upsert: applying it again changes nothing).
fn apply(tx: &Connection, partition: PartitionId, p: &Pending) -> Result<(), StoreError> {
    let v = &p.value;
    let tenant = s(v, "tenantId").unwrap_or_else(|| "<default>".into());
    match (p.value_type, p.intent) {
        ("PROCESS", "CREATED") => {
            let xml = s(v, "resource")
                .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
                .map(|b| String::from_utf8_lossy(&b).into_owned());
            let id = s(v, "bpmnProcessId").unwrap_or_default();
            let (name, tag) = xml.as_deref().map_or((None, None), |x| process_name_and_tag(x, &id));
            tx.execute(
                "INSERT INTO process_definition (process_definition_key, process_definition_id, name, resource_name, bpmn_xml, version, version_tag, tenant_id)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
                 ON CONFLICT (process_definition_key) DO NOTHING",
                params![i(v, "processDefinitionKey").unwrap_or(p.key), id, name, s(v, "resourceName"), xml, i(v, "version"), tag, tenant],
            )?;
        }
        ("PROCESS_INSTANCE", intent @ ("ELEMENT_ACTIVATING" | "ELEMENT_COMPLETED" | "ELEMENT_TERMINATED")) => {
            let element_type = s(v, "bpmnElementType").unwrap_or_default();
            let pi = i(v, "processInstanceKey").unwrap_or(-1);
            if intent == "ELEMENT_ACTIVATING" {
                tx.execute(
                    "INSERT INTO flow_node_instance (flow_node_instance_key, process_instance_key, process_definition_key, process_definition_id,
                       flow_node_id, type, state, start_date, flow_scope_key, tenant_id, partition_id)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'ACTIVE', ?7, ?8, ?9, ?10)
                     ON CONFLICT (flow_node_instance_key) DO NOTHING",
                    params![
                        p.key,
                        pi,
                        i(v, "processDefinitionKey"),
                        s(v, "bpmnProcessId"),
                        s(v, "elementId"),
                        element_type,
                        p.timestamp,
                        k(v, "flowScopeKey"),
                        tenant,
                        partition
                    ],
                )?;
                if element_type == "PROCESS" {
                    tx.execute(
                        "INSERT INTO process_instance (process_instance_key, process_definition_id, process_definition_key, version, state,
                           start_date, parent_process_instance_key, parent_element_instance_key, tenant_id, partition_id)
                         VALUES (?1, ?2, ?3, ?4, 'ACTIVE', ?5, ?6, ?7, ?8, ?9)
                         ON CONFLICT (process_instance_key) DO NOTHING",
                        params![
                            pi,
                            s(v, "bpmnProcessId"),
                            i(v, "processDefinitionKey"),
                            i(v, "version"),
                            p.timestamp,
                            k(v, "parentProcessInstanceKey"),
                            k(v, "parentElementInstanceKey"),
                            tenant,
                            partition
                        ],
                    )?;
                }
            } else {
                let state = if intent == "ELEMENT_COMPLETED" { "COMPLETED" } else { "TERMINATED" };
                tx.execute(
                    "UPDATE flow_node_instance SET state = ?2, end_date = ?3 WHERE flow_node_instance_key = ?1",
                    params![p.key, state, p.timestamp],
                )?;
                if element_type == "PROCESS" {
                    tx.execute(
                        "UPDATE process_instance SET state = ?2, end_date = ?3 WHERE process_instance_key = ?1",
                        params![pi, state, p.timestamp],
                    )?;
                }
            }
        }
        ("VARIABLE", "CREATED" | "UPDATED" | "MIGRATED") => {
            tx.execute(
                "INSERT INTO variable (var_key, process_instance_key, process_definition_id, scope_key, name, value, tenant_id, partition_id)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
                 ON CONFLICT (var_key) DO UPDATE SET value = excluded.value",
                params![
                    p.key,
                    i(v, "processInstanceKey"),
                    s(v, "bpmnProcessId"),
                    i(v, "scopeKey"),
                    s(v, "name"),
                    s(v, "value").unwrap_or_else(|| "null".into()),
                    tenant,
                    partition
                ],
            )?;
        }
        ("INCIDENT", "CREATED") => {
            tx.execute(
                "INSERT INTO incident (incident_key, process_definition_key, process_definition_id, process_instance_key, flow_node_instance_key,
                   flow_node_id, job_key, error_type, error_message, state, creation_date, tenant_id, partition_id)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, 'ACTIVE', ?10, ?11, ?12)
                 ON CONFLICT (incident_key) DO NOTHING",
                params![
                    p.key,
                    i(v, "processDefinitionKey"),
                    s(v, "bpmnProcessId"),
                    i(v, "processInstanceKey"),
                    k(v, "elementInstanceKey"),
                    s(v, "elementId"),
                    k(v, "jobKey"),
                    s(v, "errorType"),
                    s(v, "errorMessage"),
                    p.timestamp,
                    tenant,
                    partition
                ],
            )?;
            tx.execute(
                "UPDATE flow_node_instance SET incident_key = ?2 WHERE flow_node_instance_key = ?1",
                params![k(v, "elementInstanceKey"), p.key],
            )?;
        }
        ("INCIDENT", "RESOLVED") => {
            tx.execute("UPDATE incident SET state = 'RESOLVED' WHERE incident_key = ?1", params![p.key])?;
            tx.execute("UPDATE flow_node_instance SET incident_key = NULL WHERE incident_key = ?1", params![p.key])?;
        }
        ("JOB", intent) => {
            let state = match intent {
                "CREATED" => "CREATED",
                "COMPLETED" => "COMPLETED",
                "FAILED" => "FAILED",
                "TIMED_OUT" => "TIMED_OUT",
                "CANCELED" => "CANCELED",
                "ERROR_THROWN" => "ERROR_THROWN",
                "RETRIES_UPDATED" => "RETRIES_UPDATED",
                "MIGRATED" => "MIGRATED",
                _ => return Ok(()),
            };
            let end = matches!(state, "COMPLETED" | "CANCELED" | "ERROR_THROWN").then_some(p.timestamp);
            tx.execute(
                "INSERT INTO job (job_key, type, worker, state, kind, retries, error_message, error_code, deadline, end_time, custom_headers,
                   process_instance_key, process_definition_key, process_definition_id, element_id, element_instance_key, tenant_id, partition_id)
                 VALUES (?1, ?2, ?3, ?4, 'BPMN_ELEMENT', ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)
                 ON CONFLICT (job_key) DO UPDATE SET worker = excluded.worker, state = excluded.state, retries = excluded.retries,
                   error_message = excluded.error_message, error_code = excluded.error_code, deadline = excluded.deadline,
                   end_time = excluded.end_time",
                params![
                    p.key,
                    s(v, "type"),
                    s(v, "worker").filter(|w| !w.is_empty()),
                    state,
                    i(v, "retries"),
                    s(v, "errorMessage").filter(|m| !m.is_empty()),
                    s(v, "errorCode").filter(|m| !m.is_empty()),
                    k(v, "deadline"),
                    end,
                    v.get("customHeaders").map(Value::to_string),
                    i(v, "processInstanceKey"),
                    i(v, "processDefinitionKey"),
                    s(v, "bpmnProcessId"),
                    s(v, "elementId"),
                    i(v, "elementInstanceKey"),
                    tenant,
                    partition
                ],
            )?;
        }
        ("JOB_BATCH", "ACTIVATED") => {
            let keys = v.get("jobKeys").and_then(Value::as_array).cloned().unwrap_or_default();
            let jobs = v.get("jobs").and_then(Value::as_array).cloned().unwrap_or_default();
            for (key, job) in keys.iter().zip(jobs.iter()) {
                tx.execute(
                    "UPDATE job SET worker = ?2, deadline = ?3 WHERE job_key = ?1",
                    params![key.as_i64(), s(job, "worker"), k(job, "deadline")],
                )?;
            }
        }
        ("PROCESS_MESSAGE_SUBSCRIPTION", intent @ ("CREATING" | "CREATED" | "CORRELATED" | "DELETED" | "MIGRATED")) => {
            tx.execute(
                "INSERT INTO message_subscription (flow_node_instance_key, message_name, process_instance_key, process_definition_id,
                   flow_node_id, correlation_key, state, date_time, tenant_id, partition_id)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)
                 ON CONFLICT (flow_node_instance_key, message_name) DO UPDATE SET state = excluded.state, date_time = excluded.date_time",
                params![
                    i(v, "elementInstanceKey"),
                    s(v, "messageName"),
                    i(v, "processInstanceKey"),
                    s(v, "bpmnProcessId"),
                    s(v, "elementId"),
                    s(v, "correlationKey"),
                    if intent == "CREATING" { "CREATED" } else { intent },
                    p.timestamp,
                    tenant,
                    partition
                ],
            )?;
        }
        _ => {}
    }
    Ok(())
}

/// Deletes the partition's process instances that ended before `before` (epoch ms), with
/// everything belonging to them. Returns how many instances went.
pub fn clean_up(conn: &Connection, partition: PartitionId, before: i64) -> Result<u64, StoreError> {
    let finished = "SELECT process_instance_key FROM process_instance WHERE partition_id = ?1 AND end_date IS NOT NULL AND end_date < ?2";
    for table in ["flow_node_instance", "variable", "incident", "job", "message_subscription"] {
        conn.execute(&format!("DELETE FROM {table} WHERE process_instance_key IN ({finished})"), params![partition, before])?;
    }
    conn.execute(
        "DELETE FROM process_instance WHERE partition_id = ?1 AND end_date IS NOT NULL AND end_date < ?2",
        params![partition, before],
    )
}
