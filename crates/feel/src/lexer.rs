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
    Eof,
}

#[derive(Debug, Clone)]
pub(crate) struct Token {
    pub tok: Tok,
    /// Char offset of the token's first character.
    pub pos: usize,
}

pub(crate) struct LexError {
    pub message: String,
    pub pos: usize,
}

const SYMBOLS: [&str; 24] =
    ["**", "!=", "<=", ">=", "..", "->", "+", "-", "*", "/", "=", "<", ">", "(", ")", "[", "]", "{", "}", ",", ".", ":", "?", "!"];

pub(crate) fn is_name_start(c: char) -> bool {
    c.is_alphabetic() || c == '_' || c == '$'
}

pub(crate) fn is_name_part(c: char) -> bool {
    c.is_alphanumeric() || c == '_' || c == '$'
}

pub(crate) fn tokenize(src: &str) -> Result<Vec<Token>, LexError> {
    let chars: Vec<char> = src.chars().collect();
    let mut i = 0;
    let mut out = Vec::new();
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
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
            out.push(Token { tok: Tok::Num(s), pos: start });
            continue;
        }
        if c == '"' {
            let (s, next) = lex_string(&chars, i)?;
            i = next;
            out.push(Token { tok: Tok::Str(s), pos: start });
            continue;
        }
        if c == '@' {
            if chars.get(i + 1) == Some(&'"') {
                let (s, next) = lex_string(&chars, i + 1)?;
                i = next;
                out.push(Token { tok: Tok::At(s), pos: start });
                continue;
            }
            return Err(LexError { message: "Expected '\"' after '@'".into(), pos: i + 1 });
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
            out.push(Token { tok: Tok::Quoted(s), pos: start });
            continue;
        }
        if is_name_start(c) {
            let mut s = String::new();
            while i < chars.len() && is_name_part(chars[i]) {
                s.push(chars[i]);
                i += 1;
            }
            out.push(Token { tok: Tok::Name(s), pos: start });
            continue;
        }
        let mut matched = false;
        for sym in SYMBOLS {
            let n = sym.chars().count();
            if chars.len() >= i + n && sym.chars().zip(&chars[i..i + n]).all(|(a, b)| a == *b) {
                out.push(Token { tok: Tok::Sym(sym), pos: start });
                i += n;
                matched = true;
                break;
            }
        }
        if !matched {
            return Err(LexError { message: format!("Unexpected character '{c}'"), pos: i });
        }
    }
    out.push(Token { tok: Tok::Eof, pos: chars.len() });
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
