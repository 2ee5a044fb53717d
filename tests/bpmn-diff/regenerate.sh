#!/usr/bin/env bash
# Re-records expected/ from a real Zeebe 8.5.8 gateway (not run in CI). Start one first, e.g.
#   ZEEBE_PORT=26600 ZEEBE_MANAGEMENT_PORT=9700 scripts/zeebe.sh start /tmp/zeebe-diff-data
# then:
#   tests/bpmn-diff/regenerate.sh 127.0.0.1:26600 [--only NAME[,NAME...]]
# It records twice and refuses to write expected/ when the two recordings differ (a timing-
# sensitive scenario must be fixed, not recorded). Review `git diff tests/bpmn-diff/expected`,
# then run `cargo test -p waggle --test bpmn_diff` and update known-differences.md.
set -euo pipefail
cd "$(dirname "$0")"
ADDRESS="${1:?usage: regenerate.sh HOST:PORT [--only NAMES]}"; shift
PY="${WAGGLE_PEERS:-$HOME/.cache/waggle-peers}/py/bin/python"
[ -x "$PY" ] || { echo "$PY missing: run scripts/install-clients.sh python" >&2; exit 1; }
TMP="$(mktemp -d)"; trap 'rm -rf "$TMP"' EXIT
"$PY" run.py --address "$ADDRESS" --out "$TMP/a" "$@" >/dev/null
"$PY" run.py --address "$ADDRESS" --out "$TMP/b" "$@" >/dev/null
"$PY" - "$TMP/a" "$TMP/b" <<'PY'
import json, os, sys
def strip(v):
    if isinstance(v, dict): return {k: strip(x) for k, x in v.items() if not k.startswith("_")}
    if isinstance(v, list): return [strip(x) for x in v]
    return v
a, b = sys.argv[1:]
unstable = [f[:-5] for f in sorted(os.listdir(a)) if strip(json.load(open(os.path.join(a, f)))) != strip(json.load(open(os.path.join(b, f))))]
if unstable:
    sys.exit("outcomes differ between two recordings (timing-sensitive?): " + ", ".join(unstable))
PY
mkdir -p expected
[ "$#" -eq 0 ] && rm -f expected/*.json
cp "$TMP"/a/*.json expected/
echo "recorded $(ls "$TMP"/a | wc -l) outcomes into tests/bpmn-diff/expected/"
