use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::iter::Peekable;

use crate::{DecodeFn, DecodedValue, KvIter, KvRead, PointTables, WriteSet};

/// Tells keys (or prefixes) that the base certainly does not hold, so reads of them skip the
/// base. Called with a whole key (`true`) or a scan's prefix (`false`); answering `true` is a
/// promise that the base holds no such key, or no key starting with the prefix.
pub type AbsentFromBase = Box<dyn Fn(&[u8], bool) -> bool>;

/// The base's values an overlay has read, by key (`None`: the base has no such key).
type BaseReads = RefCell<HashMap<Vec<u8>, Option<Vec<u8>>, foldhash::fast::RandomState>>;

/// A value an overlay holds decoded: `staged` when it is newer than what `writes` holds for
/// its key (it is encoded into `writes` when the overlay's writes are taken).
struct Decoded {
    value: Box<dyn DecodedValue>,
    staged: bool,
}

/// A store seen through staged writes: reads see `writes` first, then `base`. Point reads of
/// the base are remembered for the overlay's life (a batch reads the same element instance,
/// job or process several times), so the base must not change underneath an overlay.
///
/// Values read or written through the decoded interface ([`KvRead::read_decoded`],
/// [`Overlay::put_decoded`], [`Overlay::update_decoded`]) are kept decoded for the overlay's
/// life and encoded once, when the writes are taken: a row changed at every step of a batch is
/// neither decoded nor encoded at each step. Byte reads, scans and writes of the same keys stay
/// consistent with them.
pub struct Overlay<'a> {
    base: &'a dyn KvRead,
    writes: WriteSet,
    base_reads: BaseReads,
    absent_from_base: Option<AbsentFromBase>,
    /// Values held decoded. A hash map: point reads are most of an overlay's work, and a scan
    /// looks at these values only when `decoded_first_bytes` says one might be under its prefix.
    decoded: RefCell<HashMap<Vec<u8>, Decoded, foldhash::fast::RandomState>>,
    /// The first bytes of the keys ever held in `decoded` (a bit per byte value).
    decoded_first_bytes: Cell<[u64; 4]>,
}

impl<'a> Overlay<'a> {
    pub fn new(base: &'a dyn KvRead) -> Self {
        Self {
            base,
            writes: WriteSet::with_point_tables(base.point_tables()),
            base_reads: RefCell::default(),
            absent_from_base: None,
            decoded: RefCell::default(),
            decoded_first_bytes: Cell::new([0; 4]),
        }
    }

    /// Holds `value` decoded for `key`.
    fn hold_decoded(&self, key: Vec<u8>, decoded: Decoded) {
        if let Some(&first) = key.first() {
            let mut bits = self.decoded_first_bytes.get();
            bits[usize::from(first >> 6)] |= 1 << (first & 63);
            self.decoded_first_bytes.set(bits);
        }
        self.decoded.borrow_mut().insert(key, decoded);
    }

    /// Whether a key under `prefix` might be held decoded.
    fn may_hold_decoded_under(&self, prefix: &[u8]) -> bool {
        match prefix.first() {
            None => !self.decoded.borrow().is_empty(),
            Some(&first) => self.decoded_first_bytes.get()[usize::from(first >> 6)] & (1 << (first & 63)) != 0,
        }
    }

    /// Stages `value` for `key`, kept decoded (see the type's documentation).
    pub fn put_decoded(&mut self, key: Vec<u8>, value: Box<dyn DecodedValue>) {
        self.hold_decoded(key, Decoded { value, staged: true });
    }

    /// Changes the value of `key` in place (decoding it first if this overlay has not yet);
    /// false, and nothing changed, when there is no such key.
    pub fn update_decoded(&mut self, key: &[u8], decode: DecodeFn, update: &mut dyn FnMut(&mut dyn DecodedValue)) -> bool {
        if let Some(entry) = self.decoded.get_mut().get_mut(key) {
            update(&mut *entry.value);
            entry.staged = true;
            return true;
        }
        let Some(mut value) = self.decode_not_decoded(key, decode) else { return false };
        update(&mut *value);
        self.hold_decoded(key.to_vec(), Decoded { value, staged: true });
        true
    }

