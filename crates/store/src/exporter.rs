//! The query store's exporter: committed records into the tables of [`crate::schema`], in
//! SQLite or PostgreSQL (every statement through [`crate::db::Connection`]).
//!
//! Every partition's instance shares one write connection. Records are buffered as they come
//! and written on `flush` (or every [`BATCH`] records) in one transaction that also stores the
//! partition's last exported position. Records at or below the stored position are skipped
//! (after a `kill -9` the runner resumes from its own, possibly older, position), and every
//! write is an upsert keyed by the entity's key, so each entity is in the store once, whatever
//! is exported again.
//!
//! Cost (issue 27, docs/performance-history.md "Data lag of the query store"): only the events a table
//! takes are mapped to JSON ([`stored`]), the frequent ones not at all ([`apply_typed`]); each
//! statement is prepared once per connection; an element's end is folded into its insert when
//! both are in one batch ([`fold_ends`]), and a job's writes into its last full upsert of the
//! batch ([`last_job_writes`]); on SQLite the instance counts are summed per transaction, not
//! kept by a trigger per row ([`crate::counts`]), an end reads its row and updates it without
//! `RETURNING` (no statement journal: [`FLOW_NODE_ACTIVE_ROW`]), and a round's statements are
//! each taken from the statement cache once ([`crate::rows::Writer`]). In SQLite a transaction's commit is durable against a
//! crash of the process (WAL, `synchronous=NORMAL`) but synced to disk only every
//! [`DURABLE_EVERY`]: a position is **acknowledged only once a synced commit covers it**
//! (`synchronous=FULL` for that commit: its fsync of the WAL makes every earlier commit durable
//! too), so the log is never compacted past records a power loss could take from the store. In
//! PostgreSQL every commit is durable, so each is acknowledged at once
//! ([`Connection::sync_commits`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use serde_json::Value;
use waggle_exporter::{json, Context, Controller, ExportError, Exporter, ExporterFactory};
use waggle_protocol::record::RecordType;
use waggle_protocol::{PartitionId, Record, RecordValue};

use crate::counts::{returned_element, Counts};
use crate::element_returning;
use crate::rows::{Batched, Writer};
use crate::{params, Changes, Connection, Location, StoreError};

/// Records written per transaction at most (a long catch-up writes as it goes).
pub const BATCH: usize = 20_000;
/// A commit is synced to disk (and its position acknowledged) at least this often.
pub const DURABLE_EVERY: Duration = Duration::from_millis(200);
const SYNC_TASK: u64 = 2;
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
/// file or database and its tables; every statement of `apply` stays prepared on it).
pub fn factory(id: impl Into<String>, config: StoreConfig) -> Result<ExporterFactory, StoreError> {
    factory_with_changes(id, config, Changes::default())
}

/// [`factory`], its exporters telling `changes` after every commit that changed rows (the
/// REST API's live pages subscribe to it).
pub fn factory_with_changes(id: impl Into<String>, config: StoreConfig, changes: Changes) -> Result<ExporterFactory, StoreError> {
    let conn = Connection::open(&config.location)?;
    conn.tune_for_writing()?;
    let conn = Arc::new(Mutex::new(conn));
    let id = id.into();
    let exporter_id = id.clone();
    Ok(ExporterFactory::new(id, move || {
        Box::new(StoreExporter::new(conn.clone(), exporter_id.clone(), config.history_ttl, changes.clone())) as Box<dyn Exporter>
    }))
}

/// One record as the store needs it.
struct Pending {
    /// An activation's end later in the same batch: (state, end date).
    ended: Option<(&'static str, i64)>,
    /// An end folded into its activation (written with it).
    folded: bool,
    /// The record's value, for the types [`apply_typed`] writes: boxed, so that a pending row
    /// is ~160 bytes instead of ~520 and the batch's capacity holds little once emptied.
    typed: Option<Box<RecordValue>>,
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
    /// The last position handed over (the batch holds the stored events after `stored`).
    last_seen: u64,
    /// A committed position not yet synced to disk, so not yet acknowledged (0: none).
    unsynced: u64,
    /// When a commit was last synced (`None`: not since opening; the first commit is).
    durable_at: Option<std::time::Instant>,
    sync_scheduled: bool,
    batch: Vec<Pending>,
    history_ttl: Option<Duration>,
    timings: Timings,
    /// Told after each commit that wrote rows (issue 28's live UI).
    changes: Changes,
}

/// Where the store exporter's time goes, logged at debug level every 10 s: the SQL statements
/// of its batches and their commits. (Mapping records in `export` is not timed: two clock
/// reads per record were ~3 % of the exporter thread under W2; the export runner's stage
/// times give `export` as a whole.)
struct Timings {
    since: std::time::Instant,
    records: u64,
    batches: u64,
    statements: Duration,
    commit: Duration,
}

impl Timings {
    fn new() -> Self {
        Timings { since: std::time::Instant::now(), records: 0, batches: 0, statements: Duration::ZERO, commit: Duration::ZERO }
    }

