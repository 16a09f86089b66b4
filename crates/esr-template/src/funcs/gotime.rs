//! Go's `time` package as sprig uses it: layouts (`2006-01-02 15:04:05`) for
//! formatting and parsing, `Duration.Round`, zones by name (tz database).
//! `time.ParseDuration` and `Duration.String()` are `esr_api::duration`'s.
//!
//! The process time zone (`time.Local`) is UTC, as in ESO's container images
//! and in the compatibility vectors.

use chrono::{
    DateTime, Datelike, Duration as ChronoDuration, NaiveDate, NaiveDateTime, Offset, TimeZone,
    Timelike, Utc,
};

/// A Go `time.Time`: an instant plus the zone it is displayed in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GoTime {
    /// The instant, in UTC.
    pub utc: NaiveDateTime,
    /// Seconds east of UTC of the display zone at this instant.
    pub offset: i32,
    /// Zone abbreviation (`UTC`, `EST`); empty for a fabricated fixed zone.
    pub zone: String,
}

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const DAYS: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];

impl GoTime {
    /// The zero `time.Time{}` (January 1, year 1, 00:00:00 UTC).
    pub fn zero() -> Self {
        let utc = NaiveDate::from_ymd_opt(1, 1, 1)
            .and_then(|d| d.and_hms_opt(0, 0, 0))
            .unwrap_or_default();
        GoTime {
            utc,
            offset: 0,
            zone: "UTC".into(),
        }
    }

    /// `time.Now()` in the local zone (UTC).
    pub fn now() -> Self {
        GoTime {
            utc: Utc::now().naive_utc(),
            offset: 0,
            zone: "UTC".into(),
        }
    }

    /// `time.Unix(sec, 0)` in the local zone.
    pub fn from_unix(sec: i64) -> Self {
        let utc = DateTime::from_timestamp(sec, 0)
            .map(|d| d.naive_utc())
            .unwrap_or_else(|| GoTime::zero().utc);
        GoTime {
            utc,
            offset: 0,
            zone: "UTC".into(),
        }
    }

    /// The wall-clock time in the display zone.
    pub fn local(&self) -> NaiveDateTime {
        self.utc + ChronoDuration::seconds(i64::from(self.offset))
    }

    /// `t.Unix()`.
    pub fn unix(&self) -> i64 {
        self.utc.and_utc().timestamp()
    }

    /// `t.UnixNano()` (wrapping like Go outside the representable range).
    pub fn unix_nano(&self) -> i64 {
        self.unix()
            .wrapping_mul(1_000_000_000)
            .wrapping_add(i64::from(self.utc.nanosecond()))
    }

    /// `t.IsZero()`.
    pub fn is_zero(&self) -> bool {
        self.utc == GoTime::zero().utc
    }

    /// `t.Add(d)`.
    pub fn add(&self, nanos: i64) -> Self {
        let mut t = self.clone();
        t.utc = self
            .utc
            .checked_add_signed(ChronoDuration::nanoseconds(nanos))
            .unwrap_or(self.utc);
        t
    }

    /// `t.In(loc)` for a zone name (`UTC`, `Local`, or a tz database name);
    /// unknown names fall back to UTC, like sprig's `dateInZone`.
    pub fn in_zone(&self, zone: &str) -> Self {
        match zone {
            "" | "UTC" | "Local" => GoTime {
                utc: self.utc,
                offset: 0,
                zone: "UTC".into(),
            },
            name => match name.parse::<chrono_tz::Tz>() {
                Ok(tz) => {
                    use chrono_tz::OffsetName;
                    let off = tz.offset_from_utc_datetime(&self.utc);
                    let abbr = off.abbreviation().unwrap_or("").to_string();
                    GoTime {
                        utc: self.utc,
                        offset: off.fix().local_minus_utc(),
                        zone: abbr,
                    }
                }
                Err(_) => GoTime {
                    utc: self.utc,
                    offset: 0,
                    zone: "UTC".into(),
                },
            },
        }
    }

