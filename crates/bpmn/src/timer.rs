//! Timer definitions as Zeebe reads them: ISO 8601 durations (`PT1S`, `P1D`, `P2M`), date-times
//! (`2024-01-02T10:00:00Z`), repeating intervals (`R5/PT10S`, `R/PT1M`) and cron cycles in
//! Spring's format (`0 0 9-17 * * MON-FRI`, `0 0 12 L * *`, `@daily`), evaluated in UTC.

use chrono::Months;
use waggle_feel::{DateTime, DayTimeDuration, YearMonthDuration};

/// A duration: exact milliseconds, or calendar months (added to a date, as Java's Period).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Interval {
    Millis(i64),
    Months(i64),
    /// The next instant a cron expression matches.
    Cron(Cron),
}

impl Interval {
    /// The instant `self` after `from_ms` (ms since the epoch, UTC).
    pub fn after(&self, from_ms: i64) -> i64 {
        match self {
            Interval::Millis(ms) => from_ms.saturating_add(*ms),
            Interval::Months(months) => {
                let Some(from) = chrono::DateTime::from_timestamp_millis(from_ms) else { return from_ms };
                let months = *months;
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

/// A cron expression in the format Zeebe reads (Spring's `CronExpression`): six fields
/// (`second minute hour day-of-month month day-of-week`), both day fields must match, with `L`
/// (last day of the month; `5L` the last Friday), `W` (nearest weekday), `#` (`MON#2`, the
/// second Monday), names, ranges, lists and steps, and the macros `@yearly`, `@annually`,
/// `@monthly`, `@weekly`, `@daily`, `@midnight` and `@hourly`. Parsed and evaluated by the
/// `croner` crate, in UTC.
#[derive(Debug, Clone)]
pub struct Cron(Box<croner::Cron>);

impl PartialEq for Cron {
    fn eq(&self, other: &Cron) -> bool {
        self.0.pattern.to_string() == other.0.pattern.to_string()
    }
}

impl Eq for Cron {}

impl Cron {
    /// The expression, or `None` if it is not one.
    pub fn parse(text: &str) -> Option<Cron> {
        let text = match text.trim() {
            "@yearly" | "@annually" => "0 0 0 1 1 *",
            "@monthly" => "0 0 0 1 * *",
            "@weekly" => "0 0 0 * * 0",
            "@daily" | "@midnight" => "0 0 0 * * *",
            "@hourly" => "0 0 * * * *",
            other => other,
        };
        // Spring requires exactly six fields (the parser would also take five or seven)
        if text.split_whitespace().count() != 6 {
            return None;
        }
        let parser = croner::parser::CronParser::builder()
            .seconds(croner::parser::Seconds::Required)
            .year(croner::parser::Year::Disallowed)
            .dom_and_dow(true)
            .sloppy_ranges(true)
            .build();
        let cron = parser.parse(text).ok()?;
        // a pattern that can never match (`0 0 0 31 2 *`) is not a cycle
        cron.find_next_occurrence(&chrono::DateTime::UNIX_EPOCH, false).ok()?;
        Some(Cron(Box::new(cron)))
    }

    /// The first whole second after `from_ms` that matches (ms since the epoch, UTC); `None`
    /// when nothing matches.
    pub fn next_after(&self, from_ms: i64) -> Option<i64> {
        let from = chrono::DateTime::from_timestamp_millis(from_ms)?;
        self.0.find_next_occurrence(&from, false).ok().map(|t| t.timestamp_millis())
    }
}

/// A timer cycle: `R<n>/<duration>` or `R<n>/<start>/<duration>` (`n` omitted: unbounded), or a
/// cron expression (unbounded).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cycle {
    /// How often the timer fires; -1: without end.
    pub repetitions: i32,
    pub interval: Interval,
    /// The first due date of an ISO 8601 interval with a start (ms since the epoch).
    pub start_ms: Option<i64>,
}

impl Cycle {
    /// The first due date, counted from `from_ms`: the start if it has one (at once if the
    /// start has passed, as Zeebe's `Interval.toEpochMilli`), else one interval later.
    pub fn first_due(&self, from_ms: i64) -> i64 {
        match self.start_ms {
            Some(start) => start.max(from_ms),
            None => self.interval.clone().after(from_ms),
        }
    }
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

/// `R<n>/<duration>` (n repetitions), `R/<duration>` (unbounded: -1), either with a start date
/// between (`R3/2024-01-01T10:00:00Z/PT1H`), or a cron expression (unbounded).
pub fn parse_cycle(text: &str) -> Option<Cycle> {
    if let Some(cron) = Cron::parse(text) {
        return Some(Cycle { repetitions: -1, interval: Interval::Cron(cron), start_ms: None });
    }
    let (repeat, rest) = text.trim().split_once('/')?;
    let count = repeat.strip_prefix('R')?;
    let repetitions = if count.is_empty() { -1 } else { count.parse::<i32>().ok().filter(|n| *n >= 0)? };
    let (start_ms, duration) = match rest.rsplit_once('/') {
        Some((start, duration)) => (Some(parse_date(start)?), duration),
        None => (None, rest),
    };
    Some(Cycle { repetitions, interval: parse_duration(duration)?, start_ms })
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
        let cycle = |text: &str| parse_cycle(text).map(|c| (c.repetitions, c.interval, c.start_ms));
        assert_eq!(cycle("R3/PT10S"), Some((3, Interval::Millis(10_000), None)));
        assert_eq!(cycle("R/PT1M"), Some((-1, Interval::Millis(60_000), None)));
        assert_eq!(cycle("PT1M"), None);
        // ISO 8601 repeating interval with a start: due at the start, or at once once it passed
        let started = parse_cycle("R2/1970-01-01T00:01:00Z/PT10S").unwrap();
        assert_eq!((started.repetitions, started.start_ms), (2, Some(60_000)));
        assert_eq!(started.first_due(0), 60_000);
        assert_eq!(started.first_due(90_000), 90_000);
        assert_eq!(started.interval.after(60_000), 70_000);
        assert_eq!(cycle("R2/tomorrow/PT10S"), None);
        // cron: every day at 09:30:00 UTC; weekdays only; every 15 s
        let daily = parse_cycle("0 30 9 * * *").unwrap();
        assert_eq!(daily.repetitions, -1);
        assert_eq!(daily.first_due(0), 9 * 3_600_000 + 30 * 60_000);
        assert_eq!(daily.interval.after(9 * 3_600_000 + 30 * 60_000), 86_400_000 + 9 * 3_600_000 + 30 * 60_000);
        // 1970-01-03 was a Saturday: the next weekday 08:00 is Monday the 5th
        let weekdays = parse_cycle("0 0 8 ? * MON-FRI").unwrap().interval;
        assert_eq!(weekdays.after(2 * 86_400_000), 4 * 86_400_000 + 8 * 3_600_000);
        assert_eq!(parse_cycle("*/15 * * * * *").unwrap().interval.after(1_000), 15_000);
        assert_eq!(parse_cycle("0/15 * * * * *").unwrap().interval.after(1_000), 15_000);
        assert_eq!(parse_cycle("@daily").unwrap().interval.after(1), 86_400_000);
        assert_eq!(parse_cycle("0 0 25 * * *"), None);
        assert_eq!(parse_cycle("0 0 0 30 2 *"), None, "never matches");
        assert_eq!(parse_cycle("0 0 * * *"), None, "five fields: Spring needs six");
        let day = |y, m, d| chrono::NaiveDate::from_ymd_opt(y, m, d).unwrap().and_hms_opt(0, 0, 0).unwrap().and_utc().timestamp_millis();
        // L: the last day of the month, noon (1970-02 has 28 days)
        assert_eq!(parse_cycle("0 0 12 L * *").unwrap().interval.after(day(1970, 2, 1)), day(1970, 2, 28) + 12 * 3_600_000);
        // W: the weekday nearest the 15th (1970-02-15 was a Sunday: Monday the 16th)
        assert_eq!(parse_cycle("0 0 0 15W * *").unwrap().interval.after(day(1970, 2, 1)), day(1970, 2, 16));
        // #: the second Monday (1970-02-09); 5L: the last Friday (1970-02-27)
        assert_eq!(parse_cycle("0 0 0 ? * MON#2").unwrap().interval.after(day(1970, 2, 1)), day(1970, 2, 9));
        assert_eq!(parse_cycle("0 0 0 ? * 5L").unwrap().interval.after(day(1970, 2, 1)), day(1970, 2, 27));
        // both day fields must match (Spring), not either (Vixie cron): the 13th that is a Friday
        assert_eq!(parse_cycle("0 0 0 13 * FRI").unwrap().interval.after(day(1970, 1, 1)), day(1970, 2, 13));
        // 2024-01-31 + 1 month = 2024-02-29 (clamped, as java.time)
        assert_eq!(Interval::Months(1).after(1_706_659_200_000), 1_709_164_800_000);
    }
}
