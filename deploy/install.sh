#!/usr/bin/env bash
# Installs (or removes) odac-agent on a systemd host without the Debian package.
#
#   deploy/install.sh [--bin PATH] [--token-file FILE | --enroll-code CODE --cp URL [--ca-file FILE]]
#                     [--config FILE] [--root DIR] [--no-start]
#   deploy/install.sh --uninstall [--purge] [--root DIR]
#
# Installs:
#   /usr/local/bin/odac-agent                  the binary (--bin, default target/release/odac-agent)
#   /etc/systemd/system/odac-agent.service     the unit, ExecStart pointing at /usr/local/bin
#   /etc/odac/agent.toml                       example configuration, mode 0644, kept if present
#   /etc/odac/token                            the control-plane token, mode 0600: copied from
#                                              --token-file, or obtained by `odac-agent enroll`
# Then, on a host where systemd runs: daemon-reload, enable, and (re)start when a token exists.
#
# Running it again is safe: the binary and unit are replaced, the configuration is kept, the
# token is replaced only when a new one is given. --uninstall stops and removes the service,
# binary and unit; --purge also removes /etc/odac and /var/lib/odac-agent.
# --root DIR installs under DIR instead of / (for tests and image builds); with --root, or when
# systemd is not running, systemctl is never called.
#
# Exit status: 0 ok, 1 failure, 2 usage.
set -euo pipefail

prog=install.sh
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)

root=""
bin="$repo/target/release/odac-agent"
config_src=""
token_file=""
enroll_code=""
cp_url=""
ca_file=""
uninstall=0
purge=0
start=1

usage() { sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//'; }
die() { echo "$prog: $*" >&2; exit 1; }
usage_error() { echo "$prog: $*" >&2; echo "run '$0 --help' for usage" >&2; exit 2; }
say() { echo "$prog: $*"; }

need_value() { if [ $# -lt 2 ] || [ -z "$2" ]; then usage_error "$1 needs a value"; fi; }

while [ $# -gt 0 ]; do
  case "$1" in
    --root) need_value "$@"; root="$2"; shift 2 ;;
    --bin) need_value "$@"; bin="$2"; shift 2 ;;
    --config) need_value "$@"; config_src="$2"; shift 2 ;;
    --token-file) need_value "$@"; token_file="$2"; shift 2 ;;
    --enroll-code) need_value "$@"; enroll_code="$2"; shift 2 ;;
    --cp) need_value "$@"; cp_url="$2"; shift 2 ;;
    --ca-file) need_value "$@"; ca_file="$2"; shift 2 ;;
    --uninstall) uninstall=1; shift ;;
    --purge) purge=1; shift ;;
    --no-start) start=0; shift ;;
    -h|--help) usage; exit 0 ;;
    *) usage_error "unknown argument $1" ;;
  esac
done

if [ -n "$token_file" ] && [ -n "$enroll_code" ]; then
  usage_error "--token-file and --enroll-code exclude each other"
fi
if [ -n "$enroll_code" ] && [ -z "$cp_url" ]; then
  usage_error "--enroll-code needs --cp URL"
fi
if [ -z "$enroll_code" ] && { [ -n "$cp_url" ] || [ -n "$ca_file" ]; }; then
  usage_error "--cp and --ca-file only go with --enroll-code"
fi
if [ "$purge" -eq 1 ] && [ "$uninstall" -eq 0 ]; then
  usage_error "--purge only goes with --uninstall"
fi

if [ -n "$root" ]; then
  [ -d "$root" ] || die "--root $root is not a directory"
  root=$(cd "$root" && pwd)
  [ "$root" = "/" ] && root=""
fi

bin_dst="$root/usr/local/bin/odac-agent"
unit_dst="$root/etc/systemd/system/odac-agent.service"
conf_dir="$root/etc/odac"
conf_dst="$conf_dir/agent.toml"
token_dst="$conf_dir/token"
state_dir="$root/var/lib/odac-agent"
unit_src="$here/odac-agent.service"

