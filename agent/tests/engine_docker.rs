//! Real-engine tests of the Docker implementation of the engine seam: capabilities, the
//! container lifecycle, device mappings and the engine's refusals, and outage handling. They
//! need the local Docker engine: when it is unreachable they fail under
//! `ODAC_REQUIRE_DOCKER=1` and are skipped otherwise. Every object they create carries the
//! label `odac.test=1` and is removed at the end.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use odac_agent::engine::{DockerEngine, EngineCapabilities, probe_capabilities};

/// The local engine, or `None` (after printing a skip line) when it is down and not required.
async fn engine_or_skip(test: &str) -> Option<DockerEngine> {
    let caps = probe_capabilities(None).await;
    if !caps.reachable {
        assert!(
            std::env::var("ODAC_REQUIRE_DOCKER").as_deref() != Ok("1"),
            "docker engine required (ODAC_REQUIRE_DOCKER=1) but unreachable: {:?}",
            caps.error
        );
        println!("skip {test}: docker engine unreachable: {:?}", caps.error);
        return None;
    }
    Some(DockerEngine::connect(None).await.expect("connect"))
}

#[tokio::test]
async fn capabilities_of_the_local_engine() {
    let Some(engine) = engine_or_skip("capabilities_of_the_local_engine").await else {
        return;
    };
    let caps: EngineCapabilities = engine.probe().await;
    assert!(caps.reachable, "{caps:?}");
    assert!(caps.error.is_none());
    let version = caps.server_version.clone().unwrap_or_default();
    assert!(caps.server_major().is_some(), "server version {version:?}");
    let api = caps.api_version.clone().unwrap_or_default();
    assert!(api.starts_with("1."), "api version {api:?}");
    assert!(caps.has_runtime("runc"), "runtimes {:?}", caps.runtimes);
    assert!(caps.default_runtime.is_some());
    if version.starts_with("20.10.") {
        // The engine of this project's machines: API 1.41, no CDI.
        assert_eq!(api, "1.41");
        assert!(!caps.cdi_enabled());
        assert!(caps.cdi_spec_dirs.is_empty());
    }
    println!(
        "engine {version}, api {api}, runtimes {:?}, cdi {}",
        caps.runtimes,
        caps.cdi_enabled()
    );
}

#[tokio::test]
async fn missing_socket_is_unavailable_and_probe_unreachable() {
    let started = std::time::Instant::now();
    let caps = probe_capabilities(Some("unix:///nonexistent/odac-test/docker.sock")).await;
    assert!(!caps.reachable);
    assert!(
        caps.error
            .as_deref()
            .unwrap_or("")
            .contains("/nonexistent/odac-test/docker.sock")
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
}
