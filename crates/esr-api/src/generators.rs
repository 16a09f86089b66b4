//! generators.external-secrets.io/v1alpha1: the generators esr implements (`Password`, `Fake`,
//! `VaultDynamicSecret`, `ECRAuthorizationToken`, `STSSessionToken`, `Webhook`) and
//! `ClusterGenerator`, whose spec wraps any generator kind.

// kube-derive takes one `printcolumn(...)`/`category = ...` attribute per entry, which clippy
// mistakes for duplicates.
#![allow(clippy::duplicated_attributes)]

use crate::opaque::patterns::{DNS_SUBDOMAIN, SECRET_KEY};
use crate::opaque::{AnyJson, OpaqueObject};
use crate::providers::aws::AwsAuth;
use crate::providers::vault::VaultProvider;
use crate::providers::webhook::{WebhookProvider, WebhookRequest, WebhookResult, WebhookSecret};
use crate::v1::SecretKeySelector;
use crate::v1::SecretStoreRetrySettings;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

fn default_password_length() -> i64 {
    24
}

/// The largest `length` of the Password generator (the CRD's `maximum`).
pub const MAX_PASSWORD_LENGTH: i64 = 4096;

/// Desired state of a Password generator.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "generators.external-secrets.io",
    version = "v1alpha1",
    kind = "Password",
    plural = "passwords",
    singular = "password",
    namespaced,
    category = "external-secrets",
    category = "external-secrets-generators",
    label("external-secrets.io/component", "controller"),
    derive = "PartialEq",
    doc = "Password generates a random password each time it is used."
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("required" = ["allowRepeat", "length", "noUpper"]))]
pub struct PasswordSpec {
    /// Length of the password (at most 4096: a longer value is no password, and every
    /// generated value is stored in a Secret).
    #[serde(default = "default_password_length")]
    #[schemars(range(max = 4096))]
    pub length: i64,
    /// Number of digits; defaults to 25% of the length.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digits: Option<i64>,
    /// Number of symbols; defaults to 25% of the length.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub symbols: Option<i64>,
    /// Characters symbols are drawn from; defaults to ``~!@#$%^&*()_+`-={}|[]\:"<>?,./``.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub symbol_characters: Option<String>,
    /// Use no upper-case letters.
    #[serde(default)]
    pub no_upper: bool,
    /// Allow a character to appear more than once.
    #[serde(default)]
    pub allow_repeat: bool,
    /// Encoding of the generated value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "raw"))]
    pub encoding: Option<PasswordEncoding>,
    /// Keys the password is returned under (the same value for each); defaults to `password`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub secret_keys: Option<Vec<String>>,
    /// A fixed string put before the generated password (not counted in `length`; encoded with
    /// it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    /// A fixed string put after the generated password (not counted in `length`; encoded with
    /// it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suffix: Option<String>,
}

impl Default for PasswordSpec {
    fn default() -> Self {
        Self {
            length: default_password_length(),
            digits: None,
            symbols: None,
            symbol_characters: None,
            no_upper: false,
            allow_repeat: false,
            encoding: None,
            secret_keys: None,
            prefix: None,
            suffix: None,
        }
    }
}

/// Encoding of a generated password.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "lowercase")]
#[schemars(transform = crate::opaque::drop_description)]
pub enum PasswordEncoding {
    /// Standard base64.
    Base64,
    /// URL-safe base64.
    Base64url,
    /// Base32.
    Base32,
    /// Hexadecimal.
    Hex,
    /// The characters as generated.
    #[default]
    Raw,
}

/// Desired state of a Fake generator.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "generators.external-secrets.io",
    version = "v1alpha1",
    kind = "Fake",
    plural = "fakes",
    singular = "fake",
    namespaced,
    category = "external-secrets",
    category = "external-secrets-generators",
    label("external-secrets.io/component", "controller"),
    derive = "PartialEq",
    derive = "Default",
    doc = "Fake returns fixed data; meant for tests and demos."
)]
#[serde(rename_all = "camelCase")]
pub struct FakeSpec {
    /// Controller class that handles this generator; empty means any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub controller: Option<String>,
    /// The data returned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<BTreeMap<String, String>>,
}

