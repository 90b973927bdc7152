//! [`UnixProxy`]: a unix-socket proxy in front of the Docker engine's socket
//! (`/var/run/docker.sock`). The agent is pointed at the proxy (`docker.host =
//! "unix://…"`); cutting it makes the engine unreachable for the agent alone — the test's
//! own `docker` calls still go to the real socket — which is how `engine_unavailable` is
//! provoked without stopping the engine the rest of the machine uses.

use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::error::{Error, Result};
use crate::relay::{LinkState, Relay};

/// The default Docker engine socket.
pub const DOCKER_SOCKET: &str = "/var/run/docker.sock";

/// A unix-socket proxy listening at a path, forwarding to another socket.
pub struct UnixProxy {
    path: PathBuf,
    upstream: PathBuf,
    relay: Arc<Relay>,
}

impl std::fmt::Debug for UnixProxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UnixProxy")
            .field("path", &self.path)
            .field("upstream", &self.upstream)
            .finish()
    }
}

impl UnixProxy {
    /// Listens at `path` (which must not exist) and forwards to `upstream`.
    pub fn start(path: &Path, upstream: &Path) -> Result<UnixProxy> {
        let listener = UnixListener::bind(path).map_err(|e| Error::io("bind", path, e))?;
        let relay = Arc::new(Relay::default());
        let r = Arc::clone(&relay);
        let up = upstream.to_owned();
        std::thread::spawn(move || {
            for client in listener.incoming() {
                if r.stopped.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(client) = client else { continue };
                let up = up.clone();
                r.serve(client, move || UnixStream::connect(&up));
            }
        });
        Ok(UnixProxy {
            path: path.to_owned(),
            upstream: upstream.to_owned(),
            relay,
        })
    }

    /// Starts a proxy at `dir/docker.sock` in front of the engine's socket (`DOCKER_HOST`
    /// when it is a `unix://` URL, else [`DOCKER_SOCKET`]).
    pub fn docker(dir: &Path) -> Result<UnixProxy> {
        let upstream = std::env::var("DOCKER_HOST")
            .ok()
            .and_then(|h| h.strip_prefix("unix://").map(PathBuf::from))
            .unwrap_or_else(|| PathBuf::from(DOCKER_SOCKET));
        UnixProxy::start(&dir.join("docker.sock"), &upstream)
    }

    /// The socket path to connect to.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `unix://PATH`, as Docker clients take it.
    pub fn url(&self) -> String {
        format!("unix://{}", self.path.display())
    }

    /// Closes every live connection and refuses new ones until [`UnixProxy::restore`].
    pub fn cut(&self) {
        self.relay.set(LinkState::Cut);
    }

    /// Lets traffic flow again.
    pub fn restore(&self) {
        self.relay.set(LinkState::Up);
    }

    /// HTTP requests (request lines) the client side sent so far, over every connection.
    pub fn requests(&self) -> usize {
        self.relay.requests_up.load(Ordering::SeqCst)
    }

    /// Connections accepted so far.
    pub fn accepted(&self) -> usize {
        self.relay.accepted.load(Ordering::SeqCst)
    }

    /// Connections refused because the link was cut.
    pub fn refused(&self) -> usize {
        self.relay.refused.load(Ordering::SeqCst)
    }
}

impl Drop for UnixProxy {
    fn drop(&mut self) {
        self.relay.stop();
        let _ = UnixStream::connect(&self.path);
        let _ = std::fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::io::{Read, Write};
    use std::time::Duration;

    fn echo_socket(path: &Path) {
        let l = UnixListener::bind(path).unwrap();
        std::thread::spawn(move || {
            for s in l.incoming() {
                let Ok(mut s) = s else { continue };
                std::thread::spawn(move || {
                    let mut buf = [0u8; 256];
                    while let Ok(n) = s.read(&mut buf) {
                        if n == 0 || s.write_all(&buf[..n]).is_err() {
                            return;
                        }
                    }
                });
            }
        });
    }

    fn roundtrip(path: &Path, msg: &[u8]) -> std::io::Result<Vec<u8>> {
        let mut s = UnixStream::connect(path)?;
        s.set_read_timeout(Some(Duration::from_secs(5)))?;
        s.write_all(msg)?;
        let mut got = vec![0u8; msg.len()];
        s.read_exact(&mut got)?;
        Ok(got)
    }

    #[test]
    fn forwards_cuts_and_restores() {
        let dir = tempfile::tempdir().unwrap();
        let upstream = dir.path().join("up.sock");
        echo_socket(&upstream);
        let p = UnixProxy::start(&dir.path().join("proxy.sock"), &upstream).unwrap();
        assert_eq!(
            p.url(),
            format!("unix://{}", dir.path().join("proxy.sock").display())
        );
        assert_eq!(roundtrip(p.path(), b"ping").unwrap(), b"ping");
        p.cut();
        assert!(roundtrip(p.path(), b"ping").is_err());
        p.restore();
        assert_eq!(roundtrip(p.path(), b"pong").unwrap(), b"pong");
        assert_eq!(p.accepted(), 3);
        assert_eq!(p.refused(), 1);
        let path = p.path().to_owned();
        drop(p);
        assert!(!path.exists(), "the socket file is removed on drop");
    }
}
