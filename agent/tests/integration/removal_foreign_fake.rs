//! Removal beside a foreign container, against the fake engine (PROTOCOL.md 4.4): an app
//! whose container name is held by another agent's container (same instance, another
//! `odac.owner`) still gets its one `removed` status once it leaves the desired state, since
//! only this agent's containers count, and the other agent's container is left running.

use std::path::Path;
use std::sync::Arc;

use odac_agent::appmgr::AppManager;
use odac_host::engine::{ContainerEngine, FakeEngine};
use odac_protocol::{AppSpec, AppState, AppStatus, DesiredState};
use tokio::sync::broadcast;

const IMAGE: &str = "odac/busybox:test";
const ME: &str = "agent-me";

fn open(fake: &Arc<FakeEngine>, dir: &Path) -> AppManager {
    crate::appmgr_support::open_as(fake, dir, ME)
}

fn app(name: &str) -> AppSpec {
    crate::appmgr_support::sleeper(name, IMAGE)
}

/// A running container of instance `odac`, app `app`, named `name`, owned by `owner`.
async fn planted(fake: &FakeEngine, name: &str, app: &str, owner: Option<&str>) -> String {
    crate::appmgr_support::planted(fake, IMAGE, name, app, owner).await
}

/// The `removed` statuses broadcast so far.
fn removed(rx: &mut broadcast::Receiver<std::sync::Arc<AppStatus>>) -> Vec<AppStatus> {
    let mut out = Vec::new();
    while let Ok(s) = rx.try_recv() {
        if s.state == AppState::Removed {
            out.push(std::sync::Arc::unwrap_or_clone(s));
        }
    }
    out
}

#[tokio::test]
async fn another_agents_container_does_not_hold_back_removed() {
    let dir = tempfile::tempdir().unwrap();
    let fake = crate::appmgr_support::fake_with_images(&[IMAGE]);
    let theirs = planted(&fake, "odac_web", "web", Some("agent-other")).await;
    let m = open(&fake, dir.path());
    let mut rx = m.subscribe();
    m.set_desired(DesiredState {
        generation: 1,
        apps: vec![app("web")],
    })
    .await
    .unwrap();
    m.reconcile_once().await;
    m.delete(2, "web").await.unwrap();
    m.reconcile_once().await;
    let gone = removed(&mut rx);
    assert_eq!(gone.len(), 1, "{gone:?}");
    assert_eq!((gone[0].name.as_str(), gone[0].generation), ("web", 2));
    let details = fake.inspect(&theirs).await.unwrap();
    assert!(details.running, "the other agent's container is left alone");
    m.reconcile_once().await;
    assert!(removed(&mut rx).is_empty(), "removed is sent once");
}
