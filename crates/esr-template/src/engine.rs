//! The public engine API: parse a template, execute it, and ESO's `execute()`.

use std::collections::BTreeMap;
use std::rc::Rc;

use crate::exec::{ExecError, ExecOptions};
use crate::func::FuncMap;
use crate::parse::ParseError;
use crate::value::Value;

pub use crate::parse::Template;

/// An error of the template engine: parse or execution, with Go's text.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EngineError {
    /// The template text does not parse.
    #[error("{0}")]
    Parse(ParseError),
    /// Execution failed (or hit a resource limit).
    #[error("{0}")]
    Exec(ExecError),
}

impl Template {
    /// Parses `text` as Go's `template.New(name).Funcs(funcs).Parse(text)` does.
    pub fn parse(name: &str, text: &str, funcs: &FuncMap) -> Result<Template, ParseError> {
        crate::parse::parse(name, text, funcs)
    }

    /// [`Template::parse`] with custom action delimiters (Go's `Delims`; empty
    /// strings mean `{{` and `}}`).
    pub fn parse_with_delims(
        name: &str,
        text: &str,
        funcs: &FuncMap,
        left: &str,
        right: &str,
    ) -> Result<Template, ParseError> {
        crate::parse::parse_delims(name, text, funcs, left, right)
    }

    /// Executes the template on `data` (`Execute`).
    pub fn execute(
        &self,
        funcs: &FuncMap,
        data: &Value,
        opts: &ExecOptions,
    ) -> Result<Vec<u8>, ExecError> {
        crate::exec::execute(self, funcs, data, None, opts)
    }

    /// Executes the template on a secret data map, as ESO does: the data is a
    /// `map[string]string` whose values are the raw bytes (`string(v)`).
    pub fn execute_data(
        &self,
        funcs: &FuncMap,
        data: &BTreeMap<String, Vec<u8>>,
        opts: &ExecOptions,
    ) -> Result<Vec<u8>, ExecError> {
        let (root, over) = data_map(data);
        let raw = match &root {
            Value::StringMap(m) if !over.is_empty() => Some((m.clone(), Rc::new(over))),
            _ => None,
        };
        crate::exec::execute(self, funcs, &root, raw, opts)
    }
}

/// The template data of ESO: `map[string]string` of the secret values. Values that
/// are not valid UTF-8 are returned separately (they are served as
/// [`Value::BinaryString`] by field access, `index` and `range`).
fn data_map(data: &BTreeMap<String, Vec<u8>>) -> (Value, BTreeMap<String, Value>) {
    let mut m = BTreeMap::new();
    let mut over = BTreeMap::new();
    for (k, v) in data {
        match std::str::from_utf8(v) {
            Ok(s) => {
                m.insert(k.clone(), s.to_string());
            }
            Err(_) => {
                m.insert(k.clone(), String::from_utf8_lossy(v).into_owned());
                over.insert(k.clone(), Value::from_go_bytes(v.clone()));
            }
        }
    }
    (Value::string_map(m), over)
}

/// ESO's `execute()` for one template text: `template.New("key")
/// .Option("missingkey=error").Funcs(funcs).Parse(text)` then `Execute` over the
/// data map. Returns the output bytes.
pub fn execute_eso(
    text: &str,
    data: &BTreeMap<String, Vec<u8>>,
    funcs: &FuncMap,
    opts: &ExecOptions,
) -> Result<Vec<u8>, EngineError> {
    let t = Template::parse("key", text, funcs).map_err(EngineError::Parse)?;
    t.execute_data(funcs, data, opts).map_err(EngineError::Exec)
}
