//! Evaluating a decision of a [`Drg`] as dmn-scala 1.9 does, with what Zeebe 8.5 reports of it
//! (its zeebe-dmn module's `DmnScalaDecisionEngine`): the output, the evaluated decisions in
//! order (required decisions first, each once per requirement, as dmn-scala does not share
//! results between them), and on failure the message and the decision that failed.

use std::collections::HashMap;
use std::fmt::Write;

use waggle_feel::{Context, EvalContext, Number, Step, Value, VariableLookup};

use crate::model::*;
use crate::MAX_EVALUATED_DECISIONS;

/// The result of evaluating one decision: what Zeebe's EvaluateDecision response and DECISION
/// EVALUATION record carry.
#[derive(Debug, Clone, PartialEq)]
pub struct DecisionEvaluation {
    /// The decision's output (`Null` on failure; JSON via [`Value::to_json`]).
    pub output: Value,
    /// Every decision evaluated, in order, the asked one last (unless evaluation stopped
    /// before it).
    pub evaluated: Vec<EvaluatedDecision>,
    /// Set when the evaluation failed.
    pub failure: Option<EvaluationFailure>,
}

/// Why an evaluation failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvaluationFailure {
    /// Zeebe's message: `Expected to evaluate decision '<id>', but <dmn-scala's reason>`.
    pub message: String,
    /// The decision that failed: the last one evaluated, else the one asked for.
    pub failed_decision_id: String,
}

/// One evaluated decision.
#[derive(Debug, Clone, PartialEq)]
pub struct EvaluatedDecision {
    pub decision_id: String,
    pub decision_name: Option<String>,
    /// `DECISION_TABLE` or `LITERAL_EXPRESSION`.
    pub decision_type: &'static str,
    /// Its output; `Null` when it failed.
    pub output: Value,
    /// A decision table's inputs (empty when an input expression failed).
    pub inputs: Vec<EvaluatedInput>,
    /// A decision table's matched rules, in table order (empty when the table failed before
    /// its hit policy was applied).
    pub matched_rules: Vec<MatchedRule>,
}

/// An input's value.
#[derive(Debug, Clone, PartialEq)]
pub struct EvaluatedInput {
    pub input_id: Option<String>,
    /// Its label, else its expression cut to 30 characters (as Zeebe).
    pub input_name: Option<String>,
    pub value: Value,
}

/// A matched rule and its outputs.
#[derive(Debug, Clone, PartialEq)]
pub struct MatchedRule {
    pub rule_id: Option<String>,
    /// Its position in the table, from 1.
    pub rule_index: usize,
    pub outputs: Vec<EvaluatedOutput>,
}

/// An output entry's value.
#[derive(Debug, Clone, PartialEq)]
pub struct EvaluatedOutput {
    pub output_id: Option<String>,
    /// Its label, else its name (as Zeebe).
    pub output_name: Option<String>,
    pub value: Value,
}

impl Drg {
    /// Evaluates the decision `decision_id` (and, first, the decisions it requires) with
    /// `vars` as its variables. Never panics; a failure is in [`DecisionEvaluation::failure`].
    pub fn evaluate(&self, decision_id: &str, vars: &dyn VariableLookup, ctx: &EvalContext) -> DecisionEvaluation {
        let mut run = Run { drg: self, ctx, evaluated: Vec::new(), count: 0 };
        let result = match self.by_id.get(decision_id) {
            Some(&i) => run.decision(i, vars),
            None => Err(format!("no decision found with id '{decision_id}'")),
        };
        match result {
            Ok(output) => DecisionEvaluation { output, evaluated: run.evaluated, failure: None },
            Err(reason) => {
                let failed_decision_id = run.evaluated.last().map(|d| d.decision_id.clone()).unwrap_or_else(|| decision_id.to_string());
                DecisionEvaluation {
                    output: Value::Null,
                    evaluated: run.evaluated,
                    failure: Some(EvaluationFailure {
                        message: format!("Expected to evaluate decision '{decision_id}', but {reason}"),
                        failed_decision_id,
                    }),
                }
            }
        }
    }
}

/// The variables a decision sees: the caller's, under its required decisions' results.
struct Scope<'a> {
    base: &'a dyn VariableLookup,
    local: &'a HashMap<String, Value>,
}

