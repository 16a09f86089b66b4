//! sprig's regex functions over the `regex` crate, with Go RE2 behaviour where
//! the two differ: `\d`, `\w`, `\s`, `\b` are ASCII-only in Go, `\Q…\E` quoting,
//! `regexp.QuoteMeta`'s character set, and `Regexp.Split`'s algorithm.

use regex::Regex;

use crate::func::FuncMap;
use crate::value::{GoType as T, Value};

use super::util::*;

const ERR_INVALID: &str = "invalid regex";

/// Translates a Go RE2 pattern to the `regex` crate's syntax.
pub fn translate(pat: &str) -> String {
    let c: Vec<char> = pat.chars().collect();
    let mut out = String::with_capacity(pat.len() + 8);
    let mut i = 0;
    let mut in_class = false;
    while i < c.len() {
        let ch = c[i];
        if ch == '\\' && i + 1 < c.len() {
            let n = c[i + 1];
            match n {
                'Q' => {
                    // literal text up to \E
                    i += 2;
                    while i < c.len() {
                        if c[i] == '\\' && i + 1 < c.len() && c[i + 1] == 'E' {
                            i += 2;
                            break;
                        }
                        let lit = c[i].to_string();
                        out.push_str(&regex::escape(&lit));
                        i += 1;
                    }
                    continue;
                }
                'd' => out.push_str(if in_class { "0-9" } else { "[0-9]" }),
                'D' => out.push_str("[^0-9]"),
                'w' => out.push_str(if in_class {
                    "0-9A-Za-z_"
                } else {
                    "[0-9A-Za-z_]"
                }),
                'W' => out.push_str("[^0-9A-Za-z_]"),
                's' => out.push_str(if in_class {
                    "\\t\\n\\f\\r "
                } else {
                    "[\\t\\n\\f\\r ]"
                }),
                'S' => out.push_str("[^\\t\\n\\f\\r ]"),
                'b' if !in_class => out.push_str("(?-u:\\b)"),
                'B' if !in_class => out.push_str("(?-u:\\B)"),
                _ => {
                    out.push(ch);
                    out.push(n);
                }
            }
            i += 2;
            continue;
        }
        if in_class {
            if ch == ']' {
                in_class = false;
            }
            out.push(ch);
            i += 1;
            continue;
        }
        if ch == '[' {
            in_class = true;
            out.push(ch);
            i += 1;
            // a leading ']' or '^]' is literal
            if i < c.len() && c[i] == '^' {
                out.push('^');
                i += 1;
            }
            if i < c.len() && c[i] == ']' {
                out.push_str("\\]");
                i += 1;
            }
            continue;
        }
        out.push(ch);
        i += 1;
    }
    out
}

/// `regexp.Compile`.
pub fn compile(pat: &str) -> Result<Regex, String> {
    Regex::new(&translate(pat)).map_err(|e| e.to_string())
}

/// `regexp.QuoteMeta`.
pub fn quote_meta(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 2);
    for c in s.chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// `Regexp.FindAllString(s, n)`.
pub fn find_all(re: &Regex, s: &str, n: i64) -> Vec<String> {
    let it = re.find_iter(s).map(|m| m.as_str().to_string());
    if n < 0 {
        it.collect()
    } else {
        it.take(n as usize).collect()
    }
}

/// `Regexp.Split(s, n)`.
pub fn split(re: &Regex, s: &str, n: i64) -> Vec<String> {
    if n == 0 {
        return Vec::new();
    }
    if !re.as_str().is_empty() && s.is_empty() {
        return vec![String::new()];
    }
    let matches: Vec<(usize, usize)> = {
        let it = re.find_iter(s).map(|m| (m.start(), m.end()));
        if n < 0 {
            it.collect()
        } else {
            it.take(n as usize).collect()
        }
    };
    let mut out = Vec::new();
    let (mut beg, mut end) = (0usize, 0usize);
    for (ms, me) in matches {
        if n > 0 && out.len() as i64 == n - 1 {
            break;
        }
        end = ms;
        if me != 0 {
            out.push(s[beg..end].to_string());
        }
        beg = me;
    }
    if end != s.len() {
        out.push(s[beg..].to_string());
    }
    out
}

/// Expands Go's `$name`/`${name}` replacement template (same syntax as the
/// `regex` crate's, whose `replace_all` is used).
fn replace_all(
    re: &Regex,
    s: &str,
    repl: &str,
    literal: bool,
) -> Result<String, crate::func::FuncError> {
    let matches = re.find_iter(s).count();
    // an expanded `$1` can be as long as the input
    let per = if literal {
        repl.len()
    } else {
        repl.len()
            .saturating_add(repl.matches('$').count().saturating_mul(s.len()))
    };
    check_bytes(matches.saturating_mul(per).saturating_add(s.len()))?;
    Ok(if literal {
        re.replace_all(s, regex::NoExpand(repl)).into_owned()
    } else {
        re.replace_all(s, repl).into_owned()
    })
}

