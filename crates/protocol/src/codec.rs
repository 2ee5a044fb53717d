//! The binary encoding of a log entry: a version byte, then the entry in postcard.
//!
//! One Raft entry carries one processed batch: the commands processed and every record that
//! followed from them, plus the key and position counters after the batch so that replay
//! restores them without re-running any command logic.
//!
//! Version 2 (written since finding 30 in docs/performance-history.md) lays each record out against the
//! record before it in the entry ([`CompactRecord`]): position, key and timestamp as
//! differences, the source position as a distance back, and the value only when it is not the
//! previous record's. A follow-up command and the events that process it share one value
//! (ACTIVATE_ELEMENT, ELEMENT_ACTIVATING, ELEMENT_ACTIVATED), so a one-task instance's log
//! entries are ~45 % smaller than in version 1 (every record whole, an [`Entry`] as postcard lays
//! it out), which stays readable.
//!
//! Version 3 is version 2 with the batch's state changes appended ([`append_state_changes`]):
//! a replicated leader writes it so that its followers apply the changes instead of decoding and
//! replaying the records. The records read as version 2's.

use std::borrow::Cow;

use serde::ser::SerializeSeq;
use serde::{Deserialize, Serialize, Serializer};

use crate::record::{Intent, Record, RecordType, Rejection, ValueType};
use crate::value::RecordValue;

mod state_changes;

pub use state_changes::{append_state_changes, state_changes, Change, Rows, StateChanges, CODEC_VERSION_WITH_CHANGES};

/// The version written (and, with the state changes appended, [`CODEC_VERSION_WITH_CHANGES`]:
/// see [`append_state_changes`]).
pub const CODEC_VERSION: u8 = 2;
/// Every record whole.
const CODEC_VERSION_WHOLE_RECORDS: u8 = 1;

/// One processed batch as stored in the log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// Next key counter after this batch.
    pub next_key_counter: i64,
    /// Records in position order: commands, events and rejections.
    pub records: Vec<Record>,
}

#[derive(Debug, thiserror::Error)]
pub enum CodecError {
    #[error("empty log entry")]
    Empty,
    #[error("unknown log entry version {0}")]
    UnknownVersion(u8),
    #[error("malformed log entry: {0}")]
    Malformed(#[from] postcard::Error),
    #[error("malformed log entry: its first record has the value of a record before it")]
    NoPreviousValue,
    #[error("malformed log entry: {0}")]
    MalformedChanges(&'static str),
}

impl Entry {
    pub fn encode(&self) -> Vec<u8> {
        encode_entry(self.next_key_counter, &self.records, 0, |r| Cow::Borrowed(&r.value))
    }

    pub fn decode(bytes: &[u8]) -> Result<Entry, CodecError> {
        match bytes.first() {
            None => Err(CodecError::Empty),
            Some(&CODEC_VERSION) => postcard::from_bytes::<CompactEntry>(&bytes[1..])?.into_entry(),
            Some(&CODEC_VERSION_WITH_CHANGES) => {
                let (body, _) = state_changes::split(bytes)?;
                postcard::from_bytes::<CompactEntry>(body)?.into_entry()
            }
            Some(&CODEC_VERSION_WHOLE_RECORDS) => Ok(postcard::from_bytes(&bytes[1..])?),
            Some(&v) => Err(CodecError::UnknownVersion(v)),
        }
    }
}

/// Encodes an entry from borrowed records, each value in the form `log_value` gives it (a record
/// whose value it changes is never written as "the previous record's value"), without copying
/// the records into an [`Entry`] first: the bytes decode as `Entry { next_key_counter, records }`
/// with the values replaced (and are `Entry::encode`'s when `log_value` borrows every value).
/// `capacity` sizes the buffer up front (an estimate: a larger entry still fits).
pub fn encode_entry<'r, F>(next_key_counter: i64, records: &'r [Record], capacity: usize, log_value: F) -> Vec<u8>
where
    F: Fn(&'r Record) -> Cow<'r, RecordValue>,
{
    let mut buffer = Vec::with_capacity(capacity.max(1));
    buffer.push(CODEC_VERSION);
    let entry = CompactEntryRef { next_key_counter, records: CompactRecords { records, log_value } };
    crate::postcard_vec::append(&entry, &mut buffer);
    buffer
}

/// A record of a version 2 entry, against the record before it (for the first record: against
/// position 0, key 0, timestamp 0 and no value).
#[derive(Serialize, Deserialize)]
struct CompactRecord<Rej, Val> {
    /// `position - previous position` (wrapping).
    position_step: u64,
    /// `position - source_position` (wrapping; a command from outside has source 0).
    source_distance: u64,
    /// `key - previous key` (wrapping).
    key_step: i64,
    /// `timestamp_ms - previous timestamp_ms` (wrapping).
    timestamp_step: i64,
    record_type: RecordType,
    value_type: ValueType,
    intent: Intent,
    rejection: Option<Rej>,
    /// `None`: the previous record's value.
    value: Option<Val>,
}

#[derive(Serialize)]
#[serde(bound(serialize = "CompactRecords<'r, F>: Serialize"))]
struct CompactEntryRef<'r, F> {
    next_key_counter: i64,
    records: CompactRecords<'r, F>,
}

/// Records serialized as a sequence of [`CompactRecord`]s, each against the one before it.
struct CompactRecords<'r, F> {
    records: &'r [Record],
    log_value: F,
}

