//! A thin layer over the SSM (Parameter Store) SDK client: every call is counted under ESO's
//! `AWS/ParameterStore` labels, guarded by the throttle gate, and its error classified.
//!
//! Reads always ask for decryption (`WithDecryption`), so SecureString parameters come back in
//! clear text. A parameter version or label is selected with AWS's `name:selector` syntax.

use std::collections::BTreeMap;

use aws_sdk_ssm::Client;
use aws_sdk_ssm::types::{
    ParameterStringFilter, ParameterTier, ParameterType, ResourceTypeForTagging, Tag,
};

use crate::api::ThrottleGate;
use crate::calls::{CallLog, PROVIDER_PS};
use crate::error::{AwsError, AwsErrorKind, from_sdk};
use crate::fetcher::{Batch, FetchKey, Source};
use crate::spec::Version;

/// Maximum names per GetParameters call (an AWS limit).
pub const MAX_GET_PARAMETERS: usize = 10;

/// A parameter as Parameter Store returned it.
#[derive(Clone, PartialEq, Eq)]
pub struct Parameter {
    pub name: String,
    pub arn: String,
    pub version: i64,
    pub value: String,
}

impl std::fmt::Debug for Parameter {
    // Never print the value.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Parameter")
            .field("name", &self.name)
            .field("version", &self.version)
            .finish_non_exhaustive()
    }
}

fn parameter(p: &aws_sdk_ssm::types::Parameter, fallback_name: &str) -> Parameter {
    Parameter {
        name: p.name().unwrap_or(fallback_name).to_string(),
        arn: p.arn().unwrap_or_default().to_string(),
        version: p.version(),
        value: p.value().unwrap_or_default().to_string(),
    }
}

/// `name` with an optional version or label selector (`name:3`, `name:prod`).
pub fn with_selector(name: &str, version: &Version) -> String {
    match version {
        Version::Current => name.to_string(),
        Version::Stage(s) | Version::Id(s) => format!("{name}:{s}"),
    }
}

/// What PutParameter writes.
#[derive(Debug, Clone, Default)]
pub struct PutInput {
    pub name: String,
    pub value: String,
    /// `String`, `StringList` or `SecureString`.
    pub parameter_type: String,
    pub description: String,
    /// For SecureString only.
    pub key_id: Option<String>,
    /// `Advanced` only (ESO sends no tier for Standard).
    pub tier: Option<String>,
    pub policies: Option<String>,
    /// Tags are only allowed when creating (overwrite = false).
    pub tags: BTreeMap<String, String>,
    pub overwrite: bool,
}

/// A `DescribeParameters` filter (`tag:<key>` Equals, or `Path` Recursive).
pub fn tag_filter(key: &str, value: &str) -> Result<ParameterStringFilter, AwsError> {
    ParameterStringFilter::builder()
        .key(format!("tag:{key}"))
        .option("Equals")
        .values(value)
        .build()
        .map_err(|e| AwsError::invalid(format!("invalid tag filter {key}: {e}")))
}

/// The recursive `Path` filter of `DescribeParameters`.
pub fn path_filter(path: &str) -> Result<ParameterStringFilter, AwsError> {
    ParameterStringFilter::builder()
        .key("Path")
        .option("Recursive")
        .values(path)
        .build()
        .map_err(|e| AwsError::invalid(format!("invalid path filter {path}: {e}")))
}

/// Parameter Store API with call counting.
#[derive(Debug)]
pub struct PsApi {
    client: Client,
    calls: CallLog,
    gate: ThrottleGate,
}

fn not_found_text(mut e: AwsError, name: &str) -> AwsError {
    if e.is_not_found() {
        e.message = format!("Parameter does not exist: {name}: {}", e.message);
    }
    e
}

fn aws_tags(tags: &BTreeMap<String, String>) -> Result<Vec<Tag>, AwsError> {
    tags.iter()
        .map(|(k, v)| {
            Tag::builder()
                .key(k)
                .value(v)
                .build()
                .map_err(|e| AwsError::invalid(format!("invalid tag {k}: {e}")))
        })
        .collect()
}

impl PsApi {
    pub fn new(client: Client, calls: CallLog) -> Self {
        Self {
            client,
            calls,
            gate: ThrottleGate::for_service("AWS Parameter Store"),
        }
    }

    pub fn calls(&self) -> &CallLog {
        &self.calls
    }

    fn finish<T>(&self, op: &'static str, res: Result<T, AwsError>) -> Result<T, AwsError> {
        self.gate.finish(&self.calls, PROVIDER_PS, op, res)
    }

