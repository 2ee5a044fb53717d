//! Postcard output appended to a `Vec<u8>` the caller owns.
//!
//! `postcard::to_extend` writes through `Extend<u8>`, which copies a string or byte field one
//! byte at a time; this flavor copies a long one with `extend_from_slice`, and lets the caller
//! size the buffer up front or reuse one.

use postcard::ser_flavors::Flavor;
use serde::Serialize;

/// Appends `value` in postcard to `buffer`.
pub fn append<T: Serialize + ?Sized>(value: &T, buffer: &mut Vec<u8>) {
    // postcard into a Vec cannot fail for our types (no maps with non-string keys etc.)
    postcard::serialize_with_flavor(value, AppendTo(buffer)).expect("postcard encoding into a Vec is infallible")
}

/// A value in postcard, in a vector of exactly its size: written into `scratch` (cleared first,
/// its capacity kept for the next call), then copied once, so the result is allocated once
/// instead of grown.
pub fn to_exact_vec<T: Serialize + ?Sized>(value: &T, scratch: &mut Vec<u8>) -> Vec<u8> {
    scratch.clear();
    append(value, scratch);
    scratch.as_slice().to_vec()
}

/// Slices shorter than this are copied byte by byte: cheaper than a call to `memcpy` for the
/// ids and names most values are made of.
const SHORT: usize = 32;

struct AppendTo<'b>(&'b mut Vec<u8>);

impl Flavor for AppendTo<'_> {
    type Output = ();

    #[inline(always)]
    fn try_push(&mut self, data: u8) -> postcard::Result<()> {
        self.0.push(data);
        Ok(())
    }

    #[inline(always)]
    fn try_extend(&mut self, data: &[u8]) -> postcard::Result<()> {
        if data.len() < SHORT {
            self.0.extend(data.iter().copied());
        } else {
            self.0.extend_from_slice(data);
        }
        Ok(())
    }

    fn finalize(self) -> postcard::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize)]
    struct Sample<'a> {
        id: u64,
        name: &'a str,
        bytes: &'a [u8],
        list: Vec<i32>,
    }

    #[test]
    fn appends_what_postcard_writes() {
        let sample = Sample { id: 300, name: "service-task", bytes: &[1, 2, 3], list: vec![-1, 70_000] };
        let mut buffer = vec![9u8];
        append(&sample, &mut buffer);
        let mut expected = vec![9u8];
        expected.extend(postcard::to_stdvec(&sample).unwrap());
        assert_eq!(buffer, expected);
    }

    #[test]
    fn exact_vec_matches_and_scratch_is_reused() {
        let sample = Sample { id: 1, name: "a much longer name than the last one", bytes: &[], list: vec![] };
        let mut scratch = b"left over".to_vec();
        let bytes = to_exact_vec(&sample, &mut scratch);
        assert_eq!(bytes, postcard::to_stdvec(&sample).unwrap());
        assert_eq!(bytes.capacity(), bytes.len());
        assert_eq!(scratch, bytes, "the scratch buffer holds the last value");
    }
}
