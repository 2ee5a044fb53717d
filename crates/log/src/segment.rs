//! One segment file: records `[len u32][crc32 u32][index u64][term u64][data]`, little endian;
//! the checksum covers index, term and data. Appends are buffered until `flush`.

use std::fs::{self, File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

pub(crate) const HEADER_BYTES: usize = 24;
/// Upper bound of one record's data: a bigger length field means a torn or corrupt header.
const MAX_RECORD_BYTES: usize = 1 << 30;

#[derive(Debug, thiserror::Error)]
pub(crate) enum SegmentError {
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error("{0}")]
    Corrupt(String),
}

pub(crate) struct Record {
    pub index: u64,
    pub term: u64,
    pub data: Vec<u8>,
}

/// A record found by recovery, without its data.
pub(crate) struct Recovered {
    pub index: u64,
    pub term: u64,
    pub offset: u64,
}

pub(crate) struct Segment {
    path: PathBuf,
    file: File,
    /// Bytes appended but not yet written to the file.
    buffer: Vec<u8>,
    /// Length of the file's content (without `buffer`).
    written: u64,
    /// The file's bytes below this offset have been synced and dropped from the page cache.
    uncached_to: u64,
}

pub(crate) fn file_name(first_index: u64) -> String {
    format!("{first_index:020}.seg")
}

/// Page size the cache is dropped in (the smallest Linux uses; a larger one only keeps a little
/// more cached).
const PAGE_BYTES: u64 = 4096;

fn page_floor(offset: u64) -> u64 {
    offset - offset % PAGE_BYTES
}

#[cfg(target_os = "linux")]
fn advise_dont_need(file: &File, offset: u64, len: u64) {
    use std::os::fd::AsRawFd;
    // SAFETY: posix_fadvise reads no memory of ours; the descriptor is open for `file`'s life.
    unsafe {
        libc::posix_fadvise(file.as_raw_fd(), offset as libc::off_t, len as libc::off_t, libc::POSIX_FADV_DONTNEED);
    }
}

#[cfg(not(target_os = "linux"))]
fn advise_dont_need(_file: &File, _offset: u64, _len: u64) {}

fn checksum(index: u64, term: u64, data: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&index.to_le_bytes());
    h.update(&term.to_le_bytes());
    h.update(data);
    h.finalize()
}

