//! esr-template: ESO's template engine v2 in Rust.
//!
//! * [`value`]: Go dynamic values with their Go types ([`Value`]).
//! * [`func`]: function signatures and the function map ([`FuncDef`], [`FuncMap`]).
//! * [`fmt`]: Go's `fmt` printing (`Sprint`, `Sprintf`, `%v`).
//! * [`funcs`]: ESO's function library (sprig + ESO's own functions).
//! * [`limits`]: execution limits.

pub mod fmt;
pub mod func;
pub mod funcs;
pub mod limits;
pub mod value;

pub use func::{FuncDef, FuncError, FuncMap, GoFn, Signature};
pub use value::{GoObject, GoType, Kind, MapRef, TypedSlice, Value};
