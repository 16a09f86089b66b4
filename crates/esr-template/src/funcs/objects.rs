//! Go objects returned by functions: `time.Time` (and its `Weekday`/`Month`),
//! `*semver.Version`, sprig's `certificate` struct. They implement
//! [`GoObject`] (fields, methods, `%v`) and know their JSON form.

use std::any::Any;
use std::cmp::Ordering;

use crate::func::{FuncError, Signature};
use crate::value::{GoObject, GoType, Kind, Value};

use super::gotime::GoTime;
use super::semver::Version;

/// Go type name of `time.Time`.
pub const TIME: &str = "time.Time";
/// Go type name of `*semver.Version`.
pub const SEMVER: &str = "*semver.Version";
/// Go type name of sprig's `certificate`.
pub const CERT: &str = "sprig.certificate";

/// How an object marshals to JSON.
pub enum JsonForm {
    /// Already-encoded JSON text.
    Raw(String),
    /// Marshal this value instead.
    Value(Value),
}

/// `time.Time`.
#[derive(Debug, Clone)]
pub struct TimeObj(pub GoTime);

/// `time.Weekday` / `time.Month`: an integer kind that prints as a name.
#[derive(Debug, Clone)]
pub struct NamedInt {
    pub type_name: &'static str,
    pub value: i64,
    pub name: &'static str,
}

/// `*semver.Version` (or `semver.Version` for the `Inc*` results).
#[derive(Debug, Clone)]
pub struct SemverObj {
    pub v: Version,
    pub pointer: bool,
}

/// sprig's `certificate{Cert, Key string}`.
#[derive(Debug, Clone)]
pub struct CertObj {
    pub cert: String,
    pub key: String,
}

/// A time value.
pub fn time(t: GoTime) -> Value {
    Value::object(TimeObj(t))
}

/// The `time.Time` inside a value, if it is one.
pub fn as_time(v: &Value) -> Option<GoTime> {
    match v {
        Value::Object(o) => o.as_any().downcast_ref::<TimeObj>().map(|t| t.0.clone()),
        _ => None,
    }
}

/// The version inside a value, if it is one.
pub fn as_semver(v: &Value) -> Option<Version> {
    match v {
        Value::Object(o) => o.as_any().downcast_ref::<SemverObj>().map(|s| s.v.clone()),
        _ => None,
    }
}

/// The certificate inside a value, if it is one.
pub fn as_cert(v: &Value) -> Option<CertObj> {
    match v {
        Value::Object(o) => o.as_any().downcast_ref::<CertObj>().cloned(),
        _ => None,
    }
}

/// JSON form of an object, if it has one.
pub fn to_json(o: &dyn GoObject) -> Option<JsonForm> {
    let any = o.as_any();
    if let Some(t) = any.downcast_ref::<TimeObj>() {
        let mut s = String::new();
        super::json::write_string(
            &mut s,
            &t.0.format("2006-01-02T15:04:05.999999999Z07:00"),
            false,
        );
        return Some(JsonForm::Raw(s));
    }
    if let Some(n) = any.downcast_ref::<NamedInt>() {
        return Some(JsonForm::Raw(n.value.to_string()));
    }
    if let Some(v) = any.downcast_ref::<SemverObj>() {
        let mut s = String::new();
        super::json::write_string(&mut s, &v.v.string(), true);
        return Some(JsonForm::Raw(s));
    }
    if let Some(c) = any.downcast_ref::<CertObj>() {
        let mut m = std::collections::BTreeMap::new();
        m.insert("Cert".to_string(), Value::str(c.cert.clone()));
        m.insert("Key".to_string(), Value::str(c.key.clone()));
        return Some(JsonForm::Value(Value::map(m)));
    }
    None
}

fn sig0() -> Signature {
    Signature::fixed(vec![])
}

impl GoObject for TimeObj {
    fn type_name(&self) -> String {
        TIME.into()
    }

    fn method(&self, name: &str) -> Option<Signature> {
        let t = || GoType::Named(TIME.into());
        Some(match name {
            "Year" | "Day" | "Hour" | "Minute" | "Second" | "Nanosecond" | "YearDay" | "Unix"
            | "UnixNano" | "UnixMilli" | "UnixMicro" | "Weekday" | "Month" | "String" | "UTC"
            | "Local" | "IsZero" => sig0(),
            "Format" => Signature::fixed(vec![GoType::String]),
            "Add" | "Truncate" | "Round" => Signature::fixed(vec![GoType::Duration]),
            "AddDate" => Signature::fixed(vec![GoType::Int, GoType::Int, GoType::Int]),
            "Sub" | "Before" | "After" | "Equal" | "Compare" => Signature::fixed(vec![t()]),
            _ => return None,
        })
    }

