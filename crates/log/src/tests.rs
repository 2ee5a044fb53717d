use std::fs::OpenOptions;
use std::io::Write;

use super::*;

fn entries(range: std::ops::RangeInclusive<u64>, term: u64) -> Vec<Entry> {
    range.map(|i| Entry { index: i, term, data: format!("entry-{i}-{term}").into_bytes() }).collect()
}

fn small() -> JournalConfig {
    JournalConfig { segment_bytes: 100 }
}

fn segment_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<_> =
        fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).filter(|p| p.extension().is_some_and(|e| e == "seg")).collect();
    v.sort();
    v
}

#[test]
fn appended_entries_and_hard_state_survive_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let mut j = Journal::open(dir.path(), small()).unwrap();
    assert_eq!((j.first_index(), j.last_index()), (1, 0));
    j.append(&entries(1..=10, 1)).unwrap();
    j.set_hard_state(HardState { term: 1, vote: 1, commit: 7 }).unwrap();
    assert_eq!(j.entry(10).unwrap().unwrap().data, b"entry-10-1"); // readable before flush
    j.flush().unwrap();
    drop(j);
    let j = Journal::open(dir.path(), small()).unwrap();
    assert_eq!(j.last_index(), 10);
    assert_eq!(j.hard_state(), HardState { term: 1, vote: 1, commit: 7 });
    assert_eq!(j.entries(1, 11, None).unwrap(), entries(1..=10, 1));
    assert!(segment_files(dir.path()).len() > 1, "small segments roll");
}

#[test]
fn commit_alone_is_persisted_lazily_with_the_next_term_or_vote_change() {
    let dir = tempfile::tempdir().unwrap();
    let mut j = Journal::open(dir.path(), small()).unwrap();
    j.append(&entries(1..=5, 1)).unwrap();
    j.set_hard_state(HardState { term: 1, vote: 1, commit: 2 }).unwrap();
    j.flush().unwrap();
    j.set_hard_state(HardState { term: 1, vote: 1, commit: 5 }).unwrap();
    j.flush().unwrap();
    assert_eq!(j.hard_state().commit, 5);
    drop(j);
    let mut j = Journal::open(dir.path(), small()).unwrap();
    assert_eq!(j.hard_state(), HardState { term: 1, vote: 1, commit: 2 }, "a commit-only change is not written");
    j.set_hard_state(HardState { term: 1, vote: 1, commit: 4 }).unwrap();
    j.set_hard_state(HardState { term: 2, vote: 1, commit: 5 }).unwrap();
    j.flush().unwrap();
    drop(j);
    let j = Journal::open(dir.path(), small()).unwrap();
    assert_eq!(j.hard_state(), HardState { term: 2, vote: 1, commit: 5 });
}

#[test]
fn torn_tail_is_truncated_and_appending_continues() {
    let dir = tempfile::tempdir().unwrap();
    let mut j = Journal::open(dir.path(), JournalConfig::default()).unwrap();
    j.append(&entries(1..=3, 1)).unwrap();
    j.flush().unwrap();
    drop(j);
    let last = segment_files(dir.path()).pop().unwrap();
    let len = fs::metadata(&last).unwrap().len();
    // a record header promising more bytes than were written
    OpenOptions::new().append(true).open(&last).unwrap().write_all(&[50, 0, 0, 0, 1, 2, 3, 4, 4, 0]).unwrap();
    let mut j = Journal::open(dir.path(), JournalConfig::default()).unwrap();
    assert_eq!(j.last_index(), 3);
    assert_eq!(fs::metadata(&last).unwrap().len(), len);
    j.append(&entries(4..=4, 1)).unwrap();
    j.flush().unwrap();
    drop(j);
    assert_eq!(Journal::open(dir.path(), JournalConfig::default()).unwrap().entries(1, 5, None).unwrap(), entries(1..=4, 1));
}

#[test]
fn conflicting_append_replaces_the_suffix_across_segments() {
    let dir = tempfile::tempdir().unwrap();
    let mut j = Journal::open(dir.path(), small()).unwrap();
    j.append(&entries(1..=12, 1)).unwrap();
    j.flush().unwrap();
    j.append(&entries(3..=4, 2)).unwrap();
    j.flush().unwrap();
    assert_eq!(j.last_index(), 4);
    assert_eq!(j.term(2), Some(1));
    assert_eq!(j.term(3), Some(2));
    drop(j);
    let j = Journal::open(dir.path(), small()).unwrap();
    let mut want = entries(1..=2, 1);
    want.extend(entries(3..=4, 2));
    assert_eq!(j.entries(1, 100, None).unwrap(), want);
    assert!(matches!(
        Journal::open(dir.path(), small()).unwrap().append(&entries(9..=9, 2)),
        Err(JournalError::NonContiguous { expected: 5, got: 9 })
    ));
}

