//! Recursive descent parser for FEEL expressions and unary tests.

use std::sync::Arc;

use crate::ast::{Args, ArithOp, CmpOp, Expr, FunctionDef, Iteration, UnaryTest};
use crate::lexer::{tokenize, Tok, Token};
use crate::names::Source;
use crate::number::Number;

/// Type names of `instance of` made of several words.
const MULTI_WORD_TYPES: &[&str] = &["years and months duration", "days and time duration", "date and time", "date time"];

/// Deepest nesting of sub-expressions a parse follows (parentheses, calls, lists, contexts,
/// and each link of an operator chain such as `1 + 1 + 1`, which nests in the syntax tree):
/// parsing, evaluating and dropping an expression recurse once per level, so deeper nesting
/// is refused instead of overflowing the stack. A parenthesis costs two levels.
pub const MAX_NESTING_DEPTH: usize = 300;

pub(crate) struct SyntaxError {
    pub message: String,
    pub pos: usize,
}

pub(crate) struct Parser {
    src: Source,
    toks: Vec<Token>,
    i: usize,
    depth: usize,
    /// Set while parsing the end of an interval, where `[` closes the interval (`[1..5[`).
    range_end: bool,
    /// The token index where the last interval literal started (see [`Parser::argument`]).
    last_interval: usize,
}

type PResult<T> = Result<T, SyntaxError>;

pub(crate) fn parse_expression(src: &str) -> PResult<Expr> {
    let toks = tokenize(src).map_err(|e| SyntaxError { message: e.message, pos: e.pos })?;
    let mut p = Parser { src: Source::new(src), toks, i: 0, depth: 0, range_end: false, last_interval: usize::MAX };
    if matches!(p.peek(), Tok::Eof) {
        return Err(p.error("Expected an expression"));
    }
    let e = p.expression()?;
    p.expect_eof()?;
    Ok(e)
}

pub(crate) fn parse_unary_tests(src: &str) -> PResult<Vec<UnaryTest>> {
    let toks = tokenize(src).map_err(|e| SyntaxError { message: e.message, pos: e.pos })?;
    let mut p = Parser { src: Source::new(src), toks, i: 0, depth: 0, range_end: false, last_interval: usize::MAX };
    let tests = p.unary_tests()?;
    p.expect_eof()?;
    Ok(tests)
}

impl Parser {
    fn peek(&self) -> &Tok {
        &self.toks[self.i].tok
    }

    fn peek_at(&self, n: usize) -> &Tok {
        let idx = (self.i + n).min(self.toks.len() - 1);
        &self.toks[idx].tok
    }

    fn pos(&self) -> usize {
        self.toks[self.i].pos
    }

    fn advance(&mut self) -> Tok {
        let t = self.toks[self.i].tok.clone();
        if self.i < self.toks.len() - 1 {
            self.i += 1;
        }
        t
    }

    fn error(&self, msg: &str) -> SyntaxError {
        let found = match self.peek() {
            Tok::Eof => "end of input".to_string(),
            Tok::Num(n) => format!("'{n}'"),
            Tok::Str(s) => format!("'\"{s}\"'"),
            Tok::Name(n) => format!("'{n}'"),
            Tok::Quoted(n) => format!("'`{n}`'"),
            Tok::At(s) => format!("'@\"{s}\"'"),
            Tok::Sym(s) => format!("'{s}'"),
            Tok::Other(c) => format!("'{c}'"),
        };
        SyntaxError { message: format!("{msg} but found {found}"), pos: self.pos() }
    }

    fn is_sym(&self, s: &str) -> bool {
        matches!(self.peek(), Tok::Sym(x) if *x == s)
    }

    fn is_kw(&self, k: &str) -> bool {
        matches!(self.peek(), Tok::Name(x) if x == k)
    }

    fn is_kw_at(&self, n: usize, k: &str) -> bool {
        matches!(self.peek_at(n), Tok::Name(x) if x == k)
    }

    fn eat_sym(&mut self, s: &str) -> bool {
        if self.is_sym(s) {
            self.advance();
            true
        } else {
            false
        }
    }

