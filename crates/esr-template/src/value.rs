//! Go dynamic values, as seen by `text/template`.
//!
//! # Interface (shared with the function library in `funcs/`)
//!
//! Output of Go templates depends on the *Go type* of every value, not only on its
//! contents: `eq (add 1 1) 2` works because `int64` and `int` are both integers,
//! `repeat (add 1 2) "x"` fails because an `int64` is not assignable to an `int`
//! parameter, `printf "%T"` prints type names, `[]string` and `[]interface {}`
//! differ in `%q`, a nil interface prints `<no value>` at top level but `<nil>`
//! inside containers. [`Value`] therefore models Go values *with* their types:
//!
//! | Go type                      | variant                                   |
//! |------------------------------|-------------------------------------------|
//! | nil interface / invalid      | [`Value::Nil`]                            |
//! | `bool`                       | [`Value::Bool`]                           |
//! | `int` (template literals, `len`, `atoi`, `int`) | [`Value::Int`]         |
//! | `int8` `int16` `int32` `int64` | [`Value::Int8`] … [`Value::Int64`]      |
//! | `uint` … `uint64`, `uint8` (= `byte`) | [`Value::Uint`] … [`Value::Uint64`] |
//! | `float32`, `float64`         | [`Value::Float32`], [`Value::Float64`]    |
//! | `complex128`                 | [`Value::Complex128`]                     |
//! | `string`                     | [`Value::String`]; [`Value::BinaryString`] when the bytes are not valid UTF-8 |
//! | `[]byte`                     | [`Value::Bytes`]                          |
//! | `[]interface {}`             | [`Value::List`]                           |
//! | `[]string`, `[]int`, …       | [`Value::Slice`] (element type + items)   |
//! | `map[string]interface {}`    | [`Value::Map`] (shared, mutable, like Go) |
//! | `map[string]string`          | [`Value::StringMap`] (the data map)       |
//! | `time.Duration`              | [`Value::Duration`] (nanoseconds)         |
//! | anything else (`time.Time`, `*semver.Version`, sprig's `certificate`) | [`Value::Object`] |
//! | a function (for `call`)      | [`Value::Func`]                           |
//!
//! Maps are reference types in Go (`set $d "k" "v"` mutates `$d` in place), so
//! [`Value::Map`] holds a [`MapRef`] (`Rc<RefCell<BTreeMap>>`); cloning a `Value`
//! clones the reference. Lists are immutable (`Rc<Vec<Value>>`): no template
//! function mutates a slice in place. A `BTreeMap<String, _>` iterates in Go's
//! sorted key order (bytewise), which is what `fmt` and `range` use.
//!
//! Objects implement [`GoObject`]: a Go type name, fields (`.Cert`), methods with
//! a [`Signature`] (`.Major`, `.LessThan $v`), and `%v` printing.
//!
//! Printing lives in [`crate::fmt`] (`sprint`, `sprintf`, `sprintln`, `format_v`).
//! Helpers here: [`Value::type_name`] (`%T`, sprig `typeOf`), [`Value::kind_name`]
//! (sprig `kindOf`), [`Value::is_true`] (template truth), [`Value::kind`].

use std::any::Any;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt::Debug;
use std::rc::Rc;

use crate::func::{FuncDef, FuncError, Signature};

/// A Go type, as far as the engine needs to know it: for parameter checks of
/// functions ([`Signature`]), element types of typed slices, and type names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GoType {
    /// `interface {}`: accepts any value, including nil.
    Interface,
    /// `reflect.Value` parameters of the builtins: like `Interface`.
    ReflectValue,
    Bool,
    Int,
    Int8,
    Int16,
    Int32,
    Int64,
    Uint,
    Uint8,
    Uint16,
    Uint32,
    Uint64,
    Uintptr,
    Float32,
    Float64,
    Complex128,
    String,
    /// `[]byte`
    Bytes,
    /// `[]T`; `Slice(Interface)` is `[]interface {}`.
    Slice(Box<GoType>),
    /// `map[string]interface {}`
    MapStringInterface,
    /// `map[string]string`
    MapStringString,
    /// `time.Duration`
    Duration,
    /// A named struct or pointer type, identified by its Go name
    /// (`time.Time`, `*semver.Version`). Only values whose
    /// [`GoObject::type_name`] equals this name are assignable.
    Named(String),
    /// A function type (for `call`).
    Func,
}

