//! ESO's template function library (sprig + ESO functions).

use crate::func::FuncMap;

/// Registers the function library in `map`.
pub fn install(_map: &mut FuncMap) {}
