//! The `/metrics` endpoint: HTTP/1.1 (hyper) on a TCP address or a unix socket. Only `GET`
//! (and `HEAD`) of `/metrics` is served (404 for any other path, 405 for another method);
//! the Prometheus text format by default, OpenMetrics when the `Accept` header asks for it.
//! It never holds up the agent: each connection is its own task, at most
//! [`MAX_CONNECTIONS`] at once (more are closed at once), one request per connection, each
//! bounded by [`CONNECTION_BOUND`]; a scrape only reads the metrics' shared state under short
//! locks.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{ACCEPT, ALLOW, CONTENT_TYPE, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use super::config::{LISTEN_KEY, Listen};
use super::registry::MetricsRegistry;

/// Most connections served at once.
pub const MAX_CONNECTIONS: usize = 8;
/// Longest one connection may last, request and answer.
pub const CONNECTION_BOUND: Duration = Duration::from_secs(10);

/// Why the endpoint cannot listen (a configuration error: exit 78).
#[derive(Debug, thiserror::Error)]
#[error("{key}: cannot listen on {listen}: {source}", key = LISTEN_KEY)]
pub struct BindError {
    /// Where it tried.
    pub listen: String,
    /// What the system said.
    #[source]
    pub source: std::io::Error,
}

/// A bound endpoint.
#[derive(Debug)]
pub enum MetricsListener {
    /// On TCP.
    Tcp(TcpListener),
    /// On a unix socket.
    Unix(UnixListener),
}

impl MetricsListener {
    /// Binds `listen`. A unix socket file left by an earlier run (nobody accepts on it) is
    /// replaced; one in use, or any other file, is an error.
    pub async fn bind(listen: &Listen) -> Result<MetricsListener, BindError> {
        let err = |source| BindError {
            listen: listen.to_string(),
            source,
        };
        match listen {
            Listen::Tcp(addr) => TcpListener::bind(addr)
                .await
                .map(MetricsListener::Tcp)
                .map_err(err),
            Listen::Unix(path) => {
                use std::os::unix::fs::FileTypeExt;
                if let Ok(meta) = std::fs::symlink_metadata(path) {
                    let stale = meta.file_type().is_socket()
                        && std::os::unix::net::UnixStream::connect(path).is_err();
                    if !stale {
                        return Err(err(std::io::Error::new(
                            std::io::ErrorKind::AddrInUse,
                            "the path exists and is not a stale socket",
                        )));
                    }
                    std::fs::remove_file(path).map_err(err)?;
                }
                UnixListener::bind(path)
                    .map(MetricsListener::Unix)
                    .map_err(err)
            }
        }
    }

    /// The TCP address bound (tests bind port 0).
    pub fn local_addr(&self) -> Option<std::net::SocketAddr> {
        match self {
            MetricsListener::Tcp(l) => l.local_addr().ok(),
            MetricsListener::Unix(_) => None,
        }
    }
}

/// Serves `registry` on `listener` until `shutdown`.
pub async fn serve(
    listener: MetricsListener,
    registry: Arc<MetricsRegistry>,
    shutdown: CancellationToken,
) {
    let permits = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let accepted = tokio::select! {
            () = shutdown.cancelled() => return,
            a = accept(&listener) => a,
        };
        let io = match accepted {
            Ok(io) => io,
            Err(e) => {
                tracing::debug!("metrics endpoint: accept failed: {e}");
                // e.g. out of file descriptors: do not spin
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        // over the bound the connection is dropped (closed) at once
        let Ok(permit) = Arc::clone(&permits).try_acquire_owned() else {
            continue;
        };
        let registry = Arc::clone(&registry);
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                let registry = Arc::clone(&registry);
                async move { Ok::<_, Infallible>(answer(&req, &registry)) }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .keep_alive(false)
                .serve_connection(io, service);
            tokio::select! {
                () = shutdown.cancelled() => {}
                r = tokio::time::timeout(CONNECTION_BOUND, conn) => {
                    if let Ok(Err(e)) = r {
                        tracing::debug!("metrics endpoint: {e}");
                    }
                }
            }
            drop(permit);
        });
    }
}

/// A connection of either kind.
trait Io: AsyncRead + AsyncWrite + Unpin + Send + 'static {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send + 'static> Io for T {}

async fn accept(listener: &MetricsListener) -> std::io::Result<TokioIo<Box<dyn Io>>> {
    let io: Box<dyn Io> = match listener {
        MetricsListener::Tcp(l) => Box::new(l.accept().await?.0),
        MetricsListener::Unix(l) => Box::new(l.accept().await?.0),
    };
    Ok(TokioIo::new(io))
}

/// The answer to one request.
pub fn answer(req: &Request<Incoming>, registry: &MetricsRegistry) -> Response<Full<Bytes>> {
    let accept = req
        .headers()
        .get(ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    respond(req.method(), req.uri().path(), accept, registry)
}

fn respond(
    method: &Method,
    path: &str,
    accept: &str,
    registry: &MetricsRegistry,
) -> Response<Full<Bytes>> {
    if path != "/metrics" {
        return plain(
            StatusCode::NOT_FOUND,
            "not found: only /metrics is served\n",
        );
    }
    if method != Method::GET && method != Method::HEAD {
        let mut r = plain(StatusCode::METHOD_NOT_ALLOWED, "only GET is allowed\n");
        r.headers_mut()
            .insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
        return r;
    }
    let openmetrics = accept.contains("application/openmetrics-text");
    match registry.encode(openmetrics) {
        Ok((body, content_type)) => {
            let mut r = Response::new(Full::new(Bytes::from(body)));
            r.headers_mut()
                .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
            r
        }
        Err(e) => plain(
            StatusCode::INTERNAL_SERVER_ERROR,
            &format!("cannot encode the metrics: {e}\n"),
        ),
    }
}

fn plain(status: StatusCode, text: &str) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(text.to_owned())));
    *r.status_mut() = status;
    r.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}
