//! Temporal values: dates, times, date-times (local or with an offset / zone id) and the two
//! kinds of durations, with feel-scala's (java.time's) arithmetic.

use std::cmp::Ordering;
use std::fmt;

use chrono::{Datelike, FixedOffset, Months, NaiveDate, NaiveDateTime, NaiveTime, Offset, TimeDelta, TimeZone, Timelike};
use chrono_tz::Tz;

use crate::ast::ArithOp;
use crate::number::Number;
use crate::value::Value;

const NANOS_PER_SEC: i128 = 1_000_000_000;

/// A time zone: a fixed offset (`+01:00`, `Z`) or an IANA zone id (`Europe/Berlin`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Zone {
    Offset(FixedOffset),
    Id(Tz),
}

impl Zone {
    fn parse(s: &str) -> Option<Zone> {
        if s == "Z" {
            return FixedOffset::east_opt(0).map(Zone::Offset);
        }
        if let Some(id) = s.strip_prefix('@').or_else(|| s.strip_prefix('[').and_then(|x| x.strip_suffix(']'))) {
            return Zone::parse_id(id);
        }
        parse_offset(s).map(Zone::Offset)
    }

    /// A zone id or an offset given as a string (`"Europe/Berlin"`, `"+01:00"`, `"Z"`, `"UTC"`).
    pub(crate) fn parse_id(id: &str) -> Option<Zone> {
        if id == "Z" {
            return FixedOffset::east_opt(0).map(Zone::Offset);
        }
        if id.starts_with('+') || id.starts_with('-') {
            return parse_offset(id).map(Zone::Offset);
        }
        id.parse::<Tz>().ok().map(Zone::Id)
    }

    /// The offset this zone has at a local date-time.
    pub(crate) fn offset_at_local(&self, local: &NaiveDateTime) -> FixedOffset {
        match self {
            Zone::Offset(o) => *o,
            Zone::Id(tz) => match tz.offset_from_local_datetime(local).earliest() {
                Some(o) => o.fix(),
                // in a gap (DST start): use the offset before the gap, as java.time does
                None => tz.offset_from_utc_datetime(&(*local - TimeDelta::hours(3))).fix(),
            },
        }
    }

    fn offset_at_utc(&self, utc: &NaiveDateTime) -> FixedOffset {
        match self {
            Zone::Offset(o) => *o,
            Zone::Id(tz) => tz.offset_from_utc_datetime(utc).fix(),
        }
    }
}

fn parse_offset(s: &str) -> Option<FixedOffset> {
    let (sign, rest) = match s.as_bytes().first()? {
        b'+' => (1, &s[1..]),
        b'-' => (-1, &s[1..]),
        _ => return None,
    };
    // digits and ':' only: splitting at a byte offset below is then on a char boundary (fuzzing
    // found `"-0€"`, four bytes, split inside the '€')
    if !rest.is_ascii() {
        return None;
    }
    let (h, m) = match rest.split_once(':') {
        Some((h, m)) => (h, m),
        None if rest.len() == 4 => rest.split_at(2),
        None if rest.len() <= 2 => (rest, "0"),
        None => return None,
    };
    if !h.chars().all(|c| c.is_ascii_digit()) || !m.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    // checked: fuzzing found `-711100:00`, whose hours overflowed i32 seconds
    let secs = h.parse::<i32>().ok()?.checked_mul(3600)?.checked_add(m.parse::<i32>().ok()?.checked_mul(60)?)?;
    if secs > 18 * 3600 {
        return None;
    }
    FixedOffset::east_opt(sign * secs)
}

pub(crate) fn fmt_offset(o: &FixedOffset) -> String {
    let secs = o.local_minus_utc();
    if secs == 0 {
        return "Z".into();
    }
    let sign = if secs < 0 { '-' } else { '+' };
    let a = secs.abs();
    if a % 60 != 0 {
        format!("{sign}{:02}:{:02}:{:02}", a / 3600, (a / 60) % 60, a % 60)
    } else {
        format!("{sign}{:02}:{:02}", a / 3600, (a / 60) % 60)
    }
}

fn fmt_zone(z: &Zone) -> String {
    match z {
        Zone::Offset(o) => fmt_offset(o),
        Zone::Id(tz) => format!("@{}", tz.name()),
    }
}

fn fmt_time(t: &NaiveTime) -> String {
    let mut s = format!("{:02}:{:02}:{:02}", t.hour(), t.minute(), t.second());
    let nanos = t.nanosecond() % 1_000_000_000;
    if nanos != 0 {
        let frac = format!("{nanos:09}");
        s.push('.');
        s.push_str(frac.trim_end_matches('0'));
    }
    s
}

