//! Authentication and RBAC authorization, as a kube-apiserver with `--authorization-mode=RBAC`
//! enforces them. Off by default ([`crate::Options::rbac`], `esr-testkit serve --rbac`).
//!
//! **Authentication** (bearer token of the `Authorization` header):
//! - no token, or [`ADMIN_TOKEN`] (the token of the kubeconfigs esr-testkit writes): the
//!   cluster admin, user `system:admin` in group `system:masters` (everything allowed), so that
//!   tests and tools that never authenticate keep working;
//! - a ServiceAccount token issued by this server's TokenRequest (signature, issuer and expiry
//!   valid, an audience of the API server — `https://kubernetes.default.svc.cluster.local` or the
//!   issuer URL — and the ServiceAccount still existing with the same uid): user
//!   `system:serviceaccount:<ns>:<name>` with the groups `system:serviceaccounts`,
//!   `system:serviceaccounts:<ns>` and `system:authenticated`;
//! - any other token: 401 `Unauthorized`.
//!
//! **Request attributes** are derived from the method and URL as the apiserver's request info
//! does: `GET` on a collection is `list` (or `watch` with `watch=true`; a `metadata.name=<n>`
//! field selector names the object), `GET` on an object `get`, `POST` `create`, `PUT` `update`,
//! `PATCH` `patch`, `DELETE` `delete` (or `deletecollection` on a collection). Subresources
//! (`secrets/status`, `serviceaccounts/token`) are authorized as `<resource>/<subresource>`;
//! `/api/v1/namespaces/<ns>` is the resource `namespaces` named `<ns>` in the namespace `<ns>`.
//! Other paths (`/version`, `/api`, `/apis/...` discovery, `/openapi/...`, `/healthz`, OIDC
//! discovery) are non-resource requests whose verb is the lowercase HTTP method.
//!
//! **Authorization** unions the rules of the ClusterRoles bound by ClusterRoleBindings and, for a
//! namespaced request, of the Roles and ClusterRoles bound by the RoleBindings of that namespace.
//! A rule matches on `verbs` (or `*`), `apiGroups` (or `*`), `resources` (`*`, the exact
//! `<resource>[/<subresource>]`, or `*/<subresource>`), `resourceNames` (empty = any; never
//! matches a request without a name such as `list` or `create`) and `nonResourceURLs` (exact, `*`,
//! or a `prefix*`). Subjects are Users, Groups and ServiceAccounts (a ServiceAccount subject
//! without namespace means the binding's namespace). A ClusterRole with an `aggregationRule`
//! grants the rules of the ClusterRoles its selectors match (as the aggregation controller fills
//! them in). The bootstrap bindings of every authenticated user are built in: `system:discovery`
//! and `system:public-info-viewer` (discovery, `/version`, health), `system:basic-user`
//! (SelfSubjectAccessReview, SelfSubjectRulesReview, SelfSubjectReview) and, for
//! ServiceAccounts, `system:service-account-issuer-discovery`.
//!
//! A denied request gets the apiserver's 403 `Forbidden` Status, e.g. `secrets is forbidden: User
//! "system:serviceaccount:ns:sa" cannot list resource "secrets" in API group "" in the namespace
//! "other"`; a binding whose role does not exist adds `: RBAC: role.rbac.authorization.k8s.io
//! "x" not found` to a denial.
//!
//! Not emulated: impersonation, client certificates, bootstrap/static tokens, the Node
//! authorizer, escalation checks on writes of Roles and bindings.

use std::collections::HashMap;

use http::{HeaderMap, Method, header};
use serde_json::{Value, json};

use crate::error::ApiError;
use crate::selector::{FieldSelector, LabelSelector};
use crate::store::Store;
use crate::tokens::{DEFAULT_AUDIENCE, TokenIssuer};

/// The bearer token of the kubeconfigs esr-testkit writes: the cluster admin.
pub const ADMIN_TOKEN: &str = "esr-testkit";

/// Name of the cluster admin (no token or [`ADMIN_TOKEN`]).
pub const ADMIN_USER: &str = "system:admin";

