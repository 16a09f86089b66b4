//! Conversions for pushing keys and certificates: PEM private keys → JWK (RSA, EC P-256/P-384,
//! or a symmetric `oct` key for non-PEM values, like ESO), certificate values → DER.

use azure_security_keyvault_keys::models::JsonWebKey;
use base64::Engine;
use esr_provider::{ProviderError, Result};
use serde_json::{Map, Value, json};

fn b64(bytes: &[u8]) -> Value {
    Value::String(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes))
}

/// A JWK (JSON, base64url fields) for a pushed key value.
pub fn jwk_from_value(value: &[u8]) -> Result<Value> {
    let Ok(block) = pem::parse(value) else {
        // Not PEM: a symmetric key (ESO: `jwk.FromRaw([]byte)`).
        return Ok(json!({"kty": "oct", "k": b64(value)}));
    };
    let text = std::str::from_utf8(value)
        .map_err(|_| ProviderError::invalid("key PEM is not valid UTF-8"))?;
    match block.tag() {
        "RSA PRIVATE KEY" => {
            use rsa::pkcs1::DecodeRsaPrivateKey;
            let k = rsa::RsaPrivateKey::from_pkcs1_pem(text)
                .map_err(|e| ProviderError::invalid(format!("invalid RSA private key: {e}")))?;
            rsa_jwk(&k)
        }
        "EC PRIVATE KEY" => {
            if let Ok(k) = p256::SecretKey::from_sec1_pem(text) {
                return Ok(ec_jwk_p256(&k));
            }
            p384::SecretKey::from_sec1_pem(text)
                .map(|k| ec_jwk_p384(&k))
                .map_err(|e| ProviderError::invalid(format!("invalid EC private key: {e}")))
        }
        "PRIVATE KEY" => {
            use p256::pkcs8::DecodePrivateKey;
            if let Ok(k) = rsa::RsaPrivateKey::from_pkcs8_pem(text) {
                return rsa_jwk(&k);
            }
            if let Ok(k) = p256::SecretKey::from_pkcs8_pem(text) {
                return Ok(ec_jwk_p256(&k));
            }
            p384::SecretKey::from_pkcs8_pem(text)
                .map(|k| ec_jwk_p384(&k))
                .map_err(|_| {
                    ProviderError::invalid(
                        "unsupported PKCS#8 private key (RSA, P-256 and P-384 are supported)",
                    )
                })
        }
        other => Err(ProviderError::invalid(format!(
            "key type {other} is not supported"
        ))),
    }
}

fn rsa_jwk(k: &rsa::RsaPrivateKey) -> Result<Value> {
    use rsa::traits::{PrivateKeyParts, PublicKeyParts};
    let mut m = Map::new();
    m.insert("kty".into(), "RSA".into());
    m.insert("n".into(), b64(&k.n().to_bytes_be()));
    m.insert("e".into(), b64(&k.e().to_bytes_be()));
    m.insert("d".into(), b64(&k.d().to_bytes_be()));
    let primes = k.primes();
    if let [p, q] = primes {
        m.insert("p".into(), b64(&p.to_bytes_be()));
        m.insert("q".into(), b64(&q.to_bytes_be()));
        let one = rsa::BigUint::from(1u8);
        let dp = k.d() % (p - &one);
        let dq = k.d() % (q - &one);
        m.insert("dp".into(), b64(&dp.to_bytes_be()));
        m.insert("dq".into(), b64(&dq.to_bytes_be()));
        if let Some(qi) = k.crt_coefficient() {
            m.insert("qi".into(), b64(&qi.to_bytes_be()));
        }
    }
    Ok(Value::Object(m))
}

fn ec_jwk_p256(k: &p256::SecretKey) -> Value {
    use p256::elliptic_curve::sec1::ToEncodedPoint;
    let p = k.public_key().to_encoded_point(false);
    json!({
        "kty": "EC", "crv": "P-256",
        "x": b64(p.x().map(|x| x.as_slice()).unwrap_or_default()),
        "y": b64(p.y().map(|y| y.as_slice()).unwrap_or_default()),
        "d": b64(&k.to_bytes()),
    })
}

