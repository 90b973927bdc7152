//! ODAC compatibility: ODAC's own app payload is accepted and echoed unchanged, every runtime
//! alias normalises to its vendor, and every invalid GPU case is refused with a message that
//! names the field, both through `AppSpec::validate` and through frame decoding.

use odac_protocol::{
    AppSpec, AppStatus, ControlMessage, DecodeError, DesiredState, GpuCount, GpuRuntime, GpuStatus,
    Vendor, decode_control,
};
use serde_json::{Value, json};

const ODAC: &str = r#"{"name":"ollama-app","type":"app","app":"ollama","gpu":{"runtime":"nvidia","count":1,"optional":true}}"#;

fn app(gpu: Value) -> AppSpec {
    serde_json::from_value(json!({"name": "a", "image": "busybox", "gpu": gpu})).unwrap()
}

#[test]
fn odac_payload_is_accepted_and_round_trips() {
    let spec: AppSpec = serde_json::from_str(ODAC).unwrap();
    spec.validate().unwrap();
    assert_eq!(spec.name, "ollama-app");
    assert_eq!(spec.kind.as_deref(), Some("app"));
    assert_eq!(spec.app.as_deref(), Some("ollama"));
    let gpu = spec.gpu.clone().unwrap();
    assert_eq!(gpu.runtime, Some(GpuRuntime::Nvidia));
    assert_eq!(gpu.effective_vendor(), Some(Vendor::Nvidia));
    assert_eq!(gpu.count(), GpuCount::N(1));
    assert!(gpu.is_optional());
    assert_eq!(serde_json::to_string(&spec).unwrap(), ODAC);

    // the request is echoed unchanged in a status
    let status = AppStatus {
        name: spec.name.clone(),
        gpu: GpuStatus {
            requested: spec.gpu.clone(),
            ..GpuStatus::default()
        },
        ..AppStatus::default()
    };
    let echoed = serde_json::to_value(&status).unwrap();
    assert_eq!(
        echoed["gpu"]["requested"],
        json!({"runtime":"nvidia","count":1,"optional":true})
    );
}

