//! Resolution of credential references (`SecretKeySelector`, `ServiceAccountSelector`,
//! `caProvider`) with ESO's namespace rules.
//!
//! Runtime rule (ESO `resolvers.SecretKeyRef`): a reference is read from the ExternalSecret's
//! namespace, except that a ClusterSecretStore honours an explicit `namespace`. So:
//! - namespaced store: always its own namespace (an explicit, different namespace is rejected);
//! - cluster store with `namespace`: that namespace;
//! - cluster store without `namespace` ("referent auth"): the ExternalSecret's namespace, which is
//!   unknown while the store controller validates the store.
//!
//! Static rules (ESO `ValidateSecretSelector` & co., used by `Provider::validate_store`):
//! - non-referent: a cluster store requires `namespace` (`cluster scope requires namespace`);
//! - all: a namespaced store may only name its own namespace.

use crate::error::{ProviderError, Result};
use crate::provider::{ClientContext, StoreInfo, StoreKind};

/// ESO's error for a namespaced store naming another namespace.
pub const ERR_NAMESPACE_NOT_ALLOWED: &str = "namespace should either be empty or match the namespace of the SecretStore for a namespaced SecretStore";
/// ESO's error for a cluster store reference without namespace (non-referent providers).
pub const ERR_REQUIRE_NAMESPACE: &str = "cluster scope requires namespace";

/// Borrowed view of a `SecretKeySelector {name, namespace?, key?}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SecretKeyRef<'a> {
    /// Secret name.
    pub name: &'a str,
    /// Explicit namespace.
    pub namespace: Option<&'a str>,
    /// Key in the Secret's data.
    pub key: &'a str,
}

impl<'a> SecretKeyRef<'a> {
    /// A reference; empty `namespace` strings count as unset.
    pub fn new(name: &'a str, namespace: Option<&'a str>, key: &'a str) -> Self {
        SecretKeyRef {
            name,
            namespace: namespace.filter(|n| !n.is_empty()),
            key,
        }
    }
}

/// The namespace a reference resolves to at runtime (see the module docs).
/// `es_namespace` is the ExternalSecret's namespace (`None` while validating a cluster store).
pub fn resolve_namespace(
    store: &StoreInfo,
    es_namespace: Option<&str>,
    ref_namespace: Option<&str>,
    what: &str,
) -> Result<String> {
    let ref_namespace = ref_namespace.filter(|n| !n.is_empty());
    let es_namespace = es_namespace.filter(|n| !n.is_empty());
    match store.kind {
        StoreKind::ClusterSecretStore => match (ref_namespace, es_namespace) {
            (Some(ns), _) => Ok(ns.to_string()),
            (None, Some(ns)) => Ok(ns.to_string()),
            (None, None) => Err(ProviderError::invalid(format!(
                "cannot resolve {what} without a namespace: referent authentication needs the namespace of the ExternalSecret"
            ))),
        },
        StoreKind::SecretStore => {
            let own = store
                .namespace
                .as_deref()
                .or(es_namespace)
                .unwrap_or("default");
            match ref_namespace {
                Some(ns) if ns != own => Err(ProviderError::invalid(ERR_NAMESPACE_NOT_ALLOWED)),
                _ => Ok(own.to_string()),
            }
        }
    }
}

/// Reads the value a `SecretKeySelector` points at, with ESO's namespace rule and error texts.
pub async fn resolve_secret_key_ref(
    ctx: &ClientContext<'_>,
    r: &SecretKeyRef<'_>,
) -> Result<Vec<u8>> {
    let ns = resolve_namespace(
        ctx.store,
        ctx.namespace,
        r.namespace,
        &format!("secret {:?}", r.name),
    )?;
    ctx.kube.get_secret_key(&ns, r.name, r.key).await
}

/// Like [`resolve_secret_key_ref`], returning a UTF-8 string with surrounding whitespace kept
/// (ESO uses `string(bytes)`).
pub async fn resolve_secret_key_ref_string(
    ctx: &ClientContext<'_>,
    r: &SecretKeyRef<'_>,
) -> Result<String> {
    let v = resolve_secret_key_ref(ctx, r).await?;
    String::from_utf8(v).map_err(|_| {
        ProviderError::invalid(format!(
            "secret {:?} key {:?} is not valid UTF-8",
            r.name, r.key
        ))
    })
}

