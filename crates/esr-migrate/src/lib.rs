//! Conversion of kubernetes-external-secrets (KES, `kubernetes-client.io/v1` ExternalSecret)
//! manifests into `external-secrets.io/v1` ExternalSecrets plus the (Cluster)SecretStores they need.
//!
//! Public API:
//! - [`parse_yaml_stream`] splits a multi-document YAML text into JSON values;
//! - [`convert`] converts a list of [`Document`]s with [`Options`] into a [`Conversion`]: the output
//!   documents in input order (converted ExternalSecrets and untouched pass-through documents), the
//!   deduplicated stores, and one [`ObjectReport`] per KES object;
//! - [`Conversion::reject`] turns a converted object into "not converted" (used by the CLI when
//!   an output fails `esr validate`), [`Conversion::report_text`] renders the report;
//! - [`to_yaml_stream`] writes values as a multi-document YAML text.
//!
//! The mapping is documented in `docs/migration/from-kes.md`.

pub mod lodash;
mod spec;
mod yaml;

use serde_json::Value;

pub use spec::is_kes_external_secret;

/// ServiceAccount name the generated stores authenticate as, unless told otherwise. Deliberately
/// not `external-secrets` (the name both KES's and ESO's charts use).
pub const DEFAULT_SERVICE_ACCOUNT: &str = "esr-kes";
/// Namespace of that ServiceAccount for ClusterSecretStores, unless told otherwise.
pub const DEFAULT_SERVICE_ACCOUNT_NAMESPACE: &str = "esr-system";

/// Errors of this crate (input errors only; per-object problems go into the report).
#[derive(Debug, thiserror::Error)]
pub enum MigrateError {
    /// A YAML document could not be parsed.
    #[error("invalid YAML in document {index}: {message}")]
    Yaml {
        /// 0-based document index.
        index: usize,
        /// The parser's message.
        message: String,
    },
    /// A value could not be written as YAML.
    #[error("cannot write YAML: {0}")]
    Write(String),
    /// An option value is invalid.
    #[error("invalid option {option}: {message}")]
    Option {
        /// The option.
        option: &'static str,
        /// Why.
        message: String,
    },
}

/// The kind of store to generate.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum StoreKind {
    /// One cluster-wide store per backend configuration (the default).
    #[default]
    ClusterSecretStore,
    /// One store per namespace and backend configuration.
    SecretStore,
}

impl StoreKind {
    /// The Kubernetes kind.
    pub fn as_str(self) -> &'static str {
        match self {
            StoreKind::ClusterSecretStore => "ClusterSecretStore",
            StoreKind::SecretStore => "SecretStore",
        }
    }
}

/// How the new ExternalSecrets take over the Secrets KES wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Takeover {
    /// `creationPolicy: Owner`: adopt (Secrets without a controller ownerReference) or create.
    #[default]
    Owner,
    /// `creationPolicy: Merge`: only merge keys into the existing Secret, never create it.
    Merge,
}

/// Conversion settings.
#[derive(Debug, Clone)]
pub struct Options {
    /// Kind of the generated stores.
    pub store_kind: StoreKind,
    /// ServiceAccount the stores authenticate as (IRSA, Vault Kubernetes auth, Azure workload
    /// identity, GCP workload identity).
    pub service_account: String,
    /// Namespace of that ServiceAccount (ClusterSecretStores only; a SecretStore uses its own
    /// namespace).
    pub service_account_namespace: String,
    /// creationPolicy of the ExternalSecrets.
    pub takeover: Takeover,
    /// Vault address (KES's `VAULT_ADDR`); required for vault objects.
    pub vault_addr: Option<String>,
    /// Vault role for objects without `vaultRole` (KES's `DEFAULT_VAULT_ROLE`).
    pub vault_default_role: Option<String>,
    /// Vault Kubernetes auth mount for objects without `vaultMountPoint` (KES's
    /// `DEFAULT_VAULT_MOUNT_POINT`; `kubernetes` when unset, as in KES).
    pub vault_default_mount_point: Option<String>,
    /// AWS region for objects without `region` (KES's `AWS_REGION`); required for AWS objects.
    pub aws_region: Option<String>,
    /// `spec.refreshInterval` of the ExternalSecrets (ESO's default 1h when unset).
    pub refresh_interval: Option<String>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            store_kind: StoreKind::default(),
            service_account: DEFAULT_SERVICE_ACCOUNT.to_string(),
            service_account_namespace: DEFAULT_SERVICE_ACCOUNT_NAMESPACE.to_string(),
            takeover: Takeover::default(),
            vault_addr: None,
            vault_default_role: None,
            vault_default_mount_point: None,
            aws_region: None,
            refresh_interval: None,
        }
    }
}

