//! Unit tests of the host-access fields: sizes with and without units, the capability
//! allowlist, namespaced sysctls and their values, device paths, and the whole spec's check.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::json;

use super::*;
use crate::AppSpec;

fn spec(extra: Value) -> AppSpec {
    let mut v = json!({"name": "web", "image": "busybox"});
    if let (Some(map), Value::Object(extra)) = (v.as_object_mut(), extra) {
        map.extend(extra);
    }
    serde_json::from_value(v).unwrap()
}

fn refusal(extra: Value) -> ValidationError {
    let s = spec(extra);
    assert_eq!(s.validate(), Ok(()), "the frame-level check takes it");
    s.host_access().unwrap_err()
}

#[test]
fn sizes_take_binary_units_and_refuse_a_bare_number() {
    assert_eq!(parse_size("512m"), Ok(536_870_912));
    assert_eq!(parse_size("512MiB"), Ok(536_870_912));
    assert_eq!(parse_size("512 MB"), Ok(536_870_912));
    assert_eq!(parse_size("1.5GiB"), Ok(1_610_612_736));
    assert_eq!(parse_size("64k"), Ok(65_536));
    assert_eq!(parse_size("100b"), Ok(100));
    assert_eq!(parse_size("0.5k"), Ok(512));
    let bare = parse_size("512").unwrap_err();
    assert!(
        bare.contains("has no unit") && bare.contains("\"512m\""),
        "{bare}"
    );
    for bad in [
        "", "m", "1.m", ".5m", "1..5m", "1.5.2m", "5tb", "-1m", "1e3m",
    ] {
        assert!(parse_size(bad).is_err(), "{bad:?}");
    }
    assert!(parse_size("99999999999999999999g").is_err());
}

#[test]
fn shm_size_is_a_string_with_a_unit_or_bytes_in_range() {
    let ok = |v: Value| spec(json!({"shm_size": v})).host_access().unwrap();
    assert_eq!(ok(json!("512m")).shm_size_bytes, Some(536_870_912));
    assert_eq!(ok(json!(1_048_576)).shm_size_bytes, Some(1 << 20));
    assert_eq!(ok(json!("64g")).shm_size_bytes, Some(64 << 30));
    assert_eq!(ok(Value::Null).shm_size_bytes, None);
    for bad in [
        json!("512"),
        json!("1023k"),
        json!("65g"),
        json!(1_048_575),
        json!(1.5),
        json!(-1),
        json!(true),
        json!(["512m"]),
    ] {
        let e = refusal(json!({"shm_size": bad.clone()}));
        assert_eq!(e.field, "shm_size", "{bad}: {e}");
    }
    let e = refusal(json!({"shm_size": "512"}));
    assert!(e.message.contains("no unit"), "{e}");
    // kept as sent
    let s = spec(json!({"shm_size": "1.5GiB"}));
    assert_eq!(serde_json::to_value(&s).unwrap()["shm_size"], "1.5GiB");
}

#[test]
fn caps_come_from_the_allowlist_in_any_spelling() {
    let s = spec(json!({"caps": ["net_admin", "CAP_NET_RAW", "cap_sys_nice", "NET_ADMIN"]}));
    assert_eq!(
        s.host_access().unwrap().caps,
        vec!["NET_ADMIN", "NET_RAW", "SYS_NICE"]
    );
    for bad in ["SYS_ADMIN", "SYS_MODULE", "ALL", "CAP_SYS_PTRACE", ""] {
        let e = refusal(json!({"caps": ["IPC_LOCK", bad]}));
        assert_eq!(e.field, "caps[1]", "{bad}");
        assert!(
            e.to_string().contains(
                "caps may only be NET_ADMIN, NET_RAW, NET_BIND_SERVICE, IPC_LOCK, SYS_NICE"
            ),
            "{e}"
        );
    }
}

#[test]
fn sysctls_are_namespaced_and_their_values_normalised() {
    let s = spec(json!({"sysctls": {
        "net.ipv4.ip_forward": true,
        "net.core.somaxconn": 1024,
        "kernel.shmmax": "68719476736",
        "kernel.msgmax": "1",
        "kernel.sem": "250 32000 100 128",
        "fs.mqueue.msg_max": false,
        "net.ipv4.conf.eth0/1.forwarding": 1
    }}));
    let got = s.host_access().unwrap().sysctls;
    assert_eq!(got["net.ipv4.ip_forward"], "1");
    assert_eq!(got["net.core.somaxconn"], "1024");
    assert_eq!(got["kernel.sem"], "250 32000 100 128");
    assert_eq!(got["fs.mqueue.msg_max"], "0");
    for key in [
        "kernel.core_pattern",
        "kernel.semx",
        "vm.swappiness",
        "net",
        "net.",
        "net..x",
        "fs.mqueue",
        "net.ipv4.ip forward",
    ] {
        let e = refusal(json!({"sysctls": {key: "1"}}));
        assert_eq!(e.field, format!("sysctls.{key}"));
        assert!(e.message.contains("not a namespaced sysctl"), "{e}");
    }
    for value in [
        json!(1.5),
        json!(null),
        json!(""),
        json!("a\nb"),
        json!([1]),
    ] {
        let e = refusal(json!({"sysctls": {"net.ipv4.ip_forward": value}}));
        assert_eq!(e.field, "sysctls.net.ipv4.ip_forward", "{e}");
    }
}

#[test]
fn devices_are_plain_dev_paths_and_never_gpus() {
    let s = spec(json!({"devices": ["/dev/apex_0", "/dev/bus/usb"]}));
    assert_eq!(
        s.host_access().unwrap().devices,
        ["/dev/apex_0", "/dev/bus/usb"]
    );
    for bad in [
        "/dev/nvidia0",
        "/dev/nvidiactl",
        "/dev/dri",
        "/dev/dri/renderD128",
        "/dev/kfd",
        "/dev//dri/card0",
    ] {
        let e = refusal(json!({"devices": [bad]}));
        assert_eq!(e.field, "devices[0]", "{bad}");
    }
    let e = refusal(json!({"devices": ["/dev/kfd"]}));
    assert!(e.message.contains("is a gpu device"), "{e}");
    for bad in [
        "dev/null",
        "/etc/passwd",
        "/dev/../etc",
        "/dev/./kfd",
        "/dev/a:b",
        "/dev/",
        "/dev/a b",
    ] {
        let e = refusal(json!({"devices": ["/dev/null", bad]}));
        assert_eq!(e.field, "devices[1]", "{bad}");
    }
    let e = refusal(json!({"devices": ["/dev/null", "/dev/null"]}));
    assert!(e.message.contains("twice"), "{e}");
    assert!(is_gpu_device("/dev/./nvidia-uvm") && !is_gpu_device("/dev/null"));
}

#[test]
fn limits_and_the_empty_spec() {
    assert_eq!(spec(json!({})).host_access(), Ok(HostAccess::default()));
    let many: Vec<String> = (0..65).map(|_| "NET_RAW".to_owned()).collect();
    assert_eq!(refusal(json!({"caps": many})).field, "caps");
    // empty fields are not serialised: older specs keep their spec hash
    let text =
        serde_json::to_string(&spec(json!({"caps": [], "sysctls": {}, "devices": []}))).unwrap();
    assert_eq!(text, r#"{"name":"web","image":"busybox"}"#);
}
