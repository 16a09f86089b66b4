//! sprig's crypto functions: checksums, bcrypt/htpasswd, the Master Password
//! algorithm (`derivePassword`), AES-CBC (`encryptAES`/`decryptAES`), random
//! bytes, UUIDs, key and certificate generation; and `semver`/`semverCompare`.

use aes::cipher::{BlockDecryptMut, BlockEncryptMut, KeyIvInit};
use hmac::Mac;
use rand::RngCore;
use sha2::Digest;

use crate::func::FuncMap;
use crate::value::{GoType as T, Value};

use super::keys::{self, PrivKey};
use super::objects::{self, CertObj, SemverObj};
use super::semver::{Constraints, Version};
use super::util::*;
use super::{encoding, gopem};

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

const TEMPLATES: &[(&str, &[&str])] = &[
    ("maximum", &["anoxxxxxxxxxxxxxxxxx", "axxxxxxxxxxxxxxxxxno"]),
    (
        "long",
        &[
            "CvcvnoCvcvCvcv",
            "CvcvCvcvnoCvcv",
            "CvcvCvcvCvcvno",
            "CvccnoCvcvCvcv",
            "CvccCvcvnoCvcv",
            "CvccCvcvCvcvno",
            "CvcvnoCvccCvcv",
            "CvcvCvccnoCvcv",
            "CvcvCvccCvcvno",
            "CvcvnoCvcvCvcc",
            "CvcvCvcvnoCvcc",
            "CvcvCvcvCvccno",
            "CvccnoCvccCvcv",
            "CvccCvccnoCvcv",
            "CvccCvccCvcvno",
            "CvcvnoCvccCvcc",
            "CvcvCvccnoCvcc",
            "CvcvCvccCvccno",
            "CvccnoCvcvCvcc",
            "CvccCvcvnoCvcc",
            "CvccCvcvCvccno",
        ],
    ),
    ("medium", &["CvcnoCvc", "CvcCvcno"]),
    ("short", &["Cvcn"]),
    ("basic", &["aaanaaan", "aannaaan", "aaannaaa"]),
    ("pin", &["nnnn"]),
];

fn template_chars(c: u8) -> &'static [u8] {
    match c {
        b'V' => b"AEIOU",
        b'C' => b"BCDFGHJKLMNPQRSTVWXYZ",
        b'v' => b"aeiou",
        b'c' => b"bcdfghjklmnpqrstvwxyz",
        b'A' => b"AEIOUBCDFGHJKLMNPQRSTVWXYZ",
        b'a' => b"AEIOUaeiouBCDFGHJKLMNPQRSTVWXYZbcdfghjklmnpqrstvwxyz",
        b'n' => b"0123456789",
        b'o' => b"@&%?,=[]_:-+*$#!'^~;()/.",
        b'x' => b"AEIOUaeiouBCDFGHJKLMNPQRSTVWXYZbcdfghjklmnpqrstvwxyz0123456789!@#$%^&*()",
        _ => b"",
    }
}

/// sprig `derivePassword` (Master Password algorithm v3).
pub fn derive_password(counter: u32, kind: &str, password: &str, user: &str, site: &str) -> String {
    let Some((_, templates)) = TEMPLATES.iter().find(|(k, _)| *k == kind) else {
        return format!("cannot find password template {kind}");
    };
    const SEED: &[u8] = b"com.lyndir.masterpassword";
    let mut salt = SEED.to_vec();
    salt.extend_from_slice(&(user.len() as u32).to_be_bytes());
    salt.extend_from_slice(user.as_bytes());
    let mut key = [0u8; 64];
    let Ok(params) = scrypt::Params::new(15, 8, 2, 64) else {
        return "failed to derive password: invalid scrypt parameters".into();
    };
    if let Err(e) = scrypt::scrypt(password.as_bytes(), &salt, &params, &mut key) {
        return format!("failed to derive password: {e}");
    }
    let mut msg = SEED.to_vec();
    msg.extend_from_slice(&(site.len() as u32).to_be_bytes());
    msg.extend_from_slice(site.as_bytes());
    msg.extend_from_slice(&counter.to_be_bytes());
    let Ok(mut mac) = hmac::Hmac::<sha2::Sha256>::new_from_slice(&key) else {
        return "failed to derive password: hmac".into();
    };
    mac.update(&msg);
    let seed = mac.finalize().into_bytes();
    let temp = templates[usize::from(seed[0]) % templates.len()].as_bytes();
    temp.iter()
        .enumerate()
        .map(|(i, &c)| {
            let chars = template_chars(c);
            char::from(chars[usize::from(seed[i + 1]) % chars.len()])
        })
        .collect()
}

