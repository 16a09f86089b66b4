//! gjson property paths, as ESO uses them for `remoteRef.property`.
//!
//! ESO evaluates `property` with tidwall/gjson. This module wraps tidwall's own Rust port (the
//! `gjson` crate, same syntax: nested `a.b`, escapes `a\.b`, wildcards `a*`/`a?`, array indexes
//! `a.0`, counts `a.#`, projections `a.#.b`, queries `a.#(b=="x")` / `#(...)#`, pipes `|`,
//! modifiers such as `@reverse`/`@this`, multipaths `{a,b}`) and fixes the one place where the port
//! differs from Go's `Result.String()`: a non-integer number is reformatted (`1.50` → `1.5`,
//! `1e3` → `1000`).
//!
//! Values are returned the way Go's `Result.String()` returns them: a JSON string unquoted and
//! unescaped, `true`/`false`, numbers as text, `null` as the empty string, objects and arrays as
//! their raw JSON text (original formatting kept).

/// Evaluates a gjson `path` against `json`. `None` when the path does not exist (gjson's
/// `!Exists()`; note that a JSON `null` exists and yields `Some("")`).
pub fn get(json: &str, path: &str) -> Option<String> {
    let v = ::gjson::get(json, path);
    if !v.exists() {
        return None;
    }
    Some(value_string(&v))
}

/// [`get`] on bytes; `None` when the input is not UTF-8 (Go's gjson would not find JSON there
/// either, except for pathological inputs).
pub fn get_bytes(json: &[u8], path: &str) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(json).ok()?;
    get(text, path).map(String::into_bytes)
}

/// True when `path` exists in `json`.
pub fn exists(json: &str, path: &str) -> bool {
    ::gjson::get(json, path).exists()
}

/// ESO's "literal key first" property lookup (AWS Secrets Manager and others): when the property
/// contains a `.`, it is first tried with every `.` escaped (so a top-level key `a.b` wins), then as
/// a gjson path.
pub fn lookup_property(json: &str, property: &str) -> Option<String> {
    if property.contains('.')
        && let Some(v) = get(json, &escape_dots(property))
    {
        return Some(v);
    }
    get(json, property)
}

/// [`lookup_property`] on bytes.
pub fn lookup_property_bytes(json: &[u8], property: &str) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(json).ok()?;
    lookup_property(text, property).map(String::into_bytes)
}

/// Escapes every `.` as `\.` (Go: `strings.ReplaceAll(p, ".", "\\.")`).
pub fn escape_dots(property: &str) -> String {
    property.replace('.', "\\.")
}

