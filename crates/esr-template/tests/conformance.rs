//! Go behaviours pinned against ESO's engine (Go `fmt`, sprig, crypto/x509) that
//! the shared template vectors do not cover: `%#v` Go-syntax printing, nil slices
//! from sprig's list functions, `deepCopy nil`, SEC 1 key encoding with the curve
//! parameters, and the `filterCertChain` error texts.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;

use esr_template::{ExecOptions, FuncMap, execute_eso};

fn run(text: &str, data: &[(&str, &str)]) -> Result<String, String> {
    let data: BTreeMap<String, Vec<u8>> = data
        .iter()
        .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
        .collect();
    execute_eso(text, &data, &FuncMap::eso(), &ExecOptions::default())
        .map(|o| String::from_utf8(o).unwrap())
        .map_err(|e| e.to_string())
}

fn ok(text: &str) -> String {
    run(text, &[]).unwrap_or_else(|e| panic!("{text}: {e}"))
}

#[test]
fn sharp_v_prints_go_syntax() {
    assert_eq!(
        ok(r#"{{ printf "%#v" (dict "b" (list 1 "x" nil) "a" 1.5) }}"#),
        r#"map[string]interface {}{"a":1.5, "b":[]interface {}{1, "x", interface {}(nil)}}"#
    );
    assert_eq!(ok(r#"{{ printf "%#v" (list) }}"#), "[]interface {}{}");
    assert_eq!(
        ok(r#"{{ printf "%#v" (splitList "," "a,b") }}"#),
        r#"[]string{"a", "b"}"#
    );
    assert_eq!(
        ok(r#"{{ printf "%#v" (split "," "a,b") }}"#),
        r#"map[string]string{"_0":"a", "_1":"b"}"#
    );
    assert_eq!(ok(r#"{{ printf "%#v" nil }}"#), "<nil>");
    assert_eq!(ok(r#"{{ printf "%#v" "q" }}"#), r#""q""#);
    // %v is unchanged
    assert_eq!(
        ok(r#"{{ printf "%v" (dict "a" (list 1 nil)) }}"#),
        "map[a:[1 <nil>]]"
    );
}

#[test]
fn sprig_rest_and_initial_of_an_empty_list_are_nil_slices() {
    assert_eq!(ok("{{ toJson (rest (list)) }}"), "null");
    assert_eq!(ok("{{ toJson (initial (list)) }}"), "null");
    assert_eq!(
        ok(r#"{{ printf "%#v" (rest (list)) }}"#),
        "[]interface {}(nil)"
    );
    assert_eq!(ok("{{ rest (list) }}|{{ len (rest (list)) }}"), "[]|0");
    assert_eq!(ok("{{ empty (initial (list)) }}"), "true");
    // a one-element list gives an empty, non-nil slice
    assert_eq!(ok("{{ toJson (rest (list 1)) }}"), "[]");
    assert_eq!(ok("{{ toJson (deepCopy (rest (list))) }}"), "null");
}

#[test]
fn deep_copy_of_nil_fails_like_copystructure() {
    let e = run("{{ deepCopy nil }}", &[]).unwrap_err();
    assert!(
        e.ends_with("error calling deepCopy: reflect: call of reflect.Value.Type on zero Value"),
        "{e}"
    );
    assert_eq!(ok("{{ toJson (deepCopy (list nil)) }}"), "[null]");
}

/// An openssl-made P-256 key in SEC 1 form with the curve parameters, as Go's
/// `x509.MarshalECPrivateKey` writes it.
const SEC1_P256: &str = "-----BEGIN EC PRIVATE KEY-----
MHcCAQEEIBMnBEpKGvagwna8phvuiDMpCanwLNN4B88Etx8Z7VSBoAoGCCqGSM49
AwEHoUQDQgAERXfZ8B7QkLGD0SVIcKFtkWyy4HisPPICZ72eCn0RL6Kz7qbq5AXL
HSMia4PRMOGddObZL2YMA+N81CAhZb3eYw==
-----END EC PRIVATE KEY-----
";

#[test]
fn ec_keys_are_written_with_their_curve_like_go() {
    let sec1_line = SEC1_P256.lines().nth(1).unwrap();
    let out = run(
        r#"{{ (genSelfSignedCertWithKey "x" nil nil 3 .k).Key }}"#,
        &[("k", SEC1_P256)],
    )
    .unwrap();
    assert_eq!(out.lines().nth(1), Some(sec1_line), "{out}");
    // generated keys carry the P-256 OID (`oAoGCCqGSM49AwEH` is [0] prime256v1)
    let generated = ok(r#"{{ genPrivateKey "ecdsa" }}"#);
    let der_b64: String = generated
        .lines()
        .filter(|l| !l.starts_with("-----"))
        .collect();
    assert!(der_b64.starts_with("MHcCAQEE"), "{generated}");
    assert!(der_b64.contains("oAoGCCqGSM49AwEH"), "{generated}");
    // and round-trip unchanged through the *WithKey functions
    assert_eq!(
        ok(
            r#"{{ $k := genPrivateKey "ecdsa" }}{{ eq $k (genSelfSignedCertWithKey "x" nil nil 3 $k).Key }}"#
        ),
        "true"
    );
}

#[test]
fn ec_keys_without_a_known_curve_are_refused_with_gos_text() {
    // SEC 1 without the parameters: Go cannot tell the curve
    let no_params = "-----BEGIN EC PRIVATE KEY-----
MGsCAQEEIBMnBEpKGvagwna8phvuiDMpCanwLNN4B88Etx8Z7VSBoUQDQgAERXfZ
8B7QkLGD0SVIcKFtkWyy4HisPPICZ72eCn0RL6Kz7qbq5AXLHSMia4PRMOGddObZ
L2YMA+N81CAhZb3eYw==
-----END EC PRIVATE KEY-----
";
    let e = run(
        r#"{{ genSelfSignedCertWithKey "x" nil nil 3 .k }}"#,
        &[("k", no_params)],
    )
    .unwrap_err();
    assert!(
        e.ends_with("error calling genSelfSignedCertWithKey: parsing private key: parsing EC private key from PEM: x509: unknown elliptic curve"),
        "{e}"
    );
}

#[test]
fn filter_cert_chain_reports_gos_parse_errors() {
    let junk = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
    let e = run(r#"{{ filterCertChain "leaf" .c }}"#, &[("c", junk)]).unwrap_err();
    assert!(
        e.ends_with("error calling filterCertChain: x509: malformed certificate"),
        "{e}"
    );
    // a private key inside the bundle: a SEQUENCE whose first element is not the TBS
    let e = run(r#"{{ filterCertChain "leaf" .c }}"#, &[("c", SEC1_P256)]).unwrap_err();
    assert!(
        e.ends_with("error calling filterCertChain: x509: malformed tbs certificate"),
        "{e}"
    );
    let e = run(r#"{{ filterCertChain "root" .c }}"#, &[("c", "")]).unwrap_err();
    assert!(
        e.ends_with("error calling filterCertChain: no leaf certificate found"),
        "{e}"
    );
}
