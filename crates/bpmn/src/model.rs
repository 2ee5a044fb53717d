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
    /// Index of the process's none start event in `elements` (the top-level scope's).
    pub start: usize,
}

impl Process {
    /// Index of the element with this id.
    pub fn element(&self, id: &str) -> Option<usize> {
        self.elements.iter().position(|e| e.id == id)
    }

    /// The none start event of a scope: the process (`None`) or an embedded subprocess.
    pub fn start_of(&self, scope: Option<usize>) -> usize {
        match scope.map(|s| &self.elements[s].kind) {
            Some(ElementKind::SubProcess { start }) => *start,
            _ => self.start,
        }
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
    /// The embedded subprocess this element is in (`None`: the process itself).
    pub scope: Option<usize>,
    /// Boundary events attached to this activity (indexes into [`Process::elements`]).
    pub boundary_events: Vec<usize>,
}

impl Element {
    /// Tasks and subprocesses: what boundary events may be attached to.
    pub fn is_activity(&self) -> bool {
        matches!(self.kind, ElementKind::ServiceTask(_) | ElementKind::ReceiveTask(_) | ElementKind::SubProcess { .. })
    }
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
    /// An embedded subprocess; `start` is its none start event.
    SubProcess {
        start: usize,
    },
    /// A timer or message intermediate catch event.
    IntermediateCatchEvent(EventTrigger),
    /// A none intermediate throw event (passes through, with its mappings).
    IntermediateThrowEvent,
    ReceiveTask(MessageDefinition),
    /// Attached to the activity `attached_to`; `cancel_activity`: interrupting.
    BoundaryEvent {
        attached_to: usize,
        cancel_activity: bool,
        trigger: EventTrigger,
    },
    /// An end event that throws an error (`error_code` from the referenced `bpmn:error`).
    ErrorEndEvent {
        error_code: String,
    },
    /// Terminates every element of its flow scope.
    TerminateEndEvent,
}

/// What a catch event waits for.
#[derive(Debug, Clone)]
pub enum EventTrigger {
    Timer(TimerDefinition),
    Message(MessageDefinition),
    /// An error boundary event: a code, or `None` to catch every error.
    Error {
        error_code: Option<String>,
    },
}

/// `timeDuration`, `timeDate` or `timeCycle` (`R<n>/<duration>`).
#[derive(Debug, Clone)]
pub enum TimerDefinition {
    Duration(ExprOrStatic),
    Date(ExprOrStatic),
    Cycle(ExprOrStatic),
}

/// A `bpmn:message` reference with its `zeebe:subscription` correlation key.
#[derive(Debug, Clone)]
pub struct MessageDefinition {
    pub name: ExprOrStatic,
    pub correlation_key: Expression,
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
            ElementKind::SubProcess { .. } => "SUB_PROCESS",
            ElementKind::IntermediateCatchEvent(_) => "INTERMEDIATE_CATCH_EVENT",
            ElementKind::IntermediateThrowEvent => "INTERMEDIATE_THROW_EVENT",
            ElementKind::ReceiveTask(_) => "RECEIVE_TASK",
            ElementKind::BoundaryEvent { .. } => "BOUNDARY_EVENT",
            ElementKind::ErrorEndEvent { .. } | ElementKind::TerminateEndEvent => "END_EVENT",
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
