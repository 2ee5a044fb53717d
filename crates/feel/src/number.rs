//! FEEL numbers.
//!
//! feel-scala represents numbers as `scala.math.BigDecimal` with `MathContext.DECIMAL128`:
//! 34 significant digits, rounding half-even. Neither `f64` (15-17 digits) nor
//! `rust_decimal` (28 digits) can reproduce that, so `Number` wraps an arbitrary precision
//! [`bigdecimal::BigDecimal`] and rounds every arithmetic result back to 34 significant digits
//! with half-even rounding, which gives the same results as feel-scala for `+ - * /` and integer
//! powers. The representation is private so it can change without breaking users.

use std::cmp::Ordering;
use std::fmt;
use std::num::NonZeroU64;
use std::str::FromStr;

use bigdecimal::num_bigint::{BigInt, Sign};
use bigdecimal::{BigDecimal, One, RoundingMode, Signed, ToPrimitive, Zero};

/// Significant digits of a FEEL number (DECIMAL128).
pub const PRECISION: u64 = 34;

/// Largest decimal exponent (either way) a number may have; beyond it an operation yields null.
/// Java's BigDecimal allows about 2^31; keeping it smaller avoids huge allocations.
const MAX_EXPONENT: i64 = 1_000_000;

/// Whether an exponent or scale is within [`MAX_EXPONENT`] either way (no `abs`: `i64::MIN`
/// has none).
fn within_exponent(e: i64) -> bool {
    (-MAX_EXPONENT..=MAX_EXPONENT).contains(&e)
}

/// The decimal exponent of `d`'s most significant digit (`|d|` is in `[10^m, 10^(m+1))`);
/// `None` for zero. Cheap: it writes out no digits.
fn magnitude(d: &BigDecimal) -> Option<i64> {
    if d.is_zero() {
        return None;
    }
    let (_, scale) = d.as_bigint_and_scale();
    Some(d.digits() as i64 - 1 - scale)
}

/// How many digits apart two numbers' digits may be before an operation stops writing out the
/// digits between them (below it, the exact operation is cheap and is what runs).
const WRITE_OUT_DIGITS: i64 = 1000;

/// `a + b` with 34 significant digits, as `from_big(a + b)` rounds it, without writing out the
/// digits between operands of very different magnitudes (`10 ** 999999 + 0.1 ** 999999` would
/// be two million digits, seconds of work, only to be rounded away). An operand wholly below
/// the last digit the rounded sum can keep only decides which way the other rounds, so it is
/// replaced by a single digit just below that point: both sums lie between the same two
/// neighbouring multiples of a tenth of that digit, with no rounding midpoint or power of ten
/// between them, so they round alike in every mode (Java's `BigDecimal.add` with a
/// `MathContext` makes the same substitution).
fn sum(a: &BigDecimal, b: &BigDecimal) -> Option<Number> {
    // (a zero operand costs nothing: `bigdecimal` adds it without widening the other)
    let (ma, mb) = match (magnitude(a), magnitude(b)) {
        (Some(ma), Some(mb)) if (ma - mb).abs() > WRITE_OUT_DIGITS => (ma, mb),
        _ => return Number::from_big(a + b),
    };
    let (big, small, m_big, m_small) = if ma >= mb { (a, b, ma, mb) } else { (b, a, mb, ma) };
    // the finest digit the rounded sum can keep: the big operand's last one, or its 35th
    // significant one (the sum may have one digit fewer than it)
    let keep = big.as_bigint_and_scale().1.max(PRECISION as i64 - m_big);
    if m_small.saturating_add(keep).saturating_add(3) <= 0 {
        let sticky = BigDecimal::new(if small.is_negative() { -BigInt::one() } else { BigInt::one() }, keep + 3);
        return Number::from_big(big + sticky);
    }
    Number::from_big(a + b)
}

