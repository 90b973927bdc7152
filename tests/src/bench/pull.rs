//! Pull throughput: a ≥ 50 MB image (the sleeper plus 56 MB of random bytes, which do not
//! compress) pushed to a local registry (`odac_e2e::registry`, htpasswd auth), pulled by the
//! agent's own pull path (`DockerEngine::pull_image` with the registry's credentials, the
//! call the app manager makes, progress callback included) against `docker pull` of the same
//! reference from the same registry. Runs alternate after one warm-up of each; the pulled
//! image is removed after every pull, so every run downloads every byte. Target: ≤ 1.05×.

use std::process::Command;
use std::time::Instant;

use odac_e2e::image::ensure_sleeper_image;
use odac_e2e::registry::Registry;
use odac_e2e::{Error, Result};
use odac_host::engine::{ContainerEngine, DockerEngine, RegistryAuth};

use super::{Opts, Row, Table, Target, Unit, docker_or_skip, ms};

/// Size of the random layer, in bytes.
const BLOB_BYTES: usize = 56 * 1024 * 1024;

fn docker(args: &[&str]) -> Result<()> {
    let out = Command::new("docker")
        .args(args)
        .env("DOCKER_BUILDKIT", "0")
        .output()
        .map_err(|e| Error::command(format!("docker {}", args.join(" ")), e.to_string()))?;
    if !out.status.success() {
        return Err(Error::command(
            format!("docker {}", args.join(" ")),
            String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        ));
    }
    Ok(())
}

/// Builds the big image as `tag`: the sleeper plus a random file.
fn build_big(tag: &str) -> Result<()> {
    let base = ensure_sleeper_image()?;
    let dir = tempfile::tempdir().map_err(|e| Error::io("create", "bench context", e))?;
    let mut blob = vec![0u8; BLOB_BYTES];
    let mut urandom =
        std::fs::File::open("/dev/urandom").map_err(|e| Error::io("open", "/dev/urandom", e))?;
    std::io::Read::read_exact(&mut urandom, &mut blob)
        .map_err(|e| Error::io("read", "/dev/urandom", e))?;
    let blob_path = dir.path().join("blob");
    std::fs::write(&blob_path, &blob).map_err(|e| Error::io("write", &blob_path, e))?;
    let dockerfile = dir.path().join("Dockerfile");
    std::fs::write(&dockerfile, format!("FROM {base}\nCOPY blob /blob\n"))
        .map_err(|e| Error::io("write", &dockerfile, e))?;
    let context = dir.path().to_string_lossy().into_owned();
    docker(&["build", "-q", "-t", tag, &context])
}

/// Runs the suite.
pub fn run(opts: Opts) -> Result<Option<Table>> {
    if !docker_or_skip("pull")? {
        return Ok(None);
    }
    let runs = opts.pick(5, 2);
    let password = format!("bench-{}", std::process::id());
    let mut registry = Registry::start("bench", &password)?;
    let local = format!("odac/e2e-bench-pull:{}", std::process::id());
    build_big(&local)?;
    let pushed = registry.push(&local, "bench/big:1");
    let _ = docker(&["image", "rm", &local]);
    let reference = pushed?;
    let auth = RegistryAuth {
        server: registry.host(),
        username: registry.user().to_owned(),
        password: password.clone(),
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::Other(format!("tokio runtime: {e}")))?;
    let engine = rt
        .block_on(DockerEngine::connect(None))
        .map_err(|e| Error::Other(e.to_string()))?;
    let mut t = Table::new(
        format!(
            "Pull of a {} MB image from a local registry — {runs} runs each, alternating, after one warm-up",
            BLOB_BYTES / 1_000_000
        ),
        "docker pull",
    );
    let (mut agent, mut cli) = (Vec::new(), Vec::new());
    for i in 0..=runs {
        let start = Instant::now();
        rt.block_on(engine.pull_image(&reference, Some(&auth), &|_| {}))
            .map_err(|e| Error::Other(format!("agent pull of {reference}: {e}")))?;
        let a = ms(start.elapsed());
        docker(&["image", "rm", &reference])?;
        let start = Instant::now();
        registry.docker_pull(&reference)?;
        let d = ms(start.elapsed());
        docker(&["image", "rm", &reference])?;
        println!("pull run {i}/{runs}: agent {a:.0} ms | docker pull {d:.0} ms");
        if i > 0 {
            agent.push(a);
            cli.push(d);
        }
    }
    let row = Row::new("pull (agent's engine call)", Unit::Ms, agent)
        .baseline(cli)
        .target(Target::RatioAtMost(1.05));
    if let Some(r) = row.ratio() {
        println!("pull ratio agent / docker pull: {r:.3}");
    }
    t.push(row);
    t.note("agent: `DockerEngine::pull_image` with the registry's credentials (what the app manager calls); baseline: `docker pull` (CLI wall time) of the same reference; the image is removed after every pull");
    Ok(Some(t))
}
