#!/usr/bin/env bash
# A real Keycloak as the OAuth 2 authorization server of the tests (crates/waggle/tests/oauth.rs).
#   keycloak.sh install
#       Keycloak $KEYCLOAK_VERSION (org.keycloak:keycloak-quarkus-dist, Apache-2.0, from Maven
#       Central through mvn) unpacked under ${WAGGLE_PEERS:-~/.cache/waggle-peers}/keycloak and
#       built once for an in-memory database (`kc.sh build --db=dev-mem`), so that each start
#       skips Quarkus' build step. Needs a Java 21 or newer (see java_home below).
#   keycloak.sh start --port P --management-port M --dir DIR [--watch PID]
#       Starts it on 127.0.0.1:P (health on M), waits until it is ready, creates the realm
#       `waggle` of tests/keycloak/realm.json through the admin REST API (confidential clients
#       with the client-credentials grant, an audience mapper, a tenants claim mapper), writes
#       its pid to DIR/keycloak.pid and its log to DIR/keycloak.log, and prints
#       `KEYCLOAK_URL=http://127.0.0.1:P`. With --watch PID it stops by itself once process PID
#       has exited (a test binary that dies still leaves nothing running).
#   keycloak.sh stop --dir DIR
#   keycloak.sh realm --port P --name NAME
#       Another realm like `waggle`, named NAME (a test that rotates keys uses its own).
#   keycloak.sh rotate-key --port P --realm NAME
#       A new RSA signing key of higher priority in realm NAME: tokens issued from now on carry
#       its key id (the old key stays published, as in a real rotation).
# The admin user of the master realm is admin/admin: a throw-away server on loopback only.
set -euo pipefail
KEYCLOAK_VERSION=26.7.3
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PEERS="${WAGGLE_PEERS:-$HOME/.cache/waggle-peers}"
HOME_DIR="$PEERS/keycloak/keycloak-$KEYCLOAK_VERSION"
ADMIN=admin
ADMIN_PASSWORD=admin

say() { echo "keycloak: $*" >&2; }
die() { echo "keycloak: $*" >&2; exit 1; }

java_major() { "$1/bin/java" -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1; }

# A JDK or JRE of Java 21 or newer: $JAVA_HOME if it is one, else the newest under /usr/lib/jvm
# (the machines here have Temurin 25 there beside Debian's OpenJDK 17), else Debian's
# openjdk-21-jre-headless (Debian 13 has it; Debian 12 does not).
java_home() {
  local candidate
  for candidate in "${JAVA_HOME:-}" $(ls -d /usr/lib/jvm/*/ 2>/dev/null | sort -rV); do
    candidate="${candidate%/}"
    [ -n "$candidate" ] && [ -x "$candidate/bin/java" ] || continue
    if [ "$(java_major "$candidate")" -ge 21 ] 2>/dev/null; then echo "$candidate"; return; fi
  done
  if command -v apt-get >/dev/null && apt-cache show openjdk-21-jre-headless >/dev/null 2>&1; then
    local sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends openjdk-21-jre-headless >/dev/null
    ls -d /usr/lib/jvm/java-21-openjdk-*/ | head -1 | sed 's:/$::'
    return
  fi
  die "Keycloak $KEYCLOAK_VERSION needs Java 21 or newer: set JAVA_HOME to one (none under /usr/lib/jvm)"
}

install() {
  local java; java="$(java_home)"
  if [ ! -x "$HOME_DIR/bin/kc.sh" ]; then
    command -v mvn >/dev/null || die "mvn is required to fetch Keycloak from Maven Central"
    mvn -B -q dependency:get -Dartifact="org.keycloak:keycloak-quarkus-dist:$KEYCLOAK_VERSION:zip" -Dtransitive=false
    local zip="${MAVEN_REPO:-$HOME/.m2/repository}/org/keycloak/keycloak-quarkus-dist/$KEYCLOAK_VERSION/keycloak-quarkus-dist-$KEYCLOAK_VERSION.zip"
    [ -f "$zip" ] || die "mvn did not leave $zip"
    mkdir -p "$PEERS/keycloak"
    rm -rf "$HOME_DIR.tmp" && mkdir -p "$HOME_DIR.tmp"
    ( cd "$HOME_DIR.tmp" && unzip -q "$zip" )
    mv "$HOME_DIR.tmp/keycloak-$KEYCLOAK_VERSION" "$HOME_DIR" && rm -rf "$HOME_DIR.tmp"
  fi
  if [ ! -f "$HOME_DIR/.waggle-built" ]; then
    say "building Keycloak for an in-memory database (once)"
    JAVA_HOME="$java" "$HOME_DIR/bin/kc.sh" build --db=dev-mem --health-enabled=true >/dev/null
    touch "$HOME_DIR/.waggle-built"
  fi
  say "Keycloak $KEYCLOAK_VERSION in $HOME_DIR (Java: $java)"
}

admin_token() {
  curl -sf -d grant_type=password -d client_id=admin-cli -d "username=$ADMIN" -d "password=$ADMIN_PASSWORD" \
    "http://127.0.0.1:$1/realms/master/protocol/openid-connect/token" |
    sed -n 's/.*"access_token":"\([^"]*\)".*/\1/p'
}

# POSTs JSON (stdin) to the admin API path $2 of the server on port $1.
admin_post() {
  local token; token="$(admin_token "$1")"
  [ -n "$token" ] || die "no admin token from 127.0.0.1:$1"
  local status
  status=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $token" -H 'content-type: application/json' \
    --data-binary @- "http://127.0.0.1:$1/admin$2")
  case "$status" in 2*) ;; *) die "POST /admin$2 answered $status" ;; esac
}