impl<'r, F> Serialize for CompactRecords<'r, F>
where
    F: Fn(&'r Record) -> Cow<'r, RecordValue>,
{
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(self.records.len()))?;
        // the previous record, and whether its value was written as it is
        let mut previous: Option<(&Record, bool)> = None;
        for record in self.records {
            let value = (self.log_value)(record);
            let as_is = matches!(value, Cow::Borrowed(_));
            let (position, key, timestamp, same_value) = match previous {
                Some((p, p_as_is)) => (p.position, p.key, p.timestamp_ms, as_is && p_as_is && p.value == record.value),
                None => (0, 0, 0, false),
            };
            seq.serialize_element(&CompactRecord {
                position_step: record.position.wrapping_sub(position),
                source_distance: record.position.wrapping_sub(record.source_position),
                key_step: record.key.wrapping_sub(key),
                timestamp_step: record.timestamp_ms.wrapping_sub(timestamp),
                record_type: record.record_type,
                value_type: record.value_type,
                intent: record.intent,
                rejection: record.rejection.as_ref(),
                value: (!same_value).then_some(&*value),
            })?;
            previous = Some((record, as_is));
        }
        seq.end()
    }
}

/// Decodes the entry in `bytes` one record at a time, showing each to `each` in position order,
/// and returns its next key counter: as [`Entry::decode`], without building the entry (a
/// follower and recovery apply records as they come: no record vector, and a value shared with
/// the record before is neither copied nor moved).
pub fn for_each_record(bytes: &[u8], mut each: impl FnMut(&Record)) -> Result<i64, CodecError> {
    match bytes.first() {
        None => Err(CodecError::Empty),
        Some(&version @ (CODEC_VERSION | CODEC_VERSION_WITH_CHANGES)) => {
            let body = if version == CODEC_VERSION { &bytes[1..] } else { state_changes::split(bytes)?.0 };
            let mut deserializer = postcard::Deserializer::from_bytes(body);
            let mut no_previous_value = false;
            let seed = EntrySeed { each: &mut each, no_previous_value: &mut no_previous_value };
            let decoded = serde::de::DeserializeSeed::deserialize(seed, &mut deserializer);
            match decoded {
                Ok(counter) => Ok(counter),
                Err(_) if no_previous_value => Err(CodecError::NoPreviousValue),
                Err(e) => Err(CodecError::Malformed(e)),
            }
        }
        Some(_) => {
            let entry = Entry::decode(bytes)?;
            entry.records.iter().for_each(each);
            Ok(entry.next_key_counter)
        }
    }
}

