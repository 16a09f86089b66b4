//! Generators for `dataFrom[].sourceRef.generatorRef` (and PushSecret `selector.generatorRef`):
//! `Password` and `Fake` built in, `ClusterGenerator` wrapping either, and a registry so other
//! crates (e.g. the Vault provider's `VaultDynamicSecret`) plug in their kinds.
//!
//! Regeneration follows ESO without GeneratorState: a generator runs on every sync of the
//! ExternalSecret (so on each refresh), and its output replaces the previous value.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use async_trait::async_trait;
use esr_api::generators::{
    ClusterGenerator, Fake, FakeSpec, Password, PasswordEncoding, PasswordSpec,
};
use esr_api::v1::{GeneratorRef, GeneratorRefKind};
use kube::{Api, Client};

/// Generated data.
pub type Generated = BTreeMap<String, Vec<u8>>;

/// ESO's default symbol set of the Password generator.
pub const DEFAULT_SYMBOLS: &str = "~!@#$%^&*()_+`-={}|[]\\:\"<>?,./";
/// Default password length.
pub const DEFAULT_LENGTH: usize = 24;
const LOWER: &str = "abcdefghijklmnopqrstuvwxyz";
const UPPER: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZ";
const DIGITS: &str = "0123456789";

/// Password errors (go-password's messages).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PasswordError {
    /// digits + symbols > length.
    #[error("number of digits and symbols must be less than total length")]
    ExceedsTotalLength,
    /// Not enough distinct letters without repeats.
    #[error("number of letters exceeds available letters and repeats are not allowed")]
    LettersExceedsAvailable,
    /// Not enough distinct digits without repeats.
    #[error("number of digits exceeds available digits and repeats are not allowed")]
    DigitsExceedsAvailable,
    /// Not enough distinct symbols without repeats.
    #[error("number of symbols exceeds available symbols and repeats are not allowed")]
    SymbolsExceedsAvailable,
    /// Negative count.
    #[error("length, digits and symbols must not be negative")]
    Negative,
    /// `length` above [`esr_api::generators::MAX_PASSWORD_LENGTH`].
    #[error("length must be at most {}", esr_api::generators::MAX_PASSWORD_LENGTH)]
    TooLong,
    /// Bad secretKeys.
    #[error("secretKeys must be non-empty and unique")]
    SecretKeys,
}

/// Why a generator run failed. The texts are ESO's (none contains a generated value).
#[derive(Debug, Clone, thiserror::Error)]
pub enum GeneratorError {
    /// The generator object could not be read.
    #[error(
        "unable to get generator {kind}/{name}: {}",
        crate::common::events::kube_error_text(source)
    )]
    Get {
        /// The generator kind.
        kind: String,
        /// The generator name.
        name: String,
        /// The Kubernetes error.
        source: Arc<kube::Error>,
    },
    /// The Password generator's spec is invalid.
    #[error("{0}")]
    Password(#[from] PasswordError),
    /// A plugged-in generator failed (its provider error kind kept).
    #[error("{0}")]
    Provider(#[from] esr_provider::ProviderError),
    /// A `ClusterGenerator` wrapping a kind esr does not implement.
    #[error("ClusterGenerator {name}: generator kind {kind:?} ({field}) is not supported by esr")]
    UnsupportedCluster {
        /// The ClusterGenerator's name.
        name: String,
        /// `spec.kind`.
        kind: String,
        /// The set `spec.generator` field.
        field: String,
    },
    /// A generator kind esr does not implement.
    #[error("generator kind {0} is not supported by esr")]
    Unsupported(String),
    /// No generator registry was installed.
    #[error("generators are not available (no generator registry installed)")]
    NotInstalled,
}

/// Effective password settings after ESO's defaults (length 24, digits and symbols 25% of length).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PasswordConfig {
    /// Total length.
    pub length: usize,
    /// Number of digits.
    pub digits: usize,
    /// Number of symbols.
    pub symbols: usize,
    /// Symbol alphabet.
    pub symbol_characters: String,
    /// No upper-case letters.
    pub no_upper: bool,
    /// Characters may repeat.
    pub allow_repeat: bool,
    /// Output encoding.
    pub encoding: PasswordEncoding,
    /// `prefix`: put before the generated characters.
    pub prefix: String,
    /// `suffix`: put after the generated characters.
    pub suffix: String,
}

