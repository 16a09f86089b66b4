//! ESO's Vault path building (`buildPath` / `buildMetadataPath`), pure functions.

use esr_api::providers::vault::VaultKvVersion;

/// The data path of `key` for a store with mount `mount` (`spec.path`) and KV `version`.
///
/// - With a mount, a key that starts with `<mount>/` is taken as absolute (the mount, and on v2 a
///   following `data/`, are stripped); the result is `<mount>[/data]/<key>`.
/// - Without a mount, a v2 key that does not contain `/data/` gets `data` inserted after its first
///   segment (`secret/foo` → `secret/data/foo`); v1 keys are used as they are.
pub fn build_path(mount: Option<&str>, version: VaultKvVersion, key: &str) -> String {
    let v2 = version == VaultKvVersion::V2;
    if let Some(mount) = mount {
        let rest = strip_mount(mount, v2, key);
        let mut out = mount.to_string();
        if v2 {
            out.push_str("/data");
        }
        out.push('/');
        out.push_str(rest);
        return out;
    }
    if v2 && !key.contains("/data/") {
        return match key.split_once('/') {
            Some((first, rest)) => format!("{first}/data/{rest}"),
            None => format!("{key}/data"),
        };
    }
    key.to_string()
}

/// The metadata path of `key` (KV v2: `<mount>/metadata/<key>`; v1: `<mount>/<key>`).
/// Errors (ESO: `provided Path isn't a valid kv v2 path`) for a v2 store without mount whose key
/// has no `data` segment.
pub fn build_metadata_path(
    mount: Option<&str>,
    version: VaultKvVersion,
    key: &str,
) -> Result<String, &'static str> {
    let v2 = version == VaultKvVersion::V2;
    if !v2 {
        return Ok(match mount {
            Some(m) => format!("{m}/{key}"),
            None => key.to_string(),
        });
    }
    match mount {
        None => {
            if !key.contains("data") {
                return Err("provided Path isn't a valid kv v2 path");
            }
            Ok(key.replacen("/data/", "/metadata/", 1))
        }
        Some(m) => Ok(format!("{m}/metadata/{}", strip_mount(m, true, key))),
    }
}

fn strip_mount<'a>(mount: &str, v2: bool, key: &'a str) -> &'a str {
    let cut = format!("{mount}/");
    match key.strip_prefix(cut.as_str()) {
        Some(rest) if v2 => rest.strip_prefix("data/").unwrap_or(rest),
        Some(rest) => rest,
        None => key,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use VaultKvVersion::{V1, V2};

    #[test]
    fn eso_examples() {
        let m = Some("secret/path");
        assert_eq!(build_path(m, V2, "foo"), "secret/path/data/foo");
        assert_eq!(build_path(m, V1, "foo"), "secret/path/foo");
        assert_eq!(build_path(m, V2, "secret/path/foo"), "secret/path/data/foo");
        assert_eq!(
            build_path(m, V2, "secret/path/data/foo"),
            "secret/path/data/foo"
        );
        assert_eq!(build_path(m, V1, "secret/path/foo"), "secret/path/foo");
        assert_eq!(
            build_path(None, V2, "secret/path/foo"),
            "secret/data/path/foo"
        );
        assert_eq!(
            build_path(None, V2, "secret/path/data/foo"),
            "secret/path/data/foo"
        );
        assert_eq!(build_path(None, V1, "secret/path/foo"), "secret/path/foo");
        assert_eq!(build_path(Some("kv"), V2, "a/b/c"), "kv/data/a/b/c");
    }

    #[test]
    fn metadata_paths() {
        assert_eq!(
            build_metadata_path(Some("secret"), V2, "foo").as_deref(),
            Ok("secret/metadata/foo")
        );
        assert_eq!(
            build_metadata_path(Some("secret"), V2, "secret/data/foo").as_deref(),
            Ok("secret/metadata/foo")
        );
        assert_eq!(
            build_metadata_path(Some("secret"), V2, "").as_deref(),
            Ok("secret/metadata/")
        );
        assert_eq!(
            build_metadata_path(None, V2, "secret/data/foo").as_deref(),
            Ok("secret/metadata/foo")
        );
        assert!(build_metadata_path(None, V2, "secret/foo").is_err());
        assert_eq!(
            build_metadata_path(Some("kv1"), V1, "a/").as_deref(),
            Ok("kv1/a/")
        );
    }
}
