//! Fetching a git source with the git CLI: a shallow fetch (`--depth 1`) of the branch, the
//! rev or the default branch into a fresh bare repository under the state directory, the
//! commit it resolved to, and the build context as `git archive` of that commit (the tree
//! only, no `.git`). Every git run has a deadline, never prompts (`GIT_TERMINAL_PROMPT=0`,
//! ssh in batch mode, stdin closed) and is killed when abandoned. A secret travels to git in
//! its environment as an HTTP header, never on the command line, and is cut out of anything
//! git prints before it reaches an error.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use odac_protocol::{GitScheme, GitSource};
use thiserror::Error;
use tokio::io::AsyncReadExt;
use tokio::process::Command;
use tokio::time::Instant;

/// Lines of git's stderr kept in an error.
const STDERR_LINES: usize = 10;

/// Why a fetch failed. Messages name the URL (never with credentials) or the ref.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum GitError {
    /// git could not be started.
    #[error("cannot run {program}: {error}")]
    Spawn {
        /// The git program.
        program: String,
        /// The OS error.
        error: String,
    },
    /// The deadline passed.
    #[error("git {step} of {url} did not finish within {secs} s")]
    Timeout {
        /// `fetch`, `archive`, ...
        step: String,
        /// The repository.
        url: String,
        /// The bound.
        secs: u64,
    },
    /// The branch or rev does not exist in the repository.
    #[error("{what} not found in {url}")]
    RefNotFound {
        /// E.g. `branch "nope"`.
        what: String,
        /// The repository.
        url: String,
    },
    /// The Dockerfile is not in the tree at the commit.
    #[error("dockerfile {path:?} not found in {url} at commit {commit}")]
    DockerfileMissing {
        /// Path in the repository.
        path: String,
        /// The repository.
        url: String,
        /// The commit.
        commit: String,
    },
    /// The build context is over the limit.
    #[error(
        "the tree of {url} at commit {commit} is larger than the build context limit of {limit} bytes"
    )]
    ContextTooLarge {
        /// The repository.
        url: String,
        /// The commit.
        commit: String,
        /// The limit.
        limit: u64,
    },
    /// git ran and failed; `stderr` holds its last lines (secrets cut out).
    #[error("git {step} of {url} failed: {stderr}")]
    Failed {
        /// `fetch`, `archive`, ...
        step: String,
        /// The repository.
        url: String,
        /// What git said.
        stderr: String,
    },
    /// The state directory could not be prepared.
    #[error("build directory {path}: {error}")]
    Io {
        /// The directory.
        path: PathBuf,
        /// The OS error.
        error: String,
    },
}

/// A fetched commit and its tree as a tar build context.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    /// Full commit id.
    pub commit: String,
    /// `git archive --format=tar` of the commit.
    pub context: Vec<u8>,
}

/// What to fetch and how.
#[derive(Debug, Clone)]
pub struct FetchRequest<'a> {
    /// The source (validated).
    pub source: &'a GitSource,
    /// The git program.
    pub git: &'a Path,
    /// A scratch directory: emptied first, removed at the end.
    pub dir: &'a Path,
    /// When to give up.
    pub deadline: Instant,
    /// The bound the deadline came from, in seconds (for messages).
    pub timeout_secs: u64,
    /// Largest context accepted.
    pub max_context_bytes: u64,
}

/// Standard base64 (RFC 4648, with padding).
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The secret forms that must never leave: the token and its basic-auth encoding.
fn secret_forms(source: &GitSource) -> Vec<String> {
    source
        .secret
        .as_ref()
        .map(|s| {
            let token = s.expose().to_owned();
            let basic = base64(format!("x-access-token:{token}").as_bytes());
            vec![token, basic]
        })
        .unwrap_or_default()
}

/// `text` with every secret form replaced by `<redacted>`.
pub fn redact(text: &str, source: &GitSource) -> String {
    let mut out = text.to_owned();
    for form in secret_forms(source) {
        if !form.is_empty() {
            out = out.replace(&form, "<redacted>");
        }
    }
    out
}

/// The last lines of git's stderr, trimmed, secrets cut out.
fn stderr_tail(stderr: &[u8], source: &GitSource) -> String {
    let text = String::from_utf8_lossy(stderr);
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let tail = lines[lines.len().saturating_sub(STDERR_LINES)..].join("\n");
    redact(&tail, source)
}

