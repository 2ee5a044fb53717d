//! Three `waggle broker` processes on loopback gossip their membership: the `Topology` RPC and
//! `/actuator/cluster` of every broker describe the same real cluster (each broker at its gateway
//! address, one leader and RF - 1 followers per partition); after `kill -9` of a leader the others
//! report a new leader within seconds and drop the dead broker, which reappears once restarted.
//! `POST /actuator/rebalance` moves leaders back to their preferred brokers, and a broker that
//! shuts down hands the partitions it leads to other replicas first.

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use waggle_protocol::gateway::{partition::PartitionBrokerHealth, partition::PartitionBrokerRole, TopologyRequest, TopologyResponse};

use common::{free_port, grpc_client, Node};

const BROKERS: usize = 3;
const PARTITIONS: i32 = 3;
const REPLICATION_FACTOR: usize = 3;

/// Starts broker `i` of the cluster whose internal ports are `internal`.
fn start_broker(i: usize, internal: &[u16]) -> Node {
    let contact_points = internal.iter().map(|p| format!("127.0.0.1:{p}")).collect::<Vec<_>>().join(",");
    let args = [
        "broker".to_string(),
        "--node-id".into(),
        i.to_string(),
        "--partitions".into(),
        PARTITIONS.to_string(),
        "--replication-factor".into(),
        REPLICATION_FACTOR.to_string(),
        "--contact-points".into(),
        contact_points,
        "--internal-port".into(),
        internal[i].to_string(),
    ];
    Node::start(&args.iter().map(String::as_str).collect::<Vec<_>>())
}

/// What a topology says, in brief: broker id -> (host:port, partition -> (role, health)).
type Summary = BTreeMap<i32, (String, BTreeMap<i32, (String, String)>)>;

fn summarise(t: &TopologyResponse) -> Summary {
    t.brokers
        .iter()
        .map(|b| {
            let partitions = b
                .partitions
                .iter()
                .map(|p| {
                    let role = PartitionBrokerRole::try_from(p.role).map_or("?".into(), |r| r.as_str_name().to_string());
                    let health = PartitionBrokerHealth::try_from(p.health).map_or("?".into(), |h| h.as_str_name().to_string());
                    (p.partition_id, (role, health))
                })
                .collect();
            (b.node_id, (format!("{}:{}", b.host, b.port), partitions))
        })
        .collect()
}

/// The same summary of `/actuator/cluster`.
fn actuator_summary(node: &Node) -> Summary {
    let (code, body) = node.get("/actuator/cluster");
    assert_eq!(code, 200, "{body}");
    let cluster: serde_json::Value = serde_json::from_str(&body).expect("cluster JSON");
    let text = |v: &serde_json::Value| v.as_str().unwrap_or_else(|| panic!("a string expected in /actuator/cluster: {body}")).to_string();
    let number = |v: &serde_json::Value| v.as_i64().unwrap_or_else(|| panic!("a number expected in /actuator/cluster: {body}")) as i32;
    // brokers and replicas the cluster topology names but the gossip has not shown alive yet
    // carry only the topology's fields (id, state, priority): the summary is of the live view
    cluster["brokers"]
        .as_array()
        .expect("brokers")
        .iter()
        .filter(|b| b.get("host").is_some())
        .map(|b| {
            let partitions = b["partitions"]
                .as_array()
                .expect("partitions")
                .iter()
                .filter(|p| p.get("role").is_some())
                .map(|p| (number(&p["partitionId"]), (text(&p["role"]), text(&p["health"]))))
                .collect();
            (number(&b["nodeId"]), (format!("{}:{}", text(&b["host"]), number(&b["port"])), partitions))
        })
        .collect()
}

/// The leader of each partition if the summary shows exactly one leader and `followers`
/// followers for each, all healthy.
fn leaders(summary: &Summary, followers: usize) -> Option<BTreeMap<i32, i32>> {
    let mut leaders = BTreeMap::new();
    for p in 1..=PARTITIONS {
        let roles: Vec<(i32, &str, &str)> =
            summary.iter().filter_map(|(id, (_, ps))| ps.get(&p).map(|(role, health)| (*id, role.as_str(), health.as_str()))).collect();
        let leading: Vec<i32> = roles.iter().filter(|r| r.1 == "LEADER").map(|r| r.0).collect();
        let following = roles.iter().filter(|r| r.1 == "FOLLOWER").count();
        if leading.len() != 1 || following != followers || roles.iter().any(|r| r.2 != "HEALTHY") {
            return None;
        }
        leaders.insert(p, leading[0]);
    }
    Some(leaders)
}

async fn topology(node: &Node) -> TopologyResponse {
    grpc_client(node).await.topology(TopologyRequest {}).await.expect("Topology").into_inner()
}

