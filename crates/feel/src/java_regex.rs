//! Java regular expressions (`java.util.regex`, as feel-scala's `matches`, `replace`, `split`
//! and `extract` use them) on top of fancy-regex.
//!
//! A Java pattern is translated into fancy-regex syntax, which keeps look-around, atomic
//! groups, possessive quantifiers and back-references; a pattern without them runs on the
//! `regex` crate's automata (fancy-regex delegates). The translation gives Java's meaning to
//! what differs: `.` stops at every line terminator (`\n \r \u{85} \u{2028} \u{2029}`), `$`
//! also matches before a final line terminator, `^`/`$` with `m` at every line terminator,
//! `i` folds ASCII letters only, `\d \w \s` and POSIX classes (`\p{Alpha}`) are ASCII, `x`
//! drops whitespace and `#` comments (in classes too), `\Q…\E`, `\h`, `\v`, `\R`, `\e`,
//! octal `\0nn`, `\cX`, inline flags `(?imsxdu-imsxdu)`. Not supported (the pattern is taken
//! as invalid, the function gives null): the flag `U`, `\G`, `\X`, `\N{…}`, Unicode blocks
//! (`\p{InGreek}`).
//! Matching stops after fancy-regex's backtracking limit (null), where Java would go on.

use fancy_regex::{Captures, Regex, RegexBuilder};

/// A compiled Java pattern.
pub(crate) struct JavaRegex {
    re: Regex,
    groups: usize,
}

#[derive(Debug, Clone, Copy, Default)]
struct Flags {
    i: bool,
    s: bool,
    m: bool,
    x: bool,
    /// `d` (UNIX_LINES): only `\n` ends a line.
    d: bool,
    /// `u` (UNICODE_CASE): `i` folds all letters.
    u: bool,
}

const DOT: &str = "[^\\n\\r\\x{85}\\x{2028}\\x{2029}]";
/// `$` without `m`: at the end, or before a line terminator that ends the input.
const DOLLAR: &str = "(?:\\z|(?=\\r\\n\\z)|(?=[\\r\\x{85}\\x{2028}\\x{2029}]\\z)|(?<!\\r)(?=\\n\\z))";
/// `$` with `m`: at the end or before any line terminator (not inside `\r\n`).
const DOLLAR_MULTILINE: &str = "(?:\\z|(?=[\\r\\x{85}\\x{2028}\\x{2029}])|(?<!\\r)(?=\\n))";
/// `^` with `m`: at the start or after any line terminator (not inside `\r\n`), never at the end.
const CARET_MULTILINE: &str = "(?:\\A|(?<=[\\n\\x{85}\\x{2028}\\x{2029}])|(?<=\\r)(?!\\n))(?!\\z)";
const DOT_UNIX: &str = "[^\\n]";
const DOLLAR_UNIX: &str = "(?:\\z|(?=\\n\\z))";
const DOLLAR_MULTILINE_UNIX: &str = "(?:\\z|(?=\\n))";
const CARET_MULTILINE_UNIX: &str = "(?:\\A|(?<=\\n))(?!\\z)";
const LINEBREAK: &str = "(?:\\r\\n|[\\n\\x0B\\x0C\\r\\x{85}\\x{2028}\\x{2029}])";

/// Class contents (without brackets) of Java's ASCII shorthand classes.
fn shorthand(c: char) -> Option<&'static str> {
    Some(match c.to_ascii_lowercase() {
        'd' => "0-9",
        'w' => "a-zA-Z_0-9",
        's' => " \\t\\n\\x0B\\x0C\\r",
        'h' => " \\t\\x{A0}\\x{1680}\\x{180E}\\x{2000}-\\x{200A}\\x{202F}\\x{205F}\\x{3000}",
        'v' => "\\n\\x0B\\x0C\\r\\x{85}\\x{2028}\\x{2029}",
        _ => return None,
    })
}