/// `d` written with `scale` fractional digits (at least its own) and then rounded as
/// [`Number::from_big`] rounds: `from_big(d.with_scale(scale))`, without writing out the zeros
/// that the rounding drops again (`decimal(10 ** 999999, 999999)` would be two million digits).
fn widened(d: &BigDecimal, scale: i64) -> Option<Number> {
    let (int, own) = d.as_bigint_and_scale();
    if scale - own <= WRITE_OUT_DIGITS || int.is_zero() {
        return Number::from_big(d.with_scale(scale));
    }
    let digits = d.digits() as i64;
    // the widened number has more than 34 digits, so it is rounded: to `d`'s own value with
    // exactly 34 digits (zeros appended), or `d` rounded when it has more
    if digits >= PRECISION as i64 {
        return Number::from_big(d.clone());
    }
    let pad = PRECISION as i64 - digits;
    Number::from_big(BigDecimal::new(int.into_owned() * BigInt::from(10u8).pow(pad as u32), own + pad))
}

/// `a - b * floor(a / b)` (the sign of `b`; `b` not zero), exactly, for an `a` far larger than
/// `b`: on a common scale `s` both are whole multiples of `10^-s`, and `a`'s multiple is its
/// digits times a power of ten, whose remainder modular exponentiation gives without writing
/// the power out.
fn remainder_of_a_long_quotient(a: &BigDecimal, b: &BigDecimal) -> Option<Number> {
    let (a_int, a_scale) = a.as_bigint_and_scale();
    let (b_int, b_scale) = b.as_bigint_and_scale();
    let scale = a_scale.max(b_scale);
    let ten = BigInt::from(10u8);
    // `b`'s scale is at least minus its magnitude, and `a`'s at most its digit count: the
    // power is bounded by the digits the two are written with
    let widen = u32::try_from(scale - b_scale).ok()?;
    let modulus = (b_int.as_ref() * ten.pow(widen)).abs();
    let floor_rem = |x: BigInt| {
        let r = x % &modulus;
        if r.is_negative() {
            r + &modulus
        } else {
            r
        }
    };
    let power = ten.modpow(&BigInt::from(scale - a_scale), &modulus);
    let r = floor_rem(floor_rem(a_int.into_owned()) * power);
    let r = if b.is_negative() && !r.is_zero() { r - &modulus } else { r };
    Number::from_big(BigDecimal::new(r, scale))
}

/// A FEEL number: a decimal with at most 34 significant digits.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Number(BigDecimal);

fn context(prec: u64) -> bigdecimal::Context {
    bigdecimal::Context::new(NonZeroU64::new(prec).expect("non-zero precision"), RoundingMode::HalfEven)
}

impl Number {
    /// Wraps a decimal, rounding it to 34 significant digits; `None` when its exponent is
    /// absurdly large or small.
    fn from_big(d: BigDecimal) -> Option<Number> {
        let d = if d.digits() > PRECISION { context(PRECISION).round_decimal(d) } else { d };
        let (int, scale) = d.as_bigint_and_exponent();
        if int.is_zero() {
            // a zero keeps its scale (`0.0 * 2` is `0.0` in Java), within bounds
            return Some(Number(if within_exponent(scale) { d } else { BigDecimal::zero() }));
        }
        let exp = int.to_string().trim_start_matches('-').len() as i64 - scale;
        if !within_exponent(exp) {
            return None;
        }
        Some(Number(d))
    }

    /// Parses a number literal of an expression exactly, without rounding to 34 digits (as
    /// feel-scala keeps literals; operations round their results).
    pub(crate) fn parse_literal(s: &str) -> Option<Number> {
        if s.len() > 10_000 || !s.chars().all(|c| c.is_ascii_digit() || c == '.') {
            return Number::parse(s);
        }
        let d = BigDecimal::from_str(s).ok()?;
        if d.is_zero() {
            return Number::from_big(d);
        }
        Some(Number(d))
    }

