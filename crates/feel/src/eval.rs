//! The evaluator: walks the syntax tree with an environment of variables.

use std::cmp::Ordering;
use std::sync::Arc;

use crate::ast::{Args, ArithOp, CmpOp, Expr, Iteration, UnaryTest};
use crate::builtins;
use crate::number::Number;
use crate::value::{Context, FunctionKind, FunctionValue, Range, Value};
use crate::{EvalContext, VariableLookup};

/// Limit of nested evaluations (user-defined recursion), to never overflow the stack.
const MAX_DEPTH: usize = 400;
/// Upper bound for lists produced by iterations, to keep memory bounded.
const MAX_ITERATIONS: usize = 1_000_000;
/// Whether lists and contexts nest more than `limit` levels in `value` (walked without
/// recursion; stops as soon as it knows).
fn nested_deeper_than(value: &Value, limit: usize) -> bool {
    let mut stack = vec![(value, 0usize)];
    while let Some((v, depth)) = stack.pop() {
        match v {
            Value::List(items) if depth >= limit => return !items.is_empty() || depth > limit,
            Value::Context(c) if depth >= limit => return c.iter().next().is_some() || depth > limit,
            Value::List(items) => stack.extend(items.iter().map(|i| (i, depth + 1))),
            Value::Context(c) => stack.extend(c.iter().map(|(_, i)| (i, depth + 1))),
            _ => {}
        }
    }
    false
}

/// Upper bound for `for` loops whose body uses `partial` (quadratic in the length).
const MAX_PARTIAL_ITERATIONS: usize = 20_000;

/// The work one evaluation may do, in units of [`cost`]: every value an expression produces
/// or copies is charged (and a built-in call a few units more), so nested loops, quadratic
/// built-ins and doubling strings or lists stop here, after well under a second of work on an
/// optimised build, instead of stalling the partition or exhausting memory. An iteration over
/// a million elements with a simple body fits.
pub const MAX_EVALUATION_WORK: u64 = 10_000_000;

/// What calling a built-in function costs beyond its arguments and result (finding it, checking
/// its parameters).
const BUILTIN_CALL_WORK: u64 = 2;

/// What producing or copying `v` costs: one unit per value it holds, and one per 16 bytes of
/// text (walked without recursion, so deep values cannot overflow the stack).
pub(crate) fn cost(v: &Value) -> u64 {
    fn own(v: &Value) -> u64 {
        match v {
            Value::String(s) => 1 + s.len() as u64 / 16,
            _ => 1,
        }
    }
    match v {
        Value::List(_) | Value::Context(_) => {}
        other => return own(other),
    }
    let mut total = 0u64;
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        total += own(v);
        match v {
            Value::List(items) => stack.extend(items.iter()),
            Value::Context(c) => stack.extend(c.iter().map(|(k, i)| {
                total += k.len() as u64 / 16;
                i
            })),
            _ => {}
        }
    }
    total
}

#[derive(Debug, Clone)]
pub(crate) enum Frame {
    Var(String, Value),
    /// A filter's current item: `item`, and its entries when it is a context.
    Item(Value),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Loop {
    For,
    Some,
    Every,
}

pub(crate) struct Env<'a> {
    pub vars: &'a dyn VariableLookup,
    pub frames: Vec<Frame>,
    pub ctx: &'a EvalContext,
    pub depth: usize,
    pub warnings: Vec<String>,
    /// The first failure that fails the whole evaluation (feel-scala's `Failure`).
    pub failure: Option<String>,
    rng: u64,
    /// Work done so far, in units of [`cost`] (see [`MAX_EVALUATION_WORK`]).
    work: u64,
}

