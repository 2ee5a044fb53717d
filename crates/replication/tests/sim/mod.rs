//! Deterministic simulation of a replicated group: N in-process [`RaftGroup`]s on real journals (in
//! `/dev/shm` when it exists: tmpfs makes fsync free, and the seeds many), a seeded RNG that
//! decides everything else: which node ticks when (so election timeouts differ; Raft's own
//! randomised timeout is off, it draws from the thread's RNG), which message is lost, delayed,
//! duplicated (reordering follows from the delays), which nodes a partition cuts off and for how
//! long, which node crashes (some right after granting a vote) and when it restarts from its
//! journal and hard state, and which leader a client proposes to. A run is chaos for a while, then
//! a calm phase (partition healed, crashed nodes restarted, no loss) until every node has applied
//! everything the leader committed.
//!
//! The harness records what happened ([`History`]); each invariant is a test file of its own
//! that checks it over many seeds. A failing seed is printed; `SIM_SEED=<n>` replays only it,
//! `SIM_SEEDS=<count>` and `SIM_SEED_BASE=<n>` run other seeds than CI's.
#![allow(dead_code)] // each test file uses part of the harness

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use waggle_replication::{
    Committed, InstalledSnapshot, Message, MessageType, PacketBody, RaftGroup, ReplicaConfig, SnapshotPacket, SnapshotSource, Transport,
};

/// Seeds each invariant's test runs by default (CI): seeds `base..base + count`.
const DEFAULT_SEEDS: u64 = 40;

/// Runs `check` for every seed of this run; a failure names its seed and how to replay it.
pub fn for_each_seed(mut check: impl FnMut(u64)) {
    let seeds: Vec<u64> = match std::env::var("SIM_SEED") {
        Ok(s) => vec![s.parse().expect("SIM_SEED is a number")],
        Err(_) => {
            let base = std::env::var("SIM_SEED_BASE").map(|s| s.parse().expect("SIM_SEED_BASE is a number")).unwrap_or(0);
            let count = std::env::var("SIM_SEEDS").map(|s| s.parse().expect("SIM_SEEDS is a number")).unwrap_or(DEFAULT_SEEDS);
            (base..base + count).collect()
        }
    };
    for seed in seeds {
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check(seed)));
        if let Err(panic) = outcome {
            eprintln!("simulation seed {seed} failed; replay it with SIM_SEED={seed}");
            std::panic::resume_unwind(panic);
        }
    }
}

/// splitmix64: small, fast and the same on every platform.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed ^ 0x5DEE_CE66_D1CE_4E5B)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        ((self.next_u64() >> 11) as f64) / ((1u64 << 53) as f64) < p
    }
}

/// What can go wrong, and how often (probabilities per message or per step).
#[derive(Debug, Clone)]
pub struct Scenario {
    pub nodes: u64,
    /// Steps of chaos; then the calm phase.
    pub chaos_steps: u64,
    /// Most steps the calm phase may take to converge (a run that does not is a failure).
    pub calm_steps: u64,
    /// A node's chance to tick in a step: skipped ticks make clocks drift apart.
    pub tick: f64,
    pub loss: f64,
    pub duplicate: f64,
    /// A message arrives 1 to 1 + `max_delay` steps after it was sent.
    pub max_delay: u64,
    /// A step's chance to cut a random minority or majority off from the rest (none in force).
    pub partition: f64,
    pub partition_steps: u64,
    /// A step's chance to crash a node (while fewer than half are down: the leader in half the
    /// cases), and how long it stays down at most.
    pub crash: f64,
    pub down_steps: u64,
    /// A node's chance to crash right after it grants a vote (restarting a step or two later):
    /// if it forgot the vote, it could vote again in the same term.
    pub crash_after_vote: f64,
    /// A step's chance that a client proposes an entry to a node that believes it leads.
    pub propose: f64,
    /// A node's chance to crash right after its journal installed a snapshot, before its state
    /// machine took it (restarting a step or two later, it must be handed the snapshot again).
    pub crash_after_install: f64,
    /// Every node checkpoints its state every this many applied entries and compacts its log
    /// there (0: never); a node restarts from its newest checkpoint.
    pub checkpoint_every: u64,
    /// A snapshot chunk's chance to have a byte flipped on the way (chaos only).
    pub corrupt: f64,
}