    /// Zero.
    pub fn zero() -> Number {
        Number(BigDecimal::zero())
    }

    /// Parses a decimal literal such as `12`, `-1.5`, `.5` or `1e3`.
    pub fn parse(s: &str) -> Option<Number> {
        let s = s.trim();
        if s.is_empty() || s.len() > 10_000 {
            return None;
        }
        // Bigdecimal accepts a few forms FEEL does not (e.g. "+1"); keep to digits, sign, point, exponent.
        if !s.chars().all(|c| c.is_ascii_digit() || matches!(c, '.' | '-' | '+' | 'e' | 'E')) {
            return None;
        }
        if !s.chars().any(|c| c.is_ascii_digit()) {
            return None;
        }
        // Guard against exponents bigdecimal cannot handle.
        if let Some(pos) = s.find(['e', 'E']) {
            let e = &s[pos + 1..];
            let e = e.strip_prefix('+').unwrap_or(e);
            match e.parse::<i64>() {
                Ok(v) if within_exponent(v) => {}
                _ => return None,
            }
        }
        BigDecimal::from_str(s).ok().and_then(Number::from_big)
    }

    /// Converts a float; `None` for NaN and infinities.
    pub fn from_f64(f: f64) -> Option<Number> {
        if !f.is_finite() {
            return None;
        }
        // as Java's BigDecimal.valueOf(double): the decimal of Double.toString (its shortest
        // round-trip digits, as Rust prints them), scale included: 2.0 is `2.0`, 1e-7 `1.0E-7`,
        // 0.0 and -0.0 `0.0` (seen only in `to_java_string`)
        if f == 0.0 {
            return Some(Number(BigDecimal::new(BigInt::zero(), 1)));
        }
        let abs = f.abs();
        if (1e-3..1e7).contains(&abs) {
            return Number::parse(&format!("{f:?}"));
        }
        let sci = format!("{f:e}");
        let (mantissa, exp) = sci.split_once('e')?;
        let mantissa = if mantissa.contains('.') { mantissa.to_string() } else { format!("{mantissa}.0") };
        Number::parse(&format!("{mantissa}E{exp}"))
    }

    /// The nearest float.
    pub fn to_f64(&self) -> f64 {
        let (int, scale) = self.0.as_bigint_and_exponent();
        format!("{int}e{}", -scale).parse().unwrap_or(f64::NAN)
    }

    /// The value as an `i64` when it is a whole number that fits.
    pub fn to_i64(&self) -> Option<i64> {
        // past 19 digits nothing fits (and converting would write out every digit)
        if magnitude(&self.0).is_some_and(|m| m > 18) {
            return None;
        }
        if self.is_integer() {
            self.0.to_i64()
        } else {
            None
        }
    }

    /// The low 64 bits of the whole number, as Java's `BigDecimal.longValue()` gives them for a
    /// whole number out of `long`'s range (`2 ** 64` → 0, `10 ** 20` → 7766279631452241920).
    /// `None` when the value has a fractional part.
    pub fn wrapping_i64(&self) -> Option<i64> {
        if !self.is_integer() {
            return None;
        }
        if let Some(i) = self.0.to_i64() {
            return Some(i);
        }
        let (int, scale) = self.0.as_bigint_and_exponent();
        let whole = if scale >= 0 {
            int / BigInt::from(10u8).pow(scale as u32)
        } else if scale <= -64 {
            // a multiple of 10^64 = 2^64 · 5^64: its low 64 bits are zero
            return Some(0);
        } else {
            int * BigInt::from(10u8).pow((-scale) as u32)
        };
        // two's complement, little endian, sign-extended to at least 8 bytes
        let bytes = whole.to_signed_bytes_le();
        let fill = if whole.sign() == Sign::Minus { 0xff } else { 0 };
        let mut low = [fill; 8];
        for (i, b) in bytes.iter().take(8).enumerate() {
            low[i] = *b;
        }
        Some(i64::from_le_bytes(low))
    }

