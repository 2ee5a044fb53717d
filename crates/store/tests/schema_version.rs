//! The query store's schema version (`waggle_store::version`) on SQLite and on a throw-away
//! PostgreSQL server: a new store records this Waggle's version once; a store written before
//! the store was versioned (version 1: its tables, no version table, here also without the
//! count tables issue 28 added) is migrated forward at open, its rows kept and its counts
//! completed; a store whose version is newer than this Waggle's is refused with a clear
//! message and left as it was.

use waggle_store::db::Value;
use waggle_store::test_cluster::TestCluster;
use waggle_store::version::{self, SCHEMA_VERSION};
use waggle_store::{Connection, Location, StoreError};

fn count(conn: &Connection, sql: &str) -> i64 {
    conn.query_row(sql, &[]).unwrap().and_then(|r| r.into_iter().next()).and_then(|v| v.as_i64()).unwrap_or(-1)
}

fn versions(conn: &Connection) -> Vec<(i64, String)> {
    conn.query("SELECT version, waggle_version FROM waggle_schema_version ORDER BY version", &[])
        .unwrap()
        .into_iter()
        .map(|r| match &r[..] {
            [Value::Integer(v), Value::Text(by)] => (*v, by.clone()),
            other => panic!("a version row: {other:?}"),
        })
        .collect()
}

/// A new store has this version, recorded once however often it is opened.
fn a_new_store_records_its_version(location: &Location) {
    let conn = Connection::open(location).unwrap();
    assert_eq!(version::recorded(&conn).unwrap(), Some(SCHEMA_VERSION));
    drop(conn);
    let conn = Connection::open(location).unwrap();
    let _second = Connection::open(location).unwrap();
    assert_eq!(versions(&conn), vec![(SCHEMA_VERSION, env!("CARGO_PKG_VERSION").to_string())]);
    assert_eq!(version::prepare(&conn).unwrap(), version::Prepared { found: Some(SCHEMA_VERSION), version: SCHEMA_VERSION });
}

/// Turns the store at `location` into one written before versioning and the count tables,
/// holding one process instance.
fn make_version_1(location: &Location) {
    let conn = Connection::open(location).unwrap();
    conn.execute(
        "INSERT INTO process_instance (process_instance_key, process_definition_id, process_definition_key, version, state, \
         tenant_id, partition_id) VALUES (?, ?, ?, ?, ?, ?, ?)",
        waggle_store::params![2251799813685249_i64, "order", 2251799813685248_i64, 1_i64, "ACTIVE", "<default>", 1_i64],
    )
    .unwrap();
    conn.batch("DROP TABLE waggle_schema_version; DROP TABLE process_instance_count; DROP TABLE flow_node_count;").unwrap();
}

/// A version-1 store is migrated at open: version recorded, rows kept, counts completed.
fn an_older_store_is_migrated(location: &Location) {
    make_version_1(location);
    let conn = Connection::open(location).unwrap();
    assert_eq!(versions(&conn).into_iter().map(|(v, _)| v).collect::<Vec<_>>(), vec![SCHEMA_VERSION]);
    assert_eq!(count(&conn, "SELECT COUNT(*) FROM process_instance"), 1);
    assert_eq!(count(&conn, "SELECT n FROM process_instance_count WHERE state = 'ACTIVE'"), 1, "the count table is back and counted");
}

/// The same migration, seen by `prepare` itself: it found version 1.
fn prepare_reports_the_version_found(location: &Location, raw: Connection) {
    make_version_1(location);
    assert_eq!(version::prepare(&raw).unwrap(), version::Prepared { found: Some(1), version: SCHEMA_VERSION });
}

/// A store of a newer version is refused, and left as it was.
fn a_newer_store_is_refused(location: &Location) {
    let conn = Connection::open(location).unwrap();
    let newer = SCHEMA_VERSION + 1;
    conn.execute(
        "INSERT INTO waggle_schema_version (version, waggle_version, applied_at) VALUES (?, ?, ?)",
        waggle_store::params![newer, "99.0.0", 0_i64],
    )
    .unwrap();
    drop(conn);
    let refused = Connection::open(location).err().expect("a newer store is refused");
    assert!(
        matches!(refused, StoreError::NewerSchema { found, supported } if found == newer && supported == SCHEMA_VERSION),
        "{refused:?}"
    );
    let message = refused.to_string();
    assert!(message.contains(&format!("schema version {newer}")) && message.contains("newer Waggle"), "{message}");
    assert!(message.contains(&format!("up to {SCHEMA_VERSION}")), "{message}");
    // nothing was written: the raw database still has both rows and no others
    let raw = match location {
        Location::Sqlite(path) => Connection::Sqlite(rusqlite::Connection::open(path).unwrap()),
        Location::Postgres(url) => Connection::Postgres(Box::new(waggle_store::pg::PgConnection::connect(url).unwrap())),
    };
    assert_eq!(versions(&raw).into_iter().map(|(v, _)| v).collect::<Vec<_>>(), vec![SCHEMA_VERSION, newer]);
}

