#!/usr/bin/env bash
# W1 from an independent lean client (tools/w1-go: the Zeebe Go client's generated gRPC stubs,
# no Waggle code) against a running gateway, with each instance's time split into its stages
# (create, push, hold, done, total; docs/bench.md, "W1 from the Go client"):
#   ./scripts/w1-go.sh [-address 127.0.0.1:26500] [-rate 150] [-warmup 10s] [-duration 30s]
# Builds the client on first use into $W1_GO_BIN (default ~/.cache/waggle-peers/bin/w1-go); needs
# Go 1.21 or newer (the Go client's module cannot be checked against the checksum database here,
# hence GONOSUMDB for it alone, as scripts/install-clients.sh does for zbctl).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${W1_GO_BIN:-$HOME/.cache/waggle-peers/bin/w1-go}
if [ ! -x "$bin" ] || [ -n "$(find tools/w1-go -newer "$bin" -type f)" ]; then
  command -v go >/dev/null || { echo "w1-go.sh: needs Go 1.21 or newer" >&2; exit 1; }
  mkdir -p "$(dirname "$bin")"
  (cd tools/w1-go && GONOSUMDB=github.com/camunda/zeebe go build -o "$bin" .)
fi
exec "$bin" "$@"