impl Options {
    /// Checks the option values (an invalid value is an input error).
    pub fn check(&self) -> Result<(), MigrateError> {
        if !is_dns_subdomain(&self.service_account) {
            return Err(MigrateError::Option {
                option: "--service-account",
                message: format!("{:?} is not a valid object name", self.service_account),
            });
        }
        if !is_dns_label(&self.service_account_namespace) {
            return Err(MigrateError::Option {
                option: "--service-account-namespace",
                message: format!(
                    "{:?} is not a valid namespace name",
                    self.service_account_namespace
                ),
            });
        }
        if let Some(d) = &self.refresh_interval {
            let parsed = esr_api::duration::parse(d).map_err(|e| MigrateError::Option {
                option: "--refresh-interval",
                message: e.to_string(),
            })?;
            if parsed.is_negative() {
                return Err(MigrateError::Option {
                    option: "--refresh-interval",
                    message: format!("{d:?} is negative"),
                });
            }
        }
        Ok(())
    }
}

fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

fn is_dns_subdomain(s: &str) -> bool {
    !s.is_empty() && s.len() <= 253 && s.split('.').all(is_dns_label)
}

/// One input document.
#[derive(Debug, Clone)]
pub struct Document {
    /// Where it came from (a file name).
    pub source: String,
    /// 0-based position in that file (empty documents not counted).
    pub index: usize,
    /// The document.
    pub value: Value,
}

/// The verdict for one KES object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Converted exactly.
    Converted,
    /// Converted; some settings were dropped or need attention (see the warnings).
    ConvertedWithWarnings,
    /// Not converted; nothing is written for it.
    NotConverted,
}

impl Status {
    /// The word used in the report.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Converted => "converted",
            Status::ConvertedWithWarnings => "converted with warnings",
            Status::NotConverted => "not converted",
        }
    }
}

/// The report for one KES object.
#[derive(Debug, Clone)]
pub struct ObjectReport {
    /// Input file.
    pub source: String,
    /// Document index in the file.
    pub index: usize,
    /// `metadata.namespace` (if set).
    pub namespace: Option<String>,
    /// `metadata.name` (empty if missing).
    pub name: String,
    /// The verdict.
    pub status: Status,
    /// Why it was not converted (empty otherwise).
    pub errors: Vec<String>,
    /// Settings dropped or changed, or needing action.
    pub warnings: Vec<String>,
    /// Informational notes (accepted deprecated forms, defaults applied).
    pub notes: Vec<String>,
}

impl ObjectReport {
    fn label(&self) -> String {
        let name = if self.name.is_empty() {
            "<no name>"
        } else {
            &self.name
        };
        match &self.namespace {
            Some(ns) => format!("{ns}/{name}"),
            None => name.to_string(),
        }
    }
}

/// What an output document is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OutputKind {
    /// The ExternalSecret converted from the KES object of report `report`.
    Converted {
        /// Index into [`Conversion::reports`].
        report: usize,
    },
    /// A document that is not a KES ExternalSecret, unchanged.
    PassThrough,
}

/// One output document, in input order.
#[derive(Debug, Clone)]
pub struct OutputDocument {
    /// Input file it came from.
    pub source: String,
    /// Its index in that file.
    pub index: usize,
    /// What it is.
    pub kind: OutputKind,
    /// The manifest.
    pub manifest: Value,
}

/// One generated store.
#[derive(Debug, Clone)]
pub struct OutputStore {
    /// The manifest (SecretStore or ClusterSecretStore).
    pub manifest: Value,
    /// The reports (indices) of the ExternalSecrets that use it.
    pub used_by: Vec<usize>,
}

impl OutputStore {
    /// `metadata.name`.
    pub fn name(&self) -> &str {
        self.manifest
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("")
    }

    /// `metadata.namespace` (SecretStores).
    pub fn namespace(&self) -> Option<&str> {
        self.manifest
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
    }
}

/// The result of [`convert`].
#[derive(Debug, Clone, Default)]
pub struct Conversion {
    /// Output documents in input order (not-converted KES objects have none).
    pub documents: Vec<OutputDocument>,
    /// Generated stores, sorted by namespace and name.
    pub stores: Vec<OutputStore>,
    /// One report per KES object, in input order.
    pub reports: Vec<ObjectReport>,
}

