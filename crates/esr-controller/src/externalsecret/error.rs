//! [`SyncError`]: why syncing an ExternalSecret failed, typed from the provider call to the
//! reconcile result.
//!
//! `Display` is ESO's exact text (it becomes the Warning event, the `Ready` condition detail and
//! the log line); none of the texts contains a secret value. The provider's
//! [`ErrorKind`](esr_provider::ErrorKind) survives every wrapping, so the requeue can honour a
//! [`Throttled`](esr_provider::ErrorKind::Throttled) retry-after hint ([`SyncError::retry_after`])
//! and the `reason` label of `externalsecret_sync_calls_error` can say why a sync failed
//! ([`SyncError::metric_label`]).

use esr_provider::{ProviderError, StoreError, StoreKind};

use crate::common::generators::GeneratorError;
use crate::externalsecret::pipeline::PipelineError;
use crate::externalsecret::plan::GenericTargetError;

/// Why a sync failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum SyncError {
    /// A provider call (or store resolution) failed; the provider's message as is.
    #[error("{0}")]
    Provider(#[from] ProviderError),
    /// `dataFrom[].find` failed at the provider.
    #[error("error getting all secrets: {0}")]
    FindAll(ProviderError),
    /// A store cannot be used (missing, not ready, denied to the namespace, unreadable).
    #[error("{0}")]
    Store(#[from] StoreError),
    /// A referenced store belongs to another controller class.
    #[error("{kind} {name:?} belongs to another controller class")]
    ForeignStore {
        /// The store kind.
        kind: StoreKind,
        /// The store name.
        name: String,
    },
    /// The `rewrite` chain failed.
    #[error("error applying rewrite to keys: {0}")]
    Rewrite(PipelineError),
    /// `conversionStrategy` failed (a key collision).
    #[error("error applying conversion strategy {strategy} to keys: {source}")]
    Conversion {
        /// `Default` or `Unicode`.
        strategy: &'static str,
        /// The failure (a key collision).
        source: ProviderError,
    },
    /// A key is not a valid Secret key.
    #[error("invalid secret keys (TIP: use rewrite or conversionStrategy to change keys): {0}")]
    InvalidKeys(PipelineError),
    /// `decodingStrategy` failed.
    #[error("error applying decoding strategy {strategy} to data: {source}")]
    Decoding {
        /// `None`, `Base64`, `Base64URL` or `Auto`.
        strategy: &'static str,
        /// The failure.
        source: PipelineError,
    },
    /// `nullBytePolicy: Fail` and a value holds a NUL byte.
    #[error("{0}")]
    NullByte(PipelineError),
    /// A `generatorRef` failed.
    #[error("{0}")]
    Generator(#[from] GeneratorError),
    /// A `dataFrom[]` source without `extract`, `find` or a usable `generatorRef`.
    #[error("missing generatorRef")]
    MissingGeneratorRef,
    /// A fetched `data[]` ref has no result (a bug; never expected).
    #[error("internal error: missing fetch result")]
    MissingResult,
    /// `dataFrom[index]` failed.
    #[error("error processing spec.dataFrom[{index}].{field}, err: {source}")]
    DataFrom {
        /// Position in `dataFrom[]`.
        index: usize,
        /// `extract`, `find` or `sourceRef.generatorRef`.
        field: &'static str,
        /// The failure.
        source: Box<SyncError>,
    },
    /// `data[index]` failed.
    #[error("error processing spec.data[{index}] (key: {key}), err: {source}")]
    Data {
        /// Position in `data[]`.
        index: usize,
        /// `remoteRef.key`.
        key: String,
        /// The failure.
        source: Box<SyncError>,
    },
    /// `deletionPolicy: Delete` with empty data and a creationPolicy other than Owner.
    #[error("unable to delete secret {target}: creationPolicy={policy} is not Owner")]
    DeleteNotOwner {
        /// The target Secret.
        target: String,
        /// The creationPolicy.
        policy: &'static str,
    },
    /// The target is immutable and its data would change.
    #[error("unable to update secret {target}: secret is immutable")]
    Immutable {
        /// The target Secret.
        target: String,
    },
    /// `target.manifest` cannot be written.
    #[error("{0}")]
    GenericTarget(GenericTargetError),
    /// The new target Secret could not be built.
    #[error("{0}")]
    Mutate(MutateError),
    /// The existing target Secret could not be updated.
    #[error("unable to mutate secret {target}: {source}")]
    MutateExisting {
        /// The target Secret.
        target: String,
        /// The failure.
        source: MutateError,
    },
    /// Replacing the target Secret failed at the Kubernetes API.
    #[error("unable to update secret {target}: {message}")]
    Update {
        /// The target Secret.
        target: String,
        /// The API server's message.
        message: String,
    },
    /// Creating or deleting the target, or deleting an orphaned Secret, failed at the Kubernetes
    /// API.
    #[error("{message}")]
    Write {
        /// The API server's message.
        message: String,
    },
    /// The metadata-only write of an immutable target failed as well.
    #[error("{previous}; {message}")]
    ImmutableWrite {
        /// The immutability failure.
        previous: Box<SyncError>,
        /// The API server's message.
        message: String,
    },
}

/// Why the target Secret could not be built from the provider data.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MutateError {
    /// Another ExternalSecret controls the target.
    #[error("secret is owned by another ExternalSecret: {owner}")]
    IsOwned {
        /// The owning ExternalSecret.
        owner: String,
    },
    /// Another controller controls the target (creationPolicy Owner).
    #[error(
        "could not set controller reference on secret: Object {namespace}/{target} is already owned by another {kind} controller {owner}"
    )]
    SetControllerRef {
        /// The target's namespace.
        namespace: String,
        /// The target Secret.
        target: String,
        /// The controller's kind.
        kind: String,
        /// The controller's name.
        owner: String,
    },
    /// The template failed.
    #[error("could not apply template: {0}")]
    Template(String),
}

