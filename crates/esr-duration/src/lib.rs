//! Go `time.Duration` strings, as used by `refreshInterval`, `refreshTime`, sync-window durations and
//! retry intervals.
//!
//! [`parse`] accepts exactly what Go's `time.ParseDuration` accepts (`"1h0m0s"`, `"15s"`, `"0"`,
//! `"1.5h"`, `"-2m"`, `"300ms"`, `"1µs"`), with the same integer arithmetic and overflow rules, and
//! [`format()`] prints like Go's `Duration.String()` (`"1h0m0s"`, `"1m30s"`, `"1.5s"`, `"100ms"`,
//! `"0s"`). kube's `Duration` type is not used because its formatting differs from Go's and its
//! parser is more lenient than Go's, while ESO round-trips these strings through Go.
//!
//! This is the one implementation in esr: `esr-api` re-exports it as `esr_api::duration` (the path
//! the other crates use), and `esr-schema` checks the CRD schemas' `format: duration` with
//! [`parse`]. It is a crate of its own so that `esr-schema` does not depend on the CRD types.

use std::fmt;
use std::str::FromStr;

/// Nanoseconds in one microsecond.
const MICROSECOND: u64 = 1_000;
/// Nanoseconds in one millisecond.
const MILLISECOND: u64 = 1_000_000;
/// Nanoseconds in one second.
const SECOND: u64 = 1_000_000_000;
/// Nanoseconds in one minute.
const MINUTE: u64 = 60 * SECOND;
/// Nanoseconds in one hour.
const HOUR: u64 = 60 * MINUTE;
/// 1 << 63: one more than the largest positive duration.
const LIMIT: u64 = 1 << 63;

/// Why a duration string was rejected. The messages are Go's `time.ParseDuration` errors, with the
/// input quoted the way Go's `time` package quotes it (see [`go_quote`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// The string does not have the `[-+]?([0-9]*(\.[0-9]*)?[a-z]+)+` shape.
    #[error("time: invalid duration {}", go_quote(.0))]
    Invalid(String),
    /// A number is not followed by a unit.
    #[error("time: missing unit in duration {}", go_quote(.0))]
    MissingUnit(String),
    /// The unit is not one of ns, us, µs, μs, ms, s, m, h.
    #[error("time: unknown unit {} in duration {}", go_quote(.unit), go_quote(.input))]
    UnknownUnit {
        /// The unit found.
        unit: String,
        /// The whole input.
        input: String,
    },
    /// The value does not fit in a signed 64-bit count of nanoseconds.
    #[error("time: invalid duration {}", go_quote(.0))]
    Overflow(String),
    /// A valid but negative duration where only non-negative ones are meaningful ([`parse_std`]).
    #[error("time: invalid duration {}", go_quote(.0))]
    Negative(String),
}

/// Quotes `s` the way Go's `time` package does in its error messages (its private `quote`, not
/// `strconv.Quote`): printable ASCII is kept, `"` and `\` are backslash-escaped, and every byte of
/// a non-ASCII or control character is written as `\xNN` (`"1µx"` → `"1\xc2\xb5x"`).
pub fn go_quote(s: &str) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        if (' '..='\u{7f}').contains(&c) {
            if c == '"' || c == '\\' {
                out.push('\\');
            }
            out.push(c);
        } else {
            let mut buf = [0_u8; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                out.push_str("\\x");
                out.push(char::from(HEX[usize::from(b >> 4)]));
                out.push(char::from(HEX[usize::from(b & 0xf)]));
            }
        }
    }
    out.push('"');
    out
}

/// A signed duration with nanosecond precision, like Go's `time.Duration`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct GoDuration(i64);

impl GoDuration {
    /// The zero duration.
    pub const ZERO: GoDuration = GoDuration(0);

    /// A duration of `nanos` nanoseconds.
    pub const fn from_nanos(nanos: i64) -> Self {
        Self(nanos)
    }