impl Default for Scenario {
    fn default() -> Self {
        Self {
            nodes: 3,
            chaos_steps: 4_000,
            calm_steps: 3_000,
            tick: 0.5,
            loss: 0.05,
            duplicate: 0.03,
            max_delay: 3,
            partition: 0.006,
            partition_steps: 150,
            crash: 0.01,
            down_steps: 120,
            crash_after_vote: 0.5,
            propose: 0.3,
            crash_after_install: 0.3,
            checkpoint_every: 0,
            corrupt: 0.0,
        }
    }
}

impl Scenario {
    /// The default, varied by seed: five nodes for odd seeds (a quorum of three tolerates two
    /// faults), and one seed in three with a lossy network (a fifth of the messages lost).
    pub fn for_seed(seed: u64) -> Self {
        let loss = if seed % 3 == 2 { 0.2 } else { Self::default().loss };
        Self { nodes: if seed.is_multiple_of(2) { 3 } else { 5 }, loss, ..Self::default() }
    }
}

/// An entry applied by a node's state machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    pub node: u64,
    /// Which run of the node (0 before its first crash).
    pub run: u64,
    pub index: u64,
    pub term: u64,
    pub data: Vec<u8>,
    /// The node's state digest once this entry is applied.
    pub digest: u64,
}

/// An entry a client was told is committed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Acknowledged {
    pub data: Vec<u8>,
    pub index: u64,
    pub node: u64,
}

/// What happened in a run.
#[derive(Debug, Default)]
pub struct History {
    pub seed: u64,
    /// Every node seen leading each term (after each step).
    pub leaders: BTreeMap<u64, BTreeSet<u64>>,
    /// Every application, in the order they happened.
    pub applied: Vec<Applied>,
    pub acknowledged: Vec<Acknowledged>,
    /// Each node's applications in its last run, after the calm phase (it applied everything
    /// committed).
    pub final_logs: BTreeMap<u64, Vec<Applied>>,
    pub crashes: u64,
    pub partitions: u64,
    pub messages_lost: u64,
    pub messages_duplicated: u64,
    /// Snapshots followers installed (and adopted as their state), in order.
    pub installs: Vec<Install>,
    pub chunks_corrupted: u64,
    pub crashes_after_install: u64,
    /// Chunks followers refused (over the runs that ended).
    pub chunks_refused: u64,
    /// Each node's applied index and digest at the end.
    pub final_states: BTreeMap<u64, (u64, u64)>,
}

/// A snapshot a follower installed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Install {
    pub node: u64,
    pub run: u64,
    pub index: u64,
    /// The digest the snapshot's files hold.
    pub digest: u64,
}

/// What travels between nodes.
#[derive(Debug, Clone)]
enum Wire {
    Raft(Box<Message>),
    Snapshot(SnapshotPacket),
}

impl Wire {
    fn ends(&self) -> (u64, u64) {
        match self {
            Wire::Raft(m) => (m.from, m.to),
            Wire::Snapshot(p) => (p.from, p.to),
        }
    }
}

/// Keeps what a node's group sends, for the network to carry.
struct Outbox(Arc<Mutex<Vec<Wire>>>);

impl Transport for Outbox {
    fn send(&mut self, messages: Vec<Message>) {
        self.0.lock().expect("outbox").extend(messages.into_iter().map(|m| Wire::Raft(Box::new(m))));
    }

    fn send_snapshot(&mut self, packets: Vec<SnapshotPacket>) {
        self.0.lock().expect("outbox").extend(packets.into_iter().map(Wire::Snapshot));
    }
}

/// A node's checkpoints: `<dir>/<index>/` holds `state` (index and digest) and `padding` (bytes
/// derived from the digest, so that a transfer takes several chunks and a wrong byte shows).
struct Checkpoints(PathBuf);

impl SnapshotSource for Checkpoints {
    fn files_at(&self, index: u64, _term: u64) -> Option<PathBuf> {
        let dir = self.0.join(index.to_string());
        dir.is_dir().then_some(dir)
    }
}

/// Bytes per snapshot chunk in the simulation.
const CHUNK_BYTES: usize = 1024;

fn padding(index: u64, digest: u64) -> Vec<u8> {
    let mut rng = Rng::new(digest);
    (0..3_000 + index % 4_000).map(|_| rng.next_u64() as u8).collect()
}

/// Writes the checkpoint of (index, digest) and removes older ones.
fn checkpoint(dir: &std::path::Path, index: u64, digest: u64) {
    let tmp = dir.join(format!("{index}.tmp"));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).expect("checkpoint dir");
    std::fs::write(tmp.join("state"), format!("{index} {digest}")).expect("state file");
    std::fs::write(tmp.join("padding"), padding(index, digest)).expect("padding file");
    std::fs::rename(&tmp, dir.join(index.to_string())).expect("checkpoint rename");
    remove_checkpoints_but(dir, index);
}