impl<'a> Env<'a> {
    pub(crate) fn new(vars: &'a dyn VariableLookup, ctx: &'a EvalContext) -> Env<'a> {
        let rng = ctx.seed.unwrap_or(0) ^ (ctx.now_millis.unwrap_or(0) as u64).rotate_left(32);
        Env { vars, frames: Vec::new(), ctx, depth: 0, warnings: Vec::new(), failure: None, rng, work: 0 }
    }

    /// Fails the whole evaluation (the first failure wins); returns `Null` for convenience.
    pub(crate) fn fail(&mut self, msg: String) -> Value {
        if self.failure.is_none() {
            self.failure = Some(msg);
        }
        Value::Null
    }

    /// Charges `units` of work; once the budget is spent the evaluation fails (once) and
    /// every further step returns `Null` at once. Returns whether work may go on.
    pub(crate) fn charge(&mut self, units: u64) -> bool {
        self.work = self.work.saturating_add(units);
        if self.work <= MAX_EVALUATION_WORK {
            return true;
        }
        if self.failure.is_none() {
            self.failure = Some(format!(
                "the evaluation was stopped: it exceeded the work limit of {MAX_EVALUATION_WORK} values produced or copied \
                 (nested iterations, recursion or growing values)"
            ));
        }
        false
    }

    /// Whether the work budget is spent (see [`Env::charge`]).
    pub(crate) fn exhausted(&self) -> bool {
        self.work > MAX_EVALUATION_WORK
    }

    pub(crate) fn warn(&mut self, msg: String) {
        if self.warnings.len() < 100 {
            self.warnings.push(msg);
        }
    }

    /// The next pseudo-random number (splitmix64), deterministic for a seed and clock.
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.rng = self.rng.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A random number in [0, 1).
    pub(crate) fn random(&mut self) -> Number {
        let bits = self.next_u64() >> 11; // 53 bits
        Number::from_f64(bits as f64 / (1u64 << 53) as f64).unwrap_or_else(Number::zero)
    }

    fn push(&mut self, name: &str, v: Value) {
        self.frames.push(Frame::Var(name.to_string(), v));
    }

    /// Looks a name up: local bindings first (innermost first), then the variables.
    pub(crate) fn lookup(&self, name: &str) -> Option<Value> {
        if self.frames.is_empty() {
            return self.vars.lookup(name);
        }
        for f in self.frames.iter().rev() {
            match f {
                Frame::Var(n, v) if n == name => return Some(v.clone()),
                Frame::Item(v) => {
                    if let Value::Context(c) = v {
                        if let Some(x) = c.get(name) {
                            return Some(x.clone());
                        }
                    }
                    if name == "item" {
                        return Some(v.clone());
                    }
                }
                _ => {}
            }
        }
        self.vars.lookup(name)
    }

    pub(crate) fn eval(&mut self, e: &Expr) -> Value {
        if self.exhausted() {
            return Value::Null;
        }
        self.depth += 1;
        let v = if self.depth > MAX_DEPTH {
            self.warn("evaluation is nested too deeply".into());
            Value::Null
        } else {
            self.eval_inner(e)
        };
        self.depth -= 1;
        if self.charge(cost(&v)) {
            v
        } else {
            Value::Null
        }
    }

    /// The frequent cases inline, the rest in [`Env::eval_other`] (keeps this frame small).
    #[inline]
    fn eval_inner(&mut self, e: &Expr) -> Value {
        match e {
            Expr::Bool(b) => Value::Bool(*b),
            Expr::Name(n) => self.eval_name(n),
            Expr::Cmp(op, a, b) => self.eval_cmp(*op, a, b),
            Expr::And(a, b) => self.eval_and(a, b),
            Expr::Or(a, b) => self.eval_or(a, b),
            _ => self.eval_other(e),
        }
    }

    /// `name.key[3].key…` read straight from the variable when every step lands (see
    /// [`VariableLookup::lookup_steps`]); `None` leaves it to the general rules. Only outside
    /// iterations and filters, where no frame can shadow the name.
    fn select_in_variable(&mut self, e: &Expr) -> Option<Value> {
        fn steps_of<'e>(e: &'e Expr, out: &mut Vec<crate::Step<'e>>) -> Option<&'e str> {
            match e {
                Expr::Name(n) => Some(n),
                Expr::Path(base, key) => {
                    let root = steps_of(base, out)?;
                    out.push(crate::Step::Key(key));
                    Some(root)
                }
                Expr::Filter(base, index) => match &**index {
                    Expr::Number(n) => {
                        let root = steps_of(base, out)?;
                        out.push(crate::Step::Index(n.trunc_i64()));
                        Some(root)
                    }
                    _ => None,
                },
                _ => None,
            }
        }
        if !self.frames.is_empty() {
            return None;
        }
        let mut steps = Vec::new();
        let root = steps_of(e, &mut steps)?;
        self.vars.lookup_steps(root, &steps)
    }

    fn eval_name(&mut self, n: &str) -> Value {
        match self.lookup(n) {
            Some(v) => v,
            None => {
                self.warn(format!("No variable found with name '{n}'"));
                Value::Null
            }
        }
    }

    fn eval_cmp(&mut self, op: CmpOp, a: &Expr, b: &Expr) -> Value {
        let x = self.eval(a);
        // against a literal: compare without materialising the literal
        match (b, &x) {
            (Expr::Number(m), Value::Number(n)) => return ordering_result(op, n.compare(m)),
            (Expr::String(t), Value::String(s)) => return ordering_result(op, s.as_str().cmp(t.as_str())),
            _ => {}
        }
        let y = self.eval(b);
        if !matches!(op, CmpOp::Eq | CmpOp::Ne) && matches!((&x, &y), (Value::List(_), Value::List(_))) {
            return self.fail(format!("{x} can not be compared to {y}"));
        }
        compare_op(op, &x, &y)
    }

    fn eval_and(&mut self, a: &Expr, b: &Expr) -> Value {
        let x = self.eval(a);
        if matches!(x, Value::Bool(false)) {
            return Value::Bool(false);
        }
        let y = self.eval(b);
        match (x, y) {
            (_, Value::Bool(false)) => Value::Bool(false),
            (Value::Bool(true), Value::Bool(true)) => Value::Bool(true),
            _ => Value::Null,
        }
    }

    fn eval_or(&mut self, a: &Expr, b: &Expr) -> Value {
        let x = self.eval(a);
        if matches!(x, Value::Bool(true)) {
            return Value::Bool(true);
        }
        let y = self.eval(b);
        match (x, y) {
            (_, Value::Bool(true)) => Value::Bool(true),
            (Value::Bool(false), Value::Bool(false)) => Value::Bool(false),
            _ => Value::Null,
        }
    }

    #[inline(never)]
    fn eval_other(&mut self, e: &Expr) -> Value {
        match e {
            Expr::Null => Value::Null,
            Expr::Bool(b) => Value::Bool(*b),
            Expr::Number(n) => Value::Number(n.clone()),
            Expr::String(s) => Value::String(s.clone()),
            Expr::Temporal(s) => builtins::temporal_literal(self, s),
            Expr::Input => match self.lookup("?") {
                Some(v) => v,
                None => {
                    self.warn("No input value available. '?' can only be used inside a unary-test expression.".into());
                    Value::Null
                }
            },
            Expr::Name(n) => self.eval_name(n),
            Expr::Path(base, key) => {
                if let Some(v) = self.select_in_variable(e) {
                    return v;
                }
                let v = self.eval(base);
                self.path(v, key)
            }
            Expr::Filter(list, filter) => {
                if let Some(v) = self.select_in_variable(e) {
                    return v;
                }
                let l = self.eval(list);
                self.filter(l, filter)
            }
            Expr::Call(callee, args) => self.call(callee, args),
            Expr::Neg(x) => match self.eval(x) {
                Value::Number(n) => Value::Number(n.neg()),
                _ => Value::Null,
            },
            Expr::Arith(op, a, b) => {
                let x = self.eval(a);
                let y = self.eval(b);
                arith(*op, x, y)
            }
            Expr::Cmp(op, a, b) => self.eval_cmp(*op, a, b),
            Expr::And(a, b) => self.eval_and(a, b),
            Expr::Or(a, b) => self.eval_or(a, b),
            Expr::Between(x, low, high) => {
                let v = self.eval(x);
                let l = self.eval(low);
                let h = self.eval(high);
                let a = compare_op(CmpOp::Ge, &v, &l);
                let b = compare_op(CmpOp::Le, &v, &h);
                match (a, b) {
                    (Value::Bool(false), _) | (_, Value::Bool(false)) => Value::Bool(false),
                    (Value::Bool(true), Value::Bool(true)) => Value::Bool(true),
                    _ => Value::Null,
                }
            }
            Expr::In(x, tests) => {
                let v = self.eval(x);
                self.unary_tests(&v, tests)
            }
            Expr::InstanceOf(x, ty) => {
                let v = self.eval(x);
                Value::Bool(instance_of(&v, ty))
            }
            Expr::If(c, t, f) => {
                if self.eval(c) == Value::Bool(true) {
                    self.eval(t)
                } else {
                    self.eval(f)
                }
            }
            Expr::List(items) => Value::List(items.iter().map(|i| self.eval(i)).collect()),
            Expr::Context(entries) => {
                let base = self.frames.len();
                let mut ctx = Context::new();
                for (k, e) in entries {
                    let v = self.eval(e);
                    // as in feel-scala, a function defined in a context literal can be called
                    // by the entries after it but is no variable of the context (`{f:
                    // function(x) x}` is `{}`; Zeebe writes it so)
                    if !matches!(v, Value::Function(_)) {
                        ctx.insert(k.clone(), v.clone());
                    }
                    self.push(k, v);
                }
                self.frames.truncate(base);
                Value::Context(ctx)
            }
            Expr::Range(start_closed, s, e, end_closed) => {
                let start = self.eval(s);
                let end = self.eval(e);
                make_range(start, *start_closed, end, *end_closed)
            }
            Expr::InputCmp(op, operand) => {
                let Some(input) = self.implicit_input() else {
                    return Value::Null;
                };
                let v = self.eval(operand);
                compare_op(*op, &input, &v)
            }
            Expr::InputInRange(range) => {
                let Some(input) = self.implicit_input() else {
                    return Value::Null;
                };
                match self.eval(range) {
                    Value::Range(r) => range_contains(&r, &input),
                    _ => Value::Null,
                }
            }
            Expr::For(its, body) => self.iterate(its, body, Loop::For),
            Expr::Some(its, body) => self.iterate(its, body, Loop::Some),
            Expr::Every(its, body) => self.iterate(its, body, Loop::Every),
            Expr::Function(def) => {
                // the function captures a copy of the scope
                if !self.charge(self.frames.iter().map(|f| 1 + frame_cost(f)).sum()) {
                    return Value::Null;
                }
                Value::Function(FunctionValue::user(Arc::clone(def), self.frames.clone()))
            }
        }
    }

    /// Evaluates the iteration contexts (in the outer scope, as feel-scala does: a later one can
    /// not refer to an earlier variable); `None` when one is not a list or they are too large.
    fn iteration_lists(&mut self, its: &[(String, Iteration)]) -> Option<Vec<Vec<Value>>> {
        let mut lists = Vec::with_capacity(its.len());
        let mut total = 1usize;
        for (_, it) in its {
            let items = match it {
                Iteration::List(e) => match self.eval(e) {
                    Value::List(l) => Some(l),
                    Value::Range(r) => range_items(&r),
                    other => {
                        self.warn(format!("Expected list but found '{other}'"));
                        None
                    }
                },
                Iteration::Range(a, b) => {
                    let a = self.eval(a);
                    let b = self.eval(b);
                    match (a, b) {
                        (Value::Number(a), Value::Number(b)) => number_range(&a, &b),
                        _ => None,
                    }
                }
            }?;
            total = total.saturating_mul(items.len());
            lists.push(items);
        }
        if total > MAX_ITERATIONS {
            self.warn(format!("iteration of more than {MAX_ITERATIONS} elements"));
            return None;
        }
        Some(lists)
    }

    /// `for`, `some` and `every`: evaluates the body for every combination of the iteration
    /// contexts (the last one varying fastest), binding the variables in place.
    fn iterate(&mut self, its: &[(String, Iteration)], body: &Expr, kind: Loop) -> Value {
        let Some(lists) = self.iteration_lists(its) else {
            return Value::Null;
        };
        let total: usize = lists.iter().map(Vec::len).product();
        // `partial` (the results so far) is bound only when the body uses it; copying it for
        // every element is quadratic, so such loops are limited in length
        let partial = kind == Loop::For && body.mentions("partial");
        if partial && total > MAX_PARTIAL_ITERATIONS {
            self.warn(format!("a 'for' using 'partial' may iterate over at most {MAX_PARTIAL_ITERATIONS} elements"));
            return Value::Null;
        }
        let mut results: Vec<Value> = Vec::with_capacity(if kind == Loop::For { total } else { 0 });
        // what copying `results` into `partial` costs
        let mut results_cost = 0u64;
        let mut saw_null = false;
        if total > 0 {
            let base = self.frames.len();
            for ((name, _), list) in its.iter().zip(&lists) {
                self.frames.push(Frame::Var(name.clone(), list[0].clone()));
            }
            if partial {
                self.frames.push(Frame::Var("partial".into(), Value::List(Vec::new())));
            }
            let mut idx = vec![0usize; lists.len()];
            'combos: loop {
                if partial {
                    if !self.charge(results_cost) {
                        break 'combos;
                    }
                    if let Some(Frame::Var(_, v)) = self.frames.last_mut() {
                        *v = Value::List(results.clone());
                    }
                }
                let v = self.eval(body);
                if self.exhausted() {
                    break 'combos;
                }
                // each element may hold the ones before it (`[partial[i - 1]]`): nesting that
                // grows with the loop would overflow the stack when the value is dropped
                if partial && nested_deeper_than(&v, crate::MAX_NESTING_DEPTH) {
                    self.frames.truncate(base);
                    self.warn(format!("a 'for' using 'partial' built a value nested more than {} levels deep", crate::MAX_NESTING_DEPTH));
                    return Value::Null;
                }
                match kind {
                    Loop::For => {
                        if partial {
                            results_cost += cost(&v);
                        }
                        results.push(v)
                    }
                    Loop::Some | Loop::Every => match v {
                        Value::Bool(b) if b == (kind == Loop::Some) => {
                            self.frames.truncate(base);
                            return Value::Bool(b);
                        }
                        Value::Bool(_) => {}
                        _ => saw_null = true,
                    },
                }
                // next combination
                let mut d = lists.len();
                loop {
                    if d == 0 {
                        break 'combos;
                    }
                    d -= 1;
                    idx[d] += 1;
                    let wrapped = idx[d] == lists[d].len();
                    if wrapped {
                        idx[d] = 0;
                    }
                    let next = &lists[d][idx[d]];
                    if !self.charge(cost(next)) {
                        break 'combos;
                    }
                    if let Frame::Var(_, v) = &mut self.frames[base + d] {
                        *v = next.clone();
                    }
                    if !wrapped {
                        break;
                    }
                }
            }
            self.frames.truncate(base);
        }
        match kind {
            Loop::For => Value::List(results),
            _ if saw_null => Value::Null,
            Loop::Some => Value::Bool(false),
            Loop::Every => Value::Bool(true),
        }
    }

    pub(crate) fn path(&mut self, v: Value, key: &str) -> Value {
        match v {
            // the context is owned here: move the entry out instead of copying it
            Value::Context(mut c) => match c.take(key) {
                Some(Value::Function(_)) => Value::Null,
                Some(x) => x,
                None => {
                    self.warn(format!("No context entry found with key '{key}'"));
                    Value::Null
                }
            },
            Value::List(items) => Value::List(items.into_iter().map(|i| self.path(i, key)).collect()),
            Value::Null => Value::Null,
            Value::Range(_) => self.fail(format!("No property found with name '{key}' of a range")),
            other => match builtins::property(&other, key) {
                Some(v) => v,
                None => {
                    self.warn(format!("No property found with name '{key}' of value '{other}'"));
                    Value::Null
                }
            },
        }
    }

    fn filter(&mut self, list: Value, filter: &Expr) -> Value {
        let items = match list {
            Value::List(items) => items,
            _ => return Value::Null,
        };
        // items are moved, never copied: the list is owned here
        fn take_index(mut items: Vec<Value>, n: &Number) -> Value {
            let i = n.trunc_i64();
            let len = items.len() as i64;
            let idx = if i > 0 { i - 1 } else { len + i };
            if i == 0 || idx < 0 || idx >= len {
                Value::Null
            } else {
                items.swap_remove(idx as usize)
            }
        }
        match filter {
            Expr::Number(n) => return take_index(items, n),
            Expr::Cmp(..) | Expr::Call(..) | Expr::And(..) | Expr::Or(..) | Expr::Between(..) | Expr::In(..) => {}
            _ => {
                if let Value::Number(n) = self.eval(filter) {
                    return take_index(items, &n);
                }
            }
        }
        let mut out = Vec::new();
        let mut rest = items.into_iter();
        let mut k = 0;
        while let Some(item) = rest.next() {
            self.frames.push(Frame::Item(item));
            let r = self.eval(filter);
            let Some(Frame::Item(item)) = self.frames.pop() else {
                return Value::Null;
            };
            match r {
                Value::Bool(true) => out.push(item),
                Value::Number(n) if k == 0 => {
                    let all: Vec<Value> = std::iter::once(item).chain(rest).collect();
                    return take_index(all, &n);
                }
                _ => {}
            }
            k += 1;
        }
        Value::List(out)
    }

    fn call(&mut self, callee: &Expr, args: &Args) -> Value {
        let f = match callee {
            Expr::Name(name) => match self.lookup(name) {
                Some(Value::Function(f)) => f,
                Some(_) | None => {
                    if builtins::exists(name) {
                        FunctionValue::builtin(name)
                    } else {
                        self.warn(format!("No function found with name '{name}'"));
                        return Value::Null;
                    }
                }
            },
            other => match self.eval(other) {
                Value::Function(f) => f,
                v => {
                    self.warn(format!("Expected function but found '{v}'"));
                    return Value::Null;
                }
            },
        };
        match args {
            Args::Positional(xs) => {
                let vals: Vec<Value> = xs.iter().map(|x| self.eval(x)).collect();
                self.invoke(&f, vals)
            }
            Args::Named(xs) => {
                let vals: Vec<(String, Value)> = xs.iter().map(|(n, x)| (n.clone(), self.eval(x))).collect();
                self.invoke_named(&f, vals)
            }
        }
    }

    pub(crate) fn invoke(&mut self, f: &FunctionValue, args: Vec<Value>) -> Value {
        match &f.0 {
            FunctionKind::Builtin(name) => {
                if !self.charge(BUILTIN_CALL_WORK) {
                    return Value::Null;
                }
                builtins::call(self, name, args)
            }
            FunctionKind::User { def, captured } => {
                if args.len() != def.params.len() {
                    self.warn(format!("expected {} parameters but found {}", def.params.len(), args.len()));
                    return Value::Null;
                }
                // the captured scope is copied for every call
                if !self.charge(captured.iter().map(|f| 1 + frame_cost(f)).sum()) {
                    return Value::Null;
                }
                let saved = std::mem::replace(&mut self.frames, captured.as_ref().clone());
                for (p, a) in def.params.iter().zip(args) {
                    self.push(p, a);
                }
                let v = self.eval(&def.body);
                self.frames = saved;
                v
            }
        }
    }

    fn invoke_named(&mut self, f: &FunctionValue, args: Vec<(String, Value)>) -> Value {
        match &f.0 {
            FunctionKind::Builtin(name) => {
                if !self.charge(BUILTIN_CALL_WORK) {
                    return Value::Null;
                }
                builtins::call_named(self, name, args)
            }
            FunctionKind::User { def, .. } => {
                if args.iter().any(|(n, _)| !def.params.contains(n)) {
                    self.warn("unknown parameter name".into());
                    return Value::Null;
                }
                let vals =
                    def.params.iter().map(|p| args.iter().find(|(n, _)| n == p).map(|(_, v)| v.clone()).unwrap_or(Value::Null)).collect();
                self.invoke(f, vals)
            }
        }
    }

    /// The input that unary comparisons and intervals used as values test: the value left of
    /// `in` or the input of unary tests, else feel-scala's input variable (`cellInput`, or the
    /// one the string variable `inputVariableName` names).
    fn implicit_input(&mut self) -> Option<Value> {
        if let Some(v) = self.frames.iter().rev().find_map(|f| match f {
            Frame::Var(n, v) if n == "?" => Some(v.clone()),
            _ => None,
        }) {
            return Some(v);
        }
        let name = match self.lookup("inputVariableName") {
            Some(Value::String(s)) => s,
            _ => "cellInput".to_string(),
        };
        self.lookup(&name)
    }

    /// Applies unary tests to an input: true when one test matches.
    pub(crate) fn unary_tests(&mut self, input: &Value, tests: &[UnaryTest]) -> Value {
        let mut saw_null = false;
        for t in tests {
            match self.unary_test(input, t) {
                Value::Bool(true) => return Value::Bool(true),
                Value::Bool(false) => {}
                _ => saw_null = true,
            }
        }
        if saw_null {
            Value::Null
        } else {
            Value::Bool(false)
        }
    }

    fn unary_test(&mut self, input: &Value, t: &UnaryTest) -> Value {
        match t {
            UnaryTest::Any => Value::Bool(true),
            UnaryTest::Not(tests) => match self.unary_tests(input, tests) {
                Value::Bool(b) => Value::Bool(!b),
                _ => Value::Null,
            },
            UnaryTest::Cmp(op, e) => {
                self.push("?", input.clone());
                let v = self.eval(e);
                self.frames.pop();
                compare_op(*op, input, &v)
            }
            UnaryTest::Expr(e, uses_input) => {
                self.push("?", input.clone());
                let v = self.eval(e);
                self.frames.pop();
                if *uses_input {
                    return match v {
                        Value::Bool(b) => Value::Bool(b),
                        _ => Value::Null,
                    };
                }
                // as feel-scala's UnaryTestExpression: `true` passes, a list passes when it
                // contains the input, anything else (`false` too) is compared with the input
                match &v {
                    Value::Bool(true) => return Value::Bool(true),
                    Value::List(items) if items.iter().any(|i| equals(i, input) == Some(true)) => return Value::Bool(true),
                    Value::Range(r) => return range_contains(r, input),
                    _ => {}
                }
                match equals(input, &v) {
                    Some(true) => Value::Bool(true),
                    _ if matches!(v, Value::List(_)) => Value::Bool(false),
                    None => Value::Null,
                    Some(false) => Value::Bool(false),
                }
            }
        }
    }
}

