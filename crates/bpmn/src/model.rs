//! The executable form of a process: elements and flows in vectors, linked by index.

use waggle_feel::Expression;

/// One executable process of a deployed resource.
#[derive(Debug, Clone)]
pub struct Process {
    /// The BPMN process id (`bpmnProcessId`).
    pub id: String,
    pub name: Option<String>,
    pub elements: Vec<Element>,
    pub flows: Vec<SequenceFlow>,
    /// Index of the none start event in `elements`.
    pub start: usize,
}

impl Process {
    /// Index of the element with this id.
    pub fn element(&self, id: &str) -> Option<usize> {
        self.elements.iter().position(|e| e.id == id)
    }
}

/// A flow node.
#[derive(Debug, Clone)]
pub struct Element {
    pub id: String,
    pub name: Option<String>,
    pub kind: ElementKind,
    /// Indexes into [`Process::flows`], in document order.
    pub incoming: Vec<usize>,
    /// Indexes into [`Process::flows`], in document order.
    pub outgoing: Vec<usize>,
    /// `zeebe:input` mappings, applied on activation into the element's local scope.
    pub inputs: Vec<Mapping>,
    /// `zeebe:output` mappings, applied on completion into the parent scope.
    pub outputs: Vec<Mapping>,
}

#[derive(Debug, Clone)]
pub enum ElementKind {
    StartEvent,
    EndEvent,
    ServiceTask(TaskDefinition),
    /// `default_flow` is an index into [`Process::flows`].
    ExclusiveGateway {
        default_flow: Option<usize>,
    },
    ParallelGateway,
}

impl ElementKind {
    /// The name Zeebe's records use for this kind (`bpmnElementType`).
    pub fn bpmn_element_type(&self) -> &'static str {
        match self {
            ElementKind::StartEvent => "START_EVENT",
            ElementKind::EndEvent => "END_EVENT",
            ElementKind::ServiceTask(_) => "SERVICE_TASK",
            ElementKind::ExclusiveGateway { .. } => "EXCLUSIVE_GATEWAY",
            ElementKind::ParallelGateway => "PARALLEL_GATEWAY",
        }
    }
}

/// `zeebe:taskDefinition` plus `zeebe:taskHeaders`.
#[derive(Debug, Clone)]
pub struct TaskDefinition {
    pub job_type: ExprOrStatic,
    pub retries: ExprOrStatic,
    /// Static headers, in document order.
    pub headers: Vec<(String, String)>,
}

/// An attribute that is either a static value or (prefixed with `=`) a FEEL expression.
#[derive(Debug, Clone)]
pub enum ExprOrStatic {
    Static(String),
    Expression(Expression),
}

#[derive(Debug, Clone)]
pub struct SequenceFlow {
    pub id: String,
    /// Index into [`Process::elements`].
    pub source: usize,
    /// Index into [`Process::elements`].
    pub target: usize,
    pub condition: Option<Expression>,
}

/// One `zeebe:input` or `zeebe:output`: evaluate `source`, store it at `target` (a variable
/// name or a dotted path into one).
#[derive(Debug, Clone)]
pub struct Mapping {
    pub source: Expression,
    pub target: String,
}
