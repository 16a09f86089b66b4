//! Masterminds/semver v3 semantics (sprig's `semver` and `semverCompare`):
//! lenient versions (`v1.2` is `1.2.0`), constraints with `=`, `!=`, `>`, `<`,
//! `>=`, `<=`, `~`, `~>`, `^`, wildcards (`1.2.x`, `*`), hyphen ranges, `,`/space
//! for AND and `||` for OR. Versions with a prerelease only satisfy constraints
//! that carry a prerelease themselves.

use std::cmp::Ordering;
use std::sync::OnceLock;

use regex::Regex;

/// A parsed version (`*semver.Version`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Version {
    pub major: u64,
    pub minor: u64,
    pub patch: u64,
    pub pre: String,
    pub metadata: String,
    pub original: String,
}

const CV: &str = r"v?([0-9|x|X|\*]+)(\.[0-9|x|X|\*]+)?(\.[0-9|x|X|\*]+)?(-([0-9A-Za-z\-]+(\.[0-9A-Za-z\-]+)*))?(\+([0-9A-Za-z\-]+(\.[0-9A-Za-z\-]+)*))?";
const OPS: &str = r">=|=>|<=|=<|~>|!=|=|>|<|~|\^|";

fn version_re() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    re(&R, || {
        r"^v?([0-9]+)(\.[0-9]+)?(\.[0-9]+)?(-([0-9A-Za-z\-]+(\.[0-9A-Za-z\-]+)*))?(\+([0-9A-Za-z\-]+(\.[0-9A-Za-z\-]+)*))?$".to_string()
    })
}

#[allow(clippy::panic)]
fn unreachable_regex() -> Regex {
    panic!("static regex failed to compile")
}

fn re(cell: &'static OnceLock<Regex>, pat: impl FnOnce() -> String) -> &'static Regex {
    cell.get_or_init(|| Regex::new(&pat()).unwrap_or_else(|_| unreachable_regex()))
}

fn constraint_re() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    re(&R, || format!(r"^\s*({OPS})\s*({CV})\s*$"))
}

fn range_re() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    re(&R, || format!(r"\s*({CV})\s+-\s+({CV})\s*"))
}

fn find_re() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    re(&R, || format!(r"({OPS})\s*({CV})"))
}

fn valid_re() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    re(&R, || format!(r"^(\s*({OPS})\s*({CV})\s*\,?)+$"))
}

impl Version {
    /// `semver.NewVersion`.
    pub fn parse(s: &str) -> Result<Version, String> {
        let caps = version_re()
            .captures(s)
            .ok_or_else(|| "invalid semantic version".to_string())?;
        let num = |i: usize| -> Result<u64, String> {
            match caps.get(i) {
                None => Ok(0),
                Some(m) => m
                    .as_str()
                    .trim_start_matches('.')
                    .parse::<u64>()
                    .map_err(|e| format!("error parsing version segment: {e}")),
            }
        };
        let pre = caps
            .get(5)
            .map(|m| m.as_str().to_string())
            .unwrap_or_default();
        for part in pre.split('.').filter(|p| !p.is_empty()) {
            if part.len() > 1 && part.starts_with('0') && part.bytes().all(|b| b.is_ascii_digit()) {
                return Err("version segment starts with 0".into());
            }
        }
        Ok(Version {
            major: num(1)?,
            minor: num(2)?,
            patch: num(3)?,
            pre,
            metadata: caps
                .get(8)
                .map(|m| m.as_str().to_string())
                .unwrap_or_default(),
            original: s.to_string(),
        })
    }

    /// `v.String()`.
    pub fn string(&self) -> String {
        let mut s = format!("{}.{}.{}", self.major, self.minor, self.patch);
        if !self.pre.is_empty() {
            s.push('-');
            s.push_str(&self.pre);
        }
        if !self.metadata.is_empty() {
            s.push('+');
            s.push_str(&self.metadata);
        }
        s
    }

    /// `v.Compare(o)`.
    pub fn compare(&self, o: &Version) -> Ordering {
        (self.major, self.minor, self.patch)
            .cmp(&(o.major, o.minor, o.patch))
            .then_with(|| compare_prerelease(&self.pre, &o.pre))
    }

    fn with(&self, major: u64, minor: u64, patch: u64) -> Version {
        let v = Version {
            major,
            minor,
            patch,
            pre: String::new(),
            metadata: String::new(),
            original: String::new(),
        };
        Version {
            original: v.string(),
            ..v
        }
    }

    /// `v.IncPatch()`.
    pub fn inc_patch(&self) -> Version {
        if !self.pre.is_empty() {
            return self.with(self.major, self.minor, self.patch);
        }
        self.with(self.major, self.minor, self.patch.wrapping_add(1))
    }

