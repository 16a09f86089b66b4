//! The HTTP front: routing, discovery, verbs, watch streams, admin endpoints.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode, header};
use serde_json::{Value, json};

use crate::error::{ApiError, ApiResult};
use crate::faults::{Audit, AuditEntry, FailRule, Faults};
use crate::registry::{ResourceType, version_priority};
use crate::selector::{FieldSelector, LabelSelector};
use crate::store::{
    DeleteOpts, EvType, FieldValidation, PatchType, Store, WriteCtx, WriteResult, for_version,
};
use crate::tokens::{DEFAULT_AUDIENCE, TokenIssuer};

/// Reported server version.
pub const KUBE_MINOR: &str = "33";

/// Shared server state.
pub struct App {
    /// Objects.
    pub store: Arc<Store>,
    /// Fault injection.
    pub faults: Faults,
    /// Audit log.
    pub audit: Audit,
    /// Token issuer.
    pub tokens: TokenIssuer,
    /// `127.0.0.1:port`.
    pub addr: String,
    /// Interval between watch bookmarks.
    pub bookmark_interval: Duration,
    /// Number of open watch streams.
    pub active_watches: Arc<std::sync::atomic::AtomicUsize>,
    /// Authenticate and authorize requests with RBAC (see [`crate::authz`]).
    pub rbac: bool,
}

struct WatchGuard(Arc<std::sync::atomic::AtomicUsize>);

impl Drop for WatchGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// The axum router.
pub fn router(app: Arc<App>) -> Router {
    Router::new().fallback(handle).with_state(app)
}

type Resp = Response<Body>;

fn json_resp(code: u16, v: &Value, warnings: &[String]) -> Resp {
    let body = serde_json::to_vec(v).unwrap_or_default();
    bytes_resp(code, Bytes::from(body), warnings)
}

fn bytes_resp(code: u16, body: Bytes, warnings: &[String]) -> Resp {
    let mut r = Response::new(Body::from(body));
    *r.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    for w in warnings {
        let escaped = w.replace('\\', "\\\\").replace('"', "\\\"");
        if let Ok(h) = HeaderValue::from_str(&format!("299 - \"{escaped}\"")) {
            r.headers_mut().append(header::WARNING, h);
        }
    }
    r
}

fn err_resp(e: &ApiError) -> Resp {
    json_resp(e.code, &e.status(), &[])
}

fn text_resp(code: u16, s: &'static str) -> Resp {
    let mut r = Response::new(Body::from(s));
    *r.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::OK);
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

/// A parsed resource request.
#[derive(Debug, Clone, Default)]
struct Target {
    group: String,
    version: String,
    namespace: String,
    plural: String,
    name: String,
    sub: String,
}

fn query_map(q: Option<&str>) -> HashMap<String, String> {
    q.map(|q| form_urlencoded::parse(q.as_bytes()).into_owned().collect())
        .unwrap_or_default()
}

fn truthy(q: &HashMap<String, String>, k: &str) -> bool {
    q.get(k).is_some_and(|v| v == "true" || v == "1")
}

