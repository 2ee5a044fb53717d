//! Who is calling, on the gRPC gateway, the REST API and the management port's changes: the
//! `Authorization` header holds an OAuth 2 bearer token ([`super::bearer`], method `oidc`) or
//! HTTP Basic credentials of a configured user ([`super::basic_auth`]; with method `basic`, and
//! with `oidc` when users are configured, as Camunda 8.8 takes Basic over gRPC and REST alike).
//! An accepted request carries a [`Caller`] in its extensions (its name and tenants); a refused
//! one is answered UNAUTHENTICATED (gRPC) or 401 with an RFC 9457 problem (HTTP), the message
//! naming what is wrong; when the issuer's keys cannot be fetched, UNAVAILABLE / 503.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use waggle_gateway::{Authentication as Pending, Authenticator, Caller};
use waggle_rest::Problem;

use super::basic_auth::{self, Users};
use super::bearer::{BearerValidator, TokenRefusal};

/// The challenge of a 401 when bearer tokens are taken.
pub const BEARER_CHALLENGE: &str = "Bearer realm=\"waggle\"";

/// The credentials a port takes.
pub struct Authentication {
    /// Users whose Basic credentials are taken.
    basic: Option<Users>,
    /// The validator of bearer tokens, when OAuth 2 is on.
    bearer: Option<Arc<BearerValidator>>,
}

/// Why a request was refused (its `Display` is the message the client gets).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("{0}")]
    Basic(basic_auth::Refusal),
    #[error("no credentials: send an Authorization header with an OAuth 2 bearer token{}", or_basic(.basic))]
    MissingToken { basic: bool },
    #[error("the Authorization header's scheme is {}", if_basic(.basic, "neither Bearer nor Basic", "not Bearer: this server takes OAuth 2 bearer tokens"))]
    Scheme { basic: bool },
    #[error("HTTP Basic credentials are not taken here (no users are configured): send an OAuth 2 bearer token")]
    NoUsers,
    #[error("the Authorization header is not visible ASCII")]
    Unreadable,
    #[error("{0}")]
    Token(TokenRefusal),
}

fn or_basic(basic: &bool) -> &'static str {
    if_basic(basic, " or HTTP Basic credentials of a configured user", "")
}

fn if_basic(basic: &bool, yes: &'static str, no: &'static str) -> &'static str {
    if *basic {
        yes
    } else {
        no
    }
}

impl Refusal {
    /// Whether Waggle, not the credentials, is the cause.
    pub fn unavailable(&self) -> bool {
        matches!(self, Refusal::Token(t) if t.unavailable())
    }
}

impl Authentication {
    /// `None` when neither is on (authentication off).
    pub fn new(basic: Option<Users>, bearer: Option<Arc<BearerValidator>>) -> Option<Arc<Self>> {
        (basic.is_some() || bearer.is_some()).then(|| Arc::new(Self { basic, bearer }))
    }

    /// The caller an `Authorization` header's value names, or why it is refused.
    pub async fn check(&self, authorization: Option<&str>) -> Result<Caller, Refusal> {
        let Some(bearer) = &self.bearer else {
            let users = self.basic.as_ref().expect("Basic or Bearer is on");
            return users.check(authorization).map_err(Refusal::Basic);
        };
        let basic = self.basic.is_some();
        let value = authorization.ok_or(Refusal::MissingToken { basic })?.trim();
        let (scheme, credentials) = value.split_once(' ').unwrap_or((value, ""));
        if scheme.eq_ignore_ascii_case("bearer") {
            bearer.validate(credentials.trim()).await.map_err(Refusal::Token)
        } else if scheme.eq_ignore_ascii_case("basic") {
            let users = self.basic.as_ref().ok_or(Refusal::NoUsers)?;
            users.verify(credentials).map_err(Refusal::Basic)
        } else {
            Err(Refusal::Scheme { basic })
        }
    }

    async fn check_headers(&self, headers: &HeaderMap) -> Result<Caller, Refusal> {
        let authorization = match headers.get(header::AUTHORIZATION) {
            None => None,
            Some(value) => Some(value.to_str().map_err(|_| Refusal::Unreadable)?),
        };
        self.check(authorization).await
    }

    /// The HTTP answer to `refusal`: 401 (503 when the issuer's keys cannot be fetched) with a
    /// problem and the challenges of the schemes taken.
    pub fn unauthorized(&self, refusal: &Refusal) -> Response {
        if refusal.unavailable() {
            return Problem::new(StatusCode::SERVICE_UNAVAILABLE, "SERVICE_UNAVAILABLE", refusal.to_string()).into_response();
        }
        let mut response = Problem::new(StatusCode::UNAUTHORIZED, "UNAUTHORIZED", refusal.to_string()).into_response();
        let headers = response.headers_mut();
        if self.bearer.is_some() {
            let challenge = match refusal {
                Refusal::Token(_) => HeaderValue::from_static("Bearer realm=\"waggle\", error=\"invalid_token\""),
                _ => HeaderValue::from_static(BEARER_CHALLENGE),
            };
            headers.append(header::WWW_AUTHENTICATE, challenge);
        }
        if self.basic.is_some() {
            headers.append(header::WWW_AUTHENTICATE, HeaderValue::from_static(basic_auth::CHALLENGE));
        }
        response
    }
}

