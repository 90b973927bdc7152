//! `RegistryAuth`: credentials for the registry of an app's image, sent by the control plane
//! with the app (`registry_auth` of the app spec) for the registry host the image names. The
//! password is a secret: `Debug` prints `<redacted>`, it is left out of the spec hash and of
//! every view ([`AppSpec::without_secrets`](crate::AppSpec::without_secrets)), and an error
//! never quotes it.

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::git_source::MAX_SECRET;
use crate::validation::{ValidationError, check_required, check_string};

/// Credentials for one registry host.
#[derive(Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub struct RegistryAuth {
    /// Registry host, as the image reference names it (`registry.example.com`,
    /// `127.0.0.1:5000`; `docker.io` for Docker Hub).
    pub server: String,
    /// User name.
    pub username: String,
    /// Password or access token. Never logged; redacted in debug output.
    pub password: String,
}

impl fmt::Debug for RegistryAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RegistryAuth")
            .field("server", &self.server)
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .finish()
    }
}

/// The registry host of an image reference: its first component when that names a host (has
/// a `.` or `:`, or is `localhost`), else `docker.io`.
pub fn registry_host(image: &str) -> &str {
    match image.split_once('/') {
        Some((first, _)) if first.contains(['.', ':']) || first == "localhost" => first,
        _ => "docker.io",
    }
}

impl RegistryAuth {
    /// Checks the host (no scheme, path or whitespace), the user name and the password
    /// (at most 4096 bytes, no control characters; never quoted in the error).
    pub fn validate(&self) -> Result<(), ValidationError> {
        check_required("server", &self.server)?;
        if self.server.contains(['/', '@']) || self.server.chars().any(char::is_whitespace) {
            return Err(ValidationError::new(
                "server",
                format!(
                    "{:?} must be a registry host[:port], without scheme or path",
                    self.server
                ),
            ));
        }
        check_required("username", &self.username)?;
        check_string("username", &self.username)?;
        if self.password.is_empty()
            || self.password.len() > MAX_SECRET
            || self.password.chars().any(char::is_control)
        {
            return Err(ValidationError::new(
                "password",
                format!("must be 1 to {MAX_SECRET} bytes without control characters"),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacted_checked_and_hosts_named() {
        let mut a = RegistryAuth {
            server: "127.0.0.1:5000".into(),
            username: "alice".into(),
            password: "s3cret-pw".into(),
        };
        assert_eq!(a.validate(), Ok(()));
        assert!(!format!("{a:?}").contains("s3cret-pw"));
        a.password = "bad\nline".into();
        let e = a.validate().unwrap_err();
        assert_eq!(e.field, "password");
        assert!(!e.to_string().contains("bad"), "{e}");
        a.password = "ok".into();
        a.server = "https://h/v2".into();
        assert_eq!(a.validate().unwrap_err().field, "server");
        assert_eq!(
            registry_host("127.0.0.1:5000/ollama/ollama:1"),
            "127.0.0.1:5000"
        );
        assert_eq!(registry_host("ollama/ollama:0.6.2"), "docker.io");
        assert_eq!(registry_host("localhost/x"), "localhost");
    }
}
