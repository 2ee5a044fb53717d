//! A standalone gateway (`waggle gateway`) in front of three `waggle broker` processes (3
//! partitions, replication factor 3), all on loopback, given only one broker's internal address:
//! it learns the cluster from the gossip; its `Topology` lists the three brokers (not itself)
//! with one leader per partition; a long poll through it receives jobs of every partition; the
//! real Java client drives it (`tests/clients/ClusterDriver.java`: deployment, creations with and
//! without result, streaming workers, correlated messages) while the leader of partition 1 is
//! killed with `kill -9`, and the gateway carries on: creations and a message for the dead
//! leader's partition succeed within seconds, and every acknowledged command is accounted for.

mod common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use waggle_protocol::gateway::{ActivateJobsRequest, CompleteJobRequest, PublishMessageRequest};

use common::cluster::{java_topology, leader_seen_by, standalone_gateway, Cluster, ClusterDriver, ClusterOptions};
use common::{deploy_one_task, grpc_client, one_task_creation, Node};

const BROKERS: usize = 3;
const PARTITIONS: u16 = 3;

/// Long-polls through the gateway until it has had a job of each partition (created after the
/// first poll started waiting), completing them; fails after 30 s.
async fn long_polls_get_jobs_of_every_partition(gateway: &Node) {
    let mut client = grpc_client(gateway).await;
    deploy_one_task(&mut client).await;
    let poll = |client: &mut waggle_protocol::gateway::gateway_client::GatewayClient<tonic::transport::Channel>| {
        let mut client = client.clone();
        async move {
            let request = ActivateJobsRequest { request_timeout: 10_000, ..common::one_task_activation(10) };
            let mut stream = client.activate_jobs(request).await.expect("activate").into_inner();
            let mut jobs = Vec::new();
            while let Some(response) = stream.message().await.expect("activation stream") {
                jobs.extend(response.jobs);
            }
            jobs
        }
    };
    // a poll waiting before any job exists: woken by the brokers' notices through the gateway
    let waiting = tokio::spawn(poll(&mut client));
    tokio::time::sleep(Duration::from_millis(500)).await;
    let started = Instant::now();
    for _ in 0..PARTITIONS {
        client.create_process_instance(one_task_creation()).await.expect("create through the gateway");
    }
    let mut seen = BTreeSet::new();
    let mut jobs = waiting.await.expect("the first poll");
    assert!(!jobs.is_empty(), "the long poll waiting at the gateway was not woken by the new jobs");
    eprintln!("the waiting long poll got {} job(s) {} ms after the creations began", jobs.len(), started.elapsed().as_millis());
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        for job in jobs.drain(..) {
            seen.insert(waggle_protocol::partition_of(job.key));
            let mut request = tonic::Request::new(CompleteJobRequest { job_key: job.key, variables: String::new() });
            request.set_timeout(Duration::from_secs(10));
            client.complete_job(request).await.expect("complete through the gateway");
        }
        eprintln!("jobs of partitions {seen:?} completed");
        if seen.len() == usize::from(PARTITIONS) {
            return;
        }
        assert!(Instant::now() < deadline, "jobs came from partitions {seen:?} only");
        // the round robin the creations take is shared with the polls' first partition: another
        // creation lands on the next partition
        client.create_process_instance(one_task_creation()).await.expect("create through the gateway");
        jobs = poll(&mut client).await;
    }
}

