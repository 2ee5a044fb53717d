#!/usr/bin/env bash
# Re-generates expected.jsonl: evaluates every case of cases.jsonl with the real dmn-scala 1.9.0
# (Zeebe 8.5.8's DMN engine). Needs a JDK (11+) and Maven (for fetch.sh). Run after changing
# the corpus (generate.py, corpus/*.dmn), then run `cargo test -p waggle-dmn --test dmn_diff`.
#   regenerate.sh           rewrite expected.jsonl
#   regenerate.sh --check   evaluate again and fail if dmn-scala's results differ from expected.jsonl
set -euo pipefail
cd "$(dirname "$0")"
./fetch.sh >/dev/null
LIB="${DMN_SCALA_HOME:-$HOME/.cache/waggle-peers/dmn-scala}/lib"
BUILD=$(mktemp -d)
trap 'rm -rf "$BUILD" expected.jsonl.tmp' EXIT
javac -nowarn -d "$BUILD" -cp "$LIB/*" DmnDiff.java ../diff-common/DiffJson.java 2>"$BUILD/javac" || { cat "$BUILD/javac" >&2; exit 1; }
mkdir -p "$BUILD/META-INF/services"
echo 'DmnDiff$IdentityMapper' > "$BUILD/META-INF/services/org.camunda.feel.valuemapper.CustomValueMapper"
# the JVM's default zone shapes now() only; pin it anyway
if ! java -Duser.timezone=UTC -cp "$BUILD:$LIB/*" DmnDiff cases.jsonl corpus 2>"$BUILD/stderr" > expected.jsonl.tmp; then
  cat "$BUILD/stderr" >&2
  exit 1
fi
if [ "${1:-}" = "--check" ]; then
  if ! diff expected.jsonl expected.jsonl.tmp; then
    echo "dmn-scala's results differ from tests/dmn-diff/expected.jsonl (run regenerate.sh and review)" >&2
    exit 1
  fi
  echo "dmn-scala 1.9.0 agrees with expected.jsonl ($(wc -l < expected.jsonl) cases)"
  exit 0
fi
mv expected.jsonl.tmp expected.jsonl
echo "$(wc -l < expected.jsonl) cases in expected.jsonl"
