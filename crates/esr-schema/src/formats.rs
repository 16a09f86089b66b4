//! String formats the apiserver validates, and Go (RE2) regular expressions.
//!
//! The apiserver keeps a `format` only if it is in its list of supported formats for the node's
//! type (`StripUnsupportedFormatsPostProcess`): for strings (and type-less nodes) `bsonobjectid`,
//! `uri`, `email`, `hostname`, `ipv4`, `ipv6`, `cidr`, `mac`, `uuid`, `uuid3`, `uuid4`, `uuid5`,
//! `isbn`, `isbn10`, `isbn13`, `creditcard`, `ssn`, `hexcolor`, `rgbcolor`, `byte`, `password`,
//! `date`, `duration`, `datetime`/`date-time`, `quantity`, `k8s-short-name`, `k8s-long-name`;
//! for integers `int32`/`int64`; for numbers `float`/`double`. Every other format is ignored.
//! Integer and number formats never fail validation on their own (kube-openapi does not range
//! check them for schemas); string formats are checked by the functions below.

use std::net::IpAddr;
use std::sync::LazyLock;

use regex::Regex;

const STRING_FORMATS: &[&str] = &[
    "bsonobjectid",
    "uri",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "cidr",
    "mac",
    "uuid",
    "uuid3",
    "uuid4",
    "uuid5",
    "isbn",
    "isbn10",
    "isbn13",
    "creditcard",
    "ssn",
    "hexcolor",
    "rgbcolor",
    "byte",
    "password",
    "date",
    "duration",
    "datetime",
    "quantity",
    "k8sshortname",
    "k8slongname",
];

/// The format the apiserver keeps for a node with these types, or `None` if it strips it.
pub(crate) fn effective_format(format: &str, types: &[String]) -> Option<String> {
    if format.is_empty() {
        return None;
    }
    let ty = if types.len() == 1 {
        types[0].as_str()
    } else {
        ""
    };
    let keep = match ty {
        "" | "string" => STRING_FORMATS.contains(&normalize(format).as_str()),
        "integer" => format == "int32" || format == "int64",
        "number" => format == "float" || format == "double",
        _ => false,
    };
    keep.then(|| format.to_string())
}

/// go-openapi's format name normalisation (dashes removed).
pub(crate) fn normalize(format: &str) -> String {
    format.replace('-', "")
}

/// Whether the string-format registry knows this (already kept) format.
pub(crate) fn is_string_format(format: &str) -> bool {
    STRING_FORMATS.contains(&normalize(format).as_str())
}

/// Validates `s` against a known string format.
pub(crate) fn validates(format: &str, s: &str) -> bool {
    match normalize(format).as_str() {
        "bsonobjectid" => s.len() == 24 && s.bytes().all(|b| b.is_ascii_hexdigit()),
        "uri" => is_request_uri(s),
        "email" => is_email(s),
        "hostname" => is_hostname(s),
        "ipv4" => s.parse::<IpAddr>().is_ok() && s.contains('.'),
        "ipv6" => s.parse::<IpAddr>().is_ok() && s.contains(':'),
        "cidr" => is_cidr(s),
        "mac" => is_mac(s),
        "uuid" => m(&UUID, s),
        "uuid3" => m(&UUID3, s),
        "uuid4" => m(&UUID4, s),
        "uuid5" => m(&UUID5, s),
        "isbn" => is_isbn10(s) || is_isbn13(s),
        "isbn10" => is_isbn10(s),
        "isbn13" => is_isbn13(s),
        "creditcard" => is_credit_card(s),
        "ssn" => s.len() == 11 && m(&SSN, s),
        "hexcolor" => m(&HEXCOLOR, s),
        "rgbcolor" => m(&RGBCOLOR, s),
        "byte" => m(&BASE64, s),
        "password" => true,
        "date" => is_date(s),
        "duration" => is_duration(s),
        "datetime" => is_date_time(s),
        "quantity" => m(&QUANTITY, s),
        "k8sshortname" => s.len() <= 63 && m(&DNS_LABEL, s),
        "k8slongname" => s.len() <= 253 && m(&DNS_SUBDOMAIN, s),
        _ => true,
    }
}

type LazyRe = LazyLock<Option<Regex>>;

/// Whether a constant regex matches (the constants always compile; a failed compile matches nothing).
fn m(r: &LazyRe, s: &str) -> bool {
    r.as_ref().is_some_and(|r| r.is_match(s))
}

macro_rules! lazy_re {
    ($name:ident, $pat:expr) => {
        static $name: LazyRe = LazyLock::new(|| Regex::new($pat).ok());
    };
}

