//! Secret Manager resource names, global (`projects/P/secrets/S`) or regional
//! (`projects/P/locations/L/secrets/S`).

/// `latest`: the version read when `remoteRef.version` is empty.
pub const DEFAULT_VERSION: &str = "latest";

/// The parent of a store's secrets: `projects/P` or `projects/P/locations/L`.
pub fn parent(project: &str, location: Option<&str>) -> String {
    match location.filter(|l| !l.is_empty()) {
        Some(l) => format!("projects/{project}/locations/{l}"),
        None => format!("projects/{project}"),
    }
}

/// A secret: `<parent>/secrets/S`.
pub fn secret(project: &str, location: Option<&str>, key: &str) -> String {
    format!("{}/secrets/{key}", parent(project, location))
}

/// A secret version: `<secret>/versions/V` (`latest` when `version` is empty).
pub fn version(project: &str, location: Option<&str>, key: &str, version: Option<&str>) -> String {
    let v = version.filter(|v| !v.is_empty()).unwrap_or(DEFAULT_VERSION);
    format!("{}/versions/{v}", secret(project, location, key))
}

/// The short name of a secret from its full name as the API returns it (the API answers with the
/// project number where the request named the project ID, so the project segment is skipped):
/// `projects/123/secrets/db` → `db`, `projects/123/locations/l/secrets/db` → `db`.
pub fn short_name(full: &str) -> &str {
    match full.split_once("/secrets/") {
        Some((_, rest)) => rest,
        None => full,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn global_and_regional_names() {
        assert_eq!(parent("p", None), "projects/p");
        assert_eq!(parent("p", Some("")), "projects/p");
        assert_eq!(
            parent("p", Some("europe-west1")),
            "projects/p/locations/europe-west1"
        );
        assert_eq!(secret("p", None, "db"), "projects/p/secrets/db");
        assert_eq!(
            version("p", None, "db", None),
            "projects/p/secrets/db/versions/latest"
        );
        assert_eq!(
            version("p", None, "db", Some("")),
            "projects/p/secrets/db/versions/latest"
        );
        assert_eq!(
            version("p", Some("us-east1"), "db", Some("3")),
            "projects/p/locations/us-east1/secrets/db/versions/3"
        );
        assert_eq!(short_name("projects/123456/secrets/db"), "db");
        assert_eq!(short_name("projects/123456/locations/l/secrets/a-b"), "a-b");
    }
}
