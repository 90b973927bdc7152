//! A real `Uplink` running against a [`TestServer`] with its link events subscribed: the
//! setup of the tests that watch how the agent connects (pacing, HTTP contract).

use std::sync::Arc;

use odac_agent::uplink::{AppControl, LinkEvent, Uplink};
use tokio::sync::{broadcast, watch};
use tokio_util::sync::CancellationToken;

use super::{Behaviour, FakeApps, Pki, TestServer, inventory, uplink_config};

/// The server, the uplink's task and what the test reads or stops it with.
pub struct Running {
    pub server: TestServer,
    pub link: broadcast::Receiver<LinkEvent>,
    pub shutdown: CancellationToken,
    pub task: tokio::task::JoinHandle<()>,
    _inv: watch::Sender<Option<Arc<odac_protocol::Inventory>>>,
    _pki: Pki,
}

/// Starts a server behaving as `behaviour` and an uplink presenting `token` to it.
pub async fn run_uplink(behaviour: Behaviour, token: &str) -> Running {
    let pki = Pki::new();
    let server = TestServer::start(&pki, behaviour).await;
    let (inv_tx, inv_rx) = watch::channel(Some(Arc::new(inventory(4))));
    let uplink = Uplink::new(
        uplink_config(&pki, &server.url(), token),
        FakeApps::new() as Arc<dyn AppControl>,
        inv_rx,
    );
    let link = uplink.link_events();
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(uplink.run(shutdown.clone()));
    Running {
        server,
        link,
        shutdown,
        task,
        _inv: inv_tx,
        _pki: pki,
    }
}
