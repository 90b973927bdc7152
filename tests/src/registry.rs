//! A real image registry for the pull tests: Debian's `docker-registry` (distribution 2.8)
//! on `127.0.0.1:<free port>` with htpasswd basic auth (`htpasswd -B` from apache2-utils) and
//! its own temporary storage. The engine trusts 127.0.0.0/8 over plain HTTP. Images are
//! pushed with the docker CLI logged in under a temporary `--config` directory, so the host's
//! own `~/.docker/config.json` is never touched. [`Registry::stop`] and [`Registry::start_again`]
//! cut and restore it on the same port and storage; dropping it stops the process and
//! removes the tags it pushed (and their pulled copies, the same references).

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::command::output_with_stdin;
use crate::error::{Error, Result};
use crate::ports::free_port;
use crate::process::Process;

/// The registry binary (Debian package `docker-registry`).
pub const REGISTRY_BIN: &str = "/usr/bin/docker-registry";

/// A running registry; see the module documentation.
pub struct Registry {
    dir: tempfile::TempDir,
    port: u16,
    user: String,
    password: String,
    process: Option<Process>,
    runs: usize,
    pushed: Vec<String>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("host", &self.host())
            .field("user", &self.user)
            .finish_non_exhaustive()
    }
}

fn run(cmd: &mut Command, what: &str, stdin: Option<&str>) -> Result<String> {
    let out = output_with_stdin(cmd, what, stdin.map(str::as_bytes))?;
    if !out.status.success() {
        return Err(Error::command(
            what,
            format!(
                "{}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

impl Registry {
    /// Start a registry that accepts `user` / `password`.
    pub fn start(user: &str, password: &str) -> Result<Registry> {
        if !std::path::Path::new(REGISTRY_BIN).exists() {
            return Err(Error::Other(format!(
                "{REGISTRY_BIN} is missing: install the docker-registry package"
            )));
        }
        let dir = tempfile::tempdir().map_err(|e| Error::io("create", "registry dir", e))?;
        let htpasswd = run(
            Command::new("htpasswd").args(["-Bbn", user, password]),
            "htpasswd -Bbn (apache2-utils)",
            None,
        )?;
        let path = dir.path().join("htpasswd");
        std::fs::write(&path, htpasswd).map_err(|e| Error::io("write", &path, e))?;
        let port = free_port()?;
        let config = format!(
            "version: 0.1\nlog:\n  level: info\nstorage:\n  filesystem:\n    rootdirectory: {root}\n  delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:{port}\n  secret: odac-test\nauth:\n  htpasswd:\n    realm: odac\n    path: {htpasswd}\n",
            root = dir.path().join("data").display(),
            htpasswd = path.display(),
        );
        let config_path = dir.path().join("config.yml");
        std::fs::write(&config_path, config).map_err(|e| Error::io("write", &config_path, e))?;
        let mut registry = Registry {
            dir,
            port,
            user: user.to_owned(),
            password: password.to_owned(),
            process: None,
            runs: 0,
            pushed: Vec::new(),
        };
        registry.start_again()?;
        let config_dir = registry.docker_config_dir();
        run(
            Command::new("docker")
                .arg("--config")
                .arg(&config_dir)
                .args(["login", &registry.host(), "-u", user, "--password-stdin"]),
            "docker login to the test registry",
            Some(password),
        )?;
        Ok(registry)
    }

    /// `127.0.0.1:PORT`.
    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// The user it accepts.
    pub fn user(&self) -> &str {
        &self.user
    }

    /// The password it accepts.
    pub fn password(&self) -> &str {
        &self.password
    }

    fn docker_config_dir(&self) -> PathBuf {
        self.dir.path().join("docker-cli")
    }

    /// (Re)start the process on the same port and storage; waits until it listens.
    pub fn start_again(&mut self) -> Result<()> {
        if self.process.is_some() {
            return Ok(());
        }
        self.runs += 1;
        let config_path = self.dir.path().join("config.yml");
        let process = Process::spawn(
            &format!("registry{}", self.runs),
            Command::new(REGISTRY_BIN).arg("serve").arg(&config_path),
            &self.dir.path().join("logs"),
        )?;
        process.wait_for_line(
            &format!("listening on 127.0.0.1:{}", self.port),
            Duration::from_secs(20),
        )?;
        self.process = Some(process);
        Ok(())
    }

    /// Stop the process (the storage stays).
    pub fn stop(&mut self) -> Result<()> {
        if let Some(mut p) = self.process.take() {
            p.terminate(Duration::from_secs(10))?;
        }
        Ok(())
    }

    /// Push local image `local` as `HOST/name` and untag it locally; returns that reference.
    pub fn push(&mut self, local: &str, name: &str) -> Result<String> {
        let reference = format!("{}/{name}", self.host());
        run(
            Command::new("docker").args(["tag", local, &reference]),
            "docker tag",
            None,
        )?;
        if !self.pushed.contains(&reference) {
            self.pushed.push(reference.clone());
        }
        run(
            Command::new("docker")
                .arg("--config")
                .arg(self.docker_config_dir())
                .args(["push", &reference]),
            &format!("docker push {reference}"),
            None,
        )?;
        // Untag it here, so the engine has to pull it.
        run(
            Command::new("docker").args(["image", "rm", &reference]),
            "docker image rm",
            None,
        )?;
        Ok(reference)
    }

    /// `docker pull reference` logged in to this registry (a temporary `--config`).
    pub fn docker_pull(&self, reference: &str) -> Result<()> {
        run(
            Command::new("docker")
                .arg("--config")
                .arg(self.docker_config_dir())
                .args(["pull", "-q", reference]),
            &format!("docker pull {reference}"),
            None,
        )
        .map(|_| ())
    }

    /// Lines of the current process's log containing `needle`.
    pub fn count(&self, needle: &str) -> usize {
        self.process.as_ref().map_or(0, |p| p.count_lines(needle))
    }

    /// Requests refused for a wrong password, this run of the process.
    pub fn auth_failures(&self) -> usize {
        self.count("error authenticating user")
    }

    /// Pull attempts by the Docker engine this run: each starts with a `GET /v2/` ping (the
    /// access log names the engine's user agent; the agent's own manifest reads do not ping).
    pub fn engine_pulls(&self) -> usize {
        self.log()
            .iter()
            .filter(|l| l.contains("\"GET /v2/ HTTP/1.1\"") && l.contains("\"docker/"))
            .count()
    }

    /// Every log line of this run, for failure messages.
    pub fn log(&self) -> Vec<String> {
        self.process
            .as_ref()
            .map(Process::lines)
            .unwrap_or_default()
    }
}

/// The `auth` value of a `config.json` entry: base64 of `user:password`.
pub fn basic_auth(user: &str, password: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.stop();
        for reference in &self.pushed {
            let _ = Command::new("docker")
                .args(["image", "rm", reference])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
        // Pulled copies left by digest only (a re-pushed tag moved away from them).
        let prefix = format!("{}/", self.host());
        let listed = Command::new("docker")
            .args([
                "images",
                "--digests",
                "--format",
                "{{.Repository}}@{{.Digest}}",
            ])
            .output();
        if let Ok(out) = listed {
            for reference in String::from_utf8_lossy(&out.stdout)
                .lines()
                .filter(|r| r.starts_with(&prefix) && !r.ends_with("@<none>"))
            {
                let _ = Command::new("docker")
                    .args(["image", "rm", reference])
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status();
            }
        }
    }
}
