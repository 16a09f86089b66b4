//! The KES → ESO v1 mapping for one object, and the deduplicated store set.

use std::collections::BTreeMap;

use esr_api::opaque::OpaqueObject;
use esr_api::providers::aws::{AwsAuth, AwsJwtAuth, AwsProvider, AwsServiceType};
use esr_api::providers::azurekv::{AzureAuthType, AzureKvProvider};
use esr_api::providers::gcpsm::{GcpSmAuth, GcpSmProvider, GcpWorkloadIdentity};
use esr_api::providers::vault::{VaultAuth, VaultKubernetesAuth, VaultKvVersion, VaultProvider};
use esr_api::v1::{
    ClusterSecretStore, CreationPolicy, DecodingStrategy, ExternalSecret, ExternalSecretData,
    ExternalSecretDataFromRemoteRef, ExternalSecretDataRemoteRef, ExternalSecretFind,
    ExternalSecretRewrite, ExternalSecretRewriteRegexp, ExternalSecretSpec, ExternalSecretTarget,
    ExternalSecretTemplate, ExternalSecretTemplateMetadata, FindName, SecretStore, SecretStoreKind,
    SecretStoreProvider, SecretStoreRef, SecretStoreSpec, ServiceAccountSelector, SourceRef,
    TemplateEngineVersion, TemplateMergePolicy,
};
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

use crate::lodash::{self, Context};
use crate::{Document, ObjectReport, Options, OutputStore, Status, StoreKind, Takeover};

/// Label put on every generated store.
const CREATED_BY_LABEL: (&str, &str) = ("app.kubernetes.io/created-by", "esr-migrate-kes");

/// True for a `kubernetes-client.io/*` ExternalSecret.
pub fn is_kes_external_secret(v: &Value) -> bool {
    let api = v.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    api.starts_with("kubernetes-client.io/")
        && v.get("kind").and_then(Value::as_str) == Some("ExternalSecret")
}

/// The KES backends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Backend {
    SecretsManager,
    SystemManager,
    Vault,
    AzureKeyVault,
    Gcp,
    Ibm,
    Akeyless,
}

impl Backend {
    /// The short name used in store names.
    fn label(self) -> &'static str {
        match self {
            Backend::SecretsManager => "secretsmanager",
            Backend::SystemManager => "parameterstore",
            Backend::Vault => "vault",
            Backend::AzureKeyVault => "azurekv",
            Backend::Gcp => "gcpsm",
            Backend::Ibm => "ibm",
            Backend::Akeyless => "akeyless",
        }
    }

    fn kes_name(self) -> &'static str {
        match self {
            Backend::SecretsManager => "secretsManager",
            Backend::SystemManager => "systemManager",
            Backend::Vault => "vault",
            Backend::AzureKeyVault => "azureKeyVault",
            Backend::Gcp => "gcpSecretsManager",
            Backend::Ibm => "ibmcloudSecretsManager",
            Backend::Akeyless => "akeyless",
        }
    }
}

/// A store wanted by an ExternalSecret.
#[derive(Debug, Clone, PartialEq)]
struct StoreRequest {
    label: &'static str,
    provider: SecretStoreProvider,
    controller: Option<String>,
}

/// All stores, deduplicated by (namespace, name).
#[derive(Debug, Default)]
pub struct StoreSet {
    stores: BTreeMap<(String, String), OutputStore>,
}

impl StoreSet {
    /// Registers `req` for the object of report `report` and returns the store's name.
    fn register(
        &mut self,
        req: &StoreRequest,
        opts: &Options,
        namespace: Option<&str>,
        report: usize,
    ) -> Result<String, String> {
        let spec = SecretStoreSpec {
            controller: req.controller.clone(),
            provider: req.provider.clone(),
            ..SecretStoreSpec::default()
        };
        let canonical = serde_json::to_string(&spec).map_err(|e| e.to_string())?;
        let digest = Sha256::digest(canonical.as_bytes());
        let name = format!("kes-{}-{}", req.label, &hex::encode(digest)[..8]);
        let ns = match opts.store_kind {
            StoreKind::ClusterSecretStore => String::new(),
            StoreKind::SecretStore => namespace.unwrap_or("").to_string(),
        };
        let key = (ns.clone(), name.clone());
        if let Some(existing) = self.stores.get_mut(&key) {
            if !existing.used_by.contains(&report) {
                existing.used_by.push(report);
            }
            return Ok(name);
        }
        let mut labels = BTreeMap::new();
        labels.insert(
            CREATED_BY_LABEL.0.to_string(),
            CREATED_BY_LABEL.1.to_string(),
        );
        let manifest = match opts.store_kind {
            StoreKind::ClusterSecretStore => {
                let mut s = ClusterSecretStore::new(&name, spec);
                s.metadata.labels = Some(labels);
                serde_json::to_value(&s)
            }
            StoreKind::SecretStore => {
                let mut s = SecretStore::new(&name, spec);
                s.metadata.labels = Some(labels);
                if !ns.is_empty() {
                    s.metadata.namespace = Some(ns.clone());
                }
                serde_json::to_value(&s)
            }
        }
        .map_err(|e| e.to_string())?;
        self.stores.insert(
            key,
            OutputStore {
                manifest,
                used_by: vec![report],
            },
        );
        Ok(name)
    }

