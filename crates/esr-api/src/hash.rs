//! ESO-identical hashes: `status.syncedResourceVersion`, the `reconcile.external-secrets.io/data-hash`
//! annotation, the `reconcile.external-secrets.io/created-by` label, the long-name field manager
//! and the GeneratorState owner key.
//!
//! ESO's `ObjectHash(x)` is the lowercase hex SHA3-224 of Go's `fmt.Sprintf("%+v", x)`. The
//! functions here build the exact Go `%+v` text for the values ESO hashes and hash it:
//! - a `map[string]string` prints as `map[k1:v1 k2:v2]`, keys sorted bytewise, strings raw (no
//!   quoting or escaping), a nil or empty map as `map[]`;
//! - a `map[string][]byte` prints as `map[k:[118 97 108] e:[]]` (bytes as space-separated decimals,
//!   an empty slice as `[]`);
//! - the metadata struct prints as `{annotations:map[...] labels:map[...]}`.
//!
//! `BTreeMap<String, _>` iterates keys in `str` order, which is bytewise UTF-8 order, the same order
//! Go's fmt uses for string keys.

use crate::consts::{FIELD_MANAGER_MAX_LEN, FIELD_MANAGER_PREFIX, FIELD_MANAGER_SHA3_PREFIX};
use sha3::{Digest, Sha3_224};
use std::collections::BTreeMap;
use std::fmt::Write;

/// Hex SHA3-224 of `text`: ESO's `ObjectHash` when `text` is Go's `%+v` rendering of the object.
pub fn object_hash(go_sprintf_plus_v: &str) -> String {
    hex::encode(Sha3_224::digest(go_sprintf_plus_v.as_bytes()))
}

/// Go's `%+v` of a `map[string]string`.
pub fn go_string_map(map: &BTreeMap<String, String>) -> String {
    let mut out = String::from("map[");
    for (i, (k, v)) in map.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        out.push_str(k);
        out.push(':');
        out.push_str(v);
    }
    out.push(']');
    out
}

/// Go's `%+v` of a `map[string][]byte`.
pub fn go_bytes_map(map: &BTreeMap<String, Vec<u8>>) -> String {
    let mut out = String::from("map[");
    for (i, (k, v)) in map.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        out.push_str(k);
        out.push_str(":[");
        for (j, b) in v.iter().enumerate() {
            if j > 0 {
                out.push(' ');
            }
            // Writing to a String cannot fail.
            let _ = write!(out, "{b}");
        }
        out.push(']');
    }
    out.push(']');
    out
}

/// Go's `%+v` of ESO's `struct{annotations, labels map[string]string}` (the input of `HashMeta`).
pub fn go_meta_struct(
    labels: &BTreeMap<String, String>,
    annotations: &BTreeMap<String, String>,
) -> String {
    format!(
        "{{annotations:{} labels:{}}}",
        go_string_map(annotations),
        go_string_map(labels)
    )
}

/// ESO's `HashMeta`: the hash of all labels and annotations of an object.
pub fn meta_hash(
    labels: &BTreeMap<String, String>,
    annotations: &BTreeMap<String, String>,
) -> String {
    object_hash(&go_meta_struct(labels, annotations))
}

/// `status.syncedResourceVersion` of an ExternalSecret or PushSecret:
/// `<metadata.generation>-<HashMeta(labels, annotations)>`. It covers every label and annotation,
/// including `kubectl.kubernetes.io/last-applied-configuration` and `external-secrets.io/force-sync`.
pub fn synced_resource_version(
    generation: i64,
    labels: &BTreeMap<String, String>,
    annotations: &BTreeMap<String, String>,
) -> String {
    format!("{generation}-{}", meta_hash(labels, annotations))
}

/// Value of the `reconcile.external-secrets.io/data-hash` annotation: the hash of the Secret's
/// `data` (`map[string][]byte`).
pub fn data_hash(data: &BTreeMap<String, Vec<u8>>) -> String {
    object_hash(&go_bytes_map(data))
}