fn bcrypt_hash(input: &str) -> String {
    match bcrypt::hash_with_result(input, 10) {
        Ok(h) => h.format_for_version(bcrypt::Version::TwoA),
        Err(e) => format!("failed to encrypt string with bcrypt: {e}"),
    }
}

/// sprig `encryptAES`.
pub fn encrypt_aes(password: &[u8], plaintext: &[u8]) -> Result<String, String> {
    if plaintext.is_empty() {
        return Ok(String::new());
    }
    let mut key = [0u8; 32];
    let n = password.len().min(32);
    key[..n].copy_from_slice(&password[..n]);
    let pad = 16 - plaintext.len() % 16;
    let mut content = plaintext.to_vec();
    content.extend(std::iter::repeat_n(pad as u8, pad));
    let mut iv = [0u8; 16];
    rand::rng().fill_bytes(&mut iv);
    let enc = cbc::Encryptor::<aes::Aes256>::new(&key.into(), &iv.into());
    let len = content.len();
    let ct = enc
        .encrypt_padded_mut::<aes::cipher::block_padding::NoPadding>(&mut content, len)
        .map_err(|e| e.to_string())?
        .to_vec();
    let mut out = iv.to_vec();
    out.extend(ct);
    Ok(encoding::b64_encode(&out))
}

/// sprig `decryptAES`.
pub fn decrypt_aes(password: &[u8], crypt64: &[u8]) -> Result<Vec<u8>, String> {
    if crypt64.is_empty() {
        return Ok(Vec::new());
    }
    let mut key = [0u8; 32];
    let n = password.len().min(32);
    key[..n].copy_from_slice(&password[..n]);
    let crypt = encoding::b64_decode(crypt64).map_err(|e| e.to_string())?;
    if crypt.len() < 16 {
        return Err("runtime error: slice bounds out of range".into());
    }
    let (iv, body) = crypt.split_at(16);
    if body.len() % 16 != 0 {
        return Err("crypto/cipher: input not full blocks".into());
    }
    let mut buf = body.to_vec();
    let dec = cbc::Decryptor::<aes::Aes256>::new(&key.into(), iv.into());
    let out = dec
        .decrypt_padded_mut::<aes::cipher::block_padding::NoPadding>(&mut buf)
        .map_err(|e| e.to_string())?
        .to_vec();
    let Some(&last) = out.last() else {
        return Err("runtime error: index out of range [-1]".into());
    };
    let cut = usize::from(last);
    if cut > out.len() {
        return Err("runtime error: slice bounds out of range".into());
    }
    Ok(out[..out.len() - cut].to_vec())
}

fn random_bytes(n: usize) -> Vec<u8> {
    let mut b = vec![0u8; n];
    rand::rng().fill_bytes(&mut b);
    b
}

/// Generates a private key as sprig's `genPrivateKey` does.
pub fn generate_key(kind: &str) -> Result<PrivKey, String> {
    match kind {
        "" | "rsa" => gen_rsa(4096),
        "ecdsa" => loop {
            if let Ok(k) = p256::SecretKey::from_slice(&random_bytes(32)) {
                return Ok(PrivKey::P256(k));
            }
        },
        "ed25519" => {
            let mut seed = [0u8; 32];
            rand::rng().fill_bytes(&mut seed);
            Ok(PrivKey::Ed25519(seed))
        }
        other => Err(format!("Unknown type {other}")),
    }
}

fn gen_rsa(bits: usize) -> Result<PrivKey, String> {
    use aws_lc_rs::encoding::AsDer;
    let size = if bits >= 4096 {
        aws_lc_rs::rsa::KeySize::Rsa4096
    } else {
        aws_lc_rs::rsa::KeySize::Rsa2048
    };
    let kp = aws_lc_rs::rsa::KeyPair::generate(size)
        .map_err(|e| format!("failed to generate private key: {e}"))?;
    let der = kp
        .as_der()
        .map_err(|e| format!("failed to generate private key: {e}"))?;
    keys::parse_pkcs8(der.as_ref())
}

fn dsa_key_pem() -> Result<String, String> {
    use der::Encode;
    use rsa::rand_core::OsRng;
    let comps = dsa::Components::generate(&mut OsRng, dsa::KeySize::DSA_2048_256);
    let key = dsa::SigningKey::generate(&mut OsRng, comps);
    let vk = key.verifying_key();
    let c = vk.components();
    let to_uint =
        |b: &dsa::BigUint| der::asn1::Uint::new(&b.to_bytes_be()).map_err(|e| e.to_string());
    let seq: Vec<der::asn1::Uint> = vec![
        der::asn1::Uint::new(&[0]).map_err(|e| e.to_string())?,
        to_uint(c.p())?,
        to_uint(c.q())?,
        to_uint(c.g())?,
        to_uint(vk.y())?,
        to_uint(key.x())?,
    ];
    let der = seq.to_der().map_err(|e| e.to_string())?;
    Ok(gopem::encode_der("DSA PRIVATE KEY", &der))
}

