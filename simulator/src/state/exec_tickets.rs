//! Exec sessions waiting for their agent. A viewer's request opens one: a session id, a
//! one-time ticket (random, 32 bytes, hex) bound to that session, the app, the host's agent id
//! and an expiry, and the principal who asked. Only the ticket's SHA-256 is kept. The agent's
//! exec upgrade claims the ticket once: a ticket that is unknown, already used (a replay),
//! expired, or presented by another agent is refused, and the reason names which. A claimed
//! ticket hands the agent's socket to the waiting viewer; an `exec_refused` from the agent
//! ends the wait with the agent's reason.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::extract::ws::WebSocket;
use odac_protocol::{ExecRefused, Ticket};
use tokio::sync::oneshot;

use crate::state::model::hash_secret;
use odac_host::lock::lock;

/// How long a ticket is good for when the hub names no other bound.
pub const DEFAULT_TICKET_TTL: Duration = Duration::from_secs(30);

/// What the waiting viewer gets: the agent's socket, or its refusal.
#[derive(Debug)]
pub enum Handoff {
    /// The agent dialed in with the ticket.
    Socket(Box<WebSocket>),
    /// The agent refused the session on the main link.
    Refused(ExecRefused),
}

struct Pending {
    session_id: String,
    host: String,
    expires: Instant,
    to_viewer: Option<oneshot::Sender<Handoff>>,
}

/// Why a ticket was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TicketRefusal {
    /// No such ticket was ever issued.
    #[error("unknown exec ticket")]
    Unknown,
    /// It was used before.
    #[error("exec ticket already used (a ticket is good for one session, once)")]
    Replayed,
    /// It expired.
    #[error("exec ticket expired")]
    Expired,
    /// Another agent presented it.
    #[error("exec ticket was issued to another agent")]
    WrongAgent,
    /// The viewer went away.
    #[error("the viewer of this exec session went away")]
    Gone,
}

#[derive(Default)]
struct Inner {
    /// Open tickets by their hash.
    pending: HashMap<String, Pending>,
    /// Used or expired tickets by their hash (to tell a replay from an unknown ticket).
    spent: HashMap<String, Instant>,
}

/// The exec sessions of a hub.
#[derive(Default)]
pub struct ExecTickets {
    inner: Mutex<Inner>,
}

fn random_hex(bytes: usize) -> String {
    use ring::rand::SecureRandom;
    let mut buf = vec![0u8; bytes];
    // the system RNG does not fail on Linux; a zeroed buffer would still be one-time-checked
    let _ = ring::rand::SystemRandom::new().fill(&mut buf);
    hex::encode(buf)
}

impl ExecTickets {
    /// Opens a session on `host` (an agent id) valid for `ttl`: its id, its ticket and where
    /// the agent's socket (or refusal) will arrive.
    pub fn open(&self, host: &str, ttl: Duration) -> (String, Ticket, oneshot::Receiver<Handoff>) {
        let session_id = format!("exec_{}", random_hex(8));
        let ticket = Ticket(random_hex(32));
        let (tx, rx) = oneshot::channel();
        let now = Instant::now();
        let mut inner = lock(&self.inner);
        inner
            .spent
            .retain(|_, at| now.duration_since(*at) < Duration::from_secs(3600));
        inner.pending.insert(
            hash_secret(&ticket.0),
            Pending {
                session_id: session_id.clone(),
                host: host.to_owned(),
                expires: now + ttl,
                to_viewer: Some(tx),
            },
        );
        (session_id, ticket, rx)
    }

    /// Claims `ticket` for `agent_id`; on success the caller hands its socket over with the
    /// sender returned, for session `session_id`.
    pub fn claim(
        &self,
        ticket: &str,
        agent_id: &str,
    ) -> Result<(String, oneshot::Sender<Handoff>), TicketRefusal> {
        let key = hash_secret(ticket);
        let now = Instant::now();
        let mut inner = lock(&self.inner);
        if inner.spent.contains_key(&key) {
            return Err(TicketRefusal::Replayed);
        }
        let Some(p) = inner.pending.get(&key) else {
            return Err(TicketRefusal::Unknown);
        };
        if p.host != agent_id {
            return Err(TicketRefusal::WrongAgent);
        }
        let Some(mut p) = inner.pending.remove(&key) else {
            return Err(TicketRefusal::Unknown);
        };
        inner.spent.insert(key, now);
        if now >= p.expires {
            return Err(TicketRefusal::Expired);
        }
        let tx = p.to_viewer.take().ok_or(TicketRefusal::Gone)?;
        Ok((p.session_id, tx))
    }

    /// The agent refused a session: its viewer is told, its ticket spent.
    pub fn refused(&self, host: &str, refusal: ExecRefused) {
        let mut inner = lock(&self.inner);
        let key = inner
            .pending
            .iter()
            .find(|(_, p)| p.session_id == refusal.session_id && p.host == host)
            .map(|(k, _)| k.clone());
        if let Some(key) = key
            && let Some(mut p) = inner.pending.remove(&key)
        {
            inner.spent.insert(key, Instant::now());
            if let Some(tx) = p.to_viewer.take() {
                let _ = tx.send(Handoff::Refused(refusal));
            }
        }
    }

    /// The viewer gave up waiting: the ticket is spent.
    pub fn forget(&self, session_id: &str) {
        let mut inner = lock(&self.inner);
        let key = inner
            .pending
            .iter()
            .find(|(_, p)| p.session_id == session_id)
            .map(|(k, _)| k.clone());
        if let Some(key) = key {
            inner.pending.remove(&key);
            inner.spent.insert(key, Instant::now());
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_ticket_is_good_once_for_its_agent_before_it_expires() {
        let t = ExecTickets::default();
        let (id, ticket, _rx) = t.open("agent-a", Duration::from_secs(30));
        assert_eq!(
            t.claim(&ticket.0, "agent-b").unwrap_err(),
            TicketRefusal::WrongAgent
        );
        let (claimed, _tx) = t.claim(&ticket.0, "agent-a").unwrap();
        assert_eq!(claimed, id);
        assert_eq!(
            t.claim(&ticket.0, "agent-a").unwrap_err(),
            TicketRefusal::Replayed
        );
        assert_eq!(
            t.claim("nope", "agent-a").unwrap_err(),
            TicketRefusal::Unknown
        );
        let (_, old, _rx) = t.open("agent-a", Duration::ZERO);
        assert_eq!(
            t.claim(&old.0, "agent-a").unwrap_err(),
            TicketRefusal::Expired
        );
        assert_eq!(
            t.claim(&old.0, "agent-a").unwrap_err(),
            TicketRefusal::Replayed
        );
        assert!(
            !format!("{ticket:?}").contains(&ticket.0),
            "tickets are redacted"
        );
    }
}
