//! Template functions: signatures, the function map, function errors.
//!
//! # Interface (shared with the function library in `funcs/`)
//!
//! Go's `text/template` calls functions through reflection and checks every call
//! against the function's Go signature *before* calling it. The messages are part
//! of the observable behaviour:
//!
//! * arity: `wrong number of args for upper: want 1 got 2`,
//!   `wrong number of args for list: want at least 0 got …` (variadic);
//! * argument types: a value whose Go type is not assignable to the parameter type
//!   is `wrong type for value; expected int; got int64` (`repeat (add 1 2) "x"`);
//!   a literal that cannot be converted is `expected integer; found 3.5`;
//! * untyped literals convert to the parameter type (`repeat 3 "x"` passes an
//!   `int`, `3` for a `float64` parameter passes `3.0`, `"s"` only fits `string`
//!   or `interface {}`), and `nil` fits only `interface {}`, slices, maps, pointers.
//!
//! So every function is registered as a [`FuncDef`] with a [`Signature`]: the Go
//! types of its fixed parameters and, for variadic functions, the element type of
//! the `...` parameter. The executor evaluates and converts the arguments as Go
//! does, then calls [`FuncDef::call`] with exactly `params.len()` values (plus any
//! variadic ones). A function therefore never needs to check arity, and values
//! for a typed parameter are guaranteed to be of that type (an `int` parameter
//! receives `Value::Int`, a `string` parameter `Value::String`, an
//! `interface {}` parameter anything including `Value::Nil`).
//!
//! A function that fails in Go (returns a non-nil `error`, or panics — the engine
//! recovers panics into errors) returns `Err(FuncError)` whose text is the Go
//! error's text, e.g. `runtime error: integer divide by zero`. The executor
//! wraps it as Go does:
//! `template: key:1:3: executing "key" at <div 1 0>: error calling div: runtime error: integer divide by zero`.
//!
//! Secret values: `FuncError::new` marks the message as possibly containing
//! template data (e.g. `fail` messages, parse errors that quote their input);
//! when the ESO execution model reports errors it withholds such messages.
//! Use `FuncError::public` for messages that can never contain input data.
//!
//! Functions are plain closures: `Fn(&[Value]) -> Result<Value, FuncError>`
//! (`Send + Sync`, so a [`FuncMap`] can be built once and shared). Functions
//! that can build large values (`repeat`, `until`, `randBytes`, …) must bound the
//! sizes themselves: see [`crate::limits`].

use std::collections::HashMap;
use std::fmt;
use std::rc::Rc;
use std::sync::Arc;

use crate::value::{GoType, Value};

/// The closure type of a template function.
pub type GoFn = dyn Fn(&[Value]) -> Result<Value, FuncError> + Send + Sync;

/// The error of a failing function call (Go's returned `error` or recovered panic).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FuncError {
    /// The Go error text.
    pub message: String,
    /// Whether the message may contain template data (secret values).
    pub may_contain_data: bool,
}

impl FuncError {
    /// An error whose message may contain input data (the safe default).
    pub fn new(message: impl Into<String>) -> Self {
        FuncError {
            message: message.into(),
            may_contain_data: true,
        }
    }

    /// An error whose message never contains input data.
    pub fn public(message: impl Into<String>) -> Self {
        FuncError {
            message: message.into(),
            may_contain_data: false,
        }
    }
}

impl fmt::Display for FuncError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for FuncError {}

/// The Go signature of a function or method: fixed parameter types and the element
/// type of the variadic parameter, if any.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Signature {
    /// Types of the fixed parameters.
    pub params: Vec<GoType>,
    /// `Some(T)` for a final `...T` parameter.
    pub variadic: Option<GoType>,
}

impl Signature {
    /// A signature with fixed parameters only.
    pub fn fixed(params: Vec<GoType>) -> Self {
        Signature {
            params,
            variadic: None,
        }
    }

