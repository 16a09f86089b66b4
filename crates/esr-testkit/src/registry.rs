//! The resource types the server knows: built-in kinds and the kinds registered by CRDs.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Value, json};

use crate::error::{ApiError, Cause, Subject};
use crate::schema::CompiledSchema;

/// A served group/version/resource.
#[derive(Debug, Clone)]
pub struct ResourceType {
    /// API group, "" for core.
    pub group: String,
    /// Version, e.g. `v1`.
    pub version: String,
    /// Kind.
    pub kind: String,
    /// List kind.
    pub list_kind: String,
    /// Plural resource name.
    pub plural: String,
    /// Singular name.
    pub singular: String,
    /// Namespaced or cluster scoped.
    pub namespaced: bool,
    /// Short names (discovery).
    pub short_names: Vec<String>,
    /// Categories (discovery).
    pub categories: Vec<String>,
    /// Has a `status` subresource.
    pub status_subresource: bool,
    /// ServiceAccount `token` subresource.
    pub token_subresource: bool,
    /// Maintains `metadata.generation`.
    pub has_generation: bool,
    /// A custom resource (from a CRD).
    pub custom: bool,
    /// Only `create` is served, nothing is stored (TokenReview).
    pub create_only: bool,
    /// The object schema (OpenAPI v3, structural) used for OpenAPI, list types and strict decoding.
    pub schema: Arc<Value>,
    /// Compiled CRD schema (validation, defaulting, pruning), custom resources only.
    pub compiled: Option<Arc<CompiledSchema>>,
    /// Extra field selector paths (without a leading dot).
    pub selectable_fields: Vec<String>,
    /// CRD additionalPrinterColumns.
    pub printer_columns: Vec<Value>,
    /// The CRD's storage version.
    pub storage: bool,
    /// Does a delete return the object (true) or a Status (false)?
    pub delete_returns_object: bool,
    /// Cache of [`object_root_schema`].
    pub root_cache: std::sync::OnceLock<Arc<Value>>,
}

impl ResourceType {
    /// Error subject for this type.
    pub fn subject(&self) -> Subject<'_> {
        Subject {
            group: &self.group,
            plural: &self.plural,
            kind: &self.kind,
        }
    }
    /// `v1` or `group/version`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
    /// Storage key (group, plural).
    pub fn gr(&self) -> Gr {
        Gr {
            group: self.group.clone(),
            plural: self.plural.clone(),
        }
    }
    /// Discovery verbs.
    pub fn verbs(&self) -> Vec<&'static str> {
        if self.create_only {
            vec!["create"]
        } else if self.kind == "Namespace" {
            vec![
                "create", "delete", "get", "list", "patch", "update", "watch",
            ]
        } else {
            vec![
                "create",
                "delete",
                "deletecollection",
                "get",
                "list",
                "patch",
                "update",
                "watch",
            ]
        }
    }
    /// Field selector paths this type accepts.
    pub fn field_selector_allowed(&self, field: &str) -> bool {
        if field == "metadata.name" || (self.namespaced && field == "metadata.namespace") {
            return true;
        }
        self.selectable_fields.iter().any(|f| f == field)
    }
}

/// Group and plural resource: the storage key shared by all versions.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Gr {
    /// API group.
    pub group: String,
    /// Plural.
    pub plural: String,
}

/// All served types.
#[derive(Debug, Default, Clone)]
pub struct Registry {
    types: BTreeMap<(String, String, String), Arc<ResourceType>>,
    /// Bumped on every change (OpenAPI/discovery cache keys).
    pub generation: u64,
}

impl Registry {
    /// The built-in types.
    pub fn builtin() -> Self {
        let mut r = Registry::default();
        for t in builtin_types() {
            r.insert(t);
        }
        r
    }

    fn insert(&mut self, t: ResourceType) {
        self.types.insert(
            (t.group.clone(), t.version.clone(), t.plural.clone()),
            Arc::new(t),
        );
        self.generation += 1;
    }

