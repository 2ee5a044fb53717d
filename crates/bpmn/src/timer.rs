//! Timer definitions as Zeebe reads them: ISO 8601 durations (`PT1S`, `P1D`, `P2M`), date-times
//! (`2024-01-02T10:00:00Z`) and repeating intervals (`R5/PT10S`, `R/PT1M`).

use chrono::Months;
use waggle_feel::{DateTime, DayTimeDuration, YearMonthDuration};

/// A duration: exact milliseconds, or calendar months (added to a date, as Java's Period).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interval {
    Millis(i64),
    Months(i64),
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

/// `R<n>/<duration>` (n repetitions) or `R/<duration>` (unbounded: -1).
pub fn parse_cycle(text: &str) -> Option<(i32, Interval)> {
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
        // 2024-01-31 + 1 month = 2024-02-29 (clamped, as java.time)
        assert_eq!(Interval::Months(1).after(1_706_659_200_000), 1_709_164_800_000);
    }
}
