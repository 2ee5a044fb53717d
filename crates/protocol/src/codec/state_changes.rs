//! Version 3 of the log entry: version 2's records, followed by the state changes the batch
//! made, so that a follower can apply them without decoding or re-applying the records.
//!
//! Layout: `[3][version 2's body][section][section length: u32 LE]`, where the section is
//! `[flags][row]*` and a row is `[tag][key length][key]` (a delete, tag 0) or
//! `[tag][key length][key][value length][value]` (a put, tag 1; a put of a key that no store
//! below held, tag 2). Lengths are LEB128 varints. Flag bit 0: one of the records is a backup
//! checkpoint's CREATED event (a follower then reads the records for it).
//!
//! The rows are the leader's own write set for the batch, over the state at the entry before it:
//! applying them in log order gives the state the leader committed, row for row.

use super::{CodecError, CODEC_VERSION};

/// Records plus the state changes they made.
pub const CODEC_VERSION_WITH_CHANGES: u8 = 3;

/// Flag bit: the records hold a backup checkpoint's CREATED event.
const FLAG_CHECKPOINT: u8 = 1;

const TAG_DELETE: u8 = 0;
const TAG_PUT: u8 = 1;
const TAG_PUT_FRESH: u8 = 2;

/// The bytes of the section's length at the end of the entry.
const TRAILER: usize = 4;

/// One state change of an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Change<'a> {
    pub key: &'a [u8],
    /// `None`: the key is deleted.
    pub value: Option<&'a [u8]>,
    /// A put of a key that no store below held (see the state crate's `WriteSet::put_fresh`).
    pub fresh: bool,
}

/// The state changes of a version 3 entry, read as they are iterated.
#[derive(Debug, Clone, Copy)]
pub struct StateChanges<'a> {
    /// Whether the entry's records hold a backup checkpoint's CREATED event.
    pub created_checkpoint: bool,
    rows: &'a [u8],
}

impl<'a> StateChanges<'a> {
    /// The changes in the order the leader wrote them. A malformed row ends the iteration with
    /// an error.
    pub fn rows(&self) -> Rows<'a> {
        Rows { rest: self.rows }
    }
}

/// Iterator over [`StateChanges::rows`].
pub struct Rows<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for Rows<'a> {
    type Item = Result<Change<'a>, CodecError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        let row = read_row(&mut self.rest);
        if row.is_err() {
            // nothing after a malformed row is read
            self.rest = &[];
        }
        Some(row)
    }
}

fn read_row<'a>(rest: &mut &'a [u8]) -> Result<Change<'a>, CodecError> {
    let (&tag, after) = rest.split_first().ok_or(CodecError::MalformedChanges("a row without its tag"))?;
    *rest = after;
    let key = read_bytes(rest)?;
    let (value, fresh) = match tag {
        TAG_DELETE => (None, false),
        TAG_PUT => (Some(read_bytes(rest)?), false),
        TAG_PUT_FRESH => (Some(read_bytes(rest)?), true),
        _ => return Err(CodecError::MalformedChanges("a row of an unknown kind")),
    };
    Ok(Change { key, value, fresh })
}

fn read_bytes<'a>(rest: &mut &'a [u8]) -> Result<&'a [u8], CodecError> {
    let len = read_varint(rest)?;
    if len > rest.len() as u64 {
        return Err(CodecError::MalformedChanges("a row longer than the entry"));
    }
    let (bytes, after) = rest.split_at(len as usize);
    *rest = after;
    Ok(bytes)
}

fn read_varint(rest: &mut &[u8]) -> Result<u64, CodecError> {
    let mut value = 0u64;
    for (i, &byte) in rest.iter().enumerate().take(10) {
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            *rest = &rest[i + 1..];
            return Ok(value);
        }
    }
    Err(CodecError::MalformedChanges("a length that does not end"))
}

fn write_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push(value as u8 | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Turns a version 2 entry (as [`super::encode_entry`] writes it) into version 3 by appending
/// `changes`: the batch's state changes, and whether its records hold a backup checkpoint's
/// CREATED event.
///
/// # Panics
/// When `entry` is not a version 2 entry (a caller's bug).
pub fn append_state_changes<'k>(entry: &mut Vec<u8>, created_checkpoint: bool, changes: impl IntoIterator<Item = Change<'k>>) {
    assert_eq!(entry.first(), Some(&CODEC_VERSION), "state changes are appended to a version {CODEC_VERSION} entry");
    entry[0] = CODEC_VERSION_WITH_CHANGES;
    let start = entry.len();
    entry.push(if created_checkpoint { FLAG_CHECKPOINT } else { 0 });
    for change in changes {
        let tag = match (change.value, change.fresh) {
            (None, _) => TAG_DELETE,
            (Some(_), false) => TAG_PUT,
            (Some(_), true) => TAG_PUT_FRESH,
        };
        entry.push(tag);
        write_varint(entry, change.key.len() as u64);
        entry.extend_from_slice(change.key);
        if let Some(value) = change.value {
            write_varint(entry, value.len() as u64);
            entry.extend_from_slice(value);
        }
    }
    let section = u32::try_from(entry.len() - start).expect("an entry's state changes take less than 4 GiB");
    entry.extend_from_slice(&section.to_le_bytes());
}