    fn eat_kw(&mut self, k: &str) -> bool {
        if self.is_kw(k) {
            self.advance();
            true
        } else {
            false
        }
    }

    fn expect_sym(&mut self, s: &str) -> PResult<()> {
        if self.eat_sym(s) {
            Ok(())
        } else {
            Err(self.error(&format!("Expected '{s}'")))
        }
    }

    fn expect_kw(&mut self, k: &str) -> PResult<()> {
        if self.eat_kw(k) {
            Ok(())
        } else {
            Err(self.error(&format!("Expected '{k}'")))
        }
    }

    fn expect_eof(&mut self) -> PResult<()> {
        if matches!(self.peek(), Tok::Eof) {
            Ok(())
        } else {
            Err(self.error("Expected end of input"))
        }
    }

    fn enter(&mut self) -> PResult<()> {
        self.depth += 1;
        if self.depth > MAX_NESTING_DEPTH {
            return Err(SyntaxError {
                message: format!(
                    "expression is nested too deeply: more than {MAX_NESTING_DEPTH} levels of nested sub-expressions (FEEL's nesting limit)"
                ),
                pos: self.pos(),
            });
        }
        Ok(())
    }

    /// One more link of an operator chain (`a or b or c`, `a.b.c`): the syntax tree nests one
    /// level deeper per link, so each counts against the nesting limit until the chain ends.
    fn link(&mut self, links: &mut usize) -> PResult<()> {
        self.enter()?;
        *links += 1;
        Ok(())
    }

    // ---- expressions ----

    pub(crate) fn expression(&mut self) -> PResult<Expr> {
        self.enter()?;
        let saved = std::mem::replace(&mut self.range_end, false);
        let r = self.disjunction();
        self.range_end = saved;
        self.depth -= 1;
        r
    }

    fn disjunction(&mut self) -> PResult<Expr> {
        let mut left = self.conjunction()?;
        let mut links = 0;
        while self.is_kw("or") {
            self.advance();
            self.link(&mut links)?;
            let right = self.conjunction()?;
            left = Expr::Or(Box::new(left), Box::new(right));
        }
        self.depth -= links;
        Ok(left)
    }

    fn conjunction(&mut self) -> PResult<Expr> {
        let mut left = self.comparison()?;
        let mut links = 0;
        while self.is_kw("and") {
            self.advance();
            self.link(&mut links)?;
            let right = self.comparison()?;
            left = Expr::And(Box::new(left), Box::new(right));
        }
        self.depth -= links;
        Ok(left)
    }

    fn cmp_op(&self) -> Option<CmpOp> {
        match self.peek() {
            Tok::Sym("=") => Some(CmpOp::Eq),
            Tok::Sym("!=") => Some(CmpOp::Ne),
            Tok::Sym("<") => Some(CmpOp::Lt),
            Tok::Sym("<=") => Some(CmpOp::Le),
            Tok::Sym(">") => Some(CmpOp::Gt),
            Tok::Sym(">=") => Some(CmpOp::Ge),
            _ => None,
        }
    }

    /// A comparison is not associative (feel-scala): `1 < 2 = true` does not parse.
    ///
    /// As in feel-scala, a unary comparison (`< 10`) or an interval (`[1..5]`) may stand here
    /// as a value tested against the implicit input; nothing follows it at this level.
    fn comparison(&mut self) -> PResult<Expr> {
        if let Some(op) = self.cmp_op().filter(|op| !matches!(op, CmpOp::Eq | CmpOp::Ne)) {
            self.advance();
            let operand = self.additive()?;
            if matches!(operand, Expr::Range(..)) {
                return Err(self.error("Expected end of input"));
            }
            return Ok(Expr::InputCmp(op, Box::new(operand)));
        }
        let mut left = self.additive()?;
        if matches!(left, Expr::Range(..)) {
            return Ok(Expr::InputInRange(Box::new(left)));
        }
        for _ in 0..1 {
            if let Some(op) = self.cmp_op() {
                self.advance();
                let right = self.additive()?;
                left = Expr::Cmp(op, Box::new(left), Box::new(right));
            } else if self.is_kw("between") {
                self.advance();
                let low = self.additive()?;
                self.expect_kw("and")?;
                let high = self.additive()?;
                left = Expr::Between(Box::new(left), Box::new(low), Box::new(high));
            } else if self.is_kw("in") {
                self.advance();
                let tests = self.in_tests()?;
                left = Expr::In(Box::new(left), tests);
            } else if self.is_kw("instance") && self.is_kw_at(1, "of") {
                self.advance();
                self.advance();
                let ty = self.type_name()?;
                left = Expr::InstanceOf(Box::new(left), ty);
            }
        }
        Ok(left)
    }