impl GoType {
    /// The Go spelling of the type, as `%T` and error messages print it.
    pub fn name(&self) -> String {
        match self {
            GoType::Interface => "interface {}".into(),
            GoType::ReflectValue => "reflect.Value".into(),
            GoType::Bool => "bool".into(),
            GoType::Int => "int".into(),
            GoType::Int8 => "int8".into(),
            GoType::Int16 => "int16".into(),
            GoType::Int32 => "int32".into(),
            GoType::Int64 => "int64".into(),
            GoType::Uint => "uint".into(),
            GoType::Uint8 => "uint8".into(),
            GoType::Uint16 => "uint16".into(),
            GoType::Uint32 => "uint32".into(),
            GoType::Uint64 => "uint64".into(),
            GoType::Uintptr => "uintptr".into(),
            GoType::Float32 => "float32".into(),
            GoType::Float64 => "float64".into(),
            GoType::Complex128 => "complex128".into(),
            GoType::String => "string".into(),
            GoType::Bytes => "[]uint8".into(),
            GoType::Slice(e) => format!("[]{}", e.name()),
            GoType::MapStringInterface => "map[string]interface {}".into(),
            GoType::MapStringString => "map[string]string".into(),
            GoType::Duration => "time.Duration".into(),
            GoType::Named(n) => n.clone(),
            GoType::Func => "func(...interface {}) (interface {}, error)".into(),
        }
    }

    /// The reflect kind of the type.
    pub fn kind(&self) -> Kind {
        match self {
            GoType::Interface => Kind::Interface,
            GoType::ReflectValue => Kind::Struct,
            GoType::Bool => Kind::Bool,
            GoType::Int => Kind::Int,
            GoType::Int8 => Kind::Int8,
            GoType::Int16 => Kind::Int16,
            GoType::Int32 => Kind::Int32,
            GoType::Int64 | GoType::Duration => Kind::Int64,
            GoType::Uint => Kind::Uint,
            GoType::Uint8 => Kind::Uint8,
            GoType::Uint16 => Kind::Uint16,
            GoType::Uint32 => Kind::Uint32,
            GoType::Uint64 => Kind::Uint64,
            GoType::Uintptr => Kind::Uintptr,
            GoType::Float32 => Kind::Float32,
            GoType::Float64 => Kind::Float64,
            GoType::Complex128 => Kind::Complex128,
            GoType::String => Kind::String,
            GoType::Bytes | GoType::Slice(_) => Kind::Slice,
            GoType::MapStringInterface | GoType::MapStringString => Kind::Map,
            GoType::Named(n) => {
                if n.starts_with('*') {
                    Kind::Ptr
                } else {
                    Kind::Struct
                }
            }
            GoType::Func => Kind::Func,
        }
    }

    /// Whether an untyped nil can be assigned to the type (Go's `canBeNil`).
    pub fn can_be_nil(&self) -> bool {
        match self {
            GoType::Interface | GoType::ReflectValue | GoType::Func => true,
            GoType::Bytes | GoType::Slice(_) => true,
            GoType::MapStringInterface | GoType::MapStringString => true,
            GoType::Named(n) => n.starts_with('*'),
            _ => false,
        }
    }

