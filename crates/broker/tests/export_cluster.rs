//! Exporters in a cluster (crates/broker/src/export.rs): three brokers in this process replicate
//! one partition; only the leader's exporter runs, the followers learn its acknowledged
//! position (the leader distributes it, as Zeebe's `ExporterDirector` does), and after the
//! leader is shut down the new leader's exporter resumes after that position, not from the
//! start, leaving no record out.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

mod common;

use common::{creation, deployment, free_addrs, start, ONE_TASK};
use waggle_broker::export::ExportConfig;
use waggle_broker::{Broker, BrokerConfig, ClusterSpec};
use waggle_exporter::{Controller, ExportError, Exporter, ExporterFactory};
use waggle_protocol::Record;

/// Records positions and acknowledges each flush.
struct Recording {
    positions: Arc<Mutex<Vec<u64>>>,
    last: u64,
}

impl Exporter for Recording {
    fn export(&mut self, record: &Record, _controller: &mut Controller) -> Result<(), ExportError> {
        self.positions.lock().unwrap().push(record.position);
        self.last = record.position;
        Ok(())
    }

    fn flush(&mut self, controller: &mut Controller) -> Result<(), ExportError> {
        controller.acknowledge(self.last);
        Ok(())
    }
}

fn wait_for<T>(what: &str, limit: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(t) = f() {
            return t;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn leader(brokers: &[Option<Arc<Broker>>]) -> Option<usize> {
    let leading: Vec<usize> = (0..brokers.len()).filter(|&i| brokers[i].as_ref().is_some_and(|b| b.leads(1))).collect();
    (leading.len() == 1).then(|| leading[0])
}

#[test]
fn only_the_leader_exports_and_a_new_leader_resumes_after_the_distributed_position() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let dirs: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let members = free_addrs(3);
    let exported: Vec<Arc<Mutex<Vec<u64>>>> = (0..3).map(|_| Arc::default()).collect();
    let configs: Vec<BrokerConfig> = (0..3)
        .map(|i| {
            let positions = exported[i].clone();
            let factory = ExporterFactory::new("recording", move || {
                Box::new(Recording { positions: positions.clone(), last: 0 }) as Box<dyn Exporter>
            });
            BrokerConfig {
                data_dir: dirs[i].path().to_path_buf(),
                cluster: Some(ClusterSpec { node_id: i as u64, members: members.clone(), replication_factor: 3, own_address: None }),
                export: ExportConfig { exporters: vec![Arc::new(factory)], ..Default::default() },
                ..BrokerConfig::default()
            }
        })
        .collect();
    let mut brokers: Vec<Option<Arc<Broker>>> = configs.iter().map(|c| Some(start(c))).collect();
    let first = wait_for("a leader", Duration::from_secs(10), || leader(&brokers));
    let lead = brokers[first].clone().unwrap();
    runtime.block_on(lead.deploy(deployment(ONE_TASK))).expect("deployed");
    let mut last = 0;
    for _ in 0..10 {
        last = runtime.block_on(lead.submit(1, creation("forwarded"))).expect("created").position;
    }
    wait_for("the leader's export", Duration::from_secs(10), || exported[first].lock().unwrap().contains(&last).then_some(()));
    let positions = exported[first].lock().unwrap().clone();
    assert_eq!(positions, (1..=positions.len() as u64).collect::<Vec<_>>(), "every record once, in order");
    // the followers learn the leader's acknowledged position
    for i in (0..3).filter(|&i| i != first) {
        let follower = brokers[i].clone().unwrap();
        wait_for("the follower to learn the position", Duration::from_secs(10), || {
            follower.exporters().iter().all(|e| e.acknowledged_position >= last).then_some(())
        });
    }
    for (i, b) in brokers.iter().enumerate().filter(|&(i, _)| i != first) {
        assert!(exported[i].lock().unwrap().is_empty(), "follower {i} exported");
        assert!(b.as_ref().unwrap().exporters().iter().all(|e| !e.running), "follower {i}'s exporter runs");
    }
    assert!(lead.exporters().iter().all(|e| e.running));

    // the leader goes: the new leader's exporter takes over
    let old_leader_exported = *exported[first].lock().unwrap().last().unwrap();
    lead.shutdown();
    drop(lead);
    brokers[first] = None;
    let second = wait_for("a new leader", Duration::from_secs(15), || leader(&brokers));
    let new_lead = brokers[second].clone().unwrap();
    let after = wait_for("a creation on the new leader", Duration::from_secs(10), || {
        runtime.block_on(new_lead.submit(1, creation("forwarded"))).ok()
    });
    wait_for("the new leader's export", Duration::from_secs(10), || {
        exported[second].lock().unwrap().contains(&after.position).then_some(())
    });
    let mut positions = exported[second].lock().unwrap().clone();
    positions.dedup();
    assert!(positions.windows(2).all(|w| w[0] < w[1]), "in position order: {positions:?}");
    let resumed = positions[0];
    assert!(resumed > last, "the new leader resumed at {resumed}, before the distributed position {last}");
    assert!(resumed <= old_leader_exported + 1, "records {}..{resumed} were exported by no leader", old_leader_exported + 1);
    assert_eq!(positions, (resumed..=resumed + positions.len() as u64 - 1).collect::<Vec<_>>(), "no record left out");
    assert!(positions.contains(&after.position));
    for b in brokers.iter().flatten() {
        b.shutdown();
    }
}