    /// Look up a served type.
    pub fn get(&self, group: &str, version: &str, plural: &str) -> Option<Arc<ResourceType>> {
        self.types
            .get(&(group.to_string(), version.to_string(), plural.to_string()))
            .cloned()
    }

    /// Any served version of a group/resource (the storage version first).
    pub fn any_version(&self, gr: &Gr) -> Option<Arc<ResourceType>> {
        let all: Vec<&Arc<ResourceType>> = self
            .types
            .values()
            .filter(|t| t.group == gr.group && t.plural == gr.plural)
            .collect();
        all.iter()
            .find(|t| t.storage)
            .or(all.first())
            .map(|t| Arc::clone(t))
    }

    /// Find a type by group and kind (any version, storage first).
    pub fn by_kind(&self, group: &str, version: &str, kind: &str) -> Option<Arc<ResourceType>> {
        self.types
            .values()
            .find(|t| t.group == group && t.version == version && t.kind == kind)
            .cloned()
    }

    /// All types.
    pub fn all(&self) -> impl Iterator<Item = &Arc<ResourceType>> {
        self.types.values()
    }

    /// Groups (without core) with their versions sorted by preference.
    pub fn groups(&self) -> Vec<(String, Vec<String>)> {
        let mut m: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for t in self.types.values() {
            if t.group.is_empty() {
                continue;
            }
            let v = m.entry(t.group.clone()).or_default();
            if !v.contains(&t.version) {
                v.push(t.version.clone());
            }
        }
        let mut out: Vec<(String, Vec<String>)> = m.into_iter().collect();
        for (_, vs) in &mut out {
            vs.sort_by(|a, b| version_priority(b).cmp(&version_priority(a)).then(a.cmp(b)));
        }
        // Built-in groups first as in a real server, then CRD groups alphabetically.
        out.sort_by_key(|(g, _)| (!BUILTIN_GROUPS.contains(&g.as_str()), g.clone()));
        out
    }

    /// Types of one group/version.
    pub fn group_version(&self, group: &str, version: &str) -> Vec<Arc<ResourceType>> {
        self.types
            .values()
            .filter(|t| t.group == group && t.version == version)
            .cloned()
            .collect()
    }

    /// Replace all types registered by a CRD.
    pub fn set_crd_types(&mut self, group: &str, plural: &str, types: Vec<ResourceType>) {
        self.types
            .retain(|_, t| !(t.custom && t.group == group && t.plural == plural));
        for t in types {
            self.insert(t);
        }
        self.generation += 1;
    }
}

const BUILTIN_GROUPS: &[&str] = &[
    "apps",
    "rbac.authorization.k8s.io",
    "policy",
    "authorization.k8s.io",
    "events.k8s.io",
    "authentication.k8s.io",
    "coordination.k8s.io",
    "apiextensions.k8s.io",
];

/// Kubernetes version priority: GA > beta > alpha > other; higher numbers first.
pub fn version_priority(v: &str) -> (u8, u64, u64) {
    let Some(rest) = v.strip_prefix('v') else {
        return (0, 0, 0);
    };
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let Ok(major) = digits.parse::<u64>() else {
        return (0, 0, 0);
    };
    let tail = &rest[digits.len()..];
    if tail.is_empty() {
        return (3, major, 0);
    }
    for (prefix, rank) in [("beta", 2u8), ("alpha", 1u8)] {
        if let Some(n) = tail.strip_prefix(prefix)
            && let Ok(minor) = n.parse::<u64>()
        {
            return (rank, major, minor);
        }
    }
    (0, 0, 0)
}

/// The schema of `metadata`, shared by all kinds.
pub fn metadata_schema() -> Value {
    esr_schema::meta::object_meta_schema()
}

