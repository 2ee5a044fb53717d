//! The partition journal: an append-only, segmented, checksummed log of Raft entries plus the
//! Raft hard state.
//!
//! Owns durability of the log; does not interpret entries. Contract for callers:
//! - `append` may overwrite a suffix (Raft's conflict resolution) but never below the compaction
//!   point; entries must be contiguous.
//! - Nothing is durable until `flush` returns: it writes buffered records and fsyncs once. The
//!   hard state's term and vote are durable after `flush` too (one more atomic file write, only
//!   when they changed). Its commit index is persisted lazily, with the next term or vote change:
//!   after a restart it may be lower than it was (Raft's commit index is volatile state; callers
//!   raise it again). A crash before `flush` may lose (only) the unflushed tail.
//! - After a crash, `open` truncates a torn record at the end of the last segment; corruption
//!   anywhere else is an error, never silently skipped.

mod reader;
mod segment;

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

pub use reader::LogReader;
use segment::{Segment, SegmentError};

/// One log entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub index: u64,
    pub term: u64,
    pub data: Vec<u8>,
}

/// Raft's persistent vote state plus the commit index.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HardState {
    pub term: u64,
    pub vote: u64,
    pub commit: u64,
}

#[derive(Debug, Clone)]
pub struct JournalConfig {
    /// A segment is closed and a new one started once it exceeds this size.
    pub segment_bytes: u64,
}

impl Default for JournalConfig {
    fn default() -> Self {
        Self { segment_bytes: 64 << 20 }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error("journal io: {0}")]
    Io(#[from] std::io::Error),
    #[error("journal corrupt: {0}")]
    Corrupt(String),
    #[error("entries must be contiguous: expected index {expected}, got {got}")]
    NonContiguous { expected: u64, got: u64 },
    #[error("index {index} is at or below the compaction point {compacted}")]
    Compacted { index: u64, compacted: u64 },
    #[error(
        "{path}: journal format version {found}, written by a newer Waggle (this one reads up to version {JOURNAL_FORMAT_VERSION}): refusing to open it"
    )]
    NewerFormat { path: PathBuf, found: u32 },
}

impl From<SegmentError> for JournalError {
    fn from(e: SegmentError) -> Self {
        match e {
            SegmentError::Io(e) => JournalError::Io(e),
            SegmentError::Corrupt(m) => JournalError::Corrupt(m),
        }
    }
}

/// Where an entry lives.
#[derive(Debug, Clone, Copy)]
struct Location {
    segment: usize,
    offset: u64,
    term: u64,
}

const HARD_STATE_FILE: &str = "hardstate";
/// The file naming the journal's format version (segment framing, meta and hard state files):
/// `waggle-journal <version>`. A journal without it was written before it existed, in version 1.
const FORMAT_FILE: &str = "format";
/// The journal format this build writes and reads.
pub const JOURNAL_FORMAT_VERSION: u32 = 1;
const META_FILE: &str = "meta";

