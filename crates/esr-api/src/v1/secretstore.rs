//! `SecretStore` and `ClusterSecretStore` (external-secrets.io/v1): connection and credentials of a
//! secrets provider.

// kube-derive takes one `printcolumn(...)`/`category = ...` attribute per entry, which clippy
// mistakes for duplicates.
#![allow(clippy::duplicated_attributes)]

use crate::opaque::OpaqueObject;
use crate::opaque::patterns::DNS_LABEL;
use crate::providers::aws::AwsProvider;
use crate::providers::azurekv::AzureKvProvider;
use crate::providers::fake::FakeProvider;
use crate::providers::gcpsm::GcpSmProvider;
use crate::providers::kubernetes::KubernetesProvider;
use crate::providers::vault::VaultProvider;
use crate::providers::webhook::WebhookProvider;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;

/// Desired state of a SecretStore or ClusterSecretStore.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "external-secrets.io",
    version = "v1",
    kind = "SecretStore",
    plural = "secretstores",
    singular = "secretstore",
    namespaced,
    status = "SecretStoreStatus",
    shortname = "ss",
    category = "external-secrets",
    label("external-secrets.io/component", "controller"),
    derive = "PartialEq",
    derive = "Default",
    doc = "SecretStore holds the connection and credentials of a secrets provider; ExternalSecrets and PushSecrets in the same namespace use it.",
    printcolumn(
        name = "AGE",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    printcolumn(
        name = "Status",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].reason"
    ),
    printcolumn(
        name = "Capabilities",
        type_ = "string",
        json_path = ".status.capabilities"
    ),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct SecretStoreSpec {
    /// Controller class: only the controller started with this `--controller-class` handles the
    /// store. Empty means every controller.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub controller: Option<String>,
    /// The provider and its settings (exactly one key).
    pub provider: SecretStoreProvider,
    /// Retries of provider calls (used by some providers' SDKs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_settings: Option<SecretStoreRetrySettings>,
    /// How often the store is re-validated: an integer number of seconds or a Go duration string.
    /// Empty or 0 uses the controller's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_interval: Option<IntOrString>,
    /// ClusterSecretStore only: the namespaces allowed to use the store. Without conditions every
    /// namespace may; otherwise a namespace matching any condition may.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<ClusterSecretStoreCondition>>,
}

/// Namespaces allowed to use a ClusterSecretStore; a namespace matching any entry is allowed.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterSecretStoreCondition {
    /// Namespaces whose labels match this selector.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_selector: Option<LabelSelector>,
    /// Namespaces with one of these names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(inner(length(min = 1, max = 63), pattern(DNS_LABEL)))]
    pub namespaces: Option<Vec<String>>,
    /// Namespaces whose name matches one of these regular expressions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_regexes: Option<Vec<String>>,
}

/// Retry settings for provider calls.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretStoreRetrySettings {
    /// Maximum number of retries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_retries: Option<i32>,
    /// Wait between retries, as a Go duration string.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_interval: Option<String>,
}

/// Observed state of a store.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretStoreStatus {
    /// Conditions; `Ready` tells whether the store's configuration was validated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<SecretStoreStatusCondition>>,
    /// What the provider supports: `ReadOnly`, `WriteOnly` or `ReadWrite`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<String>,
}

/// One condition of a store.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretStoreStatusCondition {
    /// Condition type (`Ready`).
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// Machine-readable reason (for example `Valid`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Human-readable message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// When `status` last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
}

/// ClusterSecretStore: a cluster-scoped SecretStore usable from any namespace its `conditions` allow.
/// It has the same spec and status as [`SecretStore`].
#[derive(Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ClusterSecretStore {
    /// Standard object metadata.
    pub metadata: ObjectMeta,
    /// Desired state.
    pub spec: SecretStoreSpec,
    /// Observed state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<SecretStoreStatus>,
}

impl ClusterSecretStore {
    /// Creates a ClusterSecretStore with the given name and spec.
    pub fn new(name: &str, spec: SecretStoreSpec) -> Self {
        Self {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                ..ObjectMeta::default()
            },
            spec,
            status: None,
        }
    }
}