    fn type_name(&mut self) -> PResult<String> {
        for ty in MULTI_WORD_TYPES {
            let words: Vec<&str> = ty.split(' ').collect();
            if words.iter().enumerate().all(|(k, w)| self.is_kw_at(k, w)) {
                for _ in 0..words.len() {
                    self.advance();
                }
                return Ok(ty.to_string());
            }
        }
        let mut name = match self.advance() {
            Tok::Name(n) | Tok::Quoted(n) => n,
            _ => {
                self.i -= 1;
                return Err(self.error("Expected a type name"));
            }
        };
        // hyphenated names: day-time-duration, year-month-duration
        while self.is_sym("-") {
            if let Tok::Name(n) = self.peek_at(1).clone() {
                self.advance();
                self.advance();
                name.push('-');
                name.push_str(&n);
            } else {
                break;
            }
        }
        // generic types (list<number>, context<a: number>) are not supported by feel-scala 1.17
        if self.is_sym("<") {
            return Err(self.error("Expected end of input"));
        }
        Ok(name)
    }

    fn additive(&mut self) -> PResult<Expr> {
        let mut left = self.multiplicative()?;
        let mut links = 0;
        loop {
            let op = if self.is_sym("+") {
                ArithOp::Add
            } else if self.is_sym("-") {
                ArithOp::Sub
            } else {
                self.depth -= links;
                return Ok(left);
            };
            self.advance();
            self.link(&mut links)?;
            let right = self.multiplicative()?;
            left = self.arith(op, left, right)?;
        }
    }

    fn multiplicative(&mut self) -> PResult<Expr> {
        let mut left = self.exponent()?;
        let mut links = 0;
        loop {
            let op = if self.is_sym("*") {
                ArithOp::Mul
            } else if self.is_sym("/") {
                ArithOp::Div
            } else {
                self.depth -= links;
                return Ok(left);
            };
            self.advance();
            self.link(&mut links)?;
            let right = self.exponent()?;
            left = self.arith(op, left, right)?;
        }
    }

    fn exponent(&mut self) -> PResult<Expr> {
        let mut left = self.unary()?;
        let mut links = 0;
        while self.is_sym("**") {
            self.advance();
            self.link(&mut links)?;
            let right = self.unary()?;
            left = self.arith(ArithOp::Pow, left, right)?;
        }
        self.depth -= links;
        Ok(left)
    }

    /// `left op right`; an interval is no operand (feel-scala does not parse `[1..5] + 1`).
    fn arith(&self, op: ArithOp, left: Expr, right: Expr) -> PResult<Expr> {
        if matches!(left, Expr::Range(..)) || matches!(right, Expr::Range(..)) {
            return Err(self.error("Expected end of input"));
        }
        Ok(Expr::Arith(op, Box::new(left), Box::new(right)))
    }

    fn unary(&mut self) -> PResult<Expr> {
        if self.is_sym("-") {
            self.advance();
            self.enter()?;
            let e = self.unary();
            self.depth -= 1;
            let e = e?;
            return Ok(match e {
                Expr::Range(..) => return Err(self.error("Expected an expression")),
                Expr::Number(n) => Expr::Number(n.neg()),
                other => Expr::Neg(Box::new(other)),
            });
        }
        self.postfix()
    }

