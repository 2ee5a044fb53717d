//! Where the live keys of a queue begin, learned from earlier scans.
//!
//! The engine's queues (activatable jobs, deadlines, due timers) are consumed from the front:
//! their deleted entries stay in RocksDB as tombstones until a compaction, and a scan from the
//! prefix steps over every one of them. A hint remembers, per scanned prefix, a key below which
//! the prefix holds no live key, so the next scan seeks past the tombstones. Hints change where
//! a scan starts, never what it returns.
//!
//! Contract: a hint `h` for prefix `p` means no committed key in `[p, h)` exists. It is learned
//! from a scan's first key, only if nothing was committed since that scan's iterator was opened
//! (the generation), and every committed put lowers the hints it falls under. The store holds
//! the lock while it reads a hint and takes the RocksDB snapshot the scan reads. A flush of the
//! store's write-back layer writes to RocksDB without it and lowers the hints after the write:
//! until then the rows it writes are still in the layer, which every scan merges in, so a scan
//! never misses a put whose hint update it has not seen.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

/// Tables consumed from the front (see the engine's `tables.rs`): activatable jobs, job
/// deadlines, retry back-offs, message expiries, due timers, the outbox of commands for other
/// partitions and the markers of commands received from them.
const HINTED_TABLES: &[&[u8]] = &[b"A/", b"B/", b"D/", b"DR/", b"MD/", b"O/", b"TD/"];

/// Hints beyond this many are dropped all at once (job types are few; this only bounds memory).
const MAX_HINTS: usize = 1024;

#[derive(Default)]
pub(crate) struct ScanHints {
    inner: Mutex<Hints>,
}

#[derive(Default)]
pub(crate) struct Hints {
    /// Incremented by every commit.
    generation: u64,
    /// Prefix → the key to seek to (the prefix's end when it holds no live key).
    seek: HashMap<Vec<u8>, Vec<u8>>,
}

/// Whether scans of `prefix` keep a hint.
pub(crate) fn is_hinted(prefix: &[u8]) -> bool {
    HINTED_TABLES.iter().any(|t| prefix.starts_with(t))
}

impl ScanHints {
    /// Held while reading a hint and taking the snapshot it is for, and while lowering hints.
    pub(crate) fn lock(&self) -> MutexGuard<'_, Hints> {
        self.inner.lock().expect("scan hints lock")
    }

    /// Records that a scan of `prefix` opened at `generation` found `first` as its first key
    /// (`prefix_end` when it found none).
    pub(crate) fn learn(&self, prefix: &[u8], generation: u64, first: Vec<u8>) {
        let mut hints = self.inner.lock().expect("scan hints lock");
        if hints.generation != generation {
            return; // a commit since the iterator opened may have put a key below `first`
        }
        if hints.seek.len() >= MAX_HINTS && !hints.seek.contains_key(prefix) {
            hints.seek.clear();
        }
        hints.seek.insert(prefix.to_vec(), first);
    }
}

impl Hints {
    /// The generation to pass to [`ScanHints::learn`], and where a scan of `prefix` may start.
    pub(crate) fn start(&self, prefix: &[u8]) -> (u64, Option<Vec<u8>>) {
        (self.generation, self.seek.get(prefix).cloned())
    }

    /// Accounts for a commit that put `keys` (only keys of hinted tables matter).
    pub(crate) fn committed<'a>(&mut self, keys: impl Iterator<Item = &'a [u8]>) {
        self.generation += 1;
        if self.seek.is_empty() {
            return;
        }
        for key in keys.filter(|k| is_hinted(k)) {
            for (prefix, seek) in self.seek.iter_mut() {
                if key.starts_with(prefix) && key < seek.as_slice() {
                    *seek = key.to_vec();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_put_below_the_hint_lowers_it() {
        let hints = ScanHints::default();
        let (generation, seek) = hints.lock().start(b"A/t|");
        assert_eq!(seek, None);
        hints.learn(b"A/t|", generation, b"A/t|5".to_vec());
        assert_eq!(hints.lock().start(b"A/t|").1.as_deref(), Some(&b"A/t|5"[..]));
        hints.lock().committed([&b"A/t|7"[..], b"A/u|1"].into_iter());
        assert_eq!(hints.lock().start(b"A/t|").1.as_deref(), Some(&b"A/t|5"[..]), "keys above or elsewhere leave it");
        hints.lock().committed([&b"A/t|3"[..]].into_iter());
        assert_eq!(hints.lock().start(b"A/t|").1.as_deref(), Some(&b"A/t|3"[..]));
    }

    #[test]
    fn a_scan_older_than_a_commit_teaches_nothing() {
        let hints = ScanHints::default();
        let (generation, _) = hints.lock().start(b"TD/");
        hints.lock().committed(std::iter::empty());
        hints.learn(b"TD/", generation, b"TD/9".to_vec());
        assert_eq!(hints.lock().start(b"TD/").1, None);
    }

    #[test]
    fn only_queue_tables_are_hinted() {
        assert!(is_hinted(b"A/type\0"));
        assert!(is_hinted(b"TD/"));
        assert!(!is_hinted(b"V/1/"));
        assert!(!is_hinted(b"TE/1/"));
    }
}
