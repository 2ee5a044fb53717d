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

use waggle_replication::{Committed, Message, MessageType, RaftGroup, ReplicaConfig, Transport};

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
}

/// Keeps what a node's group sends, for the network to carry.
struct Outbox(Arc<Mutex<Vec<Message>>>);

impl Transport for Outbox {
    fn send(&mut self, messages: Vec<Message>) {
        self.0.lock().expect("outbox").extend(messages);
    }
}

/// One node: its journal's directory, and its group and state machine while it is up.
struct Node {
    id: u64,
    dir: PathBuf,
    outbox: Arc<Mutex<Vec<Message>>>,
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
    in_flight: BTreeMap<(u64, u64), Message>,
    sequence: u64,
    /// The nodes cut off from the rest, and the step the partition heals at.
    partition: Option<(BTreeSet<u64>, u64)>,
    /// Proposals not acknowledged yet: data → the node proposed to.
    pending: BTreeMap<Vec<u8>, u64>,
    proposals: u64,
    history: History,
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
            voters: voters.clone(),
            _dirs: dirs,
            scenario,
        };
        for &id in &voters {
            let dir = sim._dirs.path().join(format!("node-{id}"));
            let mut node =
                Node { id, dir, outbox: Arc::default(), group: None, run: 0, applied: 0, digest: 0, restart_at: 0, crash_next: false };
            sim.start(&mut node);
            sim.nodes.push(node);
        }
        sim
    }

    /// Opens a node's group from its journal; its state machine starts empty, so the group
    /// re-delivers every committed entry.
    fn start(&self, node: &mut Node) {
        let config = ReplicaConfig { randomized_election_timeout: false, ..ReplicaConfig::new(node.id, self.voters.clone()) };
        let group = RaftGroup::open_replicated(&node.dir, 0, config, Box::new(Outbox(node.outbox.clone())))
            .unwrap_or_else(|e| panic!("node {} does not reopen its journal: {e}", node.id));
        node.group = Some(group);
        node.applied = 0;
        node.digest = 0;
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
            node.group = None;
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
                node.group = None;
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
        while let Some(entry) = self.in_flight.first_entry() {
            if entry.key().0 > self.step {
                break;
            }
            let message = entry.remove();
            if self.cut(message.from, message.to) {
                continue;
            }
            if let Some(group) = &mut self.nodes[message.to as usize - 1].group {
                group.step(message).expect("a message from a voter to its recipient is taken");
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
        let node = &mut self.nodes[i];
        let Some(group) = &mut node.group else { return };
        let committed: Vec<Committed> = group.drive().unwrap_or_else(|e| panic!("node {} fails: {e}", node.id));
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
    }

    /// Whether the partition in force separates `a` from `b`.
    fn cut(&self, a: u64, b: u64) -> bool {
        self.partition.as_ref().is_some_and(|(side, _)| side.contains(&a) != side.contains(&b))
    }

    /// Puts what the nodes sent on the network, losing, duplicating and delaying messages.
    fn route(&mut self, chaos: bool) {
        for i in 0..self.nodes.len() {
            let sent = std::mem::take(&mut *self.nodes[i].outbox.lock().expect("outbox"));
            for message in sent {
                if chaos
                    && message.msg_type() == MessageType::MsgRequestVoteResponse
                    && !message.reject
                    && self.rng.chance(self.scenario.crash_after_vote)
                {
                    self.nodes[i].crash_next = true;
                }
                if self.cut(message.from, message.to) {
                    continue;
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
