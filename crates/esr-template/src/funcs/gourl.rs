//! Go's `net/url` `Parse` and `URL.String` (sprig's `urlParse`/`urlJoin`). Go's
//! URL model differs from WHATWG URLs (no normalisation, decoded `Path`,
//! opaque URLs), so the `url` crate cannot reproduce it.

use std::collections::BTreeMap;

use crate::func::FuncMap;
use crate::value::{GoType as T, Value};

use super::util::*;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Path,
    Host,
    UserPassword,
    Fragment,
}

fn should_escape(c: u8, mode: Mode) -> bool {
    if c.is_ascii_alphanumeric() {
        return false;
    }
    if mode == Mode::Host
        && matches!(
            c,
            b'!' | b'$'
                | b'&'
                | b'\''
                | b'('
                | b')'
                | b'*'
                | b'+'
                | b','
                | b';'
                | b'='
                | b':'
                | b'['
                | b']'
                | b'<'
                | b'>'
                | b'"'
        )
    {
        return false;
    }
    match c {
        b'-' | b'_' | b'.' | b'~' => return false,
        b'$' | b'&' | b'+' | b',' | b'/' | b':' | b';' | b'=' | b'?' | b'@' => {
            return match mode {
                Mode::Path => c == b'?',
                Mode::UserPassword => matches!(c, b'@' | b'/' | b'?' | b':'),
                Mode::Fragment => false,
                Mode::Host => true,
            };
        }
        _ => {}
    }
    if mode == Mode::Fragment && matches!(c, b'!' | b'(' | b')' | b'*') {
        return false;
    }
    true
}

fn escape(s: &str, mode: Mode) -> String {
    let mut out = String::with_capacity(s.len());
    for &b in s.as_bytes() {
        if should_escape(b, mode) {
            out.push_str(&format!("%{b:02X}"));
        } else {
            out.push(char::from(b));
        }
    }
    out
}

fn unhex(c: u8) -> Option<u8> {
    (c as char).to_digit(16).map(|d| d as u8)
}

fn unescape(s: &str, mode: Mode) -> Result<String, String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                let (Some(h), Some(l)) = (
                    b.get(i + 1).and_then(|c| unhex(*c)),
                    b.get(i + 2).and_then(|c| unhex(*c)),
                ) else {
                    let end = (i + 3).min(b.len());
                    return Err(format!(
                        "invalid URL escape {:?}",
                        String::from_utf8_lossy(&b[i..end])
                    ));
                };
                if mode == Mode::Host && h < 8 && &s[i..i + 3] != "%25" {
                    return Err(format!("invalid URL escape {:?}", &s[i..i + 3]));
                }
                out.push(h * 16 + l);
                i += 3;
            }
            c => {
                if mode == Mode::Host && c < 0x80 && should_escape(c, mode) {
                    return Err(format!(
                        "invalid character {:?} in host name",
                        char::from(c).to_string()
                    ));
                }
                out.push(c);
                i += 1;
            }
        }
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// A parsed URL (the fields sprig exposes).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GoUrl {
    pub scheme: String,
    pub opaque: String,
    pub user: Option<(String, Option<String>)>,
    pub host: String,
    pub path: String,
    pub raw_query: String,
    pub fragment: String,
    pub force_query: bool,
    pub omit_host: bool,
}

fn valid_port(p: &str) -> bool {
    p.is_empty() || (p.starts_with(':') && p[1..].bytes().all(|c| c.is_ascii_digit()))
}

fn parse_host(host: &str) -> Result<String, String> {
    if host.starts_with('[') {
        let i = host
            .rfind(']')
            .ok_or_else(|| "missing ']' in host".to_string())?;
        let port = &host[i + 1..];
        if !valid_port(port) {
            return Err(format!("invalid port {port:?} after host"));
        }
    } else if let Some(i) = host.rfind(':') {
        let port = &host[i..];
        if !valid_port(port) {
            return Err(format!("invalid port {port:?} after host"));
        }
    }
    unescape(host, Mode::Host)
}

