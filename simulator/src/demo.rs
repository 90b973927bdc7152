//! `odac-sim demo`: the whole system on one machine. It serves the simulator, builds the
//! sample image locally (busybox from the host's `busybox-static`, no registry), starts a real
//! `odac-agent run` connected over TLS with the simulator's CA and token, creates a sample app
//! with an optional GPU (automatic vendor) whose command lists the GPU device nodes and GPU
//! environment it received and then sleeps, and prints the dashboard URL and `odac` commands
//! to try. Ctrl-C removes the sample app (unless `--keep`), stops the agent and the simulator,
//! and names every app it leaves (made during the walk-through: their containers keep running
//! without an agent, and the next demo on the same state dir manages them again) with how to
//! remove them: `--clean` removes every app of the demo's host on Ctrl-C.
//!
//! The demo's agent owns a set of its own: instance [`DEMO_INSTANCE`] (never the service's
//! `odac`) and a state dir under the demo's (never `/var/lib/odac-agent`), so it neither sees
//! nor touches the containers of an agent already running on the same engine. Output after
//! Ctrl-C never panics on a closed stdout (`odac-sim demo | tee log`: the terminal's SIGINT
//! reaches `tee` too), so the sample app is still removed.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, bail};
use odac_host::engine::test_image::ensure_busybox_image;
use odac_host::engine::{ContainerEngine, DockerEngine};
use odac_host::names::{self, container_name};
use odac_protocol::{AppSpec, GpuRequest};
use tokio::process::{Child, Command};

use crate::catalog::DEMO_IMAGE;
use crate::server::{ServeConfig, Server, wait_for_signal};

/// Name of the sample app.
pub const DEMO_APP: &str = "gpu-demo";

/// The demo agent's `apps.instance`.
pub const DEMO_INSTANCE: &str = "odac-demo";

/// Print a line to stdout; a closed or broken stdout is ignored (`println!` would panic, and
/// the panic would skip the clean-up).
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, $($arg)*);
        let _ = out.flush();
    }};
}

/// The sample app's shell script: what the container received, then sleep. As PID 1 the shell
/// gets no default signal handlers, so it traps TERM to stop at once instead of after the
/// engine's stop timeout.
pub const DEMO_SCRIPT: &str = "echo '== GPU device nodes =='; \
ls -l /dev/dri /dev/kfd /dev/nvidia* 2>&1; \
echo '== GPU environment =='; \
env | grep -Ei 'nvidia|cuda|rocm|hip_|hsa_|gpu|dri|render|level_zero|oneapi' || echo '(none)'; \
echo '== sleeping =='; trap 'exit 0' TERM INT; sleep 2147483647 & wait";

/// The sample app spec: the `demo` catalog app with an optional GPU of any vendor.
pub fn demo_spec() -> AppSpec {
    AppSpec {
        name: DEMO_APP.to_owned(),
        kind: Some("app".to_owned()),
        app: Some("demo".to_owned()),
        image: Some(DEMO_IMAGE.to_owned()),
        command: vec!["sh".to_owned(), "-c".to_owned(), DEMO_SCRIPT.to_owned()],
        gpu: Some(GpuRequest::default().with_optional(true)),
        ..AppSpec::default()
    }
}

/// Where the `odac-agent` binary is: `ODAC_AGENT_BIN`, else next to the current executable.
pub fn agent_binary() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("ODAC_AGENT_BIN").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?;
    // `cargo test` puts test binaries in deps/; the bins are one level up
    [dir.join("odac-agent"), dir.join("../odac-agent")]
        .into_iter()
        .find(|p| p.is_file())
}

/// Finds the agent binary, building it with cargo when the demo itself runs under `cargo run`.
async fn find_or_build_agent() -> anyhow::Result<PathBuf> {
    if let Some(p) = agent_binary() {
        return Ok(p);
    }
    if let Some(cargo) = std::env::var_os("CARGO") {
        say!("building odac-agent (cargo build -p odac-agent)…");
        let status = Command::new(cargo)
            .args(["build", "-q", "-p", "odac-agent"])
            .status()
            .await
            .context("cannot run cargo to build odac-agent")?;
        if !status.success() {
            bail!("cargo build -p odac-agent failed");
        }
        if let Some(p) = agent_binary() {
            return Ok(p);
        }
    }
    bail!(
        "odac-agent binary not found next to odac-sim; build it (cargo build -p odac-agent) \
         or set ODAC_AGENT_BIN"
    )
}

/// The agent's configuration for this demo.
pub fn agent_config(url: &str, ca: &Path, token_file: &Path, state_dir: &Path) -> String {
    let q = |p: &Path| format!("{:?}", p.display().to_string());
    format!(
        "# written by odac-sim demo\n\
         state_dir = {}\n\
         log_level = \"info\"\n\n\
         [control_plane]\n\
         url = {:?}\n\
         ca_file = {}\n\
         token_file = {}\n\n\
         [apps]\n\
         instance = {:?}\n",
        q(state_dir),
        url,
        q(ca),
        q(token_file),
        DEMO_INSTANCE,
    )
}