/// Class contents of a POSIX or java.lang.Character property, or a property name for
/// `\p{…}` (returned with a `\p{` prefix).
fn property(name: &str) -> Option<String> {
    let ascii = match name {
        "Lower" => "a-z",
        "Upper" => "A-Z",
        "ASCII" => "\\x00-\\x7F",
        "Alpha" => "a-zA-Z",
        "Digit" => "0-9",
        "Alnum" => "a-zA-Z0-9",
        "Punct" => "!-/:-@\\[-`{-~",
        "Graph" => "!-~",
        "Print" => " -~",
        "Blank" => " \\t",
        "Cntrl" => "\\x00-\\x1F\\x7F",
        "XDigit" => "0-9a-fA-F",
        "Space" => " \\t\\n\\x0B\\x0C\\r",
        "javaLowerCase" => "\\p{Lowercase}",
        "javaUpperCase" => "\\p{Uppercase}",
        "javaAlphabetic" => "\\p{Alphabetic}",
        "javaLetter" => "\\p{L}",
        "javaDigit" => "\\p{Nd}",
        "javaLetterOrDigit" => "\\p{L}\\p{Nd}",
        "javaWhitespace" => "\\t-\\r\\x1C-\\x1F \\x{1680}\\x{2000}-\\x{2006}\\x{2008}-\\x{200A}\\x{2028}\\x{2029}\\x{205F}\\x{3000}",
        _ => "",
    };
    if !ascii.is_empty() {
        return Some(ascii.to_string());
    }
    let lower = name.to_ascii_lowercase();
    if name.starts_with("In") || lower.starts_with("block=") || lower.starts_with("blk=") || name.starts_with("java") {
        return None;
    }
    let name = name.strip_prefix("Is").unwrap_or(name);
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '=' | '-' | ' ')) {
        return None;
    }
    Some(format!("\\p{{{name}}}"))
}

/// `$` (and `\\Z` without `m`) under the flags.
fn dollar(f: Flags) -> &'static str {
    match (f.m, f.d) {
        (false, false) => DOLLAR,
        (false, true) => DOLLAR_UNIX,
        (true, false) => DOLLAR_MULTILINE,
        (true, true) => DOLLAR_MULTILINE_UNIX,
    }
}

struct Translator {
    chars: Vec<char>,
    pos: usize,
    out: String,
    /// Flags of the enclosing groups; the last one is in force.
    flags: Vec<Flags>,
    /// Capturing groups opened so far, and in the whole pattern (from a first pass).
    groups: usize,
    total_groups: usize,
}

impl Translator {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn peek_at(&self, n: usize) -> Option<char> {
        self.chars.get(self.pos + n).copied()
    }

    fn next(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.pos += 1;
        Some(c)
    }

    fn flags(&self) -> Flags {
        self.flags.last().copied().unwrap_or_default()
    }

    /// In `x` mode: skips whitespace and `#` comments; whether anything was skipped.
    fn skip_comments(&mut self) -> bool {
        if !self.flags().x {
            return false;
        }
        let start = self.pos;
        while let Some(c) = self.peek() {
            if matches!(c, ' ' | '\t' | '\n' | '\x0B' | '\x0C' | '\r') {
                self.pos += 1;
            } else if c == '#' {
                while self.next().is_some_and(|c| !matches!(c, '\n' | '\r' | '\u{85}' | '\u{2028}' | '\u{2029}')) {}
            } else {
                break;
            }
        }
        self.pos > start
    }

    fn translate(&mut self) -> Option<()> {
        loop {
            if self.skip_comments() {
                continue;
            }
            let Some(c) = self.next() else {
                return (self.flags.len() == 1).then_some(());
            };
            let f = self.flags();
            match c {
                '\\' => self.escape()?,
                '[' => {
                    let class = self.class()?;
                    if f.i && f.u {
                        self.out.push_str(&format!("(?i:{class})"));
                    } else {
                        self.out.push_str(&class);
                    }
                }
                '.' => self.out.push_str(match (f.s, f.d) {
                    (true, _) => "(?s:.)",
                    (false, false) => DOT,
                    (false, true) => DOT_UNIX,
                }),
                '^' => self.out.push_str(match (f.m, f.d) {
                    (false, _) => "\\A",
                    (true, false) => CARET_MULTILINE,
                    (true, true) => CARET_MULTILINE_UNIX,
                }),
                '$' => self.out.push_str(dollar(f)),
                '(' => self.group()?,
                ')' => {
                    if self.flags.len() < 2 {
                        return None;
                    }
                    self.flags.pop();
                    self.out.push(')');
                }
                '{' => self.counted()?,
                '*' | '+' | '?' | '|' => self.out.push(c),
                c => self.literal(c),
            }
        }
    }

