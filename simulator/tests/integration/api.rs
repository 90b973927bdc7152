//! REST API against an in-process simulator with protocol-level fake agents: hosts, app
//! create (ODAC payload, catalog, host resolution), validation errors naming the protocol's
//! fields, 404s, GPU changes, restart tokens, delete, SSE, enrollment, API token, persistence.

use crate::common;

use std::io::{BufRead, BufReader, Write};
use std::time::Duration;

use common::Sim;
use odac_simulator::fake_agent::inventories::profile;
use serde_json::{Value, json};

#[test]
fn hosts_show_the_fake_agents_inventory() {
    let sim = Sim::start();
    let (s, v) = sim.call("GET", "/api/hosts", None);
    assert_eq!((s, v), (200, json!([])));
    let _a = sim.agent("agt_a", profile(0, "box-a"));
    let hosts = sim.wait_api("/api/hosts", |v| v[0]["inventory"].is_object());
    assert_eq!(hosts[0]["id"], "agt_a");
    assert_eq!(hosts[0]["hostname"], "box-a");
    assert_eq!(hosts[0]["connected"], true);
    assert_eq!(hosts[0]["schedulable"], json!(["nvidia"]));
    assert_eq!(hosts[0]["gpus"][0]["vendor"], "nvidia");
    let (s, one) = sim.call("GET", "/api/hosts/agt_a", None);
    assert_eq!(s, 200);
    assert_eq!(one["hostname"], "box-a");
    let (s, by_name) = sim.call("GET", "/api/hosts/box-a", None);
    assert_eq!((s, by_name["id"].clone()), (200, json!("agt_a")));
    let (s, e) = sim.call("GET", "/api/hosts/nope", None);
    assert_eq!(s, 404);
    assert_eq!(e["error"], "unknown host \"nope\"");
}