/// Requests a ServiceAccount token (TokenRequest) with ESO's namespace rule (the ExternalSecret's
/// namespace; a cluster store honours an explicit namespace).
pub async fn service_account_token(
    ctx: &ClientContext<'_>,
    name: &str,
    namespace: Option<&str>,
    audiences: &[String],
    expiration_seconds: Option<i64>,
) -> Result<String> {
    let ns = resolve_namespace(
        ctx.store,
        ctx.namespace,
        namespace,
        &format!("service account {name:?}"),
    )?;
    ctx.kube
        .create_service_account_token(&ns, name, audiences, expiration_seconds)
        .await
        .map_err(|e| {
            e.wrap(format_args!(
                "cannot create service account token: {name:?}"
            ))
        })
}

/// ESO `ValidateSecretSelector` (non-referent providers).
pub fn validate_secret_selector(store: &StoreInfo, namespace: Option<&str>) -> Result<()> {
    let namespace = namespace.filter(|n| !n.is_empty());
    if store.kind.is_cluster() && namespace.is_none() {
        return Err(ProviderError::invalid(ERR_REQUIRE_NAMESPACE));
    }
    validate_referent_secret_selector(store, namespace)
}

/// ESO `ValidateReferentSecretSelector` (referent providers: cluster stores may omit namespace).
pub fn validate_referent_secret_selector(store: &StoreInfo, namespace: Option<&str>) -> Result<()> {
    let namespace = namespace.filter(|n| !n.is_empty());
    if !store.kind.is_cluster()
        && let Some(ns) = namespace
        && Some(ns) != store.namespace.as_deref()
    {
        return Err(ProviderError::invalid(ERR_NAMESPACE_NOT_ALLOWED));
    }
    Ok(())
}

/// ESO `ValidateServiceAccountSelector` (same rules as secret selectors).
pub fn validate_service_account_selector(store: &StoreInfo, namespace: Option<&str>) -> Result<()> {
    validate_secret_selector(store, namespace)
}

/// ESO `ValidateReferentServiceAccountSelector`.
pub fn validate_referent_service_account_selector(
    store: &StoreInfo,
    namespace: Option<&str>,
) -> Result<()> {
    validate_referent_secret_selector(store, namespace)
}

/// `caProvider.type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CaProviderKind {
    /// A Secret key.
    Secret,
    /// A ConfigMap key.
    ConfigMap,
}

/// Borrowed view of a `caProvider {type, name, key, namespace?}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CaProviderRef<'a> {
    /// Secret or ConfigMap.
    pub kind: CaProviderKind,
    /// Object name.
    pub name: &'a str,
    /// Key.
    pub key: &'a str,
    /// Explicit namespace.
    pub namespace: Option<&'a str>,
}

/// ESO `FetchCACertFromSource`: the CA bundle (PEM) from `caBundle` (PEM, or base64 of PEM) or from
/// a `caProvider`. `Ok(None)` when neither is set.
pub async fn fetch_ca_cert(
    ctx: &ClientContext<'_>,
    ca_bundle: Option<&[u8]>,
    ca_provider: Option<&CaProviderRef<'_>>,
) -> Result<Option<Vec<u8>>> {
    if let Some(bundle) = ca_bundle.filter(|b| !b.is_empty()) {
        return decode_ca_bundle(bundle)
            .map(Some)
            .map_err(|e| e.wrap("failed to decode ca bundle"));
    }
    let Some(p) = ca_provider else {
        return Ok(None);
    };
    let namespace = p.namespace.filter(|n| !n.is_empty());
    if ctx.store.kind.is_cluster() && namespace.is_none() {
        return Err(ProviderError::invalid(
            "missing namespace on caProvider secret",
        ));
    }
    match p.kind {
        CaProviderKind::Secret => {
            let r = SecretKeyRef::new(p.name, namespace, p.key);
            resolve_secret_key_ref(ctx, &r)
                .await
                .map(Some)
                .map_err(|e| {
                    e.wrap("failed to resolve secret key ref")
                        .wrap("failed to get cert from secret")
                })
        }
        CaProviderKind::ConfigMap => {
            let ns = match namespace.or(ctx.default_namespace()) {
                Some(ns) => ns.to_string(),
                None => {
                    return Err(ProviderError::invalid(
                        "missing namespace on caProvider configmap",
                    ));
                }
            };
            let cm = ctx
                .kube
                .get_config_map(&ns, p.name)
                .await
                .map_err(|e| e.wrap(format_args!("failed to get caProvider secret {}", p.name)))
                .map_err(|e| e.wrap("failed to get cert from configmap"))?;
            let cm = cm.ok_or_else(|| {
                ProviderError::invalid(format!(
                    "failed to get cert from configmap: failed to get caProvider secret {}: configmaps {:?} not found",
                    p.name, p.name
                ))
            })?;
            cm.data
                .as_ref()
                .and_then(|d| d.get(p.key))
                .map(|v| Some(v.clone().into_bytes()))
                .ok_or_else(|| {
                    ProviderError::invalid(format!(
                        "failed to get cert from configmap: failed to get caProvider configMap {} -> {}",
                        p.name, p.key
                    ))
                })
        }
    }
}