    /// A duration of `secs` seconds, saturating at the representable range.
    pub const fn from_secs(secs: i64) -> Self {
        Self(secs.saturating_mul(SECOND as i64))
    }

    /// The duration in nanoseconds.
    pub const fn as_nanos(self) -> i64 {
        self.0
    }

    /// Whether the duration is negative.
    pub const fn is_negative(self) -> bool {
        self.0 < 0
    }

    /// Whether the duration is zero.
    pub const fn is_zero(self) -> bool {
        self.0 == 0
    }

    /// The duration as a `std::time::Duration`, or `None` if it is negative.
    pub fn to_std(self) -> Option<std::time::Duration> {
        u64::try_from(self.0)
            .ok()
            .map(std::time::Duration::from_nanos)
    }

    /// Converts a `std::time::Duration`, saturating at Go's maximum duration (about 292 years).
    pub fn from_std(d: std::time::Duration) -> Self {
        Self(i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
    }
}

impl FromStr for GoDuration {
    type Err = DurationError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse(s)
    }
}

impl fmt::Display for GoDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&format(*self))
    }
}

/// Consumes leading ASCII digits; returns the value, the rest, and whether the value overflowed
/// 1<<63 (Go's `leadingInt`).
fn leading_int(s: &str) -> (u64, &str, bool) {
    let mut x: u64 = 0;
    let mut overflow = false;
    let end = s.bytes().take_while(u8::is_ascii_digit).count();
    for b in s[..end].bytes() {
        if overflow {
            continue;
        }
        if x > (LIMIT - 1) / 10 {
            overflow = true;
            continue;
        }
        x = x * 10 + u64::from(b - b'0');
        if x > LIMIT {
            overflow = true;
        }
    }
    (x, &s[end..], overflow)
}

/// Consumes the digits after a decimal point; returns the value, its scale (10^digits used) and the
/// rest. Digits beyond what fits are consumed but ignored (Go's `leadingFraction`).
fn leading_fraction(s: &str) -> (u64, f64, &str) {
    let mut x: u64 = 0;
    let mut scale = 1.0_f64;
    let mut overflow = false;
    let end = s.bytes().take_while(u8::is_ascii_digit).count();
    for b in s[..end].bytes() {
        if overflow {
            continue;
        }
        if x > (LIMIT - 1) / 10 {
            overflow = true;
            continue;
        }
        let y = x * 10 + u64::from(b - b'0');
        if y > LIMIT {
            overflow = true;
            continue;
        }
        x = y;
        scale *= 10.0;
    }
    (x, scale, &s[end..])
}

fn unit_nanos(unit: &str) -> Option<u64> {
    Some(match unit {
        "ns" => 1,
        // U+00B5 (micro sign) and U+03BC (Greek small letter mu) are both accepted.
        "us" | "\u{00b5}s" | "\u{03bc}s" => MICROSECOND,
        "ms" => MILLISECOND,
        "s" => SECOND,
        "m" => MINUTE,
        "h" => HOUR,
        _ => return None,
    })
}

