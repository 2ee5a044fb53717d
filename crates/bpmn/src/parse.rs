//! XML → [`Process`]: reads the BPMN and Zeebe namespaces, validates, links by index.

use std::collections::HashMap;

use roxmltree::{Document, Node};
use waggle_feel::Expression;

use crate::model::{
    Element, ElementKind, EventTrigger, ExprOrStatic, Mapping, MessageDefinition, Process, SequenceFlow, TaskDefinition, TimerDefinition,
};
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
    let refs = Refs::read(root);
    for node in root.children().filter(|n| is_bpmn(*n, "process")) {
        if node.attribute("isExecutable") != Some("true") {
            continue;
        }
        match ProcessParser::new(&doc, &mut errors, &refs).parse(node) {
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

/// `bpmn:message` and `bpmn:error` definitions, by id.
struct Refs {
    /// id → (name, `zeebe:subscription` correlation key)
    messages: HashMap<String, (Option<String>, Option<String>)>,
    /// id → errorCode
    errors: HashMap<String, Option<String>>,
}

impl Refs {
    fn read(root: Node) -> Refs {
        let mut refs = Refs { messages: HashMap::new(), errors: HashMap::new() };
        for node in root.children().filter(|n| n.is_element()) {
            let Some(id) = node.attribute("id") else { continue };
            if is_bpmn(node, "message") {
                let correlation_key = node
                    .children()
                    .filter(|n| is_bpmn(*n, "extensionElements"))
                    .flat_map(|e| e.children())
                    .find(|n| is_zeebe(*n, "subscription"))
                    .and_then(|n| n.attribute("correlationKey"))
                    .map(str::to_string);
                refs.messages.insert(id.to_string(), (node.attribute("name").map(str::to_string), correlation_key));
            } else if is_bpmn(node, "error") {
                refs.errors.insert(id.to_string(), node.attribute("errorCode").map(str::to_string));
            }
        }
        refs
    }
}

struct ProcessParser<'a, 'd, 'e> {
    refs: &'a Refs,
    doc: &'a Document<'d>,
    errors: &'e mut Vec<BpmnError>,
    error_count_at_start: usize,
    /// Ids of flow nodes already rejected: flows to them are not reported again.
    rejected: std::collections::HashSet<String>,
    /// Boundary events to attach once every element is known: (element index, attachedToRef).
    attachments: Vec<(usize, String)>,
}

impl<'a, 'd, 'e> ProcessParser<'a, 'd, 'e> {
    fn new(doc: &'a Document<'d>, errors: &'e mut Vec<BpmnError>, refs: &'a Refs) -> Self {
        let error_count_at_start = errors.len();
        Self { refs, doc, errors, error_count_at_start, rejected: Default::default(), attachments: Vec::new() }
    }

    fn fail(&mut self, node: Node, message: impl Into<String>) {
        self.errors.push(error(self.doc, node, message.into()));
    }

    fn parse(mut self, process: Node<'a, 'd>) -> Option<Process> {
        let id = process.attribute("id").unwrap_or_default().to_string();
        if id.is_empty() {
            self.fail(process, "Attribute 'id' must be present and not empty");
        }
        let mut elements = Vec::new();
        let mut element_nodes = Vec::new();
        let mut flow_nodes = Vec::new();
        self.collect(process, None, &mut elements, &mut element_nodes, &mut flow_nodes);
        let mut index: HashMap<String, usize> = HashMap::new();
        for (i, e) in elements.iter().enumerate() {
            if index.insert(e.id.clone(), i).is_some() {
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
        self.attach_boundary_events(&element_nodes, &mut elements, &index);
        let start = self.start_event(process, &elements, None);
        for i in 0..elements.len() {
            if matches!(elements[i].kind, ElementKind::SubProcess { .. }) {
                if let Some(start) = self.start_event(element_nodes[i], &elements, Some(i)) {
                    elements[i].kind = ElementKind::SubProcess { start };
                }
            }
        }
        self.link_gateways(&element_nodes, &mut elements, &flows, &flow_lines, &flow_ids);
        if self.errors.len() > self.error_count_at_start {
            return None;
        }
        let name = process.attribute("name").map(str::to_string);
        Some(Process { id, name, elements, flows, start: start? })
    }

    /// Flow elements of a process or subprocess, depth first; subprocess contents follow their
    /// subprocess, with `scope` set to its index.
    fn collect<'n>(
        &mut self,
        container: Node<'n, 'd>,
        scope: Option<usize>,
        elements: &mut Vec<Element>,
        element_nodes: &mut Vec<Node<'n, 'd>>,
        flow_nodes: &mut Vec<Node<'n, 'd>>,
    ) {
        for child in container.children().filter(|n| n.is_element()) {
            if child.tag_name().namespace() != Some(BPMN_NS) {
                continue;
            }
            let tag = child.tag_name().name();
            if tag == "sequenceFlow" {
                flow_nodes.push(child);
            } else if IGNORED.contains(&tag) {
                continue;
            } else if let Some(mut element) = self.element(child) {
                element.scope = scope;
                let index = elements.len();
                if let ElementKind::BoundaryEvent { .. } = element.kind {
                    let attached = child.attribute("attachedToRef").unwrap_or_default().to_string();
                    self.attachments.push((index, attached));
                }
                let is_subprocess = matches!(element.kind, ElementKind::SubProcess { .. });
                elements.push(element);
                element_nodes.push(child);
                if is_subprocess {
                    self.collect(child, Some(index), elements, element_nodes, flow_nodes);
                }
            } else if let Some(id) = child.attribute("id") {
                self.rejected.insert(id.to_string());
            }
        }
    }

    /// Links boundary events to their activities (which must be tasks or subprocesses).
    fn attach_boundary_events(&mut self, nodes: &[Node], elements: &mut [Element], index: &HashMap<String, usize>) {
        for (i, attached) in std::mem::take(&mut self.attachments) {
            let Some(&target) = index.get(attached.as_str()) else {
                self.fail(
                    nodes[i],
                    format!("Attribute 'attachedToRef' refers to '{attached}', which is not a supported activity of this process"),
                );
                continue;
            };
            if !elements[target].is_activity() {
                self.fail(nodes[i], format!("Boundary events can only be attached to activities, but '{attached}' is not an activity"));
                continue;
            }
            if !elements[i].incoming.is_empty() {
                self.fail(nodes[i], "Boundary events must not have incoming sequence flows");
            }
            elements[target].boundary_events.push(i);
            elements[i].scope = elements[target].scope;
            if let ElementKind::BoundaryEvent { attached_to, .. } = &mut elements[i].kind {
                *attached_to = target;
            }
        }
    }

    fn start_event(&mut self, process: Node, elements: &[Element], scope: Option<usize>) -> Option<usize> {
        let starts: Vec<usize> = elements
            .iter()
            .enumerate()
            .filter(|(_, e)| e.scope == scope && matches!(e.kind, ElementKind::StartEvent))
            .map(|(i, _)| i)
            .collect();
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

    fn flow_end(&mut self, node: Node, attribute: &str, index: &HashMap<String, usize>) -> Option<usize> {
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
        let definition = node.children().find(|n| n.is_element() && n.tag_name().name().ends_with("EventDefinition"));
        let definition_name = definition.map(|d| d.tag_name().name());
        let kind = match (tag, definition_name) {
            ("startEvent", None) => ElementKind::StartEvent,
            ("endEvent", None) => ElementKind::EndEvent,
            ("endEvent", Some("terminateEventDefinition")) => ElementKind::TerminateEndEvent,
            ("endEvent", Some("errorEventDefinition")) => {
                let definition = definition.expect("definition");
                match self.error_code(definition) {
                    Some(code) => ElementKind::ErrorEndEvent { error_code: code },
                    None => {
                        self.fail(node, "Must reference an error with an error code ('errorRef' of the errorEventDefinition)");
                        return None;
                    }
                }
            }
            ("intermediateCatchEvent", Some("timerEventDefinition" | "messageEventDefinition")) => {
                ElementKind::IntermediateCatchEvent(self.trigger(node, definition.expect("definition"))?)
            }
            ("intermediateThrowEvent", None) => ElementKind::IntermediateThrowEvent,
            ("boundaryEvent", Some("timerEventDefinition" | "messageEventDefinition" | "errorEventDefinition")) => {
                let cancel_activity = node.attribute("cancelActivity") != Some("false");
                let trigger = self.trigger(node, definition.expect("definition"))?;
                if matches!(trigger, EventTrigger::Error { .. }) && !cancel_activity {
                    self.fail(node, "Error boundary events must be interrupting ('cancelActivity' must not be 'false')");
                    return None;
                }
                ElementKind::BoundaryEvent { attached_to: usize::MAX, cancel_activity, trigger }
            }
            ("receiveTask", _) => ElementKind::ReceiveTask(self.message(node, node.attribute("messageRef"))?),
            ("serviceTask", _) => ElementKind::ServiceTask(self.task_definition(node)?),
            ("exclusiveGateway", _) => ElementKind::ExclusiveGateway { default_flow: None },
            ("parallelGateway", _) => ElementKind::ParallelGateway,
            ("subProcess", _) => {
                if node.attribute("triggeredByEvent") == Some("true") {
                    self.fail(node, "Event subprocesses are currently not supported");
                    return None;
                }
                ElementKind::SubProcess { start: usize::MAX }
            }
            ("startEvent" | "endEvent" | "intermediateCatchEvent" | "intermediateThrowEvent" | "boundaryEvent", Some(def)) => {
                let event = match tag {
                    "startEvent" => "Start events",
                    "endEvent" => "End events",
                    "intermediateCatchEvent" => "Intermediate catch events",
                    "intermediateThrowEvent" => "Intermediate throw events",
                    _ => "Boundary events",
                };
                self.fail(node, format!("{event} with '{def}' are currently not supported"));
                return None;
            }
            ("intermediateCatchEvent" | "boundaryEvent", None) => {
                self.fail(node, "Must have an event definition (timer, message or error)");
                return None;
            }
            (other, _) => {
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
        Some(Element {
            id,
            name: node.attribute("name").map(str::to_string),
            kind,
            incoming: vec![],
            outgoing: vec![],
            inputs,
            outputs,
            scope: None,
            boundary_events: vec![],
        })
    }

    /// The `errorCode` of the `bpmn:error` an errorEventDefinition references (None: no
    /// reference, or a reference without a code).
    fn error_code(&self, definition: Node) -> Option<String> {
        let error_ref = definition.attribute("errorRef")?;
        self.refs.errors.get(error_ref).cloned().flatten().filter(|c| !c.is_empty())
    }

    fn trigger(&mut self, node: Node, definition: Node) -> Option<EventTrigger> {
        match definition.tag_name().name() {
            "timerEventDefinition" => Some(EventTrigger::Timer(self.timer(node, definition)?)),
            "messageEventDefinition" => Some(EventTrigger::Message(self.message(node, definition.attribute("messageRef"))?)),
            _ => {
                if let Some(error_ref) = definition.attribute("errorRef") {
                    if self.error_code(definition).is_none() {
                        self.fail(node, format!("The referenced error '{error_ref}' must exist and have an 'errorCode'"));
                        return None;
                    }
                }
                Some(EventTrigger::Error { error_code: self.error_code(definition) })
            }
        }
    }

    fn timer(&mut self, node: Node, definition: Node) -> Option<TimerDefinition> {
        let children: Vec<Node> = definition.children().filter(|n| n.is_element()).collect();
        let [child] = children.as_slice() else {
            self.fail(node, "Must have exactly one of 'timeDuration', 'timeDate' or 'timeCycle'");
            return None;
        };
        let text = child.text().unwrap_or_default().trim();
        let value = self.expr_or_static(node, text);
        let kind = child.tag_name().name();
        if let ExprOrStatic::Static(text) = &value {
            let valid = match kind {
                "timeDuration" => crate::timer::parse_duration(text).is_some(),
                "timeDate" => crate::timer::parse_date(text).is_some(),
                "timeCycle" => crate::timer::parse_cycle(text).is_some(),
                _ => false,
            };
            if !valid {
                let what = match kind {
                    "timeDate" => "date and time",
                    "timeCycle" => "repeating interval (R<n>/<duration>)",
                    _ => "duration",
                };
                self.fail(node, format!("Invalid timer {kind} '{text}': expected an ISO 8601 {what}"));
                return None;
            }
        }
        Some(match kind {
            "timeDuration" => TimerDefinition::Duration(value),
            "timeDate" => TimerDefinition::Date(value),
            "timeCycle" => TimerDefinition::Cycle(value),
            other => {
                self.fail(node, format!("Unknown timer definition '{other}'"));
                return None;
            }
        })
    }

    fn message(&mut self, node: Node, message_ref: Option<&str>) -> Option<MessageDefinition> {
        let Some((name, correlation_key)) = message_ref.and_then(|r| self.refs.messages.get(r)).cloned() else {
            self.fail(node, "Must reference a message ('messageRef' to a 'bpmn:message')");
            return None;
        };
        let Some(name) = name.filter(|n| !n.trim().is_empty()) else {
            self.fail(node, "Must reference a message with a name");
            return None;
        };
        let Some(correlation_key) = correlation_key.filter(|c| !c.trim().is_empty()) else {
            self.fail(node, "Must have a correlation key ('correlationKey' of the message's 'zeebe:subscription')");
            return None;
        };
        let name = self.expr_or_static(node, name.trim());
        let correlation_key = self.expression(node, correlation_key.trim(), true)?;
        Some(MessageDefinition { name, correlation_key })
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
