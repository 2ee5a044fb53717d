//! A variables document split into its top-level variables, each value as compact JSON text,
//! without building the document's tree when its text is already in the form the engine
//! stores.
//!
//! Contract: [`document_texts`] returns exactly what parsing the document into a
//! `serde_json::Value` and printing each top-level value would return (the same names, order,
//! texts and errors). Values whose text might print differently (escapes in strings, numbers
//! that are not in their shortest form, duplicate keys, ...) take that slow path; the rest are
//! validated and copied, with the whitespace between tokens left out, in one pass over the text
//! (parsing with `serde_json` first and compacting after took ~40 instructions per byte).

use serde_json::{Map, Value as Json};

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
    let mut scan = Scanner { text, at: 0, depth: 0, gaps: Vec::new() };
    scan.skip_whitespace();
    scan.expect(b'{')?;
    let mut texts: VariableTexts = Vec::new();
    let mut names = NameSet::default();
    scan.skip_whitespace();
    if !scan.eat(b'}') {
        loop {
            scan.skip_whitespace();
            let name = scan.plain_string()?;
            if !names.insert(name) {
                return None; // the slow path decides which value a repeated name keeps
            }
            scan.skip_whitespace();
            scan.expect(b':')?;
            scan.skip_whitespace();
            let value = scan.value_text()?;
            texts.push((name.to_owned(), value));
            scan.skip_whitespace();
            if scan.eat(b'}') {
                break;
            }
            scan.expect(b',')?;
        }
    }
    scan.skip_whitespace();
    (scan.at == text.len()).then_some(texts)
}

/// The top-level names seen so far: searched linearly while they are few (the common document
/// has a handful; no allocation then), hashed beyond that, so a document of 200,000 names costs
/// linear time, not the 2·10¹⁰ comparisons (~40 s of a partition's time) a linear search for
/// each took.
#[derive(Default)]
struct NameSet<'t> {
    few: [&'t str; LINEAR_NAME_SEARCH],
    count: usize,
    hashed: Option<std::collections::HashSet<&'t str>>,
}

/// Names searched linearly before they are hashed.
const LINEAR_NAME_SEARCH: usize = 16;

impl<'t> NameSet<'t> {
    /// Adds `name`; false if it was there already.
    fn insert(&mut self, name: &'t str) -> bool {
        if let Some(hashed) = &mut self.hashed {
            return hashed.insert(name);
        }
        if self.few[..self.count].contains(&name) {
            return false;
        }
        if self.count < LINEAR_NAME_SEARCH {
            self.few[self.count] = name;
            self.count += 1;
        } else {
            let mut hashed: std::collections::HashSet<&'t str> = self.few.iter().copied().collect();
            hashed.insert(name);
            self.hashed = Some(hashed);
        }
        true
    }
}

/// Deepest nesting the fast path follows (`serde_json` stops at 128 with an error).
const MAX_FAST_DEPTH: usize = 100;

/// One pass over a document that validates it and notes the whitespace between the tokens of
/// each value, which the value's text then leaves out. Every method answers `None` for text it
/// does not take (invalid, or valid but printed differently by `serde_json`): the caller then
/// takes the slow path, which gives the value or the error.
struct Scanner<'t> {
    text: &'t str,
    at: usize,
    depth: usize,
    /// Whitespace runs (start, end) inside the value being scanned.
    gaps: Vec<(usize, usize)>,
}

impl<'t> Scanner<'t> {
    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.at).copied()
    }

    fn skip_whitespace(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    /// Skips whitespace inside a value, noting it as a gap.
    fn skip_gap(&mut self) {
        let start = self.at;
        self.skip_whitespace();
        if self.at > start {
            self.gaps.push((start, self.at));
        }
    }

    fn eat(&mut self, byte: u8) -> bool {
        let found = self.peek() == Some(byte);
        self.at += usize::from(found);
        found
    }

    fn expect(&mut self, byte: u8) -> Option<()> {
        self.eat(byte).then_some(())
    }

    /// A string without escapes or control characters: its content.
    fn plain_string(&mut self) -> Option<&'t str> {
        self.expect(b'"')?;
        let start = self.at;
        let len = self.text.as_bytes()[start..].iter().position(|&b| b == b'"' || b == b'\\' || b < 0x20)?;
        self.at = start + len;
        self.expect(b'"')?;
        Some(&self.text[start..start + len])
    }

    /// The value that starts here, as compact text.
    fn value_text(&mut self) -> Option<String> {
        let start = self.at;
        self.gaps.clear();
        self.value()?;
        let end = self.at;
        let gaps: usize = self.gaps.iter().map(|(from, to)| to - from).sum();
        let mut text = String::with_capacity(end - start - gaps);
        let mut copied = start;
        for &(from, to) in &self.gaps {
            text.push_str(&self.text[copied..from]);
            copied = to;
        }
        text.push_str(&self.text[copied..end]);
        Some(text)
    }

    /// Scans one value (no whitespace before it).
    fn value(&mut self) -> Option<()> {
        match self.peek()? {
            b'"' => {
                self.plain_string()?;
            }
            b'{' => self.nested(b'}', true)?,
            b'[' => self.nested(b']', false)?,
            b'-' | b'0'..=b'9' => {
                let start = self.at;
                self.number()?;
                if !is_shortest_form(&self.text[start..self.at]) {
                    return None;
                }
            }
            first => {
                let literal: &str = match first {
                    b't' => "true",
                    b'f' => "false",
                    b'n' => "null",
                    _ => return None,
                };
                if !self.text[self.at..].starts_with(literal) {
                    return None;
                }
                self.at += literal.len();
            }
        }
        Some(())
    }

    /// An object (`keyed`) or an array, its opening byte next.
    fn nested(&mut self, close: u8, keyed: bool) -> Option<()> {
        self.depth += 1;
        if self.depth > MAX_FAST_DEPTH {
            return None;
        }
        self.at += 1;
        self.skip_gap();
        if !self.eat(close) {
            let mut keys: Vec<&str> = Vec::new();
            loop {
                if keyed {
                    let key = self.plain_string()?;
                    if keys.len() >= MAX_FAST_OBJECT_KEYS || keys.contains(&key) {
                        return None;
                    }
                    keys.push(key);
                    self.skip_gap();
                    self.expect(b':')?;
                    self.skip_gap();
                }
                self.value()?;
                self.skip_gap();
                if self.eat(close) {
                    break;
                }
                self.expect(b',')?;
                self.skip_gap();
            }
        }
        self.depth -= 1;
        Some(())
    }

    /// A number in JSON's grammar without an exponent: `-?(0|[1-9][0-9]*)(.[0-9]+)?`.
    fn number(&mut self) -> Option<()> {
        self.eat(b'-');
        let digits = |s: &mut Self| {
            let start = s.at;
            while matches!(s.peek(), Some(b'0'..=b'9')) {
                s.at += 1;
            }
            s.at - start
        };
        let first = self.peek()?;
        let int = digits(self);
        if int == 0 || (first == b'0' && int > 1) {
            return None;
        }
        if self.eat(b'.') && digits(self) == 0 {
            return None;
        }
        // an exponent is never in the printed form
        (!matches!(self.peek(), Some(b'e' | b'E'))).then_some(())
    }
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