async fn handle(State(app): State<Arc<App>>, req: Request<Body>) -> Resp {
    let path = req.uri().path().to_string();
    let q = query_map(req.uri().query());
    let method = req.method().clone();
    let headers = req.headers().clone();
    let segs: Vec<String> = path
        .split('/')
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect();
    let body = match axum::body::to_bytes(req.into_body(), 256 * 1024 * 1024).await {
        Ok(b) => b,
        Err(e) => return err_resp(&ApiError::bad_request(format!("reading body: {e}"))),
    };
    let s: Vec<&str> = segs.iter().map(String::as_str).collect();
    let user = match authorize(&app, &method, &s, &q, &headers) {
        Ok(u) => u,
        Err(r) => return r,
    };
    match s.as_slice() {
        ["version"] => return json_resp(200, &version_info(), &[]),
        ["healthz"] | ["readyz"] | ["livez"] => return text_resp(200, "ok"),
        ["healthz", ..] | ["readyz", ..] | ["livez", ..] => return text_resp(200, "ok"),
        [".well-known", "openid-configuration"] => {
            return json_resp(200, &app.tokens.openid_configuration(), &[]);
        }
        ["openid", "v1", "jwks"] => return json_resp(200, &app.tokens.jwks(), &[]),
        #[cfg(feature = "kubectl")]
        ["openapi", "v3"] => {
            return json_resp(200, &crate::openapi::index(&app.store.registry()), &[]);
        }
        #[cfg(feature = "kubectl")]
        ["openapi", "v3", rest @ ..] => {
            return match crate::openapi::group_version_doc(&app.store.registry(), rest) {
                Some(v) => json_resp(200, &v, &[]),
                None => err_resp(&ApiError::path_not_found()),
            };
        }
        ["testkit", "faults"] => return admin_faults(&app, &method, &body),
        ["testkit", "audit"] => {
            if method == Method::DELETE {
                app.audit.clear();
                return json_resp(200, &json!({}), &[]);
            }
            return json_resp(200, &json!({"items": app.audit.entries()}), &[]);
        }
        ["api"] => {
            return json_resp(
                200,
                &json!({"kind": "APIVersions", "versions": ["v1"],
                    "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": app.addr}]}),
                &[],
            );
        }
        ["apis"] => return json_resp(200, &group_list(&app.store), &[]),
        ["api", "v1"] => return json_resp(200, &resource_list(&app.store, "", "v1"), &[]),
        ["apis", g] => {
            return match group_list(&app.store)["groups"]
                .as_array()
                .and_then(|a| a.iter().find(|x| x["name"] == *g))
            {
                Some(gv) => {
                    let mut v = gv.clone();
                    v["kind"] = json!("APIGroup");
                    v["apiVersion"] = json!("v1");
                    json_resp(200, &v, &[])
                }
                None => err_resp(&ApiError::path_not_found()),
            };
        }
        ["apis", g, v] => {
            if app.store.registry().group_version(g, v).is_empty() {
                return err_resp(&ApiError::path_not_found());
            }
            return json_resp(200, &resource_list(&app.store, g, v), &[]);
        }
        _ => {}
    }
    let (group, version, rest) = match s.as_slice() {
        ["api", "v1", rest @ ..] => ("", "v1", rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return err_resp(&ApiError::path_not_found()),
    };
    let mut t = Target {
        group: group.into(),
        version: version.into(),
        ..Default::default()
    };
    match rest {
        ["namespaces", ns, plural, tail @ ..]
            if !(group.is_empty() && (*plural == "status" || *plural == "finalize")) =>
        {
            t.namespace = ns.to_string();
            t.plural = plural.to_string();
            match tail {
                [] => {}
                [n] => t.name = n.to_string(),
                [n, sub] => {
                    t.name = n.to_string();
                    t.sub = sub.to_string();
                }
                _ => return err_resp(&ApiError::path_not_found()),
            }
        }
        [plural, tail @ ..] => {
            t.plural = plural.to_string();
            match tail {
                [] => {}
                [n] => t.name = n.to_string(),
                [n, sub] => {
                    t.name = n.to_string();
                    t.sub = sub.to_string();
                }
                _ => return err_resp(&ApiError::path_not_found()),
            }
        }
        _ => return err_resp(&ApiError::path_not_found()),
    }
    let watch = truthy(&q, "watch");
    let verb = match (&method, t.name.is_empty()) {
        (&Method::GET, true) if watch => "watch",
        (&Method::GET, true) => "list",
        (&Method::GET, false) => "get",
        (&Method::POST, _) => "create",
        (&Method::PUT, _) => "update",
        (&Method::PATCH, _) => "patch",
        (&Method::DELETE, true) => "deletecollection",
        (&Method::DELETE, false) => "delete",
        _ => "unknown",
    };
    let latency = app.faults.latency();
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
    let res_name = if t.sub.is_empty() {
        t.plural.clone()
    } else {
        format!("{}/{}", t.plural, t.sub)
    };
    let ua = headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let resp = if let Some((code, msg)) = app.faults.take(verb, &res_name) {
        err_resp(&ApiError::from_code(code, msg))
    } else {
        match serve(&app, &t, verb, &method, &q, &headers, &body).await {
            Ok(r) => r,
            Err(e) => err_resp(&e),
        }
    };
    app.audit.record(AuditEntry {
        verb: verb.to_string(),
        group: t.group.clone(),
        version: t.version.clone(),
        resource: t.plural.clone(),
        subresource: t.sub.clone(),
        namespace: t.namespace.clone(),
        name: t.name.clone(),
        code: resp.status().as_u16(),
        user_agent: ua,
        user,
    });
    resp
}

/// With RBAC on, the authenticated user's name, or the 401/403 answer (recorded in the audit
/// log). `/testkit` admin endpoints are never authorized.
fn authorize(
    app: &App,
    method: &Method,
    segs: &[&str],
    q: &HashMap<String, String>,
    headers: &HeaderMap,
) -> Result<String, Resp> {
    if !app.rbac || segs.first() == Some(&"testkit") {
        return Ok(String::new());
    }
    let a = crate::authz::attributes(method, segs, q);
    let res = crate::authz::authenticate(headers, &app.tokens, &app.store)
        .map_err(|d| (d, String::new()))
        .and_then(|u| {
            crate::authz::authorize(&app.store, &u, &a)
                .map(|()| u.name.clone())
                .map_err(|d| (d, u.name))
        });
    res.map_err(|(denied, user)| {
        let e = denied.error();
        app.audit.record(AuditEntry {
            verb: a.verb,
            group: a.group,
            version: a.version,
            resource: if a.resource_request {
                a.resource
            } else {
                a.path
            },
            subresource: a.subresource,
            namespace: a.namespace,
            name: a.name,
            code: e.code,
            user_agent: headers
                .get(header::USER_AGENT)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_string(),
            user,
        });
        err_resp(&e)
    })
}

