//! scrontab's schedules: the five fields of crontab(5) (minute, hour, day of month, month,
//! day of week) or an `@` name, and the next minute one matches. Pure: times are civil (the
//! caller converts to and from its time zone).
//!
//! Fields take `*`, numbers, ranges `N-M`, steps `*/S` and `N-M/S` (and `N/S`: from N to the
//! field's end), lists of those separated by commas, and month and weekday names (`jan`,
//! `mon`; any case). Weekdays run 0-7, 0 and 7 both Sunday. As in cron, when both the day of
//! month and the day of week are restricted a day matching either runs; when one is `*`, the
//! other decides.

/// A civil minute: year, month (1-12), day (1-31), hour, minute.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Minute {
    pub year: i32,
    pub month: u32,
    pub day: u32,
    pub hour: u32,
    pub minute: u32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    minutes: u64,
    hours: u32,
    days: u32,
    months: u16,
    weekdays: u8,
    days_any: bool,
    weekdays_any: bool,
}

const MONTHS: [&str; 12] = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"];
const WEEKDAYS: [&str; 7] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];

/// One field's values as a bit set over `lo..=hi`, and whether it was `*`. `names` stand for
/// `lo`, `lo + 1`, ...
fn field(text: &str, lo: u32, hi: u32, names: &[&str], what: &str) -> Result<(u64, bool), String> {
    let bad = || format!("invalid {what} `{text}`");
    let value = |s: &str| -> Result<u32, String> {
        if let Some(i) = names.iter().position(|n| n.eq_ignore_ascii_case(s)) {
            return Ok(lo + i as u32);
        }
        let n: u32 = s.parse().map_err(|_| bad())?;
        if n < lo || n > hi {
            return Err(format!("{what} {n} is out of range {lo}-{hi}"));
        }
        Ok(n)
    };
    let mut bits = 0u64;
    for part in text.split(',') {
        let (range, step) = match part.split_once('/') {
            Some((r, s)) => (r, s.parse::<u32>().ok().filter(|s| *s > 0).ok_or_else(bad)?),
            None => (part, 1),
        };
        let (a, b) = if range == "*" {
            (lo, hi)
        } else if let Some((a, b)) = range.split_once('-') {
            (value(a)?, value(b)?)
        } else {
            let a = value(range)?;
            (a, if part.contains('/') { hi } else { a })
        };
        if a > b {
            return Err(bad());
        }
        let mut v = a;
        while v <= b {
            bits |= 1 << v;
            v += step;
        }
    }
    Ok((bits, text == "*"))
}

impl Schedule {
    /// Parses a schedule line: the five fields (or an `@` name) and the command after them.
    pub fn parse_line(line: &str) -> Result<(Schedule, String), String> {
        let line = line.trim();
        let mut words = line.split_whitespace();
        let first = words.next().ok_or("an empty entry")?;
        let (fields, used): (Vec<&str>, usize) = match first.to_ascii_lowercase().as_str() {
            "@yearly" | "@annually" => (vec!["0", "0", "1", "1", "*"], 1),
            "@monthly" => (vec!["0", "0", "1", "*", "*"], 1),
            "@weekly" => (vec!["0", "0", "*", "*", "0"], 1),
            "@daily" | "@midnight" => (vec!["0", "0", "*", "*", "*"], 1),
            "@hourly" => (vec!["0", "*", "*", "*", "*"], 1),
            s if s.starts_with('@') => return Err(format!("unknown schedule `{first}`")),
            _ => {
                let f: Vec<&str> = line.split_whitespace().take(5).collect();
                if f.len() < 5 {
                    return Err("an entry needs five time fields and a command".into());
                }
                (f, 5)
            }
        };
        let command = {
            let mut rest = line;
            for _ in 0..used {
                rest = rest.trim_start();
                rest = &rest[rest.find(char::is_whitespace).unwrap_or(rest.len())..];
            }
            rest.trim().to_string()
        };
        if command.is_empty() {
            return Err("an entry without a command".into());
        }
        let (minutes, _) = field(fields[0], 0, 59, &[], "minute")?;
        let (hours, _) = field(fields[1], 0, 23, &[], "hour")?;
        let (days, days_any) = field(fields[2], 1, 31, &[], "day of month")?;
        let (months, _) = field(fields[3], 1, 12, &MONTHS, "month")?;
        let (mut weekdays, weekdays_any) = field(fields[4], 0, 7, &WEEKDAYS, "day of week")?;
        if weekdays & (1 << 7) != 0 {
            weekdays = (weekdays | 1) & 0x7f;
        }
        let s = Schedule {
            minutes,
            hours: hours as u32,
            days: days as u32,
            months: months as u16,
            weekdays: weekdays as u8,
            days_any,
            weekdays_any,
        };
        Ok((s, command))
    }

    /// Parses the time part alone: five fields or an `@` name (as a job's `cron` keeps it).
    pub fn parse(spec: &str) -> Result<Schedule, String> {
        Schedule::parse_line(&format!("{spec} :")).map(|(s, _)| s)
    }

    /// The time part of an entry line: its five fields, or its `@` name.
    pub fn time_part(line: &str) -> String {
        let words: Vec<&str> = line.split_whitespace().collect();
        let n = if words.first().is_some_and(|w| w.starts_with('@')) { 1 } else { 5 };
        words.iter().take(n).copied().collect::<Vec<_>>().join(" ")
    }