fn remove_checkpoints_but(dir: &std::path::Path, index: u64) {
    for e in std::fs::read_dir(dir).expect("checkpoints").flatten() {
        if e.file_name().to_string_lossy() != index.to_string() {
            std::fs::remove_dir_all(e.path()).expect("old checkpoint removed");
        }
    }
}

/// The (index, digest) a checkpoint holds, checking its padding.
fn read_checkpoint(dir: &std::path::Path) -> (u64, u64) {
    let state = std::fs::read_to_string(dir.join("state")).expect("state file");
    let (index, digest) = state.split_once(' ').expect("index and digest");
    let (index, digest) = (index.parse().expect("index"), digest.parse().expect("digest"));
    let padding_read = std::fs::read(dir.join("padding")).expect("padding file");
    assert!(padding_read == padding(index, digest), "checkpoint {} holds other bytes than were written", dir.display());
    (index, digest)
}

/// The newest checkpoint's (index, digest), if any.
fn newest_checkpoint(dir: &std::path::Path) -> Option<(u64, u64)> {
    let newest = std::fs::read_dir(dir).ok()?.flatten().filter_map(|e| e.file_name().to_str()?.parse::<u64>().ok()).max()?;
    Some(read_checkpoint(&dir.join(newest.to_string())))
}

/// One node: its journal's directory, and its group and state machine while it is up.
struct Node {
    id: u64,
    dir: PathBuf,
    /// Where its checkpoints are.
    state_dir: PathBuf,
    /// Index of its newest checkpoint.
    checkpointed: u64,
    outbox: Arc<Mutex<Vec<Wire>>>,
    group: Option<RaftGroup>,
    run: u64,
    /// Last index applied in this run, and the state's digest there.
    applied: u64,
    digest: u64,
    /// Step at which a crashed node restarts.
    restart_at: u64,
    /// Crash at the next step's start (it just granted a vote).
    crash_next: bool,
}

