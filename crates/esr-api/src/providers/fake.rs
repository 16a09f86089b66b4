//! The `fake` provider: an in-memory store whose content is given in the store spec (for tests and demos).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Spec of the `fake` provider.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FakeProvider {
    /// The secrets the store serves.
    pub data: Vec<FakeProviderData>,
    /// Result the store's validation reports: 0 Ready, 1 Unknown, 2 Error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validation_result: Option<i64>,
}

/// One secret served by the `fake` provider.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FakeProviderData {
    /// Remote key.
    pub key: String,
    /// Value (a JSON object's text can be addressed with `property`).
    pub value: String,
    /// Version; a reference must ask for exactly this version (empty matches empty).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}
