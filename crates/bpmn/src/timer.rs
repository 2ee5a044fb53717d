//! Timer definitions as Zeebe reads them: ISO 8601 durations (`PT1S`, `P1D`, `P2M`), date-times
//! (`2024-01-02T10:00:00Z`), repeating intervals (`R5/PT10S`, `R/PT1M`) and cron cycles in
//! Spring's format (`0 0 9-17 * * MON-FRI`, `@daily`), evaluated in UTC.

use chrono::{Datelike, Months, Timelike};
use waggle_feel::{DateTime, DayTimeDuration, YearMonthDuration};

/// A duration: exact milliseconds, or calendar months (added to a date, as Java's Period).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interval {
    Millis(i64),
    Months(i64),
    /// The next instant a cron expression matches.
    Cron(Cron),
}

impl Interval {
    /// The instant `self` after `from_ms` (ms since the epoch, UTC).
    pub fn after(self, from_ms: i64) -> i64 {
        match self {
            Interval::Millis(ms) => from_ms.saturating_add(ms),
            Interval::Months(months) => {
                let Some(from) = chrono::DateTime::from_timestamp_millis(from_ms) else { return from_ms };
                let shifted = if months >= 0 {
                    from.checked_add_months(Months::new(months as u32))
                } else {
                    from.checked_sub_months(Months::new(months.unsigned_abs() as u32))
                };
                shifted.map(|d| d.timestamp_millis()).unwrap_or(from_ms)
            }
            Interval::Cron(cron) => cron.next_after(from_ms).unwrap_or(i64::MAX),
        }
    }
}

/// A Spring cron expression: second, minute, hour, day of month, month, day of week, each a set
/// of allowed values (bit i set: value i allowed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cron {
    seconds: u64,
    minutes: u64,
    hours: u64,
    days_of_month: u64,
    months: u64,
    /// 0 = Sunday … 6 = Saturday
    days_of_week: u64,
}

const MONTHS: [&str; 12] = ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"];
const DAYS: [&str; 7] = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];

impl Cron {
    /// Six fields (`sec min hour day-of-month month day-of-week`) or a macro (`@hourly`,
    /// `@daily`/`@midnight`, `@weekly`, `@monthly`, `@yearly`/`@annually`). `L`, `W` and `#`
    /// are not supported.
    pub fn parse(text: &str) -> Option<Cron> {
        let text = match text.trim() {
            "@yearly" | "@annually" => "0 0 0 1 1 *",
            "@monthly" => "0 0 0 1 * *",
            "@weekly" => "0 0 0 * * 0",
            "@daily" | "@midnight" => "0 0 0 * * *",
            "@hourly" => "0 0 * * * *",
            other => other,
        };
        let fields: Vec<&str> = text.split_whitespace().collect();
        let [sec, min, hour, dom, month, dow] = fields.as_slice() else { return None };
        let days_of_week = field(dow, 0, 7, &DAYS, 0)?;
        // 7 is Sunday too
        let days_of_week = (days_of_week | (days_of_week >> 7)) & 0x7f;
        Some(Cron {
            seconds: field(sec, 0, 59, &[], 0)?,
            minutes: field(min, 0, 59, &[], 0)?,
            hours: field(hour, 0, 23, &[], 0)?,
            days_of_month: field(dom, 1, 31, &[], 0)?,
            months: field(month, 1, 12, &MONTHS, 1)?,
            days_of_week,
        })
    }

    /// The first whole second after `from_ms` that matches (ms since the epoch, UTC); `None`
    /// when nothing matches within years.
    pub fn next_after(&self, from_ms: i64) -> Option<i64> {
        let has = |set: u64, v: u32| set & (1 << v) != 0;
        let mut t = chrono::DateTime::from_timestamp(from_ms.div_euclid(1000) + 1, 0)?.naive_utc();
        for _ in 0..200_000 {
            if !has(self.months, t.month()) {
                let (y, m) = if t.month() == 12 { (t.year() + 1, 1) } else { (t.year(), t.month() + 1) };
                t = chrono::NaiveDate::from_ymd_opt(y, m, 1)?.and_hms_opt(0, 0, 0)?;
            } else if !has(self.days_of_month, t.day()) || !has(self.days_of_week, t.weekday().num_days_from_sunday()) {
                t = (t.date() + chrono::Days::new(1)).and_hms_opt(0, 0, 0)?;
            } else if !has(self.hours, t.hour()) {
                t = t.date().and_hms_opt(t.hour(), 0, 0)? + chrono::Duration::hours(1);
            } else if !has(self.minutes, t.minute()) {
                t = t.date().and_hms_opt(t.hour(), t.minute(), 0)? + chrono::Duration::minutes(1);
            } else if !has(self.seconds, t.second()) {
                t += chrono::Duration::seconds(1);
            } else {
                return Some(t.and_utc().timestamp_millis());
            }
        }
        None
    }
}