/// What copying a frame's value costs.
fn frame_cost(f: &Frame) -> u64 {
    match f {
        Frame::Var(_, v) | Frame::Item(v) => cost(v),
    }
}

/// `a..b`: from `a` in steps of one towards `b` (decimals too: `1.5..3` is `1.5, 2.5`).
fn number_range(a: &Number, b: &Number) -> Option<Vec<Value>> {
    let span = b.sub(a)?;
    if span.abs().compare(&Number::from(MAX_ITERATIONS as i64)) == Ordering::Greater {
        return None;
    }
    let count = span.abs().trunc_i64() + 1;
    let step = Number::from(if span.is_negative() { -1i64 } else { 1 });
    let mut out = Vec::with_capacity(count as usize);
    let mut cur = a.clone();
    for _ in 0..count {
        let next = cur.add(&step)?;
        out.push(Value::Number(cur));
        cur = next;
    }
    Some(out)
}

fn range_items(r: &Range) -> Option<Vec<Value>> {
    match (&r.start, &r.end) {
        (Value::Number(a), Value::Number(b)) => {
            let a = a.to_i64()? + if r.start_closed { 0 } else { 1 };
            let b = b.to_i64()? - if r.end_closed { 0 } else { 1 };
            if a > b {
                return Some(Vec::new());
            }
            number_range(&a.into(), &b.into())
        }
        _ => None,
    }
}

