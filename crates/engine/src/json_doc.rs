//! A variables document split into its top-level variables, each value as compact JSON text,
//! without building the document's tree when its text is already in the form the engine
//! stores.
//!
//! Contract: [`document_texts`] returns exactly what parsing the document into a
//! `serde_json::Value` and printing each top-level value would return (the same names, order,
//! texts and errors). Values whose text might print differently (escapes in strings, numbers
//! that are not in their shortest form, duplicate keys, ...) take that slow path; the rest are
//! copied with the whitespace between tokens left out.

use indexmap::IndexMap;
use serde_json::value::RawValue;

use crate::variables::{json_text, parse_document};

/// Top-level variables of a document: name and value as compact JSON text, in document order.
pub(crate) type VariableTexts = Vec<(String, String)>;

/// Objects with more keys than this take the slow path (duplicate keys are searched linearly).
const MAX_FAST_OBJECT_KEYS: usize = 64;

/// The variables of a document (empty or blank text: none), as [`parse_document`] and
/// [`json_text`] would give them.
pub(crate) fn document_texts(text: &str) -> Result<VariableTexts, String> {
    if let Some(texts) = fast_texts(text) {
        return Ok(texts);
    }
    Ok(parse_document(text)?.iter().map(|(name, value)| (name.clone(), json_text(value))).collect())
}

fn fast_texts(text: &str) -> Option<VariableTexts> {
    if text.trim().is_empty() {
        return Some(Vec::new());
    }
    let raw: IndexMap<String, Box<RawValue>> = serde_json::from_str(text).ok()?;
    raw.into_iter().map(|(name, value)| Some((name, compact(value.get())?))).collect()
}

/// The text of one valid JSON value without whitespace between tokens, if nothing in it would
/// print differently from how it is written.
fn compact(raw: &str) -> Option<String> {
    let bytes = raw.as_bytes();
    let mut out = String::with_capacity(raw.len());
    // per open object or array: the keys seen (objects only), to find duplicates
    let mut open: Vec<Option<Vec<&str>>> = Vec::new();
    let mut expect_key = false;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b' ' | b'\t' | b'\n' | b'\r' => i += 1,
            b'"' => {
                let end = i + 1 + bytes[i + 1..].iter().position(|&b| b == b'"')?;
                let content = &raw[i + 1..end];
                if content.contains('\\') {
                    return None; // escapes: the printer may write them differently
                }
                if expect_key {
                    let keys = open.last_mut()?.as_mut()?;
                    if keys.len() >= MAX_FAST_OBJECT_KEYS || keys.contains(&content) {
                        return None;
                    }
                    keys.push(content);
                    expect_key = false;
                }
                out.push_str(&raw[i..=end]);
                i = end + 1;
            }
            b'{' => {
                open.push(Some(Vec::new()));
                expect_key = true;
                out.push('{');
                i += 1;
            }
            b'[' => {
                open.push(None);
                out.push('[');
                i += 1;
            }
            b'}' | b']' => {
                open.pop();
                expect_key = false;
                out.push(bytes[i] as char);
                i += 1;
            }
            b',' => {
                expect_key = matches!(open.last(), Some(Some(_)));
                out.push(',');
                i += 1;
            }
            b':' => {
                out.push(':');
                i += 1;
            }
            b'-' | b'0'..=b'9' => {
                let len =
                    bytes[i..].iter().position(|b| !matches!(b, b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9')).unwrap_or(bytes.len() - i);
                let number = &raw[i..i + len];
                if !is_shortest_form(number) {
                    return None;
                }
                out.push_str(number);
                i += len;
            }
            _ => {
                // true, false, null
                let len = bytes[i..].iter().position(|b| !b.is_ascii_alphabetic()).unwrap_or(bytes.len() - i);
                out.push_str(&raw[i..i + len]);
                i += len;
            }
        }
    }
    Some(out)
}