    fn call_method(&self, name: &str, args: &[Value]) -> Result<Value, FuncError> {
        use chrono::{Datelike, Timelike};
        let t = &self.0;
        let lt = t.local();
        let other = || args.first().and_then(as_time).unwrap_or_else(GoTime::zero);
        Ok(match name {
            "Year" => Value::Int(i64::from(lt.year())),
            "Day" => Value::Int(i64::from(lt.day())),
            "Hour" => Value::Int(i64::from(lt.hour())),
            "Minute" => Value::Int(i64::from(lt.minute())),
            "Second" => Value::Int(i64::from(lt.second())),
            "Nanosecond" => Value::Int(i64::from(lt.nanosecond() % 1_000_000_000)),
            "YearDay" => Value::Int(i64::from(lt.ordinal())),
            "Unix" => Value::Int64(t.unix()),
            "UnixNano" => Value::Int64(t.unix_nano()),
            "UnixMilli" => Value::Int64(
                t.unix()
                    .wrapping_mul(1000)
                    .wrapping_add(i64::from(t.utc.nanosecond() / 1_000_000)),
            ),
            "UnixMicro" => Value::Int64(
                t.unix()
                    .wrapping_mul(1_000_000)
                    .wrapping_add(i64::from(t.utc.nanosecond() / 1000)),
            ),
            "Weekday" => Value::object(NamedInt {
                type_name: "time.Weekday",
                value: i64::from(lt.weekday().num_days_from_sunday()),
                name: t.weekday_name(),
            }),
            "Month" => Value::object(NamedInt {
                type_name: "time.Month",
                value: i64::from(lt.month()),
                name: t.month_name(),
            }),
            "String" => Value::str(t.string()),
            "UTC" | "Local" => time(t.in_zone("UTC")),
            "IsZero" => Value::Bool(t.is_zero()),
            "Format" => Value::str(t.format(args.first().and_then(Value::as_str).unwrap_or(""))),
            "Add" => time(t.add(args.first().and_then(Value::int_bits).unwrap_or(0))),
            "Truncate" | "Round" => {
                let d = args.first().and_then(Value::int_bits).unwrap_or(0);
                if d <= 0 {
                    time(t.clone())
                } else {
                    let ns = i128::from(t.unix()) * 1_000_000_000
                        + i128::from(t.utc.nanosecond() % 1_000_000_000);
                    let r = ns.rem_euclid(i128::from(d));
                    let delta = if name == "Round" && 2 * r >= i128::from(d) {
                        i128::from(d) - r
                    } else {
                        -r
                    };
                    time(t.add(i64::try_from(delta).unwrap_or(0)))
                }
            }
            "AddDate" => {
                let (y, m, d) = (
                    args.first().and_then(Value::int_bits).unwrap_or(0),
                    args.get(1).and_then(Value::int_bits).unwrap_or(0),
                    args.get(2).and_then(Value::int_bits).unwrap_or(0),
                );
                let range = || FuncError::public("AddDate out of range");
                let total_months = i64::from(lt.year())
                    .checked_mul(12)
                    .and_then(|x| x.checked_add(i64::from(lt.month0())))
                    .and_then(|x| x.checked_add(y.checked_mul(12)?))
                    .and_then(|x| x.checked_add(m))
                    .ok_or_else(range)?;
                let (ny, nm) = (total_months.div_euclid(12), total_months.rem_euclid(12) + 1);
                let base = chrono::NaiveDate::from_ymd_opt(
                    i32::try_from(ny).map_err(|_| range())?,
                    nm as u32,
                    1,
                )
                .ok_or_else(range)?;
                let days = (i64::from(lt.day()) - 1).checked_add(d).ok_or_else(range)?;
                let date = chrono::TimeDelta::try_days(days)
                    .and_then(|delta| base.checked_add_signed(delta))
                    .ok_or_else(range)?;
                let wall = date.and_time(lt.time());
                let utc = wall
                    .checked_sub_signed(chrono::Duration::seconds(i64::from(t.offset)))
                    .ok_or_else(range)?;
                time(GoTime {
                    utc,
                    offset: t.offset,
                    zone: t.zone.clone(),
                })
            }
            "Sub" => {
                let o = other();
                let d = (t.utc - o.utc)
                    .num_nanoseconds()
                    .unwrap_or(if t.utc > o.utc { i64::MAX } else { i64::MIN });
                Value::Duration(d)
            }
            "Before" => Value::Bool(t.utc < other().utc),
            "After" => Value::Bool(t.utc > other().utc),
            "Equal" => Value::Bool(t.utc == other().utc),
            "Compare" => Value::Int(match t.utc.cmp(&other().utc) {
                Ordering::Less => -1,
                Ordering::Equal => 0,
                Ordering::Greater => 1,
            }),
            _ => {
                return Err(FuncError::public(format!(
                    "can't evaluate field {name} in type time.Time"
                )));
            }
        })
    }