    fn report(&mut self, partition: PartitionId) {
        if self.since.elapsed() < Duration::from_secs(10) {
            return;
        }
        let ms = |d: Duration| (d.as_secs_f64() * 1e3) as u64;
        tracing::debug!(
            partition,
            records = self.records,
            batches = self.batches,
            statements_ms = ms(self.statements),
            commit_ms = ms(self.commit),
            "query store exporter times"
        );
        *self = Timings::new();
    }
}

impl Exporter for StoreExporter {
    fn configure(&mut self, context: &Context) -> Result<(), ExportError> {
        self.partition = context.partition_id;
        Ok(())
    }

    fn open(&mut self, controller: &mut Controller) -> Result<(), ExportError> {
        let conn = self.conn.lock().unwrap_or_else(|e| e.into_inner());
        let stored = conn
            .query_row("SELECT last_exported_position FROM exporter_position WHERE partition_id = ?1", params![self.partition])
            .map_err(sql)?
            .and_then(|row| row.first().and_then(crate::db::Value::as_i64));
        self.stored = stored.unwrap_or(0) as u64;
        self.last_seen = self.stored;
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
        self.last_seen = record.position;
        // commands, rejections and the events no table takes change no row; they still
        // advance the position
        let (value_type, intent) = (record.value_type.as_str(), record.intent.as_str());
        if record.record_type == RecordType::Event && stored(value_type, intent) {
            // the frequent values are read as they are, the others through their JSON
            let typed = matches!(
                record.value,
                RecordValue::ProcessInstance(_)
                    | RecordValue::Variable(_)
                    | RecordValue::Job(_)
                    | RecordValue::JobBatch(_)
                    | RecordValue::DecisionEvaluation(_)
                    | RecordValue::Decision(_)
                    | RecordValue::DecisionRequirements(_)
            );
            self.batch.push(Pending {
                ended: None,
                folded: false,
                key: record.key,
                timestamp: record.timestamp_ms,
                value_type,
                intent,
                typed: typed.then(|| Box::new(record.value.clone())),
                value: if typed { Value::Null } else { json::value(&record.value) },
            });
        }
        self.timings.records += 1;
        if self.batch.len() >= BATCH {
            self.write_out(controller)?;
        }
        Ok(())
    }

    fn flush(&mut self, controller: &mut Controller) -> Result<(), ExportError> {
        self.write_out(controller)
    }

    fn on_scheduled(&mut self, task: u64, controller: &mut Controller) -> Result<(), ExportError> {
        if task == SYNC_TASK {
            self.sync_scheduled = false;
            if self.unsynced > 0 {
                self.commit(controller, true)?;
            }
        }
        if task == CLEANUP_TASK {
            if let Some(ttl) = self.history_ttl {
                let before = chrono::Utc::now().timestamp_millis() - ttl.as_millis() as i64;
                let conn = self.conn.lock().unwrap_or_else(|e| e.into_inner());
                let deleted = clean_up(&conn, self.partition, before).map_err(sql)?;
                if deleted > 0 {
                    self.changes.committed();
                    tracing::debug!(partition = self.partition, deleted, "query store history clean-up");
                }
            }
            controller.schedule(CLEANUP_EVERY, CLEANUP_TASK);
        }
        Ok(())
    }
}

impl StoreExporter {
    /// An exporter writing through `conn` (opened and tuned for writing), not yet configured
    /// or opened, as [`factory`] makes them.
    pub(crate) fn new(conn: Arc<Mutex<Connection>>, id: String, history_ttl: Option<Duration>, changes: Changes) -> Self {
        StoreExporter {
            conn,
            id,
            partition: 0,
            stored: 0,
            last_seen: 0,
            unsynced: 0,
            durable_at: None,
            sync_scheduled: false,
            batch: Vec::new(),
            history_ttl,
            timings: Timings::new(),
            changes,
        }
    }

    /// Rows the batch has room for (its capacity).
    #[cfg(test)]
    pub(crate) fn batch_capacity(&self) -> usize {
        self.batch.capacity()
    }