impl VariableLookup for Scope<'_> {
    fn lookup(&self, name: &str) -> Option<Value> {
        match self.local.get(name) {
            Some(v) => Some(v.clone()),
            None => self.base.lookup(name),
        }
    }
    fn lookup_steps(&self, name: &str, steps: &[Step<'_>]) -> Option<Value> {
        match self.local.get(name) {
            Some(v) => waggle_feel::select(v, steps).cloned(),
            None => self.base.lookup_steps(name, steps),
        }
    }
}

/// The variables of an input entry: the decision's, and the input's value as `cellInput` (the
/// variable dmn-scala binds it to; `?` reads it too).
struct Cell<'a> {
    scope: &'a Scope<'a>,
    input: &'a Value,
}

impl VariableLookup for Cell<'_> {
    fn lookup(&self, name: &str) -> Option<Value> {
        if name == "cellInput" {
            return Some(self.input.clone());
        }
        self.scope.lookup(name)
    }
    fn lookup_steps(&self, name: &str, steps: &[Step<'_>]) -> Option<Value> {
        if name == "cellInput" {
            return waggle_feel::select(self.input, steps).cloned();
        }
        self.scope.lookup_steps(name, steps)
    }
}

/// One output per name, in the order of the outputs (later values of a repeated name win).
type OutputValues = Vec<(Option<String>, Value)>;

struct Run<'a> {
    drg: &'a Drg,
    ctx: &'a EvalContext,
    evaluated: Vec<EvaluatedDecision>,
    count: usize,
}

