//! OAuth 2 bearer tokens (RFC 6750) as Zeebe's clients send them: JWT access tokens a client got
//! from the authorization server with the client-credentials grant. A token is accepted when
//! - its issuer (`iss`) is the configured one,
//! - it is signed (RS*, PS*, ES*, EdDSA) by a key of the issuer's key set ([`super::jwks`]),
//! - its audience (`aud`) holds one of the configured audiences,
//! - it has not expired (`exp`) and is not used before its time (`nbf`), each with the
//!   configured clock skew.
//!
//! The caller it establishes is named by `azp` (the client id, as Keycloak puts it), else
//! `client_id`, else `sub`; its tenants are the configured claim's strings (an array, or one
//! string). A token once validated is kept (at most [`CACHE_ENTRIES`]) so that its next calls
//! cost a lookup and the time checks, not a signature verification.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use jsonwebtoken::{Algorithm, Validation};
use waggle_gateway::Caller;

use super::jwks::{KeyError, KeySet, Source};

/// How many validated tokens are kept.
pub const CACHE_ENTRIES: usize = 4096;

/// The signature algorithms accepted: the asymmetric ones (a shared-secret HS* token could be
/// made by anyone holding the secret, and no secret is configured).
const ACCEPTED: &[Algorithm] = &[
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];

/// How tokens are validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OidcSettings {
    /// The issuer (`iss`), e.g. `https://keycloak.example/realms/camunda`.
    pub issuer_uri: String,
    /// Accepted audiences: a token's `aud` must hold one of them.
    pub audiences: Vec<String>,
    /// The issuer's key set, when not the discovery document's `jwks_uri`.
    pub jwk_set_uri: Option<String>,
    /// Tolerated difference between the issuer's clock and Waggle's, in seconds.
    pub clock_skew_secs: u64,
    /// The claim that lists the caller's tenants.
    pub tenants_claim: String,
}

/// Why a token was refused (its `Display` is the message the client gets).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenRefusal {
    #[error("the bearer token is not a well-formed JWT: {0}")]
    Malformed(String),
    #[error("the token's issuer '{found}' is not the configured issuer '{expected}'")]
    UnknownIssuer { found: String, expected: String },
    #[error("the token is signed with {0:?}; only the issuer's public keys are accepted (RS*, PS*, ES256, ES384, EdDSA)")]
    Algorithm(Algorithm),
    #[error("{0}")]
    Key(KeyError),
    #[error("the token's signature does not verify with the issuer's key: it was altered or signed by someone else")]
    BadSignature,
    #[error("the token expired at {} ({} s ago; the clock skew allowed is {skew} s)", time(.exp), between(.exp, .now))]
    Expired { exp: u64, now: u64, skew: u64 },
    #[error("the token is not valid before {} ({} s from now; the clock skew allowed is {skew} s)", time(.nbf), between(.now, .nbf))]
    NotYetValid { nbf: u64, now: u64, skew: u64 },
    #[error("the token's audience {found} does not include {expected}")]
    WrongAudience { found: String, expected: String },
    #[error("the token has no '{0}' claim")]
    MissingClaim(String),
}

impl TokenRefusal {
    /// Whether Waggle, not the token, is the cause (the keys could not be fetched).
    pub fn unavailable(&self) -> bool {
        matches!(self, TokenRefusal::Key(KeyError::Unavailable(_)))
    }
}

/// A Unix time in RFC 3339.
fn time(secs: &u64) -> String {
    chrono::DateTime::from_timestamp(*secs as i64, 0).map_or_else(|| secs.to_string(), |t| t.to_rfc3339())
}

/// Seconds from `earlier` to `later` (0 if not later).
fn between(earlier: &u64, later: &u64) -> u64 {
    later.saturating_sub(*earlier)
}

/// A validated token's caller and validity.
#[derive(Clone)]
struct Valid {
    caller: Caller,
    exp: u64,
    nbf: Option<u64>,
}

/// Validates bearer tokens against one issuer.
pub struct BearerValidator {
    settings: OidcSettings,
    keys: KeySet,
    cache: Mutex<HashMap<String, Valid>>,
}

impl BearerValidator {
    pub fn new(settings: OidcSettings) -> Result<Arc<Self>, reqwest::Error> {
        let source = match &settings.jwk_set_uri {
            Some(url) => Source::Url(url.clone()),
            None => Source::Discovery { issuer: settings.issuer_uri.clone() },
        };
        Ok(Arc::new(Self { keys: KeySet::new(source)?, settings, cache: Mutex::new(HashMap::new()) }))
    }

