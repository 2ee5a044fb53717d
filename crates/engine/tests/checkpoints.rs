//! CHECKPOINT records (Zeebe's `CheckpointRecord`; docs.camunda.io "Backup and restore"): a
//! checkpoint whose id is greater than the partition's last one is CREATED at the command's
//! position and becomes the last checkpoint; one whose id is not greater is IGNORED, the event
//! carrying the last checkpoint. A replica replaying the log (a follower) ends with the same
//! last checkpoint, so a new leader knows it.

use waggle_engine::{Command, Engine, JobStreamTarget, JobStreams, ProcessingContext, StateView};
use waggle_protocol::value::CheckpointRecord;
use waggle_protocol::{Intent, Record, RecordType, RecordValue, ValueType};
use waggle_state::{KvStore, MemoryStore, Overlay};

struct NoStreams;

impl JobStreams for NoStreams {
    fn stream_for(&self, _job_type: &str) -> Option<JobStreamTarget> {
        None
    }
}

/// Processes a CHECKPOINT CREATE for `id` on the leader's state; returns its records and entry.
fn checkpoint(engine: &mut Engine, store: &MemoryStore, id: i64) -> (Vec<Record>, Vec<u8>) {
    let ctx = ProcessingContext { now_ms: 1_000, job_streams: &NoStreams, partition_count: 1, message_partition_count: 0 };
    let mut overlay = Overlay::new(store);
    let command =
        Command::new(-1, Intent::Create, RecordValue::Checkpoint(CheckpointRecord { checkpoint_id: id, checkpoint_position: -1 }));
    let output = engine.process_batch(&mut overlay, &ctx, vec![command]);
    store.commit(&overlay.into_writes()).unwrap();
    let entry = output.encoded_entry().expect("an entry");
    (output.records, entry)
}

fn last(store: &MemoryStore) -> Option<CheckpointRecord> {
    StateView::new(store).last_checkpoint()
}

#[test]
fn checkpoints_are_created_when_newer_ignored_otherwise_and_replicated() {
    let (leader, follower) = (MemoryStore::new(), MemoryStore::new());
    let (mut engine, mut replayer) = (Engine::new(1), Engine::new(1));
    assert_eq!(last(&leader), None);
    let mut entries = Vec::new();
    let mut created_at = 0;
    for (id, created) in [(5, true), (5, false), (3, false), (8, true)] {
        let (records, entry) = checkpoint(&mut engine, &leader, id);
        entries.push(entry);
        assert_eq!(records.len(), 2, "{records:?}");
        let (command, event) = (&records[0], &records[1]);
        assert_eq!((command.record_type, command.value_type, command.intent), (RecordType::Command, ValueType::Checkpoint, Intent::Create));
        assert_eq!(event.record_type, RecordType::Event);
        let RecordValue::Checkpoint(value) = &event.value else { panic!("{event:?}") };
        if created {
            assert_eq!(event.intent, Intent::Created, "checkpoint {id}");
            assert_eq!(*value, CheckpointRecord { checkpoint_id: id, checkpoint_position: command.position as i64 });
            created_at = command.position as i64;
        } else {
            assert_eq!(event.intent, Intent::Ignored, "checkpoint {id} is not above the last");
            assert_eq!(value.checkpoint_id, 5, "IGNORED carries the last checkpoint");
        }
        assert_eq!(last(&leader).map(|c| c.checkpoint_id), Some(if id == 8 { 8 } else { 5 }));
    }
    assert_eq!(last(&leader), Some(CheckpointRecord { checkpoint_id: 8, checkpoint_position: created_at }));

    // a follower applies the same entries by their events alone
    // (and tells which entries created a checkpoint: the broker keeps the state at each)
    for (entry, created) in entries.iter().zip([Some(5), None, None, Some(8)]) {
        let mut overlay = Overlay::new(&follower);
        let replayed = replayer.replay_encoded(&mut overlay, entry).unwrap();
        assert_eq!(replayed.map(|c| c.checkpoint_id), created);
        follower.commit(&overlay.into_writes()).unwrap();
    }
    assert_eq!(last(&follower), last(&leader));
}