/// The state machine's digest after applying `data` at `index`: a chain over every entry with
/// data (Raft's own entries change no state).
fn digest(previous: u64, index: u64, data: &[u8]) -> u64 {
    if data.is_empty() {
        return previous;
    }
    // FNV-1a over the previous digest, the index and the data
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for b in previous.to_le_bytes().iter().chain(&index.to_le_bytes()).chain(data) {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

pub struct Sim {
    scenario: Scenario,
    rng: Rng,
    step: u64,
    voters: Vec<u64>,
    nodes: Vec<Node>,
    _dirs: tempfile::TempDir,
    /// Messages in flight by (delivery step, sequence): equal steps keep sending order.
    in_flight: BTreeMap<(u64, u64), Wire>,
    sequence: u64,
    /// The nodes cut off from the rest, and the step the partition heals at.
    partition: Option<(BTreeSet<u64>, u64)>,
    /// Proposals not acknowledged yet: data → the node proposed to.
    pending: BTreeMap<Vec<u8>, u64>,
    proposals: u64,
    history: History,
    /// Whether the step under way is one of chaos.
    chaos: bool,
}

impl Sim {
    /// Runs `scenario` under `seed` to the end of its calm phase.
    pub fn run(seed: u64, scenario: Scenario) -> History {
        let mut sim = Sim::new(seed, scenario);
        for _ in 0..sim.scenario.chaos_steps {
            sim.chaos();
            sim.advance(true);
        }
        sim.calm();
        sim.history.seed = seed;
        sim.history
    }

    fn new(seed: u64, scenario: Scenario) -> Self {
        let dirs = match std::path::Path::new("/dev/shm").is_dir() {
            true => tempfile::Builder::new().prefix("waggle-sim").tempdir_in("/dev/shm"),
            false => tempfile::Builder::new().prefix("waggle-sim").tempdir(),
        }
        .expect("temp dir");
        let voters: Vec<u64> = (1..=scenario.nodes).collect();
        let mut sim = Sim {
            rng: Rng::new(seed),
            step: 0,
            nodes: Vec::new(),
            in_flight: BTreeMap::new(),
            sequence: 0,
            partition: None,
            pending: BTreeMap::new(),
            proposals: 0,
            history: History::default(),
            chaos: false,
            voters: voters.clone(),
            _dirs: dirs,
            scenario,
        };
        for &id in &voters {
            let dir = sim._dirs.path().join(format!("node-{id}"));
            let state_dir = sim._dirs.path().join(format!("node-{id}-state"));
            std::fs::create_dir_all(&state_dir).expect("state dir");
            let mut node = Node { id, dir, state_dir, ..Node::placeholder() };
            sim.start(&mut node);
            sim.nodes.push(node);
        }
        sim
    }

    /// Opens a node's group from its journal; its state machine starts from its newest
    /// checkpoint (empty without one), so the group re-delivers every committed entry after it.
    fn start(&mut self, node: &mut Node) {
        let config = ReplicaConfig {
            randomized_election_timeout: false,
            snapshot_chunk_bytes: CHUNK_BYTES,
            ..ReplicaConfig::new(node.id, self.voters.clone())
        };
        let (applied, digest) = newest_checkpoint(&node.state_dir).unwrap_or((0, 0));
        let mut group = RaftGroup::open_replicated(&node.dir, applied, config, Box::new(Outbox(node.outbox.clone())))
            .unwrap_or_else(|e| panic!("node {} does not reopen its journal: {e}", node.id));
        group.set_snapshot_source(Arc::new(Checkpoints(node.state_dir.clone())));
        node.applied = applied;
        node.digest = digest;
        node.checkpointed = applied;
        let installed = group.take_installed();
        node.group = Some(group);
        if let Some(installed) = installed {
            self.adopt(node, installed);
        }
    }

    /// Replaces a node's state by a snapshot it installed: the snapshot's directory becomes its
    /// newest checkpoint.
    fn adopt(&mut self, node: &mut Node, installed: InstalledSnapshot) {
        let (index, digest) = read_checkpoint(&installed.dir);
        assert_eq!(index, installed.index, "node {}: snapshot {} holds the state at {index}", node.id, installed.index);
        let target = node.state_dir.join(index.to_string());
        let _ = std::fs::remove_dir_all(&target);
        std::fs::rename(&installed.dir, &target).expect("snapshot taken");
        remove_checkpoints_but(&node.state_dir, index);
        node.applied = index;
        node.digest = digest;
        node.checkpointed = index;
        self.history.installs.push(Install { node: node.id, run: node.run, index, digest });
    }

    /// A node's group goes down (its run's refused chunks are counted).
    fn stop(history: &mut History, node: &mut Node) {
        if let Some(group) = node.group.take() {
            history.chunks_refused += group.snapshot_stats().chunks_refused;
        }
    }

    fn live(&self) -> usize {
        self.nodes.iter().filter(|n| n.group.is_some()).count()
    }

    /// Starts and heals partitions, crashes and restarts nodes.
    fn chaos(&mut self) {
        if let Some((_, heal_at)) = &self.partition {
            if self.step >= *heal_at {
                self.partition = None;
            }
        } else if self.rng.chance(self.scenario.partition) {
            let n = self.scenario.nodes;
            let size = 1 + self.rng.below(n - 1);
            let mut cut = BTreeSet::new();
            while (cut.len() as u64) < size {
                cut.insert(1 + self.rng.below(n));
            }
            let heal_at = self.step + 1 + self.rng.below(self.scenario.partition_steps);
            self.partition = Some((cut, heal_at));
            self.history.partitions += 1;
        }
        let step = self.step;
        for i in 0..self.nodes.len() {
            if self.nodes[i].group.is_none() && step >= self.nodes[i].restart_at {
                let mut node = std::mem::replace(&mut self.nodes[i], Node::placeholder());
                node.run += 1;
                self.start(&mut node);
                self.nodes[i] = node;
            }
        }
        for node in self.nodes.iter_mut().filter(|n| n.crash_next) {
            node.crash_next = false;
            Self::stop(&mut self.history, node);
            node.restart_at = step + 1 + self.rng.below(2);
            self.history.crashes += 1;
        }
        let down = self.nodes.len() - self.live();
        if (down + 1) * 2 < self.nodes.len() && self.rng.chance(self.scenario.crash) {
            let leader = self.nodes.iter().position(|n| n.group.as_ref().is_some_and(|g| g.is_leader()));
            let victim = match leader {
                Some(leader) if self.rng.chance(0.5) => leader,
                _ => self.rng.below(self.scenario.nodes) as usize,
            };
            let node = &mut self.nodes[victim];
            if node.group.is_some() {
                // what the journal did not flush is lost with the process, as in a crash
                Self::stop(&mut self.history, node);
                node.outbox.lock().expect("outbox").clear();
                // half the crashes are a quick restart: within an election a node may meet the
                // same term again, and must remember its vote
                let down = if self.rng.chance(0.5) { 4 } else { self.scenario.down_steps };
                node.restart_at = step + 1 + self.rng.below(down);
                self.history.crashes += 1;
            }
        }
    }
}

impl Node {
    /// Stands in for a node while it is taken out of the simulation to be restarted.
    fn placeholder() -> Node {
        Node {
            id: 0,
            dir: PathBuf::new(),
            state_dir: PathBuf::new(),
            checkpointed: 0,
            outbox: Arc::default(),
            group: None,
            run: 0,
            applied: 0,
            digest: 0,
            restart_at: 0,
            crash_next: false,
        }
    }
}

impl Sim {
    /// Heals everything, restarts every node and runs without loss until every node applied
    /// all the leader committed.
    fn calm(&mut self) {
        self.partition = None;
        for i in 0..self.nodes.len() {
            if self.nodes[i].group.is_none() {
                let mut node = std::mem::replace(&mut self.nodes[i], Node::placeholder());
                node.run += 1;
                self.start(&mut node);
                self.nodes[i] = node;
            }
        }
        for _ in 0..self.scenario.calm_steps {
            self.advance(false);
            if self.converged() {
                for node in &self.nodes {
                    let log = self.history.applied.iter().filter(|a| a.node == node.id && a.run == node.run).cloned().collect();
                    self.history.final_logs.insert(node.id, log);
                    self.history.final_states.insert(node.id, (node.applied, node.digest));
                    self.history.chunks_refused += node.group.as_ref().map_or(0, |g| g.snapshot_stats().chunks_refused);
                }
                return;
            }
        }
        let state: Vec<_> = self
            .nodes
            .iter()
            .map(|n| {
                let g = n.group.as_ref().expect("up");
                (n.id, g.term(), g.is_leader(), g.commit_index(), g.last_index(), n.applied)
            })
            .collect();
        panic!("no convergence after {} calm steps: (node, term, leads, commit, last, applied) {state:?}", self.scenario.calm_steps);
    }

    /// A leader holds its term's entries up to its last index committed, and every node applied
    /// them all.
    fn converged(&self) -> bool {
        let Some(leader) = self.nodes.iter().filter_map(|n| n.group.as_ref()).find(|g| g.is_leader()) else { return false };
        let done = leader.commit_index();
        done == leader.last_index() && self.nodes.iter().all(|n| n.applied == done)
    }

    /// One step: deliver due messages, tick, propose, drive every live node, observe.
    fn advance(&mut self, chaos: bool) {
        self.step += 1;
        self.chaos = chaos;
        while let Some(entry) = self.in_flight.first_entry() {
            if entry.key().0 > self.step {
                break;
            }
            let wire = entry.remove();
            let (from, to) = wire.ends();
            if self.cut(from, to) {
                continue;
            }
            if let Some(group) = &mut self.nodes[to as usize - 1].group {
                match wire {
                    Wire::Raft(message) => group.step(*message).expect("a message from a voter to its recipient is taken"),
                    Wire::Snapshot(packet) => {
                        group.receive_snapshot(packet).unwrap_or_else(|e| panic!("node {to} fails to take a snapshot packet: {e}"))
                    }
                }
            }
        }
        for i in 0..self.nodes.len() {
            if self.nodes[i].group.is_some() && self.rng.chance(self.scenario.tick) {
                self.nodes[i].group.as_mut().expect("up").tick();
            }
        }
        if chaos && self.rng.chance(self.scenario.propose) {
            self.propose();
        }
        for i in 0..self.nodes.len() {
            self.drive(i);
        }
        self.route(chaos);
        for node in &self.nodes {
            if let Some(group) = node.group.as_ref().filter(|g| g.is_leader()) {
                self.history.leaders.entry(group.term()).or_default().insert(node.id);
            }
        }
    }

    /// A client sends a new entry to a node that believes it leads (a stale leader too).
    fn propose(&mut self) {
        let leaders: Vec<usize> = (0..self.nodes.len()).filter(|&i| self.nodes[i].group.as_ref().is_some_and(|g| g.is_leader())).collect();
        if leaders.is_empty() {
            return;
        }
        let i = leaders[self.rng.below(leaders.len() as u64) as usize];
        self.proposals += 1;
        let data = format!("\x01entry {}", self.proposals).into_bytes();
        if self.nodes[i].group.as_mut().expect("up").propose(data.clone()).is_ok() {
            self.pending.insert(data, self.nodes[i].id);
        }
    }

    fn drive(&mut self, i: usize) {
        let mut node = std::mem::replace(&mut self.nodes[i], Node::placeholder());
        self.drive_node(&mut node);
        self.nodes[i] = node;
    }

    fn drive_node(&mut self, node: &mut Node) {
        let Some(group) = &mut node.group else { return };
        let committed: Vec<Committed> = group.drive().unwrap_or_else(|e| panic!("node {} fails: {e}", node.id));
        if group.installed().is_some() && self.chaos && self.rng.chance(self.scenario.crash_after_install) {
            // the state machine never took it, nor the entries before it: lost with the process
            Self::stop(&mut self.history, node);
            node.outbox.lock().expect("outbox").clear();
            node.restart_at = self.step + 1 + self.rng.below(2);
            self.history.crashes += 1;
            self.history.crashes_after_install += 1;
            return;
        }
        let installed = group.take_installed();
        for c in committed {
            assert_eq!(c.index, node.applied + 1, "node {} applied {} after {}", node.id, c.index, node.applied);
            node.applied = c.index;
            node.digest = digest(node.digest, c.index, &c.data);
            if self.pending.get(&c.data) == Some(&node.id) {
                self.pending.remove(&c.data);
                self.history.acknowledged.push(Acknowledged { data: c.data.clone(), index: c.index, node: node.id });
            }
            self.history.applied.push(Applied {
                node: node.id,
                run: node.run,
                index: c.index,
                term: c.term,
                data: c.data,
                digest: node.digest,
            });
        }
        if let Some(installed) = installed {
            self.adopt(node, installed);
        }
        let every = self.scenario.checkpoint_every;
        if every > 0 && node.applied >= node.checkpointed + every {
            checkpoint(&node.state_dir, node.applied, node.digest);
            node.checkpointed = node.applied;
            node.group.as_mut().expect("up").compact(node.applied).expect("compaction");
        }
    }

    /// Whether the partition in force separates `a` from `b`.
    fn cut(&self, a: u64, b: u64) -> bool {
        self.partition.as_ref().is_some_and(|(side, _)| side.contains(&a) != side.contains(&b))
    }

    /// Puts what the nodes sent on the network, losing, duplicating and delaying messages.
    fn route(&mut self, chaos: bool) {
        for i in 0..self.nodes.len() {
            let sent = std::mem::take(&mut *self.nodes[i].outbox.lock().expect("outbox"));
            for mut message in sent {
                if let Wire::Raft(m) = &message {
                    if chaos
                        && m.msg_type() == MessageType::MsgRequestVoteResponse
                        && !m.reject
                        && self.rng.chance(self.scenario.crash_after_vote)
                    {
                        self.nodes[i].crash_next = true;
                    }
                }
                let (from, to) = message.ends();
                if self.cut(from, to) {
                    continue;
                }
                if let Wire::Snapshot(SnapshotPacket { body: PacketBody::Chunk { data, .. }, .. }) = &mut message {
                    if chaos && self.rng.chance(self.scenario.corrupt) {
                        let at = self.rng.below(data.len() as u64) as usize;
                        data[at] ^= 1 << self.rng.below(8);
                        self.history.chunks_corrupted += 1;
                    }
                }
                if chaos && self.rng.chance(self.scenario.loss) {
                    self.history.messages_lost += 1;
                    continue;
                }
                let copies = if chaos && self.rng.chance(self.scenario.duplicate) { 2 } else { 1 };
                self.history.messages_duplicated += copies - 1;
                for _ in 0..copies {
                    let delay = if chaos { self.rng.below(self.scenario.max_delay + 1) } else { 0 };
                    self.sequence += 1;
                    self.in_flight.insert((self.step + 1 + delay, self.sequence), message.clone());
                }
            }
        }
    }
}

/// A run's history for `seed` with the scenario's default for that seed, after checking that
/// the run exercised what it should (so an invariant is not checked over an idle run).
pub fn history(seed: u64) -> History {
    let history = Sim::run(seed, Scenario::for_seed(seed));
    assert!(history.acknowledged.len() >= 20, "seed {seed}: only {} entries acknowledged", history.acknowledged.len());
    assert!(!history.leaders.is_empty(), "seed {seed}: no leader ever");
    history
}