const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// An authenticated user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    /// User name, e.g. `system:serviceaccount:ns:sa`.
    pub name: String,
    /// Groups.
    pub groups: Vec<String>,
}

impl User {
    /// The cluster admin.
    pub fn admin() -> Self {
        User {
            name: ADMIN_USER.into(),
            groups: vec!["system:masters".into(), "system:authenticated".into()],
        }
    }

    /// The user of a ServiceAccount token.
    pub fn service_account(namespace: &str, name: &str) -> Self {
        User {
            name: format!("system:serviceaccount:{namespace}:{name}"),
            groups: vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{namespace}"),
                "system:authenticated".into(),
            ],
        }
    }

    fn in_group(&self, g: &str) -> bool {
        self.groups.iter().any(|x| x == g)
    }
}

/// What a request asks for (the apiserver's request info).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Attributes {
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `deletecollection`; for
    /// non-resource requests the lowercase HTTP method.
    pub verb: String,
    /// True for `/api/v1/...` and `/apis/<g>/<v>/...` resource paths.
    pub resource_request: bool,
    /// API group ("" for core).
    pub group: String,
    /// API version.
    pub version: String,
    /// Namespace ("" for cluster scope).
    pub namespace: String,
    /// Resource (plural).
    pub resource: String,
    /// Subresource ("" if none).
    pub subresource: String,
    /// Object name ("" if none).
    pub name: String,
    /// URL path (non-resource requests).
    pub path: String,
}

/// Derive the request attributes from the method, the path segments and the query.
pub fn attributes(method: &Method, segs: &[&str], query: &HashMap<String, String>) -> Attributes {
    let path = format!("/{}", segs.join("/"));
    let http_verb = method.as_str().to_ascii_lowercase();
    let non_resource = Attributes {
        verb: http_verb.clone(),
        path: path.clone(),
        ..Default::default()
    };
    let (group, version, rest) = match segs {
        ["api", v, rest @ ..] if !rest.is_empty() => ("", *v, rest),
        ["apis", g, v, rest @ ..] if !rest.is_empty() => (*g, *v, rest),
        _ => return non_resource,
    };
    let mut a = Attributes {
        resource_request: true,
        group: group.into(),
        version: version.into(),
        path,
        ..Default::default()
    };
    a.verb = match *method {
        Method::POST => "create",
        Method::GET | Method::HEAD => "get",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE => "delete",
        _ => "",
    }
    .into();
    let mut parts: &[&str] = rest;
    if parts.first() == Some(&"watch") {
        a.verb = "watch".into();
        parts = &parts[1..];
    }
    if parts.first() == Some(&"namespaces")
        && let Some(ns) = parts.get(1)
    {
        a.namespace = (*ns).to_string();
        if parts.len() > 2 && !matches!(parts[2], "status" | "finalize") {
            parts = &parts[2..];
        }
    }
    if parts.len() >= 3 {
        a.subresource = parts[2].to_string();
    }
    if parts.len() >= 2 {
        a.name = parts[1].to_string();
    }
    if let Some(r) = parts.first() {
        a.resource = (*r).to_string();
    }
    if a.name.is_empty() && a.verb == "get" {
        let watch = query.get("watch").is_some_and(|v| v == "true" || v == "1");
        a.verb = if watch { "watch" } else { "list" }.into();
        if let Some(fs) = query.get("fieldSelector")
            && let Ok(fs) = FieldSelector::parse(fs)
            && let Some(n) = fs.equals("metadata.name")
            && !n.is_empty()
            && !matches!(n, "." | "..")
            && !n.contains(['/', '%'])
        {
            a.name = n.to_string();
        }
    }
    if a.name.is_empty() && a.verb == "delete" {
        a.verb = "deletecollection".into();
    }
    a
}

/// Why a request is refused.
#[derive(Debug, Clone, PartialEq)]
pub enum Denied {
    /// 401: the token is not valid.
    Unauthorized,
    /// 403: the user may not do this.
    Forbidden(ApiError),
}

