//! Real clusters on loopback UDP: nodes converge, see each other's role changes, report a stopped
//! node dead and a restarted one alive again. Every wait polls the view against a deadline and
//! fails naming what it waited for and what each node saw.

use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use waggle_membership::{ClusterView, Membership, MembershipConfig, NodeState, PartitionState, Role};

/// Generous bounds: CI shares two cores with builds. The latencies seen are printed.
const CONVERGE_WITHIN: Duration = Duration::from_secs(15);
const DETECT_DEATH_WITHIN: Duration = Duration::from_secs(10);

/// Free loopback UDP ports, one per node (bound and released: the nodes bind them next).
fn free_addrs(n: usize) -> Vec<SocketAddr> {
    let sockets: Vec<UdpSocket> = (0..n).map(|_| UdpSocket::bind("127.0.0.1:0").expect("bind a probe socket")).collect();
    sockets.iter().map(|s| s.local_addr().unwrap()).collect()
}

fn partition(partition_id: u16, role: Role, term: u64) -> PartitionState {
    PartitionState { partition_id, role, term, healthy: true, dead: false }
}

fn gateway_of(node_id: u64) -> String {
    format!("127.0.0.1:{}", 26500 + node_id * 10)
}

/// Node `id` leads partition `id` (term 1) and follows the others of 1..=3.
fn initial_state(node_id: u64) -> NodeState {
    NodeState {
        gateway_addr: gateway_of(node_id),
        internal_addr: format!("127.0.0.1:{}", 26502 + node_id * 10),
        version: "test".into(),
        partitions: (1..=3u16)
            .map(|p| if u64::from(p) == node_id { partition(p, Role::Leader, 1) } else { partition(p, Role::Follower, 1) })
            .collect(),
        cluster: None,
    }
}

async fn start(cluster_id: &str, node_id: u64, addr: SocketAddr, seeds: &[SocketAddr], state: NodeState) -> Membership {
    let config =
        MembershipConfig { seeds: seeds.iter().map(SocketAddr::to_string).collect(), ..MembershipConfig::new(node_id, addr, cluster_id) };
    Membership::start(config, state).await.unwrap_or_else(|e| panic!("node {node_id} does not start: {e}"))
}

/// Starts nodes 1..=n, each seeded with all of them.
async fn start_cluster(cluster_id: &str, n: u64) -> (Vec<Membership>, Vec<SocketAddr>) {
    let addrs = free_addrs(n as usize);
    let mut nodes = Vec::new();
    for (i, &addr) in addrs.iter().enumerate() {
        let node_id = i as u64 + 1;
        nodes.push(start(cluster_id, node_id, addr, &addrs, initial_state(node_id)).await);
    }
    (nodes, addrs)
}

/// Waits until `holds` is true of every node's view; the time it took. Fails naming `what` and
/// showing the views of the nodes where it does not hold.
async fn wait_all(nodes: &[&Membership], within: Duration, what: &str, holds: impl Fn(&ClusterView) -> bool) -> Duration {
    let start = Instant::now();
    let deadline = tokio::time::Instant::now() + within;
    let mut receivers: Vec<_> = nodes.iter().map(|n| n.subscribe()).collect();
    for (node, rx) in nodes.iter().zip(&mut receivers) {
        loop {
            if holds(&rx.borrow_and_update()) {
                break;
            }
            if tokio::time::timeout_at(deadline, rx.changed()).await.is_err() {
                let views: Vec<String> = nodes
                    .iter()
                    .filter(|n| !holds(&n.view()))
                    .map(|n| format!("node {} sees {}", n.node_id(), describe(&n.view())))
                    .collect();
                panic!("not within {within:?}: {what} (first failing: node {}); {}", node.node_id(), views.join("; "));
            }
        }
    }
    start.elapsed()
}

fn describe(view: &ClusterView) -> String {
    let members: Vec<String> = view
        .members()
        .iter()
        .map(|m| {
            let roles: Vec<String> = m.state.partitions.iter().map(|p| format!("{}:{:?}@{}", p.partition_id, p.role, p.term)).collect();
            format!("[{} gen {} at {} alive={} {}]", m.node_id, m.generation, m.gossip_addr, m.alive, roles.join(","))
        })
        .collect();
    members.join(" ")
}

