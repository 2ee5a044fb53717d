#!/usr/bin/env bash
# Repeats W2 then W5 on one large state (docs/performance.md, "Large state", run 4): the state is
# filled once (`waggle bench fill`, as scripts/bigstate-bench.sh fills it) into PRISTINE and kept;
# each run starts a node on a fresh copy of it (table files hard-linked: RocksDB never changes
# one; every other file copied), runs W2 then W5 (`waggle bench run`), stops the node, and
# prints one line: W2's rate and p99, W5's correlation and execution p99, the gigabytes RocksDB's
# compactions wrote and how many took the base level, how long the node took to stop, and its
# RSS: before W2 and the highest sampled.
# `empty` as PRISTINE runs on an empty folder instead (the 0 GB line).
#
#   scripts/bigstate-repeat.sh BINARY PRISTINE [RUNS] [STATE_GB]     (defaults: 3 runs, 10 GB)
#
# Environment: WORK (the copies' parent, default the folder above PRISTINE), DURATION (default
# 30s), WARMUP (default 10s), PAYLOAD (default 4096). Needs curl and python3; the fill needs
# about 2 x STATE_GB of free disk, each copy little more than its logs.
set -euo pipefail
BIN=$(realpath "${1:?waggle binary}")
PRISTINE=${2:?folder of the filled state, or empty}
RUNS=${3:-3}
STATE_GB=${4:-10}
DURATION=${DURATION:-30s}
WARMUP=${WARMUP:-10s}
PAYLOAD=${PAYLOAD:-4096}
if [[ $PRISTINE == empty ]]; then
  WORK=${WORK:-/tmp}
else
  PRISTINE=$(realpath -m "$PRISTINE")
  WORK=${WORK:-$(dirname "$PRISTINE")} # hard links need the same file system
fi
RUN=$WORK/bigstate-repeat-$$
OUT=$RUN-out
mkdir -p "$OUT"
PORT=$((28000 + RANDOM % 1000)); MGMT=$((PORT + 1000)); REST=$((PORT + 2000))
SERVER=
cleanup() {
  [[ -n $SERVER ]] && kill -9 "$SERVER" 2>/dev/null
  rm -rf "$RUN"
}
trap cleanup EXIT

start_server() { # $1: data folder, $2: log file
  "$BIN" standalone --data-dir "$1" --port "$PORT" --management-port "$MGMT" --rest-port "$REST" \
    --query-store false --snapshot-every-entries 1000 >>"$2" 2>&1 &
  SERVER=$!
  for _ in $(seq 3000); do
    curl -sf "localhost:$MGMT/ready" >/dev/null && return 0
    kill -0 "$SERVER" 2>/dev/null || { echo "the node exited; see $2" >&2; return 1; }
    sleep 0.02
  done
  return 1
}
stop_server() { # sets STOP_S, the seconds the node took to stop (in this shell: `wait` needs its parent)
  local t0
  t0=$(date +%s%N)
  kill "$SERVER"
  wait "$SERVER" 2>/dev/null || true
  SERVER=
  STOP_S=$(awk -v ns="$(($(date +%s%N) - t0))" 'BEGIN {printf "%.2f", ns / 1e9}')
}

if [[ $PRISTINE != empty && ! -d $PRISTINE ]]; then
  echo "== filling $PRISTINE with $STATE_GB GB" >&2
  start_server "$PRISTINE" "$OUT/fill.log"
  "$BIN" bench fill --target "127.0.0.1:$PORT" --data-dir "$PRISTINE" --state-gb "$STATE_GB" --payload-bytes "$PAYLOAD" | tail -1 >&2
  stop_server
fi

printf '%-4s %7s %6s %7s %7s %8s %6s %6s %7s %7s\n' run W2/s W2p99 W5cp99 W5xp99 comp_GB L0toB stop_s idle_MB peak_MB
for run in $(seq "$RUNS"); do
  rm -rf "$RUN"
  if [[ $PRISTINE == empty ]]; then
    mkdir -p "$RUN"
  else
    cp -al "$PRISTINE" "$RUN"
    (cd "$PRISTINE" && find . -type f ! -name '*.sst' -print0) | while IFS= read -r -d '' f; do
      cp --remove-destination -p "$PRISTINE/$f" "$RUN/$f"
    done
  fi
  start_server "$RUN" "$OUT/$run.log"
  for w in W2 W5; do
    "$BIN" bench run --target "127.0.0.1:$PORT" --pid "$SERVER" --workload "$w" --warmup "$WARMUP" --duration "$DURATION" \
      --json "$OUT/$run.$w.json" >"$OUT/$run.$w.txt" 2>&1 || { cat "$OUT/$run.$w.txt" >&2; exit 1; }
  done
  stop_server
  # this run's compactions: RocksDB's event log in the LOG it opened (older ones are LOG.old.*)
  python3 - "$OUT/$run" "$RUN"/partitions/*/runtime/LOG "$run" "$STOP_S" <<'PY'
import json, sys
prefix, logs, run, stop_s = sys.argv[1], sys.argv[2:-2], sys.argv[-2], sys.argv[-1]
w2, w5 = (json.load(open(f"{prefix}.{w}.json")) for w in ("W2", "W5"))
written = base = 0
for log in logs:
    for line in open(log, errors="replace"):
        if "EVENT_LOG_v1" not in line:
            continue
        event = json.loads(line[line.index("{"):])
        if event.get("event") == "compaction_finished":
            written += event.get("total_output_size", 0)
        if event.get("event") == "compaction_started" and event.get("compaction_reason") == "LevelL0FilesNum":
            base += 1
idle = w2["server"]["idle_rss_mb"]
peak = max(w["server"]["peak_rss_mb"] for w in (w2, w5))
print("%-4s %7d %6.0f %7.1f %7.0f %8.2f %6d %6s %7.0f %7.0f" % (run, w2["completed_per_s"], w2["execution"]["p99_ms"],
      w5["correlation"]["p99_ms"], w5["execution"]["p99_ms"], written / 1e9, base, stop_s, idle, peak))
PY
  rm -rf "$RUN"
done
echo "W2/s: W2's completed PI/s; W2p99: its execution p99 (ms); W5cp99 / W5xp99: W5's correlation and execution p99 (ms);"
echo "comp_GB: what RocksDB's compactions wrote during the run; L0toB: compactions of level-0 files into the base level;"
echo "stop_s: seconds from SIGTERM to the node's exit; idle_MB: the node's RSS before W2; peak_MB: its highest sampled in W2 and W5."
echo "$("$BIN" --version 2>/dev/null | head -1), $(nproc) cores; logs: $OUT"