    /// The zero value of the type, used when nil is passed for a nillable
    /// parameter (`reflect.Zero`). Nil maps and slices are modelled as empty ones.
    pub fn zero(&self) -> Value {
        match self {
            GoType::Interface | GoType::ReflectValue | GoType::Func | GoType::Named(_) => {
                Value::Nil
            }
            GoType::Bool => Value::Bool(false),
            GoType::Int => Value::Int(0),
            GoType::Int8 => Value::Int8(0),
            GoType::Int16 => Value::Int16(0),
            GoType::Int32 => Value::Int32(0),
            GoType::Int64 => Value::Int64(0),
            GoType::Uint => Value::Uint(0),
            GoType::Uint8 => Value::Uint8(0),
            GoType::Uint16 => Value::Uint16(0),
            GoType::Uint32 => Value::Uint32(0),
            GoType::Uint64 | GoType::Uintptr => Value::Uint64(0),
            GoType::Float32 => Value::Float32(0.0),
            GoType::Float64 => Value::Float64(0.0),
            GoType::Complex128 => Value::Complex128(0.0, 0.0),
            GoType::String => Value::String(String::new()),
            GoType::Bytes => Value::Bytes(Rc::new(Vec::new())),
            GoType::Slice(e) => {
                if **e == GoType::Interface {
                    Value::List(Rc::new(Vec::new()))
                } else {
                    Value::Slice(Rc::new(TypedSlice {
                        elem: (**e).clone(),
                        items: Vec::new(),
                        nil: true,
                    }))
                }
            }
            GoType::MapStringInterface => Value::Map(MapRef::new()),
            GoType::MapStringString => Value::StringMap(Rc::new(BTreeMap::new())),
            GoType::Duration => Value::Duration(0),
        }
    }
}

/// Go's `reflect.Kind`, as far as the engine distinguishes kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Invalid,
    Bool,
    Int,
    Int8,
    Int16,
    Int32,
    Int64,
    Uint,
    Uint8,
    Uint16,
    Uint32,
    Uint64,
    Uintptr,
    Float32,
    Float64,
    Complex128,
    String,
    Slice,
    Map,
    Struct,
    Ptr,
    Func,
    Interface,
}

impl Kind {
    /// The name as `reflect.Kind.String()` prints it (sprig `kindOf`).
    pub fn name(self) -> &'static str {
        match self {
            Kind::Invalid => "invalid",
            Kind::Bool => "bool",
            Kind::Int => "int",
            Kind::Int8 => "int8",
            Kind::Int16 => "int16",
            Kind::Int32 => "int32",
            Kind::Int64 => "int64",
            Kind::Uint => "uint",
            Kind::Uint8 => "uint8",
            Kind::Uint16 => "uint16",
            Kind::Uint32 => "uint32",
            Kind::Uint64 => "uint64",
            Kind::Uintptr => "uintptr",
            Kind::Float32 => "float32",
            Kind::Float64 => "float64",
            Kind::Complex128 => "complex128",
            Kind::String => "string",
            Kind::Slice => "slice",
            Kind::Map => "map",
            Kind::Struct => "struct",
            Kind::Ptr => "ptr",
            Kind::Func => "func",
            Kind::Interface => "interface",
        }
    }

    /// Signed integer kinds.
    pub fn is_int(self) -> bool {
        matches!(
            self,
            Kind::Int | Kind::Int8 | Kind::Int16 | Kind::Int32 | Kind::Int64
        )
    }

    /// Unsigned integer kinds.
    pub fn is_uint(self) -> bool {
        matches!(
            self,
            Kind::Uint | Kind::Uint8 | Kind::Uint16 | Kind::Uint32 | Kind::Uint64 | Kind::Uintptr
        )
    }

    /// Float kinds.
    pub fn is_float(self) -> bool {
        matches!(self, Kind::Float32 | Kind::Float64)
    }
}

/// A typed Go slice other than `[]interface {}` and `[]byte`, e.g. `[]string`
/// (`splitList`, `keys`) or `[]int` (`until`). Items are values of type `elem`.
#[derive(Clone, Debug)]
pub struct TypedSlice {
    /// The element type (`GoType::String` for `[]string`).
    pub elem: GoType,
    /// The elements.
    pub items: Vec<Value>,
    /// A nil slice (no elements; `toJson` gives `null`, `%#v` gives `[]T(nil)`), as
    /// sprig's `rest`/`initial` return for an empty list.
    pub nil: bool,
}

/// A shared, mutable `map[string]interface {}` (Go maps are references).
#[derive(Clone, Debug, Default)]
pub struct MapRef(Rc<RefCell<BTreeMap<String, Value>>>);

impl MapRef {
    /// A new empty map.
    pub fn new() -> Self {
        MapRef::default()
    }

    /// Wraps an existing map.
    pub fn from_map(m: BTreeMap<String, Value>) -> Self {
        MapRef(Rc::new(RefCell::new(m)))
    }

