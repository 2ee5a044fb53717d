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
            // optional exponent: 1e3, 1.5E-2
            if i < chars.len() && (chars[i] == 'e' || chars[i] == 'E') {
                let mut j = i + 1;
                if j < chars.len() && (chars[j] == '+' || chars[j] == '-') {
                    j += 1;
                }
                if j < chars.len() && chars[j].is_ascii_digit() {
                    s.extend(&chars[i..j]);
                    i = j;
                    while i < chars.len() && chars[i].is_ascii_digit() {
                        s.push(chars[i]);
                        i += 1;
                    }
                }
            }
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
/// the closing quote.
fn lex_string(chars: &[char], open: usize) -> Result<(String, usize), LexError> {
    let mut s = String::new();
    let mut i = open + 1;
    loop {
        match chars.get(i) {
            None => return Err(LexError { message: "Expected closing '\"'".into(), pos: chars.len() }),
            Some('"') => return Ok((s, i + 1)),
            Some('\\') => {
                let Some(e) = chars.get(i + 1) else {
                    return Err(LexError { message: "Expected closing '\"'".into(), pos: chars.len() });
                };
                match e {
                    'n' => s.push('\n'),
                    'r' => s.push('\r'),
                    't' => s.push('\t'),
                    'b' => s.push('\u{8}'),
                    'f' => s.push('\u{c}'),
                    '"' => s.push('"'),
                    '\'' => s.push('\''),
                    '\\' => s.push('\\'),
                    'u' => {
                        let hex: String = chars.iter().skip(i + 2).take(4).collect();
                        let code = if hex.len() == 4 { u32::from_str_radix(&hex, 16).ok() } else { None };
                        let Some(code) = code else {
                            return Err(LexError { message: "invalid unicode escape".into(), pos: i });
                        };
                        i += 4;
                        // surrogate pairs: \uD83D\uDE00
                        if (0xD800..0xDC00).contains(&code) && chars.get(i + 2) == Some(&'\\') && chars.get(i + 3) == Some(&'u') {
                            let low: String = chars.iter().skip(i + 4).take(4).collect();
                            if let Ok(low) = u32::from_str_radix(&low, 16) {
                                if (0xDC00..0xE000).contains(&low) {
                                    let c = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
                                    s.push(char::from_u32(c).unwrap_or('\u{FFFD}'));
                                    i += 8;
                                    continue;
                                }
                            }
                        }
                        s.push(char::from_u32(code).unwrap_or('\u{FFFD}'));
                    }
                    other => {
                        // unknown escapes are kept as they are, like feel-scala
                        s.push('\\');
                        s.push(*other);
                    }
                }
                i += 2;
            }
            Some(c) => {
                s.push(*c);
                i += 1;
            }
        }
    }
}