impl Conversion {
    /// Marks the object of report `report` as not converted with `reasons`: its output document
    /// is removed, and stores no other object uses are removed too.
    pub fn reject(&mut self, report: usize, reasons: Vec<String>) {
        let Some(r) = self.reports.get_mut(report) else {
            return;
        };
        r.status = Status::NotConverted;
        r.errors.extend(reasons);
        self.documents
            .retain(|d| d.kind != OutputKind::Converted { report });
        for s in &mut self.stores {
            s.used_by.retain(|u| *u != report);
        }
        self.stores.retain(|s| !s.used_by.is_empty());
    }

    /// The stores an output document (an ExternalSecret) references.
    pub fn stores_of(&self, report: usize) -> Vec<usize> {
        self.stores
            .iter()
            .enumerate()
            .filter(|(_, s)| s.used_by.contains(&report))
            .map(|(i, _)| i)
            .collect()
    }

    /// The report as text: one line per object, then its errors, warnings and notes indented, then
    /// a summary line.
    pub fn report_text(&self) -> String {
        let mut out = String::new();
        let mut counts = [0usize; 3];
        for r in &self.reports {
            counts[match r.status {
                Status::Converted => 0,
                Status::ConvertedWithWarnings => 1,
                Status::NotConverted => 2,
            }] += 1;
            out.push_str(&format!(
                "{}: ExternalSecret {} ({}:{})\n",
                r.status.as_str(),
                r.label(),
                r.source,
                r.index
            ));
            for e in &r.errors {
                out.push_str(&format!("  error: {e}\n"));
            }
            for w in &r.warnings {
                out.push_str(&format!("  warning: {w}\n"));
            }
            for n in &r.notes {
                out.push_str(&format!("  note: {n}\n"));
            }
        }
        out.push_str(&format!(
            "summary: {} KES objects: {} converted, {} converted with warnings, {} not converted; {} stores\n",
            self.reports.len(),
            counts[0],
            counts[1],
            counts[2],
            self.stores.len()
        ));
        out
    }

    /// Every output manifest: the stores first (so that `kubectl apply -f` creates them before
    /// the ExternalSecrets), then the documents in input order.
    pub fn all_manifests(&self) -> Vec<&Value> {
        self.stores
            .iter()
            .map(|s| &s.manifest)
            .chain(self.documents.iter().map(|d| &d.manifest))
            .collect()
    }
}

/// Converts documents. KES ExternalSecrets are converted; every other document passes through.
pub fn convert(docs: &[Document], opts: &Options) -> Conversion {
    let mut conv = Conversion::default();
    let mut stores = spec::StoreSet::default();
    for doc in docs {
        if !is_kes_external_secret(&doc.value) {
            conv.documents.push(OutputDocument {
                source: doc.source.clone(),
                index: doc.index,
                kind: OutputKind::PassThrough,
                manifest: doc.value.clone(),
            });
            continue;
        }
        let report_index = conv.reports.len();
        let (report, manifest) = spec::convert_object(doc, opts, &mut stores, report_index);
        conv.reports.push(report);
        if let Some(manifest) = manifest {
            conv.documents.push(OutputDocument {
                source: doc.source.clone(),
                index: doc.index,
                kind: OutputKind::Converted {
                    report: report_index,
                },
                manifest,
            });
        }
    }
    conv.stores = stores.into_outputs();
    conv
}

/// Splits a YAML (or JSON) text into documents; empty documents are skipped.
pub fn parse_yaml_stream(text: &str) -> Result<Vec<Value>, MigrateError> {
    use serde::Deserialize as _;
    let mut out = Vec::new();
    for (index, de) in yaml_serde::Deserializer::from_str(text).enumerate() {
        match Value::deserialize(de) {
            Ok(Value::Null) => {}
            Ok(v) => out.push(v),
            Err(e) => {
                return Err(MigrateError::Yaml {
                    index,
                    message: e.to_string(),
                });
            }
        }
    }
    Ok(out)
}