struct Output {
    ok: bool,
    stdout: Vec<u8>,
    stdout_truncated: bool,
    stderr: Vec<u8>,
}

/// `git <args>` for a fetch: no prompts, no askpass, batch-mode ssh, C locale, no
/// inherited repository, the source's secret (if any) as an HTTP header in the environment.
fn git_command(req: &FetchRequest<'_>, args: &[&str]) -> Command {
    let source = req.source;
    let mut cmd = Command::new(req.git);
    if source.scheme() == Some(GitScheme::File) {
        cmd.args(["-c", "protocol.file.allow=always"]);
    }
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_ASKPASS", "")
        .env("SSH_ASKPASS", "")
        .env("LC_ALL", "C")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE");
    if std::env::var_os("GIT_SSH_COMMAND").is_none() {
        cmd.env("GIT_SSH_COMMAND", "ssh -o BatchMode=yes");
    }
    if let Some(secret) = &source.secret {
        let basic = base64(format!("x-access-token:{}", secret.expose()).as_bytes());
        cmd.env("GIT_CONFIG_COUNT", "1")
            .env("GIT_CONFIG_KEY_0", "http.extraHeader")
            .env(
                "GIT_CONFIG_VALUE_0",
                format!("Authorization: Basic {basic}"),
            );
    }
    cmd
}

/// Run one git command; stdout is read up to `stdout_limit` bytes (more is reported as
/// truncated and the process is killed).
async fn run_git(
    req: &FetchRequest<'_>,
    step: &str,
    args: &[&str],
    stdout_limit: u64,
) -> Result<Output, GitError> {
    let source = req.source;
    let mut cmd = git_command(req, args);
    let url = source.display_url();
    let mut child = cmd.spawn().map_err(|e| GitError::Spawn {
        program: req.git.display().to_string(),
        error: e.to_string(),
    })?;
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let work = async {
        let mut out = Vec::new();
        let mut err = Vec::new();
        let read_out = async {
            if let Some(s) = stdout {
                let _ = s
                    .take(stdout_limit.saturating_add(1))
                    .read_to_end(&mut out)
                    .await;
            }
        };
        let read_err = async {
            if let Some(s) = stderr {
                let _ = s.take(1 << 20).read_to_end(&mut err).await;
            }
        };
        tokio::join!(read_out, read_err);
        let truncated = out.len() as u64 > stdout_limit;
        if truncated {
            let _ = child.start_kill();
        }
        let status = child.wait().await;
        (status, out, err, truncated)
    };
    let (status, stdout, stderr, stdout_truncated) = tokio::time::timeout_at(req.deadline, work)
        .await
        .map_err(|_| GitError::Timeout {
            step: step.to_owned(),
            url: url.clone(),
            secs: req.timeout_secs,
        })?;
    let status = status.map_err(|e| GitError::Spawn {
        program: req.git.display().to_string(),
        error: e.to_string(),
    })?;
    Ok(Output {
        ok: status.success(),
        stdout,
        stdout_truncated,
        stderr,
    })
}

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> GitError + '_ {
    move |e| GitError::Io {
        path: path.to_path_buf(),
        error: e.to_string(),
    }
}

/// Empty `dir` (removing what a previous, interrupted fetch left).
pub fn clear_dir(dir: &Path) -> Result<(), GitError> {
    match std::fs::remove_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io_error(dir)(e)),
    }
}

/// Fetch the source's commit shallowly and pack its tree. The scratch directory is removed
/// whatever happens.
pub async fn fetch(req: &FetchRequest<'_>) -> Result<Fetched, GitError> {
    let result = fetch_in(req).await;
    let _ = clear_dir(req.dir);
    result
}

async fn fetch_in(req: &FetchRequest<'_>) -> Result<Fetched, GitError> {
    clear_dir(req.dir)?;
    // builds/ and the checkout are the agent's only (mode 0700): git may keep credentials there
    if let Some(parent) = req.dir.parent() {
        crate::appmgr::state::store::private_dir(parent).map_err(io_error(parent))?;
    }
    crate::appmgr::state::store::private_dir(req.dir).map_err(io_error(req.dir))?;
    let dir = req.dir.to_string_lossy().into_owned();
    let commit = fetch_commit(req, &dir).await?;
    let context = pack(req, &dir, &commit).await?;
    Ok(Fetched { commit, context })
}