    /// `t.Weekday()` name.
    pub fn weekday_name(&self) -> &'static str {
        DAYS[self.local().weekday().num_days_from_sunday() as usize]
    }

    /// `t.Month()` name.
    pub fn month_name(&self) -> &'static str {
        MONTHS[self.local().month0() as usize]
    }

    /// `t.Format(layout)`.
    pub fn format(&self, layout: &str) -> String {
        format(self, layout)
    }

    /// `t.String()`: `2006-01-02 15:04:05.999999999 -0700 MST`.
    pub fn string(&self) -> String {
        format(self, "2006-01-02 15:04:05.999999999 -0700 MST")
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Std {
    LongMonth,
    Month,
    NumMonth,
    ZeroMonth,
    LongWeekDay,
    WeekDay,
    Day,
    UnderDay,
    ZeroDay,
    UnderYearDay,
    ZeroYearDay,
    Hour,
    Hour12,
    ZeroHour12,
    Minute,
    ZeroMinute,
    Second,
    ZeroSecond,
    LongYear,
    Year,
    PM,
    Pm,
    Tz,
    Iso8601Tz,
    Iso8601SecondsTz,
    Iso8601ShortTz,
    Iso8601ColonTz,
    Iso8601ColonSecondsTz,
    NumTz,
    NumSecondsTz,
    NumShortTz,
    NumColonTz,
    NumColonSecondsTz,
    /// Fixed fraction: separator, digit count.
    Frac0(u8, usize),
    /// Trimmed fraction: separator, digit count.
    Frac9(u8, usize),
}

fn starts_lower(s: &[u8]) -> bool {
    s.first().is_some_and(u8::is_ascii_lowercase)
}

fn next_std_chunk(layout: &str) -> (&str, Option<Std>, &str) {
    let l = layout.as_bytes();
    let n = l.len();
    let has = |i: usize, s: &str| l.len() >= i + s.len() && &l[i..i + s.len()] == s.as_bytes();
    for i in 0..n {
        let c = l[i];
        let r = |len: usize, std: Std| (&layout[..i], Some(std), &layout[i + len..]);
        match c {
            b'J' if has(i, "Jan") => {
                if has(i, "January") {
                    return r(7, Std::LongMonth);
                }
                if !starts_lower(&l[i + 3..]) {
                    return r(3, Std::Month);
                }
            }
            b'M' => {
                if has(i, "Mon") {
                    if has(i, "Monday") {
                        return r(6, Std::LongWeekDay);
                    }
                    if !starts_lower(&l[i + 3..]) {
                        return r(3, Std::WeekDay);
                    }
                }
                if has(i, "MST") {
                    return r(3, Std::Tz);
                }
            }
            b'0' => {
                if i + 1 < n && (b'1'..=b'6').contains(&l[i + 1]) {
                    let std = [
                        Std::ZeroMonth,
                        Std::ZeroDay,
                        Std::ZeroHour12,
                        Std::ZeroMinute,
                        Std::ZeroSecond,
                        Std::Year,
                    ][usize::from(l[i + 1] - b'1')];
                    return r(2, std);
                }
                if has(i, "002") {
                    return r(3, Std::ZeroYearDay);
                }
            }
            b'1' => {
                if i + 1 < n && l[i + 1] == b'5' {
                    return r(2, Std::Hour);
                }
                return r(1, Std::NumMonth);
            }
            b'2' => {
                if has(i, "2006") {
                    return r(4, Std::LongYear);
                }
                return r(1, Std::Day);
            }
            b'_' => {
                if i + 1 < n && l[i + 1] == b'2' {
                    if has(i + 1, "2006") {
                        return (&layout[..i + 1], Some(Std::LongYear), &layout[i + 5..]);
                    }
                    return r(2, Std::UnderDay);
                }
                if has(i, "__2") {
                    return r(3, Std::UnderYearDay);
                }
            }
            b'3' => return r(1, Std::Hour12),
            b'4' => return r(1, Std::Minute),
            b'5' => return r(1, Std::Second),
            b'P' if i + 1 < n && l[i + 1] == b'M' => return r(2, Std::PM),
            b'p' if i + 1 < n && l[i + 1] == b'm' => return r(2, Std::Pm),
            b'-' => {
                if has(i, "-070000") {
                    return r(7, Std::NumSecondsTz);
                }
                if has(i, "-07:00:00") {
                    return r(9, Std::NumColonSecondsTz);
                }
                if has(i, "-0700") {
                    return r(5, Std::NumTz);
                }
                if has(i, "-07:00") {
                    return r(6, Std::NumColonTz);
                }
                if has(i, "-07") {
                    return r(3, Std::NumShortTz);
                }
            }
            b'Z' => {
                if has(i, "Z070000") {
                    return r(7, Std::Iso8601SecondsTz);
                }
                if has(i, "Z07:00:00") {
                    return r(9, Std::Iso8601ColonSecondsTz);
                }
                if has(i, "Z0700") {
                    return r(5, Std::Iso8601Tz);
                }
                if has(i, "Z07:00") {
                    return r(6, Std::Iso8601ColonTz);
                }
                if has(i, "Z07") {
                    return r(3, Std::Iso8601ShortTz);
                }
            }
            b'.' | b',' => {
                if i + 1 < n && (l[i + 1] == b'0' || l[i + 1] == b'9') {
                    let ch = l[i + 1];
                    let mut j = i + 1;
                    while j < n && l[j] == ch {
                        j += 1;
                    }
                    if !(j < n && l[j].is_ascii_digit()) {
                        let digits = j - (i + 1);
                        let std = if ch == b'0' {
                            Std::Frac0(c, digits)
                        } else {
                            Std::Frac9(c, digits)
                        };
                        return (&layout[..i], Some(std), &layout[j..]);
                    }
                }
            }
            _ => {}
        }
    }
    (layout, None, "")
}

fn pad(out: &mut String, v: i64, width: usize) {
    if v < 0 {
        out.push('-');
        out.push_str(&format!("{:0width$}", -v, width = width));
    } else {
        out.push_str(&format!("{:0width$}", v, width = width));
    }
}

/// `t.Format(layout)`.
pub fn format(t: &GoTime, layout: &str) -> String {
    let lt = t.local();
    let mut out = String::with_capacity(layout.len() + 10);
    let mut rest = layout;
    let year = i64::from(lt.year());
    let hour = i64::from(lt.hour());
    loop {
        let (prefix, std, suffix) = next_std_chunk(rest);
        out.push_str(prefix);
        let Some(std) = std else { break };
        rest = suffix;
        match std {
            Std::Year => pad(&mut out, (year % 100).abs(), 2),
            Std::LongYear => pad(&mut out, year, 4),
            Std::Month => out.push_str(&MONTHS[lt.month0() as usize][..3]),
            Std::LongMonth => out.push_str(MONTHS[lt.month0() as usize]),
            Std::NumMonth => out.push_str(&lt.month().to_string()),
            Std::ZeroMonth => pad(&mut out, i64::from(lt.month()), 2),
            Std::WeekDay => out.push_str(&t.weekday_name()[..3]),
            Std::LongWeekDay => out.push_str(t.weekday_name()),
            Std::Day => out.push_str(&lt.day().to_string()),
            Std::UnderDay => {
                if lt.day() < 10 {
                    out.push(' ');
                }
                out.push_str(&lt.day().to_string());
            }
            Std::ZeroDay => pad(&mut out, i64::from(lt.day()), 2),
            Std::UnderYearDay => out.push_str(&format!("{:>3}", lt.ordinal())),
            Std::ZeroYearDay => pad(&mut out, i64::from(lt.ordinal()), 3),
            Std::Hour => pad(&mut out, hour, 2),
            Std::Hour12 => {
                let h = if hour % 12 == 0 { 12 } else { hour % 12 };
                out.push_str(&h.to_string());
            }
            Std::ZeroHour12 => {
                let h = if hour % 12 == 0 { 12 } else { hour % 12 };
                pad(&mut out, h, 2);
            }
            Std::Minute => out.push_str(&lt.minute().to_string()),
            Std::ZeroMinute => pad(&mut out, i64::from(lt.minute()), 2),
            Std::Second => out.push_str(&lt.second().to_string()),
            Std::ZeroSecond => pad(&mut out, i64::from(lt.second()), 2),
            Std::PM => out.push_str(if hour >= 12 { "PM" } else { "AM" }),
            Std::Pm => out.push_str(if hour >= 12 { "pm" } else { "am" }),
            Std::Iso8601Tz
            | Std::Iso8601ColonTz
            | Std::Iso8601SecondsTz
            | Std::Iso8601ShortTz
            | Std::Iso8601ColonSecondsTz
            | Std::NumTz
            | Std::NumColonTz
            | Std::NumSecondsTz
            | Std::NumShortTz
            | Std::NumColonSecondsTz => {
                let iso = matches!(
                    std,
                    Std::Iso8601Tz
                        | Std::Iso8601ColonTz
                        | Std::Iso8601SecondsTz
                        | Std::Iso8601ShortTz
                        | Std::Iso8601ColonSecondsTz
                );
                if iso && t.offset == 0 {
                    out.push('Z');
                    continue;
                }
                let mut zone = t.offset / 60;
                let mut absoff = t.offset;
                if zone < 0 {
                    out.push('-');
                    zone = -zone;
                    absoff = -absoff;
                } else {
                    out.push('+');
                }
                pad(&mut out, i64::from(zone / 60), 2);
                if matches!(
                    std,
                    Std::Iso8601ColonTz
                        | Std::NumColonTz
                        | Std::Iso8601ColonSecondsTz
                        | Std::NumColonSecondsTz
                ) {
                    out.push(':');
                }
                if !matches!(std, Std::NumShortTz | Std::Iso8601ShortTz) {
                    pad(&mut out, i64::from(zone % 60), 2);
                }
                if matches!(
                    std,
                    Std::Iso8601SecondsTz
                        | Std::NumSecondsTz
                        | Std::NumColonSecondsTz
                        | Std::Iso8601ColonSecondsTz
                ) {
                    if matches!(std, Std::NumColonSecondsTz | Std::Iso8601ColonSecondsTz) {
                        out.push(':');
                    }
                    pad(&mut out, i64::from(absoff % 60), 2);
                }
            }
            Std::Tz => {
                if !t.zone.is_empty() {
                    out.push_str(&t.zone);
                } else {
                    let mut zone = t.offset / 60;
                    if zone < 0 {
                        out.push('-');
                        zone = -zone;
                    } else {
                        out.push('+');
                    }
                    pad(&mut out, i64::from(zone / 60), 2);
                    pad(&mut out, i64::from(zone % 60), 2);
                }
            }
            Std::Frac0(sep, n) => {
                out.push(char::from(sep));
                let ns = format!("{:09}", lt.nanosecond() % 1_000_000_000);
                out.push_str(&ns[..n.min(9)]);
            }
            Std::Frac9(sep, n) => {
                let ns = format!("{:09}", lt.nanosecond() % 1_000_000_000);
                let digits = ns[..n.min(9)].trim_end_matches('0');
                if !digits.is_empty() {
                    out.push(char::from(sep));
                    out.push_str(digits);
                }
            }
        }
    }
    out
}

/// A parse failure (Go's message text is approximated).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError(pub String);

fn getnum(v: &[u8], fixed: bool) -> Option<(i64, usize)> {
    if v.is_empty() || !v[0].is_ascii_digit() {
        return None;
    }
    if v.len() < 2 || !v[1].is_ascii_digit() {
        if fixed {
            return None;
        }
        return Some((i64::from(v[0] - b'0'), 1));
    }
    Some((i64::from(v[0] - b'0') * 10 + i64::from(v[1] - b'0'), 2))
}

fn getnum3(v: &[u8], fixed: bool) -> Option<(i64, usize)> {
    let mut n = 0i64;
    let mut i = 0;
    while i < 3 && i < v.len() && v[i].is_ascii_digit() {
        n = n * 10 + i64::from(v[i] - b'0');
        i += 1;
    }
    if i == 0 || (fixed && i != 3) {
        return None;
    }
    Some((n, i))
}

fn cutspace(s: &[u8]) -> &[u8] {
    let mut i = 0;
    while i < s.len() && s[i] == b' ' {
        i += 1;
    }
    &s[i..]
}

fn skip<'a>(mut value: &'a [u8], prefix: &str) -> Option<&'a [u8]> {
    let mut p = prefix.as_bytes();
    while !p.is_empty() {
        if p[0] == b' ' {
            if !value.is_empty() && value[0] != b' ' {
                return None;
            }
            p = cutspace(p);
            value = cutspace(value);
            continue;
        }
        if value.is_empty() || value[0] != p[0] {
            return None;
        }
        p = &p[1..];
        value = &value[1..];
    }
    Some(value)
}