#[test]
fn odac_payload_decodes_inside_an_upsert_frame() {
    let frame = format!(r#"{{"type":"app_upsert","seq":5,"generation":9,"app":{ODAC}}}"#);
    let ControlMessage::AppUpsert(up) = decode_control(frame.as_bytes()).unwrap() else {
        panic!("not an upsert");
    };
    assert_eq!(up.app.gpu.unwrap().effective_vendor(), Some(Vendor::Nvidia));
}

#[test]
fn unknown_fields_are_ignored() {
    let spec: AppSpec = serde_json::from_value(json!({
        "name": "a", "image": "busybox", "future_field": {"x": 1},
        "gpu": {"runtime": "intel", "mig_profile": "1g.10gb"}
    }))
    .unwrap();
    spec.validate().unwrap();
    assert_eq!(spec.gpu.unwrap().effective_vendor(), Some(Vendor::Intel));
}

#[test]
fn each_alias() {
    for (gpu, vendor) in [
        (json!({"runtime": "nvidia"}), Some(Vendor::Nvidia)),
        (json!({"runtime": "rocm"}), Some(Vendor::Amd)),
        (json!({"runtime": "amd"}), Some(Vendor::Amd)),
        (json!({"runtime": "intel"}), Some(Vendor::Intel)),
        (json!({"runtime": "auto", "optional": true}), None),
        (json!({"optional": "on"}), None),
        (json!({"vendor": "nvidia"}), Some(Vendor::Nvidia)),
        (
            json!({"vendor": "amd", "runtime": "amd"}),
            Some(Vendor::Amd),
        ),
        (
            json!({"vendor": "amd", "runtime": "rocm"}),
            Some(Vendor::Amd),
        ),
        (
            json!({"vendor": "intel", "runtime": "auto"}),
            Some(Vendor::Intel),
        ),
    ] {
        let spec = app(gpu.clone());
        spec.validate().unwrap_or_else(|e| panic!("{gpu}: {e}"));
        let req = spec.gpu.clone().unwrap();
        assert_eq!(req.effective_vendor(), vendor, "{gpu}");
        // spelling kept: what was sent is what is serialised
        assert_eq!(serde_json::to_value(&req).unwrap(), gpu);
    }
}

#[test]
fn count_and_optional_spellings() {
    for (gpu, count, optional) in [
        (json!({"runtime": "nvidia"}), GpuCount::All, false),
        (
            json!({"runtime": "nvidia", "count": "all"}),
            GpuCount::All,
            false,
        ),
        (
            json!({"runtime": "nvidia", "count": "3"}),
            GpuCount::N(3),
            false,
        ),
        (
            json!({"runtime": "nvidia", "count": 64}),
            GpuCount::N(64),
            false,
        ),
        (
            json!({"runtime": "nvidia", "optional": "true"}),
            GpuCount::All,
            true,
        ),
        (
            json!({"runtime": "nvidia", "optional": "1"}),
            GpuCount::All,
            true,
        ),
        (
            json!({"runtime": "nvidia", "optional": "yes"}),
            GpuCount::All,
            true,
        ),
        (
            json!({"runtime": "nvidia", "optional": "on"}),
            GpuCount::All,
            true,
        ),
        (
            json!({"runtime": "nvidia", "optional": false}),
            GpuCount::All,
            false,
        ),
    ] {
        let spec = app(gpu.clone());
        spec.validate().unwrap_or_else(|e| panic!("{gpu}: {e}"));
        let req = spec.gpu.clone().unwrap();
        assert_eq!((req.count(), req.is_optional()), (count, optional), "{gpu}");
        assert_eq!(serde_json::to_value(&req).unwrap(), gpu);
    }
}

#[test]
fn null_and_empty_mean_no_gpu() {
    for gpu in [Value::Null, json!({})] {
        let spec = app(gpu);
        spec.validate().unwrap();
        assert_eq!(spec.gpu, None);
        assert!(serde_json::to_value(&spec).unwrap().get("gpu").is_none());
    }
}

const INVALID: [(&str, &str); 8] = [
    (
        r#"{"runtime":"nvidia","count":0}"#,
        "gpu.count: 0 is out of range 1..=64",
    ),
    (
        r#"{"runtime":"nvidia","count":65}"#,
        "gpu.count: 65 is out of range 1..=64",
    ),
    (
        r#"{"runtime":"nvidia","count":"some"}"#,
        r#"gpu.count: "some" is not a number or "all""#,
    ),
    (
        r#"{"runtime":"nvidia","vendor":"amd"}"#,
        r#"gpu.vendor: vendor "amd" does not agree with runtime "nvidia""#,
    ),
    (
        r#"{"runtime":"rocm","vendor":"intel"}"#,
        r#"gpu.vendor: vendor "intel" does not agree with runtime "rocm""#,
    ),
    (
        r#"{"runtime":"cuda"}"#,
        r#"gpu.runtime: unknown runtime "cuda" (expected nvidia, rocm, amd, intel or auto)"#,
    ),
    (
        r#"{"runtime":"auto"}"#,
        "gpu.runtime: gpu needs a runtime or a vendor unless optional",
    ),
    (
        r#"{"count":2,"optional":"no"}"#,
        "gpu.runtime: gpu needs a runtime or a vendor unless optional",
    ),
];

#[test]
fn each_invalid_gpu_case_names_the_field() {
    for (gpu, want) in INVALID {
        let spec = app(serde_json::from_str(gpu).unwrap());
        let err = spec.validate().unwrap_err();
        assert_eq!(err.to_string(), want, "{gpu}");
        assert!(err.field.starts_with("gpu."), "{gpu}");
    }
}

#[test]
fn invalid_gpu_in_a_snapshot_is_prefixed_with_the_app_index() {
    for (gpu, want) in INVALID {
        let frame = format!(
            r#"{{"type":"desired_state","seq":1,"generation":7,"apps":[
                {{"name":"a","image":"x"}},{{"name":"b","image":"x"}},
                {{"name":"c","image":"x","gpu":{gpu}}}]}}"#
        );
        match decode_control(frame.as_bytes()) {
            Err(DecodeError::Invalid(e)) => {
                assert_eq!(e.to_string(), format!("apps[2].{want}"), "{gpu}");
                assert!(e.field.starts_with("apps[2].gpu."));
            }
            other => panic!("{gpu}: {other:?}"),
        }
        let ds: DesiredState = serde_json::from_str(&format!(
            r#"{{"generation":7,"apps":[{{"name":"a","image":"x"}},{{"name":"b","image":"x"}},{{"name":"c","image":"x","gpu":{gpu}}}]}}"#
        ))
        .unwrap();
        assert_eq!(
            ds.validate().unwrap_err().to_string(),
            format!("apps[2].{want}")
        );
    }
    // the headline example
    let ds: DesiredState = serde_json::from_value(json!({"generation": 1, "apps": [
        {"name": "a", "image": "x"}, {"name": "b", "image": "x"},
        {"name": "c", "image": "x", "gpu": {"runtime": "nvidia", "count": 0}}]}))
    .unwrap();
    assert_eq!(
        ds.validate().unwrap_err().to_string(),
        "apps[2].gpu.count: 0 is out of range 1..=64"
    );
}

#[test]
fn upsert_errors_are_prefixed_with_app() {
    let frame = br#"{"type":"app_upsert","seq":1,"generation":2,"app":{"name":"a","image":"x","gpu":{"runtime":"nvidia","count":65}}}"#;
    assert_eq!(
        decode_control(frame).unwrap_err(),
        DecodeError::Invalid(odac_protocol::ValidationError::new(
            "app.gpu.count",
            "65 is out of range 1..=64"
        ))
    );
}
