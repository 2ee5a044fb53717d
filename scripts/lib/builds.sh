# Sourced by scripts/run.sh and scripts/build-pgo.sh (from the repository root, with
# CARGO_TARGET_DIR set): where Waggle's optimised builds live and how they are made.
#   release  `cargo build --release`: release settings with thin LTO (Cargo.toml), in
#            $CARGO_TARGET_DIR/release
#   pgo      the same settings trained with profile-guided optimisation (scripts/build-pgo.sh),
#            in $CARGO_TARGET_DIR/pgo/use, for the sources its profile was trained on

pgo_dir="$CARGO_TARGET_DIR/pgo"

host_triple() { rustc -vV | sed -n 's/^host: //p'; }

# A digest of the sources (committed and not), which names the PGO profile trained on them;
# empty outside a git clone.
sources_digest() {
  local listed
  listed=$( (git ls-files -s crates Cargo.toml Cargo.lock workloads && git diff HEAD -- crates Cargo.toml Cargo.lock workloads) 2>/dev/null) || return 0
  printf '%s\n' "$listed" | sha1sum | cut -c1-16
}

# The PGO profile of these sources (which may not exist yet).
pgo_profile() {
  local digest
  digest=$(sources_digest)
  [ -z "$digest" ] || echo "$pgo_dir/waggle-$digest.profdata"
}

# The binary of the PGO build.
pgo_binary() { echo "$pgo_dir/use/$(host_triple)/pgo/waggle"; }

# The directory of a RocksDB library compiled by another build in this target directory (the
# dev build's or the release build's), if any. RocksDB's C++ takes ~25 minutes to compile; a
# build given it as ROCKSDB_LIB_DIR links it instead. The library is the same either way: the
# dependencies are optimised (opt-level 3) in every profile and RocksDB always builds with NDEBUG.
compiled_rocksdb() {
  local lib
  lib=$(ls -t "$CARGO_TARGET_DIR"/debug/build/librocksdb-sys-*/out/librocksdb.a \
    "$CARGO_TARGET_DIR"/release/build/librocksdb-sys-*/out/librocksdb.a 2>/dev/null | head -1)
  [ -z "$lib" ] || echo "${lib%/*}"
}

# The RocksDB library the release build links: none (it compiles its own) if it compiled one
# already or none exists yet, so that on a fresh machine RocksDB is compiled once, by it.
rocksdb_for_release() {
  if ! ls "$CARGO_TARGET_DIR"/release/build/librocksdb-sys-*/out/librocksdb.a >/dev/null 2>&1; then
    compiled_rocksdb
  fi
}