/// Splits a version 3 entry into its records' body (version 2's, without the version byte)
/// and its state changes.
pub(super) fn split(bytes: &[u8]) -> Result<(&[u8], StateChanges<'_>), CodecError> {
    debug_assert_eq!(bytes.first(), Some(&CODEC_VERSION_WITH_CHANGES));
    let too_short = CodecError::MalformedChanges("an entry too short for its state changes");
    let trailer_at = bytes.len().checked_sub(TRAILER).filter(|&at| at >= 1).ok_or(too_short)?;
    let section = u32::from_le_bytes(bytes[trailer_at..].try_into().expect("four bytes")) as usize;
    let section_at = trailer_at
        .checked_sub(section)
        .filter(|&at| at >= 1 && section >= 1)
        .ok_or(CodecError::MalformedChanges("state changes longer than the entry"))?;
    let flags = bytes[section_at];
    let changes = StateChanges { created_checkpoint: flags & FLAG_CHECKPOINT != 0, rows: &bytes[section_at + 1..trailer_at] };
    Ok((&bytes[1..section_at], changes))
}

/// The state changes of an entry that carries them (version 3), `None` for one that does not
/// (versions 1 and 2: its events are replayed instead).
pub fn state_changes(bytes: &[u8]) -> Result<Option<StateChanges<'_>>, CodecError> {
    match bytes.first() {
        Some(&CODEC_VERSION_WITH_CHANGES) => split(bytes).map(|(_, changes)| Some(changes)),
        _ => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change<'a>(key: &'a [u8], value: Option<&'a [u8]>, fresh: bool) -> Change<'a> {
        Change { key, value, fresh }
    }

    #[test]
    fn changes_round_trip_after_the_records() {
        let long = vec![7u8; 300];
        let changes = [change(b"a/1", Some(b"one"), true), change(b"b", None, false), change(b"", Some(&long), false)];
        let mut entry = vec![CODEC_VERSION, 9, 9, 9];
        append_state_changes(&mut entry, true, changes);
        assert_eq!(entry[0], CODEC_VERSION_WITH_CHANGES);
        let (body, read) = split(&entry).unwrap();
        assert_eq!(body, &[9, 9, 9]);
        assert!(read.created_checkpoint);
        let rows: Vec<_> = read.rows().collect::<Result<_, _>>().unwrap();
        assert_eq!(rows, changes);
        // none at all
        let mut empty = vec![CODEC_VERSION, 1];
        append_state_changes(&mut empty, false, []);
        let read = state_changes(&empty).unwrap().unwrap();
        assert!(!read.created_checkpoint);
        assert_eq!(read.rows().count(), 0);
    }

    #[test]
    fn entries_without_changes_have_none() {
        assert!(state_changes(&[CODEC_VERSION, 1, 2]).unwrap().is_none());
        assert!(state_changes(&[]).unwrap().is_none());
    }

    #[test]
    fn malformed_changes_are_errors_not_panics() {
        let mut entry = vec![CODEC_VERSION, 5];
        append_state_changes(&mut entry, false, [change(b"key", Some(b"value"), false)]);
        // every truncation of the entry, and every byte changed, reads as an error or as rows
        for cut in 0..entry.len() {
            let mut bytes = entry[..cut].to_vec();
            if bytes.is_empty() {
                continue;
            }
            bytes[0] = CODEC_VERSION_WITH_CHANGES;
            if let Ok(Some(changes)) = state_changes(&bytes) {
                let _ = changes.rows().count();
            }
        }
        for at in 1..entry.len() {
            for byte in [0u8, 0x7f, 0x80, 0xff] {
                let mut bytes = entry.clone();
                bytes[at] = byte;
                if let Ok(Some(changes)) = state_changes(&bytes) {
                    let _ = changes.rows().count();
                }
            }
        }
        // a length past the end
        let mut bad = vec![CODEC_VERSION_WITH_CHANGES, 0, TAG_PUT, 3, b'k', b'e', b'y', 200, 1];
        let section = (bad.len() - 1) as u32;
        bad.extend_from_slice(&section.to_le_bytes());
        let rows: Vec<_> = state_changes(&bad).unwrap().unwrap().rows().collect();
        assert!(matches!(rows.as_slice(), [Err(CodecError::MalformedChanges(_))]), "{rows:?}");
        // a section longer than the entry
        assert!(matches!(state_changes(&[CODEC_VERSION_WITH_CHANGES, 0, 9, 0, 0, 0]), Err(CodecError::MalformedChanges(_))));
    }
}