    /// A signature with fixed parameters and a final `...variadic`.
    pub fn variadic(params: Vec<GoType>, variadic: GoType) -> Self {
        Signature {
            params,
            variadic: Some(variadic),
        }
    }

    /// Go's `NumIn()`: fixed parameters plus one for the variadic slice.
    pub fn num_in(&self) -> usize {
        self.params.len() + usize::from(self.variadic.is_some())
    }

    /// The type of argument `i` (counting variadic ones).
    pub fn arg_type(&self, i: usize) -> Option<&GoType> {
        self.params.get(i).or(self.variadic.as_ref())
    }
}

/// A template function: its name, Go signature and implementation.
#[derive(Clone)]
pub struct FuncDef {
    /// The name under which it is registered.
    pub name: String,
    /// The Go signature.
    pub sig: Signature,
    f: Arc<GoFn>,
}

impl fmt::Debug for FuncDef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FuncDef")
            .field("name", &self.name)
            .field("sig", &self.sig)
            .finish()
    }
}

impl FuncDef {
    /// A function with fixed parameters.
    pub fn new<F>(name: impl Into<String>, params: Vec<GoType>, f: F) -> Self
    where
        F: Fn(&[Value]) -> Result<Value, FuncError> + Send + Sync + 'static,
    {
        FuncDef {
            name: name.into(),
            sig: Signature::fixed(params),
            f: Arc::new(f),
        }
    }

    /// A variadic function: fixed `params`, then any number of `variadic` args.
    pub fn variadic<F>(name: impl Into<String>, params: Vec<GoType>, variadic: GoType, f: F) -> Self
    where
        F: Fn(&[Value]) -> Result<Value, FuncError> + Send + Sync + 'static,
    {
        FuncDef {
            name: name.into(),
            sig: Signature::variadic(params, variadic),
            f: Arc::new(f),
        }
    }

    /// Calls the function with already checked and converted arguments.
    pub fn call(&self, args: &[Value]) -> Result<Value, FuncError> {
        (self.f)(args)
    }

    /// This function as a Go function value (for `call`).
    pub fn to_value(&self) -> Value {
        Value::Func(Rc::new(self.clone()))
    }
}

/// The function map given to the template (Go's `template.FuncMap`). Functions in
/// the map take precedence over the builtins (`and`, `slice`, …), exactly as in
/// Go: sprig's `slice` replaces the builtin `slice`.
#[derive(Clone, Debug, Default)]
pub struct FuncMap {
    funcs: HashMap<String, Arc<FuncDef>>,
}

impl FuncMap {
    /// An empty map (templates then see only the builtins).
    pub fn new() -> Self {
        FuncMap::default()
    }

    /// The map ESO's template engine v2 uses: its 18 functions and sprig's
    /// (without `env`, `expandenv`, `getHostByName`).
    pub fn eso() -> Self {
        let mut m = FuncMap::new();
        crate::funcs::install(&mut m);
        m
    }

    /// Registers (or replaces) a function under `def.name`.
    pub fn insert(&mut self, def: FuncDef) {
        self.funcs.insert(def.name.clone(), Arc::new(def));
    }

    /// Removes a function.
    pub fn remove(&mut self, name: &str) {
        self.funcs.remove(name);
    }

    /// Looks a function up.
    pub fn get(&self, name: &str) -> Option<&Arc<FuncDef>> {
        self.funcs.get(name)
    }

    /// Whether a function of that name is registered.
    pub fn contains(&self, name: &str) -> bool {
        self.funcs.contains_key(name)
    }

    /// The registered names, sorted.
    pub fn names(&self) -> Vec<String> {
        let mut v: Vec<String> = self.funcs.keys().cloned().collect();
        v.sort();
        v
    }

    /// Number of registered functions.
    pub fn len(&self) -> usize {
        self.funcs.len()
    }

    /// Whether no function is registered.
    pub fn is_empty(&self) -> bool {
        self.funcs.is_empty()
    }
}