/// Value of the `reconcile.external-secrets.io/created-by` label: the hash of
/// `<es-namespace>/<es-name>`.
pub fn created_by_label(namespace: &str, name: &str) -> String {
    object_hash(&format!("{namespace}/{name}"))
}

/// The field manager an ExternalSecret writes its target Secret with (the controller's rule):
/// `externalsecrets.external-secrets.io/<es-name>`, or, when that string is longer than 63
/// characters, `externalsecrets.external-secrets.io/sha3/<hex sha3-224 of es-name>`.
pub fn field_manager(es_name: &str) -> String {
    let plain = format!("{FIELD_MANAGER_PREFIX}{es_name}");
    if plain.len() > FIELD_MANAGER_MAX_LEN {
        format!("{FIELD_MANAGER_SHA3_PREFIX}{}", object_hash(es_name))
    } else {
        plain
    }
}

/// The field manager ESO's templating code looks for when it reads the keys it previously owned
/// (`templating/parser.go`): it switches to the sha3 form when the *name alone* is longer than 63
/// characters. This differs from [`field_manager`] for names of 28 to 63 characters, a latent
/// inconsistency in ESO that esr reproduces where it must read ESO-written managedFields.
pub fn field_manager_templating(es_name: &str) -> String {
    if es_name.len() > FIELD_MANAGER_MAX_LEN {
        format!("{FIELD_MANAGER_SHA3_PREFIX}{}", object_hash(es_name))
    } else {
        format!("{FIELD_MANAGER_PREFIX}{es_name}")
    }
}