/// A calendar date without time or zone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Date(pub(crate) NaiveDate);

/// A time of day, local or with a zone.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Time {
    pub(crate) time: NaiveTime,
    pub(crate) zone: Option<Zone>,
}

/// A date and time, local or with a zone.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DateTime {
    pub(crate) local: NaiveDateTime,
    pub(crate) zone: Option<Zone>,
}

/// A duration in years and months (`P1Y2M`), held as total months.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct YearMonthDuration(pub(crate) i64);

/// A duration in days and time (`P1DT2H`), held as nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct DayTimeDuration(pub(crate) i128);

impl Date {
    pub fn parse(s: &str) -> Option<Date> {
        parse_date(s).map(Date)
    }
    pub fn year(&self) -> i32 {
        self.0.year()
    }
    pub fn month(&self) -> u32 {
        self.0.month()
    }
    pub fn day(&self) -> u32 {
        self.0.day()
    }
}

impl DateTime {
    /// Parses `2024-01-02T10:00:00`, with an optional `Z`, offset or `@Zone/Id`.
    pub fn parse(s: &str) -> Option<DateTime> {
        let (d, t) = s.split_once('T')?;
        // no `[Zone/Id]` suffix and no 24:00 in date-time strings (java.time rejects them)
        if t.contains('[') || t.starts_with("24") {
            return None;
        }
        let date = parse_date(d)?;
        let (time, zone) = parse_time_zone(t)?;
        let mut local = date.and_time(time);
        // a local time in a gap (DST start) moves forward by the length of the gap, as in java.time
        if let Some(Zone::Id(tz)) = zone {
            if tz.offset_from_local_datetime(&local).earliest().is_none() {
                let before = tz.offset_from_utc_datetime(&(local - TimeDelta::hours(6))).fix().local_minus_utc();
                let after = tz.offset_from_utc_datetime(&(local + TimeDelta::hours(6))).fix().local_minus_utc();
                local += TimeDelta::seconds(i64::from(after - before));
            }
        }
        Some(DateTime { local, zone })
    }

    /// The instant (as UTC date-time) of a zoned date-time.
    fn utc(&self) -> Option<NaiveDateTime> {
        let zone = self.zone?;
        let off = zone.offset_at_local(&self.local);
        Some(self.local - TimeDelta::seconds(i64::from(off.local_minus_utc())))
    }

    fn from_utc(utc: NaiveDateTime, zone: Zone) -> DateTime {
        let off = zone.offset_at_utc(&utc);
        DateTime { local: utc + TimeDelta::seconds(i64::from(off.local_minus_utc())), zone: Some(zone) }
    }

    /// Milliseconds since the epoch as a UTC date-time.
    pub fn from_epoch_millis(millis: i64) -> Option<DateTime> {
        let utc = chrono::DateTime::from_timestamp_millis(millis)?.naive_utc();
        Some(DateTime { local: utc, zone: Some(Zone::Offset(FixedOffset::east_opt(0)?)) })
    }

    /// Milliseconds since the epoch, for zoned date-times.
    pub fn epoch_millis(&self) -> Option<i64> {
        Some(self.utc()?.and_utc().timestamp_millis())
    }
}

impl DateTime {
    /// The text feel-scala's `string()` gives: a zone id after `@` instead of offset and `[id]`.
    pub(crate) fn feel_string(&self) -> String {
        match &self.zone {
            Some(Zone::Id(tz)) => format!("{}T{}@{}", Date(self.local.date()), fmt_time(&self.local.time()), tz.name()),
            _ => self.to_string(),
        }
    }
}

impl Time {
    pub fn parse(s: &str) -> Option<Time> {
        let s = s.strip_prefix('T').unwrap_or(s);
        let (time, zone) = parse_time_zone(s)?;
        Some(Time { time, zone })
    }

    /// Seconds since midnight normalised to UTC (for zoned times).
    fn utc_nanos(&self) -> i128 {
        let local = i128::from(self.time.num_seconds_from_midnight()) * NANOS_PER_SEC + i128::from(self.time.nanosecond() % 1_000_000_000);
        let off = match self.zone {
            Some(Zone::Offset(o)) => o.local_minus_utc(),
            Some(Zone::Id(tz)) => tz
                .offset_from_utc_datetime(&NaiveDate::from_ymd_opt(1970, 1, 1).unwrap_or_default().and_time(self.time))
                .fix()
                .local_minus_utc(),
            None => 0,
        };
        local - i128::from(off) * NANOS_PER_SEC
    }
}

