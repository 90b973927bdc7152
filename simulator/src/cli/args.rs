//! The `odac` command line as clap parses it. One vendor vocabulary everywhere
//! (`--nvidia`, `--amd`, `--intel`, `--auto`; `create`'s old `--gpu-*` spellings are hidden
//! aliases), every flag with a help line, and environment variables shown by name only.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// `odac`: drive an ODAC control plane.
#[derive(Debug, Parser)]
#[command(name = "odac", version, about = "ODAC command line client")]
pub struct Cli {
    /// Control plane URL: the base (https://HOST:PORT) or the `api:` line `odac-sim serve`
    /// prints (https://HOST:PORT/api/).
    #[arg(
        long,
        env = "ODAC_API",
        global = true,
        hide_env_values = true,
        default_value = "https://127.0.0.1:7443"
    )]
    pub api: String,
    /// CA certificate (PEM) to trust for the API, e.g. the simulator's DIR/ca.pem.
    #[arg(long, env = "ODAC_CA_FILE", global = true, hide_env_values = true)]
    pub ca_file: Option<PathBuf>,
    /// API bearer token (`odac-sim serve --api-token`); not needed when the API is open.
    #[arg(long, env = "ODAC_TOKEN", global = true, hide_env_values = true)]
    pub token: Option<String>,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Top-level commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Apps: create, change GPU, list, restart, remove.
    #[command(subcommand)]
    App(AppCommand),
    /// Hosts: the fleet inventory.
    #[command(subcommand)]
    Host(HostCommand),
    /// Registry logins the control plane sends to agents that pull from them.
    #[command(subcommand)]
    Registry(RegistryCommand),
    /// The event log: exec sessions (who, what, how long, exit code), crashes, conflicts.
    Events(super::events::EventsArgs),
    /// The agents themselves: roll a signed agent release out over the fleet.
    #[command(subcommand)]
    Agent(AgentCommand),
}

/// `odac agent …`.
#[derive(Debug, Subcommand)]
pub enum AgentCommand {
    /// Update hosts' agents to a signed release, in waves that halt at the first failure.
    Update(super::agent_update::AgentUpdateArgs),
}

/// `odac registry …`.
#[derive(Debug, Subcommand)]
pub enum RegistryCommand {
    /// Log in to a registry: its apps' agents get the credentials to pull.
    Login(LoginArgs),
    /// List registry logins (never the passwords).
    List(ListArgs),
    /// Forget a registry login.
    Logout(HostArg),
}

/// `odac registry login`.
#[derive(Debug, Args)]
pub struct LoginArgs {
    /// Registry host[:port], as image references name it (e.g. 127.0.0.1:5000).
    pub host: String,
    /// User name.
    #[arg(long, short = 'u')]
    pub username: String,
    /// Read the password from standard input (the only way to give it).
    #[arg(long)]
    pub password_stdin: bool,
}

/// A registry host.
#[derive(Debug, Args)]
pub struct HostArg {
    /// Registry host[:port].
    pub host: String,
}

/// `odac app …`.
#[derive(Debug, Subcommand)]
pub enum AppCommand {
    /// Create an app from an image, a git URL, a catalog app or a JSON app spec (-f).
    Create(CreateArgs),
    /// Set, change or remove an app's GPU request (no vendor flag: detect the host's vendor).
    Gpu(GpuArgs),
    /// List apps: requested GPU, attached devices and the reason side by side.
    List(ListArgs),
    /// Change an app's image or env (or its whole spec with -f); the agent rolls it out and
    /// back when the new version does not stay up.
    Update(super::update::UpdateArgs),
    /// Restart an app (applies a changed GPU request).
    Restart(NameArg),
    /// Remove an app and its container.
    Remove(NameArg),
    /// Show one app: state, health, and why it is down (crash, exit code, last output).
    Show(NameArg),
    /// Print an app's output (`--follow` keeps printing it), streamed from its agent.
    Logs(super::logs::LogsArgs),
    /// Run a command in an app's container: `odac app exec NAME -- CMD…` (its exit code is
    /// the CLI's).
    Exec(super::exec::ExecArgs),
    /// An interactive shell in an app's container (TTY, raw terminal, resize).
    Shell(super::shell::ShellArgs),
}