    /// The value for `key`, if present.
    pub fn get(&self, key: &str) -> Option<Value> {
        self.0.try_borrow().ok().and_then(|m| m.get(key).cloned())
    }

    /// Whether `key` is present.
    pub fn contains_key(&self, key: &str) -> bool {
        self.0
            .try_borrow()
            .map(|m| m.contains_key(key))
            .unwrap_or(false)
    }

    /// Sets `key` (like `m[key] = v` in Go; visible through every clone).
    pub fn insert(&self, key: String, value: Value) {
        if let Ok(mut m) = self.0.try_borrow_mut() {
            m.insert(key, value);
        }
    }

    /// Deletes `key`.
    pub fn remove(&self, key: &str) -> Option<Value> {
        self.0.try_borrow_mut().ok().and_then(|mut m| m.remove(key))
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.0.try_borrow().map(|m| m.len()).unwrap_or(0)
    }

    /// Whether the map is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The keys, sorted.
    pub fn keys(&self) -> Vec<String> {
        self.0
            .try_borrow()
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// A copy of the entries, sorted by key.
    pub fn entries(&self) -> Vec<(String, Value)> {
        self.0
            .try_borrow()
            .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            .unwrap_or_default()
    }

    /// A shallow copy of the map contents.
    pub fn snapshot(&self) -> BTreeMap<String, Value> {
        self.0.try_borrow().map(|m| m.clone()).unwrap_or_default()
    }

    /// Calls `f` on each entry, in key order, while it returns `true` (no copy
    /// of the entries).
    pub fn for_each_until(&self, mut f: impl FnMut(&str, &Value) -> bool) {
        if let Ok(m) = self.0.try_borrow() {
            for (k, v) in m.iter() {
                if !f(k, v) {
                    return;
                }
            }
        }
    }

    /// Whether two references point at the same Go map.
    pub fn ptr_eq(&self, other: &MapRef) -> bool {
        Rc::ptr_eq(&self.0, &other.0)
    }
}

/// A Go value that is not a basic type, slice or map: `time.Time`,
/// `*semver.Version`, sprig's `certificate` struct, …
///
/// The function library implements this for its own types; the engine uses it for
/// field access (`.Cert`), method calls (`.Major`), `%v`/`%T` printing, truth and
/// `eq`. Use [`GoObject::as_any`] to downcast your own objects back.
pub trait GoObject: Debug {
    /// The Go type name, e.g. `*semver.Version`, `time.Time`, `sprig.certificate`.
    fn type_name(&self) -> String;

    /// The reflect kind: [`Kind::Ptr`] for pointer types, [`Kind::Struct`] otherwise.
    fn kind(&self) -> Kind {
        if self.type_name().starts_with('*') {
            Kind::Ptr
        } else {
            Kind::Struct
        }
    }

    /// An exported field, if the object has one with that name.
    fn field(&self, _name: &str) -> Option<Value> {
        None
    }

    /// The signature of a method, if the object has one with that name. The
    /// executor checks the arguments against it before [`GoObject::call_method`].
    fn method(&self, _name: &str) -> Option<Signature> {
        None
    }

    /// Calls a method whose signature [`GoObject::method`] returned; the arguments
    /// have already been checked and converted.
    fn call_method(&self, name: &str, _args: &[Value]) -> Result<Value, FuncError> {
        Err(FuncError::new(format!("method {name} not implemented")))
    }

    /// `%v` output (what `fmt.Sprint` prints: `String()` or `Error()` if the Go
    /// type has one, else Go's struct formatting, e.g. `&{...}`).
    fn format_v(&self) -> String;

    /// `%s` output; defaults to [`GoObject::format_v`].
    fn format_s(&self) -> String {
        self.format_v()
    }

    /// `==` against another object of the same type; `None` if the type is not
    /// comparable in Go.
    fn go_eq(&self, _other: &dyn GoObject) -> Option<bool> {
        None
    }

    /// Template truth: structs are always true, pointers when non-nil.
    fn is_true(&self) -> bool {
        true
    }

