//! The `SecretsClient` of a webhook store (also what one generator run uses).

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use esr_api::providers::webhook::WebhookProvider as Spec;
use esr_provider::refs::ERR_NAMESPACE_NOT_ALLOWED;
use esr_provider::{
    FindRequest, KubeAccess, ProviderError, PushRemoteRef, PushRequest, Result, SecretRef,
    SecretsClient, ValidationResult,
};
use reqwest::StatusCode;
use tokio::sync::OnceCell;

use crate::SECRET_TYPE_LABEL;
use crate::http::{Http, Request, network_validate};
use crate::response::{secret_map, secret_value};
use crate::template::{Job, TemplateData, query_escape, render, render_string};

/// Where the Secrets named in `secrets` are read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SecretScope {
    /// A SecretStore (its namespace) or a generator (the referrer's namespace): an entry naming
    /// another namespace is refused.
    Namespace(String),
    /// A ClusterSecretStore: every entry names its namespace.
    Cluster,
}

/// The name of the template data holding the remote reference.
const REMOTE_REF: &str = "remoteRef";

/// A webhook client: the store's spec, an HTTP client, and the Secrets its templates use (read
/// once per client).
pub struct WebhookClient {
    spec: Spec,
    http: Http,
    kube: Arc<dyn KubeAccess>,
    scope: SecretScope,
    /// `.remoteRef.namespace`: the namespace of the ExternalSecret (empty when unknown).
    namespace: String,
    secrets: OnceCell<TemplateData>,
}

impl std::fmt::Debug for WebhookClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookClient")
            .field("scope", &self.scope)
            .field("namespace", &self.namespace)
            .finish_non_exhaustive()
    }
}

/// The raw and the query-escaped template data of one request.
struct Data {
    raw: Arc<TemplateData>,
    escaped: Arc<TemplateData>,
}

impl WebhookClient {
    /// A client for `spec`; `namespace` is the ExternalSecret's (`.remoteRef.namespace`).
    pub fn new(
        spec: Spec,
        http: Http,
        kube: Arc<dyn KubeAccess>,
        scope: SecretScope,
        namespace: impl Into<String>,
    ) -> Self {
        WebhookClient {
            spec,
            http,
            kube,
            scope,
            namespace: namespace.into(),
            secrets: OnceCell::new(),
        }
    }

    /// The data of the Secrets named in `secrets`, each under its name.
    async fn secret_data(&self) -> Result<&TemplateData> {
        self.secrets
            .get_or_try_init(|| async {
                let mut data = TemplateData::new();
                for s in self.spec.secrets.iter().flatten() {
                    let r = &s.secret_ref;
                    let values = self
                        .read_secret(r.name.as_deref().unwrap_or(""), r.namespace.as_deref())
                        .await?;
                    data.extend(&s.name, &values);
                }
                Ok(data)
            })
            .await
    }

