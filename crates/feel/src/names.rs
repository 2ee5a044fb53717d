//! Names as feel-scala 1.17.8's parser reads them.
//!
//! A variable reference is one identifier (Java identifier characters, see
//! [`crate::lexer::is_name_start`]) or a name in backticks: `order id`, `a-b` and `ok?` are not
//! names (`a-b` is a subtraction, `order id` does not parse), whatever the variables are. Only
//! where a fixed character follows does feel-scala take more than one word:
//! * a function name before `(`: identifiers separated by spaces (`my func(1)`), kept as
//!   written (`string  length(x)` names a function `string  length`, which does not exist);
//! * a parameter name before `,`, `)` or `:` (`function(first name) …`, `f(first name: 1)`);
//! * a context key before `:`, which may hold any character but `"{}:,[]` and a backtick
//!   (`{a-b: 1, x.y: 2, 1: 3}`), again kept as written.

use crate::lexer::{is_whitespace, Tok, Token};

/// Words that are never an identifier on their own (`nullx` or `android` are).
pub(crate) const RESERVED: [&str; 11] = ["null", "true", "false", "function", "in", "return", "then", "else", "satisfies", "and", "or"];

/// Built-in function names containing a reserved word, recognised only as written here.
const NAMES_WITH_RESERVED_WORDS: [&str; 3] = ["years and months duration", "date and time", "get or else"];

/// Characters that end a context key written without quotes.
const KEY_STOP: [char; 8] = ['"', '{', '}', ':', ',', '[', ']', '`'];

pub(crate) fn is_identifier(tok: &Tok) -> bool {
    matches!(tok, Tok::Name(n) if !RESERVED.contains(&n.as_str()))
}

/// The source text of a FEEL expression, for the names taken as written.
pub(crate) struct Source(Vec<char>);

impl Source {
    pub(crate) fn new(src: &str) -> Source {
        Source(src.chars().collect())
    }

    /// The text from char offset `from` to `to`.
    pub(crate) fn text(&self, from: usize, to: usize) -> String {
        self.0[from.min(self.0.len())..to.min(self.0.len())].iter().collect()
    }

    /// Whether only spaces (U+0020, at least one) separate the two tokens.
    fn spaces_between(&self, a: &Token, b: &Token) -> bool {
        b.pos > a.end && self.0[a.end..b.pos].iter().all(|c| *c == ' ')
    }

    /// The multi-word name starting at `toks[0]`: identifiers separated by spaces, as many as
    /// there are, followed by `(`; or a built-in name with a reserved word (`date and time`).
    /// Returns the number of name tokens and the name as written. `None` for a single word.
    pub(crate) fn function_name(&self, toks: &[Token]) -> Option<(usize, String)> {
        let is_call = |n: usize| matches!(toks.get(n).map(|t| &t.tok), Some(Tok::Sym("(")));
        let mut n = 1;
        while n < toks.len() && is_identifier(&toks[n].tok) && self.spaces_between(&toks[n - 1], &toks[n]) {
            n += 1;
        }
        if n > 1 && is_identifier(&toks[0].tok) {
            return is_call(n).then(|| (n, self.text(toks[0].pos, toks[n - 1].end)));
        }
        for name in NAMES_WITH_RESERVED_WORDS {
            let words = name.split(' ').count();
            if toks.len() > words && is_call(words) && self.text(toks[0].pos, toks[words - 1].end) == name {
                return Some((words, name.to_string()));
            }
        }
        None
    }

    /// A parameter name starting at `toks[0]`: identifiers separated by spaces (the name as
    /// written) or one backtick name. Returns the number of tokens and the name.
    pub(crate) fn parameter_name(&self, toks: &[Token]) -> Option<(usize, String)> {
        match toks.first().map(|t| &t.tok) {
            Some(Tok::Quoted(n)) => Some((1, n.clone())),
            Some(t) if is_identifier(t) => {
                let mut n = 1;
                while n < toks.len() && is_identifier(&toks[n].tok) && self.spaces_between(&toks[n - 1], &toks[n]) {
                    n += 1;
                }
                Some((n, self.text(toks[0].pos, toks[n - 1].end)))
            }
            _ => None,
        }
    }

    /// A context key written without quotes, starting at char offset `start`: every character
    /// up to the first of `"{}:,[]` and a backtick, which must be `:`. Whitespace and comments
    /// inside are kept, around it dropped. Returns the key and the offset of the `:`.
    pub(crate) fn context_key(&self, start: usize) -> Option<(String, usize)> {
        let chars = &self.0;
        let (mut i, mut end) = (start, start);
        loop {
            match chars.get(i) {
                None => return None,
                Some(':') if end > start => return Some((self.text(start, end), i)),
                Some(c) if KEY_STOP.contains(c) => return None,
                Some(_) => {
                    i += 1;
                    end = i;
                    i = self.skip_whitespace(i)?;
                }
            }
        }
    }

    /// The offset after whitespace and comments from `i`; `None` in an unterminated comment.
    fn skip_whitespace(&self, mut i: usize) -> Option<usize> {
        let chars = &self.0;
        loop {
            match (chars.get(i), chars.get(i + 1)) {
                (Some(c), _) if is_whitespace(*c) => i += 1,
                (Some('/'), Some('/')) => {
                    while chars.get(i).is_some_and(|c| *c != '\n') {
                        i += 1;
                    }
                }
                (Some('/'), Some('*')) => {
                    let close = chars[i + 2..].windows(2).position(|w| w == ['*', '/'])?;
                    i += 2 + close + 2;
                }
                _ => return Some(i),
            }
        }
    }
}
