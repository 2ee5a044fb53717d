#!/usr/bin/env bash
# The performance peers of `waggle bench compare`: Flowable 7.2 and Camunda 7.24 CE (both
# Apache-2.0), each embedded in the Java harness of peers/ and run on a durable PostgreSQL.
#
#   scripts/peers.sh run ENGINE HARNESS_ARGS...   one workload shape on one engine (flowable | camunda7):
#                                                  starts PostgreSQL, makes a fresh database, runs the
#                                                  harness, stops PostgreSQL; prints the figures as JSON
#   scripts/peers.sh setup                         installs and builds what `run` needs (idempotent)
#   scripts/peers.sh stop                          stops the PostgreSQL this script started
#
# PostgreSQL is Debian's package (apt-get when missing; needs root), a cluster of its own in
# $WAGGLE_PEERS_PG (default /var/lib/postgresql/waggle-peers, owned by the postgres user) on
# 127.0.0.1:$WAGGLE_PEERS_PG_PORT (default 25432), with fsync and synchronous_commit on and the
# package's other defaults. Each engine's tables are created once in a template database; every
# run gets a fresh copy of it. The harness's arguments: peers/README.md.
set -euo pipefail
cd "$(dirname "$0")/.."
PG_DIR="${WAGGLE_PEERS_PG:-/var/lib/postgresql/waggle-peers}"
PG_PORT="${WAGGLE_PEERS_PG_PORT:-25432}"
say() { echo "peers.sh: $*" >&2; }

need_packages() {
  local missing=()
  command -v java >/dev/null || missing+=(openjdk-17-jdk-headless)
  command -v mvn >/dev/null || missing+=(maven)
  ls -d /usr/lib/postgresql/*/bin >/dev/null 2>&1 || missing+=(postgresql)
  if [ "${#missing[@]}" -gt 0 ]; then
    [ "$(id -u)" = 0 ] || { say "missing ${missing[*]}: install them (apt-get, as root)"; exit 1; }
    say "installing ${missing[*]}"
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >&2
  fi
}

pg_bin() { ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1; }
as_postgres() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
psql_() { PGOPTIONS="-c client_min_messages=warning" as_postgres "$(pg_bin)/psql" -h 127.0.0.1 -p "$PG_PORT" -U postgres -v ON_ERROR_STOP=1 -q "$@"; }

pg_start() {
  local bin; bin=$(pg_bin)
  if [ ! -f "$PG_DIR/PG_VERSION" ]; then
    say "creating the PostgreSQL cluster in $PG_DIR"
    mkdir -p "$PG_DIR"
    [ "$(id -u)" = 0 ] && chown postgres:postgres "$PG_DIR"
    as_postgres "$bin/initdb" -D "$PG_DIR" -U postgres --auth=trust -E UTF8 >/dev/null
    cat >>"$PG_DIR/postgresql.conf" <<EOF
# waggle peers: durable, loopback only
listen_addresses = '127.0.0.1'
port = $PG_PORT
unix_socket_directories = '$PG_DIR'
fsync = on
synchronous_commit = on
EOF
  fi
  if ! as_postgres "$bin/pg_ctl" -D "$PG_DIR" status >/dev/null 2>&1; then
    as_postgres "$bin/pg_ctl" -D "$PG_DIR" -l "$PG_DIR/server.log" -w start >/dev/null
  fi
}

pg_stop() {
  [ -f "$PG_DIR/PG_VERSION" ] || return 0
  as_postgres "$(pg_bin)/pg_ctl" -D "$PG_DIR" -m fast -w stop >/dev/null 2>&1 || true
}

# builds the harness when its sources changed since the last build
build() {
  local stamp=peers/target/sources.sha
  local sources; sources=$(find peers -path '*/target' -prune -o -type f \( -name '*.java' -o -name pom.xml \) -print | sort | xargs sha1sum | sha1sum)
  if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$sources" ] || [ ! -d peers/flowable/target/dependency ]; then
    say "building the harness (mvn)"
    mvn -B -q -Dstyle.color=never -f peers/pom.xml package dependency:copy-dependencies -DincludeScope=runtime -DskipTests >&2
    mkdir -p peers/target && echo "$sources" >"$stamp"
  fi
}

main_class() {
  case "$1" in
    flowable) echo dev.waggle.peers.FlowableEngine ;;
    camunda7) echo dev.waggle.peers.Camunda7Engine ;;
    *) say "unknown engine '$1': expected flowable or camunda7"; exit 2 ;;
  esac
}

java_() {
  local engine=$1; shift
  java -Dorg.slf4j.simpleLogger.defaultLogLevel=warn -cp "peers/$engine/target/classes:peers/$engine/target/dependency/*" "$(main_class "$engine")" "$@"
}

url() { echo "jdbc:postgresql://127.0.0.1:$PG_PORT/$1"; }

# the template database holding one engine's tables (made once per harness build)
template() {
  local engine=$1 tpl="tpl_$1"
  local stamp="$PG_DIR/.tpl_$1" sources; sources=$(cat peers/target/sources.sha)
  if [ ! -f "$stamp" ] || [ "$(as_postgres cat "$stamp")" != "$sources" ]; then
    say "creating $engine's tables in template database $tpl"
    psql_ -d postgres -c "DROP DATABASE IF EXISTS $tpl" -c "CREATE DATABASE $tpl"
    java_ "$engine" --schema-only --jdbc-url "$(url "$tpl")" >&2
    echo "$sources" | as_postgres tee "$stamp" >/dev/null
  fi
}

case "${1:-}" in
  setup)
    need_packages; build; pg_start
    for e in flowable camunda7; do template "$e"; done
    pg_stop
    ;;
  run)
    engine="${2:?usage: peers.sh run flowable|camunda7 HARNESS_ARGS...}"; shift 2
    main_class "$engine" >/dev/null
    need_packages; build; pg_start
    trap pg_stop EXIT
    template "$engine"
    psql_ -d postgres -c "DROP DATABASE IF EXISTS run_$engine" -c "CREATE DATABASE run_$engine TEMPLATE tpl_$engine"
    # whatever was written before (the last server's data, the copy above) reaches the disk now
    sync
    java_ "$engine" --jdbc-url "$(url "run_$engine")" "$@"
    ;;
  stop) pg_stop ;;
  *) sed -n '2,16p' "$0" >&2; exit 2 ;;
esac