/// One cron field: `*`, `?`, `n`, `a-b`, lists, and steps (`*/n`, `a/n`, `a-b/n`); `names`
/// (offset by `name_base`) may stand for numbers.
fn field(text: &str, min: u32, max: u32, names: &[&str], name_base: u32) -> Option<u64> {
    let value = |s: &str| -> Option<u32> {
        let upper = s.to_ascii_uppercase();
        match names.iter().position(|n| *n == upper) {
            Some(i) => Some(i as u32 + name_base),
            None => s.parse::<u32>().ok().filter(|v| (min..=max).contains(v)),
        }
    };
    let mut set = 0u64;
    for part in text.split(',') {
        let (range, step) = match part.split_once('/') {
            Some((r, s)) => (r, s.parse::<u32>().ok().filter(|s| *s > 0)?),
            None => (part, 1),
        };
        let (from, to) = match range {
            "*" | "?" => (min, max),
            r => match r.split_once('-') {
                Some((a, b)) => (value(a)?, value(b)?),
                None if step > 1 => (value(r)?, max),
                None => (value(r)?, value(r)?),
            },
        };
        if from > to {
            return None;
        }
        let mut v = from;
        while v <= to {
            set |= 1 << v;
            v += step;
        }
    }
    Some(set)
}

/// `PT1S`, `P1DT2H`, `P1Y2M` (not negative).
pub fn parse_duration(text: &str) -> Option<Interval> {
    let text = text.trim();
    if text.starts_with('-') {
        return None;
    }
    if let Some(d) = DayTimeDuration::parse(text) {
        return i64::try_from(d.nanos() / 1_000_000).ok().map(Interval::Millis);
    }
    YearMonthDuration::parse(text).map(|m| Interval::Months(m.months()))
}

/// A date-time with an offset or zone (`Z`, `+01:00`, `@Europe/Berlin`); a local date-time is
/// read as UTC. Milliseconds since the epoch.
pub fn parse_date(text: &str) -> Option<i64> {
    let text = text.trim();
    let parsed = DateTime::parse(text)?;
    parsed.epoch_millis().or_else(|| DateTime::parse(&format!("{text}Z"))?.epoch_millis())
}

/// `R<n>/<duration>` (n repetitions), `R/<duration>` (unbounded: -1), or a cron expression
/// (unbounded).
pub fn parse_cycle(text: &str) -> Option<(i32, Interval)> {
    if let Some(cron) = Cron::parse(text) {
        return Some((-1, Interval::Cron(cron)));
    }
    let (repeat, duration) = text.trim().split_once('/')?;
    let count = repeat.strip_prefix('R')?;
    let repetitions = if count.is_empty() { -1 } else { count.parse::<i32>().ok().filter(|n| *n >= 0)? };
    Some((repetitions, parse_duration(duration)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_dates_and_cycles() {
        assert_eq!(parse_duration("PT1S"), Some(Interval::Millis(1000)));
        assert_eq!(parse_duration("P1DT1M"), Some(Interval::Millis(86_460_000)));
        assert_eq!(parse_duration("P2M"), Some(Interval::Months(2)));
        assert_eq!(parse_duration("1s"), None);
        assert_eq!(parse_duration("-PT1S"), None);
        assert_eq!(parse_date("1970-01-01T00:00:01Z"), Some(1000));
        assert_eq!(parse_date("1970-01-01T01:00:00+01:00"), Some(0));
        assert_eq!(parse_date("1970-01-01T00:00:02"), Some(2000));
        assert_eq!(parse_date("tomorrow"), None);
        assert_eq!(parse_cycle("R3/PT10S"), Some((3, Interval::Millis(10_000))));
        assert_eq!(parse_cycle("R/PT1M"), Some((-1, Interval::Millis(60_000))));
        assert_eq!(parse_cycle("PT1M"), None);
        // cron: every day at 09:30:00 UTC; weekdays only; every 15 s
        let (reps, daily) = parse_cycle("0 30 9 * * *").unwrap();
        assert_eq!(reps, -1);
        assert_eq!(daily.after(0), 9 * 3_600_000 + 30 * 60_000);
        assert_eq!(daily.after(9 * 3_600_000 + 30 * 60_000), 86_400_000 + 9 * 3_600_000 + 30 * 60_000);
        // 1970-01-03 was a Saturday: the next weekday 08:00 is Monday the 5th
        let weekdays = parse_cycle("0 0 8 ? * MON-FRI").unwrap().1;
        assert_eq!(weekdays.after(2 * 86_400_000), 4 * 86_400_000 + 8 * 3_600_000);
        assert_eq!(parse_cycle("*/15 * * * * *").unwrap().1.after(1_000), 15_000);
        assert_eq!(parse_cycle("@daily").unwrap().1.after(1), 86_400_000);
        assert_eq!(parse_cycle("0 0 25 * * *"), None);
        assert_eq!(parse_cycle("0 0 12 L * *"), None);
        // 2024-01-31 + 1 month = 2024-02-29 (clamped, as java.time)
        assert_eq!(Interval::Months(1).after(1_706_659_200_000), 1_709_164_800_000);
    }
}