async fn start_agent(bin: &Path, config: &Path, log: &Path) -> anyhow::Result<Child> {
    let log_file =
        std::fs::File::create(log).with_context(|| format!("cannot create {}", log.display()))?;
    let err_file = log_file
        .try_clone()
        .with_context(|| format!("cannot open {}", log.display()))?;
    Command::new(bin)
        .arg("run")
        .arg("--config")
        .arg(config)
        .stdin(Stdio::null())
        .stdout(log_file)
        .stderr(err_file)
        // its own process group: Ctrl-C in the terminal reaches the demo only, which deletes
        // the sample app through the agent before stopping it
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("cannot start {}", bin.display()))
}

async fn stop_agent(mut child: Child) {
    if let Some(pid) = child.id() {
        let _ = Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .await;
    }
    if tokio::time::timeout(Duration::from_secs(6), child.wait())
        .await
        .is_err()
    {
        let _ = child.kill().await;
    }
}

async fn wait_until(secs: u64, mut f: impl FnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    while tokio::time::Instant::now() < deadline {
        if f() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    f()
}

fn odac_command() -> String {
    std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(|d| d.join("odac")))
        .filter(|p| p.is_file())
        .map_or_else(
            || "cargo run -q -p odac-simulator --bin odac --".to_owned(),
            |p| p.display().to_string(),
        )
}

/// What Ctrl-C removes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnExit {
    /// The sample app (the default).
    RemoveSample,
    /// Nothing (`--keep`).
    Keep,
    /// Every app of the demo's host (`--clean`).
    Clean,
}

