//! Searches over the store in the shape of Camunda 8.8's Orchestration Cluster API
//! (<https://docs.camunda.io/docs/apis-tools/orchestration-cluster-api-rest/orchestration-cluster-api-rest-overview/>):
//! a request `{filter, sort, page}` and a response `{items, page: {totalItems, startCursor,
//! endCursor}}`, keys as strings, dates as ISO 8601 text.
//!
//! - `filter`: per field, a value (equality) or an object of operators: `$eq`, `$neq`, `$in`,
//!   `$notIn`, `$like` (`*` any characters, `?` one; strings only), `$gt`, `$gte`, `$lt`,
//!   `$lte` (numbers, keys and dates), `$exists`. A `null`, `[]` or `{}` is no condition (the
//!   8.8 Java client sends `"$in": []` and `"tags": []` for what it leaves unset). `$or`: an
//!   array of such filter objects, of which at least one must match, besides the other fields
//!   (`{"state": "ACTIVE", "$or": [{"processDefinitionId": "a"}, {"hasIncident": true}]}`, as
//!   8.8's process instance filter); an `$or` inside `$or` is invalid. The process instance
//!   filter also takes `elementId`, `elementInstanceState`, `hasElementInstanceIncident` and
//!   `variables` ([`crate::instance_filter`]).
//! - `sort`: `[{field, order: ASC|DESC}]`, then by the entity's key; text sorts bytewise, a
//!   missing value first ascending, last descending.
//! - `page`: `limit` (default 100, at most 10,000) and one of `from` (an offset), `after` or
//!   `before` (a cursor from a previous response's `endCursor` / `startCursor`: the sort
//!   values of that row, so a page deep in a million rows is found through the index).
//! - `totalItems` counts up to [`COUNT_CAP`]; beyond, `hasMoreTotalItems` is true.
//!
//! Anything else (an unknown field, a value of the wrong type) is [`StoreError::Invalid`].

use base64::Engine as _;
use serde_json::{json, Map, Value};

use crate::db::{Connection, Value as Sql};
use crate::dialect::Dialect;
use crate::StoreError;

/// A field's type, for parsing filter values and writing results.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A 64-bit key, a string in JSON.
    Key,
    Int,
    Str,
    /// Epoch milliseconds in the store, ISO 8601 in JSON.
    Date,
    Bool,
    /// JSON text in the store, a JSON value in results; not filterable.
    Json,
}

/// A field of an entity: its API name, its SQL expression (over the table aliased `t`).
#[derive(Debug, Clone, Copy)]
pub struct Field {
    pub api: &'static str,
    pub sql: &'static str,
    pub kind: Kind,
}

pub(crate) const fn f(api: &'static str, sql: &'static str, kind: Kind) -> Field {
    Field { api, sql, kind }
}

/// A searchable entity.
#[derive(Debug)]
pub struct Entity {
    pub name: &'static str,
    pub table: &'static str,
    /// The key column, the last sort criterion (results are in a total order).
    pub key: &'static str,
    pub fields: &'static [Field],
}

pub(crate) const HAS_INCIDENT_PI: &str =
    "EXISTS (SELECT 1 FROM incident i WHERE i.process_instance_key = t.process_instance_key AND i.state = 'ACTIVE')";

pub static PROCESS_INSTANCE: Entity = Entity {
    name: "process instance",
    table: "process_instance",
    key: "t.process_instance_key",
    fields: &[
        f("processInstanceKey", "t.process_instance_key", Kind::Key),
        f("processDefinitionId", "t.process_definition_id", Kind::Str),
        f(
            "processDefinitionName",
            "(SELECT d.name FROM process_definition d WHERE d.process_definition_key = t.process_definition_key)",
            Kind::Str,
        ),
        f("processDefinitionVersion", "t.version", Kind::Int),
        f(
            "processDefinitionVersionTag",
            "(SELECT d.version_tag FROM process_definition d WHERE d.process_definition_key = t.process_definition_key)",
            Kind::Str,
        ),
        f("processDefinitionKey", "t.process_definition_key", Kind::Key),
        f("parentProcessInstanceKey", "t.parent_process_instance_key", Kind::Key),
        f("parentElementInstanceKey", "t.parent_element_instance_key", Kind::Key),
        f("startDate", "t.start_date", Kind::Date),
        f("endDate", "t.end_date", Kind::Date),
        f("state", "t.state", Kind::Str),
        f("hasIncident", HAS_INCIDENT_PI, Kind::Bool),
        f("tenantId", "t.tenant_id", Kind::Str),
    ],
};

