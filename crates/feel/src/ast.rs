//! Syntax tree of FEEL expressions.

use std::sync::Arc;

use crate::number::Number;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ArithOp {
    Add,
    Sub,
    Mul,
    Div,
    Pow,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Expr {
    Null,
    Bool(bool),
    Number(Number),
    String(String),
    /// `@"..."`: a temporal literal, kept as text.
    Temporal(String),
    /// `?`: the input value of a unary test.
    Input,
    Name(String),
    Path(Box<Expr>, String),
    Filter(Box<Expr>, Box<Expr>),
    Call(Box<Expr>, Args),
    Neg(Box<Expr>),
    Arith(ArithOp, Box<Expr>, Box<Expr>),
    Cmp(CmpOp, Box<Expr>, Box<Expr>),
    And(Box<Expr>, Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
    Between(Box<Expr>, Box<Expr>, Box<Expr>),
    In(Box<Expr>, Vec<UnaryTest>),
    InstanceOf(Box<Expr>, String),
    If(Box<Expr>, Box<Expr>, Box<Expr>),
    List(Vec<Expr>),
    Context(Vec<(String, Expr)>),
    /// An interval `[a..b)` as a range value (only as a whole function argument, as in
    /// feel-scala): start closed?, start, end, end closed?
    Range(bool, Box<Expr>, Box<Expr>, bool),
    /// A unary comparison used as a value (`< 10`, `[< 5, > 10]`): the implicit input (the
    /// value left of `in`, the input of unary tests) compared with the operand; null without one.
    InputCmp(CmpOp, Box<Expr>),
    /// An interval used as a value (`[1..5]` anywhere but as a whole function argument):
    /// whether the implicit input lies in it (an [`Expr::Range`] inside); null without input.
    InputInRange(Box<Expr>),
    For(Vec<(String, Iteration)>, Box<Expr>),
    Some(Vec<(String, Iteration)>, Box<Expr>),
    Every(Vec<(String, Iteration)>, Box<Expr>),
    Function(Arc<FunctionDef>),
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct FunctionDef {
    pub params: Vec<String>,
    pub body: Expr,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Iteration {
    /// `x in list`
    List(Expr),
    /// `x in 1..5`
    Range(Expr, Expr),
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Args {
    Positional(Vec<Expr>),
    Named(Vec<(String, Expr)>),
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum UnaryTest {
    /// `-`: any input matches.
    Any,
    /// `< 5`, `= "a"`, ...
    Cmp(CmpOp, Expr),
    /// An expression compared with the input (equal, contained in a list or range, or a boolean
    /// that uses `?`). The flag tells whether the expression mentions `?`.
    Expr(Expr, bool),
    /// `not(t1, t2)`
    Not(Vec<UnaryTest>),
}

impl Expr {
    /// Whether the expression uses the input value `?` (outside nested function bodies).
    pub(crate) fn uses_input(&self) -> bool {
        fn it(i: &Iteration) -> bool {
            match i {
                Iteration::List(e) => e.uses_input(),
                Iteration::Range(a, b) => a.uses_input() || b.uses_input(),
            }
        }
        match self {
            Expr::Input => true,
            Expr::Null | Expr::Bool(_) | Expr::Number(_) | Expr::String(_) | Expr::Temporal(_) | Expr::Name(_) | Expr::Function(_) => false,
            Expr::Path(e, _) | Expr::Neg(e) | Expr::InstanceOf(e, _) | Expr::InputCmp(_, e) | Expr::InputInRange(e) => e.uses_input(),
            Expr::Filter(a, b) | Expr::Arith(_, a, b) | Expr::Cmp(_, a, b) | Expr::And(a, b) | Expr::Or(a, b) | Expr::Range(_, a, b, _) => {
                a.uses_input() || b.uses_input()
            }
            Expr::Call(f, args) => {
                f.uses_input()
                    || match args {
                        Args::Positional(xs) => xs.iter().any(Expr::uses_input),
                        Args::Named(xs) => xs.iter().any(|(_, e)| e.uses_input()),
                    }
            }
            Expr::Between(a, b, c) | Expr::If(a, b, c) => a.uses_input() || b.uses_input() || c.uses_input(),
            Expr::In(e, _) => e.uses_input(),
            Expr::List(xs) => xs.iter().any(Expr::uses_input),
            Expr::Context(xs) => xs.iter().any(|(_, e)| e.uses_input()),
            Expr::For(its, e) | Expr::Some(its, e) | Expr::Every(its, e) => its.iter().any(|(_, i)| it(i)) || e.uses_input(),
        }
    }

    /// Whether the name occurs anywhere in the expression (function bodies included).
    pub(crate) fn mentions(&self, name: &str) -> bool {
        fn it(i: &Iteration, name: &str) -> bool {
            match i {
                Iteration::List(e) => e.mentions(name),
                Iteration::Range(a, b) => a.mentions(name) || b.mentions(name),
            }
        }
        fn test(t: &UnaryTest, name: &str) -> bool {
            match t {
                UnaryTest::Any => false,
                UnaryTest::Cmp(_, e) | UnaryTest::Expr(e, _) => e.mentions(name),
                UnaryTest::Not(ts) => ts.iter().any(|t| test(t, name)),
            }
        }
        match self {
            Expr::Name(n) => n == name,
            Expr::Null | Expr::Bool(_) | Expr::Number(_) | Expr::String(_) | Expr::Temporal(_) | Expr::Input => false,
            Expr::Function(def) => def.body.mentions(name),
            Expr::Path(e, _) | Expr::Neg(e) | Expr::InstanceOf(e, _) | Expr::InputCmp(_, e) | Expr::InputInRange(e) => e.mentions(name),
            Expr::Filter(a, b) | Expr::Arith(_, a, b) | Expr::Cmp(_, a, b) | Expr::And(a, b) | Expr::Or(a, b) | Expr::Range(_, a, b, _) => {
                a.mentions(name) || b.mentions(name)
            }
            Expr::Call(f, args) => {
                f.mentions(name)
                    || match args {
                        Args::Positional(xs) => xs.iter().any(|x| x.mentions(name)),
                        Args::Named(xs) => xs.iter().any(|(_, e)| e.mentions(name)),
                    }
            }
            Expr::Between(a, b, c) | Expr::If(a, b, c) => a.mentions(name) || b.mentions(name) || c.mentions(name),
            Expr::In(e, ts) => e.mentions(name) || ts.iter().any(|t| test(t, name)),
            Expr::List(xs) => xs.iter().any(|x| x.mentions(name)),
            Expr::Context(xs) => xs.iter().any(|(_, e)| e.mentions(name)),
            Expr::For(its, e) | Expr::Some(its, e) | Expr::Every(its, e) => its.iter().any(|(_, i)| it(i, name)) || e.mentions(name),
        }
    }
}
