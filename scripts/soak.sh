#!/usr/bin/env bash
# A soak (issue 30): W1 against a fresh Waggle for DURATION, sampling every 30 s the server's
# RSS, its data folder's disk use and the p99 execution time of the instances finished in that
# interval, into OUT_DIR/soak.csv (a row as each sample is taken), plotted at the end as
# OUT_DIR/soak.svg. Further arguments go to `waggle bench soak` (e.g. --interval 10s,
# --workload W2 --rate 5000). docs/bench.md, "Soak".
#
#   scripts/soak.sh WAGGLE_BIN DURATION [OUT_DIR] [bench soak args...]
#   scripts/soak.sh "$CARGO_TARGET_DIR/debug/waggle" 2h docs/soak
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: scripts/soak.sh WAGGLE_BIN DURATION [OUT_DIR] [bench soak args...]" >&2
  exit 2
fi
bin=$1
duration=$2
out=${3:-soak-$(date -u +%Y%m%dT%H%M%SZ)}
shift $(($# < 3 ? $# : 3))
mkdir -p "$out"
"$bin" --version
exec "$bin" bench soak --waggle-bin "$bin" --duration "$duration" \
  --csv "$out/soak.csv" --plot "$out/soak.svg" "$@"
