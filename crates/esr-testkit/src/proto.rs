//! Decoding of Kubernetes protobuf request bodies (`application/vnd.kubernetes.protobuf`) for the
//! few kinds kubectl's typed generators send that way: `kubectl create namespace|secret|configmap|
//! serviceaccount|token`, and client-go's DeleteOptions (Helm's release Secret). The body is the `k8s\0` magic followed by a `runtime.Unknown` envelope
//! whose `raw` field holds the object. Only the fields of those kinds are known; responses are JSON.

use base64::Engine;
use serde_json::{Map, Value, json};

use crate::error::ApiError;

#[derive(Clone, Copy)]
enum Ty {
    Str,
    Bytes,
    Int,
    Bool,
    Time,
    MapStr,
    MapBytes,
    Msg(&'static [Field]),
}

/// (number, json name, type, repeated)
type Field = (u64, &'static str, Ty, bool);

const OWNER_REF: &[Field] = &[
    (5, "apiVersion", Ty::Str, false),
    (1, "kind", Ty::Str, false),
    (3, "name", Ty::Str, false),
    (4, "uid", Ty::Str, false),
    (6, "controller", Ty::Bool, false),
    (7, "blockOwnerDeletion", Ty::Bool, false),
];

const OBJECT_META: &[Field] = &[
    (1, "name", Ty::Str, false),
    (2, "generateName", Ty::Str, false),
    (3, "namespace", Ty::Str, false),
    (5, "uid", Ty::Str, false),
    (6, "resourceVersion", Ty::Str, false),
    (7, "generation", Ty::Int, false),
    (8, "creationTimestamp", Ty::Time, false),
    (11, "labels", Ty::MapStr, false),
    (12, "annotations", Ty::MapStr, false),
    (13, "ownerReferences", Ty::Msg(OWNER_REF), true),
    (14, "finalizers", Ty::Str, true),
];

const LOCAL_REF: &[Field] = &[(1, "name", Ty::Str, false)];
const OBJECT_REF: &[Field] = &[
    (1, "kind", Ty::Str, false),
    (2, "namespace", Ty::Str, false),
    (3, "name", Ty::Str, false),
    (4, "uid", Ty::Str, false),
    (5, "apiVersion", Ty::Str, false),
];

const SECRET: &[Field] = &[
    (1, "metadata", Ty::Msg(OBJECT_META), false),
    (2, "data", Ty::MapBytes, false),
    (3, "type", Ty::Str, false),
    (4, "stringData", Ty::MapStr, false),
    (5, "immutable", Ty::Bool, false),
];
const CONFIG_MAP: &[Field] = &[
    (1, "metadata", Ty::Msg(OBJECT_META), false),
    (2, "data", Ty::MapStr, false),
    (3, "binaryData", Ty::MapBytes, false),
    (4, "immutable", Ty::Bool, false),
];
const PRECONDITIONS: &[Field] = &[
    (1, "uid", Ty::Str, false),
    (2, "resourceVersion", Ty::Str, false),
];
/// The body of a DELETE, as client-go sends it (Helm deletes its release Secret this way).
const DELETE_OPTIONS: &[Field] = &[
    (1, "gracePeriodSeconds", Ty::Int, false),
    (2, "preconditions", Ty::Msg(PRECONDITIONS), false),
    (3, "orphanDependents", Ty::Bool, false),
    (4, "propagationPolicy", Ty::Str, false),
    (5, "dryRun", Ty::Str, true),
];
const NS_SPEC: &[Field] = &[(1, "finalizers", Ty::Str, true)];
const NAMESPACE: &[Field] = &[
    (1, "metadata", Ty::Msg(OBJECT_META), false),
    (2, "spec", Ty::Msg(NS_SPEC), false),
];
const SERVICE_ACCOUNT: &[Field] = &[
    (1, "metadata", Ty::Msg(OBJECT_META), false),
    (2, "secrets", Ty::Msg(OBJECT_REF), true),
    (3, "imagePullSecrets", Ty::Msg(LOCAL_REF), true),
    (4, "automountServiceAccountToken", Ty::Bool, false),
];
const BOUND_REF: &[Field] = &[
    (1, "kind", Ty::Str, false),
    (2, "apiVersion", Ty::Str, false),
    (3, "name", Ty::Str, false),
    (4, "uid", Ty::Str, false),
];
const TOKEN_SPEC: &[Field] = &[
    (1, "audiences", Ty::Str, true),
    (4, "expirationSeconds", Ty::Int, false),
    (3, "boundObjectRef", Ty::Msg(BOUND_REF), false),
];
const TOKEN_REQUEST: &[Field] = &[
    (1, "metadata", Ty::Msg(OBJECT_META), false),
    (2, "spec", Ty::Msg(TOKEN_SPEC), false),
];
const TYPE_META: &[Field] = &[
    (1, "apiVersion", Ty::Str, false),
    (2, "kind", Ty::Str, false),
];
const UNKNOWN: &[Field] = &[
    (1, "typeMeta", Ty::Msg(TYPE_META), false),
    (2, "raw", Ty::Bytes, false),
];

struct Reader<'a> {
    b: &'a [u8],
    p: usize,
}

impl Reader<'_> {
    fn varint(&mut self) -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = *self.b.get(self.p)?;
            self.p += 1;
            v |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Some(v);
            }
        }
        None
    }
    fn bytes(&mut self) -> Option<&[u8]> {
        let n = usize::try_from(self.varint()?).ok()?;
        let end = self.p.checked_add(n)?;
        let s = self.b.get(self.p..end)?;
        self.p = end;
        Some(s)
    }
}