/// Waits (at most `within`) until every broker in `alive` answers `Topology` listing exactly the
/// brokers `alive` at their gateway addresses, one leader and the right followers per partition,
/// the same leaders on every broker, and `/actuator/cluster` agreeing: the leaders, and how long
/// it took.
async fn wait_for_agreement(nodes: &[Option<&Node>], within: Duration) -> (BTreeMap<i32, i32>, Duration) {
    let start = Instant::now();
    let expected: BTreeMap<i32, String> = nodes.iter().enumerate().filter_map(|(i, n)| n.map(|n| (i as i32, n.address()))).collect();
    let followers = REPLICATION_FACTOR - 1 - (BROKERS - expected.len());
    let mut last = String::new();
    loop {
        let mut agreed: Option<BTreeMap<i32, i32>> = None;
        let mut ok = true;
        for node in nodes.iter().flatten() {
            let t = topology(node).await;
            let summary = summarise(&t);
            let actuator = actuator_summary(node);
            let addresses: BTreeMap<i32, String> = summary.iter().map(|(id, (addr, _))| (*id, addr.clone())).collect();
            let leaders = leaders(&summary, followers);
            let fine = addresses == expected
                && t.cluster_size == BROKERS as i32
                && t.partitions_count == PARTITIONS
                && t.replication_factor == REPLICATION_FACTOR as i32
                && leaders.is_some()
                && actuator == summary
                && agreed.as_ref().is_none_or(|a| Some(a) == leaders.as_ref());
            if !fine {
                last = format!("broker at {}: Topology {summary:?}\n/actuator/cluster {actuator:?}", node.address());
                ok = false;
                break;
            }
            agreed = leaders;
        }
        if ok {
            return (agreed.expect("a broker"), start.elapsed());
        }
        assert!(start.elapsed() < within, "no agreement on {expected:?} after {within:?}; last seen:\n{last}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[test]
fn topology_follows_the_gossip_through_a_leader_crash_and_restart() {
    let internal: Vec<u16> = (0..BROKERS).map(|_| free_port()).collect();
    let mut nodes: Vec<Node> = (0..BROKERS).map(|i| start_broker(i, &internal)).collect();
    let runtime = tokio::runtime::Runtime::new().unwrap();

    let all: Vec<Option<&Node>> = nodes.iter().map(Some).collect();
    let (leaders, took) = runtime.block_on(wait_for_agreement(&all, Duration::from_secs(30)));
    println!("all 3 brokers agree after {took:?}: leaders {leaders:?}");

    // kill -9 the leader of partition 1
    let victim = leaders[&1] as usize;
    nodes[victim].kill9();
    let survivors: Vec<Option<&Node>> = nodes.iter().enumerate().map(|(i, n)| (i != victim).then_some(n)).collect();
    let (after, took) = runtime.block_on(wait_for_agreement(&survivors, Duration::from_secs(15)));
    println!("broker {victim} killed: the others report leaders {after:?} after {took:?}");
    assert!(after.values().all(|l| *l != victim as i32), "the dead broker still leads: {after:?}");

    nodes[victim].restart();
    let all: Vec<Option<&Node>> = nodes.iter().map(Some).collect();
    let (leaders, took) = runtime.block_on(wait_for_agreement(&all, Duration::from_secs(30)));
    println!("broker {victim} restarted: all agree after {took:?}: leaders {leaders:?}");
}

/// The Java client's `newTopologyRequest()` (`tests/clients/TopologyDriver.java`) against one
/// broker of the three sees the cluster size 3, all three brokers at their gateway addresses and
/// one healthy leader per partition.
#[test]
fn the_java_client_reads_the_cluster_topology() {
    let lib = common::peers().join("java-client/lib");
    assert!(lib.exists(), "{} missing: run scripts/install-clients.sh", lib.display());
    let internal: Vec<u16> = (0..BROKERS).map(|_| free_port()).collect();
    let nodes: Vec<Node> = (0..BROKERS).map(|i| start_broker(i, &internal)).collect();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(wait_for_agreement(&nodes.iter().map(Some).collect::<Vec<_>>(), Duration::from_secs(30)));

    let mut command = std::process::Command::new("java");
    command
        .arg("-cp")
        .arg(format!("{}/*", lib.display()))
        .arg(common::repo_root().join("tests/clients/TopologyDriver.java"))
        .args(["--address", &nodes[1].address()]);
    let output = common::run_with_timeout(&mut command, Duration::from_secs(120));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{command:?} failed:\n{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.first().copied(), Some(format!("cluster {BROKERS} {PARTITIONS} {REPLICATION_FACTOR}").as_str()), "{stdout}");
    for (i, node) in nodes.iter().enumerate() {
        assert!(lines.contains(&format!("broker {i} {}", node.address()).as_str()), "broker {i} missing:\n{stdout}");
    }
    // one leader per partition (which one may have changed since the brokers agreed)
    for partition in 1..=PARTITIONS {
        let with_role = |role: &str| {
            lines.iter().filter(|l| l.starts_with("partition ") && l.ends_with(&format!(" {partition} {role} HEALTHY"))).count()
        };
        assert_eq!((with_role("LEADER"), with_role("FOLLOWER")), (1, REPLICATION_FACTOR - 1), "partition {partition}:\n{stdout}");
    }
}

/// The preferred leader of each partition: placement puts partition `p`'s replicas on brokers
/// `p - 1, p, ...` (mod the cluster size), the first preferred (Zeebe's round-robin placement).
fn preferred_leaders() -> BTreeMap<i32, i32> {
    (1..=PARTITIONS).map(|p| (p, (p - 1) % BROKERS as i32)).collect()
}

/// A leader lost and back as a follower keeps its partition led elsewhere (no election happens
/// while the leader is healthy); `POST /actuator/rebalance` on any broker answers 200 with no
/// body, as Zeebe's, and every partition's leadership goes back to its preferred broker.
#[test]
fn rebalance_moves_leaders_back_to_their_preferred_brokers() {
    let internal: Vec<u16> = (0..BROKERS).map(|_| free_port()).collect();
    let mut nodes: Vec<Node> = (0..BROKERS).map(|i| start_broker(i, &internal)).collect();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (leaders, _) = runtime.block_on(wait_for_agreement(&nodes.iter().map(Some).collect::<Vec<_>>(), Duration::from_secs(30)));
    println!("started: leaders {leaders:?} (preferred {:?})", preferred_leaders());

    // take partition 1's lead away from its preferred broker 0, whoever leads it now
    nodes[0].kill9();
    let survivors: Vec<Option<&Node>> = nodes.iter().enumerate().map(|(i, n)| (i != 0).then_some(n)).collect();
    runtime.block_on(wait_for_agreement(&survivors, Duration::from_secs(15)));
    nodes[0].restart();
    let (before, _) = runtime.block_on(wait_for_agreement(&nodes.iter().map(Some).collect::<Vec<_>>(), Duration::from_secs(30)));
    assert_ne!(before[&1], 0, "broker 0 was down: partition 1 is led elsewhere until a rebalance");

    let (code, body) = nodes[2].post("/actuator/rebalance");
    assert_eq!((code, body.as_str()), (200, ""), "POST /actuator/rebalance");
    let start = Instant::now();
    loop {
        let (now, _) = runtime.block_on(wait_for_agreement(&nodes.iter().map(Some).collect::<Vec<_>>(), Duration::from_secs(30)));
        if now == preferred_leaders() {
            println!("rebalanced from {before:?} to {now:?} in {:?}", start.elapsed());
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "leaders {now:?} after the rebalance, not the preferred {:?}",
            preferred_leaders()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A broker stopped with SIGTERM first hands each partition it leads to another replica (Raft's
/// leader transfer), so the others have a leader before it is gone: its log says so for every
/// partition it led, and the two left agree on leaders without it.
#[test]
fn a_broker_shutting_down_hands_its_leadership_over() {
    let internal: Vec<u16> = (0..BROKERS).map(|_| free_port()).collect();
    let mut nodes: Vec<Node> = (0..BROKERS).map(|i| start_broker(i, &internal)).collect();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (leaders, _) = runtime.block_on(wait_for_agreement(&nodes.iter().map(Some).collect::<Vec<_>>(), Duration::from_secs(30)));
    let victim = leaders[&1] as usize;
    let led: Vec<i32> = leaders.iter().filter(|(_, l)| **l == victim as i32).map(|(p, _)| *p).collect();

    assert!(nodes[victim].terminate().success(), "broker {victim} exits cleanly");
    let log = nodes[victim].log();
    for p in &led {
        assert!(
            log.lines().any(|l| l.contains("handed the lead over") && l.contains(&format!("partition={p}"))),
            "broker {victim} did not hand partition {p} over:\n{log}"
        );
    }
    assert!(!log.contains("was not handed over in time"), "{log}");
    let survivors: Vec<Option<&Node>> = nodes.iter().enumerate().map(|(i, n)| (i != victim).then_some(n)).collect();
    let (after, took) = runtime.block_on(wait_for_agreement(&survivors, Duration::from_secs(15)));
    println!("broker {victim} (leading {led:?}) stopped; the others agree on {after:?} after {took:?}");
}