    fn format_v(&self) -> String {
        self.0.string()
    }

    fn go_eq(&self, other: &dyn GoObject) -> Option<bool> {
        other
            .as_any()
            .downcast_ref::<TimeObj>()
            .map(|o| o.0 == self.0)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl GoObject for NamedInt {
    fn type_name(&self) -> String {
        self.type_name.into()
    }

    fn kind(&self) -> Kind {
        Kind::Int
    }

    fn method(&self, name: &str) -> Option<Signature> {
        (name == "String").then(sig0)
    }

    fn call_method(&self, _name: &str, _args: &[Value]) -> Result<Value, FuncError> {
        Ok(Value::str(self.name))
    }

    fn format_v(&self) -> String {
        self.name.into()
    }

    fn go_eq(&self, other: &dyn GoObject) -> Option<bool> {
        other
            .as_any()
            .downcast_ref::<NamedInt>()
            .map(|o| o.value == self.value)
    }

    fn is_true(&self) -> bool {
        self.value != 0
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl GoObject for SemverObj {
    fn type_name(&self) -> String {
        if self.pointer {
            SEMVER.into()
        } else {
            "semver.Version".into()
        }
    }

    fn method(&self, name: &str) -> Option<Signature> {
        let v = || GoType::Named(SEMVER.into());
        Some(match name {
            "Major" | "Minor" | "Patch" | "Prerelease" | "Metadata" | "Original" | "String"
            | "IncMajor" | "IncMinor" | "IncPatch" => sig0(),
            "LessThan" | "GreaterThan" | "Equal" | "Compare" | "LessThanEqual"
            | "GreaterThanEqual" => Signature::fixed(vec![v()]),
            _ => return None,
        })
    }

    fn call_method(&self, name: &str, args: &[Value]) -> Result<Value, FuncError> {
        let v = &self.v;
        let other = || args.first().and_then(as_semver);
        let cmp = || -> Result<Ordering, FuncError> {
            other().map(|o| v.compare(&o)).ok_or_else(|| {
                FuncError::public(
                    "runtime error: invalid memory address or nil pointer dereference",
                )
            })
        };
        let val = |nv: Version| {
            Value::object(SemverObj {
                v: nv,
                pointer: false,
            })
        };
        Ok(match name {
            "Major" => Value::Uint64(v.major),
            "Minor" => Value::Uint64(v.minor),
            "Patch" => Value::Uint64(v.patch),
            "Prerelease" => Value::str(v.pre.clone()),
            "Metadata" => Value::str(v.metadata.clone()),
            "Original" => Value::str(v.original.clone()),
            "String" => Value::str(v.string()),
            "IncMajor" => val(v.inc_major()),
            "IncMinor" => val(v.inc_minor()),
            "IncPatch" => val(v.inc_patch()),
            "LessThan" => Value::Bool(cmp()? == Ordering::Less),
            "GreaterThan" => Value::Bool(cmp()? == Ordering::Greater),
            "Equal" => Value::Bool(cmp()? == Ordering::Equal),
            "LessThanEqual" => Value::Bool(cmp()? != Ordering::Greater),
            "GreaterThanEqual" => Value::Bool(cmp()? != Ordering::Less),
            "Compare" => Value::Int(match cmp()? {
                Ordering::Less => -1,
                Ordering::Equal => 0,
                Ordering::Greater => 1,
            }),
            _ => return Err(FuncError::public(format!("can't evaluate field {name}"))),
        })
    }

    fn format_v(&self) -> String {
        self.v.string()
    }

    fn go_eq(&self, other: &dyn GoObject) -> Option<bool> {
        other
            .as_any()
            .downcast_ref::<SemverObj>()
            .map(|o| o.v == self.v)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl GoObject for CertObj {
    fn type_name(&self) -> String {
        CERT.into()
    }

    fn field(&self, name: &str) -> Option<Value> {
        match name {
            "Cert" => Some(Value::str(self.cert.clone())),
            "Key" => Some(Value::str(self.key.clone())),
            _ => None,
        }
    }

    fn format_v(&self) -> String {
        format!("{{{} {}}}", self.cert, self.key)
    }

    fn go_eq(&self, other: &dyn GoObject) -> Option<bool> {
        other
            .as_any()
            .downcast_ref::<CertObj>()
            .map(|o| o.cert == self.cert && o.key == self.key)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
