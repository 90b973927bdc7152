//! The app manager against the real Docker engine. Each test runs
//! its own manager instance (unique container-name prefix and `odac.instance` label) so tests
//! can run in parallel; every container and volume carries `odac.test=1` plus a per-test run
//! label and is removed at the end, even when an assertion fails. When the engine is
//! unreachable the tests fail under `ODAC_REQUIRE_DOCKER=1` and are skipped otherwise.

use crate::docker_support;

use docker_support::{logs_with, remove_run_objects, run_containers, run_labels, with_run};
use std::collections::BTreeMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use odac_agent::appmgr::{AppManager, AppManagerConfig, HostSource, container};
use odac_agent::cli::inventory::engine_from_info_file;
use odac_host::engine::test_image::BUSYBOX_TEST_IMAGE;
use odac_host::engine::{
    Bind, ContainerDetails, ContainerEngine, ContainerSpec, ContainerSummary, DeviceRequest,
    DockerEngine, EngineCapabilities, EngineError, FakeEngine,
};
use odac_host::gpu::{Allocations, Plan, resolve};
use odac_host::inventory::{Assessment, DeviceNode, scan};
use odac_protocol::{
    AppSpec, AppState, AppStatus, DesiredState, FallbackTier, GpuRequest, Mechanism, Reason,
    VolumeMount,
};

const MISSING_SOCKET: &str = "unix:///nonexistent/odac-test/docker.sock";

use crate::fixture_hosts::host as fixture;

/// The engine the manager sees: the real one (or a dead socket, switchable at run time),
/// recording every create so a test can say what reached the engine.
struct TestEngine {
    current: RwLock<Arc<dyn ContainerEngine>>,
    creates: Mutex<Vec<ContainerSpec>>,
}

impl TestEngine {
    fn engine(&self) -> Arc<dyn ContainerEngine> {
        self.current.read().unwrap().clone()
    }

    fn switch(&self, engine: Arc<dyn ContainerEngine>) {
        *self.current.write().unwrap() = engine;
    }

    fn creates(&self) -> Vec<ContainerSpec> {
        self.creates.lock().unwrap().clone()
    }
}

#[async_trait]
impl ContainerEngine for TestEngine {
    async fn capabilities(&self) -> EngineCapabilities {
        self.engine().capabilities().await
    }
    async fn image_exists(&self, image: &str) -> Result<bool, EngineError> {
        self.engine().image_exists(image).await
    }
    async fn import_image(
        &self,
        tag: &str,
        tar: Vec<u8>,
        ch: &[String],
    ) -> Result<(), EngineError> {
        self.engine().import_image(tag, tar, ch).await
    }
    async fn create(&self, spec: &ContainerSpec) -> Result<String, EngineError> {
        self.creates.lock().unwrap().push(spec.clone());
        self.engine().create(spec).await
    }
    async fn start(&self, id: &str) -> Result<(), EngineError> {
        self.engine().start(id).await
    }
    async fn stop(&self, id: &str, timeout: Duration) -> Result<(), EngineError> {
        self.engine().stop(id, timeout).await
    }
    async fn remove(&self, id: &str, force: bool) -> Result<(), EngineError> {
        self.engine().remove(id, force).await
    }
    async fn inspect(&self, id: &str) -> Result<ContainerDetails, EngineError> {
        self.engine().inspect(id).await
    }
    async fn list_by_label(&self, label: &str) -> Result<Vec<ContainerSummary>, EngineError> {
        self.engine().list_by_label(label).await
    }
    async fn ensure_volume(
        &self,
        name: &str,
        l: &BTreeMap<String, String>,
    ) -> Result<(), EngineError> {
        self.engine().ensure_volume(name, l).await
    }
    async fn volume_labels(
        &self,
        name: &str,
    ) -> Result<Option<BTreeMap<String, String>>, EngineError> {
        self.engine().volume_labels(name).await
    }
    async fn remove_volume(&self, name: &str) -> Result<(), EngineError> {
        self.engine().remove_volume(name).await
    }
    async fn logs_tail(&self, id: &str, lines: usize) -> Result<String, EngineError> {
        self.engine().logs_tail(id, lines).await
    }
}

/// One test's namespace on the real engine.
struct Run {
    id: String,
    real: Arc<DockerEngine>,
    engine: Arc<TestEngine>,
    tmp: tempfile::TempDir,
    volumes: Mutex<Vec<String>>,
}

impl Run {
    fn instance(&self) -> String {
        format!("odac-t{}", self.id)
    }

