//! A partition's membership changed through the topology coordinator while commands flow,
//! with four `Broker`s in this process (partition 1 on brokers 0-2, replication factor 3;
//! broker 0 coordinates every change, as Zeebe's broker 0 does) and a fifth member that is
//! down (the coordinator's last pushes of a change's topology go on for a while, unanswered).
//!
//! A replica that joins (Zeebe 8.5's `POST /actuator/cluster/brokers/{b}/partitions/{p}`) is
//! sent one snapshot, taken after it was added, and catches up by the log from there: the
//! leader no longer forces a snapshot and a compaction on every round while the learner lags
//! (it used to, and the learner was sent snapshot after snapshot, each one behind the
//! leader's next compaction). A change planned the moment the previous one completed, while
//! its coordinator still hands the final topology out, is carried out too (it used to find
//! the finishing run under way, and waited for ever).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod common;

use common::{free_addrs, start};
use waggle_broker::topology::Topology;
use waggle_broker::{Broker, BrokerConfig, ChangeRequest, ClusterSpec};
use waggle_engine::Command;
use waggle_protocol::value::{DeploymentRecord, DeploymentResource, ProcessInstanceCreationRecord};
use waggle_protocol::{Intent, RecordValue};

const MODEL: &str = include_str!("../../../tests/clients/models/one_task.bpmn");

fn deployment() -> Command {
    let resources = vec![DeploymentResource { resource_name: "one_task.bpmn".into(), resource: MODEL.as_bytes().to_vec() }];
    let record = DeploymentRecord { resources, processes_metadata: vec![], tenant_id: "<default>".into(), ..Default::default() };
    Command::new(-1, Intent::Create, RecordValue::Deployment(record))
}

fn creation() -> Command {
    let value = RecordValue::ProcessInstanceCreation(ProcessInstanceCreationRecord {
        bpmn_process_id: "benchmark".into(),
        version: -1,
        process_definition_key: 0,
        process_instance_key: -1,
        variables: String::new(),
        fetch_variables: vec![],
        start_instructions: vec![],
        tenant_id: "<default>".into(),
    });
    Command::new(-1, Intent::Create, value)
}