fn object_schema(description: &str, props: Value) -> Value {
    let mut p = json!({
        "apiVersion": {"type": "string", "description": "APIVersion defines the versioned schema of this representation of an object."},
        "kind": {"type": "string", "description": "Kind is a string value representing the REST resource this object represents."},
        "metadata": metadata_schema(),
    });
    if let (Some(pm), Some(extra)) = (p.as_object_mut(), props.as_object()) {
        for (k, v) in extra {
            pm.insert(k.clone(), v.clone());
        }
    }
    json!({"type": "object", "description": description, "properties": p})
}

fn str_map() -> Value {
    json!({"type": "object", "additionalProperties": {"type": "string"}})
}

fn free() -> Value {
    json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true})
}

fn object_ref() -> Value {
    json!({"type": "object", "properties": {
        "apiVersion": {"type": "string"}, "kind": {"type": "string"}, "name": {"type": "string"},
        "namespace": {"type": "string"}, "uid": {"type": "string"}, "resourceVersion": {"type": "string"},
        "fieldPath": {"type": "string"}}})
}

fn container_schema() -> Value {
    json!({"type": "object", "required": ["name"], "x-kubernetes-preserve-unknown-fields": true, "properties": {
        "name": {"type": "string"},
        "image": {"type": "string"},
        "command": {"type": "array", "items": {"type": "string"}},
        "args": {"type": "array", "items": {"type": "string"}},
        "env": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
            "items": {"type": "object", "required": ["name"], "x-kubernetes-preserve-unknown-fields": true,
                "properties": {"name": {"type": "string"}, "value": {"type": "string"}}}},
        "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["containerPort", "protocol"],
            "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                "properties": {"containerPort": {"type": "integer"}, "protocol": {"type": "string"}, "name": {"type": "string"}}}},
        "volumeMounts": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["mountPath"],
            "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                "properties": {"mountPath": {"type": "string"}, "name": {"type": "string"}}}}
    }})
}

fn conditions(key: &str) -> Value {
    json!({"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": [key],
        "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true, "properties": {
            "type": {"type": "string"}, "status": {"type": "string"}, "reason": {"type": "string"},
            "message": {"type": "string"}, "lastTransitionTime": {"type": "string"}, "lastUpdateTime": {"type": "string"}}}})
}

#[allow(clippy::too_many_arguments)]
fn bt(
    group: &str,
    version: &str,
    kind: &str,
    plural: &str,
    namespaced: bool,
    short: &[&str],
    status: bool,
    generation: bool,
    schema: Value,
    fields: &[&str],
) -> ResourceType {
    ResourceType {
        group: group.into(),
        version: version.into(),
        kind: kind.into(),
        list_kind: format!("{kind}List"),
        plural: plural.into(),
        singular: kind.to_lowercase(),
        namespaced,
        short_names: short.iter().map(|s| s.to_string()).collect(),
        categories: vec![],
        status_subresource: status,
        token_subresource: false,
        has_generation: generation,
        custom: false,
        create_only: false,
        schema: Arc::new(schema),
        compiled: None,
        selectable_fields: fields.iter().map(|s| s.to_string()).collect(),
        printer_columns: vec![],
        storage: true,
        delete_returns_object: false,
        root_cache: std::sync::OnceLock::new(),
    }
}

const EVENT_FIELDS: &[&str] = &[
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
];