    /// GetParameter (reads decrypt; existence checks do not); `name` may carry a `:version` /
    /// `:label` selector.
    pub async fn get_parameter(&self, name: &str, decrypt: bool) -> Result<Parameter, AwsError> {
        const OP: &str = "GetParameter";
        self.gate.check(OP)?;
        let res = self
            .client
            .get_parameter()
            .name(name)
            .with_decryption(decrypt)
            .send()
            .await
            .map_err(|e| from_sdk(OP, &e))
            .and_then(|o| {
                o.parameter().map(|p| parameter(p, name)).ok_or_else(|| {
                    AwsError::not_found(format!("GetParameter: {name}: no parameter"))
                })
            })
            .map_err(|e| not_found_text(e, name));
        self.finish(OP, res)
    }

    /// GetParameters with decryption (≤ 10 names): names AWS does not know are reported as
    /// not-found errors.
    pub async fn get_parameters(&self, names: &[String]) -> Result<Batch<Parameter>, AwsError> {
        const OP: &str = "GetParameters";
        self.gate.check(OP)?;
        let res = self
            .client
            .get_parameters()
            .set_names(Some(names.to_vec()))
            .with_decryption(true)
            .send()
            .await
            .map_err(|e| from_sdk(OP, &e));
        let out = self.finish(OP, res)?;
        Ok(Batch {
            values: out.parameters().iter().map(|p| parameter(p, "")).collect(),
            errors: out
                .invalid_parameters()
                .iter()
                .map(|n| {
                    (
                        n.clone(),
                        AwsError::not_found(format!(
                            "Parameter does not exist: {n}: GetParameters: ParameterNotFound"
                        )),
                    )
                })
                .collect(),
        })
    }

    /// GetParametersByPath, recursive, with decryption, all pages.
    pub async fn get_parameters_by_path(&self, path: &str) -> Result<Vec<Parameter>, AwsError> {
        const OP: &str = "GetParametersByPath";
        let mut out = Vec::new();
        let mut token: Option<String> = None;
        loop {
            self.gate.check(OP)?;
            let res = self
                .client
                .get_parameters_by_path()
                .path(path)
                .recursive(true)
                .with_decryption(true)
                .set_next_token(token.clone())
                .send()
                .await
                .map_err(|e| from_sdk(OP, &e));
            let page = self.finish(OP, res)?;
            out.extend(page.parameters().iter().map(|p| parameter(p, "")));
            token = page.next_token().map(str::to_string);
            if token.is_none() {
                break;
            }
        }
        Ok(out)
    }

    /// DescribeParameters with filters, all pages; returns parameter names. ESO's call label is
    /// `DescribeParameter`.
    pub async fn describe_parameter_names(
        &self,
        filters: &[ParameterStringFilter],
    ) -> Result<Vec<String>, AwsError> {
        const OP: &str = "DescribeParameter";
        let mut out = Vec::new();
        let mut token: Option<String> = None;
        loop {
            self.gate.check(OP)?;
            let res = self
                .client
                .describe_parameters()
                .set_parameter_filters(if filters.is_empty() {
                    None
                } else {
                    Some(filters.to_vec())
                })
                .set_next_token(token.clone())
                .send()
                .await
                .map_err(|e| from_sdk(OP, &e));
            let page = self.finish(OP, res)?;
            out.extend(
                page.parameters()
                    .iter()
                    .filter_map(|p| p.name().map(str::to_string)),
            );
            token = page.next_token().map(str::to_string);
            if token.is_none() {
                break;
            }
        }
        Ok(out)
    }

    /// ListTagsForResource of a parameter.
    pub async fn list_tags(&self, name: &str) -> Result<BTreeMap<String, String>, AwsError> {
        const OP: &str = "ListTagsForResource";
        self.gate.check(OP)?;
        let res = self
            .client
            .list_tags_for_resource()
            .resource_type(ResourceTypeForTagging::Parameter)
            .resource_id(name)
            .send()
            .await
            .map(|o| {
                o.tag_list()
                    .iter()
                    .map(|t| (t.key().to_string(), t.value().to_string()))
                    .collect()
            })
            .map_err(|e| from_sdk(OP, &e))
            .map_err(|mut e| {
                e.message = format!("error listing tags {}", e.message);
                e
            });
        self.finish(OP, res)
    }