#[test]
fn compaction_deletes_old_segments_and_survives_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let mut j = Journal::open(dir.path(), small()).unwrap();
    j.append(&entries(1..=20, 1)).unwrap();
    j.flush().unwrap();
    let before = segment_files(dir.path()).len();
    j.compact(15, 1).unwrap();
    assert!(segment_files(dir.path()).len() < before);
    assert_eq!((j.first_index(), j.last_index(), j.term(15)), (16, 20, Some(1)));
    assert_eq!(j.entry(15).unwrap(), None);
    assert!(matches!(j.append(&entries(10..=10, 1)), Err(JournalError::Compacted { .. })));
    drop(j);
    let mut j = Journal::open(dir.path(), small()).unwrap();
    assert_eq!((j.first_index(), j.last_index(), j.term(15)), (16, 20, Some(1)));
    assert_eq!(j.entries(16, 21, None).unwrap(), entries(16..=20, 1));
    j.compact(20, 1).unwrap();
    j.append(&entries(21..=21, 2)).unwrap();
    j.flush().unwrap();
    drop(j);
    let j = Journal::open(dir.path(), small()).unwrap();
    assert_eq!((j.first_index(), j.last_index()), (21, 21));
}

/// Waits (up to 10 s) until no retired segment file is left in `dir`.
fn retired_files_disappear(dir: &Path) -> bool {
    for _ in 0..1000 {
        let left = fs::read_dir(dir).unwrap().filter(|e| e.as_ref().unwrap().path().to_string_lossy().ends_with(".seg.deleted")).count();
        if left == 0 {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    false
}

#[test]
fn compacted_segments_are_removed_off_the_caller_and_leftovers_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let mut j = Journal::open(dir.path(), small()).unwrap();
    j.append(&entries(1..=20, 1)).unwrap();
    j.flush().unwrap();
    j.compact(15, 1).unwrap();
    assert!(retired_files_disappear(dir.path()), "retired segments were not removed");
    drop(j);
    // a crash between retiring and removing leaves a renamed file behind
    fs::write(dir.path().join("00000000000000000001.seg.deleted"), b"old entries").unwrap();
    let j = Journal::open(dir.path(), small()).unwrap();
    assert_eq!((j.first_index(), j.last_index()), (16, 20));
    assert!(retired_files_disappear(dir.path()), "a leftover retired segment was not removed at open");
}

#[test]
fn reset_to_snapshot_empties_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let mut j = Journal::open(dir.path(), small()).unwrap();
    j.append(&entries(1..=5, 1)).unwrap();
    j.flush().unwrap();
    j.reset_to_snapshot(100, 3).unwrap();
    assert_eq!((j.first_index(), j.last_index(), j.term(100)), (101, 100, Some(3)));
    j.append(&entries(101..=102, 3)).unwrap();
    j.flush().unwrap();
    drop(j);
    let j = Journal::open(dir.path(), small()).unwrap();
    assert_eq!(j.entries(101, 103, None).unwrap(), entries(101..=102, 3));
}

#[test]
fn entries_respect_max_bytes_but_return_at_least_one() {
    let dir = tempfile::tempdir().unwrap();
    let mut j = Journal::open(dir.path(), JournalConfig::default()).unwrap();
    j.append(&entries(1..=5, 1)).unwrap(); // 10 bytes each
    assert_eq!(j.entries(1, 6, Some(25)).unwrap().len(), 2);
    assert_eq!(j.entries(1, 6, Some(1)).unwrap().len(), 1);
    assert_eq!(j.entries(2, 4, None).unwrap().len(), 2);
}

#[test]
fn corruption_before_the_last_segment_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let mut j = Journal::open(dir.path(), small()).unwrap();
    j.append(&entries(1..=12, 1)).unwrap();
    j.flush().unwrap();
    drop(j);
    let first = segment_files(dir.path()).remove(0);
    let mut bytes = fs::read(&first).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xFF;
    fs::write(&first, bytes).unwrap();
    assert!(matches!(Journal::open(dir.path(), small()), Err(JournalError::Corrupt(_))));
}

#[test]
fn entries_read_back_alike_from_the_buffer_the_last_flush_and_the_file() {
    // one large segment: entries 1-3 reach the file, 4-6 are the last flush (kept in memory),
    // 7-8 are still buffered
    let dir = tempfile::tempdir().unwrap();
    let mut j = Journal::open(dir.path(), JournalConfig { segment_bytes: 1 << 20 }).unwrap();
    j.append(&entries(1..=3, 1)).unwrap();
    j.flush().unwrap();
    j.append(&entries(4..=6, 1)).unwrap();
    j.flush().unwrap();
    j.append(&entries(7..=8, 1)).unwrap();
    assert_eq!(j.entries(1, 9, None).unwrap(), entries(1..=8, 1));
    // a conflicting append cutting into the last flush: what is read back is the new suffix
    j.append(&entries(5..=6, 2)).unwrap();
    let mut want = entries(1..=4, 1);
    want.extend(entries(5..=6, 2));
    assert_eq!(j.entries(1, 7, None).unwrap(), want);
    j.flush().unwrap();
    assert_eq!(j.entries(1, 7, None).unwrap(), want);
    drop(j);
    let j = Journal::open(dir.path(), small()).unwrap();
    assert_eq!(j.entries(1, 7, None).unwrap(), want);
}