    /// Writes the batch, if anything was handed over since the last commit.
    fn write_out(&mut self, controller: &mut Controller) -> Result<(), ExportError> {
        if self.last_seen <= self.stored {
            return Ok(());
        }
        let durable = self.durable_at.is_none_or(|at| at.elapsed() >= DURABLE_EVERY);
        self.commit(controller, durable)
    }

    /// Commits the batch and the partition's position in one transaction; `durable`: synced
    /// to disk, acknowledging it (and every commit before it). Otherwise the position is
    /// acknowledged by a synced commit at most [`DURABLE_EVERY`] later (PostgreSQL's commits
    /// are all durable: acknowledged at once).
    fn commit(&mut self, controller: &mut Controller, durable: bool) -> Result<(), ExportError> {
        let last = self.last_seen.max(self.stored);
        let conn = self.conn.lock().unwrap_or_else(|e| e.into_inner());
        let durable = conn.sync_commits(durable).map_err(sql)?;
        let started = std::time::Instant::now();
        fold_ends(&mut self.batch);
        let jobs = last_job_writes(&self.batch);
        let mut statements_done = started;
        conn.transaction(|tx| {
            let writer = Writer::new(tx, &BATCHED);
            for (at, p) in self.batch.iter().enumerate().filter(|(_, p)| !p.folded) {
                apply(&writer, self.partition, p, &Later { jobs: &jobs, at })?;
            }
            writer.finish()?;
            tx.execute(
                "INSERT INTO exporter_position (partition_id, exporter, last_exported_position, last_updated)
                 VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (partition_id) DO UPDATE SET last_exported_position = excluded.last_exported_position,
                   last_updated = excluded.last_updated",
                params![self.partition, &self.id, last as i64, chrono::Utc::now().timestamp_millis()],
            )?;
            statements_done = std::time::Instant::now();
            Ok(())
        })
        .map_err(sql)?;
        drop(conn);
        self.timings.statements += statements_done - started;
        self.timings.commit += statements_done.elapsed();
        self.timings.batches += 1;
        self.timings.report(self.partition);
        // visible to readers now (WAL: a commit is seen by every later read, synced or not)
        if !self.batch.is_empty() {
            self.changes.committed();
        }
        let used = self.batch.len();
        self.batch.clear();
        if let Some(kept) = kept_capacity(self.batch.capacity(), used) {
            self.batch.shrink_to(kept);
        }
        self.stored = last;
        if durable {
            self.durable_at = Some(std::time::Instant::now());
            self.unsynced = 0;
            controller.acknowledge(last);
        } else {
            self.unsynced = last;
            if !self.sync_scheduled {
                self.sync_scheduled = true;
                controller.schedule(DURABLE_EVERY, SYNC_TASK);
            }
        }
        Ok(())
    }
}

/// Rows of capacity an emptied batch keeps however small its rounds.
const MIN_KEPT_ROWS: usize = 256;

/// What an emptied batch of `capacity` rows shrinks to after a round of `used` rows, if it has
/// far more room than that round needed: after a burst (up to [`BATCH`] rows, several MB) the
/// batch follows the rounds that come after it, while steady rounds of about the same size keep
/// their room and grow nothing again.
fn kept_capacity(capacity: usize, used: usize) -> Option<usize> {
    let wanted = used.max(MIN_KEPT_ROWS);
    (capacity > 4 * wanted).then_some(2 * wanted)
}

/// Folds an element's completion or termination into its activation when both are in the
/// batch: one insert of the ended row instead of an insert and an update (most of W2's
/// elements start and end within one batch).
fn fold_ends(batch: &mut [Pending]) {
    let mut activating: std::collections::HashMap<i64, usize> = std::collections::HashMap::new();
    for i in 0..batch.len() {
        if batch[i].value_type != "PROCESS_INSTANCE" || batch[i].folded {
            continue;
        }
        let state = match batch[i].intent {
            "ELEMENT_ACTIVATING" => {
                activating.insert(batch[i].key, i);
                continue;
            }
            "ELEMENT_COMPLETED" => "COMPLETED",
            "ELEMENT_TERMINATED" => "TERMINATED",
            _ => continue,
        };
        if let Some(at) = activating.remove(&batch[i].key) {
            batch[at].ended = Some((state, batch[i].timestamp));
            batch[i].folded = true;
        }
    }
}

/// Per job key, the index in the batch of the job's last full row write (an upsert of every
/// column: each JOB event [`apply_typed`] writes with [`JOB`]). A job's writes before it are
/// left out (its creation, a job batch's worker and deadline, an update of its retries or
/// deadline): that write sets every column they set, from the job's record as the engine keeps
/// it (an activated job's record holds its worker and deadline). Most of W2's jobs are
/// created, activated and completed within one batch: one insert instead of three writes.
fn last_job_writes(batch: &[Pending]) -> HashMap<i64, usize> {
    let mut last = HashMap::new();
    for (at, p) in batch.iter().enumerate() {
        if matches!(p.typed.as_deref(), Some(RecordValue::Job(_))) && full_job_write(p.intent) {
            last.insert(p.key, at);
        }
    }
    last
}

/// Whether a JOB event's write is the full upsert ([`JOB`]).
fn full_job_write(intent: &str) -> bool {
    !matches!(intent, "UPDATED" | "TIMEOUT_UPDATED")
}

/// What comes later in the batch than the record being written.
struct Later<'a> {
    /// See [`last_job_writes`].
    jobs: &'a HashMap<i64, usize>,
    /// The record's index in the batch.
    at: usize,
}