    /// The stores, sorted by namespace and name.
    pub fn into_outputs(self) -> Vec<OutputStore> {
        self.stores.into_values().collect()
    }
}

/// Per-object conversion state.
struct Ctx<'a> {
    opts: &'a Options,
    warnings: Vec<String>,
    notes: Vec<String>,
    errors: Vec<String>,
}

impl Ctx<'_> {
    fn warn(&mut self, w: impl Into<String>) {
        self.warnings.push(w.into());
    }
    fn note(&mut self, n: impl Into<String>) {
        self.notes.push(n.into());
    }
    fn error(&mut self, e: impl Into<String>) {
        self.errors.push(e.into());
    }
}

fn str_of<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str).filter(|s| !s.is_empty())
}

/// A scalar field as a string (KES's int-or-string fields such as `version`, `kvVersion`).
fn scalar_of(v: &Value, key: &str) -> Option<String> {
    match v.get(key)? {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

fn bool_of(v: &Value, key: &str) -> bool {
    match v.get(key) {
        Some(Value::Bool(b)) => *b,
        Some(Value::String(s)) => s == "true",
        _ => false,
    }
}

/// Secret keys ESO accepts (`^[-._a-zA-Z0-9]+$`, at most 253 characters).
fn is_secret_key(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.' || b == b'_')
}

/// Escapes a string for use as a literal in an RE2 regular expression.
fn regex_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// One converted `data[]` / `dataFrom[]` element and the store it reads from.
enum Item {
    Data(ExternalSecretData, StoreRequest),
    DataFrom(ExternalSecretDataFromRemoteRef, StoreRequest),
}

/// Converts one KES object. Returns its report and, if converted, the ExternalSecret manifest.
pub fn convert_object(
    doc: &Document,
    opts: &Options,
    stores: &mut StoreSet,
    report_index: usize,
) -> (ObjectReport, Option<Value>) {
    let meta = doc.value.get("metadata").cloned().unwrap_or(Value::Null);
    let name = str_of(&meta, "name").unwrap_or("").to_string();
    let namespace = str_of(&meta, "namespace").map(str::to_string);
    let mut ctx = Ctx {
        opts,
        warnings: Vec::new(),
        notes: Vec::new(),
        errors: Vec::new(),
    };
    let es = build(doc, &meta, &name, namespace.as_deref(), &mut ctx);
    let mut manifest = None;
    if ctx.errors.is_empty()
        && let Some((mut es, items_stores)) = es
    {
        // Register the stores only for objects that are converted.
        let mut names = Vec::new();
        for req in &items_stores {
            match stores.register(req, opts, namespace.as_deref(), report_index) {
                Ok(n) => names.push(n),
                Err(e) => ctx.error(format!("cannot build the store: {e}")),
            }
        }
        if ctx.errors.is_empty() {
            wire_store_refs(&mut es, &items_stores, &names, opts.store_kind);
            match serde_json::to_value(&es) {
                Ok(v) => manifest = Some(v),
                Err(e) => ctx.error(format!("cannot serialise the ExternalSecret: {e}")),
            }
        }
    }
    let status = if !ctx.errors.is_empty() {
        Status::NotConverted
    } else if ctx.warnings.is_empty() {
        Status::Converted
    } else {
        Status::ConvertedWithWarnings
    };
    if status == Status::NotConverted {
        manifest = None;
    }
    (
        ObjectReport {
            source: doc.source.clone(),
            index: doc.index,
            namespace,
            name,
            status,
            errors: ctx.errors,
            warnings: ctx.warnings,
            notes: ctx.notes,
        },
        manifest,
    )
}

/// Marker put into `secretStoreRef.name` / `sourceRef.storeRef.name` before the store names are
/// known: `\u{0}<index into the store request list>`.
fn placeholder(i: usize) -> String {
    format!("\u{0}{i}")
}

fn wire_store_refs(
    es: &mut ExternalSecret,
    reqs: &[StoreRequest],
    names: &[String],
    kind: StoreKind,
) {
    let kind = match kind {
        StoreKind::ClusterSecretStore => SecretStoreKind::ClusterSecretStore,
        StoreKind::SecretStore => SecretStoreKind::SecretStore,
    };
    let resolve = |r: &mut SecretStoreRef| {
        if let Some(n) = &r.name
            && let Some(idx) = n
                .strip_prefix('\u{0}')
                .and_then(|i| i.parse::<usize>().ok())
            && idx < reqs.len()
        {
            r.name = names.get(idx).cloned();
            r.kind = Some(kind);
        }
    };
    if let Some(r) = es.spec.secret_store_ref.as_mut() {
        resolve(r);
    }
    for d in es.spec.data.iter_mut().flatten() {
        if let Some(r) = d.source_ref.as_mut().and_then(|s| s.store_ref.as_mut()) {
            resolve(r);
        }
    }
    for d in es.spec.data_from.iter_mut().flatten() {
        if let Some(r) = d.source_ref.as_mut().and_then(|s| s.store_ref.as_mut()) {
            resolve(r);
        }
    }
}

/// Builds the ExternalSecret (with placeholder store names) and the list of distinct store
/// requests (the first is the default store).
fn build(
    doc: &Document,
    meta: &Value,
    name: &str,
    namespace: Option<&str>,
    ctx: &mut Ctx<'_>,
) -> Option<(ExternalSecret, Vec<StoreRequest>)> {
    if name.is_empty() {
        ctx.error("metadata.name is missing");
        return None;
    }
    let mut spec = match (doc.value.get("spec"), doc.value.get("secretDescriptor")) {
        (Some(s), _) if s.is_object() => s.clone(),
        (_, Some(s)) if s.is_object() => {
            ctx.note("deprecated `secretDescriptor` read as `spec`");
            s.clone()
        }
        _ => {
            ctx.error("spec is missing");
            return None;
        }
    };
    // Deprecated renames (KES README "Deprecations").
    if let Some(obj) = spec.as_object_mut() {
        if !obj.contains_key("data")
            && let Some(p) = obj.remove("properties")
        {
            obj.insert("data".to_string(), p);
            ctx.note("deprecated `spec.properties` read as `spec.data`");
        }
        if let Some(t) = obj.remove("type") {
            let tpl = obj
                .entry("template")
                .or_insert_with(|| Value::Object(serde_json::Map::new()));
            if let Some(tpl) = tpl.as_object_mut()
                && !tpl.contains_key("type")
            {
                tpl.insert("type".to_string(), t);
                ctx.note("deprecated `spec.type` read as `spec.template.type`");
            }
        }
    }
    let backend = match str_of(&spec, "backendType") {
        Some("secretsManager") => Backend::SecretsManager,
        Some("secretManager") => {
            ctx.note("deprecated backendType `secretManager` read as `secretsManager`");
            Backend::SecretsManager
        }
        Some("systemManager") => Backend::SystemManager,
        Some("vault") => Backend::Vault,
        Some("azureKeyVault") => Backend::AzureKeyVault,
        Some("gcpSecretsManager") => Backend::Gcp,
        Some("ibmcloudSecretsManager") => Backend::Ibm,
        Some("akeyless") => Backend::Akeyless,
        Some("alicloudSecretsManager") => {
            ctx.error("backendType alicloudSecretsManager: ESO v1 has no Alibaba Cloud provider (it was removed with v1beta1), so there is nothing to convert to");
            return None;
        }
        Some(other) => {
            ctx.error(format!("unknown backendType {other:?}"));
            return None;
        }
        None => {
            ctx.error("spec.backendType is missing");
            return None;
        }
    };
    let data = spec
        .get("data")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let data_from = spec
        .get("dataFrom")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let data_from_opts = spec
        .get("dataFromWithOptions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if data.is_empty() && data_from.is_empty() && data_from_opts.is_empty() {
        ctx.error(
            "none of spec.data, spec.dataFrom, spec.dataFromWithOptions is set (KES requires one)",
        );
        return None;
    }
    for unsupported in ["keyByName"] {
        if spec.get(unsupported).is_some() {
            ctx.warn(format!(
                "spec.{unsupported} is not converted (ESO has no equivalent)"
            ));
        }
    }
    let controller = str_of(&spec, "controllerId").map(str::to_string);
    if let Some(c) = &controller {
        ctx.note(format!(
            "spec.controllerId {c:?} became the store's spec.controller: only a controller started with --controller-class {c} processes it"
        ));
    }
    let conv = BackendConv::new(backend, &spec, controller, ctx)?;

    let mut items = Vec::new();
    for (i, entry) in data_from.iter().enumerate() {
        let Some(key) = entry.as_str().filter(|k| !k.is_empty()) else {
            ctx.warn(format!(
                "spec.dataFrom[{i}] is not a non-empty string: dropped"
            ));
            continue;
        };
        let field = format!("spec.dataFrom[{i}]");
        if let Some(item) = conv.data_from(&field, key, &Value::Null, ctx) {
            items.push(item);
        }
    }
    for (i, entry) in data_from_opts.iter().enumerate() {
        let field = format!("spec.dataFromWithOptions[{i}]");
        let Some(key) = str_of(entry, "key") else {
            ctx.warn(format!("{field}.key is missing: dropped"));
            continue;
        };
        if let Some(item) = conv.data_from(&field, key, entry, ctx) {
            items.push(item);
        }
    }
    for (i, entry) in data.iter().enumerate() {
        let field = format!("spec.data[{i}]");
        if let Some(item) = conv.data(&field, entry, ctx) {
            items.push(item);
        }
    }
    if items.is_empty() {
        ctx.error("no data entry could be converted (see the warnings)");
        return None;
    }
    if !ctx.errors.is_empty() {
        return None;
    }

    // Distinct stores, in order of first use; the first is the default store.
    let mut reqs: Vec<StoreRequest> = Vec::new();
    let mut index_of = |req: &StoreRequest| -> usize {
        if let Some(i) = reqs.iter().position(|r| r == req) {
            i
        } else {
            reqs.push(req.clone());
            reqs.len() - 1
        }
    };
    let mut es_data = Vec::new();
    let mut es_data_from = Vec::new();
    for item in items {
        match item {
            Item::Data(mut d, req) => {
                let i = index_of(&req);
                if i != 0 {
                    d.source_ref = Some(Box::new(store_source_ref(i)));
                }
                es_data.push(d);
            }
            Item::DataFrom(mut d, req) => {
                let i = index_of(&req);
                if i != 0 {
                    d.source_ref = Some(store_source_ref(i));
                }
                es_data_from.push(d);
            }
        }
    }
    if reqs.len() > 1 {
        ctx.note(format!(
            "the keys live on {} different Vault mounts: one store per mount, entries on other mounts than the first use sourceRef.storeRef",
            reqs.len()
        ));
    }

    let (template, immutable) = match spec.get("template") {
        Some(t) if t.is_object() => convert_template(t, ctx),
        Some(Value::Null) | None => (None, None),
        Some(_) => {
            ctx.warn("spec.template is not an object: dropped");
            (None, None)
        }
    };

    let mut es = ExternalSecret::new(
        name,
        ExternalSecretSpec {
            secret_store_ref: Some(SecretStoreRef {
                name: Some(placeholder(0)),
                kind: None,
            }),
            target: Some(ExternalSecretTarget {
                name: Some(name.to_string()),
                creation_policy: Some(match ctx.opts.takeover {
                    Takeover::Owner => CreationPolicy::Owner,
                    Takeover::Merge => CreationPolicy::Merge,
                }),
                template: template.map(Box::new),
                immutable,
                ..ExternalSecretTarget::default()
            }),
            refresh_interval: ctx.opts.refresh_interval.clone(),
            data: (!es_data.is_empty()).then_some(es_data),
            data_from: (!es_data_from.is_empty()).then_some(es_data_from),
            ..ExternalSecretSpec::default()
        },
    );
    es.metadata.namespace = namespace.map(str::to_string);
    // Only KES's own labels (ExternalSecret::new adds the CRD's component label, which ESO would
    // copy onto the Secret).
    es.metadata.labels = None;
    if let Some(labels) = meta.get("labels").and_then(Value::as_object) {
        let labels: BTreeMap<String, String> = labels
            .iter()
            .filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_string())))
            .collect();
        if !labels.is_empty() {
            es.metadata.labels = Some(labels);
        }
    }
    Some((es, reqs))
}