    /// `v.IncMinor()`.
    pub fn inc_minor(&self) -> Version {
        self.with(self.major, self.minor.wrapping_add(1), 0)
    }

    /// `v.IncMajor()`.
    pub fn inc_major(&self) -> Version {
        self.with(self.major.wrapping_add(1), 0, 0)
    }
}

fn compare_pre_part(s: &str, o: &str) -> Ordering {
    if s == o {
        return Ordering::Equal;
    }
    if s.is_empty() {
        return Ordering::Less;
    }
    if o.is_empty() {
        return Ordering::Greater;
    }
    match (s.parse::<u64>(), o.parse::<u64>()) {
        (Err(_), Err(_)) => {
            if s > o {
                Ordering::Greater
            } else {
                Ordering::Less
            }
        }
        (Ok(_), Err(_)) => Ordering::Less,
        (Err(_), Ok(_)) => Ordering::Greater,
        (Ok(a), Ok(b)) => {
            if a > b {
                Ordering::Greater
            } else {
                Ordering::Less
            }
        }
    }
}

fn compare_prerelease(a: &str, b: &str) -> Ordering {
    if a == b {
        return Ordering::Equal;
    }
    if a.is_empty() {
        return Ordering::Greater;
    }
    if b.is_empty() {
        return Ordering::Less;
    }
    let (pa, pb): (Vec<&str>, Vec<&str>) = (a.split('.').collect(), b.split('.').collect());
    for i in 0..pa.len().max(pb.len()) {
        let x = pa.get(i).copied().unwrap_or("");
        let y = pb.get(i).copied().unwrap_or("");
        let c = compare_pre_part(x, y);
        if c != Ordering::Equal {
            return c;
        }
    }
    Ordering::Equal
}

#[derive(Clone, Debug)]
struct Constraint {
    op: String,
    con: Version,
    dirty: bool,
    minor_dirty: bool,
    patch_dirty: bool,
}

fn is_x(s: &str) -> bool {
    matches!(s, "x" | "X" | "*")
}

fn parse_constraint(c: &str) -> Result<Constraint, String> {
    let m = constraint_re()
        .captures(c)
        .ok_or_else(|| format!("improper constraint: {c}"))?;
    let g = |i: usize| m.get(i).map(|x| x.as_str()).unwrap_or("");
    let (m3, m4, m5, m6) = (g(3), g(4), g(5), g(6));
    let (mut dirty, mut minor_dirty, mut patch_dirty) = (false, false, false);
    let ver = if is_x(m3) || m3.is_empty() {
        dirty = true;
        format!("0.0.0{m6}")
    } else if is_x(m4.trim_start_matches('.')) || m4.is_empty() {
        dirty = true;
        minor_dirty = true;
        format!("{m3}.0.0{m6}")
    } else if is_x(m5.trim_start_matches('.')) || m5.is_empty() {
        dirty = true;
        patch_dirty = true;
        format!("{m3}{m4}.0{m6}")
    } else {
        g(2).to_string()
    };
    let con = Version::parse(&ver).map_err(|_| format!("improper constraint: {c}"))?;
    Ok(Constraint {
        op: g(1).to_string(),
        con,
        dirty,
        minor_dirty,
        patch_dirty,
    })
}

/// A parsed constraint set (`*semver.Constraints`).
#[derive(Clone, Debug)]
pub struct Constraints(Vec<Vec<Constraint>>);

impl Constraints {
    /// `semver.NewConstraint`.
    pub fn parse(c: &str) -> Result<Constraints, String> {
        let c = range_re().replace_all(c, ">= ${1}, <= ${11}").into_owned();
        let mut ors = Vec::new();
        for part in c.split("||") {
            if !valid_re().is_match(part) {
                return Err(format!("improper constraint: {part}"));
            }
            let found: Vec<&str> = find_re().find_iter(part).map(|m| m.as_str()).collect();
            let list: Vec<&str> = if found.is_empty() { vec![part] } else { found };
            ors.push(
                list.into_iter()
                    .map(parse_constraint)
                    .collect::<Result<Vec<_>, _>>()?,
            );
        }
        Ok(Constraints(ors))
    }

    /// `c.Check(v)`.
    pub fn check(&self, v: &Version) -> bool {
        self.0.iter().any(|and| and.iter().all(|c| c.check(v)))
    }
}

