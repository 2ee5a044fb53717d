//! Variable scopes as Zeebe has them: each element instance is a scope whose parent is its flow
//! scope; the process instance is the root.

use serde_json::{Map, Value as Json};
use waggle_feel::{Value, VariableLookup};
use waggle_protocol::value::{ProcessInstanceRecord, VariableRecord};
use waggle_protocol::{Intent, RecordValue};

use crate::json_doc::{json_text, VariableTexts};
use crate::processing::Processing;
use crate::tables::StateView;

/// A scope of the chain from an element instance up to its process instance.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Scope {
    pub key: i64,
    /// False only when the scope is known never to have held a variable.
    pub may_hold_variables: bool,
}

/// The chain of scopes from `scope` up to the process instance.
pub(crate) fn scope_chain(view: StateView<'_>, scope: i64) -> Vec<Scope> {
    let mut chain = Vec::new();
    let mut current = scope;
    while current > 0 {
        let element = view.element_with(current, |e| (e.has_variables, e.record.flow_scope_key));
        chain.push(Scope { key: current, may_hold_variables: element.is_none_or(|(has_variables, _)| has_variables) });
        current = element.map_or(-1, |(_, flow_scope)| flow_scope);
        assert!(chain.len() < 10_000, "scope chain does not end");
    }
    chain
}

/// The scopes of the chain from `scope` up that may hold variables: where lookups look.
fn variable_scopes(view: StateView<'_>, scope: i64) -> Vec<i64> {
    scope_chain(view, scope).into_iter().filter(|s| s.may_hold_variables).map(|s| s.key).collect()
}

/// FEEL variable lookup through the scope chain, reading state lazily.
pub(crate) struct ScopeLookup<'a> {
    pub view: StateView<'a>,
    /// The scopes that may hold variables, innermost first.
    pub chain: Vec<i64>,
}

impl<'a> ScopeLookup<'a> {
    pub fn new(view: StateView<'a>, scope: i64) -> Self {
        Self { view, chain: variable_scopes(view, scope) }
    }
}

impl ScopeLookup<'_> {
    /// The stored JSON of variable `name` as it is (not through a FEEL value, which would
    /// rewrite it as a FEEL result: Zeebe keeps the stored parts of a variable unchanged).
    pub fn stored_json(&self, name: &str) -> Option<Json> {
        let v = self.chain.iter().find_map(|scope| self.view.variable(*scope, name))?;
        serde_json::from_str(&v.value).ok()
    }
}

impl VariableLookup for ScopeLookup<'_> {
    fn lookup(&self, name: &str) -> Option<Value> {
        self.chain.iter().find_map(|scope| {
            let v = self.view.variable(*scope, name)?;
            let json: Json = serde_json::from_str(&v.value).ok()?;
            Some(Value::from_json(&json))
        })
    }

    /// Converts only the part a path selects, not the whole (possibly large) variable.
    fn lookup_steps(&self, name: &str, steps: &[waggle_feel::Step<'_>]) -> Option<Value> {
        let v = self.chain.iter().find_map(|scope| self.view.variable(*scope, name))?;
        let json: Json = serde_json::from_str(&v.value).ok()?;
        waggle_feel::select_json(&json, steps).map(Value::from_json)
    }
}

/// FEEL variable lookup in a variables document (name, JSON text) not stored yet.
struct DocumentLookup<'a>(&'a [(String, String)]);

impl VariableLookup for DocumentLookup<'_> {
    fn lookup(&self, name: &str) -> Option<Value> {
        let (_, text) = self.0.iter().rev().find(|(n, _)| n == name)?;
        let json: Json = serde_json::from_str(text).ok()?;
        Some(Value::from_json(&json))
    }
}

