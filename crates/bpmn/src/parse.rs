//! XML → [`Process`]: reads the BPMN and Zeebe namespaces, validates, links by index.

use std::collections::HashMap;

use roxmltree::{Document, Node};
use waggle_feel::Expression;

use crate::model::{
    CalledBinding, CalledElement, Element, ElementKind, EventTrigger, ExprOrStatic, Mapping, MessageDefinition, MultiInstance, Process,
    SequenceFlow, TaskDefinition, TimerDefinition,
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
    // references to the flows of a flow node, as modelers write them; the flows say the same
    "incoming",
    "outgoing",
    // a subprocess's own loop characteristics (read with the subprocess)
    "multiInstanceLoopCharacteristics",
    "standardLoopCharacteristics",
];

/// Bounds on what a deployed resource may ask of the parser and of the engine that runs it:
/// every walk over a model's nesting recurses, so nesting is bounded instead of overflowing the
/// stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParseLimits {
    /// Deepest nesting of XML elements (`definitions` is at depth 1; each embedded subprocess
    /// is one level deeper than its parent). Deeper documents are rejected.
    pub max_element_depth: usize,
}

impl ParseLimits {
    /// The highest `max_element_depth` a node may be configured with: the recursion of the
    /// parser and of the engine over nested scopes stays well within a thread's 2 MB stack.
    pub const MAX_ELEMENT_DEPTH_CEILING: usize = 1_000;

    /// The most permissive limits: those stored models are parsed again with (a model accepted
    /// by any configuration must parse again after the limit was lowered).
    pub const CEILING: ParseLimits = ParseLimits { max_element_depth: Self::MAX_ELEMENT_DEPTH_CEILING };
}

impl Default for ParseLimits {
    fn default() -> Self {
        ParseLimits { max_element_depth: 100 }
    }
}

/// Most segments of a mapping's target path (`a.b.c` has three): each nests the variable one
/// level deeper, and a variable's JSON is read back only up to 128 levels.
pub const MAX_TARGET_PATH_SEGMENTS: usize = 100;

/// Parses a `bpmn:definitions` document with the default [`ParseLimits`].
pub fn parse_definitions(xml: &[u8]) -> Result<Vec<Process>, Vec<BpmnError>> {
    parse_definitions_with(xml, &ParseLimits::default())
}

/// Parses a `bpmn:definitions` document and returns its executable processes, or every error
/// found (all of them, not just the first, as Zeebe reports them).
pub fn parse_definitions_with(xml: &[u8], limits: &ParseLimits) -> Result<Vec<Process>, Vec<BpmnError>> {
    let text = std::str::from_utf8(xml).map_err(|e| {
        vec![BpmnError { element_id: "definitions".into(), line: 1, message: format!("The resource is not valid UTF-8: {e}") }]
    })?;
    let lines = Lines::new(text);
    depth::check(text, limits.max_element_depth).map_err(|refusal| {
        let (offset, message) = match refusal {
            depth::Refusal::TooDeep { offset } => (
                offset,
                format!(
                    "The XML elements are nested deeper than the limit of {} levels (max_bpmn_element_depth); nest fewer subprocesses",
                    limits.max_element_depth
                ),
            ),
            depth::Refusal::MarkupInEntity { offset } => {
                (offset, "Entities whose replacement text holds markup ('<') are not supported".to_string())
            }
        };
        vec![BpmnError { element_id: "definitions".into(), line: lines.at(offset), message }]
    })?;
    let doc = Document::parse(text).map_err(|e| {
        let pos = e.pos();
        vec![BpmnError { element_id: "definitions".into(), line: pos.row, message: format!("Invalid XML: {e}") }]
    })?;
    let root = doc.root_element();
    if !is_bpmn(root, "definitions") {
        return Err(vec![error(
            &lines,
            root,
            format!("Expected a 'definitions' element of namespace '{BPMN_NS}', but found '{}'", root.tag_name().name()),
        )]);
    }
    let mut errors = Vec::new();
    let mut processes = Vec::new();
    let refs = Refs::read(&lines, root);
    for node in root.children().filter(|n| is_bpmn(*n, "process")) {
        if node.attribute("isExecutable") != Some("true") {
            continue;
        }
        match ProcessParser::new(&lines, &mut errors, &refs).parse(node) {
            Some(p) => processes.push(p),
            None => continue,
        }
    }
    if errors.is_empty() && processes.is_empty() {
        errors.push(error(&lines, root, "Must contain at least one executable process".into()));
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

/// Line numbers by byte offset, from the offsets of the document's line breaks (roxmltree's
/// `text_pos_at` reads the text from its start on every call: one call per flow made parsing
/// a model of many flows quadratic in its size).
struct Lines {
    breaks: Vec<usize>,
}

impl Lines {
    fn new(text: &str) -> Lines {
        Lines { breaks: text.bytes().enumerate().filter(|(_, b)| *b == b'\n').map(|(i, _)| i).collect() }
    }

    /// The 1-based line of a node's start.
    fn of(&self, node: Node) -> u32 {
        self.at(node.range().start)
    }

    /// The 1-based line of a byte offset.
    fn at(&self, offset: usize) -> u32 {
        (self.breaks.partition_point(|&b| b < offset) + 1) as u32
    }
}

fn error(lines: &Lines, node: Node, message: String) -> BpmnError {
    let element_id = node.attribute("id").unwrap_or(node.tag_name().name()).to_string();
    BpmnError { element_id, line: lines.of(node), message }
}

/// `bpmn:message` and `bpmn:error` definitions, by id.
struct Refs {
    /// id → (name, `zeebe:subscription` correlation key, line)
    messages: HashMap<String, (Option<String>, Option<String>, u32)>,
    /// id → errorCode
    errors: HashMap<String, Option<String>>,
    /// id → escalationCode
    escalations: HashMap<String, Option<String>>,
    /// id → signal name
    signals: HashMap<String, Option<String>>,
}

impl Refs {
    fn read(lines: &Lines, root: Node) -> Refs {
        let mut refs = Refs { messages: HashMap::new(), errors: HashMap::new(), escalations: HashMap::new(), signals: HashMap::new() };
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
                refs.messages.insert(id.to_string(), (node.attribute("name").map(str::to_string), correlation_key, lines.of(node)));
            } else if is_bpmn(node, "error") {
                refs.errors.insert(id.to_string(), node.attribute("errorCode").map(str::to_string));
            } else if is_bpmn(node, "escalation") {
                refs.escalations.insert(id.to_string(), node.attribute("escalationCode").map(str::to_string));
            } else if is_bpmn(node, "signal") {
                refs.signals.insert(id.to_string(), node.attribute("name").map(str::to_string));
            }
        }
        refs
    }
}

