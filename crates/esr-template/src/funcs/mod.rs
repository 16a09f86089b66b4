//! ESO's template function library: the functions of ESO v2.9.0's vendored
//! sprig v3.3.1 (209 names with aliases; `env`, `expandenv` and
//! `getHostByName` are not present) and ESO's 18 own functions.
//!
//! Each function is registered with its Go signature ([`crate::func::Signature`]);
//! the executor checks and converts arguments before calling it. Functions that
//! return an `error` or panic in Go return `Err(FuncError)` with Go's text;
//! functions that put the error text into their output (`b64dec`, `fromYaml`,
//! …) do the same here.
//!
//! Go strings are byte strings; [`crate::value::Value::String`] holds UTF-8 only.
//! Functions that can produce non-UTF-8 output (`b64dec`, `b32dec`, `hexdec`)
//! return a `[]byte` value in that case, and the functions that consume binary
//! input (`pkcs12*`) accept both.
//!
//! Libraries: RustCrypto (`rsa`, `p256`/`p384`/`p521`, `ed25519-dalek`, `pkcs8`,
//! `sha1`/`sha2`, `hmac`, `scrypt`, `aes`+`cbc`, `dsa`), `bcrypt`, `p12-keystore`
//! (PKCS#12 read/write), `x509-parser` (certificate fields), `rcgen` on
//! `aws-lc-rs` (certificate signing, fast RSA key generation), `yaml-rust2`
//! (YAML events; YAML 1.1 typing and go-yaml v2's emitter rules are applied
//! here), `regex` (RE2-like; Go's ASCII-only `\d`/`\w`/`\s`/`\b` are
//! translated), `bigdecimal` (shopspring/decimal arithmetic of the `*f`
//! functions), `chrono`/`chrono-tz` (instants and the tz database; Go's layout
//! strings are implemented in [`gotime`]). Go-specific formats with no crate
//! equivalent are implemented here: `net/url`, `encoding/pem`, Go's base64/base32/
//! hex error texts, spf13/cast, Masterminds/semver, xstrings/goutils.

#![allow(clippy::collapsible_if, clippy::collapsible_match)]

pub mod cast;
pub mod crypto;
pub mod encoding;
pub mod eso;
pub mod gopem;
pub mod goregex;
pub mod gostr;
pub mod gotime;
pub mod gourl;
pub mod json;
pub mod keys;
pub mod objects;
pub mod paths;
pub mod semver;
pub mod sprig;
pub mod util;
pub mod yaml;

#[cfg(test)]
mod tests;

use crate::func::FuncMap;

/// Registers the whole function library in `map`.
pub fn install(map: &mut FuncMap) {
    sprig::install(map);
    goregex::install(map);
    gourl::install(map);
    crypto::install(map);
    eso::install(map);
    yaml::install(map);
}
