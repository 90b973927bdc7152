//! The dashboard at `/`: one HTML page with its CSS and JS embedded in the binary
//! (`include_str!`, no build step). The page reads `/api/hosts` and `/api/apps`, listens to
//! `/api/events` (SSE, read with `fetch` so that an `--api-token` given as `#token=T` is sent)
//! for live updates, and drives `PUT …/gpu` and `POST …/restart`; `dashboard/logs.js` is the
//! logs panel (`GET …/logs`, SSE), `dashboard/terminal.js` the terminal panel (an app's shell
//! over `GET …/exec`, a WebSocket, in xterm.js vendored from Debian's node-xterm under
//! `dashboard/vendor/` with its licence; no CDN). Exercised in headless Chromium by
//! `tests/integration/dashboard_browser.rs` and `exec_terminal_browser.rs`.

use std::sync::Arc;

use axum::Router;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;

use crate::state::hub::Hub;

const INDEX: &str = include_str!("dashboard/index.html");
const CSS: &str = include_str!("dashboard/dashboard.css");
const JS: &str = include_str!("dashboard/dashboard.js");
const LOGS_JS: &str = include_str!("dashboard/logs.js");
const GPU_STATS_JS: &str = include_str!("dashboard/gpu_stats.js");
const TERMINAL_JS: &str = include_str!("dashboard/terminal.js");
const XTERM_JS: &str = include_str!("dashboard/vendor/xterm.js");
const XTERM_CSS: &str = include_str!("dashboard/vendor/xterm.css");
const XTERM_LICENSE: &str = include_str!("dashboard/vendor/xterm-LICENSE.txt");

fn asset(content_type: &'static str, body: &'static str) -> impl IntoResponse {
    ([(header::CONTENT_TYPE, content_type)], body)
}

async fn index() -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        INDEX,
    )
}

async fn css() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], CSS)
}

async fn js() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        JS,
    )
}

async fn logs_js() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        LOGS_JS,
    )
}

async fn gpu_stats_js() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        GPU_STATS_JS,
    )
}

/// Routes `/`, `/dashboard.css`, `/dashboard.js`, `/dashboard-logs.js` (the logs panel),
/// `/gpu_stats.js` (live GPU figures), `/dashboard-terminal.js` (the terminal panel) and the
/// vendored xterm.js under `/vendor/` (script, stylesheet, licence).
pub fn routes() -> Router<Arc<Hub>> {
    Router::new()
        .route("/", get(index))
        .route("/dashboard.css", get(css))
        .route("/dashboard.js", get(js))
        .route("/dashboard-logs.js", get(logs_js))
        .route("/gpu_stats.js", get(gpu_stats_js))
        .route(
            "/dashboard-terminal.js",
            get(|| async { asset("text/javascript; charset=utf-8", TERMINAL_JS) }),
        )
        .route(
            "/vendor/xterm.js",
            get(|| async { asset("text/javascript; charset=utf-8", XTERM_JS) }),
        )
        .route(
            "/vendor/xterm.css",
            get(|| async { asset("text/css; charset=utf-8", XTERM_CSS) }),
        )
        .route(
            "/vendor/xterm-LICENSE.txt",
            get(|| async { asset("text/plain; charset=utf-8", XTERM_LICENSE) }),
        )
}