fn version_info() -> Value {
    json!({
        "major": "1",
        "minor": KUBE_MINOR,
        "gitVersion": format!("v1.{KUBE_MINOR}.0-esr-testkit"),
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.24.0",
        "compiler": "gc",
        "platform": "linux/amd64"
    })
}

fn storage_version_hash(rt: &ResourceType) -> String {
    use base64::Engine;
    let d = aws_lc_rs::digest::digest(
        &aws_lc_rs::digest::SHA256,
        format!("{}/{}/{}", rt.group, rt.version, rt.kind).as_bytes(),
    );
    base64::engine::general_purpose::STANDARD.encode(&d.as_ref()[..8])
}

fn resource_list(store: &Store, group: &str, version: &str) -> Value {
    let reg = store.registry();
    let mut resources = vec![];
    for rt in reg.group_version(group, version) {
        let mut r = json!({
            "name": rt.plural,
            "singularName": rt.singular,
            "namespaced": rt.namespaced,
            "kind": rt.kind,
            "verbs": if rt.create_only { vec!["create"] } else if rt.kind == "Namespace" {
                vec!["create", "delete", "get", "list", "patch", "update", "watch"]
            } else {
                vec!["delete", "deletecollection", "get", "list", "patch", "create", "update", "watch"]
            },
        });
        if !rt.short_names.is_empty() {
            r["shortNames"] = json!(rt.short_names);
        }
        if !rt.categories.is_empty() {
            r["categories"] = json!(rt.categories);
        }
        r["storageVersionHash"] = json!(storage_version_hash(&rt));
        resources.push(r);
        if rt.status_subresource {
            resources.push(json!({"name": format!("{}/status", rt.plural), "singularName": "", "namespaced": rt.namespaced,
                "kind": rt.kind, "verbs": ["get", "patch", "update"]}));
        }
        if rt.token_subresource {
            resources.push(json!({"name": format!("{}/token", rt.plural), "singularName": "", "namespaced": true,
                "group": "authentication.k8s.io", "version": "v1", "kind": "TokenRequest", "verbs": ["create"]}));
        }
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources})
}

fn group_list(store: &Store) -> Value {
    let reg = store.registry();
    let groups: Vec<Value> = reg
        .groups()
        .into_iter()
        .map(|(g, mut vs)| {
            vs.sort_by_key(|v| std::cmp::Reverse(version_priority(v)));
            let versions: Vec<Value> = vs
                .iter()
                .map(|v| json!({"groupVersion": format!("{g}/{v}"), "version": v}))
                .collect();
            let pref = versions.first().cloned().unwrap_or(json!({}));
            json!({"name": g, "versions": versions, "preferredVersion": pref})
        })
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

fn admin_faults(app: &App, method: &Method, body: &[u8]) -> Resp {
    match *method {
        Method::GET => json_resp(200, &json!({"rules": app.faults.rules()}), &[]),
        Method::DELETE => {
            app.faults.clear();
            json_resp(200, &json!({}), &[])
        }
        Method::POST => {
            let v: Value = match serde_json::from_slice(body) {
                Ok(v) => v,
                Err(e) => return err_resp(&ApiError::bad_request(format!("invalid JSON: {e}"))),
            };
            match v["action"].as_str().unwrap_or("fail") {
                "latency" => {
                    app.faults
                        .set_latency(Duration::from_millis(v["millis"].as_u64().unwrap_or(0)));
                }
                "closeWatches" => app.faults.close_watches(),
                "expire" => app.faults.expire_resource_versions(),
                "clear" => app.faults.clear(),
                "fail" => match serde_json::from_value::<FailRule>(v) {
                    Ok(r) => app.faults.add_rule(r),
                    Err(e) => {
                        return err_resp(&ApiError::bad_request(format!("invalid rule: {e}")));
                    }
                },
                other => {
                    return err_resp(&ApiError::bad_request(format!("unknown action {other}")));
                }
            }
            json_resp(200, &json!({"rules": app.faults.rules()}), &[])
        }
        _ => err_resp(&ApiError::method_not_allowed(
            method.as_str(),
            "/testkit/faults",
        )),
    }
}

/// A protobuf body: decoded for what kubectl's typed generators send (feature `kubectl`).
#[cfg(feature = "kubectl")]
fn decode_protobuf(_ct: &str, body: &[u8]) -> ApiResult<Value> {
    crate::proto::decode_body(body)
}

/// A protobuf body without the `kubectl` feature: refused like CBOR.
#[cfg(not(feature = "kubectl"))]
fn decode_protobuf(ct: &str, _body: &[u8]) -> ApiResult<Value> {
    Err(unsupported_media_type(ct))
}

/// The 415 a body in a format other than JSON, YAML (or kubectl's protobuf) gets.
fn unsupported_media_type(ct: &str) -> ApiError {
    ApiError::new(
        415,
        "UnsupportedMediaType",
        format!(
            "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml ({ct})"
        ),
    )
}

fn parse_body(headers: &HeaderMap, body: &[u8]) -> ApiResult<Value> {
    if body.is_empty() {
        return Ok(Value::Null);
    }
    let ct = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json");
    if ct.contains("yaml") {
        yaml_serde::from_slice::<Value>(body)
            .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))
    } else if ct.contains("protobuf") {
        decode_protobuf(ct, body)
    } else if ct.contains("cbor") {
        Err(unsupported_media_type(ct))
    } else {
        serde_json::from_slice::<Value>(body).map_err(|e| {
            ApiError::bad_request(format!(
                "the body of the request was in an unknown format: {e}"
            ))
        })
    }
}