fn lookup(tab: &[&str], v: &[u8]) -> Option<(usize, usize)> {
    for (i, name) in tab.iter().enumerate() {
        let nb = name.as_bytes();
        if v.len() >= nb.len() && v[..nb.len()].eq_ignore_ascii_case(nb) {
            return Some((i, nb.len()));
        }
    }
    None
}

fn parse_nanos(v: &[u8], n: usize) -> Option<i64> {
    if n < 2 || v.len() < n || !(v[0] == b'.' || v[0] == b',') {
        return None;
    }
    let digits = &v[1..n];
    let mut ns = 0i64;
    for (i, &d) in digits.iter().enumerate() {
        if !d.is_ascii_digit() {
            return None;
        }
        if i < 9 {
            ns = ns * 10 + i64::from(d - b'0');
        }
    }
    for _ in digits.len()..9 {
        ns *= 10;
    }
    Some(ns)
}

fn days_in(month: u32, year: i32) -> u32 {
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ => {
            if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 {
                29
            } else {
                28
            }
        }
    }
}

/// `time.ParseInLocation(layout, value, time.Local)` with `time.Local` = UTC.
pub fn parse(layout: &str, value: &str) -> Result<GoTime, ParseError> {
    let bad = || {
        ParseError(format!(
            "parsing time {:?} as {:?}: cannot parse",
            value, layout
        ))
    };
    // A number of a clock field with Go's range check and message.
    let bounded = |v: &'_ [u8], fixed: bool, max: i64, what: &str| {
        let (n, l) = getnum(v, fixed).ok_or_else(bad)?;
        if n > max {
            return Err(ParseError(format!(
                "parsing time {value:?}: {what} out of range"
            )));
        }
        Ok((n, l))
    };
    let mut lay = layout;
    let mut v = value.as_bytes();
    let (mut year, mut month, mut day, mut yday) = (0i64, -1i64, -1i64, -1i64);
    let (mut hour, mut min, mut sec, mut nsec) = (0i64, 0i64, 0i64, 0i64);
    let (mut pm_set, mut am_set) = (false, false);
    let mut zone_offset: Option<i32> = None;
    let mut zone_name: Option<String> = None;
    let mut utc = false;
    loop {
        let (prefix, std, suffix) = next_std_chunk(lay);
        let std_str = &lay[prefix.len()..lay.len() - suffix.len()];
        v = skip(v, prefix).ok_or_else(bad)?;
        let Some(std) = std else {
            if !v.is_empty() {
                return Err(ParseError(format!(
                    "parsing time {:?}: extra text: {:?}",
                    value,
                    String::from_utf8_lossy(v)
                )));
            }
            break;
        };
        lay = suffix;
        match std {
            Std::Year => {
                if v.len() < 2 || !v[0].is_ascii_digit() || !v[1].is_ascii_digit() {
                    return Err(bad());
                }
                let y = i64::from(v[0] - b'0') * 10 + i64::from(v[1] - b'0');
                year = if y >= 69 { y + 1900 } else { y + 2000 };
                v = &v[2..];
            }
            Std::LongYear => {
                if v.len() < 4 || !v[..4].iter().all(u8::is_ascii_digit) {
                    return Err(bad());
                }
                year = v[..4]
                    .iter()
                    .fold(0i64, |a, d| a * 10 + i64::from(d - b'0'));
                v = &v[4..];
            }
            Std::Month | Std::LongMonth => {
                let tab: Vec<&str> = if std == Std::Month {
                    MONTHS.iter().map(|m| &m[..3]).collect()
                } else {
                    MONTHS.to_vec()
                };
                let (i, l) = lookup(&tab, v).ok_or_else(bad)?;
                month = i as i64 + 1;
                v = &v[l..];
            }
            Std::NumMonth | Std::ZeroMonth => {
                let (n, l) = getnum(v, std == Std::ZeroMonth).ok_or_else(bad)?;
                if !(1..=12).contains(&n) {
                    return Err(ParseError(format!(
                        "parsing time {value:?}: month out of range"
                    )));
                }
                month = n;
                v = &v[l..];
            }
            Std::WeekDay | Std::LongWeekDay => {
                let tab: Vec<&str> = if std == Std::WeekDay {
                    DAYS.iter().map(|d| &d[..3]).collect()
                } else {
                    DAYS.to_vec()
                };
                let (_, l) = lookup(&tab, v).ok_or_else(bad)?;
                v = &v[l..];
            }
            Std::Day | Std::UnderDay | Std::ZeroDay => {
                if std == Std::UnderDay && !v.is_empty() && v[0] == b' ' {
                    v = &v[1..];
                }
                let (n, l) = getnum(v, std == Std::ZeroDay).ok_or_else(bad)?;
                day = n;
                v = &v[l..];
            }
            Std::UnderYearDay | Std::ZeroYearDay => {
                for _ in 0..2 {
                    if std == Std::UnderYearDay && !v.is_empty() && v[0] == b' ' {
                        v = &v[1..];
                    }
                }
                let (n, l) = getnum3(v, std == Std::ZeroYearDay).ok_or_else(bad)?;
                yday = n;
                v = &v[l..];
            }
            Std::Hour | Std::Hour12 | Std::ZeroHour12 | Std::Minute | Std::ZeroMinute => {
                let (fixed, max, what) = match std {
                    Std::Hour => (false, 23, "hour"),
                    Std::Hour12 => (false, 12, "hour"),
                    Std::ZeroHour12 => (true, 12, "hour"),
                    Std::Minute => (false, 59, "minute"),
                    _ => (true, 59, "minute"),
                };
                let (n, l) = bounded(v, fixed, max, what)?;
                if what == "minute" {
                    min = n;
                } else {
                    hour = n;
                }
                v = &v[l..];
            }
            Std::Second | Std::ZeroSecond => {
                let (n, l) = bounded(v, std == Std::ZeroSecond, 59, "second")?;
                sec = n;
                v = &v[l..];
                if v.len() >= 2 && (v[0] == b'.' || v[0] == b',') && v[1].is_ascii_digit() {
                    let (_, next, _) = next_std_chunk(lay);
                    if !matches!(next, Some(Std::Frac0(..)) | Some(Std::Frac9(..))) {
                        let mut n = 2;
                        while n < v.len() && v[n].is_ascii_digit() {
                            n += 1;
                        }
                        nsec = parse_nanos(v, n).ok_or_else(bad)?;
                        v = &v[n..];
                    }
                }
            }
            Std::PM | Std::Pm => {
                if v.len() < 2 {
                    return Err(bad());
                }
                let p = &v[..2];
                let (pmv, amv) = if std == Std::PM {
                    (&b"PM"[..], &b"AM"[..])
                } else {
                    (&b"pm"[..], &b"am"[..])
                };
                if p == pmv {
                    pm_set = true;
                } else if p == amv {
                    am_set = true;
                } else {
                    return Err(bad());
                }
                v = &v[2..];
            }
            Std::Iso8601Tz
            | Std::Iso8601ColonTz
            | Std::Iso8601SecondsTz
            | Std::Iso8601ShortTz
            | Std::Iso8601ColonSecondsTz
            | Std::NumTz
            | Std::NumShortTz
            | Std::NumColonTz
            | Std::NumSecondsTz
            | Std::NumColonSecondsTz => {
                let iso = matches!(
                    std,
                    Std::Iso8601Tz
                        | Std::Iso8601ColonTz
                        | Std::Iso8601SecondsTz
                        | Std::Iso8601ShortTz
                        | Std::Iso8601ColonSecondsTz
                );
                if iso && !v.is_empty() && v[0] == b'Z' {
                    v = &v[1..];
                    utc = true;
                    continue;
                }
                let colon = matches!(
                    std,
                    Std::Iso8601ColonTz
                        | Std::NumColonTz
                        | Std::Iso8601ColonSecondsTz
                        | Std::NumColonSecondsTz
                );
                let secs = matches!(
                    std,
                    Std::Iso8601SecondsTz
                        | Std::NumSecondsTz
                        | Std::Iso8601ColonSecondsTz
                        | Std::NumColonSecondsTz
                );
                let short = matches!(std, Std::NumShortTz | Std::Iso8601ShortTz);
                let need = if short {
                    3
                } else if colon && secs {
                    9
                } else if colon {
                    6
                } else if secs {
                    7
                } else {
                    5
                };
                if v.len() < need {
                    return Err(bad());
                }
                let sign = v[0];
                if sign != b'+' && sign != b'-' {
                    return Err(bad());
                }
                let num = |s: &[u8]| -> Option<i32> {
                    if s.len() == 2 && s.iter().all(u8::is_ascii_digit) {
                        Some(i32::from(s[0] - b'0') * 10 + i32::from(s[1] - b'0'))
                    } else {
                        None
                    }
                };
                let hh = num(&v[1..3]).ok_or_else(bad)?;
                let (mut mm, mut ss) = (0, 0);
                if !short {
                    let (mi, si) = if colon { (4, 7) } else { (3, 5) };
                    if colon && v[3] != b':' {
                        return Err(bad());
                    }
                    mm = num(&v[mi..mi + 2]).ok_or_else(bad)?;
                    if secs {
                        if colon && v[6] != b':' {
                            return Err(bad());
                        }
                        ss = num(&v[si..si + 2]).ok_or_else(bad)?;
                    }
                }
                if hh > 24 || mm > 60 || ss > 60 {
                    return Err(ParseError(format!(
                        "parsing time {value:?}: time zone offset out of range"
                    )));
                }
                let mut off = (hh * 60 + mm) * 60 + ss;
                if sign == b'-' {
                    off = -off;
                }
                zone_offset = Some(off);
                v = &v[need..];
            }
            Std::Tz => {
                if v.len() >= 3 && &v[..3] == b"UTC" {
                    utc = true;
                    v = &v[3..];
                    continue;
                }
                let mut n = 0;
                while n < v.len() && v[n].is_ascii_uppercase() {
                    n += 1;
                }
                if n < 3 {
                    return Err(bad());
                }
                zone_name = Some(String::from_utf8_lossy(&v[..n]).into_owned());
                v = &v[n..];
            }
            Std::Frac0(_, digits) => {
                let nd = 1 + digits;
                if v.len() < nd {
                    return Err(bad());
                }
                nsec = parse_nanos(v, nd).ok_or_else(bad)?;
                v = &v[nd..];
            }
            Std::Frac9(..) => {
                if v.len() < 2 || !(v[0] == b'.' || v[0] == b',') || !v[1].is_ascii_digit() {
                    continue;
                }
                let mut i = 0;
                while i + 1 < v.len() && v[i + 1].is_ascii_digit() {
                    i += 1;
                }
                nsec = parse_nanos(v, 1 + i).ok_or_else(bad)?;
                v = &v[1 + i..];
            }
        }
        let _ = std_str;
    }
    if pm_set && hour < 12 {
        hour += 12;
    } else if am_set && hour == 12 {
        hour = 0;
    }
    let y = i32::try_from(year).map_err(|_| bad())?;
    if yday >= 0 {
        let (mut m, mut d) = (0i64, 0i64);
        let leap = days_in(2, y) == 29;
        if yday < 1 || yday > if leap { 366 } else { 365 } {
            return Err(ParseError(format!(
                "parsing time {value:?}: day-of-year out of range"
            )));
        }
        let mut rem = yday;
        for mo in 1..=12u32 {
            let dim = i64::from(days_in(mo, y));
            if rem <= dim {
                m = i64::from(mo);
                d = rem;
                break;
            }
            rem -= dim;
        }
        if (month >= 0 && month != m) || (day >= 0 && day != d) {
            return Err(ParseError(format!(
                "parsing time {value:?}: day-of-year does not match month"
            )));
        }
        month = m;
        day = d;
    } else {
        if month < 0 {
            month = 1;
        }
        if day < 0 {
            day = 1;
        }
    }
    let mon = u32::try_from(month).map_err(|_| bad())?;
    if day < 1 || day > i64::from(days_in(mon, y)) {
        return Err(ParseError(format!(
            "parsing time {value:?}: day out of range"
        )));
    }
    let date = NaiveDate::from_ymd_opt(y, mon, day as u32).ok_or_else(bad)?;
    let wall = date
        .and_hms_nano_opt(hour as u32, min as u32, sec as u32, nsec as u32)
        .ok_or_else(bad)?;
    if utc {
        return Ok(GoTime {
            utc: wall,
            offset: 0,
            zone: "UTC".into(),
        });
    }
    if let Some(off) = zone_offset {
        let utc_t = wall - ChronoDuration::seconds(i64::from(off));
        // time.Local is UTC: offset 0 means Local, anything else a fabricated zone.
        let zone = if off == 0 {
            "UTC".to_string()
        } else {
            String::new()
        };
        return Ok(GoTime {
            utc: utc_t,
            offset: off,
            zone,
        });
    }
    if let Some(name) = zone_name {
        if name == "UTC" {
            return Ok(GoTime {
                utc: wall,
                offset: 0,
                zone: name,
            });
        }
        if name.len() > 3 && name.starts_with("GMT") {
            let off: i32 = name[3..].parse::<i32>().unwrap_or(0) * 3600;
            return Ok(GoTime {
                utc: wall - ChronoDuration::seconds(i64::from(off)),
                offset: off,
                zone: name,
            });
        }
        return Ok(GoTime {
            utc: wall,
            offset: 0,
            zone: name,
        });
    }
    Ok(GoTime {
        utc: wall,
        offset: 0,
        zone: "UTC".into(),
    })
}