    fn config(&self, state: &str) -> AppManagerConfig {
        AppManagerConfig {
            state_dir: self.tmp.path().join(state),
            instance: self.instance(),
            stop_timeout_secs: 0,
            poll_interval_ms: 200,
            extra_labels: run_labels(&self.id),
            ..AppManagerConfig::default()
        }
    }

    fn open(&self, state: &str, host: HostSource) -> AppManager {
        AppManager::open_with_host(self.config(state), self.engine.clone(), host).unwrap()
    }

    fn volume(&self, app: &str, source: &str) -> String {
        let name = odac_host::names::volume_name(&self.instance(), app, source);
        self.volumes.lock().unwrap().push(name.clone());
        name
    }

    /// Containers of this run (any app).
    async fn containers(&self) -> Vec<ContainerSummary> {
        run_containers(self.real.as_ref(), &self.id).await
    }

    async fn cleanup(&self) {
        remove_run_objects(self.real.as_ref(), &self.id, false).await;
        let volumes = self.volumes.lock().unwrap().clone();
        for v in volumes {
            let _ = self.real.remove_volume(&v).await;
        }
    }

    /// A character device like /dev/null, owned by group `gid`, in this run's temp dir.
    fn mknod(&self, name: &str, gid: u32) -> PathBuf {
        let path = self.tmp.path().join(name);
        let ok = std::process::Command::new("mknod")
            .arg(&path)
            .args(["c", "1", "3"])
            .status()
            .unwrap()
            .success();
        assert!(ok, "mknod {} (the tests run as root)", path.display());
        std::os::unix::fs::chown(&path, None, Some(gid)).unwrap();
        path
    }

    /// Wait until the container's logs contain `needle` (bounded).
    async fn logs_with(&self, id: &str, needle: &str) -> String {
        logs_with(self.real.as_ref(), id, needle, 50).await
    }
}

