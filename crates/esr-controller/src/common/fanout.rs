//! Metadata shared by the fan-out controllers (ClusterExternalSecret → ExternalSecrets,
//! ClusterPushSecret → PushSecrets): the children they create carry the parent's metadata and a
//! controller owner reference, and an existing child is taken over the same way.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

/// Metadata of a new child `namespace/name`.
pub(crate) fn child_meta(
    name: String,
    namespace: &str,
    labels: BTreeMap<String, String>,
    annotations: BTreeMap<String, String>,
    owner: OwnerReference,
) -> ObjectMeta {
    ObjectMeta {
        name: Some(name),
        namespace: Some(namespace.to_string()),
        labels: Some(labels),
        annotations: Some(annotations),
        owner_references: Some(vec![owner]),
        ..Default::default()
    }
}

/// Puts the parent-controlled parts on an existing child's metadata: labels and annotations
/// replaced, the controller reference set to `owner`, other owner references and finalizers kept,
/// managed fields dropped (the update is a replace).
pub(crate) fn take_over_meta(
    meta: &mut ObjectMeta,
    labels: BTreeMap<String, String>,
    annotations: BTreeMap<String, String>,
    owner: OwnerReference,
) {
    meta.labels = Some(labels);
    meta.annotations = Some(annotations);
    let mut refs: Vec<OwnerReference> = meta
        .owner_references
        .iter()
        .flatten()
        .filter(|o| o.controller != Some(true))
        .cloned()
        .collect();
    refs.push(owner);
    meta.owner_references = Some(refs);
    meta.managed_fields = None;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner(name: &str, controller: bool) -> OwnerReference {
        OwnerReference {
            api_version: "v1".into(),
            kind: "K".into(),
            name: name.into(),
            uid: format!("uid-{name}"),
            controller: Some(controller),
            ..Default::default()
        }
    }

    #[test]
    fn take_over_replaces_only_the_controller_reference() {
        let mut meta = child_meta(
            "c".into(),
            "ns",
            BTreeMap::from([("old".into(), "l".into())]),
            BTreeMap::new(),
            owner("old-controller", true),
        );
        meta.owner_references
            .get_or_insert_default()
            .push(owner("other", false));
        meta.finalizers = Some(vec!["f".into()]);
        take_over_meta(
            &mut meta,
            BTreeMap::from([("new".into(), "l".into())]),
            BTreeMap::from([("a".into(), "b".into())]),
            owner("parent", true),
        );
        let names: Vec<_> = meta
            .owner_references
            .iter()
            .flatten()
            .map(|o| o.name.as_str())
            .collect();
        assert_eq!(names, vec!["other", "parent"]);
        assert_eq!(meta.labels.unwrap().keys().collect::<Vec<_>>(), vec!["new"]);
        assert_eq!(meta.annotations.unwrap()["a"], "b");
        assert_eq!(meta.finalizers.unwrap(), vec!["f"]);
        assert_eq!(meta.name.as_deref(), Some("c"));
    }
}