impl Serialize for ClusterSecretStore {
    fn serialize<S: serde::Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let fields = if self.status.is_some() { 5 } else { 4 };
        let mut obj = ser.serialize_struct("ClusterSecretStore", fields)?;
        obj.serialize_field("apiVersion", "external-secrets.io/v1")?;
        obj.serialize_field("kind", "ClusterSecretStore")?;
        obj.serialize_field("metadata", &self.metadata)?;
        obj.serialize_field("spec", &self.spec)?;
        if let Some(status) = &self.status {
            obj.serialize_field("status", status)?;
        }
        obj.end()
    }
}

impl kube::Resource for ClusterSecretStore {
    type DynamicType = ();
    type Scope = kube::core::ClusterResourceScope;

    fn group(_: &()) -> Cow<'_, str> {
        "external-secrets.io".into()
    }

    fn kind(_: &()) -> Cow<'_, str> {
        "ClusterSecretStore".into()
    }

    fn version(_: &()) -> Cow<'_, str> {
        "v1".into()
    }

    fn api_version(_: &()) -> Cow<'_, str> {
        "external-secrets.io/v1".into()
    }

    fn plural(_: &()) -> Cow<'_, str> {
        "clustersecretstores".into()
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

impl kube::core::object::HasSpec for ClusterSecretStore {
    type Spec = SecretStoreSpec;

    fn spec(&self) -> &SecretStoreSpec {
        &self.spec
    }

    fn spec_mut(&mut self) -> &mut SecretStoreSpec {
        &mut self.spec
    }
}

impl kube::core::object::HasStatus for ClusterSecretStore {
    type Status = SecretStoreStatus;

    fn status(&self) -> Option<&SecretStoreStatus> {
        self.status.as_ref()
    }

    fn status_mut(&mut self) -> &mut Option<SecretStoreStatus> {
        &mut self.status
    }
}