impl Later<'_> {
    /// Whether a later record of the batch writes job `key`'s whole row.
    fn writes_job(&self, key: i64) -> bool {
        self.jobs.get(&key).is_some_and(|&last| last > self.at)
    }
}

/// Whether an event of this value type and intent changes a row (what [`apply`] writes).
pub fn stored(value_type: &str, intent: &str) -> bool {
    matches!(
        (value_type, intent),
        ("PROCESS", "CREATED")
            | ("PROCESS_INSTANCE", "ELEMENT_ACTIVATING" | "ELEMENT_COMPLETED" | "ELEMENT_TERMINATED")
            | ("PROCESS_INSTANCE", "SEQUENCE_FLOW_TAKEN")
            | ("VARIABLE", "CREATED" | "UPDATED" | "MIGRATED")
            | ("INCIDENT", "CREATED" | "RESOLVED")
            | (
                "JOB",
                "CREATED"
                    | "COMPLETED"
                    | "FAILED"
                    | "TIMED_OUT"
                    | "CANCELED"
                    | "ERROR_THROWN"
                    | "RETRIES_UPDATED"
                    | "MIGRATED"
                    | "UPDATED"
                    | "TIMEOUT_UPDATED"
            )
            | ("JOB_BATCH", "ACTIVATED")
            | ("PROCESS_MESSAGE_SUBSCRIPTION", "CREATING" | "CREATED" | "CORRELATED" | "DELETED" | "MIGRATED")
            | ("USER_TASK", "CREATED" | "ASSIGNED" | "UPDATED" | "COMPLETED" | "CANCELED" | "MIGRATED")
            | ("DECISION_REQUIREMENTS" | "DECISION", "CREATED" | "DELETED")
            | ("DECISION_EVALUATION", "EVALUATED" | "FAILED")
    )
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
fn apply(tx: &Writer, partition: PartitionId, p: &Pending, later: &Later) -> Result<(), StoreError> {
    if let Some(value) = p.typed.as_deref() {
        return apply_typed(tx, partition, p, value, later);
    }
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
            mark_incident(tx, k(v, "elementInstanceKey"), p.key, true)?;
        }
        ("INCIDENT", "RESOLVED") => {
            tx.execute("UPDATE incident SET state = 'RESOLVED' WHERE incident_key = ?1", params![p.key])?;
            mark_incident(tx, k(v, "elementInstanceKey"), p.key, false)?;
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
        ("USER_TASK", intent @ ("CREATED" | "ASSIGNED" | "UPDATED" | "COMPLETED" | "CANCELED" | "MIGRATED")) => {
            user_task(tx, partition, p, intent, &tenant)?;
        }
        _ => {}
    }
    Ok(())
}