fn store_source_ref(i: usize) -> SourceRef {
    SourceRef {
        store_ref: Some(SecretStoreRef {
            name: Some(placeholder(i)),
            kind: None,
        }),
        generator_ref: None,
    }
}

/// Backend-specific conversion.
struct BackendConv {
    backend: Backend,
    /// The store for all keys (every backend but vault, whose store depends on the mount).
    base: Option<StoreRequest>,
    /// Vault settings.
    vault: Option<VaultConf>,
}

struct VaultConf {
    server: String,
    auth_mount: String,
    role: String,
    kv_version: u8,
    controller: Option<String>,
    sa: ServiceAccountSelector,
}

impl BackendConv {
    fn new(
        backend: Backend,
        spec: &Value,
        controller: Option<String>,
        ctx: &mut Ctx<'_>,
    ) -> Option<BackendConv> {
        let opts = ctx.opts;
        let sa = ServiceAccountSelector {
            name: opts.service_account.clone(),
            namespace: match opts.store_kind {
                StoreKind::ClusterSecretStore => Some(opts.service_account_namespace.clone()),
                StoreKind::SecretStore => None,
            },
            audiences: None,
        };
        let only_for = |ctx: &mut Ctx<'_>, field: &str, wanted: &[Backend]| {
            if !wanted.contains(&backend) && spec.get(field).is_some() {
                ctx.warn(format!(
                    "spec.{field} is ignored for backendType {} (KES ignores it too)",
                    backend.kes_name()
                ));
            }
        };
        only_for(
            ctx,
            "roleArn",
            &[Backend::SecretsManager, Backend::SystemManager],
        );
        only_for(
            ctx,
            "region",
            &[Backend::SecretsManager, Backend::SystemManager],
        );
        only_for(ctx, "vaultRole", &[Backend::Vault]);
        only_for(ctx, "vaultMountPoint", &[Backend::Vault]);
        only_for(ctx, "kvVersion", &[Backend::Vault]);
        only_for(ctx, "keyVaultName", &[Backend::AzureKeyVault]);
        only_for(ctx, "projectId", &[Backend::Gcp]);
        let mut provider = SecretStoreProvider::default();
        let mut vault = None;
        match backend {
            Backend::SecretsManager | Backend::SystemManager => {
                let region = match (str_of(spec, "region"), opts.aws_region.as_deref()) {
                    (Some(r), _) => r.to_string(),
                    (None, Some(r)) => {
                        ctx.note(format!(
                            "spec.region is empty: region {r:?} from --aws-region"
                        ));
                        r.to_string()
                    }
                    (None, None) => {
                        ctx.error("no AWS region: spec.region is empty and --aws-region was not given (KES used its pod's AWS_REGION)");
                        return None;
                    }
                };
                if backend == Backend::SystemManager {
                    ctx.note(
                        "backendType systemManager became an aws store with service ParameterStore",
                    );
                }
                provider.aws = Some(AwsProvider {
                    service: if backend == Backend::SecretsManager {
                        AwsServiceType::SecretsManager
                    } else {
                        AwsServiceType::ParameterStore
                    },
                    auth: Some(AwsAuth {
                        secret_ref: None,
                        jwt: Some(AwsJwtAuth {
                            service_account_ref: Some(sa),
                        }),
                    }),
                    role: str_of(spec, "roleArn").map(str::to_string),
                    additional_roles: None,
                    region,
                    external_id: None,
                    session_tags: None,
                    secrets_manager: None,
                    transitive_tag_keys: None,
                    prefix: None,
                    session_tags_policy: None,
                    custom_session_tags: None,
                });
            }
            Backend::Vault => {
                let Some(server) = opts.vault_addr.clone() else {
                    ctx.error(
                        "backendType vault needs --vault-addr (KES used its pod's VAULT_ADDR)",
                    );
                    return None;
                };
                let role = match (
                    str_of(spec, "vaultRole"),
                    opts.vault_default_role.as_deref(),
                ) {
                    (Some(r), _) => r.to_string(),
                    (None, Some(r)) => {
                        ctx.note(format!(
                            "spec.vaultRole is empty: role {r:?} from --vault-default-role"
                        ));
                        r.to_string()
                    }
                    (None, None) => {
                        ctx.error("spec.vaultRole is empty and --vault-default-role was not given (KES used DEFAULT_VAULT_ROLE)");
                        return None;
                    }
                };
                let auth_mount = str_of(spec, "vaultMountPoint")
                    .or(opts.vault_default_mount_point.as_deref())
                    .unwrap_or("kubernetes")
                    .to_string();
                let kv_version = match scalar_of(spec, "kvVersion").as_deref() {
                    None | Some("2") => 2,
                    Some("1") => 1,
                    Some(other) => {
                        ctx.error(format!("spec.kvVersion {other:?} is neither 1 nor 2"));
                        return None;
                    }
                };
                vault = Some(VaultConf {
                    server,
                    auth_mount,
                    role,
                    kv_version,
                    controller: controller.clone(),
                    sa,
                });
            }
            Backend::AzureKeyVault => {
                let Some(kv) = str_of(spec, "keyVaultName") else {
                    ctx.error("backendType azureKeyVault needs spec.keyVaultName");
                    return None;
                };
                ctx.note("Azure authentication: workload identity with the ServiceAccount (KES used AZURE_CLIENT_ID/AZURE_CLIENT_SECRET/AZURE_TENANT_ID env vars): annotate it with azure.workload.identity/client-id (and tenant-id) and federate it");
                provider.azurekv = Some(AzureKvProvider {
                    auth_type: Some(AzureAuthType::WorkloadIdentity),
                    vault_url: format!("https://{kv}.vault.azure.net"),
                    tenant_id: None,
                    environment_type: None,
                    auth_secret_ref: None,
                    service_account_ref: Some(sa),
                    identity_id: None,
                    use_azure_sdk: None,
                    custom_cloud_config: None,
                });
            }
            Backend::Gcp => {
                let Some(project) = str_of(spec, "projectId") else {
                    ctx.error("backendType gcpSecretsManager needs spec.projectId");
                    return None;
                };
                ctx.note("GCP authentication: GKE workload identity with the ServiceAccount (KES used GOOGLE_APPLICATION_CREDENTIALS): annotate it with iam.gke.io/gcp-service-account, or set auth.workloadIdentity.clusterLocation and clusterName when esr does not run on GKE");
                provider.gcpsm = Some(GcpSmProvider {
                    auth: Some(GcpSmAuth {
                        workload_identity: Some(GcpWorkloadIdentity {
                            service_account_ref: sa,
                            ..Default::default()
                        }),
                        ..Default::default()
                    }),
                    project_id: Some(project.to_string()),
                    ..Default::default()
                });
            }
            Backend::Ibm => {
                ctx.warn("backendType ibmcloudSecretsManager became an ibm store: esr does not run the IBM provider yet (ESO does); set spec.provider.ibm.serviceUrl (KES used IBM_CLOUD_SECRETS_MANAGER_API_ENDPOINT) and create the Secret ibm-secrets with key apiKey (KES used IBM_CLOUD_SECRETS_MANAGER_API_APIKEY)");
                provider.ibm = Some(opaque(json!({
                    "serviceUrl": "https://REPLACE-ME.secrets-manager.appdomain.cloud",
                    "auth": {"secretRef": {"secretApiKeySecretRef": {"name": "ibm-secrets", "key": "apiKey"}}},
                })));
            }
            Backend::Akeyless => {
                ctx.warn("backendType akeyless became an akeyless store: esr does not run the Akeyless provider yet (ESO does); set spec.provider.akeyless.authSecretRef.kubernetesAuth.accessID and k8sConfName (KES used AKEYLESS_ACCESS_ID and AKEYLESS_ACCESS_TYPE_PARAM)");
                provider.akeyless = Some(opaque(json!({
                    "akeylessGWApiURL": "https://api.akeyless.io",
                    "authSecretRef": {"kubernetesAuth": {
                        "accessID": "REPLACE-ME",
                        "k8sConfName": "REPLACE-ME",
                        "serviceAccountRef": sa,
                    }},
                })));
            }
        }
        let base = (backend != Backend::Vault).then(|| StoreRequest {
            label: backend.label(),
            provider,
            controller,
        });
        Some(BackendConv {
            backend,
            base,
            vault,
        })
    }

    fn vault_store(&self, conf: &VaultConf, mount: &str) -> StoreRequest {
        StoreRequest {
            label: Backend::Vault.label(),
            provider: SecretStoreProvider {
                vault: Some(VaultProvider {
                    auth: Some(VaultAuth {
                        kubernetes: Some(VaultKubernetesAuth {
                            mount_path: conf.auth_mount.clone(),
                            service_account_ref: Some(conf.sa.clone()),
                            secret_ref: None,
                            role: conf.role.clone(),
                        }),
                        ..VaultAuth::default()
                    }),
                    server: conf.server.clone(),
                    path: Some(mount.to_string()),
                    version: Some(if conf.kv_version == 1 {
                        VaultKvVersion::V1
                    } else {
                        VaultKvVersion::V2
                    }),
                    ..VaultProvider::default()
                }),
                ..SecretStoreProvider::default()
            },
            controller: conf.controller.clone(),
        }
    }

    /// Resolves a backend key into (remote key, store).
    fn resolve_key(
        &self,
        field: &str,
        key: &str,
        ctx: &mut Ctx<'_>,
    ) -> Option<(String, StoreRequest)> {
        if let Some(conf) = &self.vault {
            let trimmed = key.trim_start_matches('/');
            let split = if conf.kv_version == 2 {
                trimmed
                    .find("/data/")
                    .map(|i| (&trimmed[..i], &trimmed[i + "/data/".len()..]))
            } else {
                trimmed.split_once('/')
            };
            match split {
                Some((mount, path)) if !mount.is_empty() && !path.is_empty() => {
                    Some((path.to_string(), self.vault_store(conf, mount)))
                }
                _ => {
                    let shape = if conf.kv_version == 2 {
                        "<mount>/data/<path> (kvVersion 2)"
                    } else {
                        "<mount>/<path> (kvVersion 1)"
                    };
                    ctx.warn(format!(
                        "{field}.key {key:?} does not have the form {shape}: dropped"
                    ));
                    None
                }
            }
        } else {
            self.base.clone().map(|b| (key.to_string(), b))
        }
    }

    /// `isBinary: true` → the decoding ESO needs for the same bytes.
    fn binary_decoding(&self, field: &str, ctx: &mut Ctx<'_>) -> DecodingStrategy {
        if self.backend == Backend::SecretsManager {
            ctx.note(format!(
                "{field}.isBinary: decodingStrategy Auto (a base64 SecretString is decoded, a SecretBinary is already raw bytes in both KES and ESO)"
            ));
            DecodingStrategy::Auto
        } else {
            DecodingStrategy::Base64
        }
    }

    /// The version selector of an entry (`versionStage`, `versionId`, `version`).
    fn version(&self, field: &str, entry: &Value, ctx: &mut Ctx<'_>) -> Option<String> {
        let stage = str_of(entry, "versionStage");
        let id = str_of(entry, "versionId");
        let version = scalar_of(entry, "version");
        match self.backend {
            Backend::SecretsManager => {
                if version.is_some() {
                    ctx.warn(format!(
                        "{field}.version is ignored for secretsManager (KES ignores it; use versionStage or versionId)"
                    ));
                }
                match (stage, id) {
                    (_, Some(id)) => {
                        if stage.is_some() {
                            ctx.warn(format!(
                                "{field}: both versionStage and versionId are set; versionId wins, as in KES"
                            ));
                        }
                        Some(format!("uuid/{id}"))
                    }
                    (Some(stage), None) => Some(stage.to_string()),
                    (None, None) => None,
                }
            }
            Backend::Gcp => {
                for f in ["versionStage", "versionId"] {
                    if entry.get(f).is_some() {
                        ctx.warn(format!(
                            "{field}.{f} is ignored for gcpSecretsManager (KES ignores it)"
                        ));
                    }
                }
                version.filter(|v| v != "latest")
            }
            _ => {
                for f in ["versionStage", "versionId", "version"] {
                    if entry.get(f).is_some() {
                        ctx.warn(format!(
                            "{field}.{f} is ignored: KES does not use it for backendType {}",
                            self.backend.kes_name()
                        ));
                    }
                }
                None
            }
        }
    }

    fn data_from(&self, field: &str, key: &str, entry: &Value, ctx: &mut Ctx<'_>) -> Option<Item> {
        let (remote_key, store) = self.resolve_key(field, key, ctx)?;
        let decoding = bool_of(entry, "isBinary").then(|| self.binary_decoding(field, ctx));
        if self.backend == Backend::Gcp {
            ctx.warn(format!(
                "{field}: KES wrapped a GCP payload as {{\"value\": <payload>}} before reading keys from it, so the KES Secret had the single key `value`; ESO's extract reads the keys of the payload itself"
            ));
        }
        let remote_ref = ExternalSecretDataRemoteRef {
            key: remote_key,
            version: self.version(field, entry, ctx),
            decoding_strategy: decoding,
            ..ExternalSecretDataRemoteRef::default()
        };
        Some(Item::DataFrom(
            ExternalSecretDataFromRemoteRef {
                extract: Some(remote_ref),
                ..ExternalSecretDataFromRemoteRef::default()
            },
            store,
        ))
    }

    fn data(&self, field: &str, entry: &Value, ctx: &mut Ctx<'_>) -> Option<Item> {
        if let Some(path) = str_of(entry, "path") {
            return self.data_path(field, path, entry, ctx);
        }
        if entry.get("recursive").is_some() {
            ctx.warn(format!("{field}.recursive is ignored without path"));
        }
        let Some(key) = str_of(entry, "key") else {
            ctx.warn(format!("{field} has neither key nor path: dropped"));
            return None;
        };
        let Some(name) = str_of(entry, "name") else {
            ctx.warn(format!("{field} (key {key:?}) has no name: dropped"));
            return None;
        };
        if !is_secret_key(name) {
            ctx.warn(format!(
                "{field}.name {name:?} is not a valid Secret key (^[-._a-zA-Z0-9]+$): dropped"
            ));
            return None;
        }
        let mut key = key.to_string();
        if let Some(t) = str_of(entry, "secretType") {
            if self.backend == Backend::Ibm {
                key = format!("{t}/{key}");
            } else {
                ctx.warn(format!(
                    "{field}.secretType is ignored (only ibmcloudSecretsManager uses it)"
                ));
            }
        }
        let (remote_key, store) = self.resolve_key(field, &key, ctx)?;
        let mut property = entry
            .get("property")
            .and_then(Value::as_str)
            .map(str::to_string);
        match self.backend {
            Backend::Vault if property.is_none() => {
                ctx.note(format!(
                    "{field}: no property, so property {name:?} (the Secret key), as KES does for vault"
                ));
                property = Some(name.to_string());
            }
            Backend::Gcp if !bool_of(entry, "isBinary") => match property.as_deref() {
                Some("value") => property = None,
                None => ctx.warn(format!(
                    "{field}: KES stored the GCP payload wrapped as {{\"value\": <payload>}} when no property is set; ESO stores the payload itself"
                )),
                Some(p) => ctx.warn(format!(
                    "{field}.property {p:?}: KES looked it up in its {{\"value\": <payload>}} wrapper, where only `value` exists; ESO looks it up in the payload"
                )),
            },
            _ => {}
        }
        let decoding = bool_of(entry, "isBinary").then(|| self.binary_decoding(field, ctx));
        let remote_ref = ExternalSecretDataRemoteRef {
            key: remote_key,
            property: property.filter(|p| !p.is_empty()),
            version: self.version(field, entry, ctx),
            decoding_strategy: decoding,
            ..ExternalSecretDataRemoteRef::default()
        };
        Some(Item::Data(
            ExternalSecretData {
                secret_key: name.to_string(),
                remote_ref,
                source_ref: None,
            },
            store,
        ))
    }

    fn data_path(&self, field: &str, path: &str, entry: &Value, ctx: &mut Ctx<'_>) -> Option<Item> {
        if self.backend != Backend::SystemManager {
            ctx.warn(format!(
                "{field}.path {path:?}: KES reads by path only for systemManager, and ESO's find by path has no equivalent here for backendType {}: dropped",
                self.backend.kes_name()
            ));
            return None;
        }
        let store = self.base.clone()?;
        let recursive = bool_of(entry, "recursive");
        let prefix = format!("{}/", path.trim_end_matches('/'));
        ctx.warn(format!(
            "{field}.path {path:?} (recursive: {recursive}) became dataFrom find {{path, name.regexp \".*\"}} with a rewrite stripping {prefix:?} from the key names; ESO's Parameter Store find always recurses and keys of nested parameters keep their '/' (check them)"
        ));
        Some(Item::DataFrom(
            ExternalSecretDataFromRemoteRef {
                // ESO's Parameter Store find needs a name (or tags): path alone is an error.
                find: Some(ExternalSecretFind {
                    path: Some(path.to_string()),
                    name: Some(FindName {
                        regexp: Some(".*".to_string()),
                    }),
                    ..ExternalSecretFind::default()
                }),
                rewrite: Some(vec![ExternalSecretRewrite {
                    regexp: Some(ExternalSecretRewriteRegexp {
                        source: format!("^{}", regex_escape(&prefix)),
                        target: String::new(),
                    }),
                    ..ExternalSecretRewrite::default()
                }]),
                ..ExternalSecretDataFromRemoteRef::default()
            },
            store,
        ))
    }
}

