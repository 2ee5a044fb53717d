//! BPMN 2.0 models with Zeebe's extensions, parsed once at deploy into an indexed, executable
//! form. The engine never touches XML again: elements and flows refer to each other by index.
//!
//! Supported for now: none start and end events, service tasks (`zeebe:taskDefinition`,
//! `zeebe:taskHeaders`, `zeebe:ioMapping`), exclusive gateways (conditions, default flow),
//! parallel gateways, sequence flows, embedded subprocesses, timer and message intermediate
//! catch events, receive tasks, timer/message/error boundary events, none intermediate throw
//! events, error and terminate end events, call activities (`zeebe:calledElement`). Any other flow element is rejected with its name and
//! line, never silently ignored. Artifacts and diagram information are ignored.

mod model;
mod parse;
pub mod timer;

pub use model::{
    CalledBinding, CalledElement, Element, ElementKind, EventTrigger, ExprOrStatic, Mapping, MessageDefinition, MultiInstance, Process,
    SequenceFlow, TaskDefinition, TimerDefinition, UserTaskProperties, WaitKinds,
};
pub use parse::{parse_definitions, parse_definitions_with, zoned_date_time, ParseLimits, MAX_TARGET_PATH_SEGMENTS};

/// One reason a model is rejected, located at an element and a line of the XML.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("- Element: {element_id} (line {line})\n    - ERROR: {message}")]
pub struct BpmnError {
    /// The id of the offending element (or the XML tag when it has no id).
    pub element_id: String,
    /// 1-based line in the XML document.
    pub line: u32,
    pub message: String,
}
