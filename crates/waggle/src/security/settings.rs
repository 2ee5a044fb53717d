//! The security settings, shared by `waggle standalone`/`broker` and `waggle gateway`: flags
//! (`--security-*`, each also `WAGGLE_SECURITY_*`) and the TOML file's `[security]` table,
//! named after Zeebe's gateway (`security.enabled`, `certificateChainPath`, `privateKeyPath`)
//! and Camunda 8.8 (`security.authentication.method`, `security.initialization.users`).

use std::collections::HashMap;
use std::path::PathBuf;

use clap::{Args, ValueEnum};
use serde::Deserialize;

use super::basic_auth::Users;
use super::tls::TlsFiles;

/// How clients authenticate (Camunda 8.8's `security.authentication.method`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum AuthMethod {
    /// No authentication (the default).
    #[default]
    None,
    /// HTTP Basic credentials of a configured user on the REST API and on the management port's
    /// state-changing endpoints.
    Basic,
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
    /// `basic`: the REST API and the management port's POST/DELETE endpoints need HTTP Basic
    /// credentials of a user of --security-initialization-users (Camunda 8.8's
    /// `security.authentication.method`) [default: none].
    #[arg(long, env = "WAGGLE_SECURITY_AUTHENTICATION_METHOD", value_enum)]
    pub security_authentication_method: Option<AuthMethod>,
    /// The users, comma-separated `username:password` (Camunda 8.8's
    /// `security.initialization.users`). In the TOML file: `[[security.initialization.users]]`
    /// tables with `username` and `password`.
    #[arg(long, env = "WAGGLE_SECURITY_INITIALIZATION_USERS", value_delimiter = ',', value_name = "USER:PASSWORD,...")]
    pub security_initialization_users: Option<Vec<String>>,
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
}

/// The resolved security settings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SecurityConfig {
    /// TLS on every port, if on.
    pub tls: Option<TlsFiles>,
    /// The users HTTP Basic authentication checks against, if it is on.
    pub basic_auth: Option<Users>,
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
        let method = self.security_authentication_method.or(file.authentication.and_then(|a| a.method)).unwrap_or_default();
        let mut users = HashMap::new();
        match &self.security_initialization_users {
            Some(flags) => {
                for entry in flags.iter().map(|e| e.trim()).filter(|e| !e.is_empty()) {
                    let (user, password) = entry.split_once(':').filter(|(u, p)| !u.is_empty() && !p.is_empty()).ok_or_else(|| {
                        anyhow::anyhow!("--security-initialization-users takes username:password entries, not '{}'", redact(entry))
                    })?;
                    users.insert(user.to_string(), password.to_string());
                }
            }
            None => {
                for user in file.initialization.map(|i| i.users).unwrap_or_default() {
                    anyhow::ensure!(
                        !user.username.is_empty() && !user.password.is_empty() && !user.username.contains(':'),
                        "[[security.initialization.users]] needs a username (without ':') and a password"
                    );
                    users.insert(user.username, user.password);
                }
            }
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
        };
        Ok(SecurityConfig { tls, basic_auth })
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
    }
}