impl SyncError {
    /// Wraps the failure of `dataFrom[index]` (`field` is `extract`, `find` or
    /// `sourceRef.generatorRef`).
    pub fn at_data_from(self, index: usize, field: &'static str) -> Self {
        SyncError::DataFrom {
            index,
            field,
            source: Box::new(self),
        }
    }

    /// Wraps the failure of `data[index]` (remote key `key`).
    pub fn at_data(self, index: usize, key: impl Into<String>) -> Self {
        SyncError::Data {
            index,
            key: key.into(),
            source: Box::new(self),
        }
    }

    /// The provider error at the root of this failure, if any.
    pub fn provider(&self) -> Option<&ProviderError> {
        match self {
            SyncError::Provider(e) | SyncError::FindAll(e) => Some(e),
            SyncError::Generator(GeneratorError::Provider(e)) => Some(e),
            SyncError::Store(StoreError::Lookup { source, .. }) => Some(source),
            SyncError::DataFrom { source, .. } | SyncError::Data { source, .. } => {
                source.provider()
            }
            _ => None,
        }
    }

    /// The backend's retry-after hint when it throttled us.
    pub fn retry_after(&self) -> Option<std::time::Duration> {
        self.provider()
            .filter(|e| e.is_throttled())
            .and_then(ProviderError::retry_after)
    }

    /// The `reason` label of `externalsecret_sync_calls_error`: a short, stable snake_case word,
    /// one of [`SYNC_ERROR_REASONS`](crate::metrics::SYNC_ERROR_REASONS) (described in
    /// [`crate::metrics`]).
    pub fn metric_label(&self) -> &'static str {
        if let Some(e) = self.provider() {
            return e.metric_label();
        }
        match self {
            SyncError::DataFrom { source, .. } | SyncError::Data { source, .. } => {
                source.metric_label()
            }
            SyncError::ForeignStore { .. } | SyncError::Store(_) => "store",
            SyncError::Rewrite(_)
            | SyncError::Conversion { .. }
            | SyncError::InvalidKeys(_)
            | SyncError::Decoding { .. }
            | SyncError::NullByte(_) => "data",
            SyncError::Generator(_) | SyncError::MissingGeneratorRef => "generator",
            SyncError::Mutate(MutateError::Template(_))
            | SyncError::MutateExisting {
                source: MutateError::Template(_),
                ..
            } => "template",
            SyncError::Mutate(_) | SyncError::MutateExisting { .. } => "ownership",
            SyncError::Immutable { .. } | SyncError::ImmutableWrite { .. } => "immutable",
            SyncError::DeleteNotOwner { .. } | SyncError::GenericTarget(_) => "policy",
            SyncError::Update { .. } | SyncError::Write { .. } => "kubernetes",
            SyncError::MissingResult | SyncError::Provider(_) | SyncError::FindAll(_) => "internal",
        }
    }
}

/// Two sync errors are equal when they give the same reason and the same text (the provider
/// error's context and source are not compared).
impl PartialEq for SyncError {
    fn eq(&self, other: &Self) -> bool {
        self.metric_label() == other.metric_label() && self.to_string() == other.to_string()
    }
}

impl Eq for SyncError {}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn the_provider_kind_and_retry_after_survive_wrapping() {
        let e = SyncError::Provider(ProviderError::throttled(
            "rate exceeded",
            Some(Duration::from_secs(7)),
        ))
        .at_data(0, "db");
        assert_eq!(
            e.to_string(),
            "error processing spec.data[0] (key: db), err: rate exceeded"
        );
        assert_eq!(e.metric_label(), "throttled");
        assert_eq!(e.retry_after(), Some(Duration::from_secs(7)));

        let find = SyncError::FindAll(ProviderError::auth("denied")).at_data_from(2, "find");
        assert_eq!(
            find.to_string(),
            "error processing spec.dataFrom[2].find, err: error getting all secrets: denied"
        );
        assert_eq!(find.metric_label(), "auth");
        assert_eq!(find.retry_after(), None);
        // Only throttling errors carry a retry-after.
        let hinted = SyncError::Provider(
            ProviderError::transient("later").with_retry_after(Duration::from_secs(3)),
        );
        assert_eq!(hinted.retry_after(), None);
    }

    #[test]
    fn every_label_is_listed_and_snake_case() {
        let samples = [
            SyncError::Provider(ProviderError::not_found()),
            SyncError::ForeignStore {
                kind: StoreKind::SecretStore,
                name: "s".into(),
            },
            SyncError::NullByte(PipelineError::NullByte("k".into())),
            SyncError::MissingGeneratorRef,
            SyncError::Mutate(MutateError::Template("x".into())),
            SyncError::Mutate(MutateError::IsOwned { owner: "o".into() }),
            SyncError::Immutable { target: "t".into() },
            SyncError::GenericTarget(GenericTargetError::Disabled),
            SyncError::Write {
                message: "m".into(),
            },
            SyncError::MissingResult,
        ];
        let labels: Vec<&str> = samples.iter().map(SyncError::metric_label).collect();
        assert_eq!(
            labels,
            [
                "not_found",
                "store",
                "data",
                "generator",
                "template",
                "ownership",
                "immutable",
                "policy",
                "kubernetes",
                "internal"
            ]
        );
        for l in labels {
            assert!(crate::metrics::SYNC_ERROR_REASONS.contains(&l), "{l}");
            assert!(l.chars().all(|c| c.is_ascii_lowercase() || c == '_'), "{l}");
        }
    }
}