fn opaque(v: Value) -> OpaqueObject {
    match v {
        Value::Object(m) => OpaqueObject(m),
        _ => OpaqueObject::default(),
    }
}

/// Converts KES's `spec.template`. Returns ESO's template and `target.immutable`.
fn convert_template(
    t: &Value,
    ctx: &mut Ctx<'_>,
) -> (Option<ExternalSecretTemplate>, Option<bool>) {
    let mut tpl = ExternalSecretTemplate::default();
    let mut immutable = None;
    let mut data: BTreeMap<String, String> = BTreeMap::new();
    let Some(obj) = t.as_object() else {
        return (None, None);
    };
    for (k, v) in obj {
        match k.as_str() {
            "type" => match v.as_str() {
                Some(s) if lodash::has_template_syntax(s) => ctx.warn(format!(
                    "spec.template.type {s:?} is a template expression: dropped (ESO's template.type is not templated)"
                )),
                Some(s) => tpl.type_ = Some(s.to_string()),
                None => ctx.warn("spec.template.type is not a string: dropped"),
            },
            "metadata" => {
                let Some(m) = v.as_object() else {
                    ctx.warn("spec.template.metadata is not an object: dropped");
                    continue;
                };
                let mut md = ExternalSecretTemplateMetadata::default();
                for (mk, mv) in m {
                    match mk.as_str() {
                        "labels" | "annotations" => {
                            let map = translate_map(&format!("spec.template.metadata.{mk}"), mv, Context::Plain, ctx);
                            if !map.is_empty() {
                                if mk == "labels" {
                                    md.labels = Some(map);
                                } else {
                                    md.annotations = Some(map);
                                }
                            }
                        }
                        "finalizers" => {
                            let list: Vec<String> = mv
                                .as_array()
                                .into_iter()
                                .flatten()
                                .filter_map(|f| f.as_str().map(str::to_string))
                                .collect();
                            if !list.is_empty() {
                                md.finalizers = Some(list);
                            }
                        }
                        other => ctx.warn(format!(
                            "spec.template.metadata.{other} is not converted (KES could not override it either, or ESO's template has no such field): dropped"
                        )),
                    }
                }
                if md != ExternalSecretTemplateMetadata::default() {
                    tpl.metadata = Some(md);
                }
            }
            "data" => {
                data.extend(translate_map("spec.template.data", v, Context::Base64Data, ctx));
            }
            "stringData" => {}
            "immutable" => match v.as_bool() {
                Some(b) => immutable = Some(b),
                None => ctx.warn("spec.template.immutable is not a boolean: dropped"),
            },
            other => ctx.warn(format!(
                "spec.template.{other} is not converted (ESO's target template has no equivalent): dropped"
            )),
        }
    }
    // stringData wins over data for the same key, as in the apiserver.
    if let Some(v) = obj.get("stringData") {
        let sd = translate_map("spec.template.stringData", v, Context::Plain, ctx);
        for k in sd.keys() {
            if data.contains_key(k) {
                ctx.note(format!(
                    "spec.template.stringData.{k} overrides spec.template.data.{k}, as the apiserver does"
                ));
            }
        }
        data.extend(sd);
    }
    if !data.is_empty() {
        tpl.data = Some(data);
        // KES deep-merged the template into the Secret, keeping the fetched keys.
        tpl.merge_policy = Some(TemplateMergePolicy::Merge);
    }
    if tpl == ExternalSecretTemplate::default() {
        return (None, immutable);
    }
    tpl.engine_version = Some(TemplateEngineVersion::V2);
    (Some(tpl), immutable)
}

fn translate_map(
    field: &str,
    v: &Value,
    c: Context,
    ctx: &mut Ctx<'_>,
) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let Some(m) = v.as_object() else {
        ctx.warn(format!("{field} is not an object: dropped"));
        return out;
    };
    for (k, val) in m {
        if lodash::has_template_syntax(k) {
            ctx.warn(format!(
                "{field}: the key {k:?} is a template expression: dropped"
            ));
            continue;
        }
        let is_data = field.ends_with(".data") || field.ends_with(".stringData");
        if is_data && !is_secret_key(k) {
            ctx.warn(format!(
                "{field}: the key {k:?} is not a valid Secret key (^[-._a-zA-Z0-9]+$): dropped"
            ));
            continue;
        }
        let Some(s) = val.as_str() else {
            ctx.warn(format!("{field}.{k} is not a string: dropped"));
            continue;
        };
        match lodash::translate(s, c) {
            Ok(go) => {
                out.insert(k.clone(), go);
            }
            Err(reason) => ctx.warn(format!("{field}.{k} dropped: {reason}")),
        }
    }
    out
}
