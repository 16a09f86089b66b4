//! esr-template: ESO's template engine v2 in Rust.
//!
//! * [`value`]: Go dynamic values with their Go types ([`Value`]).
//! * [`func`]: function signatures and the function map ([`FuncDef`], [`FuncMap`]).
//! * [`fmt`]: Go's `fmt` printing (`Sprint`, `Sprintf`, `%v`).
//! * [`funcs`]: ESO's function library (sprig + ESO's own functions).
//! * [`limits`]: execution limits, and the bounds of one render (memory
//!   budget, deadline, cancellation: [`RenderLimits`]).
//! * [`Template`], [`execute_eso`]: Go `text/template` parser and executor.
//! * [`render_secret`], [`rewrite_transform`]: ESO's execution model (what the
//!   controller calls).

pub mod engine;
pub mod eso;
pub mod exec;
pub mod fmt;
pub mod func;
pub mod funcs;
mod lex;
pub mod limits;
mod parse;
pub mod value;

pub use engine::{EngineError, Template, execute_eso};
pub use eso::{
    RenderInput, RenderedSecret, TemplateError, TemplateSources, eso_funcs, render_secret,
    render_secret_with, rewrite_transform, rewrite_transform_with, set_template_delimiters,
};
pub use exec::{ExecError, ExecOptions};
pub use func::{FuncDef, FuncError, FuncMap, GoFn, Signature};
pub use limits::{RenderLimits, Stop};
pub use parse::ParseError;
pub use value::{GoObject, GoType, Kind, MapRef, TypedSlice, Value};
