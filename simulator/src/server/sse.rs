//! `GET /api/events`: Server-Sent Events. The stream opens with a `hello` event, then carries
//! every fleet change as it happens: `host`, `app`, `app_deleted`, `event` and `faults`, each
//! with a JSON payload; `resync` tells a client that fell behind to reload everything.

use std::convert::Infallible;
use std::sync::Arc;

use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::Stream;
use futures_util::stream::{self, StreamExt};
use tokio::sync::broadcast::error::RecvError;

use crate::state::hub::Hub;

/// The SSE handler.
pub async fn events(
    State(hub): State<Arc<Hub>>,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let rx = hub.subscribe_events();
    let hello = Event::default().event("hello").data("{}");
    let changes = stream::unfold(rx, |mut rx| async move {
        let ev = match rx.recv().await {
            Ok(ev) => Event::default()
                .event(ev.kind)
                .data(serde_json::to_string(&ev.data).unwrap_or_else(|_| "null".to_owned())),
            Err(RecvError::Lagged(_)) => Event::default().event("resync").data("{}"),
            Err(RecvError::Closed) => return None,
        };
        Some((Ok(ev), rx))
    });
    let stream = stream::once(async { Ok(hello) })
        .chain(changes)
        .take_until(hub.closed());
    Sse::new(stream).keep_alive(KeepAlive::default())
}