fn write_ctx(
    q: &HashMap<String, String>,
    headers: &HeaderMap,
    default_validation: FieldValidation,
) -> ApiResult<WriteCtx> {
    let manager = match q.get("fieldManager") {
        Some(m) if !m.is_empty() => m.clone(),
        _ => {
            let ua = headers
                .get(header::USER_AGENT)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("unknown");
            ua.split('/').next().unwrap_or("unknown").to_string()
        }
    };
    let validation = match q.get("fieldValidation").map(String::as_str) {
        Some("Strict") => FieldValidation::Strict,
        Some("Warn") => FieldValidation::Warn,
        Some("Ignore") => FieldValidation::Ignore,
        None | Some("") => default_validation,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "fieldValidation parameter unsupported: {other}; must be one of Ignore, Warn, Strict"
            )));
        }
    };
    Ok(WriteCtx {
        manager,
        validation,
        dry_run: q.get("dryRun").is_some_and(|d| d == "All"),
        force: truthy(q, "force"),
    })
}

fn write_resp(r: WriteResult) -> Resp {
    json_resp(if r.created { 201 } else { 200 }, &r.object, &r.warnings)
}

async fn serve(
    app: &Arc<App>,
    t: &Target,
    verb: &str,
    method: &Method,
    q: &HashMap<String, String>,
    headers: &HeaderMap,
    body: &[u8],
) -> ApiResult<Resp> {
    let store = &app.store;
    let rt = store
        .resource(&t.group, &t.version, &t.plural)
        .ok_or_else(ApiError::path_not_found)?;
    if !rt.namespaced && !t.namespace.is_empty() {
        return Err(ApiError::path_not_found());
    }
    if rt.namespaced && !t.name.is_empty() && t.namespace.is_empty() {
        return Err(ApiError::path_not_found());
    }
    let sub = t.sub.as_str();
    match sub {
        "" => {}
        "status" if rt.status_subresource => {
            if !matches!(verb, "get" | "update" | "patch") {
                return Err(ApiError::method_not_allowed(
                    method.as_str(),
                    &format!("{}/status", t.plural),
                ));
            }
        }
        "token" if rt.token_subresource => {
            if verb != "create" {
                return Err(ApiError::method_not_allowed(
                    method.as_str(),
                    "serviceaccounts/token",
                ));
            }
            return token_request(app, &rt, t, body, headers);
        }
        _ => return Err(ApiError::path_not_found()),
    }
    if rt.create_only {
        if verb != "create" {
            return Err(ApiError::method_not_allowed(method.as_str(), &t.plural));
        }
        if rt.plural != "tokenreviews" {
            return access_review(app, &rt, body, headers);
        }
        return token_review(app, body, headers);
    }
    if t.name.is_empty() && matches!(verb, "update" | "patch") {
        return Err(ApiError::method_not_allowed(method.as_str(), &t.plural));
    }
    if !t.name.is_empty() && verb == "create" {
        return Err(ApiError::method_not_allowed(
            method.as_str(),
            &format!("{}/{}", t.plural, t.name),
        ));
    }
    // `kubectl get` asks for a meta.k8s.io/v1 Table (feature `kubectl`).
    #[cfg(feature = "kubectl")]
    let as_table = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(crate::table::wants_table);
    #[cfg(not(feature = "kubectl"))]
    let as_table = false;
    match verb {
        "get" => {
            let o = store.get(&rt, &t.namespace, &t.name)?;
            #[cfg(feature = "kubectl")]
            if as_table {
                return Ok(json_resp(
                    200,
                    &crate::table::table(&rt, &[&o], store.current_rv(), None, true),
                    &[],
                ));
            }
            Ok(json_resp(200, &o, &[]))
        }
        "list" | "deletecollection" => {
            let labels =
                LabelSelector::parse(q.get("labelSelector").map(String::as_str).unwrap_or(""))?;
            let fields = parse_fields(&rt, q)?;
            let limit = q.get("limit").and_then(|l| l.parse::<usize>().ok());
            let page = store.list(
                &rt,
                Some(&t.namespace),
                &labels,
                &fields,
                if verb == "list" { limit } else { None },
                q.get("continue").map(String::as_str),
            )?;
            if verb == "deletecollection" {
                let mut deleted = vec![];
                let opts = delete_opts(q, headers, body)?;
                for item in &page.items {
                    let ns = item["metadata"]["namespace"].as_str().unwrap_or_default();
                    let name = item["metadata"]["name"].as_str().unwrap_or_default();
                    match store.delete(&rt, ns, name, &opts) {
                        Ok((o, _)) => deleted.push(Arc::new(o)),
                        Err(e) if e.code == 404 => {}
                        Err(e) => return Err(e),
                    }
                }
                let rv = store.current_rv();
                return Ok(list_resp(&rt, &deleted, rv, None, None));
            }
            #[cfg(feature = "kubectl")]
            if as_table {
                let items: Vec<&Value> = page.items.iter().map(|a| &**a).collect();
                return Ok(json_resp(
                    200,
                    &crate::table::table(&rt, &items, page.rv, page.cont.as_deref(), true),
                    &[],
                ));
            }
            Ok(list_resp(
                &rt,
                &page.items,
                page.rv,
                page.cont,
                page.remaining,
            ))
        }
        "watch" => watch(app, rt, t, q, as_table).await,
        "create" => {
            let ctx = write_ctx(q, headers, FieldValidation::Warn)?;
            let v = parse_body(headers, body)?;
            if !v.is_object() {
                return Err(ApiError::bad_request(
                    "the body of the request must be an object",
                ));
            }
            if v["metadata"]["resourceVersion"]
                .as_str()
                .is_some_and(|r| !r.is_empty())
            {
                // a plain storage error: the apiserver answers 500 with reason Unknown
                return Err(ApiError::new(
                    500,
                    "Unknown",
                    "resourceVersion should not be set on objects to be created",
                ));
            }
            Ok(write_resp(store.create(&rt, &t.namespace, v, &ctx)?))
        }
        "update" => {
            let ctx = write_ctx(q, headers, FieldValidation::Warn)?;
            let v = parse_body(headers, body)?;
            if !v.is_object() {
                return Err(ApiError::bad_request(
                    "the body of the request must be an object",
                ));
            }
            Ok(write_resp(store.update(
                &rt,
                &t.namespace,
                &t.name,
                v,
                sub,
                &ctx,
            )?))
        }
        "patch" => {
            let ct = headers
                .get(header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default();
            let pt = if ct.starts_with("application/json-patch+json") {
                PatchType::Json
            } else if ct.starts_with("application/merge-patch+json") {
                PatchType::Merge
            } else if ct.starts_with("application/strategic-merge-patch+json") {
                PatchType::Strategic
            } else if ct.starts_with("application/apply-patch") {
                PatchType::Apply
            } else {
                return Err(ApiError::unsupported_media_type(ct));
            };
            let mut ctx = write_ctx(q, headers, FieldValidation::Warn)?;
            // metav1 ValidatePatchOptions: answered as 422 PatchOptions.meta.k8s.io "" is invalid
            let po = crate::error::Subject {
                group: "meta.k8s.io",
                plural: "patchoptions",
                kind: "PatchOptions",
            };
            if pt == PatchType::Apply && q.get("fieldManager").is_none_or(String::is_empty) {
                return Err(ApiError::invalid(
                    &po,
                    "",
                    vec![crate::error::Cause::new(
                        "FieldValueRequired",
                        "Required value: is required for apply patch",
                        "fieldManager",
                    )],
                ));
            }
            if pt != PatchType::Apply && q.contains_key("force") {
                return Err(ApiError::invalid(
                    &po,
                    "",
                    vec![crate::error::Cause::new(
                        "FieldValueForbidden",
                        "Forbidden: may not be specified for non-apply patch",
                        "force",
                    )],
                ));
            }
            if pt == PatchType::Apply {
                ctx.validation = match q.get("fieldValidation").map(String::as_str) {
                    None | Some("") => FieldValidation::Warn,
                    _ => ctx.validation,
                };
            }
            let v = parse_body(headers, body)?;
            Ok(write_resp(store.patch(
                &rt,
                &t.namespace,
                &t.name,
                pt,
                v,
                sub,
                &ctx,
            )?))
        }
        "delete" => {
            let opts = delete_opts(q, headers, body)?;
            let (obj, _gone) = store.delete(&rt, &t.namespace, &t.name, &opts)?;
            if rt.delete_returns_object || obj["metadata"]["deletionTimestamp"].is_string() {
                Ok(json_resp(200, &obj, &[]))
            } else {
                let mut details = json!({"name": t.name});
                if !rt.group.is_empty() {
                    details["group"] = json!(rt.group);
                }
                details["kind"] = json!(rt.plural);
                details["uid"] = obj["metadata"]["uid"].clone();
                Ok(json_resp(
                    200,
                    &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details}),
                    &[],
                ))
            }
        }
        _ => Err(ApiError::method_not_allowed(method.as_str(), &t.plural)),
    }
}