fn key_pem(k: &PrivKey) -> Result<String, String> {
    let (kind, der) = k.sprig_pem()?;
    Ok(gopem::encode_der(kind, &der))
}

/// sprig's `parsePrivateKeyPEM`.
fn parse_key_pem(pem: &str) -> Result<PrivKey, String> {
    let (b, _) = gopem::decode(pem.as_bytes());
    let b = b.ok_or_else(|| "no PEM data in input".to_string())?;
    if b.kind == "PRIVATE KEY" {
        return keys::parse_pkcs8(&b.bytes).map_err(|e| format!("decoding PEM as PKCS#8: {e}"));
    }
    let Some(prefix) = b.kind.strip_suffix(" PRIVATE KEY") else {
        return Err(format!(
            "no private key data in PEM block of type {}",
            b.kind
        ));
    };
    match prefix {
        "RSA" => keys::parse_pkcs1(&b.bytes)
            .ok_or_else(|| "parsing RSA private key from PEM".to_string()),
        "EC" => {
            keys::parse_sec1(&b.bytes).map_err(|e| format!("parsing EC private key from PEM: {e}"))
        }
        "DSA" => Err("DSA keys cannot sign certificates here".into()),
        _ => Err(format!("invalid private key type {}", b.kind)),
    }
}

fn rcgen_key(k: &PrivKey) -> Result<rcgen::KeyPair, String> {
    let pkcs8 = k.to_pkcs8()?;
    let alg: &'static rcgen::SignatureAlgorithm = match k {
        PrivKey::Rsa(_) => &rcgen::PKCS_RSA_SHA256,
        PrivKey::P256(_) => &rcgen::PKCS_ECDSA_P256_SHA256,
        PrivKey::P384(_) => &rcgen::PKCS_ECDSA_P384_SHA384,
        PrivKey::P521(_) => &rcgen::PKCS_ECDSA_P521_SHA512,
        PrivKey::Ed25519(_) => &rcgen::PKCS_ED25519,
    };
    let der = rustls_pki_types::PrivatePkcs8KeyDer::from(pkcs8);
    rcgen::KeyPair::from_pkcs8_der_and_sign_algo(&der, alg).map_err(|e| e.to_string())
}

fn list_strings(v: &Value, what: &str) -> Result<Vec<String>, String> {
    match v {
        Value::Nil => Ok(Vec::new()),
        other => {
            let items = other.as_slice().unwrap_or(&[]);
            items
                .iter()
                .map(|x| match x {
                    Value::String(s) => Ok(s.clone()),
                    o => Err(format!(
                        "{what}: {} is not a string",
                        crate::fmt::format_v(o)
                    )),
                })
                .collect()
        }
    }
}

fn base_params(
    cn: &str,
    ips: &Value,
    dns: &Value,
    days: i64,
    ca: bool,
) -> Result<rcgen::CertificateParams, String> {
    let mut sans = Vec::new();
    for ip in list_strings(ips, "error parsing ip")? {
        let addr: std::net::IpAddr = ip.parse().map_err(|_| format!("error parsing ip: {ip}"))?;
        sans.push(rcgen::SanType::IpAddress(addr));
    }
    for d in list_strings(dns, "error processing alternate dns name")? {
        sans.push(rcgen::SanType::DnsName(
            d.try_into().map_err(|e: rcgen::Error| e.to_string())?,
        ));
    }
    let mut p = rcgen::CertificateParams::default();
    p.subject_alt_names = sans;
    let mut dn = rcgen::DistinguishedName::new();
    dn.push(rcgen::DnType::CommonName, cn);
    p.distinguished_name = dn;
    let mut serial = random_bytes(16);
    serial[0] &= 0x7f;
    p.serial_number = Some(rcgen::SerialNumber::from_slice(&serial));
    let now = time::OffsetDateTime::now_utc();
    p.not_before = now;
    p.not_after = days
        .checked_mul(86_400)
        .and_then(|secs| now.checked_add(time::Duration::seconds(secs)))
        .ok_or_else(|| "error creating certificate: validity out of range".to_string())?;
    p.key_usages = vec![
        rcgen::KeyUsagePurpose::KeyEncipherment,
        rcgen::KeyUsagePurpose::DigitalSignature,
    ];
    if ca {
        p.key_usages.push(rcgen::KeyUsagePurpose::KeyCertSign);
        p.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    } else {
        p.is_ca = rcgen::IsCa::ExplicitNoCa;
    }
    p.extended_key_usages = vec![
        rcgen::ExtendedKeyUsagePurpose::ServerAuth,
        rcgen::ExtendedKeyUsagePurpose::ClientAuth,
    ];
    p.use_authority_key_identifier_extension = true;
    Ok(p)
}