    /// The value of `key` in the writes or the base: current unless a newer value is staged
    /// decoded.
    fn get_not_decoded(&self, key: &[u8]) -> Option<Vec<u8>> {
        match self.writes.get(key) {
            Some(staged) => staged.clone(),
            None => self.base_get(key),
        }
    }

    /// [`Self::get_not_decoded`]'s value decoded, without copying its bytes first.
    fn decode_not_decoded(&self, key: &[u8], decode: DecodeFn) -> Option<Box<dyn DecodedValue>> {
        match self.writes.get(key) {
            Some(staged) => staged.as_deref().map(decode),
            None => self.with_base_value(key, |value| value.map(decode)),
        }
    }

    /// Encodes the staged decoded values into `writes`.
    fn flush_decoded(&mut self) {
        for (key, d) in std::mem::take(self.decoded.get_mut()) {
            if d.staged {
                self.stage_put(key, d.value.encode());
            }
        }
    }

    /// The staged decoded value of `key`, encoded.
    fn staged_decoded(&self, key: &[u8]) -> Option<Vec<u8>> {
        let decoded = self.decoded.borrow();
        decoded.get(key).filter(|d| d.staged).map(|d| d.value.encode())
    }

    /// Sets the rule by which reads (point reads, prefix scans, the existence check of a
    /// delete) skip the base; see [`AbsentFromBase`].
    pub fn set_absent_from_base(&mut self, rule: AbsentFromBase) {
        self.absent_from_base = Some(rule);
    }

    fn absent_from_base(&self, key: &[u8], whole_key: bool) -> bool {
        absent(&self.absent_from_base, key, whole_key)
    }

    fn base_get(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.with_base_value(key, |value| value.map(<[u8]>::to_vec))
    }

    /// What `f` takes from the base's value of `key` (see [`base_value`]).
    fn with_base_value<R>(&self, key: &[u8], f: impl FnOnce(Option<&[u8]>) -> R) -> R {
        base_value(self.base, &self.base_reads, &self.absent_from_base, key, f)
    }

    pub fn put(&mut self, key: Vec<u8>, value: Vec<u8>) {
        let decoded = self.decoded.get_mut();
        if !decoded.is_empty() {
            decoded.remove(&key);
        }
        self.stage_put(key, value);
    }

    /// Stages a put, marked fresh when the base certainly does not hold the key.
    fn stage_put(&mut self, key: Vec<u8>, value: Vec<u8>) {
        if self.absent_from_base(&key, true) {
            self.writes.put_fresh(key, value);
        } else {
            self.writes.put(key, value);
        }
    }
    /// Deletes `key`. A key put in this overlay that the base does not have is simply
    /// unstaged: the base never sees it, and gets no tombstone (tombstones slow down scans).
    pub fn delete(&mut self, key: Vec<u8>) {
        let decoded = self.decoded.get_mut();
        let staged_decoded = !decoded.is_empty() && decoded.remove(&key).is_some_and(|d| d.staged);
        let Self { base, writes, base_reads, absent_from_base, .. } = self;
        writes.delete_over(key, staged_decoded, |key| base_value(*base, base_reads, absent_from_base, key, |v| v.is_some()));
    }
    pub fn writes(&mut self) -> &WriteSet {
        self.flush_decoded();
        &self.writes
    }
    pub fn into_writes(mut self) -> WriteSet {
        self.flush_decoded();
        self.writes
    }
}

/// Whether the absent-from-base `rule`, if any, says the base holds no `key` (a whole key, or a
/// prefix with `whole_key` false).
fn absent(rule: &Option<AbsentFromBase>, key: &[u8], whole_key: bool) -> bool {
    rule.as_ref().is_some_and(|rule| rule(key, whole_key))
}

/// What `f` takes from `base`'s value of `key`: none when the absent-from-base `rule` says so,
/// else the value remembered in `reads` from an earlier read or read now (and remembered; the
/// value is lent to `f`, never copied here).
fn base_value<R>(base: &dyn KvRead, reads: &BaseReads, rule: &Option<AbsentFromBase>, key: &[u8], f: impl FnOnce(Option<&[u8]>) -> R) -> R {
    if absent(rule, key, true) {
        return f(None);
    }
    if let Some(cached) = reads.borrow().get(key) {
        return f(cached.as_deref());
    }
    let value = base.get(key);
    let taken = f(value.as_deref());
    reads.borrow_mut().insert(key.to_vec(), value);
    taken
}

