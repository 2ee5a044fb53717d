//! XML → [`Process`]: reads the BPMN and Zeebe namespaces, validates, links by index.

use std::collections::HashMap;

use roxmltree::{Document, Node};
use waggle_feel::Expression;

use crate::model::{Element, ElementKind, ExprOrStatic, Mapping, Process, SequenceFlow, TaskDefinition};
use crate::BpmnError;

const BPMN_NS: &str = "http://www.omg.org/spec/BPMN/20100524/MODEL";
const ZEEBE_NS: &str = "http://camunda.org/schema/zeebe/1.0";

/// Flow-level BPMN elements that carry no behaviour and are skipped.
const IGNORED: &[&str] = &[
    "documentation",
    "extensionElements",
    "laneSet",
    "textAnnotation",
    "association",
    "group",
    "dataObject",
    "dataObjectReference",
    "dataStoreReference",
    "ioSpecification",
    "property",
];

/// Parses a `bpmn:definitions` document and returns its executable processes, or every error
/// found (all of them, not just the first, as Zeebe reports them).
pub fn parse_definitions(xml: &[u8]) -> Result<Vec<Process>, Vec<BpmnError>> {
    let text = std::str::from_utf8(xml).map_err(|e| {
        vec![BpmnError { element_id: "definitions".into(), line: 1, message: format!("The resource is not valid UTF-8: {e}") }]
    })?;
    let doc = Document::parse(text).map_err(|e| {
        let pos = e.pos();
        vec![BpmnError { element_id: "definitions".into(), line: pos.row, message: format!("Invalid XML: {e}") }]
    })?;
    let root = doc.root_element();
    if !is_bpmn(root, "definitions") {
        return Err(vec![error(
            &doc,
            root,
            format!("Expected a 'definitions' element of namespace '{BPMN_NS}', but found '{}'", root.tag_name().name()),
        )]);
    }
    let mut errors = Vec::new();
    let mut processes = Vec::new();
    for node in root.children().filter(|n| is_bpmn(*n, "process")) {
        if node.attribute("isExecutable") != Some("true") {
            continue;
        }
        match ProcessParser::new(&doc, &mut errors).parse(node) {
            Some(p) => processes.push(p),
            None => continue,
        }
    }
    if errors.is_empty() && processes.is_empty() {
        errors.push(error(&doc, root, "Must contain at least one executable process".into()));
    }
    if errors.is_empty() {
        Ok(processes)
    } else {
        Err(errors)
    }
}

fn is_bpmn(node: Node, name: &str) -> bool {
    node.is_element() && node.tag_name().namespace() == Some(BPMN_NS) && node.tag_name().name() == name
}

fn is_zeebe(node: Node, name: &str) -> bool {
    node.is_element() && node.tag_name().namespace() == Some(ZEEBE_NS) && node.tag_name().name() == name
}

fn line_of(doc: &Document, node: Node) -> u32 {
    doc.text_pos_at(node.range().start).row
}

fn error(doc: &Document, node: Node, message: String) -> BpmnError {
    let element_id = node.attribute("id").unwrap_or(node.tag_name().name()).to_string();
    BpmnError { element_id, line: line_of(doc, node), message }
}

struct ProcessParser<'a, 'd, 'e> {
    doc: &'a Document<'d>,
    errors: &'e mut Vec<BpmnError>,
    error_count_at_start: usize,
    /// Ids of flow nodes already rejected: flows to them are not reported again.
    rejected: std::collections::HashSet<String>,
}

impl<'a, 'd, 'e> ProcessParser<'a, 'd, 'e> {
    fn new(doc: &'a Document<'d>, errors: &'e mut Vec<BpmnError>) -> Self {
        let error_count_at_start = errors.len();
        Self { doc, errors, error_count_at_start, rejected: Default::default() }
    }

    fn fail(&mut self, node: Node, message: impl Into<String>) {
        self.errors.push(error(self.doc, node, message.into()));
    }

