//! The `odac` command line client of the control plane's REST API:
//! `odac app create|gpu|list|restart|remove` and `odac host list`. Exit codes: 0 success,
//! 1 failed request (the API's message, or "cannot reach the API"), 2 usage error.

pub mod client;
pub mod table;

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use serde_json::{Map, Value, json};

use self::client::{Client, ClientError, segment};
use crate::views::{AppView, HostView};

/// `odac`: drive an ODAC control plane.
#[derive(Debug, Parser)]
#[command(name = "odac", version, about = "ODAC command line client")]
pub struct Cli {
    /// Control plane API base URL.
    #[arg(
        long,
        env = "ODAC_API",
        global = true,
        default_value = "https://127.0.0.1:7443"
    )]
    pub api: String,
    /// CA certificate (PEM) to trust for the API, e.g. the simulator's `ca.pem`.
    #[arg(long, env = "ODAC_CA_FILE", global = true)]
    pub ca_file: Option<PathBuf>,
    /// API bearer token.
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
}

/// `odac app …`.
#[derive(Debug, Subcommand)]
pub enum AppCommand {
    /// Create an app from an image or a git URL.
    Create(CreateArgs),
    /// Set, change or remove an app's GPU request.
    Gpu(GpuArgs),
    /// List apps: requested GPU, attached devices and fallback reason side by side.
    List(ListArgs),
    /// Restart an app (applies a changed GPU request).
    Restart(NameArg),
    /// Remove an app.
    Remove(NameArg),
}

/// `odac host …`.
#[derive(Debug, Subcommand)]
pub enum HostCommand {
    /// List hosts: GPUs, schedulable vendors, reasons, engine.
    List(ListArgs),
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
    /// Print JSON instead of a table.
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

/// `odac app create`.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("what").required(true).args(["image", "url", "app"])))]
#[command(group(clap::ArgGroup::new("vendor").args(["gpu_nvidia", "gpu_amd", "gpu_intel", "gpu_auto"])))]
pub struct CreateArgs {
    /// App name (a lowercase DNS label).
    #[arg(short = 'n', long)]
    pub name: String,
    /// Container image.
    #[arg(long)]
    pub image: Option<String>,
    /// Git repository URL to build from.
    #[arg(short = 'u', long = "url")]
    pub url: Option<String>,
    /// Catalog app to run (e.g. ollama), resolved to an image by the control plane.
    #[arg(long)]
    pub app: Option<String>,
    /// Git branch (with -u).
    #[arg(long)]
    pub branch: Option<String>,
    /// Host id or host name (optional with one connected host).
    #[arg(long)]
    pub host: Option<String>,
    /// Request NVIDIA GPUs.
    #[arg(long)]
    pub gpu_nvidia: bool,
    /// Request AMD GPUs (ROCm).
    #[arg(long)]
    pub gpu_amd: bool,
    /// Request Intel GPUs.
    #[arg(long)]
    pub gpu_intel: bool,
    /// Request GPUs of whatever vendor the host has.
    #[arg(long)]
    pub gpu_auto: bool,
    /// How many GPUs: 1..=64 or all.
    #[arg(long, value_name = "N|all", value_parser = parse_count)]
    pub count: Option<Count>,
    /// Run on the CPU when no GPU can be had.
    #[arg(long)]
    pub optional: bool,
}

/// `odac app gpu`.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("vendor").args(["nvidia", "amd", "intel"])))]
pub struct GpuArgs {
    /// App name.
    pub name: String,
    /// NVIDIA.
    #[arg(long)]
    pub nvidia: bool,
    /// AMD (ROCm).
    #[arg(long)]
    pub amd: bool,
    /// Intel.
    #[arg(long)]
    pub intel: bool,
    /// How many GPUs: 1..=64 or all.
    #[arg(long, value_name = "N|all", value_parser = parse_count)]
    pub count: Option<Count>,
    /// Run on the CPU when no GPU can be had.
    #[arg(long)]
    pub optional: bool,
    /// Remove the GPU request.
    #[arg(long, conflicts_with_all = ["nvidia", "amd", "intel", "count", "optional"])]
    pub off: bool,
}

fn gpu_json(runtime: &str, count: Option<Count>, optional: bool) -> Value {
    let mut m = Map::new();
    m.insert("runtime".into(), json!(runtime));
    match count {
        Some(Count::N(n)) => {
            m.insert("count".into(), json!(n));
        }
        Some(Count::All) => {
            m.insert("count".into(), json!("all"));
        }
        None => {}
    }
    if optional {
        m.insert("optional".into(), json!(true));
    }
    Value::Object(m)
}

impl CreateArgs {
    /// The `POST /api/apps` body.
    pub fn body(&self) -> Value {
        let mut m = Map::new();
        m.insert("name".into(), json!(self.name));
        if let Some(i) = &self.image {
            m.insert("image".into(), json!(i));
        }
        if let Some(a) = &self.app {
            m.insert("type".into(), json!("app"));
            m.insert("app".into(), json!(a));
        }
        if let Some(u) = &self.url {
            let mut src = Map::new();
            src.insert("url".into(), json!(u));
            if let Some(b) = &self.branch {
                src.insert("branch".into(), json!(b));
            }
            m.insert("source".into(), Value::Object(src));
        }
        if let Some(h) = &self.host {
            m.insert("host".into(), json!(h));
        }
        let runtime = if self.gpu_nvidia {
            Some("nvidia")
        } else if self.gpu_amd {
            Some("amd")
        } else if self.gpu_intel {
            Some("intel")
        } else if self.gpu_auto || self.count.is_some() || self.optional {
            Some("auto")
        } else {
            None
        };
        if let Some(r) = runtime {
            m.insert("gpu".into(), gpu_json(r, self.count, self.optional));
        }
        Value::Object(m)
    }
}

impl GpuArgs {
    /// The `PUT /api/apps/{name}/gpu` body.
    pub fn body(&self) -> Value {
        if self.off {
            return Value::Bool(false);
        }
        let runtime = if self.nvidia {
            "nvidia"
        } else if self.amd {
            "amd"
        } else if self.intel {
            "intel"
        } else {
            "auto"
        };
        gpu_json(runtime, self.count, self.optional)
    }
}

fn print_json(v: &Value) {
    println!(
        "{}",
        serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string())
    );
}

