//! ESO-identical hashes used by the plan. These follow eso-inventory §0 exactly; when
//! `esr_api::hash` is available the IO layer cross-checks against it in tests.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use sha3::{Digest, Sha3_224};

/// `hex(sha3_224(text))`.
pub fn sha3_hex(text: &str) -> String {
    hex::encode(Sha3_224::digest(text.as_bytes()))
}

/// `ObjectHash(map[string][]byte)`: `map[k:[1 2 3] ...]` with sorted keys.
pub fn data_hash(data: &BTreeMap<String, Vec<u8>>) -> String {
    let mut s = String::from("map[");
    for (i, (k, v)) in data.iter().enumerate() {
        if i > 0 {
            s.push(' ');
        }
        s.push_str(k);
        s.push_str(":[");
        for (j, b) in v.iter().enumerate() {
            if j > 0 {
                s.push(' ');
            }
            let _ = write!(s, "{b}");
        }
        s.push(']');
    }
    s.push(']');
    sha3_hex(&s)
}

fn go_string_map(m: &BTreeMap<String, String>) -> String {
    let mut s = String::from("map[");
    for (i, (k, v)) in m.iter().enumerate() {
        if i > 0 {
            s.push(' ');
        }
        s.push_str(k);
        s.push(':');
        s.push_str(v);
    }
    s.push(']');
    s
}

/// `GetResourceVersion`: `"<generation>-" + ObjectHash({annotations, labels})`.
pub fn synced_resource_version(
    generation: i64,
    labels: &BTreeMap<String, String>,
    annotations: &BTreeMap<String, String>,
) -> String {
    let text = format!(
        "{{annotations:{} labels:{}}}",
        go_string_map(annotations),
        go_string_map(labels)
    );
    format!("{generation}-{}", sha3_hex(&text))
}

/// The created-by label value: `ObjectHash("<namespace>/<name>")`.
pub fn created_by_label(namespace: &str, name: &str) -> String {
    sha3_hex(&format!("{namespace}/{name}"))
}

/// The field manager: `externalsecrets.external-secrets.io/<name>`, hashed when longer than 63.
pub fn field_manager(es_name: &str) -> String {
    let full = format!("externalsecrets.external-secrets.io/{es_name}");
    if full.len() > 63 {
        format!(
            "externalsecrets.external-secrets.io/sha3/{}",
            sha3_hex(es_name)
        )
    } else {
        full
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_from_eso() {
        let mut d = BTreeMap::new();
        d.insert("foo".to_string(), b"value1".to_vec());
        d.insert("bar".to_string(), b"value2".to_vec());
        assert_eq!(
            data_hash(&d),
            "1bed8bcbcb4547ffe19a19cd47d9078e84aa6598266d86b99f992d64"
        );
        assert_eq!(
            synced_resource_version(1, &BTreeMap::new(), &BTreeMap::new()),
            "1-f47fe3c0b255b6dd8047cdffa772587bb829efe7a1cb70febeda2eb2"
        );
    }

    #[test]
    fn field_manager_hashes_long_names() {
        assert_eq!(
            field_manager("db"),
            "externalsecrets.external-secrets.io/db"
        );
        let long = "x".repeat(40);
        let fm = field_manager(&long);
        assert!(fm.starts_with("externalsecrets.external-secrets.io/sha3/"));
        assert_eq!(
            fm.len(),
            "externalsecrets.external-secrets.io/sha3/".len() + 56
        );
    }
}
