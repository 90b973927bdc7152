//! The byte relay behind both test proxies ([`crate::tcp_proxy`], [`crate::unix_proxy`]):
//! every accepted client gets its own upstream connection and two pump threads. The test
//! switches the link between three states:
//! - [`LinkState::Up`]: bytes flow;
//! - [`LinkState::Cut`]: live connections are closed (the peers see a reset or EOF) and new
//!   ones are accepted and closed at once, like a host whose route is gone;
//! - [`LinkState::Blackhole`]: nothing is closed, nothing flows, new connections hang — a
//!   partition where packets are dropped silently. Held bytes are delivered, none lost, when
//!   the link comes back up, as TCP retransmission would.
//!
//! The relay counts connections (accepted, forwarded upstream, refused while cut) and the
//! bytes it forwarded each way (client → upstream, upstream → client).

use odac_host::lock::lock;
use std::io::{ErrorKind, Read, Write};
use std::net::Shutdown;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// How often a pump re-checks the link state while its peer is silent.
const READ_TICK: Duration = Duration::from_millis(100);

/// The state of a proxied link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkState {
    /// Bytes flow.
    Up,
    /// Connections are closed and refused.
    Cut,
    /// Connections stay open but nothing flows.
    Blackhole,
}

/// A connected stream the relay can pump (TCP or Unix).
pub(crate) trait Conn: Read + Write + Send + Sized + 'static {
    /// Another handle on the same connection.
    fn try_clone_conn(&self) -> std::io::Result<Self>;
    /// Shuts the connection down in `how`.
    fn shutdown_conn(&self, how: Shutdown);
    /// Sets the read timeout.
    fn set_read_tick(&self, tick: Option<Duration>);
}

/// [`Conn`] for stream types whose own methods have these names (TCP and Unix sockets).
macro_rules! conn_for_stream {
    ($($stream:ty),*) => {$(
        impl Conn for $stream {
            fn try_clone_conn(&self) -> std::io::Result<Self> {
                self.try_clone()
            }
            fn shutdown_conn(&self, how: Shutdown) {
                let _ = self.shutdown(how);
            }
            fn set_read_tick(&self, tick: Option<Duration>) {
                let _ = self.set_read_timeout(tick);
            }
        }
    )*};
}

conn_for_stream!(std::net::TcpStream, std::os::unix::net::UnixStream);

type Closer = Box<dyn Fn() + Send>;

/// Link state, live connections and counters shared by a proxy's threads.
#[derive(Default)]
pub(crate) struct Relay {
    state: Mutex<Option<LinkState>>,
    changed: Condvar,
    live: Mutex<Vec<(u64, Closer)>>,
    next_id: AtomicU64,
    pub(crate) accepted: AtomicUsize,
    pub(crate) forwarded: AtomicUsize,
    pub(crate) refused: AtomicUsize,
    pub(crate) bytes_up: AtomicU64,
    pub(crate) bytes_down: AtomicU64,
    /// HTTP/1.1 requests seen going up (request lines), for links that carry HTTP.
    pub(crate) requests_up: AtomicUsize,
    pub(crate) stopped: AtomicBool,
}

/// Opaque (`Relay { .. }`): its state is read through the proxy, never under a debug print.
impl std::fmt::Debug for Relay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Relay").finish_non_exhaustive()
    }
}

impl Relay {
    /// The current link state.
    pub(crate) fn state(&self) -> LinkState {
        lock(&self.state).unwrap_or(LinkState::Up)
    }

    /// Switches the link; [`LinkState::Cut`] closes every live connection.
    pub(crate) fn set(&self, next: LinkState) {
        *lock(&self.state) = Some(next);
        self.changed.notify_all();
        if next == LinkState::Cut {
            self.close_all();
        }
    }

    /// Stops the relay: closes everything and wakes every waiting thread.
    pub(crate) fn stop(&self) {
        self.stopped.store(true, Ordering::SeqCst);
        self.set(LinkState::Cut);
    }

    fn close_all(&self) {
        let live = std::mem::take(&mut *lock(&self.live));
        for (_, close) in live {
            close();
        }
    }

    /// Live (forwarded, not yet finished) connections.
    pub(crate) fn live(&self) -> usize {
        lock(&self.live).len()
    }

    /// Blocks while the link is blackholed; returns the state it left in.
    fn wait_while_blackholed(&self) -> LinkState {
        let mut g = lock(&self.state);
        loop {
            let s = g.unwrap_or(LinkState::Up);
            if s != LinkState::Blackhole || self.stopped.load(Ordering::SeqCst) {
                return if self.stopped.load(Ordering::SeqCst) {
                    LinkState::Cut
                } else {
                    s
                };
            }
            g = match self.changed.wait_timeout(g, READ_TICK) {
                Ok((g, _)) => g,
                Err(p) => p.into_inner().0,
            };
        }
    }