impl Authenticator for Authentication {
    fn authenticate<'a>(&'a self, headers: &'a HeaderMap) -> Pending<'a> {
        Box::pin(async move {
            self.check_headers(headers).await.map_err(|refusal| match refusal.unavailable() {
                true => tonic::Status::unavailable(refusal.to_string()),
                false => tonic::Status::unauthenticated(refusal.to_string()),
            })
        })
    }
}

/// Middleware: every request needs credentials (the REST API's port); the caller goes into the
/// request's extensions.
pub async fn require(State(auth): State<Arc<Authentication>>, mut request: Request, next: Next) -> Response {
    match auth.check_headers(request.headers()).await {
        Ok(caller) => {
            request.extensions_mut().insert(caller);
            next.run(request).await
        }
        Err(refusal) => auth.unauthorized(&refusal),
    }
}

/// Middleware: requests that change something under `/actuator` (any method but GET, HEAD and
/// OPTIONS) need credentials; reads (health, metrics, the cluster) do not, so probes and
/// scrapers keep working (the management port's).
pub async fn require_for_changes(State(auth): State<Arc<Authentication>>, request: Request, next: Next) -> Response {
    let reads = [Method::GET, Method::HEAD, Method::OPTIONS];
    if request.uri().path().starts_with("/actuator") && !reads.contains(request.method()) {
        if let Err(refusal) = auth.check_headers(request.headers()).await {
            return auth.unauthorized(&refusal);
        }
    }
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use base64::Engine as _;

    use super::super::basic_auth::User;
    use super::super::bearer::tests::{issuer, key_pair, settings, sign};
    use super::*;

    fn users() -> Users {
        Users::new(HashMap::from([("demo".to_string(), User { password: "pw".into(), tenants: vec!["t1".into()] })]))
    }

    fn basic(credentials: &str) -> String {
        format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(credentials))
    }

    #[tokio::test]
    async fn basic_only_keeps_its_messages_and_challenge() {
        let auth = Authentication::new(Some(users()), None).unwrap();
        assert_eq!(auth.check(Some(&basic("demo:pw"))).await.unwrap().tenants, vec!["t1"]);
        let refusal = auth.check(Some("Bearer abc")).await.unwrap_err();
        assert_eq!(refusal, Refusal::Basic(basic_auth::Refusal::NotBasic));
        let response = auth.unauthorized(&refusal);
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(response.headers().get_all(header::WWW_AUTHENTICATE).iter().collect::<Vec<_>>(), vec![basic_auth::CHALLENGE]);
        assert_eq!(response.headers()[header::CONTENT_TYPE], "application/problem+json");
    }

    #[tokio::test]
    async fn bearer_and_basic_side_by_side() {
        let (key, jwk) = key_pair("k");
        let iss = issuer(Arc::new(std::sync::Mutex::new(vec![jwk])), Default::default()).await;
        let bearer = BearerValidator::new(settings(&iss)).unwrap();
        let token =
            sign(&key, "k", &serde_json::json!({"iss": iss, "aud": "waggle-api", "exp": u64::MAX / 2, "azp": "c", "tenants": "t2"}));
        let both = Authentication::new(Some(users()), Some(bearer.clone())).unwrap();
        assert_eq!(both.check(Some(&format!("Bearer {token}"))).await.unwrap(), Caller { name: "c".into(), tenants: vec!["t2".into()] });
        assert_eq!(both.check(Some(&basic("demo:pw"))).await.unwrap().name, "demo");
        let missing = both.check(None).await.unwrap_err();
        assert_eq!(
            missing.to_string(),
            "no credentials: send an Authorization header with an OAuth 2 bearer token or HTTP Basic credentials of a configured user"
        );
        let challenges = both.unauthorized(&missing);
        assert_eq!(challenges.headers().get_all(header::WWW_AUTHENTICATE).iter().count(), 2);
        assert_eq!(both.check(Some("Digest x")).await.unwrap_err(), Refusal::Scheme { basic: true });
        let bearer_only = Authentication::new(None, Some(bearer)).unwrap();
        assert_eq!(bearer_only.check(Some(&basic("demo:pw"))).await.unwrap_err(), Refusal::NoUsers);
        let refused = bearer_only.check(Some("Bearer x.y.z")).await.unwrap_err();
        assert!(matches!(refused, Refusal::Token(TokenRefusal::Malformed(_))), "{refused}");
        // through the gRPC hook: UNAUTHENTICATED with the message
        let mut headers = HeaderMap::new();
        headers.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer x.y.z"));
        let status = bearer_only.authenticate(&headers).await.unwrap_err();
        assert_eq!(status.code(), tonic::Code::Unauthenticated);
        assert!(status.message().starts_with("the bearer token is not a well-formed JWT"), "{}", status.message());
        headers.insert(header::AUTHORIZATION, HeaderValue::from_str(&format!("Bearer {token}")).unwrap());
        assert_eq!(bearer_only.authenticate(&headers).await.unwrap().name, "c");
    }
}