/// Writes values as a multi-document YAML text (`---` before each document). Strings that YAML
/// 1.1 (kubectl) would read as something else (`yes`, `on`, `1e3`, ...) are quoted.
pub fn to_yaml_stream<'a>(
    values: impl IntoIterator<Item = &'a Value>,
) -> Result<String, MigrateError> {
    let mut out = String::new();
    for v in values {
        out.push_str("---\n");
        out.push_str(&yaml::to_string(v));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn doc(name: &str, region: &str) -> Document {
        Document {
            source: "t.yaml".into(),
            index: 0,
            value: json!({
                "apiVersion": "kubernetes-client.io/v1", "kind": "ExternalSecret",
                "metadata": {"name": name, "namespace": "ns"},
                "spec": {"backendType": "secretsManager", "region": region,
                         "data": [{"key": "k", "name": "v"}]}
            }),
        }
    }

    #[test]
    fn reject_keeps_stores_still_used_by_others() {
        let docs = [
            doc("a", "eu-west-1"),
            doc("b", "eu-west-1"),
            doc("c", "us-east-1"),
        ];
        let mut conv = convert(&docs, &Options::default());
        assert_eq!(conv.stores.len(), 2);
        assert_eq!(conv.stores_of(0), conv.stores_of(1));
        conv.reject(0, vec!["x".into()]);
        assert_eq!(conv.reports[0].status, Status::NotConverted);
        assert_eq!(conv.stores.len(), 2, "b still uses the eu-west-1 store");
        conv.reject(2, vec!["y".into()]);
        assert_eq!(conv.stores.len(), 1);
        assert_eq!(conv.documents.len(), 1);
        assert_eq!(conv.documents[0].manifest["metadata"]["name"], "b");
        let text = conv.report_text();
        assert!(
            text.contains("not converted: ExternalSecret ns/a (t.yaml:0)\n  error: x\n"),
            "{text}"
        );
        assert!(text.ends_with("summary: 3 KES objects: 1 converted, 0 converted with warnings, 2 not converted; 1 stores\n"), "{text}");
    }

    #[test]
    fn option_checks() {
        assert!(Options::default().check().is_ok());
        let bad = |o: Options| o.check().unwrap_err().to_string();
        assert!(
            bad(Options {
                service_account: "Bad_Name".into(),
                ..Options::default()
            })
            .contains("--service-account")
        );
        assert!(
            bad(Options {
                service_account_namespace: "a.b".into(),
                ..Options::default()
            })
            .contains("--service-account-namespace")
        );
        assert!(
            bad(Options {
                refresh_interval: Some("soon".into()),
                ..Options::default()
            })
            .contains("--refresh-interval")
        );
        assert!(
            bad(Options {
                refresh_interval: Some("-1m".into()),
                ..Options::default()
            })
            .contains("negative")
        );
        assert!(
            Options {
                refresh_interval: Some("10s".into()),
                ..Options::default()
            }
            .check()
            .is_ok()
        );
    }

    #[test]
    fn missing_region_and_vault_settings_are_not_converted() {
        let mut d = doc("a", "");
        d.value["spec"].as_object_mut().unwrap().remove("region");
        let conv = convert(std::slice::from_ref(&d), &Options::default());
        assert_eq!(conv.reports[0].status, Status::NotConverted);
        assert!(conv.reports[0].errors[0].contains("--aws-region"));
        assert!(conv.stores.is_empty() && conv.documents.is_empty());

        let v = Document {
            source: "v.yaml".into(),
            index: 0,
            value: json!({"apiVersion": "kubernetes-client.io/v1", "kind": "ExternalSecret",
                "metadata": {"name": "v"},
                "spec": {"backendType": "vault", "data": [{"key": "secret/data/a", "name": "a"}]}}),
        };
        let conv = convert(std::slice::from_ref(&v), &Options::default());
        assert!(conv.reports[0].errors[0].contains("--vault-addr"));
        let opts = Options {
            vault_addr: Some("https://v".into()),
            ..Options::default()
        };
        let conv = convert(std::slice::from_ref(&v), &opts);
        assert!(conv.reports[0].errors[0].contains("--vault-default-role"));
        let opts = Options {
            vault_default_role: Some("r".into()),
            vault_default_mount_point: Some("k8s-auth".into()),
            ..opts
        };
        let conv = convert(std::slice::from_ref(&v), &opts);
        assert_eq!(conv.reports[0].status, Status::Converted);
        let auth = &conv.stores[0].manifest["spec"]["provider"]["vault"]["auth"]["kubernetes"];
        assert_eq!(auth["mountPath"], "k8s-auth");
        assert_eq!(auth["role"], "r");
    }
}
