//! The frames an agent session sends back on its own: `error` answers (malformed, invalid,
//! `too_large` naming the size and the limit, with the refused frame's `seq` when it can be
//! read), close frames, and what to do with a frame that is not text.

use axum::extract::ws::{CloseFrame, Message};
use odac_protocol::{
    ControlMessage, DecodeError, ErrorCode, ErrorMessage, MAX_FRAME_BYTES, encode, error_reply,
};
use tokio::sync::mpsc;

/// A control message as a text frame.
pub(super) fn text(msg: &ControlMessage) -> Message {
    Message::Text(encode(msg).into())
}

pub(super) fn error_frame(code: ErrorCode, message: String, ref_seq: Option<u64>) -> Message {
    text(&ControlMessage::Error(ErrorMessage::new(
        code, message, ref_seq,
    )))
}

pub(super) fn close(code: u16, reason: &str) -> Message {
    Message::Close(Some(CloseFrame {
        code,
        reason: reason.to_owned().into(),
    }))
}

/// The answer to a frame that failed decoding: the protocol's (the agent's) `error_reply`,
/// or for an oversize frame the decode error itself.
pub(super) fn decode_error_frame(e: &DecodeError, frame: &[u8]) -> Message {
    match error_reply(frame, e) {
        Some(reply) => text(&ControlMessage::Error(reply)),
        None => error_frame(e.code(), e.to_string(), None),
    }
}

/// `error too_large` for a frame of `size` bytes (when known).
pub(super) fn too_large_frame(size: Option<usize>) -> Message {
    let size = size.map_or_else(|| "a frame".to_owned(), |n| format!("a frame of {n} bytes"));
    error_frame(
        ErrorCode::TooLarge,
        format!("{size} exceeds the limit of {MAX_FRAME_BYTES} bytes"),
        None,
    )
}

/// Whether a read error is the WebSocket layer refusing an oversize frame or message.
pub(super) fn is_oversize(e: &axum::Error) -> bool {
    e.to_string().contains("Space limit exceeded")
}

/// What a session does with a frame that is not text: an oversize one is refused with
/// `too_large` and close 1009, any other with `malformed` (the session goes on).
pub(super) fn non_text(out: &mpsc::UnboundedSender<Message>, len: usize) -> bool {
    if len > MAX_FRAME_BYTES {
        let _ = out.send(too_large_frame(Some(len)));
        let _ = out.send(close(1009, "frame too large"));
        return false;
    }
    let _ = out.send(error_frame(
        ErrorCode::Malformed,
        "binary frames are not supported".to_owned(),
        None,
    ));
    true
}
