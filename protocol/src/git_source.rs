//! `GitSource`: a git repository the agent clones and builds an app's image from. The URL is
//! checked here — schemes `https://`, `ssh://` (or scp-like `user@host:path`), `git://` and
//! `file://`, no credentials embedded in it, no query or fragment — and any access token
//! travels in the separate [`GitSecret`], which never appears in `Debug` output or in an error.

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::validation::{ValidationError, check_required};

/// Longest accepted secret, in bytes.
pub const MAX_SECRET: usize = 4096;

/// A git repository to build the app's image from.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub struct GitSource {
    /// Repository URL: `https://host/path`, `ssh://[user@]host/path`, `user@host:path`,
    /// `git://host/path` or `file:///absolute/path`. Never with credentials in it.
    pub url: String,
    /// Branch to build; absent means the repository's default branch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    /// Exact commit or tag to build, overriding `branch`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rev: Option<String>,
    /// Dockerfile path inside the repository; absent means `Dockerfile`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dockerfile: Option<String>,
    /// Access token for an `https://` URL (sent as HTTP basic auth, user
    /// `x-access-token`). Never logged; redacted in debug output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<GitSecret>,
}

/// An access token for a git host. `Debug` prints `<redacted>`; the value is only reachable
/// through [`GitSecret::expose`].
#[derive(Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(transparent)]
pub struct GitSecret(String);

impl GitSecret {
    /// Wraps a token.
    pub fn new(token: impl Into<String>) -> Self {
        Self(token.into())
    }

    /// The token itself; only for handing it to git.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for GitSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("GitSecret(<redacted>)")
    }
}

/// The URL's scheme, as the agent needs to know it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GitScheme {
    /// `https://`
    Https,
    /// `ssh://` or scp-like `user@host:path`
    Ssh,
    /// `git://`
    Git,
    /// `file://` (a repository on the agent's host)
    File,
}

fn bad_url(url: &str, why: &str) -> ValidationError {
    ValidationError::new("url", format!("{url:?} {why}"))
}

/// Splits `scheme://authority/path` after the scheme into (authority, path).
fn authority_and_path(rest: &str) -> (&str, &str) {
    match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    }
}

impl GitSource {
    /// The URL's scheme; `None` when it is not an accepted git URL.
    pub fn scheme(&self) -> Option<GitScheme> {
        let url = self.url.as_str();
        if url.starts_with("https://") {
            Some(GitScheme::Https)
        } else if url.starts_with("ssh://") || is_scp_like(url) {
            Some(GitScheme::Ssh)
        } else if url.starts_with("git://") {
            Some(GitScheme::Git)
        } else if url.starts_with("file://") {
            Some(GitScheme::File)
        } else {
            None
        }
    }

    /// Checks the URL (scheme, host, no embedded credentials), the optional fields and the
    /// secret. Errors name the field (`url`, `branch`, `secret`, ...) and never quote the
    /// secret.
    pub fn validate(&self) -> Result<(), ValidationError> {
        self.validate_url()?;
        for (field, v) in [
            ("branch", &self.branch),
            ("rev", &self.rev),
            ("dockerfile", &self.dockerfile),
        ] {
            if let Some(v) = v {
                check_required(field, v)?;
                if v.starts_with('-') {
                    return Err(ValidationError::new(
                        field,
                        format!("{v:?} must not start with '-'"),
                    ));
                }
                if v.chars().any(|c| c.is_control() || c.is_whitespace()) {
                    return Err(ValidationError::new(
                        field,
                        format!("{v:?} must not contain whitespace or control characters"),
                    ));
                }
            }
        }
        if let Some(d) = &self.dockerfile
            && (d.starts_with('/') || d.split('/').any(|c| c == ".."))
        {
            return Err(ValidationError::new(
                "dockerfile",
                format!("{d:?} must be a relative path inside the repository"),
            ));
        }
        if let Some(secret) = &self.secret {
            let s = secret.expose();
            if s.is_empty() {
                return Err(ValidationError::new("secret", "must not be empty"));
            }
            if s.len() > MAX_SECRET {
                return Err(ValidationError::new(
                    "secret",
                    format!("is {} bytes long, the limit is {MAX_SECRET}", s.len()),
                ));
            }
            if s.chars().any(|c| c.is_control() || c.is_whitespace()) {
                return Err(ValidationError::new(
                    "secret",
                    "must not contain whitespace or control characters",
                ));
            }
            if self.scheme() != Some(GitScheme::Https) {
                return Err(ValidationError::new(
                    "secret",
                    "is only used with https:// URLs (ssh keys belong in the agent's ssh configuration)",
                ));
            }
        }
        Ok(())
    }

