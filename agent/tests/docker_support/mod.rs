//! What every real-engine test binary needs before and after its body: the local engine (or a
//! skip line, or a failure under `ODAC_REQUIRE_DOCKER=1`), the busybox test image, a unique
//! per-run suffix for names, cleanup that runs even when the body panics, and a bounded wait
//! for a container's logs.
#![allow(dead_code, clippy::expect_used)]

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::time::{Duration, Instant};

use futures_util::FutureExt;
use odac_agent::engine::test_image::{BUSYBOX_TEST_IMAGE, ensure_busybox_image};
use odac_agent::engine::{ContainerEngine, DockerEngine, probe_capabilities};

/// The local engine, or `None` (after printing a skip line) when it is down and not required.
pub async fn engine_or_skip(test: &str) -> Option<DockerEngine> {
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

/// [`engine_or_skip`] with the busybox test image imported.
pub async fn engine_with_test_image(test: &str) -> Option<DockerEngine> {
    let engine = engine_or_skip(test).await?;
    ensure_busybox_image(&engine, BUSYBOX_TEST_IMAGE)
        .await
        .expect("import busybox test image");
    Some(engine)
}

/// A hex suffix unique to this process and moment, for container and volume names.
pub fn unique_suffix() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or_default();
    format!("{:x}{nanos:x}", std::process::id() % 4096)
}

/// Runs `body`, then `cleanup` whatever happened, then re-raises a panic of the body.
pub async fn then_clean_up(body: impl Future<Output = ()>, cleanup: impl Future<Output = ()>) {
    let outcome = AssertUnwindSafe(body).catch_unwind().await;
    cleanup.await;
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
}

/// The last `lines` of the container's logs once they contain `needle`, or after 10 s.
pub async fn logs_with(
    engine: &dyn ContainerEngine,
    id: &str,
    needle: &str,
    lines: usize,
) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let logs = engine.logs_tail(id, lines).await.unwrap_or_default();
        if logs.contains(needle) || Instant::now() > deadline {
            return logs;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