    /// Reads one Secret of `secrets` (ESO's rules and texts).
    async fn read_secret(
        &self,
        name: &str,
        namespace: Option<&str>,
    ) -> Result<BTreeMap<String, Vec<u8>>> {
        let namespace = namespace.filter(|n| !n.is_empty());
        let ns = match (&self.scope, namespace) {
            (SecretScope::Cluster, Some(ns)) => ns.to_string(),
            (SecretScope::Cluster, None) => {
                return Err(ProviderError::invalid(format!(
                    "no namespace on ClusterScoped webhook secret {name}"
                )));
            }
            (SecretScope::Namespace(own), Some(ns)) if ns != own => {
                return Err(ProviderError::invalid(ERR_NAMESPACE_NOT_ALLOWED));
            }
            (SecretScope::Namespace(own), _) => own.clone(),
        };
        let fail = |why: String| {
            ProviderError::invalid(format!(
                "failed to get clustersecretstore webhook secret {name}: {why}"
            ))
        };
        let secret = self
            .kube
            .get_secret(&ns, name)
            .await
            .map_err(|e| {
                e.wrap(format_args!(
                    "failed to get clustersecretstore webhook secret {name}"
                ))
            })?
            .ok_or_else(|| fail(format!("secrets {name:?} not found")))?;
        let (label, want) = SECRET_TYPE_LABEL;
        match secret.metadata.labels.as_ref().and_then(|l| l.get(label)) {
            None => {
                return Err(ProviderError::invalid(format!(
                    "secret does not contain needed label '{label}: {want}'. Update secret label to use it with webhook"
                )));
            }
            Some(v) if v != want => {
                return Err(ProviderError::invalid(format!(
                    "secret type is not '{want}'"
                )));
            }
            Some(_) => {}
        }
        Ok(secret
            .data
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| (k, v.0))
            .collect())
    }

    /// The template data of a read: `.remoteRef` (escaped for the URL) and the Secrets.
    async fn read_data(&self, r: Option<&SecretRef>) -> Result<Data> {
        let secrets = self.secret_data().await?;
        let mut raw = TemplateData::new();
        let mut escaped = TemplateData::new();
        if let Some(r) = r {
            for (k, v) in [
                ("key", r.key.as_str()),
                ("version", r.version_str()),
                ("property", r.property().unwrap_or("")),
            ] {
                raw.set(REMOTE_REF, k, v);
                escaped.set(REMOTE_REF, k, query_escape(v));
            }
            raw.set(REMOTE_REF, "namespace", self.namespace.as_str());
            escaped.set(REMOTE_REF, "namespace", self.namespace.as_str());
        }
        merge(&mut raw, secrets);
        merge(&mut escaped, secrets);
        Ok(Data {
            raw: Arc::new(raw),
            escaped: Arc::new(escaped),
        })
    }

    /// Renders the request (URL from the escaped data, body and headers from the raw data).
    async fn request(
        &self,
        data: &Data,
        default_method: &str,
        body: Option<&str>,
    ) -> Result<Request> {
        let mut jobs = vec![
            Job::new("failed to parse url", &self.spec.request.url, &data.escaped),
            Job::new("failed to parse body", body.unwrap_or(""), &data.raw),
        ];
        let headers: Vec<(&String, &String)> = self.spec.request.headers.iter().flatten().collect();
        for (k, v) in &headers {
            jobs.push(Job::new(
                format!("failed to parse header {k}"),
                v,
                &data.raw,
            ));
        }
        let mut out = render(jobs).await?.into_iter();
        let url = String::from_utf8_lossy(&out.next().unwrap_or_default()).into_owned();
        let body = out.next().unwrap_or_default();
        let headers = headers
            .iter()
            .zip(out)
            .map(|((k, _), v)| ((*k).clone(), String::from_utf8_lossy(&v).into_owned()))
            .collect();
        let method = self
            .spec
            .request
            .method
            .clone()
            .filter(|m| !m.is_empty())
            .unwrap_or_else(|| default_method.to_string());
        Ok(Request {
            method,
            url,
            headers,
            body,
        })
    }

    /// `result.jsonPath` as written.
    fn path_template(&self) -> &str {
        self.spec
            .result
            .as_ref()
            .and_then(|r| r.json_path.as_deref())
            .unwrap_or("")
    }

    /// The rendered `result.jsonPath`.
    async fn path(&self, data: &Data) -> Result<String> {
        render_string(Job::new(
            "cannot get templated json path",
            self.path_template(),
            &data.raw,
        ))
        .await
    }

    /// Sends the read request (`GET` unless `method` says otherwise) and returns its body.
    async fn fetch(&self, data: &Data) -> Result<Vec<u8>> {
        let req = self
            .request(data, "GET", self.spec.request.body.as_deref())
            .await?;
        self.http.send(req).await?.into_body()
    }

    /// One generator run: the request without `.remoteRef`, its answer read as a map at the
    /// (untemplated) `result.jsonPath`.
    pub async fn generate_map(&self) -> Result<BTreeMap<String, Vec<u8>>> {
        let data = self.read_data(None).await?;
        let body = self.fetch(&data).await?;
        let path = self.path_template();
        secret_map(&body, path, path)
    }
}