fn builtin_types() -> Vec<ResourceType> {
    let mut v = vec![];
    let mut ns = bt(
        "",
        "v1",
        "Namespace",
        "namespaces",
        false,
        &["ns"],
        true,
        false,
        object_schema(
            "Namespace provides a scope for Names.",
            json!({
                "spec": {"type": "object", "properties": {"finalizers": {"type": "array", "items": {"type": "string"}}}},
                "status": {"type": "object", "properties": {"phase": {"type": "string"}, "conditions": conditions("type")}}
            }),
        ),
        &["status.phase"],
    );
    ns.delete_returns_object = true;
    v.push(ns);
    v.push(bt(
        "",
        "v1",
        "Secret",
        "secrets",
        true,
        &[],
        false,
        false,
        object_schema(
            "Secret holds secret data of a certain type.",
            json!({
                "data": {"type": "object", "additionalProperties": {"type": "string", "format": "byte"}},
                "stringData": str_map(),
                "type": {"type": "string"},
                "immutable": {"type": "boolean"}
            }),
        ),
        &["type"],
    ));
    v.push(bt(
        "",
        "v1",
        "ConfigMap",
        "configmaps",
        true,
        &["cm"],
        false,
        false,
        object_schema(
            "ConfigMap holds configuration data for pods to consume.",
            json!({
                "data": str_map(),
                "binaryData": {"type": "object", "additionalProperties": {"type": "string", "format": "byte"}},
                "immutable": {"type": "boolean"}
            }),
        ),
        &[],
    ));
    let mut sa = bt(
        "",
        "v1",
        "ServiceAccount",
        "serviceaccounts",
        true,
        &["sa"],
        false,
        false,
        object_schema(
            "ServiceAccount binds together a name, a principal and a set of secrets.",
            json!({
                "secrets": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"], "items": object_ref()},
                "imagePullSecrets": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}}}},
                "automountServiceAccountToken": {"type": "boolean"}
            }),
        ),
        &[],
    );
    sa.token_subresource = true;
    v.push(sa);
    let event_props = json!({
        "involvedObject": object_ref(),
        "reason": {"type": "string"}, "message": {"type": "string"}, "type": {"type": "string"},
        "source": {"type": "object", "properties": {"component": {"type": "string"}, "host": {"type": "string"}}},
        "firstTimestamp": {"type": "string"}, "lastTimestamp": {"type": "string"}, "eventTime": {"type": "string"},
        "count": {"type": "integer"}, "action": {"type": "string"}, "related": object_ref(),
        "reportingComponent": {"type": "string"}, "reportingInstance": {"type": "string"},
        "series": free()
    });
    v.push(bt(
        "",
        "v1",
        "Event",
        "events",
        true,
        &["ev"],
        false,
        false,
        object_schema(
            "Event is a report of an event somewhere in the cluster.",
            event_props,
        ),
        EVENT_FIELDS,
    ));
    v.push(bt(
        "events.k8s.io",
        "v1",
        "Event",
        "events",
        true,
        &["ev"],
        false,
        false,
        object_schema(
            "Event is a report of an event somewhere in the cluster.",
            json!({
                "regarding": object_ref(), "related": object_ref(), "note": {"type": "string"},
                "reason": {"type": "string"}, "type": {"type": "string"}, "action": {"type": "string"},
                "eventTime": {"type": "string"}, "reportingController": {"type": "string"},
                "reportingInstance": {"type": "string"}, "series": free(),
                "deprecatedCount": {"type": "integer"}, "deprecatedFirstTimestamp": {"type": "string"},
                "deprecatedLastTimestamp": {"type": "string"}, "deprecatedSource": free()
            }),
        ),
        &["regarding.kind", "regarding.namespace", "regarding.name", "regarding.uid", "reason", "type"],
    ));
    v.push(bt(
        "coordination.k8s.io",
        "v1",
        "Lease",
        "leases",
        true,
        &[],
        false,
        false,
        object_schema(
            "Lease defines a lease concept.",
            json!({"spec": {"type": "object", "properties": {
                "holderIdentity": {"type": "string"}, "leaseDurationSeconds": {"type": "integer"},
                "acquireTime": {"type": "string"}, "renewTime": {"type": "string"},
                "leaseTransitions": {"type": "integer"}, "strategy": {"type": "string"},
                "preferredHolder": {"type": "string"}}}}),
        ),
        &[],
    ));
    let mut tr = bt(
        "authentication.k8s.io",
        "v1",
        "TokenReview",
        "tokenreviews",
        false,
        &[],
        false,
        false,
        object_schema(
            "TokenReview attempts to authenticate a token to a known user.",
            json!({"spec": {"type": "object", "properties": {"token": {"type": "string"},
                "audiences": {"type": "array", "items": {"type": "string"}}}},
                "status": free()}),
        ),
        &[],
    );
    tr.create_only = true;
    v.push(tr);
    for (kind, plural) in [
        ("SelfSubjectAccessReview", "selfsubjectaccessreviews"),
        ("SubjectAccessReview", "subjectaccessreviews"),
        ("SelfSubjectRulesReview", "selfsubjectrulesreviews"),
    ] {
        let mut t = bt(
            "authorization.k8s.io",
            "v1",
            kind,
            plural,
            false,
            &[],
            false,
            false,
            object_schema(
                "Access review (answered as by an AlwaysAllow authorizer).",
                json!({"spec": free(), "status": free()}),
            ),
            &[],
        );
        t.create_only = true;
        v.push(t);
    }
    let pod_template = json!({"type": "object", "properties": {
        "metadata": metadata_schema(),
        "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true, "properties": {
            "containers": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"], "items": container_schema()},
            "initContainers": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"], "items": container_schema()},
            "volumes": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true, "properties": {"name": {"type": "string"}}}},
            "imagePullSecrets": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                "items": {"type": "object", "properties": {"name": {"type": "string"}}}},
            "serviceAccountName": {"type": "string"}
        }}
    }});
    v.push(bt(
        "apps",
        "v1",
        "Deployment",
        "deployments",
        true,
        &["deploy"],
        true,
        true,
        object_schema(
            "Deployment enables declarative updates for Pods and ReplicaSets.",
            json!({
                "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true, "properties": {
                    "replicas": {"type": "integer"},
                    "selector": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    "template": pod_template.clone(),
                    "strategy": free()
                }},
                "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true, "properties": {"conditions": conditions("type")}}
            }),
        ),
        &[],
    ));
    // StatefulSet and DaemonSet: stored only (no pods, no status), like Deployment.
    for (kind, plural, short, desc, extra) in [
        (
            "StatefulSet",
            "statefulsets",
            "sts",
            "StatefulSet represents a set of pods with consistent identities.",
            json!({"serviceName": {"type": "string"}, "podManagementPolicy": {"type": "string"},
                "updateStrategy": free(), "volumeClaimTemplates": {"type": "array", "x-kubernetes-list-type": "atomic",
                    "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
                "minReadySeconds": {"type": "integer"}, "revisionHistoryLimit": {"type": "integer"},
                "persistentVolumeClaimRetentionPolicy": free(), "ordinals": free()}),
        ),
        (
            "DaemonSet",
            "daemonsets",
            "ds",
            "DaemonSet represents the configuration of a daemon set.",
            json!({"updateStrategy": free(), "minReadySeconds": {"type": "integer"},
                "revisionHistoryLimit": {"type": "integer"}}),
        ),
    ] {
        let mut spec_props = json!({
            "selector": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
            "template": pod_template.clone(),
        });
        if kind == "StatefulSet" {
            spec_props["replicas"] = json!({"type": "integer"});
        }
        if let (Some(m), Some(e)) = (spec_props.as_object_mut(), extra.as_object()) {
            m.extend(e.clone());
        }
        v.push(bt(
            "apps",
            "v1",
            kind,
            plural,
            true,
            &[short],
            true,
            true,
            object_schema(
                desc,
                json!({
                    "spec": {"type": "object", "properties": spec_props},
                    "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true, "properties": {"conditions": conditions("type")}}
                }),
            ),
            &[],
        ));
    }
    v.push(bt(
        "",
        "v1",
        "Service",
        "services",
        true,
        &["svc"],
        true,
        false,
        object_schema(
            "Service is a named abstraction of software service (for example, mysql) consisting of local port (for example 3306) that the proxy listens on, and the selector that determines which pods will answer requests sent through the proxy.",
            json!({
                "spec": {"type": "object", "properties": {
                    "type": {"type": "string"},
                    "selector": str_map(),
                    "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["port", "protocol"],
                        "items": {"type": "object", "required": ["port"], "properties": {
                            "name": {"type": "string"}, "protocol": {"type": "string"}, "appProtocol": {"type": "string"},
                            "port": {"type": "integer", "format": "int32"}, "targetPort": {"x-kubernetes-int-or-string": true},
                            "nodePort": {"type": "integer", "format": "int32"}}}},
                    "clusterIP": {"type": "string"},
                    "clusterIPs": {"type": "array", "x-kubernetes-list-type": "atomic", "items": {"type": "string"}},
                    "externalIPs": {"type": "array", "x-kubernetes-list-type": "atomic", "items": {"type": "string"}},
                    "externalName": {"type": "string"},
                    "externalTrafficPolicy": {"type": "string"},
                    "internalTrafficPolicy": {"type": "string"},
                    "ipFamilies": {"type": "array", "x-kubernetes-list-type": "atomic", "items": {"type": "string"}},
                    "ipFamilyPolicy": {"type": "string"},
                    "loadBalancerClass": {"type": "string"},
                    "loadBalancerIP": {"type": "string"},
                    "loadBalancerSourceRanges": {"type": "array", "x-kubernetes-list-type": "atomic", "items": {"type": "string"}},
                    "allocateLoadBalancerNodePorts": {"type": "boolean"},
                    "healthCheckNodePort": {"type": "integer", "format": "int32"},
                    "publishNotReadyAddresses": {"type": "boolean"},
                    "sessionAffinity": {"type": "string"},
                    "sessionAffinityConfig": free(),
                    "trafficDistribution": {"type": "string"}
                }},
                "status": free()
            }),
        ),
        &[],
    ));
    let policy_rule = json!({"type": "object", "required": ["verbs"], "properties": {
        "apiGroups": {"type": "array", "x-kubernetes-list-type": "atomic", "items": {"type": "string"}},
        "resources": {"type": "array", "x-kubernetes-list-type": "atomic", "items": {"type": "string"}},
        "resourceNames": {"type": "array", "x-kubernetes-list-type": "atomic", "items": {"type": "string"}},
        "nonResourceURLs": {"type": "array", "x-kubernetes-list-type": "atomic", "items": {"type": "string"}},
        "verbs": {"type": "array", "x-kubernetes-list-type": "atomic", "items": {"type": "string"}}}});
    let rules = json!({"type": "array", "x-kubernetes-list-type": "atomic", "items": policy_rule});
    let label_selector = json!({"type": "object", "properties": {
        "matchLabels": str_map(),
        "matchExpressions": {"type": "array", "x-kubernetes-list-type": "atomic", "items": {"type": "object",
            "required": ["key", "operator"], "properties": {"key": {"type": "string"}, "operator": {"type": "string"},
            "values": {"type": "array", "x-kubernetes-list-type": "atomic", "items": {"type": "string"}}}}}}});
    let role_ref = json!({"type": "object", "required": ["apiGroup", "kind", "name"], "properties": {
        "apiGroup": {"type": "string"}, "kind": {"type": "string"}, "name": {"type": "string"}}});
    let subjects = json!({"type": "array", "x-kubernetes-list-type": "atomic", "items": {"type": "object",
        "required": ["kind", "name"], "properties": {"apiGroup": {"type": "string"}, "kind": {"type": "string"},
        "name": {"type": "string"}, "namespace": {"type": "string"}}}});
    for (kind, plural, namespaced, desc, props) in [
        (
            "Role",
            "roles",
            true,
            "Role is a namespaced, logical grouping of PolicyRules that can be referenced as a unit by a RoleBinding.",
            json!({"rules": rules.clone()}),
        ),
        (
            "ClusterRole",
            "clusterroles",
            false,
            "ClusterRole is a cluster level, logical grouping of PolicyRules that can be referenced as a unit by a RoleBinding or ClusterRoleBinding.",
            json!({"rules": rules.clone(), "aggregationRule": {"type": "object", "properties": {
                "clusterRoleSelectors": {"type": "array", "x-kubernetes-list-type": "atomic", "items": label_selector.clone()}}}}),
        ),
        (
            "RoleBinding",
            "rolebindings",
            true,
            "RoleBinding references a role, but does not contain it.",
            json!({"roleRef": role_ref.clone(), "subjects": subjects.clone()}),
        ),
        (
            "ClusterRoleBinding",
            "clusterrolebindings",
            false,
            "ClusterRoleBinding references a ClusterRole, but not contain it.",
            json!({"roleRef": role_ref.clone(), "subjects": subjects.clone()}),
        ),
    ] {
        // Stored only: esr-testkit authorizes every request, RBAC objects grant nothing here.
        v.push(bt(
            "rbac.authorization.k8s.io",
            "v1",
            kind,
            plural,
            namespaced,
            &[],
            false,
            false,
            object_schema(desc, props),
            &[],
        ));
    }
    v.push(bt(
        "policy",
        "v1",
        "PodDisruptionBudget",
        "poddisruptionbudgets",
        true,
        &["pdb"],
        true,
        true,
        object_schema(
            "PodDisruptionBudget is an object to define the max disruption that can be caused to a collection of pods",
            json!({
                "spec": {"type": "object", "properties": {
                    "minAvailable": {"x-kubernetes-int-or-string": true},
                    "maxUnavailable": {"x-kubernetes-int-or-string": true},
                    "selector": label_selector,
                    "unhealthyPodEvictionPolicy": {"type": "string"}
                }},
                "status": free()
            }),
        ),
        &[],
    ));
    let mut crd = bt(
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
        false,
        &["crd", "crds"],
        true,
        true,
        object_schema(
            "CustomResourceDefinition represents a resource that should be exposed on the API server.",
            json!({"spec": free(), "status": free()}),
        ),
        &[],
    );
    crd.delete_returns_object = true;
    v.push(crd);
    v
}