pub static PROCESS_DEFINITION: Entity = Entity {
    name: "process definition",
    table: "process_definition",
    key: "t.process_definition_key",
    fields: &[
        f("processDefinitionKey", "t.process_definition_key", Kind::Key),
        f("processDefinitionId", "t.process_definition_id", Kind::Str),
        f("name", "t.name", Kind::Str),
        f("resourceName", "t.resource_name", Kind::Str),
        f("version", "t.version", Kind::Int),
        f("versionTag", "t.version_tag", Kind::Str),
        f("tenantId", "t.tenant_id", Kind::Str),
        f("hasStartForm", "0", Kind::Bool),
    ],
};

pub static ELEMENT_INSTANCE: Entity = Entity {
    name: "element instance",
    table: "flow_node_instance",
    key: "t.flow_node_instance_key",
    fields: &[
        f("elementInstanceKey", "t.flow_node_instance_key", Kind::Key),
        f("processInstanceKey", "t.process_instance_key", Kind::Key),
        f("processDefinitionKey", "t.process_definition_key", Kind::Key),
        f("processDefinitionId", "t.process_definition_id", Kind::Str),
        f("elementId", "t.flow_node_id", Kind::Str),
        f("elementName", "t.flow_node_id", Kind::Str),
        f("type", "t.type", Kind::Str),
        f("state", "t.state", Kind::Str),
        f("startDate", "t.start_date", Kind::Date),
        f("endDate", "t.end_date", Kind::Date),
        f("hasIncident", "(t.incident_key IS NOT NULL)", Kind::Bool),
        f("incidentKey", "t.incident_key", Kind::Key),
        f("tenantId", "t.tenant_id", Kind::Str),
    ],
};

pub static VARIABLE: Entity = Entity {
    name: "variable",
    table: "variable",
    key: "t.var_key",
    fields: &[
        f("variableKey", "t.var_key", Kind::Key),
        f("name", "t.name", Kind::Str),
        f("value", "t.value", Kind::Str),
        f("isTruncated", "0", Kind::Bool),
        f("scopeKey", "t.scope_key", Kind::Key),
        f("processInstanceKey", "t.process_instance_key", Kind::Key),
        f("tenantId", "t.tenant_id", Kind::Str),
    ],
};

pub static INCIDENT: Entity = Entity {
    name: "incident",
    table: "incident",
    key: "t.incident_key",
    fields: &[
        f("incidentKey", "t.incident_key", Kind::Key),
        f("processDefinitionKey", "t.process_definition_key", Kind::Key),
        f("processDefinitionId", "t.process_definition_id", Kind::Str),
        f("processInstanceKey", "t.process_instance_key", Kind::Key),
        f("elementInstanceKey", "t.flow_node_instance_key", Kind::Key),
        f("elementId", "t.flow_node_id", Kind::Str),
        f("jobKey", "t.job_key", Kind::Key),
        f("errorType", "t.error_type", Kind::Str),
        f("errorMessage", "t.error_message", Kind::Str),
        f("state", "t.state", Kind::Str),
        f("creationTime", "t.creation_date", Kind::Date),
        f("tenantId", "t.tenant_id", Kind::Str),
    ],
};

pub static JOB: Entity = Entity {
    name: "job",
    table: "job",
    key: "t.job_key",
    fields: &[
        f("jobKey", "t.job_key", Kind::Key),
        f("type", "t.type", Kind::Str),
        f("worker", "t.worker", Kind::Str),
        f("state", "t.state", Kind::Str),
        f("kind", "t.kind", Kind::Str),
        f("listenerEventType", "'UNSPECIFIED'", Kind::Str),
        f("retries", "t.retries", Kind::Int),
        f("errorMessage", "t.error_message", Kind::Str),
        f("errorCode", "t.error_code", Kind::Str),
        f("deadline", "t.deadline", Kind::Date),
        f("endTime", "t.end_time", Kind::Date),
        f("customHeaders", "t.custom_headers", Kind::Json),
        f("processInstanceKey", "t.process_instance_key", Kind::Key),
        f("processDefinitionKey", "t.process_definition_key", Kind::Key),
        f("processDefinitionId", "t.process_definition_id", Kind::Str),
        f("elementId", "t.element_id", Kind::Str),
        f("elementInstanceKey", "t.element_instance_key", Kind::Key),
        f("hasFailedWithRetriesLeft", "(t.state = 'FAILED' AND t.retries > 0)", Kind::Bool),
        f("isDenied", "0", Kind::Bool),
        f("tenantId", "t.tenant_id", Kind::Str),
    ],
};