/// `odac host …`.
#[derive(Debug, Subcommand)]
pub enum HostCommand {
    /// List hosts: GPUs, schedulable vendors, reasons, engine.
    List(ListArgs),
    /// Show one host and each GPU with its current figures.
    Show(HostShowArgs),
    /// Make a one-time enrollment code and print the `odac-agent enroll` line that uses it.
    EnrollCode(EnrollCodeArgs),
}

/// `odac host enroll-code [--config-dir DIR]`.
#[derive(Debug, Args)]
pub struct EnrollCodeArgs {
    /// Where the agent keeps agent.toml and its token (the GPU lab's DIR for its agent);
    /// the printed line leaves it out for the default /etc/odac.
    #[arg(long, value_name = "DIR")]
    pub config_dir: Option<PathBuf>,
}

/// `odac host show HOST`.
#[derive(Debug, Args)]
pub struct HostShowArgs {
    /// Host id or host name.
    pub host: String,
    /// Print the API's JSON (host and GPU figures) instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// An app name.
#[derive(Debug, Args)]
pub struct NameArg {
    /// App name.
    pub name: String,
}

/// `--json`.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Print the API's JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// A GPU count: 1..=64 or `all`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Count {
    /// A number of GPUs.
    N(u32),
    /// Every GPU.
    All,
}

/// Parses `--count`.
pub fn parse_count(s: &str) -> Result<Count, String> {
    if s.eq_ignore_ascii_case("all") {
        return Ok(Count::All);
    }
    match s.parse::<u32>() {
        Ok(n) if (1..=odac_protocol::MAX_GPU_COUNT).contains(&n) => Ok(Count::N(n)),
        _ => Err(format!(
            "expected a number of GPUs from 1 to {} or \"all\"",
            odac_protocol::MAX_GPU_COUNT
        )),
    }
}

/// The GPU flags shared by `create` and `gpu`.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("vendor").args(["nvidia", "amd", "intel", "auto"])))]
pub struct GpuFlags {
    /// Require NVIDIA GPUs.
    #[arg(long, alias = "gpu-nvidia")]
    pub nvidia: bool,
    /// Require AMD GPUs (ROCm).
    #[arg(long, alias = "gpu-amd")]
    pub amd: bool,
    /// Require Intel GPUs.
    #[arg(long, alias = "gpu-intel")]
    pub intel: bool,
    /// Detect the vendor from the host's inventory (the default of `odac app gpu`); with
    /// --optional the agent picks one at every start instead.
    #[arg(long, alias = "gpu-auto")]
    pub auto: bool,
    /// How many GPUs: 1 to 64, or all (the default).
    #[arg(long, value_name = "N|all", value_parser = parse_count)]
    pub count: Option<Count>,
    /// Run on the CPU when no GPU can be had, instead of failing (any vendor, unless one is
    /// named).
    #[arg(long)]
    pub optional: bool,
    /// NVIDIA driver capabilities, comma-separated: compute, utility, video, graphics,
    /// display, compat32 or all (default: the image's NVIDIA_DRIVER_CAPABILITIES, else
    /// compute,utility).
    #[arg(long, value_name = "LIST", value_parser = parse_capabilities)]
    pub capabilities: Option<odac_protocol::DriverCapabilities>,
    /// Only GPUs with at least this much VRAM, in MiB (1 to 1048576), e.g. 20000 for a
    /// model of about 20 GB.
    #[arg(long, value_name = "MIB", value_parser = clap::value_parser!(u32).range(1..=i64::from(odac_protocol::MAX_MIN_VRAM_MIB)))]
    pub min_vram_mib: Option<u32>,
    /// Shorthand for hardware video encode/decode (NVENC/NVDEC): adds video to
    /// --capabilities, or asks for compute,utility,video.
    #[arg(long)]
    pub video: bool,
}

