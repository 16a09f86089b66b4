//! ESO's own template functions (`runtime/template/v2`): PEM filtering and
//! certificate chains, PKCS#12 decoding/encoding, JWK to PEM, RSA decryption.
//! (`toYaml`/`fromYaml` live in [`super::yaml`].)

use std::net::{Ipv4Addr, Ipv6Addr};

use x509_parser::extensions::{GeneralName, ParsedExtension};
use x509_parser::prelude::FromDer;

use crate::func::{FuncError, FuncMap};
use crate::value::{GoType as T, Value};

use super::gopem::{self, Block};
use super::keys::{self, PrivKey};
use super::util::*;

const ERR_JUNK: &str = "error filtering pem: found junk";

/// A parsed certificate with the fields ESO looks at.
#[derive(Clone, Debug)]
pub struct Cert {
    pub raw: Vec<u8>,
    pub aki: Option<Vec<u8>>,
    pub ski: Option<Vec<u8>>,
    pub sans: Vec<String>,
}

fn ip_string(b: &[u8]) -> String {
    match b.len() {
        4 => Ipv4Addr::new(b[0], b[1], b[2], b[3]).to_string(),
        16 => {
            let mut a = [0u8; 16];
            a.copy_from_slice(b);
            let v6 = Ipv6Addr::from(a);
            match v6.to_ipv4_mapped() {
                Some(v4) => v4.to_string(),
                None => v6.to_string(),
            }
        }
        _ => {
            let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
            format!("?{hex}")
        }
    }
}

/// The first checks of Go's `x509.ParseCertificate`, with its texts: the input
/// must start with a SEQUENCE (`x509: malformed certificate`) whose first element
/// is the to-be-signed SEQUENCE (`x509: malformed tbs certificate`; this is what a
/// private key block inside a certificate bundle gives), and nothing may follow
/// the certificate (`x509: trailing data`).
fn check_cert_outline(der: &[u8]) -> Result<(), String> {
    use der::{Decode, Reader, Tag, Tagged};
    let mut outer = der::SliceReader::new(der).map_err(|_| "x509: malformed certificate")?;
    let cert = der::asn1::AnyRef::decode(&mut outer)
        .ok()
        .filter(|a| a.tag() == Tag::Sequence)
        .ok_or("x509: malformed certificate")?;
    let tbs = der::SliceReader::new(cert.value())
        .ok()
        .and_then(|mut r| der::asn1::AnyRef::decode(&mut r).ok())
        .filter(|a| a.tag() == Tag::Sequence);
    if tbs.is_none() {
        return Err("x509: malformed tbs certificate".into());
    }
    if !outer.is_finished() {
        return Err("x509: trailing data".into());
    }
    Ok(())
}

