//! The agent id: a random UUID created the first time the agent runs and kept in
//! `<state_dir>/agent_id`, so the control plane recognises the host across restarts and
//! reinstalls that keep the state directory. An existing file must hold an id that passes the
//! protocol's agent-id rule (`odac_protocol::validate_agent_id`); an empty or invalid one is a
//! configuration error naming the file and the fix (exit 78), never silently replaced, since
//! the control plane binds the id to the host's token. Written atomically (temporary file, fsync,
//! rename); the state directory is created with mode 0700 if missing. The file is read through
//! [`bounded_read`](crate::bounded_read) (a regular file of at most 4 KiB; a FIFO never blocks),
//! and an unusable one is described without quoting it: `agent_id` may be a symlink to a file
//! that is not ours to show (`/etc/shadow`), and the message goes to the journal.

use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

/// File name of the agent id inside the state directory.
pub const AGENT_ID_FILE: &str = "agent_id";

/// Why the agent id could not be read or created.
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    #[error("state_dir: cannot create {path}: {source}", path = path.display())]
    CreateDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot read agent id {path}: {source}", path = path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot write agent id {path}: {source}", path = path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "agent id file {path} is unusable: {why}; put back the id this host had (the control plane shows it as the host id), or delete the file to get a new id (the host then appears as a new agent)",
        path = path.display()
    )]
    Corrupt { path: PathBuf, why: String },
}

impl IdentityError {
    /// True when the file is there but unusable: a configuration problem (exit 78) that a
    /// restart cannot fix, so systemd must not restart the agent in a loop.
    pub fn is_config(&self) -> bool {
        matches!(
            self,
            IdentityError::Corrupt { .. } | IdentityError::Read { .. }
        )
    }
}

/// Reads the agent id from `state_dir`, creating it (and the directory) on first use.
pub fn load_or_create(state_dir: &Path) -> Result<String, IdentityError> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(state_dir)
        .map_err(|source| IdentityError::CreateDir {
            path: state_dir.to_owned(),
            source,
        })?;
    let path = state_dir.join(AGENT_ID_FILE);
    use crate::bounded_read::{BoundedReadError, read_regular};
    match read_regular(&path, 4096) {
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes);
            let id = text.trim();
            if odac_protocol::validate_agent_id("agent_id", id).is_err() {
                let why = unusable(id);
                return Err(IdentityError::Corrupt { path, why });
            }
            Ok(id.to_owned())
        }
        Err(e @ (BoundedReadError::NotRegular { .. } | BoundedReadError::TooLarge { .. })) => {
            Err(IdentityError::Corrupt {
                path,
                why: format!("it {e}"),
            })
        }
        Err(BoundedReadError::NotFound(_)) => {
            let id = uuid::Uuid::new_v4().to_string();
            write_atomically(&path, &id).map_err(|source| IdentityError::Write {
                path: path.clone(),
                source,
            })?;
            tracing::info!(agent_id = %id, path = %path.display(), "created the agent id");
            Ok(id)
        }
        Err(BoundedReadError::Io(source)) => Err(IdentityError::Read { path, source }),
    }
}

/// Why `id` is not an agent id, in the protocol's rules' order, never quoting it (one
/// offending character at most).
fn unusable(id: &str) -> String {
    let rule = "an agent id is 1 to 128 ascii letters, digits, '.', '_', ':' and '-'";
    if id.is_empty() {
        return "it is empty".to_owned();
    }
    let why = if id.len() > odac_protocol::MAX_AGENT_ID {
        format!("it is {} bytes long", id.len())
    } else if let Some(bad) = id
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-')))
    {
        format!("it contains {bad:?}")
    } else if !id.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        "it does not start with a letter or a digit".to_owned()
    } else {
        "it contains \"..\"".to_owned()
    };
    format!(
        "{why} ({rule}, starting with a letter or a digit, without \"..\"; the content is not shown)"
    )
}

fn write_atomically(path: &Path, id: &str) -> std::io::Result<()> {
    odac_host::atomic_file::write_atomic(path, format!("{id}\n").as_bytes(), 0o644)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn an_agent_id_linked_to_another_file_is_never_quoted() {
        let dir = tempfile::tempdir().unwrap();
        let shadow = dir.path().join("shadow");
        std::fs::write(
            &shadow,
            "root:$y$j9T$s3cretHash0123456789:19000:0:99999:7:::\n",
        )
        .unwrap();
        let state = dir.path().join("state");
        std::fs::create_dir(&state).unwrap();
        std::os::unix::fs::symlink(&shadow, state.join(AGENT_ID_FILE)).unwrap();
        let text = load_or_create(&state).unwrap_err().to_string();
        assert!(text.contains("it contains '$'"), "{text}");
        assert!(!text.contains("root") && !text.contains("s3cret"), "{text}");
        for (id, why) in [
            ("-abc", "does not start with a letter or a digit"),
            ("a..b", "contains \"..\""),
        ] {
            assert!(unusable(id).starts_with(&format!("it {why}")), "{id}");
        }
        assert!(unusable(&"a".repeat(200)).starts_with("it is 200 bytes long"));
        // a directory where the file belongs: unusable, not an io error
        std::fs::remove_file(state.join(AGENT_ID_FILE)).unwrap();
        std::fs::create_dir(state.join(AGENT_ID_FILE)).unwrap();
        let e = load_or_create(&state).unwrap_err();
        assert!(
            e.is_config() && e.to_string().contains("is a directory"),
            "{e}"
        );
    }

    #[test]
    fn created_once_then_kept() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state");
        let a = load_or_create(&state).unwrap();
        let b = load_or_create(&state).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.len(), 36);
        for (text, why) in [
            ("\n", "it is empty"),
            ("../../etc\n", "contains '/'"),
            ("a b", "contains ' '"),
        ] {
            std::fs::write(state.join(AGENT_ID_FILE), text).unwrap();
            let e = load_or_create(&state).unwrap_err();
            assert!(e.is_config(), "{e}");
            let msg = e.to_string();
            assert!(msg.contains(why) && msg.contains("agent_id"), "{msg}");
            assert!(msg.contains("delete the file"), "{msg}");
        }
    }
}