/// [`for_each_record`]'s reading of a version 2 entry: the key counter, then the records.
struct EntrySeed<'f, F> {
    each: &'f mut F,
    no_previous_value: &'f mut bool,
}

impl<'de, F: FnMut(&Record)> serde::de::DeserializeSeed<'de> for EntrySeed<'_, F> {
    type Value = i64;

    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<i64, D::Error> {
        deserializer.deserialize_struct("CompactEntry", &["next_key_counter", "records"], self)
    }
}

impl<'de, F: FnMut(&Record)> serde::de::Visitor<'de> for EntrySeed<'_, F> {
    type Value = i64;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a log entry")
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<i64, A::Error> {
        use serde::de::Error;
        let counter: i64 = seq.next_element()?.ok_or_else(|| A::Error::invalid_length(0, &"a key counter and records"))?;
        seq.next_element_seed(RecordsSeed { each: self.each, no_previous_value: self.no_previous_value })?
            .ok_or_else(|| A::Error::invalid_length(1, &"a key counter and records"))?;
        Ok(counter)
    }
}

/// The records of a version 2 entry, each laid over the one before it in one [`Record`].
struct RecordsSeed<'f, F> {
    each: &'f mut F,
    no_previous_value: &'f mut bool,
}

impl<'de, F: FnMut(&Record)> serde::de::DeserializeSeed<'de> for RecordsSeed<'_, F> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_seq(self)
    }
}

impl<'de, F: FnMut(&Record)> serde::de::Visitor<'de> for RecordsSeed<'_, F> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a sequence of records")
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        // the record before, which the next one is written against
        let mut current: Option<Record> = None;
        while let Some(compact) = seq.next_element::<CompactRecord<Rejection, RecordValue>>()? {
            let record = match (current.as_mut(), compact.value) {
                (Some(previous), value) => {
                    let position = previous.position.wrapping_add(compact.position_step);
                    previous.position = position;
                    previous.source_position = position.wrapping_sub(compact.source_distance);
                    previous.key = previous.key.wrapping_add(compact.key_step);
                    previous.timestamp_ms = previous.timestamp_ms.wrapping_add(compact.timestamp_step);
                    previous.record_type = compact.record_type;
                    previous.value_type = compact.value_type;
                    previous.intent = compact.intent;
                    previous.rejection = compact.rejection;
                    if let Some(value) = value {
                        previous.value = value;
                    }
                    previous
                }
                (None, Some(value)) => current.insert(Record {
                    position: compact.position_step,
                    source_position: compact.position_step.wrapping_sub(compact.source_distance),
                    key: compact.key_step,
                    timestamp_ms: compact.timestamp_step,
                    record_type: compact.record_type,
                    value_type: compact.value_type,
                    intent: compact.intent,
                    rejection: compact.rejection,
                    value,
                }),
                (None, None) => {
                    *self.no_previous_value = true;
                    return Err(serde::de::Error::custom("the first record has no value"));
                }
            };
            (self.each)(record);
        }
        Ok(())
    }
}

#[derive(Deserialize)]
struct CompactEntry {
    next_key_counter: i64,
    records: Vec<CompactRecord<Rejection, RecordValue>>,
}