    /// For downcasting to the concrete Rust type.
    fn as_any(&self) -> &dyn Any;
}

/// A Go dynamic value with its Go type. See the module documentation.
#[derive(Clone, Debug, Default)]
pub enum Value {
    /// A nil interface (an invalid `reflect.Value`). Prints `<no value>` when it is
    /// the result of an action, `<nil>` inside containers and in `print`/`printf`.
    #[default]
    Nil,
    Bool(bool),
    /// Go `int` (64-bit).
    Int(i64),
    Int8(i8),
    Int16(i16),
    Int32(i32),
    Int64(i64),
    /// Go `uint` (64-bit).
    Uint(u64),
    Uint8(u8),
    Uint16(u16),
    Uint32(u32),
    Uint64(u64),
    Float32(f32),
    Float64(f64),
    /// `complex128` (real, imaginary).
    Complex128(f64, f64),
    String(String),
    /// A Go `string` whose bytes are not valid UTF-8 (binary secret values,
    /// `b64dec` of binary data). Same Go type as [`Value::String`] (`string`): it is
    /// accepted by `string` parameters, prints its raw bytes, and compares equal to
    /// a `String` with the same bytes. Build Go strings from bytes with
    /// [`Value::from_go_bytes`]; read the bytes of either with [`Value::go_str_bytes`].
    BinaryString(Rc<Vec<u8>>),
    /// `[]byte`.
    Bytes(Rc<Vec<u8>>),
    /// `[]interface {}`.
    List(Rc<Vec<Value>>),
    /// A typed slice such as `[]string` or `[]int`.
    Slice(Rc<TypedSlice>),
    /// `map[string]interface {}` (shared and mutable, like a Go map).
    Map(MapRef),
    /// `map[string]string` (the template data map, sprig `split`).
    StringMap(Rc<BTreeMap<String, String>>),
    /// `time.Duration` in nanoseconds.
    Duration(i64),
    /// Any other Go value.
    Object(Rc<dyn GoObject>),
    /// A Go function value (for the `call` builtin).
    Func(Rc<FuncDef>),
}

impl Value {
    /// Whether `self` and `other` are references to the same storage (a slice,
    /// map or byte string returned as it was passed).
    pub fn shares_storage(&self, other: &Value) -> bool {
        match (self, other) {
            (Value::List(a), Value::List(b)) => Rc::ptr_eq(a, b),
            (Value::Slice(a), Value::Slice(b)) => Rc::ptr_eq(a, b),
            (Value::Map(a), Value::Map(b)) => a.ptr_eq(b),
            (Value::StringMap(a), Value::StringMap(b)) => Rc::ptr_eq(a, b),
            (Value::Bytes(a), Value::Bytes(b))
            | (Value::BinaryString(a), Value::BinaryString(b)) => Rc::ptr_eq(a, b),
            (Value::Object(a), Value::Object(b)) => Rc::ptr_eq(a, b),
            _ => false,
        }
    }

    /// A `string`.
    pub fn str(s: impl Into<String>) -> Value {
        Value::String(s.into())
    }

    /// A `[]interface {}`.
    pub fn list(items: Vec<Value>) -> Value {
        Value::List(Rc::new(items))
    }

    /// A `[]string`.
    pub fn strings<I: IntoIterator<Item = S>, S: Into<String>>(items: I) -> Value {
        Value::Slice(Rc::new(TypedSlice {
            elem: GoType::String,
            items: items.into_iter().map(|s| Value::String(s.into())).collect(),
            nil: false,
        }))
    }

    /// A `[]int`.
    pub fn ints<I: IntoIterator<Item = i64>>(items: I) -> Value {
        Value::Slice(Rc::new(TypedSlice {
            elem: GoType::Int,
            items: items.into_iter().map(Value::Int).collect(),
            nil: false,
        }))
    }

    /// A typed slice `[]elem`.
    pub fn typed_slice(elem: GoType, items: Vec<Value>) -> Value {
        if elem == GoType::Interface {
            return Value::List(Rc::new(items));
        }
        Value::Slice(Rc::new(TypedSlice {
            elem,
            items,
            nil: false,
        }))
    }

    /// A nil `[]interface {}` (what sprig's `rest`/`initial` return for an empty list).
    pub fn nil_list() -> Value {
        Value::Slice(Rc::new(TypedSlice {
            elem: GoType::Interface,
            items: Vec::new(),
            nil: true,
        }))
    }

