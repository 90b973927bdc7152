//! `odac-agent enroll`: trades a one-time enrollment code for the agent's bearer token through
//! the control plane's HTTP API (`POST {cp}/api/enroll`), then leaves the host ready to run:
//! the token in `CONFIG_DIR/token` (mode 0600), the CA (when given) copied to
//! `CONFIG_DIR/ca.pem`, and `CONFIG_DIR/agent.toml` pointing at the control plane
//! (`control_plane.url`, `ca_file`, `token_file`; other keys and comments are kept).
//!
//! Everything that can be checked is checked before the code is spent (URL, CA file, a writable
//! config dir), because a code works once. Neither the code nor the token is ever printed: the
//! code is masked even in messages the server sends back.

mod client;
mod toml_patch;

use odac_host::atomic_file;
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

pub use client::{BaseUrl, ENROLL_PATH};
pub use toml_patch::{Setting, apply as patch_toml};

/// Where the control plane serves agents' WebSocket sessions, relative to its base URL.
pub const AGENT_WS_PATH: &str = "/agent/v1";
/// Default configuration directory.
pub const DEFAULT_CONFIG_DIR: &str = "/etc/odac";
/// File names inside the configuration directory.
pub const CONFIG_FILE: &str = "agent.toml";
/// The token file's name.
pub const TOKEN_FILE: &str = "token";
/// The copied CA certificate's name.
pub const CA_FILE: &str = "ca.pem";

/// The head of an `agent.toml` that enrollment creates from nothing.
const NEW_CONFIG_HEAD: &str = "# odac-agent configuration, written by `odac-agent enroll`.\n\
# Keys: control_plane.url, control_plane.ca_file, control_plane.token_file, state_dir,\n\
# docker.host, log_level, log_format (see the example agent.toml shipped with the agent).\n";

/// A one-time enrollment code. `Debug` and `Display` never show it.
#[derive(Clone, PartialEq, Eq)]
pub struct EnrollCode(String);

impl EnrollCode {
    /// The code itself, for the request body only.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// `text` with every occurrence of the code masked.
    pub fn redact(&self, text: &str) -> String {
        text.replace(&self.0, "<code>")
    }
}

impl FromStr for EnrollCode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let code = s.trim();
        if code.is_empty() {
            return Err("the enrollment code is empty".to_owned());
        }
        if code.len() > 1024 || !code.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(
                "the enrollment code must be printable ascii without spaces, at most 1024 bytes"
                    .to_owned(),
            );
        }
        Ok(Self(code.to_owned()))
    }
}

impl fmt::Debug for EnrollCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("EnrollCode(<redacted>)")
    }
}

impl fmt::Display for EnrollCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// What to enroll with (the flags of `odac-agent enroll`).
#[derive(Debug, Clone)]
pub struct Enrollment {
    /// The one-time enrollment code.
    pub code: EnrollCode,
    /// Control plane base URL, e.g. https://app.odac.run.
    pub cp: String,
    /// PEM CA certificate(s) to trust instead of the public roots.
    pub ca_file: Option<PathBuf>,
    /// Where agent.toml and the token go.
    pub config_dir: PathBuf,
    /// A state directory to record in agent.toml (created, mode 0700).
    pub state_dir: Option<PathBuf>,
}

/// What enrollment wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Enrolled {
    /// The token file (mode 0600).
    pub token_file: PathBuf,
    /// The configuration file (mode 0644).
    pub config_file: PathBuf,
    /// The copied CA, if one was given.
    pub ca_file: Option<PathBuf>,
    /// The WebSocket URL recorded as `control_plane.url`.
    pub agent_url: String,
    /// The control plane's release keys recorded as `update.public_keys` (none: left as is).
    pub release_keys: Vec<String>,
}

/// Why enrollment failed. Never carries the code or the token.
#[derive(Debug, thiserror::Error)]
pub enum EnrollError {
    #[error("control plane url {url:?}: {why}")]
    BadUrl { url: String, why: String },
    #[error("cannot read ca file {path}: {source}", path = path.display())]
    ReadCa {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("ca file {path}: {why}", path = path.display())]
    BadCa { path: PathBuf, why: String },
    #[error("cannot prepare {path} (nothing was sent, the code is still valid): {source}", path = path.display())]
    Prepare {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot reach the control plane at {url}: {why}")]
    Http { url: String, why: String },
    #[error(
        "the control plane refused the enrollment code (http {status}): {message}; a code works once: ask the control plane for a new one"
    )]
    Refused { status: u16, message: String },
    #[error("the control plane at {url} failed (http {status}): {message}; try again later")]
    Server {
        url: String,
        status: u16,
        message: String,
    },
    #[error("unexpected answer from {url}: {why}")]
    BadAnswer { url: String, why: String },
    #[error(
        "cannot write {path}: {source}; the code has been used, ask the control plane for a new one",
        path = path.display()
    )]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

impl EnrollError {
    /// Whether the arguments were at fault (URL, CA file) rather than the exchange or a write.
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            Self::BadUrl { .. } | Self::ReadCa { .. } | Self::BadCa { .. }
        )
    }
}

