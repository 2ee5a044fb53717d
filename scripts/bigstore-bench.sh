#!/usr/bin/env bash
# Issue 28's benchmark: the searches of the web UI and of REST v2 users over a query store
# holding a million finished process instances, timed through the HTTP endpoints of a running
# node (docs/performance.md, "A million finished instances").
#
#   scripts/bigstore-bench.sh BINARY FILL sqlite|postgres [EXPORTED] [COPIES] [RUNS] [STORE_DIR]
#
# BINARY: the waggle binary; FILL: the fill_store example
# (`cargo build -p waggle-store --example fill_store`: target/debug/examples/fill_store).
# Needs curl, jq, sqlite3 (and for PostgreSQL, Debian's postgresql: install-system-deps.sh).
#
# The store: EXPORTED (default 100,000) finished instances, plus 1,000 active (half with an
# incident), written through the store's real exporter from Waggle's engine (fill_store.rs
# says how) as partition 2's; then copied in SQL until there are COPIES (default 10: a million
# finished instances) in all, as partitions 3, 4, … would have written them (each key plus
# copy << 51, Zeebe's partition bits): a 10-partition cluster's store, its partitions' keys
# interleaved as Zeebe's are, every copy on the same 30 days. The copies are of instances,
# elements and incidents (what the timed searches and counts read), not of variables and
# jobs. In STORE_DIR (default a new /tmp/bigstore.*; a folder already filled is reused).
# PostgreSQL: a throw-away server of Debian's packages in STORE_DIR, as the tests start one,
# stopped at the end; or the database of a running server at BENCH_PG_URL.
#
# Then a standalone node serves the store and every query runs RUNS times (default 50, after
# 3 unmeasured) with curl; prints p50, p99 and max of curl's total time per query, and each
# answer's item count and totalItems.
set -euo pipefail
BIN=$(realpath "${1:?waggle binary}")
FILL=$(realpath "${2:?fill_store example}")
DB=${3:?sqlite or postgres}
EXPORTED=${4:-100000}
COPIES=${5:-10}
RUNS=${6:-50}
DIR=${7:-$(mktemp -d /tmp/bigstore.XXXXXX)}
INSTANCES=$((EXPORTED * COPIES))
mkdir -p "$DIR/data"
PORT=$((27000 + RANDOM % 1000)); MGMT=$((PORT + 1000)); REST=$((PORT + 2000))
PG_PIDS=()
stop_pg() { :; }
BINDIR=${WAGGLE_PG_BINDIR:-$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)}
if [[ $DB == postgres && -n ${BENCH_PG_URL:-} ]]; then
  STORE=$BENCH_PG_URL # a database of a server already running
elif [[ $DB == postgres ]]; then
  PGPORT=$((PORT + 3000))
  as_pg=()
  if [[ $(id -u) == 0 ]]; then chown postgres: "$DIR"; as_pg=(runuser -u postgres --); fi
  if [[ ! -d $DIR/pg ]]; then
    "${as_pg[@]}" "$BINDIR/initdb" -D "$DIR/pg" -U waggle --auth=trust --encoding=UTF8 --locale=C >/dev/null
  fi
  "${as_pg[@]}" "$BINDIR/pg_ctl" -D "$DIR/pg" -l "$DIR/pg.log" -w -t 60 start \
    -o "-p $PGPORT -c listen_addresses=127.0.0.1 -c unix_socket_directories=$DIR -c fsync=on -c max_connections=50" >/dev/null
  stop_pg() { "${as_pg[@]}" "$BINDIR/pg_ctl" -D "$DIR/pg" -m fast -w stop >/dev/null || true; }
  "$BINDIR/createdb" -h 127.0.0.1 -p "$PGPORT" -U waggle store 2>/dev/null || true
  STORE="postgres://waggle@127.0.0.1:$PGPORT/store"
else
  STORE=true
fi
SERVER=
trap '[[ -n $SERVER ]] && kill $SERVER 2>/dev/null; wait 2>/dev/null; stop_pg' EXIT