    /// A `[]byte`.
    pub fn bytes(b: impl Into<Vec<u8>>) -> Value {
        Value::Bytes(Rc::new(b.into()))
    }

    /// A `map[string]interface {}`.
    pub fn map(m: BTreeMap<String, Value>) -> Value {
        Value::Map(MapRef::from_map(m))
    }

    /// A `map[string]string`.
    pub fn string_map(m: BTreeMap<String, String>) -> Value {
        Value::StringMap(Rc::new(m))
    }

    /// An object.
    pub fn object<T: GoObject + 'static>(o: T) -> Value {
        Value::Object(Rc::new(o))
    }

    /// The Go type of the value; `None` for nil.
    pub fn go_type(&self) -> Option<GoType> {
        Some(match self {
            Value::Nil => return None,
            Value::Bool(_) => GoType::Bool,
            Value::Int(_) => GoType::Int,
            Value::Int8(_) => GoType::Int8,
            Value::Int16(_) => GoType::Int16,
            Value::Int32(_) => GoType::Int32,
            Value::Int64(_) => GoType::Int64,
            Value::Uint(_) => GoType::Uint,
            Value::Uint8(_) => GoType::Uint8,
            Value::Uint16(_) => GoType::Uint16,
            Value::Uint32(_) => GoType::Uint32,
            Value::Uint64(_) => GoType::Uint64,
            Value::Float32(_) => GoType::Float32,
            Value::Float64(_) => GoType::Float64,
            Value::Complex128(..) => GoType::Complex128,
            Value::String(_) | Value::BinaryString(_) => GoType::String,
            Value::Bytes(_) => GoType::Bytes,
            Value::List(_) => GoType::Slice(Box::new(GoType::Interface)),
            Value::Slice(s) => GoType::Slice(Box::new(s.elem.clone())),
            Value::Map(_) => GoType::MapStringInterface,
            Value::StringMap(_) => GoType::MapStringString,
            Value::Duration(_) => GoType::Duration,
            Value::Object(o) => GoType::Named(o.type_name()),
            Value::Func(_) => GoType::Func,
        })
    }

    /// The Go type name as `%T` and sprig `typeOf` print it (`<nil>` for nil).
    pub fn type_name(&self) -> String {
        match self {
            Value::Nil => "<nil>".into(),
            Value::Object(o) => o.type_name(),
            v => v.go_type().map(|t| t.name()).unwrap_or_default(),
        }
    }

    /// The reflect kind ([`Kind::Invalid`] for nil).
    pub fn kind(&self) -> Kind {
        match self {
            Value::Nil => Kind::Invalid,
            Value::Object(o) => o.kind(),
            Value::Func(_) => Kind::Func,
            v => v.go_type().map(|t| t.kind()).unwrap_or(Kind::Invalid),
        }
    }