/// Polls `coordinator`'s topology until change `id` completed; panics after `limit`.
fn completed(coordinator: &Broker, id: u64, limit: Duration, what: &str) -> Topology {
    let deadline = Instant::now() + limit;
    loop {
        let t = coordinator.cluster_topology().expect("a cluster topology");
        if t.pending.is_none() && t.last.as_ref().is_some_and(|l| l.id == id) {
            return t;
        }
        assert!(Instant::now() < deadline, "{what} (change {id}) not completed: {t:?}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_joining_replica_is_sent_one_snapshot_under_load_and_a_change_asked_as_the_last_completes_is_carried_out() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let dirs: Vec<tempfile::TempDir> = (0..4).map(|_| tempfile::tempdir().unwrap()).collect();
    // broker 4 never starts: it holds no replica, and never answers the coordinator
    let members = free_addrs(5);
    let brokers: Vec<Arc<Broker>> = (0..4)
        .map(|i| {
            start(&BrokerConfig {
                data_dir: dirs[i].path().to_path_buf(),
                partitions: 1,
                cluster: Some(ClusterSpec { node_id: i as u64, members: members.clone(), replication_factor: 3, own_address: None }),
                // no regular snapshot in this test: every snapshot is one the join asked for
                snapshot_every_entries: 1_000_000,
                ..BrokerConfig::default()
            })
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(20);
    let lead = loop {
        if let Some(b) = brokers[..3].iter().find(|b| b.leads(1)) {
            break b.clone();
        }
        assert!(Instant::now() < deadline, "no leader of partition 1");
        std::thread::sleep(Duration::from_millis(10));
    };
    assert!(runtime.block_on(lead.deploy(deployment())).unwrap().rejection.is_none());

    // the load: creations one after another on the leader, for the whole test
    let stop = Arc::new(AtomicBool::new(false));
    let created = Arc::new(AtomicU64::new(0));
    let load = {
        let (stop, created, lead, handle) = (stop.clone(), created.clone(), lead.clone(), runtime.handle().clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                if handle.block_on(lead.submit(1, creation())).is_ok_and(|r| r.rejection.is_none()) {
                    created.fetch_add(1, Ordering::SeqCst);
                } else {
                    // (no longer the leader: the change's rebalance may move the lead)
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
        })
    };
    std::thread::sleep(Duration::from_secs(1));

    let join = ChangeRequest::JoinPartition { broker: 3, partition: 1, priority: 1 };
    let planned = runtime.block_on(brokers[0].request_change(join, false)).expect("the join is planned");
    completed(&brokers[0], planned.change_id, Duration::from_secs(60), "the join");
    let (joined, before) = (brokers[3].status(), created.load(Ordering::SeqCst));
    // while the coordinator hands the final topology out (for about a second: broker 4 does
    // not answer), the next change
    std::thread::sleep(Duration::from_millis(300));
    let leave = ChangeRequest::LeavePartition { broker: 3, partition: 1 };
    let next = runtime.block_on(brokers[0].request_change(leave, false)).expect("the leave is planned");
    let t = completed(&brokers[0], next.change_id, Duration::from_secs(30), "the change asked as the join completed");
    let mut voters = t.voters(1);
    voters.sort_unstable();
    assert_eq!(voters, vec![0, 1, 2], "{t:?}");

    assert_eq!(joined.len(), 1, "broker 3 holds partition 1 once it joined: {joined:?}");
    assert_eq!(
        joined[0].snapshots_installed, 1,
        "the joining replica caught up by one snapshot and then the log (load: {before} creations)"
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    while !brokers[3].status().is_empty() {
        assert!(Instant::now() < deadline, "broker 3 still runs its replica after leaving");
        std::thread::sleep(Duration::from_millis(20));
    }
    stop.store(true, Ordering::SeqCst);
    load.join().unwrap();
    assert!(created.load(Ordering::SeqCst) > 0, "no creation was acknowledged");
    for b in brokers {
        b.shutdown();
    }
    drop(runtime);
}

/// A leader that leaves its partition hands its leadership to the staying replica of highest
/// priority. Six brokers, six partitions, replication factor 3, scaled to brokers 0-2 (Zeebe
/// 8.5's `POST /actuator/cluster/brokers`; `waggle bench cluster --scenarios scaling`'s first
/// change): partition 6 lives on brokers 5, 0, 1 (broker 5 its preferred leader) and moves to
/// 2, 0, 1 (broker 2 preferred, broker 1 last). Handed to the first caught-up voter in Raft's
/// order, broker 0 or 1, the election failed whenever brokers 2 and 5, of higher priority and
/// with as long a log, refused it (raft-rs's priority election), broker 5 was elected again and
/// handed over again, and the change did not complete for minutes (in that benchmark's separate
/// processes; in this process the old choice happened to pass too: `handover_target`'s unit
/// test pins the choice). The leaving broker 5 now takes the lowest priority and hands over to
/// broker 2.
#[test]
fn a_leaving_leader_hands_its_partition_to_the_staying_replica_of_highest_priority() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let dirs: Vec<tempfile::TempDir> = (0..6).map(|_| tempfile::tempdir().unwrap()).collect();
    let members = free_addrs(6);
    let brokers: Vec<Arc<Broker>> = (0..6)
        .map(|i| {
            start(&BrokerConfig {
                data_dir: dirs[i].path().to_path_buf(),
                partitions: 6,
                cluster: Some(ClusterSpec { node_id: i as u64, members: members.clone(), replication_factor: 3, own_address: None }),
                ..BrokerConfig::default()
            })
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !(1..=6).all(|p| brokers.iter().any(|b| b.leads(p))) {
        assert!(Instant::now() < deadline, "not every partition has a leader");
        std::thread::sleep(Duration::from_millis(10));
    }
    let wanted = ChangeRequest::Brokers([0, 1, 2].into_iter().collect());
    let planned = runtime.block_on(brokers[0].request_change(wanted, false)).expect("the change is planned");
    let t = completed(&brokers[0], planned.change_id, Duration::from_secs(60), "the scale-down to brokers 0-2");
    let mut voters = t.voters(6);
    voters.sort_unstable();
    assert_eq!(voters, vec![0, 1, 2], "{t:?}");
    for b in brokers {
        b.shutdown();
    }
    drop(runtime);
}