/// Runs the whole enrollment.
pub fn enroll(args: &Enrollment) -> Result<Enrolled, EnrollError> {
    let base = BaseUrl::parse(&args.cp)?;
    let ca = match &args.ca_file {
        Some(path) => {
            let pem =
                crate::bounded_read::read_regular_io(path, 1024 * 1024).map_err(|source| {
                    EnrollError::ReadCa {
                        path: path.clone(),
                        source,
                    }
                })?;
            let certs = client::parse_ca(&pem, path)?;
            Some((pem, certs))
        }
        None => None,
    };

    let prepare = |path: &Path| {
        let path = path.to_owned();
        move |source| EnrollError::Prepare { path, source }
    };
    // absolute paths: agent.toml records them and the service's working dir is /
    atomic_file::create_dir(&args.config_dir, 0o755).map_err(prepare(&args.config_dir))?;
    let dir = &std::path::absolute(&args.config_dir).map_err(prepare(&args.config_dir))?;
    let state_dir = match &args.state_dir {
        Some(state) => {
            atomic_file::create_dir(state, 0o700).map_err(prepare(state))?;
            Some(std::path::absolute(state).map_err(prepare(state))?)
        }
        None => None,
    };
    let token_path = dir.join(TOKEN_FILE);
    let config_path = dir.join(CONFIG_FILE);
    let ca_path = dir.join(CA_FILE);
    // staged before the request: an unwritable dir fails while the code is still unused
    let token_stage =
        atomic_file::Staged::create(&token_path, 0o600).map_err(prepare(&token_path))?;
    let config_stage =
        atomic_file::Staged::create(&config_path, 0o644).map_err(prepare(&config_path))?;
    let old_config =
        match crate::bounded_read::read_regular_io(&config_path, 1024 * 1024).and_then(|bytes| {
            String::from_utf8(bytes)
                .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "not utf-8 text"))
        }) {
            Ok(text) => Some(text),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(source) => return Err(prepare(&config_path)(source)),
        };

    let granted = client::redeem(&base, &args.code, ca.as_ref().map(|(_, c)| c.clone()))?;
    let token = granted.token;

    let written = |path: &Path| {
        let path = path.to_owned();
        move |source| EnrollError::Write { path, source }
    };
    token_stage
        .commit(token.as_bytes())
        .map_err(written(&token_path))?;
    let copied_ca = match &ca {
        Some((pem, _)) => {
            let same = args
                .ca_file
                .as_deref()
                .and_then(|p| p.canonicalize().ok())
                .is_some_and(|p| ca_path.canonicalize().is_ok_and(|c| c == p));
            if !same {
                atomic_file::write_atomic(&ca_path, pem, 0o644).map_err(written(&ca_path))?;
            }
            Some(ca_path.clone())
        }
        None => None,
    };

    let agent_url = base.agent_ws_url(AGENT_WS_PATH);
    let mut settings = vec![Setting {
        table: Some("control_plane"),
        key: "url",
        value: agent_url.clone().into(),
    }];
    if let Some(ca) = &copied_ca {
        settings.push(Setting {
            table: Some("control_plane"),
            key: "ca_file",
            value: ca.display().to_string().into(),
        });
    }
    settings.push(Setting {
        table: Some("control_plane"),
        key: "token_file",
        value: token_path.display().to_string().into(),
    });
    // the control plane's release keys, when it sent any: self-update trusts them
    if !granted.release_keys.is_empty() {
        settings.push(Setting {
            table: Some("update"),
            key: "public_keys",
            value: toml_patch::Value::List(granted.release_keys.clone()),
        });
    }
    if let Some(state) = &state_dir {
        settings.push(Setting {
            table: None,
            key: "state_dir",
            value: state.display().to_string().into(),
        });
    }
    let text = patch_toml(old_config.as_deref().unwrap_or(NEW_CONFIG_HEAD), &settings);
    config_stage
        .commit(text.as_bytes())
        .map_err(written(&config_path))?;

    Ok(Enrolled {
        token_file: token_path,
        config_file: config_path,
        ca_file: copied_ca,
        agent_url,
        release_keys: granted.release_keys,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn code_is_never_shown() {
        let c: EnrollCode = " enr_s3cret ".parse().unwrap();
        assert_eq!(c.expose(), "enr_s3cret");
        assert!(!format!("{c:?} {c}").contains("s3cret"));
        assert_eq!(c.redact("code enr_s3cret is used"), "code <code> is used");
        assert!("".parse::<EnrollCode>().is_err());
        assert!("a b".parse::<EnrollCode>().is_err());
    }

    #[test]
    fn argument_errors_exit_2_and_nothing_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let args = Enrollment {
            code: "c".parse().unwrap(),
            cp: "http://cp.example".to_owned(),
            ca_file: None,
            config_dir: dir.path().join("etc"),
            state_dir: None,
        };
        let e = enroll(&args).unwrap_err();
        assert!(e.is_usage(), "{e}");
        assert!(!args.config_dir.exists());

        let args = Enrollment {
            cp: "https://cp.example".to_owned(),
            ca_file: Some(dir.path().join("missing.pem")),
            ..args
        };
        let e = enroll(&args).unwrap_err();
        assert!(e.is_usage(), "{e}");
        assert!(e.to_string().contains("missing.pem"), "{e}");
        assert!(!args.config_dir.exists());
    }
}