#[test]
fn sqlite_stores_are_versioned_migrated_and_refused_when_newer() {
    let dir = tempfile::tempdir().unwrap();
    let at = |name: &str| Location::Sqlite(dir.path().join(name));
    a_new_store_records_its_version(&at("new.sqlite"));
    an_older_store_is_migrated(&at("old.sqlite"));
    let raw_at = dir.path().join("raw.sqlite");
    let location = Location::Sqlite(raw_at.clone());
    Connection::open(&location).unwrap();
    prepare_reports_the_version_found(&location, Connection::Sqlite(rusqlite::Connection::open(&raw_at).unwrap()));
    a_newer_store_is_refused(&at("newer.sqlite"));
}

#[test]
fn postgresql_stores_are_versioned_migrated_and_refused_when_newer() {
    let cluster = TestCluster::start();
    a_new_store_records_its_version(&Location::Postgres(cluster.database("new_store")));
    an_older_store_is_migrated(&Location::Postgres(cluster.database("old_store")));
    let url = cluster.database("raw_store");
    let location = Location::Postgres(url.clone());
    Connection::open(&location).unwrap();
    let raw = Connection::Postgres(Box::new(waggle_store::pg::PgConnection::connect(&url).unwrap()));
    prepare_reports_the_version_found(&location, raw);
    a_newer_store_is_refused(&Location::Postgres(cluster.database("newer_store")));
}

/// A version-2 SQLite store (its counts kept by row triggers) opened by this Waggle: the
/// triggers go (the exporter counts: `waggle_store::counts`), the counts are computed once
/// again from the rows (here a wrong one is put right), and the rows stay.
#[test]
fn a_version_2_sqlite_store_loses_its_count_triggers_and_is_counted_again() {
    let dir = tempfile::tempdir().unwrap();
    let location = Location::Sqlite(dir.path().join("v2.sqlite"));
    let conn = Connection::open(&location).unwrap();
    conn.batch(
        "INSERT INTO process_instance (process_instance_key, process_definition_id, process_definition_key, version, state, tenant_id, partition_id)
           VALUES (1, 'order', 10, 1, 'ACTIVE', '<default>', 1), (2, 'order', 10, 1, 'COMPLETED', '<default>', 1);
         INSERT INTO flow_node_instance (flow_node_instance_key, process_instance_key, process_definition_key, process_definition_id,
             flow_node_id, type, state, tenant_id, partition_id)
           VALUES (1, 1, 10, 'order', 'order', 'PROCESS', 'ACTIVE', '<default>', 1),
                  (11, 1, 10, 'order', 'task', 'SERVICE_TASK', 'ACTIVE', '<default>', 1);
         INSERT INTO process_instance_count (process_definition_key, state, partition_id, n) VALUES (10, 'ACTIVE', 1, 99);
         CREATE TRIGGER process_instance_counted AFTER INSERT ON process_instance BEGIN SELECT 1; END;
         CREATE TRIGGER flow_node_recounted AFTER UPDATE ON flow_node_instance BEGIN SELECT 1; END;
         DELETE FROM waggle_schema_version;
         INSERT INTO waggle_schema_version (version, waggle_version, applied_at) VALUES (2, '0.1.0', 0);",
    )
    .unwrap();
    drop(conn);
    let conn = Connection::open(&location).unwrap();
    assert_eq!(versions(&conn).into_iter().map(|(v, _)| v).collect::<Vec<_>>(), vec![2, SCHEMA_VERSION]);
    assert_eq!(count(&conn, "SELECT COUNT(*) FROM sqlite_master WHERE type = 'trigger'"), 0, "the count triggers are gone");
    assert_eq!(count(&conn, "SELECT COUNT(*) FROM process_instance"), 2);
    assert_eq!(count(&conn, "SELECT n FROM process_instance_count WHERE state = 'ACTIVE'"), 1, "counted again");
    assert_eq!(count(&conn, "SELECT n FROM process_instance_count WHERE state = 'COMPLETED'"), 1);
    assert_eq!(count(&conn, "SELECT SUM(n) FROM flow_node_count"), 1, "the task, not the process");
}
