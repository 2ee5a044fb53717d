//! A reader of a journal's committed entries from another thread than the journal's owner
//! (exporters): it reads the segment files itself, never the journal's memory.
//!
//! Contract: entries up to the index passed to [`LogReader::next`] must be committed (durable and
//! never rewritten: Raft only truncates past its commit index); entries past it may still be
//! written or rewritten, and the reader never keeps their bytes. The journal must not compact
//! past what the reader has yet to read (the caller holds compaction back); if it did, the
//! reader goes on at the first entry still there and says so ([`LogReader::skipped`]).

use std::fs::{self, File};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use crate::segment::{self, HEADER_BYTES};
use crate::{Entry, JournalError, META_FILE};

/// Bytes read from a segment file at once while catching up.
const READ_AHEAD: usize = 1 << 20;

/// Reads a journal directory's entries in index order.
pub struct LogReader {
    dir: PathBuf,
    next_index: u64,
    /// The segment being read: its file and the offset of `next_index`'s record in it.
    segment: Option<(File, u64)>,
    /// Bytes of the segment from the offset on, from `start` (only whole records at or below
    /// the last `upto`, or bytes read in this call); the bytes before `start` are consumed and
    /// dropped at the next read (not per entry: moving the rest of a 1 MiB buffer for each
    /// entry taken was most of an exporter's reading time, issue 27).
    buffer: Vec<u8>,
    start: usize,
    /// Entries the journal no longer held when the reader came to them.
    skipped: u64,
}

impl LogReader {
    /// A reader whose first entry is `from` (or the first one the journal still holds, if it
    /// was compacted past `from`).
    pub fn open(dir: &Path, from: u64) -> LogReader {
        LogReader { dir: dir.to_path_buf(), next_index: from.max(1), segment: None, buffer: Vec::new(), start: 0, skipped: 0 }
    }

    /// The index of the entry the next [`Self::next`] returns.
    pub fn next_index(&self) -> u64 {
        self.next_index
    }

    /// How many entries were gone (compacted) when the reader came to them.
    pub fn skipped(&self) -> u64 {
        self.skipped
    }

    /// The next entry if its index is at most `upto` (committed); `None` when there is none yet.
    pub fn next(&mut self, upto: u64) -> Result<Option<Entry>, JournalError> {
        if self.next_index > upto {
            return Ok(None);
        }
        if self.segment.is_none() && !self.locate()? {
            return Ok(None);
        }
        loop {
            if let Some(entry) = self.parse_buffered(upto)? {
                return Ok(Some(entry));
            }
            if self.next_index > upto {
                return Ok(None);
            }
            // not a whole record in the buffer: read more of the segment
            self.buffer.drain(..self.start);
            self.start = 0;
            let (file, offset) = self.segment.as_mut().expect("a segment");
            let at = *offset + self.buffer.len() as u64;
            // into the spare capacity, without zeroing a whole read-ahead first
            file.seek(SeekFrom::Start(at))?;
            let read = Read::take(&*file, READ_AHEAD as u64).read_to_end(&mut self.buffer)?;
            if read == 0 {
                // the segment ends here: the entry is in the next one, or not written yet
                self.clear();
                let next = self.dir.join(segment::file_name(self.next_index));
                match File::open(&next) {
                    Ok(file) => self.segment = Some((file, 0)),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
                    Err(e) => return Err(e.into()),
                }
            }
        }
    }

    /// The record at the buffer's start, if it is whole and at most `upto`; records before
    /// `next_index` (a compacted segment's first ones) are passed over.
    fn parse_buffered(&mut self, upto: u64) -> Result<Option<Entry>, JournalError> {
        loop {
            let Some((index, term, size)) = segment::parse(&self.buffer[self.start..]) else { return Ok(None) };
            if index < self.next_index {
                self.consume(size);
                continue;
            }
            if index != self.next_index {
                return Err(JournalError::Corrupt(format!("{}: expected entry {}, found {index}", self.dir.display(), self.next_index)));
            }
            if index > upto {
                // not committed yet: its bytes may still change
                self.clear();
                return Ok(None);
            }
            let data = self.buffer[self.start + HEADER_BYTES..self.start + size].to_vec();
            self.consume(size);
            self.next_index += 1;
            return Ok(Some(Entry { index, term, data }));
        }
    }

