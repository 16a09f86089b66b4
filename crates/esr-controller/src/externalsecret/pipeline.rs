//! The data pipeline of an ExternalSecret, as pure functions.
//!
//! Provider results come in as maps of key → bytes; this module converts and validates keys,
//! decodes values, checks for NUL bytes, applies the `rewrite` chain and assembles the final
//! data map from `dataFrom[]` and `data[]` in ESO's order, with ESO's error texts:
//!
//! - `dataFrom[i]`, in order: `find` (all matching secrets) and `extract` (one secret as a map)
//!   go through rewrite (or ConvertKeys when there is no rewrite) → ValidateKeys → decoding →
//!   NUL-byte check; a `generatorRef` through rewrite → ValidateKeys only. Later entries overwrite
//!   earlier keys. Errors read `error processing spec.dataFrom[i].{find|extract|sourceRef.generatorRef}, err: …`.
//! - `data[i]`: one value → decoding → NUL-byte check, stored under `secretKey` (overriding
//!   `dataFrom`). Errors read `error processing spec.data[i] (key: k), err: …`.
//! - A missing remote secret is skipped (with a `MissingProviderSecret` event) unless
//!   `deletionPolicy=Retain`, where it is an error.
//! - ConvertKeys turns characters other than letters, digits, `-`, `.` and `_` into `_`
//!   (`Default`) or `_U%04x_` (`Unicode`); a collision is an error. ValidateKeys drops empty keys
//!   and rejects keys over 253 characters or with other characters, hinting `(TIP: use rewrite or
//!   conversionStrategy to change keys)`.
//! - Decoding: `Base64` is Go's padded standard encoding, `Base64URL` the padded URL encoding,
//!   `Auto` tries both and keeps the raw value otherwise, `None` keeps it.
//! - Rewrite merge parses every value as a JSON object; keys are sorted, the priority keys moved
//!   last in their order; a duplicate key is a conflict (unless ignored). `Extract` outputs the
//!   merged keys, `JSON` writes the merged object under `into` and keeps the input keys.

use std::collections::BTreeMap;

use base64::Engine as _;

use crate::externalsecret::error::SyncError;

/// Secret data: key → raw bytes, sorted by key.
pub type DataMap = BTreeMap<String, Vec<u8>>;

pub use esr_api::v1::{
    DecodingStrategy, MergeConflictPolicy as ConflictPolicy, MergePriorityPolicy as PriorityPolicy,
    MergeStrategy, NullBytePolicy,
};
pub use esr_provider::ConversionStrategy;
use esr_provider::keys::convert_keys;

/// The name ESO prints for a decodingStrategy in error messages.
pub fn decoding_name(d: DecodingStrategy) -> &'static str {
    match d {
        DecodingStrategy::None => "None",
        DecodingStrategy::Base64 => "Base64",
        DecodingStrategy::Base64Url => "Base64URL",
        DecodingStrategy::Auto => "Auto",
    }
}

/// One `dataFrom[].rewrite[]` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rewrite {
    /// `regexp: {source, target}`: Go `ReplaceAllString` on every key.
    Regexp {
        /// The regular expression.
        source: String,
        /// The replacement, with `$1` / `${name}` expansion.
        target: String,
    },
    /// `transform: {template}`: a Go template evaluated with `.value` = key.
    Transform {
        /// The template text.
        template: String,
    },
    /// `merge: {...}`: merge JSON object values.
    Merge {
        /// Target key for the JSON strategy.
        into: String,
        /// Keys merged last, in this order.
        priority: Vec<String>,
        /// What to do when a priority key is missing.
        priority_policy: PriorityPolicy,
        /// What to do when keys collide.
        conflict_policy: ConflictPolicy,
        /// Extract or JSON.
        strategy: MergeStrategy,
    },
}