/// Zeebe user tasks (8.8's `UserTaskResult`): dates as the task holds them (ISO 8601 text),
/// candidates as lists.
pub static USER_TASK: Entity = Entity {
    name: "user task",
    table: "user_task",
    key: "t.user_task_key",
    fields: &[
        f("userTaskKey", "t.user_task_key", Kind::Key),
        f("state", "t.state", Kind::Str),
        f("assignee", "t.assignee", Kind::Str),
        f("elementId", "t.flow_node_bpmn_id", Kind::Str),
        f("elementInstanceKey", "t.element_instance_key", Kind::Key),
        f("candidateGroups", "t.candidate_groups", Kind::Json),
        f("candidateUsers", "t.candidate_users", Kind::Json),
        f("processDefinitionId", "t.process_definition_id", Kind::Str),
        f("processDefinitionKey", "t.process_definition_key", Kind::Key),
        f("processDefinitionVersion", "t.process_definition_version", Kind::Int),
        f("processInstanceKey", "t.process_instance_key", Kind::Key),
        f("formKey", "t.form_key", Kind::Key),
        f("creationDate", "t.creation_date", Kind::Date),
        f("completionDate", "t.completion_date", Kind::Date),
        f("dueDate", "t.due_date", Kind::Str),
        f("followUpDate", "t.follow_up_date", Kind::Str),
        f("externalFormReference", "t.external_form_reference", Kind::Str),
        f("customHeaders", "t.custom_headers", Kind::Json),
        f("tenantId", "t.tenant_id", Kind::Str),
    ],
};

pub(crate) fn invalid(msg: impl Into<String>) -> StoreError {
    StoreError::Invalid(msg.into())
}

/// Epoch milliseconds as ISO 8601 (UTC, milliseconds), as 8.8 writes dates.
pub fn iso(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms).map(|d| d.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()).unwrap_or_default()
}

fn parse_value(field: &Field, v: &Value) -> Result<Sql, StoreError> {
    let bad = || invalid(format!("the filter value {v} of '{}' is not a {:?}", field.api, field.kind));
    Ok(match field.kind {
        Kind::Key => match v {
            Value::String(s) => Sql::Integer(s.parse().map_err(|_| bad())?),
            Value::Number(n) => Sql::Integer(n.as_i64().ok_or_else(bad)?),
            _ => return Err(bad()),
        },
        Kind::Int => Sql::Integer(v.as_i64().ok_or_else(bad)?),
        Kind::Str => Sql::Text(v.as_str().ok_or_else(bad)?.to_owned()),
        Kind::Date => {
            let s = v.as_str().ok_or_else(bad)?;
            Sql::Integer(chrono::DateTime::parse_from_rfc3339(s).map_err(|_| bad())?.timestamp_millis())
        }
        Kind::Bool => Sql::Integer(i64::from(v.as_bool().ok_or_else(bad)?)),
        Kind::Json => return Err(invalid(format!("'{}' cannot be filtered on", field.api))),
    })
}

/// `*`/`?` wildcards as a LIKE pattern (escaping `%`, `_` and `\`).
fn like_pattern(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '*' => out.push('%'),
            '?' => out.push('_'),
            '%' | '_' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out
}

fn field<'a>(entity: &'a Entity, name: &str) -> Result<&'a Field, StoreError> {
    entity.fields.iter().find(|f| f.api == name).ok_or_else(|| {
        invalid(format!(
            "unknown {} field '{name}' (known: {})",
            entity.name,
            entity.fields.iter().map(|f| f.api).collect::<Vec<_>>().join(", ")
        ))
    })
}

/// An unset filter value: `null`, `[]` or `{}` (no condition).
pub(crate) fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    }
}

/// The WHERE clause of a `filter` object and its parameters (plus any fixed conditions).
pub(crate) fn where_clause(entity: &Entity, filter: Option<&Value>, fixed: &[(&str, Sql)]) -> Result<(String, Vec<Sql>), StoreError> {
    let mut conds = Vec::new();
    let mut args = Vec::new();
    for (column, value) in fixed {
        conds.push(format!("{column} = ?"));
        args.push(value.clone());
    }
    match filter {
        None | Some(Value::Null) => {}
        Some(Value::Object(map)) => conditions(entity, map, true, &mut conds, &mut args)?,
        Some(other) => return Err(invalid(format!("filter must be an object, not {other}"))),
    }
    let clause = if conds.is_empty() { String::new() } else { format!(" WHERE {}", conds.join(" AND ")) };
    Ok((clause, args))
}

