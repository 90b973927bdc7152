#!/usr/bin/env bash
# Builds, or reuses, the local Docker image in which tests/tests/e2e/systemd_service.rs boots real
# systemd as PID 1: a minimal Debian rootfs (`debootstrap --variant=minbase`) with systemd,
# dbus, git and ca-certificates, imported with `docker import` (no registry). The rootfs is
# cached as a tarball outside the repository, keyed by a hash of the suite, the package list and
# the recipe revision, so a warm run neither downloads nor builds anything; the image tag
# carries the same key. Prints the image reference on stdout (everything else goes to stderr).
# Units that would touch the host through a privileged container (udev, sysctl, binfmt, module
# loading, gettys) are masked in the rootfs. (`docker import` on 20.10 takes no STOPSIGNAL: the
# test passes `--stop-signal SIGRTMIN+3` itself.)
# Usage: tests/systemd/image.sh        env: ODAC_E2E_CACHE (default /var/cache/odac-e2e),
#        ODAC_E2E_MIRROR (default http://deb.debian.org/debian). Needs root, debootstrap, docker.
set -euo pipefail

suite=bookworm
packages="systemd,systemd-sysv,dbus,git,ca-certificates,libgcc-s1"
# Bump when the steps below change what ends up in the rootfs.
recipe=1
cache="${ODAC_E2E_CACHE:-/var/cache/odac-e2e}"
mirror="${ODAC_E2E_MIRROR:-http://deb.debian.org/debian}"

log() { echo "systemd-image: $*" >&2; }
fail() { log "$*"; exit 1; }

key=$(printf '%s\n' "$suite" "$packages" "$recipe" | sha256sum | cut -c1-12)
image="odac-e2e-systemd:$key"
tarball="$cache/rootfs-$suite-$key.tar.gz"

if docker image inspect "$image" >/dev/null 2>&1; then
  log "reusing image $image"
  echo "$image"
  exit 0
fi

if [ ! -s "$tarball" ]; then
  command -v debootstrap >/dev/null 2>&1 || fail "debootstrap not found (apt-get install debootstrap)"
  [ "$(id -u)" -eq 0 ] || fail "debootstrap needs root"
  mkdir -p "$cache"
  work=$(mktemp -d "$cache/build-XXXXXX")
  trap 'rm -rf "$work"' EXIT
  root="$work/rootfs"
  log "debootstrap $suite into $root (packages: $packages)"
  debootstrap --variant=minbase --include="$packages" "$suite" "$root" "$mirror" >&2 \
    || fail "debootstrap failed (see output above)"

  # Units that make no sense in a container or would reach the host's kernel settings.
  for unit in systemd-udevd.service systemd-udev-trigger.service systemd-udev-settle.service \
    systemd-udevd-control.socket systemd-udevd-kernel.socket systemd-sysctl.service \
    systemd-binfmt.service proc-sys-fs-binfmt_misc.automount proc-sys-fs-binfmt_misc.mount \
    systemd-modules-load.service kmod-static-nodes.service systemd-remount-fs.service \
    sys-kernel-debug.mount sys-kernel-tracing.mount sys-kernel-config.mount sys-fs-fuse-connections.mount \
    dev-hugepages.mount dev-mqueue.mount systemd-firstboot.service systemd-random-seed.service \
    getty.target console-getty.service getty@tty1.service serial-getty@.service \
    systemd-journald-audit.socket systemd-hwdb-update.service systemd-ask-password-wall.path \
    systemd-ask-password-console.path apt-daily.timer apt-daily-upgrade.timer e2scrub_reap.service \
    e2scrub_all.timer fstrim.timer; do
    ln -sf /dev/null "$root/etc/systemd/system/$unit"
  done
  # The boot target is plain multi-user; the journal stays in memory-backed /run.
  ln -sf /lib/systemd/system/multi-user.target "$root/etc/systemd/system/default.target"
  rm -f "$root/etc/hostname" "$root/etc/machine-id" "$root/var/lib/dbus/machine-id"
  : >"$root/etc/machine-id"
  # Trim what the test never reads.
  rm -rf "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb \
    "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/locale/* "$root"/usr/share/info/*

  log "packing $tarball"
  tar -C "$root" --numeric-owner -czf "$tarball.tmp" . || fail "tar of the rootfs failed"
  mv "$tarball.tmp" "$tarball"
fi

log "importing $tarball as $image"
docker import \
  --change 'ENV container=docker' \
  --change 'CMD ["/sbin/init"]' \
  "$tarball" "$image" >/dev/null || fail "docker import of $tarball failed"
echo "$image"
