//! Pure parts of ESO's Azure Key Vault semantics: object-type prefixes, `property` lookup, tags
//! for `metadataPolicy: Fetch`, and the JSON → map conversion of `dataFrom.extract`.

use std::collections::BTreeMap;

use esr_provider::{ProviderError, Result, gjson};

/// The managed-by tag esr (like ESO) puts on everything it pushes.
pub const MANAGED_BY_TAG: &str = "managed-by";
/// Its value.
pub const MANAGED_BY_VALUE: &str = "external-secrets";

/// The kind of Key Vault object a `remoteRef.key` names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ObjectType {
    /// `secret/<name>` or no prefix.
    Secret,
    /// `cert/<name>`: the DER (`.cer`) bytes of the certificate.
    Cert,
    /// `key/<name>`: the JWK (JSON).
    Key,
}

/// A parsed `remoteRef.key`: ESO's `getObjType` (split on `/`; the first part is the type, the
/// second the name; later parts are ignored).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectRef<'a> {
    /// The type prefix as written (`secret` when absent).
    pub type_name: &'a str,
    /// The object name.
    pub name: &'a str,
}

impl<'a> ObjectRef<'a> {
    /// Parses a key.
    pub fn parse(key: &'a str) -> Self {
        let mut parts = key.split('/');
        match (parts.next(), parts.next()) {
            (Some(t), Some(n)) => ObjectRef {
                type_name: t,
                name: n,
            },
            _ => ObjectRef {
                type_name: "secret",
                name: key,
            },
        }
    }

    /// The object type; an unknown prefix is an error (`unknown Azure Keyvault object Type for X`).
    pub fn object_type(&self) -> Result<ObjectType> {
        match self.type_name {
            "secret" => Ok(ObjectType::Secret),
            "cert" => Ok(ObjectType::Cert),
            "key" => Ok(ObjectType::Key),
            _ => Err(ProviderError::invalid(format!(
                "unknown Azure Keyvault object Type for {}",
                self.name
            ))),
        }
    }
}

/// ESO's `getProperty`: the whole value without property; otherwise the gjson path, then (when
/// that does not exist and the property has a `.`) the path with every `.` escaped.
pub fn get_property(value: &str, property: Option<&str>, key: &str) -> Result<Vec<u8>> {
    let Some(property) = property.filter(|p| !p.is_empty()) else {
        return Ok(value.as_bytes().to_vec());
    };
    if let Some(v) = gjson::get(value, property) {
        return Ok(v.into_bytes());
    }
    if property.contains('.')
        && let Some(v) = gjson::get(value, &gjson::escape_dots(property))
    {
        return Ok(v.into_bytes());
    }
    Err(ProviderError::invalid(format!(
        "property {property} does not exist in key {key}"
    )))
}

/// ESO's `getSecretTag` (`metadataPolicy: Fetch` on a secret): all tags as a JSON object without
/// property; with a property, that tag, or `<tag>.<path>` into a JSON tag value.
pub fn get_secret_tag(tags: &BTreeMap<String, String>, property: Option<&str>) -> Result<Vec<u8>> {
    let Some(property) = property.filter(|p| !p.is_empty()) else {
        return Ok(esr_provider::keys::go_json_string_map(tags));
    };
    if let Some(v) = tags.get(property) {
        return Ok(v.clone().into_bytes());
    }
    let not_found = || ProviderError::invalid(format!("tag {property} does not exist"));
    let idx = property.find('.').ok_or_else(not_found)?;
    if idx > 0 {
        let tag_name = &property[..idx];
        if let Some(v) = tags.get(tag_name) {
            let rest = property.replacen(&format!("{tag_name}."), "", 1);
            return get_property(v, Some(&rest), property);
        }
    }
    Err(not_found())
}

/// ESO's `getSecretTags` (extract with `metadataPolicy: Fetch`): every tag as `<name>_<tag>`, a
/// tag holding a JSON object of strings expanded into `<name>_<tag>_<key>`.
pub fn expand_secret_tags(
    secret_name: &str,
    tags: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for (tag, value) in tags {
        let name = format!("{secret_name}_{tag}");
        match serde_json::from_str::<BTreeMap<String, String>>(value) {
            Ok(kv) => {
                for (k, v) in kv {
                    out.insert(format!("{name}_{k}"), v);
                }
            }
            Err(_) => {
                out.insert(name, value.clone());
            }
        }
    }
    out
}

/// ESO's `getSecretMapProperties`: with a property, only `<key>_<property>` (empty when the tag
/// does not exist); otherwise all expanded tags.
pub fn secret_map_properties(
    expanded: &BTreeMap<String, String>,
    key: &str,
    property: Option<&str>,
) -> BTreeMap<String, Vec<u8>> {
    match property.filter(|p| !p.is_empty()) {
        Some(p) => {
            let name = format!("{key}_{p}");
            let v = get_secret_tag(expanded, Some(&name)).unwrap_or_default();
            BTreeMap::from([(name, v)])
        }
        None => expanded
            .iter()
            .map(|(k, v)| (k.clone(), v.clone().into_bytes()))
            .collect(),
    }
}

/// ESO's `getSecretMapMap`: a JSON object; string values unquoted, others raw JSON.
pub fn secret_map_from_json(data: &[u8]) -> Result<BTreeMap<String, Vec<u8>>> {
    esr_provider::keys::json_object_to_map(data)
        .map_err(|e| e.wrap("error unmarshalling json data"))
}

