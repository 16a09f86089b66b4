//! Private and public keys in Go's `crypto/x509` encodings: parse PKCS#1,
//! PKCS#8 and SEC1; marshal PKCS#8 (`MarshalPKCS8PrivateKey`), PKIX
//! (`MarshalPKIXPublicKey`), PKCS#1 and SEC1.

use pkcs8::{DecodePrivateKey, EncodePrivateKey, EncodePublicKey};
use rsa::pkcs1::{DecodeRsaPrivateKey, EncodeRsaPrivateKey};

/// A private key of a type Go's `crypto/x509` handles.
#[derive(Clone, Debug)]
pub enum PrivKey {
    Rsa(Box<rsa::RsaPrivateKey>),
    P256(p256::SecretKey),
    P384(p384::SecretKey),
    P521(p521::SecretKey),
    Ed25519([u8; 32]),
}

const ED25519_PKCS8_PREFIX: [u8; 16] = [
    0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20,
];
const ED25519_SPKI_PREFIX: [u8; 12] = [
    0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00,
];

/// `x509.ParsePKCS1PrivateKey`.
pub fn parse_pkcs1(der: &[u8]) -> Option<PrivKey> {
    rsa::RsaPrivateKey::from_pkcs1_der(der)
        .ok()
        .map(|k| PrivKey::Rsa(Box::new(k)))
}

/// `x509.ParsePKCS8PrivateKey`.
pub fn parse_pkcs8(der: &[u8]) -> Result<PrivKey, String> {
    if der.len() == 48 && der[..16] == ED25519_PKCS8_PREFIX {
        let mut seed = [0u8; 32];
        seed.copy_from_slice(&der[16..]);
        return Ok(PrivKey::Ed25519(seed));
    }
    if let Ok(k) = rsa::RsaPrivateKey::from_pkcs8_der(der) {
        return Ok(PrivKey::Rsa(Box::new(k)));
    }
    if let Ok(k) = p256::SecretKey::from_pkcs8_der(der) {
        return Ok(PrivKey::P256(k));
    }
    if let Ok(k) = p384::SecretKey::from_pkcs8_der(der) {
        return Ok(PrivKey::P384(k));
    }
    if let Ok(k) = p521::SecretKey::from_pkcs8_der(der) {
        return Ok(PrivKey::P521(k));
    }
    if let Ok(k) = ed25519_dalek::SigningKey::from_pkcs8_der(der) {
        return Ok(PrivKey::Ed25519(k.to_bytes()));
    }
    Err(
        "x509: failed to parse private key (use ParsePKCS1PrivateKey instead for this key format)"
            .into(),
    )
}

/// `x509.ParseECPrivateKey`, with Go's error texts for the cases Go names: a
/// version other than 1 and a curve it does not know (esr knows P-256, P-384 and
/// P-521; Go also knows P-224).
pub fn parse_sec1(der: &[u8]) -> Result<PrivKey, String> {
    use der::Decode;
    use p256::elliptic_curve::SecretKey;
    use p256::pkcs8::AssociatedOid;
    let parsed = sec1::EcPrivateKey::from_der(der)
        .map_err(|e| format!("x509: failed to parse EC private key: {e}"))?;
    // RFC 5915 version 1 (`ecPrivKeyVersion`); the sec1 crate refuses any other.
    let oid = parsed.parameters.and_then(|p| p.named_curve());
    let unknown = || "x509: unknown elliptic curve".to_string();
    match oid {
        Some(o) if o == p256::NistP256::OID => SecretKey::<p256::NistP256>::from_sec1_der(der)
            .map(PrivKey::P256)
            .map_err(|_| unknown()),
        Some(o) if o == p384::NistP384::OID => SecretKey::<p384::NistP384>::from_sec1_der(der)
            .map(PrivKey::P384)
            .map_err(|_| unknown()),
        Some(o) if o == p521::NistP521::OID => SecretKey::<p521::NistP521>::from_sec1_der(der)
            .map(PrivKey::P521)
            .map_err(|_| unknown()),
        // Without parameters Go cannot tell the curve either.
        _ => Err(unknown()),
    }
}

