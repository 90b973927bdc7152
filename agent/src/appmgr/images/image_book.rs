//! `images.json` in the state directory: the images this agent pulled or built, by image id,
//! with the app and reference they came for, its instance, and when it was first and last in
//! use (Unix ms). Image clean-up ([`image_gc`](crate::appmgr::gc::image_gc)) removes only what is
//! in here: a pulled image cannot carry a label, so this record is what tells the agent's images
//! from the user's own and from another agent's. Written atomically when it changed; a file that
//! cannot be read is an empty record (nothing is removed that is not known to be ours).

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::appmgr::state::store::{off_the_executor, write_atomic};

/// The file in the state directory.
pub const IMAGES_FILE: &str = "images.json";

/// How the agent came to have an image.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Origin {
    /// Pulled for an app (it was not on the host, or the pull brought another image).
    Pulled,
    /// Built from an app's git source.
    Built,
}

/// One image of the agent's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Kept {
    /// The app it came for.
    pub app: String,
    /// The reference it was pulled or built as.
    pub reference: String,
    /// The agent's instance.
    pub instance: String,
    /// Pulled or built.
    pub origin: Origin,
    /// When it was recorded, Unix ms.
    pub first_used_ms: u64,
    /// When an app last used it (or could roll back to it), Unix ms; kept up to date within
    /// a minute while it is in use.
    pub last_used_ms: u64,
}

/// The agent's images by id.
pub(crate) type Book = BTreeMap<String, Kept>;

/// The record in `dir` (empty when there is none or it does not parse).
pub(crate) fn load(dir: &Path) -> Book {
    let path = dir.join(IMAGES_FILE);
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Book::new(),
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "image record not read; no image is cleaned up until it is known again");
            return Book::new();
        }
    };
    serde_json::from_slice(&bytes).unwrap_or_else(|e| {
        tracing::warn!(path = %path.display(), error = %e, "image record is not valid json; no image is cleaned up until it is known again");
        Book::new()
    })
}

/// Write the record to `dir`; false (logged) when it could not be written.
pub(crate) fn save(dir: &Path, book: &Book) -> bool {
    match off_the_executor(|| write_atomic(&dir.join(IMAGES_FILE), book)) {
        Ok(()) => true,
        Err(e) => {
            tracing::warn!(error = %e, "could not persist the image record");
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_record_survives_a_restart_and_a_bad_file_is_an_empty_record() {
        let dir = tempfile::tempdir().unwrap();
        assert!(load(dir.path()).is_empty());
        let mut book = Book::new();
        book.insert(
            "sha256:aa".into(),
            Kept {
                app: "web".into(),
                reference: "example.test/web:1".into(),
                instance: "odac".into(),
                origin: Origin::Pulled,
                first_used_ms: 1,
                last_used_ms: 2,
            },
        );
        assert!(save(dir.path(), &book));
        assert_eq!(load(dir.path()), book);
        std::fs::write(dir.path().join(IMAGES_FILE), b"[").unwrap();
        assert!(load(dir.path()).is_empty());
    }
}
