//! The HTTP/1.1 server loop over [`TlsListener`]: what `axum::serve` does, plus a header-read
//! timeout — a client that does not finish a request's headers within [`HEADER_READ_TIMEOUT`]
//! (a fresh connection that sends nothing, a slow-loris sending a byte now and then, an idle
//! keep-alive connection) is dropped, so such clients cannot pile up. WebSocket upgrades leave
//! the loop as usual. A stop signal stops accepting and shuts every connection down
//! gracefully (requests in flight finish).

use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::sync::watch;

use crate::server::listener::TlsListener;

/// How long a client may take to send a request's headers.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves `app` on `listener` until `stop` resolves, then lets open connections finish.
pub async fn serve(
    mut listener: TlsListener,
    app: Router,
    stop: impl std::future::Future<Output = ()> + Send,
) {
    use axum::serve::Listener as _;
    let (closing_tx, closing_rx) = watch::channel(false);
    tokio::pin!(stop);
    loop {
        let (io, peer) = tokio::select! {
            c = listener.accept() => c,
            () = &mut stop => break,
        };
        let service = TowerToHyperService::new(app.clone());
        let mut closing = closing_rx.clone();
        tokio::spawn(async move {
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT);
            let conn = builder
                .serve_connection(TokioIo::new(io), service)
                .with_upgrades();
            tokio::pin!(conn);
            let result = tokio::select! {
                r = conn.as_mut() => r,
                _ = async { closing.wait_for(|c| *c).await.map(|_| ()) } => {
                    conn.as_mut().graceful_shutdown();
                    conn.await
                }
            };
            if let Err(e) = result {
                tracing::debug!(%peer, error = %e, "connection ended");
            }
            drop(closing);
        });
    }
    drop(listener);
    let _ = closing_tx.send(true);
    // connections hold receivers; wait (bounded by the caller) until they are gone
    closing_tx.closed().await;
}