impl YearMonthDuration {
    pub fn parse(s: &str) -> Option<YearMonthDuration> {
        let (neg, body) = duration_body(s)?;
        if body.contains('T') || body.contains('D') || body.is_empty() {
            return None;
        }
        let mut months: i64 = 0;
        let mut num = String::new();
        let mut last = ' ';
        for c in body.chars() {
            if c.is_ascii_digit() {
                num.push(c);
                continue;
            }
            let n: i64 = num.parse().ok()?;
            num.clear();
            match c {
                'Y' if last == ' ' => months = months.checked_add(n.checked_mul(12)?)?,
                'M' if last == ' ' || last == 'Y' => months = months.checked_add(n)?,
                _ => return None,
            }
            last = c;
        }
        if !num.is_empty() {
            return None;
        }
        Some(YearMonthDuration(if neg { -months } else { months }))
    }

    pub fn months(&self) -> i64 {
        self.0
    }
}

impl DayTimeDuration {
    pub fn parse(s: &str) -> Option<DayTimeDuration> {
        let (neg, body) = duration_body(s)?;
        if body.is_empty() {
            return None;
        }
        let (days, time) = match body.split_once('T') {
            Some((d, t)) => {
                if t.is_empty() {
                    return None;
                }
                (d, t)
            }
            None => (body, ""),
        };
        let mut total: i128 = 0;
        if !days.is_empty() {
            let d = days.strip_suffix('D')?;
            if d.is_empty() || !d.chars().all(|c| c.is_ascii_digit()) {
                return None;
            }
            total = d.parse::<i128>().ok()?.checked_mul(86_400 * NANOS_PER_SEC)?;
        }
        let mut num = String::new();
        let mut order = 0;
        for c in time.chars() {
            // java.time also takes negative components: PT-1H
            if c.is_ascii_digit() || c == '.' || (c == '-' && num.is_empty()) {
                num.push(c);
                continue;
            }
            if num.is_empty() {
                return None;
            }
            let (unit, rank) = match c {
                'H' => (3600 * NANOS_PER_SEC, 1),
                'M' => (60 * NANOS_PER_SEC, 2),
                'S' => (NANOS_PER_SEC, 3),
                _ => return None,
            };
            if rank <= order {
                return None;
            }
            order = rank;
            if c == 'S' {
                let n = Number::parse(&num)?;
                let nanos = n.mul(&Number::from(1_000_000_000i64))?.trunc_i64();
                total = total.checked_add(i128::from(nanos))?;
            } else {
                if num.contains('.') {
                    return None;
                }
                total = total.checked_add(num.parse::<i128>().ok()?.checked_mul(unit)?)?;
            }
            num.clear();
        }
        if !num.is_empty() {
            return None;
        }
        Some(DayTimeDuration(if neg { -total } else { total }))
    }

    pub fn from_millis(ms: i64) -> DayTimeDuration {
        DayTimeDuration(i128::from(ms) * 1_000_000)
    }

    pub(crate) fn from_seconds(secs: i128) -> DayTimeDuration {
        DayTimeDuration(secs * NANOS_PER_SEC)
    }

    pub fn nanos(&self) -> i128 {
        self.0
    }

    fn delta(&self) -> Option<TimeDelta> {
        let secs = i64::try_from(self.0.div_euclid(NANOS_PER_SEC)).ok()?;
        let nanos = self.0.rem_euclid(NANOS_PER_SEC) as u32;
        TimeDelta::new(secs, nanos)
    }

    fn from_delta(d: TimeDelta) -> DayTimeDuration {
        DayTimeDuration(i128::from(d.num_seconds()) * NANOS_PER_SEC + i128::from(d.subsec_nanos()))
    }
}

fn duration_body(s: &str) -> Option<(bool, &str)> {
    let (neg, rest) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    Some((neg, rest.strip_prefix('P')?))
}

fn parse_date(s: &str) -> Option<NaiveDate> {
    let (neg, body) = match s.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, s),
    };
    let mut parts = body.split('-');
    let (y, m, d) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || y.len() < 4 || m.len() != 2 || d.len() != 2 {
        return None;
    }
    if ![y, m, d].iter().all(|p| p.chars().all(|c| c.is_ascii_digit())) {
        return None;
    }
    let year: i32 = y.parse().ok()?;
    NaiveDate::from_ymd_opt(if neg { -year } else { year }, m.parse().ok()?, d.parse().ok()?)
}

