//! `odac-sim` binary: the simulated control plane (`serve`), a simulated fleet of agents
//! (`fleet`), the all-in-one demo with a real local agent (`demo`), the GPU lab (`gpu-lab`)
//! and agent releases (`release`).

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};
use odac_simulator::fake_agent::fleet::{Fleet, FleetConfig};
use odac_simulator::server::DEFAULT_HEARTBEAT_SECS;
use odac_simulator::{DEFAULT_LISTEN, ServeConfig, Server, SimError, demo, secret_file};

#[derive(Debug, Parser)]
#[command(name = "odac-sim", version, about = "ODAC control-plane simulator")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve the agents' WebSocket, the REST API and the dashboard on one TLS port.
    Serve {
        /// Address to listen on (one TLS port for agents, API and dashboard).
        #[arg(long, default_value = DEFAULT_LISTEN)]
        listen: String,
        /// State dir (CA, fleet state); default $XDG_STATE_HOME/odac-sim.
        #[arg(long)]
        state: Option<PathBuf>,
        /// Agent bearer token to accept (repeatable); none = generate DIR/agent-token.
        #[arg(
            long = "token",
            env = "ODAC_SIM_TOKENS",
            value_delimiter = ',',
            hide_env_values = true
        )]
        tokens: Vec<String>,
        /// File holding agent bearer tokens, one per line (mode 0600; keeps them out of `ps`).
        #[arg(long = "token-file")]
        token_files: Vec<PathBuf>,
        /// Agent ids each static token may register (the first ones it is used with).
        #[arg(
            long,
            default_value_t = odac_simulator::state::identity::DEFAULT_HOSTS_PER_TOKEN,
            value_parser = clap::value_parser!(u32).range(1..=i64::from(odac_simulator::state::identity::MAX_HOSTS_PER_TOKEN))
        )]
        hosts_per_token: u32,
        /// One-time enrollment code to accept (repeatable).
        #[arg(long = "enroll-code")]
        enroll_codes: Vec<String>,
        /// Require this bearer token on the REST API (visible in `ps`: prefer the file or env).
        #[arg(
            long,
            env = "ODAC_SIM_API_TOKEN",
            hide_env_values = true,
            conflicts_with = "api_token_file"
        )]
        api_token: Option<String>,
        /// File holding the REST API's bearer token (mode 0600).
        #[arg(long)]
        api_token_file: Option<PathBuf>,
        /// Serve the REST API without a token on a non-loopback address.
        #[arg(long)]
        insecure_open_api: bool,
        /// Heartbeat (ping) interval told to agents in `welcome`, in seconds.
        #[arg(
            long,
            default_value_t = DEFAULT_HEARTBEAT_SECS,
            value_parser = clap::value_parser!(u32).range(1..=3600)
        )]
        heartbeat_secs: u32,
        /// Pull the catalog's images from this registry mirror (HOST[:PORT]) instead of
        /// their own registries, e.g. a local registry on an air-gapped network.
        #[arg(long, value_name = "HOST[:PORT]", value_parser = odac_simulator::catalog::check_registry)]
        catalog_registry: Option<String>,
        /// Agent releases to offer (`odac-sim release sign` files) and serve (/releases/NAME).
        #[arg(long, value_name = "DIR")]
        releases: Option<PathBuf>,
        /// Release public key (`ed25519:…`, repeatable) told to agents at enrollment.
        #[arg(long = "release-public-key", value_name = "KEY")]
        release_keys: Vec<String>,
    },
    /// Agent releases: make a key, sign a binary (`odac agent update` offers it).
    #[command(subcommand)]
    Release(odac_simulator::release_cli::ReleaseCommand),
    /// Run N protocol-level simulated agents (no Docker) against a control plane.
    Fleet {
        /// Number of simulated agents to run.
        #[arg(long, default_value_t = 10)]
        agents: usize,
        /// Control plane agent URL, e.g. wss://127.0.0.1:7443/agent/v1.
        #[arg(long)]
        cp: String,
        /// CA certificate to trust (PEM), e.g. the simulator's DIR/ca.pem.
        #[arg(long)]
        ca_file: PathBuf,
        /// Agent bearer token the control plane accepts (`odac-sim serve --token`; not the
        /// API token). `ODAC_TOKEN` is still read when neither this nor --token-file is given.
        #[arg(
            long,
            env = "ODAC_AGENT_TOKEN",
            hide_env_values = true,
            conflicts_with = "token_file"
        )]
        token: Option<String>,
        /// File holding the agent bearer token (e.g. the simulator's DIR/agent-token).
        #[arg(long)]
        token_file: Option<PathBuf>,
        /// Host name prefix: agents are named PREFIX-0000, PREFIX-0001, …
        #[arg(long, default_value = "sim")]
        prefix: String,
        /// Heartbeat (ping) interval in seconds.
        #[arg(long, default_value_t = 20)]
        heartbeat_secs: u64,
        /// Stop after this many seconds (default: run until Ctrl-C).
        #[arg(long)]
        duration_secs: Option<u64>,
    },
    /// Check a control plane against the protocol rules it must keep, as a scripted agent:
    /// one PASS/FAIL line per rule; exit 1 when any fails.
    Conformance {
        /// Control plane agent URL, e.g. wss://app.odac.run/agent/v1.
        #[arg(long)]
        control_plane: String,
        /// Agent bearer token.
        #[arg(long, env = "ODAC_TOKEN", hide_env_values = true)]
        token: String,
        /// CA certificate to trust (PEM), for a control plane with a private CA; without it
        /// the public web PKI roots are trusted.
        #[arg(long)]
        ca_file: Option<PathBuf>,
    },
    /// Serve, start a local odac-agent, build the sample image and create a sample app.
    Demo {
        /// Address to listen on (one TLS port for agents, API and dashboard).
        #[arg(long, default_value = DEFAULT_LISTEN)]
        listen: String,
        /// State dir; default $XDG_STATE_HOME/odac-sim-demo.
        #[arg(long)]
        state: Option<PathBuf>,
        /// Leave the sample app (and its container) in place on exit.
        #[arg(long, conflicts_with = "clean")]
        keep: bool,
        /// On exit remove every app of the demo's host, the ones you added too (by default
        /// only the sample app is removed, and the others are named with how to remove them).
        #[arg(long)]
        clean: bool,
    },
    /// Start a private Docker engine configured like a GPU host (simulated NVIDIA, AMD and
    /// Intel GPUs, toolkit stand-ins) and a host root describing it; run until Ctrl-C.
    /// `gpu-lab inject --dir DIR …` breaks a GPU of a running lab; `gpu-lab engine stop|start
    /// --dir DIR` stops and starts its engine.
    #[command(subcommand_negates_reqs = true, args_conflicts_with_subcommands = true)]
    GpuLab {
        /// Lab dir (created, must be empty; removed on exit).
        #[arg(long, required = true)]
        dir: Option<PathBuf>,
        /// GPUs to simulate: vendor:count, comma-separated.
        #[arg(long, default_value = "nvidia:2,amd:2,intel:1", value_parser = odac_simulator::gpu_lab::LabGpus::parse)]
        gpus: odac_simulator::gpu_lab::LabGpus,
        /// The `nvidia` runtime: not registered, registered, or registered as the default.
        #[arg(long, value_enum, default_value_t)]
        nvidia_runtime: odac_simulator::gpu_lab::NvidiaRuntime,
        /// The NVIDIA driver version the lab shows, e.g. 535.183.01 (CUDA 12.2); the hook
        /// refuses images whose NVIDIA_REQUIRE_CUDA its CUDA version cannot meet.
        #[arg(long, value_name = "VERSION", default_value = odac_simulator::gpu_lab::host_root::NVIDIA_DRIVER, value_parser = odac_simulator::gpu_lab::host_root::parse_driver)]
        nvidia_driver: String,
        /// VRAM of the AMD GPUs in MiB, comma-separated in GPU order (the last repeats),
        /// e.g. 16384,24576; the agent reads it from sysfs (mem_info_vram_total).
        #[arg(long, value_name = "MIB[,MIB…]", default_value = "65520", value_parser = odac_simulator::gpu_lab::host_root::parse_vram)]
        vram_mib: ::std::vec::Vec<u64>,
        /// Stop (as on SIGTERM) when the process that started the lab exits.
        #[arg(long)]
        stop_with_parent: bool,
        /// A fault in a running lab instead of a new lab.
        #[command(subcommand)]
        action: Option<LabAction>,
    },
}

