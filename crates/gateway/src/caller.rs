//! Who is calling: the identity an authentication layer (an OAuth 2 bearer token, HTTP Basic
//! credentials) established for one request. The layer puts a [`Caller`] into the request's
//! extensions (tonic's `Request::extensions`, axum's `Extension`); the gRPC gateway and the REST
//! handlers read it to decide which tenants the request may touch (issue 29, multi-tenancy).
//!
//! Contract: a request without a `Caller` came through a port with authentication off.

/// The authenticated caller of one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// The token's subject (or client id), or the Basic user's name: for logs and messages.
    pub name: String,
    /// The tenants the caller may use, as the authentication method gives them (a token claim,
    /// the configured user's tenants). Empty when it gives none.
    pub tenants: Vec<String>,
}

impl Caller {
    /// Whether the caller may use `tenant`.
    pub fn may_use(&self, tenant: &str) -> bool {
        self.tenants.iter().any(|t| t == tenant)
    }
}