fn merge(into: &mut TemplateData, from: &TemplateData) {
    for (name, map) in from.entries() {
        into.extend(name, map);
    }
}

#[async_trait]
impl SecretsClient for WebhookClient {
    async fn get_secret(&self, r: &SecretRef) -> Result<Vec<u8>> {
        let data = self.read_data(Some(r)).await?;
        let body = self.fetch(&data).await?;
        let path = self.path(&data).await?;
        secret_value(body, &path, self.path_template())
    }

    async fn get_secret_map(&self, r: &SecretRef) -> Result<BTreeMap<String, Vec<u8>>> {
        let data = self.read_data(Some(r)).await?;
        let path = self.path(&data).await?;
        let body = self.fetch(&data).await?;
        secret_map(&body, &path, self.path_template())
    }

    async fn get_all_secrets(&self, _f: &FindRequest) -> Result<BTreeMap<String, Vec<u8>>> {
        Err(ProviderError::unsupported("not implemented"))
    }

    async fn push_secret(&self, req: &PushRequest) -> Result<()> {
        let key = req.remote_key();
        if key.is_empty() {
            return Err(ProviderError::invalid("remote key must be defined"));
        }
        let secrets = self.secret_data().await?;
        let mut raw = TemplateData::new();
        let mut escaped = TemplateData::new();
        raw.set(REMOTE_REF, "remoteKey", key);
        escaped.set(REMOTE_REF, "remoteKey", query_escape(key));
        if let Some(sk) = req.secret_key() {
            raw.set(REMOTE_REF, "secretKey", sk);
            escaped.set(REMOTE_REF, "secretKey", query_escape(sk));
        }
        raw.set(REMOTE_REF, key, req.value.clone());
        escaped.set(
            REMOTE_REF,
            key,
            query_escape(&String::from_utf8_lossy(&req.value)),
        );
        merge(&mut raw, secrets);
        merge(&mut escaped, secrets);
        let data = Data {
            raw: Arc::new(raw),
            escaped: Arc::new(escaped),
        };
        let body = self.spec.request.body.as_deref().filter(|b| !b.is_empty());
        let mut request = self.request(&data, "POST", body).await?;
        if body.is_none() {
            // ESO's default body, `{{ .remoteRef.<remoteKey> }}`: the pushed value.
            request.body = req.value.clone();
        }
        self.http
            .send(request)
            .await?
            .into_body()
            .map(|_| ())
            .map_err(|e| e.wrap("failed to push webhook data"))
    }

    async fn delete_secret(&self, r: &PushRemoteRef) -> Result<()> {
        let secrets = self.secret_data().await?;
        let mut raw = TemplateData::new();
        let mut escaped = TemplateData::new();
        raw.set(REMOTE_REF, "remoteKey", r.remote_key.as_str());
        escaped.set(REMOTE_REF, "remoteKey", query_escape(&r.remote_key));
        merge(&mut raw, secrets);
        merge(&mut escaped, secrets);
        let data = Data {
            raw: Arc::new(raw),
            escaped: Arc::new(escaped),
        };
        let mut request = self.request(&data, "DELETE", None).await?;
        request.method = "DELETE".to_string();
        let answer = self.http.send(request).await?;
        if answer.status == StatusCode::NOT_FOUND {
            return Ok(());
        }
        answer
            .into_body_with("delete endpoint gave error")
            .map(|_| ())
    }

    async fn secret_exists(&self, r: &PushRemoteRef) -> Result<bool> {
        // ESO: the read request for `key: <remoteKey>`, its answer unparsed.
        let data = self
            .read_data(Some(&SecretRef::new(r.remote_key.as_str())))
            .await?;
        match self.fetch(&data).await {
            Ok(_) => Ok(true),
            Err(e) if e.is_not_found() => Ok(false),
            Err(e) => Err(e),
        }
    }

    async fn validate(&self) -> ValidationResult {
        match network_validate(&self.spec.request.url).await {
            Ok(()) => ValidationResult::Ready,
            Err(e) => ValidationResult::Error(e),
        }
    }
}