/// The provider of a store: exactly one key is set. The providers esr implements are typed; every
/// other ESO provider key is accepted and kept as an opaque object so the controller can report it
/// as unsupported.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[schemars(extend("maxProperties" = 1, "minProperties" = 1))]
pub struct SecretStoreProvider {
    /// Typed spec of the `aws` provider.
    #[serde(default, rename = "aws", skip_serializing_if = "Option::is_none")]
    pub aws: Option<AwsProvider>,
    /// Typed spec of the `azurekv` provider.
    #[serde(default, rename = "azurekv", skip_serializing_if = "Option::is_none")]
    pub azurekv: Option<AzureKvProvider>,
    /// Spec of the `akeyless` provider, kept verbatim (esr does not implement it).
    #[serde(default, rename = "akeyless", skip_serializing_if = "Option::is_none")]
    pub akeyless: Option<OpaqueObject>,
    /// Spec of the `bitwardensecretsmanager` provider, kept verbatim (esr does not implement it).
    #[serde(
        default,
        rename = "bitwardensecretsmanager",
        skip_serializing_if = "Option::is_none"
    )]
    pub bitwardensecretsmanager: Option<OpaqueObject>,
    /// Typed spec of the `vault` provider.
    #[serde(default, rename = "vault", skip_serializing_if = "Option::is_none")]
    pub vault: Option<VaultProvider>,
    /// Spec of the `ovh` provider, kept verbatim (esr does not implement it).
    #[serde(default, rename = "ovh", skip_serializing_if = "Option::is_none")]
    pub ovh: Option<OpaqueObject>,
    /// Typed spec of the `gcpsm` provider.
    #[serde(default, rename = "gcpsm", skip_serializing_if = "Option::is_none")]
    pub gcpsm: Option<GcpSmProvider>,
    /// Spec of the `oracle` provider, kept verbatim (esr does not implement it).
    #[serde(default, rename = "oracle", skip_serializing_if = "Option::is_none")]
    pub oracle: Option<OpaqueObject>,
    /// Spec of the `ibm` provider, kept verbatim (esr does not implement it).
    #[serde(default, rename = "ibm", skip_serializing_if = "Option::is_none")]
    pub ibm: Option<OpaqueObject>,
    /// Spec of the `yandexcertificatemanager` provider, kept verbatim (esr does not implement it).
    #[serde(
        default,
        rename = "yandexcertificatemanager",
        skip_serializing_if = "Option::is_none"
    )]
    pub yandexcertificatemanager: Option<OpaqueObject>,
    /// Spec of the `yandexlockbox` provider, kept verbatim (esr does not implement it).
    #[serde(
        default,
        rename = "yandexlockbox",
        skip_serializing_if = "Option::is_none"
    )]
    pub yandexlockbox: Option<OpaqueObject>,
    /// Spec of the `github` provider, kept verbatim (esr does not implement it).
    #[serde(default, rename = "github", skip_serializing_if = "Option::is_none")]
    pub github: Option<OpaqueObject>,
    /// Spec of the `gitlab` provider, kept verbatim (esr does not implement it).
    #[serde(default, rename = "gitlab", skip_serializing_if = "Option::is_none")]
    pub gitlab: Option<OpaqueObject>,
    /// Spec of the `onepassword` provider, kept verbatim (esr does not implement it).
    #[serde(
        default,
        rename = "onepassword",
        skip_serializing_if = "Option::is_none"
    )]
    pub onepassword: Option<OpaqueObject>,
    /// Spec of the `onepasswordSDK` provider, kept verbatim (esr does not implement it).
    #[serde(
        default,
        rename = "onepasswordSDK",
        skip_serializing_if = "Option::is_none"
    )]
    pub onepassword_sdk: Option<OpaqueObject>,
    /// Typed spec of the `webhook` provider.
    #[serde(default, rename = "webhook", skip_serializing_if = "Option::is_none")]
    pub webhook: Option<WebhookProvider>,
    /// Typed spec of the `kubernetes` provider.
    #[serde(
        default,
        rename = "kubernetes",
        skip_serializing_if = "Option::is_none"
    )]
    pub kubernetes: Option<KubernetesProvider>,
    /// Spec of the `crd` provider, kept verbatim (esr does not implement it).
    #[serde(default, rename = "crd", skip_serializing_if = "Option::is_none")]
    pub crd: Option<OpaqueObject>,
    /// Typed spec of the `fake` provider.
    #[serde(default, rename = "fake", skip_serializing_if = "Option::is_none")]
    pub fake: Option<FakeProvider>,
    /// Spec of the `senhasegura` provider, kept verbatim (esr does not implement it).
    #[serde(
        default,
        rename = "senhasegura",
        skip_serializing_if = "Option::is_none"
    )]
    pub senhasegura: Option<OpaqueObject>,
    /// Spec of the `scaleway` provider, kept verbatim (esr does not implement it).
    #[serde(default, rename = "scaleway", skip_serializing_if = "Option::is_none")]
    pub scaleway: Option<OpaqueObject>,
    /// Spec of the `doppler` provider, kept verbatim (esr does not implement it).
    #[serde(default, rename = "doppler", skip_serializing_if = "Option::is_none")]
    pub doppler: Option<OpaqueObject>,
    /// Spec of the `previder` provider, kept verbatim (esr does not implement it).
    #[serde(default, rename = "previder", skip_serializing_if = "Option::is_none")]
    pub previder: Option<OpaqueObject>,
    /// Spec of the `onboardbase` provider, kept verbatim (esr does not implement it).
    #[serde(
        default,
        rename = "onboardbase",
        skip_serializing_if = "Option::is_none"
    )]
    pub onboardbase: Option<OpaqueObject>,
    /// Spec of the `keepersecurity` provider, kept verbatim (esr does not implement it).
    #[serde(
        default,
        rename = "keepersecurity",
        skip_serializing_if = "Option::is_none"
    )]
    pub keepersecurity: Option<OpaqueObject>,
    /// Spec of the `conjur` provider, kept verbatim (esr does not implement it).
    #[serde(default, rename = "conjur", skip_serializing_if = "Option::is_none")]
    pub conjur: Option<OpaqueObject>,
    /// Spec of the `delinea` provider, kept verbatim (esr does not implement it).
    #[serde(default, rename = "delinea", skip_serializing_if = "Option::is_none")]
    pub delinea: Option<OpaqueObject>,
    /// Spec of the `secretserver` provider, kept verbatim (esr does not implement it).
    #[serde(
        default,
        rename = "secretserver",
        skip_serializing_if = "Option::is_none"
    )]
    pub secretserver: Option<OpaqueObject>,
    /// Spec of the `chef` provider, kept verbatim (esr does not implement it).
    #[serde(default, rename = "chef", skip_serializing_if = "Option::is_none")]
    pub chef: Option<OpaqueObject>,
    /// Spec of the `pulumi` provider, kept verbatim (esr does not implement it).
    #[serde(default, rename = "pulumi", skip_serializing_if = "Option::is_none")]
    pub pulumi: Option<OpaqueObject>,
    /// Spec of the `fortanix` provider, kept verbatim (esr does not implement it).
    #[serde(default, rename = "fortanix", skip_serializing_if = "Option::is_none")]
    pub fortanix: Option<OpaqueObject>,
    /// Spec of the `passworddepot` provider, kept verbatim (esr does not implement it).
    #[serde(
        default,
        rename = "passworddepot",
        skip_serializing_if = "Option::is_none"
    )]
    pub passworddepot: Option<OpaqueObject>,
    /// Spec of the `passbolt` provider, kept verbatim (esr does not implement it).
    #[serde(default, rename = "passbolt", skip_serializing_if = "Option::is_none")]
    pub passbolt: Option<OpaqueObject>,
    /// Spec of the `dvls` provider, kept verbatim (esr does not implement it).
    #[serde(default, rename = "dvls", skip_serializing_if = "Option::is_none")]
    pub dvls: Option<OpaqueObject>,
    /// Spec of the `infisical` provider, kept verbatim (esr does not implement it).
    #[serde(default, rename = "infisical", skip_serializing_if = "Option::is_none")]
    pub infisical: Option<OpaqueObject>,
    /// Spec of the `beyondtrust` provider, kept verbatim (esr does not implement it).
    #[serde(
        default,
        rename = "beyondtrust",
        skip_serializing_if = "Option::is_none"
    )]
    pub beyondtrust: Option<OpaqueObject>,
    /// Spec of the `beyondtrustworkloadcredentials` provider, kept verbatim (esr does not implement it).
    #[serde(
        default,
        rename = "beyondtrustworkloadcredentials",
        skip_serializing_if = "Option::is_none"
    )]
    pub beyondtrustworkloadcredentials: Option<OpaqueObject>,
    /// Spec of the `cloudrusm` provider, kept verbatim (esr does not implement it).
    #[serde(default, rename = "cloudrusm", skip_serializing_if = "Option::is_none")]
    pub cloudrusm: Option<OpaqueObject>,
    /// Spec of the `volcengine` provider, kept verbatim (esr does not implement it).
    #[serde(
        default,
        rename = "volcengine",
        skip_serializing_if = "Option::is_none"
    )]
    pub volcengine: Option<OpaqueObject>,
    /// Spec of the `ngrok` provider, kept verbatim (esr does not implement it).
    #[serde(default, rename = "ngrok", skip_serializing_if = "Option::is_none")]
    pub ngrok: Option<OpaqueObject>,
    /// Spec of the `barbican` provider, kept verbatim (esr does not implement it).
    #[serde(default, rename = "barbican", skip_serializing_if = "Option::is_none")]
    pub barbican: Option<OpaqueObject>,
    /// Spec of the `nebiusmysterybox` provider, kept verbatim (esr does not implement it).
    #[serde(
        default,
        rename = "nebiusmysterybox",
        skip_serializing_if = "Option::is_none"
    )]
    pub nebiusmysterybox: Option<OpaqueObject>,
    /// Spec of the `openBao` provider, kept verbatim (esr does not implement it).
    #[serde(default, rename = "openBao", skip_serializing_if = "Option::is_none")]
    pub open_bao: Option<OpaqueObject>,
}

