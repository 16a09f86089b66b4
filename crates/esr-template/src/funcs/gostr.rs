//! String helpers with the exact semantics of Go's `strings`/`unicode` and of the
//! libraries sprig delegates to (Masterminds/goutils, huandu/xstrings).
//!
//! Go maps case per rune with *simple* case mappings (`ToUpper('ß')` is `ß`,
//! `ToLower('Σ')` is always `σ`), unlike Rust's `str::to_uppercase`.

/// Go's `unicode.ToUpper` (simple mapping: unchanged when the full mapping
/// expands to several characters).
pub fn rune_upper(c: char) -> char {
    let mut it = c.to_uppercase();
    match (it.next(), it.next()) {
        (Some(u), None) => u,
        _ => c,
    }
}

/// Go's `unicode.ToLower` (simple mapping).
pub fn rune_lower(c: char) -> char {
    let mut it = c.to_lowercase();
    match (it.next(), it.next()) {
        (Some(l), None) => l,
        // U+0130 'İ' lowercases to 'i' in Go's simple mapping.
        (Some(l), Some(_)) if c == '\u{130}' => l,
        _ => c,
    }
}

/// Go's `unicode.ToTitle`.
pub fn rune_title(c: char) -> char {
    match c {
        '\u{1C4}'..='\u{1C6}' => '\u{1C5}',
        '\u{1C7}'..='\u{1C9}' => '\u{1C8}',
        '\u{1CA}'..='\u{1CC}' => '\u{1CB}',
        '\u{1F1}'..='\u{1F3}' => '\u{1F2}',
        _ => rune_upper(c),
    }
}

/// Go's `unicode.IsUpper` (category Lu; Rust's property also covers Lt-like
/// "Other_Uppercase" letters, which Go does not).
pub fn is_upper(c: char) -> bool {
    c.is_uppercase()
        && !('\u{2160}'..='\u{216F}').contains(&c)
        && !('\u{24B6}'..='\u{24CF}').contains(&c)
}

/// Go's `unicode.IsLower`.
pub fn is_lower(c: char) -> bool {
    c.is_lowercase()
        && !('\u{2170}'..='\u{217F}').contains(&c)
        && !('\u{24D0}'..='\u{24E9}').contains(&c)
}

/// Go's `unicode.IsTitle` (category Lt).
pub fn is_title(c: char) -> bool {
    matches!(c, '\u{1C5}' | '\u{1C8}' | '\u{1CB}' | '\u{1F2}')
        || ('\u{1F88}'..='\u{1F8F}').contains(&c)
        || ('\u{1F98}'..='\u{1F9F}').contains(&c)
        || ('\u{1FA8}'..='\u{1FAF}').contains(&c)
        || matches!(c, '\u{1FBC}' | '\u{1FCC}' | '\u{1FFC}')
}

/// Go's `unicode.IsPunct` (categories P*), for the characters that matter.
pub fn is_punct(c: char) -> bool {
    if c.is_ascii() {
        return matches!(
            c,
            '!' | '"'
                | '#'
                | '%'
                | '&'
                | '\''
                | '('
                | ')'
                | '*'
                | ','
                | '-'
                | '.'
                | '/'
                | ':'
                | ';'
                | '?'
                | '@'
                | '['
                | '\\'
                | ']'
                | '_'
                | '{'
                | '}'
        );
    }
    matches!(
        c,
        '\u{A1}' | '\u{A7}' | '\u{AB}' | '\u{B6}' | '\u{B7}' | '\u{BB}' | '\u{BF}'
    ) || ('\u{2010}'..='\u{2027}').contains(&c)
        || ('\u{2030}'..='\u{2043}').contains(&c)
        || ('\u{2045}'..='\u{2051}').contains(&c)
        || ('\u{2053}'..='\u{205E}').contains(&c)
        || ('\u{3001}'..='\u{3003}').contains(&c)
        || ('\u{3008}'..='\u{3011}').contains(&c)
        || ('\u{FF01}'..='\u{FF03}').contains(&c)
}

/// Go's `unicode.IsSpace`.
pub fn is_space(c: char) -> bool {
    c.is_whitespace()
}

/// `strings.ToUpper`.
pub fn to_upper(s: &str) -> String {
    s.chars().map(rune_upper).collect()
}

/// `strings.ToLower`.
pub fn to_lower(s: &str) -> String {
    s.chars().map(rune_lower).collect()
}

