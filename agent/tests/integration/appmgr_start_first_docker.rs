//! `update.order = start_first` against the real Docker engine. The app serves HTTP (busybox
//! `httpd` on port 8080, no host port) and says its version. While version 2 starts beside
//! version 1 under the temporary name and proves itself (3 s), a probe loop from the host
//! reads version 1's page every 100 ms over the local docker bridge, at the container's own
//! address (read with `docker inspect`: the engine trait has no network facts, and probing the
//! page shows serving, which the running state alone would not): it sees no gap until the pass
//! that finds version 2 proven; then version 2 has the app's own name and serves its page. The
//! same app with a host port is refused, the reason naming the port.

use crate::appmgr_support::{set_one, until_real};
use crate::docker_support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use docker_support::{InstanceRun, then_clean_up};
use odac_agent::appmgr::AppManager;
use odac_host::engine::ContainerEngine;
use odac_host::engine::test_image::BUSYBOX_TEST_IMAGE;
use odac_protocol::{
    AppSpec, AppState, AppStatus, PortMapping, RolloutState, UpdateOrder, UpdatePolicy,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn spec(version: &str) -> AppSpec {
    let mut spec = AppSpec::new("web", BUSYBOX_TEST_IMAGE);
    spec.env = [("VERSION".to_owned(), version.to_owned())].into();
    spec.command = vec![
        "sh".into(),
        "-c".into(),
        "mkdir -p /tmp/www && echo \"$VERSION\" > /tmp/www/index.html && exec busybox httpd -f -p 8080 -h /tmp/www".into(),
    ];
    spec.update = Some(UpdatePolicy {
        min_healthy_secs: Some(3),
        order: Some(UpdateOrder::StartFirst),
        ..UpdatePolicy::default()
    });
    spec
}

/// The container's address on the docker bridge.
fn address_of(id: &str) -> String {
    let out = std::process::Command::new("docker")
        .args([
            "inspect",
            "-f",
            "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}",
            id,
        ])
        .output()
        .expect("run docker inspect");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// The page at `ip:8080`, or why not (1 s at most).
async fn page(ip: &str) -> Result<String, String> {
    let get = async {
        let mut s = tokio::net::TcpStream::connect((ip, 8080))
            .await
            .map_err(|e| e.to_string())?;
        s.write_all(b"GET / HTTP/1.0\r\n\r\n")
            .await
            .map_err(|e| e.to_string())?;
        let mut out = String::new();
        s.read_to_string(&mut out)
            .await
            .map_err(|e| e.to_string())?;
        Ok(out)
    };
    tokio::time::timeout(Duration::from_secs(1), get)
        .await
        .map_err(|_| "no answer within 1 s".to_owned())?
}

/// Until the page at `ip` says `version` (30 s at most).
async fn serves(ip: &str, version: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !page(ip).await.is_ok_and(|p| p.contains(version)) {
        assert!(Instant::now() < deadline, "{ip} never served {version}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Reconcile until the status satisfies `done` (60 s at most).
async fn until(m: &AppManager, what: &str, done: impl Fn(&AppStatus) -> bool) -> AppStatus {
    until_real(m, what, Duration::from_secs(60), done).await
}

#[tokio::test]
async fn the_old_container_serves_without_a_gap_until_the_new_one_has_proven_itself() {
    let Some(run) = InstanceRun::new("start_first_probe", "odac-startfirst").await else {
        return;
    };
    let own = format!("{}_web", run.instance);
    then_clean_up(
        async {
            let m = run.open();
            set_one(&m, 1, spec("v1")).await;
            let book = run.tmp.path().join("state/rollouts.json");
            let s = until(&m, "v1 runs and proves itself", |s| {
                s.state == AppState::Running
                    && std::fs::read_to_string(&book).is_ok_and(|t| t.contains("\"good\""))
            })
            .await;
            let old = s.container_id.unwrap();
            let old_ip = address_of(&old);
            serves(&old_ip, "v1").await;

            // the probe loop against the old container
            let stop = Arc::new(AtomicBool::new(false));
            let probe = {
                let (stop, ip) = (stop.clone(), old_ip.clone());
                tokio::spawn(async move {
                    let mut log: Vec<(Instant, Result<(), String>)> = Vec::new();
                    while !stop.load(Ordering::Relaxed) {
                        let got = page(&ip)
                            .await
                            .and_then(|p| if p.contains("v1") { Ok(()) } else { Err(p) });
                        log.push((Instant::now(), got));
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    log
                })
            };
            let started = Instant::now();
            set_one(&m, 2, spec("v2")).await;
            let mut last_pass;
            let mut new = None;
            loop {
                assert!(started.elapsed() < Duration::from_secs(60), "never proven");
                last_pass = Instant::now();
                let s = m.reconcile_once().await.remove(0);
                if s.rollout.is_none() && new.is_some() {
                    assert_eq!(s.container_id, new, "the new one runs on");
                    break;
                }
                if let Some(r) = &s.rollout {
                    assert_eq!(r.state, RolloutState::RollingOut, "{s:?}");
                    new.clone_from(&s.container_id);
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            let proven_after = last_pass.duration_since(started);
            tokio::time::sleep(Duration::from_millis(500)).await;
            stop.store(true, Ordering::Relaxed);
            let log = probe.await.unwrap();
            let before: Vec<_> = log.iter().filter(|(t, _)| *t < last_pass).collect();
            let failed: Vec<_> = before.iter().filter(|(_, r)| r.is_err()).collect();
            println!(
                "hand-over: {} probes of v1 over {:.1} s before the proving pass, {} failed",
                before.len(),
                proven_after.as_secs_f64(),
                failed.len()
            );
            assert!(before.len() >= 20, "the probe ran: {}", before.len());
            assert!(failed.is_empty(), "v1 had a gap: {failed:?}");
            assert!(
                log.iter().any(|(_, r)| r.is_err()),
                "v1 is stopped once v2 has proven itself"
            );
            let new = new.unwrap();
            let d = run.engine.inspect(&new).await.unwrap();
            assert_eq!(d.name, own, "the new container took the app's name");
            assert!(
                run.engine.inspect(&old).await.is_err(),
                "the old one is gone"
            );
            serves(&address_of(&new), "v2").await;
        },
        run.clean_up(),
    )
    .await;
}

#[tokio::test]
async fn start_first_with_a_host_port_is_refused_naming_the_port() {
    let Some(run) = InstanceRun::new("start_first_port", "odac-startfirst").await else {
        return;
    };
    then_clean_up(
        async {
            let m = run.open();
            let mut ported = spec("v1");
            ported.ports = vec![PortMapping {
                container: 8080,
                host: Some(18_080),
                ..PortMapping::default()
            }];
            set_one(&m, 1, ported).await;
            let s = m.reconcile_once().await.remove(0);
            assert_eq!(s.state, AppState::Failed, "{s:?}");
            let error = s.last_error.unwrap_or_default();
            println!("refused: {error}");
            assert!(
                error.contains(
                    "update.order: start_first cannot be used with host port 18080: the old and new container would both bind it"
                ),
                "{error}"
            );
            assert!(s.container_id.is_none());
        },
        run.clean_up(),
    )
    .await;
}
