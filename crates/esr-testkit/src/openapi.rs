//! OpenAPI v3 documents (`/openapi/v3`, `/openapi/v3/apis/{group}/{version}`), generated from the
//! registry: CRD schemas for custom resources, small hand-written schemas for built-in kinds.
//! kubectl reads them to learn that the server does field validation (so it sends
//! `fieldValidation=Strict` instead of validating client-side), for strategic-merge support and for
//! `kubectl explain`.

use serde_json::{Map, Value, json};

use crate::http::KUBE_MINOR;
use crate::registry::{Registry, ResourceType, metadata_schema};

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// `/openapi/v3`.
pub fn index(reg: &Registry) -> Value {
    let mut paths = Map::new();
    let mut gvs: Vec<(String, String)> = reg
        .all()
        .map(|t| (t.group.clone(), t.version.clone()))
        .collect();
    gvs.dedup();
    for (g, v) in gvs {
        let p = gv_path(&g, &v);
        paths.insert(
            p.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{p}?hash=G{}", reg.generation)}),
        );
    }
    json!({"paths": paths})
}

/// Component schema name, as a real server names it.
pub fn schema_name(rt: &ResourceType) -> String {
    if rt.custom {
        let rev: Vec<&str> = rt.group.split('.').rev().collect();
        format!("{}.{}.{}", rev.join("."), rt.version, rt.kind)
    } else if rt.group.is_empty() {
        format!("io.k8s.api.core.{}.{}", rt.version, rt.kind)
    } else if rt.group == "apiextensions.k8s.io" {
        format!(
            "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.{}.{}",
            rt.version, rt.kind
        )
    } else {
        let short = rt.group.split('.').next().unwrap_or_default();
        format!("io.k8s.api.{short}.{}.{}", rt.version, rt.kind)
    }
}

fn gvk(rt: &ResourceType) -> Value {
    json!({"group": rt.group, "version": rt.version, "kind": rt.kind})
}

fn op(
    rt: &ResourceType,
    action: &str,
    name: &str,
    params: Vec<Value>,
    body_types: &[&str],
) -> Value {
    let sref = json!({"$ref": format!("#/components/schemas/{name}")});
    let mut o = json!({
        "operationId": format!("{action}{}", rt.kind),
        "parameters": params,
        "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": sref}}}},
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": gvk(rt),
    });
    if !body_types.is_empty() {
        let mut content = Map::new();
        for t in body_types {
            let schema = if action == "patch" {
                json!({"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.Patch"})
            } else {
                sref.clone()
            };
            content.insert(t.to_string(), json!({"schema": schema}));
        }
        o["requestBody"] = json!({"content": content, "required": true});
    }
    o
}

fn qp(name: &str) -> Value {
    json!({"name": name, "in": "query", "schema": {"type": "string", "uniqueItems": true}})
}

fn object_schema_for(rt: &ResourceType) -> Value {
    let mut s = (*rt.schema).clone();
    if !s.is_object() {
        s = json!({"type": "object"});
    }
    if !s["properties"].is_object() {
        s["properties"] = json!({});
    }
    s["properties"]["metadata"] = metadata_schema();
    s["properties"]["metadata"]["description"] = json!(
        "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"
    );
    if s["properties"]["apiVersion"].is_null() {
        s["properties"]["apiVersion"] = json!({"type": "string", "description": "APIVersion defines the versioned schema of this representation of an object."});
    }
    if s["properties"]["kind"].is_null() {
        s["properties"]["kind"] = json!({"type": "string", "description": "Kind is a string value representing the REST resource this object represents."});
    }
    s["x-kubernetes-group-version-kind"] = json!([gvk(rt)]);
    s
}

/// `/openapi/v3/api/v1`, `/openapi/v3/apis/{group}/{version}`.
pub fn group_version_doc(reg: &Registry, rest: &[&str]) -> Option<Value> {
    let (group, version) = match rest {
        ["api", v] => ("", *v),
        ["apis", g, v] => (*g, *v),
        _ => return None,
    };
    let types = reg.group_version(group, version);
    if types.is_empty() {
        return None;
    }
    let mut paths = Map::new();
    let mut schemas = Map::new();
    schemas.insert("io.k8s.apimachinery.pkg.apis.meta.v1.Patch".into(), json!({"type": "object", "description": "Patch is provided to give a concrete name and type to the Kubernetes PATCH request body."}));
    schemas.insert(
        "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta".into(),
        metadata_schema(),
    );
    let base = format!("/{}", gv_path(group, version));
    for rt in types {
        let name = schema_name(&rt);
        schemas.insert(name.clone(), object_schema_for(&rt));
        let coll = if rt.namespaced {
            format!("{base}/namespaces/{{namespace}}/{}", rt.plural)
        } else {
            format!("{base}/{}", rt.plural)
        };
        let write_params = || vec![qp("dryRun"), qp("fieldManager"), qp("fieldValidation")];
        let mut patch_types = vec![
            "application/json-patch+json",
            "application/merge-patch+json",
            "application/apply-patch+yaml",
        ];
        if !rt.custom {
            patch_types.push("application/strategic-merge-patch+json");
        }
        if rt.create_only {
            paths.insert(coll.clone(), json!({"post": op(&rt, "post", &name, write_params(), &["application/json", "application/yaml"])}));
            continue;
        }
        paths.insert(
            coll.clone(),
            json!({
                "get": op(&rt, "list", &name, vec![qp("labelSelector"), qp("fieldSelector"), qp("limit"), qp("continue"), qp("watch"), qp("resourceVersion")], &[]),
                "post": op(&rt, "post", &name, write_params(), &["application/json", "application/yaml"]),
                "delete": op(&rt, "deletecollection", &name, vec![qp("labelSelector")], &[]),
            }),
        );
        let mut patch_params = write_params();
        patch_params.push(qp("force"));
        let item = json!({
            "get": op(&rt, "get", &name, vec![], &[]),
            "put": op(&rt, "put", &name, write_params(), &["application/json", "application/yaml"]),
            "patch": op(&rt, "patch", &name, patch_params.clone(), &patch_types),
            "delete": op(&rt, "delete", &name, vec![qp("dryRun"), qp("propagationPolicy")], &[]),
        });
        paths.insert(format!("{coll}/{{name}}"), item);
        if rt.status_subresource {
            paths.insert(
                format!("{coll}/{{name}}/status"),
                json!({
                    "get": op(&rt, "get", &name, vec![], &[]),
                    "put": op(&rt, "put", &name, write_params(), &["application/json", "application/yaml"]),
                    "patch": op(&rt, "patch", &name, patch_params, &patch_types),
                }),
            );
        }
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": format!("v1.{KUBE_MINOR}.0")},
        "paths": paths,
        "components": {"schemas": schemas},
    }))
}
