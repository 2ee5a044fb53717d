#!/usr/bin/env bash
# Usage: scripts/lib/symbol-order.sh BINARY > ORDER
# Prints the functions of BINARY (a waggle build) that a node runs, for the linker's
# `--symbol-ordering-file` (scripts/build-pgo.sh links the PGO build with it):
#   1. the functions run from start-up through a few seconds idle,
#   2. then those W2 and W5 run (bench clients of BINARY itself, at the low rate a node under
#      valgrind holds), the busiest first.
# Each is recorded by running BINARY under valgrind's callgrind, which sees every function that
# runs, Rust, RocksDB's C++ and SQLite's C alike. The kernel maps a binary's code 64 KB (a page
# cache folio) at a time around each page a process touches; with the functions a node runs
# scattered over ~30 MB of code, an idle node held ~16 MB of it, with them together ~7 MB
# (docs/performance.md, "Memory (W6, issue 34)"). Installs valgrind (Debian's package) if it
# is missing.
set -euo pipefail
binary=$(realpath "$1")
if ! command -v valgrind >/dev/null; then
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
  echo "symbol-order.sh: installing valgrind" >&2
  $sudo apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends valgrind >&2
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
port=$((27000 + RANDOM % 2000))

# Runs BINARY under callgrind with its data in a new folder until the given command (run once the
# gRPC port is open) returns, then stops it; the profile goes to $work/$1.
profile_node() {
  local name=$1
  shift
  valgrind --tool=callgrind --callgrind-out-file="$work/$name.cg" --dump-instr=no \
    --compress-strings=no --demangle=no "$binary" --data-dir "$work/data-$name" \
    --port "$port" --management-port $((port + 1)) --rest-port $((port + 2)) \
    >"$work/$name.log" 2>&1 &
  local pid=$!
  for _ in $(seq 1 600); do
    (echo >"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
    kill -0 "$pid" 2>/dev/null || { cat "$work/$name.log" >&2; exit 1; }
    sleep 0.1
  done
  "$@"
  kill -TERM "$pid"
  wait "$pid" || true
  [ -s "$work/$name.cg" ] || { echo "symbol-order.sh: no profile from the $name run" >&2; cat "$work/$name.log" >&2; exit 1; }
}

workloads() {
  for w in W2 W5; do
    "$binary" bench run --target "127.0.0.1:$port" --workload "$w" --warmup 0s --duration 8s \
      --drain 5s >"$work/bench-$w.log" 2>&1 || { cat "$work/bench-$w.log" >&2; exit 1; }
    echo "symbol-order.sh: $w under callgrind, $(grep -m1 -E "(sustained \(completed\)|completed) \(PI/s\)" "$work/bench-$w.log" | tr -s " ")" >&2
  done
}

profile_node idle sleep 5
profile_node load workloads

# "FUNCTION SELF-COST" for each function of BINARY in a callgrind profile (recursion levels of a
# function, `name'2`, counted as the function)
functions() {
  awk -v bin="$binary" '
    /^ob=/ { ours = (substr($0, 4) == bin) }
    /^fn=/ { fn = substr($0, 4); sub(/\x27[0-9]+$/, "", fn); next }
    /^(c(ob|fi|fe|fn)|calls)=/ { if ($0 ~ /^calls=/) skip = 1; next }
    /^[0-9+*-]/ { if (skip) { skip = 0; next } if (ours && fn != "") cost[fn] += $2 }
    END { for (f in cost) print f, cost[f] }
  ' "$1"
}
functions "$work/idle.cg" | sort -k2,2nr | awk '{ print $1 }' >"$work/idle.txt"
functions "$work/load.cg" | sort -k2,2nr | awk '{ print $1 }' >"$work/load.txt"
grep -vxFf "$work/idle.txt" "$work/load.txt" >"$work/more.txt" || true
echo "symbol-order.sh: $(wc -l <"$work/idle.txt") functions from start-up to idle, $(wc -l <"$work/more.txt") more under load" >&2
cat "$work/idle.txt" "$work/more.txt"