/// The conditions of one filter object (all must hold), their parameters appended to `args` in
/// the order of their placeholders. `$or` is taken when `or_allowed` (not inside another).
fn conditions(
    entity: &Entity,
    map: &Map<String, Value>,
    or_allowed: bool,
    conds: &mut Vec<String>,
    args: &mut Vec<Sql>,
) -> Result<(), StoreError> {
    for (name, value) in map {
        // the 8.8 Java client sends unset filters as empty (`"tags": []`, `"$or": []`)
        if is_empty(value) {
            continue;
        }
        if name == "$or" {
            if !or_allowed {
                return Err(invalid("$or cannot be nested in $or"));
            }
            let groups = value.as_array().ok_or_else(|| invalid("$or takes an array of filter objects"))?;
            let mut alternatives = Vec::new();
            for group in groups {
                let group = group.as_object().ok_or_else(|| invalid(format!("an $or item must be a filter object, not {group}")))?;
                let mut inner = Vec::new();
                conditions(entity, group, false, &mut inner, args)?;
                alternatives.push(if inner.is_empty() { "1 = 1".to_owned() } else { format!("({})", inner.join(" AND ")) });
            }
            conds.push(format!("({})", alternatives.join(" OR ")));
            continue;
        }
        if std::ptr::eq(entity, &PROCESS_INSTANCE) && crate::instance_filter::handles(name) {
            continue;
        }
        if std::ptr::eq(entity, &crate::statistics::PROCESS_DEFINITION_STATISTICS_FILTER) && crate::statistics::handles(name) {
            crate::statistics::condition(name, value, conds, args)?;
            continue;
        }
        let fd = field(entity, name)?;
        field_conditions(fd, name, value, conds, args)?;
    }
    if std::ptr::eq(entity, &PROCESS_INSTANCE) {
        crate::instance_filter::conditions(map, conds, args)?;
    }
    Ok(())
}

/// The conditions of one field's filter value (a value, or an object of operators).
pub(crate) fn field_conditions(
    fd: &Field,
    name: &str,
    value: &Value,
    conds: &mut Vec<String>,
    args: &mut Vec<Sql>,
) -> Result<(), StoreError> {
    let ops: Vec<(&str, &Value)> = match value {
        Value::Object(o) if o.keys().all(|k| k.starts_with('$')) && !o.is_empty() => o.iter().map(|(k, v)| (k.as_str(), v)).collect(),
        v => vec![("$eq", v)],
    };
    for (op, v) in ops {
        // likewise unset operators (`"$in": []` beside `"$eq"`)
        if is_empty(v) {
            continue;
        }
        let sql = fd.sql;
        match op {
            "$eq" | "$neq" | "$gt" | "$gte" | "$lt" | "$lte" => {
                let cmp = match op {
                    "$eq" => "=",
                    "$neq" => "<>",
                    "$gt" => ">",
                    "$gte" => ">=",
                    "$lt" => "<",
                    _ => "<=",
                };
                if matches!(op, "$gt" | "$gte" | "$lt" | "$lte") && matches!(fd.kind, Kind::Str | Kind::Bool) {
                    return Err(invalid(format!("{op} does not apply to '{name}'")));
                }
                if let (Some(member), "$eq" | "$neq", Sql::Integer(b)) = (semi_join(sql), op, parse_value(fd, v)?) {
                    // "has an active incident" as a membership the planner starts from the
                    // incidents with, not a subquery per instance
                    let wanted = (b != 0) == (op == "$eq");
                    conds.push(format!("{}{member}", if wanted { "" } else { "NOT " }));
                    continue;
                }
                if op == "$neq" {
                    conds.push(format!("({sql} IS NULL OR {sql} <> ?)"));
                } else {
                    conds.push(format!("{sql} {cmp} ?"));
                }
                args.push(parse_value(fd, v)?);
            }
            "$in" | "$notIn" => {
                let items = v.as_array().ok_or_else(|| invalid(format!("{op} of '{name}' takes an array")))?;
                let marks = vec!["?"; items.len()].join(", ");
                conds.push(if op == "$in" { format!("{sql} IN ({marks})") } else { format!("({sql} IS NULL OR {sql} NOT IN ({marks}))") });
                for item in items {
                    args.push(parse_value(fd, item)?);
                }
            }
            "$like" => {
                if fd.kind != Kind::Str {
                    return Err(invalid(format!("$like applies to strings, not '{name}'")));
                }
                let s = v.as_str().ok_or_else(|| invalid(format!("$like of '{name}' takes a string")))?;
                conds.push(format!("{sql} LIKE ? ESCAPE '\\'"));
                args.push(Sql::Text(like_pattern(s)));
            }
            "$exists" => {
                let b = v.as_bool().ok_or_else(|| invalid(format!("$exists of '{name}' takes a boolean")))?;
                conds.push(format!("{sql} IS {}NULL", if b { "NOT " } else { "" }));
            }
            other => return Err(invalid(format!("unknown filter operator '{other}' on '{name}'"))),
        }
    }
    Ok(())
}

