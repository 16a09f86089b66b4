//! The `webhook` provider: a generic HTTP(S) endpoint whose URL, headers and body are templates,
//! and whose answer is read with a JSONPath. The `Webhook` generator's spec
//! ([`crate::generators::WebhookSpec`]) shares the request ([`WebhookRequest`]); its `result` is
//! required and its Secrets are named without a namespace.

use crate::v1::{CaProvider, SecretKeySelector};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Spec of the `webhook` provider of a SecretStore or ClusterSecretStore.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WebhookProvider {
    /// The request: method, URL, headers, auth, body, timeout and TLS trust.
    #[serde(flatten)]
    pub request: WebhookRequest,
    /// How the value is read out of the response.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<WebhookResult>,
    /// Secrets whose data the templates may use, each under the given name. The Secrets must carry
    /// the label `external-secrets.io/type: webhook`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secrets: Option<Vec<WebhookSecret>>,
}

/// The HTTP request of a webhook store or of a Webhook generator: the fields the two specs share
/// (flattened into both, so each CRD lists them as its own).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WebhookRequest {
    /// HTTP method of the request; `GET` when empty (a store's PushSecret writes: `POST`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    /// The URL to call: a template over the named `secrets` (and, in a store, `.remoteRef`);
    /// values used in the URL are query-escaped.
    pub url: String,
    /// HTTP headers of the request; each value is a template like the body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<BTreeMap<String, String>>,
    /// An authentication protocol for the request; set exactly one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<WebhookAuth>,
    /// The request body: a template over the named `secrets` (and, in a store, `.remoteRef`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// How long one request may take (a Go duration such as `10s`); no limit when empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
    /// PEM CA certificates that the server's TLS certificate must chain to (base64 in the
    /// manifest). Without it or `caProvider`, the system roots are used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("format" = "byte"))]
    pub ca_bundle: Option<String>,
    /// CA certificates read from a Secret or ConfigMap key, used like `caBundle`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_provider: Option<CaProvider>,
}

/// An authentication protocol of a webhook request (exactly one is set).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("maxProperties" = 1, "minProperties" = 1))]
pub struct WebhookAuth {
    /// NTLM authentication with a user name and password kept in Secrets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ntlm: Option<WebhookNtlm>,
}

/// NTLM credentials.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WebhookNtlm {
    /// The Secret key holding the user name.
    pub username_secret: SecretKeySelector,
    /// The Secret key holding the password.
    pub password_secret: SecretKeySelector,
}

/// How a webhook response is turned into a value.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WebhookResult {
    /// A JSONPath into the JSON response (for example `$.data.value`); the whole response body
    /// when empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub json_path: Option<String>,
}

/// A Secret made available to the templates of a webhook store.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WebhookSecret {
    /// The name the Secret's data has in the templates (`.<name>.<key>`).
    pub name: String,
    /// The Secret. Only its name (and, for a ClusterSecretStore, its namespace) is used; every
    /// key of its data is available.
    pub secret_ref: SecretKeySelector,
}