#[test]
fn create_needs_a_host_unless_exactly_one_is_connected() {
    let sim = Sim::start();
    let body = r#"{"name":"web","image":"busybox"}"#;
    let (s, e) = sim.call("POST", "/api/apps", Some(body));
    assert_eq!(s, 400);
    assert_eq!(e["field"], "host");
    let _a = sim.agent("agt_a", profile(3, "a"));
    let (s, v) = sim.call("POST", "/api/apps", Some(body));
    assert_eq!(s, 201, "{v}");
    assert_eq!(v["host"], "agt_a");
    assert_eq!(v["state"], "pending");
    let (s, e) = sim.call("POST", "/api/apps", Some(body));
    assert_eq!((s, e["field"].clone()), (409, json!("name")));
    let _b = sim.agent("agt_b", profile(3, "b"));
    let (s, e) = sim.call(
        "POST",
        "/api/apps",
        Some(r#"{"name":"w2","image":"busybox"}"#),
    );
    assert_eq!((s, e["field"].clone()), (400, json!("host")));
    assert!(e["error"].as_str().unwrap().contains("2 hosts"), "{e}");
    let (s, v) = sim.call(
        "POST",
        "/api/apps",
        Some(r#"{"name":"w2","image":"busybox","host":"b"}"#),
    );
    assert_eq!((s, v["host"].clone()), (201, json!("agt_b")));
}

#[test]
fn odac_payload_resolves_the_catalog_and_is_kept_as_sent() {
    let sim = Sim::start();
    let _a = sim.agent("agt_a", profile(3, "a"));
    let body = r#"{"name":"ollama-app","type":"app","app":"ollama","gpu":{"runtime":"nvidia","count":1,"optional":true}}"#;
    let (s, v) = sim.call("POST", "/api/apps", Some(body));
    assert_eq!(s, 201, "{v}");
    assert_eq!(v["spec"]["image"], "ollama/ollama:0.6.2");
    assert_eq!(v["spec"]["type"], "app");
    assert_eq!(v["spec"]["app"], "ollama");
    assert_eq!(
        v["requested"],
        json!({"runtime":"nvidia","count":1,"optional":true})
    );
    let (s, cat) = sim.call("GET", "/api/catalog", None);
    assert_eq!(s, 200);
    let names: Vec<&str> = cat
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["ollama", "jellyfin", "demo", "frigate", "ffmpeg"]);
    // the entry's port, volume and env fill what the payload left out
    assert_eq!(v["spec"]["ports"], json!([{"container": 11434}]));
    assert_eq!(
        v["spec"]["volumes"],
        json!([{"source": "models", "target": "/root/.ollama"}])
    );
    assert_eq!(v["spec"]["env"]["OLLAMA_HOST"], "0.0.0.0:11434");
}

#[test]
fn validation_errors_name_the_protocol_field() {
    let sim = Sim::start();
    let _a = sim.agent("agt_a", profile(3, "a"));
    for (body, field, status) in [
        (
            r#"{"name":"a","image":"x","gpu":{"runtime":"nvidia","count":0}}"#,
            "gpu.count",
            400,
        ),
        (
            r#"{"name":"a","image":"x","gpu":{"runtime":"nvidia","optional":"maybe"}}"#,
            "gpu.optional",
            400,
        ),
        (r#"{"name":"Bad_Name","image":"x"}"#, "name", 400),
        (r#"{"name":"a"}"#, "image", 400),
        (r#"{"name":"a","app":"nope"}"#, "app", 400),
        (r#"{"name":"a","image":"x","env":{"A":5}}"#, "env.A", 400),
        (r#"{"name":"a","image":"x","host":"ghost"}"#, "host", 400),
        (r#"not json"#, "body", 400),
    ] {
        let (s, e) = sim.call("POST", "/api/apps", Some(body));
        assert_eq!(s, status, "{body}: {e}");
        assert_eq!(e["field"], field, "{body}: {e}");
        assert!(e["error"].as_str().unwrap().len() > 5, "{e}");
    }
    let (_, e) = sim.call(
        "POST",
        "/api/apps",
        Some(r#"{"name":"a","image":"x","gpu":{"runtime":"nvidia","count":0}}"#),
    );
    assert_eq!(e["error"], "gpu.count: 0 is out of range 1..=64");
}

#[test]
fn host_access_fields_are_checked_and_odac_shm_size_is_taken() {
    let sim = Sim::start();
    let _a = sim.agent("agt_a", profile(3, "a"));
    let app = |extra: &str| format!(r#"{{"name":"media","image":"x",{extra}}}"#);
    for (extra, field, words) in [
        (
            r#""caps":["SYS_ADMIN"]"#,
            "caps[0]",
            "caps may only be NET_ADMIN, NET_RAW, NET_BIND_SERVICE, IPC_LOCK, SYS_NICE",
        ),
        (
            r#""caps":["net_raw","ALL"]"#,
            "caps[1]",
            "\"ALL\" is not allowed",
        ),
        (r#""shmSize":"512""#, "shm_size", "has no unit"),
        (r#""shm_size":"65g""#, "shm_size", "out of range"),
        (
            r#""shm_size":"512m","shmSize":"512m""#,
            "shm_size",
            "not both",
        ),
        (
            r#""sysctls":{"kernel.core_pattern":"|/x"}"#,
            "sysctls.kernel.core_pattern",
            "not a namespaced sysctl",
        ),
        (r#""devices":["/dev/nvidia0"]"#, "devices[0]", "gpu device"),
    ] {
        let body = app(extra);
        let (s, e) = sim.call("POST", "/api/apps", Some(&body));
        assert_eq!((s, e["field"].as_str()), (400, Some(field)), "{body}: {e}");
        let error = e["error"].as_str().unwrap_or_default();
        assert!(error.contains(words), "{body}: {error}");
    }
    let body = app(
        r#""shmSize":"512m","caps":["net_admin"],"sysctls":{"net.ipv4.ip_forward":true},"devices":["/dev/apex_0"]"#,
    );
    let (s, v) = sim.call("POST", "/api/apps", Some(&body));
    assert_eq!(s, 201, "{v}");
    assert_eq!(v["spec"]["shm_size"], "512m");
    assert_eq!(v["spec"].get("shmSize"), None);
    assert_eq!(v["spec"]["caps"], json!(["net_admin"]));
    assert_eq!(v["spec"]["sysctls"], json!({"net.ipv4.ip_forward": true}));
    assert_eq!(v["spec"]["devices"], json!(["/dev/apex_0"]));
    // the catalog's Frigate brings its /dev/shm size; its Coral device only when asked for
    let (s, v) = sim.call(
        "POST",
        "/api/apps",
        Some(r#"{"name":"nvr","app":"frigate"}"#),
    );
    assert_eq!(s, 201, "{v}");
    assert_eq!(v["spec"]["shm_size"], "512m");
    assert_eq!(v["spec"].get("devices"), None);
    let (s, v) = sim.call(
        "POST",
        "/api/apps",
        Some(r#"{"name":"nvr2","app":"frigate","shmSize":"1g","devices":["/dev/apex_0"]}"#),
    );
    assert_eq!(s, 201, "{v}");
    assert_eq!(
        (v["spec"]["shm_size"].clone(), v["spec"]["devices"].clone()),
        (json!("1g"), json!(["/dev/apex_0"]))
    );
}

#[test]
fn unknown_apps_are_404_everywhere() {
    let sim = Sim::start();
    for (m, p, b) in [
        ("GET", "/api/apps/nope", None),
        ("DELETE", "/api/apps/nope", None),
        ("PUT", "/api/apps/nope/gpu", Some("false")),
        ("POST", "/api/apps/nope/restart", Some("{}")),
    ] {
        let (s, e) = sim.call(m, p, b);
        assert_eq!(s, 404, "{m} {p}");
        assert_eq!(e["error"], "unknown app \"nope\"");
    }
    let (s, _) = sim.call("GET", "/api/nothing-here", None);
    assert_eq!(s, 404);
}

#[test]
fn gpu_restart_and_delete_reach_the_agent() {
    let sim = Sim::start();
    let mut agent = sim.agent("agt_a", profile(3, "a"));
    sim.create_app_text(r#"{"name":"web","image":"busybox"}"#);
    let next = |agent: &mut odac_simulator::fake_agent::agent_conn::AgentConn| {
        sim.rt.block_on(async {
            match agent.recv_timeout(Duration::from_secs(5)).await.unwrap() {
                odac_simulator::fake_agent::agent_conn::Incoming::Message(m) => m,
                other => panic!("{other:?}"),
            }
        })
    };
    let odac_protocol::ControlMessage::AppUpsert(up) = next(&mut agent) else {
        panic!("upsert expected")
    };
    assert_eq!(up.app.name, "web");
    let g1 = up.generation;

    let (s, v) = sim.call("PUT", "/api/apps/web/gpu", Some("true"));
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["app"]["requested"], json!({"optional": true}));
    assert_eq!(v["restart_required_to_apply"], false, "pending app");
    let odac_protocol::ControlMessage::AppUpsert(up) = next(&mut agent) else {
        panic!("upsert expected")
    };
    assert!(up.generation > g1);
    assert!(up.app.gpu.unwrap().is_optional());

    let (s, e) = sim.call(
        "PUT",
        "/api/apps/web/gpu",
        Some(r#"{"runtime":"nvidia","count":0}"#),
    );
    assert_eq!((s, e["field"].clone()), (400, json!("gpu.count")));
    let (s, e) = sim.call("PUT", "/api/apps/web/gpu", Some("3"));
    assert_eq!((s, e["field"].clone()), (400, json!("gpu")));

    let (s, v) = sim.call("PUT", "/api/apps/web/gpu", Some("null"));
    assert_eq!((s, v["app"]["requested"].clone()), (200, Value::Null));
    let odac_protocol::ControlMessage::AppUpsert(up) = next(&mut agent) else {
        panic!("upsert expected")
    };
    assert_eq!(up.app.gpu, None);

    let (s, v1) = sim.call("POST", "/api/apps/web/restart", None);
    assert_eq!(s, 200);
    let t1 = v1["restart_token"].as_str().unwrap().to_owned();
    let (_, v2) = sim.call("POST", "/api/apps/web/restart", None);
    assert_ne!(v2["restart_token"].as_str().unwrap(), t1);
    for _ in 0..2 {
        let odac_protocol::ControlMessage::AppUpsert(up) = next(&mut agent) else {
            panic!("upsert expected")
        };
        assert!(up.app.restart_token.is_some());
    }

    // a restart retried with the same request id restarts once; a new id restarts again
    let (s, r1) = sim.call(
        "POST",
        "/api/apps/web/restart",
        Some(r#"{"request_id":"click-1"}"#),
    );
    assert_eq!(s, 200, "{r1}");
    let odac_protocol::ControlMessage::AppUpsert(up) = next(&mut agent) else {
        panic!("upsert expected")
    };
    assert_eq!(
        up.app.restart_token.as_ref(),
        r1["restart_token"].as_str().map(str::to_owned).as_ref()
    );
    let (s, r2) = sim.call(
        "POST",
        "/api/apps/web/restart",
        Some(r#"{"request_id":"click-1"}"#),
    );
    assert_eq!(
        (s, &r2["restart_token"]),
        (200, &r1["restart_token"]),
        "a retry"
    );
    let (_, r3) = sim.call(
        "POST",
        "/api/apps/web/restart",
        Some(r#"{"request_id":"click-2"}"#),
    );
    assert_ne!(r3["restart_token"], r1["restart_token"]);
    let odac_protocol::ControlMessage::AppUpsert(up) = next(&mut agent) else {
        panic!("one upsert for the new id, none for the retry")
    };
    assert_eq!(
        up.app.restart_token.as_ref(),
        r3["restart_token"].as_str().map(str::to_owned).as_ref()
    );
    for (body, field) in [
        (r#"{"request_id":""}"#, "request_id"),
        (r#"{"request_id":"has space"}"#, "request_id"),
        (r#"{"request_id":7}"#, "request_id"),
        (r#"{"id":"x"}"#, "id"),
        ("{", "body"),
    ] {
        let (s, e) = sim.call("POST", "/api/apps/web/restart", Some(body));
        assert_eq!((s, e["field"].as_str()), (400, Some(field)), "{body}: {e}");
    }
    let (s, _) = sim.call(
        "POST",
        "/api/apps/nope/restart",
        Some(r#"{"request_id":"click-3"}"#),
    );
    assert_eq!(s, 404);

    let (s, v) = sim.call("DELETE", "/api/apps/web", None);
    assert_eq!((s, v), (200, json!({"deleted": "web"})));
    let odac_protocol::ControlMessage::AppDelete(del) = next(&mut agent) else {
        panic!("delete expected")
    };
    assert_eq!(del.name, "web");
    let (_, apps) = sim.call("GET", "/api/apps", None);
    assert_eq!(apps, json!([]));
}

#[test]
fn gpu_change_on_a_running_app_says_restart_required() {
    let sim = Sim::start();
    let mut agent = sim.agent("agt_a", profile(3, "a"));
    sim.create_app_text(r#"{"name":"web","image":"busybox"}"#);
    sim.rt.block_on(async {
        agent.recv_timeout(Duration::from_secs(5)).await.unwrap();
        let mut st = odac_simulator::fake_agent::sim_agent::status_for(
            &odac_protocol::AppSpec::new("web", "busybox"),
            &profile(3, "a"),
            2,
        );
        st.state = odac_protocol::AppState::Running;
        agent
            .send(&odac_protocol::AgentMessage::AppStatus(
                odac_protocol::AppStatusReport { seq: 2, status: st },
            ))
            .await
            .unwrap();
    });
    sim.wait_api("/api/apps/web", |v| v["state"] == "running");
    let (s, v) = sim.call("PUT", "/api/apps/web/gpu", Some(r#"{"optional":true}"#));
    assert_eq!(s, 200);
    assert_eq!(v["restart_required_to_apply"], true);
}

#[test]
fn sse_streams_fleet_changes() {
    let sim = Sim::start();
    let _a = sim.agent("agt_a", profile(3, "a"));
    let addr = sim.server().addr;
    let ca = sim.server().ca_pem.clone();
    // a raw TLS client reading the SSE stream
    let cfg = odac_simulator::server::tls::client_config(ca.as_bytes()).unwrap();
    let conn = rustls::ClientConnection::new(cfg, "127.0.0.1".try_into().unwrap()).unwrap();
    let tcp = std::net::TcpStream::connect(addr).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    write!(
        tls,
        "GET /api/events HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n"
    )
    .unwrap();
    tls.flush().unwrap();
    let mut reader = BufReader::new(tls);
    let mut line = String::new();
    let mut seen_hello = false;
    while reader.read_line(&mut line).unwrap() > 0 {
        if line.starts_with("event: hello") {
            seen_hello = true;
            break;
        }
        line.clear();
    }
    assert!(seen_hello);
    sim.create_app_text(r#"{"name":"web","image":"busybox"}"#);
    let mut app_event = None;
    let mut next_is_app = false;
    line.clear();
    while reader.read_line(&mut line).unwrap() > 0 {
        if line.starts_with("event: app") && !line.contains("deleted") {
            next_is_app = true;
        } else if next_is_app && line.starts_with("data: ") {
            app_event = Some(serde_json::from_str::<Value>(line[6..].trim()).unwrap());
            break;
        }
        line.clear();
    }
    assert_eq!(app_event.unwrap()["name"], "web");
}

#[test]
fn enrollment_codes_work_once_and_their_tokens_open_sessions() {
    let sim = Sim::start_with(|c| c.enroll_codes = vec!["code-1".into()]);
    let (s, e) = sim.call("POST", "/api/enroll", Some(r#"{"code":"wrong"}"#));
    assert_eq!((s, e["field"].clone()), (401, json!("code")));
    let (s, v) = sim.call("POST", "/api/enroll", Some(r#"{"code":"code-1"}"#));
    assert_eq!(s, 201);
    let token = v["token"].as_str().unwrap().to_owned();
    let (s, e) = sim.call("POST", "/api/enroll", Some(r#"{"code":"code-1"}"#));
    assert_eq!(s, 401, "a code works once: {e}");
    let (s, e) = sim.call("POST", "/api/enroll", Some(r#"{}"#));
    assert_eq!((s, e["field"].clone()), (400, json!("code")));
    let (s, v) = sim.call("POST", "/api/enroll/codes", None);
    assert_eq!(s, 201);
    assert!(v["code"].as_str().unwrap().starts_with("enr_"));

    let url = sim.server().agents_url();
    let ca = sim.server().ca_pem.clone();
    sim.rt.block_on(async {
        odac_simulator::fake_agent::agent_conn::AgentConn::connect_hello(
            &url,
            ca.as_bytes(),
            &token,
            odac_simulator::fake_agent::agent_conn::AgentConn::hello("agt_enrolled", "e"),
        )
        .await
        .unwrap();
    });
    // the state file never holds a secret in clear
    let state = std::fs::read_to_string(sim.dir.path().join("state/fleet.json")).unwrap();
    assert!(!state.contains(&token) && !state.contains("code-1"));
}

#[test]
fn api_token_guards_the_api_but_not_the_dashboard() {
    let sim = Sim::start_with(|c| c.api_token = Some("api-secret".into()));
    let (s, _) = sim.call("GET", "/api/apps", None);
    assert_eq!(s, 401);
    let (s, v) = sim.call_auth("GET", "/api/apps", None, Some("api-secret"));
    assert_eq!((s, v), (200, json!([])));
    let (s, _) = sim.call_auth("GET", "/api/hosts", None, Some("wrong"));
    assert_eq!(s, 401);
    assert_eq!(sim.get_text("/").0, 200);
}

#[test]
fn fleet_state_survives_a_restart() {
    let mut sim = Sim::start();
    let agent = sim.agent("agt_a", profile(0, "box-a"));
    sim.create_app_text(r#"{"name":"web","image":"busybox","gpu":{"runtime":"nvidia","count":1}}"#);
    let ca_before = sim.server().ca_pem.clone();
    drop(agent);
    sim.restart();
    assert_eq!(sim.server().ca_pem, ca_before, "the CA is kept");
    let (_, hosts) = sim.call("GET", "/api/hosts", None);
    assert_eq!(hosts[0]["id"], "agt_a");
    assert_eq!(hosts[0]["connected"], false);
    assert!(hosts[0]["inventory"].is_object());
    let (_, app) = sim.call("GET", "/api/apps/web", None);
    assert_eq!(app["requested"], json!({"runtime":"nvidia","count":1}));
    // a reconnecting agent gets the same apps and generation back
    let url = sim.server().agents_url();
    let ca = sim.server().ca_pem.clone();
    sim.rt.block_on(async {
        let (mut c, _) = odac_simulator::fake_agent::agent_conn::AgentConn::connect_hello(
            &url,
            ca.as_bytes(),
            common::TOKEN,
            odac_simulator::fake_agent::agent_conn::AgentConn::hello("agt_a", "box-a"),
        )
        .await
        .unwrap();
        let m = c.recv_timeout(Duration::from_secs(5)).await.unwrap();
        let odac_simulator::fake_agent::agent_conn::Incoming::Message(
            odac_protocol::ControlMessage::DesiredState(ds),
        ) = m
        else {
            panic!("{m:?}")
        };
        assert_eq!(ds.generation, 1);
        assert_eq!(ds.apps.len(), 1);
        assert_eq!(ds.apps[0].name, "web");
    });
}

#[test]
fn dashboard_is_served_with_its_assets() {
    let sim = Sim::start();
    let (s, ct, html) = sim.get_text("/");
    assert_eq!(s, 200);
    assert!(ct.starts_with("text/html"), "{ct}");
    for needle in [
        "Fleet inventory",
        "/dashboard.js",
        "/dashboard.css",
        "GPU requested",
        "GPU attached",
    ] {
        assert!(html.contains(needle), "{needle}");
    }
    let (s, ct, js) = sim.get_text("/dashboard.js");
    assert_eq!(s, 200);
    assert!(ct.starts_with("text/javascript"), "{ct}");
    for needle in [
        "/api/events",
        "restart required",
        "\"GPU for \"",
        "\"Restart \"",
    ] {
        assert!(js.contains(needle), "{needle}");
    }
    let (s, ct, _) = sim.get_text("/dashboard.css");
    assert_eq!((s, ct.starts_with("text/css")), (200, true));
}

#[test]
fn an_app_that_would_not_fit_a_frame_is_refused_naming_its_field() {
    let sim = Sim::start();
    let _a = sim.agent("agt_a", profile(3, "a"));
    sim.wait_api("/api/hosts", |v| v[0]["connected"] == json!(true));
    let env = |n: usize| -> Value {
        (0..n)
            .map(|i| (format!("K{i}"), json!("v".repeat(10_000))))
            .collect::<serde_json::Map<String, Value>>()
            .into()
    };
    let app =
        |name: &str, n: usize| json!({"name": name, "image": "busybox", "env": env(n)}).to_string();
    // alone over a frame: 120 values of 10 kB
    let (s, e) = sim.call("POST", "/api/apps", Some(&app("huge", 120)));
    assert_eq!((s, e["field"].clone()), (400, json!("env")), "{e}");
    let text = e["error"].as_str().unwrap();
    assert!(
        text.contains("over the frame limit of 1048576 bytes (MAX_FRAME_BYTES)"),
        "{text}"
    );
    let (s, _) = sim.call("GET", "/api/apps/huge", None);
    assert_eq!(s, 404, "not stored");
    // each fits, both together do not: the second is refused, the first stays
    let (s, v) = sim.call("POST", "/api/apps", Some(&app("half", 60)));
    assert_eq!(s, 201, "{v}");
    let (s, e) = sim.call("POST", "/api/apps", Some(&app("other", 60)));
    assert_eq!((s, e["field"].clone()), (400, json!("env")), "{e}");
    let (s, apps) = sim.call("GET", "/api/apps", None);
    assert_eq!(s, 200);
    assert_eq!(apps.as_array().unwrap().len(), 1, "{apps}");
}