/// `odac-sim gpu-lab inject` and `engine`.
#[derive(Debug, Subcommand)]
enum LabAction {
    /// Stop the running lab's private engine (its containers stop with it) or start it again.
    Engine {
        /// The running lab's dir.
        #[arg(long)]
        dir: PathBuf,
        /// stop or start.
        #[arg(value_enum)]
        action: odac_simulator::gpu_lab::control::EngineAction,
    },
    /// Break (or mend) one GPU of the running lab at --dir, as the host would show it.
    Inject {
        /// The running lab's dir.
        #[arg(long)]
        dir: PathBuf,
        /// What happens to the GPU.
        #[command(subcommand)]
        fault: LabFault,
    },
}

/// One fault of `gpu-lab inject`.
#[derive(Debug, Subcommand)]
enum LabFault {
    /// The NVIDIA kernel module reports Xid N for NVIDIA GPU --gpu (a line in the kmsg stand-in).
    Xid {
        /// The Xid, e.g. 79 (fallen off the bus), 48 (double-bit ECC), 13 (application).
        code: u32,
        /// The lab's NVIDIA GPU index.
        #[arg(long)]
        gpu: u32,
    },
    /// The GPU's PCI device leaves the host root's sysfs.
    Vanish {
        /// The GPU index among the vendor's lab GPUs.
        #[arg(long)]
        gpu: u32,
        /// nvidia, amd or intel.
        #[arg(long, default_value = "nvidia", value_parser = odac_simulator::gpu_lab::inject::parse_vendor)]
        vendor: odac_protocol::Vendor,
    },
    /// A vanished GPU comes back.
    Return {
        /// The GPU index among the vendor's lab GPUs.
        #[arg(long)]
        gpu: u32,
        /// nvidia, amd or intel.
        #[arg(long, default_value = "nvidia", value_parser = odac_simulator::gpu_lab::inject::parse_vendor)]
        vendor: odac_protocol::Vendor,
    },
}