impl CompactEntry {
    fn into_entry(self) -> Result<Entry, CodecError> {
        let mut records: Vec<Record> = Vec::with_capacity(self.records.len());
        for compact in self.records {
            let (position, key, timestamp) = records.last().map_or((0, 0, 0), |p| (p.position, p.key, p.timestamp_ms));
            let value = match compact.value {
                Some(value) => value,
                None => records.last().ok_or(CodecError::NoPreviousValue)?.value.clone(),
            };
            let position = position.wrapping_add(compact.position_step);
            records.push(Record {
                position,
                source_position: position.wrapping_sub(compact.source_distance),
                key: key.wrapping_add(compact.key_step),
                timestamp_ms: timestamp.wrapping_add(compact.timestamp_step),
                record_type: compact.record_type,
                value_type: compact.value_type,
                intent: compact.intent,
                rejection: compact.rejection,
                value,
            });
        }
        Ok(Entry { next_key_counter: self.next_key_counter, records })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::RejectionType;
    use crate::value::{JobRecord, ProcessInstanceRecord, VariableRecord};

    fn record(position: u64, source_position: u64, key: i64, intent: Intent, value: RecordValue) -> Record {
        let record_type = if matches!(intent, Intent::ActivateElement | Intent::Create | Intent::Complete) {
            RecordType::Command
        } else {
            RecordType::Event
        };
        let value_type = match &value {
            RecordValue::Job(_) => ValueType::Job,
            RecordValue::Variable(_) => ValueType::Variable,
            _ => ValueType::ProcessInstance,
        };
        Record { position, source_position, key, timestamp_ms: 1_700_000_000_123, record_type, value_type, intent, rejection: None, value }
    }

    /// A batch as the engine writes one: a command from outside, follow-ups sharing values,
    /// keys going down as well as up, a rejection, a later timestamp.
    fn batch() -> Entry {
        let task = RecordValue::ProcessInstance(ProcessInstanceRecord {
            bpmn_process_id: "order".into(),
            element_id: "task".into(),
            bpmn_element_type: "SERVICE_TASK".into(),
            process_instance_key: 2_251_799_813_685_249,
            ..Default::default()
        });
        let job = RecordValue::Job(JobRecord { job_type: "t".into(), variables: "{\"a\":1}".into(), ..Default::default() });
        let variable = RecordValue::Variable(VariableRecord { name: "a".into(), value: "1".into(), ..Default::default() });
        let mut records = vec![
            record(41, 0, 2_251_799_813_685_260, Intent::Complete, job.clone()),
            record(42, 41, 2_251_799_813_685_260, Intent::Completed, job),
            record(43, 41, 2_251_799_813_685_250, Intent::ActivateElement, task.clone()),
            record(44, 43, 2_251_799_813_685_250, Intent::ElementActivating, task.clone()),
            record(45, 43, 2_251_799_813_685_250, Intent::ElementActivated, task),
            record(46, 43, 2_251_799_813_685_261, Intent::Created, variable.clone()),
            record(47, 0, -1, Intent::Complete, variable),
        ];
        records[6].record_type = RecordType::CommandRejection;
        records[6].rejection = Some(Rejection { rejection_type: RejectionType::NotFound, reason: "no such job".into() });
        records[6].timestamp_ms += 3;
        Entry { next_key_counter: 62, records }
    }

    #[test]
    fn entry_round_trips() {
        let entry = batch();
        let bytes = entry.encode();
        assert_eq!(bytes[0], CODEC_VERSION);
        assert_eq!(Entry::decode(&bytes).unwrap(), entry);
        let borrowed = encode_entry(entry.next_key_counter, &entry.records, 16, |r| Cow::Borrowed(&r.value));
        assert_eq!(borrowed, bytes, "records encoded from references as from the entry");
        // values given in another form are written whole, and decode as given
        fn job_without_variables(r: &Record) -> Cow<'_, RecordValue> {
            match &r.value {
                RecordValue::Job(j) => Cow::Owned(RecordValue::Job(JobRecord { variables: "".into(), ..j.clone() })),
                v => Cow::Borrowed(v),
            }
        }
        let changed = Entry::decode(&encode_entry(entry.next_key_counter, &entry.records, 0, job_without_variables)).unwrap();
        let expected: Vec<RecordValue> = entry.records.iter().map(|r| job_without_variables(r).into_owned()).collect();
        assert_eq!(changed.records.iter().map(|r| r.value.clone()).collect::<Vec<_>>(), expected);
    }

