//! The HTTP side of the connection contract (PROTOCOL.md section 1), against an in-process TLS
//! control plane in paused time: a 503 or 429 with `Retry-After` is waited out (at least that
//! long, whatever the backoff drew), without it the normal backoff applies; an upgrade whose
//! subprotocol was not selected fails and is retried with backoff, not in a tight loop.

use crate::uplink_support;

use std::time::Duration;

use odac_agent::uplink::LinkEvent;
use tokio::sync::broadcast;
use uplink_support::*;

/// An uplink to a control plane that behaves as the default one, changed by `change`.
async fn run(change: impl FnOnce(&mut Behaviour)) -> Running {
    let mut behaviour = Behaviour::default();
    change(&mut behaviour);
    run_uplink(behaviour, TOKEN).await
}

/// Stops the uplink and waits for its task to end.
async fn stop(r: Running) {
    r.shutdown.cancel();
    r.task.await.unwrap();
}

/// The next failure and the backoff that follows it.
async fn next_failure(link: &mut broadcast::Receiver<LinkEvent>) -> (String, Duration) {
    let mut error = None;
    loop {
        match link.recv().await.unwrap() {
            LinkEvent::ConnectFailed { error: e, .. } => error = Some(e),
            LinkEvent::BackingOff(d) => return (error.unwrap_or_default(), d.delay),
            _ => {}
        }
    }
}

async fn retry_after_is_waited_out(status: u16) {
    let mut r = run(|b| {
        b.reject_status = Some(status);
        b.retry_after = Some("120".into());
    })
    .await;
    for _ in 0..3 {
        let (error, delay) = next_failure(&mut r.link).await;
        assert!(error.contains(&format!("http {status}")), "{error}");
        assert!(error.contains("retry after 120s"), "{error}");
        assert!(delay >= Duration::from_secs(120), "{delay:?}");
    }
    let accepts = r.server.snapshot().accepts;
    assert!(accepts.len() >= 3);
    for pair in accepts.windows(2) {
        assert!(
            pair[1] - pair[0] >= Duration::from_secs(120),
            "attempts {:?} apart",
            pair[1] - pair[0]
        );
    }
    stop(r).await;
}

#[tokio::test(start_paused = true)]
async fn a_503_with_retry_after_is_waited_out() {
    retry_after_is_waited_out(503).await;
}

#[tokio::test(start_paused = true)]
async fn a_429_with_retry_after_is_waited_out() {
    retry_after_is_waited_out(429).await;
}

#[tokio::test(start_paused = true)]
async fn without_retry_after_the_backoff_applies() {
    let mut r = run(|b| b.reject_status = Some(503)).await;
    let (error, delay) = next_failure(&mut r.link).await;
    assert!(!error.contains("retry after"), "{error}");
    assert!(
        delay <= Duration::from_secs(1),
        "first backoff is at most 1 s: {delay:?}"
    );
    stop(r).await;
}

#[tokio::test(start_paused = true)]
async fn an_unselected_subprotocol_fails_the_upgrade_and_backs_off() {
    let mut r = run(|b| b.select_subprotocol = false).await;
    let mut delays = Vec::new();
    for _ in 0..4 {
        let (error, delay) = next_failure(&mut r.link).await;
        assert!(error.contains("subprotocol odac.agent.v1"), "{error}");
        delays.push(delay);
    }
    let log = r.server.snapshot();
    assert!(
        log.hellos().is_empty(),
        "no hello over an unagreed protocol"
    );
    assert!(log.welcomed.is_empty());
    // backed off, not a tight loop: 4 attempts took as long as the delays drawn
    let span = *log.accepts.last().unwrap() - log.accepts[0];
    assert!(span >= delays[..log.accepts.len() - 1].iter().sum::<Duration>());
    stop(r).await;
}

#[tokio::test(start_paused = true)]
async fn an_invalid_welcome_is_answered_and_the_agent_reconnects_after_the_welcome_timeout() {
    let mut r = run(|b| b.welcome = false).await;
    wait_for(&r.server.log, Duration::from_secs(5), "hello", |l| {
        !l.hellos().is_empty()
    })
    .await;
    r.server
        .send_text(r#"{"type":"welcome","host_id":"h","heartbeat_secs":0}"#);
    wait_for(&r.server.log, Duration::from_secs(5), "error", |l| {
        !l.errors().is_empty()
    })
    .await;
    let e = r.server.snapshot().errors()[0].clone();
    assert_eq!(e.code, odac_protocol::ErrorCode::Invalid);
    assert!(e.message.starts_with("heartbeat_secs: "), "{}", e.message);
    let (error, _) = next_failure(&mut r.link).await;
    assert!(error.is_empty() || error.contains("welcome"), "{error}");
    let log = r.server.snapshot();
    assert_eq!(log.accepts.len(), 1, "the agent waited for a valid welcome");
    wait_for(&r.server.log, Duration::from_secs(120), "reconnect", |l| {
        l.accepts.len() >= 2
    })
    .await;
    let log = r.server.snapshot();
    assert!(log.accepts[1] - log.accepts[0] >= Duration::from_secs(10));
    stop(r).await;
}
