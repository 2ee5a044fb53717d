//! Transport security and access control of the node's three ports (issue 29's first slice):
//! TLS on the gRPC gateway, the REST API and the management port ([`tls`], served by [`serve`]),
//! authentication on the gRPC gateway, the REST API and the management port's state-changing
//! endpoints ([`authenticate`]: OAuth 2 bearer tokens, [`bearer`] with the issuer's keys from
//! [`jwks`], and HTTP Basic, [`basic_auth`]), and the REST API's body limit ([`body_limit`]).
//! Settings: [`settings`].
//! docs/security.md describes them and what was tried against them.

pub mod authenticate;
pub mod basic_auth;
pub mod bearer;
pub mod body_limit;
pub mod jwks;
pub mod network;
pub mod serve;
pub mod settings;
pub mod tls;

pub use settings::{SecurityArgs, SecurityConfig, SecurityFile};