    /// Fetches the issuer's keys now, logging the outcome (a later token fetches them again if
    /// this fails).
    pub async fn prefetch(&self) {
        match self.keys.prefetch().await {
            Ok(n) => tracing::info!(issuer = %self.settings.issuer_uri, keys = n, "OAuth 2: the issuer's signing keys are fetched"),
            Err(e) => {
                tracing::warn!(issuer = %self.settings.issuer_uri, error = %e, "OAuth 2: the issuer's signing keys could not be fetched yet")
            }
        }
    }

    /// The caller `token` establishes, or why it is refused.
    pub async fn validate(&self, token: &str) -> Result<Caller, TokenRefusal> {
        let now = now();
        let skew = self.settings.clock_skew_secs;
        let cached = self.cache.lock().unwrap_or_else(|e| e.into_inner()).get(token).cloned();
        if let Some(valid) = cached {
            self.check_times(valid.exp, valid.nbf, now)?;
            return Ok(valid.caller);
        }
        let header = jsonwebtoken::decode_header(token).map_err(|e| TokenRefusal::Malformed(e.to_string()))?;
        let claims = unverified_claims(token)?;
        // the issuer first: a token of another issuer makes no key fetch
        let issuer = claims.get("iss").and_then(|i| i.as_str()).ok_or_else(|| TokenRefusal::MissingClaim("iss".into()))?;
        if issuer != self.settings.issuer_uri {
            return Err(TokenRefusal::UnknownIssuer { found: issuer.to_string(), expected: self.settings.issuer_uri.clone() });
        }
        if !ACCEPTED.contains(&header.alg) {
            return Err(TokenRefusal::Algorithm(header.alg));
        }
        let key = self.keys.key(header.kid.as_deref()).await.map_err(TokenRefusal::Key)?;
        if key.algorithm.is_some_and(|a| a != header.alg) {
            return Err(TokenRefusal::BadSignature);
        }
        let mut validation = Validation::new(header.alg);
        validation.leeway = skew;
        validation.validate_nbf = true;
        validation.set_issuer(&[&self.settings.issuer_uri]);
        validation.set_audience(&self.settings.audiences);
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        let data = jsonwebtoken::decode::<serde_json::Map<String, serde_json::Value>>(token, &key.decoding, &validation)
            .map_err(|e| self.refusal(e.into_kind(), &claims, now))?;
        let claims = data.claims;
        let exp = claims.get("exp").and_then(|e| e.as_u64()).ok_or_else(|| TokenRefusal::MissingClaim("exp".into()))?;
        let nbf = claims.get("nbf").and_then(|n| n.as_u64());
        let caller = caller_of(&claims, &self.settings.tenants_claim);
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        if cache.len() >= CACHE_ENTRIES {
            cache.retain(|_, v| v.exp.saturating_add(skew) >= now);
            if cache.len() >= CACHE_ENTRIES {
                cache.clear();
            }
        }
        cache.insert(token.to_string(), Valid { caller: caller.clone(), exp, nbf });
        Ok(caller)
    }

    fn check_times(&self, exp: u64, nbf: Option<u64>, now: u64) -> Result<(), TokenRefusal> {
        let skew = self.settings.clock_skew_secs;
        if exp.saturating_add(skew) < now {
            return Err(TokenRefusal::Expired { exp, now, skew });
        }
        match nbf {
            Some(nbf) if nbf > now.saturating_add(skew) => Err(TokenRefusal::NotYetValid { nbf, now, skew }),
            _ => Ok(()),
        }
    }

    /// The refusal for jsonwebtoken's error, worded with the (unverified) claims.
    fn refusal(
        &self,
        kind: jsonwebtoken::errors::ErrorKind,
        claims: &serde_json::Map<String, serde_json::Value>,
        now: u64,
    ) -> TokenRefusal {
        use jsonwebtoken::errors::ErrorKind as K;
        let skew = self.settings.clock_skew_secs;
        let number = |name: &str| claims.get(name).and_then(|v| v.as_u64()).unwrap_or_default();
        match kind {
            K::InvalidSignature | K::InvalidAlgorithm | K::InvalidKeyFormat | K::InvalidEcdsaKey | K::InvalidRsaKey(_) | K::Crypto(_) => {
                TokenRefusal::BadSignature
            }
            K::ExpiredSignature => TokenRefusal::Expired { exp: number("exp"), now, skew },
            K::ImmatureSignature => TokenRefusal::NotYetValid { nbf: number("nbf"), now, skew },
            K::InvalidAudience => TokenRefusal::WrongAudience {
                found: claims.get("aud").map_or_else(|| "(none)".to_string(), |a| a.to_string()),
                expected: if self.settings.audiences.len() == 1 {
                    format!("'{}'", self.settings.audiences[0])
                } else {
                    format!("any of {:?}", self.settings.audiences)
                },
            },
            K::InvalidIssuer => TokenRefusal::UnknownIssuer {
                found: claims.get("iss").and_then(|i| i.as_str()).unwrap_or_default().to_string(),
                expected: self.settings.issuer_uri.clone(),
            },
            K::MissingRequiredClaim(claim) => TokenRefusal::MissingClaim(claim),
            other => TokenRefusal::Malformed(format!("{other:?}")),
        }
    }
}

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// The token's claims, before its signature is checked: used only to refuse it early and to word
/// a refusal, never to accept it.
fn unverified_claims(token: &str) -> Result<serde_json::Map<String, serde_json::Value>, TokenRefusal> {
    let payload = token.split('.').nth(1).ok_or_else(|| TokenRefusal::Malformed("it has no payload".into()))?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .map_err(|e| TokenRefusal::Malformed(format!("its payload is not base64url: {e}")))?;
    serde_json::from_slice(&bytes).map_err(|e| TokenRefusal::Malformed(format!("its payload is not a JSON object: {e}")))
}