# copy c of partition 2's rows, as partition 2 + c's
copy_sql() {
  local o="($1 * 2251799813685248)" c=$1
  cat <<SQL
BEGIN;
INSERT INTO process_instance (process_instance_key, process_definition_id, process_definition_key, version, state, start_date, end_date,
    parent_process_instance_key, parent_element_instance_key, tenant_id, partition_id)
  SELECT process_instance_key + $o, process_definition_id, process_definition_key, version, state, start_date, end_date,
    parent_process_instance_key, parent_element_instance_key, tenant_id, partition_id + $c FROM process_instance WHERE partition_id = 2;
INSERT INTO flow_node_instance (flow_node_instance_key, process_instance_key, process_definition_key, process_definition_id, flow_node_id,
    type, state, start_date, end_date, flow_scope_key, incident_key, tenant_id, partition_id)
  SELECT flow_node_instance_key + $o, process_instance_key + $o, process_definition_key, process_definition_id, flow_node_id,
    type, state, start_date, end_date, flow_scope_key + $o, incident_key + $o, tenant_id, partition_id + $c FROM flow_node_instance WHERE partition_id = 2;
INSERT INTO incident (incident_key, process_definition_key, process_definition_id, process_instance_key, flow_node_instance_key, flow_node_id,
    job_key, error_type, error_message, state, creation_date, tenant_id, partition_id)
  SELECT incident_key + $o, process_definition_key, process_definition_id, process_instance_key + $o, flow_node_instance_key + $o, flow_node_id,
    job_key + $o, error_type, error_message, state, creation_date, tenant_id, partition_id + $c FROM incident WHERE partition_id = 2;
SQL
  # SQLite's counts are the exporter's (crates/store/src/counts.rs): the copies' counts are
  # partition 2's; PostgreSQL's triggers count the copied rows themselves
  if [[ $DB == sqlite ]]; then
    cat <<SQL
INSERT INTO process_instance_count (process_definition_key, state, partition_id, n)
  SELECT process_definition_key, state, partition_id + $c, n FROM process_instance_count WHERE partition_id = 2;
INSERT INTO flow_node_count (process_definition_key, flow_node_id, state, incident, partition_id, n)
  SELECT process_definition_key, flow_node_id, state, incident, partition_id + $c, n FROM flow_node_count WHERE partition_id = 2;
SQL
  fi
  echo "COMMIT;"
}
if [[ ! -e $DIR/filled ]]; then
  if [[ $DB == postgres ]]; then "$FILL" "$STORE" "$EXPORTED"; else "$FILL" "$DIR/data/query-store.sqlite" "$EXPORTED"; fi | tee "$DIR/filled"
fi
if [[ ! -e $DIR/copied ]]; then
  for c in $(seq 1 $((COPIES - 1))); do
    start=$(date +%s)
    if [[ $DB == postgres ]]; then
      copy_sql "$c" | "$BINDIR/psql" "$STORE" -q -v ON_ERROR_STOP=1
    else
      copy_sql "$c" | sqlite3 "$DIR/data/query-store.sqlite"
    fi
    echo "copy $c as partition $((2 + c)): $(( $(date +%s) - start )) s" | tee -a "$DIR/copied"
  done
  touch "$DIR/copied"
fi
if [[ $DB == postgres ]]; then
  "$BINDIR/psql" "$STORE" -qc 'VACUUM ANALYZE' >/dev/null
fi

# the history clean-up would delete instances older than its 30 days: kept here
"$BIN" standalone --data-dir "$DIR/data" --port "$PORT" --management-port "$MGMT" --rest-port "$REST" \
  --query-store "$STORE" --query-store-history-ttl-secs 0 >"$DIR/server.log" 2>&1 &
SERVER=$!
for _ in $(seq 300); do curl -sf "localhost:$REST/v2/topology" >/dev/null && break; sleep 0.2; done

post() { curl -sf -H 'content-type: application/json' -d "$2" "localhost:$REST$1"; }
ORDER1=$(curl -sf "localhost:$REST/ui/api/processes" | jq -r '[.definitions[] | select(.processDefinitionId == "order-1")][0].processDefinitionKey')
INCIDENT_PI=$(post /v2/process-instances/search '{"filter": {"hasIncident": true}, "page": {"limit": 1}}' | jq -r '.items[0].processInstanceKey')
DESC='"sort": [{"field": "processInstanceKey", "order": "DESC"}]'
HALF=$((INSTANCES / 2))
# a cursor half-way down the list (found once, through an offset), for the keyset deep page
DEEP=$(post /v2/process-instances/search "{$DESC, \"page\": {\"from\": $HALF, \"limit\": 1}}" | jq -r '.page.endCursor')

