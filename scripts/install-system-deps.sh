#!/usr/bin/env bash
# Installs the Debian packages the build and the tests need: libclang for RocksDB's bindgen, a
# C++ toolchain, and PostgreSQL (Debian's `postgresql` package), whose binaries (initdb, pg_ctl)
# the query store's tests use to start throw-away servers of their own (no system service is
# used; as root the tests run them as the package's `postgres` user).
# Idempotent: does nothing when everything is already present. Needs root (or sudo).
set -euo pipefail
need=()
for p in libclang-dev clang g++ make pkg-config postgresql; do
  dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
[ ${#need[@]} -eq 0 ] && exit 0
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
echo "installing system packages: ${need[*]}"
$SUDO apt-get update -qq
# the package's own cluster and service are not needed (the tests start their own servers); a
# machine without an init system just skips starting the service
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