/// A git step that ran and failed, with the tail of what it printed (secrets redacted).
fn failed(req: &FetchRequest<'_>, step: &str, out: &Output) -> GitError {
    GitError::Failed {
        step: step.to_owned(),
        url: req.source.display_url(),
        stderr: stderr_tail(&out.stderr, req.source),
    }
}

/// Fetches the source's rev, branch or default branch shallowly into a fresh bare repository
/// in `dir`; the full commit id it resolved to.
async fn fetch_commit(req: &FetchRequest<'_>, dir: &str) -> Result<String, GitError> {
    let source = req.source;
    let init = run_git(req, "init", &["init", "--quiet", "--bare", dir], 0).await?;
    if !init.ok {
        return Err(failed(req, "init", &init));
    }
    let (refspec, what) = match (&source.rev, &source.branch) {
        (Some(rev), _) => (rev.clone(), format!("rev {rev:?}")),
        (None, Some(branch)) => (format!("refs/heads/{branch}"), format!("branch {branch:?}")),
        (None, None) => ("HEAD".to_owned(), "the default branch (HEAD)".to_owned()),
    };
    let args = [
        "-C",
        dir,
        "fetch",
        "--quiet",
        "--depth",
        "1",
        "--no-tags",
        "--",
    ];
    let args: Vec<&str> = args
        .into_iter()
        .chain([source.url.as_str(), &refspec])
        .collect();
    let fetch = run_git(req, "fetch", &args, 0).await?;
    if !fetch.ok {
        let stderr = String::from_utf8_lossy(&fetch.stderr);
        if stderr.contains("couldn't find remote ref") || stderr.contains("not our ref") {
            let url = source.display_url();
            return Err(GitError::RefNotFound { what, url });
        }
        return Err(failed(req, "fetch", &fetch));
    }
    let verify = ["-C", dir, "rev-parse", "--verify", "FETCH_HEAD^{commit}"];
    let parsed = run_git(req, "rev-parse", &verify, 4096).await?;
    if !parsed.ok {
        return Err(failed(req, "rev-parse", &parsed));
    }
    let commit = String::from_utf8_lossy(&parsed.stdout).trim().to_owned();
    if commit.len() < 12 || !commit.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(GitError::Failed {
            step: "rev-parse".into(),
            url: source.display_url(),
            stderr: format!("unexpected commit id {commit:?}"),
        });
    }
    Ok(commit)
}

/// The commit's tree as a tar build context, after checking that its Dockerfile exists; at
/// most `max_context_bytes`.
async fn pack(req: &FetchRequest<'_>, dir: &str, commit: &str) -> Result<Vec<u8>, GitError> {
    let source = req.source;
    let dockerfile = source.dockerfile.as_deref().unwrap_or("Dockerfile");
    let object = format!("{commit}:{dockerfile}");
    let exists = run_git(req, "cat-file", &["-C", dir, "cat-file", "-e", &object], 0).await?;
    if !exists.ok {
        return Err(GitError::DockerfileMissing {
            path: dockerfile.to_owned(),
            url: source.display_url(),
            commit: commit.to_owned(),
        });
    }
    let args = ["-C", dir, "archive", "--format=tar", commit];
    let archive = run_git(req, "archive", &args, req.max_context_bytes).await?;
    if archive.stdout_truncated {
        return Err(GitError::ContextTooLarge {
            url: source.display_url(),
            commit: commit.to_owned(),
            limit: req.max_context_bytes,
        });
    }
    if !archive.ok {
        return Err(failed(req, "archive", &archive));
    }
    Ok(archive.stdout)
}

#[cfg(test)]
mod tests {
    use super::*;
    use odac_protocol::GitSecret;

    #[test]
    fn base64_matches_rfc_4648() {
        for (input, expected) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(input.as_bytes()), expected);
        }
    }

    #[test]
    fn secrets_are_cut_out() {
        let source = GitSource {
            url: "https://h/r.git".into(),
            secret: Some(GitSecret::new("tok3n")),
            ..GitSource::default()
        };
        let basic = base64(b"x-access-token:tok3n");
        let text = format!("fatal: auth tok3n failed\nheader: Basic {basic}\n");
        let clean = stderr_tail(text.as_bytes(), &source);
        assert!(
            !clean.contains("tok3n") && !clean.contains(&basic),
            "{clean}"
        );
        assert_eq!(clean.matches("<redacted>").count(), 2);
    }
}
