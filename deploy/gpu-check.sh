#!/bin/sh
# What a real GPU host reports: the inventory, the doctor's checks and one GPU telemetry sample,
# as JSON, with the provenance needed to commit the output as a fixture (host, kernel, date,
# agent version). Run it on any NVIDIA, AMD or Intel host:
#
#   deploy/gpu-check.sh [AGENT] > gpu-check-$(hostname).txt
#
# AGENT defaults to odac-agent on PATH (or target/debug/odac-agent from a checkout). Nothing is
# changed on the host; the engine is asked read-only (GET /info) when it is reachable.
set -u

agent=${1:-}
if [ -z "$agent" ]; then
    if command -v odac-agent >/dev/null 2>&1; then
        agent=odac-agent
    elif [ -x "$(dirname "$0")/../target/debug/odac-agent" ]; then
        agent="$(dirname "$0")/../target/debug/odac-agent"
    else
        echo "gpu-check: no odac-agent on PATH; pass its path as the first argument" >&2
        exit 2
    fi
fi

section() {
    printf '\n=== %s\n' "$1"
}

section "provenance"
printf 'host: %s\nkernel: %s\ndate: %s\nagent: %s\n' \
    "$(hostname)" "$(uname -r)" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$("$agent" version 2>&1)"
for drv in nvidia amdgpu i915 xe; do
    if [ -e "/sys/module/$drv" ]; then
        printf 'module %s: %s\n' "$drv" "$(cat "/sys/module/$drv/version" 2>/dev/null || echo loaded)"
    fi
done

status=0
section "odac-agent inventory --json"
"$agent" inventory --json || status=1
section "odac-agent doctor --json"
# exit 1 means present hardware is unusable: that is a finding, not a script failure
"$agent" doctor --json
[ $? -le 1 ] || status=1
section "odac-agent gpu-stats --json"
"$agent" gpu-stats --json --wait-ms 2000 || status=1
exit $status