# systemctl only on the real root of a host where systemd is pid 1
use_systemctl=0
if [ -z "$root" ] && [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
  use_systemctl=1
fi
if [ -z "$root" ] && [ "$(id -u)" -ne 0 ]; then
  die "installing into / needs root (use sudo, or --root DIR)"
fi

# Writes the built-in example configuration (used when deploy/agent.toml is missing).
builtin_config() {
  cat <<'EOF'
# odac-agent configuration. Every key is optional unless noted; the values shown are examples.
# See README.md ("Operating") for the exit codes and the service commands.

# [control_plane]
# url = "wss://app.odac.run/agent/v1"   # required: the control plane's agent endpoint
# ca_file = "/etc/odac/ca.pem"          # extra CA to trust (a private control plane)
# token_file = "/etc/odac/token"        # bearer token, mode 0600 (written by `odac-agent enroll`)

# state_dir = "/var/lib/odac-agent"
# log_level = "info"                    # or RUST_LOG
# log_format = "text"                   # "text" or "json"

# [docker]
# host = "unix:///var/run/docker.sock"
EOF
}

do_uninstall() {
  if [ "$use_systemctl" -eq 1 ]; then
    systemctl disable --now odac-agent.service >/dev/null 2>&1 || true
  fi
  rm -f "$unit_dst" "$bin_dst"
  if [ "$purge" -eq 1 ]; then
    rm -rf "$conf_dir" "$state_dir"
    say "removed odac-agent, its configuration and its state"
  else
    say "removed odac-agent (configuration in $conf_dir kept; --purge removes it)"
  fi
  if [ "$use_systemctl" -eq 1 ]; then
    systemctl daemon-reload
  fi
}

do_install() {
  [ -f "$bin" ] || die "no agent binary at $bin (cargo build --release -p odac-agent, or --bin PATH)"
  [ -f "$unit_src" ] || die "no unit file at $unit_src"
  if [ -n "$token_file" ]; then
    [ -f "$token_file" ] || die "no token file at $token_file"
    [ -s "$token_file" ] || die "token file $token_file is empty"
  fi
  if [ -n "$ca_file" ]; then
    [ -f "$ca_file" ] || die "no CA file at $ca_file"
  fi
  if [ -z "$config_src" ] && [ -f "$here/agent.toml" ]; then
    config_src="$here/agent.toml"
  fi
  if [ -n "$config_src" ]; then
    [ -f "$config_src" ] || die "no configuration file at $config_src"
  fi

  install -d -m 0755 "$root/usr/local/bin" "$root/etc/systemd/system" "$conf_dir"

  # binary: copy beside, then rename, so a running agent is never half-overwritten
  install -m 0755 "$bin" "$bin_dst.new"
  mv -f "$bin_dst.new" "$bin_dst"
  say "installed $bin_dst"

  sed 's#^ExecStart=/usr/bin/odac-agent#ExecStart=/usr/local/bin/odac-agent#' "$unit_src" \
    > "$unit_dst.new"
  chmod 0644 "$unit_dst.new"
  mv -f "$unit_dst.new" "$unit_dst"
  say "installed $unit_dst"

  if [ -n "$enroll_code" ]; then
    # enroll writes $conf_dir/token (0600) and the control_plane keys of agent.toml;
    # the code travels in the environment, not on a command line others can read
    enroll_args=(enroll --cp "$cp_url" --config-dir "$conf_dir")
    [ -n "$ca_file" ] && enroll_args+=(--ca-file "$ca_file")
    [ -n "$config_src" ] && [ ! -e "$conf_dst" ] && install -m 0644 "$config_src" "$conf_dst"
    ODAC_ENROLL_CODE="$enroll_code" "$bin_dst" "${enroll_args[@]}" \
      || die "enrollment failed (see the message above); nothing else was changed"
  fi

  if [ -n "$enroll_code" ]; then
    chmod 0644 "$conf_dst"
    say "configured $conf_dst for $cp_url"
  elif [ -e "$conf_dst" ]; then
    chmod 0644 "$conf_dst"
    say "kept $conf_dst"
  elif [ -n "$config_src" ]; then
    install -m 0644 "$config_src" "$conf_dst"
    say "installed $conf_dst (edit control_plane.url before starting)"
  else
    builtin_config > "$conf_dst.new"
    chmod 0644 "$conf_dst.new"
    mv -f "$conf_dst.new" "$conf_dst"
    say "installed $conf_dst (edit control_plane.url before starting)"
  fi

  if [ -n "$token_file" ]; then
    (umask 077 && cp "$token_file" "$token_dst.new")
    chmod 0600 "$token_dst.new"
    mv -f "$token_dst.new" "$token_dst"
    say "installed $token_dst (mode 0600)"
  elif [ -e "$token_dst" ]; then
    chmod 0600 "$token_dst"
  fi

  if [ -z "$root" ] && command -v getent >/dev/null 2>&1 && ! getent group docker >/dev/null; then
    say "warning: there is no docker group; the unit's SupplementaryGroups=docker will fail (install Docker first)"
  fi
  if [ "$use_systemctl" -eq 1 ]; then
    systemctl daemon-reload
    systemctl enable odac-agent.service >/dev/null
    if [ "$start" -eq 1 ] && [ -s "$token_dst" ]; then
      systemctl restart odac-agent.service
      say "started odac-agent (systemctl status odac-agent; journalctl -u odac-agent)"
    else
      say "enabled odac-agent; start it with: systemctl start odac-agent"
    fi
  else
    say "systemd not in use here: not enabling or starting the service"
  fi
  if [ ! -s "$token_dst" ]; then
    say "no token yet: rerun with --token-file FILE or --enroll-code CODE --cp URL"
  fi
}

if [ "$uninstall" -eq 1 ]; then
  do_uninstall
else
  do_install
fi
