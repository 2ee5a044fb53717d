#!/usr/bin/env bash
# Issue 30's large-state benchmark (docs/performance.md, "Large state"): for each state size,
# a fresh standalone node is filled with parked instances (`waggle bench fill`: a message catch
# event, a timer a day away and an un-worked job each, a 4 KB variable) until its RocksDB state
# holds that many GB, then W2 and W5 run on top (`waggle bench run`); then the snapshot time
# (the node's `checkpoint written` log lines) and size, and the recovery after a kill -9: time
# to /ready UP and to the first successful command (a REST CreateProcessInstance of W2's model). Prints one
# table; each data folder is deleted after use.
#
#   scripts/bigstate-bench.sh BINARY [SIZE_GB ...]        (default sizes: 0 1 5)
# The nodes' logs and the runs' JSON reports stay in BIGSTATE_OUT (default $BIGSTATE_DIR/bigstate-out-PID).
#
# Environment: BIGSTATE_DIR (parent of the data folders, default /tmp), DURATION (each run's
# window, default 30s), WARMUP (default 10s), PAYLOAD (bytes of each parked instance's
# variable, default 4096), KEEP_FREE_GB (a size is skipped when filling it could leave less
# free disk, default 15), SNAPSHOT_EVERY (the node's --snapshot-every-entries, default 1000:
# the log is compacted behind each snapshot, and a fill's log entries hold ~50 creations),
# SETTLE_MAX (after the fill, W2 waits until the node idles, the fill's compactions done, at
# most this many seconds, default 300).
set -euo pipefail
BIN=$(realpath "${1:?waggle binary}")
shift
SIZES=("$@")
[[ ${#SIZES[@]} -gt 0 ]] || SIZES=(0 1 5)
BASE=${BIGSTATE_DIR:-/tmp}
DURATION=${DURATION:-30s}
WARMUP=${WARMUP:-10s}
PAYLOAD=${PAYLOAD:-4096}
KEEP_FREE_GB=${KEEP_FREE_GB:-15}
SNAPSHOT_EVERY=${SNAPSHOT_EVERY:-1000}
SETTLE_MAX=${SETTLE_MAX:-300}
OUT=${BIGSTATE_OUT:-$BASE/bigstate-out-$$} # logs and reports of each size
mkdir -p "$OUT"
PORT=$((28000 + RANDOM % 1000)); MGMT=$((PORT + 1000)); REST=$((PORT + 2000))
SERVER=
DIR=
cleanup() {
  [[ -n $SERVER ]] && kill "$SERVER" 2>/dev/null && wait "$SERVER" 2>/dev/null
  [[ -n $DIR ]] && rm -rf "$DIR"
  true
}
trap cleanup EXIT

load() { cut -d' ' -f1 /proc/loadavg; }
ms_now() { echo $(($(date +%s%N) / 1000000)); }
start_server() { # $1: log file
  "$BIN" standalone --data-dir "$DIR" --port "$PORT" --management-port "$MGMT" --rest-port "$REST" \
    --query-store false --snapshot-every-entries "$SNAPSHOT_EVERY" >>"$1" 2>&1 &
  SERVER=$!
}
wait_ready() {
  for _ in $(seq 6000); do
    curl -sf "localhost:$MGMT/ready" >/dev/null && return 0
    kill -0 "$SERVER" 2>/dev/null || { echo "the node exited; see $OUT/$size.log" >&2; return 1; }
    sleep 0.02
  done
  return 1
}
create_one() {
  curl -sf -o /dev/null -H 'content-type: application/json' \
    -d '{"processDefinitionId":"benchmark","variables":{}}' "localhost:$REST/v2/process-instances"
}
cpu_ticks() { awk '{print $14 + $15}' "/proc/$SERVER/stat"; }
# Waits until the node is idle (under a tenth of a core in each of six 5 s windows in a row:
# the fill's compactions are done; one quiet window alone can fall between two compactions,
# which then ran into W2), at most SETTLE_MAX seconds; prints the seconds waited.
settle() {
  local start=$SECONDS before after quiet=0
  while ((SECONDS - start < SETTLE_MAX && quiet < 6)); do
    before=$(cpu_ticks)
    sleep 5
    after=$(cpu_ticks)
    # clock ticks of 10 ms: 0.5 s of CPU in 5 s
    if ((after - before < 50)); then quiet=$((quiet + 1)); else quiet=0; fi
  done
  echo $((SECONDS - start))
}
gb() { awk -v b="$1" 'BEGIN {printf "%.2f", b / 1e9}'; }
json() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }

ROWS=()
for size in "${SIZES[@]}"; do
  avail=$(df -B1 --output=avail "$BASE" | tail -1)
  # the fill's state, its log until the next snapshot, and W2's: at most about twice the state
  need=$(awk -v s="$size" 'BEGIN {printf "%d", (s * 2 + 2) * 1e9}')
  if ((avail - need < KEEP_FREE_GB * 1000000000)); then
    echo "== $size GB: skipped, $(gb "$avail") GB free on $BASE and $KEEP_FREE_GB GB must stay free" >&2
    ROWS+=("$(printf '%-6s %s' "$size" "skipped (disk: $(gb "$avail") GB free)")")
    continue
  fi
  DIR=$BASE/bigstate-$size-$$
  rm -rf "$DIR" "$OUT/$size.log"
  : >"$OUT/$size.log"
  start_server "$OUT/$size.log"
  wait_ready
  instances=0 fill_s=0 fill_rate=- settle_s=0 fill_cp=-
  if awk -v s="$size" 'BEGIN {exit !(s > 0)}'; then
    echo "== $size GB: filling (load $(load))" >&2
    line=$("$BIN" bench fill --target "127.0.0.1:$PORT" --data-dir "$DIR" --state-gb "$size" --payload-bytes "$PAYLOAD" | tail -1)
    echo "$line" >&2
    instances=$(sed -n 's/.*instances=\([0-9]*\).*/\1/p' <<<"$line")
    fill_s=$(sed -n 's/.*seconds=\([0-9.]*\).*/\1/p' <<<"$line")
    fill_rate=$(sed -n 's/.*rate=\([0-9]*\).*/\1/p' <<<"$line")
    echo "== $size GB: settling (load $(load))" >&2
    settle_s=$(settle)
    # the longest checkpoint while the fill wrote
    fill_cp=$( (grep "checkpoint written" "$OUT/$size.log" || true) | sed -n 's/.*checkpoint_ms=\([0-9]*\).*/\1/p' | sort -n | tail -1)
  fi
  checkpoints_before=$(grep -c "checkpoint written" "$OUT/$size.log" || true)
  for w in W2 W5; do
    echo "== $size GB: $w (load $(load))" >&2
    "$BIN" bench run --target "127.0.0.1:$PORT" --pid "$SERVER" --workload "$w" --warmup "$WARMUP" --duration "$DURATION" \
      --json "$OUT/$size.$w.json" >"$OUT/$size.$w.txt" 2>&1 || { cat "$OUT/$size.$w.txt" >&2; exit 1; }
  done
  w2_rate=$(json "$OUT/$size.W2.json" "round(d['completed_per_s'])")
  w2_p99=$(json "$OUT/$size.W2.json" "'%.0f' % d['execution']['p99_ms']")
  w2_load=$(json "$OUT/$size.W2.json" "'%.1f' % d['load_average'][1]")
  w5_p99=$(json "$OUT/$size.W5.json" "'%.1f' % d['correlation']['p99_ms']")
  w5_exec=$(json "$OUT/$size.W5.json" "'%.0f' % d['execution']['p99_ms']")
  w5_load=$(json "$OUT/$size.W5.json" "'%.1f' % d['load_average'][1]")
  # snapshots taken while W2 and W5 ran, on top of the filled state
  cp_ms=$( (grep "checkpoint written" "$OUT/$size.log" || true) | tail -n +"$((checkpoints_before + 1))" | sed -n 's/.*checkpoint_ms=\([0-9]*\).*/\1/p' |
    sort -n | awk '{a[NR]=$1} END {if (NR) printf "%s/%s", a[int((NR+1)/2)], a[NR]; else printf "-"}')
  snap=$( (ls -d "$DIR"/partitions/*/snapshots/[0-9]* 2>/dev/null || true) | sort -V | tail -1)
  snap_bytes=$([[ -n $snap ]] && du -sb "$snap" | cut -f1 || echo 0)
  state_bytes=$(du -sb "$DIR"/partitions/*/runtime | awk '{s += $1} END {print s}')
  # RocksDB's write stalls (slowed or stopped writes: compaction behind), fill included
  stalls=$(cat "$DIR"/partitions/*/runtime/LOG* 2>/dev/null | grep -c "Stalling writes\|Stopping writes" || true)
  # recovery: kill -9, restart, time to ready and to the first successful command
  kill -9 "$SERVER"
  wait "$SERVER" 2>/dev/null || true
  rec_load=$(load)
  t0=$(ms_now)
  start_server "$OUT/$size.restart.log"
  wait_ready
  ready_ms=$(($(ms_now) - t0))
  for _ in $(seq 12000); do create_one && break; sleep 0.01; done
  first_ms=$(($(ms_now) - t0))
  kill "$SERVER"
  wait "$SERVER" 2>/dev/null || true
  SERVER=
  ROWS+=("$(printf '%-6s %10s %9s %8s %7s %6s %6s %7s %7s %6s %9s %9s %8s %8s %8s %6s %8s %6s %6s' \
    "$size" "$instances" "$(gb "$state_bytes")" "$fill_rate" "$w2_rate" "$w2_p99" "$w2_load" "$w5_p99" "$w5_exec" "$w5_load" \
    "$cp_ms" "$(gb "$snap_bytes")" "$ready_ms" "$first_ms" "$rec_load" "$fill_s" "${fill_cp:--}" "$settle_s" "$stalls")")
  rm -rf "$DIR"
  DIR=
  echo "${ROWS[-1]}" >&2
done

echo
echo "waggle bench against $("$BIN" --version 2>/dev/null | head -1) ($BIN), $(nproc) cores, payload $PAYLOAD B per parked instance"
printf '%-6s %10s %9s %8s %7s %6s %6s %7s %7s %6s %9s %9s %8s %8s %8s %6s %8s %6s %6s\n' \
  fill_GB parked state_GB fill/s W2/s W2p99 load W5cp99 W5xp99 load snap_ms snap_GB ready_ms first_ms load fill_s fillsnap settle stalls
printf '%s\n' "${ROWS[@]}"
echo "W2/s: W2's completed PI/s; W2p99: its execution p99 (ms); W5cp99 / W5xp99: W5's correlation and execution p99 (ms);"
echo "snap_ms: median/max checkpoint time while W2 and W5 ran; snap_GB: the newest snapshot; ready_ms / first_ms: after"
echo "kill -9, restart to /ready UP and to the first CreateProcessInstance answered; load: 1-min load average then;"
echo "fill_s: the fill's seconds; fillsnap: its longest checkpoint (ms); settle: seconds until the node idled after it;"
echo "stalls: RocksDB's log lines on slowed or stopped writes, fill included"
printf 'logs and reports: %s\n' "$OUT"
