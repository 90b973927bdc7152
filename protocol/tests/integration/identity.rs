//! Property tests: encode → decode is the identity on generated valid messages of both
//! directions (and plain serde agrees with the decoder), and a desired-state file round-trips.

use odac_protocol::*;
use proptest::prelude::*;
use proptest::sample::select;

const IDENTITY_CASES: u32 = 1_000;

fn text() -> impl Strategy<Value = String> {
    "\\PC{0,16}"
}

fn word() -> impl Strategy<Value = String> {
    "[a-z0-9_]{1,16}"
}

/// An agent id that passes the agent-id rule.
fn agent_id() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9][a-zA-Z0-9_:-]{0,40}"
}

fn label() -> impl Strategy<Value = String> {
    "[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?"
}

fn vendor() -> impl Strategy<Value = Vendor> {
    select(&Vendor::ALL[..])
}

fn gpu_request() -> impl Strategy<Value = GpuRequest> {
    let runtime = prop::option::of(select(vec![
        GpuRuntime::Nvidia,
        GpuRuntime::Rocm,
        GpuRuntime::Amd,
        GpuRuntime::Intel,
        GpuRuntime::Auto,
    ]));
    let count = prop::option::of(prop_oneof![
        (1u32..=64).prop_map(GpuCountValue::from),
        (1u32..=64).prop_map(|n| GpuCountValue::Text(n.to_string())),
        select(vec!["all", "ALL", " 2 "]).prop_map(|s| GpuCountValue::Text(s.to_owned())),
    ]);
    let optional = prop::option::of(prop_oneof![
        any::<bool>().prop_map(GpuOptionalValue::Bool),
        select(vec![
            "true", "1", "yes", "on", "false", "0", "no", "off", "YES"
        ])
        .prop_map(|s| GpuOptionalValue::Text(s.to_owned())),
    ]);
    let capabilities = prop::option::of(prop_oneof![
        select(vec!["video,compute", "all", "utility"])
            .prop_map(|s| GpuCapabilitiesValue::new(serde_json::Value::from(s))),
        select(vec![vec!["video"], vec!["compute", "graphics"]])
            .prop_map(|v| GpuCapabilitiesValue::new(serde_json::Value::from(v))),
    ]);
    let vram = prop::option::of((1u32..=MAX_MIN_VRAM_MIB).prop_map(GpuVramValue::new));
    (
        runtime,
        prop::option::of(vendor()),
        count,
        optional,
        capabilities,
        vram,
    )
        .prop_map(
            |(runtime, vendor, count, optional, capabilities, min_vram_mib)| GpuRequest {
                runtime,
                vendor: vendor.map(GpuVendor::Known),
                count,
                optional,
                capabilities,
                min_vram_mib,
            },
        )
        .prop_filter("valid, non-empty request", |g| {
            !g.is_empty() && g.validate().is_ok()
        })
}

fn app_spec() -> impl Strategy<Value = AppSpec> {
    let what = prop_oneof![
        // image references by the registry grammar
        "(localhost:5000/|registry\\.example/)?[a-z0-9]{1,8}([._-][a-z0-9]{1,4})?(/[a-z0-9]{1,8}){0,2}(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,8})?"
            .prop_map(|i| (Some(i), None, None)),
        (
            "https://[a-z]{1,8}\\.example/[a-z]{1,8}\\.git",
            prop::option::of("[a-z][a-z0-9/_.]{0,10}")
        )
            .prop_map(|(url, branch)| (
                None,
                Some(GitSource {
                    url,
                    branch,
                    rev: None,
                    dockerfile: None,
                    secret: None,
                }),
                None,
            )),
        "[a-z]{1,10}".prop_map(|a| (None, None, Some(a))),
    ];
    let ports = prop::collection::vec(
        (
            prop::option::of(1u32..=65535),
            1u32..=65535,
            prop::option::of(select(vec![PortProtocol::Tcp, PortProtocol::Udp])),
        )
            .prop_map(|(host, container, protocol)| PortMapping {
                host,
                container,
                protocol,
            }),
        0..3,
    );
    let volumes = prop::collection::vec(
        (
            prop_oneof![
                "/[a-z]{1,8}(/[a-z]{1,8}){0,2}",
                "[a-zA-Z0-9][a-zA-Z0-9_.-]{0,10}"
            ],
            "/[a-z]{1,8}",
            any::<bool>(),
        )
            .prop_map(|(source, target, read_only)| VolumeMount {
                source,
                target,
                read_only,
            }),
        0..3,
    );
    let resources = (
        prop::option::of(MIN_MEMORY_BYTES..(1u64 << 42)),
        prop::option::of((1u32..=102_400).prop_map(|n| f64::from(n) / 100.0)),
    )
        .prop_map(|(memory_bytes, cpus)| Resources { memory_bytes, cpus });
    (
        label(),
        what,
        prop::option::of(Just("app".to_owned())),
        prop::collection::btree_map("[A-Z_][A-Z0-9_]{0,10}", text(), 0..4),
        prop::collection::vec(text(), 0..4),
        ports,
        volumes,
        resources,
        prop::option::of(text()),
        prop::option::of(gpu_request()),
    )
        .prop_map(
            |(
                name,
                (image, source, app),
                kind,
                env,
                command,
                ports,
                volumes,
                resources,
                restart_token,
                gpu,
            )| {
                AppSpec {
                    name,
                    kind,
                    app,
                    image,
                    source,
                    env,
                    command,
                    ports,
                    volumes,
                    resources,
                    restart_token,
                    gpu,
                    restart: None,
                    healthcheck: None,
                    logs: None,
                    ..AppSpec::default()
                }
            },
        )
}

