#!/usr/bin/env bash
# One-time (idempotent) set-up for building Waggle on a Debian machine:
#   1. system packages the build needs (libclang for RocksDB's bindings, a C++ compiler);
#   2. the crates, fetched;
#   3. .tools/protoc, linked from the protoc-bin-vendored crate (raft-proto's build needs it).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-system-deps.sh
cargo fetch --quiet
if [ ! -x .tools/protoc ]; then
  mkdir -p .tools
  src=$(cargo metadata --format-version 1 2>/dev/null | python3 -c '
import json,sys
for p in json.load(sys.stdin)["packages"]:
    if p["name"]=="protoc-bin-vendored-linux-x86_64":
        import os; print(os.path.join(os.path.dirname(p["manifest_path"]),"bin","protoc"))')
  [ -x "$src" ] || { echo "setup.sh: vendored protoc not found" >&2; exit 1; }
  ln -sf "$src" .tools/protoc
fi
