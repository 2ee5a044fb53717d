//! Element behaviours, one per BPMN element kind or family (Zeebe's `BpmnElementProcessor`s),
//! and the lifecycle that calls their hooks.
//!
//! Layers, lowest first: `behavior` (the hooks and what they are given); the kinds' files
//! (`tasks`, `gateways`, `boundary`, `subprocesses`, `process`, `call_activity`, `multi_instance`, `compensation`, then `events`, which throws to
//! boundary events and event subprocesses); `table` (kind → behaviour); `lifecycle`. A
//! behaviour reaches the lifecycle only through the [`Transitions`](behavior::Transitions) it
//! is handed.

pub(crate) mod behavior;
pub(crate) mod boundary;
pub(crate) mod call_activity;
pub(crate) mod compensation;
pub(crate) mod event_trigger;
pub(crate) mod events;
pub(crate) mod gateways;
pub(crate) mod lifecycle;
pub(crate) mod multi_instance;
pub(crate) mod process;
pub(crate) mod subprocesses;
pub(crate) mod table;
pub(crate) mod tasks;
pub(crate) mod user_task;

pub(crate) use events::ThrownError;
pub(crate) use lifecycle::{
    activate, complete, container_of, continue_activation, continue_completion, event_occurred, terminate, terminate_batch,
    terminate_in_batches, throw_error, waits_of,
};