impl GoUrl {
    /// `url.Parse`.
    pub fn parse(raw: &str) -> Result<GoUrl, String> {
        let (u, frag) = match raw.split_once('#') {
            Some((a, b)) => (a, b),
            None => (raw, ""),
        };
        if raw.bytes().any(|c| c < 0x20 || c == 0x7f) {
            return Err("net/url: invalid control character in URL".into());
        }
        let mut url = GoUrl::default();
        if u == "*" {
            url.path = "*".into();
        } else {
            let (scheme, mut rest) = get_scheme(u)?;
            url.scheme = scheme.to_ascii_lowercase();
            if rest.ends_with('?') && rest.matches('?').count() == 1 {
                url.force_query = true;
                rest = &rest[..rest.len() - 1];
            } else if let Some((r, q)) = rest.split_once('?') {
                url.raw_query = q.to_string();
                rest = r;
            }
            if !rest.starts_with('/') {
                if !url.scheme.is_empty() {
                    url.opaque = rest.to_string();
                    return url.with_fragment(frag);
                }
                let seg = rest.split('/').next().unwrap_or("");
                if seg.contains(':') {
                    return Err("first path segment in URL cannot contain colon".into());
                }
            }
            if (!url.scheme.is_empty() || !rest.starts_with("///")) && rest.starts_with("//") {
                let auth_rest = &rest[2..];
                let (authority, p) = match auth_rest.find('/') {
                    Some(i) => (&auth_rest[..i], &auth_rest[i..]),
                    None => (auth_rest, ""),
                };
                let (user, host) = parse_authority(authority)?;
                url.user = user;
                url.host = host;
                rest = p;
            } else if !url.scheme.is_empty() && rest.starts_with('/') {
                url.omit_host = true;
            }
            url.path = unescape(rest, Mode::Path)?;
        }
        url.with_fragment(frag)
    }

    fn with_fragment(mut self, frag: &str) -> Result<GoUrl, String> {
        self.fragment = unescape(frag, Mode::Fragment)?;
        Ok(self)
    }

    /// `u.Hostname()`.
    pub fn hostname(&self) -> String {
        let h = &self.host;
        let (host, _) = split_host_port(h);
        host.to_string()
    }

    /// `u.User.String()`.
    pub fn userinfo(&self) -> String {
        match &self.user {
            None => String::new(),
            Some((u, p)) => {
                let mut s = escape(u, Mode::UserPassword);
                if let Some(p) = p {
                    s.push(':');
                    s.push_str(&escape(p, Mode::UserPassword));
                }
                s
            }
        }
    }

    /// `u.String()`.
    pub fn string(&self) -> String {
        let mut buf = String::new();
        if !self.scheme.is_empty() {
            buf.push_str(&self.scheme);
            buf.push(':');
        }
        if !self.opaque.is_empty() {
            buf.push_str(&self.opaque);
        } else {
            if !self.scheme.is_empty() || !self.host.is_empty() || self.user.is_some() {
                if !(self.omit_host && self.host.is_empty() && self.user.is_none()) {
                    if !self.host.is_empty() || !self.path.is_empty() || self.user.is_some() {
                        buf.push_str("//");
                    }
                    if self.user.is_some() {
                        buf.push_str(&self.userinfo());
                        buf.push('@');
                    }
                    if !self.host.is_empty() {
                        buf.push_str(&escape(&self.host, Mode::Host));
                    }
                }
            }
            let path = if self.path == "*" {
                "*".to_string()
            } else {
                escape(&self.path, Mode::Path)
            };
            if !path.is_empty() && !path.starts_with('/') && !self.host.is_empty() {
                buf.push('/');
            }
            if buf.is_empty() && path.split('/').next().unwrap_or("").contains(':') {
                buf.push_str("./");
            }
            buf.push_str(&path);
        }
        if self.force_query || !self.raw_query.is_empty() {
            buf.push('?');
            buf.push_str(&self.raw_query);
        }
        if !self.fragment.is_empty() {
            buf.push('#');
            buf.push_str(&escape(&self.fragment, Mode::Fragment));
        }
        buf
    }
}

fn split_host_port(h: &str) -> (&str, &str) {
    let (mut host, mut port) = (h, "");
    if let Some(i) = h.rfind(':') {
        if valid_port(&h[i..]) {
            host = &h[..i];
            port = &h[i + 1..];
        }
    }
    if host.starts_with('[') && host.ends_with(']') {
        host = &host[1..host.len() - 1];
    }
    (host, port)
}

fn get_scheme(raw: &str) -> Result<(String, &str), String> {
    for (i, c) in raw.bytes().enumerate() {
        if c.is_ascii_alphabetic() {
            continue;
        }
        if c.is_ascii_digit() || c == b'+' || c == b'-' || c == b'.' {
            if i == 0 {
                return Ok((String::new(), raw));
            }
            continue;
        }
        if c == b':' {
            if i == 0 {
                return Err("missing protocol scheme".into());
            }
            return Ok((raw[..i].to_string(), &raw[i + 1..]));
        }
        return Ok((String::new(), raw));
    }
    Ok((String::new(), raw))
}

