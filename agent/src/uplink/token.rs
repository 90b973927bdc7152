//! The bearer token the agent presents to the control plane. It comes from the environment
//! (`ODAC_AGENT_TOKEN`) or from a token file that only its owner may read; it is wrapped in a
//! [`Token`] whose `Debug` and `Display` print `<redacted>`, so it cannot reach a log line or
//! an error message by accident.

use std::fmt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Environment variable that carries the token (wins over `control_plane.token_file`).
pub const TOKEN_ENV: &str = "ODAC_AGENT_TOKEN";

/// Longest token accepted, in bytes.
const MAX_TOKEN_BYTES: usize = 4096;

/// A bearer token. Only [`Token::expose`] reveals it, for the `Authorization` header.
#[derive(Clone, PartialEq, Eq)]
pub struct Token(String);

impl Token {
    /// Wraps a token, checking that it fits in an HTTP header.
    pub fn new(value: impl Into<String>) -> Result<Self, TokenError> {
        let value = value.into().trim().to_owned();
        if value.is_empty() {
            return Err(TokenError::Empty);
        }
        if value.len() > MAX_TOKEN_BYTES {
            return Err(TokenError::TooLong {
                len: value.len(),
                max: MAX_TOKEN_BYTES,
            });
        }
        if !value.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(TokenError::BadCharacters);
        }
        Ok(Self(value))
    }

    /// Reads a token file, refusing one that its group or others may read or write.
    pub fn from_file(path: &Path) -> Result<Self, TokenError> {
        let meta = std::fs::metadata(path).map_err(|source| TokenError::Read {
            path: path.to_owned(),
            source,
        })?;
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(TokenError::Permissions {
                path: path.to_owned(),
                mode,
            });
        }
        let read = crate::bounded_read::read_regular_io(path, 64 * 1024).and_then(|bytes| {
            String::from_utf8(bytes)
                .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "not utf-8 text"))
        });
        let text = read.map_err(|source| TokenError::Read {
            path: path.to_owned(),
            source,
        })?;
        Token::new(text).map_err(|e| TokenError::InFile {
            path: path.to_owned(),
            problem: Box::new(e),
        })
    }

    /// The token from `ODAC_AGENT_TOKEN` if set and non-empty, else from `token_file`.
    pub fn resolve(
        env_value: Option<String>,
        token_file: Option<&Path>,
    ) -> Result<Self, TokenError> {
        match env_value.filter(|v| !v.trim().is_empty()) {
            Some(v) => Token::new(v).map_err(|e| TokenError::InEnv(Box::new(e))),
            None => match token_file {
                Some(path) => Token::from_file(path),
                None => Err(TokenError::Missing),
            },
        }
    }

    /// The secret itself. Use only to build the `Authorization` header.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// Why no usable token was found. Never carries the token's value.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error("the token is empty")]
    Empty,
    #[error("the token is {len} bytes long, the limit is {max}")]
    TooLong { len: usize, max: usize },
    #[error("the token contains whitespace or non-ascii characters")]
    BadCharacters,
    #[error("cannot read token file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "token file {path} is accessible by group or others (mode {mode:04o}); refusing to use it: run `chmod 600 {path}`",
        path = path.display()
    )]
    Permissions { path: PathBuf, mode: u32 },
    #[error("token file {path}: {problem}", path = path.display())]
    InFile {
        path: PathBuf,
        problem: Box<TokenError>,
    },
    #[error("environment variable {TOKEN_ENV}: {0}")]
    InEnv(Box<TokenError>),
    #[error("no token: set control_plane.token_file or the {TOKEN_ENV} environment variable")]
    Missing,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn debug_and_display_redact() {
        let t = Token::new("s3cr3t-value").unwrap();
        assert_eq!(format!("{t:?}"), "Token(<redacted>)");
        assert_eq!(format!("{t}"), "<redacted>");
        assert_eq!(t.expose(), "s3cr3t-value");
    }

    #[test]
    fn file_readable_by_others_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        std::fs::write(&path, "s3cr3t-value\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let err = Token::from_file(&path).unwrap_err().to_string();
        assert!(err.contains("accessible by group or others"), "{err}");
        assert!(err.contains("0644") && err.contains("chmod 600"), "{err}");
        assert!(!err.contains("s3cr3t"), "{err}");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(Token::from_file(&path).unwrap().expose(), "s3cr3t-value");
    }

    #[test]
    fn a_fifo_or_directory_as_token_file_is_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("token");
        let status = std::process::Command::new("mkfifo")
            .args(["-m", "600"])
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(status.success());
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(Token::from_file(&fifo).unwrap_err().to_string());
        });
        // the old read_to_string waited for a writer for ever
        let err = rx
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("no answer: the read blocked");
        assert!(err.contains("is a fifo, not a regular file"), "{err}");
        let sub = dir.path().join("d");
        std::fs::create_dir(&sub).unwrap();
        std::fs::set_permissions(&sub, std::fs::Permissions::from_mode(0o700)).unwrap();
        let err = Token::from_file(&sub).unwrap_err().to_string();
        assert!(err.contains("is a directory"), "{err}");
    }

    #[test]
    fn env_wins_and_empty_env_falls_back_to_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        std::fs::write(&path, "from-file").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o400)).unwrap();
        let t = Token::resolve(Some("from-env".into()), Some(&path)).unwrap();
        assert_eq!(t.expose(), "from-env");
        let t = Token::resolve(Some("  ".into()), Some(&path)).unwrap();
        assert_eq!(t.expose(), "from-file");
        assert!(matches!(
            Token::resolve(None, None),
            Err(TokenError::Missing)
        ));
    }

    #[test]
    fn bad_tokens_are_refused_without_echoing_them() {
        let err = Token::new("two words").unwrap_err().to_string();
        assert!(!err.contains("words"), "{err}");
        assert!(matches!(Token::new(" \n"), Err(TokenError::Empty)));
    }
}