/// A Zeebe user task's row (8.8's `user_task`): inserted when CREATED, its assignee, dates and
/// candidates as each event leaves them, and its end (COMPLETED, CANCELED).
fn user_task(tx: &Writer, partition: PartitionId, p: &Pending, intent: &str, tenant: &str) -> Result<(), StoreError> {
    let v = &p.value;
    let state = match intent {
        "COMPLETED" | "CANCELED" => intent,
        _ => "CREATED",
    };
    let end = matches!(intent, "COMPLETED" | "CANCELED").then_some(p.timestamp);
    let text = |field: &str| s(v, field).filter(|t| !t.is_empty());
    tx.execute(
        "INSERT INTO user_task (user_task_key, flow_node_bpmn_id, process_definition_id, creation_date, completion_date, assignee, state,
           form_key, process_definition_key, process_instance_key, element_instance_key, tenant_id, due_date, follow_up_date,
           candidate_groups, candidate_users, external_form_reference, process_definition_version, custom_headers, partition_id)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20)
         ON CONFLICT (user_task_key) DO UPDATE SET completion_date = excluded.completion_date, assignee = excluded.assignee,
           state = excluded.state, due_date = excluded.due_date, follow_up_date = excluded.follow_up_date,
           candidate_groups = excluded.candidate_groups, candidate_users = excluded.candidate_users",
        params![
            p.key,
            s(v, "elementId"),
            s(v, "bpmnProcessId"),
            i(v, "creationTimestamp").unwrap_or(p.timestamp),
            end,
            text("assignee"),
            state,
            k(v, "formKey"),
            i(v, "processDefinitionKey"),
            i(v, "processInstanceKey"),
            i(v, "elementInstanceKey"),
            tenant,
            text("dueDate"),
            text("followUpDate"),
            v.get("candidateGroupsList").map(Value::to_string),
            v.get("candidateUsersList").map(Value::to_string),
            text("externalFormReference"),
            i(v, "processDefinitionVersion"),
            v.get("customHeaders").map(Value::to_string),
            partition
        ],
    )?;
    Ok(())
}

fn tenant_of(t: &str) -> &str {
    if t.is_empty() {
        "<default>"
    } else {
        t
    }
}

/// A key that Zeebe writes as -1 (or 0) when unset.
fn set(key: i64) -> Option<i64> {
    (key > 0).then_some(key)
}

/// The frequent statements, which [`Writer`] sends as multi-row statements on PostgreSQL
/// (each writes the row keyed by `?1` of one table; crate::rows says why that is enough).
static BATCHED: [Batched; 9] = [
    Batched { sql: FLOW_NODE_ENDED, table: "flow_node_instance", types: FLOW_NODE_TYPES },
    Batched { sql: FLOW_NODE_ACTIVE, table: "flow_node_instance", types: FLOW_NODE_TYPES },
    Batched { sql: INSTANCE_ENDED, table: "process_instance", types: INSTANCE_TYPES },
    Batched { sql: INSTANCE_ACTIVE, table: "process_instance", types: INSTANCE_TYPES },
    Batched { sql: FLOW_NODE_END, table: "flow_node_instance", types: &["bigint", "text", "bigint"] },
    Batched { sql: INSTANCE_END, table: "process_instance", types: &["bigint", "text", "bigint"] },
    Batched { sql: VARIABLE, table: "variable", types: &["bigint", "bigint", "text", "bigint", "text", "text", "text", "bigint"] },
    Batched {
        sql: JOB,
        table: "job",
        types: &[
            "bigint", "text", "text", "text", "bigint", "text", "text", "bigint", "bigint", "text", "bigint", "bigint", "text", "text",
            "bigint", "text", "bigint",
        ],
    },
    Batched { sql: JOB_WORKER, table: "job", types: &["bigint", "text", "bigint"] },
];
const FLOW_NODE_TYPES: &[&str] =
    &["bigint", "bigint", "bigint", "text", "text", "text", "bigint", "bigint", "text", "bigint", "text", "bigint"];
const INSTANCE_TYPES: &[&str] = &["bigint", "text", "bigint", "bigint", "bigint", "bigint", "bigint", "text", "bigint", "text", "bigint"];
const FLOW_NODE_ENDED: &str =
    "INSERT INTO flow_node_instance (flow_node_instance_key, process_instance_key, process_definition_key, process_definition_id,
                       flow_node_id, type, start_date, flow_scope_key, tenant_id, partition_id, state, end_date)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)
                     ON CONFLICT (flow_node_instance_key) DO UPDATE SET state = excluded.state, end_date = excluded.end_date";
const FLOW_NODE_ACTIVE: &str =
    "INSERT INTO flow_node_instance (flow_node_instance_key, process_instance_key, process_definition_key, process_definition_id,
                       flow_node_id, type, start_date, flow_scope_key, tenant_id, partition_id, state, end_date)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)
                     ON CONFLICT (flow_node_instance_key) DO NOTHING";
const INSTANCE_ENDED: &str = "INSERT INTO process_instance (process_instance_key, process_definition_id, process_definition_key, version,
                           start_date, parent_process_instance_key, parent_element_instance_key, tenant_id, partition_id, state, end_date)
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)
                         ON CONFLICT (process_instance_key) DO UPDATE SET state = excluded.state, end_date = excluded.end_date";
const INSTANCE_ACTIVE: &str = "INSERT INTO process_instance (process_instance_key, process_definition_id, process_definition_key, version,
                           start_date, parent_process_instance_key, parent_element_instance_key, tenant_id, partition_id, state, end_date)
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)
                         ON CONFLICT (process_instance_key) DO NOTHING";
