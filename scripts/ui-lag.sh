#!/usr/bin/env bash
# Issue 28's visibility-lag benchmark (docs/performance.md, "Visibility lag in the web UI"):
# a fresh standalone node (query store on), W1's load from `waggle bench run --workload W1`,
# and headless Chromium with the instance list open, measuring for sampled instances the time
# from their task's completion (CompleteJob's answer at the client) to the page showing them
# completed (scripts/lib/ui_lag.cjs). Needs `scripts/install-clients.sh browser`.
#
#   scripts/ui-lag.sh BINARY [SECONDS] [--poll]
#
# --poll: the page may not use the change events (it polls every second, as before issue 28).
# Prints the bench's W1 report and the lag's p50/p90/p99/max; the server log stays in $DIR.
set -euo pipefail
BIN=$(realpath "${1:?waggle binary}")
SECONDS_=${2:-60}
MODE=${3:-}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PEERS="${WAGGLE_PEERS:-$HOME/.cache/waggle-peers}"
DIR=$(mktemp -d /tmp/ui-lag.XXXXXX)
PORT=$((27000 + RANDOM % 1000)); MGMT=$((PORT + 1000)); REST=$((PORT + 2000))
"$BIN" standalone --data-dir "$DIR/data" --port "$PORT" --management-port "$MGMT" --rest-port "$REST" >"$DIR/server.log" 2>&1 &
SERVER=$!
BENCH=
trap '[ -n "$BENCH" ] && kill $BENCH 2>/dev/null; kill $SERVER 2>/dev/null; wait $SERVER 2>/dev/null; rm -rf "$DIR/data"' EXIT
for _ in $(seq 100); do curl -sf "localhost:$MGMT/ready" >/dev/null && break; sleep 0.2; done
"$BIN" --version || true
# W1 for the whole measurement: 5 s of warm-up, the lag's run, a few seconds to spare
"$BIN" bench run --workload W1 --target "127.0.0.1:$PORT" --pid "$SERVER" --warmup 5s --duration "$((SECONDS_ + 20))s" \
  >"$DIR/bench.txt" 2>&1 &
BENCH=$!
sleep 8
NODE_PATH="$PEERS/node/node_modules" node "$ROOT/scripts/lib/ui_lag.cjs" --rest "$REST" --model "$ROOT/workloads/one_task.bpmn" \
  --seconds "$SECONDS_" $MODE
wait $BENCH || true
BENCH=
cat "$DIR/bench.txt"
echo "server log: $DIR/server.log"