/// Desired state of a VaultDynamicSecret generator.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "generators.external-secrets.io",
    version = "v1alpha1",
    kind = "VaultDynamicSecret",
    plural = "vaultdynamicsecrets",
    singular = "vaultdynamicsecret",
    namespaced,
    category = "external-secrets",
    category = "external-secrets-generators",
    label("external-secrets.io/component", "controller"),
    derive = "PartialEq",
    derive = "Default",
    doc = "VaultDynamicSecret calls a Vault endpoint (for example a database secrets engine role) and returns its response."
)]
#[serde(rename_all = "camelCase")]
pub struct VaultDynamicSecretSpec {
    /// Controller class that handles this generator; empty means any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub controller: Option<String>,
    /// HTTP method of the request; `GET` when empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    /// JSON body sent with the request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<AnyJson>,
    /// Which part of the response is returned: `Data` (the `data` field), `Auth` (the `auth` field)
    /// or `Raw` (the whole response).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "Data"))]
    pub result_type: Option<VaultDynamicSecretResultType>,
    /// Retries of the request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_settings: Option<SecretStoreRetrySettings>,
    /// Connection and login settings of the Vault server.
    pub provider: VaultProvider,
    /// Path of the Vault endpoint, for example `database/creds/my-role`.
    pub path: String,
    /// Accept an empty response instead of failing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = false))]
    pub allow_empty_response: Option<bool>,
    /// Query parameters sent with GET requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub get_parameters: Option<BTreeMap<String, Vec<String>>>,
}

/// Which part of a Vault response a VaultDynamicSecret returns.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
#[schemars(transform = crate::opaque::drop_description)]
pub enum VaultDynamicSecretResultType {
    /// The response's `data`.
    #[default]
    Data,
    /// The response's `auth`.
    Auth,
    /// The whole response.
    Raw,
}

/// The AWS session of the ECRAuthorizationToken and STSSessionToken generators (flattened into
/// their specs): the region, the credentials and a role to assume.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AwsGeneratorSession {
    /// AWS region, for example `eu-west-1`.
    pub region: String,
    /// How to get credentials: `secretRef` or `jwt`; without either, the controller's own
    /// credentials (the SDK default chain). STSSessionToken refuses `jwt`: GetSessionToken needs
    /// long-term credentials.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<AwsAuth>,
    /// ARN of an IAM role to assume before calling ECR or STS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
}

/// Desired state of an ECRAuthorizationToken generator.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "generators.external-secrets.io",
    version = "v1alpha1",
    kind = "ECRAuthorizationToken",
    plural = "ecrauthorizationtokens",
    singular = "ecrauthorizationtoken",
    namespaced,
    category = "external-secrets",
    category = "external-secrets-generators",
    label("external-secrets.io/component", "controller"),
    derive = "PartialEq",
    derive = "Default",
    doc = "ECRAuthorizationToken calls ECR GetAuthorizationToken and returns the registry credentials (username, password, proxy_endpoint, expires_at); the token is valid for 12 hours."
)]
#[serde(rename_all = "camelCase")]
pub struct ECRAuthorizationTokenSpec {
    /// Region, credentials and role.
    #[serde(flatten)]
    pub session: AwsGeneratorSession,
    /// ECR scope: `private` (the default) or `public` (ECR Public; no `proxy_endpoint`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
}

/// Desired state of an STSSessionToken generator.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "generators.external-secrets.io",
    version = "v1alpha1",
    kind = "STSSessionToken",
    plural = "stssessiontokens",
    singular = "stssessiontoken",
    namespaced,
    category = "external-secrets",
    category = "external-secrets-generators",
    label("external-secrets.io/component", "controller"),
    derive = "PartialEq",
    derive = "Default",
    doc = "STSSessionToken calls STS GetSessionToken and returns temporary credentials (access_key_id, secret_access_key, session_token, expiration)."
)]
#[serde(rename_all = "camelCase")]
pub struct STSSessionTokenSpec {
    /// Region, credentials and role.
    #[serde(flatten)]
    pub session: AwsGeneratorSession,
    /// Parameters of the GetSessionToken request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_parameters: Option<STSRequestParameters>,
}