/// `time.Duration.Round(m)` (Go's wrapping arithmetic and overflow clamps).
pub fn duration_round(d: i64, m: i64) -> i64 {
    if m <= 0 {
        return d;
    }
    let less_than_half = |x: i64, y: i64| (x as u64).wrapping_add(x as u64) < y as u64;
    let mut r = d.wrapping_rem(m);
    if d < 0 {
        r = r.wrapping_neg();
        if less_than_half(r, m) {
            return d.wrapping_add(r);
        }
        let d1 = d.wrapping_sub(m).wrapping_add(r);
        return if d1 < d { d1 } else { i64::MIN };
    }
    if less_than_half(r, m) {
        return d.wrapping_sub(r);
    }
    let d1 = d.wrapping_add(m).wrapping_sub(r);
    if d1 > d { d1 } else { i64::MAX }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_layouts() {
        let t = parse("2006-01-02 15:04:05", "2024-11-05 07:08:09").unwrap();
        assert_eq!(
            t.format("Mon Jan _2 03:04:05PM 2006 .000 Z07:00 MST"),
            "Tue Nov  5 07:08:09AM 2024 .000 Z UTC"
        );
        let t = parse("2006-01-02", "2024-01-09").unwrap();
        assert_eq!(
            t.format("1/2/06 Jan January Mon Monday __2"),
            "1/9/24 Jan January Tue Tuesday   9"
        );
        let t = parse(
            "2006-01-02T15:04:05.999999999Z07:00",
            "2024-03-15T10:30:00.123456789Z",
        )
        .unwrap();
        assert_eq!(t.format("15:04:05.000000"), "10:30:00.123456");
        assert_eq!(t.string(), "2024-03-15 10:30:00.123456789 +0000 UTC");
        let t = parse("2006-01-02", "2024-03-15").unwrap();
        assert_eq!(t.string(), "2024-03-15 00:00:00 +0000 UTC");
        assert_eq!(t.unix(), 1710460800);
        assert_eq!(GoTime::zero().format("2006-01-02"), "0001-01-01");
    }

    #[test]
    fn parse_offsets_and_errors() {
        let t = parse("2006-01-02 15:04 -0700", "2024-01-01 00:00 -0500").unwrap();
        assert_eq!(t.unix(), 1704085200);
        assert_eq!(t.string(), "2024-01-01 00:00:00 -0500 -0500");
        let t = parse("02/01/2006", "15/03/2024").unwrap();
        assert_eq!(t.format("2006-01-02"), "2024-03-15");
        assert!(parse("2006-01-02", "bad").is_err());
        assert!(parse("2006-01-02", "2024-02-30").is_err());
        assert!(parse("2006-01-02", "2024-03-15x").is_err());
        // Clock fields: Go's range checks and messages.
        let t = parse("2006-01-02 03:04:05PM", "2024-03-15 11:30:09PM").unwrap();
        assert_eq!(t.format("15:04:05"), "23:30:09");
        let t = parse("2006-01-02 3:4:5", "2024-03-15 7:8:9").unwrap();
        assert_eq!(t.format("15:04:05"), "07:08:09");
        for (layout, value, what) in [
            ("15:04", "25:00", "hour"),
            ("03:04PM", "13:00PM", "hour"),
            ("15:04:05", "10:60:00", "minute"),
            ("15:04:05", "10:00:60", "second"),
        ] {
            let e = parse(layout, value).unwrap_err();
            assert_eq!(
                e.0,
                format!("parsing time {value:?}: {what} out of range"),
                "{layout} {value}"
            );
        }
    }

    #[test]
    fn zones() {
        let t = GoTime::from_unix(1700000000);
        assert_eq!(
            t.in_zone("America/New_York").format("2006-01-02 15:04 MST"),
            "2023-11-14 17:13 EST"
        );
        assert_eq!(
            t.in_zone("Asia/Tokyo").format("15:04 MST -0700"),
            "07:13 JST +0900"
        );
        assert_eq!(t.in_zone("Nowhere/Bogus").format("MST"), "UTC");
    }

    #[test]
    fn duration_rounding() {
        assert_eq!(duration_round(1_499_000_000, 1_000_000_000), 1_000_000_000);
        assert_eq!(duration_round(1_500_000_000, 1_000_000_000), 2_000_000_000);
    }
}