/// A `caBundle`: PEM as is, or base64 (standard or URL alphabet) of PEM.
pub fn decode_ca_bundle(bundle: &[u8]) -> Result<Vec<u8>> {
    use base64::Engine as _;
    if looks_like_pem_cert(bundle) {
        return Ok(bundle.to_vec());
    }
    let trimmed: Vec<u8> = bundle
        .iter()
        .copied()
        .filter(|b| !b.is_ascii_whitespace())
        .collect();
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(&trimmed)
        .or_else(|_| base64::engine::general_purpose::URL_SAFE.decode(&trimmed))
        .unwrap_or_else(|_| bundle.to_vec());
    if looks_like_pem_cert(&decoded) {
        Ok(decoded)
    } else {
        Err(ProviderError::invalid(
            "failed to parse the new certificate, not valid pem data",
        ))
    }
}

fn looks_like_pem_cert(data: &[u8]) -> bool {
    let marker = b"-----BEGIN CERTIFICATE-----";
    data.windows(marker.len()).any(|w| w == marker)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kube_access::{KubeAccess, StaticKubeAccess};
    use k8s_openapi::ByteString;
    use k8s_openapi::api::core::v1::{ConfigMap, Secret};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use serde_json::json;
    use std::sync::Arc;

    fn kube() -> Arc<dyn KubeAccess> {
        let k = StaticKubeAccess::new();
        for (ns, v) in [
            ("team", "team-value"),
            ("app", "app-value"),
            ("shared", "shared-value"),
        ] {
            k.add_secret(Secret {
                metadata: ObjectMeta {
                    name: Some("creds".into()),
                    namespace: Some(ns.into()),
                    ..Default::default()
                },
                data: Some([("k".to_string(), ByteString(v.as_bytes().to_vec()))].into()),
                ..Default::default()
            });
        }
        k.add_config_map(ConfigMap {
            metadata: ObjectMeta {
                name: Some("ca".into()),
                namespace: Some("shared".into()),
                ..Default::default()
            },
            data: Some([("ca.crt".to_string(), PEM.to_string())].into()),
            ..Default::default()
        });
        k.add_token("app", "sa", "app-token");
        k.add_token("shared", "sa", "shared-token");
        Arc::new(k)
    }

    const PEM: &str = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";

    fn ss() -> StoreInfo {
        StoreInfo::new(StoreKind::SecretStore, "s", Some("team".into()), json!({}))
    }

    fn css() -> StoreInfo {
        StoreInfo::new(StoreKind::ClusterSecretStore, "c", None, json!({}))
    }

    async fn read(store: &StoreInfo, es_ns: Option<&str>, ref_ns: Option<&str>) -> Result<String> {
        let ctx = ClientContext::new(store, es_ns, kube());
        resolve_secret_key_ref_string(&ctx, &SecretKeyRef::new("creds", ref_ns, "k")).await
    }

    #[tokio::test]
    async fn namespaced_store_reads_its_own_namespace() {
        let s = ss();
        assert_eq!(
            read(&s, Some("team"), None).await.ok().as_deref(),
            Some("team-value")
        );
        assert_eq!(
            read(&s, Some("team"), Some("team")).await.ok().as_deref(),
            Some("team-value")
        );
        assert_eq!(
            read(&s, None, None).await.ok().as_deref(),
            Some("team-value")
        );
        let e = read(&s, Some("team"), Some("shared"))
            .await
            .err()
            .map(|e| e.to_string());
        assert_eq!(e.as_deref(), Some(ERR_NAMESPACE_NOT_ALLOWED));
    }

    #[tokio::test]
    async fn cluster_store_uses_ref_namespace_or_referent() {
        let c = css();
        assert_eq!(
            read(&c, Some("app"), Some("shared")).await.ok().as_deref(),
            Some("shared-value")
        );
        // referent auth: the ExternalSecret's namespace
        assert_eq!(
            read(&c, Some("app"), None).await.ok().as_deref(),
            Some("app-value")
        );
        // validation time: unknown
        let e = read(&c, None, None).await.err();
        assert!(
            e.map(|e| e.to_string().contains("referent"))
                .unwrap_or(false)
        );
        // explicit namespace works at validation time
        assert_eq!(
            read(&c, None, Some("shared")).await.ok().as_deref(),
            Some("shared-value")
        );
    }

    #[tokio::test]
    async fn service_account_tokens_follow_the_same_rule() {
        let c = css();
        let ctx = ClientContext::new(&c, Some("app"), kube());
        assert_eq!(
            service_account_token(&ctx, "sa", None, &[], None)
                .await
                .ok()
                .as_deref(),
            Some("app-token")
        );
        assert_eq!(
            service_account_token(&ctx, "sa", Some("shared"), &[], None)
                .await
                .ok()
                .as_deref(),
            Some("shared-token")
        );
        let e = service_account_token(&ctx, "nope", None, &[], None)
            .await
            .err()
            .map(|e| e.to_string());
        assert!(
            e.map(|e| e.starts_with("cannot create service account token: \"nope\": "))
                .unwrap_or(false)
        );
    }

    #[test]
    fn static_validation_rules() {
        let s = ss();
        let c = css();
        assert!(validate_secret_selector(&s, None).is_ok());
        assert!(validate_secret_selector(&s, Some("team")).is_ok());
        assert_eq!(
            validate_secret_selector(&s, Some("other"))
                .err()
                .map(|e| e.to_string())
                .as_deref(),
            Some(ERR_NAMESPACE_NOT_ALLOWED)
        );
        assert_eq!(
            validate_secret_selector(&c, None)
                .err()
                .map(|e| e.to_string())
                .as_deref(),
            Some(ERR_REQUIRE_NAMESPACE)
        );
        assert!(validate_secret_selector(&c, Some("x")).is_ok());
        assert!(validate_referent_secret_selector(&c, None).is_ok());
        assert!(validate_referent_secret_selector(&s, Some("other")).is_err());
        assert!(validate_service_account_selector(&c, None).is_err());
        assert!(validate_referent_service_account_selector(&c, None).is_ok());
    }

    #[tokio::test]
    async fn ca_sources() {
        use base64::Engine as _;
        let s = ss();
        let ctx = ClientContext::new(&s, Some("team"), kube());
        assert_eq!(fetch_ca_cert(&ctx, None, None).await.ok(), Some(None));
        assert_eq!(
            fetch_ca_cert(&ctx, Some(PEM.as_bytes()), None).await.ok(),
            Some(Some(PEM.as_bytes().to_vec()))
        );
        let b64 = base64::engine::general_purpose::STANDARD.encode(PEM);
        assert_eq!(
            fetch_ca_cert(&ctx, Some(b64.as_bytes()), None).await.ok(),
            Some(Some(PEM.as_bytes().to_vec()))
        );
        let e = fetch_ca_cert(&ctx, Some(b"garbage"), None)
            .await
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            e.as_deref(),
            Some(
                "failed to decode ca bundle: failed to parse the new certificate, not valid pem data"
            )
        );
        let c = css();
        let cctx = ClientContext::new(&c, Some("app"), kube());
        let cm = CaProviderRef {
            kind: CaProviderKind::ConfigMap,
            name: "ca",
            key: "ca.crt",
            namespace: None,
        };
        let e = fetch_ca_cert(&cctx, None, Some(&cm))
            .await
            .err()
            .map(|e| e.to_string());
        assert_eq!(e.as_deref(), Some("missing namespace on caProvider secret"));
        let cm = CaProviderRef {
            namespace: Some("shared"),
            ..cm
        };
        assert_eq!(
            fetch_ca_cert(&cctx, None, Some(&cm)).await.ok(),
            Some(Some(PEM.as_bytes().to_vec()))
        );
        let bad_key = CaProviderRef { key: "nope", ..cm };
        let e = fetch_ca_cert(&cctx, None, Some(&bad_key))
            .await
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            e.as_deref(),
            Some(
                "failed to get cert from configmap: failed to get caProvider configMap ca -> nope"
            )
        );
        let sec = CaProviderRef {
            kind: CaProviderKind::Secret,
            name: "creds",
            key: "zz",
            namespace: Some("shared"),
        };
        let e = fetch_ca_cert(&cctx, None, Some(&sec))
            .await
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            e.as_deref(),
            Some(
                "failed to get cert from secret: failed to resolve secret key ref: cannot find secret data for key: \"zz\""
            )
        );
    }
}
