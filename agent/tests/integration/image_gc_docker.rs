//! Image clean-up against the real Docker engine, with images built locally from a `file://`
//! git repository (no registry; each image's repository `odac/<app>-<run>` is this test's
//! own, and every image carries the test's run label). An app moves from image A to image B;
//! once the rollout has settled, A is removed after the (test-shortened, 3 s) delay with an
//! `image_removed` event. An image pulled by hand (the busybox test image tagged under this
//! run's name, as `docker tag` would) and another instance's built image, unused, survive.
//! Then, with two more versions (C, D) and the low-disk threshold set above the data root's
//! free space, the unused images go at once, B before C (oldest unused first), and D, in use,
//! stays.

use crate::docker_support;
use crate::git_source_support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use docker_support::{
    engine_with_test_image, remove_run_objects, run_labels, then_clean_up, unique_suffix,
};
use git_source_support::{Repo, git_app, until};
use odac_agent::appmgr::{AppEvent, AppManager, AppManagerConfig, BuildConfig, RemovalReason};
use odac_host::engine::test_image::BUSYBOX_TEST_IMAGE;
use odac_host::engine::{ContainerEngine, DockerEngine};
use odac_protocol::{AppSpec, AppState, AppStatus, DesiredState, UpdatePolicy};
use tokio::sync::broadcast::Receiver;

const BUILD_WAIT: Duration = Duration::from_secs(180);

struct Run {
    run: String,
    short: String,
    engine: Arc<DockerEngine>,
    tmp: tempfile::TempDir,
}

impl Run {
    fn config(&self, instance: &str, delay: u64, min_free_mb: u64) -> AppManagerConfig {
        AppManagerConfig {
            state_dir: self.tmp.path().join(instance).join("state"),
            lock_dir: self.tmp.path().join(instance).join("locks"),
            instance: format!("odac-{instance}{}", self.short),
            stop_timeout_secs: 0,
            image_gc_delay_secs: delay,
            image_gc_min_free_mb: min_free_mb,
            build: BuildConfig {
                keep_images: 10,
                ..BuildConfig::default()
            },
            extra_labels: run_labels(&self.run),
            ..AppManagerConfig::default()
        }
    }

    fn open(&self, config: AppManagerConfig) -> AppManager {
        let host =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/hosts/no-gpu");
        AppManager::open(config, self.engine.clone(), host).unwrap()
    }

    fn hand_tag(&self) -> String {
        format!("odac/gc-hand-{}:1", self.short)
    }

    async fn clean_up(&self) {
        remove_run_objects(self.engine.as_ref(), &self.run, true).await;
        // the hand tag only: the busybox test image it names stays
        let _ = self.engine.remove_image(&self.hand_tag(), false).await;
    }
}

fn dockerfile(version: &str) -> Vec<(&'static str, String)> {
    vec![
        (
            "Dockerfile",
            format!(
                "FROM {BUSYBOX_TEST_IMAGE}\nCOPY version /version\nCMD [\"sh\", \"-c\", \"cat /version; exec sleep 3600\"]\n"
            ),
        ),
        ("version", format!("{version}\n")),
    ]
}

fn app(name: &str, url: &str, token: &str) -> AppSpec {
    let mut spec = git_app(name, url, Some("main"));
    spec.restart_token = Some(token.to_owned());
    spec.update = Some(UpdatePolicy {
        min_healthy_secs: Some(1),
        ..UpdatePolicy::default()
    });
    spec
}

/// Commit `version`, ask for it, wait until it runs and its rollout settled; its image id.
async fn version(m: &AppManager, repo: &Repo, name: &str, generation: u64) -> String {
    let files = dockerfile(&format!("v{generation}"));
    let files: Vec<(&str, &str)> = files.iter().map(|(p, t)| (*p, t.as_str())).collect();
    let commit = repo.commit("main", &files, &format!("v{generation}"));
    m.set_desired(DesiredState {
        generation,
        apps: vec![app(name, &repo.url(), &format!("t{generation}"))],
    })
    .await
    .unwrap();
    let s = until(m, name, BUILD_WAIT, |s: &AppStatus| {
        s.state == AppState::Running
            && s.commit.as_deref() == Some(commit.as_str())
            && s.rollout.is_none()
            && s.running_generation.is_none()
    })
    .await;
    s.image_id.expect("an image id")
}

