//! A replicated cluster under load and a leader's `kill -9` (issue 25): three `waggle broker`
//! processes on loopback (3 partitions, replication factor 3), driven by the real Java client
//! through one broker's gateway (`tests/clients/ClusterDriver.java`: creations with and without
//! result, message publications, streaming workers). Mid-run the leader of partition 1, another
//! broker, is killed with `kill -9` and restarted. Every acknowledged creation, completion
//! and publication must be accounted for, no job handed out twice within its time-out, and the
//! restarted broker's state must equal the others' at the same applied index.

mod common;

use std::time::{Duration, Instant};

use common::cluster::{digests_agree, log_tails, Cluster, ClusterDriver, ClusterOptions};

const BROKERS: usize = 3;
const PARTITIONS: u16 = 3;

#[test]
fn a_three_broker_cluster_keeps_every_acknowledged_command_through_a_leaders_kill_9() {
    let mut cluster = Cluster::start(ClusterOptions::new(BROKERS, PARTITIONS));
    let before = cluster.leaders(None);
    eprintln!("leaders of partitions 1-{PARTITIONS}: brokers {before:?}");

    // the victim leads partition 1 (and maybe more); the client talks to another broker
    let victim = before[0];
    let gateway = (victim + 1) % BROKERS;
    let report = cluster.nodes[gateway].data_dir.parent().expect("a temp dir").join("cluster-report.json");
    let driver = ClusterDriver::start(&cluster.nodes[gateway].address(), &report);
    // under load (the JVM compiles the driver first), kill the victim, then restart it
    std::thread::sleep(Duration::from_secs(10));
    let killed = Instant::now();
    cluster.nodes[victim].kill9();
    let after = cluster.leaders(Some(victim));
    eprintln!("broker {victim} killed; leaders now {after:?}, agreed {} ms after the kill", killed.elapsed().as_millis());
    std::thread::sleep(Duration::from_secs(2));
    cluster.restart(victim);
    driver.finish(|| log_tails(&cluster.nodes));

    // the restarted broker caught up: every partition's replicas agree at the same applied index
    for partition in 1..=PARTITIONS {
        let digest = digests_agree(&cluster.others(None), partition);
        eprintln!("partition {partition}: {digest}");
    }
}
