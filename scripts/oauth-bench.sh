#!/usr/bin/env bash
# W2 over TLS with OAuth 2 token validation against W2 in plaintext (issue 29's benchmark; not a
# test): Keycloak (scripts/keycloak.sh) issues the bench a token of the realm `waggle`; each pair
# runs a fresh node in plaintext, then a fresh node with TLS and `--security-authentication-method
# oidc`, both measured by `waggle bench run` (the secure run with --tls-ca and --token).
#   scripts/oauth-bench.sh WAGGLE_BIN [PAIRS] [BENCH ARGS...]
# e.g. scripts/oauth-bench.sh target/debug/waggle 2 --warmup 10s --duration 20s
# Prints each run's report and a last line with the rates and their ratio. Loopback only; every
# process it starts is stopped at the end.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN="$(realpath "${1:?usage: oauth-bench.sh WAGGLE_BIN [PAIRS] [BENCH ARGS...]}")"
PAIRS="${2:-2}"
shift $(( $# >= 2 ? 2 : 1 ))
WORK="$(mktemp -d)"
NODE_PID=""
cleanup() {
  [ -n "$NODE_PID" ] && kill "$NODE_PID" 2>/dev/null && wait "$NODE_PID" 2>/dev/null
  "$ROOT/scripts/keycloak.sh" stop --dir "$WORK/kc" || true
  rm -rf "$WORK"
}
trap cleanup EXIT

port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1]);s.close()'; }

# a CA and a server certificate for 127.0.0.1
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=bench-ca \
  -keyout "$WORK/ca.key" -out "$WORK/ca.pem" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=127.0.0.1 \
  -keyout "$WORK/key.pem" -out "$WORK/server.csr" 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' >"$WORK/ext"
openssl x509 -req -in "$WORK/server.csr" -CA "$WORK/ca.pem" -CAkey "$WORK/ca.key" -CAcreateserial -days 2 \
  -extfile "$WORK/ext" -out "$WORK/chain.pem" 2>/dev/null

KC_PORT=$(port)
"$ROOT/scripts/keycloak.sh" start --port "$KC_PORT" --management-port "$(port)" --dir "$WORK/kc" --watch $$ >/dev/null
ISSUER="http://127.0.0.1:$KC_PORT/realms/waggle"

token() {
  curl -sf -d grant_type=client_credentials -d client_id=zeebe -d client_secret=zeebe-secret \
    "$ISSUER/protocol/openid-connect/token" | sed -n 's/.*"access_token":"\([^"]*\)".*/\1/p'
}

# run LABEL SECURE: a fresh node, W2, the rate
run() {
  local label=$1 secure=$2 grpc rest mgmt
  shift 2
  grpc=$(port); rest=$(port); mgmt=$(port)
  local args=(--data-dir "$WORK/data-$label" --port "$grpc" --rest-port "$rest" --management-port "$mgmt")
  local bench=(--target "127.0.0.1:$grpc")
  if [ "$secure" = yes ]; then
    args+=(--security-enabled true --security-certificate-chain-path "$WORK/chain.pem" --security-private-key-path "$WORK/key.pem"
      --security-authentication-method oidc --security-authentication-oidc-issuer-uri "$ISSUER"
      --security-authentication-oidc-audiences waggle-api)
    bench+=(--tls-ca "$WORK/ca.pem" --token "$(token)")
  fi
  "$BIN" "${args[@]}" 2>"$WORK/$label.log" &
  NODE_PID=$!
  for _ in $(seq 1 100); do grep -q "waggle is ready" "$WORK/$label.log" && break; sleep 0.1; done
  "$BIN" bench run --workload W2 --pid "$NODE_PID" --json "$WORK/$label.json" "${bench[@]}" "$@" >"$WORK/$label.txt"
  kill "$NODE_PID"; wait "$NODE_PID" 2>/dev/null || true; NODE_PID=""
  echo "== $label" >&2; cat "$WORK/$label.txt" >&2
  python3 -c "import json,sys;r=json.load(open(sys.argv[1]));print(round(r['completed_per_s']))" "$WORK/$label.json"
}

summary=""
for i in $(seq 1 "$PAIRS"); do
  plain=$(run "plain-$i" no "$@")
  secure=$(run "secure-$i" yes "$@")
  summary+="pair $i: plaintext $plain PI/s, TLS+OAuth $secure PI/s, ratio $(python3 -c "print(round($secure/$plain,3))")"$'\n'
done
printf '%s' "$summary"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