    fn day_matches(&self, year: i32, month: u32, day: u32) -> bool {
        let dom = self.days & (1 << day) != 0;
        let dow = self.weekdays & (1 << weekday(year, month, day)) != 0;
        match (self.days_any, self.weekdays_any) {
            (true, true) => true,
            (true, false) => dow,
            (false, true) => dom,
            (false, false) => dom || dow,
        }
    }

    /// The first minute after `after` that matches, within the next eight years (none: a
    /// schedule such as `0 0 30 2 *` that never matches).
    pub fn next_after(&self, after: Minute) -> Option<Minute> {
        let (mut y, mut mo, mut d) = (after.year, after.month, after.day);
        // The first candidate minute is the one after `after`.
        let mut from = Some((after.hour, after.minute + 1));
        for _ in 0..(8 * 366) {
            if self.months & (1 << mo) != 0 && self.day_matches(y, mo, d) {
                let (h0, m0) = from.unwrap_or((0, 0));
                for h in h0..24 {
                    if self.hours & (1 << h) == 0 {
                        continue;
                    }
                    let start = if h == h0 { m0 } else { 0 };
                    if let Some(m) = (start..60).find(|m| self.minutes & (1 << m) != 0) {
                        return Some(Minute { year: y, month: mo, day: d, hour: h, minute: m });
                    }
                }
            }
            from = None;
            d += 1;
            if d > days_in_month(y, mo) {
                d = 1;
                mo += 1;
                if mo > 12 {
                    mo = 1;
                    y += 1;
                }
            }
        }
        None
    }
}

fn leap(y: i32) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

pub fn days_in_month(y: i32, m: u32) -> u32 {
    match m {
        2 if leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// 0 = Sunday.
fn weekday(y: i32, m: u32, d: u32) -> u32 {
    // Sakamoto's method.
    const T: [i32; 12] = [0, 3, 2, 5, 0, 3, 5, 1, 4, 6, 2, 4];
    let y = if m < 3 { y - 1 } else { y };
    ((y + y / 4 - y / 100 + y / 400 + T[m as usize - 1] + d as i32).rem_euclid(7)) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(year: i32, month: u32, day: u32, hour: u32, minute: u32) -> Minute {
        Minute { year, month, day, hour, minute }
    }

    fn next(line: &str, after: Minute) -> Option<Minute> {
        Schedule::parse_line(line).unwrap().0.next_after(after)
    }

    #[test]
    fn fields_ranges_steps_lists_and_names() {
        // 2026-12-06 is a Sunday.
        let t = at(2026, 12, 6, 10, 7);
        assert_eq!(next("*/15 * * * * true", t), Some(at(2026, 12, 6, 10, 15)));
        assert_eq!(next("0 3 * * * true", t), Some(at(2026, 12, 7, 3, 0)));
        assert_eq!(next("30 9-17/4 * * mon-fri true", t), Some(at(2026, 12, 7, 9, 30)));
        assert_eq!(next("0 0 1 jan,jul * true", t), Some(at(2027, 1, 1, 0, 0)));
        assert_eq!(next("5 10 * * 7 true", t), Some(at(2026, 12, 13, 10, 5)), "7 is Sunday");
        assert_eq!(next("10/20 10 * * * true", t), Some(at(2026, 12, 6, 10, 10)));
        assert_eq!(next("@hourly true", t), Some(at(2026, 12, 6, 11, 0)));
        assert_eq!(next("@weekly true", t), Some(at(2026, 12, 13, 0, 0)));
        assert_eq!(next("0 0 29 2 * true", t), Some(at(2028, 2, 29, 0, 0)));
        assert_eq!(next("0 0 30 2 * true", t), None);
        // Both days restricted: either one.
        assert_eq!(next("0 0 15 * fri true", t), Some(at(2026, 12, 11, 0, 0)));
    }

    #[test]
    fn the_command_is_the_rest_of_the_line() {
        let (_, cmd) = Schedule::parse_line("  0 3 * * *   find /scratch -atime +30 -delete  ").unwrap();
        assert_eq!(cmd, "find /scratch -atime +30 -delete");
        let (_, cmd) = Schedule::parse_line("@daily  echo a  b").unwrap();
        assert_eq!(cmd, "echo a  b");
    }

    #[test]
    fn bad_entries_say_what_is_wrong() {
        for (line, why) in [
            ("60 * * * * x", "minute 60 is out of range 0-59"),
            ("* 24 * * * x", "hour 24 is out of range 0-23"),
            ("* * 0 * * x", "day of month 0 is out of range 1-31"),
            ("* * * foo * x", "invalid month `foo`"),
            ("*/0 * * * * x", "invalid minute `*/0`"),
            ("5-1 * * * * x", "invalid minute `5-1`"),
            ("* * * * *", "an entry without a command"),
            ("* * * *", "an entry needs five time fields and a command"),
            ("@reboot x", "unknown schedule `@reboot`"),
        ] {
            assert_eq!(Schedule::parse_line(line).unwrap_err(), why, "{line}");
        }
    }

    #[test]
    fn weekdays_by_the_calendar() {
        assert_eq!(weekday(2026, 12, 6), 0);
        assert_eq!(weekday(2000, 1, 1), 6);
        assert_eq!(weekday(2024, 2, 29), 4);
    }
}
