//! A network partition (issue 25): three `waggle broker` processes (1 partition, replication
//! factor 3) reach each other only through TCP proxies the test controls
//! (`tests/common/fault_proxy.rs`), one per direction of each link. The leader is cut off from the
//! others, then the links heal. The isolated leader stops taking writes, the majority elects a
//! new leader and takes them, no term ever has two leaders, nothing acknowledged is lost, and the
//! cut-off broker converges with the others (equal state digests at equal applied index).

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use common::fault_proxy::FaultProxy;
use common::{deploy_one_task, free_port, grpc_client, one_task_activation, one_task_creation, Node};

const BROKERS: usize = 3;

fn json(node: &Node, path: &str) -> Option<serde_json::Value> {
    let (status, body) = common::http_get(node.management_port, path)?;
    (status == 200).then(|| serde_json::from_str(&body).ok()).flatten()
}

/// `(leader, term)` of partition 1 as `node` sees it.
fn leader_and_term(node: &Node) -> Option<(u64, u64)> {
    let partitions = json(node, "/v1/partitions")?;
    let item = partitions["items"].as_array()?.iter().find(|p| p["partitionId"] == 1)?.clone();
    Some((item["leader"].as_u64()?, item["term"].as_u64()?))
}

/// Every `(term, leader)` the brokers reported; a term with two leaders fails the test.
#[derive(Default)]
struct Terms(BTreeMap<u64, BTreeSet<u64>>);

impl Terms {
    fn observe(&mut self, nodes: &[&Node]) -> Vec<Option<(u64, u64)>> {
        let seen: Vec<Option<(u64, u64)>> = nodes.iter().map(|n| leader_and_term(n)).collect();
        for (leader, term) in seen.iter().flatten() {
            self.0.entry(*term).or_default().insert(*leader);
            assert!(self.0[term].len() == 1, "term {term} had two leaders (all seen: {:?})", self.0);
        }
        seen
    }

