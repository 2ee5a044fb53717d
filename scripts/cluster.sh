#!/usr/bin/env bash
# Starts, shows and stops a cluster of N `waggle broker` processes on loopback, each with its own
# ports, data folder, log and PID file under one directory:
#   ./scripts/cluster.sh start N [--partitions P] [--replication-factor R] [options] [-- waggle flags]
#   ./scripts/cluster.sh status [--dir DIR]
#   ./scripts/cluster.sh stop [--dir DIR]
# Options of start:
#   --partitions P          partitions of the cluster [default: N]
#   --replication-factor R  brokers holding each partition [default: N, at most 3]
#   --dir DIR               where the brokers' folders go [default: ./cluster-data]
#   --gateway-port G        broker i's gRPC gateway listens on G + 10 i [default: 26500]
#   --internal-port I       broker i's internal (broker-to-broker) port is I + 10 i [default: 26502]
#   --management-port M     broker i's management API listens on M + 10 i [default: 9600]
#   --rest-port R           broker i's REST API v2 listens on R + 10 i [default: 8080]
#   --wait S                seconds to wait for every broker's /ready [default: 120]
#   --bin PATH              the waggle binary [default: $WAGGLE_BIN, else the optimised build
#                           scripts/run.sh starts, built first if needed]
#   --gateway               also start a standalone gateway (`waggle gateway`) in front of the
#                           brokers, in the next slot: gRPC on G + 10 N, management on M + 10 N,
#                           gossip on I + 10 N; its settings in DIR/gateway/gateway.toml
#   --tls                   mutual TLS between the brokers (and the gateway): a CA and a
#                           certificate per node are made with openssl in DIR/tls (kept, and
#                           reused by later starts), and given as --network-security-* flags
# Broker i (its node id, 0-based) keeps its data in DIR/broker-i/data, its log in
# DIR/broker-i/waggle.log and its PID in DIR/broker-i/waggle.pid. Every broker gets the same
# --contact-points: the internal addresses of brokers 0..N-1, in node-id order. Started again on
# the same DIR with other settings, the brokers refuse to start (their data's cluster.json) and
# the script shows why. `stop` sends SIGTERM and, after 30 s, SIGKILL (the gateway first).
# The gateway learns the cluster from the brokers' gossip (its contact points are theirs);
# `status` shows it as node "gw".
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/waggle-target}"

die() {
  echo "cluster.sh: $*" >&2
  exit 1
}

usage() {
  sed -n '2,29p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

command=${1:-}
[ -n "$command" ] || usage
shift
count=""
if [ "$command" = start ]; then
  count=${1:-}
  [[ "$count" =~ ^[1-9][0-9]*$ ]] || die "start needs the number of brokers, e.g. \`cluster.sh start 3\`"
  shift
fi
dir=./cluster-data
partitions=""
replication_factor=""
gateway_base=26500
internal_base=26502
management_base=9600
rest_base=8080
wait_s=120
bin=${WAGGLE_BIN:-}
with_gateway=""
with_tls=""
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --dir) dir=$2; shift 2 ;;
    --partitions) partitions=$2; shift 2 ;;
    --replication-factor) replication_factor=$2; shift 2 ;;
    --gateway-port) gateway_base=$2; shift 2 ;;
    --internal-port) internal_base=$2; shift 2 ;;
    --management-port) management_base=$2; shift 2 ;;
    --rest-port) rest_base=$2; shift 2 ;;
    --wait) wait_s=$2; shift 2 ;;
    --bin) bin=$2; shift 2 ;;
    --gateway) with_gateway=1; shift ;;
    --tls) with_tls=1; shift ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) usage ;;
    *) die "unknown option $1 (see \`cluster.sh --help\`)" ;;
  esac
