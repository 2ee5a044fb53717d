//! DMN XML (1.1 to 1.5, as Camunda Modeler writes it) to a [`Drg`], with dmn-scala 1.9's checks
//! and messages. Diagram elements (`dmndi`, `biodi`), extension elements and descriptions are
//! ignored; decisions other than decision tables and literal expressions (contexts, relations,
//! invocations, business knowledge models) are refused.

use std::collections::{HashMap, HashSet};

use roxmltree::{Document, Node};
use waggle_feel::{parse_unary_tests, Expression};

use crate::model::*;
use crate::{ParseError, MAX_DECISIONS, MAX_REQUIREMENT_DEPTH, MAX_RULES, MAX_XML_BYTES, MAX_XML_DEPTH};

/// The DMN namespaces the Camunda DMN model (7.22) reads (its constant for DMN 1.3's alternative
/// `DMN13.xsd` namespace has no schema behind it: such a file is refused).
const DMN_NAMESPACES: [&str; 6] = [
    "http://www.omg.org/spec/DMN/20151101/dmn.xsd",
    "http://www.omg.org/spec/DMN/20151101/dmn11.xsd",
    "http://www.omg.org/spec/DMN/20180521/MODEL/",
    "https://www.omg.org/spec/DMN/20191111/MODEL/",
    "https://www.omg.org/spec/DMN/20211108/MODEL/",
    "https://www.omg.org/spec/DMN/20230324/MODEL/",
];

/// The expression languages dmn-scala 1.9 takes as FEEL, lower-cased (its list names the DMN
/// 1.5 model namespace, not DMN 1.5's FEEL namespace).
const FEEL_LANGUAGES: [&str; 6] = [
    "feel",
    "http://www.omg.org/spec/feel/20140401",
    "http://www.omg.org/spec/dmn/20180521/feel/",
    "https://www.omg.org/spec/dmn/20191111/feel/",
    "https://www.omg.org/spec/dmn/20211108/feel/",
    "https://www.omg.org/spec/dmn/20230324/model/",
];

/// Parses a DMN file. Fails, with every problem found (one a line, as dmn-scala joins them), on
/// XML that is no DMN model, a cycle among required decisions, FEEL that does not parse, and
/// the other mistakes dmn-scala rejects; and on a file beyond this crate's bounds.
pub fn parse(xml: &str) -> Result<Drg, ParseError> {
    if xml.len() > MAX_XML_BYTES {
        return Err(ParseError::new(format!("Failed to parse DMN: the file has more than {MAX_XML_BYTES} bytes")));
    }
    check_nesting(xml)?;
    let doc = Document::parse(xml).map_err(|e| model_error(&e.to_string()))?;
    let root = doc.root_element();
    let ns = root.tag_name().namespace().unwrap_or("");
    if root.tag_name().name() != "definitions" || !DMN_NAMESPACES.contains(&ns) {
        return Err(model_error("the root element is no DMN 1.1 - 1.5 'definitions'"));
    }
    check_unique_ids(&doc)?;
    if root.attribute("name").is_none() {
        return Err(model_error("the definitions have no name"));
    }
    let p = Parser { ns, failures: Vec::new() };
    p.definitions(root)
}

/// Refuses elements nested deeper than [`MAX_XML_DEPTH`] before the XML parser sees them (its
/// recursion would overflow the stack on a deep enough document). A scan of the tags only:
/// comments, CDATA, processing instructions and declarations are skipped, quotes in tags
/// honoured; a malformed document is left to the parser to refuse.
fn check_nesting(xml: &str) -> Result<(), ParseError> {
    let b = xml.as_bytes();
    let skip_to = |from: usize, end: &str| -> usize { xml[from..].find(end).map(|i| from + i + end.len()).unwrap_or(b.len()) };
    let (mut i, mut depth) = (0usize, 0usize);
    while i < b.len() {
        if b[i] != b'<' {
            i += 1;
            continue;
        }
        let rest = &xml[i..];
        if rest.starts_with("<!--") {
            i = skip_to(i, "-->");
        } else if rest.starts_with("<![CDATA[") {
            i = skip_to(i, "]]>");
        } else if rest.starts_with("<?") {
            i = skip_to(i, "?>");
        } else if rest.starts_with("<!") {
            i = skip_to(i, ">");
        } else if rest.starts_with("</") {
            depth = depth.saturating_sub(1);
            i = skip_to(i, ">");
        } else {
            // a start tag: find its end outside quoted attribute values
            let mut j = i + 1;
            let mut quote = None;
            while j < b.len() {
                match (quote, b[j]) {
                    (None, q @ (b'"' | b'\'')) => quote = Some(q),
                    (Some(q), c) if c == q => quote = None,
                    (None, b'>') => break,
                    _ => {}
                }
                j += 1;
            }
            if j < b.len() && b[j - 1] != b'/' {
                depth += 1;
                if depth > MAX_XML_DEPTH {
                    return Err(model_error(&format!("elements are nested more than {MAX_XML_DEPTH} deep")));
                }
            }
            i = j + 1;
        }
    }
    Ok(())
}