/// Parameters of an STS GetSessionToken request.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct STSRequestParameters {
    /// How long the credentials are valid, in seconds (900 to 129600; AWS's default 43200).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("format" = "int32"))]
    pub session_duration: Option<i32>,
    /// Identification of the MFA device (serial number or ARN), when MFA is required.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serial_number: Option<String>,
    /// The code of the MFA device, when MFA is required.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_code: Option<String>,
}

/// Desired state of a Webhook generator (also the `webhookSpec` of a ClusterGenerator): one
/// request, whose JSON answer (an object, or the object at `result.jsonPath`) becomes the
/// generated data.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "generators.external-secrets.io",
    version = "v1alpha1",
    kind = "Webhook",
    plural = "webhooks",
    singular = "webhook",
    namespaced,
    category = "external-secrets",
    category = "external-secrets-generators",
    label("external-secrets.io/component", "controller"),
    derive = "PartialEq",
    derive = "Default",
    doc = "Webhook calls an HTTP endpoint and returns the JSON object it answers (or the object at result.jsonPath) as the generated data."
)]
#[serde(rename_all = "camelCase")]
pub struct WebhookSpec {
    /// The request: method, URL, headers, auth, body, timeout and TLS trust (the URL, body and
    /// headers are templates over the named `secrets`).
    #[serde(flatten)]
    pub request: WebhookRequest,
    /// Where the generated object is in the response.
    pub result: WebhookResult,
    /// Secrets (in the namespace of the ExternalSecret) whose data the templates may use, each
    /// under the given name. The Secrets must carry the label `external-secrets.io/type: webhook`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secrets: Option<Vec<WebhookGeneratorSecret>>,
}

/// A Secret made available to the templates of a Webhook generator.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WebhookGeneratorSecret {
    /// The name the Secret's data has in the templates (`.<name>.<key>`).
    pub name: String,
    /// The Secret, in the namespace of the ExternalSecret; every key of its data is available.
    pub secret_ref: WebhookSecretRef,
}

/// A Secret (and optionally one of its keys) in the namespace of the referrer.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WebhookSecretRef {
    /// Name of the Secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253), pattern(DNS_SUBDOMAIN))]
    pub name: Option<String>,
    /// A key of the Secret's data (not used by the generator: every key is available).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253), pattern(SECRET_KEY))]
    pub key: Option<String>,
}

impl WebhookSpec {
    /// The generator's request as a store spec: the same fields, its Secrets named without a
    /// namespace (they are read in the referrer's namespace).
    pub fn to_provider(&self) -> WebhookProvider {
        WebhookProvider {
            request: self.request.clone(),
            result: Some(self.result.clone()),
            secrets: self.secrets.as_ref().map(|s| {
                s.iter()
                    .map(|s| WebhookSecret {
                        name: s.name.clone(),
                        secret_ref: SecretKeySelector {
                            name: s.secret_ref.name.clone(),
                            namespace: None,
                            key: s.secret_ref.key.clone(),
                        },
                    })
                    .collect()
            }),
        }
    }
}

/// Desired state of a ClusterGenerator.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "generators.external-secrets.io",
    version = "v1alpha1",
    kind = "ClusterGenerator",
    plural = "clustergenerators",
    singular = "clustergenerator",
    category = "external-secrets",
    category = "external-secrets-generators",
    label("external-secrets.io/component", "controller"),
    derive = "PartialEq",
    doc = "ClusterGenerator is a cluster-scoped generator usable from any namespace; it wraps the spec of one generator kind."
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterGeneratorSpec {
    /// Kind of the wrapped generator.
    pub kind: GeneratorKind,
    /// The wrapped generator spec.
    pub generator: GeneratorSpec,
}