/// Build the types a CRD registers. Returns field errors (422) for an invalid CRD.
pub fn crd_types(crd: &Value) -> Result<Vec<ResourceType>, Vec<Cause>> {
    let mut causes = crate::crd_validation::validate(crd);
    let spec = &crd["spec"];
    let group = spec["group"].as_str().unwrap_or_default().to_string();
    let names = &spec["names"];
    let plural = names["plural"].as_str().unwrap_or_default().to_string();
    let kind = names["kind"].as_str().unwrap_or_default().to_string();
    let scope = spec["scope"].as_str().unwrap_or_default();
    let versions = spec["versions"].as_array().cloned().unwrap_or_default();
    if versions.is_empty() {
        causes.push(Cause::new(
            "FieldValueRequired",
            "Required value: must have exactly one version marked as storage version",
            "spec.versions",
        ));
    }
    let storage_count = versions
        .iter()
        .filter(|v| v["storage"].as_bool() == Some(true))
        .count();
    if !versions.is_empty() && storage_count != 1 {
        causes.push(Cause::new(
            "FieldValueInvalid",
            format!("Invalid value: {storage_count}: must have exactly one version marked as storage version"),
            "spec.versions",
        ));
    }
    let mut out = vec![];
    for (i, v) in versions.iter().enumerate() {
        let vname = v["name"].as_str().unwrap_or_default().to_string();
        let schema = v["schema"]["openAPIV3Schema"].clone();
        let base = crate::crd_validation::schema_path(crd, i);
        if schema.is_null() {
            continue;
        }
        let compiled = match crate::schema::CompiledSchema::new(&schema) {
            Ok(c) => Some(Arc::new(c)),
            Err(e) => {
                causes.push(Cause::new(
                    "FieldValueInvalid",
                    format!("Invalid value: {e}"),
                    base.clone(),
                ));
                None
            }
        };
        if v["served"].as_bool() != Some(true) {
            continue;
        }
        let status = v["subresources"].get("status").is_some();
        let selectable = v["selectableFields"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|f| f["jsonPath"].as_str())
                    .map(|p| p.trim_start_matches('.').to_string())
                    .collect()
            })
            .unwrap_or_default();
        out.push(ResourceType {
            group: group.clone(),
            version: vname,
            kind: kind.clone(),
            list_kind: names["listKind"]
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| format!("{kind}List")),
            plural: plural.clone(),
            singular: names["singular"]
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| kind.to_lowercase()),
            namespaced: scope == "Namespaced",
            short_names: str_list(&names["shortNames"]),
            categories: str_list(&names["categories"]),
            status_subresource: status,
            token_subresource: false,
            has_generation: true,
            custom: true,
            create_only: false,
            schema: Arc::new(schema),
            compiled,
            selectable_fields: selectable,
            printer_columns: v["additionalPrinterColumns"]
                .as_array()
                .cloned()
                .unwrap_or_default(),
            storage: v["storage"].as_bool() == Some(true),
            delete_returns_object: true,
            root_cache: std::sync::OnceLock::new(),
        });
    }
    if causes.is_empty() {
        Ok(out)
    } else {
        Err(causes)
    }
}