    /// The kind name as sprig `kindOf` prints it.
    pub fn kind_name(&self) -> &'static str {
        self.kind().name()
    }

    /// Whether this is the nil interface.
    pub fn is_nil(&self) -> bool {
        matches!(self, Value::Nil)
    }

    /// Template truth (Go's `isTrue`): false for nil, zero numbers, empty
    /// strings/slices/maps, `false`; true for structs and non-nil pointers/functions.
    pub fn is_true(&self) -> bool {
        match self {
            Value::Nil => false,
            Value::Bool(b) => *b,
            Value::Int(i) | Value::Int64(i) | Value::Duration(i) => *i != 0,
            Value::Int8(i) => *i != 0,
            Value::Int16(i) => *i != 0,
            Value::Int32(i) => *i != 0,
            Value::Uint(u) | Value::Uint64(u) => *u != 0,
            Value::Uint8(u) => *u != 0,
            Value::Uint16(u) => *u != 0,
            Value::Uint32(u) => *u != 0,
            Value::Float32(f) => *f != 0.0,
            Value::Float64(f) => *f != 0.0,
            Value::Complex128(r, i) => *r != 0.0 || *i != 0.0,
            Value::String(s) => !s.is_empty(),
            Value::BinaryString(b) => !b.is_empty(),
            Value::Bytes(b) => !b.is_empty(),
            Value::List(l) => !l.is_empty(),
            Value::Slice(s) => !s.items.is_empty(),
            Value::Map(m) => !m.is_empty(),
            Value::StringMap(m) => !m.is_empty(),
            Value::Object(o) => o.is_true(),
            Value::Func(_) => true,
        }
    }

    /// A Go `string` from arbitrary bytes: [`Value::String`] when valid UTF-8,
    /// [`Value::BinaryString`] otherwise.
    pub fn from_go_bytes(b: Vec<u8>) -> Value {
        match String::from_utf8(b) {
            Ok(s) => Value::String(s),
            Err(e) => Value::BinaryString(Rc::new(e.into_bytes())),
        }
    }

    /// The bytes of a Go `string` ([`Value::String`] or [`Value::BinaryString`]).
    pub fn go_str_bytes(&self) -> Option<&[u8]> {
        match self {
            Value::String(s) => Some(s.as_bytes()),
            Value::BinaryString(b) => Some(b),
            _ => None,
        }
    }

    /// The string, if this is a Go `string` holding valid UTF-8.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// The signed value of any integer kind (unsigned values that fit).
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Int(i) | Value::Int64(i) | Value::Duration(i) => Some(*i),
            Value::Int8(i) => Some(i64::from(*i)),
            Value::Int16(i) => Some(i64::from(*i)),
            Value::Int32(i) => Some(i64::from(*i)),
            Value::Uint8(u) => Some(i64::from(*u)),
            Value::Uint16(u) => Some(i64::from(*u)),
            Value::Uint32(u) => Some(i64::from(*u)),
            Value::Uint(u) | Value::Uint64(u) => i64::try_from(*u).ok(),
            _ => None,
        }
    }

    /// The value of a signed integer kind as Go's `reflect.Value.Int()`.
    pub fn int_bits(&self) -> Option<i64> {
        match self {
            Value::Int(i) | Value::Int64(i) | Value::Duration(i) => Some(*i),
            Value::Int8(i) => Some(i64::from(*i)),
            Value::Int16(i) => Some(i64::from(*i)),
            Value::Int32(i) => Some(i64::from(*i)),
            _ => None,
        }
    }

    /// The value of an unsigned integer kind as Go's `reflect.Value.Uint()`.
    pub fn uint_bits(&self) -> Option<u64> {
        match self {
            Value::Uint(u) | Value::Uint64(u) => Some(*u),
            Value::Uint8(u) => Some(u64::from(*u)),
            Value::Uint16(u) => Some(u64::from(*u)),
            Value::Uint32(u) => Some(u64::from(*u)),
            _ => None,
        }
    }

    /// The value of a float kind.
    pub fn float_bits(&self) -> Option<f64> {
        match self {
            Value::Float64(f) => Some(*f),
            Value::Float32(f) => Some(f64::from(*f)),
            _ => None,
        }
    }

    /// The items of a slice (`[]interface {}` or typed; not `[]byte`).
    pub fn as_slice(&self) -> Option<&[Value]> {
        match self {
            Value::List(l) => Some(l),
            Value::Slice(s) => Some(&s.items),
            _ => None,
        }
    }

    /// Length as Go's `len` sees it (strings in bytes); `None` if the kind has none.
    pub fn len(&self) -> Option<usize> {
        match self {
            Value::String(s) => Some(s.len()),
            Value::BinaryString(b) => Some(b.len()),
            Value::Bytes(b) => Some(b.len()),
            Value::List(l) => Some(l.len()),
            Value::Slice(s) => Some(s.items.len()),
            Value::Map(m) => Some(m.len()),
            Value::StringMap(m) => Some(m.len()),
            _ => None,
        }
    }

    /// Whether [`Value::len`] is `Some(0)`.
    pub fn is_empty(&self) -> bool {
        self.len() == Some(0)
    }

    /// Whether a value of this type is assignable to a parameter of type `t`
    /// (Go's `AssignableTo`, for the types modelled here).
    pub fn assignable_to(&self, t: &GoType) -> bool {
        match t {
            GoType::Interface | GoType::ReflectValue => true,
            _ => match self.go_type() {
                Some(vt) => &vt == t,
                None => false,
            },
        }
    }

    /// Go's `reflect.DeepEqual` for the modelled types (used by sprig `has`,
    /// `uniq`, `without`, `deepEqual`): types must match exactly.
    pub fn deep_equal(&self, other: &Value) -> bool {
        match (self, other) {
            (Value::Nil, Value::Nil) => true,
            (Value::Bool(a), Value::Bool(b)) => a == b,
            (Value::Int(a), Value::Int(b)) | (Value::Int64(a), Value::Int64(b)) => a == b,
            (Value::Duration(a), Value::Duration(b)) => a == b,
            (Value::Int8(a), Value::Int8(b)) => a == b,
            (Value::Int16(a), Value::Int16(b)) => a == b,
            (Value::Int32(a), Value::Int32(b)) => a == b,
            (Value::Uint(a), Value::Uint(b)) | (Value::Uint64(a), Value::Uint64(b)) => a == b,
            (Value::Uint8(a), Value::Uint8(b)) => a == b,
            (Value::Uint16(a), Value::Uint16(b)) => a == b,
            (Value::Uint32(a), Value::Uint32(b)) => a == b,
            (Value::Float32(a), Value::Float32(b)) => a == b,
            (Value::Float64(a), Value::Float64(b)) => a == b,
            (Value::Complex128(a, b), Value::Complex128(c, d)) => a == c && b == d,
            (Value::String(a), Value::String(b)) => a == b,
            (
                Value::String(_) | Value::BinaryString(_),
                Value::String(_) | Value::BinaryString(_),
            ) => self.go_str_bytes() == other.go_str_bytes(),
            (Value::Bytes(a), Value::Bytes(b)) => a == b,
            (Value::List(a), Value::List(b)) => {
                a.len() == b.len() && a.iter().zip(b.iter()).all(|(x, y)| x.deep_equal(y))
            }
            (Value::Slice(a), Value::Slice(b)) => {
                a.elem == b.elem
                    && a.items.len() == b.items.len()
                    && a.items
                        .iter()
                        .zip(b.items.iter())
                        .all(|(x, y)| x.deep_equal(y))
            }
            (Value::Map(a), Value::Map(b)) => {
                if a.ptr_eq(b) {
                    return true;
                }
                let (a, b) = (a.entries(), b.entries());
                a.len() == b.len()
                    && a.iter()
                        .zip(b.iter())
                        .all(|((ka, va), (kb, vb))| ka == kb && va.deep_equal(vb))
            }
            (Value::StringMap(a), Value::StringMap(b)) => a == b,
            (Value::Object(a), Value::Object(b)) => {
                a.type_name() == b.type_name() && a.go_eq(b.as_ref()).unwrap_or(false)
            }
            (Value::Func(_), Value::Func(_)) => false,
            _ => false,
        }
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Value::String(s.to_string())
    }
}

impl From<String> for Value {
    fn from(s: String) -> Self {
        Value::String(s)
    }
}

impl From<bool> for Value {
    fn from(b: bool) -> Self {
        Value::Bool(b)
    }
}

impl From<i64> for Value {
    /// A Go `int`.
    fn from(i: i64) -> Self {
        Value::Int(i)
    }
}

impl From<f64> for Value {
    fn from(f: f64) -> Self {
        Value::Float64(f)
    }
}

/// Converts a JSON value the way `encoding/json` unmarshals into `interface{}`:
/// objects become `map[string]interface {}`, arrays `[]interface {}`, numbers
/// `float64`, null the nil interface.
pub fn from_json(v: &serde_json::Value) -> Value {
    match v {
        serde_json::Value::Null => Value::Nil,
        serde_json::Value::Bool(b) => Value::Bool(*b),
        serde_json::Value::Number(n) => Value::Float64(n.as_f64().unwrap_or(0.0)),
        serde_json::Value::String(s) => Value::String(s.clone()),
        serde_json::Value::Array(a) => Value::list(a.iter().map(from_json).collect()),
        serde_json::Value::Object(o) => {
            Value::map(o.iter().map(|(k, v)| (k.clone(), from_json(v))).collect())
        }
    }
}