/// A boolean field's test as a membership (`t.key IN (SELECT …)`), where the field is one.
fn semi_join(sql: &str) -> Option<&'static str> {
    (sql == HAS_INCIDENT_PI)
        .then_some("(t.process_instance_key IN (SELECT i.process_instance_key FROM incident i WHERE i.state = 'ACTIVE'))")
}

/// One term of a result order.
struct Term {
    sql: &'static str,
    text: bool,
    descending: bool,
    /// The entity's key is never missing: its term says no `NULLS FIRST/LAST`, so that
    /// PostgreSQL walks the key's index (ascending `NULLS LAST`) either way.
    key: bool,
}

/// The order of a `sort` array, the entity's key last (unless sorted by already).
fn order_terms(entity: &Entity, sort: Option<&Value>) -> Result<Vec<Term>, StoreError> {
    let mut terms = Vec::new();
    match sort {
        None | Some(Value::Null) => {}
        Some(Value::Array(items)) => {
            for item in items {
                let name = item.get("field").and_then(Value::as_str).ok_or_else(|| invalid("a sort item needs a 'field'"))?;
                let fd = field(entity, name)?;
                let descending = match item.get("order") {
                    None => false,
                    Some(o) => match o.as_str().map(str::to_ascii_uppercase).as_deref() {
                        Some("ASC") => false,
                        Some("DESC") => true,
                        _ => return Err(invalid(format!("sort order of '{name}' must be ASC or DESC"))),
                    },
                };
                if !terms.iter().any(|t: &Term| t.sql == fd.sql) {
                    terms.push(Term { sql: fd.sql, text: fd.kind == Kind::Str, descending, key: fd.sql == entity.key });
                }
            }
        }
        Some(other) => return Err(invalid(format!("sort must be an array, not {other}"))),
    }
    if !terms.iter().any(|t| t.sql == entity.key) {
        terms.push(Term { sql: entity.key, text: false, descending: false, key: true });
    }
    Ok(terms)
}

fn order_by(terms: &[Term], dialect: Dialect, reversed: bool) -> String {
    let term = |t: &Term| {
        let descending = t.descending != reversed;
        if t.key {
            format!("{} {}", t.sql, if descending { "DESC" } else { "ASC" })
        } else {
            dialect.order_term(t.sql, t.text, descending)
        }
    };
    terms.iter().map(term).collect::<Vec<_>>().join(", ")
}

/// A cursor: the sort values of a row (keyset paging, as 8.8's `searchAfter`): the next page
/// starts right after it in the order, found through the order's index, however deep.
fn cursor(values: &[Sql]) -> String {
    let values: Vec<Value> = values
        .iter()
        .map(|v| match v {
            Sql::Null => Value::Null,
            Sql::Integer(i) => Value::from(*i),
            Sql::Text(t) => Value::String(t.clone()),
        })
        .collect();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(json!({ "k": values }).to_string())
}

fn uncursor(c: &Value, terms: usize) -> Result<Vec<Sql>, StoreError> {
    let bad = || invalid(format!("invalid page cursor {c} (not from a search with this sort)"));
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(c.as_str().ok_or_else(bad)?).map_err(|_| bad())?;
    let v: Value = serde_json::from_slice(&bytes).map_err(|_| bad())?;
    let values = v.get("k").and_then(Value::as_array).filter(|k| k.len() == terms).ok_or_else(bad)?;
    values
        .iter()
        .map(|v| match v {
            Value::Null => Ok(Sql::Null),
            Value::Number(n) => n.as_i64().map(Sql::Integer).ok_or_else(bad),
            Value::String(s) => Ok(Sql::Text(s.clone())),
            _ => Err(bad()),
        })
        .collect()
}

