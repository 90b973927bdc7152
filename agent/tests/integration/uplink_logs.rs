//! The token never reaches a log line or an error: everything the uplink logs at trace level
//! through a session, a desired-state change, a dropped session and refused reconnects is
//! captured and searched; the 401 produces a clear line and every reconnect logs its delay.

use crate::uplink_support;

use std::sync::Arc;
use std::time::Duration;

use odac_agent::uplink::{AppControl, LinkEvent, Uplink};
use odac_protocol::{AppSpec, ControlMessage, DesiredStateMessage};
use tokio::sync::watch;
use uplink_support::*;

#[tokio::test(start_paused = true)]
async fn captured_logs_never_contain_the_token() {
    let (capture, _guard) = capture_logs(tracing::Level::TRACE);

    let pki = Pki::new();
    let server = TestServer::start(&pki, Behaviour::default()).await;
    let apps = FakeApps::new();
    let (_inv_tx, inv_rx) = watch::channel(Some(Arc::new(inventory(4))));
    let config = uplink_config(&pki, &server.url(), TOKEN);
    let debug = format!("{config:?}");
    assert!(!debug.contains(TOKEN), "{debug}");
    assert!(debug.contains("<redacted>"));
    let uplink = Uplink::new(config, apps.clone() as Arc<dyn AppControl>, inv_rx);
    let mut link = uplink.link_events();
    let (shutdown, task) = spawn_welcomed(uplink, &server, Duration::from_secs(5)).await;
    server.send_control(&ControlMessage::DesiredState(DesiredStateMessage {
        seq: 1,
        generation: 1,
        apps: vec![AppSpec::new("web", "busybox")],
    }));
    server.send_text("{not json");
    wait_for(&server.log, Duration::from_secs(5), "ack", |l| {
        l.acks() == [1]
    })
    .await;
    // the token is revoked and the session dropped: reconnects are refused with 401
    server.set(|b| {
        b.token = "another-token".into();
        b.close_after = Some(Duration::ZERO);
    });
    server.send_text("{}");
    wait_for(&server.log, Duration::from_secs(900), "two refusals", |l| {
        l.auth_bad >= 2
    })
    .await;
    shutdown.cancel();
    task.await.unwrap();

    let mut errors = Vec::new();
    while let Ok(ev) = link.try_recv() {
        match ev {
            LinkEvent::ConnectFailed { error, .. } => errors.push(error),
            LinkEvent::SessionLost { reason, .. } => errors.push(reason),
            _ => {}
        }
    }
    assert!(!errors.is_empty());
    for e in &errors {
        assert!(!e.contains(TOKEN), "{e}");
    }

    let text = String::from_utf8(capture.0.lock().unwrap().clone()).unwrap();
    assert!(!text.contains(TOKEN), "the token leaked into the logs");
    assert!(
        !text.contains("tok-7Hq2xZ"),
        "part of the token leaked into the logs"
    );
    assert!(text.contains("control plane session established"), "{text}");
    assert!(
        text.contains("refused the agent's token (http 401)"),
        "{text}"
    );
    assert!(
        text.contains("reconnecting to the control plane in"),
        "{text}"
    );
    assert!(text.contains("refused a control-plane frame"), "{text}");
}