/// Where an expression's variables come from.
#[derive(Clone, Copy)]
pub(crate) enum Vars<'a> {
    /// An element instance's scope chain in state.
    Scope(i64),
    /// A new process instance's variables, before the instance exists (checks made before a
    /// creation is accepted).
    Document(&'a [(String, String)]),
    /// An element instance's scope chain, under variables given for one evaluation (a
    /// multi-instance body's `numberOf*` for its completion condition).
    ScopeWith(i64, &'a [(String, String)]),
}

/// A document's variables over a scope chain's.
struct OverlayLookup<'a>(DocumentLookup<'a>, ScopeLookup<'a>);

impl VariableLookup for OverlayLookup<'_> {
    fn lookup(&self, name: &str) -> Option<Value> {
        self.0.lookup(name).or_else(|| self.1.lookup(name))
    }
}

impl From<i64> for Vars<'_> {
    fn from(scope: i64) -> Self {
        Vars::Scope(scope)
    }
}

/// Evaluates an expression in `scope` (an element instance's key, or [`Vars`]) with the batch's
/// clock (never the system's: processing stays deterministic and replayable).
///
/// `Err` when the evaluation fails as a whole, as feel-scala fails it (a failed `assert`,
/// `modulo(x, 0)`, `log(0)`, `stddev` of one number, ordering lists with `<`, ...): Zeebe
/// raises an incident for these, with the message given here. Most other failures (a missing
/// variable, mismatched types) are a `null` value, as in Zeebe.
pub(crate) fn evaluate<'a>(
    p: &Processing<'_, '_, '_>,
    scope: impl Into<Vars<'a>>,
    expr: &waggle_feel::Expression,
) -> Result<Value, String> {
    let context = waggle_feel::EvalContext { now_millis: Some(p.now_ms), seed: None };
    let evaluation = match scope.into() {
        Vars::Scope(scope) => expr.evaluate_detailed(&ScopeLookup::new(p.view(), scope), &context),
        Vars::Document(doc) => expr.evaluate_detailed(&DocumentLookup(doc), &context),
        Vars::ScopeWith(scope, doc) => {
            expr.evaluate_detailed(&OverlayLookup(DocumentLookup(doc), ScopeLookup::new(p.view(), scope)), &context)
        }
    };
    match evaluation.failure {
        None => Ok(evaluation.value),
        Some(failure) => Err(format!("failed to evaluate expression '{}': {failure}", expr.source())),
    }
}

/// All variables visible from `scope` (inner scopes shadow outer ones), optionally only `names`
/// (in that order), as a JSON object's text. Built from the stored JSON texts without parsing
/// and printing them again: a job's 46 KB of variables used to be parsed and printed on every
/// activation.
pub(crate) fn visible_variables(view: StateView<'_>, scope: i64, names: &[String]) -> String {
    let mut found = visible_variable_texts(view, scope, names);
    if !names.is_empty() {
        // keep the order the caller asked for
        found.sort_by_key(|(n, _)| names.iter().position(|x| x == n));
    }
    let mut out = String::with_capacity(2 + found.iter().map(|(n, v)| n.len() + v.len() + 4).sum::<usize>());
    out.push('{');
    for (i, (name, value)) in found.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&json_text(&Json::String(name.clone())));
        out.push(':');
        out.push_str(value);
    }
    out.push('}');
    out
}

/// All variables visible from `scope` (inner scopes shadow outer ones), optionally only `names`:
/// (name, JSON text), innermost scope first.
pub(crate) fn visible_variable_texts(view: StateView<'_>, scope: i64, names: &[String]) -> Vec<(String, String)> {
    let mut found: Vec<(String, String)> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for s in variable_scopes(view, scope) {
        for (name, value) in view.variables_of(s) {
            if (!names.is_empty() && !names.contains(&name)) || !seen.insert(name.clone()) {
                continue;
            }
            found.push((name, value));
        }
    }
    found
}