    fn literal(&mut self, c: char) {
        let f = self.flags();
        if f.i && f.u && !c.is_ascii() {
            self.out.push_str(&format!("(?i:{})", fancy_regex::escape(&c.to_string())));
        } else if f.i && c.is_ascii_alphabetic() {
            self.out.push('[');
            self.out.push(c.to_ascii_lowercase());
            self.out.push(c.to_ascii_uppercase());
            self.out.push(']');
        } else {
            self.out.push_str(&fancy_regex::escape(&c.to_string()));
        }
    }

    /// `{n}`, `{n,}`, `{n,m}` (Java has no literal `{`).
    fn counted(&mut self) -> Option<()> {
        let start = self.pos;
        let digits = |t: &mut Translator| {
            let from = t.pos;
            while t.peek().is_some_and(|c| c.is_ascii_digit()) {
                t.pos += 1;
            }
            t.pos > from
        };
        if !digits(self) {
            return None;
        }
        if self.peek() == Some(',') {
            self.pos += 1;
            digits(self);
        }
        if self.next() != Some('}') {
            return None;
        }
        self.out.push('{');
        self.out.extend(&self.chars[start..self.pos]);
        Some(())
    }

    fn group(&mut self) -> Option<()> {
        let f = self.flags();
        if self.peek() != Some('?') {
            self.groups += 1;
            self.flags.push(f);
            self.out.push('(');
            return Some(());
        }
        self.pos += 1;
        match (self.peek(), self.peek_at(1)) {
            (Some(':' | '=' | '!' | '>'), _) => {
                let c = self.next()?;
                self.out.push_str("(?");
                self.out.push(c);
            }
            (Some('<'), Some('=' | '!')) => {
                self.pos += 1;
                let c = self.next()?;
                self.out.push_str("(?<");
                self.out.push(c);
            }
            (Some('<'), _) => {
                self.pos += 1;
                let mut name = String::new();
                loop {
                    match self.next()? {
                        '>' => break,
                        c if c.is_ascii_alphanumeric() && !(name.is_empty() && c.is_ascii_digit()) => name.push(c),
                        _ => return None,
                    }
                }
                if name.is_empty() {
                    return None;
                }
                self.groups += 1;
                self.out.push_str(&format!("(?<{name}>"));
            }
            _ => {
                // inline flags: (?i) for the rest of the group, (?i:…) for the inner group
                let mut on = true;
                let mut g = f;
                loop {
                    match self.next()? {
                        '-' if on => on = false,
                        'i' => g.i = on,
                        's' => g.s = on,
                        'm' => g.m = on,
                        'x' => g.x = on,
                        'd' => g.d = on,
                        'u' => g.u = on,
                        ')' => {
                            if let Some(top) = self.flags.last_mut() {
                                *top = g;
                            }
                            return Some(());
                        }
                        ':' => {
                            self.flags.push(g);
                            self.out.push_str("(?:");
                            return Some(());
                        }
                        _ => return None,
                    }
                }
            }
        }
        self.flags.push(f);
        Some(())
    }