fn parse_fields(rt: &ResourceType, q: &HashMap<String, String>) -> ApiResult<FieldSelector> {
    let fields = FieldSelector::parse(q.get("fieldSelector").map(String::as_str).unwrap_or(""))?;
    for (f, _, _) in &fields.0 {
        if !rt.field_selector_allowed(f) {
            return Err(ApiError::bad_request(format!(
                "\"{f}\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
            )));
        }
    }
    Ok(fields)
}

fn delete_opts(
    q: &HashMap<String, String>,
    headers: &HeaderMap,
    body: &[u8],
) -> ApiResult<DeleteOpts> {
    let b = parse_body(headers, body)?;
    let mut o = DeleteOpts {
        propagation: q.get("propagationPolicy").cloned(),
        dry_run: q.get("dryRun").is_some_and(|d| d == "All"),
        ..Default::default()
    };
    if let Some(p) = b["propagationPolicy"].as_str() {
        o.propagation = Some(p.to_string());
    }
    if b["orphanDependents"].as_bool() == Some(true) && o.propagation.is_none() {
        o.propagation = Some("Orphan".into());
    }
    if let Some(u) = b["preconditions"]["uid"].as_str() {
        o.uid = Some(u.to_string());
    }
    if let Some(r) = b["preconditions"]["resourceVersion"].as_str() {
        o.resource_version = Some(r.to_string());
    }
    if b["dryRun"]
        .as_array()
        .is_some_and(|a| a.iter().any(|x| x == "All"))
    {
        o.dry_run = true;
    }
    Ok(o)
}

