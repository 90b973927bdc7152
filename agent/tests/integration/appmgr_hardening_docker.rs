//! The app manager's hardening against the real Docker engine: host binds cannot
//! reach outside the allowed prefixes through a symbolic link a container made, nor through a
//! container swapping a directory for a link between the check and the mount; containers get
//! `no-new-privileges` and a pids limit; removals of stubborn containers run in parallel and do
//! not hold up a new app; a registry whose manifest never ends fails the app before the engine
//! is asked to pull (the registry sees the agent's pre-check only, never dockerd). Each test has
//! its own instance and removes what it made.

use crate::docker_support;

use docker_support::{logs_with, remove_run_objects, run_containers, run_labels, with_run};
use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use odac_agent::appmgr::{AppManager, AppManagerConfig, HostSource, PolicyConfig};
use odac_host::engine::test_image::BUSYBOX_TEST_IMAGE;
use odac_host::engine::{ContainerEngine, ContainerSummary, DockerEngine};
use odac_protocol::{AppSpec, AppState, AppStatus, DesiredState, Reason, VolumeMount};

struct Run {
    id: String,
    real: Arc<DockerEngine>,
    tmp: tempfile::TempDir,
}

impl Run {
    /// The allowed prefix of this run (resolved: /tmp may be a link on some hosts).
    fn prefix(&self) -> PathBuf {
        self.tmp.path().canonicalize().unwrap().join("P")
    }

    fn open(&self, stop_timeout_secs: u64) -> AppManager {
        let config = AppManagerConfig {
            state_dir: self.tmp.path().join("state"),
            instance: format!("odac-h{}", self.id),
            stop_timeout_secs,
            poll_interval_ms: 200,
            policy: PolicyConfig {
                allowed_bind_prefixes: vec![self.prefix()],
                ..PolicyConfig::default()
            },
            extra_labels: run_labels(&self.id),
            ..AppManagerConfig::default()
        };
        AppManager::open_with_host(config, self.real.clone(), HostSource::Root("/".into())).unwrap()
    }

    async fn containers(&self) -> Vec<ContainerSummary> {
        run_containers(self.real.as_ref(), &self.id).await
    }

    async fn cleanup(&self) {
        remove_run_objects(self.real.as_ref(), &self.id, false).await;
    }
}

