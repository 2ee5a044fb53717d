//! CHECKPOINT CREATE: a backup's mark in the partition's log (Zeebe's
//! `CheckpointCreateProcessor`, docs.camunda.io "Backup and restore": each partition's backup
//! is taken at the position of its checkpoint record, a point in its own log that all its
//! replicas agree on). A checkpoint whose id is greater than the partition's last one is
//! CREATED at the command's position (its applier records it as the last checkpoint, on every
//! replica: a new leader knows it); one whose id is not greater is IGNORED, the event carrying
//! the last checkpoint. The broker takes the backup once the CREATED entry is applied.

use waggle_protocol::value::CheckpointRecord;
use waggle_protocol::{Intent, Record, RecordValue};

use crate::batch::RequestId;
use crate::processing::P;

pub(crate) fn create(p: P, command: &Record, request: Option<RequestId>) {
    let RecordValue::Checkpoint(asked) = &command.value else { return };
    let last = p.view().last_checkpoint();
    let event = match last {
        Some(last) if asked.checkpoint_id <= last.checkpoint_id => p.event_record(-1, Intent::Ignored, RecordValue::Checkpoint(last)),
        _ => {
            let created = CheckpointRecord { checkpoint_id: asked.checkpoint_id, checkpoint_position: command.position as i64 };
            p.event_record(-1, Intent::Created, RecordValue::Checkpoint(created))
        }
    };
    p.respond(request, event);
}
