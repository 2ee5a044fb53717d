#!/usr/bin/env bash
# Vendors bpmn-js's prebuilt NavigatedViewer (the web UI's diagram renderer) into
# crates/rest/src/ui/assets/vendor/bpmn-js/, from a pinned version of its npm package, and checks
# each file against the checksum recorded below. The files are committed, so builds need no
# network: run this only to move to another version (then record the new checksums here).
#   vendor-bpmn-js.sh          fetch, check, copy
#   vendor-bpmn-js.sh --check  check the committed files against the recorded checksums
# bpmn-js is under the bpmn.io licence (MIT with the condition that the bpmn.io watermark
# stays visible); LICENSE is vendored beside it and the UI keeps the watermark.
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=18.31.1
DEST=crates/rest/src/ui/assets/vendor/bpmn-js
# path in the package -> sha256
SUMS="134280f49f2ca8bbc90797fa656177e2b787ae0a62249fe3dadb8038eb88e9db  dist/bpmn-navigated-viewer.production.min.js
73f990dcd6cd2ed696aa63a3c73822a97f0ea69a221d76ebe6cf24b01111df21  dist/assets/diagram-js.css
a1add5dca479c779a54adda507f26796f4d61a5ae15f6cc14a1b017ff65b4015  dist/assets/bpmn-js.css
5788cf8bd61481776cee1c943595525499a1355c045e9244f92e6c8092c06770  LICENSE"

check() { # $1: folder whose files are named by their base names
  echo "$SUMS" | while read -r sum path; do
    echo "$sum  $1/$(basename "$path")"
  done | sha256sum --check --quiet
}

if [ "${1:-}" = "--check" ]; then
  check "$DEST" && echo "vendor-bpmn-js: $DEST matches bpmn-js $VERSION"
  exit
fi

command -v npm >/dev/null || { echo "vendor-bpmn-js: npm is required" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
( cd "$tmp" && npm pack --silent "bpmn-js@$VERSION" >/dev/null && tar xzf "bpmn-js-$VERSION.tgz" )
mkdir -p "$tmp/flat"
echo "$SUMS" | while read -r _ path; do cp "$tmp/package/$path" "$tmp/flat/"; done
check "$tmp/flat" || { echo "vendor-bpmn-js: checksum mismatch for bpmn-js $VERSION" >&2; exit 1; }
mkdir -p "$DEST"
cp "$tmp"/flat/* "$DEST/"
echo "$VERSION" > "$DEST/VERSION"
echo "vendor-bpmn-js: bpmn-js $VERSION -> $DEST"
