//! ODAC agent wire protocol v1: the JSON messages exchanged between `odac-agent` and the
//! control plane, their validation and their JSON Schema. This crate does no IO.

/// Protocol version carried in the WebSocket subprotocol and in `hello`.
pub const PROTOCOL_VERSION: u32 = 1;
