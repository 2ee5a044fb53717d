//! The executable form of a process: elements and flows in vectors, linked by index.

use std::collections::HashMap;

use waggle_feel::Expression;

/// One executable process of a deployed resource.
#[derive(Debug, Clone)]
pub struct Process {
    /// The BPMN process id (`bpmnProcessId`).
    pub id: String,
    pub name: Option<String>,
    pub elements: Vec<Element>,
    pub flows: Vec<SequenceFlow>,
    /// Index of the process's none start event in `elements`, if it has one (a process may
    /// start only by timer, message or signal start events).
    pub start: Option<usize>,
    /// `zeebe:versionTag` of the process (what a call activity's `versionTag` binding names).
    pub version_tag: Option<String>,
    /// Derived once from `elements` (see [`Process::new`]): lookups on the command path must
    /// not scan the model.
    index: ModelIndex,
}

/// What the engine looks up per command, computed once per model.
#[derive(Debug, Clone, Default)]
struct ModelIndex {
    by_id: HashMap<String, usize, foldhash::fast::RandomState>,
    /// Per scope (`None`: the process): its event subprocesses and its inclusive joins.
    scopes: HashMap<Option<usize>, ScopeContents, foldhash::fast::RandomState>,
    /// Per element, then for the process itself: what its instances can wait for.
    waits: Vec<WaitKinds>,
    process_waits: WaitKinds,
    /// Compensation handlers (activities associated with a compensation boundary event).
    compensation_handlers: Vec<usize>,
}

/// The kinds of waits an element instance can hold (timers, message subscriptions, signal
/// subscriptions): those of its own catch event, receive task or event-based gateway, of its
/// boundary events, and of the start events of the event subprocesses it contains.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WaitKinds {
    pub timers: bool,
    pub messages: bool,
    pub signals: bool,
}

impl WaitKinds {
    pub const ALL: WaitKinds = WaitKinds { timers: true, messages: true, signals: true };

    fn add(&mut self, trigger: &EventTrigger) {
        match trigger {
            EventTrigger::Timer(_) => self.timers = true,
            EventTrigger::Message(_) => self.messages = true,
            EventTrigger::Signal { .. } => self.signals = true,
            EventTrigger::Error { .. } | EventTrigger::Escalation { .. } => {}
        }
    }
}

#[derive(Debug, Clone, Default)]
struct ScopeContents {
    event_subprocesses: Vec<usize>,
    interrupting_event_subprocesses: Vec<usize>,
    inclusive_joins: Vec<usize>,
}

impl Process {
    /// A process of linked elements and flows; derives the lookup index.
    pub fn new(id: String, name: Option<String>, elements: Vec<Element>, flows: Vec<SequenceFlow>, start: Option<usize>) -> Self {
        let mut index = ModelIndex::default();
        for (i, e) in elements.iter().enumerate() {
            index.by_id.entry(e.id.clone()).or_insert(i);
            let scope = index.scopes.entry(e.scope).or_default();
            match &e.kind {
                ElementKind::EventSubProcess { start } => {
                    scope.event_subprocesses.push(i);
                    if matches!(elements.get(*start).map(|s| &s.kind), Some(ElementKind::EventStartEvent { interrupting: true, .. })) {
                        scope.interrupting_event_subprocesses.push(i);
                    }
                }
                ElementKind::InclusiveGateway { .. } if e.incoming.len() > 1 => scope.inclusive_joins.push(i),
                ElementKind::CompensationBoundaryEvent { handler, .. } => index.compensation_handlers.push(*handler),
                _ => {}
            }
        }
        let mut process = Process { id, name, elements, flows, start, version_tag: None, index };
        process.index.waits = (0..process.elements.len()).map(|i| process.compute_wait_kinds(Some(i))).collect();
        process.index.process_waits = process.compute_wait_kinds(None);
        process
    }