fn apps() -> impl Strategy<Value = Vec<AppSpec>> {
    prop::collection::vec(app_spec(), 0..4).prop_map(|apps| {
        apps.into_iter()
            .enumerate()
            .map(|(i, mut a)| {
                a.name = format!("{}-{i}", a.name);
                a
            })
            .collect()
    })
}

fn inventory() -> impl Strategy<Value = Inventory> {
    let host = (text(), text(), text(), text(), any::<u32>(), any::<u64>()).prop_map(
        |(hostname, os, kernel, arch, cpus, memory_bytes)| HostInfo {
            hostname,
            os,
            kernel,
            arch,
            cpus,
            memory_bytes,
            cuda_version: (cpus % 2 == 0).then(|| "12.4".to_owned()),
        },
    );
    let gpu = (
        vendor(),
        (text(), text(), text(), text()),
        (
            prop::option::of(text()),
            prop::option::of(text()),
            prop::option::of(any::<u64>()),
        ),
        (
            prop::option::of(text()),
            prop::option::of(text()),
            prop::option::of(text()),
        ),
        any::<bool>(),
    )
        .prop_map(
            |(
                vendor,
                (pci_address, vendor_id, device_id, model),
                (driver, driver_version, vram_bytes),
                (card_node, render_node, uuid),
                passable,
            )| GpuInfo {
                vendor,
                pci_address,
                vendor_id,
                device_id,
                model,
                driver,
                driver_version,
                vram_bytes,
                card_node,
                render_node,
                uuid,
                passable,
                health: None,
            },
        );
    let verdict = (
        any::<bool>(),
        prop::option::of(select(&Reason::ALL[..])),
        prop::option::of(select(vec![
            Mechanism::Cdi,
            Mechanism::NvidiaRuntime,
            Mechanism::DeviceNodes,
        ])),
        prop::option::of(text()),
    )
        .prop_map(
            |(schedulable, reason, mechanism, detail)| AcceleratorVerdict {
                schedulable,
                reason,
                mechanism,
                detail,
            },
        );
    let engine = (
        any::<bool>(),
        prop::option::of(text()),
        prop::option::of(text()),
        prop::collection::vec(text(), 0..3),
        prop::option::of(text()),
        prop::collection::vec(text(), 0..3),
        prop::collection::vec(text(), 0..3),
    )
        .prop_map(
            |(
                reachable,
                version,
                api_version,
                runtimes,
                default_runtime,
                cdi_spec_dirs,
                cdi_devices,
            )| EngineInfo {
                reachable,
                version,
                api_version,
                runtimes,
                default_runtime,
                cdi_spec_dirs,
                cdi_devices,
            },
        );
    (
        host,
        prop::collection::vec(gpu, 0..3),
        prop::collection::btree_map(vendor(), verdict, 0..3),
        engine,
    )
        .prop_map(|(host, gpus, accelerators, engine)| Inventory {
            host,
            gpus,
            accelerators,
            engine,
        })
}

fn app_status() -> impl Strategy<Value = AppStatus> {
    let state = select(vec![
        AppState::Pending,
        AppState::Creating,
        AppState::Running,
        AppState::Restarting,
        AppState::CrashLoop,
        AppState::Stopped,
        AppState::Failed,
        AppState::Exited,
        AppState::Pulling,
    ]);
    let attached = (
        vendor(),
        select(vec![
            Mechanism::Cdi,
            Mechanism::NvidiaRuntime,
            Mechanism::DeviceNodes,
        ]),
        prop::collection::vec(text(), 0..3),
    )
        .prop_map(|(vendor, mechanism, devices)| Attached {
            vendor,
            mechanism,
            capabilities: if vendor == Vendor::Nvidia {
                vec!["compute".into(), "video".into()]
            } else {
                vec![]
            },
            devices,
        });
    let fallback = (
        select(vec![FallbackTier::Preflight, FallbackTier::Engine]),
        select(&Reason::ALL[..]),
        prop::option::of(text()),
    )
        .prop_map(|(tier, reason, detail)| Fallback {
            tier,
            reason,
            detail,
        });
    let gpu = (
        prop::option::of(gpu_request()),
        prop::option::of(attached),
        prop::option::of(fallback),
    )
        .prop_map(|(requested, attached, fallback)| GpuStatus {
            requested,
            attached,
            fallback,
        });
    (
        (label(), any::<u64>(), state, prop::option::of(text())),
        gpu,
        (any::<bool>(), any::<u32>(), prop::option::of(any::<i64>())),
        (
            prop::option::of(text()),
            prop::option::of(text()),
            prop::option::of(text()),
        ),
    )
        .prop_map(
            |(
                (name, generation, state, container_id),
                gpu,
                (restart_required, restart_count, last_exit_code),
                (last_error, image, commit),
            )| AppStatus {
                name,
                generation,
                state,
                container_id,
                gpu,
                restart_required,
                restart_count,
                last_exit_code,
                last_error,
                image,
                commit,
                crash: None,
                health: None,
                ..AppStatus::default()
            },
        )
}

