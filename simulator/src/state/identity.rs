//! Which agent ids a bearer token may speak for. An agent id is bound to the one credential that
//! first registered it (`FleetData::bindings`, persisted), so no other token can open a session
//! as that host, receive its desired state or push reports in its name. An enrolled token
//! belongs to exactly one id (given at enrollment, or the first one it is used with); a static
//! token (`--token`, `--token-file`, `ODAC_SIM_TOKENS`, the generated `agent-token`) may
//! register at most `hosts_per_token` ids (default 1), so a leaked or shared token cannot fill
//! the fleet with invented hosts. Every id must pass the protocol's agent-id rule.

use odac_protocol::{ValidationError, validate_agent_id};

use crate::state::model::{FleetData, hash_secret};

/// Ids a static token may register unless `--hosts-per-token` says otherwise.
pub const DEFAULT_HOSTS_PER_TOKEN: u32 = 1;

/// Most ids one static token may ever be allowed to register.
pub const MAX_HOSTS_PER_TOKEN: u32 = 10_000;

/// Why a token may not speak for an id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The token is not known (or every token is refused by a fault).
    #[error("missing or refused bearer token")]
    UnknownToken,
    /// The id breaks the agent-id rule.
    #[error("{0}")]
    BadId(ValidationError),
    /// The token is an enrolled token bound to another id.
    #[error("agent_id: {id:?} is not the agent this token was issued to")]
    TokenBoundElsewhere {
        /// The id asked for.
        id: String,
    },
    /// The id is bound to another credential.
    #[error(
        "agent_id: {id:?} belongs to another credential (to move it, stop odac-sim and remove its entry from \"bindings\" in fleet.json)"
    )]
    IdBoundElsewhere {
        /// The id asked for.
        id: String,
    },
    /// The static token registered as many ids as it may.
    #[error(
        "agent_id: {id:?} is new and this token already registered {limit} agent id(s), its limit (odac-sim serve --hosts-per-token)"
    )]
    TooManyIds {
        /// The id asked for.
        id: String,
        /// The limit.
        limit: u32,
    },
}

/// The static agent tokens (kept hashed) and how many ids each may register.
#[derive(Debug, Clone, Default)]
pub struct Credentials {
    static_tokens: Vec<String>,
    hosts_per_token: u32,
}

impl Credentials {
    /// Credentials accepting `tokens` (in clear; kept as SHA-256 hashes).
    pub fn new(tokens: &[String], hosts_per_token: u32) -> Self {
        Self {
            static_tokens: tokens.iter().map(|t| hash_secret(t)).collect(),
            hosts_per_token: hosts_per_token.clamp(1, MAX_HOSTS_PER_TOKEN),
        }
    }

    /// Whether the token with hash `h` is known at all (static or enrolled).
    pub fn known(&self, d: &FleetData, h: &str) -> bool {
        self.static_tokens.iter().any(|t| t == h) || d.enrolled_tokens.iter().any(|s| s.sha256 == h)
    }

    /// Checks that the token with hash `h` may speak for `id`, binding the id (and an enrolled
    /// token) on first use. Returns whether `d` changed (then it must be persisted).
    pub fn authorize(&self, d: &mut FleetData, h: &str, id: &str) -> Result<bool, Refusal> {
        let enrolled = d.enrolled_tokens.iter().position(|s| s.sha256 == h);
        let is_static = self.static_tokens.iter().any(|t| t == h);
        if enrolled.is_none() && !is_static {
            return Err(Refusal::UnknownToken);
        }
        validate_agent_id("agent_id", id).map_err(Refusal::BadId)?;
        if let Some(i) = enrolled
            && d.enrolled_tokens[i]
                .agent_id
                .as_deref()
                .is_some_and(|bound| bound != id)
        {
            return Err(Refusal::TokenBoundElsewhere { id: id.to_owned() });
        }
        match d.bindings.get(id) {
            Some(owner) if owner != h => {
                return Err(Refusal::IdBoundElsewhere { id: id.to_owned() });
            }
            Some(_) => return Ok(false),
            None => {}
        }
        if enrolled.is_none() {
            let used = d.bindings.values().filter(|t| *t == h).count();
            if used >= self.hosts_per_token as usize {
                return Err(Refusal::TooManyIds {
                    id: id.to_owned(),
                    limit: self.hosts_per_token,
                });
            }
        }
        d.bindings.insert(id.to_owned(), h.to_owned());
        if let Some(i) = enrolled {
            d.enrolled_tokens[i].agent_id = Some(id.to_owned());
        }
        Ok(true)
    }
}