impl Constraint {
    fn tilde(&self, v: &Version) -> bool {
        if !v.pre.is_empty() && self.con.pre.is_empty() {
            return false;
        }
        if v.compare(&self.con) == Ordering::Less {
            return false;
        }
        let c = &self.con;
        if c.major == 0 && c.minor == 0 && c.patch == 0 && !self.minor_dirty && !self.patch_dirty {
            return true;
        }
        if v.major != c.major {
            return false;
        }
        if v.minor != c.minor && !self.minor_dirty {
            return false;
        }
        true
    }

    fn check(&self, v: &Version) -> bool {
        let c = &self.con;
        let pre_blocked = !v.pre.is_empty() && c.pre.is_empty();
        match self.op.as_str() {
            "" | "=" => {
                if pre_blocked {
                    return false;
                }
                if self.dirty {
                    return self.tilde(v);
                }
                v.compare(c) == Ordering::Equal
            }
            "!=" => {
                if self.dirty {
                    if pre_blocked {
                        return true;
                    }
                    return !self.tilde(v);
                }
                v.compare(c) != Ordering::Equal
            }
            ">" => {
                if pre_blocked {
                    return false;
                }
                if !self.dirty {
                    return v.compare(c) == Ordering::Greater;
                }
                if v.major != c.major {
                    return v.major > c.major;
                }
                if self.minor_dirty {
                    return false;
                }
                if self.patch_dirty {
                    return v.minor > c.minor;
                }
                v.compare(c) == Ordering::Greater
            }
            "<" => {
                if pre_blocked {
                    return false;
                }
                v.compare(c) == Ordering::Less
            }
            ">=" | "=>" => {
                if pre_blocked {
                    return false;
                }
                v.compare(c) != Ordering::Less
            }
            "<=" | "=<" => {
                if pre_blocked {
                    return false;
                }
                if !self.dirty {
                    return v.compare(c) != Ordering::Greater;
                }
                if v.major != c.major {
                    return v.major < c.major;
                }
                if self.minor_dirty {
                    return true;
                }
                if self.patch_dirty {
                    return v.minor <= c.minor;
                }
                v.compare(c) != Ordering::Greater
            }
            "~" | "~>" => self.tilde(v),
            "^" => {
                if pre_blocked {
                    return false;
                }
                if v.compare(c) == Ordering::Less {
                    return false;
                }
                if c.major > 0 || self.minor_dirty {
                    return v.major == c.major;
                }
                if v.major > 0 {
                    return false;
                }
                if c.minor > 0 || self.patch_dirty {
                    return v.minor == c.minor;
                }
                if v.minor > 0 {
                    return false;
                }
                v.patch == c.patch
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(c: &str, v: &str) -> bool {
        Constraints::parse(c)
            .unwrap()
            .check(&Version::parse(v).unwrap())
    }

    #[test]
    fn versions() {
        let v = Version::parse("v1.2").unwrap();
        assert_eq!(v.original, "v1.2");
        assert_eq!(v.string(), "1.2.0");
        assert!(Version::parse("1.2.3-beta.1+build").is_ok());
        assert!(Version::parse("1.2.3.4").is_err());
        assert!(Version::parse("abc").is_err());
        assert!(Version::parse("1.0.0-01").is_err());
        assert_eq!(
            Version::parse("1.2.3")
                .unwrap()
                .compare(&Version::parse("1.2.4").unwrap()),
            Ordering::Less
        );
        assert_eq!(
            Version::parse("1.0.0-alpha")
                .unwrap()
                .compare(&Version::parse("1.0.0").unwrap()),
            Ordering::Less
        );
        assert_eq!(
            Version::parse("1.0.0-alpha.2")
                .unwrap()
                .compare(&Version::parse("1.0.0-alpha.10").unwrap()),
            Ordering::Less
        );
    }

    #[test]
    fn constraints() {
        assert!(check(">=1.2.3", "1.3.0"));
        assert!(!check("^1.2", "2.0.0"));
        assert!(check("^1.2", "1.9.0"));
        assert!(check("~1.2.3", "1.2.9"));
        assert!(!check("~1.2.3", "1.3.0"));
        assert!(check("1.2.x", "1.2.7"));
        assert!(check("*", "3.0.0"));
        assert!(check(">1.0 <2.0", "1.5.0"));
        assert!(check(">=1.0, <2.0 || >3", "4.0.0"));
        assert!(check("1.1 - 1.3", "1.2.0"));
        assert!(!check("1.1 - 1.3", "1.4.0"));
        assert!(!check(">=1.0.0", "1.2.0-beta"));
        assert!(check(">=1.0.0-0", "1.2.0-beta"));
        assert!(check("^0.2.3", "0.2.9"));
        assert!(!check("^0.2.3", "0.3.0"));
        assert!(check("!=1.2.3", "1.2.4"));
        assert!(Constraints::parse("!!").is_err());
    }
}
