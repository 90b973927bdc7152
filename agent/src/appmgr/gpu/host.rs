//! Where the app manager reads the host's facts from: a root directory to scan (`/` in
//! production, a fixture tree in tests), or a function returning a scan (tests that need
//! device paths of their own, e.g. character devices made with mknod in a temp dir).

use std::sync::Arc;

use odac_host::inventory::HostScan;

/// Where the host facts come from: a root directory to scan (`/` in production, a fixture
/// tree in tests), or a function returning a scan (tests that need device paths of their own).
#[derive(Clone)]
pub enum HostSource {
    /// Scan the tree under this root.
    Root(std::path::PathBuf),
    /// Call this for every pass.
    Fixed(Arc<dyn Fn() -> HostScan + Send + Sync>),
}

impl std::fmt::Debug for HostSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Root(root) => f.debug_tuple("Root").field(root).finish(),
            Self::Fixed(_) => f.write_str("Fixed(..)"),
        }
    }
}

impl HostSource {
    /// The host's facts now.
    pub fn scan(&self) -> HostScan {
        match self {
            Self::Root(root) => odac_host::inventory::scan(root),
            Self::Fixed(f) => f(),
        }
    }
}
