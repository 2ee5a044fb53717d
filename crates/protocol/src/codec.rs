//! The binary encoding of a log entry: a version byte, then a postcard-encoded [`Entry`].
//!
//! One Raft entry carries one processed batch: the commands processed and every record that
//! followed from them, plus the key and position counters after the batch so that replay
//! restores them without re-running any command logic.

use serde::{Deserialize, Serialize};

use crate::record::Record;

/// The only encoding version so far. A new layout gets a new version; old ones stay readable.
pub const CODEC_VERSION: u8 = 1;

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
}

impl Entry {
    pub fn encode(&self) -> Vec<u8> {
        encode_entry(self.next_key_counter, self.records.as_slice(), 0)
    }

    pub fn decode(bytes: &[u8]) -> Result<Entry, CodecError> {
        match bytes.first() {
            None => Err(CodecError::Empty),
            Some(&CODEC_VERSION) => Ok(postcard::from_bytes(&bytes[1..])?),
            Some(&v) => Err(CodecError::UnknownVersion(v)),
        }
    }
}

/// The layout of [`Entry`] over borrowed records: `records` serializes as a sequence of
/// records (postcard writes a slice or any sequence of known length as it writes a `Vec`).
#[derive(Serialize)]
struct EntryRef<'a, S: ?Sized> {
    next_key_counter: i64,
    records: &'a S,
}

/// Encodes an entry from borrowed records (a slice of `Record`s, or any value that serializes
/// as a sequence of records), without copying them into an [`Entry`] first: the same bytes as
/// `Entry { next_key_counter, records }.encode()`. `capacity` sizes the buffer up front (an
/// estimate: a larger entry still fits).
pub fn encode_entry<S: Serialize + ?Sized>(next_key_counter: i64, records: &S, capacity: usize) -> Vec<u8> {
    let mut buffer = Vec::with_capacity(capacity.max(1));
    buffer.push(CODEC_VERSION);
    // postcard into a Vec cannot fail for these types (no maps with non-string keys etc.)
    postcard::to_extend(&EntryRef { next_key_counter, records }, buffer).expect("record encoding is infallible")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{Intent, RecordType, ValueType};
    use crate::value::{JobRecord, RecordValue};

    #[test]
    fn entry_round_trips() {
        let entry = Entry {
            next_key_counter: 7,
            records: vec![Record {
                position: 1,
                source_position: 0,
                key: 5,
                timestamp_ms: 99,
                record_type: RecordType::Event,
                value_type: ValueType::Job,
                intent: Intent::Created,
                rejection: None,
                value: RecordValue::Job(JobRecord { job_type: "t".into(), variables: "{\"a\":1}".into(), ..Default::default() }),
            }],
        };
        let bytes = entry.encode();
        assert_eq!(bytes[0], CODEC_VERSION);
        assert_eq!(bytes[1..], postcard::to_stdvec(&entry).unwrap()[..], "the entry's own layout");
        assert_eq!(Entry::decode(&bytes).unwrap(), entry);
    }

    #[test]
    fn unknown_version_is_an_error() {
        assert!(matches!(Entry::decode(&[9, 0]), Err(CodecError::UnknownVersion(9))));
        assert!(matches!(Entry::decode(&[]), Err(CodecError::Empty)));
    }
}