async fn with_engine<F, Fut>(test: &str, body: F)
where
    F: FnOnce(&'static Run) -> Fut,
    Fut: Future<Output = ()>,
{
    let make = |real, id| {
        let run = Run {
            id,
            real: Arc::new(real),
            tmp: tempfile::tempdir().unwrap(),
        };
        std::fs::create_dir_all(run.prefix().join("d")).unwrap();
        run
    };
    with_run(test, make, |run| run.cleanup(), body).await;
}

fn app(name: &str, script: &str, binds: &[(&PathBuf, &str, bool)]) -> AppSpec {
    let mut spec = AppSpec::new(name, BUSYBOX_TEST_IMAGE);
    spec.command = vec!["sh".into(), "-c".into(), script.into()];
    for (source, target, read_only) in binds {
        spec.volumes.push(VolumeMount {
            source: source.display().to_string(),
            target: (*target).into(),
            read_only: *read_only,
        });
    }
    spec
}

use crate::appmgr_support::status;

fn denied(s: &AppStatus) -> bool {
    s.state == AppState::Failed
        && s.gpu.fallback.as_ref().map(|f| f.reason) == Some(Reason::PolicyDenied)
}

/// A marker only the host's root shows at this path: a container that sees it under /host
/// sees the host's root.
fn host_marker(run: &Run) -> PathBuf {
    let marker = run
        .tmp
        .path()
        .canonicalize()
        .unwrap()
        .join("host-root-marker");
    std::fs::write(&marker, "host").unwrap();
    marker
}

/// Finding 1: app A binds `P/d` and links `esc` to `/`; app B binds `P/d/esc` (and the docker
/// socket through it). B must not run; a bind the test links on the host is refused too; a
/// plain bind runs with the resolved path, no-new-privileges and the pids limit.
#[tokio::test]
async fn symlink_escape_through_another_app_is_refused() {
    with_engine("bind_escape", |run| async move {
        let p = run.prefix();
        let marker = host_marker(run);
        let m = run.open(0);
        let a = app(
            "a",
            "ln -s / /data/esc; echo linked; sleep 3600",
            &[(&p.join("d"), "/data", false)],
        );
        m.set_desired(DesiredState {
            generation: 1,
            apps: vec![a.clone()],
        })
        .await
        .unwrap();
        let s = m.reconcile_once().await;
        let a_id = status(&s, "a").container_id.clone().unwrap();
        logs_with(run.real.as_ref(), &a_id, "linked", 10).await;
        assert!(p.join("d/esc").is_symlink(), "app a made its link");

        let script = format!(
            "if [ -e /host{} ]; then echo ESCAPED; fi; sleep 3600",
            marker.display()
        );
        let b = app(
            "b",
            &script,
            &[
                (&p.join("d/esc"), "/host", true),
                (
                    &p.join("d/esc/var/run/docker.sock"),
                    "/run/docker.sock",
                    false,
                ),
            ],
        );
        m.set_desired(DesiredState {
            generation: 2,
            apps: vec![a.clone(), b],
        })
        .await
        .unwrap();
        let s = m.reconcile_once().await;
        let sb = status(&s, "b");
        assert!(denied(sb), "b must be refused: {sb:?}");
        let error = sb.last_error.clone().unwrap_or_default();
        assert!(error.contains("volumes[0].source"), "{error}");
        let names: Vec<String> = run.containers().await.into_iter().map(|c| c.name).collect();
        assert!(
            names.iter().all(|n| !n.ends_with("_b")),
            "no container for b: {names:?}"
        );

        // a link made on the host (no container can write there) is refused as a link
        std::fs::create_dir_all(p.join("e")).unwrap();
        std::os::unix::fs::symlink("/", p.join("e/esc")).unwrap();
        let c = app("c", &script, &[(&p.join("e/esc"), "/host", true)]);
        // a plain bind runs, with the hardened defaults
        std::fs::create_dir_all(p.join("ok")).unwrap();
        let ok = app("ok", "sleep 3600", &[(&p.join("ok"), "/ok", true)]);
        m.set_desired(DesiredState {
            generation: 3,
            apps: vec![a, c, ok],
        })
        .await
        .unwrap();
        let s = m.reconcile_once().await;
        let sc = status(&s, "c");
        assert!(denied(sc), "c must be refused: {sc:?}");
        assert!(
            sc.last_error
                .as_deref()
                .unwrap_or_default()
                .contains("symbolic link"),
            "{sc:?}"
        );
        let sok = status(&s, "ok");
        assert_eq!(sok.state, AppState::Running, "{sok:?}");
        let details = run
            .real
            .inspect(sok.container_id.as_deref().unwrap())
            .await
            .unwrap();
        // besides the agent's own update lock directory at /run/odac
        let binds: Vec<&String> = details
            .binds
            .iter()
            .filter(|b| !b.ends_with(":/run/odac"))
            .collect();
        assert_eq!(binds, vec![&format!("{}:/ok:ro", p.join("ok").display())]);
        assert_eq!(
            details.security_opt,
            vec!["no-new-privileges".to_owned()],
            "{details:?}"
        );
        assert_eq!(details.pids_limit, Some(4096), "{details:?}");
    })
    .await;
}

/// Finding 1, the race: app A flips `P/d/esc` between a directory and a link to `/` as fast
/// as it can while app B, binding `P/d/esc`, is recreated again and again. B never runs with
/// the host's root (on today's main it does within a few tries).
#[tokio::test]
async fn swap_race_never_mounts_the_host_root() {
    with_engine("bind_race", |run| async move {
        let p = run.prefix();
        let marker = host_marker(run);
        std::fs::create_dir_all(p.join("d/esc")).unwrap();
        let m = run.open(0);
        let a = app(
            "a",
            "echo flipping; while :; do rmdir /data/esc 2>/dev/null || rm -f /data/esc; ln -s / /data/esc; rm -f /data/esc; mkdir /data/esc; done",
            &[(&p.join("d"), "/data", false)],
        );
        let script = format!(
            "if [ -e /host{} ]; then echo ESCAPED; else echo contained; fi; sleep 3600",
            marker.display()
        );
        let mut escaped = Vec::new();
        let mut refused = 0;
        for round in 0..30u64 {
            let mut b = app("b", &script, &[(&p.join("d/esc"), "/host", true)]);
            b.restart_token = Some(format!("r{round}"));
            let apps = vec![a.clone(), b];
            m.set_desired(DesiredState { generation: round + 1, apps }).await.unwrap();
            let s = m.reconcile_once().await;
            let sb = status(&s, "b");
            if denied(sb) {
                refused += 1;
            }
            if let Some(id) = &sb.container_id {
                let logs = logs_with(run.real.as_ref(), id, "ESCAPED", 10).await;
                if logs.contains("ESCAPED") {
                    escaped.push(round);
                }
            }
        }
        assert!(escaped.is_empty(), "b saw the host root in rounds {escaped:?}");
        assert_eq!(refused, 30, "b is refused every time while a can write around its path");
    })
    .await;
}

/// Finding 6: six apps whose PID 1 ignores SIGTERM are removed (10 s stop timeout each)
/// while a new app is added: the new app runs before the removals are over, and the whole
/// pass takes about one stop timeout, not six.
#[tokio::test]
async fn stubborn_removals_do_not_hold_up_a_new_app() {
    with_engine("slow_removals", |run| async move {
        let m = Arc::new(run.open(10));
        let stubborn = "trap '' TERM; echo ready; while :; do sleep 1; done";
        let apps: Vec<AppSpec> = (0..6)
            .map(|i| app(&format!("s{i}"), stubborn, &[]))
            .collect();
        m.set_desired(DesiredState {
            generation: 1,
            apps,
        })
        .await
        .unwrap();
        let s = m.reconcile_once().await;
        for st in &s {
            assert_eq!(st.state, AppState::Running, "{st:?}");
            logs_with(
                run.real.as_ref(),
                st.container_id.as_deref().unwrap(),
                "ready",
                5,
            )
            .await;
        }
        let fresh = app("fresh", "sleep 3600", &[]);
        crate::appmgr_support::set_one(&m, 2, fresh).await;
        let started = Instant::now();
        let pass = tokio::spawn({
            let m = m.clone();
            async move { m.reconcile_once().await }
        });
        // the new app's container runs while the stubborn ones are still stopping
        let mut fresh_running_at = None;
        let mut stubborn_left_then = 0;
        while started.elapsed() < Duration::from_secs(70) && !pass.is_finished() {
            let cs = run.containers().await;
            if fresh_running_at.is_none()
                && cs
                    .iter()
                    .any(|c| c.name.ends_with("_fresh") && c.state.as_str() == "running")
            {
                fresh_running_at = Some(started.elapsed());
                stubborn_left_then = cs.iter().filter(|c| !c.name.ends_with("_fresh")).count();
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let statuses = pass.await.unwrap();
        let took = started.elapsed();
        println!("new app running after {fresh_running_at:?}; pass took {took:?}");
        assert_eq!(status(&statuses, "fresh").state, AppState::Running);
        assert!(
            fresh_running_at.is_some(),
            "fresh was running before the pass ended"
        );
        assert_eq!(
            stubborn_left_then, 6,
            "fresh ran before any stubborn container was gone"
        );
        assert!(
            took < Duration::from_secs(30),
            "removals ran in parallel: {took:?}"
        );
        let left: Vec<String> = run.containers().await.into_iter().map(|c| c.name).collect();
        assert!(left.iter().all(|n| n.ends_with("_fresh")), "{left:?}");
    })
    .await;
}

/// A registry on 127.0.0.1 whose every answer is an endless chunked body; records the
/// `User-Agent` of each request (the agent's pre-check says `odac-agent/…`, dockerd `docker/…`).
async fn endless_registry() -> (String, Arc<std::sync::Mutex<Vec<String>>>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let agents = Arc::clone(&seen);
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let agents = Arc::clone(&agents);
            tokio::spawn(async move {
                let mut buf = [0u8; 8192];
                let n = s.read(&mut buf).await.unwrap_or(0);
                let head = String::from_utf8_lossy(&buf[..n]).to_ascii_lowercase();
                let agent = head
                    .lines()
                    .find_map(|l| l.strip_prefix("user-agent:"))
                    .unwrap_or("none")
                    .trim()
                    .to_owned();
                agents.lock().unwrap().push(agent);
                let head = "HTTP/1.1 200 OK\r\ncontent-type: application/vnd.docker.distribution.manifest.v2+json\r\ntransfer-encoding: chunked\r\n\r\n";
                if s.write_all(head.as_bytes()).await.is_err() {
                    return;
                }
                let chunk = format!("10000\r\n{}\r\n", " ".repeat(0x10000));
                while s.write_all(chunk.as_bytes()).await.is_ok() {}
            });
        }
    });
    (addr, seen)
}