/// Whether `serde_json` prints the number written as `number` (valid JSON) the same way: an
/// integer that fits 64 bits, or a decimal of at most 15 significant digits without trailing
/// zeros in plain notation (which is the shortest form that reads back as the same double,
/// and the one printed for magnitudes from 1e-5 to 1e16). Negative zero and exponents: no.
fn is_shortest_form(number: &str) -> bool {
    let digits = number.strip_prefix('-').unwrap_or(number);
    if digits.bytes().all(|b| b.is_ascii_digit()) {
        return digits.len() <= 18 && !(number.starts_with('-') && digits == "0");
    }
    let Some((int, frac)) = digits.split_once('.') else { return false };
    if !frac.bytes().all(|b| b.is_ascii_digit()) || frac.is_empty() {
        return false; // an exponent
    }
    if frac.len() > 1 && frac.ends_with('0') {
        return false;
    }
    let significant = int.trim_start_matches('0').len() + frac.len();
    let leading_frac_zeros = frac.len() - frac.trim_start_matches('0').len();
    let zero = int == "0" && frac.bytes().all(|b| b == b'0');
    if zero {
        return !number.starts_with('-');
    }
    if int == "0" {
        // 0.000ddd: plain notation down to four zeros after the point
        return leading_frac_zeros <= 4 && significant - leading_frac_zeros <= 15;
    }
    // "1.0" has one significant digit in the fraction that carries nothing: still at most 15
    significant <= 15
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slow(text: &str) -> Result<VariableTexts, String> {
        Ok(parse_document(text)?.iter().map(|(name, value)| (name.clone(), json_text(value))).collect())
    }

    /// Values written in many ways: the fast path must give what the slow path gives, or step
    /// aside.
    #[test]
    fn the_fast_path_prints_what_the_value_prints() {
        let values = [
            "1",
            "-1",
            "0",
            "-0",
            "12345678901234567",
            "123456789012345678",
            "1234567890123456789",
            "99999999999999999999",
            "1.5",
            "1.50",
            "1.0",
            "10.0",
            "-2.25",
            "0.0",
            "-0.0",
            "0.1",
            "0.0001",
            "0.00001",
            "0.000012",
            "0.0000012",
            "123456789012345.6",
            "12345678901234.5",
            "1234567890123456.0",
            "0.123456789012345",
            "0.1234567890123456",
            "1e3",
            "1E-2",
            "2.5e10",
            "94.79",
            "3.14159",
            "\"a\"",
            "\"\"",
            "\"with \\\"quote\\\"\"",
            "\"\\u00e9t\\u00e9\"",
            "\"\\/\"",
            "\"tab\\t\"",
            "\"é\"",
            "true",
            "false",
            "null",
            "[]",
            "{}",
            "[1, 2 ,3]",
            "{ \"a\" : 1 , \"b\" : [ true ] }",
            "{\"a\":1,\"a\":2}",
            "{\"a\":{\"b\":1},\"b\":{\"b\":2}}",
            "[{\"x\": 1}, {\"x\": 2}]",
            "{\"k\\u0041\": 1}",
            "{\"a\":[{\"b\":[1,{\"c\":null}]}],\"d\":\"e\"}",
            "\n[\n\t1\r\n]\n",
            "5e-324",
            "1.7976931348623157e308",
        ];
        for value in values {
            let doc = format!("{{\"v\": {value}, \"w\":{value}}}");
            assert_eq!(document_texts(&doc), slow(&doc), "document {doc}");
        }
        let many: Vec<String> = (0..100).map(|i| format!("\"k{i}\": {i}")).collect();
        let doc = format!("{{\"v\": {{{}}}}}", many.join(", "));
        assert_eq!(document_texts(&doc), slow(&doc));
        for doc in ["", "  ", "{}", "[]", "1", "\"x\"", "{\"a\":}", "{\"a\":1,}", "{\"a\":1,\"a\":2}", "nope"] {
            assert_eq!(document_texts(doc), slow(doc), "document {doc:?}");
        }
    }

    #[test]
    fn canonical_text_takes_the_fast_path() {
        assert!(fast_texts("{\"a\": {\"b\": [1, 2.5, \"x\", null]}}").is_some());
        assert!(fast_texts("{\"a\": \"\\n\"}").is_none());
        assert!(fast_texts("{\"a\": 1.50}").is_none());
    }

    #[test]
    fn the_workload_payloads_take_the_fast_path() {
        for payload in [include_str!("../../../workloads/payload_big.json"), include_str!("../../../workloads/payload_typical.json")] {
            let fast = fast_texts(payload).expect("fast path");
            assert_eq!(Ok(fast), slow(payload));
        }
    }
}