/// Go's `gjson.Result.String()` for a found value.
fn value_string(v: &::gjson::Value<'_>) -> String {
    match v.kind() {
        ::gjson::Kind::Number => {
            let raw = v.json();
            let digits = raw.strip_prefix('-').unwrap_or(raw);
            if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
                raw.to_string()
            } else {
                // strconv.FormatFloat(f, 'f', -1, 64): shortest round-trip, no exponent.
                format!("{}", v.f64())
            }
        }
        _ => v.str().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = r#"{
  "name": {"first": "Tom", "last": "Anderson"},
  "age":37,
  "children": ["Sara","Alex","Jack"],
  "fav.movie": "Deer Hunter",
  "friends": [
    {"first": "Dale", "last": "Murphy", "age": 44, "nets": ["ig", "fb", "tw"]},
    {"first": "Roger", "last": "Craig", "age": 68, "nets": ["fb", "tw"]},
    {"first": "Jane", "last": "Murphy", "age": 47, "nets": ["ig", "tw"]}
  ],
  "pi": 3.140,
  "big": 1e3,
  "neg": -12,
  "t": true,
  "f": false,
  "n": null,
  "esc": "line\nbreak \"q\" \u00e9",
  "a": {"b.c": "literal", "b": {"c": "nested"}}
}"#;

    fn g(path: &str) -> Option<String> {
        get(DOC, path)
    }

    #[test]
    fn basic_paths() {
        assert_eq!(g("name.last").as_deref(), Some("Anderson"));
        assert_eq!(g("age").as_deref(), Some("37"));
        assert_eq!(g("children").as_deref(), Some(r#"["Sara","Alex","Jack"]"#));
        assert_eq!(g("children.0").as_deref(), Some("Sara"));
        assert_eq!(g("children.2").as_deref(), Some("Jack"));
        assert_eq!(g("children.3"), None);
        assert_eq!(g("friends.1.first").as_deref(), Some("Roger"));
        assert_eq!(g("missing"), None);
        assert_eq!(g("name.middle"), None);
    }

    #[test]
    fn objects_keep_raw_text() {
        assert_eq!(
            g("name").as_deref(),
            Some(r#"{"first": "Tom", "last": "Anderson"}"#)
        );
    }

    #[test]
    fn wildcards_and_escapes() {
        assert_eq!(g("child*.2").as_deref(), Some("Jack"));
        assert_eq!(g("c?ildren.0").as_deref(), Some("Sara"));
        assert_eq!(g(r"fav\.movie").as_deref(), Some("Deer Hunter"));
        assert_eq!(g("fav.movie"), None);
    }

    #[test]
    fn arrays_counts_and_projections() {
        assert_eq!(g("friends.#").as_deref(), Some("3"));
        assert_eq!(g("friends.#.age").as_deref(), Some("[44,68,47]"));
        assert_eq!(g("friends|#").as_deref(), Some("3"));
    }

    #[test]
    fn queries() {
        assert_eq!(
            g(r#"friends.#(last=="Murphy").first"#).as_deref(),
            Some("Dale")
        );
        assert_eq!(
            g(r#"friends.#(last=="Murphy")#.first"#).as_deref(),
            Some(r#"["Dale","Jane"]"#)
        );
        assert_eq!(
            g("friends.#(age>45)#.last").as_deref(),
            Some(r#"["Craig","Murphy"]"#)
        );
        assert_eq!(
            g(r#"friends.#(first%"D*").last"#).as_deref(),
            Some("Murphy")
        );
        assert_eq!(
            g(r#"friends.#(first!%"D*").last"#).as_deref(),
            Some("Craig")
        );
        assert_eq!(
            g(r#"friends.#(nets.#(=="fb"))#.first"#).as_deref(),
            Some(r#"["Dale","Roger"]"#)
        );
    }

    #[test]
    fn modifiers() {
        assert_eq!(
            g("children.@reverse").as_deref(),
            Some(r#"["Jack","Alex","Sara"]"#)
        );
        assert_eq!(g("children.@reverse.0").as_deref(), Some("Jack"));
    }

    #[test]
    fn scalar_strings_follow_go_result_string() {
        assert_eq!(g("pi").as_deref(), Some("3.14"));
        assert_eq!(g("big").as_deref(), Some("1000"));
        assert_eq!(g("neg").as_deref(), Some("-12"));
        assert_eq!(g("t").as_deref(), Some("true"));
        assert_eq!(g("f").as_deref(), Some("false"));
        assert_eq!(g("n").as_deref(), Some(""));
        assert_eq!(g("esc").as_deref(), Some("line\nbreak \"q\" é"));
    }

    #[test]
    fn literal_key_first() {
        assert_eq!(lookup_property(DOC, "a.b.c").as_deref(), Some("nested"));
        let doc = r#"{"a.b": "literal", "a": {"b": "nested"}}"#;
        assert_eq!(lookup_property(doc, "a.b").as_deref(), Some("literal"));
        let doc = r#"{"a": {"b": "nested"}}"#;
        assert_eq!(lookup_property(doc, "a.b").as_deref(), Some("nested"));
        assert_eq!(lookup_property(doc, "a.c"), None);
        assert_eq!(
            lookup_property(doc, "a").as_deref(),
            Some(r#"{"b": "nested"}"#)
        );
        assert_eq!(escape_dots("x.y.z"), r"x\.y\.z");
    }

    #[test]
    fn non_json_and_bytes() {
        assert_eq!(get("not json", "a"), None);
        assert_eq!(get_bytes(&[0xff, 0xfe], "a"), None);
        assert_eq!(get_bytes(br#"{"a":"b"}"#, "a"), Some(b"b".to_vec()));
        assert!(exists(r#"{"a":null}"#, "a"));
        assert_eq!(
            lookup_property_bytes(br#"{"a.b":"x"}"#, "a.b"),
            Some(b"x".to_vec())
        );
    }
}
