//! The stand-ins for the NVIDIA container toolkit that the lab writes into `DIR/bin`: the
//! `nvidia-container-runtime-hook` (moby's `nvidia` device driver adds it as a prestart hook
//! when it finds it on dockerd's PATH) and the `nvidia-container-runtime` (registered as the
//! engine's `nvidia` runtime; it wraps runc). Both log what they were asked to the hook log;
//! the hook makes the requested devices appear in the container as character devices with
//! `/dev/null`'s numbers (1:3), and fails with the toolkit's words while the fail file exists.
//! Like the toolkit it honours `NVIDIA_DRIVER_CAPABILITIES` (the last one in the process
//! environment; unset or empty: `utility,compute`; `all`: every one): it logs the effective
//! set and places an empty stand-in named like each capability's real library in
//! `/usr/lib/x86_64-linux-gnu` ([`LIBRARIES`]), so a test image can look for them. It also
//! checks the `NVIDIA_REQUIRE_*` constraints (`cuda` and `driver` conditions; OR of
//! space-separated alternatives, AND of comma-separated conditions; `NVIDIA_DISABLE_REQUIRE`)
//! against the lab's driver and CUDA version ([`DRIVER_FILE`]) and refuses an unmet one with
//! the toolkit's words ([`REQUIREMENT_ERROR`]), logging a `refused` line.

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

/// The file in the lab dir with the lab's driver version and its CUDA version (`550.54.14
/// 12.4`).
pub const DRIVER_FILE: &str = "nvidia-driver";

/// The toolkit's words for an unmet requirement, before the condition.
pub const REQUIREMENT_ERROR: &str =
    "nvidia-container-cli: requirement error: unsatisfied condition:";

