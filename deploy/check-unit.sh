#!/usr/bin/env bash
# Checks deploy/odac-agent.service the way CI does:
#   1. `systemd-analyze verify` prints nothing and succeeds;
#   2. `systemd-analyze security --offline=true` rates it at MAX (default 5.0) or lower.
# The unit is checked from a temporary copy whose ExecStart points at an executable that
# exists (verify refuses a missing binary): $ODAC_AGENT_BIN when set, else a stub.
# Needs systemd >= 250 (for --offline); Debian 12 ships 252.
# Usage: deploy/check-unit.sh [--max 5.0] [UNIT]
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
unit="$here/odac-agent.service"
max="5.0"

while [ $# -gt 0 ]; do
  case "$1" in
    --max) max="${2:?--max needs a value}"; shift 2 ;;
    -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
    -*) echo "check-unit: unknown option $1" >&2; exit 2 ;;
    *) unit="$1"; shift ;;
  esac
done

if ! command -v systemd-analyze >/dev/null 2>&1; then
  echo "check-unit: systemd-analyze not found (apt-get install systemd)" >&2
  exit 1
fi
version=$(systemd-analyze --version | awk 'NR==1 {print $2}')
if [ "${version%%.*}" -lt 250 ] 2>/dev/null; then
  echo "check-unit: systemd $version is too old for --offline (need 250 or newer)" >&2
  exit 1
fi
[ -f "$unit" ] || { echo "check-unit: no unit file at $unit" >&2; exit 1; }

# threshold is in tenths: 5.0 -> 50
if ! [[ "$max" =~ ^[0-9]+(\.[0-9])?$ ]]; then
  echo "check-unit: --max must look like 5.0, got $max" >&2
  exit 2
fi
threshold=$(( ${max%.*} * 10 ))
[[ "$max" == *.* ]] && threshold=$(( threshold + ${max#*.} ))

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bin="${ODAC_AGENT_BIN:-}"
if [ -z "$bin" ]; then
  bin="$tmp/odac-agent"
  printf '#!/bin/sh\nexit 0\n' > "$bin"
  chmod 0755 "$bin"
fi
name=$(basename "$unit")
sed "s#^ExecStart=/usr/bin/odac-agent#ExecStart=$bin#" "$unit" > "$tmp/$name"

echo "check-unit: systemd-analyze verify $name (systemd $version)"
out=$(systemd-analyze verify --man=false "$tmp/$name" 2>&1) || {
  printf '%s\n' "$out" >&2
  echo "check-unit: verify failed" >&2
  exit 1
}
if [ -n "$out" ]; then
  printf '%s\n' "$out" >&2
  echo "check-unit: verify printed warnings (must be clean)" >&2
  exit 1
fi

echo "check-unit: systemd-analyze security --offline=true (max $max)"
report=$(systemd-analyze security --offline=true --threshold="$threshold" "$tmp/$name" 2>&1) && rc=0 || rc=$?
level=$(printf '%s\n' "$report" | sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p')
if [ -z "$level" ]; then
  printf '%s\n' "$report" >&2
  echo "check-unit: no exposure level in the security report" >&2
  exit 1
fi
if [ "$rc" -ne 0 ]; then
  printf '%s\n' "$report" | grep -E '^✗' >&2 || true
  echo "check-unit: exposure level $level is above $max" >&2
  exit 1
fi
echo "check-unit: ok (verify clean, exposure $level <= $max)"