lazy_re!(
    UUID,
    r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$"
);
lazy_re!(
    UUID3,
    r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?3[0-9a-f]{3}-?[0-9a-f]{4}-?[0-9a-f]{12}$"
);
lazy_re!(
    UUID4,
    r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?4[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$"
);
lazy_re!(
    UUID5,
    r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?5[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$"
);
lazy_re!(SSN, r"^[0-9]{3}[- ]?[0-9]{2}[- ]?[0-9]{4}$");
lazy_re!(HEXCOLOR, r"^#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$");
lazy_re!(
    RGBCOLOR,
    r"^rgb\(\s*(0|[1-9][0-9]?|1[0-9][0-9]?|2[0-4][0-9]|25[0-5])\s*,\s*(0|[1-9][0-9]?|1[0-9][0-9]?|2[0-4][0-9]|25[0-5])\s*,\s*(0|[1-9][0-9]?|1[0-9][0-9]?|2[0-4][0-9]|25[0-5])\s*\)$"
);
lazy_re!(
    BASE64,
    r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{4})$"
);
lazy_re!(
    HOSTNAME,
    r"^([a-zA-Z0-9\p{S}\p{L}]((-?[a-zA-Z0-9\p{S}\p{L}]{0,62})?)|([a-zA-Z0-9\p{S}\p{L}](([a-zA-Z0-9\-\p{S}\p{L}]{0,61}[a-zA-Z0-9\p{S}\p{L}])?)(\.)){1,}([a-zA-Z0-9\p{S}\p{L}])(-?[a-zA-Z0-9\p{S}\p{L}]){1,62})$"
);
lazy_re!(
    DATE_TIME_TAIL,
    r"^([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))$"
);
lazy_re!(
    QUANTITY,
    r"^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?[0-9]+)?$"
);
lazy_re!(DNS_LABEL, r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$");
lazy_re!(
    DNS_SUBDOMAIN,
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
);
lazy_re!(DURATION_PART, r"([0-9]+)\s*([A-Za-zµ]+)");
lazy_re!(
    CREDIT_CARD,
    r"^(?:4[0-9]{12}(?:[0-9]{3})?|5[1-5][0-9]{14}|(222[1-9]|22[3-9][0-9]|2[3-6][0-9]{2}|27[01][0-9]|2720)[0-9]{12}|6(?:011|5[0-9][0-9])[0-9]{12}|3[47][0-9]{13}|3(?:0[0-5]|[68][0-9])[0-9]{11}|(?:2131|1800|35[0-9]{3})[0-9]{11}|6[27][0-9]{14})$"
);

fn is_hostname(s: &str) -> bool {
    m(&HOSTNAME, s) && s.len() <= 255 && s.split('.').all(|p| p.len() <= 63)
}

fn is_date(s: &str) -> bool {
    // Go's time.Parse("2006-01-02", s)
    let b = s.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return false;
    }
    let num = |r: std::ops::Range<usize>| -> Option<u32> {
        let part = s.get(r)?;
        if part.bytes().all(|c| c.is_ascii_digit()) {
            part.parse().ok()
        } else {
            None
        }
    };
    let (Some(y), Some(m), Some(d)) = (num(0..4), num(5..7), num(8..10)) else {
        return false;
    };
    if !(1..=12).contains(&m) || d < 1 {
        return false;
    }
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let days = match m {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    };
    d <= days
}

fn is_date_time(s: &str) -> bool {
    // kube-openapi strfmt.IsDateTime
    if s.len() < 4 {
        return false;
    }
    let lower = s.to_lowercase();
    let parts: Vec<&str> = lower.split('t').collect();
    if parts.len() < 2 || !is_date(parts[0]) {
        return false;
    }
    match DATE_TIME_TAIL.as_ref().and_then(|r| r.captures(parts[1])) {
        Some(c) => {
            let g = |i: usize| c.get(i).map(|m| m.as_str()).unwrap_or("");
            g(1) <= "23" && g(2) <= "59" && g(3) <= "59"
        }
        None => false,
    }
}

/// kube-openapi's `strfmt.IsDuration`: what Go's `time.ParseDuration` accepts, or else a number
/// followed by a unit word (`3 days`, `2 weeks`).
fn is_duration(s: &str) -> bool {
    if esr_duration::parse(s).is_ok() {
        return true;
    }
    const UNITS: &[&[&str]] = &[
        &["ns", "nano"],
        &["us", "µs", "micro"],
        &["ms", "milli"],
        &["s", "sec"],
        &["m", "min"],
        &["h", "hr", "hour"],
        &["d", "day"],
        &["w", "wk", "week"],
    ];
    let Some(parts) = DURATION_PART.as_ref() else {
        return false;
    };
    parts.captures_iter(s).any(|c| {
        let unit = c
            .get(2)
            .map(|m| m.as_str().trim().to_lowercase())
            .unwrap_or_default();
        UNITS.iter().any(|variants| {
            let last = variants.len() - 1;
            variants
                .iter()
                .enumerate()
                .any(|(i, v)| (i == last && unit.starts_with(v)) || v.eq_ignore_ascii_case(&unit))
        })
    })
}

fn is_cidr(s: &str) -> bool {
    let Some((ip, prefix)) = s.split_once('/') else {
        return false;
    };
    let Ok(addr) = ip.parse::<IpAddr>() else {
        return false;
    };
    if prefix.is_empty() || !prefix.bytes().all(|b| b.is_ascii_digit()) || prefix.len() > 3 {
        return false;
    }
    let Ok(bits) = prefix.parse::<u32>() else {
        return false;
    };
    match addr {
        IpAddr::V4(_) => bits <= 32,
        IpAddr::V6(_) => bits <= 128,
    }
}

fn is_mac(s: &str) -> bool {
    // Go's net.ParseMAC: 6, 8 or 20 octets, separated by ':' or '-', or dotted groups of 4 hex digits.
    let hex2 = |p: &str| p.len() == 2 && p.bytes().all(|b| b.is_ascii_hexdigit());
    let hex4 = |p: &str| p.len() == 4 && p.bytes().all(|b| b.is_ascii_hexdigit());
    for sep in [':', '-'] {
        let parts: Vec<&str> = s.split(sep).collect();
        if matches!(parts.len(), 6 | 8 | 20) && parts.iter().all(|p| hex2(p)) {
            return true;
        }
    }
    let parts: Vec<&str> = s.split('.').collect();
    matches!(parts.len(), 3 | 4 | 10) && parts.iter().all(|p| hex4(p))
}

fn isbn_digits(s: &str) -> String {
    s.chars()
        .filter(|c| !c.is_whitespace() && *c != '-')
        .collect()
}

fn is_isbn10(s: &str) -> bool {
    let d = isbn_digits(s);
    let b = d.as_bytes();
    if b.len() != 10
        || !b[..9].iter().all(u8::is_ascii_digit)
        || !(b[9].is_ascii_digit() || b[9] == b'X')
    {
        return false;
    }
    let mut sum = 0u32;
    for (i, c) in b[..9].iter().enumerate() {
        sum += (i as u32 + 1) * u32::from(c - b'0');
    }
    let last = if b[9] == b'X' {
        10
    } else {
        u32::from(b[9] - b'0')
    };
    sum += 10 * last;
    sum.is_multiple_of(11)
}

fn is_isbn13(s: &str) -> bool {
    let d = isbn_digits(s);
    let b = d.as_bytes();
    if b.len() != 13 || !b.iter().all(u8::is_ascii_digit) {
        return false;
    }
    let mut sum = 0u32;
    for (i, c) in b[..12].iter().enumerate() {
        let f = if i % 2 == 0 { 1 } else { 3 };
        sum += f * u32::from(c - b'0');
    }
    (10 - sum % 10) % 10 == u32::from(b[12] - b'0')
}

fn is_credit_card(s: &str) -> bool {
    let digits: String = s.chars().filter(char::is_ascii_digit).collect();
    if !m(&CREDIT_CARD, &digits) {
        return false;
    }
    // Luhn
    let mut sum = 0u32;
    for (i, c) in digits.bytes().rev().enumerate() {
        let mut d = u32::from(c - b'0');
        if i % 2 == 1 {
            d *= 2;
            if d > 9 {
                d -= 9;
            }
        }
        sum += d;
    }
    sum.is_multiple_of(10)
}

fn is_email(s: &str) -> bool {
    // An approximation of Go's net/mail.ParseAddress.
    let s = s.trim();
    let addr = match (s.rfind('<'), s.ends_with('>')) {
        (Some(i), true) => &s[i + 1..s.len() - 1],
        _ => s,
    };
    let Some((local, domain)) = addr.rsplit_once('@') else {
        return false;
    };
    let atext = |c: char| c.is_alphanumeric() || "!#$%&'*+-/=?^_`{|}~".contains(c);
    let dot_atom = |p: &str| {
        !p.is_empty()
            && p.split('.')
                .all(|part| !part.is_empty() && part.chars().all(atext))
    };
    let quoted_local = local.len() >= 2 && local.starts_with('"') && local.ends_with('"');
    (quoted_local || dot_atom(local))
        && (dot_atom(domain) || (domain.starts_with('[') && domain.ends_with(']')))
}

fn is_request_uri(s: &str) -> bool {
    // An approximation of Go's url.ParseRequestURI.
    if s.is_empty() || s.bytes().any(|b| b < 0x20 || b == 0x7f) {
        return false;
    }
    if s == "*" {
        return true;
    }
    let (scheme, rest) = match s.find(':') {
        Some(i) => {
            let candidate = &s[..i];
            let valid_scheme = candidate
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic())
                && candidate
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c));
            if i == 0 {
                return false; // missing protocol scheme
            }
            if valid_scheme {
                (candidate, &s[i + 1..])
            } else {
                ("", s)
            }
        }
        None => ("", s),
    };
    let rest = rest.split_once('?').map(|(p, _)| p).unwrap_or(rest);
    if !rest.starts_with('/') {
        return !scheme.is_empty();
    }
    if let Some(after) = rest.strip_prefix("//")
        && !scheme.is_empty()
    {
        let authority = after.split('/').next().unwrap_or("");
        let hostport = authority
            .rsplit_once('@')
            .map(|(_, h)| h)
            .unwrap_or(authority);
        if let Some(stripped) = hostport.strip_prefix('[') {
            return match stripped.split_once(']') {
                Some((_, port)) => port.is_empty() || valid_port(port),
                None => false,
            };
        }
        if let Some((_, port)) = hostport.rsplit_once(':') {
            return valid_port(&format!(":{port}"));
        }
    }
    valid_percent_escapes(rest)
}