struct ProcessParser<'a, 'd, 'e> {
    refs: &'a Refs,
    lines: &'a Lines,
    errors: &'e mut Vec<BpmnError>,
    error_count_at_start: usize,
    /// Ids of flow nodes already rejected: flows to them are not reported again.
    rejected: std::collections::HashSet<String>,
    /// Boundary events to attach once every element is known: (element index, attachedToRef).
    attachments: Vec<(usize, String)>,
    /// The elements of each scope (`None`: the process), in document order.
    scopes: HashMap<Option<usize>, Vec<usize>>,
    _input: std::marker::PhantomData<&'d str>,
}

impl<'a, 'd, 'e> ProcessParser<'a, 'd, 'e> {
    fn new(lines: &'a Lines, errors: &'e mut Vec<BpmnError>, refs: &'a Refs) -> Self {
        let error_count_at_start = errors.len();
        Self {
            refs,
            lines,
            errors,
            error_count_at_start,
            rejected: Default::default(),
            attachments: Vec::new(),
            scopes: HashMap::new(),
            _input: std::marker::PhantomData,
        }
    }

    fn fail(&mut self, node: Node, message: impl Into<String>) {
        self.errors.push(error(self.lines, node, message.into()));
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
                flow_lines.push(self.lines.of(*node));
                flows.push(SequenceFlow { id: flow_id, source, target, condition });
            }
        }
        for (i, flow) in flows.iter().enumerate() {
            elements[flow.source].outgoing.push(i);
            elements[flow.target].incoming.push(i);
        }
        // Zeebe's model walker visits sibling elements last to first, so an element's outgoing
        // flows are in reverse document order: an exclusive gateway takes the true condition
        // whose flow comes last in the document, and forks start their branches in that order
        for element in &mut elements {
            element.outgoing.reverse();
        }
        self.attach_boundary_events(&element_nodes, &mut elements, &index);
        compensation::link(&mut self, process, &element_nodes, &mut elements, &index);
        for (i, e) in elements.iter().enumerate() {
            self.scopes.entry(e.scope).or_default().push(i);
        }
        let start = self.process_start_event(process, &element_nodes, &elements);
        for i in 0..elements.len() {
            match elements[i].kind {
                ElementKind::SubProcess { .. } => {
                    if let Some(start) = self.start_event(element_nodes[i], &element_nodes, &elements, Some(i)) {
                        elements[i].kind = ElementKind::SubProcess { start };
                    }
                }
                ElementKind::EventSubProcess { .. } => {
                    if let Some(start) = self.event_subprocess_start(element_nodes[i], &element_nodes, &elements, i) {
                        elements[i].kind = ElementKind::EventSubProcess { start };
                    }
                }
                _ => {}
            }
        }
        self.link_gateways(&element_nodes, &mut elements, &flows, &flow_lines, &flow_ids);
        self.check_event_based_gateways(&element_nodes, &elements, &flows);
        self.link_links(&element_nodes, &mut elements);
        if self.errors.len() > self.error_count_at_start {
            return None;
        }
        let name = process.attribute("name").map(str::to_string);
        let mut parsed = Process::new(id, name, elements, flows, start);
        parsed.version_tag = self
            .extensions(process)
            .find(|n| is_zeebe(*n, "versionTag"))
            .and_then(|n| n.attribute("value"))
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .map(str::to_string);
        Some(parsed)
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
            } else if let Some(index) = self.collect_element(child, scope, elements, element_nodes) {
                self.collect(child, Some(index), elements, element_nodes, flow_nodes);
            }
        }
    }

    /// Adds flow element `child` of `scope`; the index of a subprocess, whose contents come
    /// next. Never inlined: `collect` recurses once per nesting level, and an `Element` on each
    /// of its frames made a model nested to the ceiling overflow the stack.
    #[inline(never)]
    fn collect_element<'n>(
        &mut self,
        child: Node<'n, 'd>,
        scope: Option<usize>,
        elements: &mut Vec<Element>,
        element_nodes: &mut Vec<Node<'n, 'd>>,
    ) -> Option<usize> {
        let Some(mut element) = self.element(child) else {
            if let Some(id) = child.attribute("id") {
                self.rejected.insert(id.to_string());
            }
            return None;
        };
        element.scope = scope;
        let index = elements.len();
        if let ElementKind::BoundaryEvent { .. } | ElementKind::CompensationBoundaryEvent { .. } = element.kind {
            let attached = child.attribute("attachedToRef").unwrap_or_default().to_string();
            self.attachments.push((index, attached));
        }
        let is_subprocess = matches!(element.kind, ElementKind::SubProcess { .. } | ElementKind::EventSubProcess { .. });
        elements.push(element);
        element_nodes.push(child);
        is_subprocess.then_some(index)
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
            if let ElementKind::BoundaryEvent { attached_to, .. } | ElementKind::CompensationBoundaryEvent { attached_to, .. } =
                &mut elements[i].kind
            {
                *attached_to = target;
            }
        }
    }

    /// The process's none start event: optional when it has timer, message or signal start
    /// events (which may only start the process itself, not error or escalation ones).
    fn process_start_event(&mut self, process: Node, nodes: &[Node], elements: &[Element]) -> Option<usize> {
        let mut has_event_start = false;
        for (i, e) in elements.iter().enumerate() {
            if e.scope.is_some() {
                continue;
            }
            if let ElementKind::EventStartEvent { trigger, .. } = &e.kind {
                has_event_start = true;
                if matches!(trigger, EventTrigger::Error { .. } | EventTrigger::Escalation { .. }) {
                    self.fail(nodes[i], "Start events of a process must be none, timer, message or signal start events; error and escalation start events are only allowed in event subprocesses");
                }
            }
        }
        let nones = elements.iter().filter(|e| e.scope.is_none() && matches!(e.kind, ElementKind::StartEvent)).count();
        if nones == 0 && has_event_start {
            return None;
        }
        self.start_event(process, nodes, elements, None)
    }

    /// The none start event of a scope (the process or an embedded subprocess): exactly one.
    fn start_event(&mut self, container: Node, nodes: &[Node], elements: &[Element], scope: Option<usize>) -> Option<usize> {
        let members = self.scopes.get(&scope).cloned().unwrap_or_default();
        if scope.is_some() {
            for &i in &members {
                if matches!(elements[i].kind, ElementKind::EventStartEvent { .. }) {
                    self.fail(nodes[i], "Start events of an embedded subprocess must be none start events");
                }
            }
        }
        let starts: Vec<usize> = members.into_iter().filter(|&i| matches!(elements[i].kind, ElementKind::StartEvent)).collect();
        match starts.len() {
            1 => Some(starts[0]),
            0 => {
                self.fail(container, "Must have at least one start event");
                None
            }
            _ => {
                self.fail(container, "Multiple none start events are not allowed");
                None
            }
        }
    }

    /// The start event of an event subprocess: exactly one, with a trigger; no flows in or out.
    fn event_subprocess_start(&mut self, container: Node, nodes: &[Node], elements: &[Element], esp: usize) -> Option<usize> {
        if !elements[esp].incoming.is_empty() || !elements[esp].outgoing.is_empty() {
            self.fail(container, "An event subprocess must not have incoming or outgoing sequence flows");
        }
        let mut found = None;
        for i in self.scopes.get(&Some(esp)).cloned().unwrap_or_default() {
            match elements[i].kind {
                ElementKind::StartEvent => {
                    self.fail(nodes[i], "Start events in event subprocesses must be one of: message, timer, error, escalation or signal start events; a none start event is not allowed");
                    return None;
                }
                ElementKind::EventStartEvent { .. } if found.is_some() => {
                    self.fail(container, "An event subprocess must have exactly one start event");
                    return None;
                }
                ElementKind::EventStartEvent { .. } => found = Some(i),
                _ => {}
            }
        }
        if found.is_none() {
            self.fail(container, "An event subprocess must have exactly one start event");
        }
        found
    }

    /// The targets of an event-based gateway's flows must be timer, message or signal catch
    /// events reached only from it; at least two of them.
    fn check_event_based_gateways(&mut self, nodes: &[Node], elements: &[Element], flows: &[SequenceFlow]) {
        for (i, e) in elements.iter().enumerate() {
            if !matches!(e.kind, ElementKind::EventBasedGateway) {
                continue;
            }
            if e.outgoing.len() < 2 {
                self.fail(nodes[i], "Event-based gateway must have at least 2 outgoing sequence flows");
            }
            for &f in &e.outgoing {
                let target = &elements[flows[f].target];
                if flows[f].condition.is_some() {
                    self.fail(nodes[i], "Event-based gateway must not have an outgoing sequence flow with a condition");
                }
                if !matches!(target.kind, ElementKind::IntermediateCatchEvent(_)) {
                    self.fail(
                        nodes[i],
                        format!("Event-based gateway must not have an outgoing sequence flow to other elements than message, timer or signal intermediate catch events, but '{}' is not", target.id),
                    );
                } else if target.incoming.len() > 1 {
                    self.fail(
                        nodes[flows[f].target],
                        "A catch event after an event-based gateway must not have other incoming sequence flows",
                    );
                }
            }
        }
    }

    /// Points every link throw event at the link catch event of its name in its scope.
    fn link_links(&mut self, nodes: &[Node], elements: &mut [Element]) {
        let link_name = |node: Node| -> String {
            node.children().find(|n| is_bpmn(*n, "linkEventDefinition")).and_then(|d| d.attribute("name")).unwrap_or_default().to_string()
        };
        let mut catches: HashMap<(Option<usize>, String), usize> = HashMap::new();
        for (i, e) in elements.iter().enumerate() {
            if matches!(e.kind, ElementKind::LinkCatchEvent) {
                let name = link_name(nodes[i]);
                if name.is_empty() {
                    self.fail(nodes[i], "A link catch event must have a link name ('name' of its linkEventDefinition)");
                } else if catches.insert((e.scope, name.clone()), i).is_some() {
                    self.fail(nodes[i], format!("Multiple intermediate catch link events with the same name '{name}' are not allowed"));
                }
            }
        }
        for i in 0..elements.len() {
            if let ElementKind::LinkThrowEvent { .. } = elements[i].kind {
                let name = link_name(nodes[i]);
                match catches.get(&(elements[i].scope, name.clone())) {
                    Some(&target) => elements[i].kind = ElementKind::LinkThrowEvent { target },
                    None => self.fail(nodes[i], format!("Can't find a catch link event for the throw link event with the name '{name}'")),
                }
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
            let inclusive = match elements[i].kind {
                ElementKind::ExclusiveGateway { .. } => false,
                ElementKind::InclusiveGateway { .. } => true,
                _ => continue,
            };
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
                            message: format!(
                                "Must have a condition expression or be the default flow of the {} gateway",
                                if inclusive { "inclusive" } else { "exclusive" }
                            ),
                        });
                    }
                }
            }
            elements[i].kind =
                if inclusive { ElementKind::InclusiveGateway { default_flow } } else { ElementKind::ExclusiveGateway { default_flow } };
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
            (
                "startEvent",
                Some(
                    "timerEventDefinition"
                    | "messageEventDefinition"
                    | "signalEventDefinition"
                    | "errorEventDefinition"
                    | "escalationEventDefinition",
                ),
            ) => {
                let interrupting = node.attribute("isInterrupting") != Some("false");
                let trigger = self.trigger(node, definition.expect("definition"))?;
                if matches!(trigger, EventTrigger::Error { .. }) && !interrupting {
                    self.fail(node, "Error start events must be interrupting ('isInterrupting' must not be 'false')");
                    return None;
                }
                ElementKind::EventStartEvent { trigger, interrupting }
            }
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
            ("endEvent" | "intermediateThrowEvent", Some("escalationEventDefinition")) => {
                let definition = definition.expect("definition");
                let code = definition.attribute("escalationRef").and_then(|r| self.refs.escalations.get(r).cloned().flatten());
                match code.filter(|c| !c.trim().is_empty()) {
                    Some(code) => ElementKind::EscalationThrowEvent { code, end: tag == "endEvent" },
                    None => {
                        self.fail(
                            node,
                            "Must reference an escalation with an escalation code ('escalationRef' of the escalationEventDefinition)",
                        );
                        return None;
                    }
                }
            }
            ("endEvent" | "intermediateThrowEvent", Some("signalEventDefinition")) => {
                let name = self.signal_name(node, definition.expect("definition"))?;
                ElementKind::SignalThrowEvent { name, end: tag == "endEvent" }
            }
            ("endEvent" | "intermediateThrowEvent", Some("messageEventDefinition")) => {
                let element_type = if tag == "endEvent" { "END_EVENT" } else { "INTERMEDIATE_THROW_EVENT" };
                ElementKind::JobElement { def: self.task_definition(node)?, element_type }
            }
            ("intermediateThrowEvent", Some("linkEventDefinition")) => ElementKind::LinkThrowEvent { target: usize::MAX },
            ("intermediateCatchEvent", Some("linkEventDefinition")) => ElementKind::LinkCatchEvent,
            ("intermediateCatchEvent", Some("timerEventDefinition" | "messageEventDefinition" | "signalEventDefinition")) => {
                ElementKind::IntermediateCatchEvent(self.trigger(node, definition.expect("definition"))?)
            }
            ("intermediateThrowEvent", None) => ElementKind::IntermediateThrowEvent,
            (
                "boundaryEvent",
                Some(
                    "timerEventDefinition"
                    | "messageEventDefinition"
                    | "errorEventDefinition"
                    | "escalationEventDefinition"
                    | "signalEventDefinition",
                ),
            ) => {
                let cancel_activity = node.attribute("cancelActivity") != Some("false");
                let trigger = self.trigger(node, definition.expect("definition"))?;
                if matches!(trigger, EventTrigger::Error { .. }) && !cancel_activity {
                    self.fail(node, "Error boundary events must be interrupting ('cancelActivity' must not be 'false')");
                    return None;
                }
                ElementKind::BoundaryEvent { attached_to: usize::MAX, cancel_activity, trigger }
            }
            ("boundaryEvent", Some("compensateEventDefinition")) => {
                ElementKind::CompensationBoundaryEvent { attached_to: usize::MAX, handler: usize::MAX }
            }
            ("intermediateThrowEvent" | "endEvent", Some("compensateEventDefinition")) => {
                // Zeebe 8.5 always waits for the handlers (its CompensationEventTest)
                if definition.and_then(|d| d.attribute("waitForCompletion")) == Some("false") {
                    let what = if tag == "endEvent" { "A compensation end event" } else { "A compensation intermediate throwing event" };
                    self.fail(node, format!("{what} waitForCompletion attribute must be true or not present"));
                    return None;
                }
                ElementKind::CompensationThrowEvent { activity: None, end: tag == "endEvent" }
            }
            ("startEvent", Some("compensateEventDefinition")) => {
                // no compensation event subprocesses in Zeebe 8.5
                self.fail(node, "Start events in event subprocesses must be one of: message, timer, error, signal or escalation");
                return None;
            }
            ("receiveTask", _) => ElementKind::ReceiveTask(self.message(node, node.attribute("messageRef"))?),
            ("serviceTask", _) => ElementKind::ServiceTask(self.task_definition(node)?),
            ("scriptTask", _)
                if self.extensions(node).any(|n| is_zeebe(n, "script"))
                    || !self.extensions(node).any(|n| is_zeebe(n, "taskDefinition")) =>
            {
                self.script_task(node)?
            }
            ("businessRuleTask", _)
                if self.extensions(node).any(|n| is_zeebe(n, "calledDecision"))
                    || !self.extensions(node).any(|n| is_zeebe(n, "taskDefinition")) =>
            {
                self.business_rule_task(node)?
            }
            ("task", _) => ElementKind::PlainTask { element_type: "TASK" },
            ("manualTask", _) => ElementKind::PlainTask { element_type: "MANUAL_TASK" },
            ("sendTask" | "scriptTask" | "businessRuleTask", _) => {
                let element_type = match tag {
                    "sendTask" => "SEND_TASK",
                    "scriptTask" => "SCRIPT_TASK",
                    _ => "BUSINESS_RULE_TASK",
                };
                let has_job = self.extensions(node).any(|n| is_zeebe(n, "taskDefinition"));
                if !has_job {
                    self.fail(
                        node,
                        format!("Elements of type '{tag}' are currently only supported with a 'zeebe:taskDefinition' (a job worker)"),
                    );
                    return None;
                }
                ElementKind::JobElement { def: self.task_definition(node)?, element_type }
            }
            ("userTask", _) if self.extensions(node).any(|n| is_zeebe(n, "userTask")) => self.zeebe_user_task(node)?,
            ("userTask", _) => ElementKind::JobElement { def: self.user_task(node)?, element_type: "USER_TASK" },
            ("callActivity", _) => ElementKind::CallActivity(self.called_element(node)?),
            ("exclusiveGateway", _) => ElementKind::ExclusiveGateway { default_flow: None },
            ("inclusiveGateway", _) => ElementKind::InclusiveGateway { default_flow: None },
            ("parallelGateway", _) => ElementKind::ParallelGateway,
            ("eventBasedGateway", _) => ElementKind::EventBasedGateway,
            ("subProcess", _) if node.attribute("triggeredByEvent") == Some("true") => ElementKind::EventSubProcess { start: usize::MAX },
            ("subProcess", _) => ElementKind::SubProcess { start: usize::MAX },
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
                self.fail(node, "Must have an event definition (timer, message, signal, link, error or escalation)");
                return None;
            }
            (other, _) => {
                self.fail(node, format!("Elements of type '{other}' are currently not supported"));
                return None;
            }
        };
        let mut multi_instance = None;
        for child in node.children().filter(|n| n.is_element()) {
            let name = child.tag_name().name();
            if name == "multiInstanceLoopCharacteristics" && kind.supports_multi_instance() {
                multi_instance = Some(self.multi_instance(child)?);
            } else if name.ends_with("LoopCharacteristics") {
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
            multi_instance,
        })
    }

    /// `zeebe:calledElement` of a call activity: exactly one, with a `processId`; `bindingType`
    /// `latest` (the default), `deployment` or `versionTag` (with a `versionTag`).
    fn called_element(&mut self, node: Node) -> Option<CalledElement> {
        let called: Vec<Node> = self.extensions(node).filter(|n| is_zeebe(*n, "calledElement")).collect();
        let [called] = called.as_slice() else {
            self.fail(node, "Must have exactly one 'zeebe:calledElement' extension element");
            return None;
        };
        let Some(process_id) = called.attribute("processId").map(str::trim).filter(|v| !v.is_empty()) else {
            self.fail(node, "Attribute 'processId' must be present and not empty");
            return None;
        };
        let process_id = self.expr_or_static(node, process_id);
        let flag = |attribute: &str| called.attribute(attribute).map(str::trim) != Some("false");
        let binding = match called.attribute("bindingType").map(str::trim) {
            None | Some("latest") => CalledBinding::Latest,
            Some("deployment") => CalledBinding::Deployment,
            Some("versionTag") => match called.attribute("versionTag").map(str::trim).filter(|v| !v.is_empty()) {
                Some(tag) => CalledBinding::VersionTag(tag.to_string()),
                None => {
                    self.fail(node, "Attribute 'versionTag' must be present and not empty if 'bindingType' is 'versionTag'");
                    return None;
                }
            },
            Some(other) => {
                self.fail(
                    node,
                    format!("Attribute 'bindingType' must be one of 'latest', 'deployment' or 'versionTag', but was '{other}'"),
                );
                return None;
            }
        };
        Some(CalledElement {
            process_id,
            binding,
            propagate_all_child_variables: flag("propagateAllChildVariables"),
            propagate_all_parent_variables: flag("propagateAllParentVariables"),
        })
    }

    /// `multiInstanceLoopCharacteristics` (`node`) with its `zeebe:loopCharacteristics`.
    fn multi_instance(&mut self, node: Node) -> Option<MultiInstance> {
        let sequential = node.attribute("isSequential") == Some("true");
        let completion_condition = match node.children().find(|n| is_bpmn(*n, "completionCondition")) {
            Some(c) => Some(self.expression(c, c.text().unwrap_or_default().trim(), true)?),
            None => None,
        };
        let Some(zeebe) = self.extensions(node).find(|n| is_zeebe(*n, "loopCharacteristics")) else {
            self.fail(node, "Must have loop characteristics ('zeebe:loopCharacteristics' with an 'inputCollection')");
            return None;
        };
        let Some(collection) = zeebe.attribute("inputCollection").map(str::trim).filter(|c| !c.is_empty()) else {
            self.fail(zeebe, "Attribute 'inputCollection' must be present and not empty");
            return None;
        };
        let input_collection = self.expression(zeebe, collection, true)?;
        let name = |attribute: &str| zeebe.attribute(attribute).map(str::trim).filter(|v| !v.is_empty()).map(str::to_string);
        let input_element = name("inputElement");
        let output_collection = name("outputCollection");
        let output_element = match name("outputElement") {
            Some(text) => Some(self.expression(zeebe, &text, true)?),
            None => None,
        };
        if output_collection.is_some() != output_element.is_some() {
            self.fail(zeebe, "Attributes 'outputCollection' and 'outputElement' must be set together");
            return None;
        }
        Some(MultiInstance { sequential, input_collection, input_element, output_collection, output_element, completion_condition })
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
            "signalEventDefinition" => Some(EventTrigger::Signal { name: self.signal_name(node, definition)? }),
            "escalationEventDefinition" => {
                let code = match definition.attribute("escalationRef") {
                    None => None,
                    Some(r) => match self.refs.escalations.get(r).cloned().flatten().filter(|c| !c.trim().is_empty()) {
                        Some(code) => Some(code),
                        None => {
                            self.fail(node, format!("The referenced escalation '{r}' must exist and have an 'escalationCode'"));
                            return None;
                        }
                    },
                };
                Some(EventTrigger::Escalation { code })
            }
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

    /// The name of the `bpmn:signal` a signalEventDefinition references (static or `=expr`).
    fn signal_name(&mut self, node: Node, definition: Node) -> Option<ExprOrStatic> {
        let name = definition.attribute("signalRef").and_then(|r| self.refs.signals.get(r).cloned().flatten());
        match name.filter(|n| !n.trim().is_empty()) {
            Some(name) => Some(self.expr_or_static(node, name.trim())),
            None => {
                self.fail(node, "Must reference a signal with a name ('signalRef' of the signalEventDefinition)");
                None
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
                    "timeCycle" => "repeating interval (R<n>/<duration>) or cron expression",
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
        let Some((name, correlation_key, message_line)) = message_ref.and_then(|r| self.refs.messages.get(r)).cloned() else {
            self.fail(node, "Must reference a message ('messageRef' to a 'bpmn:message')");
            return None;
        };
        let Some(name) = name.filter(|n| !n.trim().is_empty()) else {
            self.fail(node, "Must reference a message with a name");
            return None;
        };
        // a message start event of the process itself has no correlation key: every message
        // of its name starts an instance
        let process_start = node.tag_name().name() == "startEvent" && node.parent_element().is_some_and(|p| is_bpmn(p, "process"));
        let correlation_key = match correlation_key.filter(|c| !c.trim().is_empty()) {
            Some(key) => Some(self.expression(node, key.trim(), true)?),
            None if process_start => None,
            None => {
                // reported on the message, as Zeebe does
                self.errors.push(BpmnError {
                    element_id: message_ref.unwrap_or_default().to_string(),
                    line: message_line,
                    message: "Must have exactly one 'zeebe:subscription' extension element with a 'correlationKey'".into(),
                });
                return None;
            }
        };
        let name = self.expr_or_static(node, name.trim());
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
                headers.push((key.to_string(), ExprOrStatic::Static(header.attribute("value").unwrap_or_default().to_string())));
            }
        }
        Some(TaskDefinition { job_type, retries, headers })
    }

    /// A script task evaluated by the engine (`zeebe:script`: a FEEL expression and the
    /// variable its result goes to), as in
    /// https://docs.camunda.io/docs/components/modeler/bpmn/script-tasks/; one with a
    /// `zeebe:taskDefinition` is a job worker's instead (not both, as Zeebe's
    /// `ScriptTaskValidator` says).
    fn script_task(&mut self, node: Node) -> Option<ElementKind> {
        let scripts: Vec<Node> = self.extensions(node).filter(|n| is_zeebe(*n, "script")).collect();
        let has_job = self.extensions(node).any(|n| is_zeebe(n, "taskDefinition"));
        let ([script], false) = (scripts.as_slice(), has_job) else {
            self.fail(node, "Must have either one 'zeebe:script' or one 'zeebe:taskDefinition' extension element");
            return None;
        };
        let text = script.attribute("expression").map(str::trim).unwrap_or_default();
        if text.is_empty() {
            self.fail(*script, "Attribute 'expression' must be present and not empty");
            return None;
        }
        let result_variable = script.attribute("resultVariable").map(str::trim).unwrap_or_default();
        if result_variable.is_empty() {
            self.fail(*script, "Attribute 'resultVariable' must be present and not empty");
            return None;
        }
        let expression = self.expression(*script, text, true)?;
        Some(ElementKind::ScriptTask { expression, result_variable: result_variable.to_string() })
    }

    /// A business rule task the engine evaluates (`zeebe:calledDecision`: the decision's id,
    /// static or `=` FEEL, and the variable its output goes to), as in
    /// https://docs.camunda.io/docs/components/modeler/bpmn/business-rule-tasks/; one with a
    /// `zeebe:taskDefinition` is a job worker's instead (not both).
    fn business_rule_task(&mut self, node: Node) -> Option<ElementKind> {
        let called: Vec<Node> = self.extensions(node).filter(|n| is_zeebe(*n, "calledDecision")).collect();
        let has_job = self.extensions(node).any(|n| is_zeebe(n, "taskDefinition"));
        let ([called], false) = (called.as_slice(), has_job) else {
            self.fail(node, "Must have either one 'zeebe:calledDecision' or one 'zeebe:taskDefinition' extension element");
            return None;
        };
        let decision_id = called.attribute("decisionId").map(str::trim).unwrap_or_default();
        if decision_id.is_empty() {
            self.fail(*called, "Attribute 'decisionId' must be present and not empty");
            return None;
        }
        let result_variable = called.attribute("resultVariable").map(str::trim).unwrap_or_default();
        if result_variable.is_empty() {
            self.fail(*called, "Attribute 'resultVariable' must be present and not empty");
            return None;
        }
        let decision_id = self.expr_or_static(*called, decision_id);
        Some(ElementKind::BusinessRuleTask { decision_id, result_variable: result_variable.to_string() })
    }

    /// A job-based user task, as Zeebe 8.5 runs it: a job of type `io.camunda.zeebe:userTask`
    /// (one retry) whose headers carry the form key and the assignment.
    fn user_task(&mut self, node: Node) -> Option<TaskDefinition> {
        if self.extensions(node).any(|n| is_zeebe(n, "userTask")) {
            self.fail(
                node,
                "Zeebe user tasks ('zeebe:userTask') are currently not supported; without it, the user task is a job-based user task",
            );
            return None;
        }
        let mut headers = Vec::new();
        for form in self.extensions(node).filter(|n| is_zeebe(*n, "formDefinition")) {
            if let Some(key) = form.attribute("formKey").filter(|k| !k.is_empty()) {
                headers.push(("io.camunda.zeebe:formKey".to_string(), self.expr_or_static(node, key)));
            } else if form.attribute("formId").is_some() {
                self.fail(node, "Linked forms ('formId' of 'zeebe:formDefinition') are currently not supported; use 'formKey'");
                return None;
            }
        }
        for assignment in self.extensions(node).filter(|n| is_zeebe(*n, "assignmentDefinition")) {
            for (attribute, header) in [
                ("assignee", "io.camunda.zeebe:assignee"),
                ("candidateGroups", "io.camunda.zeebe:candidateGroups"),
                ("candidateUsers", "io.camunda.zeebe:candidateUsers"),
            ] {
                let Some(value) = assignment.attribute(attribute).map(str::trim).filter(|v| !v.is_empty()) else { continue };
                let value = match self.expr_or_static(node, value) {
                    // a static list "a, b" becomes the JSON list Zeebe puts in the header
                    ExprOrStatic::Static(list) if attribute != "assignee" => {
                        let items: Vec<serde_json::Value> =
                            list.split(',').map(|s| serde_json::Value::String(s.trim().to_string())).collect();
                        ExprOrStatic::Static(serde_json::Value::Array(items).to_string())
                    }
                    other => other,
                };
                headers.push((header.to_string(), value));
            }
        }
        for schedule in self.extensions(node).filter(|n| is_zeebe(*n, "taskSchedule")) {
            for (attribute, header) in [("dueDate", "io.camunda.zeebe:dueDate"), ("followUpDate", "io.camunda.zeebe:followUpDate")] {
                if let Some(value) = schedule.attribute(attribute).map(str::trim).filter(|v| !v.is_empty()) {
                    headers.push((header.to_string(), self.expr_or_static(node, value)));
                }
            }
        }
        for list in self.extensions(node).filter(|n| is_zeebe(*n, "taskHeaders")) {
            for header in list.children().filter(|n| is_zeebe(*n, "header")) {
                let key = header.attribute("key").unwrap_or_default();
                if !key.is_empty() {
                    headers.push((key.to_string(), ExprOrStatic::Static(header.attribute("value").unwrap_or_default().to_string())));
                }
            }
        }
        Some(TaskDefinition {
            job_type: ExprOrStatic::Static("io.camunda.zeebe:userTask".into()),
            retries: ExprOrStatic::Static("1".into()),
            headers,
        })
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
            if target.split('.').count() > MAX_TARGET_PATH_SEGMENTS {
                let shown: String = target.chars().take(60).collect();
                self.fail(
                    node,
                    format!("The target '{shown}...' of a mapping has more than {MAX_TARGET_PATH_SEGMENTS} path segments, the limit"),
                );
                continue;
            }
            let source = m.attribute("source").unwrap_or_default().trim();
            let source = if source.is_empty() { format!("={target}") } else { source.to_string() };
            if let Some(source) = self.expression(node, &source, true) {
                into.push(Mapping { source, target });
            }
        }
        for mappings in [&inputs, &outputs] {
            if mappings.is_empty() {
                continue;
            }
            if let Err(e) = Expression::parse(&mapping_context(mappings)) {
                self.fail(node, format!("Failed to build variable mapping expression: {}", e.message));
            }
        }
        (inputs, outputs)
    }
}