/// What the Camunda DMN model's schema validation rejects reads so in dmn-scala.
fn model_error(detail: &str) -> ParseError {
    ParseError::new(format!("Failed to parse DMN: org.camunda.bpm.model.dmn.DmnModelException: Unable to parse model ({detail})"))
}

/// XML ids are unique in a document (the schema's `ID` type).
fn check_unique_ids(doc: &Document) -> Result<(), ParseError> {
    let mut seen = HashSet::new();
    for node in doc.descendants().filter(|n| n.is_element()) {
        if let Some(id) = node.attribute("id") {
            if !seen.insert(id) {
                return Err(model_error(&format!("the id '{id}' is used twice")));
            }
        }
    }
    Ok(())
}

struct Parser<'a> {
    ns: &'a str,
    failures: Vec<String>,
}

impl<'a> Parser<'a> {
    fn is(&self, node: &Node, name: &str) -> bool {
        node.is_element() && node.tag_name().name() == name && node.tag_name().namespace() == Some(self.ns)
    }

    fn child<'d>(&self, node: Node<'d, 'd>, name: &str) -> Option<Node<'d, 'd>> {
        node.children().find(|c| self.is(c, name))
    }

    fn children<'d>(&self, node: Node<'d, 'd>, name: &str) -> Vec<Node<'d, 'd>> {
        node.children().filter(|c| self.is(c, name)).collect()
    }

    fn definitions(mut self, root: Node) -> Result<Drg, ParseError> {
        let elements: Vec<Node> = self.children(root, "decision");
        if let Some(d) = elements.iter().find(|d| d.attribute("name").is_none()) {
            return Err(model_error(&format!("the decision '{}' has no name", d.attribute("id").unwrap_or(""))));
        }
        if elements.len() > MAX_DECISIONS {
            return Err(ParseError::new(format!("Invalid DMN model: more than {MAX_DECISIONS} decisions")));
        }
        if let Some(bkm) = self.child(root, "businessKnowledgeModel") {
            let id = bkm.attribute("id").unwrap_or_default();
            return Err(ParseError::new(format!("business knowledge models are not supported (found '{id}')")));
        }
        // the requirement graph, checked for cycles and depth before anything is evaluated
        let mut by_id: HashMap<String, usize> = HashMap::new();
        for (i, d) in elements.iter().enumerate() {
            if let Some(id) = d.attribute("id") {
                by_id.insert(id.to_string(), i);
            }
        }
        let mut required = Vec::with_capacity(elements.len());
        for d in &elements {
            let mut reqs = Vec::new();
            for ir in self.children(*d, "informationRequirement") {
                if let Some(rd) = self.child(ir, "requiredDecision") {
                    let href = rd.attribute("href").unwrap_or_default();
                    let id = href.strip_prefix('#').unwrap_or(href);
                    match by_id.get(id) {
                        Some(&i) => reqs.push(i),
                        None => return Err(ParseError::new(format!("Unable to find a model element instance for id {id}"))),
                    }
                }
            }
            required.push(reqs);
        }
        check_graph(&elements, &required)?;

        let mut decisions = Vec::with_capacity(elements.len());
        for (d, reqs) in elements.iter().zip(required) {
            decisions.push(self.decision(*d, reqs));
        }
        if !self.failures.is_empty() {
            return Err(ParseError::new(self.failures.join("\n")));
        }
        let by_id = decisions.iter().enumerate().filter(|(_, d)| !d.id.is_empty()).map(|(i, d)| (d.id.clone(), i)).collect();
        Ok(Drg {
            id: root.attribute("id").unwrap_or_default().to_string(),
            name: root.attribute("name").map(str::to_string),
            namespace: root.attribute("namespace").map(str::to_string),
            decisions,
            by_id,
        })
    }

    fn decision(&mut self, d: Node, required: Vec<usize>) -> Decision {
        let id = d.attribute("id").unwrap_or_default().to_string();
        let variable = self.child(d, "variable");
        let logic = if let Some(t) = self.child(d, "decisionTable") {
            DecisionLogic::Table(self.table(t))
        } else if let Some(l) = self.child(d, "literalExpression") {
            DecisionLogic::Literal(self.literal(l))
        } else {
            let other =
                ["context", "relation", "list", "invocation", "functionDefinition"].into_iter().find(|n| self.child(d, n).is_some());
            match other {
                Some(kind) => self.failures.push(format!("unsupported decision expression '{kind}' (decision '{id}')")),
                None => self.failures.push("unsupported decision expression 'null'".to_string()),
            }
            DecisionLogic::Literal(Expression::parse("null").expect("null parses"))
        };
        Decision {
            result_name: variable.and_then(|v| v.attribute("name")).map(str::to_string).unwrap_or_else(|| id.clone()),
            result_type: variable.and_then(|v| v.attribute("typeRef")).map(str::to_string),
            id,
            name: d.attribute("name").map(str::to_string),
            required,
            logic,
        }
    }

    fn table(&mut self, t: Node) -> DecisionTable {
        let hit_policy = match t.attribute("hitPolicy").unwrap_or("UNIQUE") {
            "UNIQUE" => HitPolicy::Unique,
            "FIRST" => HitPolicy::First,
            "PRIORITY" => HitPolicy::Priority,
            "ANY" => HitPolicy::Any,
            "COLLECT" => HitPolicy::Collect,
            "RULE ORDER" => HitPolicy::RuleOrder,
            "OUTPUT ORDER" => HitPolicy::OutputOrder,
            other => {
                self.failures.push(format!("Failed to parse DMN: unknown hit policy '{other}'"));
                HitPolicy::Unique
            }
        };
        let aggregation = match t.attribute("aggregation") {
            None => None,
            Some("SUM") => Some(Aggregation::Sum),
            Some("MIN") => Some(Aggregation::Min),
            Some("MAX") => Some(Aggregation::Max),
            Some("COUNT") => Some(Aggregation::Count),
            Some(other) => {
                self.failures.push(format!("Failed to parse DMN: unknown aggregation '{other}'"));
                None
            }
        };
        let outputs_xml: Vec<Node> = self.children(t, "output");
        if outputs_xml.len() > 1 && hit_policy == HitPolicy::Collect && aggregation.is_some() {
            self.failures.push("hit policy 'COLLECT' with aggregator is not defined for compound output".to_string());
        }
        if outputs_xml.len() > 1 {
            for o in outputs_xml.iter().filter(|o| o.attribute("name").is_none()) {
                self.failures.push(format!("no output name defined for `{}`", o.attribute("label").unwrap_or("null")));
            }
        }
        let mut inputs = Vec::new();
        for i in self.children(t, "input") {
            let expression = match self.child(i, "inputExpression") {
                Some(e) => self.literal(e),
                None => {
                    self.failures.push("Failed to parse DMN: an input has no inputExpression".to_string());
                    Expression::parse("null").expect("null parses")
                }
            };
            inputs.push(Input {
                id: i.attribute("id").map(str::to_string),
                label: i.attribute("label").map(str::to_string),
                expression,
                input_values: self.child(i, "inputValues").map(|v| self.text(v)),
            });
        }
        let mut outputs = Vec::new();
        for o in &outputs_xml {
            outputs.push(Output {
                id: o.attribute("id").map(str::to_string),
                label: o.attribute("label").map(str::to_string),
                name: o.attribute("name").map(str::to_string),
                output_values: self.child(*o, "outputValues").map(|v| self.text(v)),
                default: self.child(*o, "defaultOutputEntry").map(|e| self.literal(e)),
            });
        }
        let rules_xml: Vec<Node> = self.children(t, "rule");
        if rules_xml.len() > MAX_RULES {
            self.failures.push(format!("Invalid DMN model: a decision table has more than {MAX_RULES} rules"));
            return DecisionTable { hit_policy, aggregation, inputs, outputs, rules: Vec::new() };
        }
        let mut rules = Vec::with_capacity(rules_xml.len());
        for r in rules_xml {
            let input_entries = self.children(r, "inputEntry").into_iter().map(|e| self.input_entry(e)).collect();
            let output_entries = self.children(r, "outputEntry").into_iter().map(|e| self.literal(e)).collect();
            rules.push(Rule { id: r.attribute("id").map(str::to_string), input_entries, output_entries });
        }
        DecisionTable { hit_policy, aggregation, inputs, outputs, rules }
    }

    /// The text content of an element's `text` child (all its text, entities and CDATA
    /// resolved), `None` without one.
    fn text_child(&self, node: Node) -> Option<String> {
        self.child(node, "text").map(all_text)
    }

    fn text(&self, node: Node) -> String {
        self.text_child(node).unwrap_or_default()
    }

    fn language_ok(&mut self, node: Node) -> bool {
        match node.attribute("expressionLanguage") {
            None => true,
            Some(l) => {
                let lower = l.to_lowercase();
                if FEEL_LANGUAGES.contains(&lower.as_str()) {
                    true
                } else {
                    self.failures.push(format!("Expression language '{lower}' is not supported"));
                    false
                }
            }
        }
    }

    /// A FEEL expression (a literal expression, input expression or output entry).
    fn literal(&mut self, node: Node) -> Expression {
        let fallback = || Expression::parse("null").expect("null parses");
        let Some(text) = self.text_child(node) else {
            self.failures.push(format!("The expression '{}' must not be empty.", node.attribute("id").unwrap_or("null")));
            return fallback();
        };
        if !self.language_ok(node) {
            return fallback();
        }
        match Expression::parse(&text) {
            Ok(e) => e,
            Err(e) => {
                self.failures.push(format!("FEEL expression: {e}"));
                fallback()
            }
        }
    }

    fn input_entry(&mut self, node: Node) -> InputEntry {
        let text = self.text_child(node).unwrap_or_default();
        if !self.language_ok(node) {
            return InputEntry::Empty;
        }
        if text.is_empty() {
            return InputEntry::Empty;
        }
        match parse_unary_tests(&text) {
            Ok(t) => InputEntry::Tests(t),
            Err(e) => {
                self.failures.push(format!("FEEL unary-tests: {e}"));
                InputEntry::Empty
            }
        }
    }
}

