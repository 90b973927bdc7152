//! `odac-sim release …`: make a release key, sign an agent binary into a release file, print
//! a key's public half (the release files themselves are `crate::release`). The signed file
//! goes in the directory `odac-sim serve --releases DIR` serves (artefacts under
//! `/releases/NAME`), and `odac agent update --version V` offers it.

use std::path::PathBuf;

use clap::Subcommand;

use crate::release::{self, RELEASE_SUFFIX, ReleaseError, ReleaseInfo};

/// `odac-sim release …`.
#[derive(Debug, Subcommand)]
pub enum ReleaseCommand {
    /// Make an ed25519 release key in FILE (mode 0600) and print its public key for the
    /// agents' `[update] public_keys`.
    Keygen {
        /// Where to write the key (must not exist).
        file: PathBuf,
    },
    /// Print the public key (`ed25519:…`) of a release key.
    PublicKey {
        /// The key file.
        file: PathBuf,
    },
    /// Sign an agent binary: writes FILE.release.json (or --out) with the manifest
    /// (version, target, size, sha256, url) and its signature.
    Sign {
        /// The release key (from `keygen`).
        #[arg(long)]
        key: PathBuf,
        /// The agent version the binary is, MAJOR.MINOR.PATCH.
        #[arg(long)]
        version: String,
        /// Where agents download the binary, e.g. https://127.0.0.1:7443/releases/odac-agent-0.2.0.
        #[arg(long)]
        url: String,
        /// The target triple it runs on.
        #[arg(long, default_value_t = format!("{}-unknown-linux-gnu", std::env::consts::ARCH))]
        target: String,
        /// Let hosts on a newer version install it (their config must allow it too).
        #[arg(long)]
        allow_downgrade: bool,
        /// The signed release file (default FILE.release.json).
        #[arg(long)]
        out: Option<PathBuf>,
        /// The agent binary.
        file: PathBuf,
    },
}

impl ReleaseCommand {
    /// Runs the command; prints what it made.
    pub fn run(self) -> Result<(), ReleaseError> {
        match self {
            ReleaseCommand::Keygen { file } => {
                let public = release::keygen(&file)?;
                println!("release key written to {}", file.display());
                println!("public key (for [update] public_keys): {public}");
            }
            ReleaseCommand::PublicKey { file } => println!("{}", release::public_key(&file)?),
            ReleaseCommand::Sign {
                key,
                version,
                url,
                target,
                allow_downgrade,
                out,
                file,
            } => {
                let out = out.unwrap_or_else(|| {
                    let mut name = file.clone().into_os_string();
                    name.push(RELEASE_SUFFIX);
                    PathBuf::from(name)
                });
                let info = ReleaseInfo {
                    version,
                    target,
                    url,
                    allow_downgrade,
                };
                release::sign_file(&key, &file, &info, &out)?;
                println!(
                    "signed release {} written to {}",
                    info.version,
                    out.display()
                );
            }
        }
        Ok(())
    }
}