/// Errors of the pipeline. Display texts follow ESO's wording; none of them contains a value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PipelineError {
    /// A key is longer than 253 characters.
    #[error("key has length {len} but max is 253: (following is truncated): {truncated}")]
    KeyTooLong {
        /// Length in bytes.
        len: usize,
        /// The first 253 bytes (at a char boundary).
        truncated: String,
    },
    /// A key contains a character Kubernetes does not allow.
    #[error(
        "key has invalid character {ch}, only alphanumeric, '-', '.' and '_' are allowed: {key}"
    )]
    InvalidKeyChar {
        /// The offending character.
        ch: char,
        /// The key.
        key: String,
    },
    /// A value could not be decoded.
    #[error("error decoding key {key}: {reason}")]
    Decode {
        /// The key whose value failed.
        key: String,
        /// Decoder error (no value content).
        reason: String,
    },
    /// A value contains a NUL byte and the policy is Fail.
    #[error("secret data contains a null byte at key {0}, and nullBytePolicy is Fail")]
    NullByte(String),
    /// The regular expression of a regexp rewrite does not compile.
    #[error("regexp failed with failed to compile: {0}")]
    RegexCompile(String),
    /// A transform rewrite failed.
    #[error("transform failed with {0}")]
    Transform(String),
    /// A merge rewrite failed.
    #[error("merge failed with {0}")]
    Merge(String),
    /// A rewrite operation failed; `index` is its position.
    #[error("failed rewrite operation[{index}]: {source}")]
    RewriteOp {
        /// Index in `rewrite[]`.
        index: usize,
        /// The failure.
        source: Box<PipelineError>,
    },
}

fn is_valid_key_char(c: char) -> bool {
    c.is_alphanumeric() || c == '-' || c == '.' || c == '_'
}

/// ValidateKeys: drops empty keys, rejects long keys and invalid characters.
pub fn validate_keys(mut input: DataMap) -> Result<DataMap, PipelineError> {
    input.remove("");
    for key in input.keys() {
        if key.len() > 253 {
            let mut cut = 253;
            while !key.is_char_boundary(cut) {
                cut -= 1;
            }
            return Err(PipelineError::KeyTooLong {
                len: key.len(),
                truncated: key[..cut].to_string(),
            });
        }
        if let Some(ch) = key.chars().find(|c| !is_valid_key_char(*c)) {
            return Err(PipelineError::InvalidKeyChar {
                ch,
                key: key.clone(),
            });
        }
    }
    Ok(input)
}

/// Decodes one value with a strategy.
pub fn decode_value(
    strategy: DecodingStrategy,
    key: &str,
    value: Vec<u8>,
) -> Result<Vec<u8>, PipelineError> {
    use base64::engine::general_purpose::{STANDARD, URL_SAFE};
    // The decoder's own text (`Invalid symbol 33, offset 7.`) reveals a byte of the value and its
    // position: the error names only the key and the strategy.
    let err = |_: base64::DecodeError| PipelineError::Decode {
        key: key.to_string(),
        reason: match strategy {
            DecodingStrategy::Base64Url => "value is not valid Base64URL",
            _ => "value is not valid Base64",
        }
        .to_string(),
    };
    match strategy {
        DecodingStrategy::None => Ok(value),
        DecodingStrategy::Base64 => STANDARD.decode(&value).map_err(err),
        DecodingStrategy::Base64Url => URL_SAFE.decode(&value).map_err(err),
        DecodingStrategy::Auto => match STANDARD.decode(&value) {
            Ok(v) => Ok(v),
            Err(_) => match URL_SAFE.decode(&value) {
                Ok(v) => Ok(v),
                Err(_) => Ok(value),
            },
        },
    }
}

/// Decodes every value of a map.
pub fn decode_map(strategy: DecodingStrategy, input: DataMap) -> Result<DataMap, PipelineError> {
    input
        .into_iter()
        .map(|(k, v)| decode_value(strategy, &k, v).map(|v| (k, v)))
        .collect()
}

/// The NUL byte check.
pub fn check_null_bytes(policy: NullBytePolicy, data: &DataMap) -> Result<(), PipelineError> {
    if policy == NullBytePolicy::Fail
        && let Some((k, _)) = data.iter().find(|(_, v)| v.contains(&0))
    {
        return Err(PipelineError::NullByte(k.clone()));
    }
    Ok(())
}

