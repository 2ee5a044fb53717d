//! Random variable documents (seeded, so a failure repeats): deep and wide nesting, many keys,
//! duplicates, whitespace, junk. Every document is either split as the slow path splits it or
//! refused with its error, never a panic, in time linear in its size.

use super::*;

/// xorshift64*: a small deterministic generator.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

fn space(rng: &mut Rng, out: &mut String) {
    for _ in 0..rng.below(3) {
        out.push([' ', '\n', '\t', '\r'][rng.below(4) as usize]);
    }
}

/// A random JSON value at most `depth` levels deep, up to `width` members per level.
fn value(rng: &mut Rng, depth: u32, width: u64, out: &mut String) {
    let pick = if depth == 0 { rng.below(5) } else { rng.below(8) };
    match pick {
        0 => out.push_str(["true", "false", "null"][rng.below(3) as usize]),
        1 => out.push_str(["0", "-1", "1.5", "1e3", "12345678901234567890", "0.0001", "-0"][rng.below(7) as usize]),
        2 => out.push_str(["\"a\"", "\"\\u00e9\"", "\"x\\ny\"", "\"\"", "\"é\""][rng.below(5) as usize]),
        3 | 4 => out.push_str(&rng.below(1_000_000).to_string()),
        5 | 6 => {
            out.push('{');
            for i in 0..rng.below(width) {
                if i > 0 {
                    out.push(',');
                }
                space(rng, out);
                out.push_str(&format!("\"k{}\"", rng.below(width * 2)));
                out.push(':');
                space(rng, out);
                value(rng, depth - 1, width, out);
            }
            out.push('}');
        }
        _ => {
            out.push('[');
            for i in 0..rng.below(width) {
                if i > 0 {
                    out.push(',');
                }
                value(rng, depth - 1, width, out);
                space(rng, out);
            }
            out.push(']');
        }
    }
}

/// A document: an object of `keys` top-level variables (names repeat sometimes), values of
/// random shape; sometimes cut short or with a junk byte.
fn document(rng: &mut Rng, keys: u64, depth: u32) -> String {
    let mut out = String::from("{");
    for i in 0..keys {
        if i > 0 {
            out.push(',');
        }
        space(rng, &mut out);
        out.push_str(&format!("\"v{}\":", rng.below(keys + keys / 8 + 1)));
        value(rng, depth, 4, &mut out);
    }
    out.push('}');
    match rng.below(10) {
        0 => {
            let cut = rng.below(out.len() as u64) as usize;
            if out.is_char_boundary(cut) {
                out.truncate(cut);
            }
        }
        1 => {
            let at = rng.below(out.len() as u64) as usize;
            if out.is_char_boundary(at) {
                out.insert(at, ['{', ']', '"', ':', 'x', '\\'][rng.below(6) as usize]);
            }
        }
        _ => {}
    }
    out
}

#[test]
fn random_documents_are_split_as_the_slow_path_splits_them_or_refused() {
    let mut rng = Rng(0x5EED_F00D_D0C5);
    for case in 0..2_000 {
        let keys = [0, 1, 5, 20, 70, 300][rng.below(6) as usize];
        let depth = [0, 1, 3, 8][rng.below(4) as usize];
        let doc = document(&mut rng, keys, depth);
        assert_eq!(document_texts(&doc), slow(&doc), "case {case}: {doc}");
    }
}

#[test]
fn deep_nesting_is_refused_at_any_depth_without_overflowing() {
    let mut rng = Rng(0xDEE9);
    for _ in 0..50 {
        let depth = rng.below(300_000) as usize;
        let (open, close) = if rng.below(2) == 0 { ("[", "]") } else { ("{\"a\":", "}") };
        let doc = format!("{{\"x\":{}1{}}}", open.repeat(depth), close.repeat(depth));
        let result = document_texts(&doc);
        // serde_json refuses nesting beyond 128 levels; the top-level object is one of them
        assert_eq!(result.is_ok(), depth < 128, "depth {depth}: {result:?}");
        if let Err(e) = result {
            assert!(e.contains("recursion limit exceeded"), "{e}");
        }
    }
}

#[test]
fn many_keys_split_in_linear_time() {
    // 200,000 distinct names, then the same with one repeated at the end (the slow path keeps
    // the last value): a linear search for duplicates took ~40 s here
    let flat: Vec<String> = (0..200_000).map(|i| format!("\"k{i}\":{i}")).collect();
    let doc = format!("{{{}}}", flat.join(","));
    let texts = document_texts(&doc).unwrap();
    assert_eq!((texts.len(), texts[199_999].1.as_str()), (200_000, "199999"));
    let repeated = format!("{{{},\"k0\":-1}}", flat.join(","));
    let texts = document_texts(&repeated).unwrap();
    assert_eq!((texts.len(), texts[0].1.as_str()), (200_000, "-1"));
}
