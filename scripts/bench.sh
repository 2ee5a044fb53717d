#!/usr/bin/env bash
# `waggle bench` on the binary optimised for it (scripts/build-pgo.sh), which is then both the
# bench client and, in `compare` and `cluster` without --waggle-bin or --waggle-address, the Waggle it starts:
#   ./scripts/bench.sh compare --workloads W1,W2,W3,W4,W5,W6 --duration 20s --markdown docs/performance.md
#   ./scripts/bench.sh cluster --json cluster.json
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(./scripts/build-pgo.sh)
if { [ "${1:-}" = compare ] || [ "${1:-}" = cluster ]; } && ! printf '%s\n' "$@" | grep -qE '^--waggle-(bin|address)'; then
  set -- "$@" --waggle-bin "$bin"
fi
exec "$bin" bench "$@"