    fn postfix(&mut self) -> PResult<Expr> {
        let mut e = self.primary()?;
        if matches!(e, Expr::Range(..)) {
            return Ok(e);
        }
        let mut first = true;
        let mut links = 0;
        loop {
            let callable = std::mem::replace(&mut first, false) && matches!(e, Expr::Name(_));
            if self.is_sym(".") || (self.is_sym("[") && !self.range_end) || (self.is_sym("(") && callable) {
                self.link(&mut links)?;
            }
            if self.is_sym(".") {
                self.advance();
                let name = match self.advance() {
                    Tok::Name(n) | Tok::Quoted(n) => n,
                    _ => {
                        self.i -= 1;
                        return Err(self.error("Expected a name"));
                    }
                };
                // the only property name with a space
                let name = if name == "time" && self.is_kw("offset") {
                    self.advance();
                    "time offset".to_string()
                } else {
                    name
                };
                e = Expr::Path(Box::new(e), name);
            } else if self.is_sym("[") && !self.range_end {
                self.advance();
                let filter = self.expression()?;
                self.expect_sym("]")?;
                e = Expr::Filter(Box::new(e), Box::new(filter));
            } else if self.is_sym("(") && callable {
                self.advance();
                let args = self.arguments()?;
                e = Expr::Call(Box::new(e), args);
            } else {
                self.depth -= links;
                return Ok(e);
            }
        }
    }

    /// Parses arguments after '(' up to and including ')'.
    fn arguments(&mut self) -> PResult<Args> {
        if self.eat_sym(")") {
            return Ok(Args::Positional(Vec::new()));
        }
        // named arguments: parameter names followed by ':'
        if self.named_arg_ahead() {
            let mut named = Vec::new();
            loop {
                let name = self.parameter_name()?;
                self.expect_sym(":")?;
                let value = self.argument()?;
                named.push((name, value));
                if self.eat_sym(",") {
                    continue;
                }
                self.expect_sym(")")?;
                return Ok(Args::Named(named));
            }
        }
        let mut args = Vec::new();
        loop {
            args.push(self.argument()?);
            if self.eat_sym(",") {
                continue;
            }
            self.expect_sym(")")?;
            return Ok(Args::Positional(args));
        }
    }

    /// One argument: an interval that is the whole argument is a range value (`before([1..5],
    /// 10)`), anything else an expression (`before(([1..5]), 10)` tests the implicit input).
    fn argument(&mut self) -> PResult<Expr> {
        let start = self.i;
        match self.expression()? {
            Expr::InputInRange(range) if self.last_interval == start => Ok(*range),
            e => Ok(e),
        }
    }

    fn named_arg_ahead(&self) -> bool {
        self.src.parameter_name(&self.toks[self.i..]).is_some_and(|(n, _)| matches!(self.peek_at(n), Tok::Sym(":")))
    }

    /// A parameter name (`a`, `first name`, `` `a b` ``), see [`Source::parameter_name`].
    fn parameter_name(&mut self) -> PResult<String> {
        let Some((count, name)) = self.src.parameter_name(&self.toks[self.i..]) else {
            return Err(self.error("Expected a parameter name"));
        };
        for _ in 0..count {
            self.advance();
        }
        Ok(name)
    }

    /// A context key: any text up to `:` (`{a-b: 1}`), a string (taken as written, escapes
    /// included) or a backtick name.
    fn context_key(&mut self) -> PResult<String> {
        if let Some((key, colon)) = self.src.context_key(self.pos()) {
            while self.pos() < colon && !matches!(self.peek(), Tok::Eof) {
                self.advance();
            }
            return Ok(key);
        }
        let token = &self.toks[self.i];
        let key = match &token.tok {
            Tok::Str(_) => self.src.text(token.pos + 1, token.end - 1),
            Tok::Quoted(n) => n.clone(),
            _ => return Err(self.error("Expected a context key")),
        };
        self.advance();
        Ok(key)
    }

    fn primary(&mut self) -> PResult<Expr> {
        self.enter()?;
        let r = self.primary_inner();
        self.depth -= 1;
        r
    }