done
[ "$command" = start ] || [ -z "$partitions$replication_factor" ] || die "--partitions and --replication-factor are options of start"
# an absolute path: the PID checks look for it in the brokers' command lines
case "$dir" in
  /*) ;;
  *) dir="$PWD/${dir#./}" ;;
esac

# The settings of the cluster in $dir, written by start: count, the three port bases, gateway.
settings="$dir/cluster.env"

load_settings() {
  [ -f "$settings" ] || die "no cluster in $dir (no $settings): start one with \`cluster.sh start N\`"
  # shellcheck disable=SC1090
  . "$settings"
}

broker_dir() { echo "$dir/broker-$1"; }
tls_dir() { echo "$dir/tls"; }

# Makes (once) the cluster's CA and node $1's certificate (server and client use, for 127.0.0.1
# and localhost) and key in DIR/tls.
make_cert() {
  local t
  t=$(tls_dir)
  mkdir -p "$t"
  command -v openssl >/dev/null || die "--tls needs openssl"
  if [ ! -f "$t/ca.pem" ]; then
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 365 -subj /CN=waggle-cluster-ca \
      -keyout "$t/ca.key" -out "$t/ca.pem" 2>/dev/null || die "openssl could not make the CA"
  fi
  [ -f "$t/$1.pem" ] && return 0
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$1" \
    -keyout "$t/$1.key" -out "$t/$1.csr" 2>/dev/null || die "openssl could not make $1's key"
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n' >"$t/$1.ext"
  openssl x509 -req -in "$t/$1.csr" -CA "$t/ca.pem" -CAkey "$t/ca.key" -CAcreateserial -days 365 \
    -extfile "$t/$1.ext" -out "$t/$1.pem" 2>/dev/null || die "openssl could not sign $1's certificate"
  rm -f "$t/$1.csr" "$t/$1.ext"
}

# The --network-security-* flags of node $1 (with --tls), one a line.
tls_flags() {
  [ -n "$with_tls" ] || return 0
  make_cert "$1"
  local t
  t=$(tls_dir)
  printf '%s\n' --network-security-enabled true --network-security-certificate-chain-path "$t/$1.pem" \
    --network-security-private-key-path "$t/$1.key" --network-security-ca-certificate-path "$t/ca.pem"
}
gateway_dir() { echo "$dir/gateway"; }

# The PID of the standalone gateway if it runs (its command line names its config file).
gateway_pid() {
  local file pid
  file="$(gateway_dir)/waggle.pid"
  [ -f "$file" ] || return 1
  pid=$(cat "$file")
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  [ -r "/proc/$pid/cmdline" ] || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$(gateway_dir)/gateway.toml" || return 1
  echo "$pid"
}

# The PID of broker $1 if that process runs and is this broker (a PID file can outlive its
# process, and the PID be reused): its command line names the broker's data folder.
running_pid() {
  local file pid
  file="$(broker_dir "$1")/waggle.pid"
  [ -f "$file" ] || return 1
  pid=$(cat "$file")
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  [ -r "/proc/$pid/cmdline" ] || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$(broker_dir "$1")/data" || return 1
  echo "$pid"
}

# The HTTP status of GET $2 on loopback port $1 (bash's /dev/tcp: no curl needed), or nothing.
http_status() {
  local line
  (
    exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1
    printf 'GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' "$2" >&3
    IFS=' ' read -r -t 5 _ line _ <&3 || exit 1
    echo "$line"
  ) 2>/dev/null || true
}

# The lines broker's log $1 has since the last start (at most 20).
show_log() {
  echo "--- $1:" >&2
  awk '/^=== .* cluster.sh start$/ { n = 0; next } { lines[n++] = $0 } END { for (i = (n > 20 ? n - 20 : 0); i < n; i++) print lines[i] }' "$1" >&2 || true
}

start() {
  partitions=${partitions:-$count}
  replication_factor=${replication_factor:-$((count < 3 ? count : 3))}
  if [ -f "$settings" ]; then
    # shellcheck disable=SC1090
    (. "$settings"; for ((i = 0; i < count; i++)); do if running_pid "$i" >/dev/null; then exit 1; fi; done) ||
      die "a cluster is running in $dir: stop it first (\`cluster.sh stop --dir $dir\`)"
  fi
  if [ -z "$bin" ]; then
    echo "cluster.sh: building the optimised binary (scripts/run.sh --build-only)" >&2
    bin=$("$repo/scripts/run.sh" --build-only | tail -n 1)
  fi
  [ -x "$bin" ] || die "no waggle binary at $bin"
  mkdir -p "$dir"
  local contact_points="" i
  for ((i = 0; i < count; i++)); do
    contact_points+="${contact_points:+,}127.0.0.1:$((internal_base + 10 * i))"
  done
  printf 'count=%s\ngateway_base=%s\ninternal_base=%s\nmanagement_base=%s\ngateway=%s\n' \
    "$count" "$gateway_base" "$internal_base" "$management_base" "$with_gateway" >"$settings"
  for ((i = 0; i < count; i++)); do
    local b tls=()
    b=$(broker_dir "$i")
    mkdir -p "$b"
    mapfile -t tls < <(tls_flags "broker-$i")
    [ -z "$with_tls" ] || [ ${#tls[@]} -gt 0 ] || die "no certificate for broker $i"
    echo "=== $(date -u +%FT%TZ) cluster.sh start" >>"$b/waggle.log"
    nohup "$bin" broker \
      --node-id "$i" --cluster-size "$count" --partitions "$partitions" --replication-factor "$replication_factor" \
      --contact-points "$contact_points" --internal-host 127.0.0.1 --internal-port "$((internal_base + 10 * i))" \
      --host 127.0.0.1 --port "$((gateway_base + 10 * i))" --management-port "$((management_base + 10 * i))" \
      --rest-port "$((rest_base + 10 * i))" \
      --data-dir "$b/data" "${tls[@]}" "${extra[@]}" </dev/null >/dev/null 2>>"$b/waggle.log" &
    echo $! >"$b/waggle.pid"
  done
  local deadline=$((SECONDS + wait_s)) failed=""
  for ((i = 0; i < count; i++)); do
    local b
    b=$(broker_dir "$i")
    until [ "$(http_status "$((management_base + 10 * i))" /ready)" = 200 ]; do
      if ! running_pid "$i" >/dev/null; then
        echo "cluster.sh: broker $i exited while starting" >&2
        show_log "$b/waggle.log"
        failed=1
        break
      fi
      if [ "$SECONDS" -ge "$deadline" ]; then
        echo "cluster.sh: broker $i not ready after ${wait_s}s" >&2
        show_log "$b/waggle.log"
        failed=1
        break
      fi
      sleep 0.2
    done
  done
  if [ -z "$failed" ] && [ -n "$with_gateway" ]; then
    start_gateway "$contact_points" "$deadline" || failed=1
  fi
  if [ -n "$failed" ]; then
    stop >/dev/null
    die "the cluster did not start; the brokers that had started were stopped"
  fi
  echo "started $count brokers in $dir: $partitions partitions, replication factor $replication_factor${with_tls:+, mutual TLS between them (CA $(tls_dir)/ca.pem)}"
  status
}

# Starts the standalone gateway in slot $count with the brokers' contact points ($1), and waits
# (until $SECONDS reaches $2) for its /ready: a leader known for every partition.
start_gateway() {
  local g management
  g=$(gateway_dir)
  management=$((management_base + 10 * count))
  mkdir -p "$g"
  printf '%s\n' \
    "# the standalone gateway of the cluster in $dir (written by cluster.sh start --gateway)" \
    'host = "127.0.0.1"' \
    "port = $((gateway_base + 10 * count))" \
    "management_port = $management" \
    "contact_points = \"$1\"" \
    'internal_host = "127.0.0.1"' \
    "internal_port = $((internal_base + 10 * count))" \
    'member_id = "gateway"' >"$g/gateway.toml"
  if [ -n "$with_tls" ]; then
    make_cert gateway
    printf '%s\n' '[network.security]' 'enabled = true' \
      "certificate_chain_path = \"$(tls_dir)/gateway.pem\"" "private_key_path = \"$(tls_dir)/gateway.key\"" \
      "ca_certificate_path = \"$(tls_dir)/ca.pem\"" >>"$g/gateway.toml"
  fi
  echo "=== $(date -u +%FT%TZ) cluster.sh start" >>"$g/waggle.log"
  nohup "$bin" gateway --config "$g/gateway.toml" </dev/null >/dev/null 2>>"$g/waggle.log" &
  echo $! >"$g/waggle.pid"
  until [ "$(http_status "$management" /ready)" = 200 ]; do
    if ! gateway_pid >/dev/null; then
      echo "cluster.sh: the gateway exited while starting" >&2
      show_log "$g/waggle.log"
      return 1
    fi
    if [ "$SECONDS" -ge "$2" ]; then
      echo "cluster.sh: the gateway not ready after ${wait_s}s" >&2
      show_log "$g/waggle.log"
      return 1
    fi
    sleep 0.2
  done
  echo "started a standalone gateway: gRPC on 127.0.0.1:$((gateway_base + 10 * count))"
}

status() {
  load_settings
  local i all_running=1
  printf '%-7s %-8s %-8s %-7s %-16s %-16s %-16s %s\n' node pid state ready gateway internal management data
  for ((i = 0; i < count; i++)); do
    local pid state ready
    if pid=$(running_pid "$i"); then
      state=running
      ready=$(http_status "$((management_base + 10 * i))" /ready)
      [ "$ready" = 200 ] && ready=yes || ready="no${ready:+ ($ready)}"
    else
      pid=- state=stopped ready=- all_running=""
    fi
    printf '%-7s %-8s %-8s %-7s %-16s %-16s %-16s %s\n' "$i" "$pid" "$state" "$ready" \
      "127.0.0.1:$((gateway_base + 10 * i))" "127.0.0.1:$((internal_base + 10 * i))" \
      "127.0.0.1:$((management_base + 10 * i))" "$(broker_dir "$i")/data"
  done
  if [ -n "${gateway:-}" ]; then
    local pid state ready
    if pid=$(gateway_pid); then
      state=running
      ready=$(http_status "$((management_base + 10 * count))" /ready)
      [ "$ready" = 200 ] && ready=yes || ready="no${ready:+ ($ready)}"
    else
      pid=- state=stopped ready=- all_running=""
    fi
    printf '%-7s %-8s %-8s %-7s %-16s %-16s %-16s %s\n' gw "$pid" "$state" "$ready" \
      "127.0.0.1:$((gateway_base + 10 * count))" "127.0.0.1:$((internal_base + 10 * count))" \
      "127.0.0.1:$((management_base + 10 * count))" "-"
  fi
  [ -n "$all_running" ]
}

stop() {
  load_settings
  local i pids=() gw
  if gw=$(gateway_pid); then
    kill -TERM "$gw" 2>/dev/null || true
    local until=$((SECONDS + 30))
    while gateway_pid >/dev/null && [ "$SECONDS" -lt "$until" ]; do sleep 0.1; done
    if gateway_pid >/dev/null; then
      echo "the gateway (pid $gw) did not stop within 30 s of SIGTERM: SIGKILL" >&2
      kill -KILL "$gw" 2>/dev/null || true
      while gateway_pid >/dev/null; do sleep 0.1; done
    fi
    echo "stopped the gateway (pid $gw)"
  fi
  rm -f "$(gateway_dir)/waggle.pid"
  for ((i = 0; i < count; i++)); do
    local pid
    if pid=$(running_pid "$i"); then
      kill -TERM "$pid" 2>/dev/null || true
      pids+=("$i:$pid")
    fi
  done
  local deadline=$((SECONDS + 30)) entry
  for entry in "${pids[@]}"; do
    i=${entry%%:*}
    local pid=${entry#*:}
    while running_pid "$i" >/dev/null && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.1; done
    if running_pid "$i" >/dev/null; then
      echo "broker $i (pid $pid) did not stop within 30 s of SIGTERM: SIGKILL" >&2
      kill -KILL "$pid" 2>/dev/null || true
      while running_pid "$i" >/dev/null; do sleep 0.1; done
    fi
    echo "stopped broker $i (pid $pid)"
  done
  for ((i = 0; i < count; i++)); do rm -f "$(broker_dir "$i")/waggle.pid"; done
  [ ${#pids[@]} -gt 0 ] || [ -n "${gw:-}" ] || echo "no broker of $dir was running"
}

case "$command" in
  start) start ;;
  status) status ;;
  stop) stop ;;
  -h|--help|help) usage ;;
  *) die "unknown command $command: start N, status or stop" ;;
esac