const FLOW_NODE_END: &str = "UPDATE flow_node_instance SET state = ?2, end_date = ?3 WHERE flow_node_instance_key = ?1";
const INSTANCE_END: &str = "UPDATE process_instance SET state = ?2, end_date = ?3 WHERE process_instance_key = ?1";
/// SQLite's ends ([`crate::counts`]): only an active row ends (an end is exported once, so
/// this is the row [`FLOW_NODE_END`] then ends), and the row says what to count. A read and
/// a plain update, not one `UPDATE … RETURNING`: SQLite runs a statement with `RETURNING` as
/// one that may write more than once, so in a transaction it journals every page it touches
/// (in memory) to be able to undo it alone: a sixth of the exporter's instructions when every
/// instance ends in a later batch than it starts (callgrind, `fill_store` with
/// `FILL_FLUSH_EACH=1`).
const FLOW_NODE_ACTIVE_ROW: &str =
    "SELECT process_definition_key, flow_node_id, type, state, CASE WHEN incident_key IS NULL THEN 0 ELSE 1 END, partition_id
                                    FROM flow_node_instance WHERE flow_node_instance_key = ?1 AND state = 'ACTIVE'";
const INSTANCE_ACTIVE_ROW: &str =
    "SELECT process_definition_key, partition_id FROM process_instance WHERE process_instance_key = ?1 AND state = 'ACTIVE'";
const VARIABLE: &str =
    "INSERT INTO variable (var_key, process_instance_key, process_definition_id, scope_key, name, value, tenant_id, partition_id)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
                 ON CONFLICT (var_key) DO UPDATE SET value = excluded.value";
const JOB: &str = "INSERT INTO job (job_key, type, worker, state, kind, retries, error_message, error_code, deadline, end_time, custom_headers,
                   process_instance_key, process_definition_key, process_definition_id, element_id, element_instance_key, tenant_id, partition_id)
                 VALUES (?1, ?2, ?3, ?4, 'BPMN_ELEMENT', ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)
                 ON CONFLICT (job_key) DO UPDATE SET worker = excluded.worker, state = excluded.state, retries = excluded.retries,
                   error_message = excluded.error_message, error_code = excluded.error_code, deadline = excluded.deadline,
                   end_time = excluded.end_time";
const JOB_WORKER: &str = "UPDATE job SET worker = ?2, deadline = ?3 WHERE job_key = ?1";