/// The one FEEL context Zeebe builds from an element's input (or output) mappings and parses at
/// deploy: `{target:source,...}`, a dotted target as nested contexts (`{a:{b:source}}`). A
/// mapping that parses alone may break it, e.g. a source ending in a `//` comment swallows the
/// closing brace (`1 + 2 // note`), so Zeebe rejects the deployment.
fn mapping_context(mappings: &[Mapping]) -> String {
    enum Entry<'m> {
        Leaf(&'m str),
        Nested(Vec<(&'m str, Entry<'m>)>),
    }
    fn insert<'m>(entries: &mut Vec<(&'m str, Entry<'m>)>, path: &[&'m str], source: &'m str) {
        let (key, rest) = (path[0], &path[1..]);
        let position = entries.iter().position(|(k, _)| *k == key);
        if rest.is_empty() {
            match position {
                Some(i) => entries[i].1 = Entry::Leaf(source),
                None => entries.push((key, Entry::Leaf(source))),
            }
            return;
        }
        let i = match position {
            Some(i) if matches!(entries[i].1, Entry::Nested(_)) => i,
            Some(i) => {
                entries[i].1 = Entry::Nested(Vec::new());
                i
            }
            None => {
                entries.push((key, Entry::Nested(Vec::new())));
                entries.len() - 1
            }
        };
        if let Entry::Nested(inner) = &mut entries[i].1 {
            insert(inner, rest, source);
        }
    }
    fn write(entries: &[(&str, Entry<'_>)], out: &mut String) {
        out.push('{');
        for (n, (key, entry)) in entries.iter().enumerate() {
            if n > 0 {
                out.push(',');
            }
            out.push_str(key);
            out.push(':');
            match entry {
                Entry::Leaf(source) => out.push_str(source),
                Entry::Nested(inner) => write(inner, out),
            }
        }
        out.push('}');
    }
    let mut entries = Vec::new();
    for m in mappings {
        let path: Vec<&str> = m.target.split('.').collect();
        insert(&mut entries, &path, m.source.source());
    }
    let mut out = String::new();
    write(&entries, &mut out);
    out
}

mod compensation;
mod depth;
mod user_task;
pub use user_task::zoned_date_time;

#[cfg(test)]
mod tests;
