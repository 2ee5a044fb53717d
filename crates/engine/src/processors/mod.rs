//! Command processors: read state, validate, and write events (applied at once), follow-up
//! commands, rejections and responses.

pub(crate) mod deployment;
pub(crate) mod instance;
pub(crate) mod job;
pub(crate) mod job_batch;
pub(crate) mod message;

use waggle_protocol::{Intent, Record, RecordValue, RejectionType};

use crate::processing::{Processing, RequestId};
use crate::{behaviors, events, starts};

pub(crate) fn process(p: &mut Processing<'_, '_, '_>, command: &Record, request: Option<RequestId>) {
    match (&command.value, command.intent) {
        (RecordValue::Deployment(_), Intent::Create) => deployment::create(p, command, request),
        (RecordValue::Deployment(_), Intent::Distribute) => deployment::distribute(p, command, request),
        (RecordValue::ProcessInstanceCreation(_), Intent::Create) => instance::create(p, command, request, false),
        (RecordValue::ProcessInstanceCreation(_), Intent::CreateWithAwaitingResult) => instance::create(p, command, request, true),
        (RecordValue::ProcessInstance(_), Intent::Cancel) => instance::cancel(p, command, request),
        (RecordValue::ProcessInstance(_), Intent::ActivateElement) => behaviors::activate(p, command),
        (RecordValue::ProcessInstance(_), Intent::CompleteElement) => behaviors::complete(p, command),
        (RecordValue::ProcessInstance(_), Intent::TerminateElement) => behaviors::terminate(p, command.key),
        (RecordValue::VariableDocument(_), Intent::Update) => instance::set_variables(p, command, request),
        (RecordValue::Incident(_), Intent::Resolve) => instance::resolve_incident(p, command, request),
        (RecordValue::Job(_), _) => job::process(p, command, request),
        (RecordValue::JobBatch(_), Intent::Activate) => job_batch::activate(p, command, request),
        (RecordValue::Message(_), Intent::Publish) => message::publish(p, command, request),
        (RecordValue::Message(_), Intent::Expire) => message::expire(p, command),
        (RecordValue::Timer(_), Intent::Trigger) => events::trigger_timer(p, command),
        (RecordValue::MessageSubscription(_), Intent::Create) => events::create_message_subscription(p, command),
        (RecordValue::MessageSubscription(_), Intent::Correlate | Intent::Delete | Intent::Reject) => {
            events::message_subscription(p, command)
        }
        (RecordValue::ProcessMessageSubscription(_), Intent::Correlate) => events::correlate_process_subscription(p, command),
        (RecordValue::Signal(_), Intent::Broadcast) => starts::broadcast(p, command, request),
        (RecordValue::CommandDistribution(_), Intent::Acknowledge) => crate::distribution::acknowledged(p, command),
        _ => p.reject(
            command,
            request,
            RejectionType::InvalidArgument,
            format!("Unsupported command {} {}", command.value_type, command.intent),
        ),
    }
}