    fn primary_inner(&mut self) -> PResult<Expr> {
        let start = self.i;
        match self.advance() {
            Tok::Num(n) => match Number::parse_literal(&n) {
                Some(n) => Ok(Expr::Number(n)),
                None => {
                    self.i = start;
                    Err(SyntaxError { message: format!("invalid number '{n}'"), pos: self.pos() })
                }
            },
            Tok::Str(s) => Ok(Expr::String(s)),
            Tok::At(s) => Ok(Expr::Temporal(s)),
            Tok::Quoted(n) => Ok(Expr::Name(n)),
            Tok::Sym("?") => Ok(Expr::Input),
            Tok::Sym("(") => {
                let e = self.expression()?;
                if self.eat_sym("..") {
                    return self.interval(start, false, e);
                }
                self.expect_sym(")")?;
                Ok(e)
            }
            Tok::Sym("]") => {
                let s = self.expression()?;
                self.expect_sym("..")?;
                self.interval(start, false, s)
            }
            Tok::Sym("[") => {
                if self.eat_sym("]") {
                    return Ok(Expr::List(Vec::new()));
                }
                let first = self.expression()?;
                if self.eat_sym("..") {
                    return self.interval(start, true, first);
                }
                let mut items = vec![first];
                while self.eat_sym(",") {
                    items.push(self.expression()?);
                }
                self.expect_sym("]")?;
                Ok(Expr::List(items))
            }
            Tok::Sym("{") => {
                let mut entries = Vec::new();
                if self.eat_sym("}") {
                    return Ok(Expr::Context(entries));
                }
                loop {
                    let key = self.context_key()?;
                    self.expect_sym(":")?;
                    let value = self.expression()?;
                    entries.push((key, value));
                    if self.eat_sym(",") {
                        continue;
                    }
                    self.expect_sym("}")?;
                    return Ok(Expr::Context(entries));
                }
            }
            Tok::Name(n) => self.name_or_keyword(n, start),
            _ => {
                self.i = start;
                Err(self.error("Expected an expression"))
            }
        }
    }

    /// The rest of an interval after `..`; `begin` is the token index of its first bracket.
    /// Both ends are arithmetic expressions, as in feel-scala (`[1..x > 2]` does not parse).
    fn interval(&mut self, begin: usize, start_closed: bool, low: Expr) -> PResult<Expr> {
        let low_is_operand = is_math_operand(&low) || self.parenthesized(begin + 1, self.i - 1);
        let high = self.range_end_expr()?;
        if !low_is_operand || matches!(high, Expr::Range(..)) {
            return Err(self.error("Expected ']', ')' or '['"));
        }
        let end_closed = self.range_end()?;
        self.last_interval = begin;
        Ok(Expr::Range(start_closed, Box::new(low), Box::new(high), end_closed))
    }

