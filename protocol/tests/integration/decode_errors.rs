//! Frame decoding errors: the size limit is checked before parsing, malformed JSON and unknown
//! types are told apart, and bad fields are named by their path.

use odac_protocol::{
    AgentMessage, ControlMessage, DecodeError, ErrorCode, MAX_FRAME_BYTES, decode_agent,
    decode_control,
};

fn invalid(r: Result<impl std::fmt::Debug, DecodeError>) -> (String, String) {
    match r {
        Err(DecodeError::Invalid(e)) => (e.field, e.message),
        other => panic!("expected Invalid, got {other:?}"),
    }
}

#[test]
fn oversize_frames_are_refused_before_parsing() {
    let big = vec![b'x'; MAX_FRAME_BYTES + 1];
    assert_eq!(
        decode_control(&big),
        Err(DecodeError::TooLarge {
            size: MAX_FRAME_BYTES + 1
        })
    );
    assert_eq!(decode_agent(&big).unwrap_err().code(), ErrorCode::TooLarge);
    // a frame of exactly the limit is parsed (and here, being garbage, is malformed)
    let at_limit = vec![b' '; MAX_FRAME_BYTES];
    assert!(matches!(
        decode_control(&at_limit),
        Err(DecodeError::Malformed(_))
    ));
}