/// Parses a Go duration string exactly like Go's `time.ParseDuration`.
pub fn parse(input: &str) -> Result<GoDuration, DurationError> {
    let invalid = || DurationError::Invalid(input.to_owned());
    let overflow = || DurationError::Overflow(input.to_owned());
    let mut s = input;
    let mut neg = false;
    if let Some(rest) = s.strip_prefix('-') {
        neg = true;
        s = rest;
    } else if let Some(rest) = s.strip_prefix('+') {
        s = rest;
    }
    if s == "0" {
        return Ok(GoDuration::ZERO);
    }
    if s.is_empty() {
        return Err(invalid());
    }
    let mut total: u64 = 0;
    while !s.is_empty() {
        let first = s.as_bytes()[0];
        if !(first == b'.' || first.is_ascii_digit()) {
            return Err(invalid());
        }
        let before = s.len();
        let (mut v, rest, int_overflow) = leading_int(s);
        if int_overflow {
            return Err(invalid());
        }
        s = rest;
        let pre = before != s.len();
        let mut post = false;
        let mut frac = 0_u64;
        let mut scale = 1.0_f64;
        if let Some(rest) = s.strip_prefix('.') {
            let before = rest.len();
            let (f, sc, rest) = leading_fraction(rest);
            post = before != rest.len();
            frac = f;
            scale = sc;
            s = rest;
        }
        if !pre && !post {
            return Err(invalid());
        }
        let unit_len = s
            .char_indices()
            .find(|(_, c)| *c == '.' || c.is_ascii_digit())
            .map_or(s.len(), |(i, _)| i);
        if unit_len == 0 {
            return Err(DurationError::MissingUnit(input.to_owned()));
        }
        let unit = &s[..unit_len];
        s = &s[unit_len..];
        let unit_ns = unit_nanos(unit).ok_or_else(|| DurationError::UnknownUnit {
            unit: unit.to_owned(),
            input: input.to_owned(),
        })?;
        if v > LIMIT / unit_ns {
            return Err(overflow());
        }
        v *= unit_ns;
        if frac > 0 {
            // Same float arithmetic as Go: float64(f) * (float64(unit) / scale), truncated.
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            let extra = (frac as f64 * (unit_ns as f64 / scale)) as u64;
            v = v.checked_add(extra).ok_or_else(overflow)?;
            if v > LIMIT {
                return Err(overflow());
            }
        }
        total = total.checked_add(v).ok_or_else(overflow)?;
        if total > LIMIT {
            return Err(overflow());
        }
    }
    if neg {
        // total <= 1<<63 here, so the negation fits (i64::MIN when equal).
        return Ok(GoDuration(0_i64.wrapping_sub_unsigned(total)));
    }
    if total > LIMIT - 1 {
        return Err(overflow());
    }
    i64::try_from(total).map(GoDuration).map_err(|_| overflow())
}

/// Parses a Go duration string that must not be negative, as a `std::time::Duration` (settings
/// such as retry intervals and cache lifetimes, where a negative value has no meaning).
pub fn parse_std(input: &str) -> Result<std::time::Duration, DurationError> {
    parse(input)?
        .to_std()
        .ok_or_else(|| DurationError::Negative(input.to_owned()))
}

/// Appends the fraction `v / 10^prec` (without trailing zeros, with a leading `.` when non-empty)
/// and returns the integer part (Go's `fmtFrac`).
fn push_frac(out: &mut Vec<u8>, mut v: u64, prec: u32) -> u64 {
    let mut digits = Vec::new();
    let mut printed = false;
    for _ in 0..prec {
        let digit = v % 10;
        printed = printed || digit != 0;
        if printed {
            digits.push(b'0' + digit as u8);
        }
        v /= 10;
    }
    if printed {
        digits.push(b'.');
    }
    out.extend(digits);
    v
}

/// Appends the decimal digits of `v`, reversed (the buffer is reversed at the end).
fn push_int(out: &mut Vec<u8>, mut v: u64) {
    if v == 0 {
        out.push(b'0');
        return;
    }
    while v > 0 {
        out.push(b'0' + (v % 10) as u8);
        v /= 10;
    }
}

