//! `odac-sim demo`: placeholder, filled in below.

use std::path::Path;

/// Runs the demo.
pub async fn run(_listen: &str, _state: &Path) -> anyhow::Result<()> {
    anyhow::bail!("demo is not implemented yet")
}
