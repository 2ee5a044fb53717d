#!/usr/bin/env bash
# The whole test suite, as CI runs it: format and lint gates, unit, golden and replay tests,
# and the integration tests that drive the real `waggle` binary with the real Zeebe clients
# (zbctl, the Java client, pyzeebe, the Node SDK), installed on first use; then a bounded run of
# every fuzz target.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/waggle-target}"
./scripts/setup.sh
./scripts/install-clients.sh >/dev/null
# the stored feel-scala results the FEEL differential test compares with are feel-scala's own
./tests/feel-diff/regenerate.sh --check
# and so are the stored dmn-scala results the DMN differential test compares with
./tests/dmn-diff/regenerate.sh --check
# the web UI's vendored bpmn-js is the pinned release, byte for byte
./scripts/vendor-bpmn-js.sh --check
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --quiet -- -D warnings
cargo test --workspace -- --test-threads 2
# the fuzz targets, 30 s each from their seeds (fuzz/README.md; RocksDB's library is reused)
./scripts/fuzz.sh --ci