/// Every provider key ESO v2.9.0 accepts in `spec.provider` (external-secrets.io/v1).
pub const PROVIDER_KEYS: [&str; 43] = [
    "aws",
    "azurekv",
    "akeyless",
    "bitwardensecretsmanager",
    "vault",
    "ovh",
    "gcpsm",
    "oracle",
    "ibm",
    "yandexcertificatemanager",
    "yandexlockbox",
    "github",
    "gitlab",
    "onepassword",
    "onepasswordSDK",
    "webhook",
    "kubernetes",
    "crd",
    "fake",
    "senhasegura",
    "scaleway",
    "doppler",
    "previder",
    "onboardbase",
    "keepersecurity",
    "conjur",
    "delinea",
    "secretserver",
    "chef",
    "pulumi",
    "fortanix",
    "passworddepot",
    "passbolt",
    "dvls",
    "infisical",
    "beyondtrust",
    "beyondtrustworkloadcredentials",
    "cloudrusm",
    "volcengine",
    "ngrok",
    "barbican",
    "nebiusmysterybox",
    "openBao",
];

/// Provider keys esr implements.
pub const IMPLEMENTED_PROVIDER_KEYS: [&str; 7] = [
    "aws",
    "azurekv",
    "vault",
    "kubernetes",
    "fake",
    "gcpsm",
    "webhook",
];