fn parse_time_zone(s: &str) -> Option<(NaiveTime, Option<Zone>)> {
    // split the zone part: 'Z', '+..', '-..', '@..', '[..]'
    let idx = s.find(['Z', '+', '-', '@', '[']);
    let (t, z) = match idx {
        Some(i) => (&s[..i], Some(&s[i..])),
        None => (s, None),
    };
    let zone = match z {
        Some(z) => Some(Zone::parse(z)?),
        None => None,
    };
    Some((parse_time(t)?, zone))
}

fn parse_time(s: &str) -> Option<NaiveTime> {
    let mut parts = s.split(':');
    let h = parts.next()?;
    let m = parts.next()?;
    let sec = parts.next();
    if parts.next().is_some() || h.len() != 2 || m.len() != 2 {
        return None;
    }
    let digits = |p: &str| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit());
    if !digits(h) || !digits(m) {
        return None;
    }
    let (secs, nanos) = match sec {
        None => (0, 0),
        Some(sec) => {
            let (whole, frac) = match sec.split_once('.') {
                Some((w, f)) => (w, f),
                None => (sec, ""),
            };
            if whole.len() != 2 || !digits(whole) || (sec.contains('.') && !digits(frac)) || frac.len() > 9 {
                return None;
            }
            let nanos = if frac.is_empty() { 0 } else { format!("{frac:0<9}").parse().ok()? };
            (whole.parse().ok()?, nanos)
        }
    };
    let hour: u32 = h.parse().ok()?;
    if hour == 24 && m == "00" && secs == 0 && nanos == 0 {
        return NaiveTime::from_hms_opt(0, 0, 0);
    }
    NaiveTime::from_hms_nano_opt(hour, m.parse().ok()?, secs, nanos)
}

impl fmt::Display for Date {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // as java.time's LocalDate prints: -0001-01-01, +10000-01-01
        let y = self.0.year();
        if (0..=9999).contains(&y) {
            write!(f, "{y:04}-{:02}-{:02}", self.0.month(), self.0.day())
        } else if y < 0 {
            write!(f, "-{:04}-{:02}-{:02}", -y, self.0.month(), self.0.day())
        } else {
            write!(f, "+{y}-{:02}-{:02}", self.0.month(), self.0.day())
        }
    }
}

impl fmt::Display for Time {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&fmt_time(&self.time))?;
        if let Some(z) = &self.zone {
            f.write_str(&fmt_zone(z))?;
        }
        Ok(())
    }
}

impl fmt::Display for DateTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}T{}", Date(self.local.date()), fmt_time(&self.local.time()))?;
        match &self.zone {
            Some(Zone::Id(tz)) => {
                let off = Zone::Id(*tz).offset_at_local(&self.local);
                write!(f, "{}[{}]", fmt_offset(&off), tz.name())
            }
            Some(z) => f.write_str(&fmt_zone(z)),
            None => Ok(()),
        }
    }
}

impl fmt::Display for YearMonthDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = self.0;
        if m < 0 {
            f.write_str("-")?;
        }
        let a = m.unsigned_abs();
        let (y, mo) = (a / 12, a % 12);
        f.write_str("P")?;
        if y != 0 {
            write!(f, "{y}Y")?;
        }
        if mo != 0 || y == 0 {
            write!(f, "{mo}M")?;
        }
        Ok(())
    }
}

impl fmt::Display for DayTimeDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0;
        if n < 0 {
            f.write_str("-")?;
        }
        let a = n.unsigned_abs();
        let ns = NANOS_PER_SEC as u128;
        let total_secs = a / ns;
        let frac = a % ns;
        let (d, h, m, s) = (total_secs / 86_400, (total_secs / 3600) % 24, (total_secs / 60) % 60, total_secs % 60);
        f.write_str("P")?;
        if d != 0 {
            write!(f, "{d}D")?;
        }
        if h != 0 || m != 0 || s != 0 || frac != 0 || d == 0 {
            f.write_str("T")?;
            if h != 0 {
                write!(f, "{h}H")?;
            }
            if m != 0 {
                write!(f, "{m}M")?;
            }
            if s != 0 || frac != 0 || (h == 0 && m == 0) {
                write!(f, "{s}")?;
                if frac != 0 {
                    write!(f, ".{}", format!("{frac:09}").trim_end_matches('0'))?;
                }
                f.write_str("S")?;
            }
        }
        Ok(())
    }
}

// ---- operations used by the evaluator ----