    fn validate_url(&self) -> Result<(), ValidationError> {
        let url = self.url.as_str();
        check_required("url", url)?;
        if url.chars().any(|c| c.is_control() || c.is_whitespace()) {
            return Err(bad_url(
                url,
                "must not contain whitespace or control characters",
            ));
        }
        let Some(scheme) = self.scheme() else {
            return Err(bad_url(
                url,
                "is not an accepted git URL (https://, ssh://, user@host:path, git:// or file://)",
            ));
        };
        let credentials = "must not embed credentials: put an access token in source.secret";
        match scheme {
            GitScheme::File => {
                let path = &url["file://".len()..];
                let path = path.strip_prefix("localhost").unwrap_or(path);
                if !path.starts_with('/') || path.len() < 2 {
                    return Err(bad_url(url, "must be file:///absolute/path"));
                }
            }
            GitScheme::Ssh if is_scp_like(url) => {
                // user@host:path, the user without a password
                let (user, _) = url.split_once('@').unwrap_or_default();
                if user.contains(':') {
                    return Err(bad_url(url, credentials));
                }
            }
            GitScheme::Https | GitScheme::Ssh | GitScheme::Git => {
                let rest = url.split_once("://").map_or("", |(_, r)| r);
                let (authority, path) = authority_and_path(rest);
                if let Some((userinfo, _)) = authority.rsplit_once('@') {
                    // ssh://git@host/path names a login, not a credential; a password is one.
                    if scheme != GitScheme::Ssh || userinfo.contains(':') {
                        return Err(bad_url(url, credentials));
                    }
                }
                let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
                if host.is_empty() || host.starts_with(':') {
                    return Err(bad_url(url, "has no host"));
                }
                if path.len() < 2 {
                    return Err(bad_url(url, "has no repository path"));
                }
                if url.contains('?') || url.contains('#') {
                    return Err(bad_url(url, "must not carry a query or a fragment"));
                }
            }
        }
        Ok(())
    }

    /// The URL with any user part removed, for messages (it never holds a secret after
    /// validation; this is belt and braces for URLs that did not validate).
    pub fn display_url(&self) -> String {
        let url = self.url.as_str();
        if let Some((scheme, rest)) = url.split_once("://") {
            let (authority, path) = authority_and_path(rest);
            if let Some((_, host)) = authority.rsplit_once('@') {
                return format!("{scheme}://{host}{path}");
            }
        }
        url.to_owned()
    }
}

/// `user@host:path` (git's scp-like ssh syntax).
fn is_scp_like(url: &str) -> bool {
    if url.contains("://") {
        return false;
    }
    let Some((user, host_path)) = url.split_once('@') else {
        return false;
    };
    let Some((host, path)) = host_path.split_once(':') else {
        return false;
    };
    !user.is_empty()
        && !user.contains('/')
        && !host.is_empty()
        && !host.contains('/')
        && !path.is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn src(url: &str) -> GitSource {
        GitSource {
            url: url.into(),
            ..GitSource::default()
        }
    }

    #[test]
    fn accepted_urls() {
        for (url, scheme) in [
            ("https://github.com/example/ai-service", GitScheme::Https),
            ("https://git.example:8443/a/b.git", GitScheme::Https),
            ("ssh://git@github.com/o/r.git", GitScheme::Ssh),
            ("ssh://host/o/r.git", GitScheme::Ssh),
            ("git@github.com:o/r.git", GitScheme::Ssh),
            ("git://example.org/r.git", GitScheme::Git),
            ("file:///srv/git/r.git", GitScheme::File),
            ("file://localhost/srv/git/r.git", GitScheme::File),
        ] {
            let s = src(url);
            assert_eq!(s.validate(), Ok(()), "{url}");
            assert_eq!(s.scheme(), Some(scheme), "{url}");
        }
    }

    #[test]
    fn refused_urls_name_the_field() {
        for (url, why) in [
            ("ftp://h/r", "not an accepted git URL"),
            ("http://h/r.git", "not an accepted git URL"),
            ("/srv/git/r.git", "not an accepted git URL"),
            (
                "https://user:pass@github.com/o/r",
                "must not embed credentials",
            ),
            (
                "https://ghp_token@github.com/o/r",
                "must not embed credentials",
            ),
            ("ssh://git:pw@github.com/o/r", "must not embed credentials"),
            ("git://u@h/r", "must not embed credentials"),
            ("deploy:pw@github.com:o/r.git", "must not embed credentials"),
            ("https:///o/r", "has no host"),
            ("https://github.com", "has no repository path"),
            ("https://h/r.git?private_token=x", "query"),
            ("file://relative/r.git", "file:///absolute/path"),
            ("https://h/r .git", "whitespace"),
        ] {
            let e = src(url).validate().unwrap_err();
            assert_eq!(e.field, "url", "{url}");
            assert!(e.message.contains(why), "{url}: {e}");
        }
    }

    #[test]
    fn secret_is_redacted_and_checked() {
        let mut s = src("https://github.com/o/r.git");
        s.secret = Some(GitSecret::new("ghp_abcdef123456"));
        assert_eq!(s.validate(), Ok(()));
        let debug = format!("{s:?}");
        assert!(!debug.contains("ghp_abcdef123456"), "{debug}");
        assert!(debug.contains("<redacted>"), "{debug}");
        let json = serde_json::to_string(&s).unwrap_or_default();
        assert!(json.contains(r#""secret":"ghp_abcdef123456""#), "{json}");

        s.url = "git@github.com:o/r.git".into();
        let e = s.validate().unwrap_err();
        assert_eq!(e.field, "secret");
        s.url = "https://github.com/o/r.git".into();
        s.secret = Some(GitSecret::new("line\nbreak"));
        let e = s.validate().unwrap_err();
        assert_eq!(e.field, "secret");
        assert!(!e.to_string().contains("line"), "{e}");
    }

    #[test]
    fn optional_fields() {
        let mut s = src("https://h/r.git");
        s.branch = Some("-x".into());
        assert_eq!(s.validate().unwrap_err().field, "branch");
        s.branch = Some("feature/x".into());
        s.dockerfile = Some("../Dockerfile".into());
        assert_eq!(s.validate().unwrap_err().field, "dockerfile");
        s.dockerfile = Some("docker/Dockerfile.gpu".into());
        assert_eq!(s.validate(), Ok(()));
        assert_eq!(
            src("https://u@h/r").display_url(),
            "https://h/r",
            "user part dropped"
        );
    }
}
