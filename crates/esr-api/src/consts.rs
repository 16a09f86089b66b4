//! Label, annotation, finalizer, field-manager, event and condition strings ESO v2.9.0 uses on the
//! wire. esr must use exactly these values to be a drop-in replacement.

// ---- groups and versions ----
/// API group of ExternalSecret, SecretStore, PushSecret and their cluster variants.
pub const GROUP: &str = "external-secrets.io";
/// API group of the generators.
pub const GENERATORS_GROUP: &str = "generators.external-secrets.io";
/// `apiVersion` of the served v1 kinds.
pub const API_VERSION_V1: &str = "external-secrets.io/v1";
/// `apiVersion` of PushSecret and ClusterPushSecret.
pub const API_VERSION_V1ALPHA1: &str = "external-secrets.io/v1alpha1";
/// `apiVersion` of the generators.
pub const GENERATORS_API_VERSION: &str = "generators.external-secrets.io/v1alpha1";

// ---- labels and annotations ----
/// Label on every Secret managed by an ExternalSecret (value `"true"`).
pub const LABEL_MANAGED: &str = "reconcile.external-secrets.io/managed";
/// Value of [`LABEL_MANAGED`].
pub const LABEL_MANAGED_VALUE: &str = "true";
/// Annotation holding the hash of the managed Secret's data (see [`crate::hash::data_hash`]).
pub const ANNOTATION_DATA_HASH: &str = "reconcile.external-secrets.io/data-hash";
/// Label holding the hash of `<es-namespace>/<es-name>` (creationPolicy Owner only).
pub const LABEL_CREATED_BY: &str = "reconcile.external-secrets.io/created-by";
/// Annotation whose change forces a refresh; mirrored from a ClusterExternalSecret to its ExternalSecrets.
pub const ANNOTATION_FORCE_SYNC: &str = "external-secrets.io/force-sync";
/// Annotation on a store that suppresses the unmaintained/deprecated provider warnings.
pub const ANNOTATION_IGNORE_MAINTENANCE_CHECKS: &str =
    "external-secrets.io/ignore-maintenance-checks";
/// Label every CRD carries.
pub const LABEL_COMPONENT: &str = "external-secrets.io/component";
/// Value of [`LABEL_COMPONENT`] on the CRDs.
pub const LABEL_COMPONENT_CONTROLLER: &str = "controller";
/// Label on a GeneratorState naming its owner (see [`crate::hash::generator_state_owner_key`]).
pub const LABEL_GENERATOR_STATE_OWNER_KEY: &str = "generators.external-secrets.io/owner-key";
/// `kubectl apply`'s annotation (included in the metadata hash like every other annotation).
pub const ANNOTATION_LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";
/// Label Kubernetes puts on every Namespace with its own name.
pub const LABEL_NAMESPACE_NAME: &str = "kubernetes.io/metadata.name";

// ---- finalizers ----
/// Finalizer of an ExternalSecret.
pub const FINALIZER_ES: &str = "externalsecrets.external-secrets.io/externalsecret-cleanup";
/// Finalizer of a ClusterExternalSecret.
pub const FINALIZER_CES: &str = "externalsecrets.external-secrets.io/clusterexternalsecret-cleanup";
/// Prefix of the finalizer a ClusterExternalSecret puts on each target Namespace (`ces-<name>` follows).
pub const FINALIZER_CES_NAMESPACE_PREFIX: &str = "externalsecrets.external-secrets.io/ces-";
/// Finalizer of a PushSecret with deletionPolicy Delete.
pub const FINALIZER_PUSHSECRET: &str = "pushsecret.externalsecrets.io/finalizer";
/// Finalizer of a store referenced by a PushSecret with deletionPolicy Delete.
pub const FINALIZER_STORE: &str = "secretstore.externalsecrets.io/finalizer";

// ---- field managers ----
/// Prefix of the field manager an ExternalSecret writes its target with (`<prefix><es-name>`).
pub const FIELD_MANAGER_PREFIX: &str = "externalsecrets.external-secrets.io/";
/// Prefix of the hashed field manager used when the plain one would exceed 63 characters.
pub const FIELD_MANAGER_SHA3_PREFIX: &str = "externalsecrets.external-secrets.io/sha3/";
/// Longest plain field-manager name.
pub const FIELD_MANAGER_MAX_LEN: usize = 63;

