//! [`TcpProxy`]: a loopback TCP proxy the test controls, put between the agent and the
//! control plane. The test cuts the link (connections closed and refused), blackholes it
//! (nothing flows, nothing closes) or restores it, and reads how many connections the agent
//! made — the figure behind "reconnects within the backoff envelope" and "bounded attempts".

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::relay::{LinkState, Relay};

/// How long the proxy waits for the upstream to accept a connection.
const UPSTREAM_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// A TCP proxy on `127.0.0.1:<free port>` in front of `upstream`.
#[derive(Debug)]
pub struct TcpProxy {
    addr: SocketAddr,
    upstream: SocketAddr,
    relay: Arc<Relay>,
}

impl TcpProxy {
    /// Listens on a free loopback port and forwards to `upstream`.
    pub fn start(upstream: SocketAddr) -> Result<TcpProxy> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .map_err(|e| Error::Other(format!("tcp proxy: cannot bind 127.0.0.1:0: {e}")))?;
        let addr = listener
            .local_addr()
            .map_err(|e| Error::Other(format!("tcp proxy: local address: {e}")))?;
        let relay = Arc::new(Relay::default());
        let r = Arc::clone(&relay);
        std::thread::spawn(move || {
            for client in listener.incoming() {
                if r.stopped.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(client) = client else { continue };
                let _ = client.set_nodelay(true);
                r.serve(client, move || {
                    let up = TcpStream::connect_timeout(&upstream, UPSTREAM_CONNECT_TIMEOUT)?;
                    let _ = up.set_nodelay(true);
                    Ok(up)
                });
            }
        });
        Ok(TcpProxy {
            addr,
            upstream,
            relay,
        })
    }

    /// The proxy's listening address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The proxy's port.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Where it forwards to.
    pub fn upstream(&self) -> SocketAddr {
        self.upstream
    }

    /// Closes every live connection and refuses new ones until [`TcpProxy::restore`].
    pub fn cut(&self) {
        self.relay.set(LinkState::Cut);
    }

    /// Stops all traffic without closing anything until [`TcpProxy::restore`].
    pub fn blackhole(&self) {
        self.relay.set(LinkState::Blackhole);
    }

    /// Lets traffic flow again.
    pub fn restore(&self) {
        self.relay.set(LinkState::Up);
    }

    /// The current link state.
    pub fn state(&self) -> LinkState {
        self.relay.state()
    }

    /// Connections accepted so far (every attempt that reached the proxy).
    pub fn accepted(&self) -> usize {
        self.relay.accepted.load(Ordering::SeqCst)
    }

    /// Connections forwarded upstream so far.
    pub fn forwarded(&self) -> usize {
        self.relay.forwarded.load(Ordering::SeqCst)
    }

    /// Connections refused (closed at once) because the link was cut.
    pub fn refused(&self) -> usize {
        self.relay.refused.load(Ordering::SeqCst)
    }

    /// Forwarded connections still open.
    pub fn live(&self) -> usize {
        self.relay.live()
    }

    /// Bytes forwarded from clients to the upstream so far.
    pub fn bytes_up(&self) -> u64 {
        self.relay.bytes_up.load(Ordering::Relaxed)
    }

    /// Bytes forwarded from the upstream to clients so far.
    pub fn bytes_down(&self) -> u64 {
        self.relay.bytes_down.load(Ordering::Relaxed)
    }
}

impl Drop for TcpProxy {
    fn drop(&mut self) {
        self.relay.stop();
        // wake the accept loop so it sees the stop flag
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_millis(200));
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::poll::poll;
    use std::io::{Read, Write};

