#!/usr/bin/env bash
# Re-generates expected.jsonl: evaluates every corpus entry with the real feel-scala 1.17.8.
# Needs a JDK (11+) and Maven (for fetch.sh). Run after changing corpus/*.txt, then run
# `cargo test -p waggle-feel --test differential`.
set -euo pipefail
cd "$(dirname "$0")"
./fetch.sh >/dev/null
LIB="${FEEL_SCALA_HOME:-$HOME/.cache/waggle-peers/feel-scala}/lib"
# the JVM's default zone shapes now() only; pin it anyway
java -Duser.timezone=UTC -cp "$LIB/*" FeelDiff.java corpus 2>/dev/null > expected.jsonl.tmp
mv expected.jsonl.tmp expected.jsonl
echo "$(wc -l < expected.jsonl) entries in expected.jsonl"