    fn compute_wait_kinds(&self, element: Option<usize>) -> WaitKinds {
        let mut kinds = WaitKinds::default();
        let starts_in = |kinds: &mut WaitKinds, scope: Option<usize>| {
            for esp in self.event_subprocesses(scope) {
                if let Some(ElementKind::EventStartEvent { trigger, .. }) = self.event_subprocess_start(esp).map(|s| &self.elements[s].kind)
                {
                    kinds.add(trigger);
                }
            }
        };
        let Some(i) = element else {
            starts_in(&mut kinds, None);
            return kinds;
        };
        let e = &self.elements[i];
        match &e.kind {
            ElementKind::IntermediateCatchEvent(trigger) => kinds.add(trigger),
            ElementKind::ReceiveTask(_) => kinds.messages = true,
            ElementKind::EventBasedGateway => {
                for &f in &e.outgoing {
                    if let ElementKind::IntermediateCatchEvent(trigger) = &self.elements[self.flows[f].target].kind {
                        kinds.add(trigger);
                    }
                }
            }
            ElementKind::SubProcess { .. } | ElementKind::EventSubProcess { .. } => starts_in(&mut kinds, Some(i)),
            _ => {}
        }
        for &b in &e.boundary_events {
            if let ElementKind::BoundaryEvent { trigger, .. } = &self.elements[b].kind {
                kinds.add(trigger);
            }
        }
        kinds
    }

    /// What instances of `element` (`None`: the process) can wait for; see [`WaitKinds`].
    pub fn wait_kinds(&self, element: Option<usize>) -> WaitKinds {
        match element {
            Some(i) => self.index.waits.get(i).copied().unwrap_or(WaitKinds::ALL),
            None => self.index.process_waits,
        }
    }

    /// Index of the element with this id.
    pub fn element(&self, id: &str) -> Option<usize> {
        self.index.by_id.get(id).copied()
    }

    fn contents(&self, scope: Option<usize>) -> Option<&ScopeContents> {
        self.index.scopes.get(&scope)
    }

    /// Event subprocesses directly inside a scope: the process (`None`) or a subprocess.
    pub fn event_subprocesses(&self, scope: Option<usize>) -> impl Iterator<Item = usize> + '_ {
        self.contents(scope).into_iter().flat_map(|c| c.event_subprocesses.iter().copied())
    }

    /// The interrupting ones among [`Process::event_subprocesses`].
    pub fn interrupting_event_subprocesses(&self, scope: Option<usize>) -> &[usize] {
        self.contents(scope).map(|c| c.interrupting_event_subprocesses.as_slice()).unwrap_or(&[])
    }

    /// Inclusive gateways with more than one incoming flow directly inside a scope.
    pub fn inclusive_joins(&self, scope: Option<usize>) -> &[usize] {
        self.contents(scope).map(|c| c.inclusive_joins.as_slice()).unwrap_or(&[])
    }

    /// The start event of an event subprocess.
    pub fn event_subprocess_start(&self, esp: usize) -> Option<usize> {
        match self.elements[esp].kind {
            ElementKind::EventSubProcess { start } => Some(start),
            _ => None,
        }
    }

    /// Timer, message and signal start events of the process itself.
    pub fn event_start_events(&self) -> impl Iterator<Item = usize> + '_ {
        self.elements
            .iter()
            .enumerate()
            .filter(|(_, e)| e.scope.is_none() && matches!(e.kind, ElementKind::EventStartEvent { .. }))
            .map(|(i, _)| i)
    }

    /// Whether any activity of the process can be compensated (it has a compensation boundary
    /// event): without one, completions create no compensation subscriptions.
    pub fn has_compensation(&self) -> bool {
        !self.index.compensation_handlers.is_empty()
    }

    /// Whether `element` is a compensation handler (entered only when compensation is thrown).
    pub fn is_compensation_handler(&self, element: usize) -> bool {
        self.index.compensation_handlers.contains(&element)
    }

    /// The compensation boundary event of `activity` and its handler, if it has one.
    pub fn compensation_of(&self, activity: usize) -> Option<(usize, usize)> {
        self.elements[activity].boundary_events.iter().find_map(|&b| match self.elements[b].kind {
            ElementKind::CompensationBoundaryEvent { handler, .. } => Some((b, handler)),
            _ => None,
        })
    }

    /// Subprocesses (embedded and event): elements with a flow of their own inside.
    pub fn is_scope(&self, element: usize) -> bool {
        matches!(self.elements[element].kind, ElementKind::SubProcess { .. } | ElementKind::EventSubProcess { .. })
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
    /// Set when the activity is multi-instance: its instances are the inner instances of a
    /// multi-instance body.
    pub multi_instance: Option<MultiInstance>,
}