    fn parse(mut self, process: Node) -> Option<Process> {
        let id = process.attribute("id").unwrap_or_default().to_string();
        if id.is_empty() {
            self.fail(process, "Attribute 'id' must be present and not empty");
        }
        let mut elements = Vec::new();
        let mut element_nodes = Vec::new();
        let mut flow_nodes = Vec::new();
        for child in process.children().filter(|n| n.is_element()) {
            if child.tag_name().namespace() != Some(BPMN_NS) {
                continue;
            }
            let tag = child.tag_name().name();
            if tag == "sequenceFlow" {
                flow_nodes.push(child);
            } else if IGNORED.contains(&tag) {
                continue;
            } else if let Some(element) = self.element(child) {
                elements.push(element);
                element_nodes.push(child);
            } else if let Some(id) = child.attribute("id") {
                self.rejected.insert(id.to_string());
            }
        }
        let mut index: HashMap<&str, usize> = HashMap::new();
        for (i, e) in elements.iter().enumerate() {
            if index.insert(e.id.as_str(), i).is_some() {
                let node = element_nodes[i];
                self.fail(node, format!("Duplicate element id '{}'", e.id));
            }
        }
        let mut flows = Vec::new();
        let mut flow_ids = HashMap::new();
        let mut flow_lines = Vec::new();
        for node in &flow_nodes {
            let flow_id = node.attribute("id").unwrap_or_default().to_string();
            let source = self.flow_end(*node, "sourceRef", &index);
            let target = self.flow_end(*node, "targetRef", &index);
            let condition = self.condition(*node);
            if let (Some(source), Some(target)) = (source, target) {
                flow_ids.insert(flow_id.clone(), flows.len());
                flow_lines.push(line_of(self.doc, *node));
                flows.push(SequenceFlow { id: flow_id, source, target, condition });
            }
        }
        for (i, flow) in flows.iter().enumerate() {
            elements[flow.source].outgoing.push(i);
            elements[flow.target].incoming.push(i);
        }
        let start = self.start_event(process, &elements);
        self.link_gateways(&element_nodes, &mut elements, &flows, &flow_lines, &flow_ids);
        if self.errors.len() > self.error_count_at_start {
            return None;
        }
        let name = process.attribute("name").map(str::to_string);
        Some(Process { id, name, elements, flows, start: start? })
    }

    fn start_event(&mut self, process: Node, elements: &[Element]) -> Option<usize> {
        let starts: Vec<usize> =
            elements.iter().enumerate().filter(|(_, e)| matches!(e.kind, ElementKind::StartEvent)).map(|(i, _)| i).collect();
        match starts.len() {
            1 => Some(starts[0]),
            0 => {
                self.fail(process, "Must have at least one start event");
                None
            }
            _ => {
                self.fail(process, "Multiple none start events are not allowed");
                None
            }
        }
    }

    /// Resolves `default` flows and checks that a gateway's conditions are there when needed.
    fn link_gateways(
        &mut self,
        nodes: &[Node],
        elements: &mut [Element],
        flows: &[SequenceFlow],
        flow_lines: &[u32],
        flow_ids: &HashMap<String, usize>,
    ) {
        for (i, node) in nodes.iter().enumerate() {
            if !matches!(elements[i].kind, ElementKind::ExclusiveGateway { .. }) {
                continue;
            }
            let default_flow = match node.attribute("default") {
                None => None,
                Some(d) => match flow_ids.get(d) {
                    Some(&f) if flows[f].source == i => Some(f),
                    _ => {
                        self.fail(*node, format!("Default flow '{d}' must start at the gateway"));
                        None
                    }
                },
            };
            let outgoing = elements[i].outgoing.clone();
            if outgoing.len() > 1 {
                for &f in &outgoing {
                    if Some(f) != default_flow && flows[f].condition.is_none() {
                        self.errors.push(BpmnError {
                            element_id: flows[f].id.clone(),
                            line: flow_lines[f],
                            message: "Must have a condition expression or be the default flow of the exclusive gateway".into(),
                        });
                    }
                }
            }
            elements[i].kind = ElementKind::ExclusiveGateway { default_flow };
        }
    }

    fn flow_end(&mut self, node: Node, attribute: &str, index: &HashMap<&str, usize>) -> Option<usize> {
        match node.attribute(attribute) {
            None | Some("") => {
                self.fail(node, format!("Attribute '{attribute}' must be present and not empty"));
                None
            }
            Some(r) => match index.get(r) {
                Some(&i) => Some(i),
                None if self.rejected.contains(r) => None,
                None => {
                    self.fail(node, format!("Attribute '{attribute}' refers to '{r}', which is not a supported flow node of this process"));
                    None
                }
            },
        }
    }

    fn condition(&mut self, flow: Node) -> Option<Expression> {
        let node = flow.children().find(|n| is_bpmn(*n, "conditionExpression"))?;
        let text = node.text().unwrap_or_default().trim();
        self.expression(node, text, true)
    }

    /// Parses `=expr`; a static value is an error when `mandatory`, else `None`.
    fn expression(&mut self, node: Node, text: &str, mandatory: bool) -> Option<Expression> {
        match text.strip_prefix('=') {
            Some(source) => match Expression::parse(source.trim()) {
                Ok(e) => Some(e),
                Err(e) => {
                    self.fail(node, e.message);
                    None
                }
            },
            None if mandatory => {
                self.fail(
                    node,
                    format!("Expected expression but found static value '{text}'. An expression must start with '=' (e.g. '={text}')."),
                );
                None
            }
            None => None,
        }
    }