/// `$XDG_STATE_HOME/NAME`, `$HOME/.local/state/NAME`, or `./NAME-state`.
fn default_state(name: &str) -> PathBuf {
    if let Some(d) = std::env::var_os("XDG_STATE_HOME").filter(|d| !d.is_empty()) {
        return PathBuf::from(d).join(name);
    }
    if let Some(h) = std::env::var_os("HOME").filter(|d| !d.is_empty()) {
        return PathBuf::from(h).join(".local/state").join(name);
    }
    PathBuf::from(format!("{name}-state"))
}

fn init_logging() {
    odac_simulator::logging::init();
}

async fn main_async(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Serve {
            listen,
            state,
            mut tokens,
            token_files,
            hosts_per_token,
            enroll_codes,
            api_token,
            api_token_file,
            insecure_open_api,
            heartbeat_secs,
            catalog_registry,
            releases,
            release_keys,
        } => {
            for f in &token_files {
                tokens.extend(secret_file::read_tokens(f)?);
            }
            let api_token = match api_token_file {
                Some(f) => Some(secret_file::read_one(&f)?),
                None => api_token,
            };
            let mut cfg =
                ServeConfig::new(listen, state.unwrap_or_else(|| default_state("odac-sim")));
            cfg.tokens = tokens;
            cfg.hosts_per_token = hosts_per_token;
            cfg.enroll_codes = enroll_codes;
            cfg.api_token = api_token;
            cfg.insecure_open_api = insecure_open_api;
            cfg.heartbeat_secs = heartbeat_secs;
            cfg.catalog_registry = catalog_registry;
            cfg.releases = releases;
            cfg.release_keys = release_keys;
            let server = Server::start(cfg).await?;
            print!("{}", server.banner());
            server.run_until_signal().await;
        }
        Command::Release(command) => command.run()?,
        Command::Fleet {
            agents,
            cp,
            ca_file,
            token,
            token_file,
            prefix,
            heartbeat_secs,
            duration_secs,
        } => {
            let ca_pem = std::fs::read(&ca_file)
                .map_err(|e| anyhow::anyhow!("cannot read CA file {}: {e}", ca_file.display()))?;
            let token = match (token, token_file) {
                (Some(t), _) => t,
                (None, Some(f)) => std::fs::read_to_string(&f)
                    .map_err(|e| anyhow::anyhow!("cannot read token file {}: {e}", f.display()))?
                    .trim()
                    .to_owned(),
                (None, None) => match std::env::var("ODAC_TOKEN") {
                    Ok(t) if !t.is_empty() => {
                        eprintln!(
                            "warning: reading the agent token from ODAC_TOKEN, which is the API \
                             token of `odac`; set ODAC_AGENT_TOKEN instead"
                        );
                        t
                    }
                    _ => anyhow::bail!(
                        "give the agent token with --token, --token-file or ODAC_AGENT_TOKEN"
                    ),
                },
            };
            let fleet = Fleet::start(&FleetConfig {
                agents,
                url: cp,
                ca_pem,
                token,
                prefix,
                heartbeat: Duration::from_secs(heartbeat_secs.max(1)),
            });
            println!("fleet: {agents} simulated agents started");
            let mut tick = tokio::time::interval(Duration::from_secs(5));
            let until = duration_secs.map(|s| tokio::time::Instant::now() + Duration::from_secs(s));
            let signal = odac_simulator::server::wait_for_signal();
            tokio::pin!(signal);
            loop {
                tokio::select! {
                    _ = tick.tick() => println!("{}", fleet.summary()),
                    _ = &mut signal => break,
                }
                if until.is_some_and(|u| tokio::time::Instant::now() >= u) {
                    break;
                }
            }
            println!("{}", fleet.summary());
            fleet.stop().await;
        }
        Command::Conformance {
            control_plane,
            token,
            ca_file,
        } => {
            let ca_pem = match &ca_file {
                Some(f) => std::fs::read(f)
                    .map_err(|e| anyhow::anyhow!("cannot read CA file {}: {e}", f.display()))?,
                None => Vec::new(),
            };
            let cfg =
                odac_simulator::conformance::ConformanceConfig::new(control_plane, token, ca_pem);
            let outcomes = odac_simulator::conformance::run(&cfg).await;
            print!("{}", odac_simulator::conformance::report(&outcomes));
            if !odac_simulator::conformance::all_passed(&outcomes) {
                std::process::exit(1);
            }
        }
        Command::Demo {
            listen,
            state,
            keep,
            clean,
        } => {
            let on_exit = match (keep, clean) {
                (true, _) => demo::OnExit::Keep,
                (_, true) => demo::OnExit::Clean,
                _ => demo::OnExit::RemoveSample,
            };
            demo::run(
                &listen,
                &state.unwrap_or_else(|| default_state("odac-sim-demo")),
                on_exit,
            )
            .await?;
        }
        Command::GpuLab {
            dir,
            gpus,
            nvidia_runtime,
            nvidia_driver,
            vram_mib,
            stop_with_parent,
            action,
        } => {
            if let Some(LabAction::Inject { dir, fault }) = action {
                use odac_protocol::Vendor;
                use odac_simulator::gpu_lab::inject::{Fault, inject};
                let (fault, vendor, gpu) = match fault {
                    LabFault::Xid { code, gpu } => (Fault::Xid(code), Vendor::Nvidia, gpu),
                    LabFault::Vanish { gpu, vendor } => (Fault::Vanish, vendor, gpu),
                    LabFault::Return { gpu, vendor } => (Fault::Return, vendor, gpu),
                };
                println!("{}", inject(&dir, fault, vendor, gpu)?);
                return Ok(());
            }
            if let Some(LabAction::Engine { dir, action }) = action {
                let said = odac_simulator::gpu_lab::control::request(&dir, action).await?;
                println!("{said}");
                return Ok(());
            }
            let Some(dir) = dir else {
                anyhow::bail!("gpu-lab: --dir is required");
            };
            let config = odac_simulator::gpu_lab::LabConfig {
                dir,
                gpus,
                nvidia_runtime,
                nvidia_driver,
                vram_mib,
                stop_with_parent,
            };
            odac_simulator::gpu_lab::run(&config).await?;
        }
    }
    Ok(())
}

fn main() {
    init_logging();
    let cli = Cli::parse();
    let rt = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            std::process::exit(1);
        }
    };
    if let Err(e) = rt.block_on(main_async(cli)) {
        eprintln!("error: {e:#}");
        // a configuration that cannot work is EX_CONFIG, like the agent's
        let config = matches!(
            e.downcast_ref::<SimError>(),
            Some(SimError::Config(_) | SimError::SecretFile { .. })
        );
        std::process::exit(if config { 78 } else { 1 });
    }
}