/// `strings.Title` (deprecated in Go but used by sprig's `title`).
pub fn title(s: &str) -> String {
    fn is_separator(r: char) -> bool {
        if r.is_ascii() {
            return !(r.is_ascii_alphanumeric() || r == '_');
        }
        if r.is_alphabetic() || r.is_numeric() {
            return false;
        }
        is_space(r)
    }
    let mut prev = ' ';
    s.chars()
        .map(|r| {
            let out = if is_separator(prev) { rune_title(r) } else { r };
            prev = r;
            out
        })
        .collect()
}

/// goutils `Uncapitalize`: lowercases the first rune of each whitespace-separated word.
pub fn untitle(s: &str) -> String {
    let mut next = true;
    s.chars()
        .map(|c| {
            if is_space(c) {
                next = true;
                c
            } else if next {
                next = false;
                rune_lower(c)
            } else {
                c
            }
        })
        .collect()
}

/// goutils `SwapCase`.
pub fn swapcase(s: &str) -> String {
    s.chars()
        .map(|c| {
            if is_upper(c) || is_title(c) {
                rune_lower(c)
            } else if is_lower(c) {
                rune_upper(c)
            } else {
                c
            }
        })
        .collect()
}

/// goutils `Initials`: works on *bytes*; each byte becomes a rune (Latin-1).
pub fn initials(s: &str) -> String {
    let mut out = String::new();
    let mut last_gap = true;
    for &b in s.as_bytes() {
        let c = char::from(b);
        if is_space(c) {
            last_gap = true;
        } else if last_gap {
            out.push(c);
            last_gap = false;
        }
    }
    out
}

