//! The table from element kind to behaviour: adding a kind is a behaviour (in the file of its
//! family) and a line here.

use waggle_bpmn::{Element, ElementKind};
use waggle_protocol::value::ProcessInstanceRecord;

use crate::behaviors::flows::is_multi_instance_body;

use crate::elements::behavior::ElementBehavior;
use crate::elements::boundary::BoundaryEvent;
use crate::elements::call_activity::CallActivity;
use crate::elements::compensation::{CompensationBoundaryEvent, CompensationThrowEvent};
use crate::elements::events::{
    ErrorEndEvent, EscalationThrowEvent, EventStartEvent, IntermediateCatchEvent, LinkThrowEvent, PassThroughEvent, SignalThrowEvent,
    TerminateEndEvent,
};
use crate::elements::gateways::{EventBasedGateway, ExclusiveGateway, InclusiveGateway, ParallelGateway};
use crate::elements::multi_instance::MultiInstanceBody;
use crate::elements::subprocesses::SubProcess;
use crate::elements::tasks::{BusinessRuleTask, JobTask, PlainTask, ReceiveTask, ScriptTask};
use crate::elements::user_task::ZeebeUserTask;

/// The behaviour of element instance `record` of `element`: its multi-instance body's, or its
/// kind's.
pub(crate) fn behavior_for(element: &Element, record: &ProcessInstanceRecord) -> &'static dyn ElementBehavior {
    if element.multi_instance.is_some() && is_multi_instance_body(record) {
        &MultiInstanceBody
    } else {
        behavior_of(&element.kind)
    }
}

/// The behaviour of an element kind (the process itself has its own: `elements::process`).
pub(crate) fn behavior_of(kind: &ElementKind) -> &'static dyn ElementBehavior {
    match kind {
        ElementKind::ServiceTask(_) | ElementKind::JobElement { .. } => &JobTask,
        ElementKind::ReceiveTask(_) => &ReceiveTask,
        ElementKind::ScriptTask { .. } => &ScriptTask,
        ElementKind::BusinessRuleTask { .. } => &BusinessRuleTask,
        ElementKind::PlainTask { .. } => &PlainTask,
        ElementKind::ExclusiveGateway { .. } => &ExclusiveGateway,
        ElementKind::InclusiveGateway { .. } => &InclusiveGateway,
        ElementKind::ParallelGateway => &ParallelGateway,
        ElementKind::EventBasedGateway => &EventBasedGateway,
        ElementKind::SubProcess { .. } | ElementKind::EventSubProcess { .. } => &SubProcess,
        ElementKind::BoundaryEvent { .. } => &BoundaryEvent,
        ElementKind::StartEvent | ElementKind::EndEvent | ElementKind::IntermediateThrowEvent | ElementKind::LinkCatchEvent => {
            &PassThroughEvent
        }
        ElementKind::EventStartEvent { .. } => &EventStartEvent,
        ElementKind::IntermediateCatchEvent(_) => &IntermediateCatchEvent,
        ElementKind::LinkThrowEvent { .. } => &LinkThrowEvent,
        ElementKind::TerminateEndEvent => &TerminateEndEvent,
        ElementKind::ErrorEndEvent { .. } => &ErrorEndEvent,
        ElementKind::EscalationThrowEvent { .. } => &EscalationThrowEvent,
        ElementKind::SignalThrowEvent { .. } => &SignalThrowEvent,
        ElementKind::CallActivity(_) => &CallActivity,
        ElementKind::CompensationBoundaryEvent { .. } => &CompensationBoundaryEvent,
        ElementKind::CompensationThrowEvent { .. } => &CompensationThrowEvent,
        ElementKind::ZeebeUserTask(_) => &ZeebeUserTask,
    }
}