/// Every node in `ids` is listed alive with its initial addresses and roles.
fn sees_initial_members(view: &ClusterView, ids: &[u64], addrs: &[SocketAddr]) -> bool {
    view.alive().count() == ids.len()
        && ids
            .iter()
            .all(|&id| view.member(id).is_some_and(|m| m.alive && m.gossip_addr == addrs[id as usize - 1] && m.state == initial_state(id)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_converge_and_see_role_changes() {
    let (nodes, addrs) = start_cluster("converge", 3).await;
    let all: Vec<&Membership> = nodes.iter().collect();
    let took = wait_all(&all, CONVERGE_WITHIN, "each node sees 3 alive members with their addresses and roles", |v| {
        sees_initial_members(v, &[1, 2, 3], &addrs)
    })
    .await;
    eprintln!("3 nodes converged in {took:?}");
    for node in &nodes {
        for p in 1..=3u16 {
            let (leader, state) = node.leader_of(p).unwrap_or_else(|| panic!("node {} knows no leader of {p}", node.node_id()));
            assert_eq!((leader, state.gateway_addr), (u64::from(p), gateway_of(u64::from(p))));
        }
    }

    // node 2 wins partition 1 in term 2 while node 1 still claims it from term 1: the higher term leads
    let mut watch = nodes[0].subscribe();
    watch.mark_unchanged();
    nodes[1].update_partition(partition(1, Role::Leader, 2)).await.unwrap();
    let took = wait_all(&all, CONVERGE_WITHIN, "node 2 leads partition 1 (term 2)", |v| v.leader_of(1).map(|m| m.node_id) == Some(2)).await;
    eprintln!("a role change reached every node in {took:?}");
    assert!(watch.has_changed().unwrap(), "node 1's subscription is marked changed");

    // node 1 steps down and turns unhealthy; the others see its new role and health
    nodes[0]
        .update_partitions(vec![partition(1, Role::Follower, 2), PartitionState { healthy: false, ..partition(2, Role::Follower, 1) }])
        .await
        .unwrap();
    wait_all(&all, CONVERGE_WITHIN, "node 1 follows partition 1 in term 2 and is unhealthy in 2, without 3", |v| {
        v.member(1).is_some_and(|m| {
            m.state.partitions == [partition(1, Role::Follower, 2), PartitionState { healthy: false, ..partition(2, Role::Follower, 1) }]
        }) && v.leader_of(1).map(|m| m.node_id) == Some(2)
    })
    .await;

    assert!(nodes[0].update_partitions(vec![partition(1, Role::Leader, 3), partition(1, Role::Follower, 3)]).await.is_err());
    for node in nodes {
        node.shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_node_is_reported_dead_and_alive_again_after_a_restart() {
    let (mut nodes, addrs) = start_cluster("restart", 3).await;
    let all: Vec<&Membership> = nodes.iter().collect();
    wait_all(&all, CONVERGE_WITHIN, "each node sees 3 alive members", |v| sees_initial_members(v, &[1, 2, 3], &addrs)).await;
    // a few seconds of steady gossip, as in a running cluster: nobody is taken for dead meanwhile
    let steady_until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < steady_until {
        for node in &nodes {
            let view = node.view();
            assert_eq!(view.alive().count(), 3, "node {} lost a live peer: {}", node.node_id(), describe(&view));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for node in &nodes[..2] {
        eprintln!("node {}'s failure detection timeout for node 3: {:?}", node.node_id(), node.failure_detection_timeout(3).await);
    }

    let node3 = nodes.pop().unwrap();
    let generation = nodes[0].view().member(3).unwrap().generation;
    node3.shutdown().await.unwrap();
    let survivors: Vec<&Membership> = nodes.iter().collect();
    let took = wait_all(&survivors, DETECT_DEATH_WITHIN, "nodes 1 and 2 report node 3 dead and no leader of its partition", |v| {
        v.member(3).is_some_and(|m| !m.alive) && v.alive().count() == 2 && v.leader_of(3).is_none()
    })
    .await;
    eprintln!("a stopped node was reported dead by both peers after {took:?}");

    // the same id on the same address, with another state: a new run, alive, that supersedes the old
    let restarted_state = NodeState { version: "restarted".into(), partitions: vec![partition(3, Role::Leader, 2)], ..initial_state(3) };
    let node3 = start("restart", 3, addrs[2], &addrs, restarted_state.clone()).await;
    nodes.push(node3);
    let all: Vec<&Membership> = nodes.iter().collect();
    let took = wait_all(&all, CONVERGE_WITHIN, "every node sees node 3 alive again with its new state", |v| {
        v.alive().count() == 3
            && v.member(3).is_some_and(|m| m.alive && m.generation > generation && m.state == restarted_state)
            && v.leader_of(3).map(|m| m.node_id) == Some(3)
    })
    .await;
    eprintln!("the restarted node was seen alive again after {took:?}");
    for node in nodes {
        node.shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_node_stops_gossiping_and_other_clusters_are_not_joined() {
    let (mut nodes, addrs) = start_cluster("drop", 2).await;
    // a node of another cluster seeded with this one's nodes
    let stranger = start("elsewhere", 9, "127.0.0.1:0".parse().unwrap(), &addrs, initial_state(9)).await;
    let all: Vec<&Membership> = nodes.iter().collect();
    wait_all(&all, CONVERGE_WITHIN, "each node sees 2 alive members", |v| sees_initial_members(v, &[1, 2], &addrs)).await;

    drop(nodes.pop());
    let took =
        wait_all(&[&nodes[0]], DETECT_DEATH_WITHIN, "node 1 reports the dropped node 2 dead", |v| v.member(2).is_some_and(|m| !m.alive))
            .await;
    eprintln!("a dropped node was reported dead after {took:?}");
    // the stranger has been gossiping with this cluster's seeds for seconds now
    assert!(nodes[0].view().member(9).is_none(), "node 1 lists the other cluster's node: {}", describe(&nodes[0].view()));
    assert_eq!(stranger.members().len(), 1, "the stranger sees: {}", describe(&stranger.view()));
    stranger.shutdown().await.unwrap();
    nodes.pop().unwrap().shutdown().await.unwrap();
}

#[tokio::test]
async fn a_busy_gossip_port_is_an_error_naming_it() {
    let busy = UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = busy.local_addr().unwrap();
    let error = match Membership::start(MembershipConfig::new(1, addr, "busy"), initial_state(1)).await {
        Ok(_) => panic!("started on {addr}, which is in use"),
        Err(error) => error.to_string(),
    };
    assert!(error.contains(&addr.to_string()), "{error}");
}

#[test]
fn membership_can_be_shared_between_tasks() {
    fn shareable<T: Send + Sync + 'static>() {}
    shareable::<Membership>();
}