/// The caller a token's (verified) claims name.
fn caller_of(claims: &serde_json::Map<String, serde_json::Value>, tenants_claim: &str) -> Caller {
    let name = ["azp", "client_id", "sub"].iter().find_map(|c| claims.get(*c).and_then(|v| v.as_str())).unwrap_or("unknown");
    let tenants = match claims.get(tenants_claim) {
        Some(serde_json::Value::Array(items)) => items.iter().filter_map(|t| t.as_str().map(str::to_string)).collect(),
        Some(serde_json::Value::String(one)) => vec![one.clone()],
        _ => Vec::new(),
    };
    Caller { name: name.to_string(), tenants }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use jsonwebtoken::{EncodingKey, Header};
    use serde_json::json;

    /// An ES256 key pair: its encoding key and its public JWK with `kid`.
    pub(crate) fn key_pair(kid: &str) -> (EncodingKey, serde_json::Value) {
        let pair = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let raw = pair.public_key_raw();
        let b64 = |b: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b);
        let jwk =
            json!({"kid": kid, "kty": "EC", "crv": "P-256", "alg": "ES256", "use": "sig", "x": b64(&raw[1..33]), "y": b64(&raw[33..65])});
        (EncodingKey::from_ec_der(&pair.serialize_der()), jwk)
    }

    pub(crate) fn sign(key: &EncodingKey, kid: &str, claims: &serde_json::Value) -> String {
        let mut header = Header::new(Algorithm::ES256);
        header.kid = Some(kid.to_string());
        jsonwebtoken::encode(&header, claims, key).unwrap()
    }

    /// Serves `/.well-known/openid-configuration` and `/jwks` (whose keys `keys` holds) on
    /// loopback; counts the key set's fetches. Returns the issuer URL.
    pub(crate) async fn issuer(keys: Arc<Mutex<Vec<serde_json::Value>>>, fetches: Arc<std::sync::atomic::AtomicUsize>) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let issuer = format!("{base}/realms/test");
        let discovery = json!({"issuer": issuer, "jwks_uri": format!("{issuer}/jwks")});
        let router = axum::Router::new()
            .route("/realms/test/.well-known/openid-configuration", axum::routing::get(move || async move { axum::Json(discovery) }))
            .route(
                "/realms/test/jwks",
                axum::routing::get(move || async move {
                    fetches.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    axum::Json(json!({"keys": *keys.lock().unwrap()}))
                }),
            );
        tokio::spawn(async move { axum::serve(listener, router).await });
        issuer
    }

    pub(crate) fn settings(issuer: &str) -> OidcSettings {
        OidcSettings {
            issuer_uri: issuer.to_string(),
            audiences: vec!["waggle-api".into()],
            jwk_set_uri: None,
            clock_skew_secs: 30,
            tenants_claim: "tenants".into(),
        }
    }

    fn claims(issuer: &str, extra: serde_json::Value) -> serde_json::Value {
        let mut c = json!({"iss": issuer, "aud": ["waggle-api", "account"], "exp": now() + 300, "azp": "zeebe", "sub": "s-1", "tenants": ["<default>", "a"]});
        for (k, v) in extra.as_object().unwrap() {
            if v.is_null() {
                c.as_object_mut().unwrap().remove(k);
            } else {
                c[k] = v.clone();
            }
        }
        c
    }

    #[tokio::test]
    async fn a_good_token_names_its_caller_and_each_fault_is_named() {
        let (key, jwk) = key_pair("k1");
        let fetches = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let issuer = issuer(Arc::new(Mutex::new(vec![jwk])), fetches.clone()).await;
        let v = BearerValidator::new(settings(&issuer)).unwrap();
        let good = sign(&key, "k1", &claims(&issuer, json!({})));
        let caller = v.validate(&good).await.unwrap();
        assert_eq!(caller, Caller { name: "zeebe".into(), tenants: vec!["<default>".into(), "a".into()] });
        // again: from the cache
        assert_eq!(v.validate(&good).await.unwrap(), caller);
        let refused = |extra: serde_json::Value| {
            let token = sign(&key, "k1", &claims(&issuer, extra));
            let v = v.clone();
            async move { v.validate(&token).await.unwrap_err() }
        };
        let expired = refused(json!({"exp": now() - 100})).await;
        assert!(matches!(expired, TokenRefusal::Expired { .. }), "{expired}");
        assert!(expired.to_string().contains("the clock skew allowed is 30 s"), "{expired}");
        // within the skew: accepted
        v.validate(&sign(&key, "k1", &claims(&issuer, json!({"exp": now() - 10})))).await.unwrap();
        assert!(matches!(refused(json!({"nbf": now() + 100})).await, TokenRefusal::NotYetValid { .. }));
        let audience = refused(json!({"aud": "other-api"})).await;
        assert_eq!(audience.to_string(), "the token's audience \"other-api\" does not include 'waggle-api'");
        assert!(matches!(refused(json!({"aud": null})).await, TokenRefusal::MissingClaim(c) if c == "aud"));
        assert!(matches!(refused(json!({"exp": null})).await, TokenRefusal::MissingClaim(c) if c == "exp"));
        let foreign = refused(json!({"iss": "https://evil.example"})).await;
        assert!(foreign.to_string().contains("issuer 'https://evil.example' is not the configured issuer"), "{foreign}");
        // forged: the payload changed under the signature, or signed by another key with the same kid
        let mut parts: Vec<String> = good.split('.').map(str::to_string).collect();
        let forged = claims(&issuer, json!({"tenants": ["everything"]}));
        parts[1] = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(forged.to_string());
        assert_eq!(v.validate(&parts.join(".")).await.unwrap_err(), TokenRefusal::BadSignature);
        let (other, _) = key_pair("k1");
        assert_eq!(v.validate(&sign(&other, "k1", &claims(&issuer, json!({})))).await.unwrap_err(), TokenRefusal::BadSignature);
        // a shared-secret token is refused outright
        let hs =
            jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims(&issuer, json!({})), &EncodingKey::from_secret(b"x")).unwrap();
        assert_eq!(v.validate(&hs).await.unwrap_err(), TokenRefusal::Algorithm(Algorithm::HS256));
        assert!(matches!(v.validate("not-a-token").await.unwrap_err(), TokenRefusal::Malformed(_)));
        assert_eq!(fetches.load(std::sync::atomic::Ordering::SeqCst), 1, "one fetch served every known key");
    }

    #[tokio::test]
    async fn an_unknown_key_refetches_the_set_at_most_once_per_interval() {
        let (old, jwk_old) = key_pair("old");
        let keys = Arc::new(Mutex::new(vec![jwk_old]));
        let fetches = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let issuer = issuer(keys.clone(), fetches.clone()).await;
        let v = BearerValidator::new(settings(&issuer)).unwrap();
        v.validate(&sign(&old, "old", &claims(&issuer, json!({})))).await.unwrap();
        // the issuer rotates: a token of the new key is accepted after one refetch... once the
        // interval since the last fetch has passed
        let (new, jwk_new) = key_pair("new");
        keys.lock().unwrap().push(jwk_new);
        let token = sign(&new, "new", &claims(&issuer, json!({})));
        let early = v.validate(&token).await.unwrap_err();
        assert_eq!(early.to_string(), "the token is signed with key 'new', which the issuer's key set (JWKS) does not hold");
        assert_eq!(fetches.load(std::sync::atomic::Ordering::SeqCst), 1, "no refetch within the interval");
        v.keys.allow_refetch_now();
        v.validate(&token).await.unwrap();
        assert_eq!(fetches.load(std::sync::atomic::Ordering::SeqCst), 2);
        // made-up key ids fetch nothing more within the interval
        for i in 0..5 {
            let t = sign(&new, &format!("made-up-{i}"), &claims(&issuer, json!({})));
            assert!(matches!(v.validate(&t).await.unwrap_err(), TokenRefusal::Key(KeyError::Unknown(_))));
        }
        assert_eq!(fetches.load(std::sync::atomic::Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn an_unreachable_issuer_is_unavailable_not_a_bad_token() {
        let v = BearerValidator::new(settings("http://127.0.0.1:9/realms/none")).unwrap();
        let (key, _) = key_pair("k");
        let refusal = v.validate(&sign(&key, "k", &claims("http://127.0.0.1:9/realms/none", json!({})))).await.unwrap_err();
        assert!(refusal.unavailable(), "{refusal}");
        assert!(refusal.to_string().starts_with("the issuer's signing keys could not be fetched: GET http://127.0.0.1:9/"), "{refusal}");
    }
}