fn count(v: i64) -> Result<usize, PasswordError> {
    usize::try_from(v).map_err(|_| PasswordError::Negative)
}

impl PasswordConfig {
    /// Applies ESO's defaults to a spec.
    pub fn from_spec(spec: &PasswordSpec) -> Result<Self, PasswordError> {
        if spec.length > esr_api::generators::MAX_PASSWORD_LENGTH {
            return Err(PasswordError::TooLong);
        }
        let length = if spec.length > 0 {
            count(spec.length)?
        } else {
            DEFAULT_LENGTH
        };
        let quarter = (length as f32 * 0.25) as usize;
        Ok(PasswordConfig {
            length,
            digits: spec.digits.map(count).transpose()?.unwrap_or(quarter),
            symbols: spec.symbols.map(count).transpose()?.unwrap_or(quarter),
            symbol_characters: spec
                .symbol_characters
                .clone()
                .unwrap_or_else(|| DEFAULT_SYMBOLS.to_string()),
            no_upper: spec.no_upper,
            allow_repeat: spec.allow_repeat,
            encoding: spec.encoding.unwrap_or_default(),
            prefix: spec.prefix.clone().unwrap_or_default(),
            suffix: spec.suffix.clone().unwrap_or_default(),
        })
    }
}

/// Generates one password with go-password's semantics: `length - digits - symbols` letters,
/// then the digits and symbols, in a uniformly random order; without `allowRepeat` no character
/// occurs twice. go-password inserts each character at a random position, which yields the same
/// distribution as drawing the characters and then shuffling them; that is done here, in time
/// linear in the length. Uses the thread-local CSPRNG.
pub fn generate_password(c: &PasswordConfig) -> Result<String, PasswordError> {
    use rand::seq::{IndexedRandom, SliceRandom};
    let letters: Vec<char> = if c.no_upper {
        LOWER.chars().collect()
    } else {
        LOWER.chars().chain(UPPER.chars()).collect()
    };
    let digits: Vec<char> = DIGITS.chars().collect();
    let symbols: Vec<char> = c.symbol_characters.chars().collect();
    let chars = c
        .length
        .checked_sub(c.digits.saturating_add(c.symbols))
        .ok_or(PasswordError::ExceedsTotalLength)?;
    if !c.allow_repeat {
        if chars > letters.len() {
            return Err(PasswordError::LettersExceedsAvailable);
        }
        if c.digits > digits.len() {
            return Err(PasswordError::DigitsExceedsAvailable);
        }
        if c.symbols > symbols.len() {
            return Err(PasswordError::SymbolsExceedsAvailable);
        }
    }
    let mut rng = rand::rng();
    let mut out: Vec<char> = Vec::with_capacity(c.length);
    for (n, set, short) in [
        (chars, &letters, PasswordError::LettersExceedsAvailable),
        (c.digits, &digits, PasswordError::DigitsExceedsAvailable),
        (c.symbols, &symbols, PasswordError::SymbolsExceedsAvailable),
    ] {
        if n > 0 && set.is_empty() {
            return Err(PasswordError::SymbolsExceedsAvailable);
        }
        if c.allow_repeat {
            out.extend((0..n).filter_map(|_| set.choose(&mut rng).copied()));
        } else {
            // distinct characters not used yet (the alphabet is short: no repeats means the
            // length is at most its size)
            let mut avail: Vec<char> = Vec::with_capacity(set.len());
            for ch in set.iter() {
                if !out.contains(ch) && !avail.contains(ch) {
                    avail.push(*ch);
                }
            }
            if avail.len() < n {
                return Err(short);
            }
            out.extend(avail.choose_multiple(&mut rng, n).copied());
        }
    }
    out.shuffle(&mut rng);
    Ok(out.into_iter().collect())
}

