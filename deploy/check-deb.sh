#!/usr/bin/env bash
# Builds the Debian package with cargo-deb and checks what is in it:
#   - control fields (dpkg-deb -I): package name, version, architecture, Depends (libc6, git),
#     Recommends (docker), maintainer scripts
#     that enable the unit (deb-systemd-helper) and stop it on removal, the conffile;
#   - contents (dpkg-deb -c): /usr/bin/odac-agent 0755, the unit under /usr/lib/systemd/system
#     (/lib/systemd/system on merged-/usr Debian) 0644, /etc/odac/agent.toml 0644;
#   - extracted into a temp dir (dpkg-deb -x): the unit and the config are the ones in deploy/,
#     the binary runs (`odac-agent version`), and the packaged unit passes check-unit.sh
#     with the packaged binary.
# Usage: deploy/check-deb.sh [--deb FILE | --profile NAME [--no-build]]   (without --deb: `cargo deb
#   -p odac-agent --locked`, release profile unless --profile names another, e.g. `dev` in CI to
#   reuse the test build; --no-build packages the binary already there instead of building it)
# Needs cargo-deb (cargo install --locked cargo-deb) unless --deb is given, and dpkg-deb.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
deb=""
profile="release"
build=()

while [ $# -gt 0 ]; do
  case "$1" in
    --deb) deb="${2:?--deb needs a file}"; shift 2 ;;
    --profile) profile="${2:?--profile needs a name}"; shift 2 ;;
    --no-build) build=(--no-build); shift ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "check-deb: unknown argument $1" >&2; exit 2 ;;
  esac
done

fail() { echo "check-deb: $*" >&2; exit 1; }
command -v dpkg-deb >/dev/null 2>&1 || fail "dpkg-deb not found"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if [ -z "$deb" ]; then
  command -v cargo-deb >/dev/null 2>&1 || fail "cargo-deb not found (cargo install --locked cargo-deb)"
  echo "check-deb: cargo deb -p odac-agent --profile $profile"
  (cd "$repo" && cargo deb -p odac-agent --profile "$profile" ${build[@]+"${build[@]}"} --output "$tmp/out" -- --locked)
  deb=$(find "$tmp/out" -maxdepth 1 -name 'odac-agent_*.deb' | head -n 1)
  [ -n "$deb" ] || fail "cargo deb produced no odac-agent_*.deb"
fi
[ -f "$deb" ] || fail "no package at $deb"
echo "check-deb: inspecting $(basename "$deb")"

version=$(cd "$repo" && sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)

# --- control fields -----------------------------------------------------------------------
field() { dpkg-deb -f "$deb" "$1"; }
[ "$(field Package)" = "odac-agent" ] || fail "Package is $(field Package), want odac-agent"
case "$(field Version)" in
  "$version"|"$version"-*) ;;
  *) fail "Version is $(field Version), want ${version}[-rev]" ;;
esac
[ -n "$(field Architecture)" ] || fail "no Architecture"
[ -n "$(field Maintainer)" ] || fail "no Maintainer"
[ "$(field Section)" = "admin" ] || fail "Section is $(field Section), want admin"
field Depends | grep -q 'libc6' || fail "Depends lacks libc6: $(field Depends)"
field Depends | grep -Eq '(^|, )git( |,|$)' || fail "Depends lacks git (git-sourced apps): $(field Depends)"
field Recommends | grep -q 'docker' || fail "Recommends lacks docker: $(field Recommends)"

info=$(dpkg-deb -I "$deb")
for member in control conffiles postinst prerm postrm; do
  printf '%s\n' "$info" | grep -Eq "^ +[0-9]+ bytes, +[0-9]+ lines +\*? *$member( |$)" \
    || fail "control archive lacks $member"
done
dpkg-deb -e "$deb" "$tmp/control"
grep -qx '/etc/odac/agent.toml' "$tmp/control/conffiles" || fail "/etc/odac/agent.toml is not a conffile"
[ "$(grep -c . "$tmp/control/conffiles")" -eq 1 ] || fail "unexpected conffiles: $(cat "$tmp/control/conffiles")"
grep -q 'deb-systemd-helper' "$tmp/control/postinst" || fail "postinst does not enable the unit"
grep -q 'odac-agent.service' "$tmp/control/postinst" || fail "postinst does not name odac-agent.service"
grep -q 'try-restart' "$tmp/control/postinst" || fail "postinst does not restart a running agent on upgrade"
grep -q 'odac-agent enroll' "$tmp/control/postinst" || fail "postinst lacks the enroll hint"
grep -q 'deb-systemd-invoke stop' "$tmp/control/prerm" || fail "prerm does not stop the service"
grep -q '/etc/odac/token' "$tmp/control/postrm" || fail "postrm does not purge the token"
for s in postinst prerm postrm; do
  sh -n "$tmp/control/$s" || fail "$s is not valid sh"
done

# --- contents -----------------------------------------------------------------------------
list=$(dpkg-deb -c "$deb")
entry() { # mode path
  printf '%s\n' "$list" | awk -v m="$1" -v p="$2" '$1 == m && $6 == p { found = 1 } END { exit !found }' \
    || fail "package lacks $2 with mode $1; contents:
$list"
}
entry '-rwxr-xr-x' './usr/bin/odac-agent'
entry '-rw-r--r--' './etc/odac/agent.toml'
unit_path=$(printf '%s\n' "$list" | awk '$6 ~ /^\.\/(usr\/)?lib\/systemd\/system\/odac-agent\.service$/ { print $6 }')
[ -n "$unit_path" ] || fail "package lacks the unit under /lib/systemd/system or /usr/lib/systemd/system"
entry '-rw-r--r--' "$unit_path"
# nothing that belongs to the operator or the running agent
if printf '%s\n' "$list" | awk '{print $6}' | grep -Eq '^\./(etc/odac/token|etc/odac/ca\.pem|var/lib/)'; then
  fail "package ships a token, a CA or state"
fi

# --- extracted ----------------------------------------------------------------------------
dpkg-deb -x "$deb" "$tmp/root"
cmp -s "$tmp/root/$unit_path" "$here/odac-agent.service" || fail "packaged unit differs from deploy/odac-agent.service"
cmp -s "$tmp/root/etc/odac/agent.toml" "$here/agent.toml" || fail "packaged agent.toml differs from deploy/agent.toml"
out=$("$tmp/root/usr/bin/odac-agent" version) || fail "packaged binary does not run"
[ "$out" = "odac-agent $version" ] || fail "packaged binary says '$out', want 'odac-agent $version'"
ODAC_AGENT_BIN="$tmp/root/usr/bin/odac-agent" "$here/check-unit.sh" "$tmp/root/$unit_path" >/dev/null \
  || fail "packaged unit fails check-unit.sh"

echo "check-deb: ok ($(basename "$deb"): $(printf '%s\n' "$list" | grep -vc '/$') files, unit at ${unit_path#.})"