impl Run<'_> {
    /// Recursion is bounded by the parse-time limit on requirement chains.
    fn decision(&mut self, index: usize, vars: &dyn VariableLookup) -> Result<Value, String> {
        self.count += 1;
        if self.count > MAX_EVALUATED_DECISIONS {
            return Err(format!("the evaluation needs more than {MAX_EVALUATED_DECISIONS} decision evaluations"));
        }
        let drg = self.drg;
        let decision = &drg.decisions[index];
        let mut results = HashMap::new();
        for &r in &decision.required {
            let value = self.decision(r, vars)?;
            results.insert(drg.decisions[r].result_name.clone(), value);
        }
        let scope = Scope { base: vars, local: &results };
        let value = match &decision.logic {
            DecisionLogic::Literal(expr) => {
                let ev = expr.evaluate_detailed(&scope, self.ctx);
                let result = match ev.failure {
                    Some(failure) => Err(feel_failure(expr.source(), &failure)),
                    None => Ok(ev.value),
                };
                self.audit(decision, result.as_ref().ok().cloned(), Vec::new(), Vec::new());
                result?
            }
            DecisionLogic::Table(table) => self.table(decision, table, &scope)?,
        };
        check_type(&value, decision.result_type.as_deref())?;
        Ok(value)
    }

    fn audit(&mut self, d: &Decision, output: Option<Value>, inputs: Vec<EvaluatedInput>, rules: Vec<MatchedRule>) {
        self.evaluated.push(EvaluatedDecision {
            decision_id: d.id.clone(),
            decision_name: d.name.clone(),
            decision_type: d.decision_type(),
            output: output.unwrap_or(Value::Null),
            inputs,
            matched_rules: rules,
        });
    }

    fn table(&mut self, d: &Decision, table: &DecisionTable, scope: &Scope) -> Result<Value, String> {
        let mut input_values = Vec::with_capacity(table.inputs.len());
        for input in &table.inputs {
            let ev = input.expression.evaluate_detailed(scope, self.ctx);
            if let Some(failure) = ev.failure {
                self.audit(d, None, Vec::new(), Vec::new());
                return Err(feel_failure(input.expression.source(), &failure));
            }
            input_values.push(ev.value);
        }
        let inputs: Vec<EvaluatedInput> = table
            .inputs
            .iter()
            .zip(&input_values)
            .map(|(input, value)| EvaluatedInput {
                input_id: input.id.clone(),
                input_name: input.label.clone().or_else(|| Some(input.expression.source().chars().take(30).collect())),
                value: value.clone(),
            })
            .collect();

        let matched = match self.matching_rules(table, &input_values, scope) {
            Ok(m) => m,
            Err(message) => {
                self.audit(d, None, inputs, Vec::new());
                return Err(message);
            }
        };
        if matched.is_empty() {
            let result = self.default_output(table, scope);
            self.audit(d, result.as_ref().ok().cloned(), inputs, Vec::new());
            return result;
        }
        let chosen = if table.hit_policy == HitPolicy::First { &matched[..1] } else { &matched[..] };
        let mut values = Vec::with_capacity(chosen.len());
        for &r in chosen {
            match self.rule_outputs(table, &table.rules[r], scope) {
                Ok(v) => values.push(v),
                Err(message) => {
                    self.audit(d, None, inputs, Vec::new());
                    return Err(message);
                }
            }
        }
        let rules = chosen
            .iter()
            .zip(&values)
            .map(|(&r, outs)| MatchedRule {
                rule_id: table.rules[r].id.clone(),
                rule_index: r + 1,
                outputs: table
                    .outputs
                    .iter()
                    .zip(outs)
                    .map(|(o, (_, v))| EvaluatedOutput {
                        output_id: o.id.clone(),
                        output_name: o.label.clone().or_else(|| o.name.clone()),
                        value: v.clone(),
                    })
                    .collect(),
            })
            .collect();
        let maps: Vec<OutputValues> = values.into_iter().map(dedup).collect();
        let result = apply_hit_policy(table, maps);
        self.audit(d, result.as_ref().ok().cloned(), inputs, rules);
        result
    }

    /// The indexes of the rules whose input entries all hold. Every rule is checked (a failing
    /// input entry fails the table even after a match), as dmn-scala does.
    fn matching_rules(&self, table: &DecisionTable, inputs: &[Value], scope: &Scope) -> Result<Vec<usize>, String> {
        let mut matched = Vec::new();
        for (r, rule) in table.rules.iter().enumerate() {
            let mut met = true;
            for (entry, input) in rule.input_entries.iter().zip(inputs) {
                let InputEntry::Tests(tests) = entry else { continue };
                let cell = Cell { scope, input };
                let ev = tests.evaluate_detailed(input, &cell, self.ctx);
                if let Some(failure) = ev.failure {
                    return Err(feel_failure(tests.source(), &failure));
                }
                match ev.value {
                    Value::Bool(true) => {}
                    Value::Bool(false) | Value::Null => {
                        met = false;
                        break;
                    }
                    other => return Err(format!("input entry must return true, false, or null, but found '{}'", scala_string(&other))),
                }
            }
            if met {
                matched.push(r);
            }
        }
        Ok(matched)
    }

    fn rule_outputs(&self, table: &DecisionTable, rule: &Rule, scope: &Scope) -> Result<OutputValues, String> {
        let mut values = Vec::with_capacity(rule.output_entries.len());
        for (output, entry) in table.outputs.iter().zip(&rule.output_entries) {
            let ev = entry.evaluate_detailed(scope, self.ctx);
            if let Some(failure) = ev.failure {
                return Err(feel_failure(entry.source(), &failure));
            }
            values.push((output.name.clone(), ev.value));
        }
        Ok(values)
    }

    /// No rule matched: the outputs' default entries, null without any.
    fn default_output(&self, table: &DecisionTable, scope: &Scope) -> Result<Value, String> {
        let mut values = Vec::new();
        for output in &table.outputs {
            if let Some(expr) = &output.default {
                let ev = expr.evaluate_detailed(scope, self.ctx);
                if let Some(failure) = ev.failure {
                    return Err(feel_failure(expr.source(), &failure));
                }
                values.push((output.name.clone(), ev.value));
            }
        }
        let values = dedup(values);
        Ok(match values.len() {
            0 => Value::Null,
            1 => values.into_iter().next().map(|(_, v)| v).unwrap_or(Value::Null),
            _ => context(values),
        })
    }
}

/// Keeps one value per output name (the last), at the name's first position (a Scala `Map`).
fn dedup(values: OutputValues) -> OutputValues {
    let mut out: OutputValues = Vec::with_capacity(values.len());
    for (name, value) in values {
        match out.iter_mut().find(|(n, _)| *n == name) {
            Some(slot) => slot.1 = value,
            None => out.push((name, value)),
        }
    }
    out
}

fn context(values: OutputValues) -> Value {
    Value::Context(values.into_iter().map(|(k, v)| (k.unwrap_or_else(|| "null".to_string()), v)).collect::<Context>())
}

