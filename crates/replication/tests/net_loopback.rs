//! Three groups on three `RaftNetwork`s over real loopback sockets: they elect a leader and
//! replicate entries; a killed leader (its group and network dropped) is replaced by a new one;
//! a killed follower restarted from its journal on the same port is reconnected to and catches up.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use waggle_replication::net::RaftNetwork;
use waggle_replication::{Message, RaftGroup, ReplicaConfig};

const GROUP: u64 = 7;
/// Ticks of 20 ms: an election after 200-400 ms of silence.
const TICK: Duration = Duration::from_millis(20);

/// What a node's thread reports.
#[derive(Default)]
struct Observed {
    leader: bool,
    term: u64,
    applied: Vec<Vec<u8>>,
}

/// A group on a thread of its own: it steps what arrives, ticks, proposes what it is given
/// while it leads, drives, and applies what commits.
struct Node {
    id: u64,
    network: Option<RaftNetwork>,
    observed: Arc<Mutex<Observed>>,
    proposals: Sender<Vec<u8>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Node {
    fn start(id: u64, network: RaftNetwork, dir: &std::path::Path) -> Self {
        let (transport, inbox) = network.register(GROUP);
        let config = ReplicaConfig::new(id, vec![1, 2, 3]);
        let group = RaftGroup::open_replicated(dir, 0, config, Box::new(transport)).unwrap();
        let observed = Arc::new(Mutex::new(Observed::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let (proposals, proposed) = std::sync::mpsc::channel();
        let thread = std::thread::spawn({
            let (observed, stop) = (observed.clone(), stop.clone());
            move || run(group, inbox, proposed, observed, stop)
        });
        Node { id, network: Some(network), observed, proposals, stop, thread: Some(thread) }
    }

    fn kill(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        self.thread.take().unwrap().join().unwrap();
        self.network = None;
    }

    fn leads(&self) -> Option<u64> {
        let o = self.observed.lock().unwrap();
        o.leader.then_some(o.term)
    }

    fn applied(&self) -> Vec<Vec<u8>> {
        self.observed.lock().unwrap().applied.clone()
    }
}

fn run(mut group: RaftGroup, inbox: Receiver<Message>, proposed: Receiver<Vec<u8>>, observed: Arc<Mutex<Observed>>, stop: Arc<AtomicBool>) {
    let mut next_tick = Instant::now() + TICK;
    while !stop.load(Ordering::SeqCst) {
        match inbox.recv_timeout(next_tick.saturating_duration_since(Instant::now())) {
            Ok(m) => {
                let _ = group.step(m);
                for m in inbox.try_iter() {
                    let _ = group.step(m);
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
        if Instant::now() >= next_tick {
            group.tick();
            next_tick += TICK;
        }
        for p in proposed.try_iter() {
            // a proposal to a node that no longer leads is the client's to send again
            let _ = group.propose(p);
        }
        let committed = group.drive().unwrap();
        let mut o = observed.lock().unwrap();
        o.applied.extend(committed.into_iter().filter(|c| !c.data.is_empty()).map(|c| c.data));
        o.leader = group.is_leader();
        o.term = group.term();
    }
}

fn wait_for<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(t) = f() {
            return t;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The one node leading (in the highest term seen), once there is one.
fn leader(nodes: &[Node]) -> Option<(usize, u64)> {
    let leading: Vec<_> =
        nodes.iter().enumerate().filter(|(_, n)| n.thread.is_some()).filter_map(|(i, n)| n.leads().map(|t| (i, t))).collect();
    leading.into_iter().max_by_key(|&(_, term)| term)
}

/// Proposes `entries` to the leader until every live node applied them all (a leader may be
/// deposed between a proposal and its commit: the entry is proposed again, so it may be applied
/// twice; the test checks presence and agreement, not exactly-once delivery to clients).
fn replicate(nodes: &[Node], entries: &[Vec<u8>]) {
    let live: Vec<&Node> = nodes.iter().filter(|n| n.thread.is_some()).collect();
    let has_all = |n: &Node| {
        let applied = n.applied();
        entries.iter().all(|e| applied.contains(e))
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while !live.iter().all(|n| has_all(n)) {
        assert!(Instant::now() < deadline, "entries not replicated to every live node");
        if let Some((i, _)) = leader(nodes) {
            let applied = nodes[i].applied();
            for e in entries.iter().filter(|e| !applied.contains(e)) {
                nodes[i].proposals.send(e.clone()).unwrap();
            }
        }
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// The live nodes' logs once they are the same (an entry proposed twice may still be reaching
/// some of them when `replicate` returns).
fn agreed_logs(nodes: &[Node]) -> Vec<Vec<Vec<u8>>> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let logs: Vec<_> = nodes.iter().filter(|n| n.thread.is_some()).map(Node::applied).collect();
        if logs.iter().all(|l| l == &logs[0]) {
            return logs;
        }
        let lengths: Vec<_> = logs.iter().map(Vec::len).collect();
        assert!(Instant::now() < deadline, "the nodes' logs differ (lengths {lengths:?})");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Three nodes on loopback ports, each streaming to the other two.
fn cluster(runtime: &tokio::runtime::Runtime, dirs: &[tempfile::TempDir]) -> (Vec<Node>, BTreeMap<u64, SocketAddr>) {
    let networks: Vec<RaftNetwork> = (1..=3).map(|id| bind(runtime, id, SocketAddr::from(([127, 0, 0, 1], 0)))).collect();
    let addrs: BTreeMap<u64, SocketAddr> = (1..=3).zip(networks.iter().map(|n| n.local_addr())).collect();
    for (id, network) in (1..=3).zip(&networks) {
        connect(network, id, &addrs);
    }
    let nodes = (1..=3).zip(networks).zip(dirs).map(|((id, network), dir)| Node::start(id, network, dir.path())).collect();
    (nodes, addrs)
}

/// Binds node `id`'s network (retrying a moment: a port just released may still be taken).
fn bind(runtime: &tokio::runtime::Runtime, id: u64, addr: SocketAddr) -> RaftNetwork {
    wait_for("the port", || runtime.block_on(RaftNetwork::bind(id, addr)).ok())
}

fn connect(network: &RaftNetwork, id: u64, addrs: &BTreeMap<u64, SocketAddr>) {
    for (&peer, &addr) in addrs.iter().filter(|(&peer, _)| peer != id) {
        network.add_peer(peer, addr);
    }
}

#[test]
fn three_nodes_over_loopback_elect_replicate_and_replace_a_killed_leader() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let networks: Vec<RaftNetwork> =
        (1..=3).map(|id| runtime.block_on(RaftNetwork::bind(id, SocketAddr::from(([127, 0, 0, 1], 0)))).unwrap()).collect();
    let addrs: BTreeMap<u64, SocketAddr> = (1..=3).zip(networks.iter().map(|n| n.local_addr())).collect();
    for (id, network) in (1..=3).zip(&networks) {
        for (&peer, &addr) in addrs.iter().filter(|(&peer, _)| peer != id) {
            network.add_peer(peer, addr);
        }
    }
    let mut nodes: Vec<Node> = (1..=3).zip(networks).zip(&dirs).map(|((id, network), dir)| Node::start(id, network, dir.path())).collect();

    let (first, first_term) = wait_for("a leader", || leader(&nodes));
    // entries of 5 MB: appends past gRPC's default message limit (4 MiB)
    let batch: Vec<Vec<u8>> = (0..20)
        .map(|i| {
            let mut e = format!("\x01first {i} ").into_bytes();
            if i % 10 == 0 {
                e.resize(5 << 20, b'x');
            }
            e
        })
        .collect();
    replicate(&nodes, &batch);
    let logs = agreed_logs(&nodes);

    let killed = nodes[first].id;
    nodes[first].kill();
    let (second, second_term) = wait_for("a new leader", || leader(&nodes).filter(|&(i, _)| i != first));
    assert_ne!(nodes[second].id, killed);
    assert!(second_term > first_term, "the new leader's term {second_term} is not past {first_term}");
    let more: Vec<Vec<u8>> = (0..20).map(|i| format!("\x01second {i}").into_bytes()).collect();
    replicate(&nodes, &more);
    let survivors = agreed_logs(&nodes);
    assert_eq!(survivors.len(), 2);
    assert!(survivors[0].starts_with(&logs[0]), "the survivors lost entries committed under the first leader");

    for node in nodes.iter_mut().filter(|n| n.thread.is_some()) {
        node.kill();
    }
    drop(runtime);
}

#[test]
fn a_follower_restarted_from_its_journal_on_the_same_port_catches_up() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let (mut nodes, addrs) = cluster(&runtime, &dirs);
    let (leading, _) = wait_for("a leader", || leader(&nodes));
    let before: Vec<Vec<u8>> = (0..10).map(|i| format!("\x01before {i}").into_bytes()).collect();
    replicate(&nodes, &before);

    let f = (leading + 1) % 3;
    let id = nodes[f].id;
    nodes[f].kill();
    let while_down: Vec<Vec<u8>> = (0..10).map(|i| format!("\x01while down {i}").into_bytes()).collect();
    replicate(&nodes, &while_down);

    // the peers' streams to the old process broke; they reconnect to the new one
    let network = bind(&runtime, id, addrs[&id]);
    connect(&network, id, &addrs);
    nodes[f] = Node::start(id, network, dirs[f].path());
    let all: Vec<Vec<u8>> = before.iter().chain(&while_down).cloned().collect();
    wait_for("the restarted follower to catch up", || all.iter().all(|e| nodes[f].applied().contains(e)).then_some(()));
    let (leading, _) = leader(&nodes).unwrap();
    let leader_log = nodes[leading].applied();
    assert!(
        leader_log.starts_with(&nodes[f].applied()) || nodes[f].applied().starts_with(&leader_log),
        "the restarted follower's log differs from the leader's"
    );

    for node in nodes.iter_mut().filter(|n| n.thread.is_some()) {
        node.kill();
    }
    drop(runtime);
}