/// Parses `--capabilities`.
pub fn parse_capabilities(s: &str) -> Result<odac_protocol::DriverCapabilities, String> {
    match odac_protocol::DriverCapabilities::parse_list(s) {
        Ok(set) if set.names().is_empty() => Err("names no capability".into()),
        Ok(set) => Ok(set),
        Err(name) => Err(format!(
            "unknown capability {name:?} (expected compute, utility, video, graphics, display, compat32 or all)"
        )),
    }
}

impl GpuFlags {
    /// The vendor named by a flag, as the API spells the runtime; `auto` when none.
    pub fn runtime(&self) -> &'static str {
        if self.nvidia {
            "nvidia"
        } else if self.amd {
            "amd"
        } else if self.intel {
            "intel"
        } else {
            "auto"
        }
    }

    /// Whether any GPU flag was given.
    pub fn any(&self) -> bool {
        self.nvidia
            || self.amd
            || self.intel
            || self.auto
            || self.count.is_some()
            || self.optional
            || self.capabilities.is_some()
            || self.video
            || self.min_vram_mib.is_some()
    }

    /// The driver capabilities asked for by `--capabilities` and `--video`.
    pub fn driver_capabilities(&self) -> Option<odac_protocol::DriverCapabilities> {
        let video = odac_protocol::DriverCapability::Video;
        match (&self.capabilities, self.video) {
            (Some(set), video_too) if video_too => Some(set.clone().with(video)),
            (Some(set), _) => Some(set.clone()),
            (None, true) => Some(odac_protocol::DriverCapabilities::toolkit_default().with(video)),
            (None, false) => None,
        }
    }
}

/// `odac app create`.
#[derive(Debug, Args)]
#[command(group(
    clap::ArgGroup::new("what")
        .required(true)
        .args(["image", "url", "app", "file"])
))]
pub struct CreateArgs {
    /// App name (a lowercase DNS label).
    #[arg(short = 'n', long, required_unless_present = "file")]
    pub name: Option<String>,
    /// Container image to run.
    #[arg(long)]
    pub image: Option<String>,
    /// Git repository URL to build the image from.
    #[arg(short = 'u', long = "url")]
    pub url: Option<String>,
    /// Catalog app to run (e.g. ollama), resolved to an image by the control plane.
    #[arg(long)]
    pub app: Option<String>,
    /// Git branch to build (with -u).
    #[arg(long)]
    pub branch: Option<String>,
    /// JSON app spec to post as is (a file, or - for standard input), e.g.
    /// {"name":"ollama-app","type":"app","app":"ollama","gpu":{"runtime":"nvidia"}}.
    #[arg(
        short = 'f',
        long = "file",
        value_name = "FILE|-",
        conflicts_with_all = ["name", "image", "url", "app", "branch", "nvidia", "amd", "intel", "auto", "count", "optional", "capabilities", "video", "min_vram_mib"]
    )]
    pub file: Option<String>,
    /// Host id or host name to place the app on (optional when one host is connected).
    #[arg(long)]
    pub host: Option<String>,
    /// GPU request.
    #[command(flatten)]
    pub gpu: GpuFlags,
}

/// `odac app gpu`.
#[derive(Debug, Args)]
pub struct GpuArgs {
    /// App name.
    pub name: String,
    /// GPU request; no vendor flag means automatic vendor detection.
    #[command(flatten)]
    pub gpu: GpuFlags,
    /// Remove the GPU request (the app runs on the CPU after its next restart).
    #[arg(long, conflicts_with_all = ["nvidia", "amd", "intel", "auto", "count", "optional", "capabilities", "video", "min_vram_mib"])]
    pub off: bool,
}