/// One rule's result: its single output's value, else a context of its outputs.
fn single(values: &OutputValues) -> Value {
    if values.len() == 1 {
        values[0].1.clone()
    } else {
        context(values.clone())
    }
}

fn single_output(values: &[OutputValues]) -> Value {
    values.first().map(single).unwrap_or(Value::Null)
}

fn multiple_outputs(values: &[OutputValues]) -> Value {
    if values.is_empty() {
        return Value::Null;
    }
    if values[0].len() == 1 {
        Value::List(values.iter().map(|v| v.first().map(|(_, x)| x.clone()).unwrap_or(Value::Null)).collect())
    } else {
        Value::List(values.iter().map(|v| context(v.clone())).collect())
    }
}

fn apply_hit_policy(table: &DecisionTable, values: Vec<OutputValues>) -> Result<Value, String> {
    match table.hit_policy {
        HitPolicy::First => Ok(single_output(&values)),
        HitPolicy::Unique => {
            if values.len() <= 1 {
                Ok(single_output(&values))
            } else {
                Err(format!("multiple values aren't allowed for UNIQUE hit policy. found: '{}'", scala_list(&values)))
            }
        }
        HitPolicy::Any => {
            let mut distinct: Vec<&OutputValues> = Vec::new();
            for v in &values {
                if !distinct.iter().any(|d| same_map(d, v)) {
                    distinct.push(v);
                }
            }
            if distinct.len() <= 1 {
                Ok(single_output(&values))
            } else {
                let distinct: Vec<OutputValues> = distinct.into_iter().cloned().collect();
                Err(format!("different values aren't allowed for ANY hit policy. found: '{}'", scala_list(&distinct)))
            }
        }
        HitPolicy::Priority => Ok(single_output(&by_priority(values, &table.outputs))),
        HitPolicy::OutputOrder => Ok(multiple_outputs(&by_priority(values, &table.outputs))),
        HitPolicy::RuleOrder => Ok(multiple_outputs(&values)),
        HitPolicy::Collect => match table.aggregation {
            None => Ok(multiple_outputs(&values)),
            Some(Aggregation::Count) => Ok(Value::Number(Number::from(values.len()))),
            Some(agg) => {
                let numbers = single_numbers(&values)?;
                let mut acc: Option<Number> = None;
                for n in numbers {
                    acc = Some(match acc {
                        None => n.clone(),
                        Some(a) => match agg {
                            Aggregation::Sum => a.add(n).unwrap_or(a),
                            Aggregation::Min if n.compare(&a).is_lt() => n.clone(),
                            Aggregation::Max if n.compare(&a).is_gt() => n.clone(),
                            _ => a,
                        },
                    });
                }
                Ok(acc.map(Value::Number).unwrap_or(Value::Null))
            }
        },
    }
}

/// Two rules' outputs are the same map (same names, equal values; order aside).
fn same_map(a: &OutputValues, b: &OutputValues) -> bool {
    a.len() == b.len() && a.iter().all(|(k, v)| b.iter().any(|(k2, v2)| k == k2 && v == v2))
}

fn single_numbers(values: &[OutputValues]) -> Result<Vec<&Number>, String> {
    if values.first().is_some_and(|v| v.len() != 1) {
        return Err(format!("multiple values aren't allowed. found: {}", scala_list(values)));
    }
    values
        .iter()
        .map(|v| match v.first().map(|(_, x)| x) {
            Some(Value::Number(n)) => Ok(n),
            Some(other) => Err(format!("expected number but found '{}'", scala_string(other))),
            None => Err("expected number but found 'null'".to_string()),
        })
        .collect()
}