/// The variables of a document built in the engine (output mappings), as
/// [`document_texts`](crate::json_doc::document_texts) gives those of a client's document.
pub(crate) fn texts_of(doc: &Map<String, Json>) -> VariableTexts {
    doc.iter().map(|(name, value)| (name.clone(), json_text(value))).collect()
}

/// Sets one variable, its value as compact JSON text (as [`json_text`] prints it), in exactly
/// `scope` (CREATED, or UPDATED when the value changed).
pub(crate) fn set_local_text(p: &mut Processing<'_, '_, '_>, scope: i64, name: &str, text: String) {
    let view = p.view();
    let existing = view.variable(scope, name);
    let (pi_key, def_key, bpmn_id) = view
        .element_with(scope, |e| (e.record.process_instance_key, e.record.process_definition_key, e.record.bpmn_process_id.clone()))
        .unwrap_or((scope, -1, Default::default()));
    let record = VariableRecord {
        name: name.to_string(),
        value: text,
        scope_key: scope,
        process_instance_key: pi_key,
        process_definition_key: def_key,
        bpmn_process_id: bpmn_id.to_string(),
        tenant_id: "<default>".into(),
    };
    match existing {
        Some(old) if old.value == record.value => {}
        Some(old) => {
            p.event(old.key, Intent::Updated, RecordValue::Variable(record));
        }
        None => {
            let key = p.new_key();
            p.event(key, Intent::Created, RecordValue::Variable(record));
        }
    }
}

/// Creates the variables of a process instance being started (its scope is new, so none of them
/// can exist yet; `doc`'s names are distinct, as [`crate::json_doc::document_texts`] gives them):
/// CREATED for each, carrying the instance's keys, BPMN process id and tenant as Zeebe's creation
/// writes them.
pub(crate) fn create_in_new_instance(p: &mut Processing<'_, '_, '_>, instance: &ProcessInstanceRecord, doc: VariableTexts) {
    for (name, value) in doc {
        let record = VariableRecord {
            name,
            value,
            scope_key: instance.process_instance_key,
            process_instance_key: instance.process_instance_key,
            process_definition_key: instance.process_definition_key,
            bpmn_process_id: instance.bpmn_process_id.to_string(),
            tenant_id: instance.tenant_id.to_string(),
        };
        let key = p.new_key();
        p.event(key, Intent::Created, RecordValue::Variable(record));
    }
}

/// Sets every variable of `doc` in `scope` itself.
pub(crate) fn merge_local(p: &mut Processing<'_, '_, '_>, scope: i64, doc: &[(String, String)]) {
    for (name, text) in doc {
        set_local_text(p, scope, name, text.clone());
    }
}

/// Zeebe's propagation: each variable is set in the nearest scope (from `scope` up) that
/// already has it, otherwise in the root scope (the process instance).
pub(crate) fn merge_propagate(p: &mut Processing<'_, '_, '_>, scope: i64, doc: &[(String, String)]) {
    if doc.is_empty() {
        return; // nothing to place: the scope chain need not be read
    }
    let chain = scope_chain(p.view(), scope);
    let Some(root) = chain.last().map(|s| s.key) else { return };
    let holders: Vec<i64> = chain.iter().filter(|s| s.may_hold_variables).map(|s| s.key).collect();
    for (name, text) in doc {
        let target = holders.iter().copied().find(|s| p.view().variable(*s, name).is_some()).unwrap_or(root);
        set_local_text(p, target, name, text.clone());
    }
}

/// The variables an event brings (message, thrown error): local to the event when it has
/// output mappings (they read them), else propagated from its flow scope, as Zeebe does.
pub(crate) fn set_event_variables(
    p: &mut Processing<'_, '_, '_>,
    event: i64,
    flow_scope: i64,
    has_outputs: bool,
    variables: &[(String, String)],
) {
    if variables.is_empty() {
        return;
    }
    if has_outputs {
        merge_local(p, event, variables);
    } else {
        merge_propagate(p, flow_scope, variables);
    }
}