fn make_cert(
    mut params: rcgen::CertificateParams,
    key: &PrivKey,
    signer: Option<(&str, &str)>,
) -> Result<CertObj, String> {
    // Go sets an authority key id only when the issuer differs from the subject.
    params.use_authority_key_identifier_extension = signer.is_some();
    let kp = rcgen_key(key)?;
    let cert = match signer {
        None => params
            .self_signed(&kp)
            .map_err(|e| format!("error creating certificate: {e}"))?,
        Some((ca_cert, ca_key)) => {
            let (cb, _) = gopem::decode(ca_cert.as_bytes());
            let cb = cb.ok_or_else(|| "unable to decode certificate".to_string())?;
            super::eso::parse_cert(&cb.bytes)
                .map_err(|e| format!("error parsing certificate: decodedSignerCert.Bytes: {e}"))?;
            let signer_key =
                parse_key_pem(ca_key).map_err(|e| format!("error parsing private key: {e}"))?;
            let signer_kp = rcgen_key(&signer_key)?;
            let der = rustls_pki_types::CertificateDer::from(cb.bytes);
            let issuer = rcgen::Issuer::from_ca_cert_der(&der, signer_kp)
                .map_err(|e| format!("error parsing certificate: {e}"))?;
            params
                .signed_by(&kp, &issuer)
                .map_err(|e| format!("error creating certificate: {e}"))?
        }
    };
    Ok(CertObj {
        cert: gopem::encode_der("CERTIFICATE", cert.der()),
        key: key_pem(key)?,
    })
}

fn cert_value(r: Result<CertObj, String>) -> R {
    r.map(Value::object).map_err(err)
}