    /// The value truncated toward zero as an `i64` (saturating), like Java's `intValue` but wider.
    pub fn trunc_i64(&self) -> i64 {
        match magnitude(&self.0) {
            None => return 0,
            Some(m) if m < 0 => return 0,
            Some(m) if m > 18 => return if self.is_negative() { i64::MIN } else { i64::MAX },
            Some(_) => {}
        }
        let t = self.0.with_scale_round(0, RoundingMode::Down);
        t.to_i64().unwrap_or(if t.is_negative() { i64::MIN } else { i64::MAX })
    }

    /// Whether the value has no fractional part.
    pub fn is_integer(&self) -> bool {
        let (int, scale) = self.0.as_bigint_and_scale();
        // a non-zero whole number has at least as many digits as trailing zeros: this spares
        // writing out 10^scale for a number such as `0.1 ** 999999`
        if scale > 0 && !int.is_zero() && scale as u64 >= self.0.digits() {
            return false;
        }
        self.0.is_integer()
    }

    pub fn is_zero(&self) -> bool {
        self.0.is_zero()
    }

    pub fn is_negative(&self) -> bool {
        self.0.is_negative()
    }

    pub fn is_positive(&self) -> bool {
        self.0.is_positive()
    }

    pub fn add(&self, other: &Number) -> Option<Number> {
        sum(&self.0, &other.0)
    }

    pub fn sub(&self, other: &Number) -> Option<Number> {
        sum(&self.0, &-other.0.clone())
    }

    pub fn mul(&self, other: &Number) -> Option<Number> {
        Number::from_big(&self.0 * &other.0)
    }

    /// Division; `None` when dividing by zero.
    pub fn div(&self, other: &Number) -> Option<Number> {
        if other.0.is_zero() {
            return None;
        }
        let q = context(PRECISION + 6).round_decimal(&self.0 / &other.0);
        let q = Number::from_big(q)?;
        // as Java's BigDecimal.divide(divisor, DECIMAL128): an exact quotient keeps no more
        // trailing zeros than the preferred scale (the dividend's minus the divisor's) needs,
        // `10 / 4` is 2.5 and `10.00 / 4` 2.50 (seen only in `to_java_string`)
        if &q.0 * &other.0 == self.0 {
            let preferred = self.0.as_bigint_and_exponent().1 - other.0.as_bigint_and_exponent().1;
            let (mut int, mut scale) = q.0.as_bigint_and_exponent();
            let ten = BigInt::from(10);
            while scale > preferred && !int.is_zero() && (&int % &ten).is_zero() {
                int /= &ten;
                scale -= 1;
            }
            return Some(Number(BigDecimal::new(int, scale)));
        }
        Some(q)
    }

    /// Remainder with the sign of the divisor, as FEEL's `modulo`: `a - b * floor(a / b)`.
    pub fn modulo(&self, other: &Number) -> Option<Number> {
        if other.0.is_zero() {
            return None;
        }
        // whole numbers stored with scale 0 that fit in i64: the same result (scale 0 too)
        // without a decimal division
        if self.0.fractional_digit_count() == 0 && other.0.fractional_digit_count() == 0 {
            if let (Some(a), Some(b)) = (self.0.to_i64(), other.0.to_i64()) {
                if let Some(r) = a.checked_rem(b) {
                    return Some(Number::from(if r != 0 && (r < 0) != (b < 0) { r + b } else { r }));
                }
            }
        }
        // a quotient of more digits than the division below keeps (100) would be floored
        // wrong, and one of a million would be written out whole (seconds for
        // `modulo(10 ** 999999, 3)`): the remainder is computed without the quotient
        if let (Some(ma), Some(mb)) = (magnitude(&self.0), magnitude(&other.0)) {
            if ma - mb > 60 {
                return remainder_of_a_long_quotient(&self.0, &other.0);
            }
        }
        let q = (&self.0 / &other.0).with_scale_round(0, RoundingMode::Floor);
        Number::from_big(&self.0 - &other.0 * q)
    }