/// `bpmn:multiInstanceLoopCharacteristics` with its `zeebe:loopCharacteristics`: one inner
/// instance per item of the input collection, one after another (`sequential`) or all at once.
#[derive(Debug, Clone)]
pub struct MultiInstance {
    pub sequential: bool,
    /// Evaluated when the body activates; must give a list.
    pub input_collection: Expression,
    /// The variable each inner instance finds its item in (local to it).
    pub input_element: Option<String>,
    /// The variable the results are collected in (local to the body, then propagated).
    pub output_collection: Option<String>,
    /// Evaluated when an inner instance completes: its result, at its place in the output
    /// collection.
    pub output_element: Option<Expression>,
    /// Evaluated when an inner instance completes: when true, the body completes at once.
    pub completion_condition: Option<Expression>,
}

impl Element {
    /// The element type of the instance a token entering the element creates: the
    /// multi-instance body for a multi-instance activity.
    pub fn entered_type(&self) -> &'static str {
        if self.multi_instance.is_some() {
            "MULTI_INSTANCE_BODY"
        } else {
            self.kind.bpmn_element_type()
        }
    }

    /// Tasks, subprocesses and call activities: what boundary events may be attached to.
    pub fn is_activity(&self) -> bool {
        self.kind.is_activity()
    }

    /// The job definition of an element that creates a job when it activates.
    pub fn task_definition(&self) -> Option<&TaskDefinition> {
        match &self.kind {
            ElementKind::ServiceTask(def) | ElementKind::JobElement { def, .. } => Some(def),
            _ => None,
        }
    }
}

