//! What every real-engine test binary needs before and after its body: the local engine (a
//! missing one fails the test unless the developer opted out with `ODAC_ALLOW_SKIP=1`, which
//! `ODAC_REQUIRE_DOCKER=1` overrides; then a skip line), the busybox test image, a unique
//! per-run suffix for names, cleanup that runs even when the body panics, a bounded wait
//! for a container's logs, one test's own instance (`InstanceRun`), and a test's run label
//! (`odac.test.run`): its labels, its containers, their removal, and a body run with it.

mod instance_run;

pub use instance_run::InstanceRun;

use std::collections::BTreeMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::time::{Duration, Instant};

use futures_util::FutureExt;
use odac_host::engine::test_image::{BUSYBOX_TEST_IMAGE, ensure_busybox_image};
use odac_host::engine::{ContainerEngine, ContainerSummary, DockerEngine, probe_capabilities};

/// Whether the developer opted out of tests whose counterpart is missing: `ODAC_ALLOW_SKIP=1`
/// (and not `ODAC_REQUIRE_DOCKER=1`, which CI sets).
pub fn skip_allowed() -> bool {
    std::env::var("ODAC_ALLOW_SKIP").as_deref() == Ok("1")
        && std::env::var("ODAC_REQUIRE_DOCKER").as_deref() != Ok("1")
}

/// The local engine, or `None` (after printing a skip line) when it is down and the developer
/// opted out with `ODAC_ALLOW_SKIP=1`; else a missing engine fails the test.
pub async fn engine_or_skip(test: &str) -> Option<DockerEngine> {
    let caps = probe_patiently().await;
    if !caps.reachable {
        assert!(
            skip_allowed(),
            "{test} needs a docker engine, which is unreachable ({:?}): start Docker, or set \
             ODAC_ALLOW_SKIP=1 to skip the tests that need it",
            caps.error
        );
        println!("skip {test}: docker engine unreachable: {:?}", caps.error);
        return None;
    }
    Some(DockerEngine::connect(None).await.expect("connect"))
}

/// The local engine's capabilities, asked again (5 times, 2 s apart) while it does not answer:
/// on this shared machine the engine is at times too busy (200 containers starting beside) to
/// answer `GET /info` within the agent's 3 s bound; only one that never answers is missing.
pub async fn probe_patiently() -> odac_host::engine::EngineCapabilities {
    let mut caps = probe_capabilities(None).await;
    for _ in 1..5 {
        if caps.reachable {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_secs(2)).await;
        caps = probe_capabilities(None).await;
    }
    caps
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

/// The labels of a test run's objects: `odac.test=1` and `odac.test.run=<run>`.
pub fn run_labels(run: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("odac.test".to_owned(), "1".to_owned()),
        ("odac.test.run".to_owned(), run.to_owned()),
    ])
}

/// The containers labelled `odac.test.run=<run>`.
pub async fn run_containers(engine: &dyn ContainerEngine, run: &str) -> Vec<ContainerSummary> {
    engine
        .list_by_label(&format!("odac.test.run={run}"))
        .await
        .unwrap()
}

/// Removes the containers labelled `odac.test.run=<run>` and, where `images`, its images.
pub async fn remove_run_objects(engine: &dyn ContainerEngine, run: &str, images: bool) {
    let label = format!("odac.test.run={run}");
    for c in engine.list_by_label(&label).await.unwrap_or_default() {
        let _ = engine.remove(&c.id, true).await;
    }
    if images {
        for i in engine
            .list_images_by_label(&label)
            .await
            .unwrap_or_default()
        {
            let _ = engine.remove_image(&i.id, true).await;
        }
    }
}

/// Runs `body` with the run that `make` builds from the engine with the test image and a run
/// id (`<suffix>-<test>`, `_` made `-`), then `clean_up` of it even when the body panicked;
/// nothing where the developer opted out of a missing engine.
pub async fn with_run<R, Fut, CFut>(
    test: &str,
    make: impl FnOnce(DockerEngine, String) -> R,
    clean_up: impl FnOnce(&'static R) -> CFut,
    body: impl FnOnce(&'static R) -> Fut,
) where
    R: 'static,
    Fut: Future<Output = ()>,
    CFut: Future<Output = ()>,
{
    let Some(engine) = engine_with_test_image(test).await else {
        return;
    };
    let id = format!("{}-{test}", unique_suffix()).replace('_', "-");
    let run: &'static R = Box::leak(Box::new(make(engine, id)));
    then_clean_up(body(run), clean_up(run)).await;
}