/// Which of a file's pages are in the page cache (`mincore` over a read-only mapping).
#[cfg(target_os = "linux")]
fn cached_pages(path: &Path) -> Vec<bool> {
    use std::os::fd::AsRawFd;
    let file = fs::File::open(path).unwrap();
    let len = file.metadata().unwrap().len() as usize;
    let pages = len.div_ceil(4096);
    let mut resident = vec![0u8; pages];
    // SAFETY: a private read-only mapping of `len` bytes of an open file, unmapped before return;
    // mincore writes one byte per page into `resident`, which holds that many.
    unsafe {
        let map = libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_PRIVATE, file.as_raw_fd(), 0);
        assert_ne!(map, libc::MAP_FAILED);
        assert_eq!(libc::mincore(map, len, resident.as_mut_ptr()), 0);
        libc::munmap(map, len);
    }
    resident.iter().map(|r| r & 1 == 1).collect()
}

#[cfg(target_os = "linux")]
#[test]
fn synced_pages_leave_the_page_cache_and_read_back_from_disk() {
    // on the work tree's disk, not a tmpfs /tmp, whose pages are the storage and cannot be dropped;
    // the crate's directory is read at run time, as a build cached from another checkout of the
    // same target directory carries that checkout's path
    let crate_dir =
        std::env::var_os("CARGO_MANIFEST_DIR").map(std::path::PathBuf::from).unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into());
    let dir = tempfile::tempdir_in(crate_dir).unwrap();
    let mut j = Journal::open(dir.path(), JournalConfig { segment_bytes: 1 << 20 }).unwrap();
    let big = |range: std::ops::RangeInclusive<u64>| -> Vec<Entry> {
        range.map(|i| Entry { index: i, term: 1, data: vec![i as u8; 10_000] }).collect()
    };
    j.append(&big(1..=3)).unwrap();
    j.flush().unwrap();
    let segment = &segment_files(dir.path())[0];
    let cached = cached_pages(segment);
    let (last, whole) = cached.split_last().unwrap();
    assert!(whole.len() >= 7, "30 KB written: {} whole pages", whole.len());
    assert!(whole.iter().all(|c| !c), "synced whole pages dropped: {cached:?}");
    assert!(*last, "the page the file ends in stays cached for the next append");
    // appends after the drop continue the file, and everything reads back from disk
    j.append(&big(4..=5)).unwrap();
    j.flush().unwrap();
    assert_eq!(j.entries(1, 6, None).unwrap(), big(1..=5));
    drop(j);
    let j = Journal::open(dir.path(), JournalConfig { segment_bytes: 1 << 20 }).unwrap();
    assert_eq!(j.entries(1, 6, None).unwrap(), big(1..=5));
}

#[test]
fn the_format_version_is_recorded_kept_for_older_journals_and_a_newer_one_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut j = Journal::open(dir.path(), small()).unwrap();
    assert_eq!(fs::read_to_string(dir.path().join("format")).unwrap(), "waggle-journal 1\n");
    j.append(&entries(1..=5, 1)).unwrap();
    j.flush().unwrap();
    drop(j);
    // a journal written before the file existed is version 1: it opens, and the file is written
    fs::remove_file(dir.path().join("format")).unwrap();
    let j = Journal::open(dir.path(), small()).unwrap();
    assert_eq!(j.entries(1, 6, None).unwrap(), entries(1..=5, 1));
    assert_eq!(fs::read_to_string(dir.path().join("format")).unwrap(), "waggle-journal 1\n");
    drop(j);
    let before = segment_files(dir.path());
    fs::write(dir.path().join("format"), "waggle-journal 2\n").unwrap();
    let err = Journal::open(dir.path(), small()).err().expect("a newer journal is refused");
    assert!(matches!(err, JournalError::NewerFormat { found: 2, .. }), "{err}");
    assert!(err.to_string().contains("journal format version 2, written by a newer Waggle (this one reads up to version 1)"), "{err}");
    assert_eq!(segment_files(dir.path()), before, "nothing changed");
    fs::write(dir.path().join("format"), "something else").unwrap();
    assert!(matches!(Journal::open(dir.path(), small()), Err(JournalError::Corrupt(_))));
}

/// A segment that takes no more appends lets go of its append buffer: only the active one keeps
/// its capacity (closed segments had kept a large batch's worth each until compaction: ~0.5 GB
/// of memory for a 4 GB log of 46 KB variables).
#[test]
fn closed_segments_hold_no_append_buffer() {
    let dir = tempfile::tempdir().unwrap();
    let mut j = Journal::open(dir.path(), JournalConfig { segment_bytes: 1 << 20 }).unwrap();
    let big = vec![7u8; 300 << 10];
    for index in 1..=12u64 {
        j.append(&[Entry { index, term: 1, data: big.clone() }]).unwrap();
        j.flush().unwrap();
    }
    assert!(j.segments.len() >= 3, "the test needs closed segments: {}", j.segments.len());
    assert_eq!(j.closed_segments_buffer_capacity(), 0);
    assert_eq!(j.entries(1, 13, None).unwrap().len(), 12);
}
