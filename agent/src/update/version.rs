//! Release version order: `MAJOR.MINOR.PATCH`, compared as numbers (`0.10.0` > `0.9.1`).

use std::fmt;

/// A release version.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Version(pub u64, pub u64, pub u64);

impl Version {
    /// Parses `MAJOR.MINOR.PATCH`; `None` for anything else.
    pub fn parse(text: &str) -> Option<Self> {
        odac_protocol::parse_version(text).map(|(a, b, c)| Self(a, b, c))
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.0, self.1, self.2)
    }
}

/// Whether `a` is a newer version than `b` (an unparsable one is older than any other).
pub fn newer(a: &str, b: &str) -> bool {
    Version::parse(a).unwrap_or_default() > Version::parse(b).unwrap_or_default()
}
