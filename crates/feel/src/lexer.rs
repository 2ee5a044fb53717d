//! Tokenizer for FEEL.

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Tok {
    Num(String),
    Str(String),
    /// An identifier or keyword (keywords are recognised by the parser).
    Name(String),
    /// A name in backticks: `` `first name` ``.
    Quoted(String),
    /// A temporal literal `@"..."`.
    At(String),
    Sym(&'static str),
    /// A character that starts no token; only context keys may contain it (`{a'b: 1}`).
    Other(char),
    Eof,
}

#[derive(Debug, Clone)]
pub(crate) struct Token {
    pub tok: Tok,
    /// Char offset of the token's first character.
    pub pos: usize,
    /// Char offset after the token's last character.
    pub end: usize,
}

pub(crate) struct LexError {
    pub message: String,
    pub pos: usize,
}

const SYMBOLS: [&str; 24] =
    ["**", "!=", "<=", ">=", "..", "->", "+", "-", "*", "/", "=", "<", ">", "(", ")", "[", "]", "{", "}", ",", ".", ":", "?", "!"];

/// Whitespace as feel-scala's parser sees it (DMN 1.5: Unicode spaces, `\u{180E}`,
/// `\u{200B}` and `\u{FEFF}` included).
pub(crate) fn is_whitespace(c: char) -> bool {
    c.is_whitespace() || matches!(c, '\u{180E}' | '\u{200B}' | '\u{FEFF}')
}

/// Java's `Character.isJavaIdentifierStart`: letters, letter numbers, currency symbols (`$`,
/// `€`) and connector punctuation (`_`).
pub(crate) fn is_name_start(c: char) -> bool {
    use unicode_general_category::{get_general_category, GeneralCategory as G};
    if c.is_ascii() {
        return c.is_ascii_alphabetic() || c == '_' || c == '$';
    }
    matches!(
        get_general_category(c),
        G::UppercaseLetter
            | G::LowercaseLetter
            | G::TitlecaseLetter
            | G::ModifierLetter
            | G::OtherLetter
            | G::LetterNumber
            | G::CurrencySymbol
            | G::ConnectorPunctuation
    )
}

/// Java's `Character.isJavaIdentifierPart` without FEEL whitespace: also digits, combining
/// marks and the characters Java ignores in identifiers (format and most control characters).
pub(crate) fn is_name_part(c: char) -> bool {
    use unicode_general_category::{get_general_category, GeneralCategory as G};
    if c.is_ascii() {
        return c.is_ascii_alphanumeric() || c == '_' || c == '$' || matches!(c, '\0'..='\u{8}' | '\u{E}'..='\u{1B}' | '\u{7F}');
    }
    if is_whitespace(c) {
        return false;
    }
    is_name_start(c)
        || matches!(c, '\u{80}'..='\u{9F}')
        || matches!(get_general_category(c), G::DecimalNumber | G::NonspacingMark | G::SpacingMark | G::Format)
}

pub(crate) fn tokenize(src: &str) -> Result<Vec<Token>, LexError> {
    let chars: Vec<char> = src.chars().collect();
    let mut i = 0;
    let mut out = Vec::new();
    while i < chars.len() {
        let c = chars[i];
        if is_whitespace(c) {
            i += 1;
            continue;
        }
        // comments
        if c == '/' && chars.get(i + 1) == Some(&'/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
            continue;
        }
        if c == '/' && chars.get(i + 1) == Some(&'*') {
            let start = i;
            i += 2;
            loop {
                if i + 1 >= chars.len() {
                    return Err(LexError { message: "unterminated comment".into(), pos: start });
                }
                if chars[i] == '*' && chars[i + 1] == '/' {
                    i += 2;
                    break;
                }
                i += 1;
            }
            continue;
        }
        let start = i;
        if c.is_ascii_digit() || (c == '.' && chars.get(i + 1).is_some_and(|d| d.is_ascii_digit())) {
            let mut s = String::new();
            while i < chars.len() && chars[i].is_ascii_digit() {
                s.push(chars[i]);
                i += 1;
            }
            if i < chars.len() && chars[i] == '.' && chars.get(i + 1).is_some_and(|d| d.is_ascii_digit()) {
                s.push('.');
                i += 1;
                while i < chars.len() && chars[i].is_ascii_digit() {
                    s.push(chars[i]);
                    i += 1;
                }
            }
            // no exponent (`1e3` is not a FEEL number; feel-scala fails to parse it)
            out.push(Token { tok: Tok::Num(s), pos: start, end: i });
            continue;
        }
        if c == '"' {
            let (s, next) = lex_string(&chars, i)?;
            i = next;
            out.push(Token { tok: Tok::Str(s), pos: start, end: i });
            continue;
        }
        if c == '@' {
            if chars.get(i + 1) == Some(&'"') {
                let (s, next) = lex_string(&chars, i + 1)?;
                i = next;
                out.push(Token { tok: Tok::At(s), pos: start, end: i });
                continue;
            }
            out.push(Token { tok: Tok::Other('@'), pos: start, end: i + 1 });
            i += 1;
            continue;
        }
        if c == '`' {
            let mut s = String::new();
            i += 1;
            loop {
                match chars.get(i) {
                    None => return Err(LexError { message: "unterminated `name`".into(), pos: start }),
                    Some('`') => {
                        i += 1;
                        break;
                    }
                    Some(c) => {
                        s.push(*c);
                        i += 1;
                    }
                }
            }
            out.push(Token { tok: Tok::Quoted(s), pos: start, end: i });
            continue;
        }
        if is_name_start(c) {
            let mut s = String::new();
            while i < chars.len() && is_name_part(chars[i]) {
                s.push(chars[i]);
                i += 1;
            }
            out.push(Token { tok: Tok::Name(s), pos: start, end: i });
            continue;
        }
        let mut matched = false;
        for sym in SYMBOLS {
            let n = sym.chars().count();
            if chars.len() >= i + n && sym.chars().zip(&chars[i..i + n]).all(|(a, b)| a == *b) {
                i += n;
                out.push(Token { tok: Tok::Sym(sym), pos: start, end: i });
                matched = true;
                break;
            }
        }
        if !matched {
            i += 1;
            out.push(Token { tok: Tok::Other(c), pos: start, end: i });
        }
    }
    out.push(Token { tok: Tok::Eof, pos: chars.len(), end: chars.len() });
    Ok(out)
}

/// Lexes a string literal starting at the opening quote; returns the text and the index after
/// the closing quote. As in feel-scala, a backslash and the character after it stay together
/// while looking for the closing quote; then only `\"`, `\'`, `\n`, `\r`, `\t`, `\b`, `\f` and
/// `\s` are translated (scanning character by character, so `\\n` is a backslash and a newline)
/// and every other backslash stays as it is (no `\uXXXX` escapes).
fn lex_string(chars: &[char], open: usize) -> Result<(String, usize), LexError> {
    let mut i = open + 1;
    let end = loop {
        match chars.get(i) {
            None => return Err(LexError { message: "Expected closing '\"'".into(), pos: chars.len() }),
            Some('"') => break i,
            Some('\\') if i + 1 < chars.len() => i += 2,
            Some(_) => i += 1,
        }
    };
    let raw = &chars[open + 1..end];
    let mut s = String::with_capacity(raw.len());
    let mut k = 0;
    while k < raw.len() {
        let c = raw[k];
        if c == '\\' {
            let translated = match raw.get(k + 1) {
                Some('"') => Some('"'),
                Some('\'') => Some('\''),
                Some('n') => Some('\n'),
                Some('r') => Some('\r'),
                Some('t') => Some('\t'),
                Some('b') => Some('\u{8}'),
                Some('f') => Some('\u{c}'),
                Some('s') => Some(' '),
                _ => None,
            };
            if let Some(t) = translated {
                s.push(t);
                k += 2;
                continue;
            }
        }
        s.push(c);
        k += 1;
    }
    Ok((s, end + 1))
}