/// goutils `DeleteWhiteSpace`.
pub fn nospace(s: &str) -> String {
    s.chars().filter(|c| !is_space(*c)).collect()
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// goutils `AbbreviateFull` (errors become the empty string, as sprig ignores them).
pub fn abbreviate_full(s: &str, offset: i64, max_width: i64) -> String {
    let b = s.as_bytes();
    let len = b.len() as i64;
    if s.is_empty() || max_width < 4 {
        return String::new();
    }
    if len <= max_width {
        return s.to_string();
    }
    let mut offset = offset.min(len);
    if len.saturating_sub(offset) < max_width - 3 {
        offset = len - (max_width - 3);
    }
    if offset <= 4 {
        return format!("{}...", lossy(&b[..(max_width - 3) as usize]));
    }
    if max_width < 7 {
        return String::new();
    }
    if offset.saturating_add(max_width - 3) < len {
        let rest = lossy(&b[offset as usize..]);
        return format!("...{}", abbreviate_full(&rest, 0, max_width - 3));
    }
    format!("...{}", lossy(&b[(len - (max_width - 3)) as usize..]))
}

/// sprig `abbrev`.
pub fn abbrev(width: i64, s: &str) -> String {
    if width < 4 {
        return s.to_string();
    }
    abbreviate_full(s, 0, width)
}

/// sprig `abbrevboth`.
pub fn abbrevboth(left: i64, right: i64, s: &str) -> String {
    if right < 4 || (left > 0 && right < 7) {
        return s.to_string();
    }
    abbreviate_full(s, left, right)
}

/// goutils `WrapCustom` (byte offsets, spaces only).
pub fn wrap_custom(s: &str, wrap_length: i64, newline: &str, wrap_long_words: bool) -> String {
    if s.is_empty() {
        return String::new();
    }
    let newline = if newline.is_empty() { "\n" } else { newline };
    let wl = wrap_length.max(1) as usize;
    let b = s.as_bytes();
    let n = b.len();
    let mut offset = 0usize;
    let mut out: Vec<u8> = Vec::with_capacity(n + 8);
    while n - offset > wl {
        if b[offset] == b' ' {
            offset += 1;
            continue;
        }
        let end = (wl + offset + 1).min(n);
        let space = b[offset..end].iter().rposition(|&c| c == b' ');
        if let Some(sp) = space {
            let at = sp + offset;
            out.extend_from_slice(&b[offset..at]);
            out.extend_from_slice(newline.as_bytes());
            offset = at + 1;
        } else if wrap_long_words {
            out.extend_from_slice(&b[offset..offset + wl]);
            out.extend_from_slice(newline.as_bytes());
            offset += wl;
        } else {
            let end = wl + offset;
            match b[end..].iter().position(|&c| c == b' ') {
                None => {
                    out.extend_from_slice(&b[offset..]);
                    offset = n;
                }
                Some(i) => {
                    let at = i + end;
                    out.extend_from_slice(&b[offset..at]);
                    out.extend_from_slice(newline.as_bytes());
                    offset = at + 1;
                }
            }
        }
    }
    out.extend_from_slice(&b[offset.min(n)..]);
    lossy(&out)
}

/// sprig `trunc`.
pub fn trunc(c: i64, s: &str) -> String {
    let b = s.as_bytes();
    let len = b.len() as i64;
    if c < 0 && len + c > 0 {
        return lossy(&b[(len + c) as usize..]);
    }
    if c >= 0 && len > c {
        return lossy(&b[..c as usize]);
    }
    s.to_string()
}

/// sprig `substr`; `Err` is Go's slice-bounds panic.
pub fn substr(start: i64, end: i64, s: &str) -> Result<String, String> {
    let b = s.as_bytes();
    let len = b.len() as i64;
    let oob = |lo: i64, hi: i64| format!("runtime error: slice bounds out of range [{lo}:{hi}]");
    if start < 0 {
        if end < 0 || end > len {
            return Err(if end < 0 {
                format!("runtime error: slice bounds out of range [:{end}]")
            } else {
                format!("runtime error: slice bounds out of range [:{end}] with length {len}")
            });
        }
        return Ok(lossy(&b[..end as usize]));
    }
    if end < 0 || end > len {
        if start > len {
            return Err(format!(
                "runtime error: slice bounds out of range [{start}:{len}]"
            ));
        }
        return Ok(lossy(&b[start as usize..]));
    }
    if start > end {
        return Err(oob(start, end));
    }
    Ok(lossy(&b[start as usize..end as usize]))
}

/// sprig `indent`.
pub fn indent(spaces: i64, s: &str) -> String {
    let pad = " ".repeat(spaces.max(0) as usize);
    format!("{pad}{}", s.replace('\n', &format!("\n{pad}")))
}

/// Go's `strings.Replace(s, old, new, -1)` (an empty `old` inserts `new`
/// around every rune).
pub fn replace_all(s: &str, old: &str, new: &str) -> String {
    if old.is_empty() {
        let mut out = String::with_capacity(s.len() + new.len() * (s.len() + 1));
        out.push_str(new);
        for c in s.chars() {
            out.push(c);
            out.push_str(new);
        }
        return out;
    }
    s.replace(old, new)
}

/// Go's `strings.Split(s, sep)` (empty `sep` splits into runes).
pub fn split(s: &str, sep: &str) -> Vec<String> {
    if sep.is_empty() {
        return s.chars().map(String::from).collect();
    }
    s.split(sep).map(String::from).collect()
}

/// Go's `strings.SplitN(s, sep, n)`.
pub fn splitn(s: &str, sep: &str, n: i64) -> Vec<String> {
    if n == 0 {
        return Vec::new();
    }
    if n < 0 {
        return split(s, sep);
    }
    let n = n as usize;
    if sep.is_empty() {
        let chars: Vec<char> = s.chars().collect();
        if chars.len() <= n {
            return chars.into_iter().map(String::from).collect();
        }
        let mut out: Vec<String> = chars[..n - 1].iter().map(|c| c.to_string()).collect();
        out.push(chars[n - 1..].iter().collect());
        return out;
    }
    s.splitn(n, sep).map(String::from).collect()
}

/// Go's `strings.Trim(s, cutset)`.
pub fn trim_cutset(s: &str, cutset: &str) -> String {
    s.trim_matches(|c| cutset.contains(c)).to_string()
}

/// huandu/xstrings `ToPascalCase`.
pub fn pascal_case(s: &str) -> String {
    let is_conn = |r: char| r == '-' || r == '_' || is_space(r);
    let chars: Vec<char> = s.chars().collect();
    if chars.is_empty() {
        return String::new();
    }
    let mut out = String::new();
    let mut i = 0;
    let mut r0 = '\0';
    let mut first_upper = false;
    let mut found = false;
    while i < chars.len() {
        r0 = chars[i];
        i += 1;
        if !is_conn(r0) {
            first_upper = is_upper(r0);
            r0 = rune_upper(r0);
            found = true;
            break;
        }
        out.push(r0);
    }
    if i >= chars.len() {
        if found {
            out.push(r0);
        }
        return out;
    }
    while i < chars.len() {
        let r1 = r0;
        r0 = chars[i];
        i += 1;
        if is_conn(r0) && is_conn(r1) {
            out.push(r1);
            continue;
        }
        if is_conn(r1) {
            first_upper = is_upper(r0);
            r0 = rune_upper(r0);
        } else {
            if first_upper {
                if is_upper(r0) {
                    r0 = rune_lower(r0);
                } else {
                    first_upper = false;
                }
            }
            out.push(r1);
        }
    }
    out.push(r0);
    out
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum WordType {
    Invalid,
    Number,
    UpperCase,
    Alphabet,
    Connector,
    Punct,
    Other,
}

fn is_alphabet(r: char) -> bool {
    r.is_ascii_alphabetic()
}

fn is_connector(r: char) -> bool {
    r == '-' || r == '_' || is_space(r)
}

fn next_word(s: &[char]) -> (WordType, &[char], &[char]) {
    if s.is_empty() {
        return (WordType::Invalid, s, s);
    }
    let r = s[0];
    let mut off = 1usize;
    let wt;
    if is_connector(r) {
        wt = WordType::Connector;
        while off < s.len() && is_connector(s[off]) {
            off += 1;
        }
    } else if is_punct(r) {
        wt = WordType::Punct;
        while off < s.len() && is_punct(s[off]) {
            off += 1;
        }
    } else if is_upper(r) {
        wt = WordType::UpperCase;
        if off < s.len() {
            let r2 = s[off];
            if is_upper(r2) {
                off += 1;
                while off < s.len() && is_upper(s[off]) {
                    off += 1;
                }
                if off < s.len() && is_alphabet(s[off]) {
                    off -= 1;
                }
            } else if is_alphabet(r2) {
                off += 1;
                while off < s.len() && is_alphabet(s[off]) && !is_upper(s[off]) {
                    off += 1;
                }
            }
        }
    } else if is_alphabet(r) {
        wt = WordType::Alphabet;
        while off < s.len() && is_alphabet(s[off]) && !is_upper(s[off]) {
            off += 1;
        }
    } else if r.is_numeric() {
        wt = WordType::Number;
        while off < s.len() && s[off].is_numeric() {
            off += 1;
        }
    } else {
        wt = WordType::Other;
        while off < s.len() {
            let c = s[off];
            if is_connector(c) || is_alphabet(c) || c.is_numeric() || is_punct(c) {
                break;
            }
            off += 1;
        }
    }
    (wt, &s[..off], &s[off..])
}

fn to_lower_word(out: &mut String, wt: WordType, word: &[char], conn: char) {
    if wt != WordType::UpperCase && wt != WordType::Connector {
        out.extend(word.iter());
        return;
    }
    for &r in word {
        if is_connector(r) {
            out.push(conn);
        } else if is_upper(r) {
            out.push(rune_lower(r));
        } else {
            out.push(r);
        }
    }
}

/// huandu/xstrings `camelCaseToLowerCase` (`ToSnakeCase` with `_`, `ToKebabCase` with `-`).
pub fn camel_to_lower(s: &str, conn: char) -> String {
    use WordType::*;
    let chars: Vec<char> = s.chars().collect();
    if chars.is_empty() {
        return String::new();
    }
    let mut out = String::new();
    let (mut wt, mut word, mut rem) = next_word(&chars);
    while !rem.is_empty() {
        if wt != Connector {
            to_lower_word(&mut out, wt, word, conn);
        }
        let prev = wt;
        let last = word;
        (wt, word, rem) = next_word(rem);
        match prev {
            Number => {
                while wt == Alphabet || wt == Number {
                    to_lower_word(&mut out, wt, word, conn);
                    (wt, word, rem) = next_word(rem);
                }
                if wt != Invalid && wt != Punct && wt != Connector {
                    out.push(conn);
                }
            }
            Connector => to_lower_word(&mut out, prev, last, conn),
            Punct => {}
            _ => {
                if wt != Number {
                    if wt != Connector && wt != Punct {
                        out.push(conn);
                    }
                    continue;
                }
                if rem.is_empty() {
                    continue;
                }
                let last = word;
                (wt, word, rem) = next_word(rem);
                if wt != Alphabet {
                    to_lower_word(&mut out, Number, last, conn);
                    if wt != Connector && wt != Punct {
                        out.push(conn);
                    }
                    continue;
                }
                out.push(conn);
                to_lower_word(&mut out, Number, last, conn);
                while wt == Alphabet || wt == Number {
                    to_lower_word(&mut out, wt, word, conn);
                    (wt, word, rem) = next_word(rem);
                }
                if wt != Invalid && wt != Connector && wt != Punct {
                    out.push(conn);
                }
            }
        }
    }
    to_lower_word(&mut out, wt, word, conn);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn case_mapping_is_per_rune() {
        assert_eq!(to_upper("straße élan ǆ"), "STRAßE ÉLAN Ǆ");
        assert_eq!(to_lower("İSTANBUL ΣΑΣ"), "istanbul σασ");
        assert_eq!(to_lower("HeLLo WÖRLD"), "hello wörld");
    }

    #[test]
    fn title_untitle_swapcase_initials() {
        assert_eq!(title("o'neil is here"), "O'Neil Is Here");
        assert_eq!(title("snake_case word 3rd x1y"), "Snake_case Word 3rd X1y");
        assert_eq!(untitle("Hello World"), "hello world");
        assert_eq!(swapcase("This Is A.Test"), "tHIS iS a.tEST");
        assert_eq!(initials("First Try"), "FT");
        assert_eq!(nospace("a b\tc\nd  e"), "abcde");
    }

    #[test]
    fn abbreviations() {
        assert_eq!(abbrev(5, "hello world"), "he...");
        assert_eq!(abbrev(3, "hello world"), "hello world");
        assert_eq!(abbrev(20, "hello"), "hello");
        assert_eq!(abbrevboth(5, 10, "1234 5678 9123"), "...5678...");
        assert_eq!(abbrevboth(0, 3, "abcdef"), "abcdef");
    }

    #[test]
    fn wrapping() {
        assert_eq!(
            wrap_custom("supercalifragilistic is long", 5, "", false),
            "supercalifragilistic\nis\nlong"
        );
        assert_eq!(wrap_custom("Hello World", 5, "\t", true), "Hello\tWorld");
        assert_eq!(
            wrap_custom("one two three four five", 10, "<br>", true),
            "one two<br>three four<br>five"
        );
        assert_eq!(wrap_custom("abcdefghij", 3, "\n", true), "abc\ndef\nghi\nj");
    }

    #[test]
    fn trunc_substr_indent() {
        assert_eq!(trunc(-5, "hello world"), "world");
        assert_eq!(trunc(-50, "abc"), "abc");
        assert_eq!(trunc(2, "abc"), "ab");
        assert_eq!(substr(2, 4, "abcdef").unwrap(), "cd");
        assert_eq!(substr(-1, 2, "abcdef").unwrap(), "ab");
        assert_eq!(substr(2, -1, "abcdef").unwrap(), "cdef");
        assert_eq!(substr(1, 99, "abc").unwrap(), "bc");
        assert!(substr(4, 2, "abcdef").is_err());
        assert!(substr(9, -1, "abc").is_err());
        assert_eq!(indent(2, "a\n"), "  a\n  ");
    }

    #[test]
    fn replace_split() {
        assert_eq!(replace_all("abc", "", "x"), "xaxbxcx");
        assert_eq!(replace_all("a b c", " ", ""), "abc");
        assert_eq!(split("", ","), vec![""]);
        assert_eq!(splitn("k:v:w", ":", 2), vec!["k", "v:w"]);
        assert_eq!(trim_cutset("$$5.00$", "$"), "5.00");
    }

    #[test]
    fn xstrings_cases() {
        assert_eq!(camel_to_lower("already_snake", '_'), "already_snake");
        assert_eq!(camel_to_lower("Some Title Case", '_'), "some_title_case");
        assert_eq!(camel_to_lower("http2xx", '_'), "http_2xx");
        assert_eq!(camel_to_lower("HTTPServer", '_'), "http_server");
        assert_eq!(camel_to_lower("NoHTTPS", '_'), "no_https");
        assert_eq!(camel_to_lower("HTTP20xOK", '_'), "http_20x_ok");
        assert_eq!(camel_to_lower("Duration2m3s", '_'), "duration_2m3s");
        assert_eq!(camel_to_lower("Bld4Floor3rd", '_'), "bld4_floor_3rd");
        assert_eq!(camel_to_lower("FirstName", '-'), "first-name");
        assert_eq!(
            camel_to_lower("Some_Mixed caseString", '-'),
            "some-mixed-case-string"
        );
        assert_eq!(pascal_case("some-words here"), "SomeWordsHere");
        assert_eq!(pascal_case("_complex__case_"), "_Complex_Case_");
        assert_eq!(pascal_case("GOLANG_IS_GREAT"), "GolangIsGreat");
        assert_eq!(pascal_case("x"), "X");
    }
}