impl Denied {
    /// The Status to answer.
    pub fn error(&self) -> ApiError {
        match self {
            Denied::Unauthorized => ApiError::from_code(401, None),
            Denied::Forbidden(e) => e.clone(),
        }
    }
}

/// The authenticated user of a request: `Ok(None)` without token or with [`ADMIN_TOKEN`]
/// (the admin), `Err(Unauthorized)` for a token this server did not issue or no longer honours.
pub fn authenticate(
    headers: &HeaderMap,
    tokens: &TokenIssuer,
    store: &Store,
) -> Result<User, Denied> {
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            let (scheme, rest) = v.trim().split_once(' ')?;
            scheme
                .eq_ignore_ascii_case("bearer")
                .then(|| rest.trim().to_string())
        })
        .unwrap_or_default();
    if token.is_empty() || token == ADMIN_TOKEN {
        return Ok(User::admin());
    }
    let id = tokens.verify(&token).map_err(|_| Denied::Unauthorized)?;
    let audience_ok = id
        .audiences
        .iter()
        .any(|a| a == DEFAULT_AUDIENCE || *a == tokens.issuer);
    let sa_ok = store
        .resource("", "v1", "serviceaccounts")
        .and_then(|rt| store.get(&rt, &id.namespace, &id.name).ok())
        .is_some_and(|sa| sa["metadata"]["uid"].as_str() == Some(id.uid.as_str()));
    if !audience_ok || !sa_ok {
        return Err(Denied::Unauthorized);
    }
    Ok(User::service_account(&id.namespace, &id.name))
}

/// A policy rule of a Role or ClusterRole.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Rule {
    verbs: Vec<String>,
    api_groups: Vec<String>,
    resources: Vec<String>,
    resource_names: Vec<String>,
    non_resource_urls: Vec<String>,
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

impl Rule {
    fn from_json(v: &Value) -> Self {
        Rule {
            verbs: strings(&v["verbs"]),
            api_groups: strings(&v["apiGroups"]),
            resources: strings(&v["resources"]),
            resource_names: strings(&v["resourceNames"]),
            non_resource_urls: strings(&v["nonResourceURLs"]),
        }
    }

    fn new(verbs: &[&str], groups: &[&str], resources: &[&str], urls: &[&str]) -> Self {
        let s = |x: &[&str]| x.iter().map(|s| s.to_string()).collect();
        Rule {
            verbs: s(verbs),
            api_groups: s(groups),
            resources: s(resources),
            resource_names: vec![],
            non_resource_urls: s(urls),
        }
    }

    fn allows(&self, a: &Attributes) -> bool {
        if !self.verbs.iter().any(|v| v == "*" || *v == a.verb) {
            return false;
        }
        if !a.resource_request {
            return self.non_resource_urls.iter().any(|u| {
                u == "*"
                    || *u == a.path
                    || (u.ends_with('*') && a.path.starts_with(u.trim_end_matches('*')))
            });
        }
        let combined = if a.subresource.is_empty() {
            a.resource.clone()
        } else {
            format!("{}/{}", a.resource, a.subresource)
        };
        self.api_groups.iter().any(|g| g == "*" || *g == a.group)
            && self.resources.iter().any(|r| {
                r == "*"
                    || *r == combined
                    || (!a.subresource.is_empty()
                        && r.strip_prefix("*/") == Some(a.subresource.as_str()))
            })
            && (self.resource_names.is_empty() || self.resource_names.contains(&a.name))
    }
}

