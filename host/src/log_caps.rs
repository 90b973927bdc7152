//! The caps on what noisy dependencies may log, shared by the agent's and the simulator's
//! tracing setups. Some dependencies dump what they carry at their most verbose levels:
//! tungstenite's trace shows the upgrade request (the bearer token) and every frame (git
//! secrets in a desired state), bollard's debug the engine's answers (env values). Their log
//! records above [`CAPS`] are dropped whatever the configured filter says, so no level shows a
//! secret.

use tracing::Level;

/// The most verbose level kept per dependency target (and its submodules).
pub const CAPS: &[(&str, Level)] = &[
    ("tungstenite", Level::DEBUG),
    ("tokio_tungstenite", Level::DEBUG),
    ("bollard", Level::INFO),
    ("hyper", Level::DEBUG),
    ("hyper_util", Level::DEBUG),
    ("h2", Level::DEBUG),
    ("rustls", Level::DEBUG),
    ("reqwest", Level::DEBUG),
];

/// Whether a log record (a tracing event) of `target` at `level` passes the [`CAPS`].
pub fn within_caps(target: &str, level: &Level) -> bool {
    CAPS.iter().all(|(name, cap)| {
        let ours = target == *name
            || target
                .strip_prefix(name)
                .is_some_and(|rest| rest.starts_with("::"));
        !ours || level <= cap
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dependency_dumps_are_capped() {
        assert!(!within_caps(
            "tungstenite::handshake::client",
            &Level::TRACE
        ));
        assert!(within_caps("tungstenite::protocol", &Level::DEBUG));
        assert!(!within_caps("bollard::docker", &Level::DEBUG));
        assert!(within_caps("bollard::docker", &Level::INFO));
        assert!(within_caps("tungstenite_other", &Level::TRACE));
        assert!(within_caps("odac_agent::uplink", &Level::TRACE));
    }
}