/// Encodes a password (`raw`, `base64`, `base64url`, `base32`, `hex`; Go's padded encodings).
pub fn encode(p: &[u8], e: PasswordEncoding) -> Vec<u8> {
    use base64::Engine;
    match e {
        PasswordEncoding::Raw => p.to_vec(),
        PasswordEncoding::Base64 => base64::engine::general_purpose::STANDARD
            .encode(p)
            .into_bytes(),
        PasswordEncoding::Base64url => base64::engine::general_purpose::URL_SAFE
            .encode(p)
            .into_bytes(),
        PasswordEncoding::Base32 => data_encoding::BASE32.encode(p).into_bytes(),
        PasswordEncoding::Hex => hex::encode(p).into_bytes(),
    }
}

/// The Password generator: one password per `secretKeys` entry (default key `password`), each
/// `prefix` + `length` generated characters + `suffix` (ESO v2.12), then encoded.
pub fn password(spec: &PasswordSpec) -> Result<Generated, PasswordError> {
    let c = PasswordConfig::from_spec(spec)?;
    let keys = spec
        .secret_keys
        .clone()
        .filter(|k| !k.is_empty())
        .unwrap_or_else(|| vec!["password".to_string()]);
    let mut out = Generated::new();
    for k in keys {
        if k.is_empty() || out.contains_key(&k) {
            return Err(PasswordError::SecretKeys);
        }
        let p = format!("{}{}{}", c.prefix, generate_password(&c)?, c.suffix);
        out.insert(k, encode(p.as_bytes(), c.encoding));
    }
    Ok(out)
}

/// The Fake generator: its `data` as-is.
pub fn fake(spec: &FakeSpec) -> Generated {
    spec.data
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.as_bytes().to_vec()))
        .collect()
}

/// One run of a pluggable generator.
#[derive(Clone)]
pub struct GenerateRequest<'a> {
    /// The generator kind (`VaultDynamicSecret`, …).
    pub kind: &'a str,
    /// The generator object's name (a `ClusterGenerator`'s name for cluster generators).
    pub name: &'a str,
    /// The referrer's namespace; credential references resolve here.
    pub namespace: &'a str,
    /// The generator's `spec` (for a `ClusterGenerator`, the inner kind's spec).
    pub spec: &'a serde_json::Value,
    /// Who consumes the output, stable across refreshes (e.g.
    /// `ExternalSecret/<ns>/<name>/dataFrom/<i>`), so stateful generators can keep one lease per
    /// consumer and renew it instead of issuing new credentials.
    pub consumer: &'a str,
    /// A client for Kubernetes reads (credential Secrets, TokenRequest).
    pub client: &'a Client,
}

impl std::fmt::Debug for GenerateRequest<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GenerateRequest")
            .field("kind", &self.kind)
            .field("name", &self.name)
            .field("namespace", &self.namespace)
            .field("consumer", &self.consumer)
            .finish_non_exhaustive()
    }
}

/// The consumer key of an ExternalSecret's `dataFrom[index]` generator.
pub fn es_consumer(namespace: &str, name: &str, index: usize) -> String {
    format!("ExternalSecret/{namespace}/{name}/dataFrom/{index}")
}

/// A pluggable generator kind (e.g. `VaultDynamicSecret`).
#[async_trait]
pub trait Generator: Send + Sync {
    /// Generates data for one request.
    async fn generate(&self, req: &GenerateRequest<'_>) -> Result<Generated, GeneratorError>;
}

/// Generators by kind plus the client to read generator objects.
#[derive(Clone)]
pub struct Generators {
    client: Client,
    plugins: HashMap<String, Arc<dyn Generator>>,
}

impl Generators {
    /// Built-in kinds only.
    pub fn new(client: Client) -> Self {
        Generators {
            client,
            plugins: HashMap::new(),
        }
    }