/// Removes `names` from the control plane and waits (at most 30 s) until the agent removed
/// their containers; returns the names whose container is still there.
async fn remove_apps(
    hub: &std::sync::Arc<crate::state::hub::Hub>,
    engine: &DockerEngine,
    names: &[String],
) -> Vec<String> {
    for name in names {
        if let Err(e) = hub.delete_app(name).await {
            say!("cannot remove app {name}: {e}");
        }
    }
    // the agent acks the deletes, then removes the containers on its next reconcile
    let label = format!("{}={DEMO_INSTANCE}", names::INSTANCE);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let left: Vec<String> = match engine.list_by_label(&label).await {
            Ok(list) => names
                .iter()
                .filter(|n| list.iter().any(|c| c.labels.get(names::APP) == Some(*n)))
                .cloned()
                .collect(),
            Err(e) => {
                say!("cannot check the demo's containers: {e}");
                return names.to_vec();
            }
        };
        if left.is_empty() || tokio::time::Instant::now() >= deadline {
            return left;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// What Ctrl-C says of the apps it leaves on the demo's host.
pub fn leftovers_text(left: &[String], state: &Path) -> String {
    if left.is_empty() {
        return "the demo's host has no app left".to_owned();
    }
    let containers: Vec<String> = left
        .iter()
        .map(|n| container_name(DEMO_INSTANCE, n))
        .collect();
    format!(
        "left in place: {n} app(s) made during the demo ({apps}); their containers ({containers}) \
         keep running without an agent, and the next `odac-sim demo --state {state}` manages \
         them again. To remove them: start the demo again with `--clean` and press Ctrl-C \
         (every app of the demo is removed), or `docker rm -f {containers_sp}` and delete {state}.",
        n = left.len(),
        apps = left.join(", "),
        containers = containers.join(", "),
        containers_sp = containers.join(" "),
        state = state.display(),
    )
}

/// Runs the demo until Ctrl-C; `on_exit` says what Ctrl-C removes.
pub async fn run(listen: &str, state: &Path, on_exit: OnExit) -> anyhow::Result<()> {
    let agent_bin = find_or_build_agent().await?;

    say!("building the sample image {DEMO_IMAGE} from the host's busybox…");
    let engine = DockerEngine::connect(None)
        .await
        .context("cannot reach the Docker engine (is dockerd running?)")?;
    ensure_busybox_image(&engine, DEMO_IMAGE)
        .await
        .context("cannot build the sample image (apt-get install busybox-static)")?;

    let server = Server::start(ServeConfig::new(listen, state.join("sim"))).await?;
    let token_file = server
        .token_file
        .clone()
        .context("the simulator generated no agent token file")?;
    let agent_dir = state.join("agent");
    std::fs::create_dir_all(&agent_dir)
        .with_context(|| format!("cannot create {}", agent_dir.display()))?;
    let config_path = agent_dir.join("agent.toml");
    std::fs::write(
        &config_path,
        agent_config(
            &server.agents_url(),
            &server.ca_path,
            &token_file,
            &agent_dir.join("state"),
        ),
    )
    .with_context(|| format!("cannot write {}", config_path.display()))?;
    let log = agent_dir.join("agent.log");
    say!("starting {} (log: {})…", agent_bin.display(), log.display());
    let mut agent = start_agent(&agent_bin, &config_path, &log).await?;

    let hub = std::sync::Arc::clone(&server.hub);
    let mut exited = None;
    let connected = wait_until(30, || {
        exited = exited.or_else(|| agent.try_wait().ok().flatten());
        exited.is_some() || !hub.connected_hosts().is_empty()
    })
    .await;
    if let Some(status) = exited {
        server.shutdown().await;
        let last = std::fs::read_to_string(&log)
            .ok()
            .and_then(|t| t.lines().last().map(str::to_owned))
            .unwrap_or_default();
        bail!(
            "the demo's agent exited ({status}): {last} (see {})",
            log.display()
        );
    }
    if !connected {
        stop_agent(agent).await;
        server.shutdown().await;
        bail!(
            "the agent did not connect within 30 s; see {}",
            log.display()
        );
    }
    let host = hub.connected_hosts().remove(0);
    if hub.app(DEMO_APP).is_none() {
        hub.create_app(Some(&host), demo_spec())
            .await
            .map_err(|e| anyhow::anyhow!("cannot create the sample app: {e}"))?;
    }
    wait_until(60, || {
        hub.app(DEMO_APP)
            .is_some_and(|a| a.state != "pending" && a.state != "creating")
    })
    .await;

    let odac = odac_command();
    say!("{}", server.banner().trim_end());
    if let Some(a) = hub.app(DEMO_APP) {
        say!(
            "sample app {DEMO_APP}: {} — gpu requested {}, attached {}, reason {}",
            a.state,
            crate::cli::table::request(a.requested.as_ref()),
            crate::cli::table::attached(a.attached.as_ref()),
            a.reason.map_or_else(|| "-".to_owned(), |r| r.to_string()),
        );
    }
    say!(
        "\nopen {} in a browser (trust {} or accept the warning)\n\ntry:\n  \
         export ODAC_API={} ODAC_CA_FILE={}\n  \
         {odac} app list\n  \
         {odac} host list\n  \
         {odac} app gpu {DEMO_APP} --nvidia --optional\n  \
         {odac} app restart {DEMO_APP}\n  \
         {odac} app list --json\n\nCtrl-C stops the demo{}.",
        server.dashboard_url(),
        server.ca_path.display(),
        server.api_url(),
        server.ca_path.display(),
        match on_exit {
            OnExit::Keep => " (the sample app keeps running: --keep)",
            OnExit::Clean => " and removes every app of the demo (--clean)",
            OnExit::RemoveSample =>
                " and removes the sample app; apps you add stay (it names them; --clean removes them too)",
        },
    );

    wait_for_signal().await;
    say!("stopping…");
    let on_host = |hub: &crate::state::hub::Hub| -> Vec<String> {
        hub.apps()
            .into_iter()
            .filter(|a| a.host == host)
            .map(|a| a.name)
            .collect()
    };
    let remove: Vec<String> = match on_exit {
        OnExit::Keep => Vec::new(),
        OnExit::Clean => on_host(&hub),
        OnExit::RemoveSample => on_host(&hub)
            .into_iter()
            .filter(|n| n == DEMO_APP)
            .collect(),
    };
    if !remove.is_empty() {
        let stuck = remove_apps(&hub, &engine, &remove).await;
        let gone: Vec<&String> = remove.iter().filter(|n| !stuck.contains(n)).collect();
        if !gone.is_empty() {
            say!(
                "removed {}",
                gone.iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        if !stuck.is_empty() {
            let names: Vec<String> = stuck
                .iter()
                .map(|n| container_name(DEMO_INSTANCE, n))
                .collect();
            say!(
                "still there after 30s: remove with `docker rm -f {}`",
                names.join(" ")
            );
        }
    }
    let left: Vec<String> = on_host(&hub);
    say!("{}", leftovers_text(&left, state));
    stop_agent(agent).await;
    server.shutdown().await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demo_spec_is_valid_and_asks_for_an_optional_gpu_of_any_vendor() {
        let spec = demo_spec();
        assert!(spec.validate().is_ok());
        let gpu = spec.gpu.unwrap_or_default();
        assert!(gpu.is_optional());
        assert_eq!(gpu.effective_vendor(), None);
        assert!(DEMO_SCRIPT.contains("/dev/dri") && DEMO_SCRIPT.contains("/dev/nvidia*"));
    }

    #[test]
    fn agent_config_has_the_keys_the_agent_reads() {
        let c = agent_config(
            "wss://127.0.0.1:7443/agent/v1",
            Path::new("/s/ca.pem"),
            Path::new("/s/agent-token"),
            Path::new("/s/agent/state"),
        );
        assert!(c.contains("url = \"wss://127.0.0.1:7443/agent/v1\""));
        assert!(c.contains("ca_file = \"/s/ca.pem\""));
        assert!(c.contains("token_file = \"/s/agent-token\""));
        assert!(c.contains("state_dir = \"/s/agent/state\""));
        assert!(c.contains("[apps]\ninstance = \"odac-demo\""), "{c}");
    }
}