/// Refuses a journal of a newer format than [`JOURNAL_FORMAT_VERSION`], and records the
/// version in a journal that has no format file yet (a new one, or one written before it).
fn check_format(dir: &Path) -> Result<(), JournalError> {
    let path = dir.join(FORMAT_FILE);
    match fs::read_to_string(&path) {
        Ok(text) => {
            let found = text.trim().strip_prefix("waggle-journal ").and_then(|v| v.parse::<u32>().ok());
            match found {
                Some(v) if v <= JOURNAL_FORMAT_VERSION => Ok(()),
                Some(found) => Err(JournalError::NewerFormat { path, found }),
                None => Err(JournalError::Corrupt(format!("{}: not a journal format file: {text:?}", path.display()))),
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let tmp = dir.join("format.tmp");
            let mut file = fs::File::create(&tmp)?;
            std::io::Write::write_all(&mut file, format!("waggle-journal {JOURNAL_FORMAT_VERSION}\n").as_bytes())?;
            file.sync_all()?;
            fs::rename(&tmp, &path)?;
            Ok(())
        }
        Err(e) => Err(e.into()),
    }
}

/// The journal of one partition.
pub struct Journal {
    dir: PathBuf,
    config: JournalConfig,
    /// Open segments in index order; the last one is active.
    segments: Vec<Segment>,
    /// Locations of entries `compacted_index + 1 ..= last_index`.
    locations: Vec<Location>,
    compacted_index: u64,
    compacted_term: u64,
    hard_state: HardState,
    hard_state_dirty: bool,
}

impl Journal {
    /// Opens (creating if missing) the journal in `dir` and recovers it.
    pub fn open(dir: &Path, config: JournalConfig) -> Result<Self, JournalError> {
        fs::create_dir_all(dir)?;
        check_format(dir)?;
        let (compacted_index, compacted_term) = read_pair(&dir.join(META_FILE))?.unwrap_or((0, 0));
        let hard_state =
            read_pair3(&dir.join(HARD_STATE_FILE))?.map(|(term, vote, commit)| HardState { term, vote, commit }).unwrap_or_default();
        let mut names: Vec<(u64, PathBuf)> = fs::read_dir(dir)?
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                let first = name.strip_suffix(".seg")?.parse::<u64>().ok()?;
                Some((first, e.path()))
            })
            .collect();
        names.sort();
        let mut journal = Journal {
            dir: dir.to_path_buf(),
            config,
            segments: Vec::new(),
            locations: Vec::new(),
            compacted_index,
            compacted_term,
            hard_state,
            hard_state_dirty: false,
        };
        // segments retired by a compaction just before a crash
        let leftovers =
            fs::read_dir(dir)?.filter_map(|e| e.ok()).map(|e| e.path()).filter(|p| p.to_string_lossy().ends_with(".seg.deleted")).collect();
        remove_in_background(leftovers);
        let count = names.len();
        for (i, (_, path)) in names.into_iter().enumerate() {
            let last_segment = i + 1 == count;
            let (segment, records) = Segment::recover(&path, last_segment)?;
            let seg_no = journal.segments.len();
            journal.segments.push(segment);
            for r in records {
                if r.index <= journal.compacted_index {
                    continue; // compacted entries still in a partly retained segment
                }
                let expected = journal.last_index() + 1;
                if r.index != expected {
                    return Err(JournalError::Corrupt(format!("{}: expected entry {expected}, found {}", path.display(), r.index)));
                }
                journal.locations.push(Location { segment: seg_no, offset: r.offset, term: r.term });
            }
        }
        Ok(journal)
    }

    /// The append buffers' capacity held by segments other than the active one (tests).
    #[cfg(test)]
    pub(crate) fn closed_segments_buffer_capacity(&self) -> usize {
        let n = self.segments.len().saturating_sub(1);
        self.segments[..n].iter().map(|s| s.buffer_capacity()).sum()
    }

    /// Index of the first available entry (`compaction index + 1`).
    pub fn first_index(&self) -> u64 {
        self.compacted_index + 1
    }

    /// Index of the last entry, or the compaction index when there is none.
    pub fn last_index(&self) -> u64 {
        self.compacted_index + self.locations.len() as u64
    }

    /// The latest hard state set; right after [`Self::open`], the commit index may be older than
    /// the one last set (see [`Self::set_hard_state`]).
    pub fn hard_state(&self) -> HardState {
        self.hard_state
    }

    /// Records the hard state. A new term or vote becomes durable at the next [`Self::flush`]; a
    /// new commit index alone is only written with the next term or vote change (writing it
    /// for every commit would cost an atomic file replacement, two more fsyncs, per batch).
    pub fn set_hard_state(&mut self, hs: HardState) -> Result<(), JournalError> {
        if (hs.term, hs.vote) != (self.hard_state.term, self.hard_state.vote) {
            self.hard_state_dirty = true;
        }
        self.hard_state = hs;
        Ok(())
    }

    /// Term of the entry at `index`; the compaction point's term for the compaction index.
    pub fn term(&self, index: u64) -> Option<u64> {
        if index == self.compacted_index {
            return Some(self.compacted_term);
        }
        self.location(index).map(|l| l.term)
    }

    fn location(&self, index: u64) -> Option<Location> {
        if index <= self.compacted_index {
            return None;
        }
        self.locations.get((index - self.compacted_index - 1) as usize).copied()
    }

    /// The entry at `index`, if present.
    pub fn entry(&self, index: u64) -> Result<Option<Entry>, JournalError> {
        let Some(loc) = self.location(index) else { return Ok(None) };
        let record = self.segments[loc.segment].read_at(loc.offset)?;
        if record.index != index {
            return Err(JournalError::Corrupt(format!("entry {index} read back as {}", record.index)));
        }
        Ok(Some(Entry { index, term: record.term, data: record.data }))
    }

    /// Entries in `[low, high)`, stopping once `max_bytes` of data is reached (but always at
    /// least one entry when the range is not empty).
    pub fn entries(&self, low: u64, high: u64, max_bytes: Option<u64>) -> Result<Vec<Entry>, JournalError> {
        let mut out = Vec::new();
        let mut size = 0u64;
        for index in low..high.min(self.last_index() + 1) {
            let Some(e) = self.entry(index)? else { break };
            size += e.data.len() as u64;
            if !out.is_empty() && max_bytes.is_some_and(|m| size > m) {
                break;
            }
            out.push(e);
        }
        Ok(out)
    }

    /// Appends contiguous entries; an entry at an existing index replaces it and everything after.
    pub fn append(&mut self, entries: &[Entry]) -> Result<(), JournalError> {
        let Some(first) = entries.first() else { return Ok(()) };
        if first.index <= self.compacted_index {
            return Err(JournalError::Compacted { index: first.index, compacted: self.compacted_index });
        }
        if first.index > self.last_index() + 1 {
            return Err(JournalError::NonContiguous { expected: self.last_index() + 1, got: first.index });
        }
        if first.index <= self.last_index() {
            self.truncate_from(first.index)?;
        }
        for e in entries {
            let expected = self.last_index() + 1;
            if e.index != expected {
                return Err(JournalError::NonContiguous { expected, got: e.index });
            }
            if self.segments.last().is_none_or(|s| s.len() >= self.config.segment_bytes) {
                self.roll(e.index)?;
            }
            let seg_no = self.segments.len() - 1;
            let offset = self.segments[seg_no].append(e.index, e.term, &e.data)?;
            self.locations.push(Location { segment: seg_no, offset, term: e.term });
        }
        Ok(())
    }

    /// Drops entries `>= index` from memory and disk.
    fn truncate_from(&mut self, index: u64) -> Result<(), JournalError> {
        let keep = (index - self.compacted_index - 1) as usize;
        let loc = self.locations[keep];
        self.locations.truncate(keep);
        while self.segments.len() > loc.segment + 1 {
            let s = self.segments.pop().expect("segment");
            s.delete()?;
        }
        if loc.offset == 0 && loc.segment > 0 {
            let s = self.segments.pop().expect("segment");
            s.delete()?;
        } else {
            self.segments[loc.segment].truncate(loc.offset)?;
        }
        Ok(())
    }

    fn roll(&mut self, first_index: u64) -> Result<(), JournalError> {
        if let Some(active) = self.segments.last_mut() {
            active.flush(true)?;
            active.release_buffer();
        }
        let segment = Segment::create(&self.dir, first_index)?;
        sync_dir(&self.dir)?;
        self.segments.push(segment);
        Ok(())
    }

    /// Makes everything appended and the hard state durable, with one fsync of the active segment
    /// (plus one for the hard state when it changed).
    pub fn flush(&mut self) -> Result<(), JournalError> {
        if let Some(active) = self.segments.last_mut() {
            active.flush(true)?;
        }
        if self.hard_state_dirty {
            let hs = self.hard_state;
            write_atomically(&self.dir, HARD_STATE_FILE, &encode(&[hs.term, hs.vote, hs.commit]))?;
            self.hard_state_dirty = false;
        }
        Ok(())
    }

    /// Drops entries up to and including `index` (its state is in a snapshot); `term` is the
    /// term of that entry. Whole segments below the point are deleted.
    pub fn compact(&mut self, index: u64, term: u64) -> Result<(), JournalError> {
        if index <= self.compacted_index {
            return Ok(());
        }
        let index = index.min(self.last_index());
        self.flush()?;
        write_atomically(&self.dir, META_FILE, &encode(&[index, term]))?;
        let dropped = (index - self.compacted_index) as usize;
        let first_kept_segment = self.locations.get(dropped).map(|l| l.segment).unwrap_or(self.segments.len() - 1);
        self.locations.drain(..dropped);
        self.compacted_index = index;
        self.compacted_term = term;
        if first_kept_segment > 0 {
            let mut retired = Vec::new();
            for s in self.segments.drain(..first_kept_segment) {
                retired.push(s.retire()?);
            }
            remove_in_background(retired);
            for l in &mut self.locations {
                l.segment -= first_kept_segment;
            }
        }
        Ok(())
    }

    /// Discards the whole log: the journal restarts empty after `index` (installed snapshot).
    /// The new start is durable first; then the segments go, durably too (a crash in between
    /// leaves entries after `index` that `open` takes as the log's tail, which Raft's
    /// consistency check then replaces).
    pub fn reset_to_snapshot(&mut self, index: u64, term: u64) -> Result<(), JournalError> {
        write_atomically(&self.dir, META_FILE, &encode(&[index, term]))?;
        for s in self.segments.drain(..) {
            s.delete()?;
        }
        sync_dir(&self.dir)?;
        self.locations.clear();
        self.compacted_index = index;
        self.compacted_term = term;
        Ok(())
    }
}