// ---- event sources (reporting components) ----
/// Events about ExternalSecrets and GeneratorStates.
pub const EVENT_SOURCE_ES: &str = "external-secrets";
/// Events about SecretStores.
pub const EVENT_SOURCE_SECRET_STORE: &str = "secret-store";
/// Events about ClusterSecretStores.
pub const EVENT_SOURCE_CLUSTER_SECRET_STORE: &str = "cluster-secret-store";
/// Events about PushSecrets.
pub const EVENT_SOURCE_PUSHSECRET: &str = "pushsecret";
/// Events about ClusterPushSecrets.
pub const EVENT_SOURCE_CLUSTER_PUSHSECRET: &str = "external-secrets-controller";

// ---- conditions ----
/// Condition type `Ready`.
pub const CONDITION_READY: &str = "Ready";
/// Condition type `Deleted` (internal, never persisted).
pub const CONDITION_DELETED: &str = "Deleted";
/// Condition status `True`.
pub const CONDITION_TRUE: &str = "True";
/// Condition status `False`.
pub const CONDITION_FALSE: &str = "False";
/// Condition status `Unknown`.
pub const CONDITION_UNKNOWN: &str = "Unknown";

// ExternalSecret Ready reasons.
/// The target was written.
pub const REASON_SECRET_SYNCED: &str = "SecretSynced";
/// The sync failed.
pub const REASON_SECRET_SYNCED_ERROR: &str = "SecretSyncedError";
/// The target was deleted because the provider returned no data (deletionPolicy Delete).
pub const REASON_SECRET_DELETED: &str = "SecretDeleted";
/// creationPolicy Merge and the target does not exist.
pub const REASON_SECRET_MISSING: &str = "SecretMissing";
/// Generic target written.
pub const REASON_RESOURCE_SYNCED: &str = "ResourceSynced";
/// Generic target sync failed.
pub const REASON_RESOURCE_SYNCED_ERROR: &str = "ResourceSyncedError";
/// Generic target deleted.
pub const REASON_RESOURCE_DELETED: &str = "ResourceDeleted";
/// Generic target missing (creationPolicy Merge).
pub const REASON_RESOURCE_MISSING: &str = "ResourceMissing";

// ExternalSecret Ready messages.
/// Success.
pub const MSG_SYNCED: &str = "secret synced";
/// Empty provider data with deletionPolicy Retain.
pub const MSG_RETAINED: &str = "secret retained due to DeletionPolicy=Retain";
/// Empty provider data with deletionPolicy Delete.
pub const MSG_DELETED: &str = "secret deleted due to DeletionPolicy=Delete";
/// creationPolicy Merge without a target.
pub const MSG_MISSING: &str = "secret will not be created due to CreationPolicy=Merge";
/// Provider read failed.
pub const MSG_ERROR_GET_SECRET_DATA: &str = "could not get secret data from provider";
/// Target delete failed.
pub const MSG_ERROR_DELETE_SECRET: &str = "could not delete secret";
/// Orphan cleanup failed.
pub const MSG_ERROR_DELETE_ORPHANED: &str = "could not delete orphaned secrets";
/// Target write failed.
pub const MSG_ERROR_UPDATE_SECRET: &str = "could not update secret";
/// Data change on an immutable target.
pub const MSG_ERROR_UPDATE_IMMUTABLE: &str = "could not update secret, target is immutable";
/// Owner reference could not be set.
pub const MSG_ERROR_SET_CONTROLLER_REF: &str = "failed to take ownership of target secret";
/// The target is controlled by another ExternalSecret.
pub const MSG_ERROR_SECRET_IS_OWNED: &str = "target is owned by another ExternalSecret";
/// The generic target is invalid.
pub const MSG_ERROR_INVALID_GENERIC_TARGET: &str = "invalid generic target";

