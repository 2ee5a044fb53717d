//! Command processors: read state, validate, and write events (applied at once), follow-up
//! commands, rejections and responses. The top of the engine: [`run`] processes a command from
//! outside and every follow-up command it causes.

pub(crate) mod checkpoint;
pub(crate) mod decision;
pub(crate) mod deployment;
pub(crate) mod instance;
pub(crate) mod job;
pub(crate) mod job_batch;
pub(crate) mod message;
pub(crate) mod migration;
pub(crate) mod modification;
pub(crate) mod relocation;
pub(crate) mod resources;
pub(crate) mod scale;
pub(crate) mod signal;
pub(crate) mod subscription;
pub(crate) mod timer;
pub(crate) mod user_task;

use waggle_protocol::{Intent, Record, RecordValue, RejectionType};

use crate::batch::{Command, RequestId};
use crate::distribution;
use crate::elements;
use crate::processing::P;

/// Processes one command from outside, then all follow-up commands it caused.
pub(crate) fn run(p: P, command: Command) {
    if let Some(d) = &command.distribution {
        if distribution::is_duplicate(p, d) {
            return;
        }
    }
    // a correlation key moving to another partition: the command waits, or is refused
    if relocation::turns_away(p, &command) {
        return;
    }
    if elements::multi_instance::defer_if_full(p, &command) {
        return;
    }
    // An activation that finds no job writes nothing: answer it without touching the log.
    let jobs = job_batch::jobs_to_activate(p, &command);
    if jobs.as_ref().is_some_and(|j| j.is_empty()) {
        return p.answer_unwritten(command, Intent::Activated);
    }
    let request = command.request_id;
    let distributed = command.distribution;
    let record = p.begin_command(command, jobs);
    if let Some(d) = &distributed {
        distribution::received(p, d, &record);
    }
    process(p, &record, request);
    p.end_command();
    while let Some(next) = p.next_follow_up() {
        process(p, &next, None);
    }
}

/// Processes one command, by its value type and intent.
pub(crate) fn process(p: P, command: &Record, request: Option<RequestId>) {
    // a command for a correlation key that moved to another partition goes there
    if relocation::reroute(p, command) {
        return;
    }
    match (&command.value, command.intent) {
        (RecordValue::Deployment(_), Intent::Create) => deployment::create(p, command, request),
        (RecordValue::Deployment(_), Intent::Distribute) => deployment::distribute(p, command, request),
        (RecordValue::ProcessInstanceCreation(_), Intent::Create) => instance::create(p, command, request, false),
        (RecordValue::ProcessInstanceCreation(_), Intent::CreateWithAwaitingResult) => instance::create(p, command, request, true),
        (RecordValue::ProcessInstance(_), Intent::Cancel) => instance::cancel(p, command, request),
        (RecordValue::ProcessInstance(_), Intent::ActivateElement) => elements::activate(p, command),
        (RecordValue::ProcessInstance(_), Intent::CompleteElement) => elements::complete(p, command),
        (RecordValue::ProcessInstance(_), Intent::TerminateElement) => elements::terminate(p, command.key),
        (RecordValue::ProcessInstanceModification(_), Intent::Modify) => modification::modify(p, command, request),
        (RecordValue::ProcessInstanceMigration(_), Intent::Migrate) => migration::migrate(p, command, request),
        (RecordValue::VariableDocument(_), Intent::Update) => instance::set_variables(p, command, request),
        (RecordValue::Incident(_), Intent::Resolve) => instance::resolve_incident(p, command, request),
        (RecordValue::Job(_), _) => job::process(p, command, request),
        (RecordValue::UserTask(_), _) => user_task::process(p, command, request),
        (RecordValue::JobBatch(_), Intent::Activate) => job_batch::activate(p, command, request),
        (RecordValue::Message(_), Intent::Publish) => message::publish(p, command, request),
        (RecordValue::Message(_), Intent::Expire) => message::expire(p, command),
        (RecordValue::MessageCorrelation(_), Intent::Correlate) => message::correlate(p, command, request),
        (RecordValue::Timer(_), Intent::Trigger) => timer::trigger_timer(p, command),
        (RecordValue::MessageSubscription(_), Intent::Create) => subscription::create_message_subscription(p, command),
        (RecordValue::MessageSubscription(_), Intent::Correlate | Intent::Delete | Intent::Reject) => {
            subscription::message_subscription(p, command)
        }
        (RecordValue::ProcessMessageSubscription(_), Intent::Correlate) => subscription::correlate_process_subscription(p, command),
        (RecordValue::Signal(_), Intent::Broadcast) => signal::broadcast(p, command, request),
        (RecordValue::CommandDistribution(_), Intent::Acknowledge) => {
            distribution::acknowledged(p, command);
            // the last resource a new partition lacked: the scale-up is done
            scale::after_acknowledgement(p);
            // the last correlation key on its way arrived: the relocation is done
            relocation::after_acknowledgement(p);
        }
        (RecordValue::DecisionEvaluation(_), Intent::Evaluate) => decision::evaluate(p, command, request),
        (RecordValue::ResourceDeletion(_), Intent::Delete | Intent::Distribute) => resources::delete(p, command, request),
        (RecordValue::ProcessInstanceBatch(_), Intent::Activate) => elements::multi_instance::activate_batch(p, command),
        (RecordValue::ProcessInstanceBatch(_), Intent::Terminate) => elements::terminate_batch(p, command),
        (RecordValue::Checkpoint(_), Intent::Create) => checkpoint::create(p, command, request),
        (RecordValue::Scale(_), Intent::ScaleUp) => scale::scale_up(p, command, request),
        (RecordValue::MessageRelocation(_), Intent::Relocate) => relocation::relocate(p, command, request),
        (RecordValue::MessageRelocation(_), Intent::Move) => relocation::moved(p, command),
        (RecordValue::MessageRelocation(_), Intent::Release) => relocation::release(p, command),
        _ => p.reject(
            command,
            request,
            RejectionType::InvalidArgument,
            format!("Unsupported command {} {}", command.value_type, command.intent),
        ),
    }
}