fn list_resp(
    rt: &ResourceType,
    items: &[Arc<Value>],
    rv: u64,
    cont: Option<String>,
    remaining: Option<usize>,
) -> Resp {
    let mut meta = json!({"resourceVersion": rv.to_string()});
    if let Some(c) = cont {
        meta["continue"] = json!(c);
    }
    if let Some(r) = remaining {
        meta["remainingItemCount"] = json!(r);
    }
    let head = json!({"kind": rt.list_kind, "apiVersion": rt.api_version(), "metadata": meta});
    let mut out: Vec<u8> = Vec::with_capacity(items.len() * 512 + 256);
    let head_s = head.to_string();
    // {"kind":..,"metadata":{..}} → insert items before the closing brace
    out.extend_from_slice(&head_s.as_bytes()[..head_s.len() - 1]);
    out.extend_from_slice(b",\"items\":[");
    for (i, it) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        let _ = serde_json::to_writer(&mut out, &**it);
    }
    out.extend_from_slice(b"]}");
    bytes_resp(200, Bytes::from(out), &[])
}

fn token_request(
    app: &App,
    rt: &ResourceType,
    t: &Target,
    body: &[u8],
    headers: &HeaderMap,
) -> ApiResult<Resp> {
    let sa = app.store.get(rt, &t.namespace, &t.name)?;
    let req = parse_body(headers, body)?;
    let mut audiences: Vec<String> = req["spec"]["audiences"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    if audiences.is_empty() {
        audiences.push(DEFAULT_AUDIENCE.to_string());
    }
    let exp = req["spec"]["expirationSeconds"].as_i64().unwrap_or(3600);
    if exp < 600 {
        return Err(ApiError::invalid(
            &crate::error::Subject {
                group: "authentication.k8s.io",
                plural: "tokenrequests",
                kind: "TokenRequest",
            },
            &t.name,
            vec![crate::error::Cause::new(
                "FieldValueInvalid",
                format!("Invalid value: {exp}: may not specify a duration less than 10 minutes"),
                "spec.expirationSeconds",
            )],
        ));
    }
    let uid = sa["metadata"]["uid"].as_str().unwrap_or_default();
    let bound = req["spec"].get("boundObjectRef").filter(|b| b.is_object());
    let (token, exp_at) = app
        .tokens
        .issue(&t.namespace, &t.name, uid, &audiences, exp, bound)
        .map_err(|e| ApiError::internal(e.to_string()))?;
    let ts = chrono::DateTime::from_timestamp(exp_at, 0)
        .map(|d| d.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
        .unwrap_or_default();
    let mut spec = req["spec"].clone();
    if !spec.is_object() {
        spec = json!({});
    }
    spec["audiences"] = json!(audiences);
    spec["expirationSeconds"] = json!(exp);
    Ok(json_resp(
        201,
        &json!({
            "kind": "TokenRequest",
            "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"name": t.name, "namespace": t.namespace, "creationTimestamp": null},
            "spec": spec,
            "status": {"token": token, "expirationTimestamp": ts}
        }),
        &[],
    ))
}

/// Access reviews are answered by RBAC when it is on ([`crate::authz`]), otherwise like an
/// AlwaysAllow authorizer does: everything is allowed.
fn access_review(
    app: &App,
    rt: &ResourceType,
    body: &[u8],
    headers: &HeaderMap,
) -> ApiResult<Resp> {
    let req = parse_body(headers, body)?;
    let mut spec = req["spec"].clone();
    if !spec.is_object() {
        spec = json!({});
    }
    let status = if app.rbac {
        let user = if rt.plural.starts_with("self") {
            crate::authz::authenticate(headers, &app.tokens, &app.store).map_err(|d| d.error())?
        } else {
            crate::authz::User {
                name: spec["user"].as_str().unwrap_or_default().to_string(),
                groups: spec["groups"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(|g| g.as_str().map(str::to_string))
                            .collect()
                    })
                    .unwrap_or_default(),
            }
        };
        if rt.plural == "selfsubjectrulesreviews" {
            let ns = spec["namespace"].as_str().unwrap_or_default();
            let (res, non_res, err) = crate::authz::rules_review(&app.store, &user, ns);
            let mut st = json!({"resourceRules": res, "nonResourceRules": non_res, "incomplete": !err.is_empty()});
            if !err.is_empty() {
                st["evaluationError"] = json!(err);
            }
            st
        } else {
            let a = crate::authz::review_attributes(&spec);
            json!({"allowed": crate::authz::allowed(&app.store, &user, &a)})
        }
    } else if rt.plural == "selfsubjectrulesreviews" {
        json!({
            "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
            "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
            "incomplete": false
        })
    } else {
        json!({"allowed": true})
    };
    Ok(json_resp(
        201,
        &json!({
            "kind": rt.kind,
            "apiVersion": rt.api_version(),
            "metadata": {"creationTimestamp": null},
            "spec": spec,
            "status": status
        }),
        &[],
    ))
}

fn token_review(app: &App, body: &[u8], headers: &HeaderMap) -> ApiResult<Resp> {
    let req = parse_body(headers, body)?;
    let token = req["spec"]["token"].as_str().unwrap_or_default();
    let wanted: Vec<String> = req["spec"]["audiences"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    let effective = if wanted.is_empty() {
        vec![DEFAULT_AUDIENCE.to_string()]
    } else {
        wanted.clone()
    };
    let status = match app.tokens.verify(token) {
        Err(_) => {
            json!({"authenticated": false, "user": {}, "error": "[invalid bearer token, service account token is not valid]"})
        }
        Ok(id) => {
            let matching: Vec<String> = id
                .audiences
                .iter()
                .filter(|a| effective.contains(a))
                .cloned()
                .collect();
            let sa_ok = app
                .store
                .resource("", "v1", "serviceaccounts")
                .and_then(|rt| app.store.get(&rt, &id.namespace, &id.name).ok())
                .is_some_and(|sa| sa["metadata"]["uid"].as_str() == Some(id.uid.as_str()));
            if matching.is_empty() {
                json!({"authenticated": false, "user": {}, "error": format!(
                    "[invalid bearer token, token audiences {:?} is invalid for the target audiences {:?}]", id.audiences, effective)})
            } else if !sa_ok {
                json!({"authenticated": false, "user": {}, "error": "[invalid bearer token, service account token has been invalidated]"})
            } else {
                json!({
                    "authenticated": true,
                    "user": {
                        "username": format!("system:serviceaccount:{}:{}", id.namespace, id.name),
                        "uid": id.uid,
                        "groups": ["system:serviceaccounts", format!("system:serviceaccounts:{}", id.namespace), "system:authenticated"]
                    },
                    "audiences": matching
                })
            }
        }
    };
    let mut spec = req["spec"].clone();
    if !spec.is_object() {
        spec = json!({});
    }
    Ok(json_resp(
        201,
        &json!({
            "kind": "TokenReview",
            "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"creationTimestamp": null},
            "spec": spec,
            "status": status
        }),
        &[],
    ))
}

fn watch_line(typ: &str, obj_json: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(obj_json.len() + 32);
    out.extend_from_slice(b"{\"type\":\"");
    out.extend_from_slice(typ.as_bytes());
    out.extend_from_slice(b"\",\"object\":");
    out.extend_from_slice(obj_json);
    out.extend_from_slice(b"}\n");
    Bytes::from(out)
}

struct Filter {
    ns: String,
    labels: LabelSelector,
    fields: FieldSelector,
}

impl Filter {
    fn matches(&self, o: &Value) -> bool {
        (self.ns.is_empty() || o["metadata"]["namespace"].as_str() == Some(self.ns.as_str()))
            && self.labels.matches(o["metadata"]["labels"].as_object())
            && self.fields.matches(o)
    }
    fn decide(&self, typ: EvType, obj: &Value, old: Option<&Value>) -> Option<EvType> {
        let now = self.matches(obj);
        match typ {
            EvType::Added => now.then_some(EvType::Added),
            EvType::Deleted => now.then_some(EvType::Deleted),
            EvType::Modified => {
                let before = old.is_some_and(|o| self.matches(o));
                match (before, now) {
                    (true, true) => Some(EvType::Modified),
                    (false, true) => Some(EvType::Added),
                    (true, false) => Some(EvType::Deleted),
                    (false, false) => None,
                }
            }
        }
    }
}

fn bookmark(rt: &ResourceType, rv: u64, initial_end: bool) -> Bytes {
    let mut md = json!({"resourceVersion": rv.to_string(), "creationTimestamp": null});
    if initial_end {
        md["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    let obj = json!({"kind": rt.kind, "apiVersion": rt.api_version(), "metadata": md});
    watch_line("BOOKMARK", obj.to_string().as_bytes())
}

async fn watch(
    app: &Arc<App>,
    rt: Arc<ResourceType>,
    t: &Target,
    q: &HashMap<String, String>,
    as_table: bool,
) -> ApiResult<Resp> {
    let filter = Filter {
        ns: t.namespace.clone(),
        labels: LabelSelector::parse(q.get("labelSelector").map(String::as_str).unwrap_or(""))?,
        fields: parse_fields(&rt, q)?,
    };
    let rv: Option<u64> = match q.get("resourceVersion").map(String::as_str) {
        None | Some("") => None,
        Some(s) => Some(s.parse::<u64>().map_err(|_| {
            ApiError::bad_request(format!(
                "resourceVersion: Invalid value: \"{s}\": must be a valid resource version"
            ))
        })?),
    };
    let bookmarks = truthy(q, "allowWatchBookmarks");
    let send_initial = truthy(q, "sendInitialEvents");
    let timeout = q
        .get("timeoutSeconds")
        .and_then(|s| s.parse::<u64>().ok())
        .filter(|s| *s > 0);
    let started = app.store.watch(&rt, rv, send_initial);
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, Infallible>>(256);
    let body_stream =
        futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|x| (x, rx)) });
    let (first, mut brx, cur_rv) = match started {
        Ok(x) => x,
        Err(e) => {
            // A real server answers a too-old resourceVersion with HTTP 200 and one ERROR event.
            let line = watch_line("ERROR", e.status().to_string().as_bytes());
            let _ = tx.try_send(Ok(line));
            drop(tx);
            let mut r = Response::new(Body::from_stream(body_stream));
            r.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            return Ok(r);
        }
    };
    let close = app.faults.watch_token();
    let interval = app.bookmark_interval;
    let av = rt.api_version();
    app.active_watches
        .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let guard = WatchGuard(Arc::clone(&app.active_watches));
    tokio::spawn(async move {
        let _guard = guard;
        let mut last_rv = cur_rv;
        #[cfg(feature = "kubectl")]
        let mut columns_sent = false;
        // Only the Table rendering (feature `kubectl`) mutates state between events.
        #[cfg_attr(not(feature = "kubectl"), allow(unused_mut))]
        let mut send_ev = |typ: EvType, obj: &Value| -> Bytes {
            #[cfg(feature = "kubectl")]
            if as_table {
                let rv = obj["metadata"]["resourceVersion"]
                    .as_str()
                    .and_then(|r| r.parse().ok())
                    .unwrap_or(0);
                let tbl = crate::table::table(&rt, &[obj], rv, None, !columns_sent);
                columns_sent = true;
                return watch_line(typ.as_str(), &serde_json::to_vec(&tbl).unwrap_or_default());
            }
            if obj["apiVersion"].as_str() == Some(av.as_str()) {
                watch_line(typ.as_str(), &serde_json::to_vec(obj).unwrap_or_default())
            } else {
                watch_line(
                    typ.as_str(),
                    &serde_json::to_vec(&for_version(obj, &rt)).unwrap_or_default(),
                )
            }
        };
        for (typ, obj, old) in first {
            if let Some(tt) = filter.decide(typ, &obj, old.as_deref())
                && tx.send(Ok(send_ev(tt, &obj))).await.is_err()
            {
                return;
            }
        }
        if send_initial && bookmarks && tx.send(Ok(bookmark(&rt, cur_rv, true))).await.is_err() {
            return;
        }
        let deadline = timeout.map(|s| tokio::time::Instant::now() + Duration::from_secs(s));
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
        let gr = rt.gr();
        loop {
            let sleep_until = async {
                match deadline {
                    Some(d) => tokio::time::sleep_until(d).await,
                    None => futures::future::pending::<()>().await,
                }
            };
            tokio::select! {
                _ = close.cancelled() => break,
                _ = tx.closed() => break,
                _ = sleep_until => break,
                _ = tick.tick(), if bookmarks => {
                    if tx.send(Ok(bookmark(&rt, last_rv, false))).await.is_err() { break; }
                }
                ev = brx.recv() => match ev {
                    Ok(ev) => {
                        last_rv = ev.rv;
                        if ev.gr != gr { continue; }
                        if let Some(tt) = filter.decide(ev.typ, &ev.object, ev.old.as_deref()) {
                            let line = if !as_table && ev.object["apiVersion"].as_str() == Some(av.as_str()) {
                                watch_line(tt.as_str(), &ev.object_json())
                            } else {
                                send_ev(tt, &ev.object)
                            };
                            if tx.send(Ok(line)).await.is_err() { break; }
                        }
                    }
                    Err(_) => break,
                },
            }
        }
    });
    let mut r = Response::new(Body::from_stream(body_stream));
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r.headers_mut().insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache, private"),
    );
    Ok(r)
}