    /// Registers a kind (the `kind` of the generator resource, e.g. `VaultDynamicSecret`); its
    /// objects are read as `generators.external-secrets.io/v1alpha1` resources of that kind.
    #[must_use]
    pub fn with(mut self, kind: &str, g: Arc<dyn Generator>) -> Self {
        self.plugins.insert(kind.to_string(), g);
        self
    }

    async fn plugin_spec(
        &self,
        kind: &str,
        namespace: &str,
        name: &str,
    ) -> Result<serde_json::Value, GeneratorError> {
        let gvk =
            kube::api::GroupVersionKind::gvk(esr_api::consts::GENERATORS_GROUP, "v1alpha1", kind);
        let plural = format!("{}s", kind.to_ascii_lowercase());
        let ar = kube::api::ApiResource::from_gvk_with_plural(&gvk, &plural);
        let api: Api<kube::api::DynamicObject> =
            Api::namespaced_with(self.client.clone(), namespace, &ar);
        let o = api.get(name).await.map_err(|e| GeneratorError::Get {
            kind: kind.to_string(),
            name: name.to_string(),
            source: Arc::new(e),
        })?;
        Ok(o.data.get("spec").cloned().unwrap_or_default())
    }

    /// Runs the generator a `generatorRef` points at (namespaced kinds in `namespace`) for
    /// `consumer` (see [`GenerateRequest::consumer`]).
    pub async fn generate(
        &self,
        r: &GeneratorRef,
        namespace: &str,
        consumer: &str,
    ) -> Result<Generated, GeneratorError> {
        let get_err = |e: kube::Error| GeneratorError::Get {
            kind: r.kind.as_str().to_string(),
            name: r.name.clone(),
            source: Arc::new(e),
        };
        match r.kind {
            GeneratorRefKind::Password => {
                let api: Api<Password> = Api::namespaced(self.client.clone(), namespace);
                let g = api.get(&r.name).await.map_err(get_err)?;
                Ok(password(&g.spec)?)
            }
            GeneratorRefKind::Fake => {
                let api: Api<Fake> = Api::namespaced(self.client.clone(), namespace);
                let g = api.get(&r.name).await.map_err(get_err)?;
                Ok(fake(&g.spec))
            }
            GeneratorRefKind::ClusterGenerator => {
                let api: Api<ClusterGenerator> = Api::all(self.client.clone());
                let g = api.get(&r.name).await.map_err(get_err)?;
                let spec = &g.spec.generator;
                if let Some(p) = &spec.password_spec {
                    return Ok(password(p)?);
                }
                if let Some(f) = &spec.fake_spec {
                    return Ok(fake(f));
                }
                let kind = serde_json::to_value(g.spec.kind)
                    .ok()
                    .and_then(|v| v.as_str().map(String::from))
                    .unwrap_or_default();
                let inner = serde_json::to_value(spec).unwrap_or_default();
                let (key, value) = inner
                    .as_object()
                    .and_then(|o| o.iter().find(|(_, v)| !v.is_null()))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .unwrap_or_default();
                match self.plugins.get(&kind) {
                    Some(p) => {
                        p.generate(&GenerateRequest {
                            kind: &kind,
                            name: &r.name,
                            namespace,
                            spec: &value,
                            consumer,
                            client: &self.client,
                        })
                        .await
                    }
                    None => Err(GeneratorError::UnsupportedCluster {
                        name: r.name.clone(),
                        kind,
                        field: key,
                    }),
                }
            }
            other => {
                let kind = other.as_str();
                match self.plugins.get(kind) {
                    Some(p) => {
                        let spec = self.plugin_spec(kind, namespace, &r.name).await?;
                        p.generate(&GenerateRequest {
                            kind,
                            name: &r.name,
                            namespace,
                            spec: &spec,
                            consumer,
                            client: &self.client,
                        })
                        .await
                    }
                    None => Err(GeneratorError::Unsupported(kind.to_string())),
                }
            }
        }
    }
}

#[cfg(test)]
#[path = "generators_tests.rs"]
mod tests;
