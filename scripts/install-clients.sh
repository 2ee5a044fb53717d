#!/usr/bin/env bash
# Installs (idempotently) the real Zeebe 8.5 clients that Waggle must serve unchanged, into
# ${WAGGLE_PEERS:-$HOME/.cache/waggle-peers}, for the drivers under tests/clients/.
#   install-clients.sh zbctl    zbctl 8.5.8 (built from its Go module, Apache-2.0) -> $PEERS/bin/zbctl
#   install-clients.sh java     io.camunda:zeebe-client-java:8.5.8 + slf4j-simple    -> $PEERS/java-client/lib/*.jar
#   install-clients.sh python   pyzeebe 4.7.0 in a venv                              -> $PEERS/py/bin/python
#   install-clients.sh node     @camunda8/sdk 8.8.13                                 -> $PEERS/node/node_modules
#   install-clients.sh java88   io.camunda:camunda-client-java:8.8.14 (REST API v2)  -> $PEERS/java-client-88/lib/*.jar
#   install-clients.sh browser  Debian's chromium + playwright-core 1.65.1 (the web UI's test)
#                               -> /usr/bin/chromium, $PEERS/node/node_modules/playwright-core
#   install-clients.sh keycloak Keycloak 26 (org.keycloak:keycloak-quarkus-dist), the OAuth 2
#                               server of tests/oauth.rs (scripts/keycloak.sh install: needs Java 21+)
#   install-clients.sh all      (default) all seven
# Needs: go, mvn + a JDK (17 is enough for the client), python3 with venv, node + npm; root or
# sudo for chromium (apt-get).
# Each client is skipped when already present, so re-running is cheap.
set -euo pipefail
ZEEBE_VERSION=8.5.8
PYZEEBE_VERSION=4.7.0
SDK_VERSION=8.8.13
CAMUNDA_CLIENT_VERSION=8.8.14
PLAYWRIGHT_CORE_VERSION=1.65.1
PEERS="${WAGGLE_PEERS:-$HOME/.cache/waggle-peers}"
mkdir -p "$PEERS/bin"

say() { echo "install-clients: $*"; }
need() { command -v "$1" >/dev/null 2>&1 || { echo "install-clients: '$1' is required for $2" >&2; exit 1; }; }

install_zbctl() {
  if [ -x "$PEERS/bin/zbctl" ]; then say "zbctl: $PEERS/bin/zbctl"; return; fi
  # Built from zbctl's Go module, which is Apache-2.0. The Zeebe distribution (the broker
  # tarball) is not open source and is never downloaded. The checksum database cannot be reached
  # for this module here, hence GONOSUMDB for it alone.
  need go "zbctl (built from its Go module; install Go 1.21 or newer)"
  GONOSUMDB=github.com/camunda/zeebe GOBIN="$PEERS/bin" \
    go install "github.com/camunda/zeebe/clients/go/v8/cmd/zbctl@v$ZEEBE_VERSION"
  [ -x "$PEERS/bin/zbctl" ] || { echo "install-clients: go install did not produce $PEERS/bin/zbctl" >&2; exit 1; }
  say "zbctl: $PEERS/bin/zbctl --insecure --address 127.0.0.1:26500 status"
}

# One Java client resolved by Maven: a pom in $PEERS/DIR naming io.camunda:ARTIFACT:VERSION and
# slf4j-simple, their jars copied into DIR/lib (built aside and swapped in whole, so an interrupted
# run leaves no half lib/). Skipped when DIR/lib holds ARTIFACT-VERSION.jar.
#   install_maven_client DIR ARTIFACT VERSION LABEL
install_maven_client() {
  local dir=$1 artifact=$2 version=$3 label=$4
  local d="$PEERS/$dir"
  mkdir -p "$d"
  if ! ls "$d/lib/$artifact-$version.jar" >/dev/null 2>&1; then
    need mvn "the $label"
    cat > "$d/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>waggle.peers</groupId><artifactId>$dir</artifactId><version>1</version>
  <dependencies>
    <dependency><groupId>io.camunda</groupId><artifactId>$artifact</artifactId><version>$version</version></dependency>
    <dependency><groupId>org.slf4j</groupId><artifactId>slf4j-simple</artifactId><version>2.0.13</version></dependency>
  </dependencies>
</project>
POM
    rm -rf "$d/lib.tmp"
    ( cd "$d" && mvn -B -q dependency:copy-dependencies -DoutputDirectory=lib.tmp )
    rm -rf "$d/lib" && mv "$d/lib.tmp" "$d/lib"
  fi
  say "$label: javac/java -cp '$d/lib/*'"
}

install_java() { install_maven_client java-client zeebe-client-java "$ZEEBE_VERSION" "Java client"; }

# The 8.8 Java client, whose REST side (preferRestOverGrpc) drives tests/clients/RestSearch.java.
install_java88() { install_maven_client java-client-88 camunda-client-java "$CAMUNDA_CLIENT_VERSION" "8.8 Java client"; }

install_python() {
  local v="$PEERS/py"
  if ! { [ -x "$v/bin/python" ] && "$v/bin/python" -c 'import pyzeebe' >/dev/null 2>&1; }; then
    need python3 pyzeebe
    python3 -m venv "$v"
    "$v/bin/pip" install -q "pyzeebe==$PYZEEBE_VERSION"
  fi
  say "pyzeebe: $v/bin/python"
}

install_node() {
  local d="$PEERS/node"
  mkdir -p "$d"
  if [ ! -f "$d/node_modules/@camunda8/sdk/package.json" ]; then
    need npm "the Node SDK"
    ( cd "$d" && npm install --no-audit --no-fund "@camunda8/sdk@$SDK_VERSION" >/dev/null )
  fi
  say "node: NODE_PATH=$d/node_modules"
}

# The web UI's browser test (crates/waggle/tests/ui.rs): a real headless Chromium from Debian's
# packages, driven by playwright-core (which downloads no browser of its own).
install_browser() {
  if [ ! -x /usr/bin/chromium ]; then
    local sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends chromium >/dev/null
  fi
  local d="$PEERS/node"
  mkdir -p "$d"
  if ! grep -qs "\"version\": \"$PLAYWRIGHT_CORE_VERSION\"" "$d/node_modules/playwright-core/package.json"; then
    need npm playwright-core
    ( cd "$d" && npm install --no-audit --no-fund "playwright-core@$PLAYWRIGHT_CORE_VERSION" >/dev/null )
  fi
  say "browser: /usr/bin/chromium, NODE_PATH=$d/node_modules (playwright-core)"
}

case "${1:-all}" in
  zbctl) install_zbctl ;;
  java) install_java ;;
  python) install_python ;;
  node) install_node ;;
  java88) install_java88 ;;
  browser) install_browser ;;
  keycloak) "$(dirname "$0")/keycloak.sh" install ;;
  all) install_zbctl; install_java; install_python; install_node; install_java88; install_browser; "$(dirname "$0")/keycloak.sh" install ;;
  *) sed -n '2,17p' "$0"; exit 2 ;;
esac
