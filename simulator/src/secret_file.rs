//! Tokens read from files (`odac-sim serve --token-file`, `--api-token-file`), so they never
//! appear on a command line that `ps` shows. A file readable by group or others is refused, as
//! the agent refuses its own token file: the fix is `chmod 600 FILE`. Blank lines and lines
//! starting with `#` are skipped; errors name the file, never its content.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use crate::error::SimError;

fn refused(path: &Path, message: impl Into<String>) -> SimError {
    SimError::SecretFile {
        path: path.to_owned(),
        message: message.into(),
    }
}

/// Every token in `path`, one per line.
pub fn read_tokens(path: &Path) -> Result<Vec<String>, SimError> {
    let meta = std::fs::metadata(path).map_err(|e| refused(path, e.to_string()))?;
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(refused(
            path,
            format!("mode {mode:03o} lets other users read it; run chmod 600 on it"),
        ));
    }
    let text = std::fs::read_to_string(path).map_err(|e| refused(path, e.to_string()))?;
    let tokens: Vec<String> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_owned)
        .collect();
    if let Some(n) = tokens
        .iter()
        .position(|t| !t.bytes().all(|b| b.is_ascii_graphic()))
    {
        return Err(refused(
            path,
            format!("token {} holds spaces or non-printable characters", n + 1),
        ));
    }
    if tokens.is_empty() {
        return Err(refused(path, "holds no token"));
    }
    Ok(tokens)
}

/// The one token in `path`.
pub fn read_one(path: &Path) -> Result<String, SimError> {
    let mut tokens = read_tokens(path)?;
    if tokens.len() > 1 {
        return Err(refused(path, "holds more than one token"));
    }
    Ok(tokens.remove(0))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn reads_private_files_and_refuses_loose_or_empty_ones() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("t");
        std::fs::write(&f, "# agents\nabc\n\n def \n").unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(read_tokens(&f).unwrap(), vec!["abc", "def"]);
        assert!(
            read_one(&f)
                .unwrap_err()
                .to_string()
                .contains("more than one")
        );
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = read_tokens(&f).unwrap_err().to_string();
        assert!(
            e.contains("chmod 600") && e.contains(&f.display().to_string()),
            "{e}"
        );
        assert!(!e.contains("abc"), "{e}");
        std::fs::write(&f, "\n").unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(read_one(&f).unwrap_err().to_string().contains("no token"));
    }
}