fn error_message() -> impl Strategy<Value = ErrorMessage> {
    (
        prop::option::of(any::<u64>()),
        "[a-z_]{1,20}".prop_map(|c| ErrorCode::from_wire(&c)),
        text(),
        prop::option::of(any::<u64>()),
    )
        .prop_map(|(seq, code, message, ref_seq)| ErrorMessage {
            seq,
            code,
            message,
            ref_seq,
        })
}

fn agent_message() -> impl Strategy<Value = AgentMessage> {
    prop_oneof![
        (
            agent_id(),
            text(),
            text(),
            any::<u32>(),
            prop::option::of(any::<u64>())
        )
            .prop_map(
                |(agent_id, hostname, agent_version, protocol_version, last_generation)| {
                    AgentMessage::Hello(Hello {
                        agent_id,
                        hostname,
                        agent_version,
                        protocol_version,
                        last_generation,
                    })
                }
            ),
        (any::<u64>(), inventory()).prop_map(|(seq, inventory)| AgentMessage::Inventory(
            InventoryReport { seq, inventory }
        )),
        (any::<u64>(), app_status())
            .prop_map(|(seq, status)| AgentMessage::AppStatus(AppStatusReport { seq, status })),
        (
            any::<u64>(),
            select(vec![EventLevel::Info, EventLevel::Warn, EventLevel::Error]),
            prop::option::of(label()),
            text(),
            prop::option::of(any::<u64>()),
        )
            .prop_map(
                |(seq, level, app, message, dropped)| AgentMessage::Event(Event {
                    seq,
                    level,
                    app,
                    message,
                    dropped,
                    image_removed: None,
                })
            ),
        any::<u64>().prop_map(|seq| AgentMessage::Ack(Ack { seq })),
        error_message().prop_map(AgentMessage::Error),
    ]
}

fn control_message() -> impl Strategy<Value = ControlMessage> {
    prop_oneof![
        (
            word(),
            prop::option::of(text()),
            prop::option::of(1u32..=3600)
        )
            .prop_map(
                |(host_id, session_id, heartbeat_secs)| ControlMessage::Welcome(Welcome {
                    host_id,
                    session_id,
                    heartbeat_secs,
                })
            ),
        (any::<u64>(), any::<u64>(), apps()).prop_map(|(seq, generation, apps)| {
            ControlMessage::DesiredState(DesiredStateMessage {
                seq,
                generation,
                apps,
            })
        }),
        (any::<u64>(), any::<u64>(), app_spec()).prop_map(|(seq, generation, app)| {
            ControlMessage::AppUpsert(AppUpsert {
                seq,
                generation,
                app,
            })
        }),
        (any::<u64>(), any::<u64>(), label()).prop_map(|(seq, generation, name)| {
            ControlMessage::AppDelete(AppDelete {
                seq,
                generation,
                name,
            })
        }),
        any::<u64>().prop_map(|seq| ControlMessage::Ack(Ack { seq })),
        error_message().prop_map(|mut e| {
            e.seq = None;
            ControlMessage::Error(e)
        }),
    ]
}

/// `msg` encoded decodes with `decode` to itself, and plain serde agrees with the decoder.
fn encode_decode_is_identity<M>(
    msg: M,
    decode: impl Fn(&[u8]) -> Result<M, DecodeError>,
) -> Result<(), TestCaseError>
where
    M: Encode + serde::de::DeserializeOwned + PartialEq + Clone + std::fmt::Debug,
{
    let text = encode(&msg);
    prop_assert_eq!(decode(text.as_bytes()), Ok(msg.clone()));
    prop_assert_eq!(serde_json::from_str::<M>(&text).unwrap(), msg);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(IDENTITY_CASES))]

    #[test]
    fn agent_encode_decode_is_identity(msg in agent_message()) {
        msg.validate().unwrap();
        encode_decode_is_identity(msg, decode_agent)?;
    }

    #[test]
    fn control_encode_decode_is_identity(msg in control_message()) {
        msg.validate().unwrap();
        encode_decode_is_identity(msg, decode_control)?;
    }

    #[test]
    fn desired_state_file_round_trips(generation in any::<u64>(), apps in apps()) {
        let ds = DesiredState { generation, apps };
        ds.validate().unwrap();
        let text = serde_json::to_string_pretty(&ds).unwrap();
        prop_assert_eq!(serde_json::from_str::<DesiredState>(&text).unwrap(), ds);
    }
}