impl KvRead for Overlay<'_> {
    fn point_tables(&self) -> PointTables {
        self.base.point_tables()
    }

    fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        if let Some(bytes) = self.staged_decoded(key) {
            return Some(bytes);
        }
        self.get_not_decoded(key)
    }

    fn read_decoded(&self, key: &[u8], decode: DecodeFn, read: &mut dyn FnMut(Option<&dyn DecodedValue>)) {
        if let Some(d) = self.decoded.borrow().get(key) {
            return read(Some(&*d.value));
        }
        // not held decoded: so nothing newer is staged decoded than what `get` finds
        let Some(value) = self.decode_not_decoded(key, decode) else { return read(None) };
        read(Some(&*value));
        self.hold_decoded(key.to_vec(), Decoded { value, staged: false });
    }

    fn scan_prefix(&self, prefix: &[u8]) -> KvIter<'_> {
        let written: Vec<StagedWrite> = self.writes.range_prefix(prefix).map(|(k, v)| (k.clone(), v.clone())).collect();
        // decoded values are newer than what `writes` holds for the same key
        let staged = if self.may_hold_decoded_under(prefix) {
            let mut newer: Vec<StagedWrite> = self
                .decoded
                .borrow()
                .iter()
                .filter(|(k, d)| d.staged && k.starts_with(prefix))
                .map(|(k, d)| (k.clone(), Some(d.value.encode())))
                .collect();
            newer.sort_unstable_by(|(a, _), (b, _)| a.cmp(b));
            newer_wins(written, newer)
        } else {
            written
        };
        let base: KvIter<'_> =
            if self.absent_from_base(prefix, false) { Box::new(std::iter::empty()) } else { self.base.scan_prefix(prefix) };
        Box::new(Merge::new(base, staged))
    }
}

/// A staged write: `None` deletes the key.
pub(crate) type StagedWrite = (Vec<u8>, Option<Vec<u8>>);

/// `older` and `newer` staged writes (each in key order, one entry per key) as one list in key
/// order; for a key both hold, `newer`'s entry.
pub(crate) fn newer_wins(older: Vec<StagedWrite>, newer: Vec<StagedWrite>) -> Vec<StagedWrite> {
    if newer.is_empty() {
        return older;
    }
    if older.is_empty() {
        return newer;
    }
    let mut merged = Vec::with_capacity(older.len() + newer.len());
    let (mut older, mut newer) = (older.into_iter().peekable(), newer.into_iter().peekable());
    while let (Some((o, _)), Some((n, _))) = (older.peek(), newer.peek()) {
        match o.cmp(n) {
            std::cmp::Ordering::Less => merged.extend(older.next()),
            std::cmp::Ordering::Greater => merged.extend(newer.next()),
            std::cmp::Ordering::Equal => {
                older.next();
                merged.extend(newer.next());
            }
        }
    }
    merged.extend(older);
    merged.extend(newer);
    merged
}

/// Merge-join of base pairs and staged writes, both in key order; staged entries win.
pub(crate) struct Merge<'a> {
    base: Peekable<KvIter<'a>>,
    staged: Peekable<std::vec::IntoIter<StagedWrite>>,
}

impl<'a> Merge<'a> {
    /// `base` seen through `staged` (in key order, one entry per key).
    pub(crate) fn new(base: KvIter<'a>, staged: Vec<StagedWrite>) -> Self {
        Self { base: base.peekable(), staged: staged.into_iter().peekable() }
    }
}

impl Iterator for Merge<'_> {
    type Item = (Vec<u8>, Vec<u8>);

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let take_staged = match (self.base.peek(), self.staged.peek()) {
                (None, None) => return None,
                (Some(_), None) => false,
                (None, Some(_)) => true,
                (Some((bk, _)), Some((sk, _))) => {
                    if bk == sk {
                        self.base.next();
                        true
                    } else {
                        sk < bk
                    }
                }
            };
            if take_staged {
                let (k, v) = self.staged.next()?;
                if let Some(v) = v {
                    return Some((k, v));
                }
            } else {
                return self.base.next();
            }
        }
    }
}
