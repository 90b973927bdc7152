//! Pull on demand from a real registry (Debian's docker-registry with htpasswd auth, see
//! `odac_e2e::registry`) through the real Docker engine and the agent's app manager: the
//! right credentials run the app and its image id and repo digest are reported; a wrong
//! password ends `failed` / `image_pull_failed` with the registry's words and is retried on
//! the crash-loop backoff only (pull attempts counted in the registry's log over 60 s); a
//! stopped registry is waited out and the app runs within one backoff step of its return;
//! `always` picks up a re-pushed tag on a new restart token; the host's `config.json`
//! credentials work; the password shows in no status and no event. Through the real
//! binaries: `odac registry login` lets the agent pull a private image (digest in `odac app
//! list`, the password in no log or API answer), and ODAC's seed payload runs from the
//! catalog mirror (`odac-sim serve --catalog-registry`). A pull that would not fit on the disk
//! is refused before a layer is downloaded.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use odac_agent::appmgr::{AppEvent, AppManager, AppManagerConfig, CrashLoopConfig};
use odac_e2e::docker::{LabelCleanup, RUN_LABEL};
use odac_e2e::image::ensure_sleeper_image;
use odac_e2e::registry::Registry;
use odac_e2e::require_docker;
use odac_host::engine::{DockerEngine, RegistryAuth};
use odac_protocol::{AppSpec, AppState, AppStatus, DesiredState, PullPolicy, Reason};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

/// The backoff of these tests: 500 ms doubling to 4 s.
const MAX_BACKOFF: Duration = Duration::from_secs(4);

fn fixture() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/hosts/no-gpu")
}

fn config(dir: &Path, instance: &str, docker_config: &Path) -> AppManagerConfig {
    AppManagerConfig {
        state_dir: dir.join(instance),
        instance: instance.to_owned(),
        lock_dir: dir.join("locks"),
        stop_timeout_secs: 1,
        poll_interval_ms: 200,
        crash_loop: CrashLoopConfig {
            initial_backoff_ms: 500,
            max_backoff_secs: MAX_BACKOFF.as_secs(),
            healthy_reset_secs: 600,
        },
        extra_labels: BTreeMap::from([(RUN_LABEL.to_owned(), instance.to_owned())]),
        docker_config: docker_config.to_path_buf(),
        ..AppManagerConfig::default()
    }
}

struct Running {
    manager: AppManager,
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<()>,
    events: broadcast::Receiver<AppEvent>,
    seen: Vec<AppEvent>,
}

impl Running {
    async fn start(config: AppManagerConfig) -> Running {
        let engine = Arc::new(DockerEngine::connect(None).await.unwrap());
        let manager = AppManager::open(config, engine, fixture()).unwrap();
        let events = manager.subscribe_events();
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(manager.clone().run(shutdown.clone()));
        Running {
            manager,
            shutdown,
            task,
            events,
            seen: Vec::new(),
        }
    }

    async fn set(&self, generation: u64, apps: Vec<AppSpec>) {
        self.manager
            .set_desired(DesiredState { generation, apps })
            .await
            .unwrap();
    }

    fn drain(&mut self) {
        while let Ok(e) = self.events.try_recv() {
            self.seen.push(e);
        }
    }