pub(crate) fn make_range(start: Value, start_closed: bool, end: Value, end_closed: bool) -> Value {
    let valid = match (&start, &end) {
        (Value::Null, Value::Null) => false,
        (Value::Null, e) | (e, Value::Null) => is_comparable(e),
        (a, b) => is_comparable(a) && std::mem::discriminant(a) == std::mem::discriminant(b),
    };
    if !valid {
        return Value::Null;
    }
    Value::Range(Box::new(Range { start, start_closed, end, end_closed }))
}

/// Whether a value lies in a range; null when incomparable.
pub(crate) fn range_contains(r: &Range, v: &Value) -> Value {
    if r.start.is_null() || r.end.is_null() {
        return Value::Null;
    }
    let lower = if r.start.is_null() {
        Some(true)
    } else {
        compare(&r.start, v).map(|o| if r.start_closed { o != Ordering::Greater } else { o == Ordering::Less })
    };
    let upper = if r.end.is_null() {
        Some(true)
    } else {
        compare(v, &r.end).map(|o| if r.end_closed { o != Ordering::Greater } else { o == Ordering::Less })
    };
    match (lower, upper) {
        (Some(a), Some(b)) => Value::Bool(a && b),
        _ => Value::Null,
    }
}

pub(crate) fn is_comparable(v: &Value) -> bool {
    matches!(v, Value::Number(_) | Value::String(_)) || builtins::is_temporal(v)
}