fn valid_port(p: &str) -> bool {
    match p.strip_prefix(':') {
        Some(digits) => digits.bytes().all(|b| b.is_ascii_digit()),
        None => false,
    }
}

fn valid_percent_escapes(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            if !(b.get(i + 1).is_some_and(u8::is_ascii_hexdigit)
                && b.get(i + 2).is_some_and(u8::is_ascii_hexdigit))
            {
                return false;
            }
            i += 3;
        } else {
            i += 1;
        }
    }
    true
}

/// Compiles a pattern with Go RE2 semantics as closely as the `regex` crate allows.
///
/// Go's `\d`, `\w`, `\s` and `\b` are ASCII-only while the `regex` crate's are Unicode-aware, so
/// they are rewritten to their ASCII classes. Remaining differences: Go accepts `\Q...\E` and a
/// literal `{` that does not start a repetition (the `regex` crate rejects both), and error texts
/// for invalid patterns differ.
pub fn compile_go_regex(pattern: &str) -> Result<Regex, String> {
    Regex::new(&translate_go_regex(pattern)).map_err(|e| e.to_string())
}

fn translate_go_regex(p: &str) -> String {
    let mut out = String::with_capacity(p.len() + 8);
    let mut chars = p.chars().peekable();
    let mut in_class = false;
    let mut class_start = false;
    while let Some(c) = chars.next() {
        if c == '\\' {
            let Some(n) = chars.next() else {
                out.push('\\');
                break;
            };
            class_start = false;
            let rep: Option<&str> = if in_class {
                match n {
                    'd' => Some("0-9"),
                    'w' => Some("0-9A-Za-z_"),
                    's' => Some("\\t\\n\\f\\r "),
                    _ => None,
                }
            } else {
                match n {
                    'd' => Some("[0-9]"),
                    'D' => Some("[^0-9]"),
                    'w' => Some("[0-9A-Za-z_]"),
                    'W' => Some("[^0-9A-Za-z_]"),
                    's' => Some("[\\t\\n\\f\\r ]"),
                    'S' => Some("[^\\t\\n\\f\\r ]"),
                    'b' => Some("(?-u:\\b)"),
                    'B' => Some("(?-u:\\B)"),
                    _ => None,
                }
            };
            match rep {
                Some(r) => out.push_str(r),
                None => {
                    out.push('\\');
                    out.push(n);
                }
            }
            continue;
        }
        if in_class {
            if c == ']' && !class_start {
                in_class = false;
            }
            class_start = class_start && c == '^';
            if c == '[' && chars.peek() == Some(&':') {
                // POSIX class like [:alpha:]: copy through to its closing ":]"
                out.push(c);
                for d in chars.by_ref() {
                    out.push(d);
                    if d == ']' {
                        break;
                    }
                }
                continue;
            }
            out.push(c);
            continue;
        }
        if c == '[' {
            in_class = true;
            class_start = true;
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_supported_formats_only() {
        let s = |t: &str| vec![t.to_string()];
        assert_eq!(
            effective_format("date-time", &s("string")).as_deref(),
            Some("date-time")
        );
        assert_eq!(
            effective_format("byte", &s("string")).as_deref(),
            Some("byte")
        );
        assert_eq!(
            effective_format("int32", &s("integer")).as_deref(),
            Some("int32")
        );
        assert_eq!(effective_format("int32", &s("string")), None);
        assert_eq!(effective_format("foo", &s("string")), None);
        assert_eq!(effective_format("byte", &s("object")), None);
        assert_eq!(
            effective_format("double", &s("number")).as_deref(),
            Some("double")
        );
    }

    #[test]
    fn string_formats() {
        assert!(validates("byte", "aGVsbG8="));
        assert!(!validates("byte", "hello!"));
        assert!(!validates("byte", ""));
        assert!(validates("date-time", "2024-01-02T03:04:05Z"));
        assert!(validates("date-time", "2024-01-02T03:04:05.123+02:00"));
        assert!(!validates("date-time", "2024-01-02"));
        assert!(!validates("date-time", "2024-02-30T03:04:05Z"));
        assert!(!validates("date-time", "yesterday"));
        assert!(validates("date", "2024-02-29"));
        assert!(!validates("date", "2023-02-29"));
        assert!(validates("ipv4", "10.0.0.1"));
        assert!(!validates("ipv4", "::1"));
        assert!(validates("ipv6", "::1"));
        assert!(validates("cidr", "10.0.0.0/8"));
        assert!(!validates("cidr", "10.0.0.0/33"));
        assert!(validates("uuid", "123e4567-e89b-12d3-a456-426614174000"));
        assert!(validates("hostname", "example.com"));
        assert!(!validates("hostname", "-bad-.com"));
        assert!(validates("uri", "https://example.com/a?b=c"));
        assert!(validates("uri", "/relative/path"));
        assert!(!validates("uri", "relative/path"));
        assert!(validates("email", "a.b@example.com"));
        assert!(!validates("email", "not-an-email"));
        assert!(validates("mac", "01:23:45:67:89:ab"));
        assert!(validates("duration", "1h30m"));
        assert!(validates("duration", "3 days"));
        assert!(!validates("duration", "forever"));
        assert!(validates("quantity", "10Gi"));
        assert!(!validates("quantity", "10 Gi"));
        assert!(validates("isbn10", "0321751043"));
        assert!(validates("isbn13", "978-0321751041"));
        assert!(validates("creditcard", "4111 1111 1111 1111"));
        assert!(validates("ssn", "123-45-6789"));
        assert!(validates("hexcolor", "#fff"));
        assert!(validates("rgbcolor", "rgb(255, 0, 10)"));
        assert!(validates("k8s-short-name", "my-name"));
        assert!(!validates("k8s-short-name", "My-name"));
    }

    #[test]
    fn go_regex_is_ascii() {
        let r = compile_go_regex(r"^\d+$").unwrap();
        assert!(r.is_match("123"));
        assert!(!r.is_match("١٢٣")); // Arabic-Indic digits: not \d in Go
        let w = compile_go_regex(r"^[\w.-]+$").unwrap();
        assert!(w.is_match("a_b.c-d"));
        assert!(!w.is_match("é"));
        let b = compile_go_regex(r"\bfoo\b").unwrap();
        assert!(b.is_match("a foo b"));
        assert!(compile_go_regex("(").is_err());
        let posix = compile_go_regex("^[[:alpha:]]+$").unwrap();
        assert!(posix.is_match("abc"));
    }

    #[test]
    fn durations_as_kube_openapi() {
        // Go's time.ParseDuration forms; "0" and "-0" have no unit, so only that parser takes them.
        for ok in [
            "1h0m0s", "0", "-0", "-1.5h", "300ms", "2h45m", "1us", "1µs", "0s", ".5s",
        ] {
            assert!(is_duration(ok), "{ok}");
        }
        // strfmt's fallback: a number and a unit word anywhere in the string.
        for ok in ["3 days", "1d", "2 weeks", "10 minutes"] {
            assert!(is_duration(ok), "{ok}");
        }
        for bad in ["", "1", "h", "forever", "1.5", "-"] {
            assert!(!is_duration(bad), "{bad}");
        }
    }
}