    /// Waits until `nodes` agree on one leader that is not `not`; returns it.
    fn agreed_leader(&mut self, nodes: &[&Node], not: Option<u64>, within: Duration) -> u64 {
        let deadline = Instant::now() + within;
        loop {
            let seen = self.observe(nodes);
            if let Some(Some((leader, _))) = seen.first() {
                if seen.iter().all(|s| s.map(|(l, _)| l) == Some(*leader)) && Some(*leader) != not {
                    return *leader;
                }
            }
            assert!(Instant::now() < deadline, "no agreed leader other than {not:?}: {seen:?}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

#[test]
fn a_leader_cut_off_from_the_others_steps_down_and_converges_after_the_heal() {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let internal: Vec<u16> = (0..BROKERS).map(|_| free_port()).collect();
    // proxies[i][j]: broker i's way to broker j
    let proxies: Vec<Vec<Option<FaultProxy>>> = (0..BROKERS)
        .map(|i| {
            (0..BROKERS)
                .map(|j| (i != j).then(|| runtime.block_on(FaultProxy::start(format!("127.0.0.1:{}", internal[j]).parse().unwrap()))))
                .collect()
        })
        .collect();
    let args = |i: usize| -> Vec<String> {
        let contact_points: Vec<String> = (0..BROKERS)
            .map(|j| match &proxies[i][j] {
                None => format!("127.0.0.1:{}", internal[j]),
                Some(proxy) => proxy.addr().to_string(),
            })
            .collect();
        let size = BROKERS.to_string();
        let port = internal[i].to_string();
        let node_id = i.to_string();
        let list = contact_points.join(",");
        let args = ["broker", "--node-id", &node_id, "--cluster-size", &size, "--partitions", "1", "--replication-factor", "3"];
        args.iter().map(|s| s.to_string()).chain(["--contact-points".into(), list, "--internal-port".into(), port]).collect()
    };
    let nodes: Vec<Node> = (0..BROKERS).map(|i| Node::start(&args(i).iter().map(String::as_str).collect::<Vec<_>>())).collect();
    let all: Vec<&Node> = nodes.iter().collect();
    let mut terms = Terms::default();
    let leader = terms.agreed_leader(&all, None, Duration::from_secs(30)) as usize;
    let majority: Vec<&Node> = nodes.iter().enumerate().filter(|&(i, _)| i != leader).map(|(_, n)| n).collect();

    // acknowledged before the cut, through the leader
    let mut acknowledged = BTreeSet::new();
    runtime.block_on(async {
        let mut client = grpc_client(&nodes[leader]).await;
        deploy_one_task(&mut client).await;
        for _ in 0..20 {
            acknowledged
                .insert(client.create_process_instance(one_task_creation()).await.expect("created").into_inner().process_instance_key);
        }
    });
    assert!(proxies.iter().flatten().flatten().all(|p| p.forwarded_bytes() > 0), "every link carries the brokers' traffic");

    // cut the leader off: both directions of its links to each other broker
    for (i, row) in proxies.iter().enumerate() {
        for (j, proxy) in row.iter().enumerate() {
            if let Some(proxy) = proxy {
                if i == leader || j == leader {
                    proxy.cut();
                }
            }
        }
    }
    let cut = Instant::now();
    let new_leader = terms.agreed_leader(&majority, Some(leader as u64), Duration::from_secs(15));
    eprintln!("broker {leader} cut off; the others elected broker {new_leader} in {} ms", cut.elapsed().as_millis());

    // check-quorum: the isolated leader steps down once it has not heard from a quorum
    let deadline = Instant::now() + Duration::from_secs(10);
    while leader_and_term(&nodes[leader]).is_some_and(|(l, _)| l == leader as u64) {
        assert!(Instant::now() < deadline, "the cut-off leader did not step down");
        std::thread::sleep(Duration::from_millis(50));
    }
    eprintln!("the cut-off leader stepped down {} ms after the cut", cut.elapsed().as_millis());
    runtime.block_on(async {
        // the isolated broker acknowledges no write
        let mut isolated = grpc_client(&nodes[leader]).await;
        let mut request = tonic::Request::new(one_task_creation());
        request.set_timeout(Duration::from_secs(3));
        let refused = isolated.create_process_instance(request).await;
        assert!(refused.is_err(), "the cut-off broker acknowledged a creation: {refused:?}");
        // the majority takes writes
        let mut client = grpc_client(&nodes[new_leader as usize]).await;
        for _ in 0..20 {
            acknowledged.insert(
                client
                    .create_process_instance(one_task_creation())
                    .await
                    .expect("created by the majority")
                    .into_inner()
                    .process_instance_key,
            );
        }
    });
    terms.observe(&all);

    // heal: the cut-off broker follows the new leader and converges
    for proxy in proxies.iter().flatten().flatten() {
        proxy.heal();
    }
    let healed = Instant::now();
    let leader_after = terms.agreed_leader(&all, None, Duration::from_secs(30));
    let deadline = Instant::now() + Duration::from_secs(30);
    let digest = loop {
        let digests: Vec<Option<serde_json::Value>> = nodes.iter().map(|n| json(n, "/v1/partitions/1/digest")).collect();
        if digests[0].is_some() && digests.iter().all(|d| d == &digests[0]) {
            break digests[0].clone().expect("a digest");
        }
        assert!(Instant::now() < deadline, "the replicas did not converge after the heal: {digests:?}");
        terms.observe(&all);
        std::thread::sleep(Duration::from_millis(100));
    };
    eprintln!("healed; leader {leader_after}, converged in {} ms at {digest}", healed.elapsed().as_millis());

    // nothing acknowledged is lost: every instance's job is there to activate
    let jobs: BTreeSet<i64> = runtime.block_on(async {
        let mut client = grpc_client(&nodes[leader_after as usize]).await;
        let mut found = BTreeSet::new();
        let deadline = Instant::now() + Duration::from_secs(20);
        while !acknowledged.is_subset(&found) && Instant::now() < deadline {
            let mut activation = one_task_activation(100);
            activation.request_timeout = 500;
            let mut answers = client.activate_jobs(activation).await.expect("activate").into_inner();
            while let Some(batch) = answers.message().await.expect("activation stream") {
                found.extend(batch.jobs.iter().map(|j| j.process_instance_key));
            }
        }
        found
    });
    let missing: Vec<&i64> = acknowledged.difference(&jobs).collect();
    assert!(missing.is_empty(), "acknowledged instances lost: {missing:?}");
    eprintln!("terms and leaders seen: {:?}", terms.0);
}