/// Parses a temporal literal `@"..."`: date-time, date, time or duration.
pub(crate) fn literal(s: &str) -> Option<Value> {
    if s.contains('T') && !s.starts_with('P') && !s.starts_with("-P") {
        return DateTime::parse(s).map(Value::DateTime);
    }
    if let Some(d) = Date::parse(s) {
        return Some(Value::Date(d));
    }
    if let Some(t) = Time::parse(s) {
        return Some(Value::Time(t));
    }
    parse_duration(s)
}

pub(crate) fn parse_duration(s: &str) -> Option<Value> {
    YearMonthDuration::parse(s).map(Value::YearMonthDuration).or_else(|| DayTimeDuration::parse(s).map(Value::DayTimeDuration))
}

/// `date and time(from)`: a date-time, or a date at midnight.
pub(crate) fn parse_date_time(s: &str) -> Option<Value> {
    if let Some(d) = Date::parse(s) {
        return Some(Value::DateTime(DateTime { local: d.0.and_time(NaiveTime::MIN), zone: None }));
    }
    DateTime::parse(s).map(Value::DateTime)
}

pub(crate) fn is_temporal(v: &Value) -> bool {
    matches!(v, Value::Date(_) | Value::Time(_) | Value::DateTime(_) | Value::YearMonthDuration(_) | Value::DayTimeDuration(_))
}

pub(crate) fn compare(a: &Value, b: &Value) -> Option<Ordering> {
    match (a, b) {
        (Value::Date(x), Value::Date(y)) => Some(x.cmp(y)),
        (Value::Time(x), Value::Time(y)) => match (x.zone, y.zone) {
            (None, None) => Some(x.time.cmp(&y.time)),
            (Some(_), Some(_)) => Some(x.utc_nanos().cmp(&y.utc_nanos()).then_with(|| x.time.cmp(&y.time))),
            _ => None,
        },
        (Value::DateTime(x), Value::DateTime(y)) => match (x.zone, y.zone) {
            (None, None) => Some(x.local.cmp(&y.local)),
            // java.time's order: the instant, then the local date-time, then the zone id
            (Some(a), Some(b)) => {
                Some(x.utc()?.cmp(&y.utc()?).then_with(|| x.local.cmp(&y.local)).then_with(|| zone_id(&a).cmp(&zone_id(&b))))
            }
            _ => None,
        },
        (Value::YearMonthDuration(x), Value::YearMonthDuration(y)) => Some(x.cmp(y)),
        (Value::DayTimeDuration(x), Value::DayTimeDuration(y)) => Some(x.cmp(y)),
        _ => None,
    }
}

/// Equality as java.time's `equals`: zoned values are equal only with the same local value and
/// the same zone (`10:00Z` is not `11:00+01:00`); local and zoned values are not comparable.
pub(crate) fn equals(a: &Value, b: &Value) -> Option<bool> {
    match (a, b) {
        (Value::Time(x), Value::Time(y)) => match (x.zone, y.zone) {
            (None, None) => Some(x.time == y.time),
            (Some(a), Some(b)) => Some(x.time == y.time && a == b),
            _ => None,
        },
        (Value::DateTime(x), Value::DateTime(y)) => match (x.zone, y.zone) {
            (None, None) => Some(x.local == y.local),
            (Some(a), Some(b)) => Some(x.local == y.local && a == b),
            _ => None,
        },
        _ => compare(a, b).map(|o| o == Ordering::Equal),
    }
}

fn zone_id(z: &Zone) -> String {
    match z {
        Zone::Offset(o) => fmt_offset(o),
        Zone::Id(tz) => tz.name().to_string(),
    }
}

fn add_months(local: NaiveDateTime, months: i64) -> Option<NaiveDateTime> {
    let m = Months::new(u32::try_from(months.unsigned_abs()).ok()?);
    if months >= 0 {
        local.checked_add_months(m)
    } else {
        local.checked_sub_months(m)
    }
}

fn add_duration_dt(x: &DateTime, d: &DayTimeDuration) -> Option<DateTime> {
    let delta = d.delta()?;
    match x.zone {
        Some(Zone::Id(tz)) => {
            let utc = x.utc()?.checked_add_signed(delta)?;
            Some(DateTime::from_utc(utc, Zone::Id(tz)))
        }
        zone => Some(DateTime { local: x.local.checked_add_signed(delta)?, zone }),
    }
}

fn add_months_dt(x: &DateTime, months: i64) -> Option<DateTime> {
    Some(DateTime { local: add_months(x.local, months)?, zone: x.zone })
}