#[derive(Debug, Clone)]
pub enum ElementKind {
    /// A none start event.
    StartEvent,
    /// A timer, message or signal start event of the process, or the start event of an event
    /// subprocess (also error and escalation); `interrupting` matters in event subprocesses.
    EventStartEvent {
        trigger: EventTrigger,
        interrupting: bool,
    },
    EndEvent,
    ServiceTask(TaskDefinition),
    /// `default_flow` is an index into [`Process::flows`].
    ExclusiveGateway {
        default_flow: Option<usize>,
    },
    ParallelGateway,
    /// Takes every flow whose condition holds (else the default flow); joins the flows that
    /// were taken. `default_flow` is an index into [`Process::flows`].
    InclusiveGateway {
        default_flow: Option<usize>,
    },
    /// Waits for the first of the catch events its flows lead to.
    EventBasedGateway,
    /// An embedded subprocess; `start` is its none start event.
    SubProcess {
        start: usize,
    },
    /// An event subprocess; `start` is its (triggered) start event.
    EventSubProcess {
        start: usize,
    },
    /// A task or event that creates a job, besides the service task: send, script, business
    /// rule and user tasks, and message throw and end events.
    JobElement {
        def: TaskDefinition,
        element_type: &'static str,
    },
    /// A link catch event: where its throw events continue.
    LinkCatchEvent,
    /// A link throw event: continues at the link catch event `target` (same scope, same name).
    LinkThrowEvent {
        target: usize,
    },
    /// An escalation intermediate throw event, or an end event (`end`).
    EscalationThrowEvent {
        code: String,
        end: bool,
    },
    /// A signal intermediate throw event, or an end event (`end`).
    SignalThrowEvent {
        name: ExprOrStatic,
        end: bool,
    },
    /// A timer or message intermediate catch event.
    IntermediateCatchEvent(EventTrigger),
    /// A none intermediate throw event (passes through, with its mappings).
    IntermediateThrowEvent,
    ReceiveTask(MessageDefinition),
    /// A script task the engine evaluates (`zeebe:script`): `expression`'s result goes to
    /// `result_variable`.
    ScriptTask {
        expression: Expression,
        result_variable: String,
    },
    /// A business rule task with `zeebe:calledDecision`: the engine evaluates the decision
    /// `decision_id` (static or an expression) and puts its output in `result_variable`.
    BusinessRuleTask {
        decision_id: ExprOrStatic,
        result_variable: String,
    },
    /// An undefined (`bpmn:task`, `TASK`) or manual task (`MANUAL_TASK`): passes through.
    PlainTask {
        element_type: &'static str,
    },
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
    /// A compensation boundary event on `attached_to`: never waited for; entered when
    /// compensation is thrown for a completed instance of its activity, it activates `handler`
    /// (the `isForCompensation` activity its association points to).
    CompensationBoundaryEvent {
        attached_to: usize,
        handler: usize,
    },
    /// A compensation intermediate throw event, or an end event (`end`): compensates `activity`
    /// (its `activityRef`), or every completed activity of its scope, and waits for the handlers.
    CompensationThrowEvent {
        activity: Option<usize>,
        end: bool,
    },
    /// Creates an instance of another process and waits for it to end.
    CallActivity(CalledElement),
    /// A Zeebe user task (`zeebe:userTask`): the engine keeps the task itself, no job.
    ZeebeUserTask(Box<UserTaskProperties>),
}

/// What a Zeebe user task is created with (https://docs.camunda.io/docs/components/modeler/bpmn/user-tasks/):
/// each attribute static or FEEL, evaluated when the task activates.
#[derive(Debug, Clone, Default)]
pub struct UserTaskProperties {
    pub assignee: Option<ExprOrStatic>,
    /// Static lists are kept as `Static` JSON arrays' texts (`["a","b"]`).
    pub candidate_groups: Option<ExprOrStatic>,
    pub candidate_users: Option<ExprOrStatic>,
    pub due_date: Option<ExprOrStatic>,
    pub follow_up_date: Option<ExprOrStatic>,
    /// A linked form's id: the latest deployed form with this id is linked at activation.
    pub form_id: Option<ExprOrStatic>,
    pub external_reference: Option<ExprOrStatic>,
    /// `zeebe:taskHeaders`, static.
    pub headers: Vec<(String, String)>,
}

/// `zeebe:calledElement` of a call activity.
#[derive(Debug, Clone)]
pub struct CalledElement {
    /// The BPMN process id of the called process (static, or an expression giving a string).
    pub process_id: ExprOrStatic,
    pub binding: CalledBinding,
    /// `propagateAllChildVariables` (default true): the called instance's variables go to the
    /// call activity when it ends (output mappings take them in any case).
    pub propagate_all_child_variables: bool,
    /// `propagateAllParentVariables` (default true): every variable visible at the call
    /// activity is copied to the called instance; else only its input mappings' results.
    pub propagate_all_parent_variables: bool,
}

/// Which version of the called process a call activity starts (`bindingType`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CalledBinding {
    /// The latest version when the call activity activates.
    Latest,
    /// The version deployed together with the calling process.
    Deployment,
    /// The latest version whose `zeebe:versionTag` is this.
    VersionTag(String),
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
    /// An escalation catch: a code, or `None` to catch every escalation.
    Escalation {
        code: Option<String>,
    },
    Signal {
        name: ExprOrStatic,
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
    /// Always there, except on message start events of the process itself.
    pub correlation_key: Option<Expression>,
}