/// The condition "comes after `values` in the order" (`before`: comes before), for keyset
/// paging: the rows equal on the first terms and past the next. `NULL`s are first ascending
/// and last descending, as [`Dialect::order_term`] sorts them.
fn keyset(terms: &[Term], values: Vec<Sql>, before: bool, dialect: Dialect, args: &mut Vec<Sql>) -> String {
    let mut alternatives = Vec::new();
    let mut equal: Vec<String> = Vec::new();
    let mut equal_args: Vec<Sql> = Vec::new();
    for (term, value) in terms.iter().zip(values) {
        let e = if term.text && dialect == Dialect::Postgres { format!("{} COLLATE \"C\"", term.sql) } else { term.sql.to_owned() };
        // past the value in the direction of travel: up for ascending after, or descending before
        let up = term.descending == before;
        let past = match (&value, up) {
            (Sql::Null, true) => Some((format!("{e} IS NOT NULL"), None)),
            (Sql::Null, false) => None,
            (v, true) => Some((format!("{e} > ?"), Some(v.clone()))),
            (v, false) if term.key => Some((format!("{e} < ?"), Some(v.clone()))),
            (v, false) => Some((format!("({e} < ? OR {e} IS NULL)"), Some(v.clone()))),
        };
        if let Some((cond, arg)) = past {
            let mut all = equal.clone();
            all.push(cond);
            alternatives.push(format!("({})", all.join(" AND ")));
            args.extend(equal_args.iter().cloned());
            args.extend(arg);
        }
        if value == Sql::Null {
            equal.push(format!("{e} IS NULL"));
        } else {
            equal.push(format!("{e} = ?"));
            equal_args.push(value);
        }
    }
    if alternatives.is_empty() {
        "1 = 0".to_owned()
    } else {
        format!("({})", alternatives.join(" OR "))
    }
}

/// Where a page starts.
enum Start {
    Offset(u64),
    After(Value),
    Before(Value),
}

/// The start and limit of a `page` object.
fn page(page: Option<&Value>) -> Result<(Start, u64), StoreError> {
    let Some(page) = page.filter(|p| !p.is_null()) else {
        return Ok((Start::Offset(0), 100));
    };
    let obj = page.as_object().ok_or_else(|| invalid("page must be an object"))?;
    for k in obj.keys() {
        if !matches!(k.as_str(), "from" | "limit" | "after" | "before") {
            return Err(invalid(format!("unknown page field '{k}'")));
        }
    }
    let limit = match obj.get("limit") {
        None => 100,
        Some(l) => l.as_u64().filter(|&l| l <= 10_000).ok_or_else(|| invalid("page.limit must be an integer from 0 to 10000"))?,
    };
    let given = ["from", "after", "before"].iter().filter(|k| obj.contains_key(**k)).count();
    if given > 1 {
        return Err(invalid("page takes only one of from, after, before"));
    }
    let start = if let Some(from) = obj.get("from") {
        Start::Offset(from.as_u64().ok_or_else(|| invalid("page.from must be a non-negative integer"))?)
    } else if let Some(after) = obj.get("after") {
        Start::After(after.clone())
    } else if let Some(before) = obj.get("before") {
        Start::Before(before.clone())
    } else {
        Start::Offset(0)
    };
    Ok((start, limit))
}

pub(crate) fn item(entity: &Entity, row: Vec<Sql>) -> Value {
    let mut out = Map::new();
    for (fd, v) in entity.fields.iter().zip(row) {
        let v = match (fd.kind, v) {
            (_, Sql::Null) => Value::Null,
            (Kind::Key, Sql::Integer(k)) => Value::String(k.to_string()),
            (Kind::Int, Sql::Integer(i)) => Value::from(i),
            (Kind::Date, Sql::Integer(ms)) => Value::String(iso(ms)),
            (Kind::Bool, Sql::Integer(b)) => Value::Bool(b != 0),
            (Kind::Json, Sql::Text(s)) => serde_json::from_str(&s).unwrap_or(Value::String(s)),
            (_, Sql::Text(s)) => Value::String(s),
            (_, Sql::Integer(i)) => Value::String(i.to_string()),
        };
        if !v.is_null() {
            out.insert(fd.api.to_owned(), v);
        } else if fd.kind == Kind::Bool {
            out.insert(fd.api.to_owned(), Value::Bool(false));
        }
    }
    Value::Object(out)
}

/// Runs a search request (`{filter, sort, page}`) on an entity.
pub fn search(conn: &Connection, entity: &Entity, request: &Value) -> Result<Value, StoreError> {
    search_in(conn, entity, request, None)
}

