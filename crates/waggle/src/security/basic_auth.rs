//! HTTP Basic authentication (RFC 7617) against the users of the configuration, as Camunda 8.8
//! offers it (`camunda.security.authentication.method: basic` with the users of
//! `camunda.security.initialization.users`,
//! <https://docs.camunda.io/docs/self-managed/identity/orchestration-identity/configuration/>).
//!
//! The credentials are checked here; [`super::authenticate`] reads the `Authorization` header
//! and answers refusals.

use std::collections::HashMap;
use std::sync::Arc;

use base64::Engine as _;
use waggle_gateway::Caller;

/// The challenge sent with a 401 when Basic credentials are what the server takes.
pub const CHALLENGE: &str = "Basic realm=\"waggle\", charset=\"UTF-8\"";

/// A configured user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    pub password: String,
    /// The tenants the user may use (multi-tenancy); empty when none are configured.
    pub tenants: Vec<String>,
}

/// The configured users: username → user (`Debug` shows the usernames only).
#[derive(Clone, PartialEq, Eq)]
pub struct Users(Arc<HashMap<String, User>>);

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
    pub fn new(users: HashMap<String, User>) -> Self {
        Self(Arc::new(users))
    }

    /// How many users there are.
    pub fn count(&self) -> usize {
        self.0.len()
    }

    /// The caller an `Authorization` header's value names, if it holds Basic credentials of a
    /// configured user.
    pub fn check(&self, authorization: Option<&str>) -> Result<Caller, Refusal> {
        let value = authorization.ok_or(Refusal::Missing)?;
        let (scheme, encoded) = value.trim().split_once(' ').ok_or(Refusal::NotBasic)?;
        if !scheme.eq_ignore_ascii_case("basic") {
            return Err(Refusal::NotBasic);
        }
        self.verify(encoded)
    }

    /// The caller the credentials of a Basic `Authorization` header (`base64(user:password)`)
    /// name, if they are a configured user's.
    pub fn verify(&self, encoded: &str) -> Result<Caller, Refusal> {
        let decoded = base64::engine::general_purpose::STANDARD.decode(encoded.trim()).map_err(|_| Refusal::Malformed)?;
        let decoded = String::from_utf8(decoded).map_err(|_| Refusal::Malformed)?;
        let (user, password) = decoded.split_once(':').ok_or(Refusal::Malformed)?;
        match self.0.get_key_value(user) {
            Some((name, expected)) if same(expected.password.as_bytes(), password.as_bytes()) => {
                Ok(Caller { name: name.clone(), tenants: expected.tenants.clone() })
            }
            _ => Err(Refusal::Wrong),
        }
    }
}

/// Equality whose time does not depend on where the two differ (only on their lengths).
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |diff, (x, y)| diff | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn users() -> Users {
        let demo = User { password: "s3cret:x".to_string(), tenants: vec!["tenant-a".into()] };
        Users::new(HashMap::from([("demo".to_string(), demo)]))
    }

    fn basic(credentials: &str) -> String {
        format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(credentials))
    }

    #[test]
    fn right_credentials_pass_and_each_wrong_kind_is_named() {
        let users = users();
        let demo = Caller { name: "demo".into(), tenants: vec!["tenant-a".into()] };
        assert_eq!(users.check(Some(&basic("demo:s3cret:x"))), Ok(demo), "a password may hold a colon");
        assert_eq!(users.check(None), Err(Refusal::Missing));
        assert_eq!(users.check(Some("Bearer abc")), Err(Refusal::NotBasic));
        assert_eq!(users.check(Some("Basic")), Err(Refusal::NotBasic));
        assert_eq!(users.check(Some("Basic !!!")), Err(Refusal::Malformed));
        assert_eq!(users.check(Some(&basic("demo"))), Err(Refusal::Malformed));
        assert_eq!(users.check(Some(&basic("demo:wrong"))), Err(Refusal::Wrong));
        assert_eq!(users.check(Some(&basic("nobody:s3cret:x"))), Err(Refusal::Wrong));
        assert_eq!(users.check(Some(&basic("demo:s3cret:"))), Err(Refusal::Wrong));
    }
}