/// The hook's requirement check: sets `unmet` to the first condition of the first
/// `NVIDIA_REQUIRE_*` none of whose alternatives holds.
const REQUIRE_CHECK: &str = r#"read -r DRIVER CUDA < "$LAB/nvidia-driver"
vercmp() {
  awk -v a="$1" -v b="$2" 'BEGIN{n=split(a,x,".");m=split(b,y,".");k=n>m?n:m;for(i=1;i<=k;i++){p=x[i]+0;q=y[i]+0;if(p<q){print -1;exit}if(p>q){print 1;exit}}print 0}'
}
cond() {
  key=$(printf '%s' "$1" | sed 's/[<>=!].*//')
  rest=${1#"$key"}
  case "$rest" in '>='*|'<='*|'!='*|'=='*) op=$(printf '%s' "$rest" | cut -c1-2) ;; *) op=$(printf '%s' "$rest" | cut -c1) ;; esac
  want=${rest#"$op"}
  case "$key" in cuda) have="$CUDA" ;; driver) have="$DRIVER" ;; *) return 1 ;; esac
  r=$(vercmp "$have" "$want")
  case "$op" in '>=') [ "$r" -ge 0 ] ;; '>') [ "$r" -gt 0 ] ;; '<=') [ "$r" -le 0 ] ;; '<') [ "$r" -lt 0 ] ;; '='|'==') [ "$r" -eq 0 ] ;; '!=') [ "$r" -ne 0 ] ;; *) return 1 ;; esac
}
unmet=""
disable=$(grep -o 'NVIDIA_DISABLE_REQUIRE=[^"]*' "$spec" | tail -n 1 | cut -d= -f2)
case "$disable" in 1|t|T|true|TRUE|True) ;; *)
  # config.json escapes < > & as \u003c \u003e \u0026
  unmet=$(grep -o 'NVIDIA_REQUIRE_[A-Z0-9_]*=[^"]*' "$spec" | sed 's/\\u003e/>/g; s/\\u003c/</g; s/\\u0026/\&/g' | while IFS= read -r kv; do
    value=${kv#*=}
    [ -n "$value" ] || continue
    met=""
    first=""
    for alt in $value; do
      [ -n "$first" ] || first=$(echo "$alt" | cut -d, -f1)
      ok=1
      for c in $(echo "$alt" | tr ',' ' '); do cond "$c" || ok=""; done
      [ -n "$ok" ] && met=1
    done
    if [ -z "$met" ]; then echo "$first"; break; fi
  done)
;; esac
"#;

/// The stand-in libraries per capability, as the toolkit's real ones are named.
pub const LIBRARIES: [(&str, &[&str]); 4] = [
    (
        "compute",
        &["libcuda.so.1", "libnvidia-ptxjitcompiler.so.1"],
    ),
    ("utility", &["libnvidia-ml.so.1"]),
    ("video", &["libnvidia-encode.so.1", "libnvcuvid.so.1"]),
    ("graphics", &["libGLX_nvidia.so.0", "libEGL_nvidia.so.0"]),
];

/// Where the stand-in libraries go in the container.
pub const LIBRARY_DIR: &str = "/usr/lib/x86_64-linux-gnu";

/// The hook's shell `case` placing each capability's stand-ins under `$libs`.
fn library_cases() -> String {
    LIBRARIES
        .iter()
        .map(|(cap, libs)| {
            let files: Vec<String> = libs.iter().map(|l| format!("$libs/{l}")).collect();
            format!("    {cap}) files=\"$files {}\" ;;\n", files.join(" "))
        })
        .collect()
}

/// The hook: reads the OCI state on stdin, the bundle's config.json, logs one line, creates
/// `/dev/nvidiaN` (per visible UUID or index, from `DIR/nvidia-devices`), `/dev/nvidiactl` and
/// `/dev/nvidia-uvm` inside the container's mount namespace.
fn hook_script(dir: &Path) -> String {
    let dir = dir.display();
    let cases = library_cases();
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
caps=$(grep -o 'NVIDIA_DRIVER_CAPABILITIES=[^"]*' "$spec" | tail -n 1 | cut -d= -f2)
[ -n "$caps" ] || caps=utility,compute
[ "$caps" = all ] && caps=compute,compat32,display,graphics,utility,video
{REQUIRE_CHECK}if [ -n "$unmet" ]; then
  echo "refused container=$id NVIDIA_VISIBLE_DEVICES=$visible requirement=$unmet driver=$DRIVER cuda=$CUDA" >> "$LOG"
  echo "{REQUIREMENT_ERROR} $unmet, please update your driver to a newer version, or use an earlier cuda container" >&2
  exit 1
fi
if [ -e "$LAB/hook-fail" ]; then
  echo "hook failed container=$id NVIDIA_VISIBLE_DEVICES=$visible devices=$devices" >> "$LOG"
  echo '{HOOK_FAILURE}' >&2
  exit 1
fi
echo "hook $1 container=$id NVIDIA_VISIBLE_DEVICES=$visible devices=$devices capabilities=$caps" >> "$LOG"
root=$(grep -o '"root": *{{"path": *"[^"]*"' "$spec" | sed 's/.*"path": *"//; s/"$//')
case "$root" in /*) ;; *) root="$bundle/$root" ;; esac
if [ -n "$visible" ] && [ "$visible" != void ] && [ "$visible" != none ]; then
  libs="$root{LIBRARY_DIR}"
  files=""
  for cap in $(echo "$caps" | tr ',' ' '); do
    case "$cap" in
{cases}    esac
  done
  if [ -n "$files" ]; then
    nsenter -t "$pid" -m -- mkdir -p "$libs" || exit 1
    nsenter -t "$pid" -m -- touch $files || exit 1
  fi
fi
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
        assert!(
            hook.contains(
                "    video) files=\"$files $libs/libnvidia-encode.so.1 $libs/libnvcuvid.so.1\" ;;\n"
            ),
            "{hook}"
        );
        assert!(hook.contains("libs=\"$root/usr/lib/x86_64-linux-gnu\""));
        assert!(hook.contains("read -r DRIVER CUDA < \"$LAB/nvidia-driver\""));
        assert!(hook.contains(REQUIREMENT_ERROR));
        assert!(runtime_script(dir).contains("LOG='/tmp/lab/hook.log'"));
    }
}