/// Orders matched rules as dmn-scala 1.9 does for PRIORITY and OUTPUT ORDER: each rule gets a
/// key, the concatenation over the outputs of its value's position in the output's
/// `outputValues` (a string, or a number as Java prints it, so `1.0` is not `1`, found there;
/// `_` otherwise), and the rules are sorted by
/// that key as text, stably (so positions from 10 on sort as text, and a table without output
/// values keeps rule order).
fn by_priority(mut values: Vec<OutputValues>, outputs: &[Output]) -> Vec<OutputValues> {
    let priorities: Vec<(Option<String>, HashMap<String, usize>)> = outputs
        .iter()
        .map(|o| {
            let mut map = HashMap::new();
            if let Some(text) = &o.output_values {
                for (i, v) in text.split(',').enumerate() {
                    map.insert(v.trim().replace(['"', '\''], ""), i);
                }
            }
            (o.name.clone(), map)
        })
        .collect();
    let key = |v: &OutputValues| -> String {
        let mut k = String::new();
        for (name, priority) in &priorities {
            let value = v.iter().find(|(n, _)| n == name).map(|(_, x)| x);
            let found = match value {
                Some(Value::String(s)) => priority.get(s.as_str()),
                Some(Value::Number(n)) => priority.get(n.to_java_string().as_str()),
                _ => None,
            };
            match found {
                Some(i) => {
                    let _ = write!(k, "{i}");
                }
                None => k.push('_'),
            }
        }
        k
    };
    let mut keyed: Vec<(String, OutputValues)> = values.drain(..).map(|v| (key(&v), v)).collect();
    keyed.sort_by(|a, b| a.0.cmp(&b.0));
    keyed.into_iter().map(|(_, v)| v).collect()
}

/// feel-scala's message for a failed evaluation of `source` (its `FeelEngine.eval`): a failed
/// `assert` reads `Assertion failure on evaluate the expression '<source>': <cause>` (the cause
/// `The condition is not fulfilled` without one), anything else `failed to evaluate expression
/// '<source>': <failure>`. waggle-feel words a failed `assert` itself; its two forms are mapped
/// here.
fn feel_failure(source: &str, failure: &str) -> String {
    const ASSERTION: &str = "Assertion failure on evaluate the expression";
    if let Some(cause) = failure.strip_prefix(ASSERTION).and_then(|rest| rest.strip_prefix(": ")) {
        format!("{ASSERTION} '{source}': {cause}")
    } else if failure.starts_with(ASSERTION) || failure == "Expected the condition of assert() to be a boolean" {
        format!("{ASSERTION} '{source}': The condition is not fulfilled")
    } else {
        format!("failed to evaluate expression '{source}': {failure}")
    }
}

/// dmn-scala's check of a decision's result against its variable's typeRef.
fn check_type(value: &Value, type_ref: Option<&str>) -> Result<(), String> {
    let Some(type_ref) = type_ref.filter(|t| !t.is_empty()) else { return Ok(()) };
    if value.is_null() {
        return Ok(());
    }
    let ty = type_ref.replace("feel:", "");
    let ok = match ty.as_str() {
        "string" => matches!(value, Value::String(_)),
        "number" => matches!(value, Value::Number(_)),
        "boolean" => matches!(value, Value::Bool(_)),
        "time" => matches!(value, Value::Time(_)),
        "date" => matches!(value, Value::Date(_)),
        "dateTime" => matches!(value, Value::DateTime(_)),
        "dayTimeDuration" => matches!(value, Value::DayTimeDuration(_)),
        "yearMonthDuration" => matches!(value, Value::YearMonthDuration(_)),
        _ => true,
    };
    if ok {
        Ok(())
    } else {
        Err(format!("expected '{ty}' but found '{}'", scala_string(value)))
    }
}

/// A FEEL value as feel-scala's `Val.toString` prints it in dmn-scala's messages: strings
/// quoted, numbers as Java's `BigDecimal` (`4.90`), lists `[1, "a"]`, contexts `{a:1}`.
pub(crate) fn scala_string(value: &Value) -> String {
    match value {
        Value::String(s) => format!("\"{s}\""),
        Value::Number(n) => n.to_java_string(),
        Value::List(items) => format!("[{}]", items.iter().map(scala_string).collect::<Vec<_>>().join(", ")),
        Value::Context(c) => {
            format!("{{{}}}", c.iter().map(|(k, v)| format!("{k}:{}", scala_string(v))).collect::<Vec<_>>().join(", "))
        }
        other => other.to_string(),
    }
}

/// A list of rule outputs as Scala prints a `List[Map[String, Val]]`.
fn scala_list(values: &[OutputValues]) -> String {
    let maps: Vec<String> = values
        .iter()
        .map(|m| {
            let entries: Vec<String> =
                m.iter().map(|(k, v)| format!("{} -> {}", k.as_deref().unwrap_or("null"), scala_string(v))).collect();
            format!("Map({})", entries.join(", "))
        })
        .collect();
    format!("List({})", maps.join(", "))
}
