//! What an element behaviour is: the hooks the lifecycle calls for an element kind (Zeebe's
//! `BpmnElementProcessor`), what they are given, and the lifecycle's own transitions they may
//! start on other element instances.

use std::sync::Arc;

use waggle_bpmn::Process;
use waggle_protocol::value::ProcessInstanceRecord;
use waggle_protocol::{Intent, RecordValue};

use crate::behaviors::waits::Wait;
use crate::processing::P;
use crate::tables::ElementInstance;
use crate::variables::Vars;

/// The lifecycle's transitions, for behaviours that end or enter other element instances (an
/// interrupting boundary event terminates its activity; a caught error activates the catch
/// event). The lifecycle hands them down, so that no behaviour depends on it.
#[derive(Clone, Copy)]
pub(crate) struct Transitions {
    pub(crate) terminate: fn(P, i64),
    pub(crate) terminate_in_batches: fn(P, i64),
    pub(crate) terminate_children: fn(P, i64) -> bool,
    pub(crate) continue_activation: fn(P, i64),
}

impl Transitions {
    /// Terminates an element instance and everything inside it.
    pub(crate) fn terminate(self, p: P, key: i64) {
        (self.terminate)(p, key)
    }

    /// Terminates an element instance and everything inside it, a multi-instance body with
    /// more inner instances than one batch terminates over later batches (see
    /// `lifecycle::terminate_in_batches`).
    pub(crate) fn terminate_in_batches(self, p: P, key: i64) {
        (self.terminate_in_batches)(p, key)
    }

    /// Terminates the children of an active scope, which stays active, a bounded share a batch
    /// (see `lifecycle::terminate_children`). Whether children are left for later batches:
    /// then the scope goes on only after the last chunk.
    pub(crate) fn terminate_children(self, p: P, scope: i64) -> bool {
        (self.terminate_children)(p, scope)
    }

    /// Goes on with the activation of an element instance whose ACTIVATING is written.
    pub(crate) fn continue_activation(self, p: P, key: i64) {
        (self.continue_activation)(p, key)
    }
}

/// An element instance being activated: its input mappings are applied and what it waits for
/// is evaluated (not yet opened).
pub(crate) struct Activation<'m> {
    pub model: &'m Arc<Process>,
    /// The element's index in the model.
    pub idx: usize,
    pub key: i64,
    pub record: ProcessInstanceRecord,
    pub waits: Vec<Wait>,
    /// The elements start instructions target inside this (sub)process, if it was activated as
    /// their flow scope.
    pub instructed: Option<Vec<usize>>,
}

/// What happens after ELEMENT_COMPLETED.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Then {
    /// The token leaves along the flows the element chose (or its scope may complete).
    TakeFlows,
    /// The token went elsewhere (a link throw event continues at its catch event).
    Done,
}

/// The hooks of one element kind (or family). Each has a default, the plain element's
/// behaviour; a kind overrides what it does differently.
pub(crate) trait ElementBehavior: Sync {
    /// A token arrives on a flow (`scope`: the flow scope's instance): whether the element is
    /// entered now (a parallel join waits for a token on every incoming flow).
    fn takes_token(&self, _p: P, _model: &Process, _idx: usize, _scope: i64) -> bool {
        true
    }

    /// ACTIVATE_ELEMENT inside an active scope, before ACTIVATING: whether the element may
    /// activate now (an inclusive join waits while more tokens may still arrive).
    fn ready_to_activate(&self, _p: P, _model: &Process, _idx: usize, _scope: i64) -> bool {
        true
    }

    /// What the element itself waits for once active (its timer, message or signal; the events
    /// after an event-based gateway; a scope's event subprocess start events), evaluated in
    /// `vars`; the lifecycle adds its boundary events'. An error message for an incident.
    fn own_waits(&self, _p: P, _model: &Process, _idx: usize, _vars: Vars<'_>) -> Result<Vec<Wait>, String> {
        Ok(Vec::new())
    }

    /// Activation, once input mappings are applied and waits evaluated: open what it waits
    /// for, ACTIVATED, and what follows. By default the element passes through.
    fn on_activate(&self, p: P, a: Activation<'_>, _t: Transitions) {
        pass_through(p, a.key, a.record)
    }

    /// COMPLETING written (again, after an incident), before the output mappings: takes in
    /// what the element's work left (a call activity: its called instance's variables).
    fn on_completing(&self, _p: P, _model: &Process, _idx: usize, _key: i64) {}

    /// The outgoing flows taken on completion (after output mappings); an error message for a
    /// CONDITION_ERROR incident.
    fn outgoing(&self, _p: P, model: &Process, idx: usize, _key: i64) -> Result<Vec<usize>, String> {
        Ok(model.elements[idx].outgoing.clone())
    }

    /// After ELEMENT_COMPLETED of element instance `record` (its key `key`).
    fn on_completed(&self, _p: P, _model: &Process, _idx: usize, _key: i64, _record: &ProcessInstanceRecord, _t: Transitions) -> Then {
        Then::TakeFlows
    }

    /// Terminating, once everything inside has terminated: release what the kind holds.
    fn on_terminate(&self, _p: P, _instance: &ElementInstance) {}

    /// An event this element catches occurred (a timer, message or signal, or a caught error
    /// or escalation) while `waiting` waited for it: `waiting` is the instance of its activity
    /// (boundary event), of its flow scope (event subprocess start event) or of the event-based
    /// gateway before it. Not called for an element that waits for its own event (it completes).
    fn on_event_occurred(
        &self,
        _p: P,
        _model: &Process,
        _idx: usize,
        _waiting: &ElementInstance,
        _variables: &[(String, String)],
        _t: Transitions,
    ) {
    }
}

/// ACTIVATED, then COMPLETE_ELEMENT: an element with nothing to do or wait for.
pub(crate) fn pass_through(p: P, key: i64, record: ProcessInstanceRecord) {
    p.event(key, Intent::ElementActivated, RecordValue::ProcessInstance(record.clone()));
    p.command(key, Intent::CompleteElement, RecordValue::ProcessInstance(record));
}

/// Opens what the element waits for, then ACTIVATED: it waits (a receive task, a catch event).
pub(crate) fn wait(p: P, a: Activation<'_>) {
    crate::behaviors::waits::open(p, &a.record, a.key, a.waits);
    p.event(a.key, Intent::ElementActivated, RecordValue::ProcessInstance(a.record));
}
