//! Fault injection for tests: refuse agent connections for a while (with or without
//! `Retry-After`), withhold or delay acks, reject every token, close sessions with a wrong code; and one-shot actions carried out by every live session (drop the
//! connection, send a malformed frame, send an oversize frame). Driven through
//! `POST /api/admin/faults` or directly through [`Faults`] and [`crate::state::hub::Hub`].

use odac_host::lock::lock;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// A fault request, as `POST /api/admin/faults` takes it. Absent fields leave a setting as it is.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultRequest {
    /// Clear every standing fault first.
    #[serde(default)]
    pub clear: bool,
    /// Drop every agent connection now (no close frame).
    #[serde(default)]
    pub drop_connections: bool,
    /// Refuse agent connections (HTTP 503 on upgrade) for this many seconds; 0 stops refusing.
    #[serde(default)]
    pub refuse_secs: Option<u64>,
    /// Stop (true) or resume (false) acking agent reports.
    #[serde(default)]
    pub withhold_acks: Option<bool>,
    /// Delay every ack by this many milliseconds (0 = no delay).
    #[serde(default)]
    pub ack_delay_ms: Option<u64>,
    /// Send a malformed frame (not JSON) to every connected agent.
    #[serde(default)]
    pub send_malformed: bool,
    /// Send a frame larger than the protocol's limit to every connected agent.
    #[serde(default)]
    pub send_oversize: bool,
    /// Refuse (true) or accept again (false) every agent token (HTTP 401 on upgrade).
    #[serde(default)]
    pub reject_tokens: Option<bool>,
    /// Leave `Retry-After` out of the 503 that `refuse_secs` answers (true), or send it (false).
    #[serde(default)]
    pub omit_retry_after: Option<bool>,
    /// Close every agent session with 1000 whatever the documented code (true), or not (false).
    #[serde(default)]
    pub wrong_close_codes: Option<bool>,
}

/// Longest refusal `refuse_secs` may ask for (one day).
pub const MAX_REFUSE_SECS: u64 = 86_400;

/// Longest ack delay `ack_delay_ms` may ask for (ten minutes).
pub const MAX_ACK_DELAY_MS: u64 = 600_000;

impl FaultRequest {
    /// Checks every number against its bound; the error names the field.
    pub fn validate(&self) -> Result<(), odac_protocol::ValidationError> {
        for (field, value, max) in [
            ("refuse_secs", self.refuse_secs, MAX_REFUSE_SECS),
            ("ack_delay_ms", self.ack_delay_ms, MAX_ACK_DELAY_MS),
        ] {
            if let Some(v) = value
                && v > max
            {
                return Err(odac_protocol::ValidationError::new(
                    field,
                    format!("{v} is out of range 0..={max}"),
                ));
            }
        }
        Ok(())
    }
}

/// Standing faults, as `GET /api/admin/faults` shows them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FaultView {
    /// Seconds left during which agent connections are refused.
    pub refusing_secs_left: u64,
    /// Whether acks are withheld.
    pub withhold_acks: bool,
    /// Ack delay in milliseconds.
    pub ack_delay_ms: u64,
    /// Whether every token is rejected.
    pub reject_tokens: bool,
    /// Whether the refusal's 503 leaves `Retry-After` out.
    #[serde(default)]
    pub omit_retry_after: bool,
    /// Whether sessions are closed with 1000 instead of the documented code.
    #[serde(default)]
    pub wrong_close_codes: bool,
}

#[derive(Debug, Default)]
struct State {
    refuse_until: Option<Instant>,
    withhold_acks: bool,
    ack_delay_ms: u64,
    reject_tokens: bool,
    omit_retry_after: bool,
    wrong_close_codes: bool,
}

/// The standing faults.
#[derive(Debug, Default)]
pub struct Faults {
    state: Mutex<State>,
}