fn app_path(name: &str) -> String {
    format!("/api/apps/{}", segment(name))
}

fn execute(cli: &Cli) -> Result<(), ClientError> {
    let client = Client::new(&cli.api, cli.ca_file.as_deref(), cli.token.clone())?;
    match &cli.command {
        Command::App(AppCommand::Create(args)) => {
            let v: AppView = serde_json::from_value(client.post("/api/apps", &args.body())?)
                .map_err(|e| ClientError(format!("unexpected answer: {e}")))?;
            println!(
                "created app {} on {} ({})",
                v.name,
                if v.hostname.is_empty() {
                    &v.host
                } else {
                    &v.hostname
                },
                v.state
            );
        }
        Command::App(AppCommand::Gpu(args)) => {
            let v = client.put(&format!("{}/gpu", app_path(&args.name)), &args.body())?;
            let app: AppView = serde_json::from_value(v.get("app").cloned().unwrap_or_default())
                .map_err(|e| ClientError(format!("unexpected answer: {e}")))?;
            println!(
                "app {}: gpu request {}",
                app.name,
                table::request(app.requested.as_ref())
            );
            if v.get("restart_required_to_apply") == Some(&Value::Bool(true)) {
                println!("restart required to apply: odac app restart {}", app.name);
            }
        }
        Command::App(AppCommand::List(args)) => {
            let v = client.get("/api/apps")?;
            if args.json {
                print_json(&v);
            } else {
                let apps: Vec<AppView> = serde_json::from_value(v)
                    .map_err(|e| ClientError(format!("unexpected answer: {e}")))?;
                print!("{}", table::apps(&apps));
            }
        }
        Command::App(AppCommand::Restart(a)) => {
            let v: AppView = serde_json::from_value(
                client.post(&format!("{}/restart", app_path(&a.name)), &json!({}))?,
            )
            .map_err(|e| ClientError(format!("unexpected answer: {e}")))?;
            println!(
                "restart requested for app {} (restart token {})",
                v.name,
                v.restart_token.unwrap_or_default()
            );
        }
        Command::App(AppCommand::Remove(a)) => {
            client.delete(&app_path(&a.name))?;
            println!("removed app {}", a.name);
        }
        Command::Host(HostCommand::List(args)) => {
            let v = client.get("/api/hosts")?;
            if args.json {
                print_json(&v);
            } else {
                let hosts: Vec<HostView> = serde_json::from_value(v)
                    .map_err(|e| ClientError(format!("unexpected answer: {e}")))?;
                print!("{}", table::hosts(&hosts));
            }
        }
    }
    Ok(())
}

/// Usage rules clap cannot express alongside the argument groups.
fn check_usage(cli: &Cli) -> Result<(), String> {
    if let Command::App(AppCommand::Create(a)) = &cli.command
        && a.branch.is_some()
        && a.url.is_none()
    {
        return Err("--branch needs -u/--url".to_owned());
    }
    Ok(())
}

/// Runs the CLI on `args` (including the program name); returns the exit code.
pub fn run<I, T>(args: I) -> i32
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return e.exit_code();
        }
    };
    if let Err(msg) = check_usage(&cli) {
        let mut cmd = <Cli as clap::CommandFactory>::command();
        let _ = cmd
            .error(clap::error::ErrorKind::ArgumentConflict, msg)
            .print();
        return 2;
    }
    match execute(&cli) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("error: {e}");
            1
        }
    }
}
