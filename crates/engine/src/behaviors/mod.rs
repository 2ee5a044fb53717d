//! Shared behaviours: the steps element behaviours (`crate::elements`) and command processors
//! are made of, as Zeebe's `BpmnBehaviors` are. Each module has one job; none of them calls an
//! element behaviour or the lifecycle, so they sit below both (see ARCHITECTURE.md, "Engine
//! layers").

pub(crate) mod catches;
pub(crate) mod decisions;
pub(crate) mod expressions;
pub(crate) mod flows;
pub(crate) mod incidents;
pub(crate) mod jobs;
pub(crate) mod starts;
pub(crate) mod waits;
