//! Live agent sessions in the hub: which host has a session now (one per host, a newer one
//! replaces the older), the commands sent to them (drop, close, raw frames), and whether a
//! token may open one or speak for an agent id.

use std::sync::Arc;

use odac_host::lock::lock;
use odac_protocol::EventLevel;
use tokio::sync::mpsc;

use super::{Hub, SessionCmd, SessionEntry};
use crate::state::identity::Refusal;
use crate::state::model::hash_secret;

impl Hub {
    /// Whether `token` may open an agent session.
    pub fn agent_token_ok(&self, token: &str) -> bool {
        if self.faults.reject_tokens() {
            return false;
        }
        let h = hash_secret(token);
        self.read(|d| self.credentials.known(d, &h))
    }

    /// Checks that the token with hash `token_sha256` may speak for agent `id` (binding the id
    /// to it on first use, saved before this returns); see `identity.rs`.
    pub async fn authorize(self: &Arc<Self>, token_sha256: &str, id: &str) -> Result<(), Refusal> {
        if self.faults.reject_tokens() {
            return Err(Refusal::UnknownToken);
        }
        let changed = self.write(|d| self.credentials.authorize(d, token_sha256, id))?;
        if changed {
            self.flush().await;
        }
        Ok(())
    }

    /// Registers a live session for `host`; an older session of the same host is closed.
    pub fn register_session(
        &self,
        host: &str,
        session_id: &str,
        tx: mpsc::UnboundedSender<SessionCmd>,
    ) {
        let old = lock(&self.sessions).insert(
            host.to_owned(),
            SessionEntry {
                session_id: session_id.to_owned(),
                tx,
            },
        );
        if let Some(old) = old {
            let _ = old.tx.send(SessionCmd::Close(
                4000,
                "replaced by a newer session".to_owned(),
            ));
        }
        self.emit_host(host);
    }

    /// Logs that `host`'s session was closed because its agent stayed silent for `silent`
    /// (see `liveness.rs`); [`Hub::unregister_session`] then marks it disconnected.
    pub fn record_dead_session(&self, host: &str, silent: std::time::Duration) {
        self.write(|d| {
            self.log(
                d,
                EventLevel::Warn,
                Some(host),
                None,
                format!(
                    "host {host} missed {} heartbeats (no frame for {} s): session closed with {}",
                    crate::state::liveness::MISSED_HEARTBEATS,
                    silent.as_secs(),
                    crate::state::liveness::CLOSE_CODE
                ),
            );
        });
    }

    /// Forgets `session_id` of `host` (if it is still the live one) and logs the disconnect.
    pub fn unregister_session(&self, host: &str, session_id: &str) {
        let removed = {
            let mut s = lock(&self.sessions);
            if s.get(host).is_some_and(|e| e.session_id == session_id) {
                s.remove(host);
                true
            } else {
                false
            }
        };
        if removed {
            self.write(|d| {
                self.log(
                    d,
                    EventLevel::Warn,
                    Some(host),
                    None,
                    format!("host {host} disconnected"),
                );
            });
            self.emit_host(host);
        }
    }

    /// Whether `host` has a live session.
    pub fn is_connected(&self, host: &str) -> bool {
        lock(&self.sessions).contains_key(host)
    }

    /// Ids of connected hosts.
    pub fn connected_hosts(&self) -> Vec<String> {
        let mut v: Vec<String> = lock(&self.sessions).keys().cloned().collect();
        v.sort();
        v
    }

    /// The id of `host`'s live session, if it has one.
    pub fn session_id(&self, host: &str) -> Option<String> {
        lock(&self.sessions).get(host).map(|e| e.session_id.clone())
    }

    /// Sends `cmd` to `host`'s live session; `false` when it has none.
    pub fn send_to_session(&self, host: &str, cmd: SessionCmd) -> bool {
        lock(&self.sessions)
            .get(host)
            .is_some_and(|e| e.tx.send(cmd).is_ok())
    }

    /// Sends `cmd` to every live session; returns how many got it.
    pub fn broadcast_cmd(&self, cmd: &SessionCmd) -> usize {
        lock(&self.sessions)
            .values()
            .filter(|e| e.tx.send(cmd.clone()).is_ok())
            .count()
    }
}
