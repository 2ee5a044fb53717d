#!/usr/bin/env bash
# Builds the `waggle` binary the benchmark measures, optimised with the profile of a run of the
# bench's own workloads (profile-guided optimisation, PGO), and prints its path:
#   1. when no build in the target directory has compiled RocksDB's C++ yet, the release build
#      (as scripts/run.sh), which does; the builds below link that library (ROCKSDB_LIB_DIR)
#      instead of compiling it again;
#   2. an instrumented build (`-Cprofile-generate`), which runs W1-W5 with `bench compare
#      --peers none` (Waggle only): its server and its bench client both write their profiles;
#   3. the optimised build (`-Cprofile-use`) from the merged profile;
#   4. scripts/lib/symbol-order.sh runs that build under valgrind and lists the functions a node
#      runs (start-up, idle, W2 and W5), and the build is linked again with them laid out
#      together (`--symbol-ordering-file`): an idle node maps ~7 MB of its code instead of ~16.
#      scripts/run.sh starts this build too.
# Training and the list are skipped while the sources are those they were last made for. Needs rustup's
# llvm-tools component (llvm-profdata), added here. Under W2 the optimised binary spends ~15 %
# less CPU per instance, server and bench client alike (docs/performance-history.md, finding 34).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/waggle-target}"
. scripts/lib/builds.sh
./scripts/setup.sh >&2
if [ -z "$(compiled_rocksdb)" ]; then
  cargo build --release -p waggle --bin waggle >&2
fi
rustup component add llvm-tools >&2
host=$(host_triple)
profdata="$(rustc --print sysroot)/lib/rustlib/$host/bin/llvm-profdata"
export ROCKSDB_LIB_DIR="$(compiled_rocksdb)" ROCKSDB_STATIC=1
pgo="$pgo_dir"
mkdir -p "$pgo"
# `--target` keeps RUSTFLAGS off build scripts and proc macros; each stage has its own target
# directory, so that both stay incremental
build() { cargo build --profile pgo --target "$host" --target-dir "$pgo/$1" -p waggle --bin waggle >&2; }

profile=$(pgo_profile)
[ -n "$profile" ] || { echo "build-pgo.sh: needs a git clone (the profile is named after the sources)" >&2; exit 1; }
if [ ! -f "$profile" ]; then
  echo "build-pgo.sh: training on the bench's workloads" >&2
  RUSTFLAGS="-Cprofile-generate=$pgo/raw" build generate
  rm -rf "$pgo/raw"
  instrumented="$pgo/generate/$host/pgo/waggle"
  LLVM_PROFILE_FILE="$pgo/raw/waggle-%p-%m.profraw" "$instrumented" bench compare --peers none \
    --waggle-bin "$instrumented" --workloads W2,W1,W3,W4,W5 --duration 10s --warmup 2s --drain 5s >&2
  rm -f "$pgo"/waggle-*.profdata
  "$profdata" merge -o "$profile" "$pgo/raw"
fi
export RUSTFLAGS="-Cprofile-use=$profile"
order=$(pgo_symbol_order)
if [ ! -f "$order" ]; then
  build use
  echo "build-pgo.sh: recording the functions a node runs (valgrind), for their layout" >&2
  rm -f "$pgo"/waggle-*.order
  if scripts/lib/symbol-order.sh "$(pgo_binary)" >"$order.new"; then
    mv "$order.new" "$order"
  else
    # the build is as fast without the layout, only ~7 MB larger in memory when idle
    echo "build-pgo.sh: could not record them; the functions stay where the compiler put them" >&2
    rm -f "$order.new"
  fi
fi
if [ -f "$order" ]; then
  export WAGGLE_SYMBOL_ORDER="$order"
fi
build use
pgo_binary