/// After the kill, how long until a creation and a message publication on `partition` (led by the
/// killed broker) both succeed through the gateway.
async fn carries_on(gateway: &Node, partition: u16, since: Instant) -> (Duration, Duration) {
    let mut client = grpc_client(gateway).await;
    // a correlation key whose message lives on `partition`
    let key = (0..)
        .map(|i| format!("after-kill-{i}"))
        .find(|k| waggle_protocol::keys::partition_of_correlation_key(k, u32::from(PARTITIONS)) == partition)
        .expect("a key of the partition");
    let deadline = since + Duration::from_secs(30);
    let (mut created, mut published) = (None, None);
    while created.is_none() || published.is_none() {
        assert!(Instant::now() < deadline, "the gateway did not carry on: created {created:?}, published {published:?}");
        if created.is_none() {
            let mut request = tonic::Request::new(one_task_creation());
            request.set_timeout(Duration::from_secs(10));
            match client.create_process_instance(request).await {
                Ok(_) => created = Some(since.elapsed()),
                Err(status) => eprintln!("creation after the kill: {status:?}"),
            }
        }
        if published.is_none() {
            let message =
                PublishMessageRequest { name: "nobody-waits".into(), correlation_key: key.clone(), time_to_live: 0, ..Default::default() };
            let mut request = tonic::Request::new(message);
            request.set_timeout(Duration::from_secs(10));
            match client.publish_message(request).await {
                Ok(_) => published = Some(since.elapsed()),
                Err(status) => eprintln!("publication on partition {partition} after the kill: {status:?}"),
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    (created.expect("created"), published.expect("published"))
}

#[test]
fn a_standalone_gateway_serves_the_cluster_and_carries_on_through_a_leaders_kill_9() {
    let cluster = Cluster::start(ClusterOptions::new(BROKERS, PARTITIONS));
    let mut brokers = cluster.nodes;
    // one contact point is enough: the gateway learns the others from the gossip
    let gateway = standalone_gateway(cluster.internal[1]);
    assert!(gateway.log().contains("waggle gateway is ready"), "{}", gateway.log());
    assert_eq!(gateway.get("/ready").0, 200, "ready: a leader known for every partition");
    assert!(!gateway.data_dir.exists(), "the gateway wrote data");

    // Topology through the gateway: the three brokers at their own gateway ports, one leader each
    let lines = java_topology(&gateway.address());
    eprintln!("topology through the gateway:\n{}", lines.join("\n"));
    assert_eq!(lines[0], format!("cluster {BROKERS} {PARTITIONS} 3"));
    for (i, broker) in brokers.iter().enumerate() {
        assert!(lines.contains(&format!("broker {i} {}", broker.address())), "broker {i} missing: {lines:?}");
    }
    assert!(!lines.iter().any(|l| l.contains(&gateway.address())), "the gateway lists itself: {lines:?}");
    for p in 1..=PARTITIONS {
        let roles: Vec<&String> =
            lines.iter().filter(|l| l.starts_with("partition ") && l.split(' ').nth(2) == Some(&p.to_string())).collect();
        assert_eq!(roles.len(), BROKERS, "partition {p}: {roles:?}");
        assert_eq!(roles.iter().filter(|l| l.contains("LEADER")).count(), 1, "partition {p}: {roles:?}");
        assert!(roles.iter().all(|l| l.ends_with("HEALTHY")), "partition {p}: {roles:?}");
    }
    let (code, cluster) = gateway.get("/actuator/cluster");
    assert_eq!(code, 200, "{cluster}");
    let cluster: serde_json::Value = serde_json::from_str(&cluster).expect("JSON");
    assert_eq!(cluster["brokers"].as_array().map(Vec::len), Some(BROKERS), "{cluster}");

    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    runtime.block_on(long_polls_get_jobs_of_every_partition(&gateway));

    // the Java client through the gateway; mid-run, partition 1's leader is killed
    let report = gateway.data_dir.parent().expect("a temp dir").join("gateway-report.json");
    let driver = ClusterDriver::start(&gateway.address(), &report);
    std::thread::sleep(Duration::from_secs(10));
    let victim = leader_seen_by(&brokers[0], 1).expect("a leader of partition 1");
    let led: Vec<u16> = (1..=PARTITIONS).filter(|&p| leader_seen_by(&brokers[victim], p) == Some(victim)).collect();
    let killed = Instant::now();
    brokers[victim].kill9();
    eprintln!("killed broker {victim}, leader of partitions {led:?}");
    let (created, published) = runtime.block_on(carries_on(&gateway, 1, killed));
    eprintln!(
        "after the kill: a creation succeeded after {} ms, a publication on partition 1 after {} ms",
        created.as_millis(),
        published.as_millis()
    );
    assert!(created < Duration::from_secs(8), "creations resumed only after {created:?}");
    assert!(published < Duration::from_secs(15), "partition 1 took messages again only after {published:?}");

    let report = driver.finish(|| {
        let log = gateway.log();
        format!("gateway log:\n{}", &log[log.len().saturating_sub(4000)..])
    });
    assert!(report["createdWithResult"].as_u64() > Some(0) && report["completedJobs"].as_u64() > Some(100), "{report}");

    // the gateway's topology drops the dead broker and names a live leader for every partition
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let lines = java_topology(&gateway.address());
        let brokers_listed = lines.iter().filter(|l| l.starts_with("broker ")).count();
        let leaders: Vec<&String> = lines.iter().filter(|l| l.contains("LEADER")).collect();
        if brokers_listed == BROKERS - 1 && leaders.len() == usize::from(PARTITIONS) {
            assert!(!leaders.iter().any(|l| l.starts_with(&format!("partition {victim} "))), "{lines:?}");
            break;
        }
        assert!(Instant::now() < deadline, "the gateway's topology after the kill: {lines:?}");
        std::thread::sleep(Duration::from_millis(500));
    }

    // the killed broker back as a follower, `POST /actuator/rebalance` on the gateway (Zeebe's
    // endpoint: 200, no body) moves every partition's lead back to its preferred broker
    // (partition p's replicas are brokers p-1, p, ... mod 3, the first preferred)
    brokers[victim].restart();
    let preferred = |p: u16| usize::from(p - 1) % BROKERS;
    let deadline = Instant::now() + Duration::from_secs(30);
    while !(1..=PARTITIONS).all(|p| brokers.iter().all(|b| leader_seen_by(b, p).is_some())) {
        assert!(Instant::now() < deadline, "the restarted broker did not rejoin");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!((1..=PARTITIONS).any(|p| leader_seen_by(&brokers[0], p) != Some(preferred(p))), "the kill moved no lead away");
    let (code, body) = gateway.post("/actuator/rebalance");
    assert_eq!((code, body.as_str()), (200, ""), "POST /actuator/rebalance on the gateway");
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let leaders: Vec<Option<usize>> = (1..=PARTITIONS).map(|p| leader_seen_by(&brokers[preferred(p)], p)).collect();
        if (1..=PARTITIONS).all(|p| leaders[usize::from(p - 1)] == Some(preferred(p))) {
            break;
        }
        assert!(Instant::now() < deadline, "leaders after the rebalance: {leaders:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}
