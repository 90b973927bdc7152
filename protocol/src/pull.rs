//! `PullPolicy`: when the agent pulls an app's image from its registry — only when it is
//! missing (`if_not_present`, the default), before every creation of the container
//! (`always`: a re-pushed tag is picked up on the next restart token), or never (`never`:
//! the image must already be on the host).

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// When the agent pulls an app's image.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PullPolicy {
    /// Pull only when the engine does not have the image.
    #[default]
    IfNotPresent,
    /// Pull before every creation of the container; a new digest recreates it.
    Always,
    /// Never pull: a missing image fails the app.
    Never,
}

impl PullPolicy {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            PullPolicy::IfNotPresent => "if_not_present",
            PullPolicy::Always => "always",
            PullPolicy::Never => "never",
        }
    }

    /// Whether this is the default (`if_not_present`), left out on the wire.
    pub fn is_default(&self) -> bool {
        *self == PullPolicy::IfNotPresent
    }
}

impl fmt::Display for PullPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_names_round_trip() {
        for p in [
            PullPolicy::IfNotPresent,
            PullPolicy::Always,
            PullPolicy::Never,
        ] {
            let json = serde_json::to_string(&p).unwrap_or_default();
            assert_eq!(json, format!("\"{p}\""));
            assert_eq!(serde_json::from_str::<PullPolicy>(&json).ok(), Some(p));
        }
        assert!(serde_json::from_str::<PullPolicy>("\"sometimes\"").is_err());
        assert!(PullPolicy::default().is_default());
    }
}
