//! The checked-in JSON Schema and the validation code agree: a table of good and bad values,
//! each run through the decoder (`decode_control` / `decode_agent`) and through a JSON Schema
//! validator over `protocol/schema/`. A good value passes both; a bad value is refused by
//! both, so a control plane that validates against the schema refuses what the agent would.

use odac_protocol::{ControlMessage, decode_agent, decode_control};
use serde_json::{Value, json};

fn validator(file: &str) -> jsonschema::Validator {
    let path = format!("{}/schema/{file}", env!("CARGO_MANIFEST_DIR"));
    let schema: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    jsonschema::validator_for(&schema).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn upsert(app: Value) -> Value {
    json!({"type": "app_upsert", "seq": 1, "generation": 1, "app": app})
}

fn app(extra: Value) -> Value {
    let mut base = json!({"name": "web", "image": "busybox"});
    if let (Some(b), Value::Object(e)) = (base.as_object_mut(), extra) {
        for (k, v) in e {
            if v.is_null() {
                b.remove(&k);
            } else {
                b.insert(k, v);
            }
        }
    }
    base
}

fn gpu(g: Value) -> Value {
    upsert(app(json!({"gpu": g})))
}

fn many<T>(n: usize, f: impl Fn(usize) -> T) -> Vec<T> {
    (0..n).map(f).collect()
}

/// `(what, message, accepted)` of the control-plane direction.
fn control_table() -> Vec<(&'static str, Value, bool)> {
    let name63 = "a".repeat(63);
    let name64 = "a".repeat(64);
    vec![
        ("plain app", upsert(app(json!({}))), true),
        (
            "catalog app only",
            upsert(json!({"name": "web", "app": "ollama"})),
            true,
        ),
        (
            "image null with a catalog app",
            upsert(json!({"name": "web", "image": null, "app": "ollama"})),
            true,
        ),
        (
            "git source only",
            upsert(json!({"name": "web", "source": {"url": "https://example.com/web.git"}})),
            true,
        ),
        ("63-char name", upsert(app(json!({"name": name63}))), true),
        (
            "ports at the bounds",
            upsert(app(json!({"ports": [{"host": 1, "container": 65535}]}))),
            true,
        ),
        (
            "64 ports",
            upsert(app(
                json!({"ports": many(64, |i| json!({"container": i + 1}))}),
            )),
            true,
        ),
        (
            "resources at the bounds",
            upsert(app(
                json!({"resources": {"memory_bytes": 6_291_456, "cpus": 1024.0}}),
            )),
            true,
        ),
        (
            "small cpus",
            upsert(app(json!({"resources": {"cpus": 0.01}}))),
            true,
        ),
        (
            "one nano-cpu",
            upsert(app(json!({"resources": {"cpus": 1e-9}}))),
            true,
        ),
        (
            "less than a nano-cpu",
            upsert(app(json!({"resources": {"cpus": 4.9e-10}}))),
            false,
        ),
        (
            "restart, healthcheck and logs at the bounds",
            upsert(app(json!({"restart": "on_failure",
                "healthcheck": {"command": ["true"], "interval_secs": 86_400, "start_period_secs": 0},
                "logs": {"max_size_bytes": 65_536, "max_files": 100}}))),
            true,
        ),
        (
            "an empty health check command",
            upsert(app(json!({"healthcheck": {"command": []}}))),
            false,
        ),
        (
            "a health check every 0 s",
            upsert(app(
                json!({"healthcheck": {"command": ["true"], "interval_secs": 0}}),
            )),
            false,
        ),
        (
            "an update policy at its bounds",
            upsert(app(json!({"update": {"min_healthy_secs": 0,
                "healthy_deadline_secs": 86_400, "auto_revert": false}}))),
            true,
        ),
        (
            "a healthy deadline of 0 s",
            upsert(app(json!({"update": {"healthy_deadline_secs": 0}}))),
            false,
        ),
        (
            "a log file below 64 KiB",
            upsert(app(json!({"logs": {"max_size_bytes": 65_535}}))),
            false,
        ),
        (
            "101 log files",
            upsert(app(json!({"logs": {"max_files": 101}}))),
            false,
        ),
        (
            "an unknown restart policy",
            upsert(app(json!({"restart": "sometimes"}))),
            false,
        ),
        (
            "env",
            upsert(app(json!({"env": {"A": "1", "lower_case": "x y"}}))),
            true,
        ),
        (
            "gpu count 64",
            gpu(json!({"runtime": "nvidia", "count": 64})),
            true,
        ),
        (
            "gpu count \"All\"",
            gpu(json!({"runtime": "nvidia", "count": "All"})),
            true,
        ),
        (
            "gpu count \" 2 \"",
            gpu(json!({"runtime": "nvidia", "count": " 2 "})),
            true,
        ),
        (
            "gpu optional \"YES\"",
            gpu(json!({"optional": "YES"})),
            true,
        ),
        (
            "gpu optional \" off \"",
            gpu(json!({"runtime": "amd", "optional": " off "})),
            true,
        ),
        ("gpu null", gpu(Value::Null), true),
        (
            "welcome heartbeat 1",
            json!({"type": "welcome", "host_id": "h", "heartbeat_secs": 1}),
            true,
        ),
        (
            "welcome heartbeat 3600",
            json!({"type": "welcome", "host_id": "h", "heartbeat_secs": 3600}),
            true,
        ),
        (
            "delete",
            json!({"type": "app_delete", "seq": 2, "generation": 2, "name": "web"}),
            true,
        ),
        (
            "256 apps",
            json!({"type": "desired_state", "seq": 1, "generation": 1,
            "apps": many(256, |i| json!({"name": format!("app-{i}"), "image": "x"}))}),
            true,
        ),
        // bad values
        (
            "upper-case name",
            upsert(app(json!({"name": "Web"}))),
            false,
        ),
        (
            "name starting with -",
            upsert(app(json!({"name": "-web"}))),
            false,
        ),
        (
            "name ending with -",
            upsert(app(json!({"name": "web-"}))),
            false,
        ),
        (
            "underscore in name",
            upsert(app(json!({"name": "a_b"}))),
            false,
        ),
        ("empty name", upsert(app(json!({"name": ""}))), false),
        ("64-char name", upsert(app(json!({"name": name64}))), false),
        ("empty image", upsert(app(json!({"image": ""}))), false),
        (
            "image with a space",
            upsert(app(json!({"image": "busy box"}))),
            false,
        ),
        (
            "image with an uppercase repository",
            upsert(app(json!({"image": "BusyBox:1.36"}))),
            false,
        ),
        (
            "image with an escape sequence",
            upsert(app(json!({"image": "busybox\u{1b}]0;owned\u{7}"}))),
            false,
        ),
        (
            "image with an empty tag",
            upsert(app(json!({"image": "busybox:"}))),
            false,
        ),
        (
            "image with a short digest",
            upsert(app(json!({"image": "busybox@sha256:abc"}))),
            false,
        ),
        (
            "image on a registry with a port, tag and digest",
            upsert(app(json!({"image": format!(
                "localhost:5000/team/web-app:v1.2_rc@sha256:{}", "a".repeat(64)
            )}))),
            true,
        ),
        (
            "image on a registry host with uppercase",
            upsert(app(
                json!({"image": "Registry.Example.com/a__b/c.d:Latest"}),
            )),
            true,
        ),
        (
            "env name with an escape",
            upsert(app(json!({"env": {"A\u{1b}[2J": "x"}}))),
            false,
        ),
        (
            "image and source",
            upsert(app(
                json!({"source": {"url": "https://example.com/web.git"}}),
            )),
            false,
        ),
        (
            "no image, source or app",
            upsert(json!({"name": "web"})),
            false,
        ),
        (
            "container port 0",
            upsert(app(json!({"ports": [{"container": 0}]}))),
            false,
        ),
        (
            "container port 65536",
            upsert(app(json!({"ports": [{"container": 65536}]}))),
            false,
        ),
        (
            "host port 0",
            upsert(app(json!({"ports": [{"host": 0, "container": 80}]}))),
            false,
        ),
        (
            "65 ports",
            upsert(app(
                json!({"ports": many(65, |i| json!({"container": i + 1}))}),
            )),
            false,
        ),
        (
            "65 volumes",
            upsert(app(
                json!({"volumes": many(65, |i| json!({"source": format!("v{i}"), "target": "/data"}))}),
            )),
            false,
        ),
        (
            "relative volume target",
            upsert(app(json!({"volumes": [{"source": "v", "target": "data"}]}))),
            false,
        ),
        (
            "257 arguments",
            upsert(app(json!({"command": many(257, |_| "x")}))),
            false,
        ),
        (
            "257 env entries",
            upsert(app(
                json!({"env": (0..257).map(|i| (format!("K{i}"), json!("v"))).collect::<serde_json::Map<_, _>>()}),
            )),
            false,
        ),
        (
            "empty env name",
            upsert(app(json!({"env": {"": "x"}}))),
            false,
        ),
        (
            "env name with =",
            upsert(app(json!({"env": {"A=B": "x"}}))),
            false,
        ),
        (
            "memory below 6 MiB",
            upsert(app(json!({"resources": {"memory_bytes": 6_291_455}}))),
            false,
        ),
        (
            "cpus 0",
            upsert(app(json!({"resources": {"cpus": 0}}))),
            false,
        ),
        (
            "cpus negative",
            upsert(app(json!({"resources": {"cpus": -1.0}}))),
            false,
        ),
        (
            "cpus 1025",
            upsert(app(json!({"resources": {"cpus": 1025}}))),
            false,
        ),
        (
            "gpu count 0",
            gpu(json!({"runtime": "nvidia", "count": 0})),
            false,
        ),
        (
            "gpu count 65",
            gpu(json!({"runtime": "nvidia", "count": 65})),
            false,
        ),
        (
            "gpu count \"65\"",
            gpu(json!({"runtime": "nvidia", "count": "65"})),
            false,
        ),
        (
            "gpu count \"0\"",
            gpu(json!({"runtime": "nvidia", "count": "0"})),
            false,
        ),
        (
            "gpu count \"some\"",
            gpu(json!({"runtime": "nvidia", "count": "some"})),
            false,
        ),
        (
            "gpu optional \"maybe\"",
            gpu(json!({"optional": "maybe"})),
            false,
        ),
        ("gpu optional \"2\"", gpu(json!({"optional": "2"})), false),
        ("gpu runtime cuda", gpu(json!({"runtime": "cuda"})), false),
        (
            "welcome heartbeat 0",
            json!({"type": "welcome", "host_id": "h", "heartbeat_secs": 0}),
            false,
        ),
        (
            "welcome heartbeat 3601",
            json!({"type": "welcome", "host_id": "h", "heartbeat_secs": 3601}),
            false,
        ),
        (
            "welcome empty host_id",
            json!({"type": "welcome", "host_id": ""}),
            false,
        ),
        (
            "delete of a bad name",
            json!({"type": "app_delete", "seq": 2, "generation": 2, "name": "Bad"}),
            false,
        ),
        (
            "logs request",
            json!({"type": "logs_request", "request_id": "r1", "app": "web", "follow": true, "tail": 100, "since_secs": 60, "timeout_secs": 600}),
            true,
        ),
        (
            "logs cancel",
            json!({"type": "logs_cancel", "request_id": "r1"}),
            true,
        ),
        (
            "logs request with an empty request id",
            json!({"type": "logs_request", "request_id": "", "app": "web"}),
            false,
        ),
        (
            "logs request of a bad app name",
            json!({"type": "logs_request", "request_id": "r1", "app": "Web App"}),
            false,
        ),
        (
            "logs request over the tail limit",
            json!({"type": "logs_request", "request_id": "r1", "app": "web", "tail": 100001}),
            false,
        ),
        (
            "logs request with a zero timeout",
            json!({"type": "logs_request", "request_id": "r1", "app": "web", "timeout_secs": 0}),
            false,
        ),
        (
            "logs request over the timeout limit",
            json!({"type": "logs_request", "request_id": "r1", "app": "web", "timeout_secs": 86401}),
            false,
        ),
        (
            "shm_size 512m",
            upsert(app(json!({"shm_size": "512m"}))),
            true,
        ),
        (
            "shm_size 1.5GiB",
            upsert(app(json!({"shm_size": "1.5GiB"}))),
            true,
        ),
        (
            "shm_size in bytes",
            upsert(app(json!({"shm_size": 1_048_576}))),
            true,
        ),
        (
            "shm_size \"512\" without a unit",
            upsert(app(json!({"shm_size": "512"}))),
            false,
        ),
        (
            "shm_size below 1 MiB",
            upsert(app(json!({"shm_size": 1_048_575}))),
            false,
        ),
        (
            "shm_size above 64 GiB",
            upsert(app(json!({"shm_size": 68_719_476_737_u64}))),
            false,
        ),
        (
            "shm_size 512 parsecs",
            upsert(app(json!({"shm_size": "512pc"}))),
            false,
        ),
        (
            "shm_size an array",
            upsert(app(json!({"shm_size": ["512m"]}))),
            false,
        ),
        (
            "caps of the allowlist in any spelling",
            upsert(app(
                json!({"caps": ["net_admin", "CAP_NET_RAW", "Sys_Nice", "IPC_LOCK", "NET_BIND_SERVICE"]}),
            )),
            true,
        ),
        (
            "caps SYS_ADMIN",
            upsert(app(json!({"caps": ["SYS_ADMIN"]}))),
            false,
        ),
        ("caps of a number", upsert(app(json!({"caps": [1]}))), false),
        (
            "device of a number",
            upsert(app(json!({"devices": [1]}))),
            false,
        ),
        ("caps ALL", upsert(app(json!({"caps": ["ALL"]}))), false),
        (
            "caps CAP_SYS_MODULE",
            upsert(app(json!({"caps": ["CAP_SYS_MODULE"]}))),
            false,
        ),
        (
            "namespaced sysctls of every kind of value",
            upsert(app(
                json!({"sysctls": {"net.ipv4.ip_forward": true, "net.core.somaxconn": 1024,
                "kernel.shmmax": "68719476736", "kernel.msgmax": "65536", "kernel.sem": "250 32000 100 128",
                "fs.mqueue.msg_max": "10"}}),
            )),
            true,
        ),
        (
            "sysctl kernel.core_pattern",
            upsert(app(json!({"sysctls": {"kernel.core_pattern": "|/x"}}))),
            false,
        ),
        (
            "sysctl vm.swappiness",
            upsert(app(json!({"sysctls": {"vm.swappiness": 10}}))),
            false,
        ),
        (
            "sysctl net..x",
            upsert(app(json!({"sysctls": {"net..x": 1}}))),
            false,
        ),
        (
            "sysctl value 1.5",
            upsert(app(json!({"sysctls": {"net.core.somaxconn": 1.5}}))),
            false,
        ),
        (
            "sysctl value blank",
            upsert(app(json!({"sysctls": {"net.core.somaxconn": " "}}))),
            false,
        ),
        (
            "sysctl value with a newline",
            upsert(app(json!({"sysctls": {"net.core.somaxconn": "1\n2"}}))),
            false,
        ),
        (
            "devices",
            upsert(app(json!({"devices": ["/dev/apex_0", "/dev/bus/usb"]}))),
            true,
        ),
        (
            "device /dev/nvidia0",
            upsert(app(json!({"devices": ["/dev/nvidia0"]}))),
            false,
        ),
        (
            "device /dev/dri/renderD128",
            upsert(app(json!({"devices": ["/dev/dri/renderD128"]}))),
            false,
        ),
        (
            "device /dev/kfd",
            upsert(app(json!({"devices": ["/dev/kfd"]}))),
            false,
        ),
        (
            "device /dev/../etc/shadow",
            upsert(app(json!({"devices": ["/dev/../etc/shadow"]}))),
            false,
        ),
        (
            "device /etc/shadow",
            upsert(app(json!({"devices": ["/etc/shadow"]}))),
            false,
        ),
        (
            "device /dev/a:b",
            upsert(app(json!({"devices": ["/dev/a:b"]}))),
            false,
        ),
        (
            "device twice",
            upsert(app(json!({"devices": ["/dev/null", "/dev/null"]}))),
            false,
        ),
        (
            "257 apps",
            json!({"type": "desired_state", "seq": 1, "generation": 1,
            "apps": many(257, |i| json!({"name": format!("app-{i}"), "image": "x"}))}),
            false,
        ),
    ]
}

fn agent_table() -> Vec<(&'static str, Value, bool)> {
    let gpu_stats = |util: u32| json!({"type": "gpu_stats", "seq": 4, "stats": {"interval_secs": 60, "gpus": [{"id": "0000:19:00.0", "util": util}]}});
    let hello = |id: &str| json!({"type": "hello", "agent_id": id, "hostname": "h", "agent_version": "0.1.0", "protocol_version": 1});
    let status = |name: &str, state: &str| json!({"type": "app_status", "seq": 3, "status": {"name": name, "generation": 1, "state": state}});
    vec![
        ("hello", hello("agt_1"), true),
        ("128-byte agent id", hello(&"a".repeat(128)), true),
        ("agent id with . _ : -", hello("host-1.dc_2:x"), true),
        ("removed status", status("web", "removed"), true),
        (
            "resync",
            json!({"type": "resync", "reason": "seq 2: internal: read-only"}),
            true,
        ),
        (
            "logs chunk",
            json!({"type": "logs_chunk", "request_id": "r1", "lines": ["a", "b"], "dropped": 2}),
            true,
        ),
        (
            "logs end",
            json!({"type": "logs_end", "request_id": "r1", "reason": "timeout"}),
            true,
        ),
        (
            "logs chunk of 1001 lines",
            json!({"type": "logs_chunk", "request_id": "r1", "lines": vec!["x"; 1001]}),
            false,
        ),
        (
            "logs chunk with a 4097-byte line",
            json!({"type": "logs_chunk", "request_id": "r1", "lines": ["y".repeat(4097)]}),
            false,
        ),
        (
            "logs end with a 65-byte request id",
            json!({"type": "logs_end", "request_id": "r".repeat(65), "reason": "complete"}),
            false,
        ),
        (
            "logs end with an unknown reason",
            json!({"type": "logs_end", "request_id": "r1", "reason": "bored"}),
            false,
        ),
        ("empty agent id", hello(""), false),
        ("129-byte agent id", hello(&"a".repeat(129)), false),
        ("agent id with a slash", hello("../etc"), false),
        ("agent id with ..", hello("a..b"), false),
        ("agent id with a space", hello("a b"), false),
        ("agent id starting with -", hello("-a"), false),
        ("status of a bad name", status("Bad Name", "running"), false),
        ("unknown state", status("web", "exploded"), false),
        ("gpu_stats util 100", gpu_stats(100), true),
        ("gpu_stats util 101", gpu_stats(101), false),
    ]
}

fn check(
    table: Vec<(&'static str, Value, bool)>,
    schema: &str,
    decodes: impl Fn(&[u8]) -> Result<(), String>,
) {
    let v = validator(schema);
    let mut disagreements = Vec::new();
    for (what, msg, good) in table {
        let text = serde_json::to_vec(&msg).unwrap();
        let by_code = decodes(&text);
        let by_schema = v.is_valid(&msg);
        if by_code.is_ok() != good || by_schema != good {
            disagreements.push(format!(
                "{what}: expected {}, decoder says {by_code:?}, schema says {}",
                if good { "accepted" } else { "refused" },
                if by_schema { "valid" } else { "invalid" }
            ));
        }
    }
    assert!(disagreements.is_empty(), "{}", disagreements.join("\n"));
}

#[test]
fn control_messages_schema_and_decoder_agree() {
    // the image reference and the host-access fields are decoded whatever they hold: the agent
    // checks them per app (`AppSpec::check_image`, `AppSpec::host_access`) and fails that app
    // alone, as a control plane refuses them
    check(control_table(), "control-message.schema.json", |b| {
        let apps = match decode_control(b).map_err(|e| e.to_string())? {
            ControlMessage::AppUpsert(m) => vec![m.app],
            ControlMessage::DesiredState(m) => m.apps,
            _ => Vec::new(),
        };
        apps.iter()
            .try_for_each(|a| a.check_image().and_then(|()| a.host_access().map(|_| ())))
            .map_err(|e| format!("app refused: {e}"))
    });
}

#[test]
fn agent_messages_schema_and_decoder_agree() {
    check(agent_table(), "agent-message.schema.json", |b| {
        decode_agent(b).map(|_| ()).map_err(|e| e.to_string())
    });
}

#[test]
fn desired_state_schema_limits_the_apps() {
    let v = validator("desired-state.schema.json");
    let apps = |n: usize| many(n, |i| json!({"name": format!("app-{i}"), "image": "x"}));
    assert!(v.is_valid(&json!({"generation": 1, "apps": apps(256)})));
    assert!(!v.is_valid(&json!({"generation": 1, "apps": apps(257)})));
    assert!(!v.is_valid(&json!({"generation": 1, "apps": [{"name": "Bad", "image": "x"}]})));
}
