#!/usr/bin/env bash
# Runs the fuzz targets (fuzz/, libFuzzer through cargo-fuzz on the stable toolchain, without a
# sanitizer): each for SECONDS from the committed seeds (fuzz/seeds/<target>) plus what earlier
# runs on this machine found (the working corpus under the target dir; not with --ci). Fails on
# a crash, a hang (-timeout) or a memory blow-up (-rss_limit_mb), naming the input that did it.
#
#   scripts/fuzz.sh [--time SECONDS] [TARGET...]   # default: every target, 60 s each
#   scripts/fuzz.sh --ci                            # CI's bounded run (scripts/test.sh): 30 s each
#
# Targets: feel, bpmn, dmn (the parsers and evaluators alone) and grpc, rest (a whole node in the
# process). Reproduce a finding: `cargo fuzz run -s none -a TARGET ARTIFACT` in the repo root.
# Longer runs: scripts/fuzz.sh --time 600 (docs/security.md records them).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/waggle-target}"
seconds=60
ci=false
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --time) seconds="$2"; shift 2 ;;
    --ci) ci=true; seconds=30; shift ;;
    -h|--help) sed -n 2,12p "$0"; exit 0 ;;
    *) targets+=("$1"); shift ;;
  esac
done
[ ${#targets[@]} -gt 0 ] || targets=(feel bpmn dmn grpc rest)

# cargo-fuzz, pinned (it builds with the stable toolchain; libFuzzer itself is compiled by the
# libfuzzer-sys crate with the C++ compiler scripts/install-system-deps.sh installs)
CARGO_FUZZ_VERSION=0.13.2
if ! cargo fuzz --version 2>/dev/null | grep -q "$CARGO_FUZZ_VERSION"; then
  (unset CARGO_TARGET_DIR; cargo install cargo-fuzz --locked --version "$CARGO_FUZZ_VERSION" --quiet)
fi

# RocksDB's C++ (the node targets link the broker): the library the workspace's build compiled
# already, rather than compiling it a second time for the fuzz build
# (of the version Cargo.lock asks for, which fuzz/Cargo.lock must share)
. scripts/lib/builds.sh
fuzz_rocksdb=$(cd fuzz && rocksdb_version)
if [ "$fuzz_rocksdb" != "$(rocksdb_version)" ]; then
  echo "fuzz.sh: fuzz/Cargo.lock has librocksdb-sys $fuzz_rocksdb, Cargo.lock $(rocksdb_version);" \
    "align them: cargo update -p rocksdb --manifest-path fuzz/Cargo.toml" >&2
  exit 1
fi
if [ -z "${ROCKSDB_LIB_DIR:-}" ]; then
  lib=$(compiled_rocksdb)
  if [ -n "$lib" ]; then
    export ROCKSDB_LIB_DIR=$lib ROCKSDB_STATIC=1
  fi
fi

fuzz_dir="${WAGGLE_FUZZ_TARGET_DIR:-$CARGO_TARGET_DIR/fuzz}"
flags=(-s none -a --target-dir "$fuzz_dir")
# the parser targets alone build without the node (and RocksDB)
case " ${targets[*]} " in
  *" grpc "*|*" rest "*) ;;
  *) flags+=(--no-default-features) ;;
esac
cargo fuzz build "${flags[@]}"

summary="$fuzz_dir/summary.txt"
: > "$summary"
status=0
for t in "${targets[@]}"; do
  corpus="$fuzz_dir/corpus/$t" artifacts="$fuzz_dir/artifacts/$t"
  # CI starts from the seeds alone each time, so that replaying a grown corpus never stretches
  # its bounded run
  if $ci; then corpus="$fuzz_dir/ci-corpus/$t"; rm -rf "$corpus"; fi
  mkdir -p "$corpus" "$artifacts"
  log="$fuzz_dir/$t.log"
  echo "fuzz: $t for ${seconds}s"
  # -timeout: one input's time bound; -rss_limit_mb: the process's memory bound
  if cargo fuzz run "${flags[@]}" "$t" "$corpus" "fuzz/seeds/$t" -- \
      -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -artifact_prefix="$artifacts/" \
      -print_final_stats=1 >"$log" 2>&1; then
    result=ok
  else
    result=FAILED
    status=1
  fi
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || echo "?")
  printf '%s: %s, %s runs in %ss, coverage %s edges, corpus %s inputs\n' "$t" "$result" "$runs" "$seconds" "$cov" \
    "$(ls "$corpus" | wc -l)" | tee -a "$summary"
  if [ "$result" = FAILED ]; then
    grep -E 'panicked|ERROR: libFuzzer|SUMMARY|Test unit written|timeout|out-of-memory' "$log" | head -20 >&2
    $ci && break
  fi
  rm -rf /dev/shm/waggle-fuzz-* "${TMPDIR:-/tmp}"/waggle-fuzz-* 2>/dev/null || true
done
rm -rf /dev/shm/waggle-fuzz-* "${TMPDIR:-/tmp}"/waggle-fuzz-* 2>/dev/null || true
exit $status