fn ec_jwk_p384(k: &p384::SecretKey) -> Value {
    use p384::elliptic_curve::sec1::ToEncodedPoint;
    let p = k.public_key().to_encoded_point(false);
    json!({
        "kty": "EC", "crv": "P-384",
        "x": b64(p.x().map(|x| x.as_slice()).unwrap_or_default()),
        "y": b64(p.y().map(|y| y.as_slice()).unwrap_or_default()),
        "d": b64(&k.to_bytes()),
    })
}

/// ESO's `equalKeys`: same type and the same public part (RSA `n`/`e`, EC `crv`/`x`/`y`).
/// Symmetric keys never compare equal (Key Vault does not return `k`), so they are re-imported.
pub fn same_public_key(new: &Value, old: &JsonWebKey) -> bool {
    let Ok(old) = serde_json::to_value(old) else {
        return false;
    };
    let field = |v: &Value, f: &str| v.get(f).and_then(|x| x.as_str()).map(str::to_string);
    let kty = |v: &Value| field(v, "kty").map(|k| k.trim_end_matches("-HSM").to_string());
    if kty(new) != kty(&old) {
        return false;
    }
    let same = |f: &str| field(new, f).is_some() && field(new, f) == field(&old, f);
    (same("n") && same("e")) || (same("crv") && same("x") && same("y"))
}

/// The DER of a certificate value: a PEM `CERTIFICATE` block, or the value itself when it looks
/// like DER/PKCS#12 (an ASN.1 SEQUENCE). `Ok(None)` means "cannot tell; import it anyway".
pub fn certificate_der(value: &[u8]) -> Result<Option<Vec<u8>>> {
    if let Ok(blocks) = pem::parse_many(value)
        && !blocks.is_empty()
    {
        return blocks
            .iter()
            .find(|b| b.tag() == "CERTIFICATE")
            .map(|b| Some(b.contents().to_vec()))
            .ok_or_else(|| {
                ProviderError::invalid(
                    "value from secret is not a valid certificate: no CERTIFICATE PEM block",
                )
            });
    }
    if value.first() == Some(&0x30) {
        return Ok(Some(value.to_vec()));
    }
    Err(ProviderError::invalid(
        "value from secret is not a valid certificate: could not parse certificate value as PKCS#12, DER or PEM",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symmetric_keys() {
        let j = jwk_from_value(b"0123456789abcdef").unwrap_or_default();
        assert_eq!(j["kty"], "oct");
        assert_eq!(j["k"], "MDEyMzQ1Njc4OWFiY2RlZg");
        let parsed: JsonWebKey = serde_json::from_value(j).unwrap_or_default();
        assert_eq!(parsed.k.as_deref(), Some(&b"0123456789abcdef"[..]));
    }

    #[test]
    fn ec_keys() {
        let k = p256::SecretKey::from_slice(&[7u8; 32]).unwrap_or_else(|e| panic!("{e}"));
        let pem = k
            .to_sec1_pem(Default::default())
            .unwrap_or_else(|e| panic!("{e}"));
        let j = jwk_from_value(pem.as_bytes()).unwrap_or_default();
        assert_eq!(j["crv"], "P-256");
        let parsed: JsonWebKey = serde_json::from_value(j.clone()).unwrap_or_default();
        assert!(same_public_key(&j, &parsed));
        let other = json!({"kty": "EC", "crv": "P-256", "x": "AA", "y": "AA"});
        assert!(!same_public_key(&other, &parsed));
    }

    #[test]
    fn certificates() {
        let der = pem::encode(&pem::Pem::new("CERTIFICATE", vec![0x30, 1, 2]));
        assert_eq!(
            certificate_der(der.as_bytes()).ok().flatten(),
            Some(vec![0x30, 1, 2])
        );
        assert_eq!(
            certificate_der(&[0x30, 5]).ok().flatten(),
            Some(vec![0x30, 5])
        );
        assert!(certificate_der(b"hello").is_err());
        let key_only = pem::encode(&pem::Pem::new("PRIVATE KEY", vec![1]));
        assert!(certificate_der(key_only.as_bytes()).is_err());
    }
}
