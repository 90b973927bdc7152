//! The simulator's one way to replace a file (CA, token, fleet state, sealing key): the
//! agent's, [`odac_host::atomic_file`], its IO errors turned into [`SimError`] naming the path.

use std::path::Path;

use crate::error::SimError;

/// Writes `contents` to `path` atomically with `mode` (the agent's, [`odac_host::atomic_file`]:
/// temp file, fsync, rename, fsync directory).
pub fn write_file(path: &Path, contents: &[u8], mode: u32) -> Result<(), SimError> {
    odac_host::atomic_file::write_atomic(path, contents, mode)
        .map_err(|e| SimError::io("write", path, e))
}