impl Faults {
    fn with<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        let mut g = lock(&self.state);
        f(&mut g)
    }

    /// Applies the standing parts of a request (one-shot actions are the hub's).
    pub fn apply(&self, req: &FaultRequest) {
        self.with(|s| {
            if req.clear {
                *s = State::default();
            }
            if let Some(secs) = req.refuse_secs {
                let secs = secs.min(MAX_REFUSE_SECS);
                s.refuse_until = (secs > 0)
                    .then(|| Instant::now().checked_add(Duration::from_secs(secs)))
                    .flatten();
            }
            if let Some(w) = req.withhold_acks {
                s.withhold_acks = w;
            }
            if let Some(d) = req.ack_delay_ms {
                s.ack_delay_ms = d.min(MAX_ACK_DELAY_MS);
            }
            if let Some(r) = req.reject_tokens {
                s.reject_tokens = r;
            }
            if let Some(o) = req.omit_retry_after {
                s.omit_retry_after = o;
            }
            if let Some(w) = req.wrong_close_codes {
                s.wrong_close_codes = w;
            }
        });
    }

    /// Whether agent connections are refused now.
    pub fn refusing(&self) -> bool {
        self.with(|s| s.refuse_until.is_some_and(|t| Instant::now() < t))
    }

    /// Whether every token is rejected.
    pub fn reject_tokens(&self) -> bool {
        self.with(|s| s.reject_tokens)
    }

    /// While refusing: the `Retry-After` seconds to send (the refusal's time left, at least 1),
    /// or `None` when the `omit_retry_after` fault leaves the header out.
    pub fn retry_after_secs(&self) -> Option<u64> {
        let secs = self.view().refusing_secs_left.max(1);
        self.with(|s| (!s.omit_retry_after).then_some(secs))
    }

    /// Whether sessions are closed with 1000 instead of the documented code.
    pub fn wrong_close_codes(&self) -> bool {
        self.with(|s| s.wrong_close_codes)
    }

    /// `None`: withhold the ack; `Some(d)`: send it after `d`.
    pub fn ack_policy(&self) -> Option<Duration> {
        self.with(|s| (!s.withhold_acks).then(|| Duration::from_millis(s.ack_delay_ms)))
    }

    /// The standing faults.
    pub fn view(&self) -> FaultView {
        self.with(|s| FaultView {
            refusing_secs_left: s
                .refuse_until
                .map(|t| {
                    t.saturating_duration_since(Instant::now())
                        .as_secs_f64()
                        .ceil()
                })
                .map_or(0, |f| f as u64),
            withhold_acks: s.withhold_acks,
            ack_delay_ms: s.ack_delay_ms,
            reject_tokens: s.reject_tokens,
            omit_retry_after: s.omit_retry_after,
            wrong_close_codes: s.wrong_close_codes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standing_faults_apply_and_clear() {
        let f = Faults::default();
        assert_eq!(f.ack_policy(), Some(Duration::ZERO));
        f.apply(&FaultRequest {
            refuse_secs: Some(30),
            withhold_acks: Some(true),
            reject_tokens: Some(true),
            ..FaultRequest::default()
        });
        assert!(f.refusing());
        assert!(f.reject_tokens());
        assert_eq!(f.ack_policy(), None);
        assert!(f.view().refusing_secs_left >= 29);
        f.apply(&FaultRequest {
            clear: true,
            ack_delay_ms: Some(250),
            ..FaultRequest::default()
        });
        assert!(!f.refusing());
        assert!(!f.reject_tokens());
        assert_eq!(f.ack_policy(), Some(Duration::from_millis(250)));
    }

    #[test]
    fn a_refusal_says_retry_after_unless_told_not_to() {
        let f = Faults::default();
        f.apply(&FaultRequest {
            refuse_secs: Some(30),
            wrong_close_codes: Some(true),
            ..FaultRequest::default()
        });
        assert!(f.retry_after_secs().is_some_and(|s| (29..=30).contains(&s)));
        assert!(f.wrong_close_codes());
        f.apply(&FaultRequest {
            omit_retry_after: Some(true),
            ..FaultRequest::default()
        });
        assert_eq!(f.retry_after_secs(), None);
        assert!(f.view().omit_retry_after && f.view().wrong_close_codes);
        f.apply(&FaultRequest {
            clear: true,
            ..FaultRequest::default()
        });
        assert!(!f.wrong_close_codes());
    }
}