/// Run a test body against the real engine; clean up afterwards, then re-raise any failure.
async fn with_engine<F, Fut>(test: &str, body: F)
where
    F: FnOnce(&'static Run) -> Fut,
    Fut: Future<Output = ()>,
{
    let make = |real: DockerEngine, id| {
        let real = Arc::new(real);
        Run {
            id,
            real: real.clone(),
            engine: Arc::new(TestEngine {
                current: RwLock::new(real),
                creates: Mutex::new(Vec::new()),
            }),
            tmp: tempfile::tempdir().unwrap(),
            volumes: Mutex::new(Vec::new()),
        }
    };
    with_run(test, make, |run| run.cleanup(), body).await;
}

fn gpu(json: &str) -> Option<GpuRequest> {
    Some(serde_json::from_str(json).unwrap())
}

fn app(name: &str, gpu_json: Option<&str>, script: &str) -> AppSpec {
    let mut spec = AppSpec::new(name, BUSYBOX_TEST_IMAGE);
    spec.command = vec!["sh".into(), "-c".into(), script.into()];
    spec.gpu = gpu_json.and_then(gpu);
    spec
}

fn sleeper(name: &str, gpu_json: Option<&str>) -> AppSpec {
    app(name, gpu_json, "sleep 3600")
}

use crate::appmgr_support::desired;

use crate::appmgr_support::status;

/// An Intel host whose GPUs' render nodes are the given device nodes (no card nodes).
fn intel_host(nodes: &[(PathBuf, u32)]) -> HostSource {
    let mut host = scan(&fixture("intel-i915-igpu"));
    let template = host.gpus[0].clone();
    host.gpus.clear();
    for (i, (path, gid)) in nodes.iter().enumerate() {
        let mut g = template.clone();
        g.index = u32::try_from(i).unwrap();
        g.pci_address = Some(format!("0000:00:{:02x}.0", 2 + i));
        g.card = None;
        g.render = Some(DeviceNode {
            path: path.display().to_string(),
            present: true,
            char_device: true,
            gid: Some(*gid),
            mode: Some(0o660),
        });
        host.gpus.push(g);
    }
    HostSource::Fixed(Arc::new(move || host.clone()))
}

/// Acceptance 1: the fixture host's render node was seen by pre-flight but does not exist on
/// this machine, so the real engine refuses it at start: one CPU container, engine fallback.
#[tokio::test]
async fn a1_engine_refusal_falls_back_to_cpu_with_one_container() {
    with_engine("a1", |run| async move {
        let m = run.open("state", HostSource::Root(fixture("intel-i915-igpu")));
        m.set_desired(desired(
            1,
            vec![sleeper(
                "vid",
                Some(r#"{"runtime":"intel","optional":true}"#),
            )],
        ))
        .await
        .unwrap();
        let s = m.reconcile_once().await.remove(0);
        assert_eq!(s.state, AppState::Running, "{s:?}");
        let fb = s.gpu.fallback.clone().unwrap();
        assert_eq!(
            (fb.tier, fb.reason),
            (FallbackTier::Engine, Reason::EngineRejected)
        );
        let detail = fb.detail.unwrap();
        assert!(
            detail.contains("error gathering device information while adding custom device")
                && detail.contains("/dev/dri/"),
            "engine's words: {detail}"
        );
        assert_eq!(s.gpu.attached, None);
        let mine = run.containers().await;
        assert_eq!(mine.len(), 1, "exactly one container: {mine:?}");
        let details = run.real.inspect(&mine[0].id).await.unwrap();
        assert!(details.running && details.devices.is_empty());
        assert_eq!(run.engine.creates().len(), 2, "gpu try, then cpu");
    })
    .await;
}

/// Acceptance 2: optional GPU on this GPU-less host: no device request reaches the engine.
#[tokio::test]
async fn a2_optional_gpu_on_this_host_runs_on_cpu_after_preflight() {
    with_engine("a2", |run| async move {
        let m = run.open("state", HostSource::Root("/".into()));
        let intent = r#"{"runtime":"nvidia","count":1,"optional":true}"#;
        m.set_desired(desired(1, vec![sleeper("llm", Some(intent))]))
            .await
            .unwrap();
        let s = m.reconcile_once().await.remove(0);
        assert_eq!(s.state, AppState::Running, "{s:?}");
        let fb = s.gpu.fallback.clone().unwrap();
        assert_eq!(
            (fb.tier, fb.reason),
            (FallbackTier::Preflight, Reason::NoDevice)
        );
        assert_eq!(s.gpu.requested, gpu(intent));
        let creates = run.engine.creates();
        assert_eq!(creates.len(), 1);
        assert!(creates[0].device_requests.is_empty() && creates[0].devices.is_empty());
        let details = run
            .real
            .inspect(s.container_id.as_deref().unwrap())
            .await
            .unwrap();
        assert!(details.device_requests.is_empty() && details.devices.is_empty());
    })
    .await;
}

/// Acceptance 3: required GPU on this host: failed, nothing created, no churn.
#[tokio::test]
async fn a3_required_gpu_on_this_host_fails_without_churn() {
    with_engine("a3", |run| async move {
        let m = run.open("state", HostSource::Root("/".into()));
        m.set_desired(desired(
            1,
            vec![sleeper("llm", Some(r#"{"runtime":"nvidia","count":1}"#))],
        ))
        .await
        .unwrap();
        let first = m.reconcile_once().await;
        for _ in 0..3 {
            assert_eq!(m.reconcile_once().await, first);
        }
        let s = status(&first, "llm");
        assert_eq!(s.state, AppState::Failed);
        assert_eq!(s.gpu.fallback.as_ref().unwrap().reason, Reason::NoDevice);
        assert!(run.engine.creates().is_empty());
        assert!(run.containers().await.is_empty());
    })
    .await;
}

/// Acceptance 4: CDI. This engine's branch is reported; without CDI the inventory says so,
/// no plan picks CDI, and the exact CDI request is checked against the fake engine.
#[tokio::test]
async fn a4_cdi_branch_of_this_engine() {
    with_engine("a4", |run| async move {
        let caps = run.real.capabilities().await;
        let cdi_host = scan(&fixture("nvidia-cdi"));
        if caps.cdi_enabled() {
            println!(
                "a4: engine {:?} has CDI ({:?}): real CDI branch",
                caps.server_version, caps.cdi_spec_dirs
            );
            // A spec exposing /dev/null as /dev/odac-gpu0, in the engine's first spec dir.
            let dir = PathBuf::from(&caps.cdi_spec_dirs[0]);
            std::fs::create_dir_all(&dir).unwrap();
            let spec_path = dir.join(format!("odac-test-{}.json", run.id));
            std::fs::write(
                &spec_path,
                r#"{"cdiVersion":"0.6.0","kind":"odac.test/gpu","devices":[{"name":"gpu0","containerEdits":{"deviceNodes":[{"path":"/dev/odac-gpu0","hostPath":"/dev/null"}]}}]}"#,
            )
            .unwrap();
            let mut spec = ContainerSpec {
                name: format!("{}-cdi", run.instance()),
                image: BUSYBOX_TEST_IMAGE.into(),
                command: Some(vec!["sh".into(), "-c".into(), "ls -l /dev/odac-gpu0; sleep 3600".into()]),
                labels: run.config("x").extra_labels,
                ..ContainerSpec::default()
            };
            spec.device_requests.push(DeviceRequest {
                driver: "cdi".into(),
                device_ids: vec!["odac.test/gpu=gpu0".into()],
                ..DeviceRequest::default()
            });
            let outcome =
                odac_agent::appmgr::start_with_gpu_fallback(run.real.as_ref(), &spec, None).await;
            let _ = std::fs::remove_file(&spec_path);
            let odac_agent::appmgr::StartOutcome::Started { id, fallback: None } = outcome else {
                panic!("cdi start: {outcome:?}")
            };
            let details = run.real.inspect(&id).await.unwrap();
            let attached =
                odac_host::gpu::attached_from(&details, Some(odac_protocol::Vendor::Nvidia))
                    .unwrap();
            assert_eq!(attached.mechanism, Mechanism::Cdi);
            assert!(run.logs_with(&id, "/dev/odac-gpu0").await.contains("/dev/odac-gpu0"));
            return;
        }
        println!(
            "a4: engine {:?} without CDI (spec dirs {:?}): checked CDI unavailable, no CDI plan, exact request on the fake engine",
            caps.server_version, caps.cdi_spec_dirs
        );
        // The inventory of this host (and of the CDI fixture's tree with this engine) reports
        // CDI unavailable, and no plan picks CDI.
        for host in [scan(Path::new("/")), cdi_host] {
            let a = Assessment::new(host, caps.clone());
            let inv = a.inventory();
            assert!(inv.engine.cdi_spec_dirs.is_empty() && inv.engine.cdi_devices.is_empty());
            assert!(inv.accelerators.values().all(|v| v.mechanism != Some(Mechanism::Cdi)));
            for intent in [r#"{"runtime":"nvidia","count":1}"#, r#"{"optional":true}"#] {
                let plan = resolve(&gpu(intent).unwrap(), &a, &Allocations::new());
                if let Plan::Attach(att) = &plan {
                    assert_ne!(att.mechanism, Mechanism::Cdi, "{plan:?}");
                }
            }
        }
        // The exact request, against a fake engine that has CDI.
        let fake = Arc::new(FakeEngine::new());
        fake.set_capabilities(
            engine_from_info_file(&fixture("nvidia-cdi").join("docker-info.json")).unwrap(),
        );
        fake.add_image(BUSYBOX_TEST_IMAGE);
        let m = AppManager::open(run.config("fake"), fake.clone(), fixture("nvidia-cdi")).unwrap();
        m.set_desired(desired(1, vec![sleeper("llm", Some(r#"{"runtime":"nvidia","count":1}"#))]))
            .await
            .unwrap();
        let s = m.reconcile_once().await.remove(0);
        let created = fake.spec_of(s.container_id.as_deref().unwrap()).unwrap();
        assert_eq!(
            created.device_requests,
            vec![DeviceRequest {
                driver: "cdi".into(),
                count: None,
                device_ids: vec!["example.com/device=0".into()],
                capabilities: vec![],
                options: BTreeMap::new(),
            }]
        );
        assert_eq!(s.gpu.attached.unwrap().mechanism, Mechanism::Cdi);
    })
    .await;
}

/// Acceptance 5: a device node made with mknod, passed as a render node with GroupAdd.
#[tokio::test]
async fn a5_device_node_attach_with_group_add() {
    with_engine("a5", |run| async move {
        let node = run.mknod("renderD128", 4242);
        let m = run.open("state", intel_host(&[(node.clone(), 4242)]));
        let script = format!(
            "ls -ln {}; echo groups: $(id -G); sleep 3600",
            node.display()
        );
        m.set_desired(desired(
            1,
            vec![app(
                "vid",
                Some(r#"{"runtime":"intel","count":1}"#),
                &script,
            )],
        ))
        .await
        .unwrap();
        let s = m.reconcile_once().await.remove(0);
        assert_eq!(s.state, AppState::Running, "{s:?}");
        assert_eq!(s.gpu.fallback, None);
        let a = s.gpu.attached.clone().unwrap();
        assert_eq!(a.mechanism, Mechanism::DeviceNodes);
        assert_eq!(a.devices, vec![node.display().to_string()]);
        let id = s.container_id.unwrap();
        let details = run.real.inspect(&id).await.unwrap();
        assert_eq!(details.group_add, vec!["4242"]);
        let logs = run.logs_with(&id, "groups:").await;
        assert!(logs.starts_with("crw"), "a char device inside: {logs}");
        assert!(logs.contains(" 4242 ") && logs.contains("1,   3"), "{logs}");
        assert!(
            logs.lines()
                .any(|l| l.starts_with("groups:") && l.contains("4242")),
            "{logs}"
        );
    })
    .await;
}

/// Acceptance 6: two apps with count 1 on a 2-GPU host get different GPUs.
#[tokio::test]
async fn a6_two_apps_get_different_gpus() {
    with_engine("a6", |run| async move {
        let nodes = [
            (run.mknod("renderD128", 4242), 4242),
            (run.mknod("renderD129", 4242), 4242),
        ];
        let m = run.open("state", intel_host(&nodes));
        let g = Some(r#"{"runtime":"intel","count":1}"#);
        m.set_desired(desired(1, vec![sleeper("a", g), sleeper("b", g)]))
            .await
            .unwrap();
        let statuses = m.reconcile_once().await;
        let a = status(&statuses, "a").gpu.attached.clone().unwrap().devices;
        let b = status(&statuses, "b").gpu.attached.clone().unwrap().devices;
        assert_eq!((a.len(), b.len()), (1, 1));
        assert_ne!(a, b, "different gpus");
        assert!(statuses.iter().all(|s| s.state == AppState::Running));
    })
    .await;
}

/// Acceptance 7: a GPU-intent change leaves the running container alone with
/// restart_required; a new restart token recreates it with the new binding.
#[tokio::test]
async fn a7_gpu_change_needs_a_restart_token() {
    with_engine("a7", |run| async move {
        let nodes = [
            (run.mknod("renderD128", 4242), 4242),
            (run.mknod("renderD129", 4242), 4242),
        ];
        let m = run.open("state", intel_host(&nodes));
        let mut spec = sleeper("llm", Some(r#"{"runtime":"intel","count":1}"#));
        m.set_desired(desired(1, vec![spec.clone()])).await.unwrap();
        let first = m.reconcile_once().await.remove(0);
        let id = first.container_id.clone().unwrap();
        let started = run.real.inspect(&id).await.unwrap().started_at;
        assert_eq!(first.gpu.attached.as_ref().unwrap().devices.len(), 1);

        spec.gpu = gpu(r#"{"runtime":"intel","count":2}"#);
        m.set_desired(desired(2, vec![spec.clone()])).await.unwrap();
        let changed = m.reconcile_once().await.remove(0);
        assert!(changed.restart_required);
        assert_eq!(changed.state, AppState::Running);
        assert_eq!(changed.container_id.as_deref(), Some(id.as_str()));
        let details = run.real.inspect(&id).await.unwrap();
        assert!(
            details.running && details.started_at == started,
            "untouched"
        );
        assert_eq!(changed.gpu.attached, first.gpu.attached);

        spec.restart_token = Some("r1".into());
        m.set_desired(desired(3, vec![spec])).await.unwrap();
        let recreated = m.reconcile_once().await.remove(0);
        assert!(!recreated.restart_required);
        assert_ne!(recreated.container_id.as_deref(), Some(id.as_str()));
        assert_eq!(
            recreated.gpu.attached.unwrap().devices.len(),
            2,
            "new binding"
        );
        assert_eq!(run.containers().await.len(), 1);
    })
    .await;
}

/// Acceptance 8: the agent goes away and comes back: nothing recreated, state intact.
#[tokio::test]
async fn a8_agent_restart_recreates_nothing() {
    with_engine("a8", |run| async move {
        let host = || HostSource::Root("/".into());
        let before = {
            let m = run.open("state", host());
            m.set_desired(desired(7, vec![sleeper("web", None), sleeper("db", None)]))
                .await
                .unwrap();
            m.reconcile_once().await
            // The manager is dropped here without any shutdown, as on a kill.
        };
        let creates = run.engine.creates().len();
        let m = run.open("state", host());
        assert_eq!(m.generation(), Some(7));
        assert_eq!(m.desired().unwrap().apps.len(), 2);
        let after = m.reconcile_once().await;
        assert_eq!(
            run.engine.creates().len(),
            creates,
            "no container recreated"
        );
        for (b, a) in before.iter().zip(after.iter()) {
            assert_eq!(a.container_id, b.container_id);
            assert_eq!(a.state, AppState::Running);
        }
    })
    .await;
}

/// Acceptance 9: an app that exits at once is restarted on the backoff, state crash_loop.
#[tokio::test]
async fn a9_crash_loop_backoff_on_the_real_engine() {
    with_engine("a9", |run| async move {
        let m = run.open("state", HostSource::Root("/".into()));
        let shutdown = tokio_util::sync::CancellationToken::new();
        let task = tokio::spawn(m.clone().run(shutdown.clone()));
        m.set_desired(desired(1, vec![app("crash", None, "exit 3")]))
            .await
            .unwrap();
        // Restarts follow the backoff: the first 1 s after the exit is seen, the second 2 s
        // after the next exit, so the second cannot come before 3 s; the third needs 4 s more.
        let t0 = Instant::now();
        let mut events = m.subscribe();
        let deadline = t0 + Duration::from_secs(20);
        while m.statuses().first().is_none_or(|s| s.restart_count < 2) {
            assert!(
                Instant::now() < deadline,
                "no second restart: {:?}",
                m.statuses()
            );
            let _ = tokio::time::timeout(Duration::from_millis(500), events.recv()).await;
        }
        let second = t0.elapsed();
        assert!(
            second >= Duration::from_secs(3),
            "second restart after {second:?}"
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
        shutdown.cancel();
        task.await.unwrap();
        let s = m.statuses().remove(0);
        assert_eq!(s.restart_count, 2, "no third restart within 2 s: {s:?}");
        assert!(
            matches!(s.state, AppState::CrashLoop | AppState::Running),
            "{s:?}"
        );
        assert_eq!(s.last_exit_code, Some(3));
        assert_eq!(run.engine.creates().len(), 1, "restarted, never recreated");
        let s = m.reconcile_once().await.remove(0);
        assert_eq!(s.state, AppState::CrashLoop, "{s:?}");
    })
    .await;
}

/// Acceptance 10: engine socket missing → engine_unavailable, no panic; back → converges.
#[tokio::test]
async fn a10_engine_outage_and_recovery() {
    with_engine("a10", |run| async move {
        let dead: Arc<dyn ContainerEngine> =
            Arc::new(DockerEngine::lazy(Some(MISSING_SOCKET)).unwrap());
        let m = run.open("state", HostSource::Root("/".into()));
        m.set_desired(desired(1, vec![sleeper("web", None)]))
            .await
            .unwrap();
        let before = m.reconcile_once().await.remove(0);
        assert_eq!(before.state, AppState::Running);

        run.engine.switch(dead.clone());
        m.upsert(2, sleeper("db", None)).await.unwrap();
        let statuses = m.reconcile_once().await;
        let web = status(&statuses, "web");
        assert_eq!(web.state, AppState::Running, "last state kept");
        assert!(
            web.last_error
                .as_deref()
                .unwrap()
                .starts_with("engine_unavailable: "),
            "{web:?}"
        );
        assert_eq!(status(&statuses, "db").state, AppState::Pending);
        assert!(m.engine_problem().is_some());

        run.engine.switch(run.real.clone());
        let statuses = m.reconcile_once().await;
        assert!(
            statuses
                .iter()
                .all(|s| s.state == AppState::Running && s.last_error.is_none()),
            "{statuses:?}"
        );
        assert_eq!(status(&statuses, "web").container_id, before.container_id);
        assert_eq!(run.containers().await.len(), 2);
    })
    .await;
}

/// Acceptance 11: a bind of / is policy_denied with nothing created; a named volume's file
/// survives a restart-token recreation.
#[tokio::test]
async fn a11_policy_and_named_volumes() {
    with_engine("a11", |run| async move {
        let m = run.open("state", HostSource::Root("/".into()));
        let mut bad = sleeper("bad", None);
        bad.volumes.push(VolumeMount {
            source: "/".into(),
            target: "/host".into(),
            read_only: true,
        });
        let mut good = app(
            "good",
            None,
            "if [ -f /data/f ]; then echo found $(cat /data/f); else echo made > /data/f && echo created; fi; sleep 3600",
        );
        good.volumes.push(VolumeMount {
            source: "data".into(),
            target: "/data".into(),
            read_only: false,
        });
        let volume = run.volume("good", "data");
        m.set_desired(desired(1, vec![bad, good.clone()])).await.unwrap();
        let statuses = m.reconcile_once().await;
        let s = status(&statuses, "bad");
        assert_eq!(s.state, AppState::Failed);
        assert_eq!(s.gpu.fallback.as_ref().unwrap().reason, Reason::PolicyDenied);
        assert!(s.last_error.as_deref().unwrap().contains("volumes[0].source"), "{s:?}");
        assert!(run.engine.creates().iter().all(|c| !c.name.ends_with("_bad")));
        assert_eq!(run.containers().await.len(), 1);

        let first = status(&statuses, "good").container_id.clone().unwrap();
        assert!(run.logs_with(&first, "created").await.contains("created"));
        good.restart_token = Some("again".into());
        m.set_desired(desired(2, vec![good])).await.unwrap();
        let s = m.reconcile_once().await;
        let second = status(&s, "good").container_id.clone().unwrap();
        assert_ne!(first, second, "recreated");
        let logs = run.logs_with(&second, "found").await;
        assert!(logs.contains("found made"), "the file survived: {logs}");
        let details = run.real.inspect(&second).await.unwrap();
        assert!(details.binds.iter().any(|b| b.starts_with(&format!("{volume}:"))), "{details:?}");
    })
    .await;
}

/// Injective volume names on the real engine: app `fa` with volume `b-data` and app `fa-b`
/// with volume `data` (one volume `<instance>-fa-b-data` under the earlier scheme) each keep
/// their own data; `fa`'s volume of the earlier scheme is kept, with its data.
#[tokio::test]
async fn volume_names_of_the_colliding_pair_are_distinct_and_old_volumes_kept() {
    with_engine("volpair", |run| async move {
        let instance = run.instance();
        let legacy = container::legacy_volume_name(&instance, "fa", "b-data");
        assert_eq!(
            legacy,
            container::legacy_volume_name(&instance, "fa-b", "data")
        );
        run.volumes.lock().unwrap().push(legacy.clone());
        let fresh = run.volume("fa-b", "data");
        run.volume("fa", "b-data");
        // what the earlier version made for fa, holding fa's data
        let old_labels = BTreeMap::from([
            (odac_host::names::INSTANCE.to_owned(), instance.clone()),
            (odac_host::names::APP.to_owned(), "fa".to_owned()),
        ]);
        run.real.ensure_volume(&legacy, &old_labels).await.unwrap();
        let seed = run
            .real
            .create(&ContainerSpec {
                name: format!("{instance}-seed"),
                image: BUSYBOX_TEST_IMAGE.into(),
                command: Some(vec![
                    "sh".into(),
                    "-c".into(),
                    "echo fa > /data/who && echo seeded".into(),
                ]),
                labels: BTreeMap::from([("odac.test.run".to_owned(), run.id.clone())]),
                binds: vec![Bind {
                    source: legacy.clone(),
                    target: "/data".into(),
                    read_only: false,
                }],
                ..ContainerSpec::default()
            })
            .await
            .unwrap();
        run.real.start(&seed).await.unwrap();
        assert!(
            logs_with(run.real.as_ref(), &seed, "seeded", 5)
                .await
                .contains("seeded")
        );
        run.real.remove(&seed, true).await.unwrap();

        let script = |me: &str| {
            format!(
                "[ -f /data/who ] || echo {me} > /data/who; echo who=$(cat /data/who); sleep 3600"
            )
        };
        let mut fa = app("fa", None, &script("fa"));
        fa.volumes.push(VolumeMount {
            source: "b-data".into(),
            target: "/data".into(),
            read_only: false,
        });
        let mut fa_b = app("fa-b", None, &script("fa-b"));
        fa_b.volumes.push(VolumeMount {
            source: "data".into(),
            target: "/data".into(),
            read_only: false,
        });
        let m = run.open("state", HostSource::Root("/".into()));
        m.set_desired(desired(1, vec![fa, fa_b])).await.unwrap();
        let statuses = m.reconcile_once().await;
        let fa_id = status(&statuses, "fa").container_id.clone().unwrap();
        let fa_b_id = status(&statuses, "fa-b").container_id.clone().unwrap();
        assert!(run.logs_with(&fa_id, "who=").await.contains("who=fa\n"));
        assert!(run.logs_with(&fa_b_id, "who=").await.contains("who=fa-b"));
        let binds = |d: &ContainerDetails| d.binds.join(" ");
        let fa_details = run.real.inspect(&fa_id).await.unwrap();
        assert!(
            binds(&fa_details).starts_with(&format!("{legacy}:")),
            "{fa_details:?}"
        );
        let fa_b_details = run.real.inspect(&fa_b_id).await.unwrap();
        assert!(
            binds(&fa_b_details).starts_with(&format!("{fresh}:")),
            "{fa_b_details:?}"
        );
        assert_eq!(
            fa_b_details.labels[odac_host::names::OWNER],
            m.config().owner
        );
        assert!(
            run.real
                .volume_labels(&odac_host::names::volume_name(&instance, "fa", "b-data"))
                .await
                .unwrap()
                .is_none(),
            "no new volume for fa: it keeps the old one"
        );
        assert_eq!(
            run.real.volume_labels(&fresh).await.unwrap().unwrap()[odac_host::names::OWNER],
            m.config().owner
        );
    })
    .await;
}

/// `odac-agent apply` against a dead socket reports engine_unavailable (exit 1) and creates
/// nothing; `odac-agent status` prints what apply recorded.
#[test]
fn apply_and_status_commands() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("desired.json");
    std::fs::write(
        &file,
        r#"{"generation": 4, "apps": [{"name": "web", "image": "odac/busybox:test", "gpu": {"runtime": "nvidia", "optional": true}}]}"#,
    )
    .unwrap();
    let state = dir.path().join("state");
    let bin = env!("CARGO_BIN_EXE_odac-agent");
    let out = std::process::Command::new(bin)
        .args(["apply", "-f"])
        .arg(&file)
        .arg("--state-dir")
        .arg(&state)
        .args(["--json", "--docker-host", MISSING_SOCKET])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let statuses: Vec<AppStatus> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(statuses.len(), 1);
    assert!(
        statuses[0]
            .last_error
            .as_deref()
            .unwrap()
            .starts_with("engine_unavailable")
    );
    assert_eq!(
        statuses[0].gpu.requested,
        gpu(r#"{"runtime":"nvidia","optional":true}"#)
    );

    let out = std::process::Command::new(bin)
        .args(["status", "--state-dir"])
        .arg(&state)
        .args(["--docker-host", MISSING_SOCKET])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.starts_with("ENGINE  NAME") && table.contains("web") && table.contains("pending"),
        "{table}"
    );
    let notes = String::from_utf8_lossy(&out.stderr);
    assert!(notes.contains("the engine could not be asked"), "{notes}");
    assert!(notes.contains("this record may be stale"), "{notes}");
    // status never creates a state dir: a missing one is an error
    let missing = dir.path().join("never-used");
    let out = std::process::Command::new(bin)
        .args(["status", "--state-dir"])
        .arg(&missing)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("does not exist"));
    assert!(!missing.exists());
    let desired: DesiredState =
        serde_json::from_slice(&std::fs::read(state.join("desired.json")).unwrap()).unwrap();
    assert_eq!(desired.generation, 4);

    std::fs::write(
        &file,
        "{\"generation\": 1, \"apps\": [{\"name\": \"Bad\"}]}",
    )
    .unwrap();
    let out = std::process::Command::new(bin)
        .args(["apply", "-f"])
        .arg(&file)
        .arg("--state-dir")
        .arg(dir.path().join("other"))
        .args(["--docker-host", MISSING_SOCKET])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("apps[0].name"));
}

/// Learned refusals on the real engine: after it refused the fixture's render node once, a
/// second app asking for the same devices on the same inventory goes straight to the CPU
/// (one create, no failed start) and still reports `engine_rejected` with the engine's words.
#[tokio::test]
async fn a12_a_learned_refusal_skips_the_failed_start() {
    with_engine("a12", |run| async move {
        let m = run.open("state", HostSource::Root(fixture("intel-i915-igpu")));
        let opt = Some(r#"{"runtime":"intel","optional":true}"#);
        m.set_desired(desired(1, vec![sleeper("vid", opt)]))
            .await
            .unwrap();
        let first = m.reconcile_once().await.remove(0);
        assert_eq!(first.state, AppState::Running, "{first:?}");
        assert_eq!(run.engine.creates().len(), 2, "gpu try, then cpu");
        let words = first.gpu.fallback.unwrap().detail.unwrap();
        m.set_desired(desired(2, vec![sleeper("vid", opt), sleeper("vid2", opt)]))
            .await
            .unwrap();
        let statuses = m.reconcile_once().await;
        let second = status(&statuses, "vid2");
        assert_eq!(second.state, AppState::Running, "{second:?}");
        let fb = second.gpu.fallback.clone().unwrap();
        assert_eq!(
            (fb.tier, fb.reason),
            (FallbackTier::Engine, Reason::EngineRejected)
        );
        let detail = fb.detail.unwrap();
        assert!(
            detail.starts_with(&words) && detail.contains("(learned "),
            "{detail}"
        );
        let creates = run.engine.creates();
        assert_eq!(creates.len(), 3, "one more create, without devices");
        assert!(creates[2].devices.is_empty());
        assert_eq!(run.containers().await.len(), 2);
    })
    .await;
}
