//! Protocol limits, as named constants. A frame or message that exceeds one of them is refused
//! with an error that names the field; the frame limit is checked before any JSON is parsed.

/// Largest WebSocket text frame either side accepts (1 MiB). Bigger frames are refused; the
/// WebSocket session closes them with code 1009 (message too big).
pub const MAX_FRAME_BYTES: usize = 1024 * 1024;

/// Most apps in one desired-state snapshot.
pub const MAX_APPS: usize = 256;

/// Most environment entries in one app spec.
pub const MAX_ENV: usize = 256;

/// Longest string (in bytes) accepted in any field that has no tighter limit.
pub const MAX_STRING: usize = 16 * 1024;

/// Longest app name (a lowercase DNS label).
pub const MAX_NAME: usize = 63;

/// Most command arguments in one app spec.
pub const MAX_COMMAND_ARGS: usize = 256;

/// Most port mappings in one app spec.
pub const MAX_PORTS: usize = 64;

/// Most volume mounts in one app spec.
pub const MAX_VOLUMES: usize = 64;

/// Most GPUs one request may ask for; also the most GPUs an inventory may list.
pub const MAX_GPU_COUNT: u32 = 64;

/// Most entries in any inventory list (runtimes, CDI spec dirs, CDI devices, attached devices).
pub const MAX_LIST: usize = 1024;

/// Smallest memory limit the Docker engine accepts (6 MiB).
pub const MIN_MEMORY_BYTES: u64 = 6 * 1024 * 1024;

/// Largest memory limit an app may ask for (1 PiB): every number on the wire is bounded.
pub const MAX_MEMORY_BYTES: u64 = 1 << 50;

/// Most CPUs an app may ask for.
pub const MAX_CPUS: f64 = 1024.0;

/// Fewest CPUs an app may ask for: one nano-CPU, the engine's unit (less would round to 0,
/// which the engine reads as "no limit").
pub const MIN_CPUS: f64 = 1e-9;