# name|method|path|body
QUERIES=(
  "ui list, first page|POST|/v2/process-instances/search|{$DESC, \"page\": {\"from\": 0, \"limit\": 50}}"
  "rest list, first page (default sort)|POST|/v2/process-instances/search|{\"page\": {\"limit\": 100}}"
  "filter processDefinitionId|POST|/v2/process-instances/search|{\"filter\": {\"processDefinitionId\": \"order-3\"}, $DESC, \"page\": {\"limit\": 50}}"
  "filter processDefinitionKey + state|POST|/v2/process-instances/search|{\"filter\": {\"processDefinitionKey\": \"$ORDER1\", \"state\": \"TERMINATED\"}, $DESC, \"page\": {\"limit\": 50}}"
  "filter state COMPLETED|POST|/v2/process-instances/search|{\"filter\": {\"state\": \"COMPLETED\"}, $DESC, \"page\": {\"limit\": 50}}"
  "filter state ACTIVE|POST|/v2/process-instances/search|{\"filter\": {\"state\": \"ACTIVE\"}, $DESC, \"page\": {\"limit\": 50}}"
  "filter startDate, one day|POST|/v2/process-instances/search|{\"filter\": {\"startDate\": {\"\$gte\": \"2026-10-15T00:00:00Z\", \"\$lt\": \"2026-10-16T00:00:00Z\"}}, $DESC, \"page\": {\"limit\": 50}}"
  "filter id + state + day (ui)|POST|/v2/process-instances/search|{\"filter\": {\"processDefinitionId\": \"order-2\", \"state\": \"COMPLETED\", \"startDate\": {\"\$gte\": \"2026-10-15T00:00:00Z\", \"\$lt\": \"2026-10-16T00:00:00Z\"}}, $DESC, \"page\": {\"limit\": 50}}"
  "filter hasIncident|POST|/v2/process-instances/search|{\"filter\": {\"hasIncident\": true}, $DESC, \"page\": {\"limit\": 50}}"
  "deep page, searchAfter cursor at $HALF|POST|/v2/process-instances/search|{$DESC, \"page\": {\"after\": \"$DEEP\", \"limit\": 50}}"
  "deep page, from $HALF (offset)|POST|/v2/process-instances/search|{$DESC, \"page\": {\"from\": $HALF, \"limit\": 50}}"
  "ui page 200 (from 9,950)|POST|/v2/process-instances/search|{$DESC, \"page\": {\"from\": 9950, \"limit\": 50}}"
  "ui overview counts|GET|/ui/api/processes|"
  "ui process page (counts, element counts)|GET|/ui/api/processes/$ORDER1|"
  "ui instance page|GET|/ui/api/instances/$INCIDENT_PI|"
  "incidents search|POST|/v2/incidents/search|{\"filter\": {\"state\": \"ACTIVE\"}, \"page\": {\"limit\": 50}}"
)

pct() { sort -n | awk -v p="$1" '{a[NR]=$1} END {i=int((NR*p+99)/100); if (i<1) i=1; printf "%.1f", a[i]*1000}'; }
printf '%-48s %8s %8s %8s  %s\n' query p50_ms p99_ms max_ms answer
for q in "${QUERIES[@]}"; do
  IFS='|' read -r name method path body <<<"$q"
  one() {
    if [[ $method == POST ]]; then
      curl -s -o "$DIR/answer.json" -w '%{http_code} %{time_total}\n' -H 'content-type: application/json' -d "$body" "localhost:$REST$path"
    else
      curl -s -o "$DIR/answer.json" -w '%{http_code} %{time_total}\n' "localhost:$REST$path"
    fi
  }
  for _ in 1 2 3; do one >/dev/null; done
  times=$(for _ in $(seq "$RUNS"); do one; done)
  if grep -qv '^200 ' <<<"$times"; then echo "$name: HTTP $(grep -v '^200 ' <<<"$times" | head -1)"; head -c 300 "$DIR/answer.json"; echo; continue; fi
  answer=$(jq -c 'if .items then {items: (.items | length), total: .page.totalItems, more: .page.hasMoreTotalItems} else (tostring | .[0:80]) end' "$DIR/answer.json")
  t=$(awk '{print $2}' <<<"$times")
  printf '%-48s %8s %8s %8s  %s\n' "$name" "$(pct 50 <<<"$t")" "$(pct 99 <<<"$t")" "$(pct 100 <<<"$t")" "$answer"
done
echo "store: $DB in $DIR ($(du -sh "$DIR" | cut -f1)); load average: $(cut -d' ' -f1-3 /proc/loadavg)"