/// Renders a rewrite `transform` template for one key (`.value` = key).
pub trait KeyTransformer: Send + Sync {
    /// Returns the new key, or [`PipelineError::Transform`] (its text never contains a secret
    /// value: keys only).
    fn transform_key(&self, template: &str, key: &str) -> Result<String, PipelineError>;
}

/// Go `Regexp.ReplaceAllString`: the Rust `regex` crate uses the same RE2 syntax and the same
/// `$1` / `$name` / `${name}` / `$$` expansion rules (longest name, unknown groups expand to "").
pub fn rewrite_regexp(
    source: &str,
    target: &str,
    input: DataMap,
) -> Result<DataMap, PipelineError> {
    let re = regex::Regex::new(source).map_err(|e| PipelineError::RegexCompile(e.to_string()))?;
    let mut out = DataMap::new();
    for (k, v) in input {
        let nk = re.replace_all(&k, target).into_owned();
        out.insert(nk, v);
    }
    Ok(out)
}

fn json_value_bytes(v: &serde_json::Value) -> Result<Vec<u8>, PipelineError> {
    use serde_json::Value;
    Ok(match v {
        Value::String(s) => s.clone().into_bytes(),
        Value::Null => Vec::new(),
        Value::Bool(b) => b.to_string().into_bytes(),
        Value::Number(n) => format_go_float(n).into_bytes(),
        Value::Object(_) | Value::Array(_) => {
            serde_json::to_vec(&sorted_json(v)).map_err(|e| PipelineError::Merge(e.to_string()))?
        }
    })
}

/// Go decodes JSON numbers into float64 and prints them with `FormatFloat(f, 'f', -1, 64)`.
fn format_go_float(n: &serde_json::Number) -> String {
    match n.as_f64() {
        Some(f) if f.is_finite() => {
            if f == f.trunc() && f.abs() < 1e21 {
                format!("{f:.0}")
            } else {
                format!("{f}")
            }
        }
        _ => n.to_string(),
    }
}

/// Go marshals maps with sorted keys.
fn sorted_json(v: &serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match v {
        Value::Object(m) => {
            let sorted: BTreeMap<String, Value> =
                m.iter().map(|(k, v)| (k.clone(), sorted_json(v))).collect();
            Value::Object(sorted.into_iter().collect())
        }
        Value::Array(a) => Value::Array(a.iter().map(sorted_json).collect()),
        other => other.clone(),
    }
}

/// Go's `json.Encoder` with `SetEscapeHTML(false)`: serde_json never escapes HTML, so a plain
/// serialisation of the key-sorted value is identical.
fn go_json_marshal(v: &serde_json::Value) -> Result<Vec<u8>, PipelineError> {
    serde_json::to_vec(&sorted_json(v)).map_err(|e| PipelineError::Merge(e.to_string()))
}

/// Rewrite `merge`.
pub fn rewrite_merge(
    into: &str,
    priority: &[String],
    priority_policy: PriorityPolicy,
    conflict_policy: ConflictPolicy,
    strategy: MergeStrategy,
    input: DataMap,
) -> Result<DataMap, PipelineError> {
    let mut keys: Vec<&String> = input.keys().filter(|k| !priority.contains(k)).collect();
    keys.extend(priority.iter());
    let mut merged = serde_json::Map::new();
    let mut conflicts: Vec<String> = Vec::new();
    for key in keys {
        let Some(value) = input.get(key) else {
            if priority_policy == PriorityPolicy::IgnoreNotFound {
                continue;
            }
            return Err(PipelineError::Merge(format!(
                "key {key:?} not found in input map"
            )));
        };
        let obj: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(value)
            .map_err(|e| {
                PipelineError::Merge(format!("failed to unmarshal JSON: {}", redact_serde(&e)))
            })?;
        // Go iterates a map in random order; keys inside one object never conflict with each other.
        let obj: BTreeMap<String, serde_json::Value> = obj.into_iter().collect();
        for (k, v) in obj {
            if merged.contains_key(&k) {
                conflicts.push(k.clone());
            }
            merged.insert(k, v);
        }
    }
    if conflict_policy != ConflictPolicy::Ignore && !conflicts.is_empty() {
        return Err(PipelineError::Merge(format!(
            "conflicts: {}",
            conflicts.join(", ")
        )));
    }
    match strategy {
        MergeStrategy::Extract => {
            let mut out = DataMap::new();
            for (k, v) in &merged {
                out.insert(k.clone(), json_value_bytes(v)?);
            }
            Ok(out)
        }
        MergeStrategy::Json => {
            if into.is_empty() {
                return Err(PipelineError::Merge("missing 'into' field".to_string()));
            }
            let bytes = go_json_marshal(&serde_json::Value::Object(merged))?;
            let mut out = input;
            out.insert(into.to_string(), bytes);
            Ok(out)
        }
    }
}