    /// Whether the tokens `from..to` are one parenthesized expression `( … )`.
    fn parenthesized(&self, from: usize, to: usize) -> bool {
        if to <= from || !matches!(self.toks[from].tok, Tok::Sym("(")) {
            return false;
        }
        let mut depth = 0usize;
        for (k, t) in self.toks[from..to].iter().enumerate() {
            match t.tok {
                Tok::Sym("(") => depth += 1,
                Tok::Sym(")") => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        return from + k + 1 == to;
                    }
                }
                _ => {}
            }
        }
        false
    }

    fn range_end_expr(&mut self) -> PResult<Expr> {
        let saved = self.range_end;
        self.range_end = true;
        let e = self.additive();
        self.range_end = saved;
        e
    }

    /// After the end expression of an interval: `]` closes it, `)` or `[` leaves it open.
    fn range_end(&mut self) -> PResult<bool> {
        if self.eat_sym("]") {
            Ok(true)
        } else if self.eat_sym(")") || self.eat_sym("[") {
            Ok(false)
        } else {
            Err(self.error("Expected ']', ')' or '['"))
        }
    }

    fn name_or_keyword(&mut self, n: String, start: usize) -> PResult<Expr> {
        match n.as_str() {
            "null" => return Ok(Expr::Null),
            "true" => return Ok(Expr::Bool(true)),
            "false" => return Ok(Expr::Bool(false)),
            // `if`, `for`, `some`, `every` are names where their expression can not start
            "if" if self.starts_operand() => {
                let cond = self.expression()?;
                self.expect_kw("then")?;
                let then = self.expression()?;
                self.expect_kw("else")?;
                let otherwise = self.expression()?;
                return Ok(Expr::If(Box::new(cond), Box::new(then), Box::new(otherwise)));
            }
            "for" if matches!(self.peek(), Tok::Name(_) | Tok::Quoted(_)) && self.is_kw_at(1, "in") => {
                let its = self.iterators()?;
                self.expect_kw("return")?;
                let body = self.expression()?;
                return Ok(Expr::For(its, Box::new(body)));
            }
            "some" | "every" if matches!(self.peek(), Tok::Name(_) | Tok::Quoted(_)) && self.is_kw_at(1, "in") => {
                let its = self.iterators()?;
                self.expect_kw("satisfies")?;
                let body = self.expression()?;
                return Ok(if n == "some" { Expr::Some(its, Box::new(body)) } else { Expr::Every(its, Box::new(body)) });
            }
            "function" if self.is_sym("(") => {
                self.advance();
                let mut params = Vec::new();
                if !self.eat_sym(")") {
                    loop {
                        params.push(self.parameter_name()?);
                        if self.eat_sym(",") {
                            continue;
                        }
                        self.expect_sym(")")?;
                        break;
                    }
                }
                let body = self.expression()?;
                return Ok(Expr::Function(Arc::new(FunctionDef { params, body })));
            }
            "and" | "or" if self.is_sym("(") => {}
            "then" | "else" | "return" | "satisfies" | "and" | "or" | "in" | "function" => {
                self.i = start;
                return Err(self.error("Expected an expression"));
            }
            _ => {}
        }
        // function names made of several words: `string length(…)`, `my func(…)`
        if let Some((count, name)) = self.src.function_name(&self.toks[start..]) {
            for _ in 1..count {
                self.advance();
            }
            return Ok(Expr::Name(name));
        }
        Ok(Expr::Name(n))
    }

    /// Whether the next token can start an operand (an expression without a binary operator
    /// in front).
    fn starts_operand(&self) -> bool {
        match self.peek() {
            Tok::Num(_) | Tok::Str(_) | Tok::Name(_) | Tok::Quoted(_) | Tok::At(_) => true,
            Tok::Sym(s) => matches!(*s, "(" | "[" | "]" | "{" | "-" | "?" | "<" | "<=" | ">" | ">="),
            Tok::Other(_) | Tok::Eof => false,
        }
    }

    fn iterators(&mut self) -> PResult<Vec<(String, Iteration)>> {
        let mut its = Vec::new();
        loop {
            let name = match self.advance() {
                Tok::Name(n) | Tok::Quoted(n) => n,
                _ => {
                    self.i -= 1;
                    return Err(self.error("Expected a name"));
                }
            };
            self.expect_kw("in")?;
            // feel-scala: `a..b` of arithmetic expressions, or a value (no interval, no
            // arithmetic outside parentheses)
            let begin = self.i;
            let e = self.additive()?;
            let it = if self.eat_sym("..") {
                Iteration::Range(e, self.additive()?)
            } else if matches!(e, Expr::Range(..) | Expr::Arith(..) | Expr::Neg(..)) && !self.parenthesized(begin, self.i) {
                return Err(self.error("Expected 'return' or 'satisfies'"));
            } else {
                Iteration::List(e)
            };
            its.push((name, it));
            if self.eat_sym(",") {
                continue;
            }
            return Ok(its);
        }
    }

    // ---- unary tests ----

    /// The tests after `in`: one positive unary test, or several in parentheses.
    fn in_tests(&mut self) -> PResult<Vec<UnaryTest>> {
        if self.is_sym("(") {
            // `(a..b]` is an interval, `(1, 2, 3)` a list of tests, `(x)` a parenthesized test
            let save = self.i;
            self.advance();
            let first = self.positive_unary_test(true)?;
            if self.is_sym("..") || !self.is_sym(",") {
                // an interval or a parenthesized expression, possibly continued: `(a + b) * 2`
                self.i = save;
                return Ok(vec![self.positive_unary_test(false)?]);
            }
            let mut tests = vec![first];
            while self.eat_sym(",") {
                tests.push(self.positive_unary_test(true)?);
            }
            self.expect_sym(")")?;
            return Ok(tests);
        }
        Ok(vec![self.positive_unary_test(false)?])
    }

    fn unary_tests(&mut self) -> PResult<Vec<UnaryTest>> {
        if self.is_sym("-") && matches!(self.peek_at(1), Tok::Eof) {
            self.advance();
            return Ok(vec![UnaryTest::Any]);
        }
        if self.is_kw("not") && matches!(self.peek_at(1), Tok::Sym("(")) {
            let save = self.i;
            self.advance();
            self.advance();
            let tests = self.positive_unary_tests();
            if let Ok(tests) = tests {
                if self.eat_sym(")") && matches!(self.peek(), Tok::Eof) {
                    return Ok(vec![UnaryTest::Not(tests)]);
                }
            }
            self.i = save;
        }
        self.positive_unary_tests()
    }

    fn positive_unary_tests(&mut self) -> PResult<Vec<UnaryTest>> {
        let mut tests = vec![self.positive_unary_test(true)?];
        while self.eat_sym(",") {
            tests.push(self.positive_unary_test(true)?);
        }
        Ok(tests)
    }

    /// One positive unary test; `full` allows a whole expression (with `and`/`or`), otherwise
    /// the test is one comparison at most (as after `in`).
    fn positive_unary_test(&mut self, full: bool) -> PResult<UnaryTest> {
        // a boolean that is the whole rest is compared with the input (`true` with 5: null)
        if let Tok::Name(b) = self.peek() {
            if (b == "true" || b == "false") && matches!(self.peek_at(1), Tok::Eof) {
                let b = b == "true";
                self.advance();
                return Ok(UnaryTest::Cmp(CmpOp::Eq, Expr::Bool(b)));
            }
        }
        // feel-scala 1.17 has no `= x` and `!= x` unary tests
        if let Some(op) = self.cmp_op().filter(|op| !matches!(op, CmpOp::Eq | CmpOp::Ne)) {
            self.advance();
            let e = self.additive()?;
            if matches!(e, Expr::Range(..)) {
                return Err(self.error("Expected end of input"));
            }
            return Ok(UnaryTest::Cmp(op, e));
        }
        let start = self.i;
        // after `in` a test is one comparison (`5 in ? > 3`, `x in ? between 1 and 9`), as in
        // feel-scala; a second one ends it (`5 in ? > 3 = true` does not parse)
        let e = match if full { self.expression()? } else { self.comparison()? } {
            Expr::InputInRange(range) if self.last_interval == start => *range,
            e => e,
        };
        let uses = e.uses_input();
        Ok(UnaryTest::Expr(e, uses))
    }
}

