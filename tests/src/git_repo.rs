//! A local git repository standing in for a public one: a bare `origin.git` with a working
//! clone to commit from, and a git configuration file that rewrites a public URL (e.g. the
//! seed's `https://github.com/example/ai-service`) to it (`url.<file url>.insteadOf`). The
//! agent's git runs read that file through `GIT_CONFIG_GLOBAL`, so a command can name the
//! public URL exactly as a user types it while nothing leaves the machine. Also the cleanup
//! of the images the agent built for a scenario (by its run label).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::error::{Error, Result};

/// Runs git in `dir` with a fixed identity and branch name; its trimmed stdout.
pub fn git(dir: &Path, args: &[&str]) -> Result<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args([
            "-c",
            "user.name=odac e2e",
            "-c",
            "user.email=e2e@odac.invalid",
        ])
        .args([
            "-c",
            "commit.gpgsign=false",
            "-c",
            "init.defaultBranch=main",
        ])
        .args(args)
        .env("GIT_TERMINAL_PROMPT", "0")
        .env_remove("GIT_CONFIG_GLOBAL")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| Error::command(format!("git {}", args.join(" ")), e.to_string()))?;
    if !out.status.success() {
        return Err(Error::command(
            format!("git {} in {}", args.join(" "), dir.display()),
            String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// A bare repository `origin.git` and a working clone to commit from, under one directory.
#[derive(Debug, Clone)]
pub struct LocalRepo {
    /// The bare repository the agent clones.
    pub origin: PathBuf,
    /// The working copy commits are made in.
    pub work: PathBuf,
}

impl LocalRepo {
    /// Creates both under `root`, on branch `main`.
    pub fn new(root: &Path) -> Result<LocalRepo> {
        let origin = root.join("origin.git");
        let work = root.join("work");
        for d in [&origin, &work] {
            std::fs::create_dir_all(d).map_err(|e| Error::io("create", d, e))?;
        }
        git(&origin, &["init", "-q", "--bare"])?;
        git(&work, &["init", "-q"])?;
        git(&work, &["checkout", "-q", "-b", "main"])?;
        Ok(LocalRepo { origin, work })
    }

    /// Its `file://` URL.
    pub fn url(&self) -> String {
        format!("file://{}", self.origin.display())
    }

    /// Writes `files`, commits on main and pushes; the commit id.
    pub fn commit(&self, files: &[(&str, &str)], message: &str) -> Result<String> {
        for (name, text) in files {
            let path = self.work.join(name);
            std::fs::write(&path, text).map_err(|e| Error::io("write", &path, e))?;
        }
        git(&self.work, &["add", "-A"])?;
        git(&self.work, &["commit", "-q", "-m", message])?;
        let origin = self.origin.to_string_lossy().into_owned();
        git(&self.work, &["push", "-q", &origin, "main:main"])?;
        git(&self.work, &["rev-parse", "HEAD"])
    }

    /// Writes a git configuration file at `path` that rewrites `public_url` to this
    /// repository; give it to the agent as `GIT_CONFIG_GLOBAL`.
    pub fn write_rewrite_config(&self, path: &Path, public_url: &str) -> Result<()> {
        let text = format!("[url \"{}\"]\n\tinsteadOf = {public_url}\n", self.url());
        std::fs::write(path, text).map_err(|e| Error::io("write", path, e))
    }
}

/// Removes the images carrying a label when dropped (declare it before the stack, so it
/// drops after the stack removed the containers).
#[derive(Debug)]
pub struct ImageCleanup(pub String);

impl ImageCleanup {
    /// Ids of the images carrying the label.
    pub fn images(&self) -> Vec<String> {
        let out = Command::new("docker")
            .args(["image", "ls", "-q", "--no-trunc", "--filter"])
            .arg(format!("label={}", self.0))
            .stdin(Stdio::null())
            .output();
        let mut ids: Vec<String> = out
            .map(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .split_whitespace()
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        ids.dedup();
        ids
    }
}

impl Drop for ImageCleanup {
    fn drop(&mut self) {
        let ids = self.images();
        if !ids.is_empty() {
            let _ = Command::new("docker")
                .args(["image", "rm", "-f"])
                .args(&ids)
                .stdin(Stdio::null())
                .output();
        }
    }
}