fn encode(values: &[u64]) -> Vec<u8> {
    let mut buf: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    let crc = crc32fast::hash(&buf);
    buf.extend_from_slice(&crc.to_le_bytes());
    buf
}

fn decode(path: &Path, n: usize) -> Result<Option<Vec<u64>>, JournalError> {
    let bytes = match fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    if bytes.len() != n * 8 + 4 || crc32fast::hash(&bytes[..n * 8]).to_le_bytes() != bytes[n * 8..] {
        return Err(JournalError::Corrupt(format!("{} has a bad checksum or length", path.display())));
    }
    Ok(Some(bytes[..n * 8].chunks(8).map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes"))).collect()))
}

fn read_pair(path: &Path) -> Result<Option<(u64, u64)>, JournalError> {
    Ok(decode(path, 2)?.map(|v| (v[0], v[1])))
}

fn read_pair3(path: &Path) -> Result<Option<(u64, u64, u64)>, JournalError> {
    Ok(decode(path, 3)?.map(|v| (v[0], v[1], v[2])))
}

/// Removes retired segment files on a thread of their own, a few megabytes at a time: freeing a
/// file's blocks is a filesystem journal transaction that the partition's next fdatasync waits
/// for. Unlinking a gigabyte at once slowed those fdatasyncs to 35-40 ms for most of a second;
/// one 64 MB file at once still held one for 55-60 ms (W1's p99). Shrinking a file by
/// [`SHRINK_STEP`] every [`SHRINK_PAUSE`] keeps each transaction small. Files left by a crash
/// are removed at the next `open`.
fn remove_in_background(paths: Vec<PathBuf>) {
    if paths.is_empty() {
        return;
    }
    let remove = |paths: Vec<PathBuf>| {
        for p in paths {
            shrink(&p);
            let _ = fs::remove_file(p);
        }
    };
    let spawned = std::thread::Builder::new().name("journal-trash".into()).spawn({
        let paths = paths.clone();
        move || remove(paths)
    });
    if spawned.is_err() {
        remove(paths);
    }
}

/// Bytes freed from a retired segment per step.
const SHRINK_STEP: u64 = 2 << 20;
/// Pause between two steps.
const SHRINK_PAUSE: std::time::Duration = std::time::Duration::from_millis(10);

/// Cuts a file down to nothing, [`SHRINK_STEP`] at a time (best effort: errors end it).
fn shrink(path: &Path) {
    let Ok(file) = fs::OpenOptions::new().write(true).open(path) else { return };
    let Ok(mut len) = file.metadata().map(|m| m.len()) else { return };
    while len > 0 {
        len = len.saturating_sub(SHRINK_STEP);
        if file.set_len(len).is_err() {
            return;
        }
        std::thread::sleep(SHRINK_PAUSE);
    }
}

/// tmp file + fsync + rename + directory fsync: readers see the old or the new content.
fn write_atomically(dir: &Path, name: &str, bytes: &[u8]) -> Result<(), JournalError> {
    let tmp = dir.join(format!("{name}.tmp"));
    let mut f = fs::File::create(&tmp)?;
    f.write_all(bytes)?;
    f.sync_data()?;
    fs::rename(&tmp, dir.join(name))?;
    sync_dir(dir)?;
    Ok(())
}

fn sync_dir(dir: &Path) -> Result<(), JournalError> {
    fs::File::open(dir)?.sync_all()?;
    Ok(())
}

#[cfg(test)]
mod tests;
