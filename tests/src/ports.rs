//! Free loopback ports: bind `127.0.0.1:0`, read the port the kernel chose, release it. A
//! process started right after can bind it (a small race that loopback tests accept); it is
//! how a restarted simulator gets the same address back.

use std::net::{SocketAddr, TcpListener};

use crate::error::{Error, Result};

/// A loopback port that was free a moment ago.
pub fn free_port() -> Result<u16> {
    let l = TcpListener::bind("127.0.0.1:0")
        .map_err(|e| Error::Other(format!("cannot bind 127.0.0.1:0: {e}")))?;
    l.local_addr()
        .map(|a| a.port())
        .map_err(|e| Error::Other(format!("local address of 127.0.0.1:0: {e}")))
}

/// `127.0.0.1:PORT` of a free port.
pub fn free_addr() -> Result<SocketAddr> {
    Ok(SocketAddr::from(([127, 0, 0, 1], free_port()?)))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_free_port_can_be_bound() {
        let addr = free_addr().unwrap();
        assert_ne!(addr.port(), 0);
        TcpListener::bind(addr).unwrap();
    }
}
