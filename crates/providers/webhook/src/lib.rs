//! esr-provider-webhook: ESO's generic `webhook` provider and its `Webhook` generator (ESO v2.9).
//! See docs/providers/webhook.md for the user guide.
//!
//! A store describes one HTTP request; esr renders it for every read and turns the answer into a
//! value:
//!
//! * **Templates** ([`template`]): `url`, `body`, every `headers` value and `result.jsonPath` are
//!   Go templates with ESO's functions, executed without `missingkey=error` (a missing key prints
//!   `<no value>`). Their data is `.remoteRef` (`key`, `version`, `property`, and `namespace`, the
//!   ExternalSecret's namespace) and, for each `secrets[]` entry, `.<name>` holding every key of
//!   that Secret's data. In the URL, the `remoteRef` values are query-escaped (Go's
//!   `url.QueryEscape`); elsewhere they are raw. A PushSecret write sees `.remoteRef.remoteKey`,
//!   `.remoteRef.secretKey` (when set) and the pushed value under `.remoteRef.<remoteKey>`.
//!   Renders run on a blocking thread with a deadline and keep values out of their errors.
//! * **Secrets** ([`client::SecretScope`]): a Secret named in `secrets` must carry the label
//!   `external-secrets.io/type: webhook`. A SecretStore reads its own namespace (naming another
//!   one is an error); a ClusterSecretStore needs an explicit `namespace` on every entry; the
//!   generator reads the namespace of the ExternalSecret.
//! * **The request** ([`http`]): `method` (default `GET`; `POST` for PushSecret writes, `DELETE`
//!   for deletes), the rendered headers, `timeout` (a Go duration; none by default), `caBundle` or
//!   `caProvider` (then only those roots are trusted). `auth.ntlm` is not implemented by esr and
//!   fails the store.
//! * **The answer**: 404 is ESO's "Secret does not exist" (a PushSecret delete treats it as done);
//!   another non-2xx is `endpoint gave error <status>`. Without `result.jsonPath` a read returns the
//!   body as it is. With it, the body must be JSON ([`response`]): a path naming one value returns
//!   it (strings as they are, numbers rounded to an integer as ESO prints them, objects as JSON), a
//!   path that can match several returns the first match; a 200 whose body is not JSON, or a path
//!   that matches nothing, is an error, never "not found". `dataFrom.extract` (and the generator)
//!   need a JSON object, or a string holding one, at the path.
//! * **Metrics**: every request is counted in `externalsecret_provider_api_calls_count` as
//!   provider `Webhook`, call `HTTPRequest`; the status is `error` only when no answer came back.
//! * **Messages** never contain the rendered URL, headers, body, or the response.

pub mod client;
pub mod generator;
pub mod http;
pub mod provider;
pub mod response;
pub mod template;

/// The `spec.provider` key.
pub const PROVIDER_KEY: &str = "webhook";
/// The provider label of `externalsecret_provider_api_calls_count` (ESO's `ProviderWebhook`).
pub const METRIC_PROVIDER: &str = "Webhook";
/// The call label of every request (ESO's `CallWebhookHTTPReq`).
pub const CALL_HTTP_REQUEST: &str = "HTTPRequest";
/// The generator kind.
pub const WEBHOOK_GENERATOR: &str = "Webhook";
/// The label a Secret named in `secrets` must carry, and its value.
pub const SECRET_TYPE_LABEL: (&str, &str) = ("external-secrets.io/type", "webhook");

pub use client::WebhookClient;
pub use generator::generate;
pub use provider::WebhookStoreProvider;