/// Orders two values of the same comparable type; `None` otherwise.
pub(crate) fn compare(a: &Value, b: &Value) -> Option<Ordering> {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => Some(x.compare(y)),
        (Value::String(x), Value::String(y)) => Some(x.cmp(y)),
        _ => builtins::compare_temporal(a, b),
    }
}

/// FEEL equality: `Some(bool)`, or `None` when the types can not be compared.
pub(crate) fn equals(a: &Value, b: &Value) -> Option<bool> {
    match (a, b) {
        (Value::Null, Value::Null) => Some(true),
        (Value::Null, _) | (_, Value::Null) => Some(false),
        (Value::Bool(x), Value::Bool(y)) => Some(x == y),
        (Value::Number(x), Value::Number(y)) => Some(x.compare(y) == Ordering::Equal),
        (Value::String(x), Value::String(y)) => Some(x == y),
        (Value::List(x), Value::List(y)) => Some(x.len() == y.len() && x.iter().zip(y).all(|(a, b)| equals(a, b) == Some(true))),
        (Value::Context(x), Value::Context(y)) => {
            Some(x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| equals(v, w) == Some(true))))
        }
        (Value::Range(x), Value::Range(y)) => Some(
            x.start_closed == y.start_closed
                && x.end_closed == y.end_closed
                && equals(&x.start, &y.start) == Some(true)
                && equals(&x.end, &y.end) == Some(true),
        ),
        (Value::Function(x), Value::Function(y)) => Some(x == y),
        (Value::Date(_), Value::Date(_))
        | (Value::YearMonthDuration(_), Value::YearMonthDuration(_))
        | (Value::DayTimeDuration(_), Value::DayTimeDuration(_)) => builtins::equals_temporal(a, b).or(Some(false)),
        _ => builtins::equals_temporal(a, b),
    }
}