/// Registers the regex functions.
pub fn install(m: &mut FuncMap) {
    use T::{Int, String as S};
    def(m, "regexMatch", vec![S, S], |a| {
        Ok(Value::Bool(
            compile(s(a, 0))
                .map(|r| r.is_match(s(a, 1)))
                .unwrap_or(false),
        ))
    });
    def(m, "mustRegexMatch", vec![S, S], |a| {
        compile(s(a, 0))
            .map(|r| Value::Bool(r.is_match(s(a, 1))))
            .map_err(|_| perr(ERR_INVALID))
    });
    for name in ["regexFindAll", "mustRegexFindAll"] {
        def(m, name, vec![S, S, Int], |a| {
            let re = compile(s(a, 0)).map_err(|_| perr(ERR_INVALID))?;
            Ok(Value::strings(find_all(&re, s(a, 1), int(a, 2))))
        });
    }
    for name in ["regexFind", "mustRegexFind"] {
        def(m, name, vec![S, S], |a| {
            let re = compile(s(a, 0)).map_err(|_| perr(ERR_INVALID))?;
            ok_str(re.find(s(a, 1)).map(|x| x.as_str()).unwrap_or(""))
        });
    }
    for name in ["regexReplaceAll", "mustRegexReplaceAll"] {
        def(m, name, vec![S, S, S], |a| {
            let re = compile(s(a, 0)).map_err(|_| perr(ERR_INVALID))?;
            ok_str(replace_all(&re, s(a, 1), s(a, 2), false)?)
        });
    }
    for name in ["regexReplaceAllLiteral", "mustRegexReplaceAllLiteral"] {
        def(m, name, vec![S, S, S], |a| {
            let re = compile(s(a, 0)).map_err(|_| perr(ERR_INVALID))?;
            ok_str(replace_all(&re, s(a, 1), s(a, 2), true)?)
        });
    }
    for name in ["regexSplit", "mustRegexSplit"] {
        def(m, name, vec![S, S, Int], |a| {
            let re = compile(s(a, 0)).map_err(|_| perr(ERR_INVALID))?;
            Ok(Value::strings(split(&re, s(a, 1), int(a, 2))))
        });
    }
    def(m, "regexQuoteMeta", vec![S], |a| {
        ok_str(quote_meta(s(a, 0)))
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_regex_semantics() {
        let re = compile(r"^\d+$").unwrap();
        assert!(re.is_match("123"));
        assert!(!re.is_match("١٢٣"));
        assert!(compile("[").is_err());
        let re = compile("[2,4,6,8]").unwrap();
        assert_eq!(find_all(&re, "123456789", 2), vec!["2", "4"]);
        let re = compile(r"\p{Lu}").unwrap();
        assert_eq!(find_all(&re, "aBcDéÉ", -1), vec!["B", "D", "É"]);
        let re = compile("a(x*)b").unwrap();
        assert_eq!(
            replace_all(&re, "-ab-axxb-", "${1}W", false).unwrap(),
            "-W-xxW-"
        );
        assert_eq!(replace_all(&re, "-ab-axxb-", "$1W", false).unwrap(), "---");
        assert_eq!(
            replace_all(&re, "-ab-axxb-", "${1}", true).unwrap(),
            "-${1}-${1}-"
        );
        let re = compile("z+").unwrap();
        assert_eq!(split(&re, "pizza", -1), vec!["pi", "a"]);
        assert_eq!(split(&re, "pizza", 1), vec!["pizza"]);
        let re = compile("").unwrap();
        assert_eq!(split(&re, "abc", -1), vec!["a", "b", "c"]);
        assert_eq!(quote_meta("1.5-2.0?"), r"1\.5-2\.0\?");
        let re = compile(r"\Qa.b\E+").unwrap();
        assert!(re.is_match("a.bbb"));
        assert!(!re.is_match("axb"));
        let re = compile(r"[\W]+").unwrap();
        assert_eq!(re.find("abé-!x").map(|m| m.as_str()), Some("é-!"));
        let re = compile(r"[^\D]+").unwrap();
        assert_eq!(re.find("ab12c").map(|m| m.as_str()), Some("12"));
        let re = compile(r"[\d\s]+").unwrap();
        assert_eq!(re.find("ab 12 c").map(|m| m.as_str()), Some(" 12 "));
    }
}