#[test]
fn a_valid_frame_just_under_the_limit_decodes() {
    let pad = "x".repeat(MAX_FRAME_BYTES - 200);
    let frame = format!(r#"{{"type":"ack","seq":1,"pad":"{pad}"}}"#);
    assert!(frame.len() <= MAX_FRAME_BYTES);
    assert_eq!(
        decode_agent(frame.as_bytes()).unwrap(),
        AgentMessage::Ack(odac_protocol::Ack { seq: 1 })
    );
}

#[test]
fn malformed_frames() {
    for frame in [
        &b""[..],
        b"{",
        b"not json",
        b"[1,2]",
        b"\"hello\"",
        b"{}",
        b"{\"type\":5}",
        b"{\"type\":null,\"seq\":1}",
        b"\xff\xfe",
    ] {
        let err = decode_control(frame).unwrap_err();
        assert!(
            matches!(err, DecodeError::Malformed(_)),
            "{frame:?}: {err:?}"
        );
        assert_eq!(err.code(), ErrorCode::Malformed);
    }
    assert_eq!(
        decode_control(b"{}").unwrap_err().to_string(),
        "malformed frame: missing field `type`"
    );
}

#[test]
fn unknown_types_are_reported_as_such() {
    assert_eq!(
        decode_control(br#"{"type":"metrics","seq":1}"#),
        Err(DecodeError::UnknownType("metrics".into()))
    );
    // a type of the other direction is unknown here
    assert_eq!(
        decode_control(br#"{"type":"hello"}"#),
        Err(DecodeError::UnknownType("hello".into()))
    );
    assert_eq!(
        decode_agent(br#"{"type":"welcome","host_id":"h"}"#),
        Err(DecodeError::UnknownType("welcome".into()))
    );
    assert_eq!(
        decode_agent(br#"{"type":"x"}"#).unwrap_err().code(),
        ErrorCode::UnknownType
    );
}

#[test]
fn bad_fields_are_named_by_path() {
    let (field, message) = invalid(decode_control(
        br#"{"type":"desired_state","seq":1,"generation":2,"apps":[{"name":"a","image":"x"},{"image":"y"}]}"#,
    ));
    assert_eq!(
        (field.as_str(), message.as_str()),
        ("apps[1].name", "is missing")
    );

    let (field, _) = invalid(decode_control(
        br#"{"type":"desired_state","seq":1,"generation":"two","apps":[]}"#,
    ));
    assert_eq!(field, "generation");

    let (field, _) = invalid(decode_control(
        br#"{"type":"app_upsert","seq":1,"generation":2,"app":{"name":"a","image":"x","ports":[{"container":-1}]}}"#,
    ));
    assert_eq!(field, "app.ports[0].container");

    let (field, message) = invalid(decode_control(br#"{"type":"ack"}"#));
    assert_eq!((field.as_str(), message.as_str()), ("seq", "is missing"));

    let (field, message) = invalid(decode_control(
        br#"{"type":"app_upsert","seq":1,"generation":2,"app":{"name":"Bad_Name","image":"x"}}"#,
    ));
    assert_eq!(field, "app.name");
    assert!(message.contains("lowercase DNS label"), "{message}");

    let (field, _) = invalid(decode_control(
        br#"{"type":"app_delete","seq":1,"generation":2,"name":""}"#,
    ));
    assert_eq!(field, "name");

    let (field, _) = invalid(decode_agent(
        br#"{"type":"app_status","seq":1,"status":{"name":"a","generation":1,"state":"exploded"}}"#,
    ));
    assert_eq!(field, "status.state");

    let (field, _) = invalid(decode_agent(
        br#"{"type":"inventory","seq":1,"inventory":{"host":{"hostname":"h","os":"o","kernel":"k","arch":"a","cpus":1,"memory_bytes":1},"accelerators":{"matrox":{"schedulable":false}},"engine":{"reachable":false}}}"#,
    ));
    assert_eq!(field, "inventory.accelerators");
}

#[test]
fn app_spec_rules() {
    let cases = [
        (r#"{"name":"a"}"#, "app.image"),
        (
            r#"{"name":"a","image":"x","source":{"url":"https://h/r.git"}}"#,
            "app.source",
        ),
        (
            r#"{"name":"a","source":{"url":"ftp://h/r"}}"#,
            "app.source.url",
        ),
        (
            r#"{"name":"a","image":"x","ports":[{"container":70000}]}"#,
            "app.ports[0].container",
        ),
        (
            r#"{"name":"a","image":"x","ports":[{"host":0,"container":80}]}"#,
            "app.ports[0].host",
        ),
        (
            r#"{"name":"a","image":"x","volumes":[{"source":"/etc/../root","target":"/x"}]}"#,
            "app.volumes[0].source",
        ),
        (
            r#"{"name":"a","image":"x","volumes":[{"source":"data","target":"rel"}]}"#,
            "app.volumes[0].target",
        ),
        (
            r#"{"name":"a","image":"x","volumes":[{"source":"bad name","target":"/x"}]}"#,
            "app.volumes[0].source",
        ),
        (
            r#"{"name":"a","image":"x","resources":{"cpus":0}}"#,
            "app.resources.cpus",
        ),
        // rounds to 0 nano-cpus, which the engine reads as no limit
        (
            r#"{"name":"a","image":"x","resources":{"cpus":4.9e-10}}"#,
            "app.resources.cpus",
        ),
        (
            r#"{"name":"a","image":"x","resources":{"memory_bytes":1024}}"#,
            "app.resources.memory_bytes",
        ),
        (r#"{"name":"a","image":"x","env":{"A=B":"c"}}"#, "app.env"),
    ];
    for (app, field) in cases {
        let frame = format!(r#"{{"type":"app_upsert","seq":1,"generation":1,"app":{app}}}"#);
        let (got, msg) = invalid(decode_control(frame.as_bytes()));
        assert_eq!(got, field, "{app}: {msg}");
    }
    let ok = br#"{"type":"app_upsert","seq":1,"generation":1,"app":{"name":"a","source":{"url":"git@github.com:o/r.git","branch":"main"},"volumes":[{"source":"/srv/a","target":"/a","read_only":true},{"source":"data","target":"/data"}],"resources":{"memory_bytes":6291456,"cpus":0.5}}}"#;
    let ControlMessage::AppUpsert(up) = decode_control(ok).unwrap() else {
        panic!("not an upsert")
    };
    assert!(up.app.volumes[0].is_bind());
    assert!(!up.app.volumes[1].is_bind());
}

#[test]
fn unknown_error_codes_are_kept() {
    let frame = br#"{"type":"error","code":"rate_limited","message":"slow down"}"#;
    let ControlMessage::Error(e) = decode_control(frame).unwrap() else {
        panic!("not an error")
    };
    assert_eq!(e.code, ErrorCode::Other("rate_limited".into()));
    assert_eq!(
        odac_protocol::encode(&ControlMessage::Error(e)).as_bytes(),
        frame
    );
}

#[test]
fn deeply_nested_json_is_malformed_not_a_crash() {
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    assert!(matches!(
        decode_agent(deep.as_bytes()),
        Err(DecodeError::Malformed(_))
    ));
    let deep_obj = format!(
        r#"{{"type":"ack","seq":1,"x":{}{}}}"#,
        "[".repeat(5000),
        "]".repeat(5000)
    );
    assert!(matches!(
        decode_agent(deep_obj.as_bytes()),
        Err(DecodeError::Malformed(_))
    ));
}

#[test]
fn error_replies() {
    let frame = br#"{"type":"app_upsert","seq":12,"generation":2,"app":{"name":"a","image":"x","gpu":{"runtime":"nvidia","count":0}}}"#;
    let err = decode_control(frame).unwrap_err();
    let reply = odac_protocol::error_reply(frame, &err).unwrap();
    assert_eq!(reply.code, ErrorCode::Invalid);
    assert_eq!(reply.message, "app.gpu.count: 0 is out of range 1..=64");
    assert_eq!(reply.ref_seq, Some(12));

    let frame = br#"{"type":"metrics","seq":3}"#;
    let reply = odac_protocol::error_reply(frame, &decode_control(frame).unwrap_err()).unwrap();
    assert_eq!(
        (reply.code, reply.message.as_str(), reply.ref_seq),
        (
            ErrorCode::UnknownType,
            "unknown message type \"metrics\"",
            Some(3)
        )
    );

    let reply = odac_protocol::error_reply(b"{", &decode_control(b"{").unwrap_err()).unwrap();
    assert_eq!((reply.code, reply.ref_seq), (ErrorCode::Malformed, None));

    let big = vec![b' '; MAX_FRAME_BYTES + 1];
    assert_eq!(
        odac_protocol::error_reply(&big, &decode_agent(&big).unwrap_err()),
        None
    );
}

#[test]
fn a_duplicate_key_is_refused_naming_its_path() {
    for (frame, path) in [
        (
            r#"{"type":"app_upsert","seq":1,"generation":1,"app":{"name":"a","image":"x","image":"evil"}}"#,
            "app.image",
        ),
        (
            r#"{"type":"desired_state","seq":1,"generation":1,"apps":[{"name":"a","image":"x","env":{"A":"1","A":"2"}}]}"#,
            "apps[0].env.A",
        ),
        (r#"{"type":"ack","type":"ack","seq":1}"#, "type"),
    ] {
        let e = decode_control(frame.as_bytes()).unwrap_err();
        assert_eq!(e.code(), ErrorCode::Invalid, "{frame}: {e}");
        assert!(
            e.reply_text()
                .starts_with(&format!("{path}: is a duplicate key")),
            "{frame}: {e}"
        );
    }
    // the same key in two objects is fine
    let ok = r#"{"type":"desired_state","seq":1,"generation":1,"apps":[{"name":"a","image":"x"},{"name":"b","image":"x"}]}"#;
    assert!(decode_control(ok.as_bytes()).is_ok());
}

#[test]
fn a_document_decodes_as_a_payload_without_a_type() {
    use odac_protocol::{DesiredState, decode_document};
    let ok: DesiredState =
        decode_document(br#"{"generation":7,"apps":[{"name":"a","image":"x"}]}"#).unwrap();
    assert_eq!((ok.generation, ok.apps.len()), (7, 1));
    // a bad field is named by its path, a duplicate key refused, bad JSON malformed
    let e =
        decode_document::<DesiredState>(br#"{"generation":1,"apps":[{"name":5}]}"#).unwrap_err();
    assert!(e.reply_text().starts_with("apps[0].name: "), "{e}");
    let e = decode_document::<DesiredState>(br#"{"generation":1,"generation":2,"apps":[]}"#)
        .unwrap_err();
    assert_eq!(
        e.reply_text(),
        "generation: is a duplicate key (readers disagree on which one counts)"
    );
    let e = decode_document::<DesiredState>(b"{\"generation\":").unwrap_err();
    assert_eq!(e.code(), ErrorCode::Malformed, "{e}");
    // no frame size limit: the caller bounds its read
    let pad = "x".repeat(MAX_FRAME_BYTES + 10);
    let big = format!(r#"{{"generation":1,"apps":[],"pad":"{pad}"}}"#);
    assert!(decode_document::<DesiredState>(big.as_bytes()).is_ok());
}