/// Binds `id` to the freshly enrolled token with hash `h`, unless another credential holds it
/// (enrollment never moves an id: that would let anyone who can mint a code take a host over).
pub fn bind_enrolled(d: &mut FleetData, h: &str, id: &str) -> Result<(), Refusal> {
    match d.bindings.get(id) {
        Some(owner) if owner != h => Err(Refusal::IdBoundElsewhere { id: id.to_owned() }),
        _ => {
            d.bindings.insert(id.to_owned(), h.to_owned());
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::state::model::Secret;

    fn enrolled(d: &mut FleetData, token: &str, id: Option<&str>) {
        d.enrolled_tokens.push(Secret {
            sha256: hash_secret(token),
            created_ms: 0,
            agent_id: id.map(str::to_owned),
        });
    }

    #[test]
    fn a_static_token_binds_its_first_ids_up_to_the_limit() {
        let c = Credentials::new(&["s".to_owned()], 2);
        let h = hash_secret("s");
        let mut d = FleetData::default();
        assert_eq!(c.authorize(&mut d, &h, "a"), Ok(true));
        assert_eq!(c.authorize(&mut d, &h, "a"), Ok(false));
        assert_eq!(c.authorize(&mut d, &h, "b"), Ok(true));
        assert!(matches!(
            c.authorize(&mut d, &h, "c"),
            Err(Refusal::TooManyIds { limit: 2, .. })
        ));
        assert_eq!(
            c.authorize(&mut d, &hash_secret("nope"), "a"),
            Err(Refusal::UnknownToken)
        );
        let e = c.authorize(&mut d, &h, "../../etc").unwrap_err();
        assert!(matches!(e, Refusal::BadId(_)), "{e:?}");
    }

    #[test]
    fn an_id_belongs_to_the_credential_that_registered_it() {
        let c = Credentials::new(&["s1".to_owned(), "s2".to_owned()], 5);
        let mut d = FleetData::default();
        c.authorize(&mut d, &hash_secret("s1"), "a").unwrap();
        let e = c.authorize(&mut d, &hash_secret("s2"), "a").unwrap_err();
        assert_eq!(e, Refusal::IdBoundElsewhere { id: "a".into() });
        enrolled(&mut d, "e1", None);
        assert!(matches!(
            c.authorize(&mut d, &hash_secret("e1"), "a"),
            Err(Refusal::IdBoundElsewhere { .. })
        ));
    }

    #[test]
    fn an_enrolled_token_belongs_to_one_id() {
        let c = Credentials::new(&[], 1);
        let mut d = FleetData::default();
        enrolled(&mut d, "e1", None);
        enrolled(&mut d, "e2", Some("b"));
        let h1 = hash_secret("e1");
        assert_eq!(c.authorize(&mut d, &h1, "a"), Ok(true));
        assert_eq!(d.enrolled_tokens[0].agent_id.as_deref(), Some("a"));
        assert_eq!(
            c.authorize(&mut d, &h1, "x"),
            Err(Refusal::TokenBoundElsewhere { id: "x".into() })
        );
        let h2 = hash_secret("e2");
        assert!(c.authorize(&mut d, &h2, "a").is_err());
        assert_eq!(c.authorize(&mut d, &h2, "b"), Ok(true));
        // enrollment never moves a bound id
        let h3 = hash_secret("e3");
        assert!(bind_enrolled(&mut d, &h3, "a").is_err());
        assert_eq!(bind_enrolled(&mut d, &h3, "c"), Ok(()));
        assert_eq!(c.authorize(&mut d, &h1, "a"), Ok(false));
    }
}