    pub fn neg(&self) -> Number {
        Number(-self.0.clone())
    }

    pub fn abs(&self) -> Number {
        Number(self.0.abs())
    }

    /// `self ** exp`: exact-ish decimal power for whole exponents (like Java's
    /// `BigDecimal.pow(n, DECIMAL128)`), a float power otherwise.
    pub fn pow(&self, exp: &Number) -> Option<Number> {
        if exp.is_integer() {
            let n = exp.0.to_i64()?;
            if n.unsigned_abs() > 999_999_999 {
                return None;
            }
            if n == 0 {
                return Some(Number(BigDecimal::one()));
            }
            if self.0.is_zero() {
                return if n < 0 { None } else { Some(Number::zero()) };
            }
            let ctx = context(PRECISION + 10);
            let mut result = BigDecimal::one();
            let mut base = self.0.clone();
            let mut e = n.unsigned_abs();
            while e > 0 {
                if e & 1 == 1 {
                    result = ctx.round_decimal(&result * &base);
                    Number::from_big(result.clone())?;
                }
                e >>= 1;
                if e > 0 {
                    base = ctx.round_decimal(&base * &base);
                    Number::from_big(base.clone())?;
                }
            }
            if n < 0 {
                let q = context(PRECISION + 6).round_decimal(BigDecimal::one() / result);
                Number::from_big(q)
            } else {
                Number::from_big(result)
            }
        } else {
            Number::from_f64(self.to_f64().powf(exp.to_f64()))
        }
    }

    /// Rounds to `scale` fractional digits with the given mode (negative scales round to tens,
    /// hundreds, ...).
    pub fn round(&self, scale: i64, mode: RoundMode) -> Option<Number> {
        if !within_exponent(scale) {
            return None;
        }
        let mode = match mode {
            RoundMode::Up => RoundingMode::Up,
            RoundMode::Down => RoundingMode::Down,
            RoundMode::HalfUp => RoundingMode::HalfUp,
            RoundMode::HalfDown => RoundingMode::HalfDown,
            RoundMode::HalfEven => RoundingMode::HalfEven,
            RoundMode::Floor => RoundingMode::Floor,
            RoundMode::Ceiling => RoundingMode::Ceiling,
        };
        if scale - self.0.as_bigint_and_scale().1 > WRITE_OUT_DIGITS {
            // only zeros are appended: nothing to round
            return widened(&self.0, scale);
        }
        Number::from_big(self.0.with_scale_round(scale, mode))
    }

    /// Square root (34 digits); `None` for negative numbers.
    pub fn sqrt(&self) -> Option<Number> {
        let r = self.0.sqrt_with_context(&context(PRECISION))?;
        Number::from_big(r)
    }

    /// e^self (34 digits).
    pub fn exp(&self) -> Option<Number> {
        if self.to_f64().abs() > 100_000.0 {
            return if self.is_negative() { Some(Number::zero()) } else { None };
        }
        Number::from_big(self.0.exp_with_context(&context(PRECISION)))
    }

    /// The number of digits after the decimal point (without trailing zeros).
    pub fn scale(&self) -> i64 {
        let (_, scale) = self.0.normalized().as_bigint_and_exponent();
        scale
    }

    /// Compares numerically.
    pub fn compare(&self, other: &Number) -> Ordering {
        self.0.cmp(&other.0)
    }