fn add_months_date(d: &Date, months: i64) -> Option<Date> {
    Some(Date(add_months(d.0.and_time(NaiveTime::MIN), months)?.date()))
}

fn add_dt_date(d: &Date, dur: &DayTimeDuration) -> Option<Date> {
    Some(Date(d.0.and_time(NaiveTime::MIN).checked_add_signed(dur.delta()?)?.date()))
}

fn add_dt_time(t: &Time, dur: &DayTimeDuration) -> Option<Time> {
    let nanos_day = 86_400 * NANOS_PER_SEC;
    let delta = dur.0.rem_euclid(nanos_day);
    let d = DayTimeDuration(delta).delta()?;
    let (time, _) = t.time.overflowing_add_signed(d);
    Some(Time { time, zone: t.zone })
}

fn neg_dt(d: &DayTimeDuration) -> DayTimeDuration {
    DayTimeDuration(-d.0)
}

/// Arithmetic on temporal values; `None` when the operation is not defined for the types.
pub(crate) fn arith(op: ArithOp, x: &Value, y: &Value) -> Option<Value> {
    use Value::{Date as D, DateTime as Dt, DayTimeDuration as Dtd, Number as N, Time as T, YearMonthDuration as Ym};
    match op {
        ArithOp::Add => match (x, y) {
            (Dt(a), Ym(m)) | (Ym(m), Dt(a)) => add_months_dt(a, m.0).map(Dt),
            (Dt(a), Dtd(d)) | (Dtd(d), Dt(a)) => add_duration_dt(a, d).map(Dt),
            (D(a), Ym(m)) | (Ym(m), D(a)) => add_months_date(a, m.0).map(D),
            (D(a), Dtd(d)) | (Dtd(d), D(a)) => add_dt_date(a, d).map(D),
            (T(a), Dtd(d)) | (Dtd(d), T(a)) => add_dt_time(a, d).map(T),
            (Ym(a), Ym(b)) => a.0.checked_add(b.0).map(|m| Ym(YearMonthDuration(m))),
            (Dtd(a), Dtd(b)) => a.0.checked_add(b.0).map(|n| Dtd(DayTimeDuration(n))),
            _ => None,
        },
        ArithOp::Sub => match (x, y) {
            (Dt(a), Ym(m)) => add_months_dt(a, -m.0).map(Dt),
            (Dt(a), Dtd(d)) => add_duration_dt(a, &neg_dt(d)).map(Dt),
            (D(a), Ym(m)) => add_months_date(a, -m.0).map(D),
            (D(a), Dtd(d)) => add_dt_date(a, &neg_dt(d)).map(D),
            (T(a), Dtd(d)) => add_dt_time(a, &neg_dt(d)).map(T),
            (Ym(a), Ym(b)) => a.0.checked_sub(b.0).map(|m| Ym(YearMonthDuration(m))),
            (Dtd(a), Dtd(b)) => a.0.checked_sub(b.0).map(|n| Dtd(DayTimeDuration(n))),
            (D(a), D(b)) => Some(Dtd(DayTimeDuration::from_delta(a.0.signed_duration_since(b.0)))),
            (Dt(a), Dt(b)) => match (a.zone, b.zone) {
                (None, None) => Some(Dtd(DayTimeDuration::from_delta(a.local.signed_duration_since(b.local)))),
                (Some(_), Some(_)) => Some(Dtd(DayTimeDuration::from_delta(a.utc()?.signed_duration_since(b.utc()?)))),
                _ => None,
            },
            (T(a), T(b)) => match (a.zone, b.zone) {
                (None, None) => Some(Dtd(DayTimeDuration::from_delta(a.time.signed_duration_since(b.time)))),
                (Some(_), Some(_)) => Some(Dtd(DayTimeDuration(a.utc_nanos() - b.utc_nanos()))),
                _ => None,
            },
            _ => None,
        },
        ArithOp::Mul => match (x, y) {
            (N(n), Ym(m)) | (Ym(m), N(n)) => m.0.checked_mul(n.trunc_i64()).map(|m| Ym(YearMonthDuration(m))),
            (N(n), Dtd(d)) | (Dtd(d), N(n)) => d.0.checked_mul(i128::from(n.trunc_i64())).map(|v| Dtd(DayTimeDuration(v))),
            _ => None,
        },
        ArithOp::Div => match (x, y) {
            (Ym(m), N(n)) if !n.is_zero() => {
                let q = Number::from(m.0).div(n)?.trunc_i64();
                Some(Ym(YearMonthDuration(q)))
            }
            (Ym(a), Ym(b)) if b.0 != 0 => Number::from(a.0).div(&Number::from(b.0)).map(N),
            (Dtd(d), N(n)) if !n.is_zero() => {
                let millis = i64::try_from(d.0 / 1_000_000).ok()?;
                let q = Number::from(millis).div(n)?.trunc_i64();
                Some(Dtd(DayTimeDuration::from_millis(q)))
            }
            (Dtd(a), Dtd(b)) if b.0 / 1_000_000 != 0 => {
                let am = i64::try_from(a.0 / 1_000_000).ok()?;
                let bm = i64::try_from(b.0 / 1_000_000).ok()?;
                Number::from(am).div(&Number::from(bm)).map(N)
            }
            _ => None,
        },
        ArithOp::Pow => None,
    }
}
pub(crate) fn abs(v: &Value) -> Option<Value> {
    match v {
        Value::YearMonthDuration(m) => Some(Value::YearMonthDuration(YearMonthDuration(m.0.abs()))),
        Value::DayTimeDuration(d) => Some(Value::DayTimeDuration(DayTimeDuration(d.0.abs()))),
        _ => None,
    }
}