/// The rules the bootstrap ClusterRoleBindings give every authenticated user (and every
/// ServiceAccount).
fn bootstrap_rules(user: &User) -> Vec<Rule> {
    let mut out = vec![];
    if user.in_group("system:authenticated") {
        // system:discovery and system:public-info-viewer
        out.push(Rule::new(
            &["get"],
            &[],
            &[],
            &[
                "/api",
                "/api/*",
                "/apis",
                "/apis/*",
                "/healthz",
                "/livez",
                "/openapi",
                "/openapi/*",
                "/readyz",
                "/version",
                "/version/",
            ],
        ));
        // system:basic-user
        out.push(Rule::new(
            &["create"],
            &["authorization.k8s.io"],
            &["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
            &[],
        ));
        out.push(Rule::new(
            &["create"],
            &["authentication.k8s.io"],
            &["selfsubjectreviews"],
            &[],
        ));
    }
    if user.in_group("system:serviceaccounts") {
        // system:service-account-issuer-discovery
        out.push(Rule::new(
            &["get"],
            &[],
            &[],
            &[
                "/.well-known/openid-configuration",
                "/.well-known/openid-configuration/",
                "/openid/v1/jwks",
                "/openid/v1/jwks/",
            ],
        ));
    }
    out
}

/// Does a binding subject name this user? `namespace` is the binding's ("" for a
/// ClusterRoleBinding).
fn subject_matches(subject: &Value, user: &User, namespace: &str) -> bool {
    let name = subject["name"].as_str().unwrap_or_default();
    match subject["kind"].as_str().unwrap_or_default() {
        "User" => user.name == name,
        "Group" => user.in_group(name),
        "ServiceAccount" => {
            let ns = subject["namespace"]
                .as_str()
                .filter(|n| !n.is_empty())
                .unwrap_or(namespace);
            !ns.is_empty() && user.name == format!("system:serviceaccount:{ns}:{name}")
        }
        _ => false,
    }
}

fn binds(binding: &Value, user: &User, namespace: &str) -> bool {
    binding["subjects"]
        .as_array()
        .is_some_and(|s| s.iter().any(|x| subject_matches(x, user, namespace)))
}

/// The RBAC objects of one request (read once from the store).
struct Policy<'a> {
    store: &'a Store,
}

impl Policy<'_> {
    fn list(&self, plural: &str, ns: Option<&str>) -> Vec<std::sync::Arc<Value>> {
        let (Some(rt), Ok(labels), Ok(fields)) = (
            self.store.resource(RBAC_GROUP, "v1", plural),
            LabelSelector::parse(""),
            FieldSelector::parse(""),
        ) else {
            return vec![];
        };
        self.store
            .list(&rt, ns, &labels, &fields, None, None)
            .map(|p| p.items)
            .unwrap_or_default()
    }

    fn get(&self, plural: &str, ns: &str, name: &str) -> Option<Value> {
        let rt = self.store.resource(RBAC_GROUP, "v1", plural)?;
        self.store.get(&rt, ns, name).ok()
    }

    /// The rules of a ClusterRole, with those of an aggregationRule's ClusterRoles.
    fn cluster_role_rules(&self, role: &Value, depth: u8) -> Vec<Rule> {
        let Some(selectors) = role["aggregationRule"]["clusterRoleSelectors"].as_array() else {
            return rules_of(role);
        };
        if depth > 4 {
            return vec![];
        }
        let selectors: Vec<LabelSelector> = selectors
            .iter()
            .filter_map(|s| LabelSelector::parse(&selector_string(s)).ok())
            .collect();
        let me = role["metadata"]["name"].as_str().unwrap_or_default();
        let mut out = vec![];
        for other in self.list("clusterroles", None) {
            if other["metadata"]["name"].as_str() == Some(me) {
                continue;
            }
            let labels = other["metadata"]["labels"].as_object();
            if selectors.iter().any(|s| s.matches(labels)) {
                out.extend(self.cluster_role_rules(&other, depth + 1));
            }
        }
        out
    }

    /// The rules of a binding's roleRef, or the "not found" error the RBAC authorizer reports.
    fn role_ref_rules(&self, binding: &Value, namespace: &str) -> Result<Vec<Rule>, String> {
        let r = &binding["roleRef"];
        let name = r["name"].as_str().unwrap_or_default();
        match r["kind"].as_str().unwrap_or_default() {
            "Role" if !namespace.is_empty() => self
                .get("roles", namespace, name)
                .map(|role| rules_of(&role))
                .ok_or_else(|| format!("role.{RBAC_GROUP} \"{name}\" not found")),
            "ClusterRole" => self
                .get("clusterroles", "", name)
                .map(|role| self.cluster_role_rules(&role, 0))
                .ok_or_else(|| format!("clusterrole.{RBAC_GROUP} \"{name}\" not found")),
            other => Err(format!("unsupported role reference kind: {other:?}")),
        }
    }
}

