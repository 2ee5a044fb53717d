#!/usr/bin/env bash
# Re-generates expected.jsonl: evaluates every corpus entry with the real feel-scala 1.17.8.
# Needs a JDK (11+) and Maven (for fetch.sh). Run after changing corpus/*.txt, then run
# `cargo test -p waggle-feel --test differential`.
#   regenerate.sh           rewrite expected.jsonl
#   regenerate.sh --check   evaluate again and fail if feel-scala's results differ from
#                           expected.jsonl (entries compared by shape only, such as now(), excepted)
set -euo pipefail
cd "$(dirname "$0")"
./fetch.sh >/dev/null
LIB="${FEEL_SCALA_HOME:-$HOME/.cache/waggle-peers/feel-scala}/lib"
BUILD=$(mktemp -d)
trap 'rm -rf "$BUILD"' EXIT
javac -nowarn -d "$BUILD" -cp "$LIB/*" FeelDiff.java ../diff-common/DiffJson.java 2>"$BUILD/javac" || { cat "$BUILD/javac" >&2; exit 1; }
# the JVM's default zone shapes now() only; pin it anyway
java -Duser.timezone=UTC -cp "$BUILD:$LIB/*" FeelDiff corpus 2>/dev/null > expected.jsonl.tmp
if [ "${1:-}" = "--check" ]; then
  if ! diff <(grep -v '"shape":true' expected.jsonl) <(grep -v '"shape":true' expected.jsonl.tmp); then
    rm -f expected.jsonl.tmp
    echo "feel-scala's results differ from tests/feel-diff/expected.jsonl (run regenerate.sh and review)" >&2
    exit 1
  fi
  rm -f expected.jsonl.tmp
  echo "feel-scala 1.17.8 agrees with expected.jsonl ($(wc -l < expected.jsonl) entries)"
  exit 0
fi
mv expected.jsonl.tmp expected.jsonl
echo "$(wc -l < expected.jsonl) entries in expected.jsonl"