/// Registers the crypto and semver functions.
pub fn install(m: &mut FuncMap) {
    use T::{Int, String as S};
    let list = || T::Slice(Box::new(T::Interface));
    let certt = || T::Named(objects::CERT.into());
    defb(m, "sha1sum", vec![S], |a| {
        ok_str(hex(&sha1::Sha1::digest(sb(a, 0))))
    });
    defb(m, "sha256sum", vec![S], |a| {
        ok_str(hex(&sha2::Sha256::digest(sb(a, 0))))
    });
    defb(m, "sha512sum", vec![S], |a| {
        ok_str(hex(&sha2::Sha512::digest(sb(a, 0))))
    });
    defb(m, "adler32sum", vec![S], |a| {
        let mut h = adler2::Adler32::new();
        h.write_slice(sb(a, 0));
        ok_str(h.checksum().to_string())
    });
    def(m, "bcrypt", vec![S], |a| ok_str(bcrypt_hash(s(a, 0))));
    def(m, "htpasswd", vec![S, S, S], |a| {
        let (user, pass, alg) = (s(a, 0), s(a, 1), s(a, 2));
        if user.contains(':') {
            return ok_str(format!("invalid username: {user}"));
        }
        if alg == "sha" {
            return ok_str(format!(
                "{user}:{{SHA}}{}",
                encoding::b64_encode(&sha1::Sha1::digest(pass.as_bytes()))
            ));
        }
        ok_str(format!("{user}:{}", bcrypt_hash(pass)))
    });
    def(m, "derivePassword", vec![T::Uint32, S, S, S, S], |a| {
        let counter = a.first().and_then(Value::uint_bits).unwrap_or(0) as u32;
        ok_str(derive_password(counter, s(a, 1), s(a, 2), s(a, 3), s(a, 4)))
    });
    defb(m, "encryptAES", vec![S, S], |a| {
        encrypt_aes(sb(a, 0), sb(a, 1))
            .map(Value::String)
            .map_err(err)
    });
    defb(m, "decryptAES", vec![S, S], |a| {
        decrypt_aes(sb(a, 0), sb(a, 1)).map(go_string).map_err(err)
    });
    def(m, "randBytes", vec![Int], |a| {
        let n = int(a, 0);
        if n < 0 {
            return Err(perr("runtime error: makeslice: len out of range"));
        }
        check_bytes(n as usize)?;
        ok_str(encoding::b64_encode(&random_bytes(n as usize)))
    });
    def(m, "uuidv4", vec![], |_| {
        ok_str(uuid::Uuid::new_v4().to_string())
    });
    def(m, "genPrivateKey", vec![S], |a| {
        let out = match s(a, 0) {
            "dsa" => dsa_key_pem(),
            kind => generate_key(kind).and_then(|k| key_pem(&k)),
        };
        ok_str(out.unwrap_or_else(|e| e))
    });
    def(m, "buildCustomCert", vec![S, S], |a| {
        let cert = encoding::b64_decode(sb(a, 0))
            .map_err(|_| err("unable to decode base64 certificate"))?;
        let key = encoding::b64_decode(sb(a, 1))
            .map_err(|_| err("unable to decode base64 private key"))?;
        let (cb, _) = gopem::decode(&cert);
        let cb = cb.ok_or_else(|| err("unable to decode certificate"))?;
        super::eso::parse_cert(&cb.bytes)
            .map_err(|e| err(format!("error parsing certificate: decodedCert.Bytes: {e}")))?;
        let key_s = String::from_utf8_lossy(&key).into_owned();
        parse_key_pem(&key_s).map_err(|e| err(format!("error parsing private key: {e}")))?;
        Ok(Value::object(CertObj {
            cert: String::from_utf8_lossy(&cert).into_owned(),
            key: key_s,
        }))
    });
    def(m, "genCA", vec![S, Int], |a| {
        cert_value(gen_rsa(2048).and_then(|k| {
            make_cert(
                base_params(s(a, 0), &Value::Nil, &Value::Nil, int(a, 1), true)?,
                &k,
                None,
            )
        }))
    });
    def(m, "genCAWithKey", vec![S, Int, S], |a| {
        cert_value(
            parse_key_pem(s(a, 2))
                .map_err(|e| format!("parsing private key: {e}"))
                .and_then(|k| {
                    make_cert(
                        base_params(s(a, 0), &Value::Nil, &Value::Nil, int(a, 1), true)?,
                        &k,
                        None,
                    )
                }),
        )
    });
    def(m, "genSelfSignedCert", vec![S, list(), list(), Int], |a| {
        cert_value(gen_rsa(2048).and_then(|k| {
            make_cert(
                base_params(s(a, 0), &a[1], &a[2], int(a, 3), false)?,
                &k,
                None,
            )
        }))
    });
    def(
        m,
        "genSelfSignedCertWithKey",
        vec![S, list(), list(), Int, S],
        |a| {
            cert_value(
                parse_key_pem(s(a, 4))
                    .map_err(|e| format!("parsing private key: {e}"))
                    .and_then(|k| {
                        make_cert(
                            base_params(s(a, 0), &a[1], &a[2], int(a, 3), false)?,
                            &k,
                            None,
                        )
                    }),
            )
        },
    );
    def(
        m,
        "genSignedCert",
        vec![S, list(), list(), Int, certt()],
        |a| {
            let ca = objects::as_cert(&a[4]).unwrap_or(CertObj {
                cert: String::new(),
                key: String::new(),
            });
            cert_value(gen_rsa(2048).and_then(|k| {
                make_cert(
                    base_params(s(a, 0), &a[1], &a[2], int(a, 3), false)?,
                    &k,
                    Some((&ca.cert, &ca.key)),
                )
            }))
        },
    );
    def(
        m,
        "genSignedCertWithKey",
        vec![S, list(), list(), Int, certt(), S],
        |a| {
            let ca = objects::as_cert(&a[4]).unwrap_or(CertObj {
                cert: String::new(),
                key: String::new(),
            });
            cert_value(
                parse_key_pem(s(a, 5))
                    .map_err(|e| format!("parsing private key: {e}"))
                    .and_then(|k| {
                        make_cert(
                            base_params(s(a, 0), &a[1], &a[2], int(a, 3), false)?,
                            &k,
                            Some((&ca.cert, &ca.key)),
                        )
                    }),
            )
        },
    );
    def(m, "semver", vec![S], |a| {
        Version::parse(s(a, 0))
            .map(|v| Value::object(SemverObj { v, pointer: true }))
            .map_err(|_| perr("invalid semantic version"))
    });
    def(m, "semverCompare", vec![S, S], |a| {
        let c = Constraints::parse(s(a, 0)).map_err(|_| perr("invalid constraint"))?;
        let v = Version::parse(s(a, 1)).map_err(|_| perr("invalid semantic version"))?;
        Ok(Value::Bool(c.check(&v)))
    });
}