/// `x509.MarshalECPrivateKey`: SEC 1 with the named-curve parameters and the
/// uncompressed public key (RustCrypto's `to_sec1_der` leaves the parameters out,
/// which Go's parser then refuses).
fn marshal_sec1(
    private: &[u8],
    public: &[u8],
    curve: der::asn1::ObjectIdentifier,
) -> Result<Vec<u8>, String> {
    use der::Encode;
    sec1::EcPrivateKey {
        private_key: private,
        parameters: Some(sec1::EcParameters::NamedCurve(curve)),
        public_key: Some(public),
    }
    .to_der()
    .map_err(|e| e.to_string())
}

/// ESO's `parsePrivateKey`: PKCS#1, then PKCS#8, then SEC1.
pub fn parse_any(der: &[u8]) -> Result<PrivKey, String> {
    if let Some(k) = parse_pkcs1(der) {
        return Ok(k);
    }
    if let Ok(k) = parse_pkcs8(der) {
        return Ok(k);
    }
    parse_sec1(der).map_err(|_| "unable to parse private key type".to_string())
}

impl PrivKey {
    /// `x509.MarshalPKCS8PrivateKey`.
    pub fn to_pkcs8(&self) -> Result<Vec<u8>, String> {
        let e = |x: pkcs8::Error| x.to_string();
        Ok(match self {
            PrivKey::Rsa(k) => k.to_pkcs8_der().map_err(e)?.as_bytes().to_vec(),
            PrivKey::P256(k) => k.to_pkcs8_der().map_err(e)?.as_bytes().to_vec(),
            PrivKey::P384(k) => k.to_pkcs8_der().map_err(e)?.as_bytes().to_vec(),
            PrivKey::P521(k) => k.to_pkcs8_der().map_err(e)?.as_bytes().to_vec(),
            PrivKey::Ed25519(seed) => {
                let mut v = ED25519_PKCS8_PREFIX.to_vec();
                v.extend_from_slice(seed);
                v
            }
        })
    }

    /// `x509.MarshalPKIXPublicKey` of the public half.
    pub fn public_pkix(&self) -> Result<Vec<u8>, String> {
        let e = |x: spki::Error| x.to_string();
        Ok(match self {
            PrivKey::Rsa(k) => k
                .to_public_key()
                .to_public_key_der()
                .map_err(e)?
                .as_bytes()
                .to_vec(),
            PrivKey::P256(k) => k
                .public_key()
                .to_public_key_der()
                .map_err(e)?
                .as_bytes()
                .to_vec(),
            PrivKey::P384(k) => k
                .public_key()
                .to_public_key_der()
                .map_err(e)?
                .as_bytes()
                .to_vec(),
            PrivKey::P521(k) => k
                .public_key()
                .to_public_key_der()
                .map_err(e)?
                .as_bytes()
                .to_vec(),
            PrivKey::Ed25519(seed) => {
                let pk = ed25519_dalek::SigningKey::from_bytes(seed)
                    .verifying_key()
                    .to_bytes();
                ed25519_spki(&pk)
            }
        })
    }

    /// sprig's `pemBlockForKey`: PEM type and DER.
    pub fn sprig_pem(&self) -> Result<(&'static str, Vec<u8>), String> {
        use p256::elliptic_curve::sec1::ToEncodedPoint;
        use p256::pkcs8::AssociatedOid;
        Ok(match self {
            PrivKey::Rsa(k) => (
                "RSA PRIVATE KEY",
                k.to_pkcs1_der()
                    .map_err(|e| e.to_string())?
                    .as_bytes()
                    .to_vec(),
            ),
            PrivKey::P256(k) => (
                "EC PRIVATE KEY",
                marshal_sec1(
                    &k.to_bytes(),
                    k.public_key().to_encoded_point(false).as_bytes(),
                    p256::NistP256::OID,
                )?,
            ),
            PrivKey::P384(k) => (
                "EC PRIVATE KEY",
                marshal_sec1(
                    &k.to_bytes(),
                    k.public_key().to_encoded_point(false).as_bytes(),
                    p384::NistP384::OID,
                )?,
            ),
            PrivKey::P521(k) => (
                "EC PRIVATE KEY",
                marshal_sec1(
                    &k.to_bytes(),
                    k.public_key().to_encoded_point(false).as_bytes(),
                    p521::NistP521::OID,
                )?,
            ),
            PrivKey::Ed25519(_) => ("PRIVATE KEY", self.to_pkcs8()?),
        })
    }
}

/// PKIX DER of an Ed25519 public key.
pub fn ed25519_spki(pk: &[u8; 32]) -> Vec<u8> {
    let mut v = ED25519_SPKI_PREFIX.to_vec();
    v.extend_from_slice(pk);
    v
}
