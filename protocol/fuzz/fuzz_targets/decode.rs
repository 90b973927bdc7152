//! Fuzz target: any bytes through both decoders must not panic, and a frame that decodes must
//! re-encode to a frame that decodes to the same message.
#![no_main]

use libfuzzer_sys::fuzz_target;
use odac_protocol::{decode_agent, decode_control, encode};

fuzz_target!(|bytes: &[u8]| {
    if let Ok(msg) = decode_agent(bytes) {
        assert_eq!(decode_agent(encode(&msg).as_bytes()), Ok(msg));
    }
    if let Ok(msg) = decode_control(bytes) {
        assert_eq!(decode_control(encode(&msg).as_bytes()), Ok(msg));
    }
});