/// `x509.ParseCertificate`.
pub fn parse_cert(der: &[u8]) -> Result<Cert, String> {
    check_cert_outline(der)?;
    let (rest, c) = x509_parser::certificate::X509Certificate::from_der(der)
        .map_err(|_| "x509: malformed certificate".to_string())?;
    if !rest.is_empty() {
        return Err("x509: trailing data".into());
    }
    let (mut aki, mut ski) = (None, None);
    let (mut dns, mut ips, mut emails, mut uris) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for ext in c.extensions() {
        match ext.parsed_extension() {
            ParsedExtension::AuthorityKeyIdentifier(a) => {
                aki = a.key_identifier.as_ref().map(|k| k.0.to_vec())
            }
            ParsedExtension::SubjectKeyIdentifier(k) => ski = Some(k.0.to_vec()),
            ParsedExtension::SubjectAlternativeName(san) => {
                for n in &san.general_names {
                    match n {
                        GeneralName::DNSName(s) => dns.push(s.to_string()),
                        GeneralName::IPAddress(b) => ips.push(ip_string(b)),
                        GeneralName::RFC822Name(s) => emails.push(s.to_string()),
                        GeneralName::URI(s) => uris.push(
                            super::gourl::GoUrl::parse(s)
                                .map(|u| u.string())
                                .unwrap_or_else(|_| s.to_string()),
                        ),
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    let mut sans = dns;
    sans.extend(ips);
    sans.extend(emails);
    sans.extend(uris);
    Ok(Cert {
        raw: der.to_vec(),
        aki,
        ski,
        sans,
    })
}

fn trim_junk(s: &[u8]) -> &[u8] {
    let marker = b"-----BEGIN";
    match s.windows(marker.len()).position(|w| w == marker) {
        Some(i) => &s[i..],
        None => s,
    }
}

/// ESO `filterPEM`.
pub fn filter_pem(pem_type: &str, input: &[u8]) -> Result<String, String> {
    let mut data = trim_junk(input);
    let mut out = String::new();
    loop {
        let (block, rest) = gopem::decode(data);
        data = rest;
        let Some(block) = block else { break };
        if block.kind.eq_ignore_ascii_case(pem_type)
            || block.kind.to_lowercase() == pem_type.to_lowercase()
        {
            out.push_str(&gopem::encode(&block));
        }
    }
    if out.is_empty() && !data.is_empty() {
        return Err(ERR_JUNK.into());
    }
    Ok(out)
}

fn eq_id(a: &Option<Vec<u8>>, b: &Option<Vec<u8>>) -> bool {
    a.as_deref().unwrap_or(&[]) == b.as_deref().unwrap_or(&[])
}

/// ESO's `fetchX509CertChains`: certificates ordered leaf → root.
pub fn cert_chain(data: &[u8]) -> Result<Vec<Cert>, String> {
    let mut nodes = Vec::new();
    let mut rest = data;
    loop {
        let (block, r) = gopem::decode(rest);
        rest = r;
        let Some(block) = block else { break };
        nodes.push(parse_cert(&block.bytes)?);
    }
    let n = nodes.len();
    let mut parent: Vec<Option<usize>> = vec![None; n];
    let mut is_parent = vec![false; n];
    for i in 0..n {
        for j in 0..n {
            if i == j {
                continue;
            }
            if eq_id(&nodes[i].aki, &nodes[j].ski) {
                is_parent[j] = true;
                parent[i] = Some(j);
                break;
            }
        }
    }
    let mut leaf = None;
    for (i, parent_flag) in is_parent.iter().enumerate() {
        if !*parent_flag {
            if leaf.is_some() {
                return Err("found multiple leaf or disjunct certificates".into());
            }
            leaf = Some(i);
        }
    }
    let mut cur = leaf.ok_or_else(|| "no leaf certificate found".to_string())?;
    let mut chain = Vec::new();
    loop {
        if chain.len() >= n {
            return Err("constructing chain resulted in cycle".into());
        }
        chain.push(nodes[cur].clone());
        match parent[cur] {
            Some(p) => cur = p,
            None => break,
        }
    }
    Ok(chain)
}

fn is_root(c: &Cert) -> bool {
    c.aki.is_none() || eq_id(&c.aki, &c.ski)
}

/// ESO `filterCertChain`.
pub fn filter_cert_chain(cert_type: &str, input: &[u8]) -> Result<String, String> {
    let ordered = cert_chain(input)?;
    match cert_type {
        "leaf" => {
            let c = &ordered[0];
            if c.aki.is_some() && !eq_id(&c.aki, &c.ski) {
                return Ok(gopem::encode_der("CERTIFICATE", &c.raw));
            }
        }
        "intermediate" => {
            let mut out = String::new();
            for c in ordered.iter().skip(1) {
                if is_root(c) {
                    break;
                }
                out.push_str(&gopem::encode_der("CERTIFICATE", &c.raw));
            }
            return Ok(out);
        }
        "root" => {
            if let Some(c) = ordered.last() {
                if is_root(c) {
                    return Ok(gopem::encode_der("CERTIFICATE", &c.raw));
                }
            }
        }
        _ => {}
    }
    Ok(String::new())
}

/// ESO `certSANs`.
pub fn cert_sans(input: &[u8]) -> Result<Vec<String>, String> {
    let (block, _) = gopem::decode(trim_junk(input));
    let block = block.ok_or_else(|| "failed to decode PEM block".to_string())?;
    let c = parse_cert(&block.bytes).map_err(|e| format!("failed to parse certificate: {e}"))?;
    Ok(c.sans)
}

/// Private key, leaf certificate (DER), CA certificates (DER).
pub type Pkcs12Contents = (PrivKey, Vec<u8>, Vec<Vec<u8>>);

/// go-pkcs12 `DecodeChain`: (private key, leaf, CA certificates).
pub fn pkcs12_decode(data: &[u8], pass: &str) -> Result<Pkcs12Contents, String> {
    let archive = match p12_keystore::Pkcs12Archive::from_pkcs12(data, pass) {
        Ok(a) => a,
        Err(e) => return Err(format!("pkcs12: {e}")),
    };
    if archive.keys.len() > 1 {
        return Err("pkcs12: expected exactly one key bag".into());
    }
    let mut certs = archive.certs.iter().map(|c| c.cert.as_der().to_vec());
    let leaf = certs
        .next()
        .ok_or_else(|| "pkcs12: certificate missing".to_string())?;
    let ca: Vec<Vec<u8>> = certs.collect();
    let key = archive
        .keys
        .first()
        .ok_or_else(|| "pkcs12: private key missing".to_string())?;
    let key = keys::parse_pkcs8(key.key.as_der())?;
    Ok((key, leaf, ca))
}

fn pkcs12_key(pass: &str, input: &[u8]) -> Result<String, String> {
    let (key, _, _) = pkcs12_decode(input, pass)
        .map_err(|e| format!("unable to decode pkcs12 with password: {e}"))?;
    Ok(gopem::encode_der("PRIVATE KEY", &key.to_pkcs8()?))
}

fn pkcs12_cert(pass: &str, input: &[u8]) -> Result<String, String> {
    let (_, leaf, ca) = pkcs12_decode(input, pass)
        .map_err(|e| format!("unable to decode pkcs12 certificate with password: {e}"))?;
    let mut pem = gopem::encode_der("CERTIFICATE", &leaf);
    for c in &ca {
        pem.push_str(&gopem::encode_der("CERTIFICATE", c));
    }
    match cert_chain(pem.as_bytes()) {
        Ok(ordered) => Ok(ordered
            .iter()
            .map(|c| gopem::encode_der("CERTIFICATE", &c.raw))
            .collect()),
        Err(_) => Ok(pem),
    }
}

fn first_block(data: &[u8]) -> Result<(Block, &[u8]), String> {
    match gopem::decode(data) {
        (Some(b), rest) => Ok((b, rest)),
        // Go dereferences the nil block and panics.
        (None, _) => Err(NIL_DEREF.into()),
    }
}

fn parse_ca_certs(mut rest: &[u8]) -> Result<Vec<Vec<u8>>, String> {
    let mut out = Vec::new();
    while !rest.is_empty() {
        let (b, r) = first_block(rest)?;
        rest = r;
        parse_cert(&b.bytes)?;
        out.push(b.bytes);
    }
    Ok(out)
}

fn encode_pfx(leaf: &[u8], key_pem: &[u8], ca: &[Vec<u8>], pass: &str) -> Result<String, String> {
    let (kb, _) = first_block(key_pem)?;
    let key = keys::parse_any(&kb.bytes)?;
    let pkcs8 = key.to_pkcs8()?;
    let mut chain = vec![p12_keystore::Certificate::from_der(leaf).map_err(|e| e.to_string())?];
    for c in ca {
        chain.push(p12_keystore::Certificate::from_der(c).map_err(|e| e.to_string())?);
    }
    let pk = p12_keystore::PrivateKey::from_der(&pkcs8).map_err(|e| e.to_string())?;
    let local_id: Vec<u8> = {
        use sha1::Digest;
        sha1::Sha1::digest(leaf).to_vec()
    };
    let mut ks = p12_keystore::KeyStore::new();
    ks.add_entry(
        "1",
        p12_keystore::KeyStoreEntry::PrivateKeyChain(p12_keystore::PrivateKeyChain::new(
            local_id, pk, chain,
        )),
    );
    let pfx = ks.writer(pass).write().map_err(|e| e.to_string())?;
    Ok(super::encoding::b64_encode(&pfx))
}

fn pem_to_pkcs12(cert: &[u8], key: &[u8], pass: &str, full: bool) -> Result<String, String> {
    let (cb, rest) = first_block(cert)?;
    parse_cert(&cb.bytes)?;
    let ca = if full {
        parse_ca_certs(rest)?
    } else {
        Vec::new()
    };
    encode_pfx(&cb.bytes, key, &ca, pass)
}

fn truststore(cert: &[u8], pass: &str) -> Result<String, String> {
    let certs = parse_ca_certs(cert)?;
    let mut ks = p12_keystore::KeyStore::new();
    for (i, c) in certs.iter().enumerate() {
        let cert = p12_keystore::Certificate::from_der(c).map_err(|e| e.to_string())?;
        ks.add_entry(
            &i.to_string(),
            p12_keystore::KeyStoreEntry::Certificate(cert),
        );
    }
    let pfx = ks.writer(pass).write().map_err(|e| e.to_string())?;
    Ok(super::encoding::b64_encode(&pfx))
}

fn b64url(s: &str) -> Result<Vec<u8>, String> {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(s.trim_end_matches('='))
        .map_err(|e| format!("failed to decode base64: {e}"))
}

enum JwkKey {
    Private(PrivKey),
    Public(Vec<u8>),
}

fn parse_jwk(json: &str) -> Result<JwkKey, String> {
    let v: serde_json::Value = serde_json::from_str(json)
        .map_err(|e| format!("failed to unmarshal JSON into key hint: {e}"))?;
    let field = |k: &str| v.get(k).and_then(|x| x.as_str()).map(str::to_string);
    let bytes = |k: &str| -> Result<Vec<u8>, String> {
        b64url(&field(k).ok_or_else(|| format!("required field {k} is missing"))?)
    };
    let kty = field("kty").ok_or_else(|| "invalid key type from JSON ()".to_string())?;
    let has_d = v.get("d").is_some();
    match kty.as_str() {
        "RSA" => {
            let n = rsa::BigUint::from_bytes_be(&bytes("n")?);
            let e = rsa::BigUint::from_bytes_be(&bytes("e")?);
            if has_d {
                let d = rsa::BigUint::from_bytes_be(&bytes("d")?);
                let mut primes = Vec::new();
                if v.get("p").is_some() && v.get("q").is_some() {
                    primes.push(rsa::BigUint::from_bytes_be(&bytes("p")?));
                    primes.push(rsa::BigUint::from_bytes_be(&bytes("q")?));
                }
                let k = rsa::RsaPrivateKey::from_components(n, e, d, primes)
                    .map_err(|e| e.to_string())?;
                Ok(JwkKey::Private(PrivKey::Rsa(Box::new(k))))
            } else {
                use pkcs8::EncodePublicKey;
                let k = rsa::RsaPublicKey::new(n, e).map_err(|e| e.to_string())?;
                Ok(JwkKey::Public(
                    k.to_public_key_der()
                        .map_err(|e| e.to_string())?
                        .as_bytes()
                        .to_vec(),
                ))
            }
        }
        "EC" => {
            let crv = field("crv").unwrap_or_default();
            let (x, y) = (bytes("x")?, bytes("y")?);
            if has_d {
                let d = bytes("d")?;
                let k = match crv.as_str() {
                    "P-256" => {
                        PrivKey::P256(p256::SecretKey::from_slice(&d).map_err(|e| e.to_string())?)
                    }
                    "P-384" => {
                        PrivKey::P384(p384::SecretKey::from_slice(&d).map_err(|e| e.to_string())?)
                    }
                    "P-521" => {
                        PrivKey::P521(p521::SecretKey::from_slice(&d).map_err(|e| e.to_string())?)
                    }
                    c => return Err(format!("invalid curve algorithm {c}")),
                };
                Ok(JwkKey::Private(k))
            } else {
                use pkcs8::EncodePublicKey;
                let mut point = vec![4u8];
                let size = match crv.as_str() {
                    "P-256" => 32,
                    "P-384" => 48,
                    "P-521" => 66,
                    c => return Err(format!("invalid curve algorithm {c}")),
                };
                for c in [&x, &y] {
                    if c.len() > size {
                        return Err("invalid coordinate length".into());
                    }
                    point.extend(std::iter::repeat_n(0u8, size - c.len()));
                    point.extend_from_slice(c);
                }
                let e = |x: String| x;
                let der = match crv.as_str() {
                    "P-256" => p256::PublicKey::from_sec1_bytes(&point)
                        .map_err(|e| e.to_string())?
                        .to_public_key_der()
                        .map_err(|x| e(x.to_string()))?,
                    "P-384" => p384::PublicKey::from_sec1_bytes(&point)
                        .map_err(|e| e.to_string())?
                        .to_public_key_der()
                        .map_err(|x| e(x.to_string()))?,
                    _ => p521::PublicKey::from_sec1_bytes(&point)
                        .map_err(|e| e.to_string())?
                        .to_public_key_der()
                        .map_err(|x| e(x.to_string()))?,
                };
                Ok(JwkKey::Public(der.as_bytes().to_vec()))
            }
        }
        "OKP" => {
            let crv = field("crv").unwrap_or_default();
            if crv != "Ed25519" {
                return Err(format!("unsupported curve {crv}"));
            }
            let x = bytes("x")?;
            if has_d {
                let d = bytes("d")?;
                let seed: [u8; 32] = d
                    .as_slice()
                    .try_into()
                    .map_err(|_| "invalid Ed25519 private key length".to_string())?;
                Ok(JwkKey::Private(PrivKey::Ed25519(seed)))
            } else {
                let pk: [u8; 32] = x
                    .as_slice()
                    .try_into()
                    .map_err(|_| "invalid Ed25519 public key length".to_string())?;
                Ok(JwkKey::Public(keys::ed25519_spki(&pk)))
            }
        }
        "oct" => Err("x509: unsupported public key type: []uint8".into()),
        k => Err(format!("invalid key type from JSON ({k})")),
    }
}

fn rsa_decrypt(scheme: &str, hash: &str, input: &[u8], key: &[u8]) -> Result<Vec<u8>, String> {
    match scheme {
        "None" => Ok(input.to_vec()),
        "RSA-OAEP" => {
            let (block, _) = gopem::decode(key);
            let block = block.ok_or_else(|| "failed to decode PEM block".to_string())?;
            let k = keys::parse_any(&block.bytes)
                .map_err(|e| format!("could not parse private key: {e}"))?;
            let PrivKey::Rsa(k) = k else {
                return Err("could not parse RSA private key".into());
            };
            let res = match hash {
                "SHA1" => k.decrypt(rsa::Oaep::new::<sha1::Sha1>(), input),
                "SHA512" => k.decrypt(rsa::Oaep::new::<sha2::Sha512>(), input),
                _ => k.decrypt(rsa::Oaep::new::<sha2::Sha256>(), input),
            };
            res.map_err(|_| {
                "error decrypting data with RSA: crypto/rsa: decryption error".to_string()
            })
        }
        s => Err(format!("decryption scheme {s} is not supported")),
    }
}

/// A string or binary argument (`string` parameters accept both).
fn bin(a: &[Value], i: usize) -> &[u8] {
    sb(a, i)
}

fn e(m: String) -> FuncError {
    err(m)
}

/// Registers ESO's functions (except the YAML ones).
pub fn install(m: &mut FuncMap) {
    use T::String as S;
    defb(m, "filterPEM", vec![S, S], |a| {
        filter_pem(s(a, 0), bin(a, 1)).map(Value::String).map_err(e)
    });
    defb(m, "filterCertChain", vec![S, S], |a| {
        // Every error text is fixed (Go's x509 parse texts and ESO's chain texts),
        // never input data, so the message is shown.
        filter_cert_chain(s(a, 0), bin(a, 1))
            .map(Value::String)
            .map_err(perr)
    });
    defb(m, "certSANs", vec![S], |a| {
        cert_sans(bin(a, 0)).map(Value::strings).map_err(e)
    });
    defb(m, "pkcs12key", vec![S], |a| {
        pkcs12_key("", bin(a, 0)).map(Value::String).map_err(e)
    });
    defb(m, "pkcs12keyPass", vec![S, S], |a| {
        pkcs12_key(s(a, 0), bin(a, 1)).map(Value::String).map_err(e)
    });
    defb(m, "pkcs12cert", vec![S], |a| {
        pkcs12_cert("", bin(a, 0)).map(Value::String).map_err(e)
    });
    defb(m, "pkcs12certPass", vec![S, S], |a| {
        pkcs12_cert(s(a, 0), bin(a, 1))
            .map(Value::String)
            .map_err(e)
    });
    defb(m, "pemToPkcs12", vec![S, S], |a| {
        pem_to_pkcs12(bin(a, 0), bin(a, 1), "", false)
            .map(Value::String)
            .map_err(e)
    });
    defb(m, "pemToPkcs12Pass", vec![S, S, S], |a| {
        pem_to_pkcs12(bin(a, 0), bin(a, 1), s(a, 2), false)
            .map(Value::String)
            .map_err(e)
    });
    defb(m, "fullPemToPkcs12", vec![S, S], |a| {
        pem_to_pkcs12(bin(a, 0), bin(a, 1), "", true)
            .map(Value::String)
            .map_err(e)
    });
    defb(m, "fullPemToPkcs12Pass", vec![S, S, S], |a| {
        pem_to_pkcs12(bin(a, 0), bin(a, 1), s(a, 2), true)
            .map(Value::String)
            .map_err(e)
    });
    defb(m, "pemTruststoreToPKCS12", vec![S], |a| {
        truststore(bin(a, 0), "").map(Value::String).map_err(e)
    });
    defb(m, "pemTruststoreToPKCS12Pass", vec![S, S], |a| {
        truststore(bin(a, 0), s(a, 1)).map(Value::String).map_err(e)
    });
    defb(m, "jwkPublicKeyPem", vec![S], |a| {
        match parse_jwk(s(a, 0)).map_err(e)? {
            JwkKey::Public(der) => ok_str(gopem::encode_der("PUBLIC KEY", &der)),
            JwkKey::Private(k) => Err(err(format!(
                "x509: unsupported public key type: {}",
                match k {
                    PrivKey::Rsa(_) => "*rsa.PrivateKey",
                    PrivKey::Ed25519(_) => "ed25519.PrivateKey",
                    _ => "*ecdsa.PrivateKey",
                }
            ))),
        }
    });
    defb(m, "jwkPrivateKeyPem", vec![S], |a| {
        match parse_jwk(s(a, 0)).map_err(e)? {
            JwkKey::Private(k) => {
                ok_str(gopem::encode_der("PRIVATE KEY", &k.to_pkcs8().map_err(e)?))
            }
            JwkKey::Public(_) => Err(err("x509: unknown key type while marshaling PKCS#8")),
        }
    });
    defb(m, "rsaDecrypt", vec![S, S, S, S], |a| {
        rsa_decrypt(s(a, 0), s(a, 1), bin(a, 2), bin(a, 3))
            .map(go_string)
            .map_err(e)
    });
}