fn weekday(d: &NaiveDate) -> Value {
    Value::number(d.weekday().number_from_monday())
}

fn offset_value(zone: &Option<Zone>, local: &NaiveDateTime) -> Value {
    match zone {
        Some(z) => {
            let off = z.offset_at_local(local);
            Value::DayTimeDuration(DayTimeDuration(i128::from(off.local_minus_utc()) * NANOS_PER_SEC))
        }
        None => Value::Null,
    }
}

fn timezone_value(zone: &Option<Zone>) -> Value {
    match zone {
        Some(Zone::Id(tz)) => Value::string(tz.name()),
        _ => Value::Null,
    }
}

/// Properties of temporal values (`d.year`, `dur.hours`, ...).
pub(crate) fn property(v: &Value, key: &str) -> Option<Value> {
    let n = |x: i64| Some(Value::number(x));
    match v {
        Value::Date(d) => match key {
            "year" => n(i64::from(d.0.year())),
            "month" => n(i64::from(d.0.month())),
            "day" => n(i64::from(d.0.day())),
            "weekday" => Some(weekday(&d.0)),
            _ => None,
        },
        Value::Time(t) => {
            let local = NaiveDate::from_ymd_opt(1970, 1, 1)?.and_time(t.time);
            match key {
                "hour" => n(i64::from(t.time.hour())),
                "minute" => n(i64::from(t.time.minute())),
                "second" => n(i64::from(t.time.second())),
                "time offset" => Some(offset_value(&t.zone, &local)),
                "timezone" => Some(timezone_value(&t.zone)),
                _ => None,
            }
        }
        Value::DateTime(dt) => match key {
            "year" => n(i64::from(dt.local.year())),
            "month" => n(i64::from(dt.local.month())),
            "day" => n(i64::from(dt.local.day())),
            "weekday" => Some(weekday(&dt.local.date())),
            "hour" => n(i64::from(dt.local.hour())),
            "minute" => n(i64::from(dt.local.minute())),
            "second" => n(i64::from(dt.local.second())),
            "time offset" => Some(offset_value(&dt.zone, &dt.local)),
            "timezone" => Some(timezone_value(&dt.zone)),
            _ => None,
        },
        Value::YearMonthDuration(m) => match key {
            "years" => n(m.0 / 12),
            "months" => n(m.0 % 12),
            _ => None,
        },
        Value::DayTimeDuration(d) => {
            let secs = d.0 / NANOS_PER_SEC;
            match key {
                "days" => n((secs / 86_400) as i64),
                "hours" => n(((secs / 3600) % 24) as i64),
                "minutes" => n(((secs / 60) % 60) as i64),
                "seconds" => n((secs % 60) as i64),
                _ => None,
            }
        }
        _ => None,
    }
}

// ---- functions ----

pub(crate) fn date_of(v: &Value) -> Option<NaiveDate> {
    match v {
        Value::Date(d) => Some(d.0),
        Value::DateTime(dt) => Some(dt.local.date()),
        _ => None,
    }
}

pub(crate) fn date_from(v: &Value) -> Option<Value> {
    match v {
        Value::String(s) => Date::parse(s).map(Value::Date),
        other => date_of(other).map(|d| Value::Date(Date(d))),
    }
}

