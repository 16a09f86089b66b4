//! ServiceAccount tokens (TokenRequest), TokenReview and OIDC discovery.
//! Tokens are ES256 JWTs with the claims layout of a real kube-apiserver.

use base64::Engine;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde_json::{Value, json};

/// The token signer of a server.
pub struct TokenIssuer {
    encoding: EncodingKey,
    decoding: DecodingKey,
    x: String,
    y: String,
    kid: String,
    /// `iss` claim and OIDC issuer URL.
    pub issuer: String,
}

impl std::fmt::Debug for TokenIssuer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenIssuer")
            .field("issuer", &self.issuer)
            .field("kid", &self.kid)
            .finish_non_exhaustive()
    }
}

/// Token errors.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// Key generation failed.
    #[error("key generation failed")]
    Key,
    /// Signing failed.
    #[error("signing failed: {0}")]
    Sign(#[from] jsonwebtoken::errors::Error),
}

/// What a valid token says.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenIdentity {
    /// Namespace.
    pub namespace: String,
    /// ServiceAccount name.
    pub name: String,
    /// ServiceAccount uid.
    pub uid: String,
    /// Audiences.
    pub audiences: Vec<String>,
}

/// The audience used when a TokenRequest names none.
pub const DEFAULT_AUDIENCE: &str = "https://kubernetes.default.svc.cluster.local";

impl TokenIssuer {
    /// A new issuer with a fresh P-256 key.
    pub fn new(issuer: &str) -> Result<Self, TokenError> {
        use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};
        let rng = aws_lc_rs::rand::SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
            .map_err(|_| TokenError::Key)?;
        let kp = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref())
            .map_err(|_| TokenError::Key)?;
        let public = kp.public_key().as_ref().to_vec();
        if public.len() != 65 {
            return Err(TokenError::Key);
        }
        let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let x = b64.encode(&public[1..33]);
        let y = b64.encode(&public[33..65]);
        let kid = {
            use sha_digest::digest;
            b64.encode(&digest(&public)[..16])
        };
        Ok(Self {
            encoding: EncodingKey::from_ec_der(pkcs8.as_ref()),
            decoding: DecodingKey::from_ec_der(&public),
            x,
            y,
            kid,
            issuer: issuer.to_string(),
        })
    }

    /// Issue a token for a ServiceAccount.
    pub fn issue(
        &self,
        namespace: &str,
        name: &str,
        uid: &str,
        audiences: &[String],
        expiration_seconds: i64,
        bound: Option<&Value>,
    ) -> Result<(String, i64), TokenError> {
        let now = chrono::Utc::now().timestamp();
        let exp = now + expiration_seconds;
        let mut k8s = json!({
            "namespace": namespace,
            "serviceaccount": {"name": name, "uid": uid},
        });
        if let Some(b) = bound
            && let Some(kind) = b["kind"].as_str()
        {
            let key = kind.to_lowercase();
            k8s[key] = json!({"name": b["name"], "uid": b["uid"]});
        }
        let claims = json!({
            "aud": audiences,
            "exp": exp,
            "iat": now,
            "iss": self.issuer,
            "jti": uuid::Uuid::new_v4().to_string(),
            "kubernetes.io": k8s,
            "nbf": now,
            "sub": format!("system:serviceaccount:{namespace}:{name}"),
        });
        let mut header = Header::new(Algorithm::ES256);
        header.kid = Some(self.kid.clone());
        let token = jsonwebtoken::encode(&header, &claims, &self.encoding)?;
        Ok((token, exp))
    }

    /// Verify a token's signature and lifetime. Audience matching is left to the caller.
    pub fn verify(&self, token: &str) -> Result<TokenIdentity, String> {
        let mut v = Validation::new(Algorithm::ES256);
        v.validate_aud = false;
        v.set_issuer(&[self.issuer.as_str()]);
        v.leeway = 0;
        let data =
            jsonwebtoken::decode::<Value>(token, &self.decoding, &v).map_err(|e| e.to_string())?;
        let c = data.claims;
        let aud = match &c["aud"] {
            Value::String(s) => vec![s.clone()],
            Value::Array(a) => a
                .iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect(),
            _ => vec![],
        };
        let k = &c["kubernetes.io"];
        Ok(TokenIdentity {
            namespace: k["namespace"].as_str().unwrap_or_default().to_string(),
            name: k["serviceaccount"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            uid: k["serviceaccount"]["uid"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            audiences: aud,
        })
    }

    /// `/.well-known/openid-configuration`.
    pub fn openid_configuration(&self) -> Value {
        json!({
            "issuer": self.issuer,
            "jwks_uri": format!("{}/openid/v1/jwks", self.issuer),
            "response_types_supported": ["id_token"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["ES256"],
        })
    }

    /// `/openid/v1/jwks`.
    pub fn jwks(&self) -> Value {
        json!({"keys": [{
            "use": "sig",
            "kty": "EC",
            "kid": self.kid,
            "crv": "P-256",
            "alg": "ES256",
            "x": self.x,
            "y": self.y,
        }]})
    }
}

mod sha_digest {
    /// SHA-256 of the bytes.
    pub fn digest(b: &[u8]) -> Vec<u8> {
        aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, b)
            .as_ref()
            .to_vec()
    }
}
