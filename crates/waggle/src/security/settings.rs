//! The security settings, shared by `waggle standalone`/`broker` and `waggle gateway`: flags
//! (`--security-*`, each also `WAGGLE_SECURITY_*`) and the TOML file's `[security]` table,
//! named after Zeebe's gateway (`security.enabled`, `certificateChainPath`, `privateKeyPath`)
//! and Camunda 8.8 (`security.authentication.method`, `security.initialization.users`,
//! `security.authentication.oidc.issuer-uri`, `audiences`, `jwk-set-uri`).

use std::collections::HashMap;
use std::path::PathBuf;

use clap::{Args, ValueEnum};
use serde::Deserialize;

use super::basic_auth::{User, Users};
use super::bearer::OidcSettings;
use super::tls::TlsFiles;

/// The clock skew tolerated by default when checking a token's `exp` and `nbf`, in seconds.
pub const DEFAULT_CLOCK_SKEW_SECS: u64 = 60;
/// The claim that lists a token's tenants by default.
pub const DEFAULT_TENANTS_CLAIM: &str = "tenants";

/// How clients authenticate (Camunda 8.8's `security.authentication.method`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum AuthMethod {
    /// No authentication (the default).
    #[default]
    None,
    /// HTTP Basic credentials of a configured user on the gRPC gateway, the REST API and the
    /// management port's state-changing endpoints.
    Basic,
    /// OAuth 2 bearer tokens of the configured issuer (and Basic credentials of the configured
    /// users, if any) on the same ports.
    Oidc,
}

#[derive(Debug, Clone, Args, Default)]
pub struct SecurityArgs {
    /// TLS on the gRPC gateway, the REST API and the management port, with
    /// --security-certificate-chain-path and --security-private-key-path (Zeebe's
    /// `security.enabled`); plaintext connections then fail [default: false].
    #[arg(long, env = "WAGGLE_SECURITY_ENABLED", action = clap::ArgAction::Set, value_name = "BOOL")]
    pub security_enabled: Option<bool>,
    /// PEM file: the server's certificate, then its intermediates (Zeebe's
    /// `security.certificateChainPath`).
    #[arg(long, env = "WAGGLE_SECURITY_CERTIFICATE_CHAIN_PATH", value_name = "PATH")]
    pub security_certificate_chain_path: Option<PathBuf>,
    /// PEM file: the certificate's private key (Zeebe's `security.privateKeyPath`).
    #[arg(long, env = "WAGGLE_SECURITY_PRIVATE_KEY_PATH", value_name = "PATH")]
    pub security_private_key_path: Option<PathBuf>,
    /// `basic`: the gRPC gateway, the REST API and the management port's POST/DELETE endpoints
    /// need HTTP Basic credentials of a user of --security-initialization-users; `oidc`: an OAuth
    /// 2 bearer token of --security-authentication-oidc-issuer-uri (or a configured user's Basic
    /// credentials) (Camunda 8.8's `security.authentication.method`) [default: none].
    #[arg(long, env = "WAGGLE_SECURITY_AUTHENTICATION_METHOD", value_enum)]
    pub security_authentication_method: Option<AuthMethod>,
    /// The users, comma-separated `username:password` (Camunda 8.8's
    /// `security.initialization.users`). In the TOML file: `[[security.initialization.users]]`
    /// tables with `username` and `password`.
    #[arg(long, env = "WAGGLE_SECURITY_INITIALIZATION_USERS", value_delimiter = ',', value_name = "USER:PASSWORD,...")]
    pub security_initialization_users: Option<Vec<String>>,
    /// The tenants of users of --security-initialization-users, comma-separated
    /// `username:tenant[:tenant...]` (the TOML file: `tenants = [...]` in the user's table).
    #[arg(long, env = "WAGGLE_SECURITY_INITIALIZATION_USER_TENANTS", value_delimiter = ',', value_name = "USER:TENANT[:TENANT...],...")]
    pub security_initialization_user_tenants: Option<Vec<String>>,
    /// The issuer of the bearer tokens taken (a token's `iss`), e.g.
    /// `https://keycloak.example/realms/camunda`; its keys come from its OpenID discovery
    /// document unless --security-authentication-oidc-jwk-set-uri is given (Camunda 8.8's
    /// `security.authentication.oidc.issuer-uri`).
    #[arg(long, env = "WAGGLE_SECURITY_AUTHENTICATION_OIDC_ISSUER_URI", value_name = "URL")]
    pub security_authentication_oidc_issuer_uri: Option<String>,
    /// The audiences taken, comma-separated: a token's `aud` must hold one (Camunda 8.8's
    /// `security.authentication.oidc.audiences`).
    #[arg(long, env = "WAGGLE_SECURITY_AUTHENTICATION_OIDC_AUDIENCES", value_delimiter = ',', value_name = "AUDIENCE,...")]
    pub security_authentication_oidc_audiences: Option<Vec<String>>,
    /// The issuer's key set (JWKS), when not its discovery document's `jwks_uri` (Camunda
    /// 8.8's `security.authentication.oidc.jwk-set-uri`).
    #[arg(long, env = "WAGGLE_SECURITY_AUTHENTICATION_OIDC_JWK_SET_URI", value_name = "URL")]
    pub security_authentication_oidc_jwk_set_uri: Option<String>,
    /// Tolerated difference between the issuer's clock and this node's when checking a token's
    /// `exp` and `nbf`, in seconds [default: 60].
    #[arg(long, env = "WAGGLE_SECURITY_AUTHENTICATION_OIDC_CLOCK_SKEW_SECS", value_name = "SECONDS")]
    pub security_authentication_oidc_clock_skew_secs: Option<u64>,
    /// The token claim that lists the caller's tenants (an array of tenant ids, or one)
    /// [default: tenants].
    #[arg(long, env = "WAGGLE_SECURITY_AUTHENTICATION_OIDC_TENANTS_CLAIM", value_name = "CLAIM")]
    pub security_authentication_oidc_tenants_claim: Option<String>,
}

