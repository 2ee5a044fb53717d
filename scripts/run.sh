#!/usr/bin/env bash
# Builds (first time: ~25 min, RocksDB's C++) and starts Waggle standalone with any flags given:
#   ./scripts/run.sh                 broker + gateway, data in ./data, gRPC on 127.0.0.1:26500
#   ./scripts/run.sh --help          every flag
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/waggle-target}"
./scripts/setup.sh
cargo build -p waggle --bin waggle
exec "$CARGO_TARGET_DIR/debug/waggle" "$@"