/// Whether an expression (outside parentheses) may be an operand of arithmetic in
/// feel-scala's grammar: intervals, unary comparisons, comparisons and logic may not.
fn is_math_operand(e: &Expr) -> bool {
    !matches!(
        e,
        Expr::Range(..)
            | Expr::InputCmp(..)
            | Expr::InputInRange(..)
            | Expr::Cmp(..)
            | Expr::And(..)
            | Expr::Or(..)
            | Expr::Between(..)
            | Expr::In(..)
            | Expr::InstanceOf(..)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn precedence() {
        let e = parse_expression("1 + 2 * 3").ok().unwrap();
        assert!(matches!(e, Expr::Arith(ArithOp::Add, _, _)));
        let e = parse_expression("a.b.c").ok().unwrap();
        assert!(matches!(e, Expr::Path(_, ref c) if c == "c"));
        let e = parse_expression("string length(\"abc\")").ok().unwrap();
        assert!(matches!(e, Expr::Call(ref f, _) if **f == Expr::Name("string length".into())));
    }

    #[test]
    fn errors() {
        assert!(parse_expression("x >").is_err());
        assert!(parse_expression("").is_err());
        assert!(parse_expression("(1").is_err());
        assert!(parse_expression("1 1").is_err());
        let deep = "(".repeat(1000) + &")".repeat(1000);
        assert!(parse_expression(&deep).is_err());
    }
}
