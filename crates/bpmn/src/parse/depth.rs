//! How deeply a document's elements nest, read from its markup before it is parsed: roxmltree's
//! tokenizer recurses once per nesting level, so a document of 50,000 nested elements overflowed
//! the stack inside `Document::parse`, before any check on the tree could run.

/// Why a document is refused before parsing.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Refusal {
    /// The element starting at this byte offset is nested deeper than the limit.
    TooDeep { offset: usize },
    /// An entity declared in the document type holds markup (its replacement text could nest
    /// elements the scan does not see); the literal starts at this byte offset.
    MarkupInEntity { offset: usize },
}

/// Checks that no element nests deeper than `max_depth` (the root element is at depth 1). Reads
/// start and end tags, skipping comments, CDATA sections, processing instructions, quoted
/// attribute values and the document type declaration. Malformed markup is left to the parser,
/// which reports it; the scan never reads past the text and takes linear time.
pub(super) fn check(text: &str, max_depth: usize) -> Result<(), Refusal> {
    let b = text.as_bytes();
    let mut depth = 0usize;
    let mut i = 0;
    while let Some(found) = find(b, i, b"<") {
        i = found;
        let rest = &b[i..];
        if rest.starts_with(b"<!--") {
            i = after(b, i + 4, b"-->");
        } else if rest.starts_with(b"<![CDATA[") {
            i = after(b, i + 9, b"]]>");
        } else if rest.starts_with(b"<?") {
            i = after(b, i + 2, b"?>");
        } else if rest.starts_with(b"<!") {
            i = doctype_end(b, i + 2)?;
        } else if rest.starts_with(b"</") {
            depth = depth.saturating_sub(1);
            i = after(b, i + 2, b">");
        } else {
            let end = tag_end(b, i + 1);
            if depth + 1 > max_depth {
                return Err(Refusal::TooDeep { offset: i });
            }
            let self_closing = end > 0 && end <= b.len() && b[end - 1] == b'/';
            if !self_closing {
                depth += 1;
            }
            i = end + 1;
        }
    }
    Ok(())
}

/// The first occurrence of `needle` at or after `from`.
fn find(b: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    if from >= b.len() {
        return None;
    }
    b[from..].windows(needle.len()).position(|w| w == needle).map(|p| from + p)
}

/// The offset just after the next `needle` (the end of the text if there is none).
fn after(b: &[u8], from: usize, needle: &[u8]) -> usize {
    find(b, from, needle).map_or(b.len(), |p| p + needle.len())
}

/// The offset of the `>` closing a start tag, quoted attribute values skipped (they may hold
/// `>` or `/>`); the end of the text if there is none.
fn tag_end(b: &[u8], mut i: usize) -> usize {
    while i < b.len() {
        match b[i] {
            b'>' => return i,
            quote @ (b'"' | b'\'') => i = after(b, i + 1, &[quote]),
            _ => i += 1,
        }
    }
    b.len()
}

/// The offset after a `<!DOCTYPE ...>` (or other declaration) whose `<!` is before `i`: quoted
/// literals skipped, an internal subset `[...]` walked with its comments and processing
/// instructions. A quoted literal of the internal subset may not hold `<`.
fn doctype_end(b: &[u8], mut i: usize) -> Result<usize, Refusal> {
    let mut in_subset = false;
    while i < b.len() {
        match b[i] {
            b'>' if !in_subset => return Ok(i + 1),
            b'[' => in_subset = true,
            b']' => in_subset = false,
            b'<' if in_subset && b[i..].starts_with(b"<!--") => {
                i = after(b, i + 4, b"-->");
                continue;
            }
            b'<' if in_subset && b[i..].starts_with(b"<?") => {
                i = after(b, i + 2, b"?>");
                continue;
            }
            quote @ (b'"' | b'\'') => {
                let end = after(b, i + 1, &[quote]);
                if in_subset && b[i..end].contains(&b'<') {
                    return Err(Refusal::MarkupInEntity { offset: i });
                }
                i = end;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    Ok(b.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deepest(text: &str) -> usize {
        (1..100).find(|&max| check(text, max).is_ok()).expect("a depth under 100")
    }

    #[test]
    fn counts_elements_not_other_markup() {
        assert_eq!(deepest("<a/>"), 1);
        assert_eq!(deepest("<?xml version=\"1.0\"?><a><b><c/></b><b/></a>"), 3);
        assert_eq!(deepest("<a><!-- <b><c><d> --><![CDATA[<b><c>]]><?pi <b><c>?><b x=\"/>\" y='<'>text</b></a>"), 2);
        assert_eq!(deepest("<!DOCTYPE a [<!ENTITY e \"x\"><!-- \" -->]><a><b></b></a>"), 2);
        assert_eq!(check("<a><b><c></c></b></a>", 2), Err(Refusal::TooDeep { offset: 6 }));
    }

    #[test]
    fn markup_in_an_entity_is_refused() {
        let text = "<!DOCTYPE a [<!ENTITY e \"<b><b><b>\">]><a>&e;</a>";
        assert_eq!(check(text, 10), Err(Refusal::MarkupInEntity { offset: 24 }));
    }

    #[test]
    fn malformed_markup_ends_the_scan() {
        for text in ["<", "<a", "<a x=\"", "<!--", "<!DOCTYPE [", "</", "<![CDATA[", "<?"] {
            assert!(check(text, 1).is_ok(), "{text}");
        }
    }

    #[test]
    fn deep_nesting_is_refused_in_linear_time() {
        let text = "<a>".repeat(1_000_000);
        assert_eq!(check(&text, 100), Err(Refusal::TooDeep { offset: 300 }));
        assert!(check(&text, 2_000_000).is_ok());
    }
}
