//! Evaluating what a model says with FEEL in a scope: input and output mappings, and
//! attributes that are a static value or an expression.

use serde_json::{Map, Value as Json};
use waggle_bpmn::ExprOrStatic;
use waggle_feel::{Expression, Value};

use crate::processing::P;
use crate::variables::{evaluate, ScopeLookup, Vars};

/// Evaluates mappings (input or output) in `scope` into one document.
pub(crate) fn evaluate_mappings(p: P, scope: i64, mappings: &[waggle_bpmn::Mapping]) -> Result<Map<String, Json>, String> {
    let mut doc = Map::new();
    for m in mappings {
        let value = evaluate(p, scope, &m.source)?;
        set_path(&mut doc, &m.target, value.to_json(), p, scope);
    }
    Ok(doc)
}

/// Sets `a.b.c` in a document; the first segment starts from the variable's current value.
fn set_path(doc: &mut Map<String, Json>, target: &str, value: Json, p: P, scope: i64) {
    let mut parts = target.split('.');
    let first = parts.next().unwrap_or(target).to_string();
    let rest: Vec<&str> = parts.collect();
    if rest.is_empty() {
        doc.insert(first, value);
        return;
    }
    let mut root = doc.remove(&first).unwrap_or_else(|| {
        let lookup = ScopeLookup::new(p.view(), scope);
        lookup.stored_json(&first).unwrap_or(Json::Null)
    });
    let mut cursor = &mut root;
    for part in rest {
        if !cursor.is_object() {
            *cursor = Json::Object(Map::new());
        }
        cursor = cursor.as_object_mut().expect("object").entry(part.to_string()).or_insert(Json::Null);
    }
    *cursor = value;
    doc.insert(first, root);
}

/// Zeebe's message for an expression whose result has the wrong type.
pub(crate) fn type_error(expr: &Expression, expected: &str, got: &Value) -> String {
    format!("Expected result of the expression '{}' to be '{}', but was '{}'.", expr.source(), expected, got.type_name())
}

/// A static number, or a FEEL expression that must give a number.
pub(crate) fn eval_number(p: P, scope: i64, v: &ExprOrStatic) -> Result<i32, String> {
    match v {
        ExprOrStatic::Static(s) => {
            s.trim().parse::<i32>().map_err(|_| format!("Expected result of the expression '{s}' to be 'NUMBER', but was 'STRING'."))
        }
        ExprOrStatic::Expression(e) => match evaluate(p, scope, e)? {
            Value::Number(n) => Ok(n.to_f64() as i32),
            other => Err(type_error(e, "NUMBER", &other)),
        },
    }
}

/// A static value, or a FEEL expression that must give a string.
pub(crate) fn string_of<'v>(p: P, scope: impl Into<Vars<'v>>, value: &ExprOrStatic) -> Result<String, String> {
    match value {
        ExprOrStatic::Static(s) => Ok(s.clone()),
        ExprOrStatic::Expression(e) => match evaluate(p, scope, e)? {
            Value::String(s) => Ok(s),
            other => Err(format!("Expected result of the expression '{}' to be 'STRING', but was '{}'.", e.source(), other.type_name())),
        },
    }
}
