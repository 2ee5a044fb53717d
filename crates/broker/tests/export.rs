//! Exporters on a real broker (crates/broker/src/export.rs): the log is not compacted past what
//! the slowest exporter acknowledged, a stuck exporter is reported, a failing one is retried
//! with back-off while the others go on, every committed record reaches each exporter in
//! position order, and a task an exporter scheduled is called back.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

mod common;

use common::{creation, deployment, ONE_TASK};
use waggle_broker::export::{ExportConfig, ExporterStatus};
use waggle_broker::{Broker, BrokerConfig};
use waggle_exporter::{Controller, ExportError, Exporter, ExporterFactory};
use waggle_protocol::Record;

/// Records positions; acknowledges at each flush only while `release` is set; fails its first
/// `failures` exports; schedules a task when opened and notes when it ran.
struct Recording {
    positions: Arc<Mutex<Vec<u64>>>,
    release: Arc<AtomicBool>,
    failures: Arc<AtomicUsize>,
    scheduled_ran: Arc<AtomicBool>,
    last: u64,
}

impl Exporter for Recording {
    fn open(&mut self, controller: &mut Controller) -> Result<(), ExportError> {
        controller.schedule(Duration::from_millis(50), 7);
        Ok(())
    }

    fn on_scheduled(&mut self, task: u64, _controller: &mut Controller) -> Result<(), ExportError> {
        assert_eq!(task, 7);
        self.scheduled_ran.store(true, Ordering::SeqCst);
        Ok(())
    }

    fn export(&mut self, record: &Record, _controller: &mut Controller) -> Result<(), ExportError> {
        if self.failures.load(Ordering::SeqCst) > 0 {
            self.failures.fetch_sub(1, Ordering::SeqCst);
            return Err(ExportError::Other("refused on purpose".into()));
        }
        self.positions.lock().unwrap().push(record.position);
        self.last = record.position;
        Ok(())
    }

    fn flush(&mut self, controller: &mut Controller) -> Result<(), ExportError> {
        if self.release.load(Ordering::SeqCst) {
            controller.acknowledge(self.last);
        }
        Ok(())
    }
}

struct Handles {
    positions: Arc<Mutex<Vec<u64>>>,
    release: Arc<AtomicBool>,
    failures: Arc<AtomicUsize>,
    scheduled_ran: Arc<AtomicBool>,
}

fn recording(id: &str, release: bool, failures: usize) -> (Arc<ExporterFactory>, Handles) {
    let h = Handles {
        positions: Arc::default(),
        release: Arc::new(AtomicBool::new(release)),
        failures: Arc::new(AtomicUsize::new(failures)),
        scheduled_ran: Arc::default(),
    };
    let (positions, rel, fail, ran) = (h.positions.clone(), h.release.clone(), h.failures.clone(), h.scheduled_ran.clone());
    let factory = ExporterFactory::new(id, move || {
        Box::new(Recording {
            positions: positions.clone(),
            release: rel.clone(),
            failures: fail.clone(),
            scheduled_ran: ran.clone(),
            last: 0,
        }) as Box<dyn Exporter>
    });
    (Arc::new(factory), h)
}

/// The index the journal of partition 1 is compacted to (its `meta` file: index, term, crc).
fn compacted_index(data: &Path) -> u64 {
    match std::fs::read(data.join("partitions/1/log/meta")) {
        Ok(bytes) => u64::from_le_bytes(bytes[0..8].try_into().unwrap()),
        Err(_) => 0,
    }
}

fn status(broker: &Broker, exporter: &str) -> ExporterStatus {
    broker.exporters().into_iter().find(|e| e.exporter == exporter).expect("the exporter's status")
}

