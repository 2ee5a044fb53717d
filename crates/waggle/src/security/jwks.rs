//! The issuer's signing keys (its JSON Web Key Set, RFC 7517), fetched over HTTP(S) and cached.
//!
//! Where they come from: the configured JWKS URL, or the `jwks_uri` of the issuer's OpenID
//! discovery document (`<issuer>/.well-known/openid-configuration`, whose `issuer` must be the
//! configured one, OpenID Connect Discovery 1.0 §4.3). The set is fetched on first use; a token
//! signed with a key id the cached set does not hold triggers a refetch (the issuer rotated its
//! keys), at most once per [`REFETCH_INTERVAL`] so that tokens with made-up key ids cannot make
//! Waggle hammer the issuer; a set older than [`MAX_AGE`] is refetched on its next use (a key
//! the issuer withdrew stops being accepted). A failed refetch keeps the keys held.
//!
//! Only signing keys are kept (`use` absent or `sig`), of the asymmetric types (RSA, EC, OKP):
//! an encryption key or a symmetric one in the set is skipped.

use std::collections::HashMap;
use std::str::FromStr;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::Jwk;
use jsonwebtoken::{Algorithm, DecodingKey};

/// The least time between two fetches of the set.
pub const REFETCH_INTERVAL: Duration = Duration::from_secs(10);
/// How long a fetched set is used before it is fetched again.
pub const MAX_AGE: Duration = Duration::from_secs(600);
/// The longest a fetch (each request of it) may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(5);
/// The largest discovery document or key set read.
const MAX_DOCUMENT: usize = 1024 * 1024;

/// One signing key of the set.
pub struct Key {
    pub decoding: DecodingKey,
    /// The algorithm the key is for, when the set says (`alg`).
    pub algorithm: Option<Algorithm>,
}

/// Why no key could be had for a token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// The issuer's set, fetched (or fetched too recently to fetch again), has no such key.
    #[error("the token is signed with key '{0}', which the issuer's key set (JWKS) does not hold")]
    Unknown(String),
    /// The token names no key and the set holds more than one.
    #[error("the token names no key (no 'kid' in its header) and the issuer's key set holds {0} keys")]
    Unnamed(usize),
    /// The set could not be fetched and none is held.
    #[error("the issuer's signing keys could not be fetched: {0}")]
    Unavailable(String),
}

/// Where the set is fetched from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// The `jwks_uri` of the issuer's discovery document.
    Discovery { issuer: String },
    /// A configured URL.
    Url(String),
}

#[derive(Default)]
struct Held {
    keys: HashMap<String, Arc<Key>>,
    /// Keys without a `kid`.
    unnamed: Vec<Arc<Key>>,
    fetched: Option<Instant>,
    /// The last fetch tried, successful or not.
    tried: Option<Instant>,
    /// The JWKS URL discovery found.
    jwks_uri: Option<String>,
    /// Why the last fetch failed, if it did.
    failure: Option<String>,
}

/// The issuer's keys, cached.
pub struct KeySet {
    source: Source,
    http: reqwest::Client,
    held: RwLock<Held>,
    /// Held while fetching: concurrent misses wait for one fetch.
    fetching: tokio::sync::Mutex<()>,
}

impl KeySet {
    pub fn new(source: Source) -> Result<Self, reqwest::Error> {
        let http = reqwest::Client::builder().timeout(FETCH_TIMEOUT).connect_timeout(FETCH_TIMEOUT).build()?;
        Ok(Self { source, http, held: RwLock::default(), fetching: tokio::sync::Mutex::new(()) })
    }

    /// The key `kid` names (or the only key, when `kid` is `None`), fetching the set when it is
    /// not held, stale, or lacks that key (rate-limited).
    pub async fn key(&self, kid: Option<&str>) -> Result<Arc<Key>, KeyError> {
        let (found, stale) = self.lookup(kid);
        if let Some(key) = found.as_ref().filter(|_| !stale) {
            return Ok(key.clone());
        }
        let _fetching = self.fetching.lock().await;
        // another call may have fetched while this one waited
        let (again, stale) = self.lookup(kid);
        let due = self.read().tried.is_none_or(|t| t.elapsed() >= REFETCH_INTERVAL);
        if (again.is_none() || stale) && due {
            if let Err(e) = self.fetch().await {
                tracing::warn!(error = %e, "fetching the issuer's signing keys failed");
                self.held.write().unwrap_or_else(|e| e.into_inner()).failure = Some(e);
            }
        }
        match self.lookup(kid).0 {
            Some(key) => Ok(key),
            None => {
                let held = self.read();
                if held.fetched.is_none() {
                    // never fetched: Waggle cannot tell, the token may be fine
                    return Err(KeyError::Unavailable(held.failure.clone().unwrap_or_else(|| "not fetched yet".into())));
                }
                match kid {
                    Some(kid) => Err(KeyError::Unknown(kid.to_string())),
                    None => Err(KeyError::Unnamed(held.keys.len() + held.unnamed.len())),
                }
            }
        }
    }

    /// Fetches the set now (at start-up: a wrong URL shows in the log at once).
    pub async fn prefetch(&self) -> Result<usize, String> {
        let _fetching = self.fetching.lock().await;
        if let Err(e) = self.fetch().await {
            self.held.write().unwrap_or_else(|e| e.into_inner()).failure = Some(e.clone());
            return Err(e);
        }
        let held = self.read();
        Ok(held.keys.len() + held.unnamed.len())
    }