    fn register(&self, close: Closer) -> u64 {
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        lock(&self.live).push((id, close));
        id
    }

    fn unregister(&self, id: u64) {
        lock(&self.live).retain(|(i, _)| *i != id);
    }

    /// Takes over an accepted client: waits out a blackhole, then refuses it (cut) or
    /// connects it upstream and pumps both ways on their own threads.
    pub(crate) fn serve<C: Conn>(
        self: &Arc<Self>,
        client: C,
        connect: impl FnOnce() -> std::io::Result<C> + Send + 'static,
    ) {
        self.accepted.fetch_add(1, Ordering::SeqCst);
        let relay = Arc::clone(self);
        std::thread::spawn(move || relay.connect_and_pump(client, connect));
    }

    fn connect_and_pump<C: Conn>(
        self: Arc<Self>,
        client: C,
        connect: impl FnOnce() -> std::io::Result<C>,
    ) {
        if self.wait_while_blackholed() == LinkState::Cut {
            self.refused.fetch_add(1, Ordering::SeqCst);
            client.shutdown_conn(Shutdown::Both);
            return;
        }
        let Ok(upstream) = connect() else {
            self.refused.fetch_add(1, Ordering::SeqCst);
            client.shutdown_conn(Shutdown::Both);
            return;
        };
        let (Ok(c2), Ok(u2), Ok(c3), Ok(u3)) = (
            client.try_clone_conn(),
            upstream.try_clone_conn(),
            client.try_clone_conn(),
            upstream.try_clone_conn(),
        ) else {
            client.shutdown_conn(Shutdown::Both);
            upstream.shutdown_conn(Shutdown::Both);
            return;
        };
        self.forwarded.fetch_add(1, Ordering::SeqCst);
        let id = self.register(Box::new(move || {
            c3.shutdown_conn(Shutdown::Both);
            u3.shutdown_conn(Shutdown::Both);
        }));
        // a cut that raced with this connection must still close it
        if self.state() == LinkState::Cut {
            client.shutdown_conn(Shutdown::Both);
            upstream.shutdown_conn(Shutdown::Both);
        }
        let relay = Arc::clone(&self);
        let up = std::thread::spawn(move || {
            relay.pump_counting(client, u2, &relay.bytes_up, Some(&relay.requests_up));
        });
        self.pump(upstream, c2, &self.bytes_down);
        let _ = up.join();
        self.unregister(id);
    }

    /// Copies `src` to `dst` until EOF, an error, or a cut; holds bytes while blackholed;
    /// adds what it wrote to `counted`.
    fn pump<C: Conn>(&self, src: C, dst: C, counted: &AtomicU64) {
        self.pump_counting(src, dst, counted, None);
    }

    /// [`Self::pump`], counting HTTP/1.1 request lines in `requests` when given (the last
    /// bytes of a read are kept so a request line split across reads counts once).
    fn pump_counting<C: Conn>(
        &self,
        mut src: C,
        mut dst: C,
        counted: &AtomicU64,
        requests: Option<&AtomicUsize>,
    ) {
        const REQUEST_LINE_END: &[u8] = b" HTTP/1.1\r\n";
        let mut carry: Vec<u8> = Vec::new();
        src.set_read_tick(Some(READ_TICK));
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            if self.stopped.load(Ordering::SeqCst) || self.state() == LinkState::Cut {
                break;
            }
            match src.read(&mut buf) {
                Ok(0) => {
                    dst.shutdown_conn(Shutdown::Write);
                    return;
                }
                Ok(n) => {
                    if self.wait_while_blackholed() == LinkState::Cut {
                        break;
                    }
                    if dst.write_all(&buf[..n]).is_err() {
                        break;
                    }
                    counted.fetch_add(n as u64, Ordering::Relaxed);
                    if let Some(requests) = requests {
                        carry.extend_from_slice(&buf[..n]);
                        let found = carry
                            .windows(REQUEST_LINE_END.len())
                            .filter(|w| *w == REQUEST_LINE_END)
                            .count();
                        requests.fetch_add(found, Ordering::Relaxed);
                        let keep = REQUEST_LINE_END.len() - 1;
                        let cut = carry.len().saturating_sub(keep);
                        carry.drain(..cut);
                    }
                }
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    if self.state() == LinkState::Blackhole {
                        // hold the line: do not read more while nothing may flow
                        if self.wait_while_blackholed() == LinkState::Cut {
                            break;
                        }
                    }
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        src.shutdown_conn(Shutdown::Both);
        dst.shutdown_conn(Shutdown::Both);
    }
}