fn rules_of(role: &Value) -> Vec<Rule> {
    role["rules"]
        .as_array()
        .map(|a| a.iter().map(Rule::from_json).collect())
        .unwrap_or_default()
}

/// A metav1.LabelSelector (`matchLabels`, `matchExpressions`) in the label selector syntax.
fn selector_string(sel: &Value) -> String {
    let mut parts = vec![];
    if let Some(m) = sel["matchLabels"].as_object() {
        for (k, v) in m {
            parts.push(format!("{k}={}", v.as_str().unwrap_or_default()));
        }
    }
    if let Some(exprs) = sel["matchExpressions"].as_array() {
        for e in exprs {
            let k = e["key"].as_str().unwrap_or_default();
            let vals = strings(&e["values"]).join(",");
            match e["operator"].as_str().unwrap_or_default() {
                "In" => parts.push(format!("{k} in ({vals})")),
                "NotIn" => parts.push(format!("{k} notin ({vals})")),
                "Exists" => parts.push(k.to_string()),
                "DoesNotExist" => parts.push(format!("!{k}")),
                _ => {}
            }
        }
    }
    parts.join(",")
}

/// Visit the rules that apply to `user` in `namespace` ("" = cluster scope only) until `f`
/// returns true (found). Returns whether `f` did, and the errors met on the way (bindings whose
/// role does not exist), as the RBAC authorizer's rule visitor.
fn visit_rules(
    store: &Store,
    user: &User,
    namespace: &str,
    mut f: impl FnMut(&Rule) -> bool,
) -> (bool, Vec<String>) {
    if bootstrap_rules(user).iter().any(&mut f) {
        return (true, vec![]);
    }
    let policy = Policy { store };
    let mut errors = vec![];
    let mut bindings: Vec<(std::sync::Arc<Value>, &str)> = policy
        .list("clusterrolebindings", None)
        .into_iter()
        .map(|b| (b, ""))
        .collect();
    if !namespace.is_empty() {
        bindings.extend(
            policy
                .list("rolebindings", Some(namespace))
                .into_iter()
                .map(|b| (b, namespace)),
        );
    }
    for (binding, ns) in bindings {
        if !binds(&binding, user, ns) {
            continue;
        }
        match policy.role_ref_rules(&binding, ns) {
            Ok(rules) => {
                if rules.iter().any(&mut f) {
                    return (true, errors);
                }
            }
            Err(e) => {
                if !errors.contains(&e) {
                    errors.push(e);
                }
            }
        }
    }
    (false, errors)
}

/// Is the request allowed? On a denial, the errors met on the way (missing roles).
fn decide(store: &Store, user: &User, a: &Attributes) -> Result<(), Vec<String>> {
    if user.in_group("system:masters") {
        return Ok(());
    }
    match visit_rules(store, user, &a.namespace, |r| r.allows(a)) {
        (true, _) => Ok(()),
        (false, errors) => Err(errors),
    }
}

/// The rules of `user` in `namespace`, as a SelfSubjectRulesReview answers them:
/// `(resourceRules, nonResourceRules, evaluationError)`.
pub fn rules_review(store: &Store, user: &User, namespace: &str) -> (Value, Value, String) {
    if user.in_group("system:masters") {
        return (
            json!([{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}]),
            json!([{"verbs": ["*"], "nonResourceURLs": ["*"]}]),
            String::new(),
        );
    }
    let mut resource = vec![];
    let mut non_resource = vec![];
    let (_, errors) = visit_rules(store, user, namespace, |r| {
        if !r.resources.is_empty() {
            let mut v =
                json!({"verbs": r.verbs, "apiGroups": r.api_groups, "resources": r.resources});
            if !r.resource_names.is_empty() {
                v["resourceNames"] = json!(r.resource_names);
            }
            resource.push(v);
        }
        if !r.non_resource_urls.is_empty() {
            non_resource.push(json!({"verbs": r.verbs, "nonResourceURLs": r.non_resource_urls}));
        }
        false
    });
    let err = match errors.as_slice() {
        [] => String::new(),
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    };
    (json!(resource), json!(non_resource), err)
}