fn all_text(node: Node) -> String {
    node.descendants().filter(|n| n.is_text()).filter_map(|n| n.text()).collect()
}

/// Refuses a cycle among required decisions (naming it) and a chain of requirements deeper
/// than [`MAX_REQUIREMENT_DEPTH`]. Iterative: no recursion on the document's shape.
fn check_graph(elements: &[Node], required: &[Vec<usize>]) -> Result<(), ParseError> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        Open,
        Done,
    }
    let n = required.len();
    let mut mark = vec![Mark::New; n];
    let mut depth = vec![0usize; n]; // longest chain of requirements below a decision
    for start in 0..n {
        if mark[start] != Mark::New {
            continue;
        }
        // (decision, next requirement to look at)
        let mut stack = vec![(start, 0usize)];
        mark[start] = Mark::Open;
        while let Some(&mut (d, ref mut next)) = stack.last_mut() {
            if let Some(&r) = required[d].get(*next) {
                *next += 1;
                match mark[r] {
                    Mark::New => {
                        mark[r] = Mark::Open;
                        stack.push((r, 0));
                    }
                    Mark::Open => {
                        let from = stack.iter().position(|&(s, _)| s == r).unwrap_or(0);
                        let mut names: Vec<&str> = stack[from..].iter().map(|&(s, _)| elements[s].attribute("id").unwrap_or("")).collect();
                        names.push(elements[r].attribute("id").unwrap_or(""));
                        return Err(ParseError::new(format!(
                            "Invalid DMN model: Cyclic dependencies between decisions detected. ({})",
                            names.join(" requires ")
                        )));
                    }
                    Mark::Done => {}
                }
            } else {
                mark[d] = Mark::Done;
                depth[d] = required[d].iter().map(|&r| depth[r] + 1).max().unwrap_or(0);
                if depth[d] > MAX_REQUIREMENT_DEPTH {
                    return Err(ParseError::new(format!(
                        "Invalid DMN model: the decision '{}' is at the end of a chain of more than {MAX_REQUIREMENT_DEPTH} required decisions",
                        elements[d].attribute("id").unwrap_or("")
                    )));
                }
                stack.pop();
            }
        }
    }
    Ok(())
}
