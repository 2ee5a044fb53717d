//! The gRPC port's authentication hook. When the server has an [`Authenticator`], every call is
//! first given to it with its request headers (`authorization`): a refusal is the call's answer
//! (UNAUTHENTICATED, or UNAVAILABLE when the credentials cannot be checked now), and the
//! [`Caller`] it establishes goes into the request's extensions, where the gateway's methods
//! read it (tonic's `Request::extensions`), on the fast path and through tonic alike.

use std::future::Future;
use std::pin::Pin;

use http::HeaderMap;
use tonic::Status;

use crate::Caller;

/// What [`Authenticator::authenticate`] returns.
pub type Authentication<'a> = Pin<Box<dyn Future<Output = Result<Caller, Status>> + Send + 'a>>;

/// Establishes who makes a call from its request headers.
pub trait Authenticator: Send + Sync + 'static {
    /// The caller, or the status the call is refused with (UNAUTHENTICATED with a message saying
    /// what is wrong with the credentials).
    fn authenticate<'a>(&'a self, headers: &'a HeaderMap) -> Authentication<'a>;
}