    /// An escape outside a class (the backslash is consumed).
    fn escape(&mut self) -> Option<()> {
        let e = self.next()?;
        match e {
            '1'..='9' => {
                let mut n = e.to_digit(10)? as usize;
                while let Some(d) = self.peek().and_then(|c| c.to_digit(10)) {
                    let more = n * 10 + d as usize;
                    if more > self.groups {
                        break;
                    }
                    n = more;
                    self.pos += 1;
                }
                if n > self.total_groups {
                    self.out.push_str("(?!)");
                } else {
                    self.out.push_str(&format!("(?:\\{n})"));
                }
            }
            'k' => {
                if self.next()? != '<' {
                    return None;
                }
                let mut name = String::new();
                loop {
                    match self.next()? {
                        '>' => break,
                        c => name.push(c),
                    }
                }
                self.out.push_str(&format!("\\k<{name}>"));
            }
            'Q' => self.quoted(|t, c| t.literal(c)),
            'E' => {}
            'D' | 'W' | 'S' | 'H' | 'V' => self.out.push_str(&format!("[^{}]", shorthand(e)?)),
            'd' | 'w' | 's' | 'h' | 'v' => self.out.push_str(&format!("[{}]", shorthand(e)?)),
            'R' => self.out.push_str(LINEBREAK),
            'b' | 'B' | 'A' | 'z' => {
                self.out.push('\\');
                self.out.push(e);
            }
            'Z' => self.out.push_str(dollar(Flags { m: false, ..self.flags() })),
            'p' | 'P' => {
                let content = self.property()?;
                let negate = if e == 'P' { "^" } else { "" };
                self.out.push_str(&format!("[{negate}{content}]"));
            }
            _ => {
                let c = self.escaped_char(e)?;
                self.literal(c);
            }
        }
        Some(())
    }

    /// `\Q…\E`: every character up to `\E` (or the end) literally.
    fn quoted(&mut self, mut emit: impl FnMut(&mut Translator, char)) {
        while let Some(c) = self.next() {
            if c == '\\' && self.peek() == Some('E') {
                self.pos += 1;
                return;
            }
            emit(self, c);
        }
    }

    /// The character an escape stands for: `\t \n \r \f \a \e`, `\0nn`, `\xhh`, `\x{h…}`,
    /// `\uhhhh`, `\cX`, or an escaped non-letter.
    fn escaped_char(&mut self, e: char) -> Option<char> {
        let hex = |t: &mut Translator, n: usize| {
            let s: String = t.chars.get(t.pos..t.pos + n)?.iter().collect();
            t.pos += n;
            char::from_u32(u32::from_str_radix(&s, 16).ok()?)
        };
        Some(match e {
            't' => '\t',
            'n' => '\n',
            'r' => '\r',
            'f' => '\x0C',
            'a' => '\x07',
            'e' => '\x1B',
            '0' => {
                let mut v = 0u32;
                let mut n = 0;
                while let Some(d) = self.peek().and_then(|c| c.to_digit(8)) {
                    if n == 3 || (n == 2 && v > 0o37) {
                        break;
                    }
                    v = v * 8 + d;
                    n += 1;
                    self.pos += 1;
                }
                if n == 0 {
                    return None;
                }
                char::from_u32(v)?
            }
            'x' if self.peek() == Some('{') => {
                self.pos += 1;
                let close = self.chars[self.pos..].iter().position(|c| *c == '}')?;
                let c = hex(self, close)?;
                self.pos += 1;
                c
            }
            'x' => hex(self, 2)?,
            'u' => hex(self, 4)?,
            'c' => char::from_u32(self.next()? as u32 ^ 64)?,
            c if c.is_ascii_alphanumeric() => return None,
            c => c,
        })
    }

    /// `{Name}` or a one-letter name after `\p`: the class contents.
    fn property(&mut self) -> Option<String> {
        let name: String = if self.peek() == Some('{') {
            self.pos += 1;
            let close = self.chars[self.pos..].iter().position(|c| *c == '}')?;
            let name = self.chars[self.pos..self.pos + close].iter().collect();
            self.pos += close + 1;
            name
        } else {
            self.next()?.to_string()
        };
        property(&name)
    }