/// serde_json error messages only carry positions and categories, never input content.
fn redact_serde(e: &serde_json::Error) -> String {
    e.to_string()
}

/// Rewrite `transform`.
pub fn rewrite_transform(
    template: &str,
    transformer: &dyn KeyTransformer,
    input: DataMap,
) -> Result<DataMap, PipelineError> {
    let mut out = DataMap::new();
    for (k, v) in input {
        let nk = transformer.transform_key(template, &k)?;
        out.insert(nk, v);
    }
    Ok(out)
}

/// Applies a rewrite chain in order (ESO `RewriteMap`).
pub fn rewrite_map(
    ops: &[Rewrite],
    transformer: &dyn KeyTransformer,
    input: DataMap,
) -> Result<DataMap, PipelineError> {
    let mut out = input;
    for (index, op) in ops.iter().enumerate() {
        let res = match op {
            Rewrite::Regexp { source, target } => rewrite_regexp(source, target, out),
            Rewrite::Transform { template } => rewrite_transform(template, transformer, out),
            Rewrite::Merge {
                into,
                priority,
                priority_policy,
                conflict_policy,
                strategy,
            } => rewrite_merge(
                into,
                priority,
                *priority_policy,
                *conflict_policy,
                *strategy,
                out,
            ),
        };
        out = res.map_err(|e| PipelineError::RewriteOp {
            index,
            source: Box::new(e),
        })?;
    }
    Ok(out)
}

/// Options of one `dataFrom[]` entry (extract or find) that the chain needs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DataFromOptions {
    /// The rewrite chain.
    pub rewrite: Vec<Rewrite>,
    /// Applied only when there is no rewrite.
    pub conversion: ConversionStrategy,
    /// Value decoding.
    pub decoding: DecodingStrategy,
    /// NUL byte check.
    pub null_bytes: NullBytePolicy,
}

/// The chain ESO applies to the map of one `dataFrom[]` extract/find entry:
/// rewrite (or ConvertKeys when there are no rewrites) → ValidateKeys → DecodeMap → NUL check.
/// Errors carry ESO's formats (without the `spec.dataFrom[i]` prefix, added by [`assemble`]).
pub fn process_data_from_map(
    opts: &DataFromOptions,
    transformer: &dyn KeyTransformer,
    input: DataMap,
) -> Result<DataMap, SyncError> {
    let mut map = rewrite_map(&opts.rewrite, transformer, input).map_err(SyncError::Rewrite)?;
    if opts.rewrite.is_empty() {
        let strategy = match opts.conversion {
            ConversionStrategy::Default => "Default",
            ConversionStrategy::Unicode => "Unicode",
        };
        map = convert_keys(opts.conversion, map)
            .map_err(|source| SyncError::Conversion { strategy, source })?;
    }
    map = validate_keys(map).map_err(SyncError::InvalidKeys)?;
    map = decode_map(opts.decoding, map).map_err(|source| SyncError::Decoding {
        strategy: decoding_name(opts.decoding),
        source,
    })?;
    check_null_bytes(opts.null_bytes, &map).map_err(SyncError::NullByte)?;
    Ok(map)
}