// ExternalSecret event reasons and messages.
/// Event reason: target created.
pub const EVENT_REASON_CREATED: &str = "Created";
/// Event reason: target updated.
pub const EVENT_REASON_UPDATED: &str = "Updated";
/// Event reason: target deleted.
pub const EVENT_REASON_DELETED: &str = "Deleted";
/// Event reason: a remote secret is missing and was skipped.
pub const EVENT_REASON_MISSING_PROVIDER_SECRET: &str = "MissingProviderSecret";
/// Event reason (Warning): a sync failed.
pub const EVENT_REASON_UPDATE_FAILED: &str = "UpdateFailed";
/// Event reason: a deprecated parameter is used.
pub const EVENT_REASON_PARAMETER_DEPRECATED: &str = "ParameterDeprecated";
/// Event message: target created.
pub const EVENT_MSG_CREATED: &str = "secret created";
/// Event message: target updated.
pub const EVENT_MSG_UPDATED: &str = "secret updated";
/// Event message: target deleted because another name is now targeted.
pub const EVENT_MSG_DELETED_ORPHANED: &str = "secret deleted because it was orphaned";

// Store reasons and messages.
/// Store validated.
pub const REASON_STORE_VALID: &str = "Valid";
/// Store configuration invalid.
pub const REASON_INVALID_PROVIDER_CONFIG: &str = "InvalidProviderConfig";
/// The store's provider cannot be resolved (ESO v2.10+; `InvalidProviderConfig` before).
pub const REASON_PROVIDER_NOT_FOUND: &str = "ProviderNotFound";
/// Store validation result unknown.
pub const REASON_VALIDATION_UNKNOWN: &str = "ValidationUnknown";
/// Store configuration invalid (webhook).
pub const REASON_INVALID_STORE_CONFIGURATION: &str = "InvalidStoreConfiguration";
/// Store validation failed.
pub const REASON_VALIDATION_FAILED: &str = "ValidationFailed";
/// Warning event: the provider is unmaintained.
pub const REASON_STORE_UNMAINTAINED: &str = "StoreUnmaintained";
/// Warning event: the provider is deprecated.
pub const REASON_STORE_DEPRECATED: &str = "StoreDeprecated";
/// Store validated.
pub const MSG_STORE_VALIDATED: &str = "store validated";
/// The provider client could not be created.
pub const MSG_STORE_UNABLE_CREATE_CLIENT: &str = "unable to create client";
/// The provider client's validation failed.
pub const MSG_STORE_UNABLE_VALIDATE: &str = "unable to validate store";
/// The provider could not tell whether the store is valid.
pub const MSG_STORE_VALIDATION_UNKNOWN: &str = "could not determine validation status";

// Store capabilities.
/// The provider can only be read.
pub const CAPABILITIES_READ_ONLY: &str = "ReadOnly";
/// The provider can only be written.
pub const CAPABILITIES_WRITE_ONLY: &str = "WriteOnly";
/// The provider can be read and written.
pub const CAPABILITIES_READ_WRITE: &str = "ReadWrite";

// ClusterExternalSecret.
/// Ready=False message when any namespace failed.
pub const MSG_CES_NAMESPACES_FAILED: &str = "one or more namespaces failed";
/// Failure reason: an ExternalSecret not owned by this ClusterExternalSecret exists.
pub const MSG_CES_ES_ALREADY_EXISTS: &str = "external secret already exists in namespace";

// PushSecret.
/// Ready reason: pushed.
pub const REASON_PUSHSECRET_SYNCED: &str = "Synced";
/// Ready reason (and Warning event reason): push failed.
pub const REASON_PUSHSECRET_ERRORED: &str = "Errored";
/// Ready reason: the source Secret was deleted.
pub const REASON_PUSHSECRET_SOURCE_DELETED: &str = "SourceDeleted";
/// Success message.
pub const MSG_PUSHSECRET_SYNCED: &str = "PushSecret synced successfully";
/// Suffix of the success message with updatePolicy IfNotExists.
pub const MSG_PUSHSECRET_IF_NOT_EXISTS_SUFFIX: &str = ". Existing secrets in providers unchanged.";

// Provider errors.
/// Text of the sentinel "not found" error providers return.
pub const NO_SECRET_ERR: &str = "Secret does not exist";
/// Message a store using a provider esr does not implement gets (esr-specific).
pub const MSG_PROVIDER_NOT_SUPPORTED_PREFIX: &str = "provider is not supported by esr: ";

// Defaults.
/// Default `refreshInterval` of ExternalSecrets and PushSecrets.
pub const DEFAULT_REFRESH_INTERVAL: &str = "1h0m0s";
/// Default controller class.
pub const DEFAULT_CONTROLLER_CLASS: &str = "default";
