//! `odac-agent enroll`: runs [`enroll`](crate::enroll::enroll) and prints what was written
//! (never the code or the token). Exit 0 when enrolled, 1 when the control plane refused or
//! could not be reached or a file could not be written, 2 for bad arguments (URL, code, CA
//! file).

use super::{EXIT_FAILURE, EXIT_OK, EXIT_USAGE};
use crate::enroll::{EnrollArgs, EnrollError, enroll};

/// The body of `odac-agent enroll`: prints what was written (never a secret); returns the exit
/// code.
pub fn enroll_command(args: &EnrollArgs) -> i32 {
    match enroll(args) {
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