    pub async fn put_parameter(&self, input: &PutInput) -> Result<(), AwsError> {
        const OP: &str = "PutParameter";
        self.gate.check(OP)?;
        let mut req = self
            .client
            .put_parameter()
            .name(&input.name)
            .value(&input.value)
            .r#type(ParameterType::from(input.parameter_type.as_str()))
            .overwrite(input.overwrite)
            .description(&input.description)
            .set_key_id(input.key_id.clone())
            .set_tier(input.tier.as_deref().map(ParameterTier::from))
            .set_policies(input.policies.clone());
        if !input.tags.is_empty() {
            req = req.set_tags(Some(aws_tags(&input.tags)?));
        }
        let res = req
            .send()
            .await
            .map(|_| ())
            .map_err(|e| from_sdk(OP, &e))
            .map_err(|mut e| {
                e.message = format!("unexpected error pushing parameter {}: {}", input.name, e);
                e
            });
        self.finish(OP, res)
    }

    pub async fn add_tags(
        &self,
        name: &str,
        tags: &BTreeMap<String, String>,
    ) -> Result<(), AwsError> {
        const OP: &str = "AddTagsToResource";
        self.gate.check(OP)?;
        let res = self
            .client
            .add_tags_to_resource()
            .resource_type(ResourceTypeForTagging::Parameter)
            .resource_id(name)
            .set_tags(Some(aws_tags(tags)?))
            .send()
            .await
            .map(|_| ())
            .map_err(|e| from_sdk(OP, &e));
        self.finish(OP, res)
    }

    pub async fn remove_tags(&self, name: &str, keys: Vec<String>) -> Result<(), AwsError> {
        const OP: &str = "RemoveTagsFromResource";
        self.gate.check(OP)?;
        let res = self
            .client
            .remove_tags_from_resource()
            .resource_type(ResourceTypeForTagging::Parameter)
            .resource_id(name)
            .set_tag_keys(Some(keys))
            .send()
            .await
            .map(|_| ())
            .map_err(|e| from_sdk(OP, &e));
        self.finish(OP, res)
    }

    pub async fn delete_parameter(&self, name: &str) -> Result<(), AwsError> {
        const OP: &str = "DeleteParameter";
        self.gate.check(OP)?;
        let res = self
            .client
            .delete_parameter()
            .name(name)
            .send()
            .await
            .map(|_| ())
            .map_err(|e| from_sdk(OP, &e))
            .map_err(|e| not_found_text(e, name));
        self.finish(OP, res)
    }
}

#[async_trait::async_trait]
impl Source for PsApi {
    type Value = Parameter;
    const MAX_BATCH: usize = MAX_GET_PARAMETERS;

    /// `GetParameter` (with the version selector), or for metadata `ListTagsForResource` with the
    /// tags as a JSON object in the value.
    async fn load_one(&self, key: &FetchKey) -> Result<Parameter, AwsError> {
        let name = with_selector(&key.id, &key.version);
        if !key.metadata {
            return self.get_parameter(&name, true).await;
        }
        let tags = self.list_tags(&name).await?;
        let value = serde_json::to_string(&tags)
            .map_err(|e| AwsError::invalid(format!("cannot encode tags of {name}: {e}")))?;
        Ok(Parameter {
            name: key.id.clone(),
            arn: String::new(),
            version: 0,
            value,
        })
    }

    async fn load_batch(&self, ids: &[String]) -> Result<Batch<Parameter>, AwsError> {
        self.get_parameters(ids).await
    }

    fn ids_of(v: &Parameter) -> [&str; 2] {
        [&v.name, &v.arn]
    }

    fn batch_denied(e: &AwsError) -> bool {
        e.kind == AwsErrorKind::Auth && e.message.starts_with("GetParameters: AccessDenied")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors() {
        assert_eq!(with_selector("/a/b", &Version::Current), "/a/b");
        assert_eq!(with_selector("/a/b", &Version::Stage("3".into())), "/a/b:3");
        assert_eq!(
            with_selector("/a/b", &Version::Stage("prod".into())),
            "/a/b:prod"
        );
    }

    #[test]
    fn parameter_debug_hides_value() {
        let p = Parameter {
            name: "/n".into(),
            arn: String::new(),
            version: 1,
            value: "hunter2".into(),
        };
        assert!(!format!("{p:?}").contains("hunter2"));
    }

    #[test]
    fn filters() {
        let f = tag_filter("team", "a").unwrap();
        assert_eq!(f.key(), "tag:team");
        assert_eq!(f.option(), Some("Equals"));
        assert_eq!(f.values(), ["a".to_string()]);
        let f = path_filter("/app").unwrap();
        assert_eq!(f.key(), "Path");
        assert_eq!(f.option(), Some("Recursive"));
    }
}
