//! A parsed decision requirements graph (DRG): what [`crate::parse`] builds from DMN XML and
//! [`crate::eval`] evaluates. Immutable once built; cheap to share behind an `Arc`.

use std::collections::HashMap;
use waggle_feel::{Expression, UnaryTests};

/// A parsed DMN file: its `definitions` and the decisions in document order.
#[derive(Debug, Clone)]
pub struct Drg {
    /// The `definitions` element's id (Zeebe's decision requirements id).
    pub id: String,
    /// The `definitions` element's name.
    pub name: Option<String>,
    /// The `definitions` element's namespace attribute.
    pub namespace: Option<String>,
    pub(crate) decisions: Vec<Decision>,
    pub(crate) by_id: HashMap<String, usize>,
}

impl Drg {
    /// The decisions in document order.
    pub fn decisions(&self) -> &[Decision] {
        &self.decisions
    }

    /// The decision with this id.
    pub fn decision(&self, id: &str) -> Option<&Decision> {
        self.by_id.get(id).map(|&i| &self.decisions[i])
    }
}

/// One decision of a DRG.
#[derive(Debug, Clone)]
pub struct Decision {
    pub id: String,
    pub name: Option<String>,
    /// The name its result is bound under for the decisions that require it: its `variable`'s
    /// name, else its id (as dmn-scala).
    pub result_name: String,
    /// The `variable`'s typeRef: the result is checked against it (`string`, `number`, ...).
    pub result_type: Option<String>,
    /// Indexes (into [`Drg::decisions`]) of the decisions it requires, in document order.
    pub(crate) required: Vec<usize>,
    pub logic: DecisionLogic,
}

impl Decision {
    /// The decisions it requires, as indexes into [`Drg::decisions`], in document order.
    pub fn required(&self) -> &[usize] {
        &self.required
    }

    /// Zeebe's decision type name: `DECISION_TABLE` or `LITERAL_EXPRESSION`.
    pub fn decision_type(&self) -> &'static str {
        match self.logic {
            DecisionLogic::Table(_) => "DECISION_TABLE",
            DecisionLogic::Literal(_) => "LITERAL_EXPRESSION",
        }
    }
}

/// How a decision computes its result.
#[derive(Debug, Clone)]
pub enum DecisionLogic {
    Table(DecisionTable),
    Literal(Expression),
}

/// A decision table.
#[derive(Debug, Clone)]
pub struct DecisionTable {
    pub hit_policy: HitPolicy,
    pub aggregation: Option<Aggregation>,
    pub inputs: Vec<Input>,
    pub outputs: Vec<Output>,
    pub rules: Vec<Rule>,
}

/// An input column.
#[derive(Debug, Clone)]
pub struct Input {
    pub id: Option<String>,
    pub label: Option<String>,
    pub expression: Expression,
    /// The `inputValues` text: kept, not enforced (dmn-scala 1.9 does not check them).
    pub input_values: Option<String>,
}

/// An output column.
#[derive(Debug, Clone)]
pub struct Output {
    pub id: Option<String>,
    pub label: Option<String>,
    pub name: Option<String>,
    /// The `outputValues` text: orders PRIORITY and OUTPUT ORDER results.
    pub output_values: Option<String>,
    /// The `defaultOutputEntry`: the output when no rule matched.
    pub default: Option<Expression>,
}

/// A rule: one input entry per input, one output entry per output.
#[derive(Debug, Clone)]
pub struct Rule {
    pub id: Option<String>,
    pub input_entries: Vec<InputEntry>,
    pub output_entries: Vec<Expression>,
}

/// An input entry: FEEL unary tests, or empty (matches anything).
#[derive(Debug, Clone)]
pub enum InputEntry {
    Empty,
    Tests(UnaryTests),
}

/// A decision table's hit policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HitPolicy {
    Unique,
    First,
    Priority,
    Any,
    Collect,
    RuleOrder,
    OutputOrder,
}

/// COLLECT's aggregator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Aggregation {
    Sum,
    Min,
    Max,
    Count,
}
