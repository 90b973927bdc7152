//! The engine's error type. Callers classify by variant, never by bollard's types: an
//! unreachable engine is [`EngineError::Unavailable`], a refusal carries the engine's exact
//! words in [`EngineError::Rejected`] so the app manager can match them against the device
//! refusal texts real engines use (`appmgr::gpu::fallback::is_device_refusal`).

use thiserror::Error;

/// Why an engine call failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum EngineError {
    /// The engine could not be reached: socket missing, connection refused, timeout.
    #[error("container engine unavailable: {0}")]
    Unavailable(String),
    /// The object (container, image, volume) does not exist; the engine's message.
    #[error("not found: {0}")]
    NotFound(String),
    /// The object exists already or is in a conflicting state; the engine's message.
    #[error("conflict: {0}")]
    Conflict(String),
    /// The engine refused the request; `message` is the engine's exact text.
    #[error("engine rejected the request (http {status}): {message}")]
    Rejected {
        /// HTTP status of the engine's answer (400, 500, ...).
        status: u16,
        /// The engine's own message, unmodified.
        message: String,
    },
    /// An image build ran and failed: the builder's message and the last lines of its
    /// output.
    #[error("image build failed: {message}")]
    BuildFailed {
        /// The builder's error, e.g. `The command '/bin/sh -c make' returned a non-zero code: 2`.
        message: String,
        /// The last lines of the build output.
        log_tail: String,
    },
    /// Anything else (bad input, undecodable answers, streamed errors).
    #[error("{0}")]
    Other(String),
}

impl EngineError {
    /// Whether this error means the engine is not reachable (worth a retry with backoff).
    pub fn is_unavailable(&self) -> bool {
        matches!(self, Self::Unavailable(_))
    }

    /// The HTTP status of the engine's answer, where it answered with one (`NotFound` is
    /// 404, `Conflict` 409, `Rejected` its own).
    pub fn http_status(&self) -> Option<u16> {
        match self {
            Self::NotFound(_) => Some(404),
            Self::Conflict(_) => Some(409),
            Self::Rejected { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// Whether the engine refused one request as the caller's own fault (an HTTP 4xx answer:
    /// a bad reference, a bad parameter): the failure of what was asked, never an outage of
    /// the engine.
    pub fn is_request_error(&self) -> bool {
        self.http_status().is_some_and(|s| (400..500).contains(&s))
    }

    /// The variant's name, for metrics: `unavailable`, `not_found`, `conflict`, `rejected`,
    /// `build_failed` or `other`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Unavailable(_) => "unavailable",
            Self::NotFound(_) => "not_found",
            Self::Conflict(_) => "conflict",
            Self::Rejected { .. } => "rejected",
            Self::BuildFailed { .. } => "build_failed",
            Self::Other(_) => "other",
        }
    }

    /// Whether this error means the object is missing.
    pub fn is_not_found(&self) -> bool {
        matches!(self, Self::NotFound(_))
    }

    /// The engine's own words where it gave any (the message of `NotFound`, `Conflict`,
    /// `Rejected`), else the display text.
    pub fn engine_message(&self) -> String {
        match self {
            Self::NotFound(m) | Self::Conflict(m) | Self::Other(m) => m.clone(),
            Self::Rejected { message, .. } | Self::BuildFailed { message, .. } => message.clone(),
            Self::Unavailable(_) => self.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejected_keeps_the_engine_words() {
        let e = EngineError::Rejected {
            status: 500,
            message: "error gathering device information while adding custom device \"/dev/x\": no such file or directory".into(),
        };
        assert!(
            e.engine_message()
                .starts_with("error gathering device information")
        );
        assert!(e.to_string().contains("http 500"));
        assert!(!e.is_unavailable());
        assert!(EngineError::Unavailable("x".into()).is_unavailable());
        assert!(EngineError::NotFound("no such container".into()).is_not_found());
        let bad_ref = EngineError::Rejected {
            status: 400,
            message: "invalid reference format".into(),
        };
        assert!(bad_ref.is_request_error());
        assert_eq!(bad_ref.http_status(), Some(400));
        assert!(!e.is_request_error());
        assert!(!EngineError::Unavailable("x".into()).is_request_error());
        assert_eq!(EngineError::Conflict("x".into()).http_status(), Some(409));
    }
}