/// Writes the effect of the frequent events, read from the record's value itself (no JSON):
/// elements, variables, jobs and job batches; and of the DMN ones ([`crate::decisions`]).
fn apply_typed(tx: &Writer, partition: PartitionId, p: &Pending, value: &RecordValue, later: &Later) -> Result<(), StoreError> {
    match (value, p.intent) {
        (RecordValue::Job(_), _) if later.writes_job(p.key) => {}
        (RecordValue::ProcessInstance(v), "ELEMENT_ACTIVATING") => {
            // ended in the same batch: inserted ended (and so made ended if there already)
            let (state, end) = p.ended.map_or(("ACTIVE", None), |(state, at)| (state, Some(at)));
            let tenant = tenant_of(&v.tenant_id);
            let element = params![
                p.key,
                v.process_instance_key,
                v.process_definition_key,
                &*v.bpmn_process_id,
                &*v.element_id,
                &*v.bpmn_element_type,
                p.timestamp,
                set(v.flow_scope_key),
                tenant,
                partition,
                state,
                end
            ];
            let is_process = &*v.bpmn_element_type == "PROCESS";
            let instance = || {
                params![
                    v.process_instance_key,
                    &*v.bpmn_process_id,
                    v.process_definition_key,
                    v.version,
                    p.timestamp,
                    set(v.parent_process_instance_key),
                    set(v.parent_element_instance_key),
                    tenant,
                    partition,
                    state,
                    end
                ]
                .to_vec()
            };
            let Some(mut counts) = tx.counts() else {
                tx.execute(if end.is_some() { FLOW_NODE_ENDED } else { FLOW_NODE_ACTIVE }, element)?;
                if is_process {
                    tx.execute(if end.is_some() { INSTANCE_ENDED } else { INSTANCE_ACTIVE }, &instance())?;
                }
                return Ok(());
            };
            // SQLite: inserted (and counted) if new, else ended (and counted) if it ends
            if tx.execute(FLOW_NODE_ACTIVE, element)? == 1 {
                if !is_process {
                    counts.element(v.process_definition_key, &v.element_id, state, false, partition.into(), 1);
                }
            } else if let Some(at) = end {
                end_element(tx, &mut counts, p.key, state, at)?;
            }
            if is_process {
                if tx.execute(INSTANCE_ACTIVE, &instance())? == 1 {
                    counts.instance(v.process_definition_key, state, partition.into(), 1);
                } else if let Some(at) = end {
                    end_instance(tx, &mut counts, v.process_instance_key, state, at)?;
                }
            }
        }
        (RecordValue::ProcessInstance(v), intent @ ("ELEMENT_COMPLETED" | "ELEMENT_TERMINATED")) => {
            let state = if intent == "ELEMENT_COMPLETED" { "COMPLETED" } else { "TERMINATED" };
            let is_process = &*v.bpmn_element_type == "PROCESS";
            match tx.counts() {
                Some(mut counts) => {
                    end_element(tx, &mut counts, p.key, state, p.timestamp)?;
                    if is_process {
                        end_instance(tx, &mut counts, v.process_instance_key, state, p.timestamp)?;
                    }
                }
                None => {
                    tx.execute(FLOW_NODE_END, params![p.key, state, p.timestamp])?;
                    if is_process {
                        tx.execute(INSTANCE_END, params![v.process_instance_key, state, p.timestamp])?;
                    }
                }
            }
        }
        (RecordValue::ProcessInstance(v), "SEQUENCE_FLOW_TAKEN") => {
            // one row per flow an instance took, however often (8.8's `sequence_flow`)
            tx.execute(
                "INSERT INTO sequence_flow (process_instance_key, flow_node_id, process_definition_key, process_definition_id, tenant_id, partition_id)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT (process_instance_key, flow_node_id) DO NOTHING",
                params![v.process_instance_key, &*v.element_id, v.process_definition_key, &*v.bpmn_process_id, tenant_of(&v.tenant_id), partition],
            )?;
        }
        (RecordValue::Variable(v), _) => {
            tx.execute(
                VARIABLE,
                params![p.key, v.process_instance_key, v.bpmn_process_id, v.scope_key, v.name, v.value, tenant_of(&v.tenant_id), partition],
            )?;
        }
        // JOB UPDATE (8.8): the retries and deadline change, the job's state does not
        (RecordValue::Job(v), "UPDATED") => {
            tx.execute("UPDATE job SET retries = ?2, deadline = ?3 WHERE job_key = ?1", params![p.key, v.retries, set(v.deadline_ms)])?;
        }
        // UpdateJobTimeout (Zeebe 8.5's JOB TIMEOUT_UPDATED): the new deadline
        (RecordValue::Job(v), "TIMEOUT_UPDATED") => {
            tx.execute("UPDATE job SET deadline = ?2 WHERE job_key = ?1", params![p.key, set(v.deadline_ms)])?;
        }
        (RecordValue::Job(v), intent) => {
            let end = matches!(intent, "COMPLETED" | "CANCELED" | "ERROR_THROWN").then_some(p.timestamp);
            let headers = v.custom_headers.trim();
            let headers = if headers.is_empty() {
                "{}".to_owned()
            } else {
                serde_json::from_str::<Value>(headers).map_or_else(|_| "{}".to_owned(), |h| h.to_string())
            };
            let non_empty = |t: &str| (!t.is_empty()).then(|| t.to_owned());
            tx.execute(
                JOB,
                params![
                    p.key,
                    &*v.job_type,
                    non_empty(&v.worker),
                    intent,
                    v.retries,
                    non_empty(&v.error_message),
                    non_empty(&v.error_code),
                    set(v.deadline_ms),
                    end,
                    headers,
                    v.process_instance_key,
                    v.process_definition_key,
                    &*v.bpmn_process_id,
                    &*v.element_id,
                    v.element_instance_key,
                    tenant_of(&v.tenant_id),
                    partition
                ],
            )?;
        }
        (RecordValue::DecisionEvaluation(v), intent) => {
            crate::decisions::export_evaluation(tx, partition, p.key, p.timestamp, intent == "FAILED", v)?;
        }
        // DeleteResource on a DRG: its decisions and requirements are gone (their evaluations stay)
        (RecordValue::Decision(_), "DELETED") => crate::decisions::delete_decision(tx, p.key)?,
        (RecordValue::DecisionRequirements(_), "DELETED") => crate::decisions::delete_requirements(tx, p.key)?,
        (RecordValue::Decision(d), _) => crate::decisions::export_decision(tx, d)?,
        (RecordValue::DecisionRequirements(r), _) => crate::decisions::export_requirements(tx, r)?,
        (RecordValue::JobBatch(b), _) => {
            for (key, job) in b.job_keys.iter().zip(b.jobs.iter()).filter(|(key, _)| !later.writes_job(**key)) {
                tx.execute(JOB_WORKER, params![key, &*job.worker, set(job.deadline_ms)])?;
            }
        }
        _ => {}
    }
    Ok(())
}