    /// A character class after `[`, as fancy-regex syntax (nested classes and `&&` kept).
    fn class(&mut self) -> Option<String> {
        let mut out = String::from("[");
        if self.peek() == Some('^') {
            self.pos += 1;
            out.push('^');
        }
        let mut first = true;
        loop {
            self.skip_comments();
            let c = self.next()?;
            match c {
                ']' if !first => break,
                '[' => out.push_str(&self.class()?),
                '&' if self.peek() == Some('&') => {
                    self.pos += 1;
                    out.push_str("&&");
                }
                '\\' => {
                    let e = self.next()?;
                    match e {
                        'd' | 'w' | 's' | 'h' | 'v' => out.push_str(shorthand(e)?),
                        'D' | 'W' | 'S' | 'H' | 'V' => out.push_str(&format!("[^{}]", shorthand(e)?)),
                        'p' => out.push_str(&self.property()?),
                        'P' => out.push_str(&format!("[^{}]", self.property()?)),
                        'Q' => {
                            let mut chars = Vec::new();
                            self.quoted(|_, c| chars.push(c));
                            for c in chars {
                                self.class_item(&mut out, c, c);
                            }
                        }
                        _ => {
                            let c = self.escaped_char(e)?;
                            self.class_range(&mut out, c)?;
                        }
                    }
                }
                c => self.class_range(&mut out, c)?,
            }
            first = false;
        }
        out.push(']');
        Some(out)
    }

    /// A class item starting with `low`, a range when `-` and an end follow.
    fn class_range(&mut self, out: &mut String, low: char) -> Option<()> {
        if self.peek() == Some('-') && !matches!(self.peek_at(1), Some(']') | Some('[') | None) {
            self.pos += 1;
            let high = match self.next()? {
                '\\' => {
                    let e = self.next()?;
                    self.escaped_char(e)?
                }
                c => c,
            };
            if high < low {
                return None;
            }
            self.class_item(out, low, high);
        } else {
            self.class_item(out, low, low);
        }
        Some(())
    }

    /// `low-high` into a class; with `i`, the other case of its ASCII letters too.
    fn class_item(&self, out: &mut String, low: char, high: char) {
        let esc = |c: char| if "[]\\-^&~".contains(c) { format!("\\{c}") } else { c.to_string() };
        let push = |out: &mut String, a: char, b: char| {
            out.push_str(&esc(a));
            if b != a {
                out.push('-');
                out.push_str(&esc(b));
            }
        };
        push(out, low, high);
        if self.flags().i {
            for (from, to, shift) in [('a', 'z', -32i32), ('A', 'Z', 32)] {
                let (a, b) = (low.max(from), high.min(to));
                if a <= b {
                    let swap = |c: char| char::from_u32((c as i32 + shift) as u32).unwrap_or(c);
                    push(out, swap(a), swap(b));
                }
            }
        }
    }
}

/// Compiled patterns (and rejected ones) per thread, by (pattern, flags): a condition like
/// `matches(x, "…")` is evaluated many times with the same pattern. Cleared when full.
const CACHED_PATTERNS: usize = 128;

/// (pattern, flags) → the compiled pattern, `None` when rejected.
type PatternCache = std::collections::HashMap<(String, String), Option<std::rc::Rc<JavaRegex>>>;

thread_local! {
    static COMPILED: std::cell::RefCell<PatternCache> = std::cell::RefCell::default();
}

impl JavaRegex {
    /// [`JavaRegex::new`], compiled once per thread for the same pattern and flags.
    pub(crate) fn cached(pattern: &str, flags: &str) -> Option<std::rc::Rc<JavaRegex>> {
        COMPILED.with(|cache| {
            if let Some(found) = cache.borrow().get(&(pattern.to_string(), flags.to_string())) {
                return found.clone();
            }
            let compiled = JavaRegex::new(pattern, flags).map(std::rc::Rc::new);
            let mut cache = cache.borrow_mut();
            if cache.len() >= CACHED_PATTERNS {
                cache.clear();
            }
            cache.insert((pattern.to_string(), flags.to_string()), compiled.clone());
            compiled
        })
    }

    /// Compiles a Java pattern with feel-scala's flags (`s`, `m`, `i`, `x`; other characters
    /// are ignored); `None` when Java (or this translation) rejects it.
    pub(crate) fn new(pattern: &str, flags: &str) -> Option<JavaRegex> {
        let base =
            Flags { i: flags.contains('i'), s: flags.contains('s'), m: flags.contains('m'), x: flags.contains('x'), ..Flags::default() };
        let mut t = Translator {
            chars: pattern.chars().collect(),
            pos: 0,
            out: String::new(),
            flags: vec![base],
            groups: 0,
            total_groups: usize::MAX,
        };
        t.translate()?;
        let total = t.groups;
        let mut t = Translator { chars: t.chars, pos: 0, out: String::new(), flags: vec![base], groups: 0, total_groups: total };
        t.translate()?;
        let re = RegexBuilder::new(&t.out).backtrack_limit(1_000_000).delegate_size_limit(1 << 22).build().ok()?;
        Some(JavaRegex { re, groups: total })
    }

