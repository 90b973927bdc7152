//! Enrollment in the hub: one-time codes (kept as hashes) traded for agent tokens. Both are
//! saved before the caller answers, off the runtime worker: a code handed out or a token
//! issued must still be known after a crash.

use odac_protocol::EventLevel;

use super::Hub;
use crate::state::identity::Refusal;
use crate::state::model::{Secret, hash_secret};

impl Hub {
    /// Adds a one-time enrollment code; returns once it is saved.
    pub async fn add_enroll_code(self: &std::sync::Arc<Self>, code: &str) {
        self.write(|d| {
            d.enroll_codes.push(Secret {
                sha256: hash_secret(code),
                created_ms: crate::clock::now_ms(),
                agent_id: None,
            });
        });
        self.flush().await;
    }

    /// Trades a one-time code for a new agent token: `Ok(None)` if the code is unknown or
    /// used. With `agent_id` (checked by the caller) the token is bound to that id at once;
    /// an id bound to another credential is refused before the code is spent. The token is
    /// saved before it is returned.
    pub async fn redeem(
        self: &std::sync::Arc<Self>,
        code: &str,
        agent_id: Option<&str>,
    ) -> Result<Option<String>, Refusal> {
        let h = hash_secret(code);
        let token = self.write(|d| {
            let Some(pos) = d.enroll_codes.iter().position(|s| s.sha256 == h) else {
                return Ok(None);
            };
            let token = format!("odac_{}", uuid::Uuid::new_v4().simple());
            let sha256 = hash_secret(&token);
            if let Some(id) = agent_id {
                crate::state::identity::bind_enrolled(d, &sha256, id)?;
            }
            d.enroll_codes.remove(pos);
            d.enrolled_tokens.push(Secret {
                sha256,
                created_ms: crate::clock::now_ms(),
                agent_id: agent_id.map(str::to_owned),
            });
            self.log(
                d,
                EventLevel::Info,
                agent_id,
                None,
                "an agent enrolled".to_owned(),
            );
            Ok(Some(token))
        })?;
        if token.is_some() {
            self.flush().await;
        }
        Ok(token)
    }
}