fn wait_for(what: &str, timeout: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_waits_for_the_slowest_exporter_and_a_failing_one_is_retried() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (slow, slow_h) = recording("slow", false, 0);
    let (flaky, flaky_h) = recording("flaky", true, 3);
    let config = BrokerConfig {
        data_dir: dir.path().to_path_buf(),
        snapshot_every_entries: 20,
        export: ExportConfig { exporters: vec![slow, flaky], stuck_after: Duration::from_millis(500), ..Default::default() },
        ..Default::default()
    };
    let registry = prometheus::Registry::new();
    let broker = Broker::start(config, &registry).expect("broker");
    broker.deploy(deployment(ONE_TASK)).await.expect("deployed");
    for _ in 0..120 {
        broker.submit(1, creation("forwarded")).await.expect("created");
    }
    let snapshot = || broker.status()[0].snapshot_index;
    wait_for("a snapshot", Duration::from_secs(20), || snapshot() > 0);
    // the slow exporter acknowledged nothing: the log keeps every entry
    wait_for("the slow exporter reported stuck", Duration::from_secs(20), || status(&broker, "slow").stuck);
    assert_eq!(compacted_index(dir.path()), 0, "compacted past an unacknowledged entry");
    let s = status(&broker, "slow");
    assert!(s.unacknowledged_entries > 0 && s.acknowledged_position == 0, "{s:?}");
    let metrics = prometheus::TextEncoder::new().encode_to_string(&registry.gather()).unwrap();
    assert!(metrics.contains(r#"waggle_exporter_stuck{exporter="slow",partition="1"} 1"#), "{metrics}");

    // the flaky exporter failed three times, was retried, and has everything, in order, once
    let last = *slow_h.positions.lock().unwrap().last().expect("exported");
    wait_for("the flaky exporter caught up", Duration::from_secs(20), || {
        // at least as far: the log may still grow (a loaded machine processes the instances'
        // later batches after their creations were answered)
        flaky_h.positions.lock().unwrap().last().copied() >= Some(last) && !status(&broker, "flaky").stuck
    });
    assert_eq!(flaky_h.failures.load(Ordering::SeqCst), 0);
    let f = status(&broker, "flaky");
    assert_eq!(f.errors, 3, "{f:?}");
    for h in [&slow_h, &flaky_h] {
        let positions = h.positions.lock().unwrap().clone();
        assert_eq!(positions, (1..=positions.len() as u64).collect::<Vec<_>>(), "every record once, in position order");
    }
    assert!(metrics.contains(r#"waggle_exporter_errors_total{exporter="flaky",partition="1"} 3"#), "{metrics}");

    // once the slow exporter acknowledges, the log is compacted to the snapshot
    slow_h.release.store(true, Ordering::SeqCst);
    broker.submit(1, creation("forwarded")).await.expect("created");
    wait_for("compaction", Duration::from_secs(20), || compacted_index(dir.path()) > 0);
    assert!(compacted_index(dir.path()) <= snapshot());
    wait_for("the slow exporter no longer stuck", Duration::from_secs(5), || !status(&broker, "slow").stuck);
    assert!(slow_h.failures.load(Ordering::SeqCst) == 0);
    assert!(slow_h.scheduled_ran.load(Ordering::SeqCst) && flaky_h.scheduled_ran.load(Ordering::SeqCst), "scheduled tasks ran");
    broker.shutdown();
    drop(broker);

    // the positions were persisted: a restarted broker's exporters resume after them
    let (again, again_h) = recording("slow", true, 0);
    let config = BrokerConfig {
        data_dir: dir.path().to_path_buf(),
        snapshot_every_entries: 20,
        export: ExportConfig { exporters: vec![again], ..Default::default() },
        ..Default::default()
    };
    let broker = Broker::start(config, &prometheus::Registry::new()).expect("broker again");
    let created = broker.submit(1, creation("forwarded")).await.expect("created");
    wait_for("the new record exported", Duration::from_secs(20), || again_h.positions.lock().unwrap().contains(&created.position));
    let resumed = again_h.positions.lock().unwrap().clone();
    assert!(resumed[0] > 1, "export resumed after the acknowledged position, not at 1: {:?}", &resumed[..3.min(resumed.len())]);
    broker.shutdown();
}

/// Bounded export lag (issue 27): an exporter that works but acknowledges nothing holds new
/// process instances back once more committed records than `max_backlog_records` wait for it (the
/// partition answers `Overloaded`, RESOURCE_EXHAUSTED at the gateway, counted in
/// `waggle_export_backpressure_refused_total`), while other commands (a deployment) are still
/// taken; once it acknowledges, new instances are taken again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_instances_wait_while_an_exporter_is_too_far_behind() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (slow, slow_h) = recording("slow", false, 0);
    let config = BrokerConfig {
        data_dir: dir.path().to_path_buf(),
        export: ExportConfig { exporters: vec![slow], max_backlog_records: 50, ..Default::default() },
        ..Default::default()
    };
    let registry = prometheus::Registry::new();
    let broker = Broker::start(config, &registry).expect("broker");
    broker.deploy(deployment(ONE_TASK)).await.expect("deployed");
    let mut created = 0;
    let refused = loop {
        match broker.submit(1, creation("forwarded")).await {
            Ok(_) => created += 1,
            Err(waggle_broker::BrokerError::Overloaded) => break true,
            Err(e) => panic!("creation {created}: {e}"),
        }
        if created == 200 {
            break false;
        }
    };
    assert!(refused, "200 instances created while the exporter acknowledged nothing");
    assert!(created >= 1, "refused before the backlog was there");
    // the status (sampled by the runner as it goes) shows the backlog that refused it
    wait_for("the backlog in the status", Duration::from_secs(5), || status(&broker, "slow").unacknowledged_records > 50);
    broker.deploy(deployment(ONE_TASK)).await.expect("a deployment is still taken");
    let metrics = prometheus::TextEncoder::new().encode_to_string(&registry.gather()).unwrap();
    assert!(metrics.contains(r#"waggle_export_backpressure_refused_total{partition="1"} 1"#), "{metrics}");

    // acknowledged: new instances are taken again
    slow_h.release.store(true, Ordering::SeqCst);
    broker.deploy(deployment(ONE_TASK)).await.expect("deployed again, to be exported and acknowledged");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match broker.submit(1, creation("forwarded")).await {
            Ok(_) => break,
            Err(waggle_broker::BrokerError::Overloaded) => assert!(Instant::now() < deadline, "still refused after the exporter caught up"),
            Err(e) => panic!("{e}"),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(!status(&broker, "slow").stuck);
    broker.shutdown();
}
