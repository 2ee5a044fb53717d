//! Keys of the in-memory ordered maps (staged writes, the write-back layer): byte strings in
//! the same lexicographic order as `Vec<u8>`, compared eight bytes at a time in registers.
//!
//! State keys are short (a table prefix and one or two big-endian numbers) and those in one
//! map share long prefixes, so a search compares many of them. `Vec<u8>`'s order calls libc's
//! `memcmp` for every comparison; its set-up costs more than comparing such keys inline (the
//! map searches and `memcmp` were ~30 % of the engine's time under W2).

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::ops::Bound;

/// An owned key; ordered exactly as its bytes are lexicographically.
#[derive(Clone, PartialEq, Eq)]
pub struct Key(pub Vec<u8>);

/// A borrowed key, for looking up maps of [`Key`] by a byte slice.
#[derive(PartialEq, Eq)]
#[repr(transparent)]
pub struct KeyRef(pub [u8]);

impl KeyRef {
    pub fn new(bytes: &[u8]) -> &KeyRef {
        // SAFETY: KeyRef is a transparent wrapper of [u8]
        unsafe { &*(bytes as *const [u8] as *const KeyRef) }
    }
}

impl Borrow<KeyRef> for Key {
    fn borrow(&self) -> &KeyRef {
        KeyRef::new(&self.0)
    }
}

/// `Ord` and `PartialOrd` by [`compare`] on the key's bytes.
macro_rules! ordered_by_bytes {
    ($($t:ty),*) => {$(
        impl Ord for $t {
            fn cmp(&self, other: &Self) -> Ordering {
                compare(&self.0, &other.0)
            }
        }
        impl PartialOrd for $t {
            fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
                Some(self.cmp(other))
            }
        }
    )*};
}
ordered_by_bytes!(Key, KeyRef);

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// The entries of `map` whose key starts with `prefix`, in key order.
pub fn prefix_range<'a, V>(map: &'a BTreeMap<Key, V>, prefix: &'a [u8]) -> impl Iterator<Item = (&'a Vec<u8>, &'a V)> + 'a {
    let from: (Bound<&KeyRef>, Bound<&KeyRef>) = (Bound::Included(KeyRef::new(prefix)), Bound::Unbounded);
    map.range::<KeyRef, _>(from).map(|(k, v)| (&k.0, v)).take_while(move |(k, _)| k.starts_with(prefix))
}

/// Lexicographic order of byte strings (`<[u8] as Ord>::cmp`), eight bytes per step.
#[inline]
pub fn compare(a: &[u8], b: &[u8]) -> Ordering {
    let common = a.len().min(b.len());
    let (mut a_rest, mut b_rest) = (&a[..common], &b[..common]);
    while let (Some((a8, a_tail)), Some((b8, b_tail))) = (a_rest.split_first_chunk::<8>(), b_rest.split_first_chunk::<8>()) {
        let (x, y) = (u64::from_be_bytes(*a8), u64::from_be_bytes(*b8));
        if x != y {
            return x.cmp(&y);
        }
        (a_rest, b_rest) = (a_tail, b_tail);
    }
    for (x, y) in a_rest.iter().zip(b_rest) {
        if x != y {
            return x.cmp(y);
        }
    }
    a.len().cmp(&b.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orders_as_bytes_do() {
        let keys: Vec<Vec<u8>> = vec![
            vec![],
            vec![0],
            vec![0, 0],
            vec![1],
            vec![255],
            b"EI/".to_vec(),
            b"EI/\x00\x00\x00\x00\x00\x00\x00\x01".to_vec(),
            b"EI/\x00\x00\x00\x00\x00\x00\x01\x00".to_vec(),
            b"EI/\x00\x00\x00\x00\x00\x00\x01\x00\x07".to_vec(),
            b"EI/\x80\x00\x00\x00\x00\x00\x01\x00".to_vec(),
            b"V/\x00\x00\x00\x00\x00\x00\x00\x05/name".to_vec(),
            b"V/\x00\x00\x00\x00\x00\x00\x00\x05/namf".to_vec(),
            b"V/\x00\x00\x00\x00\x00\x00\x00\x05/nam".to_vec(),
            (0..40).collect(),
            (0..39).chain([255]).collect(),
            (1..41).collect(),
        ];
        for a in &keys {
            for b in &keys {
                assert_eq!(compare(a, b), a.cmp(b), "{a:?} against {b:?}");
                assert_eq!(Key(a.clone()).cmp(&Key(b.clone())), a.cmp(b));
                assert_eq!(KeyRef::new(a).cmp(KeyRef::new(b)), a.cmp(b));
            }
        }
    }
}