pub(crate) fn date_ymd(y: &Number, m: &Number, d: &Number) -> Option<Value> {
    // fractions are cut off, as Java's intValue does
    let y = i32::try_from(y.trunc_i64()).ok()?;
    let m = u32::try_from(m.trunc_i64()).ok()?;
    let d = u32::try_from(d.trunc_i64()).ok()?;
    NaiveDate::from_ymd_opt(y, m, d).map(|d| Value::Date(Date(d)))
}

pub(crate) fn time_from(v: &Value) -> Option<Value> {
    match v {
        Value::String(s) => Time::parse(s).map(Value::Time),
        Value::DateTime(dt) => Some(Value::Time(Time { time: dt.local.time(), zone: dt.zone })),
        Value::Date(_) => Some(Value::Time(Time { time: NaiveTime::MIN, zone: Some(Zone::Offset(FixedOffset::east_opt(0)?)) })),
        Value::Time(t) => Some(Value::Time(*t)),
        _ => None,
    }
}

pub(crate) fn time_hms(h: &Number, m: &Number, s: &Number, offset: Option<&Value>) -> Option<Value> {
    let hh = u32::try_from(h.to_i64()?).ok()?;
    let mm = u32::try_from(m.to_i64()?).ok()?;
    let whole = s.trunc_i64();
    let frac = s.sub(&Number::from(whole))?.mul(&Number::from(1_000_000_000i64))?.trunc_i64();
    let time = NaiveTime::from_hms_nano_opt(hh, mm, u32::try_from(whole).ok()?, u32::try_from(frac).ok()?)?;
    let zone = match offset {
        None | Some(Value::Null) => None,
        Some(Value::DayTimeDuration(d)) => {
            let secs = i32::try_from(d.0 / NANOS_PER_SEC).ok()?;
            Some(Zone::Offset(FixedOffset::east_opt(secs)?))
        }
        Some(_) => return None,
    };
    Some(Value::Time(Time { time, zone }))
}

/// `date and time(date, time)` and `date and time(date time, timezone)`.
pub(crate) fn date_and_time2(a: &Value, b: &Value) -> Option<Value> {
    match (a, b) {
        (d, Value::Time(t)) => {
            let date = date_of(d)?;
            Some(Value::DateTime(DateTime { local: date.and_time(t.time), zone: t.zone }))
        }
        (Value::DateTime(dt), Value::String(tz)) => {
            let zone = Zone::parse_id(tz)?;
            match dt.utc() {
                Some(utc) => Some(Value::DateTime(DateTime::from_utc(utc, zone))),
                None => Some(Value::DateTime(DateTime { local: dt.local, zone: Some(zone) })),
            }
        }
        _ => None,
    }
}

/// `years and months duration(from, to)`.
pub(crate) fn years_and_months(from: &Value, to: &Value) -> Option<Value> {
    let a = date_of(from)?;
    let b = date_of(to)?;
    // java.time.Period.between, without days
    let mut months = i64::from(b.year() - a.year()) * 12 + i64::from(b.month()) - i64::from(a.month());
    if months > 0 && b.day() < a.day() {
        months -= 1;
    } else if months < 0 && b.day() > a.day() {
        months += 1;
    }
    Some(Value::YearMonthDuration(YearMonthDuration(months)))
}

pub(crate) fn now(millis: i64) -> Option<Value> {
    DateTime::from_epoch_millis(millis).map(Value::DateTime)
}

pub(crate) fn today(millis: i64) -> Option<Value> {
    DateTime::from_epoch_millis(millis).map(|dt| Value::Date(Date(dt.local.date())))
}

const DAYS: [&str; 7] = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"];
const MONTHS: [&str; 12] =
    ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"];

pub(crate) fn day_of_week(v: &Value) -> Option<Value> {
    let d = date_of(v)?;
    Some(Value::string(DAYS[d.weekday().num_days_from_monday() as usize]))
}

pub(crate) fn day_of_year(v: &Value) -> Option<Value> {
    Some(Value::number(date_of(v)?.ordinal()))
}

pub(crate) fn week_of_year(v: &Value) -> Option<Value> {
    Some(Value::number(date_of(v)?.iso_week().week()))
}

pub(crate) fn month_of_year(v: &Value) -> Option<Value> {
    Some(Value::string(MONTHS[date_of(v)?.month0() as usize]))
}

pub(crate) fn last_day_of_month(v: &Value) -> Option<Value> {
    let d = date_of(v)?;
    let first_next =
        if d.month() == 12 { NaiveDate::from_ymd_opt(d.year() + 1, 1, 1)? } else { NaiveDate::from_ymd_opt(d.year(), d.month() + 1, 1)? };
    Some(Value::Date(Date(first_next.pred_opt()?)))
}