create_realm() {
  local port=$1 name=$2
  sed -e "s/\"id\": \"waggle\"/\"id\": \"$name\"/" -e "s/\"realm\": \"waggle\"/\"realm\": \"$name\"/" \
    "$ROOT/tests/keycloak/realm.json" | admin_post "$port" /realms
}

start() {
  local port="" mport="" dir="" watch=""
  while [ $# -gt 0 ]; do
    case "$1" in
      --port) port=$2; shift 2 ;;
      --management-port) mport=$2; shift 2 ;;
      --dir) dir=$2; shift 2 ;;
      --watch) watch=$2; shift 2 ;;
      *) die "unknown argument $1" ;;
    esac
  done
  [ -n "$port" ] && [ -n "$mport" ] && [ -n "$dir" ] || die "start needs --port, --management-port and --dir"
  [ -f "$HOME_DIR/.waggle-built" ] || die "not installed: run scripts/keycloak.sh install (or scripts/install-clients.sh keycloak)"
  local java; java="$(java_home)"
  mkdir -p "$dir"
  # a small heap and the client compiler only: it starts sooner on two busy cores
  KC_BOOTSTRAP_ADMIN_USERNAME=$ADMIN KC_BOOTSTRAP_ADMIN_PASSWORD=$ADMIN_PASSWORD JAVA_HOME="$java" \
    JAVA_OPTS_KC_HEAP="-Xms64m -Xmx768m" JAVA_OPTS_APPEND="-XX:TieredStopAtLevel=1 -Djava.io.tmpdir=$dir" \
    setsid "$HOME_DIR/bin/kc.sh" start --optimized --http-enabled=true --http-host=127.0.0.1 --http-port="$port" \
    --hostname="http://127.0.0.1:$port" --http-management-port="$mport" --log-level=warn \
    >"$dir/keycloak.log" 2>&1 </dev/null &
  local pid=$!
  echo "$pid" >"$dir/keycloak.pid"
  if [ -n "$watch" ]; then
    # stops the server once the watched process is gone
    setsid bash -c "while kill -0 $watch 2>/dev/null && kill -0 $pid 2>/dev/null; do sleep 1; done; kill -TERM -- -$pid 2>/dev/null; sleep 10; kill -KILL -- -$pid 2>/dev/null" \
      >/dev/null 2>&1 </dev/null &
  fi
  local started; started=$(date +%s)
  until curl -sf "http://127.0.0.1:$mport/health/ready" >/dev/null 2>&1; do
    kill -0 "$pid" 2>/dev/null || { tail -20 "$dir/keycloak.log" >&2; die "Keycloak exited while starting"; }
    [ $(( $(date +%s) - started )) -lt 180 ] || { kill -TERM -- "-$pid" 2>/dev/null; die "Keycloak not ready after 180 s"; }
    sleep 0.5
  done
  create_realm "$port" waggle
  say "ready in $(( $(date +%s) - started )) s on 127.0.0.1:$port (pid $pid)"
  echo "KEYCLOAK_URL=http://127.0.0.1:$port"
}

stop() {
  local dir=""
  while [ $# -gt 0 ]; do case "$1" in --dir) dir=$2; shift 2 ;; *) die "unknown argument $1" ;; esac; done
  [ -f "$dir/keycloak.pid" ] || return 0
  local pid; pid=$(cat "$dir/keycloak.pid")
  kill -TERM -- "-$pid" 2>/dev/null || true
  for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
  kill -KILL -- "-$pid" 2>/dev/null || true
  rm -f "$dir/keycloak.pid"
}

rotate_key() {
  local port="" realm=""
  while [ $# -gt 0 ]; do
    case "$1" in --port) port=$2; shift 2 ;; --realm) realm=$2; shift 2 ;; *) die "unknown argument $1" ;; esac
  done
  printf '{"name":"rotated-%s","providerId":"rsa-generated","providerType":"org.keycloak.keys.KeyProvider","parentId":"%s","config":{"priority":["%s"]}}' \
    "$(date +%s%N)" "$realm" "$(( $(date +%s) - 1700000000 ))" | admin_post "$port" "/realms/$realm/components"
}

case "${1:-}" in
  install) install ;;
  start) shift; start "$@" ;;
  stop) shift; stop "$@" ;;
  realm)
    shift; port=""; name=""
    while [ $# -gt 0 ]; do case "$1" in --port) port=$2; shift 2 ;; --name) name=$2; shift 2 ;; *) die "unknown argument $1" ;; esac; done
    create_realm "$port" "$name" ;;
  rotate-key) shift; rotate_key "$@" ;;
  *) sed -n '2,24p' "$0"; exit 2 ;;
esac