    #[test]
    fn a_value_shared_with_the_record_before_is_written_once() {
        let entry = batch();
        let whole_records = postcard::to_stdvec(&entry).unwrap().len();
        let compact = entry.encode().len();
        assert!(compact * 10 < whole_records * 7, "{compact} bytes against {whole_records} whole");
        // one record whose value changes costs its value again
        let mut changed = entry.clone();
        let RecordValue::ProcessInstance(pi) = &mut changed.records[4].value else { unreachable!() };
        pi.element_id = "other".into();
        assert_eq!(Entry::decode(&changed.encode()).unwrap(), changed);
        assert!(changed.encode().len() > compact);
    }

    #[test]
    fn records_shown_one_at_a_time_are_the_decoded_entry_s() {
        let entry = batch();
        for bytes in [entry.encode(), {
            let mut v1 = vec![CODEC_VERSION_WHOLE_RECORDS];
            v1.extend(postcard::to_stdvec(&entry).unwrap());
            v1
        }] {
            let mut shown = Vec::new();
            let counter = for_each_record(&bytes, |r| shown.push(r.clone())).unwrap();
            assert_eq!(Entry { next_key_counter: counter, records: shown }, entry);
        }
        assert!(matches!(for_each_record(&[], |_| {}), Err(CodecError::Empty)));
        assert!(matches!(for_each_record(&[9, 0], |_| {}), Err(CodecError::UnknownVersion(9))));
        let bytes = entry.encode();
        assert!(matches!(for_each_record(&bytes[..bytes.len() / 2], |_| {}), Err(CodecError::Malformed(_))));
    }

    #[test]
    fn an_entry_with_state_changes_holds_the_same_records() {
        let entry = batch();
        let mut bytes = entry.encode();
        append_state_changes(&mut bytes, false, [Change { key: b"k", value: Some(b"v"), fresh: false }]);
        assert_eq!(bytes[0], CODEC_VERSION_WITH_CHANGES);
        assert_eq!(Entry::decode(&bytes).unwrap(), entry);
        let mut shown = Vec::new();
        let counter = for_each_record(&bytes, |r| shown.push(r.clone())).unwrap();
        assert_eq!(Entry { next_key_counter: counter, records: shown }, entry);
        let changes: Vec<_> = state_changes(&bytes).unwrap().unwrap().rows().collect::<Result<_, _>>().unwrap();
        assert_eq!(changes, [Change { key: b"k", value: Some(b"v"), fresh: false }]);
    }

    #[test]
    fn entries_of_version_1_stay_readable() {
        let entry = batch();
        let mut bytes = vec![CODEC_VERSION_WHOLE_RECORDS];
        bytes.extend(postcard::to_stdvec(&entry).unwrap());
        assert_eq!(Entry::decode(&bytes).unwrap(), entry);
    }

    #[test]
    fn unknown_version_is_an_error() {
        assert!(matches!(Entry::decode(&[9, 0]), Err(CodecError::UnknownVersion(9))));
        assert!(matches!(Entry::decode(&[]), Err(CodecError::Empty)));
    }

    #[test]
    fn a_first_record_without_its_value_is_an_error() {
        let mut bytes = batch().encode();
        // the first record's value is written; an entry of one record without one is malformed
        let first = CompactRecord::<Rejection, RecordValue> {
            position_step: 1,
            source_distance: 1,
            key_step: 1,
            timestamp_step: 1,
            record_type: RecordType::Event,
            value_type: ValueType::Job,
            intent: Intent::Created,
            rejection: None,
            value: None,
        };
        #[derive(Serialize)]
        struct OneRecord<'a> {
            next_key_counter: i64,
            records: Vec<&'a CompactRecord<Rejection, RecordValue>>,
        }
        bytes.truncate(1);
        bytes.extend(postcard::to_stdvec(&OneRecord { next_key_counter: 1, records: vec![&first] }).unwrap());
        assert!(matches!(Entry::decode(&bytes), Err(CodecError::NoPreviousValue)));
        assert!(matches!(for_each_record(&bytes, |_| {}), Err(CodecError::NoPreviousValue)));
    }
}