fn str_list(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// A 422 for an invalid CRD.
pub fn invalid_crd(name: &str, causes: Vec<Cause>) -> ApiError {
    ApiError::invalid(
        &Subject {
            group: "apiextensions.k8s.io",
            plural: "customresourcedefinitions",
            kind: "CustomResourceDefinition",
        },
        name,
        causes,
    )
}

/// Child schema for an object property (properties[key], else additionalProperties).
pub fn child_schema<'a>(schema: Option<&'a Value>, key: &str) -> Option<&'a Value> {
    let s = schema?;
    if let Some(p) = s.get("properties").and_then(|p| p.get(key)) {
        return Some(p);
    }
    match s.get("additionalProperties") {
        Some(ap) if ap.is_object() => Some(ap),
        _ => None,
    }
}

/// Items schema of an array.
pub fn items_schema(schema: Option<&Value>) -> Option<&Value> {
    schema?.get("items")
}

/// List type of an array schema: ("atomic"|"set"|"map", keys).
pub fn list_type(schema: Option<&Value>) -> (String, Vec<String>) {
    let Some(s) = schema else {
        return ("atomic".into(), vec![]);
    };
    let t = s
        .get("x-kubernetes-list-type")
        .and_then(Value::as_str)
        .unwrap_or("atomic")
        .to_string();
    let keys = str_list(s.get("x-kubernetes-list-map-keys").unwrap_or(&Value::Null));
    (t, keys)
}

/// The schema of a whole object of this type, with `metadata` always present.
pub fn object_root_schema(rt: &ResourceType) -> Arc<Value> {
    Arc::clone(
        rt.root_cache
            .get_or_init(|| Arc::new(build_root_schema(rt))),
    )
}

fn build_root_schema(rt: &ResourceType) -> Value {
    let mut s = (*rt.schema).clone();
    if let Some(props) = s.get_mut("properties").and_then(Value::as_object_mut) {
        props.insert("metadata".into(), metadata_schema());
        props
            .entry("apiVersion")
            .or_insert(json!({"type": "string"}));
        props.entry("kind").or_insert(json!({"type": "string"}));
    } else if let Some(o) = s.as_object_mut() {
        o.insert(
            "properties".into(),
            json!({"metadata": metadata_schema(), "apiVersion": {"type": "string"}, "kind": {"type": "string"}}),
        );
    }
    s
}