fn decode(b: &[u8], fields: &[Field]) -> Option<Map<String, Value>> {
    let mut r = Reader { b, p: 0 };
    let mut out = Map::new();
    while r.p < b.len() {
        let key = r.varint()?;
        let (num, wt) = (key >> 3, key & 7);
        let field = fields.iter().find(|f| f.0 == num);
        let val: Option<Value> = match wt {
            0 => {
                let v = r.varint()?;
                field.map(|f| match f.2 {
                    Ty::Bool => json!(v != 0),
                    _ => json!(v as i64),
                })
            }
            1 => {
                r.p = r.p.checked_add(8)?;
                None
            }
            5 => {
                r.p = r.p.checked_add(4)?;
                None
            }
            2 => {
                let data = r.bytes()?;
                match field.map(|f| f.2) {
                    Some(Ty::Str) => Some(json!(String::from_utf8_lossy(data))),
                    Some(Ty::Bytes) => Some(json!(
                        base64::engine::general_purpose::STANDARD.encode(data)
                    )),
                    Some(Ty::Msg(sub)) => Some(Value::Object(decode(data, sub)?)),
                    Some(Ty::Time) => {
                        let t = decode(data, &[(1, "seconds", Ty::Int, false)])?;
                        let secs = t.get("seconds").and_then(Value::as_i64).unwrap_or(0);
                        chrono::DateTime::from_timestamp(secs, 0)
                            .map(|d| json!(d.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)))
                    }
                    Some(Ty::MapStr) | Some(Ty::MapBytes) => {
                        let bytes_val = matches!(field.map(|f| f.2), Some(Ty::MapBytes));
                        let vt = if bytes_val { Ty::Bytes } else { Ty::Str };
                        let e = decode(data, &[(1, "k", Ty::Str, false), (2, "v", vt, false)])?;
                        let k = e
                            .get("k")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_string();
                        let v = e.get("v").cloned().unwrap_or(json!(""));
                        let (_, name, _, _) = field?;
                        let m = out.entry(name.to_string()).or_insert_with(|| json!({}));
                        if let Some(m) = m.as_object_mut() {
                            m.insert(k, v);
                        }
                        None
                    }
                    Some(Ty::Int) | Some(Ty::Bool) | None => None,
                }
            }
            _ => return None,
        };
        if let (Some(f), Some(v)) = (field, val) {
            if f.3 {
                if let Some(a) = out
                    .entry(f.1.to_string())
                    .or_insert_with(|| json!([]))
                    .as_array_mut()
                {
                    a.push(v);
                }
            } else {
                out.insert(f.1.to_string(), v);
            }
        }
    }
    Some(out)
}

/// Decode a protobuf body into JSON.
pub fn decode_body(body: &[u8]) -> Result<Value, ApiError> {
    let unsupported = |why: &str| {
        ApiError::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml ({why})"
            ),
        )
    };
    let rest = body
        .strip_prefix(b"k8s\0".as_slice())
        .ok_or_else(|| unsupported("missing protobuf magic"))?;
    let env = decode(rest, UNKNOWN).ok_or_else(|| unsupported("invalid protobuf envelope"))?;
    let api_version = env["typeMeta"]["apiVersion"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let kind = env["typeMeta"]["kind"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let raw = env
        .get("raw")
        .and_then(Value::as_str)
        .and_then(|s| base64::engine::general_purpose::STANDARD.decode(s).ok())
        .unwrap_or_default();
    let fields = match (api_version.as_str(), kind.as_str()) {
        ("v1", "Secret") => SECRET,
        ("v1", "ConfigMap") => CONFIG_MAP,
        ("v1", "Namespace") => NAMESPACE,
        ("v1", "ServiceAccount") => SERVICE_ACCOUNT,
        ("authentication.k8s.io/v1", "TokenRequest") => TOKEN_REQUEST,
        ("v1" | "meta.k8s.io/v1", "DeleteOptions") => DELETE_OPTIONS,
        _ => {
            return Err(unsupported(&format!(
                "protobuf {api_version} {kind} is not supported; send JSON"
            )));
        }
    };
    let mut obj = decode(&raw, fields).ok_or_else(|| unsupported("invalid protobuf object"))?;
    obj.insert("apiVersion".into(), json!(api_version));
    obj.insert("kind".into(), json!(kind));
    Ok(Value::Object(obj))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tag(n: u64, wt: u64) -> u8 {
        u8::try_from((n << 3) | wt).unwrap()
    }
    fn ld(n: u64, data: &[u8]) -> Vec<u8> {
        let mut v = vec![tag(n, 2), u8::try_from(data.len()).unwrap()];
        v.extend_from_slice(data);
        v
    }

    #[test]
    fn decodes_a_secret_envelope() {
        let meta = ld(1, b"s1");
        let entry = [ld(1, b"k"), ld(2, b"v")].concat();
        let secret = [ld(1, &meta), ld(2, &entry), ld(3, b"Opaque")].concat();
        let tm = [ld(1, b"v1"), ld(2, b"Secret")].concat();
        let unknown = [ld(1, &tm), ld(2, &secret)].concat();
        let body = [b"k8s\0".as_slice(), &unknown].concat();
        let v = decode_body(&body).unwrap();
        assert_eq!(
            v,
            json!({"metadata": {"name": "s1"}, "data": {"k": "dg=="}, "type": "Opaque", "apiVersion": "v1", "kind": "Secret"})
        );
    }
}
