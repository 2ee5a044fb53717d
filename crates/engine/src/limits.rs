//! Bounds on the work one command may ask of a partition: a command beyond them is rejected
//! (INVALID_ARGUMENT, the limit named in the reason) instead of stalling or crashing the
//! partition. docs/compatibility.md lists them.

use waggle_bpmn::ParseLimits;

/// What one command may ask of the engine. Copied into every batch; changing it changes only
/// which new commands are accepted (stored models are parsed again with
/// [`ParseLimits::CEILING`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EngineLimits {
    /// Limits on a deployed BPMN resource.
    pub bpmn: ParseLimits,
}

impl Default for EngineLimits {
    fn default() -> Self {
        EngineLimits { bpmn: ParseLimits::default() }
    }
}
