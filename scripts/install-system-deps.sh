#!/usr/bin/env bash
# Installs the Debian packages the build needs (libclang for RocksDB's bindgen, a C++ toolchain).
# Idempotent: does nothing when everything is already present. Needs root (or sudo).
set -euo pipefail
need=()
for p in libclang-dev clang g++ make pkg-config; do
  dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
[ ${#need[@]} -eq 0 ] && exit 0
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
echo "installing system packages: ${need[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