    /// The text Java's `BigDecimal.toString()` gives for this number, as feel-scala's values
    /// print in messages (dmn-scala's "multiple values aren't allowed ... found: ..."): the
    /// scale kept as written or computed (`4.90`, `1.0`), scientific notation when the scale is
    /// negative or the number is below 10^-6 (`1E+3`, `1.5E-7`).
    pub fn to_java_string(&self) -> String {
        let (int, scale) = self.0.as_bigint_and_exponent();
        let digits = int.magnitude().to_string();
        let adjusted = (digits.len() as i64 - 1) - scale;
        if scale >= 0 && adjusted >= -6 {
            return plain(&int, scale);
        }
        let mut out = String::new();
        if int.sign() == Sign::Minus {
            out.push('-');
        }
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        out.push('E');
        if adjusted >= 0 {
            out.push('+');
        }
        out.push_str(&adjusted.to_string());
        out
    }

    /// Plain (non-scientific) notation without trailing zeros, e.g. `3`, `2.5`, `-0.001`.
    pub fn to_plain_string(&self) -> String {
        let (int, scale) = self.0.normalized().as_bigint_and_exponent();
        plain(&int, scale)
    }
}

fn plain(int: &BigInt, scale: i64) -> String {
    let negative = int.sign() == Sign::Minus;
    let digits = int.magnitude().to_string();
    let mut out = String::new();
    if negative {
        out.push('-');
    }
    if scale <= 0 {
        out.push_str(&digits);
        if digits != "0" {
            for _ in 0..(-scale) {
                out.push('0');
            }
        }
    } else {
        let scale = scale as usize;
        if digits.len() > scale {
            let (a, b) = digits.split_at(digits.len() - scale);
            out.push_str(a);
            out.push('.');
            out.push_str(b);
        } else {
            out.push_str("0.");
            for _ in 0..(scale - digits.len()) {
                out.push('0');
            }
            out.push_str(&digits);
        }
    }
    out
}

/// Rounding modes for [`Number::round`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RoundMode {
    Up,
    Down,
    HalfUp,
    HalfDown,
    HalfEven,
    Floor,
    Ceiling,
}

impl fmt::Display for Number {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_plain_string())
    }
}

impl fmt::Debug for Number {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Number({})", self.to_plain_string())
    }
}

impl From<i64> for Number {
    fn from(v: i64) -> Self {
        Number(BigDecimal::from(v))
    }
}

impl From<i32> for Number {
    fn from(v: i32) -> Self {
        Number(BigDecimal::from(v))
    }
}

impl From<u32> for Number {
    fn from(v: u32) -> Self {
        Number(BigDecimal::from(v))
    }
}

impl From<usize> for Number {
    fn from(v: usize) -> Self {
        Number(BigDecimal::from(v as u64))
    }
}

impl From<u64> for Number {
    fn from(v: u64) -> Self {
        Number(BigDecimal::from(v))
    }
}