/// Declares [`GeneratorKind`] and [`GeneratorRefKind`](crate::v1::GeneratorRefKind) from one list
/// of ESO's generator kinds: the second is the first plus `ClusterGenerator`, which ESO's CRDs
/// list third (after the kinds in `before`).
macro_rules! generator_kinds {
    (
        before: [$($b:ident = $bn:literal, $bd:literal;)*]
        after: [$($a:ident = $an:literal, $ad:literal;)*]
    ) => {
        /// Generator kinds ESO defines (the `kind` of a ClusterGenerator).
        #[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
        #[schemars(transform = crate::opaque::drop_description)]
        pub enum GeneratorKind {
            $(#[doc = $bd] #[serde(rename = $bn)] $b,)*
            $(#[doc = $ad] #[serde(rename = $an)] $a,)*
        }

        impl GeneratorKind {
            /// The kind's name as written in manifests.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Self::$b => $bn,)*
                    $(Self::$a => $an,)*
                }
            }
        }

        /// Kinds a `generatorRef` may point at: every [`GeneratorKind`] and `ClusterGenerator`.
        #[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
        #[schemars(transform = crate::opaque::drop_description)]
        pub enum GeneratorRefKind {
            $(#[doc = $bd] #[serde(rename = $bn)] $b,)*
            /// A cluster-scoped generator wrapping any generator spec.
            ClusterGenerator,
            $(#[doc = $ad] #[serde(rename = $an)] $a,)*
        }

        impl GeneratorRefKind {
            /// The kind's name as written in manifests.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Self::$b => $bn,)*
                    Self::ClusterGenerator => "ClusterGenerator",
                    $(Self::$a => $an,)*
                }
            }
        }
    };
}

generator_kinds! {
    before: [
        AcrAccessToken = "ACRAccessToken", "Azure Container Registry token.";
        BeyondtrustWorkloadCredentialsDynamicSecret = "BeyondtrustWorkloadCredentialsDynamicSecret",
            "BeyondTrust workload credentials.";
    ]
    after: [
        CloudsmithAccessToken = "CloudsmithAccessToken", "Cloudsmith access token.";
        EcrAuthorizationToken = "ECRAuthorizationToken", "AWS ECR authorization token.";
        Fake = "Fake", "Static fake data.";
        GcrAccessToken = "GCRAccessToken", "Google Container Registry token.";
        GithubAccessToken = "GithubAccessToken", "GitHub App installation token.";
        GitlabDeployToken = "GitlabDeployToken", "GitLab deploy token.";
        QuayAccessToken = "QuayAccessToken", "Quay robot token.";
        Password = "Password", "Random password.";
        SshKey = "SSHKey", "SSH key pair.";
        StsSessionToken = "STSSessionToken", "AWS STS session token.";
        Uuid = "UUID", "Random UUID.";
        VaultDynamicSecret = "VaultDynamicSecret", "Vault dynamic secret.";
        Webhook = "Webhook", "Response of an HTTP call.";
        Grafana = "Grafana", "Grafana service-account token.";
        Mfa = "MFA", "TOTP code.";
    ]
}