/// The attributes of a SubjectAccessReview-style `spec` (`resourceAttributes` or
/// `nonResourceAttributes`).
pub fn review_attributes(spec: &Value) -> Attributes {
    let ra = &spec["resourceAttributes"];
    if ra.is_object() {
        let s = |k: &str| ra[k].as_str().unwrap_or_default().to_string();
        return Attributes {
            verb: s("verb"),
            resource_request: true,
            group: s("group"),
            version: s("version"),
            namespace: s("namespace"),
            resource: s("resource"),
            subresource: s("subresource"),
            name: s("name"),
            path: String::new(),
        };
    }
    let na = &spec["nonResourceAttributes"];
    Attributes {
        verb: na["verb"].as_str().unwrap_or_default().to_string(),
        path: na["path"].as_str().unwrap_or_default().to_string(),
        ..Default::default()
    }
}

/// The apiserver's text for a denied request (without the `<resource> is forbidden: ` prefix).
pub fn forbidden_message(user: &User, a: &Attributes) -> String {
    if !a.resource_request {
        return format!(
            "User \"{}\" cannot {} path \"{}\"",
            user.name, a.verb, a.path
        );
    }
    let resource = if a.subresource.is_empty() {
        a.resource.clone()
    } else {
        format!("{}/{}", a.resource, a.subresource)
    };
    if a.namespace.is_empty() {
        format!(
            "User \"{}\" cannot {} resource \"{resource}\" in API group \"{}\" at the cluster scope",
            user.name, a.verb, a.group
        )
    } else {
        format!(
            "User \"{}\" cannot {} resource \"{resource}\" in API group \"{}\" in the namespace \"{}\"",
            user.name, a.verb, a.group, a.namespace
        )
    }
}

/// The 403 Status of a denied request.
pub fn forbidden(user: &User, a: &Attributes, errors: &[String]) -> ApiError {
    let mut reason = forbidden_message(user, a);
    match errors {
        [] => {}
        [one] => reason = format!("{reason}: RBAC: {one}"),
        many => reason = format!("{reason}: RBAC: [{}]", many.join(", ")),
    }
    let qualified = match (a.resource_request, a.group.is_empty()) {
        (false, _) => String::new(),
        (true, true) => a.resource.clone(),
        (true, false) => format!("{}.{}", a.resource, a.group),
    };
    let message = if qualified.is_empty() {
        format!("forbidden: {reason}")
    } else if a.name.is_empty() {
        format!("{qualified} is forbidden: {reason}")
    } else {
        format!("{qualified} \"{}\" is forbidden: {reason}", a.name)
    };
    let mut details = serde_json::Map::new();
    if !a.name.is_empty() {
        details.insert("name".into(), json!(a.name));
    }
    if a.resource_request && !a.group.is_empty() {
        details.insert("group".into(), json!(a.group));
    }
    if a.resource_request {
        details.insert("kind".into(), json!(a.resource));
    }
    ApiError {
        code: 403,
        reason: "Forbidden".into(),
        message,
        details: Some(Value::Object(details)),
    }
}

/// Authorize a request for `user`.
pub fn authorize(store: &Store, user: &User, a: &Attributes) -> Result<(), Denied> {
    decide(store, user, a).map_err(|errors| Denied::Forbidden(forbidden(user, a, &errors)))
}