    /// Forgets the buffered bytes (the offset stays at `next_index`'s record).
    fn clear(&mut self) {
        self.buffer.clear();
        self.start = 0;
    }

    fn consume(&mut self, size: usize) {
        self.start += size;
        if let Some((_, offset)) = &mut self.segment {
            *offset += size as u64;
        }
    }

    /// Opens the segment holding `next_index` (the last one starting at or before it); moves
    /// `next_index` up to the journal's first entry if it was compacted past it. `false`: no
    /// segment holds it yet.
    fn locate(&mut self) -> Result<bool, JournalError> {
        let compacted = crate::read_pair(&self.dir.join(META_FILE))?.map_or(0, |(index, _)| index);
        if self.next_index <= compacted {
            self.skipped += compacted + 1 - self.next_index;
            self.next_index = compacted + 1;
        }
        let mut firsts: Vec<u64> = match fs::read_dir(&self.dir) {
            Ok(entries) => entries
                .filter_map(|e| e.ok())
                .filter_map(|e| e.file_name().into_string().ok()?.strip_suffix(".seg")?.parse::<u64>().ok())
                .collect(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(e.into()),
        };
        firsts.sort_unstable();
        let Some(&first) = firsts.iter().rev().find(|&&f| f <= self.next_index).or(firsts.first()) else { return Ok(false) };
        if first > self.next_index {
            // compacted between reading the meta file and listing the segments
            self.skipped += first - self.next_index;
            self.next_index = first;
        }
        let file = match File::open(self.dir.join(segment::file_name(first))) {
            Ok(file) => file,
            // retired meanwhile: look again next time
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(e.into()),
        };
        self.segment = Some((file, 0));
        self.clear();
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Journal, JournalConfig};

    fn entry(index: u64) -> Entry {
        Entry { index, term: 1, data: format!("entry {index}").into_bytes() }
    }

    #[test]
    fn reads_committed_entries_across_segments_and_waits_for_more() {
        let dir = tempfile::tempdir().unwrap();
        let mut journal = Journal::open(dir.path(), JournalConfig { segment_bytes: 100 }).unwrap();
        journal.append(&(1..=10).map(entry).collect::<Vec<_>>()).unwrap();
        journal.flush().unwrap();
        let mut reader = LogReader::open(dir.path(), 1);
        for i in 1..=6 {
            assert_eq!(reader.next(6).unwrap(), Some(entry(i)));
        }
        assert_eq!(reader.next(6).unwrap(), None, "entry 7 is not committed");
        assert_eq!(reader.next(10).unwrap(), Some(entry(7)));
        for i in 8..=10 {
            assert_eq!(reader.next(20).unwrap(), Some(entry(i)));
        }
        assert_eq!(reader.next(20).unwrap(), None, "nothing written after 10");
        journal.append(&(11..=13).map(entry).collect::<Vec<_>>()).unwrap();
        journal.flush().unwrap();
        for i in 11..=13 {
            assert_eq!(reader.next(20).unwrap(), Some(entry(i)));
        }
        assert_eq!(reader.skipped(), 0);
    }

    #[test]
    fn starts_in_the_middle_and_after_compaction() {
        let dir = tempfile::tempdir().unwrap();
        let mut journal = Journal::open(dir.path(), JournalConfig { segment_bytes: 100 }).unwrap();
        journal.append(&(1..=10).map(entry).collect::<Vec<_>>()).unwrap();
        journal.flush().unwrap();
        let mut reader = LogReader::open(dir.path(), 5);
        assert_eq!(reader.next(10).unwrap(), Some(entry(5)));
        journal.compact(8, 1).unwrap();
        let mut late = LogReader::open(dir.path(), 3);
        assert_eq!(late.next(10).unwrap(), Some(entry(9)), "entries up to 8 are gone");
        assert_eq!(late.skipped(), 6);
    }
}