/// The wrapped generator spec of a ClusterGenerator (exactly one key). The kinds esr implements are
/// typed; the others are kept verbatim so the controller can report them as unsupported.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[schemars(extend("maxProperties" = 1, "minProperties" = 1))]
pub struct GeneratorSpec {
    /// Spec of a `acrAccessToken` generator, kept verbatim (esr does not implement it).
    #[serde(
        default,
        rename = "acrAccessTokenSpec",
        skip_serializing_if = "Option::is_none"
    )]
    pub acr_access_token_spec: Option<OpaqueObject>,
    /// Spec of a `beyondtrustWorkloadCredentialsDynamicSecret` generator, kept verbatim (esr does not implement it).
    #[serde(
        default,
        rename = "beyondtrustWorkloadCredentialsDynamicSecretSpec",
        skip_serializing_if = "Option::is_none"
    )]
    pub beyondtrust_workload_credentials_dynamic_secret_spec: Option<OpaqueObject>,
    /// Spec of a `cloudsmithAccessToken` generator, kept verbatim (esr does not implement it).
    #[serde(
        default,
        rename = "cloudsmithAccessTokenSpec",
        skip_serializing_if = "Option::is_none"
    )]
    pub cloudsmith_access_token_spec: Option<OpaqueObject>,
    /// Spec of an `ECRAuthorizationToken` generator.
    #[serde(
        default,
        rename = "ecrAuthorizationTokenSpec",
        skip_serializing_if = "Option::is_none"
    )]
    pub ecr_authorization_token_spec: Option<ECRAuthorizationTokenSpec>,
    /// Spec of a `fake` generator.
    #[serde(default, rename = "fakeSpec", skip_serializing_if = "Option::is_none")]
    pub fake_spec: Option<FakeSpec>,
    /// Spec of a `gcrAccessToken` generator, kept verbatim (esr does not implement it).
    #[serde(
        default,
        rename = "gcrAccessTokenSpec",
        skip_serializing_if = "Option::is_none"
    )]
    pub gcr_access_token_spec: Option<OpaqueObject>,
    /// Spec of a `githubAccessToken` generator, kept verbatim (esr does not implement it).
    #[serde(
        default,
        rename = "githubAccessTokenSpec",
        skip_serializing_if = "Option::is_none"
    )]
    pub github_access_token_spec: Option<OpaqueObject>,
    /// Spec of a `gitlabDeployToken` generator, kept verbatim (esr does not implement it).
    #[serde(
        default,
        rename = "gitlabDeployTokenSpec",
        skip_serializing_if = "Option::is_none"
    )]
    pub gitlab_deploy_token_spec: Option<OpaqueObject>,
    /// Spec of a `grafana` generator, kept verbatim (esr does not implement it).
    #[serde(
        default,
        rename = "grafanaSpec",
        skip_serializing_if = "Option::is_none"
    )]
    pub grafana_spec: Option<OpaqueObject>,
    /// Spec of a `mfa` generator, kept verbatim (esr does not implement it).
    #[serde(default, rename = "mfaSpec", skip_serializing_if = "Option::is_none")]
    pub mfa_spec: Option<OpaqueObject>,
    /// Spec of a `password` generator.
    #[serde(
        default,
        rename = "passwordSpec",
        skip_serializing_if = "Option::is_none"
    )]
    pub password_spec: Option<PasswordSpec>,
    /// Spec of a `quayAccessToken` generator, kept verbatim (esr does not implement it).
    #[serde(
        default,
        rename = "quayAccessTokenSpec",
        skip_serializing_if = "Option::is_none"
    )]
    pub quay_access_token_spec: Option<OpaqueObject>,
    /// Spec of a `sshKey` generator, kept verbatim (esr does not implement it).
    #[serde(
        default,
        rename = "sshKeySpec",
        skip_serializing_if = "Option::is_none"
    )]
    pub ssh_key_spec: Option<OpaqueObject>,
    /// Spec of an `STSSessionToken` generator.
    #[serde(
        default,
        rename = "stsSessionTokenSpec",
        skip_serializing_if = "Option::is_none"
    )]
    pub sts_session_token_spec: Option<STSSessionTokenSpec>,
    /// Spec of a `uuid` generator, kept verbatim (esr does not implement it).
    #[serde(default, rename = "uuidSpec", skip_serializing_if = "Option::is_none")]
    pub uuid_spec: Option<OpaqueObject>,
    /// Spec of a `vaultDynamicSecret` generator.
    #[serde(
        default,
        rename = "vaultDynamicSecretSpec",
        skip_serializing_if = "Option::is_none"
    )]
    pub vault_dynamic_secret_spec: Option<VaultDynamicSecretSpec>,
    /// Spec of a `Webhook` generator.
    #[serde(
        default,
        rename = "webhookSpec",
        skip_serializing_if = "Option::is_none"
    )]
    pub webhook_spec: Option<WebhookSpec>,
}
