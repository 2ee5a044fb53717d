#!/usr/bin/env bash
# Issue 27's measurement: W2 against a fresh standalone node with the query store on, printing
# the export lag every 10 s (docs/performance.md, "Data lag of the query store").
#
#   scripts/export-lag.sh BINARY [DURATION_S] [QUERY_STORE=true|false]
#
# Prints one line per sample: seconds since start, committed log entries and records the store
# exporter has not acknowledged (waggle_exporter_unacknowledged_entries / _records), the new
# instances the export back pressure refused so far, the exporter's acknowledged position, the partition's records written (waggle_processed_records_total), and the CPU
# seconds of the exporter thread and of the whole server; then the bench's report.
# WAGGLE_LOG=waggle_broker::export=debug,waggle_store=debug adds the exporter's stage times to
# the server log ($DIR/server.log); WAGGLE_EXTRA_ARGS adds arguments to the server's command
# (e.g. "--exporter-max-backlog-records 200000").
set -euo pipefail
BIN=${1:?waggle binary}
DURATION=${2:-300}
STORE=${3:-true}
DIR=$(mktemp -d /tmp/export-lag.XXXXXX)
PORT=$((27000 + RANDOM % 1000)); MGMT=$((PORT + 1000)); REST=$((PORT + 2000))
"$BIN" standalone --data-dir "$DIR/data" --port "$PORT" --management-port "$MGMT" --rest-port "$REST" \
  --query-store "$STORE" ${WAGGLE_EXTRA_ARGS:-} >"$DIR/server.log" 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null; wait $SERVER 2>/dev/null; rm -rf "$DIR/data"' EXIT
for _ in $(seq 100); do curl -sf "localhost:$MGMT/metrics" >/dev/null && break; sleep 0.2; done
ticks=$(getconf CLK_TCK)
cpu() { # utime+stime of the threads whose name starts with $1 ("" for all), in seconds
  local total=0
  for t in /proc/$SERVER/task/*; do
    read -r name <"$t/comm" || continue
    [[ -z "$1" || $name == $1* ]] || continue
    set -- "$1" $(sed 's/^.*) //' "$t/stat")
    total=$((total + ${13} + ${14}))
  done
  echo "scale=1; $total / $ticks" | bc
}
sample() {
  local m; m=$(curl -sf "localhost:$MGMT/metrics" || true)
  local lag lagr refused ack rec
  lag=$({ grep '^waggle_exporter_unacknowledged_entries{' <<<"$m" || true; } | awk '{s+=$2} END {print s+0}')
  lagr=$({ grep '^waggle_exporter_unacknowledged_records{' <<<"$m" || true; } | awk '{s+=$2} END {print s+0}')
  refused=$({ grep '^waggle_export_backpressure_refused_total{' <<<"$m" || true; } | awk '{s+=$2} END {print s+0}')
  ack=$({ grep '^zeebe_exporter_last_updated_exported_position{' <<<"$m" || true; } | awk '{s+=$2} END {print s+0}')
  rec=$({ grep '^waggle_processed_records_total{' <<<"$m" || true; } | awk '{s+=$2} END {print s+0}')
  printf '%6ss  lag_entries=%-7s lag_records=%-9s refused=%-9s acked_position=%-10s records=%-10s export_cpu_s=%-6s server_cpu_s=%s\n' \
    "$1" "$lag" "$lagr" "$refused" "$ack" "$rec" "$(cpu export-)" "$(cpu '')"
}
start=$(date +%s)
(while kill -0 $SERVER 2>/dev/null; do sample $(( $(date +%s) - start )); sleep 10; done) &
SAMPLER=$!
"$BIN" bench run --workload W2 --target "127.0.0.1:$PORT" --pid "$SERVER" --warmup 10s --duration "${DURATION}s" \
  >"$DIR/bench.txt" 2>&1 || true
sleep 10
kill $SAMPLER 2>/dev/null || true
sample $(( $(date +%s) - start ))
cat "$DIR/bench.txt"
echo "server log: $DIR/server.log"