    /// An upstream that answers every line with "echo: <line>".
    fn echo_server() -> SocketAddr {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        std::thread::spawn(move || {
            for s in l.incoming() {
                let Ok(mut s) = s else { continue };
                std::thread::spawn(move || {
                    let mut buf = [0u8; 1024];
                    loop {
                        match s.read(&mut buf) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => {
                                if s.write_all(&buf[..n]).is_err() {
                                    return;
                                }
                            }
                        }
                    }
                });
            }
        });
        addr
    }

    fn roundtrip(s: &mut TcpStream, msg: &[u8]) -> std::io::Result<Vec<u8>> {
        s.write_all(msg)?;
        let mut got = vec![0u8; msg.len()];
        s.read_exact(&mut got)?;
        Ok(got)
    }

    fn connect(p: &TcpProxy) -> TcpStream {
        let s = TcpStream::connect(p.addr()).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s
    }

    #[test]
    fn forwards_and_counts() {
        let p = TcpProxy::start(echo_server()).unwrap();
        let mut a = connect(&p);
        let mut b = connect(&p);
        assert_eq!(roundtrip(&mut a, b"hello").unwrap(), b"hello");
        assert_eq!(roundtrip(&mut b, b"world").unwrap(), b"world");
        assert_eq!(p.accepted(), 2);
        assert_eq!(p.forwarded(), 2);
        assert_eq!(p.live(), 2);
        assert_eq!(p.refused(), 0);
        poll(
            "the bytes to be counted",
            Duration::from_secs(5),
            || match (p.bytes_up(), p.bytes_down()) {
                (10, 10) => Ok(()),
                other => Err(format!("{other:?}")),
            },
        )
        .unwrap();
    }

    #[test]
    fn cut_closes_live_connections_and_refuses_new_ones_until_restored() {
        let p = TcpProxy::start(echo_server()).unwrap();
        let mut a = connect(&p);
        assert_eq!(roundtrip(&mut a, b"x").unwrap(), b"x");
        p.cut();
        assert_eq!(p.state(), LinkState::Cut);
        // the live connection is closed: EOF or reset
        assert!(roundtrip(&mut a, b"y").is_err());
        // a new one is accepted and closed at once
        let mut b = connect(&p);
        assert!(roundtrip(&mut b, b"z").is_err());
        poll("the refusal to be counted", Duration::from_secs(5), || {
            if p.refused() == 1 {
                Ok(())
            } else {
                Err(format!("refused={}", p.refused()))
            }
        })
        .unwrap();
        p.restore();
        let mut c = connect(&p);
        assert_eq!(roundtrip(&mut c, b"again").unwrap(), b"again");
        assert_eq!(p.accepted(), 3);
        assert_eq!(p.forwarded(), 2);
    }

    #[test]
    fn blackhole_holds_bytes_and_delivers_them_after_restore() {
        let p = TcpProxy::start(echo_server()).unwrap();
        let mut a = connect(&p);
        assert_eq!(roundtrip(&mut a, b"1").unwrap(), b"1");
        p.blackhole();
        a.set_read_timeout(Some(Duration::from_millis(400)))
            .unwrap();
        a.write_all(b"held").unwrap();
        let mut buf = [0u8; 4];
        let err = a.read_exact(&mut buf).unwrap_err();
        assert!(
            matches!(
                err.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ),
            "{err}"
        );
        // a new connection hangs instead of being refused
        let mut b = connect(&p);
        b.set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        b.write_all(b"late").unwrap();
        assert!(b.read_exact(&mut buf).is_err());
        assert_eq!(p.forwarded(), 1);
        p.restore();
        a.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        a.read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"held", "nothing lost across the blackhole");
        b.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        b.read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"late");
        assert_eq!(p.forwarded(), 2);
    }

    #[test]
    fn unreachable_upstream_is_refused() {
        let dead = {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap()
        };
        let p = TcpProxy::start(dead).unwrap();
        let mut a = connect(&p);
        assert!(roundtrip(&mut a, b"x").is_err());
        poll("the refusal", Duration::from_secs(5), || {
            if p.refused() == 1 {
                Ok(())
            } else {
                Err(format!("refused={}", p.refused()))
            }
        })
        .unwrap();
    }
}