/// Can `user` do what `a` describes? (SubjectAccessReview and friends.)
pub fn allowed(store: &Store, user: &User, a: &Attributes) -> bool {
    decide(store, user, a).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs(method: Method, path: &str, q: &[(&str, &str)]) -> Attributes {
        let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        let q: HashMap<String, String> = q
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        attributes(&method, &segs, &q)
    }

    #[test]
    fn request_attributes_follow_the_apiserver() {
        let a = attrs(Method::GET, "/api/v1/namespaces/ns/secrets", &[]);
        assert_eq!(
            (a.verb.as_str(), a.resource.as_str(), a.namespace.as_str()),
            ("list", "secrets", "ns")
        );
        let a = attrs(
            Method::GET,
            "/api/v1/namespaces/ns/secrets",
            &[("watch", "true"), ("fieldSelector", "metadata.name=s1")],
        );
        assert_eq!((a.verb.as_str(), a.name.as_str()), ("watch", "s1"));
        let a = attrs(
            Method::PATCH,
            "/apis/external-secrets.io/v1/namespaces/ns/externalsecrets/e/status",
            &[],
        );
        assert_eq!(
            (
                a.verb.as_str(),
                a.group.as_str(),
                a.resource.as_str(),
                a.name.as_str(),
                a.subresource.as_str()
            ),
            (
                "patch",
                "external-secrets.io",
                "externalsecrets",
                "e",
                "status"
            )
        );
        let a = attrs(Method::GET, "/api/v1/namespaces/ns", &[]);
        assert_eq!(
            (
                a.verb.as_str(),
                a.resource.as_str(),
                a.name.as_str(),
                a.namespace.as_str()
            ),
            ("get", "namespaces", "ns", "ns")
        );
        let a = attrs(Method::PUT, "/api/v1/namespaces/ns/finalize", &[]);
        assert_eq!(
            (a.resource.as_str(), a.name.as_str(), a.subresource.as_str()),
            ("namespaces", "ns", "finalize")
        );
        let a = attrs(Method::DELETE, "/api/v1/namespaces/ns/secrets", &[]);
        assert_eq!(a.verb, "deletecollection");
        let a = attrs(Method::GET, "/apis/apps/v1", &[]);
        assert!(!a.resource_request);
        assert_eq!((a.verb.as_str(), a.path.as_str()), ("get", "/apis/apps/v1"));
    }

    #[test]
    fn rules_match_like_rbac() {
        let r = Rule {
            verbs: vec!["get".into()],
            api_groups: vec!["".into()],
            resources: vec!["secrets".into()],
            resource_names: vec!["one".into()],
            non_resource_urls: vec![],
        };
        let a = attrs(Method::GET, "/api/v1/namespaces/ns/secrets/one", &[]);
        assert!(r.allows(&a));
        assert!(!r.allows(&attrs(
            Method::GET,
            "/api/v1/namespaces/ns/secrets/two",
            &[]
        )));
        assert!(!r.allows(&attrs(Method::GET, "/api/v1/namespaces/ns/secrets", &[])));
        let sub = Rule::new(&["*"], &["*"], &["*/status"], &[]);
        assert!(sub.allows(&attrs(
            Method::PATCH,
            "/api/v1/namespaces/ns/secrets/one/status",
            &[]
        )));
        assert!(!sub.allows(&a));
        let url = Rule::new(&["get"], &[], &[], &["/healthz/*"]);
        assert!(url.allows(&attrs(Method::GET, "/healthz/ping", &[])));
        assert!(!url.allows(&attrs(Method::GET, "/livez", &[])));
    }

    #[test]
    fn forbidden_texts() {
        let u = User::service_account("ns", "sa");
        let a = attrs(Method::GET, "/api/v1/namespaces/other/secrets", &[]);
        assert_eq!(
            forbidden(&u, &a, &[]).message,
            "secrets is forbidden: User \"system:serviceaccount:ns:sa\" cannot list resource \"secrets\" in API group \"\" in the namespace \"other\""
        );
        let a = attrs(Method::GET, "/api/v1/namespaces", &[("watch", "1")]);
        assert_eq!(
            forbidden(&u, &a, &[]).message,
            "namespaces is forbidden: User \"system:serviceaccount:ns:sa\" cannot watch resource \"namespaces\" in API group \"\" at the cluster scope"
        );
        let a = attrs(Method::GET, "/foo", &[]);
        assert_eq!(
            forbidden(&u, &a, &[]).message,
            "forbidden: User \"system:serviceaccount:ns:sa\" cannot get path \"/foo\""
        );
    }
}
