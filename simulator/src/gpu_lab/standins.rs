//! The stand-ins for the NVIDIA container toolkit that the lab writes into `DIR/bin`: the
//! `nvidia-container-runtime-hook` (moby's `nvidia` device driver adds it as a prestart hook
//! when it finds it on dockerd's PATH) and the `nvidia-container-runtime` (registered as the
//! engine's `nvidia` runtime; it wraps runc). Both log what they were asked to the hook log;
//! the hook makes the requested devices appear in the container as character devices with
//! `/dev/null`'s numbers (1:3), and fails with the toolkit's words while the fail file exists.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use super::error::LabError;

/// File name of the hook stand-in (the name moby looks up on PATH).
pub const HOOK: &str = "nvidia-container-runtime-hook";
/// File name of the runtime stand-in.
pub const RUNTIME: &str = "nvidia-container-runtime";
/// What the hook prints when told to fail (the real toolkit's words on a host without driver).
pub const HOOK_FAILURE: &str =
    "nvidia-container-cli: initialization error: nvml error: driver not loaded";

/// The hook: reads the OCI state on stdin, the bundle's config.json, logs one line, creates
/// `/dev/nvidiaN` (per visible UUID or index, from `DIR/nvidia-devices`), `/dev/nvidiactl` and
/// `/dev/nvidia-uvm` inside the container's mount namespace.
fn hook_script(dir: &Path) -> String {
    let dir = dir.display();
    format!(
        r#"#!/bin/sh
# odac gpu-lab stand-in for nvidia-container-runtime-hook (see odac-sim gpu-lab --help)
LAB='{dir}'
LOG="$LAB/hook.log"
state=$(cat)
field() {{ printf '%s' "$state" | sed -n "s/.*\"$1\": *\"\{{0,1\}}\([^\",}}]*\).*/\1/p"; }}
id=$(field id)
pid=$(field pid)
bundle=$(field bundle)
spec="$bundle/config.json"
visible=$(grep -o 'NVIDIA_VISIBLE_DEVICES=[^"]*' "$spec" | head -n 1 | cut -d= -f2)
devices=$(grep -o '"path": *"/dev/[^"]*"' "$spec" | sed 's/.*"\(\/dev\/[^"]*\)"/\1/' | tr '\n' ',' | sed 's/,$//')
if [ -e "$LAB/hook-fail" ]; then
  echo "hook failed container=$id NVIDIA_VISIBLE_DEVICES=$visible devices=$devices" >> "$LOG"
  echo '{HOOK_FAILURE}' >&2
  exit 1
fi
echo "hook $1 container=$id NVIDIA_VISIBLE_DEVICES=$visible devices=$devices" >> "$LOG"
root=$(grep -o '"root": *{{"path": *"[^"]*"' "$spec" | sed 's/.*"path": *"//; s/"$//')
case "$root" in /*) ;; *) root="$bundle/$root" ;; esac
minors=""
for want in $(echo "$visible" | tr ',' ' '); do
  while read -r uuid minor; do
    if [ "$want" = all ] || [ "$want" = "$uuid" ] || [ "$want" = "$minor" ]; then
      minors="$minors $minor"
    fi
  done < "$LAB/nvidia-devices"
done
[ -n "$minors" ] || exit 0
for node in nvidiactl nvidia-uvm $(for m in $minors; do echo "nvidia$m"; done); do
  nsenter -t "$pid" -m -- mknod -m 666 "$root/dev/$node" c 1 3 || exit 1
done
"#
    )
}

/// The runtime: logs the create of a bundle with its `NVIDIA_VISIBLE_DEVICES`, then runs runc.
fn runtime_script(dir: &Path) -> String {
    let dir = dir.display();
    r#"#!/bin/sh
# odac gpu-lab stand-in for nvidia-container-runtime: log, then hand over to runc
LOG='@DIR@/hook.log'
bundle=""
cmd=""
prev=""
for a in "$@"; do
  [ "$prev" = --bundle ] && bundle="$a"
  [ -z "$cmd" ] && [ "$a" = create ] && cmd=create
  prev="$a"
done
if [ "$cmd" = create ] && [ -n "$bundle" ]; then
  visible=$(grep -o 'NVIDIA_VISIBLE_DEVICES=[^"]*' "$bundle/config.json" | head -n 1 | cut -d= -f2)
  echo "runtime create container=$(basename "$bundle") NVIDIA_VISIBLE_DEVICES=$visible" >> "$LOG"
fi
exec runc "$@"
"#
    .replace("@DIR@", &dir.to_string())
}

/// Writes both stand-ins (mode 0755) into `bin`; `dir` is the lab's directory.
pub fn write(dir: &Path, bin: &Path) -> Result<(), LabError> {
    for (name, text) in [(HOOK, hook_script(dir)), (RUNTIME, runtime_script(dir))] {
        let path = bin.join(name);
        std::fs::write(&path, text).map_err(|e| LabError::io("write", &path, e))?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
            .map_err(|e| LabError::io("chmod", &path, e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scripts_name_the_lab_dir() {
        let dir = Path::new("/tmp/lab");
        let hook = hook_script(dir);
        assert!(hook.starts_with("#!/bin/sh\n") && hook.contains("LAB='/tmp/lab'"));
        assert!(hook.contains(HOOK_FAILURE));
        assert!(runtime_script(dir).contains("LOG='/tmp/lab/hook.log'"));
    }
}