/// The tenants whose rows a read may return (multi-tenancy: the caller's); `None`: every
/// tenant's.
pub type Tenants<'a> = Option<&'a [String]>;

/// Limits `clause` (a `WHERE ...` or empty) to rows of `tenants` (of the entity's `tenantId`
/// field; an entity without one is not limited), appending the tenants to `args`.
fn within_tenants(entity: &Entity, tenants: Tenants<'_>, clause: &mut String, args: &mut Vec<Sql>) {
    let (Some(tenants), Some(field)) = (tenants, entity.fields.iter().find(|f| f.api == "tenantId")) else { return };
    let cond = if tenants.is_empty() {
        "1 = 0".to_owned()
    } else {
        args.extend(tenants.iter().map(|t| Sql::Text(t.clone())));
        format!("{} IN ({})", field.sql, vec!["?"; tenants.len()].join(", "))
    };
    clause.push_str(if clause.is_empty() { " WHERE " } else { " AND " });
    clause.push_str(&cond);
}

/// [`search`] over the rows of `tenants` only (Camunda 8.8's searches with multi-tenancy on
/// return only the authorized tenants' entities).
pub fn search_in(conn: &Connection, entity: &Entity, request: &Value, tenants: Tenants<'_>) -> Result<Value, StoreError> {
    let obj = match request {
        Value::Null => Map::new(),
        Value::Object(o) => o.clone(),
        other => return Err(invalid(format!("the request body must be an object, not {other}"))),
    };
    for k in obj.keys() {
        if !matches!(k.as_str(), "filter" | "sort" | "page") {
            return Err(invalid(format!("unknown request field '{k}' (expected filter, sort, page)")));
        }
    }
    let (mut clause, mut args) = where_clause(entity, obj.get("filter"), &[])?;
    within_tenants(entity, tenants, &mut clause, &mut args);
    let terms = order_terms(entity, obj.get("sort"))?;
    let dialect = conn.dialect();
    let (start, limit) = page(obj.get("page"))?;
    let (total, more) = count_capped(conn, entity, &clause, &args)?;
    let columns = entity.fields.iter().map(|f| f.sql).chain(terms.iter().map(|t| t.sql)).collect::<Vec<_>>().join(", ");
    let (mut clause, mut args, mut offset, mut reversed) = (clause, args, 0, false);
    match start {
        Start::Offset(from) => offset = from,
        Start::After(c) => {
            let cond = keyset(&terms, uncursor(&c, terms.len())?, false, dialect, &mut args);
            clause = format!("{clause}{} {cond}", if clause.is_empty() { " WHERE" } else { " AND" });
        }
        Start::Before(c) => {
            let cond = keyset(&terms, uncursor(&c, terms.len())?, true, dialect, &mut args);
            clause = format!("{clause}{} {cond}", if clause.is_empty() { " WHERE" } else { " AND" });
            reversed = true;
        }
    }
    let order = order_by(&terms, dialect, reversed);
    let offset = if offset > 0 { format!(" OFFSET {offset}") } else { String::new() };
    let mut rows =
        conn.query(&format!("SELECT {columns} FROM {} t{clause} ORDER BY {order} LIMIT {limit}{offset}", entity.table), &args)?;
    if reversed {
        rows.reverse();
    }
    let width = entity.fields.len();
    let cursor_of = |row: &Vec<Sql>| Value::String(cursor(&row[width..]));
    let (start, end) = match (rows.first(), rows.last()) {
        (Some(first), Some(last)) => (cursor_of(first), cursor_of(last)),
        _ => (Value::Null, Value::Null),
    };
    let items: Vec<Value> = rows
        .into_iter()
        .map(|mut r| {
            r.truncate(width);
            item(entity, r)
        })
        .collect();
    Ok(json!({
        "items": items,
        "page": { "totalItems": total, "hasMoreTotalItems": more, "startCursor": start, "endCursor": end },
    }))
}

/// One entity by its key (`NotFound` if absent).
pub fn get(conn: &Connection, entity: &Entity, key: i64) -> Result<Value, StoreError> {
    get_in(conn, entity, key, None)
}

