//! A snapshot over real loopback sockets: three groups on three `RaftNetwork`s; a follower is
//! killed, the others go on and compact their logs past it behind a 3 MB checkpoint; the
//! follower restarted (on another port) is sent the checkpoint's files (megabyte chunks with checksums,
//! on the same streams as Raft's messages), installs them, takes the log after them, and holds
//! the leader's state.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use waggle_replication::net::RaftNetwork;
use waggle_replication::{Message, RaftGroup, ReplicaConfig, SnapshotPacket, SnapshotSource};

const GROUP: u64 = 3;
const TICK: Duration = Duration::from_millis(20);

struct Checkpoints(PathBuf);

impl SnapshotSource for Checkpoints {
    fn files_at(&self, index: u64, _term: u64) -> Option<PathBuf> {
        Some(self.0.join(index.to_string())).filter(|d| d.is_dir())
    }
}

/// 3 MB derived from the digest: a wrong byte anywhere shows.
fn bulk(digest: u64) -> Vec<u8> {
    let mut x = digest | 1;
    (0..3_000_000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

#[derive(Default, Clone)]
struct Observed {
    leader: bool,
    applied: u64,
    digest: u64,
    first_index: u64,
    /// Snapshots installed: (index, the received files matched what their digest implies).
    installed: Vec<(u64, bool)>,
    stats: waggle_replication::SnapshotStats,
}

enum Command {
    Propose(Vec<u8>),
    /// Checkpoint the state and compact the log there.
    Compact,
}

struct Node {
    network: Option<RaftNetwork>,
    observed: Arc<Mutex<Observed>>,
    commands: Sender<Command>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

struct Loop {
    group: RaftGroup,
    messages: Receiver<Message>,
    packets: Receiver<SnapshotPacket>,
    commands: Receiver<Command>,
    observed: Arc<Mutex<Observed>>,
    state_dir: PathBuf,
    applied: u64,
    digest: u64,
}

impl Node {
    fn start(id: u64, network: RaftNetwork, dir: &Path) -> Self {
        let (transport, messages, packets) = network.register_with_snapshots(GROUP);
        let state_dir = dir.join("state");
        std::fs::create_dir_all(&state_dir).unwrap();
        // the state machine is not durable here: a restart begins empty, from the journal
        let config = ReplicaConfig { election_tick: 10, ..ReplicaConfig::new(id, vec![1, 2, 3]) };
        let mut group = RaftGroup::open_replicated(&dir.join("log"), 0, config, Box::new(transport)).unwrap();
        group.set_snapshot_source(Arc::new(Checkpoints(state_dir.clone())));
        let observed = Arc::new(Mutex::new(Observed::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let (commands, received) = std::sync::mpsc::channel();
        let l = Loop { group, messages, packets, commands: received, observed: observed.clone(), state_dir, applied: 0, digest: 0 };
        let thread = std::thread::spawn({
            let stop = stop.clone();
            move || l.run(stop)
        });
        Node { network: Some(network), observed, commands, stop, thread: Some(thread) }
    }

    fn kill(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        self.thread.take().unwrap().join().unwrap();
        self.network = None;
    }

    fn observed(&self) -> Observed {
        self.observed.lock().unwrap().clone()
    }
}

impl Loop {
    fn run(mut self, stop: Arc<AtomicBool>) {
        let mut next_tick = Instant::now() + TICK;
        while !stop.load(Ordering::SeqCst) {
            match self.messages.recv_timeout(next_tick.saturating_duration_since(Instant::now()).min(Duration::from_millis(5))) {
                Ok(m) => {
                    let _ = self.group.step(m);
                    for m in self.messages.try_iter() {
                        let _ = self.group.step(m);
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return,
            }
            for p in self.packets.try_iter() {
                self.group.receive_snapshot(p).unwrap();
            }
            if Instant::now() >= next_tick {
                self.group.tick();
                next_tick += TICK;
            }
            for c in self.commands.try_iter() {
                match c {
                    Command::Propose(p) => {
                        let _ = self.group.propose(p);
                    }
                    Command::Compact => {
                        let at = self.state_dir.join(self.applied.to_string());
                        std::fs::create_dir_all(&at).unwrap();
                        std::fs::write(at.join("state"), format!("{} {}", self.applied, self.digest)).unwrap();
                        std::fs::write(at.join("bulk.sst"), bulk(self.digest)).unwrap();
                        self.group.compact(self.applied).unwrap();
                    }
                }
            }
            let committed = self.group.drive().unwrap();
            let installed = self.group.take_installed();
            for c in committed {
                assert_eq!(c.index, self.applied + 1);
                self.applied = c.index;
                if !c.data.is_empty() {
                    self.digest = self.digest.rotate_left(7) ^ c.data.iter().fold(c.index, |h, b| h.wrapping_mul(31) + u64::from(*b));
                }
            }
            let mut o = self.observed.lock().unwrap();
            if let Some(s) = installed {
                let text = std::fs::read_to_string(s.dir.join("state")).unwrap();
                let (index, digest) = text.split_once(' ').unwrap();
                let (index, digest): (u64, u64) = (index.parse().unwrap(), digest.parse().unwrap());
                let intact = index == s.index && std::fs::read(s.dir.join("bulk.sst")).unwrap() == bulk(digest);
                o.installed.push((s.index, intact));
                self.applied = index;
                self.digest = digest;
                std::fs::rename(&s.dir, self.state_dir.join(index.to_string())).unwrap();
            }
            o.leader = self.group.is_leader();
            o.applied = self.applied;
            o.digest = self.digest;
            o.first_index = self.group.first_index();
            o.stats = self.group.snapshot_stats();
        }
    }
}

fn wait_for<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(t) = f() {
            return t;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn bind(runtime: &tokio::runtime::Runtime, id: u64, addr: SocketAddr) -> RaftNetwork {
    wait_for("the port", || runtime.block_on(RaftNetwork::bind(id, addr)).ok())
}

fn connect(network: &RaftNetwork, id: u64, addrs: &BTreeMap<u64, SocketAddr>) {
    for (&peer, &addr) in addrs.iter().filter(|(&peer, _)| peer != id) {
        network.add_peer(peer, addr);
    }
}

/// Proposes `n` entries to the leader and waits until the live nodes applied them all (and hold
/// the same state); returns the leader.
fn replicate(nodes: &[Node], tag: &str, n: u64) -> usize {
    let leader = wait_for("a leader", || nodes.iter().position(|n| n.thread.is_some() && n.observed().leader));
    let start = nodes[leader].observed().applied;
    for i in 0..n {
        nodes[leader].commands.send(Command::Propose(format!("\x01{tag} {i}").into_bytes())).unwrap();
    }
    wait_for("the entries applied everywhere", || {
        let o: Vec<_> = nodes.iter().filter(|n| n.thread.is_some()).map(Node::observed).collect();
        let l = nodes[leader].observed();
        (l.applied >= start + n && o.iter().all(|o| (o.applied, o.digest) == (l.applied, l.digest))).then_some(())
    });
    leader
}

#[test]
fn a_follower_behind_the_compacted_log_gets_the_snapshot_over_the_network() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let networks: Vec<RaftNetwork> = (1..=3).map(|id| bind(&runtime, id, SocketAddr::from(([127, 0, 0, 1], 0)))).collect();
    let addrs: BTreeMap<u64, SocketAddr> = (1..=3).zip(networks.iter().map(|n| n.local_addr())).collect();
    for (id, network) in (1..=3).zip(&networks) {
        connect(network, id, &addrs);
    }
    let mut nodes: Vec<Node> = (1..=3).zip(networks).zip(&dirs).map(|((id, network), dir)| Node::start(id, network, dir.path())).collect();

    let leader = replicate(&nodes, "before", 10);
    let f = (leader + 1) % 3;
    nodes[f].kill();
    let behind = nodes[f].observed().applied;
    let leader = replicate(&nodes, "while down", 50);
    for n in nodes.iter().filter(|n| n.thread.is_some()) {
        n.commands.send(Command::Compact).unwrap();
    }
    let compacted_to = wait_for("the leader's log compacted", || Some(nodes[leader].observed().first_index - 1).filter(|&c| c > 0));
    wait_for("the logs compacted", || nodes.iter().filter(|n| n.thread.is_some()).all(|n| n.observed().first_index > 1).then_some(()));
    assert!(compacted_to > behind + 1, "the log is compacted past the follower");

    // on another port: appends the leader sent toward the stopped follower before compacting
    // (Raft replicates optimistically) and that still wait in its queue for the old address
    // would otherwise let the follower catch up from them, without a snapshot
    let id = f as u64 + 1;
    let network = bind(&runtime, id, SocketAddr::from(([127, 0, 0, 1], 0)));
    connect(&network, id, &addrs);
    for n in nodes.iter().filter(|n| n.thread.is_some()) {
        n.network.as_ref().unwrap().add_peer(id, network.local_addr());
    }
    nodes[f] = Node::start(id, network, dirs[f].path());
    let leader = replicate(&nodes, "after", 10);
    let (fo, lo) = (nodes[f].observed(), nodes[leader].observed());
    eprintln!(
        "f={f} leader={leader} behind={behind} compacted_to={compacted_to} follower {:?} {:?} leader {:?}",
        fo.installed, fo.stats, lo.stats
    );
    assert_eq!(fo.installed, vec![(compacted_to, true)], "the follower installed the leader's snapshot, intact");
    assert!(fo.stats.installed == 1 && lo.stats.completed == 1 && lo.stats.chunks_sent >= 3, "{:?} {:?}", fo.stats, lo.stats);
    assert_eq!((fo.applied, fo.digest), (lo.applied, lo.digest), "the states differ");
    assert_eq!(fo.first_index, compacted_to + 1);

    for node in nodes.iter_mut().filter(|n| n.thread.is_some()) {
        node.kill();
    }
    drop(runtime);
}
