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

# The linker's symbol ordering file of the PGO build of these sources (which may not exist yet):
# the functions a node runs, recorded by scripts/lib/symbol-order.sh, laid out together.
pgo_symbol_order() {
  local digest
  digest=$(sources_digest)
  [ -z "$digest" ] || echo "$pgo_dir/waggle-$digest.order"
}

# The binary of the PGO build.
pgo_binary() { echo "$pgo_dir/use/$(host_triple)/pgo/waggle"; }

# The librocksdb-sys version Cargo.lock asks for (e.g. 0.19.0+11.8.1).
rocksdb_version() {
  awk '/^name = "librocksdb-sys"$/ { getline; gsub(/^version = "|"$/, ""); print; exit }' Cargo.lock
}

# The directory of the newest RocksDB library of Cargo.lock's version compiled by a build of the
# given profiles' directories (debug, release) in this target directory, if any. A library of
# another version (a build of another branch) is never taken: its C API differs.
compiled_rocksdb_in() {
  local version lib patterns=()
  version=$(rocksdb_version)
  for profile in "$@"; do patterns+=("$CARGO_TARGET_DIR/$profile/build/librocksdb-sys-*/out/librocksdb.a"); done
  # shellcheck disable=SC2068 # the patterns are globs
  for lib in $(ls -t ${patterns[@]} 2>/dev/null); do
    # the build script's output names the crate's source folder, and with it the version
    if awk -v dir="librocksdb-sys-$version" '{ i = index($0, dir); c = substr($0, i + length(dir), 1) }
        i && (c == "" || c == "/") { found = 1; exit } END { exit !found }' "${lib%/out/librocksdb.a}/output" 2>/dev/null; then
      echo "${lib%/*}"
      return 0
    fi
  done
}

# A RocksDB library compiled by another build (the dev build's or the release build's), if any.
# RocksDB's C++ takes ~25 minutes to compile; a build given it as ROCKSDB_LIB_DIR links it
# instead. The library is the same either way: the dependencies are optimised (opt-level 3) in
# every profile and RocksDB always builds with NDEBUG.
compiled_rocksdb() { compiled_rocksdb_in debug release; }

# The RocksDB library the release build links: none (it compiles its own) if it compiled one
# already or none exists yet, so that on a fresh machine RocksDB is compiled once, by it.
rocksdb_for_release() {
  [ -n "$(compiled_rocksdb_in release)" ] || compiled_rocksdb
}