/// [`get`], an entity of a tenant not in `tenants` being `NotFound` as an absent one.
pub fn get_in(conn: &Connection, entity: &Entity, key: i64, tenants: Tenants<'_>) -> Result<Value, StoreError> {
    let columns = entity.fields.iter().map(|f| f.sql).collect::<Vec<_>>().join(", ");
    let (mut clause, mut args) = (format!(" WHERE {} = ?", entity.key), vec![Sql::Integer(key)]);
    within_tenants(entity, tenants, &mut clause, &mut args);
    match conn.query_row(&format!("SELECT {columns} FROM {} t{clause}", entity.table), &args)? {
        Some(row) => Ok(item(entity, row)),
        None => Err(StoreError::NotFound(format!("{} with key {key}", entity.name))),
    }
}

/// A process definition's BPMN XML.
pub fn process_definition_xml(conn: &Connection, key: i64) -> Result<String, StoreError> {
    let row = conn.query_row("SELECT bpmn_xml FROM process_definition WHERE process_definition_key = ?1", &[Sql::Integer(key)])?;
    match row.and_then(|r| r.into_iter().next()) {
        Some(Sql::Text(xml)) => Ok(xml),
        _ => Err(StoreError::NotFound(format!("process definition with key {key}"))),
    }
}

/// The number of process instances in the store (tests and the bench's data lag).
pub fn count(conn: &Connection, entity: &Entity, filter: &Value) -> Result<i64, StoreError> {
    let (clause, args) = where_clause(entity, Some(filter), &[])?;
    count_where(conn, entity, &clause, &args)
}

/// A search's `totalItems` counts at most this many (8.8: `hasMoreTotalItems` says the count
/// "has been capped due to system limits", and `totalItems` is then a lower bound;
/// <https://docs.camunda.io/docs/apis-tools/typescript/api-reference/index/type-aliases/SearchQueryPageResponse/>):
/// counting a million matches would read them all.
pub const COUNT_CAP: i64 = 10_000;

/// The matches counted up to [`COUNT_CAP`], and whether there are more.
fn count_capped(conn: &Connection, entity: &Entity, clause: &str, args: &[Sql]) -> Result<(i64, bool), StoreError> {
    let sql = format!("SELECT COUNT(*) FROM (SELECT 1 FROM {} t{clause} LIMIT {}) capped", entity.table, COUNT_CAP + 1);
    let n = conn.query_row(&sql, args)?.and_then(|r| r.first().and_then(Sql::as_i64)).unwrap_or(0);
    Ok((n.min(COUNT_CAP), n > COUNT_CAP))
}

fn count_where(conn: &Connection, entity: &Entity, clause: &str, args: &[Sql]) -> Result<i64, StoreError> {
    let row = conn.query_row(&format!("SELECT COUNT(*) FROM {} t{clause}", entity.table), args)?;
    Ok(row.and_then(|r| r.first().and_then(Sql::as_i64)).unwrap_or(0))
}

/// The sequence flows a process instance took, as 8.8's `GET
/// /v2/process-instances/{processInstanceKey}/sequence-flows` answers them
/// (<https://docs.camunda.io/docs/8.8/apis-tools/orchestration-cluster-api-rest/specifications/get-process-instance-sequence-flows/>):
/// `{items: [{sequenceFlowId, processInstanceKey, processDefinitionKey, processDefinitionId,
/// elementId, tenantId}]}`, one item per flow however often it was taken, by flow id;
/// `sequenceFlowId` is `<processInstanceKey>_<flow id>` as in Camunda's RDBMS exporter
/// (`SequenceFlowDbModel`), `elementId` the flow's id. An unknown instance has none.
pub fn sequence_flows(conn: &Connection, process_instance_key: i64) -> Result<Value, StoreError> {
    let order = conn.dialect().order_term("t.flow_node_id", true, false);
    let rows = conn.query(
        &format!(
            "SELECT t.flow_node_id, t.process_definition_key, t.process_definition_id, t.tenant_id
             FROM sequence_flow t WHERE t.process_instance_key = ?1 ORDER BY {order}"
        ),
        &[Sql::Integer(process_instance_key)],
    )?;
    let text = |v: &Sql| match v {
        Sql::Text(s) => Value::String(s.clone()),
        Sql::Integer(i) => Value::String(i.to_string()),
        Sql::Null => Value::Null,
    };
    let items: Vec<Value> = rows
        .iter()
        .map(|r| {
            let id = text(&r[0]);
            json!({
                "sequenceFlowId": format!("{process_instance_key}_{}", id.as_str().unwrap_or_default()),
                "processInstanceKey": process_instance_key.to_string(),
                "processDefinitionKey": text(&r[1]),
                "processDefinitionId": text(&r[2]),
                "elementId": id,
                "tenantId": text(&r[3]),
            })
        })
        .collect();
    Ok(json!({ "items": items }))
}