/// Value of the `generators.external-secrets.io/owner-key` label on a GeneratorState: the hash of
/// `<owner kind>-<owner namespace>-<owner name>-<state key>`.
pub fn generator_state_owner_key(
    owner_kind: &str,
    owner_namespace: &str,
    owner_name: &str,
    key: &str,
) -> String {
    object_hash(&format!(
        "{owner_kind}-{owner_namespace}-{owner_name}-{key}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn smap(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn bmap(pairs: &[(&str, &[u8])]) -> BTreeMap<String, Vec<u8>> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.to_vec()))
            .collect()
    }

    // Every expected hash below was computed independently with Python's hashlib.sha3_224 over the
    // Go-formatted string shown in the test.

    #[test]
    fn eso_vector_synced_resource_version_empty() {
        let empty = BTreeMap::new();
        assert_eq!(
            go_meta_struct(&empty, &empty),
            "{annotations:map[] labels:map[]}"
        );
        assert_eq!(
            synced_resource_version(1, &empty, &empty),
            "1-f47fe3c0b255b6dd8047cdffa772587bb829efe7a1cb70febeda2eb2"
        );
    }

    #[test]
    fn eso_vector_data_hash() {
        let data = bmap(&[("foo", b"value1"), ("bar", b"value2")]);
        assert_eq!(
            go_bytes_map(&data),
            "map[bar:[118 97 108 117 101 50] foo:[118 97 108 117 101 49]]"
        );
        assert_eq!(
            data_hash(&data),
            "1bed8bcbcb4547ffe19a19cd47d9078e84aa6598266d86b99f992d64"
        );
    }

    #[test]
    fn meta_hash_sorts_keys_and_keeps_spaces_colons_unicode() {
        let labels = smap(&[("b", "2"), ("a", "1")]);
        let annotations = smap(&[("é", "ü"), ("z key", "v:1 x")]);
        assert_eq!(
            go_meta_struct(&labels, &annotations),
            "{annotations:map[z key:v:1 x é:ü] labels:map[a:1 b:2]}"
        );
        assert_eq!(
            synced_resource_version(7, &labels, &annotations),
            "7-3f65ea0e5b979ef09ae491d676dc855c4c11137407c951023fd6e315"
        );
    }

    #[test]
    fn meta_hash_sorts_bytewise_uppercase_first() {
        let labels = smap(&[("a", "y"), ("app.kubernetes.io/name", "my app"), ("B", "x")]);
        assert_eq!(
            go_meta_struct(&labels, &BTreeMap::new()),
            "{annotations:map[] labels:map[B:x a:y app.kubernetes.io/name:my app]}"
        );
        assert_eq!(
            meta_hash(&labels, &BTreeMap::new()),
            "81b0a973c521dbe6726a3e3ceac58093c4cec3a7bddfe5ffe5c46836"
        );
    }

    #[test]
    fn meta_hash_keeps_newlines_and_quotes_raw() {
        let annotations = smap(&[(
            "kubectl.kubernetes.io/last-applied-configuration",
            "{\"a\":1}\n",
        )]);
        assert_eq!(
            meta_hash(&BTreeMap::new(), &annotations),
            "d2c255129be365a6a3f97243d2fe2f516e80c688e208a4444b3d3e51"
        );
        let force = smap(&[("external-secrets.io/force-sync", "1700000000")]);
        assert_eq!(
            synced_resource_version(3, &BTreeMap::new(), &force),
            "3-e1c42a192263d7d6d9c2ee9c60be31aaab848186cf7331ea495bf24f"
        );
    }

    #[test]
    fn data_hash_empty_map_and_empty_values() {
        assert_eq!(go_bytes_map(&BTreeMap::new()), "map[]");
        assert_eq!(
            data_hash(&BTreeMap::new()),
            "74a974446e359fb3e6baff9bd0058950e6edd0f040888d9989b0a11b"
        );
        let data = bmap(&[("z", b" :"), ("k", &[0, 255]), ("empty", b"")]);
        assert_eq!(go_bytes_map(&data), "map[empty:[] k:[0 255] z:[32 58]]");
        assert_eq!(
            data_hash(&data),
            "70cfb7e61daf1e06a901a51391c3be1533f0d17f3c5878abff17d8bc"
        );
        let unicode = bmap(&[("ü", "ü".as_bytes()), ("A", b"A")]);
        assert_eq!(go_bytes_map(&unicode), "map[A:[65] ü:[195 188]]");
        assert_eq!(
            data_hash(&unicode),
            "21087325b5e4e93f087d6fd248d57fa8c022acb894f2c773b982b276"
        );
    }

    #[test]
    fn created_by_label_hashes_namespace_slash_name() {
        assert_eq!(
            created_by_label("default", "my-es"),
            "b8464376b5fe3535e690594280bfe59b60be2603cb6cbb6d6c8bcbb4"
        );
        assert_eq!(created_by_label("default", "my-es").len(), 56);
    }

    #[test]
    fn field_manager_plain_up_to_63_chars() {
        // The prefix is 36 characters, so names of up to 27 characters stay plain.
        let name27 = "a".repeat(27);
        let fm = field_manager(&name27);
        assert_eq!(fm, format!("externalsecrets.external-secrets.io/{name27}"));
        assert_eq!(fm.len(), 63);
        assert_eq!(
            field_manager("my-es"),
            "externalsecrets.external-secrets.io/my-es"
        );
    }

    #[test]
    fn field_manager_sha3_above_63_chars() {
        let name28 = "x".repeat(28);
        assert_eq!(
            field_manager(&name28),
            "externalsecrets.external-secrets.io/sha3/e7251ce5d41427f31ef05719a7d02a7f23ec45151515893dec57c075"
        );
        // The templating rule only switches when the name itself exceeds 63 characters.
        assert_eq!(
            field_manager_templating(&name28),
            format!("externalsecrets.external-secrets.io/{name28}")
        );
        let name64 = "x".repeat(64);
        assert_eq!(
            field_manager_templating(&name64),
            format!(
                "externalsecrets.external-secrets.io/sha3/{}",
                object_hash(&name64)
            )
        );
        assert_eq!(field_manager(&name64), field_manager_templating(&name64));
    }

    #[test]
    fn generator_state_owner_key_format() {
        assert_eq!(
            generator_state_owner_key("ExternalSecret", "default", "my-es", "0"),
            "9915f96d753b27b8e9efddd3a0d8653f0950199e3e1da6e83e967b73"
        );
    }

    #[test]
    fn object_hash_of_empty_string() {
        assert_eq!(
            object_hash(""),
            "6b4e03423667dbb73b6e15454f0eb1abd4597f9a1b078e3f5b5a6bc7"
        );
    }
}
