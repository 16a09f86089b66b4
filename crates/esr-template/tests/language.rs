//! The text/template language feature by feature, with Go's exact outputs and
//! error texts (builtins only, plus small test functions with Go signatures).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::any::Any;
use std::collections::BTreeMap;

use esr_template::{
    ExecOptions, FuncDef, FuncError, FuncMap, GoObject, GoType, Signature, Template, Value,
};

#[derive(Debug)]
struct Point {
    x: i64,
}

impl GoObject for Point {
    fn type_name(&self) -> String {
        "*test.Point".into()
    }
    fn field(&self, name: &str) -> Option<Value> {
        (name == "X").then_some(Value::Int(self.x))
    }
    fn method(&self, name: &str) -> Option<Signature> {
        match name {
            "Add" => Some(Signature::fixed(vec![GoType::Int])),
            "String" => Some(Signature::fixed(vec![])),
            _ => None,
        }
    }
    fn call_method(&self, name: &str, args: &[Value]) -> Result<Value, FuncError> {
        match name {
            "Add" => Ok(Value::Int(self.x + args[0].as_i64().unwrap_or(0))),
            _ => Ok(Value::str(format!("P({})", self.x))),
        }
    }
    fn format_v(&self) -> String {
        format!("P({})", self.x)
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

fn funcs() -> FuncMap {
    let mut m = FuncMap::new();
    m.insert(FuncDef::new("int", vec![GoType::Int], |a| {
        Ok(Value::Int(a[0].as_i64().unwrap_or(0) * 2))
    }));
    m.insert(FuncDef::new("float", vec![GoType::Float64], |a| {
        Ok(a[0].clone())
    }));
    m.insert(FuncDef::new("uint", vec![GoType::Uint], |a| {
        Ok(a[0].clone())
    }));
    m.insert(FuncDef::new("str", vec![GoType::String], |a| {
        Ok(a[0].clone())
    }));
    m.insert(FuncDef::new("i64", vec![], |_| Ok(Value::Int64(2))));
    m.insert(FuncDef::variadic("list", vec![], GoType::Interface, |a| {
        Ok(Value::list(a.to_vec()))
    }));
    m.insert(FuncDef::variadic(
        "cat",
        vec![GoType::String],
        GoType::String,
        |a| {
            Ok(Value::str(
                a.iter()
                    .filter_map(|v| v.as_str())
                    .collect::<Vec<_>>()
                    .join("+"),
            ))
        },
    ));
    m.insert(FuncDef::new("fails", vec![], |_| {
        Err(FuncError::public("boom"))
    }));
    m.insert(FuncDef::new("point", vec![GoType::Int], |a| {
        Ok(Value::object(Point {
            x: a[0].as_i64().unwrap_or(0),
        }))
    }));
    m.insert(FuncDef::new("adder", vec![], |_| {
        Ok(FuncDef::new("add2", vec![GoType::Int, GoType::Int], |a| {
            Ok(Value::Int(
                a[0].as_i64().unwrap_or(0) + a[1].as_i64().unwrap_or(0),
            ))
        })
        .to_value())
    }));
    m.insert(FuncDef::new(
        "dict1",
        vec![GoType::String, GoType::Interface],
        |a| {
            Ok(Value::map(BTreeMap::from([(
                a[0].as_str().unwrap_or("").to_string(),
                a[1].clone(),
            )])))
        },
    ));
    m
}

fn data() -> BTreeMap<String, Vec<u8>> {
    BTreeMap::from([
        ("user".to_string(), b"admin".to_vec()),
        ("empty".to_string(), Vec::new()),
        ("b".to_string(), b"2".to_vec()),
        ("a".to_string(), b"1".to_vec()),
    ])
}

fn run_opts(text: &str, opts: &ExecOptions) -> Result<String, String> {
    let f = funcs();
    let t = Template::parse("key", text, &f).map_err(|e| e.to_string())?;
    t.execute_data(&f, &data(), opts)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .map_err(|e| e.to_string())
}

fn run(text: &str) -> Result<String, String> {
    run_opts(text, &ExecOptions::default())
}

fn ok(text: &str) -> String {
    run(text).unwrap_or_else(|e| panic!("{text}: {e}"))
}

fn err(text: &str) -> String {
    match run(text) {
        Ok(o) => panic!("{text}: expected an error, got {o:?}"),
        Err(e) => e,
    }
}

#[test]
fn text_fields_and_printing() {
    assert_eq!(ok("hello {{ .user }}!"), "hello admin!");
    assert_eq!(ok("{{ . }}"), "map[a:1 b:2 empty: user:admin]");
    assert_eq!(ok("{{ $ }}"), ok("{{ . }}"));
    assert_eq!(ok("{{ index . \"user\" }}"), "admin");
    assert_eq!(ok("[{{ index . \"nope\" }}]"), "[]");
    assert_eq!(ok("{{ list 1 \"a\" nil (list) }}"), "[1 a <nil> []]");
    assert_eq!(
        ok("{{ dict1 \"k\" nil }}|{{ (dict1 \"k\" nil).k }}"),
        "map[k:<nil>]|<no value>"
    );
    assert_eq!(
        ok("{{ point 3 }}|{{ (point 3).X }}|{{ (point 3).Add 4 }}"),
        "P(3)|3|7"
    );
}

#[test]
fn missing_keys_and_field_errors() {
    assert_eq!(
        err("{{ .missing }}"),
        "template: key:1:3: executing \"key\" at <.missing>: map has no entry for key \"missing\""
    );
    assert_eq!(
        err("{{ .user.name }}"),
        "template: key:1:8: executing \"key\" at <.user.name>: can't evaluate field name in type string"
    );
    assert_eq!(
        err("{{ .a 1 }}"),
        "template: key:1:3: executing \"key\" at <.a>: a is not a method but has arguments"
    );
    assert_eq!(
        err("{{ (dict1 \"k\" nil).k.x }}"),
        "template: key:1:14: executing \"key\" at <nil>: nil pointer evaluating interface {}.x"
    );
    assert_eq!(
        err("{{ (point 1).Nope }}"),
        "template: key:1:10: executing \"key\" at <1>: can't evaluate field Nope in type *test.Point"
    );
    assert_eq!(
        err("{{ (point 1).Add }}"),
        "template: key:1:10: executing \"key\" at <1>: wrong number of args for Add: want 1 got 0"
    );
    assert_eq!(
        err("{{ (point 1).X 2 }}"),
        "template: key:1:10: executing \"key\" at <1>: X has arguments but cannot be invoked as function"
    );
    // without missingkey=error, a missing key prints <no value>
    let opts = ExecOptions {
        missingkey_error: false,
        ..ExecOptions::default()
    };
    assert_eq!(run_opts("{{ .missing }}", &opts).unwrap(), "<no value>");
    // ...and so does a field of a missing key (Go's invalid value), while a field of a nil
    // value is still an error.
    assert_eq!(run_opts("{{ .missing.x.y }}", &opts).unwrap(), "<no value>");
    assert_eq!(
        run_opts("{{ (dict1 \"k\" nil).k.x }}", &opts).unwrap_err(),
        "template: key:1:14: executing \"key\" at <nil>: nil pointer evaluating interface {}.x"
    );
}

#[test]
fn variables_scoping_and_assignment() {
    assert_eq!(
        ok("{{ $x := \"o\" }}{{ if true }}{{ $x := \"i\" }}{{ $x }}{{ end }}{{ $x }}"),
        "io"
    );
    assert_eq!(
        ok("{{ $x := 1 }}{{ range list 1 2 }}{{ $x = . }}{{ end }}{{ $x }}"),
        "2"
    );
    assert_eq!(ok("{{ with $x := .user }}{{ $x }}{{ end }}"), "admin");
    assert_eq!(
        ok("{{ with $x := .empty }}y{{ else }}[{{ $x }}]{{ end }}"),
        "[]"
    );
    assert_eq!(ok("{{ range list 1 }}{{ $.user }}{{ end }}"), "admin");
    assert_eq!(
        err("{{ range $v := list 1 }}{{ end }}{{ $v }}"),
        "template: key:1: undefined variable \"$v\""
    );
    assert_eq!(
        err("{{ $x = 1 }}"),
        "template: key:1:8: executing \"key\" at <1>: undefined variable: $x"
    );
    assert_eq!(
        err("{{ range $i, $v, $w := list }}{{ end }}"),
        "template: key:1: too many declarations in range"
    );
    assert_eq!(
        err("{{ $x, $y := 1 }}"),
        "template: key:1: too many declarations in command"
    );
}

#[test]
fn pipelines_and_calls() {
    assert_eq!(ok("{{ \"x\" | printf \"%s-%s\" \"a\" }}"), "a-x");
    assert_eq!(ok("{{ printf \"%d\" (int 4) }}"), "8");
    assert_eq!(ok("{{ 3 | int }}"), "6");
    assert_eq!(ok("{{ int 3.0 }}"), "6");
    assert_eq!(ok("{{ float 3 }}|{{ float 1e6 }}"), "3|1e+06");
    assert_eq!(ok("{{ uint 7 }}"), "7");
    assert_eq!(
        ok("{{ cat \"a\" \"b\" \"c\" }}|{{ \"z\" | cat \"a\" }}"),
        "a+b+c|a+z"
    );
    assert_eq!(ok("{{ call adder 2 3 }}"), "5");
    assert_eq!(
        err("{{ int 3.5 }}"),
        "template: key:1:7: executing \"key\" at <3.5>: expected integer; found 3.5"
    );
    assert_eq!(
        err("{{ int \"3\" }}"),
        "template: key:1:7: executing \"key\" at <\"3\">: expected integer; found \"3\""
    );
    assert_eq!(
        err("{{ int .a }}"),
        "template: key:1:7: executing \"key\" at <.a>: wrong type for value; expected int; got string"
    );
    assert_eq!(
        err("{{ int i64 }}"),
        "template: key:1:7: executing \"key\" at <i64>: wrong type for value; expected int; got int64"
    );
    assert_eq!(
        err("{{ int nil }}"),
        "template: key:1:7: executing \"key\" at <nil>: cannot assign nil to int"
    );
    assert_eq!(
        err("{{ uint -1 }}"),
        "template: key:1:8: executing \"key\" at <-1>: expected unsigned integer; found -1"
    );
    assert_eq!(
        err("{{ str 1 }}"),
        "template: key:1:7: executing \"key\" at <1>: expected string; found 1"
    );
    assert_eq!(
        err("{{ int 1 2 }}"),
        "template: key:1:3: executing \"key\" at <int>: wrong number of args for int: want 1 got 2"
    );
    assert_eq!(
        err("{{ cat }}"),
        "template: key:1:3: executing \"key\" at <cat>: wrong number of args for cat: want at least 1 got 0"
    );
    assert_eq!(
        err("{{ fails }}"),
        "template: key:1:3: executing \"key\" at <fails>: error calling fails: boom"
    );
    assert_eq!(
        err("{{ 1 2 }}"),
        "template: key:1:3: executing \"key\" at <1>: can't give argument to non-function 1"
    );
    assert_eq!(
        err("{{ nil }}"),
        "template: key:1:3: executing \"key\" at <nil>: nil is not a command"
    );
    assert_eq!(
        err("{{ call .user }}"),
        "template: key:1:3: executing \"key\" at <call .user>: error calling call: non-function .user of type string"
    );
    assert_eq!(
        err("{{ call adder 1 }}"),
        "template: key:1:3: executing \"key\" at <call adder 1>: error calling call: wrong number of args for adder: got 1 want 2"
    );
    assert_eq!(
        err("{{ 3 | printf }}"),
        "template: key:1:7: executing \"key\" at <printf>: wrong type for value; expected string; got int"
    );
    assert_eq!(
        err("{{ printf 3 }}"),
        "template: key:1:10: executing \"key\" at <3>: expected string; found 3"
    );
}

#[test]
fn conditionals_and_truth() {
    assert_eq!(
        ok("{{ if 0 }}a{{ else if \"\" }}b{{ else if list }}c{{ else }}d{{ end }}"),
        "d"
    );
    assert_eq!(
        ok(
            "{{ if \"0\" }}y{{ end }}{{ if list 0 }}y{{ end }}{{ if 0.0 }}n{{ end }}{{ if 1i }}y{{ end }}"
        ),
        "yyy"
    );
    assert_eq!(
        ok("{{ with .user }}{{ . }}{{ end }}{{ with .empty }}x{{ else with .a }}{{ . }}{{ end }}"),
        "admin1"
    );
    assert_eq!(
        ok("{{ and 1 0 2 }}|{{ or 0 \"\" 3 }}|{{ and 1 2 }}|{{ or 0 \"\" }}|{{ not 0 }}"),
        "0|3|2||true"
    );
    assert_eq!(ok("{{ and 0 .missing }}|{{ or 1 .missing }}"), "0|1");
    assert!(err("{{ or .missing 1 }}").contains("map has no entry for key \"missing\""));
    assert_eq!(
        err("{{ and }}"),
        "template: key:1:3: executing \"key\" at <and>: wrong number of args for and: want at least 1 got 0"
    );
    assert_eq!(
        err("{{ if }}{{ end }}"),
        "template: key:1: missing value for if"
    );
}

#[test]
fn range_forms() {
    assert_eq!(
        ok("{{ range $i, $v := list \"a\" \"b\" }}{{ $i }}={{ $v }};{{ end }}"),
        "0=a;1=b;"
    );
    assert_eq!(
        ok("{{ range $k, $v := . }}{{ $k }}{{ $v }},{{ end }}"),
        "a1,b2,empty,useradmin,"
    );
    assert_eq!(
        ok(
            "{{ range 3 }}{{ . }}{{ end }}|{{ range $i := 2 }}{{ $i }}{{ end }}|{{ range 0 }}x{{ else }}none{{ end }}"
        ),
        "012|01|none"
    );
    assert_eq!(
        ok(
            "{{ range list 1 2 3 4 }}{{ if eq . 2 }}{{ continue }}{{ end }}{{ if eq . 4 }}{{ break }}{{ end }}{{ . }}{{ end }}"
        ),
        "13"
    );
    assert_eq!(ok("{{ range list }}x{{ else }}empty{{ end }}"), "empty");
    assert_eq!(
        ok("{{ $i := 0 }}{{ range $i = list 7 8 }}{{ end }}{{ $i }}"),
        "8"
    );
    assert_eq!(
        err("{{ range $i, $v := 3 }}{{ end }}"),
        "template: key:1:19: executing \"key\" at <3>: can't use 3 to iterate over more than one variable"
    );
    assert_eq!(
        err("{{ range .user }}{{ end }}"),
        "template: key:1:9: executing \"key\" at <.user>: range can't iterate over admin"
    );
    assert_eq!(
        err("{{ break }}"),
        "template: key:1: {{break}} outside {{range}}"
    );
    assert_eq!(
        err("{{ range list }}{{ end }}{{ continue }}"),
        "template: key:1: {{continue}} outside {{range}}"
    );
}

#[test]
fn templates_define_block() {
    assert_eq!(
        ok("{{ define \"t\" }}<{{ . }}>{{ end }}{{ template \"t\" .user }}{{ template \"t\" }}"),
        "<admin><<no value>>"
    );
    assert_eq!(ok("{{ block \"b\" .a }}[{{ . }}]{{ end }}"), "[1]");
    assert_eq!(
        ok(
            "{{ define \"r\" }}{{ if . }}{{ len . }}{{ template \"r\" (slice . 1) }}{{ end }}{{ end }}{{ template \"r\" \"abc\" }}"
        ),
        "321"
    );
    assert_eq!(
        err("{{ template \"nope\" }}"),
        "template: key:1:12: executing \"key\" at <{{template \"nope\"}}>: template \"nope\" not defined"
    );
    assert_eq!(
        err("{{ define \"t\" }}{{ .x }}{{ end }}{{ template \"t\" . }}"),
        "template: key:1:19: executing \"t\" at <.x>: map has no entry for key \"x\""
    );
    assert_eq!(
        err("{{ define \"t\" }}a{{ end }}{{ define \"t\" }}b{{ end }}"),
        "template: key:1: template: multiple definition of template \"t\""
    );
    // an empty redefinition does not replace a non-empty one
    assert_eq!(
        ok("{{ define \"t\" }}a{{ end }}{{ define \"t\" }} {{ end }}{{ template \"t\" }}"),
        "a"
    );
}

#[test]
fn comments_trim_and_literals() {
    assert_eq!(ok("a {{- /* c */ -}} b"), "ab");
    assert_eq!(ok("a\n  {{- 1 }} \n {{ 2 -}}\n b"), "a1 \n 2b");
    assert_eq!(ok("{{-3}}"), "-3");
    assert_eq!(
        ok("{{ 0x10 }} {{ 0o17 }} {{ 017 }} {{ 0b11 }} {{ 1_000 }} {{ -0x10 }}"),
        "16 15 15 3 1000 -16"
    );
    assert_eq!(
        ok("{{ 1e3 }} {{ 1.5e3 }} {{ 0.1 }} {{ 0x1p4 }} {{ 'a' }} {{ '\\n' }}"),
        "1000 1500 0.1 16 97 10"
    );
    assert_eq!(
        ok("{{ 2i }} {{ 1+2i }} {{ 1.5-0.5i }}"),
        "(0+2i) (1+2i) (1.5-0.5i)"
    );
    assert_eq!(
        ok("{{ \"a\\tb\\u00e9\\x41\\101\" }}|{{ `raw\\n` }}"),
        "a\tbéAA|raw\\n"
    );
    assert_eq!(ok("{{ true }} {{ false }}"), "true false");
    assert_eq!(
        err("{{ 99999999999999999999 }}"),
        "template: key:1: integer overflow: \"99999999999999999999\""
    );
    assert_eq!(
        err("{{ 18446744073709551615 }}"),
        "template: key:1:3: executing \"key\" at <18446744073709551615>: 18446744073709551615 overflows int"
    );
    assert_eq!(err("{{ \"\\q\" }}"), "template: key:1: invalid syntax");
    assert_eq!(
        err("{{ /* c */ }}"),
        "template: key:1: unexpected \"/\" in command"
    );
    assert_eq!(
        err("{{/* c */ x }}"),
        "template: key:1: comment ends before closing delimiter"
    );
    assert_eq!(err("{{/* c }}"), "template: key:1: unclosed comment");
}

#[test]
fn builtin_functions() {
    assert_eq!(
        ok("{{ print \"a\" 1 2 \"b\" nil }}|{{ println 1 \"x\" }}"),
        "a1 2b<nil>|1 x\n"
    );
    assert_eq!(
        ok("{{ printf \"%5.2f|%-4d|%q|%x|%v\" 3.14159 7 \"hi\" \"hi\" (list 1 2) }}"),
        " 3.14|7   |\"hi\"|6869|[1 2]"
    );
    assert_eq!(
        ok("{{ html \"<a href='x'>&\\\"\" }}|{{ html nil }}"),
        "&lt;a href=&#39;x&#39;&gt;&amp;&#34;|&lt;no value&gt;"
    );
    assert_eq!(
        ok("{{ js \"a'b\\\"c<d>&e=f\\n\\u2028é\" }}"),
        "a\\'b\\\"c\\u003Cd\\u003E\\u0026e\\u003Df\\u000A\\u2028é"
    );
    assert_eq!(
        ok("{{ urlquery \"a b&c=d/é~\" }}|{{ urlquery 1 \"x\" }}"),
        "a+b%26c%3Dd%2F%C3%A9~|1x"
    );
    assert_eq!(
        ok("{{ len \"héllo\" }} {{ len (list 1 2) }} {{ len . }}"),
        "6 2 4"
    );
    assert_eq!(
        ok("{{ index \"abc\" 1 }} {{ index (list (list 1 2)) 0 1 }} {{ index . \"a\" }}"),
        "98 2 1"
    );
    assert_eq!(
        ok(
            "{{ slice \"abcd\" 1 3 }} {{ slice (list 1 2 3) 1 }} {{ slice (list 1 2 3) }} {{ slice \"abc\" 3 }}"
        ),
        "bc [2 3] [1 2 3] "
    );
    assert_eq!(
        ok(
            "{{ eq 1 2 3 1 }} {{ ne \"a\" \"b\" }} {{ lt 1 2 }} {{ le 2 2 }} {{ gt \"b\" \"a\" }} {{ ge 1.5 2.5 }}"
        ),
        "true true true true true false"
    );
    assert_eq!(
        ok(
            "{{ eq i64 2 }} {{ lt i64 3 }} {{ eq (index \"a\" 0) 97 }} {{ eq .a nil }} {{ eq nil nil }}"
        ),
        "true true true false true"
    );
    assert_eq!(
        err("{{ lt 1 1.5 }}"),
        "template: key:1:3: executing \"key\" at <lt 1 1.5>: error calling lt: incompatible types for comparison: int and float64"
    );
    assert_eq!(
        err("{{ eq 1 \"1\" }}"),
        "template: key:1:3: executing \"key\" at <eq 1 \"1\">: error calling eq: incompatible types for comparison: int and string"
    );
    assert_eq!(
        err("{{ lt true false }}"),
        "template: key:1:3: executing \"key\" at <lt true false>: error calling lt: invalid type for comparison"
    );
    assert_eq!(
        err("{{ lt (list) 1 }}"),
        "template: key:1:3: executing \"key\" at <lt (list) 1>: error calling lt: invalid type for comparison"
    );
    assert_eq!(
        err("{{ eq 1 }}"),
        "template: key:1:3: executing \"key\" at <eq 1>: error calling eq: missing argument for comparison"
    );
    assert_eq!(
        err("{{ eq (list 1) (list 1) }}"),
        "template: key:1:3: executing \"key\" at <eq (list 1) (list 1)>: error calling eq: non-comparable type [1]: []interface {}"
    );
    assert_eq!(
        err("{{ index (list 1) 5 }}"),
        "template: key:1:3: executing \"key\" at <index (list 1) 5>: error calling index: index out of range: 5"
    );
    assert_eq!(
        err("{{ index (list 1) 1 }}"),
        "template: key:1:3: executing \"key\" at <index (list 1) 1>: error calling index: reflect: slice index out of range"
    );
    assert_eq!(
        err("{{ index (list 1) \"0\" }}"),
        "template: key:1:3: executing \"key\" at <index (list 1) \"0\">: error calling index: cannot index slice/array with type string"
    );
    assert_eq!(
        err("{{ index . 1 }}"),
        "template: key:1:3: executing \"key\" at <index . 1>: error calling index: value has type int; should be string"
    );
    assert_eq!(
        err("{{ index nil 1 }}"),
        "template: key:1:3: executing \"key\" at <index nil 1>: error calling index: index of untyped nil"
    );
    assert_eq!(
        err("{{ index 1 1 }}"),
        "template: key:1:3: executing \"key\" at <index 1 1>: error calling index: can't index item of type int"
    );
    assert_eq!(
        err("{{ len 3 }}"),
        "template: key:1:3: executing \"key\" at <len 3>: error calling len: len of type int"
    );
    assert_eq!(
        err("{{ slice (list 1 2) 2 1 }}"),
        "template: key:1:3: executing \"key\" at <slice (list 1 2) 2 1>: error calling slice: invalid slice index: 2 > 1"
    );
    assert_eq!(
        err("{{ slice \"abc\" 1 2 3 }}"),
        "template: key:1:3: executing \"key\" at <slice \"abc\" 1 2 3>: error calling slice: cannot 3-index slice a string"
    );
}

#[test]
fn parse_errors() {
    assert_eq!(
        err("{{ nope }}"),
        "template: key:1: function \"nope\" not defined"
    );
    assert_eq!(err("{{ .user"), "template: key:1: unclosed action");
    assert_eq!(
        err("a\nb\n{{ if true }}"),
        "template: key:3: unexpected EOF"
    );
    assert_eq!(err("{{ end }}"), "template: key:1: unexpected {{end}}");
    assert_eq!(
        err("{{ if true }}{{ else }}{{ else }}{{ end }}"),
        "template: key:1: expected end; found {{else}}"
    );
    assert_eq!(
        err("{{ .my-key }}"),
        "template: key:1: bad character U+002D '-'"
    );
    assert_eq!(
        err("{{ \"a\" | \"b\" }}"),
        "template: key:1: non executable command in pipeline stage 2"
    );
    assert_eq!(err("{{ (1 }}"), "template: key:1: unclosed left paren");
    assert_eq!(err("{{ 1) }}"), "template: key:1: unexpected right paren");
    assert_eq!(
        err("{{ | .a }}"),
        "template: key:1: unexpected \"|\" in command"
    );
    // a trailing pipe is accepted by Go' parser
    assert!(err("{{ .a.b | }}").contains("can't evaluate field b in type string"));
    assert_eq!(
        err("{{ 1.b }}"),
        "template: key:1: bad number syntax: \"1.b\""
    );
    assert_eq!(
        err("{{ \"abc }}"),
        "template: key:1: unterminated quoted string"
    );
    assert_eq!(err("{{ define \"t\" }}"), "template: key:1: unexpected EOF");
    assert_eq!(
        err("{{ template . }}"),
        "template: key:1: unexpected <.> in template clause"
    );
    assert_eq!(
        err("{{ $x := 1 2 }}"),
        "template: key:1:9: executing \"key\" at <1>: can't give argument to non-function 1"
    );
}

#[test]
fn custom_delimiters() {
    let f = funcs();
    let t = Template::parse_with_delims(
        "key",
        "a <<- .user ->> b {{ .x }} <</* c */>>[<< \"}}\" >>]",
        &f,
        "<<",
        ">>",
    )
    .unwrap();
    let out = t
        .execute_data(&f, &data(), &ExecOptions::default())
        .unwrap();
    assert_eq!(String::from_utf8(out).unwrap(), "aadminb {{ .x }} [}}]");
    let e = Template::parse_with_delims("key", "<< .user", &f, "<<", ">>").unwrap_err();
    assert_eq!(e.to_string(), "template: key:1: unclosed action");
}