    fn expr_or_static(&mut self, node: Node, text: &str) -> ExprOrStatic {
        if text.starts_with('=') {
            match self.expression(node, text, true) {
                Some(e) => ExprOrStatic::Expression(e),
                None => ExprOrStatic::Static(String::new()),
            }
        } else {
            ExprOrStatic::Static(text.to_string())
        }
    }

    fn element(&mut self, node: Node) -> Option<Element> {
        let tag = node.tag_name().name();
        let id = node.attribute("id").unwrap_or_default().to_string();
        if id.is_empty() {
            self.fail(node, "Attribute 'id' must be present and not empty");
            return None;
        }
        let kind = match tag {
            "startEvent" | "endEvent" => {
                if let Some(def) = node.children().find(|n| n.is_element() && n.tag_name().name().ends_with("EventDefinition")) {
                    let event = if tag == "startEvent" { "Start" } else { "End" };
                    self.fail(node, format!("{event} events with '{}' are currently not supported", def.tag_name().name()));
                    return None;
                }
                if tag == "startEvent" {
                    ElementKind::StartEvent
                } else {
                    ElementKind::EndEvent
                }
            }
            "serviceTask" => ElementKind::ServiceTask(self.task_definition(node)?),
            "exclusiveGateway" => ElementKind::ExclusiveGateway { default_flow: None },
            "parallelGateway" => ElementKind::ParallelGateway,
            other => {
                self.fail(node, format!("Elements of type '{other}' are currently not supported"));
                return None;
            }
        };
        for child in node.children().filter(|n| n.is_element()) {
            let name = child.tag_name().name();
            if name.ends_with("LoopCharacteristics") {
                self.fail(node, format!("'{name}' (multi-instance and loops) is currently not supported"));
            }
        }
        let (inputs, outputs) = self.io_mapping(node);
        Some(Element { id, name: node.attribute("name").map(str::to_string), kind, incoming: vec![], outgoing: vec![], inputs, outputs })
    }

    fn extensions<'n>(&self, node: Node<'n, 'd>) -> impl Iterator<Item = Node<'n, 'd>> {
        node.children().filter(|n| is_bpmn(*n, "extensionElements")).flat_map(|e| e.children().filter(|c| c.is_element()))
    }

    fn task_definition(&mut self, node: Node) -> Option<TaskDefinition> {
        let defs: Vec<Node> = self.extensions(node).filter(|n| is_zeebe(*n, "taskDefinition")).collect();
        if defs.len() != 1 {
            self.fail(node, "Must have exactly one 'zeebe:taskDefinition' extension element");
            return None;
        }
        let def = defs[0];
        let job_type = def.attribute("type").unwrap_or_default().trim();
        if job_type.is_empty() {
            self.fail(node, "Attribute 'type' must be present and not empty");
            return None;
        }
        let job_type = self.expr_or_static(node, job_type);
        let retries = self.expr_or_static(node, def.attribute("retries").unwrap_or("3").trim());
        if let ExprOrStatic::Static(r) = &retries {
            if r.parse::<i32>().is_err() {
                self.fail(node, format!("Expected retries to be a number or an expression, but found '{r}'"));
            }
        }
        let mut headers = Vec::new();
        for list in self.extensions(node).filter(|n| is_zeebe(*n, "taskHeaders")) {
            for header in list.children().filter(|n| is_zeebe(*n, "header")) {
                let key = header.attribute("key").unwrap_or_default();
                if key.is_empty() {
                    self.fail(node, "Attribute 'key' of a task header must be present and not empty");
                    continue;
                }
                headers.push((key.to_string(), header.attribute("value").unwrap_or_default().to_string()));
            }
        }
        Some(TaskDefinition { job_type, retries, headers })
    }

    fn io_mapping(&mut self, node: Node) -> (Vec<Mapping>, Vec<Mapping>) {
        let mut inputs = Vec::new();
        let mut outputs = Vec::new();
        let mappings: Vec<Node> = self.extensions(node).filter(|n| is_zeebe(*n, "ioMapping")).flat_map(|m| m.children()).collect();
        for m in mappings {
            let into = if is_zeebe(m, "input") {
                &mut inputs
            } else if is_zeebe(m, "output") {
                &mut outputs
            } else {
                continue;
            };
            let target = m.attribute("target").unwrap_or_default().trim().to_string();
            if target.is_empty() || target.split('.').any(str::is_empty) {
                self.fail(node, format!("Expected the target of a mapping to be a variable name or path, but found '{target}'"));
                continue;
            }
            let source = m.attribute("source").unwrap_or_default().trim();
            let source = if source.is_empty() { format!("={target}") } else { source.to_string() };
            if let Some(source) = self.expression(node, &source, true) {
                into.push(Mapping { source, target });
            }
        }
        (inputs, outputs)
    }
}

#[cfg(test)]
mod tests;