/// Marks element instance `element` with `incident` (`created`), or takes the mark off when
/// that incident is resolved (the element's row found by its key: no index on the incident
/// key needed). On SQLite, counts the element's move to or from "with an incident"
/// ([`crate::counts`]).
fn mark_incident(tx: &Writer, element: Option<i64>, incident: i64, created: bool) -> Result<(), StoreError> {
    const MARK: &str = "UPDATE flow_node_instance SET incident_key = ?2 WHERE flow_node_instance_key = ?1";
    const UNMARK: &str = "UPDATE flow_node_instance SET incident_key = NULL WHERE flow_node_instance_key = ?1 AND incident_key = ?2";
    let Some(mut counts) = tx.counts() else {
        tx.execute(if created { MARK } else { UNMARK }, params![element, incident])?;
        return Ok(());
    };
    let moved = if created {
        let moved = tx.query(
            concat!(
                "UPDATE flow_node_instance SET incident_key = ?2 WHERE flow_node_instance_key = ?1 AND incident_key IS NULL ",
                element_returning!()
            ),
            params![element, incident],
        )?;
        if moved.is_empty() {
            // marked already (another incident's key replaced: still with an incident)
            tx.execute(MARK, params![element, incident])?;
        }
        moved
    } else {
        tx.query(
            concat!(
                "UPDATE flow_node_instance SET incident_key = NULL WHERE flow_node_instance_key = ?1 AND incident_key = ?2 ",
                element_returning!()
            ),
            params![element, incident],
        )?
    };
    for row in moved {
        returned_element(&row, |definition, element, state, with, partition| {
            counts.element(definition, element, state, !with, partition, -1);
            counts.element(definition, element, state, with, partition, 1);
        });
    }
    Ok(())
}

/// SQLite: ends element instance `key` if it is active, counting the move (its own
/// instance's row is not counted: [`crate::counts`]).
fn end_element(tx: &Writer, counts: &mut Counts, key: i64, state: &str, at: i64) -> Result<(), StoreError> {
    for row in tx.query(FLOW_NODE_ACTIVE_ROW, params![key])? {
        tx.execute(FLOW_NODE_END, params![key, state, at])?;
        returned_element(&row, |definition, element, _, incident, partition| {
            counts.element(definition, element, "ACTIVE", incident, partition, -1);
            counts.element(definition, element, state, incident, partition, 1);
        });
    }
    Ok(())
}

/// SQLite: ends process instance `key` if it is active, counting the move.
fn end_instance(tx: &Writer, counts: &mut Counts, key: i64, state: &str, at: i64) -> Result<(), StoreError> {
    for row in tx.query(INSTANCE_ACTIVE_ROW, params![key])? {
        tx.execute(INSTANCE_END, params![key, state, at])?;
        if let [crate::db::Value::Integer(definition), crate::db::Value::Integer(partition)] = row[..] {
            counts.instance(definition, "ACTIVE", partition, -1);
            counts.instance(definition, state, partition, 1);
        }
    }
    Ok(())
}

/// Deletes the partition's process instances that ended before `before` (epoch ms), with
/// everything belonging to them. Returns how many instances went. On SQLite one transaction,
/// which takes the deleted rows off the counts ([`crate::counts`]; PostgreSQL's triggers do).
pub fn clean_up(conn: &Connection, partition: PartitionId, before: i64) -> Result<u64, StoreError> {
    let delete = |conn: &Connection| {
        let finished =
            "SELECT process_instance_key FROM process_instance WHERE partition_id = ?1 AND end_date IS NOT NULL AND end_date < ?2";
        for table in
            ["flow_node_instance", "variable", "incident", "job", "message_subscription", "user_task", "sequence_flow", "decision_instance"]
        {
            conn.execute(&format!("DELETE FROM {table} WHERE process_instance_key IN ({finished})"), params![partition, before])?;
        }
        conn.execute(
            "DELETE FROM process_instance WHERE partition_id = ?1 AND end_date IS NOT NULL AND end_date < ?2",
            params![partition, before],
        )
    };
    match conn {
        Connection::Sqlite(_) => conn.transaction(|tx| {
            crate::counts::uncount_finished(tx, partition.into(), before)?;
            delete(tx)
        }),
        Connection::Postgres(_) => delete(conn),
    }
}