/// A JSON value's compact text (as `Display`, but written straight into a byte buffer instead of
/// through `fmt::Formatter`, which is about twice as slow for large values).
pub(crate) fn json_text(value: &Json) -> String {
    serde_json::to_string(value).expect("a JSON value always serialises")
}

/// Parses a variables document: empty means none; anything but a JSON object is an error with
/// Zeebe's wording.
pub(crate) fn parse_document(text: &str) -> Result<Map<String, Json>, String> {
    if text.trim().is_empty() {
        return Ok(Map::new());
    }
    match serde_json::from_str::<Json>(text) {
        Ok(Json::Object(map)) => Ok(map),
        Ok(other) => Err(format!("Expected document to be a root level object, but was '{}'", json_type_name(&other))),
        Err(e) => Err(format!("Expected document to be valid JSON, but it was not: {e}")),
    }
}

fn json_type_name(v: &Json) -> &'static str {
    match v {
        Json::Null => "NIL",
        Json::Bool(_) => "BOOLEAN",
        Json::Number(_) => "INTEGER",
        Json::String(_) => "STRING",
        Json::Array(_) => "ARRAY",
        Json::Object(_) => "MAP",
    }
}

/// Variables (name, JSON text) as a JSON object's text (empty: none).
pub(crate) fn object_text(variables: &[(String, String)]) -> String {
    if variables.is_empty() {
        return String::new();
    }
    let mut text = String::from("{");
    for (i, (name, value)) in variables.iter().enumerate() {
        if i > 0 {
            text.push(',');
        }
        text.push_str(&Json::String(name.clone()).to_string());
        text.push(':');
        text.push_str(value);
    }
    text.push('}');
    text
}

#[cfg(test)]
mod property_tests;

#[cfg(test)]
fn slow(text: &str) -> Result<VariableTexts, String> {
    Ok(parse_document(text)?.iter().map(|(name, value)| (name.clone(), json_text(value))).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let invalid_or_odd = [
            "01",
            "-01",
            "1.",
            ".5",
            "-",
            "+1",
            "1.e3",
            "tru",
            "nulll",
            "True",
            "[1,]",
            "[,1]",
            "{\"a\" 1}",
            "{\"a\":1 \"b\":2}",
            "{a:1}",
            "{\"a\":1,}",
            "\"tab\there\"",
            "\"line\nbreak\"",
            "[1 2]",
            "[[[[[[[[[[1]]]]]]]]]]",
            "1 ",
        ];
        for value in invalid_or_odd {
            let doc = format!("{{\"v\": {value}}}");
            assert_eq!(document_texts(&doc), slow(&doc), "document {doc:?}");
        }
        let deep = format!("{{\"v\": {}1{}}}", "[".repeat(120), "]".repeat(120));
        assert_eq!(document_texts(&deep), slow(&deep));
        let too_deep = format!("{{\"v\": {}1{}}}", "[".repeat(130), "]".repeat(130));
        assert_eq!(document_texts(&too_deep), slow(&too_deep));
        for doc in [
            "",
            "  ",
            "{}",
            " { } ",
            "[]",
            "1",
            "\"x\"",
            "{\"a\":}",
            "{\"a\":1,}",
            "{\"a\":1,\"a\":2}",
            "nope",
            "{} x",
            "{\"a\":1}}",
            "{\"a\":1",
            "{\"\":1}",
            "{\"a\\u0041\":1}",
        ] {
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