/// The chain ESO applies to one `data[]` value: Decode → NUL check.
pub fn process_data_value(
    key: &str,
    decoding: DecodingStrategy,
    null_bytes: NullBytePolicy,
    value: Vec<u8>,
) -> Result<Vec<u8>, SyncError> {
    let v = decode_value(decoding, key, value).map_err(|source| SyncError::Decoding {
        strategy: decoding_name(decoding),
        source,
    })?;
    if null_bytes == NullBytePolicy::Fail && v.contains(&0) {
        return Err(SyncError::NullByte(PipelineError::NullByte(
            key.to_string(),
        )));
    }
    Ok(v)
}

/// Which kind of `dataFrom[]` entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataFromKind {
    /// `extract`.
    Extract,
    /// `find`.
    Find,
    /// `sourceRef.generatorRef`.
    Generator,
}

impl DataFromKind {
    fn field(self) -> &'static str {
        match self {
            DataFromKind::Extract => "extract",
            DataFromKind::Find => "find",
            DataFromKind::Generator => "sourceRef.generatorRef",
        }
    }
}

/// What the provider returned for one entry (after the per-entry chain), or why it failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EntryResult<T> {
    /// Success.
    Ok(T),
    /// The provider said "not found" (ESO `NoSecretErr`).
    NotFound(SyncError),
    /// Any other failure (message without values).
    Err(SyncError),
}

/// One processed `dataFrom[]` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataFromResult {
    /// Kind of entry.
    pub kind: DataFromKind,
    /// The result.
    pub result: EntryResult<DataMap>,
}

/// One processed `data[]` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataResult {
    /// `secretKey`.
    pub secret_key: String,
    /// `remoteRef.key` (for the event text).
    pub remote_key: String,
    /// The result.
    pub result: EntryResult<Vec<u8>>,
}

/// A Normal `MissingProviderSecret` event produced while assembling.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingEvent {
    /// The event message.
    pub message: String,
}

/// Assembled provider data plus the events to emit.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Assembled {
    /// Final data map.
    pub data: DataMap,
    /// `MissingProviderSecret` events.
    pub missing: Vec<MissingEvent>,
}

/// Merges the processed entries in ESO's order: `dataFrom[]` in order (later wins), then `data[]`
/// (overrides). NotFound entries are skipped with an event unless `retain` (deletionPolicy=Retain),
/// in which case they are errors (`Secret does not exist`). Errors are wrapped with ESO's texts.
pub fn assemble(
    data_from: Vec<DataFromResult>,
    data: Vec<DataResult>,
    retain: bool,
) -> Result<Assembled, SyncError> {
    let mut out = Assembled::default();
    for (i, entry) in data_from.into_iter().enumerate() {
        match entry.result {
            EntryResult::Ok(map) => out.data.extend(map),
            EntryResult::NotFound(e) if retain => {
                return Err(e.at_data_from(i, entry.kind.field()));
            }
            EntryResult::NotFound(_) => out.missing.push(MissingEvent {
                message: format!("secret does not exist at provider using spec.dataFrom[{i}]"),
            }),
            EntryResult::Err(e) => return Err(e.at_data_from(i, entry.kind.field())),
        }
    }
    for (i, entry) in data.into_iter().enumerate() {
        match entry.result {
            EntryResult::Ok(v) => {
                out.data.insert(entry.secret_key, v);
            }
            EntryResult::NotFound(e) if retain => return Err(e.at_data(i, entry.remote_key)),
            EntryResult::NotFound(_) => out.missing.push(MissingEvent {
                message: format!(
                    "secret does not exist at provider using spec.dataFrom[{i}] (key={})",
                    entry.remote_key
                ),
            }),
            EntryResult::Err(e) => return Err(e.at_data(i, entry.remote_key)),
        }
    }
    Ok(out)
}

#[cfg(test)]
#[path = "pipeline_tests.rs"]
mod tests;