impl FromStr for Number {
    type Err = ();
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Number::parse(s).ok_or(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(s: &str) -> Number {
        Number::parse(s).unwrap()
    }

    /// The exact operation, rounded as every result is: what the cheap paths must equal.
    fn exact(d: BigDecimal) -> (BigInt, i64) {
        Number::from_big(d).unwrap().0.as_bigint_and_exponent()
    }

    fn repr(n: Option<Number>) -> (BigInt, i64) {
        n.unwrap().0.as_bigint_and_exponent()
    }

    /// Sums whose smaller operand lies wholly below the rounded sum's last digit are computed
    /// with a single digit in its place: digit for digit the exact sum rounded, in both signs,
    /// across the point where the substitution starts, and for ties broken by that operand.
    #[test]
    fn sums_of_far_apart_operands_round_as_the_exact_sum() {
        let bigs = [
            "1",
            "9.999999999999999999999999999999999",
            "1000000000000000000000000000000000",
            "12345678901234567890123456789012345", // 35 digits: rounded on its own
            "12345678901234567890123456789012345000000",
            "1.5E+40",
            "-7.25",
            "1990999999999999999999999999999999999999999",
        ];
        let lit = |s: &str| Number::parse_literal(s).or_else(|| Number::parse(s)).unwrap().0;
        for big in bigs {
            let big = lit(big);
            let m = magnitude(&big).unwrap();
            for gap in (995..1060).chain([1500, 3000]) {
                for small in [BigDecimal::new(BigInt::from(5), gap - m), BigDecimal::new(BigInt::from(123_457), gap - m + 5)] {
                    for small in [small.clone(), -small] {
                        let cheap = repr(sum(&big, &small));
                        assert_eq!(cheap, exact(&big + &small), "{big} + {small}");
                        assert_eq!(repr(sum(&small, &big)), cheap, "{small} + {big}");
                    }
                }
            }
        }
    }

    /// Rounding to more fractional digits than a number has appends zeros: the same digits as
    /// writing them out and rounding back to 34.
    #[test]
    fn rounding_to_a_finer_scale_equals_writing_the_zeros_out() {
        for d in ["1", "-1.5", "1E+40", "123456789012345678901234567890123", "12345678901234567890123456789012345678"] {
            let number = Number::parse_literal(d).or_else(|| Number::parse(d)).unwrap();
            for scale in [0, 5, 35, 990, 1001, 1010, 1100, 2500] {
                let exact_form = exact(number.0.with_scale_round(scale, RoundingMode::HalfEven));
                if scale > number.0.as_bigint_and_scale().1 {
                    assert_eq!(repr(widened(&number.0, scale)), exact_form, "{d} to scale {scale}");
                }
                assert_eq!(repr(number.round(scale, RoundMode::HalfEven)), exact_form, "{d} to scale {scale}");
            }
        }
    }

    /// A remainder whose quotient has more than 60 digits is exact, as the division written
    /// out to enough digits gives it, in every combination of signs.
    #[test]
    fn remainders_of_huge_quotients_are_exact() {
        // the division written out: both on a common scale as whole numbers, floor division
        let written_out = |a: &BigDecimal, b: &BigDecimal| {
            let ((ai, sa), (bi, sb)) = (a.as_bigint_and_exponent(), b.as_bigint_and_exponent());
            let s = sa.max(sb);
            let ten = BigInt::from(10u8);
            let (aw, bw) = (ai * ten.pow((s - sa) as u32), bi * ten.pow((s - sb) as u32));
            let mut q = &aw / &bw;
            if !(&aw % &bw).is_zero() && (aw.is_negative() != bw.is_negative()) {
                q -= 1;
            }
            BigDecimal::new(&aw - &bw * q, s)
        };
        for (a, b) in [
            ("1E+70", "3"),
            ("123456789E+80", "0.7"),
            ("1E+1005", "3"),
            ("1.5E+1010", "0.7"),
            ("123456789E+1200", "97"),
            ("1E+1500", "0.0003"),
            ("7E+1100", "12345678901234567890"),
        ] {
            let (a, b) = (n(a), n(b));
            for (a, b) in [(a.clone(), b.clone()), (a.neg(), b.clone()), (a.clone(), b.neg()), (a.neg(), b.neg())] {
                let expected = exact(written_out(&a.0, &b.0));
                assert_eq!(repr(a.modulo(&b)), expected, "{a} modulo {b}");
            }
        }
        assert_eq!(n("1E+999999").modulo(&n("3")).unwrap().to_string(), "1");
        assert_eq!(n("-1E+999999").modulo(&n("3")).unwrap().to_string(), "2");
        assert_eq!(n("1E+999999").modulo(&n("-3")).unwrap().to_string(), "-2");
    }

    #[test]
    fn display() {
        assert_eq!(n("3").to_string(), "3");
        assert_eq!(n("2.50").to_string(), "2.5");
        assert_eq!(n("-0.001").to_string(), "-0.001");
        assert_eq!(n("1e3").to_string(), "1000");
        assert_eq!(n("100").to_string(), "100");
        assert_eq!(n(".5").to_string(), "0.5");
        assert_eq!(Number::from_f64(0.1).unwrap().to_string(), "0.1");
    }

    #[test]
    fn java_string() {
        // java.math.BigDecimal#toString of the same unscaled value and scale
        let lit = |s: &str| Number::parse_literal(s).unwrap().to_java_string();
        assert_eq!(lit("4.90"), "4.90");
        assert_eq!(lit("1.0"), "1.0");
        assert_eq!(lit("12"), "12");
        assert_eq!(lit("0.000001"), "0.000001");
        assert_eq!(lit("0.0000001"), "1E-7");
        assert_eq!(lit("0.00000015"), "1.5E-7");
        assert_eq!(n("1e3").to_java_string(), n("1e3").to_java_string());
        assert_eq!(Number(BigDecimal::new(BigInt::from(1), -3)).to_java_string(), "1E+3");
        assert_eq!(Number(BigDecimal::new(BigInt::from(-125), -2)).to_java_string(), "-1.25E+4");
        assert_eq!(n("-2.5").to_java_string(), "-2.5");
        // quotients as Java's BigDecimal.divide(divisor, DECIMAL128) scales them
        let div = |a: &str, b: &str| Number::parse_literal(a).unwrap().div(&Number::parse_literal(b).unwrap()).unwrap().to_java_string();
        assert_eq!(div("10", "4"), "2.5");
        assert_eq!(div("3", "4"), "0.75");
        assert_eq!(div("10.00", "4"), "2.50");
        assert_eq!(div("10", "5"), "2");
        assert_eq!(div("1", "3"), "0.3333333333333333333333333333333333");
        // floats as Java's BigDecimal.valueOf(double) reads them
        let float = |f: f64| Number::from_f64(f).unwrap().to_java_string();
        assert_eq!(float(2.0), "2.0");
        assert_eq!(float(0.1), "0.1");
        assert_eq!(float(1e-7), "1.0E-7");
        assert_eq!(float(-2.5e-5), "-0.000025");
        assert_eq!(float(1.5e10), "1.5E+10");
        assert_eq!(float(1e7), "1.0E+7");
        assert_eq!(float(9999999.0), "9999999.0");
        assert_eq!(float(-0.0), "0.0");
        assert_eq!(Number::from_f64(0.0).unwrap().mul(&n("2")).unwrap().to_java_string(), "0.0");
        assert_eq!(Number::parse_literal("0.00").unwrap().to_java_string(), "0.00");
        assert_eq!(Number::from_f64(-0.0).unwrap().to_string(), "0");
    }

    #[test]
    fn arithmetic_34_digits() {
        assert_eq!(n("1").div(&n("3")).unwrap().to_string(), "0.3333333333333333333333333333333333");
        assert_eq!(n("2").div(&n("3")).unwrap().to_string(), "0.6666666666666666666666666666666667");
        assert_eq!(n("0.1").add(&n("0.2")).unwrap().to_string(), "0.3");
        assert!(n("1").div(&n("0")).is_none());
        assert_eq!(n("2").pow(&n("10")).unwrap().to_string(), "1024");
        assert_eq!(n("2").pow(&n("-2")).unwrap().to_string(), "0.25");
        assert_eq!(n("4").pow(&n("0.5")).unwrap().to_string(), "2");
        assert_eq!(n("-7").modulo(&n("4")).unwrap().to_string(), "1");
        assert_eq!(n("7").modulo(&n("-4")).unwrap().to_string(), "-1");
    }

    #[test]
    fn conversions() {
        assert_eq!(n("12").to_i64(), Some(12));
        assert_eq!(n("12.5").to_i64(), None);
        assert_eq!(n("12.5").trunc_i64(), 12);
        assert_eq!(n("-12.5").trunc_i64(), -12);
        assert_eq!(n("1.5").to_f64(), 1.5);
        assert!(Number::parse("abc").is_none());
        assert!(Number::parse("1e99999999999").is_none());
        assert_eq!(n("1.0"), n("1"));
    }
}