fn removals(rx: &mut Receiver<AppEvent>) -> Vec<(String, RemovalReason, u64)> {
    let mut out = Vec::new();
    while let Ok(e) = rx.try_recv() {
        if let Some(r) = e.image_removed {
            out.push((r.image, r.reason, r.bytes));
        }
    }
    out
}

async fn exists(engine: &DockerEngine, image: &str) -> bool {
    engine.image_exists(image).await.unwrap()
}

#[tokio::test]
async fn unused_images_go_after_the_delay_and_on_low_disk_and_nothing_else() {
    let Some(engine) = engine_with_test_image("image_gc").await else {
        return;
    };
    let short = unique_suffix();
    let run = Run {
        run: format!("gc-{short}"),
        short: short.clone(),
        engine: Arc::new(engine),
        tmp: tempfile::tempdir().unwrap(),
    };
    then_clean_up(
        async {
            let repo = Repo::new(&run.tmp.path().join("repo"));
            let web = format!("web-{short}");
            // another instance builds its own image, then its container goes
            let other = run.open(run.config("gco", 86_400, 0));
            let o_id = version(&other, &repo, &format!("tool-{short}"), 1).await;
            drop(other);
            let filter = format!("odac.instance=odac-gco{short}");
            for c in run.engine.list_by_label(&filter).await.unwrap() {
                run.engine.remove(&c.id, true).await.unwrap();
            }
            // an image pulled by hand
            let out = std::process::Command::new("docker")
                .args(["tag", BUSYBOX_TEST_IMAGE, &run.hand_tag()])
                .output()
                .unwrap();
            assert!(out.status.success(), "{out:?}");

            let m = run.open(run.config("gc", 3, 0));
            let mut rx = m.subscribe_events();
            let a = version(&m, &repo, &web, 2).await;
            let b = version(&m, &repo, &web, 3).await;
            assert_ne!(a, b);
            let settled = Instant::now();
            let deadline = settled + Duration::from_secs(60);
            while exists(&run.engine, &a).await {
                assert!(Instant::now() < deadline, "image A was never removed");
                m.reconcile_once().await;
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            let took = settled.elapsed();
            println!(
                "image A removed {:.1} s after the rollout to B settled (delay 3 s)",
                took.as_secs_f64()
            );
            assert!(
                took >= Duration::from_secs(3),
                "not before the delay: {took:?}"
            );
            let got = removals(&mut rx);
            assert_eq!(got.len(), 1, "{got:?}");
            assert_eq!(
                (got[0].0.as_str(), got[0].1),
                (a.as_str(), RemovalReason::Delay)
            );
            println!("{} bytes came back", got[0].2);
            assert!(got[0].2 > 0);
            // ten more seconds: nothing else of anyone's goes
            for _ in 0..50 {
                m.reconcile_once().await;
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            assert!(removals(&mut rx).is_empty());
            assert!(exists(&run.engine, &b).await, "B runs");
            assert!(
                exists(&run.engine, &o_id).await,
                "another instance's image stays"
            );
            assert!(
                exists(&run.engine, &run.hand_tag()).await,
                "a hand-pulled image stays"
            );
            drop(m);

            // two more versions, kept by a long delay; then a low-disk threshold above the
            // data root's free space
            let m = run.open(run.config("gc", 86_400, 0));
            let c = version(&m, &repo, &web, 4).await;
            let d = version(&m, &repo, &web, 5).await;
            drop(m);
            let m = run.open(run.config("gc", 86_400, 1 << 30));
            let mut rx = m.subscribe_events();
            let s = until(&m, &web, Duration::from_secs(30), |s| {
                s.state == AppState::Running
            })
            .await;
            assert_eq!(s.image_id.as_deref(), Some(d.as_str()));
            let got: Vec<(String, RemovalReason)> = removals(&mut rx)
                .into_iter()
                .map(|(i, r, _)| (i, r))
                .collect();
            assert_eq!(
                got,
                vec![
                    (b.clone(), RemovalReason::LowDisk),
                    (c.clone(), RemovalReason::LowDisk)
                ],
                "oldest unused first"
            );
            assert!(!exists(&run.engine, &b).await && !exists(&run.engine, &c).await);
            assert!(exists(&run.engine, &d).await, "in use: kept");
            assert!(
                exists(&run.engine, &o_id).await,
                "another instance's image stays"
            );
            assert!(
                exists(&run.engine, &run.hand_tag()).await,
                "a hand-pulled image stays"
            );
        },
        run.clean_up(),
    )
    .await;
}
