//! Decoding and encoding frames. Decoding checks the size limit before parsing, parses JSON,
//! dispatches on `type` (an unknown type is its own error), deserialises the payload with the
//! path of any bad field, and validates. It never panics, whatever the input.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::limits::MAX_FRAME_BYTES;
use crate::messages::{AgentMessage, ControlMessage, ErrorMessage};
use crate::validation::ValidationError;

/// Why a frame could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The frame exceeds [`MAX_FRAME_BYTES`]; it was not parsed.
    #[error("frame of {size} bytes exceeds the limit of {MAX_FRAME_BYTES} bytes")]
    TooLarge {
        /// Frame size in bytes.
        size: usize,
    },
    /// Not JSON, not an object, or no string `type`.
    #[error("malformed frame: {0}")]
    Malformed(String),
    /// The `type` is not one this side understands.
    #[error("unknown message type {0:?}")]
    UnknownType(String),
    /// A field is missing, has the wrong JSON type, or failed validation.
    #[error("invalid message: {0}")]
    Invalid(ValidationError),
}

impl DecodeError {
    /// The error code to answer with in an `error` message.
    pub fn code(&self) -> crate::messages::ErrorCode {
        use crate::messages::ErrorCode;
        match self {
            DecodeError::TooLarge { .. } => ErrorCode::TooLarge,
            DecodeError::Malformed(_) => ErrorCode::Malformed,
            DecodeError::UnknownType(_) => ErrorCode::UnknownType,
            DecodeError::Invalid(_) => ErrorCode::Invalid,
        }
    }

    /// What an `error` message answering this failure says: the detail without the decoder's
    /// prefix (`apps[0].name: is missing`), the whole sentence for an oversize frame.
    pub fn reply_text(&self) -> String {
        match self {
            DecodeError::TooLarge { .. } => self.to_string(),
            DecodeError::Malformed(m) => m.clone(),
            DecodeError::UnknownType(t) => format!("unknown message type {t:?}"),
            DecodeError::Invalid(e) => e.to_string(),
        }
    }
}

/// The `error` message answering a frame that failed to decode, with `ref_seq` taken from the
/// frame when it has a numeric `seq`. `None` for [`DecodeError::TooLarge`]: an oversize frame
/// is answered by closing the WebSocket with code 1009, not with a message.
pub fn error_reply(frame: &[u8], err: &DecodeError) -> Option<ErrorMessage> {
    if matches!(err, DecodeError::TooLarge { .. }) {
        return None;
    }
    let message = err.reply_text();
    let ref_seq = serde_json::from_slice::<Value>(frame)
        .ok()
        .and_then(|v| v.get("seq").and_then(Value::as_u64));
    Some(ErrorMessage::new(err.code(), message, ref_seq))
}

/// Decodes and validates a control-plane → agent frame.
pub fn decode_control(frame: &[u8]) -> Result<ControlMessage, DecodeError> {
    let (kind, value) = split(frame)?;
    let msg = match kind.as_str() {
        "welcome" => ControlMessage::Welcome(payload(value)?),
        "desired_state" => ControlMessage::DesiredState(payload(value)?),
        "app_upsert" => ControlMessage::AppUpsert(payload(value)?),
        "app_delete" => ControlMessage::AppDelete(payload(value)?),
        "ack" => ControlMessage::Ack(payload(value)?),
        "error" => ControlMessage::Error(payload(value)?),
        "logs_request" => ControlMessage::LogsRequest(payload(value)?),
        "logs_cancel" => ControlMessage::LogsCancel(payload(value)?),
        _ => return Err(DecodeError::UnknownType(kind)),
    };
    msg.validate().map_err(DecodeError::Invalid)?;
    Ok(msg)
}

/// Decodes and validates an agent → control-plane frame.
pub fn decode_agent(frame: &[u8]) -> Result<AgentMessage, DecodeError> {
    let (kind, value) = split(frame)?;
    let msg = match kind.as_str() {
        "hello" => AgentMessage::Hello(payload(value)?),
        "inventory" => AgentMessage::Inventory(payload(value)?),
        "app_status" => AgentMessage::AppStatus(payload(value)?),
        "event" => AgentMessage::Event(payload(value)?),
        "ack" => AgentMessage::Ack(payload(value)?),
        "error" => AgentMessage::Error(payload(value)?),
        "resync" => AgentMessage::Resync(payload(value)?),
        "logs_chunk" => AgentMessage::LogsChunk(payload(value)?),
        "logs_end" => AgentMessage::LogsEnd(payload(value)?),
        "gpu_stats" => AgentMessage::GpuStats(payload(value)?),
        _ => return Err(DecodeError::UnknownType(kind)),
    };
    msg.validate().map_err(DecodeError::Invalid)?;
    Ok(msg)
}

/// Serialises a message as one JSON text frame.
pub fn encode<M: Encode>(msg: &M) -> String {
    match serde_json::to_string(msg) {
        Ok(s) => s,
        // Unreachable for the protocol's types (string map keys, no fallible serialisers);
        // still answer with a well-formed frame rather than panic.
        Err(e) => serde_json::json!({
            "type": "error",
            "code": "internal",
            "message": format!("cannot encode {} message: {e}", msg.type_name()),
        })
        .to_string(),
    }
}

/// Messages that [`encode`] accepts.
pub trait Encode: Serialize + private::Sealed {
    /// The wire `type`.
    fn type_name(&self) -> &'static str;
}

impl Encode for AgentMessage {
    fn type_name(&self) -> &'static str {
        AgentMessage::type_name(self)
    }
}

impl Encode for ControlMessage {
    fn type_name(&self) -> &'static str {
        ControlMessage::type_name(self)
    }
}

mod private {
    pub trait Sealed {}
    impl Sealed for crate::messages::AgentMessage {}
    impl Sealed for crate::messages::ControlMessage {}
}

/// Checks the size, parses JSON and extracts the `type`.
fn split(frame: &[u8]) -> Result<(String, Value), DecodeError> {
    if frame.len() > MAX_FRAME_BYTES {
        return Err(DecodeError::TooLarge { size: frame.len() });
    }
    let value: Value =
        serde_json::from_slice(frame).map_err(|e| DecodeError::Malformed(e.to_string()))?;
    let kind = match &value {
        Value::Object(map) => match map.get("type") {
            Some(Value::String(t)) => t.clone(),
            Some(other) => {
                return Err(DecodeError::Malformed(format!(
                    "field `type` must be a string, got {}",
                    json_kind(other)
                )));
            }
            None => return Err(DecodeError::Malformed("missing field `type`".to_owned())),
        },
        other => {
            return Err(DecodeError::Malformed(format!(
                "expected a JSON object, got {}",
                json_kind(other)
            )));
        }
    };
    Ok((kind, value))
}

/// Deserialises a payload, naming the path of a bad field.
fn payload<T: DeserializeOwned>(value: Value) -> Result<T, DecodeError> {
    serde_path_to_error::deserialize(value)
        .map_err(|e| DecodeError::Invalid(ValidationError::from_serde_path(e)))
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
