//! Go's `path` package (`Base`, `Dir`, `Clean`, `Ext`, `IsAbs`); on Linux
//! `path/filepath` behaves the same, so sprig's `os*` functions share these.

/// `path.Clean`.
pub fn clean(p: &str) -> String {
    if p.is_empty() {
        return ".".to_string();
    }
    let b = p.as_bytes();
    let n = b.len();
    let rooted = b[0] == b'/';
    let mut out: Vec<u8> = Vec::with_capacity(n);
    let (mut r, mut dotdot) = (0usize, 0usize);
    if rooted {
        out.push(b'/');
        r = 1;
        dotdot = 1;
    }
    while r < n {
        if b[r] == b'/' || (b[r] == b'.' && (r + 1 == n || b[r + 1] == b'/')) {
            r += 1;
        } else if b[r] == b'.' && r + 1 < n && b[r + 1] == b'.' && (r + 2 == n || b[r + 2] == b'/')
        {
            r += 2;
            if out.len() > dotdot {
                let mut w = out.len() - 1;
                while w > dotdot && out[w] != b'/' {
                    w -= 1;
                }
                out.truncate(w);
            } else if !rooted {
                if !out.is_empty() {
                    out.push(b'/');
                }
                out.extend_from_slice(b"..");
                dotdot = out.len();
            }
        } else {
            if (rooted && out.len() != 1) || (!rooted && !out.is_empty()) {
                out.push(b'/');
            }
            while r < n && b[r] != b'/' {
                out.push(b[r]);
                r += 1;
            }
        }
    }
    if out.is_empty() {
        return ".".to_string();
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `path.Base`.
pub fn base(p: &str) -> String {
    if p.is_empty() {
        return ".".to_string();
    }
    let t = p.trim_end_matches('/');
    if t.is_empty() {
        return "/".to_string();
    }
    match t.rfind('/') {
        Some(i) => t[i + 1..].to_string(),
        None => t.to_string(),
    }
}

/// `path.Dir`.
pub fn dir(p: &str) -> String {
    let i = p.rfind('/').map(|i| i + 1).unwrap_or(0);
    clean(&p[..i])
}

/// `path.Ext`.
pub fn ext(p: &str) -> String {
    for (i, c) in p.char_indices().rev() {
        if c == '/' {
            break;
        }
        if c == '.' {
            return p[i..].to_string();
        }
    }
    String::new()
}

/// `path.IsAbs`.
pub fn is_abs(p: &str) -> bool {
    p.starts_with('/')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_path_semantics() {
        assert_eq!(clean("a//b"), "a/b");
        assert_eq!(clean(""), ".");
        assert_eq!(clean("/../a/./b/../c/"), "/a/c");
        assert_eq!(clean("../../x"), "../../x");
        assert_eq!(clean("a/../.."), "..");
        assert_eq!(clean("a/b/../../c"), "c");
        assert_eq!(clean("/"), "/");
        assert_eq!(base(""), ".");
        assert_eq!(base("/a/b/c.txt"), "c.txt");
        assert_eq!(base("///"), "/");
        assert_eq!(base("a/b/"), "b");
        assert_eq!(dir("foo/bar/baz"), "foo/bar");
        assert_eq!(dir(""), ".");
        assert_eq!(dir("/a"), "/");
        assert_eq!(dir("a"), ".");
        assert_eq!(ext("/foo/bar/baz.tar.gz"), ".gz");
        assert_eq!(ext("a.b/c"), "");
        assert!(is_abs("/foo"));
        assert!(!is_abs("foo"));
    }
}