impl SecretStoreProvider {
    /// JSON keys of the providers that are set, in `PROVIDER_KEYS` order (normally exactly one).
    pub fn configured_keys(&self) -> Vec<&'static str> {
        let mut keys = Vec::new();
        if self.aws.is_some() {
            keys.push("aws");
        }
        if self.azurekv.is_some() {
            keys.push("azurekv");
        }
        if self.akeyless.is_some() {
            keys.push("akeyless");
        }
        if self.bitwardensecretsmanager.is_some() {
            keys.push("bitwardensecretsmanager");
        }
        if self.vault.is_some() {
            keys.push("vault");
        }
        if self.ovh.is_some() {
            keys.push("ovh");
        }
        if self.gcpsm.is_some() {
            keys.push("gcpsm");
        }
        if self.oracle.is_some() {
            keys.push("oracle");
        }
        if self.ibm.is_some() {
            keys.push("ibm");
        }
        if self.yandexcertificatemanager.is_some() {
            keys.push("yandexcertificatemanager");
        }
        if self.yandexlockbox.is_some() {
            keys.push("yandexlockbox");
        }
        if self.github.is_some() {
            keys.push("github");
        }
        if self.gitlab.is_some() {
            keys.push("gitlab");
        }
        if self.onepassword.is_some() {
            keys.push("onepassword");
        }
        if self.onepassword_sdk.is_some() {
            keys.push("onepasswordSDK");
        }
        if self.webhook.is_some() {
            keys.push("webhook");
        }
        if self.kubernetes.is_some() {
            keys.push("kubernetes");
        }
        if self.crd.is_some() {
            keys.push("crd");
        }
        if self.fake.is_some() {
            keys.push("fake");
        }
        if self.senhasegura.is_some() {
            keys.push("senhasegura");
        }
        if self.scaleway.is_some() {
            keys.push("scaleway");
        }
        if self.doppler.is_some() {
            keys.push("doppler");
        }
        if self.previder.is_some() {
            keys.push("previder");
        }
        if self.onboardbase.is_some() {
            keys.push("onboardbase");
        }
        if self.keepersecurity.is_some() {
            keys.push("keepersecurity");
        }
        if self.conjur.is_some() {
            keys.push("conjur");
        }
        if self.delinea.is_some() {
            keys.push("delinea");
        }
        if self.secretserver.is_some() {
            keys.push("secretserver");
        }
        if self.chef.is_some() {
            keys.push("chef");
        }
        if self.pulumi.is_some() {
            keys.push("pulumi");
        }
        if self.fortanix.is_some() {
            keys.push("fortanix");
        }
        if self.passworddepot.is_some() {
            keys.push("passworddepot");
        }
        if self.passbolt.is_some() {
            keys.push("passbolt");
        }
        if self.dvls.is_some() {
            keys.push("dvls");
        }
        if self.infisical.is_some() {
            keys.push("infisical");
        }
        if self.beyondtrust.is_some() {
            keys.push("beyondtrust");
        }
        if self.beyondtrustworkloadcredentials.is_some() {
            keys.push("beyondtrustworkloadcredentials");
        }
        if self.cloudrusm.is_some() {
            keys.push("cloudrusm");
        }
        if self.volcengine.is_some() {
            keys.push("volcengine");
        }
        if self.ngrok.is_some() {
            keys.push("ngrok");
        }
        if self.barbican.is_some() {
            keys.push("barbican");
        }
        if self.nebiusmysterybox.is_some() {
            keys.push("nebiusmysterybox");
        }
        if self.open_bao.is_some() {
            keys.push("openBao");
        }
        keys
    }
}