    async fn until(
        &mut self,
        name: &str,
        within: Duration,
        pred: impl Fn(&AppStatus) -> bool,
    ) -> AppStatus {
        let deadline = Instant::now() + within;
        loop {
            self.drain();
            let status = self.manager.statuses().into_iter().find(|s| s.name == name);
            if let Some(s) = &status
                && pred(s)
            {
                return s.clone();
            }
            assert!(
                Instant::now() < deadline,
                "{name} did not reach the expected status within {within:?}: {status:#?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn stop(self) -> Vec<AppEvent> {
        let mut me = self;
        me.shutdown.cancel();
        (&mut me.task).await.unwrap();
        me.drain();
        me.seen
    }
}

fn app(name: &str, image: &str) -> AppSpec {
    AppSpec::new(name, image)
}

fn running(s: &AppStatus) -> bool {
    s.state == AppState::Running
}

fn pull_failed(s: &AppStatus) -> bool {
    s.state == AppState::Failed
        && s.image_failure.as_ref().map(|f| f.reason) == Some(Reason::ImagePullFailed)
        && s.gpu.fallback.is_none()
}

fn auth(registry: &Registry, password: &str) -> RegistryAuth {
    RegistryAuth {
        server: registry.host(),
        username: registry.user().to_owned(),
        password: password.to_owned(),
    }
}

/// A variant of the sleeper image (another label, so another digest), tagged `tag`.
fn variant(tag: &str) {
    let base = ensure_sleeper_image().unwrap();
    let dockerfile = format!("FROM {base}\nLABEL odac.e2e.variant={tag}\n");
    let out = odac_e2e::command::output_with_stdin(
        Command::new("docker")
            .args(["build", "-q", "-t", tag, "-"])
            .env("DOCKER_BUILDKIT", "0"),
        "docker build",
        Some(dockerfile.as_bytes()),
    )
    .unwrap();
    assert!(out.status.success(), "docker build {tag}");
}

fn no_secret(password: &str, what: &str, text: &str) {
    assert!(!text.contains(password), "the password shows in {what}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pulls_from_a_private_registry_with_backoff_digests_and_credentials() {
    require_docker!("registry");
    let sleeper = ensure_sleeper_image().unwrap();
    let password = format!("pw-{}", std::process::id());
    let mut registry = Registry::start("odac", &password).unwrap();
    let instance = format!("reg{}", std::process::id());
    let _cleanup = LabelCleanup::new(format!("{RUN_LABEL}={instance}"));
    let tmp = tempfile::tempdir().unwrap();
    let private = registry.push(sleeper, "odac/private:1").unwrap();
    let wrong = registry.push(sleeper, "odac/wrong:1").unwrap();
    let later = registry.push(sleeper, "odac/later:1").unwrap();

    let mut agent =
        Running::start(config(tmp.path(), &instance, &tmp.path().join("none.json"))).await;
    // 1. The right credentials: running, digest reported.
    agent
        .manager
        .registry_credentials()
        .set_sent(vec![auth(&registry, &password)]);
    agent.set(1, vec![app("private", &private)]).await;
    let s = agent
        .until("private", Duration::from_secs(60), running)
        .await;
    let digest = s.repo_digest.clone().unwrap_or_default();
    println!("private: image_id {:?}, repo_digest {digest}", s.image_id);
    assert!(
        digest.starts_with(&format!("{}/odac/private@sha256:", registry.host())),
        "{s:#?}"
    );
    assert!(s.image_id.as_deref().unwrap().starts_with("sha256:"));

    // 2. A wrong password: image_pull_failed with the registry's words, no storm over 60 s.
    agent
        .manager
        .registry_credentials()
        .set_sent(vec![auth(&registry, "not-the-password")]);
    let (before, pulls_before) = (registry.auth_failures(), registry.engine_pulls());
    let window = Instant::now();
    agent.set(2, vec![app("wrong", &wrong)]).await;
    let s = agent
        .until("wrong", Duration::from_secs(30), pull_failed)
        .await;
    let error = s.last_error.clone().unwrap_or_default();
    println!("wrong password: {error}");
    assert!(
        error.starts_with("image_pull_failed: ") && error.contains("unauthorized"),
        "{error}"
    );
    tokio::time::sleep(Duration::from_secs(60).saturating_sub(window.elapsed())).await;
    let failures = registry.auth_failures() - before;
    let attempts = registry.engine_pulls() - pulls_before;
    println!("in 60 s: {attempts} pull attempts, {failures} refused logins at the registry");
    // 500 ms doubling to 4 s: about 18 attempts in 60 s; a tight loop would be thousands.
    assert!(
        (4..=25).contains(&attempts),
        "{attempts} pull attempts in 60 s"
    );
    assert!(
        failures >= attempts,
        "{failures} refused logins for {attempts} attempts"
    );

    // 3. The registry stops: failed and backing off; back: running within one step.
    agent
        .manager
        .registry_credentials()
        .set_sent(vec![auth(&registry, &password)]);
    registry.stop().unwrap();
    agent.set(3, vec![app("later", &later)]).await;
    let s = agent
        .until("later", Duration::from_secs(30), pull_failed)
        .await;
    println!(
        "registry down: {}",
        s.last_error.clone().unwrap_or_default()
    );
    tokio::time::sleep(MAX_BACKOFF * 2).await;
    registry.start_again().unwrap();
    let back = Instant::now();
    agent
        .until("later", MAX_BACKOFF + Duration::from_secs(20), running)
        .await;
    let waited = back.elapsed();
    println!("running {waited:?} after the registry came back (backoff step {MAX_BACKOFF:?})");
    assert!(waited < MAX_BACKOFF + Duration::from_secs(10), "{waited:?}");

    // 4. `always` picks up a re-pushed tag on a new restart token.
    let fresh = registry.push(sleeper, "odac/fresh:1").unwrap();
    let mut spec = app("fresh", &fresh);
    spec.pull = PullPolicy::Always;
    agent.set(4, vec![spec.clone()]).await;
    let first = agent
        .until("fresh", Duration::from_secs(60), running)
        .await
        .repo_digest
        .unwrap_or_default();
    let variant_tag = format!("odac/e2e-variant:{instance}");
    variant(&variant_tag);
    let repushed = registry.push(&variant_tag, "odac/fresh:1");
    let _ = Command::new("docker")
        .args(["image", "rm", &variant_tag])
        .output();
    repushed.unwrap();
    spec.restart_token = Some("again".into());
    agent.set(5, vec![spec]).await;
    let second = agent
        .until("fresh", Duration::from_secs(60), |s| {
            running(s) && s.repo_digest.as_deref().is_some_and(|d| d != first)
        })
        .await
        .repo_digest
        .unwrap_or_default();
    println!("always: {first} → {second}");

    let mut shown = format!("{:?}", agent.manager.statuses());
    let events = agent.stop().await;
    shown.push_str(&format!("{events:?}"));
    no_secret(&password, "statuses or events", &shown);

    // 5. The host's docker login (config.json auths), no credentials from the control plane.
    let config_json = tmp.path().join("docker-config.json");
    let b64 = odac_e2e::registry::basic_auth(registry.user(), &password);
    std::fs::write(
        &config_json,
        format!(
            r#"{{"auths":{{"{}":{{"auth":"{b64}"}}}}}}"#,
            registry.host()
        ),
    )
    .unwrap();
    let host_instance = format!("{instance}h");
    let _host_cleanup = LabelCleanup::new(format!("{RUN_LABEL}={host_instance}"));
    let hosted = registry.push(sleeper, "odac/hosted:1").unwrap();
    let mut agent = Running::start(config(tmp.path(), &host_instance, &config_json)).await;
    agent.set(1, vec![app("hosted", &hosted)]).await;
    let s = agent
        .until("hosted", Duration::from_secs(60), running)
        .await;
    assert!(s.repo_digest.is_some(), "{s:#?}");
    let events = agent.stop().await;
    no_secret(&password, "events", &format!("{events:?}"));
}

/// The whole path: `odac registry login` on the control plane, `odac app create --image`
/// of a private image, the agent pulls it with the credentials the simulator sent and runs
/// it; `odac app list` shows the digest, `odac registry list` the login without its password,
/// and the password is in no log and no API answer.
#[test]
fn odac_registry_login_lets_the_agent_pull_and_the_password_stays_secret() {
    require_docker!("registry");
    let sleeper = ensure_sleeper_image().unwrap();
    let password = format!("cli-pw-{}", std::process::id());
    let mut registry = Registry::start("odac", &password).unwrap();
    let image = registry.push(sleeper, "odac/cli-private:1").unwrap();
    let stack = odac_e2e::stack::Stack::builder("registry_cli")
        .start()
        .unwrap();
    stack.wait_connected(Duration::from_secs(60)).unwrap();
    let sim = &stack.sim;

    let host = registry.host();
    let out = sim
        .odac_line(
            &format!("odac registry login {host} --username odac --password-stdin"),
            Some(&format!("{password}\n")),
        )
        .unwrap();
    assert!(
        out.stdout.contains(&format!("logged in to {host} as odac")),
        "{}",
        out.stdout
    );
    sim.odac_line(
        &format!("odac app create -n cli-private --image {image}"),
        None,
    )
    .unwrap();
    let app = stack
        .wait_app("cli-private", Duration::from_secs(90), "running", |a| {
            a.state == "running"
        })
        .unwrap();
    let digest = app.status.and_then(|s| s.repo_digest).unwrap_or_default();
    println!("cli-private runs {digest}");
    assert!(digest.contains("@sha256:"), "{digest}");

    let table = sim.odac_line("odac app list", None).unwrap().stdout;
    println!("{table}");
    let short: String = digest
        .rsplit_once("@sha256:")
        .map(|(_, d)| d.chars().take(12).collect())
        .unwrap_or_default();
    assert!(table.contains(&short), "{short} not in\n{table}");
    let json = sim.odac_line("odac app list --json", None).unwrap().stdout;
    assert!(json.contains("\"repo_digest\""), "{json}");
    let logins = sim.odac_line("odac registry list", None).unwrap().stdout;
    assert!(
        logins.contains(&host) && logins.contains("odac"),
        "{logins}"
    );

    let mut seen = vec![
        table,
        json,
        logins,
        sim.odac_line("odac registry list --json", None)
            .unwrap()
            .stdout,
        serde_json::to_string(&sim.event_log().unwrap()).unwrap(),
    ];
    seen.extend(stack.agent().unwrap().process().unwrap().lines());
    seen.extend(sim.process().map(|p| p.lines()).unwrap_or_default());
    for text in &seen {
        assert!(!text.contains(&password), "the password shows in: {text}");
    }
    sim.odac_line(&format!("odac registry logout {host}"), None)
        .unwrap();
    let logins = sim
        .odac_line("odac registry list --json", None)
        .unwrap()
        .stdout;
    assert!(!logins.contains(&host), "{logins}");
    drop(stack);
    registry.stop().unwrap();
}

/// ODAC's seed payload runs from a mirror: `odac-sim serve --catalog-registry HOST:PORT`
/// rewrites the catalog's `ollama/ollama:<tag>` to the local registry, which holds the test
/// image under that name; a bad `--catalog-registry` value exits 2 with the reason.
#[test]
fn the_seed_ollama_payload_runs_from_the_catalog_mirror() {
    require_docker!("registry");
    let bad = Command::new(odac_e2e::bins::bin(odac_e2e::bins::SIM).unwrap())
        .args(["serve", "--catalog-registry", "http://mirror/x"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&bad.stderr);
    assert_eq!(bad.status.code(), Some(2), "{said}");
    assert!(said.contains("expected HOST[:PORT]"), "{said}");

    let sleeper = ensure_sleeper_image().unwrap();
    let password = format!("mirror-pw-{}", std::process::id());
    let mut registry = Registry::start("odac", &password).unwrap();
    let entry = odac_simulator::catalog::lookup("ollama").unwrap();
    let mirrored = registry.push(sleeper, &entry.image).unwrap();
    let mut stack = odac_e2e::stack::Stack::builder("registry_mirror")
        .no_agent()
        .start()
        .unwrap();
    let host = registry.host();
    stack
        .sim
        .serve_with(&["--catalog-registry", &host])
        .unwrap();
    stack.start_agent().unwrap();
    stack.wait_connected(Duration::from_secs(60)).unwrap();
    let sim = &stack.sim;
    sim.odac_line(
        &format!("odac registry login {host} --username odac --password-stdin"),
        Some(&password),
    )
    .unwrap();
    let payload = r#"{"name":"ollama-app","type":"app","app":"ollama","gpu":{"runtime":"nvidia","count":1,"optional":true}}"#;
    sim.odac_line("odac app create -f -", Some(payload))
        .unwrap();
    let app = stack
        .wait_app("ollama-app", Duration::from_secs(120), "running", |a| {
            a.state == "running"
        })
        .unwrap();
    assert_eq!(app.image.as_deref(), Some(mirrored.as_str()));
    let status = app.status.unwrap();
    println!(
        "ollama-app runs {mirrored} ({:?}), gpu fallback {:?}",
        status.repo_digest, status.gpu.fallback
    );
    assert!(
        status
            .repo_digest
            .as_deref()
            .is_some_and(|d| d.starts_with(&format!("{host}/ollama/ollama@sha256:")))
    );
    assert_eq!(app.spec.ports.first().map(|p| p.container), Some(11434));
    drop(stack);
    registry.stop().unwrap();
}

/// A pull that would not leave the reserve free in the engine's data root is refused before a
/// layer is downloaded, with a message that says so (here: a reserve larger than any disk).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pull_that_does_not_fit_on_the_disk_is_refused_before_downloading() {
    require_docker!("registry");
    let sleeper = ensure_sleeper_image().unwrap();
    let password = format!("disk-pw-{}", std::process::id());
    let mut registry = Registry::start("odac", &password).unwrap();
    let image = registry.push(sleeper, "odac/too-big:1").unwrap();
    let instance = format!("regd{}", std::process::id());
    let _cleanup = LabelCleanup::new(format!("{RUN_LABEL}={instance}"));
    let tmp = tempfile::tempdir().unwrap();
    let mut config = config(tmp.path(), &instance, &tmp.path().join("none.json"));
    config.pull_disk_reserve_mb = 1 << 40;
    let mut agent = Running::start(config).await;
    agent
        .manager
        .registry_credentials()
        .set_sent(vec![auth(&registry, &password)]);
    agent.set(1, vec![app("too-big", &image)]).await;
    let s = agent
        .until("too-big", Duration::from_secs(30), pull_failed)
        .await;
    let error = s.last_error.unwrap_or_default();
    println!("{error}");
    assert!(
        error.contains("not enough disk space to pull") && error.contains("pull_disk_reserve_mb"),
        "{error}"
    );
    assert_eq!(
        registry.count("GET /v2/odac/too-big/blobs/"),
        0,
        "nothing downloaded"
    );
    assert!(
        registry.count("GET /v2/odac/too-big/manifests/1") > 0,
        "the manifest was read"
    );
    agent.stop().await;
}
