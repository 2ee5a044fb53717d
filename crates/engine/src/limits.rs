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
    /// Most top-level variables in one client's document (a creation, a job completion or
    /// failure, SetVariables, a published message, a broadcast signal): each becomes a record
    /// and a row, so a 4 MB document of tiny variables would hold the partition for seconds.
    pub max_document_variables: usize,
    /// Most bytes of process records one deployment writes. Each new process's record carries
    /// its whole resource (as Zeebe's does), so a 4 MB resource of 50,000 tiny processes would
    /// write 200 GB; this bounds the product of resource size and processes in it.
    pub max_deployment_process_bytes: usize,
    /// Deepest nesting of process instances created by call activities (the root instance is
    /// at depth 1): a call activity that would create an instance deeper raises an incident, as
    /// Zeebe's `maxProcessDepth` (default 1000) does, so that a process calling itself stops.
    pub max_process_depth: usize,
}

impl Default for EngineLimits {
    fn default() -> Self {
        EngineLimits {
            bpmn: ParseLimits::default(),
            max_document_variables: 250_000,
            max_deployment_process_bytes: 32 << 20,
            max_process_depth: 1_000,
        }
    }
}

/// Most items a multi-instance body's input collection may have: a longer one is an incident
/// on the body naming this limit. It bounds the memory a body's evaluated collection takes
/// (each chunk of inner instances evaluates it again, as Zeebe evaluates it per inner
/// instance); FEEL itself builds at most 1,000,000 elements per iteration.
pub const MAX_INPUT_COLLECTION_ITEMS: usize = 1_000_000;

/// Most inner instances of parallel multi-instance bodies one batch activates: a body over more
/// items activates them over several batches (PROCESS_INSTANCE_BATCH ACTIVATE commands, as
/// Zeebe does), so that a batch stays bounded whatever a collection's size.
pub const MI_ACTIVATIONS_PER_BATCH: usize = 500;

/// Most inner instances of parallel multi-instance bodies one batch terminates when an instance
/// is cancelled or a completion condition holds: a body with more active inner instances
/// terminates them over several batches (PROCESS_INSTANCE_BATCH TERMINATE commands, as Zeebe
/// 8.5's `ProcessInstanceBatchTerminateProcessor` does).
pub const MI_TERMINATIONS_PER_BATCH: usize = 500;

/// Longest output collection rewritten at each inner instance's completion (as Zeebe does: a
/// VARIABLE record of the whole collection each time). Beyond it, each inner instance's output
/// element is kept apart (a VARIABLE of the inner instance, kept in `MO/` when it completes)
/// and the collection is written once, when the body completes: linear instead of quadratic.
pub const MAX_REWRITTEN_OUTPUT_COLLECTION: u32 = 1_000;