impl SecretStoreSpec {
    /// `refreshInterval` as a duration: an integer is seconds, a string is a Go duration. `None`
    /// when unset, empty or zero (the controller's default interval applies then). Negative values
    /// are returned as they are (ESO's webhook rejects them).
    pub fn refresh_interval_duration(
        &self,
    ) -> Result<Option<crate::duration::GoDuration>, crate::duration::DurationError> {
        let d = match &self.refresh_interval {
            None => return Ok(None),
            Some(IntOrString::Int(secs)) => {
                crate::duration::GoDuration::from_secs(i64::from(*secs))
            }
            Some(IntOrString::String(s)) if s.is_empty() => return Ok(None),
            Some(IntOrString::String(s)) => crate::duration::parse(s)?,
        };
        Ok((!d.is_zero()).then_some(d))
    }
}

impl SecretStoreProvider {
    /// The single configured provider key, or `None` when zero or several are set.
    pub fn single_key(&self) -> Option<&'static str> {
        match self.configured_keys().as_slice() {
            [one] => Some(one),
            _ => None,
        }
    }

    /// Whether esr implements the configured provider.
    pub fn is_implemented(&self) -> bool {
        self.single_key()
            .is_some_and(|k| IMPLEMENTED_PROVIDER_KEYS.contains(&k))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_refresh_interval_int_or_string() {
        let mut spec = SecretStoreSpec::default();
        assert_eq!(spec.refresh_interval_duration().unwrap(), None);
        spec.refresh_interval = Some(IntOrString::Int(30));
        assert_eq!(
            spec.refresh_interval_duration()
                .unwrap()
                .map(|d| d.to_string()),
            Some("30s".to_owned())
        );
        spec.refresh_interval = Some(IntOrString::String("5m".into()));
        assert_eq!(
            spec.refresh_interval_duration()
                .unwrap()
                .map(|d| d.to_string()),
            Some("5m0s".to_owned())
        );
        spec.refresh_interval = Some(IntOrString::Int(0));
        assert_eq!(spec.refresh_interval_duration().unwrap(), None);
        spec.refresh_interval = Some(IntOrString::String("bogus".into()));
        assert!(spec.refresh_interval_duration().is_err());
    }

    #[test]
    fn provider_keys_and_opaque_providers() {
        let provider: SecretStoreProvider = serde_json::from_value(
            serde_json::json!({"oracle": {"region": "p", "auth": {"x": 1}}}),
        )
        .unwrap();
        assert_eq!(provider.single_key(), Some("oracle"));
        assert!(!provider.is_implemented());
        // Opaque providers keep every field.
        assert_eq!(
            serde_json::to_value(&provider).unwrap(),
            serde_json::json!({"oracle": {"region": "p", "auth": {"x": 1}}})
        );
        let provider: SecretStoreProvider =
            serde_json::from_value(serde_json::json!({"fake": {"data": []}})).unwrap();
        assert!(provider.is_implemented());
        assert_eq!(PROVIDER_KEYS.len(), 43);
        let all: std::collections::BTreeSet<_> = PROVIDER_KEYS.iter().collect();
        assert_eq!(all.len(), 43);
        // Every key in PROVIDER_KEYS is a field of SecretStoreProvider.
        for key in PROVIDER_KEYS {
            let body = match key {
                "aws" => serde_json::json!({"service": "SecretsManager", "region": "r"}),
                "azurekv" => serde_json::json!({"vaultUrl": "u"}),
                "vault" => serde_json::json!({"server": "s"}),
                "fake" => serde_json::json!({"data": []}),
                "webhook" => serde_json::json!({"url": "u"}),
                _ => serde_json::json!({}),
            };
            let p: SecretStoreProvider =
                serde_json::from_value(serde_json::json!({ key: body })).unwrap();
            assert_eq!(p.configured_keys(), vec![key], "{key}");
            assert_eq!(p.is_implemented(), IMPLEMENTED_PROVIDER_KEYS.contains(&key));
        }
    }
}