    /// Whether the pattern occurs in `s` (Java's `find`); `None` past the backtracking limit.
    pub(crate) fn find(&self, s: &str) -> Option<bool> {
        self.re.is_match(s).ok()
    }

    /// Every match as Java's `Matcher.find` loop finds them: after an empty match the search
    /// goes on one character later, after another match right at its end.
    fn captures_all<'t>(&self, s: &'t str) -> Option<Vec<Captures<'t, str>>> {
        let mut out = Vec::new();
        let mut pos = 0;
        while pos <= s.len() {
            let Some(caps) = self.re.captures_from_pos(s, pos).ok()? else {
                break;
            };
            let m = caps.get(0)?;
            pos = if m.end() == m.start() { m.end() + s[m.end()..].chars().next().map_or(1, char::len_utf8) } else { m.end() };
            out.push(caps);
        }
        Some(out)
    }

    /// The matched texts (Scala's `findAllIn`).
    pub(crate) fn extract(&self, s: &str) -> Option<Vec<String>> {
        Some(self.captures_all(s)?.iter().filter_map(|c| c.get(0)).map(|m| m.as_str().to_string()).collect())
    }

    /// Java's `Pattern.split(s, -1)`: trailing empty strings kept, no leading empty string
    /// from an empty match at the start.
    pub(crate) fn split(&self, s: &str) -> Option<Vec<String>> {
        let mut out = Vec::new();
        let mut last = 0;
        for caps in self.captures_all(s)? {
            let m = caps.get(0)?;
            if m.end() == 0 {
                continue;
            }
            out.push(s[last..m.start()].to_string());
            last = m.end();
        }
        out.push(s[last..].to_string());
        Some(out)
    }

    /// Java's `Matcher.replaceAll`: `$n` (as many digits as name a group), `${name}` and
    /// `\x` (x literally) in the replacement; `None` where Java throws (no such group, a
    /// trailing `\` or `$`).
    pub(crate) fn replace_all(&self, s: &str, replacement: &str) -> Option<String> {
        let rep: Vec<char> = replacement.chars().collect();
        let mut out = String::new();
        let mut last = 0;
        for caps in self.captures_all(s)? {
            let m = caps.get(0)?;
            out.push_str(&s[last..m.start()]);
            self.expand(&caps, &rep, &mut out)?;
            last = m.end();
        }
        out.push_str(&s[last..]);
        Some(out)
    }

    fn expand(&self, caps: &Captures<'_, str>, rep: &[char], out: &mut String) -> Option<()> {
        let mut k = 0;
        while k < rep.len() {
            match rep[k] {
                '\\' => {
                    out.push(*rep.get(k + 1)?);
                    k += 2;
                }
                '$' => {
                    k += 1;
                    let group = if rep.get(k) == Some(&'{') {
                        let close = rep[k..].iter().position(|c| *c == '}')?;
                        let name: String = rep[k + 1..k + close].iter().collect();
                        k += close + 1;
                        caps.name(&name)
                            .map(|m| m.as_str())
                            .or_else(|| self.re.capture_names().flatten().any(|n| n == name).then_some(""))?
                    } else {
                        let mut n = rep.get(k)?.to_digit(10)? as usize;
                        k += 1;
                        while let Some(d) = rep.get(k).and_then(|c| c.to_digit(10)) {
                            if n * 10 + d as usize > self.groups {
                                break;
                            }
                            n = n * 10 + d as usize;
                            k += 1;
                        }
                        if n > self.groups {
                            return None;
                        }
                        caps.get(n).map_or("", |m| m.as_str())
                    };
                    out.push_str(group);
                }
                c => {
                    out.push(c);
                    k += 1;
                }
            }
        }
        Some(())
    }
}