type User = Option<(String, Option<String>)>;

fn parse_authority(authority: &str) -> Result<(User, String), String> {
    let at = authority.rfind('@');
    let host = parse_host(match at {
        Some(i) => &authority[i + 1..],
        None => authority,
    })?;
    let Some(i) = at else { return Ok((None, host)) };
    let userinfo = &authority[..i];
    if !userinfo
        .bytes()
        .all(|c| c.is_ascii_alphanumeric() || b"-._:~!$&'()*+,;=%@".contains(&c))
    {
        return Err("net/url: invalid userinfo".into());
    }
    let user = match userinfo.split_once(':') {
        None => (unescape(userinfo, Mode::UserPassword)?, None),
        Some((u, p)) => (
            unescape(u, Mode::UserPassword)?,
            Some(unescape(p, Mode::UserPassword)?),
        ),
    };
    Ok((Some(user), host))
}

/// Registers `urlParse` and `urlJoin`.
pub fn install(m: &mut FuncMap) {
    def(m, "urlParse", vec![T::String], |a| {
        let u = GoUrl::parse(s(a, 0)).map_err(|_| perr("unable to parse url"))?;
        let mut d = BTreeMap::new();
        d.insert("scheme".to_string(), Value::str(u.scheme.clone()));
        d.insert("host".to_string(), Value::str(u.host.clone()));
        d.insert("hostname".to_string(), Value::str(u.hostname()));
        d.insert("path".to_string(), Value::str(u.path.clone()));
        d.insert("query".to_string(), Value::str(u.raw_query.clone()));
        d.insert("opaque".to_string(), Value::str(u.opaque.clone()));
        d.insert("fragment".to_string(), Value::str(u.fragment.clone()));
        d.insert("userinfo".to_string(), Value::str(u.userinfo()));
        Ok(Value::map(d))
    });
    def(m, "urlJoin", vec![T::MapStringInterface], |a| {
        let Value::Map(d) = &a[0] else {
            return ok_str("");
        };
        let get = |k: &str| -> Result<String, crate::func::FuncError> {
            match d.get(k) {
                None => Ok(String::new()),
                Some(Value::String(s)) => Ok(s),
                Some(Value::Nil) => Err(perr(NIL_DEREF)),
                Some(_) => Err(perr("unable to parse dictionary value: expected string")),
            }
        };
        let mut u = GoUrl {
            scheme: get("scheme")?,
            host: get("host")?,
            path: get("path")?,
            raw_query: get("query")?,
            opaque: get("opaque")?,
            fragment: get("fragment")?,
            ..GoUrl::default()
        };
        let ui = get("userinfo")?;
        if !ui.is_empty() {
            let t = GoUrl::parse(&format!("proto://{ui}@host"))
                .map_err(|_| perr("unable to parse url userinfo"))?;
            u.user = t.user;
        }
        ok_str(u.string())
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_string() {
        let u = GoUrl::parse("https://user:pa%40ss@example.com:8443/p/a th?q=1&r=2#frag").unwrap();
        assert_eq!(u.scheme, "https");
        assert_eq!(u.host, "example.com:8443");
        assert_eq!(u.hostname(), "example.com");
        assert_eq!(u.path, "/p/a th");
        assert_eq!(u.raw_query, "q=1&r=2");
        assert_eq!(u.fragment, "frag");
        assert_eq!(u.userinfo(), "user:pa%40ss");
        assert_eq!(
            u.string(),
            "https://user:pa%40ss@example.com:8443/p/a%20th?q=1&r=2#frag"
        );
        let u = GoUrl::parse("mailto:joe@example.com").unwrap();
        assert_eq!(u.opaque, "joe@example.com");
        assert_eq!(u.string(), "mailto:joe@example.com");
        assert!(GoUrl::parse("http://[::1").is_err());
        assert!(GoUrl::parse("http://a b.com/").is_err());
        assert!(GoUrl::parse(":foo").is_err());
        assert_eq!(
            GoUrl::parse("https://example.com/x?y=1").unwrap().string(),
            "https://example.com/x?y=1"
        );
        assert_eq!(GoUrl::parse("http://[::1]:80/").unwrap().hostname(), "::1");
        assert_eq!(GoUrl::default().string(), "");
    }
}
