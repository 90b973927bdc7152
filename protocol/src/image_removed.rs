//! The `image_removed` part of an `event`: an image the agent pulled or built and removed once
//! no app used it (after `apps.image_gc_delay_secs`) or because the engine's data root was low
//! on space (`apps.image_gc_min_free_mb`); which image, how much space came back, and why.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::validation::{ValidationError, check_string};

/// An image the agent removed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub struct ImageRemoved {
    /// The image id (`sha256:…`).
    pub image: String,
    /// The reference it was pulled or built as (e.g. `ghcr.io/acme/web:1.4`).
    pub reference: String,
    /// Its size as the engine reported it just before the removal, in bytes.
    pub bytes: u64,
    /// Why it was removed.
    pub reason: ImageRemovalReason,
}

/// Why an image was removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ImageRemovalReason {
    /// No app of the agent's instance used it (nor could roll back to it) for
    /// `apps.image_gc_delay_secs`.
    #[default]
    Delay,
    /// The engine's data root had less than `apps.image_gc_min_free_mb` free.
    LowDisk,
}

impl ImageRemoved {
    /// Checks the string lengths; the error names the field.
    pub fn validate(&self) -> Result<(), ValidationError> {
        check_string("image", &self.image)?;
        check_string("reference", &self.reference)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_form() {
        let r = ImageRemoved {
            image: "sha256:aa".into(),
            reference: "web:1".into(),
            bytes: 7,
            reason: ImageRemovalReason::LowDisk,
        };
        let json = serde_json::to_string(&r).unwrap_or_default();
        assert_eq!(
            json,
            r#"{"image":"sha256:aa","reference":"web:1","bytes":7,"reason":"low_disk"}"#
        );
        assert!(r.validate().is_ok());
    }
}
