#!/usr/bin/env bash
# Builds and starts Waggle standalone, optimised: the PGO build when scripts/build-pgo.sh has
# trained a profile on these sources, else the release build (release settings, thin LTO). Flags
# go to waggle:
#   ./scripts/run.sh                 broker + gateway, data in ./data, gRPC on 127.0.0.1:26500
#   ./scripts/run.sh --help          every flag
#   ./scripts/run.sh --print-build   which build it would start and how it builds it (builds nothing)
#   ./scripts/run.sh --build-only    builds it and prints the binary's path (scripts/cluster.sh)
# The first build takes ~25 minutes on 2 cores (RocksDB's C++; when the dev build of
# scripts/test.sh has compiled RocksDB already, its library is linked instead), a rebuild after a
# change a few minutes (link-time optimisation).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/waggle-target}"
. scripts/lib/builds.sh

profile=$(pgo_profile)
if [ -n "$profile" ] && [ -f "$profile" ]; then
  build="pgo: release settings, thin LTO, profile-guided optimisation ($profile)"
  binary=$(pgo_binary)
  rocksdb=$(compiled_rocksdb)
  cargo_args=(build --profile pgo --target "$(host_triple)" --target-dir "$pgo_dir/use" -p waggle --bin waggle)
  rustflags="-Cprofile-use=$profile"
  order=$(pgo_symbol_order)
  if [ -f "$order" ]; then
    build="$build, functions laid out by $order"
    export WAGGLE_SYMBOL_ORDER="$order"
  fi
else
  build="release: release settings, thin LTO (no PGO profile of these sources; scripts/build-pgo.sh trains one)"
  binary="$CARGO_TARGET_DIR/release/waggle"
  rocksdb=$(rocksdb_for_release)
  cargo_args=(build --release -p waggle --bin waggle)
  rustflags=""
fi

if [ "${1:-}" = --print-build ]; then
  echo "build: $build"
  echo "pgo profile: ${profile:-none (not a git clone)}"
  echo "command: ${WAGGLE_SYMBOL_ORDER:+WAGGLE_SYMBOL_ORDER=$WAGGLE_SYMBOL_ORDER }${rustflags:+RUSTFLAGS=$rustflags }cargo ${cargo_args[*]}"
  echo "rocksdb: ${rocksdb:-compiled by this build}"
  echo "binary: $binary"
  exit 0
fi

./scripts/setup.sh
echo "run.sh: building and starting the $build" >&2
if [ -n "$rocksdb" ]; then
  export ROCKSDB_LIB_DIR="$rocksdb" ROCKSDB_STATIC=1
fi
if [ -n "$rustflags" ]; then
  export RUSTFLAGS="$rustflags"
fi
cargo "${cargo_args[@]}" >&2
if [ "${1:-}" = --build-only ]; then
  echo "$binary"
  exit 0
fi
exec "$binary" "$@"