/// Formats a duration exactly like Go's `time.Duration.String()`.
pub fn format(d: GoDuration) -> String {
    let neg = d.0 < 0;
    let mut u = d.0.unsigned_abs();
    // Built in reverse, like Go's right-to-left buffer.
    let mut rev: Vec<u8> = Vec::with_capacity(32);
    if u < SECOND {
        rev.push(b's');
        let prec;
        if u == 0 {
            return "0s".to_owned();
        } else if u < MICROSECOND {
            prec = 0;
            rev.push(b'n');
        } else if u < MILLISECOND {
            prec = 3;
            // "µ" (U+00B5) is 0xC2 0xB5 in UTF-8; pushed in reverse.
            rev.push(0xB5);
            rev.push(0xC2);
        } else {
            prec = 6;
            rev.push(b'm');
        }
        u = push_frac(&mut rev, u, prec);
        push_int(&mut rev, u);
    } else {
        rev.push(b's');
        u = push_frac(&mut rev, u, 9);
        push_int(&mut rev, u % 60);
        u /= 60;
        if u > 0 {
            rev.push(b'm');
            push_int(&mut rev, u % 60);
            u /= 60;
            if u > 0 {
                rev.push(b'h');
                push_int(&mut rev, u);
            }
        }
    }
    if neg {
        rev.push(b'-');
    }
    rev.reverse();
    String::from_utf8_lossy(&rev).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> i64 {
        parse(s).unwrap().as_nanos()
    }

    #[test]
    fn parses_like_go() {
        assert_eq!(p("0"), 0);
        assert_eq!(p("+0"), 0);
        assert_eq!(p("-0"), 0);
        assert_eq!(p("0s"), 0);
        assert_eq!(p("15s"), 15 * SECOND as i64);
        assert_eq!(p("1h0m0s"), HOUR as i64);
        assert_eq!(p("1h"), HOUR as i64);
        assert_eq!(p("1.5h"), (HOUR + 30 * MINUTE) as i64);
        assert_eq!(p("-1.5h"), -((HOUR + 30 * MINUTE) as i64));
        assert_eq!(p("1m30s"), 90 * SECOND as i64);
        assert_eq!(p("300ms"), 300 * MILLISECOND as i64);
        assert_eq!(p("2us"), 2_000);
        assert_eq!(p("2µs"), 2_000);
        assert_eq!(p("2μs"), 2_000);
        assert_eq!(p("7ns"), 7);
        assert_eq!(p(".5s"), 500 * MILLISECOND as i64);
        assert_eq!(p("5.s"), 5 * SECOND as i64);
        assert_eq!(p("1h1m1s1ms1us1ns"), 3_661_001_001_001);
        assert_eq!(p("10s5s"), 15 * SECOND as i64);
        // Go's own test table: 0.3333333333333333333h == 20m.
        assert_eq!(p("0.3333333333333333333h"), 20 * MINUTE as i64);
        assert_eq!(p("9223372036854775807ns"), i64::MAX);
        assert_eq!(p("-9223372036854775808ns"), i64::MIN);
        assert_eq!(p("9223372036.854775807s"), i64::MAX);
    }

    #[test]
    fn rejects_like_go() {
        for bad in [
            "",
            "-",
            "+",
            ".",
            "-.",
            "s",
            "1",
            "1.5",
            "1d",
            "1 s",
            " 1s",
            "1s ",
            "1 h",
            "h",
            "1.2.3s",
            "1e3s",
            "1.s.",
            "1h-5m",
            "1S",
            "9223372036854775808ns",
            "3000000h",
            "18446744073709551616ns",
        ] {
            assert!(parse(bad).is_err(), "{bad:?} should be rejected");
        }
        assert!(matches!(parse("1"), Err(DurationError::MissingUnit(_))));
        assert!(matches!(
            parse("1d"),
            Err(DurationError::UnknownUnit { .. })
        ));
    }

    fn f(nanos: i64) -> String {
        format(GoDuration::from_nanos(nanos))
    }

    #[test]
    fn formats_like_go() {
        // Expected strings are the outputs of Go's Duration.String() for the same values.
        assert_eq!(f(0), "0s");
        assert_eq!(f(1), "1ns");
        assert_eq!(f(1_100), "1.1µs");
        assert_eq!(f(2_200_000), "2.2ms");
        assert_eq!(f(3_300_000_000), "3.3s");
        assert_eq!(f(4 * MINUTE as i64 + 5 * SECOND as i64), "4m5s");
        assert_eq!(
            f(4 * MINUTE as i64 + 5_001 * MILLISECOND as i64),
            "4m5.001s"
        );
        assert_eq!(
            f(5 * HOUR as i64 + 6 * MINUTE as i64 + 7_001 * MILLISECOND as i64),
            "5h6m7.001s"
        );
        assert_eq!(f(8 * MINUTE as i64 + 1), "8m0.000000001s");
        assert_eq!(f(HOUR as i64), "1h0m0s");
        assert_eq!(f(90 * SECOND as i64), "1m30s");
        assert_eq!(f(100 * MILLISECOND as i64), "100ms");
        assert_eq!(f(i64::MAX), "2562047h47m16.854775807s");
        assert_eq!(f(i64::MIN), "-2562047h47m16.854775808s");
        assert_eq!(f(-(SECOND as i64)), "-1s");
    }

    #[test]
    fn round_trips() {
        for s in [
            "1h0m0s", "15s", "1m30s", "1.5s", "100ms", "1.1µs", "5ns", "-3m0s",
        ] {
            assert_eq!(format(parse(s).unwrap()), s);
        }
        assert_eq!(parse("1h").unwrap().to_string(), "1h0m0s");
        assert_eq!(parse("0").unwrap().to_string(), "0s");
        assert_eq!(
            parse("90m").unwrap().to_std(),
            Some(std::time::Duration::from_secs(5400))
        );
        assert_eq!(parse("-1s").unwrap().to_std(), None);
        assert_eq!(
            GoDuration::from_std(std::time::Duration::from_secs(3600)).to_string(),
            "1h0m0s"
        );
    }
    #[test]
    fn template_and_provider_vectors() {
        // Parsing vectors of the template functions (dateModify, durationRound).
        assert_eq!(p("90m"), 90 * MINUTE as i64);
        assert_eq!(p("2h10m5s"), 7_805_000_000_000);
        assert_eq!(p("1.5s"), 1_500_000_000);
        assert_eq!(p("-1m"), -60_000_000_000);
        assert_eq!(p("0"), 0);
        for bad in ["bogus", "", "5", "abc"] {
            assert!(parse(bad).is_err(), "{bad:?} should be rejected");
        }
        // Formatting vectors of the template's %v of a time.Duration.
        assert_eq!(f(0), "0s");
        assert_eq!(f(1_500_000_000), "1.5s");
        assert_eq!(f(300_000_000), "300ms");
        assert_eq!(f(1_000), "1µs");
        assert_eq!(f(-90_000_000_000), "-1m30s");
        assert_eq!(f(5), "5ns");
        // Non-negative settings (AWS retryInterval, cache TTL, batch window).
        use std::time::Duration;
        assert_eq!(parse_std("1s"), Ok(Duration::from_secs(1)));
        assert_eq!(parse_std("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_std("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_std("1.5h"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_std("0"), Ok(Duration::ZERO));
        assert!(parse_std("5").is_err());
        assert!(parse_std("abc").is_err());
        assert_eq!(
            parse_std("-1s"),
            Err(DurationError::Negative("-1s".to_owned()))
        );
    }

    #[test]
    fn error_messages_are_gos() {
        let msg = |s: &str| parse(s).unwrap_err().to_string();
        assert_eq!(msg("bogus"), r#"time: invalid duration "bogus""#);
        assert_eq!(msg(""), r#"time: invalid duration """#);
        assert_eq!(msg("5"), r#"time: missing unit in duration "5""#);
        assert_eq!(msg("1d"), r#"time: unknown unit "d" in duration "1d""#);
        assert_eq!(msg("3000000h"), r#"time: invalid duration "3000000h""#);
        assert_eq!(
            parse_std("-1s").unwrap_err().to_string(),
            r#"time: invalid duration "-1s""#
        );
        // Go's time package escapes every byte of non-ASCII and control characters.
        assert_eq!(
            msg("1µx"),
            r#"time: unknown unit "\xc2\xb5x" in duration "1\xc2\xb5x""#
        );
        assert_eq!(msg("a\"b\\\n"), r#"time: invalid duration "a\"b\\\x0a""#);
        assert_eq!(go_quote("\u{7f}"), "\"\u{7f}\"");
    }
}