impl ElementKind {
    /// Tasks, embedded subprocesses and call activities: the activities (what boundary events
    /// attach to), each of which may be multi-instance
    /// (https://docs.camunda.io/docs/components/modeler/bpmn/multi-instance/).
    pub fn is_activity(&self) -> bool {
        match self {
            ElementKind::ServiceTask(_)
            | ElementKind::ReceiveTask(_)
            | ElementKind::ScriptTask { .. }
            | ElementKind::BusinessRuleTask { .. }
            | ElementKind::PlainTask { .. }
            | ElementKind::SubProcess { .. }
            | ElementKind::CallActivity(_)
            | ElementKind::ZeebeUserTask(_) => true,
            ElementKind::JobElement { element_type, .. } => element_type.ends_with("_TASK"),
            _ => false,
        }
    }

    /// Whether the kind may carry `multiInstanceLoopCharacteristics`: every activity.
    pub fn supports_multi_instance(&self) -> bool {
        self.is_activity()
    }

    /// The name Zeebe's records use for this kind (`bpmnElementType`).
    pub fn bpmn_element_type(&self) -> &'static str {
        match self {
            ElementKind::StartEvent | ElementKind::EventStartEvent { .. } => "START_EVENT",
            ElementKind::EndEvent => "END_EVENT",
            ElementKind::ServiceTask(_) => "SERVICE_TASK",
            ElementKind::ExclusiveGateway { .. } => "EXCLUSIVE_GATEWAY",
            ElementKind::ParallelGateway => "PARALLEL_GATEWAY",
            ElementKind::InclusiveGateway { .. } => "INCLUSIVE_GATEWAY",
            ElementKind::EventBasedGateway => "EVENT_BASED_GATEWAY",
            ElementKind::SubProcess { .. } => "SUB_PROCESS",
            ElementKind::EventSubProcess { .. } => "EVENT_SUB_PROCESS",
            ElementKind::JobElement { element_type, .. } => element_type,
            ElementKind::IntermediateCatchEvent(_) | ElementKind::LinkCatchEvent => "INTERMEDIATE_CATCH_EVENT",
            ElementKind::IntermediateThrowEvent | ElementKind::LinkThrowEvent { .. } => "INTERMEDIATE_THROW_EVENT",
            ElementKind::EscalationThrowEvent { end: false, .. } | ElementKind::SignalThrowEvent { end: false, .. } => {
                "INTERMEDIATE_THROW_EVENT"
            }
            ElementKind::EscalationThrowEvent { end: true, .. } | ElementKind::SignalThrowEvent { end: true, .. } => "END_EVENT",
            ElementKind::ReceiveTask(_) => "RECEIVE_TASK",
            ElementKind::ScriptTask { .. } => "SCRIPT_TASK",
            ElementKind::BusinessRuleTask { .. } => "BUSINESS_RULE_TASK",
            ElementKind::PlainTask { element_type } => element_type,
            ElementKind::BoundaryEvent { .. } | ElementKind::CompensationBoundaryEvent { .. } => "BOUNDARY_EVENT",
            ElementKind::CompensationThrowEvent { end: false, .. } => "INTERMEDIATE_THROW_EVENT",
            ElementKind::CompensationThrowEvent { end: true, .. } => "END_EVENT",
            ElementKind::ErrorEndEvent { .. } | ElementKind::TerminateEndEvent => "END_EVENT",
            ElementKind::CallActivity(_) => "CALL_ACTIVITY",
            ElementKind::ZeebeUserTask(_) => "USER_TASK",
        }
    }
}

/// `zeebe:taskDefinition` plus `zeebe:taskHeaders`.
#[derive(Debug, Clone)]
pub struct TaskDefinition {
    pub job_type: ExprOrStatic,
    pub retries: ExprOrStatic,
    /// Headers, in document order: static `zeebe:taskHeaders`, and for user tasks the
    /// `io.camunda.zeebe:*` headers of the form and assignment (which may be FEEL).
    pub headers: Vec<(String, ExprOrStatic)>,
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