    /// Forgets when the set was last fetched (tests: as if the interval had passed).
    #[cfg(test)]
    pub fn allow_refetch_now(&self) {
        self.held.write().unwrap_or_else(|e| e.into_inner()).tried = None;
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Held> {
        self.held.read().unwrap_or_else(|e| e.into_inner())
    }

    /// The held key for `kid` and whether the set is stale.
    fn lookup(&self, kid: Option<&str>) -> (Option<Arc<Key>>, bool) {
        let held = self.read();
        let stale = held.fetched.is_none_or(|t| t.elapsed() >= MAX_AGE);
        let key = match kid {
            Some(kid) => held.keys.get(kid).cloned(),
            None => match (held.keys.len(), held.unnamed.len()) {
                (0, 1) => held.unnamed.first().cloned(),
                (1, 0) => held.keys.values().next().cloned(),
                _ => None,
            },
        };
        (key, stale)
    }

    async fn fetch(&self) -> Result<(), String> {
        self.held.write().unwrap_or_else(|e| e.into_inner()).tried = Some(Instant::now());
        let discovered = self.read().jwks_uri.clone();
        let url = match &self.source {
            Source::Url(url) => url.clone(),
            Source::Discovery { issuer } => match discovered {
                Some(url) => url,
                None => {
                    let url = self.discover(issuer).await?;
                    self.held.write().unwrap_or_else(|e| e.into_inner()).jwks_uri = Some(url.clone());
                    url
                }
            },
        };
        let set = self.get_json(&url).await?;
        let (keys, unnamed) = parse_set(&set).map_err(|e| format!("{url}: {e}"))?;
        tracing::info!(jwks = %url, keys = keys.len() + unnamed.len(), "fetched the issuer's signing keys");
        let mut held = self.held.write().unwrap_or_else(|e| e.into_inner());
        held.keys = keys;
        held.unnamed = unnamed;
        held.fetched = Some(Instant::now());
        Ok(())
    }

    /// The `jwks_uri` of the issuer's discovery document.
    async fn discover(&self, issuer: &str) -> Result<String, String> {
        let url = format!("{}/.well-known/openid-configuration", issuer.trim_end_matches('/'));
        let document = self.get_json(&url).await?;
        let named = document.get("issuer").and_then(|i| i.as_str()).unwrap_or_default();
        if named != issuer {
            return Err(format!("{url} names the issuer '{named}', not the configured '{issuer}'"));
        }
        document.get("jwks_uri").and_then(|u| u.as_str()).map(str::to_string).ok_or_else(|| format!("{url} has no jwks_uri"))
    }

    async fn get_json(&self, url: &str) -> Result<serde_json::Value, String> {
        let response = self.http.get(url).send().await.map_err(|e| format!("GET {url}: {e}"))?;
        if !response.status().is_success() {
            return Err(format!("GET {url}: HTTP {}", response.status()));
        }
        if response.content_length().is_some_and(|n| n > MAX_DOCUMENT as u64) {
            return Err(format!("GET {url}: larger than {MAX_DOCUMENT} bytes"));
        }
        let body = response.bytes().await.map_err(|e| format!("GET {url}: {e}"))?;
        if body.len() > MAX_DOCUMENT {
            return Err(format!("GET {url}: larger than {MAX_DOCUMENT} bytes"));
        }
        serde_json::from_slice(&body).map_err(|e| format!("GET {url}: not JSON: {e}"))
    }
}

type Keys = (HashMap<String, Arc<Key>>, Vec<Arc<Key>>);

/// The signing keys of a JWKS document (keys it cannot use are skipped).
fn parse_set(set: &serde_json::Value) -> Result<Keys, String> {
    let listed = set.get("keys").and_then(|k| k.as_array()).ok_or("no 'keys' array")?;
    let (mut keys, mut unnamed) = (HashMap::new(), Vec::new());
    for value in listed {
        let usage = value.get("use").and_then(|u| u.as_str());
        let kty = value.get("kty").and_then(|k| k.as_str()).unwrap_or_default();
        if usage.is_some_and(|u| u != "sig") || !matches!(kty, "RSA" | "EC" | "OKP") {
            continue;
        }
        let Ok(jwk) = serde_json::from_value::<Jwk>(value.clone()) else { continue };
        let Ok(decoding) = DecodingKey::from_jwk(&jwk) else { continue };
        let algorithm = value.get("alg").and_then(|a| a.as_str()).and_then(|a| Algorithm::from_str(a).ok());
        let key = Arc::new(Key { decoding, algorithm });
        match value.get("kid").and_then(|k| k.as_str()) {
            Some(kid) => {
                keys.insert(kid.to_string(), key);
            }
            None => unnamed.push(key),
        }
    }
    Ok((keys, unnamed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_asymmetric_signing_keys_are_kept() {
        let set = serde_json::json!({"keys": [
            {"kid": "sig", "kty": "RSA", "alg": "RS256", "use": "sig", "n": "sXch", "e": "AQAB"},
            {"kid": "enc", "kty": "RSA", "alg": "RSA-OAEP", "use": "enc", "n": "sXch", "e": "AQAB"},
            {"kid": "hmac", "kty": "oct", "k": "c2VjcmV0"},
            {"kid": "odd", "kty": "RSA", "weird": true},
            {"kty": "EC", "crv": "P-256", "x": "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU", "y": "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}
        ]});
        let (keys, unnamed) = parse_set(&set).unwrap();
        assert_eq!(keys.keys().collect::<Vec<_>>(), vec!["sig"]);
        assert_eq!(keys["sig"].algorithm, Some(Algorithm::RS256));
        assert_eq!(unnamed.len(), 1);
        assert!(parse_set(&serde_json::json!({"nokeys": []})).is_err());
    }
}