/// Finding 2 of round 3: an endless manifest grew dockerd by gigabytes while the agent's
/// pre-check saw "length limit exceeded" and pulled anyway.
#[tokio::test]
async fn an_endless_manifest_is_never_pulled_by_the_engine() {
    with_engine("endless_manifest", |run| async move {
        let (addr, agents) = endless_registry().await;
        let image = format!("{addr}/odac/endless:1");
        let m = run.open(0);
        let mut spec = AppSpec::new("endless", &image);
        spec.command = vec!["sleep".into(), "3600".into()];
        crate::appmgr_support::set_one(&m, 1, spec).await;
        let deadline = Instant::now() + Duration::from_secs(30);
        let failed = loop {
            let statuses = m.reconcile_once().await;
            let s = status(&statuses, "endless").clone();
            if s.state == AppState::Failed || Instant::now() > deadline {
                break s;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        assert_eq!(failed.state, AppState::Failed, "{failed:#?}");
        let error = failed.last_error.as_deref().unwrap_or_default();
        assert!(
            error.starts_with("image_pull_failed: ") && error.contains("larger than 4194304"),
            "{error}"
        );
        let agents = agents.lock().unwrap().clone();
        assert!(!agents.is_empty());
        assert!(
            agents.iter().all(|a| a.starts_with("odac-agent/")),
            "the engine reached the registry: {agents:?}"
        );
        assert!(
            run.real.image_info(&image).await.is_err(),
            "no image pulled"
        );
    })
    .await;
}
