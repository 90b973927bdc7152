//! ODAC agent wire protocol v1: the JSON messages exchanged between `odac-agent` and the
//! control plane, their validation and their JSON Schema. This crate does no IO.
//!
//! Decode frames with [`decode_control`] / [`decode_agent`] (size limit, JSON, `type`
//! dispatch, validation), encode with [`encode`]. Every validation error names its field,
//! e.g. `apps[2].gpu.count: 0 is out of range 1..=64`. See `PROTOCOL.md` for the handshake,
//! seq/ack rules and examples.

mod app;
mod codec;
mod desired;
mod error_message;
mod exec;
mod git_source;
mod gpu;
mod gpu_health;
mod gpu_stats;
mod host_access;
mod identity;
mod image_ref;
mod image_removed;
mod inventory;
mod limits;
mod logs;
mod messages;
mod pull;
mod reason;
mod refusal;
mod registry_auth;
mod release;
mod rollout;
mod runtime;
pub mod schema;
pub mod schema_rules;
mod status;
mod update_order;
mod validation;
mod vendor;
mod vendor_facts;

pub use app::{AppSpec, GitSource, PortMapping, PortProtocol, Resources, VolumeMount};
pub use codec::{
    DecodeError, Encode, decode_agent, decode_control, decode_document, encode, error_reply,
};
pub use desired::DesiredState;
pub use exec::{
    EXEC_PATH_SUFFIX, EXEC_SUBPROTOCOL, EXEC_TICKET_HEADER, ExecEndReason, ExecExit, ExecFrame,
    ExecRefused, ExecRequest, ExecResize, ExecStdinEof, MAX_EXEC_DATA_FRAME, MAX_EXEC_SESSION_ID,
    MAX_EXEC_TICKET, STREAM_STDERR, STREAM_STDIN, STREAM_STDOUT, Ticket,
};
pub use git_source::{GitScheme, GitSecret, MAX_SECRET};
pub use gpu::{
    ALL_CAPABILITIES, DRIVER_CAPABILITIES_ENV, DriverCapabilities, DriverCapability,
    GpuCapabilitiesValue, GpuCount, GpuCountValue, GpuOptionalValue, GpuRequest, GpuRuntime,
    GpuVendor, GpuVramValue, MAX_MIN_VRAM_MIB,
};
pub use gpu_health::{GpuError, GpuHealth, GpuHealthState};
pub use gpu_stats::{AppGpuUsage, AppGpus, GpuSample, GpuStats, GpuStatsReport, MAX_STATS_GPUS};
pub use host_access::{
    ALLOWED_CAPS, ALLOWED_SYSCTLS, HostAccess, MAX_HOST_ACCESS_ENTRIES, MAX_SHM_BYTES,
    MIN_SHM_BYTES, ShmSize, SysctlValue, is_gpu_device, parse_size, sysctl_allowed,
};
pub use identity::{AGENT_ID_HEADER, MAX_AGENT_ID, validate_agent_id};
pub use image_ref::{IMAGE_PATTERN, MAX_IMAGE_NAME};
pub use image_removed::{ImageRemovalReason, ImageRemoved};
pub use inventory::{AcceleratorVerdict, EngineInfo, GpuInfo, HostInfo, Inventory};
pub use limits::*;
pub use logs::{
    LOGS_CUT_MARK, LogsCancel, LogsChunk, LogsEnd, LogsEndReason, LogsRequest,
    MAX_LOGS_CHUNK_LINES, MAX_LOGS_LINE, MAX_LOGS_REQUEST_ID, MAX_LOGS_TAIL, MAX_LOGS_TIMEOUT_SECS,
    cut_log_line,
};
pub use messages::{
    AGENT_TYPES, Ack, AgentMessage, AppDelete, AppStatusReport, AppUpsert, CONTROL_TYPES,
    ControlMessage, DesiredStateMessage, ErrorCode, ErrorMessage, Event, EventLevel, Hello,
    InventoryReport, Resync, Welcome,
};
pub use pull::PullPolicy;
pub use reason::Reason;
pub use refusal::{MAX_REFUSAL_CHARS, refusal_text};
pub use registry_auth::{RegistryAuth, registry_host};
pub use release::{
    MAX_MANIFEST, MAX_VERSION, ReleaseManifest, SignedRelease, UpdateOffer, UpdatePhase,
    UpdateStatusReport, check_version, parse_version,
};
pub use rollout::{
    DEFAULT_HEALTHY_DEADLINE_SECS, DEFAULT_MAX_LOCK_SECS, DEFAULT_MIN_HEALTHY_SECS, RolloutReport,
    RolloutState, UpdateOrder, UpdatePolicy,
};
pub use runtime::{
    CrashInfo, CrashReason, HealthCheck, HealthReport, HealthState, LogLimits,
    MAX_HEALTH_OUTPUT_BYTES, MAX_LOG_FILES, MAX_OUTPUT_TAIL_BYTES, MAX_OUTPUT_TAIL_LINES,
    MIN_LOG_SIZE_BYTES, RestartPolicy,
};
pub use status::{AppState, AppStatus, Attached, Fallback, FallbackTier, GpuStatus, ImageFailure};
pub use validation::{ValidationError, check_dns_label};
pub use vendor::{Mechanism, Vendor};
pub use vendor_facts::{Compute, LabModel, NodeRule, VendorFacts, VramSource};

/// Protocol version carried in the WebSocket subprotocol and in `hello`.
pub const PROTOCOL_VERSION: u32 = 1;

/// WebSocket subprotocol name (`Sec-WebSocket-Protocol`).
pub const SUBPROTOCOL: &str = "odac.agent.v1";