/// The result of a comparison whose operands are ordered as `o`.
fn ordering_result(op: CmpOp, o: Ordering) -> Value {
    Value::Bool(match op {
        CmpOp::Eq => o == Ordering::Equal,
        CmpOp::Ne => o != Ordering::Equal,
        CmpOp::Lt => o == Ordering::Less,
        CmpOp::Le => o != Ordering::Greater,
        CmpOp::Gt => o == Ordering::Greater,
        CmpOp::Ge => o != Ordering::Less,
    })
}

pub(crate) fn compare_op(op: CmpOp, a: &Value, b: &Value) -> Value {
    match op {
        CmpOp::Eq => equals(a, b).map(Value::Bool).unwrap_or(Value::Null),
        CmpOp::Ne => equals(a, b).map(|x| Value::Bool(!x)).unwrap_or(Value::Null),
        _ => match compare(a, b) {
            Some(o) => Value::Bool(match op {
                CmpOp::Lt => o == Ordering::Less,
                CmpOp::Le => o != Ordering::Greater,
                CmpOp::Gt => o == Ordering::Greater,
                _ => o != Ordering::Less,
            }),
            None => Value::Null,
        },
    }
}

pub(crate) fn arith(op: ArithOp, x: Value, y: Value) -> Value {
    match (op, &x, &y) {
        (_, Value::Number(a), Value::Number(b)) => {
            let r = match op {
                ArithOp::Add => a.add(b),
                ArithOp::Sub => a.sub(b),
                ArithOp::Mul => a.mul(b),
                ArithOp::Div => a.div(b),
                ArithOp::Pow => a.pow(b),
            };
            r.map(Value::Number).unwrap_or(Value::Null)
        }
        (ArithOp::Add, Value::String(a), Value::String(b)) => Value::String(format!("{a}{b}")),
        _ => builtins::arith_temporal(op, &x, &y).unwrap_or(Value::Null),
    }
}

pub(crate) fn instance_of(v: &Value, ty: &str) -> bool {
    let ty = ty.trim();
    if ty == "Any" {
        return !v.is_null();
    }
    let base = ty.split('<').next().unwrap_or(ty).trim();
    let actual = v.feel_type_name();
    match base {
        "date time" | "date and time" => actual == "date and time",
        "year-month-duration" | "years and months duration" => actual == "years and months duration",
        "day-time-duration" | "days and time duration" => actual == "days and time duration",
        other => other == actual,
    }
}
