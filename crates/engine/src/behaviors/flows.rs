//! Tokens moving: the record of an element instance entered from another, a sequence flow
//! taken, and the elements a scope starts at.

use waggle_bpmn::Process;
use waggle_protocol::value::ProcessInstanceRecord;
use waggle_protocol::{Intent, RecordValue, SharedStr};

use crate::processing::P;
use crate::tables::ElementState;

/// The element type of a multi-instance body's instances.
pub(crate) const MULTI_INSTANCE_BODY: &str = "MULTI_INSTANCE_BODY";

/// Whether an element instance is a multi-instance body.
pub(crate) fn is_multi_instance_body(record: &ProcessInstanceRecord) -> bool {
    record.bpmn_element_type.as_str() == MULTI_INSTANCE_BODY
}

/// Whether a terminating multi-instance body's inner instances are too many for one batch
/// (more than [`MI_TERMINATIONS_PER_BATCH`](crate::limits::MI_TERMINATIONS_PER_BATCH)): they
/// terminate over several (PROCESS_INSTANCE_BATCH TERMINATE).
pub(crate) fn terminates_in_batches(instance: &crate::tables::ElementInstance) -> bool {
    is_multi_instance_body(&instance.record) && instance.active_children as usize > crate::limits::MI_TERMINATIONS_PER_BATCH
}

/// Whether an element instance is an inner instance of a multi-instance activity (`element`
/// is its element).
pub(crate) fn is_inner_instance(element: &waggle_bpmn::Element, record: &ProcessInstanceRecord) -> bool {
    element.multi_instance.is_some() && !is_multi_instance_body(record)
}

/// The record of element `element_id` entered from `parent`'s instance, in `flow_scope_key`.
pub(crate) fn child_record(
    parent: &ProcessInstanceRecord,
    flow_scope_key: i64,
    element_id: &str,
    element_type: &'static str,
) -> ProcessInstanceRecord {
    ProcessInstanceRecord {
        element_id: element_id.into(),
        flow_scope_key,
        bpmn_element_type: SharedStr::from_static(element_type),
        ..parent.clone()
    }
}

/// SEQUENCE_FLOW_TAKEN for `flow`, leaving the element `from`: a token on the flow.
pub(crate) fn flow_taken(p: P, model: &Process, from: &ProcessInstanceRecord, flow: usize) {
    let mut taken = from.clone();
    taken.element_id = model.flows[flow].id.as_str().into();
    taken.bpmn_element_type = SharedStr::from_static("SEQUENCE_FLOW");
    let flow_key = p.new_key();
    p.event(flow_key, Intent::SequenceFlowTaken, RecordValue::ProcessInstance(taken));
}

/// Activates elements inside scope instance `key` (of element `scope`; `None`: the process):
/// its start event, or what start instructions target. A target directly in the scope is
/// activated; for a target deeper down, the element of this scope that contains it is activated
/// once for all its targets, as their flow scope: as on Zeebe 8.5.8, without its input mappings
/// and without entering its start event.
pub(crate) fn start_inside(p: P, model: &Process, pi: &ProcessInstanceRecord, key: i64, scope: Option<usize>, targets: Vec<usize>) {
    // in the order of the instructions: an element to activate, and the targets inside it
    let mut children: Vec<(usize, Vec<usize>)> = Vec::new();
    for target in targets {
        let mut child = target;
        while model.elements[child].scope != scope {
            child = model.elements[child].scope.expect("a target lies inside the scope");
        }
        if child == target {
            children.push((child, Vec::new()));
        } else if let Some((_, inside)) = children.iter_mut().find(|(c, inside)| *c == child && !inside.is_empty()) {
            inside.push(target);
        } else {
            children.push((child, vec![target]));
        }
    }
    for (child, inside) in children {
        let element = &model.elements[child];
        let record = child_record(pi, key, &element.id, element.entered_type());
        let child_key = p.new_key();
        if !inside.is_empty() {
            p.set_start_elements(child_key, inside);
        }
        p.command(child_key, Intent::ActivateElement, RecordValue::ProcessInstance(record));
    }
}

/// Whether an element instance is still active (not terminated by what just happened).
pub(crate) fn is_active(p: P, key: i64) -> bool {
    p.view().element(key).is_some_and(|e| e.state == ElementState::Activated)
}
