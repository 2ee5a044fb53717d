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
        let t = self.0.with_scale_round(0, RoundingMode::Down);
        t.to_i64().unwrap_or(if t.is_negative() { i64::MIN } else { i64::MAX })
    }

    /// Whether the value has no fractional part.
    pub fn is_integer(&self) -> bool {
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
        Number::from_big(&self.0 + &other.0)
    }

    pub fn sub(&self, other: &Number) -> Option<Number> {
        Number::from_big(&self.0 - &other.0)
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
