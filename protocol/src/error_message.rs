//! The `error` message and its machine-readable codes. Error codes are an open set: a receiver
//! keeps a code it does not know (`ErrorCode::Other`) instead of refusing the message.

use std::borrow::Cow;
use std::fmt;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::validation::{ValidationError, check_len, check_string};

/// `error`: a message was refused.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub struct ErrorMessage {
    /// Report sequence number (agent errors only, optional).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    /// Machine-readable code.
    pub code: ErrorCode,
    /// Human-readable message (for `invalid`, `<field>: <problem>`).
    pub message: String,
    /// `seq` of the refused message, when it had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ref_seq: Option<u64>,
}

/// Machine-readable error codes. Unknown codes are kept (`Other`) for forward compatibility.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// The frame was not JSON or lacked a `type`.
    #[default]
    Malformed,
    /// The `type` is not known to the receiver.
    UnknownType,
    /// The frame exceeded [`crate::MAX_FRAME_BYTES`].
    TooLarge,
    /// A field failed validation.
    Invalid,
    /// The peer speaks a protocol version the receiver does not.
    UnsupportedVersion,
    /// The bearer token was refused.
    Unauthorized,
    /// A stale generation or a conflicting change.
    Conflict,
    /// The receiver failed (e.g. could not persist).
    Internal,
    /// A code this version does not know.
    Other(String),
}

impl ErrorCode {
    const KNOWN: [ErrorCode; 8] = [
        ErrorCode::Malformed,
        ErrorCode::UnknownType,
        ErrorCode::TooLarge,
        ErrorCode::Invalid,
        ErrorCode::UnsupportedVersion,
        ErrorCode::Unauthorized,
        ErrorCode::Conflict,
        ErrorCode::Internal,
    ];

    /// The wire code.
    pub fn as_str(&self) -> &str {
        match self {
            ErrorCode::Malformed => "malformed",
            ErrorCode::UnknownType => "unknown_type",
            ErrorCode::TooLarge => "too_large",
            ErrorCode::Invalid => "invalid",
            ErrorCode::UnsupportedVersion => "unsupported_version",
            ErrorCode::Unauthorized => "unauthorized",
            ErrorCode::Conflict => "conflict",
            ErrorCode::Internal => "internal",
            ErrorCode::Other(s) => s,
        }
    }

    /// Parses a wire code; unknown codes become `Other`.
    pub fn from_wire(s: &str) -> ErrorCode {
        ErrorCode::KNOWN
            .into_iter()
            .find(|c| c.as_str() == s)
            .unwrap_or_else(|| ErrorCode::Other(s.to_owned()))
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for ErrorCode {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for ErrorCode {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Ok(ErrorCode::from_wire(&s))
    }
}

impl JsonSchema for ErrorCode {
    fn schema_name() -> Cow<'static, str> {
        "ErrorCode".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "Error code: malformed, unknown_type, too_large, invalid, unsupported_version, unauthorized, conflict or internal; receivers keep unknown codes.",
            "type": "string",
            "examples": ["malformed", "unknown_type", "too_large", "invalid", "unsupported_version", "unauthorized", "conflict", "internal"]
        })
    }
}

impl ErrorMessage {
    /// An error refusing the message with `ref_seq`.
    pub fn new(code: ErrorCode, message: impl Into<String>, ref_seq: Option<u64>) -> Self {
        Self {
            seq: None,
            code,
            message: message.into(),
            ref_seq,
        }
    }

    pub(crate) fn validate(&self) -> Result<(), ValidationError> {
        check_len("code", self.code.as_str(), 256)?;
        check_string("message", &self.message)
    }
}
