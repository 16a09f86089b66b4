//! Why a PushSecret could not be pushed: [`PushError`] for one failure, [`Failures`] for the
//! failures of one pass (joined with `; ` in the Ready condition and the Warning event, as ESO
//! joins them). The `Display` texts are ESO's; a Kubernetes error shows the API server's message
//! ([`kube_error_text`]), and no text carries a secret value.

use esr_provider::store::StoreError;
use esr_provider::{ProviderError, StoreKind};
use esr_template::TemplateError;

use crate::common::events::kube_error_text;
use crate::common::generators::GeneratorError;
use crate::pushsecret::plan::MSG_NO_SOURCE;

/// Two source keys that convert to the same name (`conversionStrategy`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("secret name collision during conversion: {0}")]
pub struct KeyCollision(pub String);

/// What is wrong with one `dataTo[]` entry.
#[derive(Debug, thiserror::Error)]
pub enum DataToError {
    /// No `storeRef`.
    #[error("storeRef is required")]
    NoStoreRef,
    /// A `storeRef` with neither a name nor a label selector.
    #[error("storeRef must have name or labelSelector")]
    NoStoreName,
    /// A named `storeRef` that `secretStoreRefs` does not name.
    #[error("storeRef {0:?} not found in secretStoreRefs")]
    NotInStoreRefs(String),
    /// A label-selector `storeRef` matching none of the resolved stores.
    #[error("storeRef labelSelector does not match any store in secretStoreRefs")]
    NoStoreMatches,
    /// The `storeRef.labelSelector` cannot be evaluated.
    #[error("invalid labelSelector: {0}")]
    LabelSelector(String),
    /// `conversionStrategy` made two keys collide.
    #[error("conversion failed: {0}")]
    Conversion(#[source] KeyCollision),
    /// `match.regexp` does not compile.
    #[error("invalid match.regexp: {0}")]
    MatchRegexp(#[source] regex::Error),
    /// The rewrites turned a key into the empty string.
    #[error("empty remote key produced for source key {0:?}")]
    EmptyRemoteKey(String),
}

/// Why one `rewrite[]` step failed.
#[derive(Debug, thiserror::Error)]
pub enum RewriteError {
    /// `regexp.source` does not compile.
    #[error("invalid regexp: {0}")]
    Regexp(#[source] regex::Error),
    /// `transform.template` failed (parse or execution).
    #[error("{0}")]
    Transform(#[source] TemplateError),
}

/// Why `templateFrom` inputs could not be read.
#[derive(Debug, thiserror::Error)]
pub enum TemplateFromError {
    /// The read failed.
    #[error("{0}")]
    Read(#[source] ProviderError),
    /// A referenced ConfigMap does not exist.
    #[error("configmaps {0:?} not found")]
    ConfigMapNotFound(String),
    /// A referenced Secret does not exist.
    #[error("secrets {0:?} not found")]
    SecretNotFound(String),
}

/// Why no secrets client could be built for a store.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The store cannot be used (missing, not ready, denied).
    #[error("{0}")]
    Store(#[source] StoreError),
    /// The provider refused the store or failed to build its client.
    #[error("{0}")]
    Provider(#[source] ProviderError),
}

/// One failure of a PushSecret reconcile.
#[derive(Debug, thiserror::Error)]
pub enum PushError {
    /// The spec names no source.
    #[error("no secret selector provided")]
    NoSelector,
    /// The source Secret cannot be read and nothing is to be cleaned up.
    #[error("{MSG_NO_SOURCE}")]
    NoSource,
    /// A `secretStoreRefs[]` entry with neither a name nor a label selector.
    #[error("refStore Name must be provided")]
    NoStoreName,
    /// A `dataTo[]` entry is invalid.
    #[error("dataTo[{index}]: {cause}")]
    DataTo {
        /// Index in `dataTo`.
        index: usize,
        /// What is wrong.
        #[source]
        cause: DataToError,
    },
    /// A `dataTo[].rewrite[]` step failed.
    #[error("dataTo[{index}].rewrite[{rewrite}]: {cause}")]
    Rewrite {
        /// Index in `dataTo`.
        index: usize,
        /// Index in `rewrite`.
        rewrite: usize,
        /// What failed.
        #[source]
        cause: RewriteError,
    },
    /// Two entries push to the same remote destination of a store.
    #[error("duplicate remote destination {remote:?} for store {store}")]
    DuplicateRemote {
        /// `<remoteKey>[/<property>]`.
        remote: String,
        /// `<Kind>/<name>`.
        store: String,
    },
    /// The source keys collide after `conversionStrategy`.
    #[error("could not apply conversion strategy to keys: {0}")]
    Conversion(#[source] KeyCollision),
    /// `match.secretKey` is not in the (converted) source.
    #[error("secret key {0} does not exist")]
    MissingKey(String),
    /// The push request could not be built from the source.
    #[error("{0}")]
    Request(#[source] ProviderError),
    /// The named source Secret could not be read.
    #[error("could not get source secret: {}", kube_error_text(.0))]
    GetSource(#[source] kube::Error),
    /// The generator source failed.
    #[error("could not resolve secret from generator ref {kind}/{name}: {cause}")]
    Generator {
        /// Generator kind.
        kind: String,
        /// Generator name.
        name: String,
        /// Why.
        #[source]
        cause: GeneratorError,
    },
    /// A label selector cannot be turned into a LIST selector.
    #[error("could not convert labels: {0}")]
    Labels(#[source] kube::core::ParseExpressionError),
    /// The label-selected source Secrets could not be listed.
    #[error("could not list source secrets: {0}")]
    ListSources(#[source] ProviderError),
    /// Label-selected stores could not be listed.
    #[error("could not list {} Stores: {}", list_noun(*.kind), kube_error_text(.source))]
    ListStores {
        /// Store kind.
        kind: StoreKind,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// A named store could not be read.
    #[error("could not get {kind} {name:?}, {}", kube_error_text(.source))]
    GetStore {
        /// Store kind.
        kind: StoreKind,
        /// Store name.
        name: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// A named store does not exist.
    #[error("{0}")]
    Store(#[source] StoreError),
    /// `templateFrom` inputs could not be read.
    #[error("error fetching templateFrom data: {0}")]
    TemplateFrom(#[source] TemplateFromError),
    /// The template failed.
    #[error("{0}")]
    Template(#[source] TemplateError),
    /// No client for a store to push to.
    #[error("could not get secrets client for store {store}: {cause}")]
    PushClient {
        /// Store name.
        store: String,
        /// Why.
        #[source]
        cause: ClientError,
    },
    /// A push entry could not be prepared (before any provider call).
    #[error("set secret failed: {0}")]
    Prepare(#[source] Box<PushError>),
    /// `updatePolicy: IfNotExists`: the existence check failed.
    #[error("could not verify if secret exists in store: {0}")]
    Exists(#[source] ProviderError),
    /// The provider refused the push.
    #[error(
        "set secret failed: could not write remote ref {remote} to target secretstore {store}: {cause}"
    )]
    Push {
        /// `<remoteKey>[/<property>]`.
        remote: String,
        /// Store name.
        store: String,
        /// Why.
        #[source]
        cause: ProviderError,
    },
    /// No client for a store to delete from.
    #[error("{store}: {cause}")]
    DeleteClient {
        /// `<Kind>/<name>`.
        store: String,
        /// Why.
        #[source]
        cause: ClientError,
    },
    /// The provider refused a delete.
    #[error("{store} {remote}: {cause}")]
    Delete {
        /// `<Kind>/<name>`.
        store: String,
        /// `<remoteKey>[/<property>]`.
        remote: String,
        /// Why.
        #[source]
        cause: ProviderError,
    },
}

fn list_noun(kind: StoreKind) -> &'static str {
    match kind {
        StoreKind::SecretStore => "Secret",
        StoreKind::ClusterSecretStore => "cluster Secret",
    }
}

impl PushError {
    /// A `dataTo[index]` error.
    pub fn data_to(index: usize, cause: DataToError) -> Self {
        PushError::DataTo { index, cause }
    }
}

/// The failures of one pass, in the order they happened: `Display` joins them with `; `.
#[derive(Debug, Default)]
pub struct Failures(pub Vec<PushError>);

impl Failures {
    /// Whether nothing failed.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl std::fmt::Display for Failures {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl From<PushError> for Failures {
    fn from(e: PushError) -> Self {
        Failures(vec![e])
    }
}
