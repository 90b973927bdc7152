//! `odac-agent enroll`: runs [`enroll`](crate::enroll::enroll) and prints what was written
//! (never the code or the token). Exit 0 when enrolled, 1 when the control plane refused or
//! could not be reached or a file could not be written, 2 for bad arguments (URL, code, CA
//! file).

use std::path::PathBuf;

use super::{EXIT_FAILURE, EXIT_OK, EXIT_USAGE};
use crate::enroll::{DEFAULT_CONFIG_DIR, EnrollCode, EnrollError, Enrollment, enroll};

/// Flags of `odac-agent enroll`.
#[derive(Debug, Clone, clap::Args)]
pub struct EnrollArgs {
    /// One-time enrollment code from the control plane (or env ODAC_ENROLL_CODE, which keeps it
    /// off the process list).
    #[arg(
        long,
        value_name = "CODE",
        env = "ODAC_ENROLL_CODE",
        hide_env_values = true
    )]
    pub code: EnrollCode,
    /// Control plane base URL, e.g. https://app.odac.run.
    #[arg(long, value_name = "URL")]
    pub cp: String,
    /// PEM CA certificate(s) to trust instead of the public roots (a private control plane).
    #[arg(long, value_name = "FILE")]
    pub ca_file: Option<PathBuf>,
    /// Where agent.toml and the token go.
    #[arg(long, value_name = "DIR", default_value = DEFAULT_CONFIG_DIR)]
    pub config_dir: PathBuf,
    /// Record this state directory in agent.toml (and create it, mode 0700).
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
}

impl EnrollArgs {
    /// What these flags ask for.
    pub fn enrollment(&self) -> Enrollment {
        Enrollment {
            code: self.code.clone(),
            cp: self.cp.clone(),
            ca_file: self.ca_file.clone(),
            config_dir: self.config_dir.clone(),
            state_dir: self.state_dir.clone(),
        }
    }
}

/// The body of `odac-agent enroll`: prints what was written (never a secret); returns the exit
/// code.
pub fn enroll_command(args: &EnrollArgs) -> i32 {
    match enroll(&args.enrollment()) {
        Ok(done) => {
            println!("enrolled with {}", args.cp.trim());
            println!("token: {} (mode 0600)", done.token_file.display());
            if let Some(ca) = &done.ca_file {
                println!("ca: {}", ca.display());
            }
            println!(
                "configuration: {} (control_plane.url = {})",
                done.config_file.display(),
                done.agent_url
            );
            if !done.release_keys.is_empty() {
                println!(
                    "release keys: {} trusted for self-update (update.public_keys)",
                    done.release_keys.len()
                );
            }
            println!("next: systemctl restart odac-agent");
            EXIT_OK
        }
        Err(e) => {
            eprintln!("odac-agent enroll: {e}");
            exit_code(&e)
        }
    }
}

/// The process exit code for an [`EnrollError`].
pub fn exit_code(e: &EnrollError) -> i32 {
    if e.is_usage() {
        EXIT_USAGE
    } else {
        EXIT_FAILURE
    }
}
