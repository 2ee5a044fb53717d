//! DMN decisions for Waggle, following dmn-scala 1.9 (the DMN engine Zeebe 8.5 embeds) on the
//! `waggle-feel` FEEL engine.
//!
//! Parse a DMN file once ([`parse`]: DMN 1.1 to 1.5 XML, decision tables and literal expression
//! decisions, required decisions), hold the [`Drg`], and evaluate a decision by id with a
//! variables context as often as needed ([`Drg::evaluate`]). The result carries what Zeebe's
//! EvaluateDecision response and DECISION_EVALUATION record need: the output, the evaluated
//! decisions (inputs, matched rules, outputs) and, on failure, Zeebe's message and the failed
//! decision. Checked against dmn-scala itself by `tests/dmn-diff` (see its README).
//!
//! ```
//! let xml = r#"<definitions xmlns="https://www.omg.org/spec/DMN/20191111/MODEL/" id="d" name="D" namespace="n">
//!   <decision id="greeting" name="Greeting">
//!     <literalExpression id="e"><text>"Hello " + name</text></literalExpression>
//!   </decision>
//! </definitions>"#;
//! let drg = waggle_dmn::parse(xml).unwrap();
//! let vars = serde_json::json!({"name": "Ada"});
//! let result = drg.evaluate("greeting", &vars, &Default::default());
//! assert_eq!(result.output.to_json(), serde_json::json!("Hello Ada"));
//! ```
//!
//! Bounded input: a file of more than [`MAX_XML_BYTES`], elements nested more than
//! [`MAX_XML_DEPTH`] deep, [`MAX_DECISIONS`] decisions, a table
//! of more than [`MAX_RULES`] rules or a chain of more than [`MAX_REQUIREMENT_DEPTH`] required
//! decisions is refused at parse time (as is a cycle, which the error names); an evaluation
//! that would evaluate more than [`MAX_EVALUATED_DECISIONS`] decisions (requirements shared
//! many times over) fails.

mod eval;
mod model;
mod parse;

pub use eval::{DecisionEvaluation, EvaluatedDecision, EvaluatedInput, EvaluatedOutput, EvaluationFailure, MatchedRule};
pub use model::{Aggregation, Decision, DecisionLogic, DecisionTable, Drg, HitPolicy, Input, InputEntry, Output, Rule};
pub use parse::parse;

/// The largest DMN file parsed, in bytes.
pub const MAX_XML_BYTES: usize = 4 * 1024 * 1024;
/// The deepest nesting of XML elements parsed (a DMN file needs less than 10).
pub const MAX_XML_DEPTH: usize = 100;
/// The most decisions a DMN file may hold.
pub const MAX_DECISIONS: usize = 1_000;
/// The most rules a decision table may hold.
pub const MAX_RULES: usize = 10_000;
/// The longest chain of required decisions (a requires b requires c ...: 2 for that one).
pub const MAX_REQUIREMENT_DEPTH: usize = 64;
/// The most decision evaluations one evaluation may make (a decision required by several
/// others is evaluated once for each, as in dmn-scala).
pub const MAX_EVALUATED_DECISIONS: usize = 10_000;

/// A DMN file that can not be used: dmn-scala's message (its failures one a line).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ParseError {
    pub message: String,
}

impl ParseError {
    pub(crate) fn new(message: String) -> ParseError {
        ParseError { message }
    }
}
