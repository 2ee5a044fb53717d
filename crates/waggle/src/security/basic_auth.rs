//! HTTP Basic authentication (RFC 7617) against the users of the configuration, as Camunda 8.8
//! offers it (`camunda.security.authentication.method: basic` with the users of
//! `camunda.security.initialization.users`,
//! <https://docs.camunda.io/docs/self-managed/identity/orchestration-identity/configuration/>).
//!
//! A refused request gets 401 with an RFC 9457 problem (`application/problem+json`, title
//! `UNAUTHORIZED`) whose detail says what is wrong, and `WWW-Authenticate: Basic realm="waggle"`.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use waggle_rest::Problem;

/// The challenge sent with every 401.
pub const CHALLENGE: &str = "Basic realm=\"waggle\", charset=\"UTF-8\"";

/// The configured users: username → password (`Debug` shows the usernames only).
#[derive(Clone, PartialEq, Eq)]
pub struct Users(Arc<HashMap<String, String>>);

impl std::fmt::Debug for Users {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.0.keys()).finish()
    }
}

/// Why a request's credentials were refused (its `Display` is the problem's detail).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("no credentials: send an Authorization header with HTTP Basic credentials of a configured user")]
    Missing,
    #[error("the Authorization header's scheme is not Basic: this server takes HTTP Basic credentials only")]
    NotBasic,
    #[error("the Basic credentials are not the base64 of username:password in UTF-8")]
    Malformed,
    /// The user is unknown or the password wrong (which of the two is not told).
    #[error("the username or the password is wrong")]
    Wrong,
}

impl Users {
    pub fn new(users: HashMap<String, String>) -> Self {
        Self(Arc::new(users))
    }

    /// How many users there are.
    pub fn count(&self) -> usize {
        self.0.len()
    }

    /// The user named by an `Authorization` header's value, if its credentials are right.
    pub fn check(&self, authorization: Option<&HeaderValue>) -> Result<&str, Refusal> {
        let value = authorization.ok_or(Refusal::Missing)?.to_str().map_err(|_| Refusal::Malformed)?;
        let (scheme, encoded) = value.trim().split_once(' ').ok_or(Refusal::NotBasic)?;
        if !scheme.eq_ignore_ascii_case("basic") {
            return Err(Refusal::NotBasic);
        }
        let decoded = base64::engine::general_purpose::STANDARD.decode(encoded.trim()).map_err(|_| Refusal::Malformed)?;
        let decoded = String::from_utf8(decoded).map_err(|_| Refusal::Malformed)?;
        let (user, password) = decoded.split_once(':').ok_or(Refusal::Malformed)?;
        match self.0.get_key_value(user) {
            Some((name, expected)) if same(expected.as_bytes(), password.as_bytes()) => Ok(name),
            _ => Err(Refusal::Wrong),
        }
    }
}

/// Equality whose time does not depend on where the two differ (only on their lengths).
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |diff, (x, y)| diff | (x ^ y)) == 0
}

/// The 401 answer for `refusal`.
pub fn unauthorized(refusal: &Refusal) -> Response {
    let mut response = Problem::new(StatusCode::UNAUTHORIZED, "UNAUTHORIZED", refusal.to_string()).into_response();
    response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static(CHALLENGE));
    response
}

/// Middleware: every request needs a configured user's credentials (the REST API's port).
pub async fn require(State(users): State<Users>, request: Request, next: Next) -> Response {
    match users.check(request.headers().get(header::AUTHORIZATION)) {
        Ok(_) => next.run(request).await,
        Err(refusal) => unauthorized(&refusal),
    }
}

/// Middleware: requests that change something under `/actuator` (any method but GET, HEAD and
/// OPTIONS) need a configured user's credentials; reads (health, metrics, the cluster) do not,
/// so probes and scrapers keep working (the management port's).
pub async fn require_for_changes(State(users): State<Users>, request: Request, next: Next) -> Response {
    let reads = [Method::GET, Method::HEAD, Method::OPTIONS];
    if request.uri().path().starts_with("/actuator") && !reads.contains(request.method()) {
        if let Err(refusal) = users.check(request.headers().get(header::AUTHORIZATION)) {
            return unauthorized(&refusal);
        }
    }
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn users() -> Users {
        Users::new(HashMap::from([("demo".to_string(), "s3cret:x".to_string())]))
    }

    fn basic(credentials: &str) -> HeaderValue {
        let encoded = base64::engine::general_purpose::STANDARD.encode(credentials);
        HeaderValue::from_str(&format!("Basic {encoded}")).unwrap()
    }

    #[test]
    fn right_credentials_pass_and_each_wrong_kind_is_named() {
        let users = users();
        assert_eq!(users.check(Some(&basic("demo:s3cret:x"))), Ok("demo"), "a password may hold a colon");
        assert_eq!(users.check(None), Err(Refusal::Missing));
        assert_eq!(users.check(Some(&HeaderValue::from_static("Bearer abc"))), Err(Refusal::NotBasic));
        assert_eq!(users.check(Some(&HeaderValue::from_static("Basic"))), Err(Refusal::NotBasic));
        assert_eq!(users.check(Some(&HeaderValue::from_static("Basic !!!"))), Err(Refusal::Malformed));
        assert_eq!(users.check(Some(&basic("demo"))), Err(Refusal::Malformed));
        assert_eq!(users.check(Some(&basic("demo:wrong"))), Err(Refusal::Wrong));
        assert_eq!(users.check(Some(&basic("nobody:s3cret:x"))), Err(Refusal::Wrong));
        assert_eq!(users.check(Some(&basic("demo:s3cret:"))), Err(Refusal::Wrong));
    }

    #[test]
    fn the_answer_is_a_problem_with_a_challenge() {
        let response = unauthorized(&Refusal::Wrong);
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(response.headers()[header::WWW_AUTHENTICATE], CHALLENGE);
        assert_eq!(response.headers()[header::CONTENT_TYPE], "application/problem+json");
    }
}
