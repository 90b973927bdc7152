//! The simulator's edges: every number in every request body is bounded (u64::MAX anywhere is
//! a 400 naming the field, never a panic), unknown fields are refused instead of ignored, every
//! error answer is JSON (404, 405, 413), clients that never finish their headers are dropped
//! within 10 s, and every oversize WebSocket frame — text or binary, in `hello` or later — is
//! answered with `too_large` and closed with 1009.

use crate::common;

use std::time::{Duration, Instant};

use common::{Sim, TOKEN};
use odac_protocol::{ControlMessage, ErrorCode, MAX_FRAME_BYTES};
use odac_simulator::fake_agent::agent_conn::{AgentConn, ConnError, Incoming};
use odac_simulator::fake_agent::inventories::profile;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const MAX: &str = "18446744073709551615";

fn field(v: &Value) -> &str {
    v["field"].as_str().unwrap_or_default()
}

#[test]
fn every_number_of_every_endpoint_is_bounded() {
    let sim = Sim::start_with(|c| c.enroll_codes = vec!["code-1".into()]);
    let _agent = sim.agent("agt_a", profile(3, "a"));
    sim.create_app_text(r#"{"name":"web","image":"busybox","gpu":{"runtime":"nvidia","count":1}}"#);
    let app = |extra: &str| format!(r#"{{"name":"n","image":"busybox",{extra}}}"#);
    let cases: Vec<(&str, String, String, &str)> = vec![
        (
            "POST",
            "/api/admin/faults".into(),
            format!(r#"{{"refuse_secs":{MAX}}}"#),
            "refuse_secs",
        ),
        (
            "POST",
            "/api/admin/faults".into(),
            r#"{"refuse_secs":86401}"#.into(),
            "refuse_secs",
        ),
        (
            "POST",
            "/api/admin/faults".into(),
            format!(r#"{{"ack_delay_ms":{MAX}}}"#),
            "ack_delay_ms",
        ),
        (
            "POST",
            "/api/admin/faults".into(),
            format!(r#"{{"clear":{MAX}}}"#),
            "clear",
        ),
        (
            "POST",
            "/api/apps".into(),
            app(&format!(r#""resources":{{"memory_bytes":{MAX}}}"#)),
            "resources.memory_bytes",
        ),
        (
            "POST",
            "/api/apps".into(),
            app(&format!(r#""resources":{{"cpus":{MAX}}}"#)),
            "resources.cpus",
        ),
        (
            "POST",
            "/api/apps".into(),
            app(&format!(r#""ports":[{{"container":{MAX}}}]"#)),
            "ports[0].container",
        ),
        (
            "POST",
            "/api/apps".into(),
            app(&format!(r#""ports":[{{"container":80,"host":{MAX}}}]"#)),
            "ports[0].host",
        ),
        (
            "POST",
            "/api/apps".into(),
            app(&format!(r#""gpu":{{"runtime":"nvidia","count":{MAX}}}"#)),
            "gpu.count",
        ),
        (
            "POST",
            "/api/apps".into(),
            app(&format!(r#""gpu":{{"runtime":"nvidia","count":"{MAX}"}}"#)),
            "gpu.count",
        ),
        (
            "POST",
            "/api/apps".into(),
            app(&format!(r#""host":{MAX}"#)),
            "host",
        ),
        (
            "POST",
            "/api/apps".into(),
            app(&format!(r#""restart_token":{MAX}"#)),
            "restart_token",
        ),
        (
            "PUT",
            "/api/apps/web/gpu".into(),
            format!(r#"{{"runtime":"nvidia","count":{MAX}}}"#),
            "gpu.count",
        ),
        (
            "PUT",
            "/api/apps/web/gpu".into(),
            format!(r#"{{"optional":{MAX}}}"#),
            "gpu.optional",
        ),
        (
            "POST",
            "/api/apps/web/restart".into(),
            format!(r#"{{"request_id":{MAX}}}"#),
            "request_id",
        ),
        (
            "POST",
            "/api/enroll".into(),
            format!(r#"{{"code":{MAX}}}"#),
            "code",
        ),
        (
            "POST",
            "/api/enroll".into(),
            format!(r#"{{"code":"code-1","agent_id":{MAX}}}"#),
            "agent_id",
        ),
        (
            "POST",
            "/api/enroll/codes".into(),
            format!(r#"{{"count":{MAX}}}"#),
            "count",
        ),
    ];
    for (method, path, body, want) in &cases {
        let (s, e) = sim.call(method, path, Some(body));
        assert_eq!(s, 400, "{method} {path} {body}: {e}");
        assert_eq!(field(&e), *want, "{method} {path} {body}: {e}");
        let msg = e["error"].as_str().unwrap();
        assert!(msg.starts_with(&format!("{want}: ")), "{msg}");
    }
    // nothing panicked and nothing changed: the server answers, no fault stands, the code is
    // unspent, the app keeps its GPU request
    let (s, f) = sim.call("GET", "/api/admin/faults", None);
    assert_eq!((s, f["refusing_secs_left"].clone()), (200, json!(0)));
    let (s, _) = sim.call("POST", "/api/enroll", Some(r#"{"code":"code-1"}"#));
    assert_eq!(s, 201);
    let (_, a) = sim.call("GET", "/api/apps/web", None);
    assert_eq!(a["requested"], json!({"runtime":"nvidia","count":1}));
    // the bounds themselves are accepted
    let (s, _) = sim.call(
        "POST",
        "/api/admin/faults",
        Some(r#"{"refuse_secs":86400,"ack_delay_ms":600000}"#),
    );
    assert_eq!(s, 200);
    sim.call("DELETE", "/api/admin/faults", None);
}

#[test]
fn unknown_fields_are_refused_in_every_body() {
    let sim = Sim::start_with(|c| c.enroll_codes = vec!["code-1".into()]);
    let _agent = sim.agent("agt_a", profile(3, "a"));
    sim.create_app_text(r#"{"name":"web","image":"busybox","gpu":{"runtime":"nvidia","count":2}}"#);
    for (method, path, body, want) in [
        (
            "PUT",
            "/api/apps/web/gpu",
            r#"{"cuont":2,"runtme":"nvidia"}"#,
            "gpu.cuont",
        ),
        (
            "POST",
            "/api/apps",
            r#"{"name":"b","image":"x","imgae":"y"}"#,
            "imgae",
        ),
        (
            "POST",
            "/api/apps",
            r#"{"name":"b","image":"x","gpu":{"runtime":"nvidia","opt":true}}"#,
            "gpu.opt",
        ),
        (
            "POST",
            "/api/apps",
            r#"{"name":"b","image":"x","volumes":[{"source":"v","target":"/d","ro":true}]}"#,
            "volumes[0].ro",
        ),
        (
            "POST",
            "/api/apps/web/restart",
            r#"{"requestid":"r1"}"#,
            "requestid",
        ),
        (
            "POST",
            "/api/admin/faults",
            r#"{"refuse_sec":5}"#,
            "refuse_sec",
        ),
        (
            "POST",
            "/api/enroll",
            r#"{"code":"code-1","agentid":"a"}"#,
            "agentid",
        ),
        ("POST", "/api/enroll/codes", r#"{"ttl":60}"#, "ttl"),
    ] {
        let (s, e) = sim.call(method, path, Some(body));
        assert_eq!((s, field(&e)), (400, want), "{method} {path} {body}: {e}");
        assert!(
            e["error"].as_str().unwrap().contains("unknown field"),
            "{e}"
        );
    }
    let (_, a) = sim.call("GET", "/api/apps/web", None);
    assert_eq!(
        a["requested"],
        json!({"runtime":"nvidia","count":2}),
        "gpu kept"
    );
    let (_, apps) = sim.call("GET", "/api/apps", None);
    assert_eq!(apps.as_array().unwrap().len(), 1);
}

#[test]
fn error_answers_are_json() {
    let sim = Sim::start();
    for (method, path, body, status) in [
        ("GET", "/api/nope", None, 404),
        ("GET", "/api/apps/nope", None, 404),
        ("DELETE", "/api/hosts", None, 405),
        ("POST", "/api/catalog", Some("{}"), 405),
        ("PUT", "/api/events/log", Some("{}"), 405),
        ("GET", "/agent/v1", None, 400),
    ] {
        let (s, v) = sim.call(method, path, body);
        assert_eq!(s, status, "{method} {path}: {v}");
        assert!(
            v["error"].as_str().is_some_and(|e| !e.is_empty()),
            "{method} {path}: not a JSON error: {v}"
        );
    }
    let big = format!(
        r#"{{"name":"big","image":"busybox","env":{{"A":"{}"}}}}"#,
        "x".repeat(3 * 1024 * 1024)
    );
    // the server answers once it has read its limit and closes; a client still writing the rest
    // may see the connection reset first (a race of the kernel, not of the server): try again
    let answer = (0..5).find_map(|_| {
        sim.try_call_auth("POST", "/api/apps", Some(&big), None)
            .ok()
    });
    let (s, v) = answer.expect("an answer to the oversized body in 5 tries");
    assert_eq!(s, 413, "{v}");
    assert!(
        v["error"]
            .as_str()
            .unwrap()
            .contains("larger than the limit"),
        "{v}"
    );
}

/// A TLS connection to the simulator that completed its handshake.
async fn tls_conn(
    sim_addr: std::net::SocketAddr,
    ca: &[u8],
) -> tokio_rustls::client::TlsStream<tokio::net::TcpStream> {
    let cfg = odac_simulator::server::tls::client_config(ca).unwrap();
    let tcp = tokio::net::TcpStream::connect(sim_addr).await.unwrap();
    tokio_rustls::TlsConnector::from(cfg)
        .connect("localhost".try_into().unwrap(), tcp)
        .await
        .unwrap()
}

#[test]
fn clients_that_never_finish_their_headers_are_dropped_within_10_s() {
    let sim = Sim::start();
    let addr = sim.server().addr;
    let ca = sim.server().ca_pem.clone().into_bytes();
    let started = Instant::now();
    let closed_after: Vec<Duration> = sim.rt.block_on(async move {
        let mut tasks = Vec::new();
        for i in 0..30 {
            let ca = ca.clone();
            tasks.push(tokio::spawn(async move {
                let mut c = tls_conn(addr, &ca).await;
                let t0 = Instant::now();
                if i % 2 == 1 {
                    // slow loris: a partial request, then one header byte a second
                    c.write_all(b"GET /api/hosts HTTP/1.1\r\nHost: localhost\r\n")
                        .await
                        .unwrap();
                }
                let mut buf = [0u8; 256];
                loop {
                    let read = tokio::time::timeout(Duration::from_secs(1), c.read(&mut buf)).await;
                    match read {
                        Ok(Ok(0) | Err(_)) => return t0.elapsed(),
                        Ok(Ok(_)) => {}
                        Err(_) => {
                            if t0.elapsed() > Duration::from_secs(30) {
                                return t0.elapsed();
                            }
                            if i % 2 == 1 && c.write_all(b"X").await.is_err() {
                                return t0.elapsed();
                            }
                        }
                    }
                }
            }));
        }
        let mut out = Vec::new();
        for t in tasks {
            out.push(t.await.unwrap());
        }
        out
    });
    let worst = closed_after.iter().max().unwrap();
    println!(
        "30 silent or slow clients dropped after {:.1} s at most",
        worst.as_secs_f64()
    );
    assert!(*worst <= Duration::from_secs(12), "{closed_after:?}");
    assert!(started.elapsed() < Duration::from_secs(20));
    // a normal request still works
    let (s, _) = sim.call("GET", "/api/hosts", None);
    assert_eq!(s, 200);
}

fn expect_too_large_then_1009(sim: &Sim, c: &mut AgentConn, what: &str) {
    sim.rt.block_on(async {
        loop {
            match c.recv_timeout(Duration::from_secs(10)).await {
                Ok(Incoming::Message(ControlMessage::Error(e))) => {
                    assert_eq!(e.code, ErrorCode::TooLarge, "{what}: {e:?}");
                    break;
                }
                Ok(Incoming::Message(ControlMessage::DesiredState(_) | ControlMessage::Ack(_))) => {
                }
                other => panic!("{what}: too_large expected, got {other:?}"),
            }
        }
        let closed = c.recv_timeout(Duration::from_secs(10)).await;
        assert!(
            matches!(closed, Err(ConnError::Closed(Some(1009)))),
            "{what}: close 1009 expected, got {closed:?}"
        );
    });
}

#[test]
fn every_oversize_frame_gets_too_large_then_1009() {
    let sim = Sim::start();
    let url = sim.server().agents_url();
    let ca = sim.server().ca_pem.clone();
    let big_text = |n: usize| {
        format!(
            r#"{{"type":"event","seq":3,"message":"{}"}}"#,
            "x".repeat(n)
        )
    };

    // in a session: text just over the limit, text over 2 MiB, binary over the limit
    for (what, text, binary) in [
        ("text of 1 MiB + 1", Some(big_text(MAX_FRAME_BYTES)), None),
        ("text of 3 MiB", Some(big_text(3 * MAX_FRAME_BYTES)), None),
        (
            "binary of 1 MiB + 1",
            None,
            Some(vec![b'x'; MAX_FRAME_BYTES + 1]),
        ),
        (
            "binary of 3 MiB",
            None,
            Some(vec![b'x'; 3 * MAX_FRAME_BYTES]),
        ),
    ] {
        let mut c = sim.agent("agt_a", profile(3, "a"));
        sim.rt.block_on(async {
            match (text, binary) {
                (Some(t), _) => c.send_raw(t).await.unwrap(),
                (_, Some(b)) => c.send_binary(b).await.unwrap(),
                _ => unreachable!(),
            }
        });
        expect_too_large_then_1009(&sim, &mut c, what);
    }
    // a small binary frame is still only malformed, and the session goes on
    let mut c = sim.agent("agt_a", profile(3, "a"));
    sim.rt.block_on(c.send_binary(vec![1, 2, 3])).unwrap();
    let m = sim
        .rt
        .block_on(c.recv_timeout(Duration::from_secs(5)))
        .unwrap();
    assert!(
        matches!(&m, Incoming::Message(ControlMessage::Error(e)) if e.code == ErrorCode::Malformed),
        "{m:?}"
    );

    // as the first frame, instead of hello
    for (what, text, binary) in [
        (
            "first text frame of 1 MiB + 1",
            Some(big_text(MAX_FRAME_BYTES)),
            None,
        ),
        (
            "first text frame of 3 MiB",
            Some(big_text(3 * MAX_FRAME_BYTES)),
            None,
        ),
        (
            "first binary frame of 1 MiB + 1",
            None,
            Some(vec![b'x'; MAX_FRAME_BYTES + 1]),
        ),
    ] {
        let mut c = sim
            .rt
            .block_on(AgentConn::connect_as(
                &url,
                ca.as_bytes(),
                TOKEN,
                Some("agt_a"),
            ))
            .unwrap();
        sim.rt.block_on(async {
            match (text, binary) {
                (Some(t), _) => c.send_raw(t).await.unwrap(),
                (_, Some(b)) => c.send_binary(b).await.unwrap(),
                _ => unreachable!(),
            }
        });
        expect_too_large_then_1009(&sim, &mut c, what);
    }
}