/// `[security]` in the TOML file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecurityFile {
    enabled: Option<bool>,
    certificate_chain_path: Option<PathBuf>,
    private_key_path: Option<PathBuf>,
    authentication: Option<AuthenticationFile>,
    initialization: Option<InitializationFile>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct AuthenticationFile {
    method: Option<AuthMethod>,
    oidc: Option<OidcFile>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct OidcFile {
    issuer_uri: Option<String>,
    audiences: Option<Vec<String>>,
    jwk_set_uri: Option<String>,
    clock_skew_secs: Option<u64>,
    tenants_claim: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct InitializationFile {
    users: Vec<UserFile>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct UserFile {
    username: String,
    password: String,
    #[serde(default)]
    tenants: Vec<String>,
}

/// The resolved security settings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SecurityConfig {
    /// TLS on every port, if on.
    pub tls: Option<TlsFiles>,
    /// The users HTTP Basic authentication checks against, if it is on.
    pub basic_auth: Option<Users>,
    /// How bearer tokens are validated, if OAuth 2 is on.
    pub oidc: Option<OidcSettings>,
}

impl SecurityArgs {
    /// Flags (and their environment variables) over the file's `[security]`.
    pub fn resolve(&self, file: Option<&SecurityFile>) -> anyhow::Result<SecurityConfig> {
        let file = file.cloned().unwrap_or_default();
        let enabled = self.security_enabled.or(file.enabled).unwrap_or(false);
        let chain = self.security_certificate_chain_path.clone().or(file.certificate_chain_path);
        let key = self.security_private_key_path.clone().or(file.private_key_path);
        let tls = match (enabled, chain, key) {
            (false, _, _) => None,
            (true, Some(certificate_chain_path), Some(private_key_path)) => Some(TlsFiles { certificate_chain_path, private_key_path }),
            (true, chain, _) => anyhow::bail!(
                "--security-enabled needs --security-certificate-chain-path and --security-private-key-path (the PEM files TLS \
                 serves with); {} is missing",
                if chain.is_none() { "the certificate chain" } else { "the private key" }
            ),
        };
        let authentication = file.authentication.clone().unwrap_or_default();
        let method = self.security_authentication_method.or(authentication.method).unwrap_or_default();
        let mut users: HashMap<String, User> = HashMap::new();
        match &self.security_initialization_users {
            Some(flags) => {
                for entry in flags.iter().map(|e| e.trim()).filter(|e| !e.is_empty()) {
                    let (user, password) = entry.split_once(':').filter(|(u, p)| !u.is_empty() && !p.is_empty()).ok_or_else(|| {
                        anyhow::anyhow!("--security-initialization-users takes username:password entries, not '{}'", redact(entry))
                    })?;
                    users.insert(user.to_string(), User { password: password.to_string(), tenants: Vec::new() });
                }
            }
            None => {
                for user in file.initialization.map(|i| i.users).unwrap_or_default() {
                    anyhow::ensure!(
                        !user.username.is_empty() && !user.password.is_empty() && !user.username.contains(':'),
                        "[[security.initialization.users]] needs a username (without ':') and a password"
                    );
                    users.insert(user.username, User { password: user.password, tenants: user.tenants });
                }
            }
        }
        for entry in self.security_initialization_user_tenants.iter().flatten().map(|e| e.trim()).filter(|e| !e.is_empty()) {
            let mut parts = entry.split(':');
            let name = parts.next().unwrap_or_default();
            let user = users.get_mut(name).ok_or_else(|| {
                anyhow::anyhow!("--security-initialization-user-tenants names '{name}', who is not in --security-initialization-users")
            })?;
            user.tenants = parts.filter(|t| !t.is_empty()).map(str::to_string).collect();
        }
        let basic_auth = match method {
            AuthMethod::None => None,
            AuthMethod::Basic => {
                anyhow::ensure!(
                    !users.is_empty(),
                    "--security-authentication-method basic needs at least one user in --security-initialization-users \
                     (username:password) or [[security.initialization.users]]"
                );
                Some(Users::new(users))
            }
            AuthMethod::Oidc => (!users.is_empty()).then(|| Users::new(users)),
        };
        let oidc = match method {
            AuthMethod::Oidc => Some(self.oidc(authentication.oidc.unwrap_or_default())?),
            _ => None,
        };
        Ok(SecurityConfig { tls, basic_auth, oidc })
    }

    /// The token validation settings: flags over the file's `[security.authentication.oidc]`.
    fn oidc(&self, file: OidcFile) -> anyhow::Result<OidcSettings> {
        let issuer_uri = self.security_authentication_oidc_issuer_uri.clone().or(file.issuer_uri).ok_or_else(|| {
            anyhow::anyhow!(
                "--security-authentication-method oidc needs the tokens' issuer: --security-authentication-oidc-issuer-uri \
                 (or issuer_uri in [security.authentication.oidc])"
            )
        })?;
        let audiences: Vec<String> = self
            .security_authentication_oidc_audiences
            .clone()
            .or(file.audiences)
            .unwrap_or_default()
            .into_iter()
            .map(|a| a.trim().to_string())
            .filter(|a| !a.is_empty())
            .collect();
        anyhow::ensure!(
            !audiences.is_empty(),
            "--security-authentication-method oidc needs at least one audience a token must be for: \
             --security-authentication-oidc-audiences (or audiences in [security.authentication.oidc])"
        );
        let jwk_set_uri = self.security_authentication_oidc_jwk_set_uri.clone().or(file.jwk_set_uri);
        for url in std::iter::once(&issuer_uri).chain(jwk_set_uri.as_ref()) {
            anyhow::ensure!(url.starts_with("https://") || url.starts_with("http://"), "'{url}' is not an http(s) URL");
        }
        Ok(OidcSettings {
            issuer_uri,
            audiences,
            jwk_set_uri,
            clock_skew_secs: self.security_authentication_oidc_clock_skew_secs.or(file.clock_skew_secs).unwrap_or(DEFAULT_CLOCK_SKEW_SECS),
            tenants_claim: self
                .security_authentication_oidc_tenants_claim
                .clone()
                .or(file.tenants_claim)
                .unwrap_or_else(|| DEFAULT_TENANTS_CLAIM.to_string()),
        })
    }
}

/// An entry as an error may show it: the password hidden.
fn redact(entry: &str) -> String {
    match entry.split_once(':') {
        Some((user, _)) => format!("{user}:***"),
        None => entry.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(text: &str) -> SecurityFile {
        #[derive(Deserialize)]
        struct Top {
            security: SecurityFile,
        }
        toml::from_str::<Top>(text).unwrap().security
    }

    #[test]
    fn off_by_default_and_flags_over_the_file() {
        assert_eq!(SecurityArgs::default().resolve(None).unwrap(), SecurityConfig::default());
        let f = file(
            "[security]\nenabled = true\ncertificate_chain_path = \"c.pem\"\nprivate_key_path = \"k.pem\"\n\
             [security.authentication]\nmethod = \"basic\"\n\
             [[security.initialization.users]]\nusername = \"demo\"\npassword = \"demo\"\n",
        );
        let c = SecurityArgs::default().resolve(Some(&f)).unwrap();
        assert_eq!(c.tls.unwrap().certificate_chain_path, PathBuf::from("c.pem"));
        assert_eq!(c.basic_auth.unwrap().count(), 1);
        let flags = SecurityArgs {
            security_enabled: Some(false),
            security_initialization_users: Some(vec!["a:1".into(), "b:2".into()]),
            ..Default::default()
        };
        let c = flags.resolve(Some(&f)).unwrap();
        assert!(c.tls.is_none());
        assert_eq!(c.basic_auth.unwrap().count(), 2);
    }

    #[test]
    fn incomplete_settings_are_refused_naming_what_is_missing() {
        let err = SecurityArgs { security_enabled: Some(true), ..Default::default() }.resolve(None).unwrap_err().to_string();
        assert!(err.contains("the certificate chain is missing"), "{err}");
        let basic = SecurityArgs { security_authentication_method: Some(AuthMethod::Basic), ..Default::default() };
        let err = basic.resolve(None).unwrap_err().to_string();
        assert!(err.contains("needs at least one user"), "{err}");
        let bad = SecurityArgs { security_initialization_users: Some(vec!["demo".into()]), ..basic };
        let err = bad.resolve(None).unwrap_err().to_string();
        assert!(err.contains("not 'demo'"), "{err}");
        let oidc = SecurityArgs { security_authentication_method: Some(AuthMethod::Oidc), ..Default::default() };
        let err = oidc.resolve(None).unwrap_err().to_string();
        assert!(err.contains("needs the tokens' issuer"), "{err}");
        let no_audience = SecurityArgs { security_authentication_oidc_issuer_uri: Some("https://kc/realms/x".into()), ..oidc };
        let err = no_audience.resolve(None).unwrap_err().to_string();
        assert!(err.contains("needs at least one audience"), "{err}");
    }

    #[test]
    fn oidc_from_the_file_with_flags_over_it_and_user_tenants() {
        let f = file(
            "[security]\n[security.authentication]\nmethod = \"oidc\"\n\
             [security.authentication.oidc]\nissuer_uri = \"https://kc/realms/x\"\naudiences = [\"waggle-api\"]\nclock_skew_secs = 5\n\
             [[security.initialization.users]]\nusername = \"demo\"\npassword = \"demo\"\ntenants = [\"a\", \"b\"]\n",
        );
        let c = SecurityArgs::default().resolve(Some(&f)).unwrap();
        let oidc = c.oidc.unwrap();
        assert_eq!((oidc.issuer_uri.as_str(), oidc.clock_skew_secs, oidc.tenants_claim.as_str()), ("https://kc/realms/x", 5, "tenants"));
        assert_eq!(oidc.jwk_set_uri, None);
        let users = c.basic_auth.expect("oidc with users takes Basic too");
        let basic = format!("Basic {}", base64::Engine::encode(&base64::engine::general_purpose::STANDARD, "demo:demo"));
        assert_eq!(users.check(Some(&basic)).unwrap().tenants, vec!["a", "b"]);
        let flags = SecurityArgs {
            security_authentication_oidc_audiences: Some(vec!["x".into(), "y".into()]),
            security_authentication_oidc_tenants_claim: Some("groups".into()),
            security_initialization_users: Some(vec!["ops:pw".into()]),
            security_initialization_user_tenants: Some(vec!["ops:t1:t2".into()]),
            ..Default::default()
        };
        let c = flags.resolve(Some(&f)).unwrap();
        assert_eq!(
            (c.oidc.as_ref().unwrap().audiences.clone(), c.oidc.unwrap().tenants_claim),
            (vec!["x".into(), "y".into()], "groups".into())
        );
        let basic = format!("Basic {}", base64::Engine::encode(&base64::engine::general_purpose::STANDARD, "ops:pw"));
        assert_eq!(c.basic_auth.unwrap().check(Some(&basic)).unwrap().tenants, vec!["t1", "t2"]);
        let unknown = SecurityArgs { security_initialization_user_tenants: Some(vec!["nobody:t".into()]), ..Default::default() };
        assert!(unknown.resolve(Some(&f)).unwrap_err().to_string().contains("names 'nobody'"));
    }
}
