//! Decoding and encoding frames. Decoding checks the size limit before parsing, parses JSON,
//! dispatches on `type` (an unknown type is its own error), deserialises the payload with the
//! path of any bad field, and validates. It never panics, whatever the input.
//!
//! An object with the same key twice is refused (`invalid`, naming the key's path): JSON
//! parsers disagree on which of the two counts (first or last), so a frame that one reader of
//! the wire sees one way must not be applied another way here.

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
        "update_offer" => ControlMessage::UpdateOffer(payload(value)?),
        "exec_request" => ControlMessage::ExecRequest(payload(value)?),
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
        "update_status" => AgentMessage::UpdateStatus(payload(value)?),
        "exec_refused" => AgentMessage::ExecRefused(payload(value)?),
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
    let value = strict_value(frame)?;
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

/// A JSON value parsed like `serde_json::Value`, refusing an object with a key twice: the
/// path of the second one goes to `duplicate` (the parse then fails).
struct Strict<'a> {
    path: String,
    duplicate: &'a std::cell::RefCell<Option<String>>,
}

impl Strict<'_> {
    fn child(&self, path: String) -> Self {
        Strict {
            path,
            duplicate: self.duplicate,
        }
    }
}

impl<'de> serde::de::DeserializeSeed<'de> for Strict<'_> {
    type Value = Value;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Strict<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::new();
        while let Some(v) =
            seq.next_element_seed(self.child(format!("{}[{}]", self.path, out.len())))?
        {
            out.push(v);
        }
        Ok(Value::Array(out))
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = serde_json::Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let path = if self.path.is_empty() {
                key.clone()
            } else {
                format!("{}.{key}", self.path)
            };
            if out.contains_key(&key) {
                *self.duplicate.borrow_mut() = Some(path);
                return Err(serde::de::Error::custom("duplicate key"));
            }
            let v = map.next_value_seed(self.child(path))?;
            out.insert(key, v);
        }
        Ok(Value::Object(out))
    }
}

/// Parses JSON into a [`Value`], refusing an object with the same key twice (naming its path).
fn strict_value(bytes: &[u8]) -> Result<Value, DecodeError> {
    let duplicate = std::cell::RefCell::new(None);
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let parsed = serde::de::DeserializeSeed::deserialize(
        Strict {
            path: String::new(),
            duplicate: &duplicate,
        },
        &mut de,
    )
    .and_then(|v| de.end().map(|()| v));
    match (parsed, duplicate.into_inner()) {
        (Ok(v), _) => Ok(v),
        (Err(_), Some(path)) => Err(DecodeError::Invalid(ValidationError::new(
            path,
            "is a duplicate key (readers disagree on which one counts)",
        ))),
        (Err(e), None) => Err(DecodeError::Malformed(e.to_string())),
    }
}

/// Decodes a JSON document as a frame's payload is decoded (a duplicate key refused, a bad
/// field named by its path), without a `type` or the frame size limit (the caller bounds its
/// read): the agent's own saved state, a file given on its command line. One way of decoding
/// each type keeps one copy of its decoder in the binary.
pub fn decode_document<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, DecodeError> {
    payload(strict_value(bytes)?)
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