/// True when the tags carry `managed-by: external-secrets`.
pub fn is_managed(tags: Option<&BTreeMap<String, String>>) -> bool {
    tags.and_then(|t| t.get(MANAGED_BY_TAG))
        .is_some_and(|v| v == MANAGED_BY_VALUE)
}

/// ESO's guard before PushSecret overwrites or deletes a vault object: it must carry the
/// `managed-by` tag. `verb` and `what` name the step in the error (`cannot get secret x: ...`).
pub fn require_managed(
    tags: Option<&BTreeMap<String, String>>,
    verb: &str,
    what: &str,
    name: &str,
) -> esr_provider::Result<()> {
    if is_managed(tags) {
        Ok(())
    } else {
        Err(esr_provider::ProviderError::invalid(format!(
            "{verb} {what} {name}: not managed by external-secrets"
        )))
    }
}

/// Tags for a push: user tags plus the managed-by tag. A user `managed-by` tag is an error.
pub fn push_tags(user: Option<&BTreeMap<String, String>>) -> Result<BTreeMap<String, String>> {
    let mut tags = BTreeMap::new();
    if let Some(user) = user {
        if user.contains_key(MANAGED_BY_TAG) {
            return Err(ProviderError::invalid(format!(
                "error parsing tags in metadata: Cannot specify a '{MANAGED_BY_TAG}' tag"
            )));
        }
        tags.extend(user.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    tags.insert(MANAGED_BY_TAG.into(), MANAGED_BY_VALUE.into());
    Ok(tags)
}

/// The last path segment of an object id (`https://v/secrets/name` → `name`), like Go's `path.Base`.
pub fn name_from_id(id: &str) -> &str {
    id.trim_end_matches('/').rsplit('/').next().unwrap_or(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tags(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn object_refs() {
        let r = ObjectRef::parse("db-pass");
        assert_eq!((r.type_name, r.name), ("secret", "db-pass"));
        assert_eq!(r.object_type().ok(), Some(ObjectType::Secret));
        let r = ObjectRef::parse("cert/web");
        assert_eq!(
            (r.name, r.object_type().ok()),
            ("web", Some(ObjectType::Cert))
        );
        let r = ObjectRef::parse("key/sign/extra");
        assert_eq!(
            (r.name, r.object_type().ok()),
            ("sign", Some(ObjectType::Key))
        );
        let e = ObjectRef::parse("blob/x")
            .object_type()
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            e.as_deref(),
            Some("unknown Azure Keyvault object Type for x")
        );
    }

    #[test]
    fn properties() {
        let v = r#"{"a":{"b":"c"},"x.y":"lit","n":1.50}"#;
        assert_eq!(get_property(v, None, "k").ok(), Some(v.as_bytes().to_vec()));
        assert_eq!(get_property(v, Some("a.b"), "k").ok(), Some(b"c".to_vec()));
        assert_eq!(
            get_property(v, Some("x.y"), "k").ok(),
            Some(b"lit".to_vec())
        );
        assert_eq!(get_property(v, Some("n"), "k").ok(), Some(b"1.5".to_vec()));
        assert_eq!(
            get_property(v, Some("zz"), "k")
                .err()
                .map(|e| e.to_string()),
            Some("property zz does not exist in key k".into())
        );
    }

    #[test]
    fn tag_lookup() {
        let t = tags(&[("env", "prod"), ("meta", r#"{"owner":"team-a"}"#)]);
        assert_eq!(
            get_secret_tag(&t, None).ok(),
            Some(br#"{"env":"prod","meta":"{\"owner\":\"team-a\"}"}"#.to_vec())
        );
        assert_eq!(get_secret_tag(&t, Some("env")).ok(), Some(b"prod".to_vec()));
        assert_eq!(
            get_secret_tag(&t, Some("meta.owner")).ok(),
            Some(b"team-a".to_vec())
        );
        assert_eq!(
            get_secret_tag(&t, Some("nope"))
                .err()
                .map(|e| e.to_string()),
            Some("tag nope does not exist".into())
        );
        let e = expand_secret_tags("s", &t);
        assert_eq!(e, tags(&[("s_env", "prod"), ("s_meta_owner", "team-a")]));
        let m = secret_map_properties(&e, "s", Some("env"));
        assert_eq!(m.get("s_env"), Some(&b"prod".to_vec()));
        assert_eq!(secret_map_properties(&e, "s", None).len(), 2);
    }

    #[test]
    fn json_maps() {
        let m = secret_map_from_json(br#"{"a":"x","b":{"c":1},"d":2}"#).unwrap_or_default();
        assert_eq!(m.get("a"), Some(&b"x".to_vec()));
        assert_eq!(m.get("b"), Some(&br#"{"c":1}"#.to_vec()));
        assert_eq!(m.get("d"), Some(&b"2".to_vec()));
        assert!(
            secret_map_from_json(b"not json")
                .err()
                .is_some_and(|e| e.to_string().starts_with("error unmarshalling json data"))
        );
    }

    #[test]
    fn managed_tags() {
        assert!(is_managed(Some(&tags(&[(
            "managed-by",
            "external-secrets"
        )]))));
        assert!(!is_managed(Some(&tags(&[("managed-by", "someone")]))));
        assert!(!is_managed(None));
        let t = push_tags(Some(&tags(&[("a", "b")]))).unwrap_or_default();
        assert_eq!(t, tags(&[("a", "b"), ("managed-by", "external-secrets")]));
        assert!(push_tags(Some(&tags(&[("managed-by", "x")]))).is_err());
        assert_eq!(name_from_id("https://v.vault.azure.net/secrets/abc"), "abc");
    }
}