impl Segment {
    pub fn create(dir: &Path, first_index: u64) -> Result<Segment, SegmentError> {
        let path = dir.join(file_name(first_index));
        let file = OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&path)?;
        Ok(Segment { path, file, buffer: Vec::new(), written: 0, uncached_to: 0 })
    }

    /// Opens an existing segment and validates every record. A bad record at the end of the last
    /// segment is a torn write and is cut off; anywhere else it is corruption.
    pub fn recover(path: &Path, is_last: bool) -> Result<(Segment, Vec<Recovered>), SegmentError> {
        let mut file = OpenOptions::new().read(true).write(true).open(path)?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        let mut records = Vec::new();
        let mut offset = 0usize;
        let valid_end = loop {
            if offset == bytes.len() {
                break offset;
            }
            match parse(&bytes[offset..]) {
                Some((index, term, size)) => {
                    records.push(Recovered { index, term, offset: offset as u64 });
                    offset += size;
                }
                None if is_last => break offset,
                None => return Err(SegmentError::Corrupt(format!("{}: bad record at offset {offset}", path.display()))),
            }
        };
        if valid_end < bytes.len() {
            file.set_len(valid_end as u64)?;
            file.sync_all()?;
        }
        let uncached_to = page_floor(valid_end as u64);
        Ok((Segment { path: path.to_path_buf(), file, buffer: Vec::new(), written: valid_end as u64, uncached_to }, records))
    }

    /// Bytes in the segment, buffered ones included.
    pub fn len(&self) -> u64 {
        self.written + self.buffer.len() as u64
    }

    /// Buffers a record and returns its offset.
    pub fn append(&mut self, index: u64, term: u64, data: &[u8]) -> Result<u64, SegmentError> {
        let offset = self.len();
        let len = u32::try_from(data.len()).map_err(|_| SegmentError::Corrupt("entry larger than 4 GiB".into()))?;
        self.buffer.extend_from_slice(&len.to_le_bytes());
        self.buffer.extend_from_slice(&checksum(index, term, data).to_le_bytes());
        self.buffer.extend_from_slice(&index.to_le_bytes());
        self.buffer.extend_from_slice(&term.to_le_bytes());
        self.buffer.extend_from_slice(data);
        Ok(offset)
    }

    /// Writes buffered records; with `sync`, fdatasyncs the file.
    pub fn flush(&mut self, sync: bool) -> Result<(), SegmentError> {
        if !self.buffer.is_empty() {
            self.file.write_all_at(&self.buffer, self.written)?;
            self.written += self.buffer.len() as u64;
            self.buffer.clear();
            if sync {
                self.file.sync_data()?;
                self.drop_synced_pages();
            }
        }
        Ok(())
    }

    /// Tells the kernel it may drop the pages just synced from its cache: the log is written once
    /// and read back rarely (a lagging follower, recovery), while keeping every appended page
    /// cached grew the page cache by the log's whole rate (~50 MB/s under W2) until the next
    /// compaction. On a fresh virtual machine each new page-cache page is memory the host has not
    /// backed yet, and copying into it cost the partition thread ~14 % of its samples; dropped
    /// pages are reused at once. The page the file ends in stays cached: the next append writes
    /// into it. Best effort: the advice changes no content, so a failure is ignored.
    fn drop_synced_pages(&mut self) {
        let end = page_floor(self.written);
        if end > self.uncached_to {
            advise_dont_need(&self.file, self.uncached_to, end - self.uncached_to);
            self.uncached_to = end;
        }
    }

    /// Lets go of the append buffer's memory, for a segment that takes no more appends (it is
    /// flushed): `flush` keeps the capacity for the next append, and a closed segment kept it
    /// until the log was compacted, a large batch's worth per segment (with 46 KB variables,
    /// ~8 MB each: 0.5 GB of memory for a 4 GB log).
    pub fn release_buffer(&mut self) {
        debug_assert!(self.buffer.is_empty(), "released before it was flushed");
        self.buffer = Vec::new();
    }

    /// The append buffer's capacity (tests).
    #[cfg(test)]
    pub fn buffer_capacity(&self) -> usize {
        self.buffer.capacity()
    }

    pub fn read_at(&self, offset: u64) -> Result<Record, SegmentError> {
        let corrupt = || SegmentError::Corrupt(format!("{}: bad record at offset {offset}", self.path.display()));
        if offset >= self.written {
            let start = (offset - self.written) as usize;
            let (index, term, size) = parse(&self.buffer[start..]).ok_or_else(corrupt)?;
            let data = self.buffer[start + HEADER_BYTES..start + size].to_vec();
            return Ok(Record { index, term, data });
        }
        let mut header = [0u8; HEADER_BYTES];
        self.file.read_exact_at(&mut header, offset)?;
        let len = u32::from_le_bytes(header[0..4].try_into().expect("4 bytes")) as usize;
        if len > MAX_RECORD_BYTES {
            return Err(corrupt());
        }
        let mut data = vec![0u8; len];
        self.file.read_exact_at(&mut data, offset + HEADER_BYTES as u64)?;
        let crc = u32::from_le_bytes(header[4..8].try_into().expect("4 bytes"));
        let index = u64::from_le_bytes(header[8..16].try_into().expect("8 bytes"));
        let term = u64::from_le_bytes(header[16..24].try_into().expect("8 bytes"));
        if checksum(index, term, &data) != crc {
            return Err(corrupt());
        }
        Ok(Record { index, term, data })
    }

    /// Cuts the segment at `offset` (a record boundary).
    pub fn truncate(&mut self, offset: u64) -> Result<(), SegmentError> {
        if offset >= self.written {
            self.buffer.truncate((offset - self.written) as usize);
        } else {
            self.buffer.clear();
            self.file.set_len(offset)?;
            self.file.sync_all()?;
            self.written = offset;
            self.uncached_to = self.uncached_to.min(page_floor(offset));
        }
        Ok(())
    }

    pub fn delete(self) -> Result<(), SegmentError> {
        drop(self.file);
        fs::remove_file(&self.path)?;
        Ok(())
    }

    /// Takes the segment out of the journal's file set without freeing its space yet: renames
    /// it to `<name>.deleted` (only a directory update) and returns the new path, for
    /// [`crate::remove_in_background`]. Unlinking a large file can take hundreds of milliseconds.
    pub fn retire(self) -> Result<PathBuf, SegmentError> {
        drop(self.file);
        let retired = self.path.with_extension("seg.deleted");
        fs::rename(&self.path, &retired)?;
        Ok(retired)
    }
}

/// Parses one record at the start of `bytes`: (index, term, total size), or None if incomplete
/// or its checksum does not match.
pub(crate) fn parse(bytes: &[u8]) -> Option<(u64, u64, usize)> {
    if bytes.len() < HEADER_BYTES {
        return None;
    }
    let len = u32::from_le_bytes(bytes[0..4].try_into().ok()?) as usize;
    if len > MAX_RECORD_BYTES || bytes.len() < HEADER_BYTES + len {
        return None;
    }
    let crc = u32::from_le_bytes(bytes[4..8].try_into().ok()?);
    let index = u64::from_le_bytes(bytes[8..16].try_into().ok()?);
    let term = u64::from_le_bytes(bytes[16..24].try_into().ok()?);
    (checksum(index, term, &bytes[HEADER_BYTES..HEADER_BYTES + len]) == crc).then_some((index, term, HEADER_BYTES + len))
}
