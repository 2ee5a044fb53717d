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
//! A scenario may also move replicas while the chaos runs ([`Scenario::moves`]): a new node
//! joins as a learner, catches up from the leader's snapshot, and is promoted (replacing an old
//! voter in one joint-consensus change, or as one voter more), or a voter is removed; a removed
//! node is stopped for good. After every step the harness checks that every quorum of the
//! configuration in force (of the outgoing voters during joint consensus) holds a replica of the
//! newest acknowledged entry ([`quorum_violation`]).
//!
//! The harness records what happened ([`History`]); each invariant is a test file of its own
//! that checks it over many seeds. A failing seed is printed; `SIM_SEED=<n>` replays only it,
//! `SIM_SEEDS=<count>` and `SIM_SEED_BASE=<n>` run other seeds than CI's.
#![allow(dead_code)] // each test file uses part of the harness

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use waggle_replication::{
    Committed, ConfState, InstalledSnapshot, Message, MessageType, PacketBody, RaftGroup, ReplicaConfig, ReplicationError, SnapshotPacket,
    SnapshotSource, Transport,
};

/// Seeds each invariant's test runs by default (CI): seeds `base..base + count`.
const DEFAULT_SEEDS: u64 = 40;

/// Runs `check` for every seed of this run; a failure names its seed and how to replay it.
pub fn for_each_seed(check: impl FnMut(u64)) {
    for_each_of_seeds(DEFAULT_SEEDS, check)
}

/// [`for_each_seed`] over `default` seeds unless `SIM_SEEDS` says otherwise.
pub fn for_each_of_seeds(default: u64, mut check: impl FnMut(u64)) {
    let seeds: Vec<u64> = match std::env::var("SIM_SEED") {
        Ok(s) => vec![s.parse().expect("SIM_SEED is a number")],
        Err(_) => {
            let base = std::env::var("SIM_SEED_BASE").map(|s| s.parse().expect("SIM_SEED_BASE is a number")).unwrap_or(0);
            let count = std::env::var("SIM_SEEDS").map(|s| s.parse().expect("SIM_SEEDS is a number")).unwrap_or(default);
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
    /// Replica moves, one after the other, from step `moves_from` on (through the calm phase
    /// if need be: the run converges only once they are done). Nodes after `nodes` named here
    /// join when their move starts.
    pub moves: Vec<Move>,
    pub moves_from: u64,
}

/// A change of the group's voters, as the broker makes them (Zeebe 8.5 moves a partition
/// replica by joining the new broker and then leaving the old one; a replication factor change
/// only joins or only leaves).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Move {
    /// `add` joins as a learner, catches up, and replaces voter `remove` in one joint change.
    Replace { add: u64, remove: u64 },
    /// `add` joins as a learner, catches up and is promoted: one voter more.
    Add(u64),
    /// Voter `remove` leaves: one voter fewer.
    Remove(u64),
}

impl Move {
    /// The node that joins and the one that leaves.
    pub fn parts(self) -> (Option<u64>, Option<u64>) {
        match self {
            Move::Replace { add, remove } => (Some(add), Some(remove)),
            Move::Add(add) => (Some(add), None),
            Move::Remove(remove) => (None, Some(remove)),
        }
    }
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
            moves: Vec::new(),
            moves_from: 0,
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

    /// [`Self::for_seed`] with three moves from step 300 on, the voters they remove varied by
    /// seed: three voters become {one old, two new} by a replacement, an added voter and a
    /// removed one (3 → 3 → 4 → 3); five replace one, lose one and gain one (5 → 5 → 4 → 5).
    pub fn with_moves(seed: u64) -> Self {
        let base = Self::for_seed(seed);
        let n = base.nodes;
        let first = 1 + (seed / 2) % n;
        let second = 1 + (seed / 2 + 1) % n;
        let moves = match n {
            3 => vec![Move::Replace { add: 4, remove: first }, Move::Add(5), Move::Remove(second)],
            _ => vec![Move::Replace { add: n + 1, remove: first }, Move::Remove(second), Move::Add(n + 2)],
        };
        Self { moves, moves_from: 300, chaos_steps: 3_000, ..base }
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
    pub term: u64,
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
    /// Each node's applied index and digest at the end (nodes removed by a move excepted, as
    /// in `final_logs`).
    pub final_states: BTreeMap<u64, (u64, u64)>,
    /// The moves done, with the step each was seen complete at.
    pub moves_done: Vec<(u64, Move)>,
    /// The group's configurations in the order some node applied them first.
    pub configurations: Vec<ConfState>,
    /// Steps at which the quorum of up-to-date replicas was checked, and what was wrong.
    pub quorum_checks: u64,
    pub quorum_violations: Vec<String>,
    /// Messages dropped because their recipient no longer (or not yet) counts their sender in
    /// its group.
    pub from_non_members: u64,
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
    /// Started (a node named by a move joins when its move starts).
    joined: bool,
    /// Removed from the group by a move and stopped for good.
    retired: bool,
    /// What its journal held when it went down (its log as a crash left it).
    down_log: Option<DownLog>,
}

/// A stopped node's journal: the first index it holds and the terms of its entries from there.
#[derive(Debug, Clone)]
struct DownLog {
    first: u64,
    terms: Vec<u64>,
}

impl DownLog {
    fn of(group: &RaftGroup) -> Self {
        let first = group.first_index();
        let terms = (first..).map_while(|i| group.log_term(i)).collect();
        DownLog { first, terms }
    }
}

impl Node {
    /// Whether this node's journal (live, or as it went down) holds the entry of `term` at
    /// `index`, itself or in the snapshot its log starts after.
    fn holds(&self, index: u64, term: u64) -> bool {
        match (&self.group, &self.down_log) {
            (Some(g), _) => index < g.first_index() || g.log_term(index) == Some(term),
            (None, Some(d)) => index < d.first || d.terms.get((index - d.first) as usize) == Some(&term),
            (None, None) => false,
        }
    }
}

/// The quorum invariant of a move: with `conf` the group's newest configuration and `holders`
/// the nodes whose journals hold the newest acknowledged entry (at `ack_index`; by Raft's log
/// matching they hold every acknowledged entry before it too), no set of voters that lack it may
/// be able to elect a leader, which would then not have it. Outside joint consensus, such a set
/// must not be a quorum (a majority) of the voters. During joint consensus a leader needs a
/// quorum of the outgoing voters (with one of the incoming: a joint quorum; alone: a node that
/// has not applied the change yet), so no quorum of the outgoing voters may lack it; the
/// incoming voters are held to the same once they decide alone (the configuration after the
/// joint one), which the group reaches only by committing its leave on a quorum of them. They
/// are not held to it during joint consensus: the `raft` crate's leader counts a configuration
/// from when it applies it, so the entries it commits together with the joint change (after it
/// in the log) are committed by the outgoing voters alone. Returns what is wrong, if anything.
pub fn quorum_violation(conf: &ConfState, ack_index: u64, holders: &BTreeSet<u64>) -> Option<String> {
    let (voters, which) = match conf.voters_outgoing.is_empty() {
        true => (&conf.voters, "the"),
        false => (&conf.voters_outgoing, "the outgoing"),
    };
    let lacking: Vec<u64> = voters.iter().copied().filter(|v| !holders.contains(v)).collect();
    let quorum = voters.len() / 2 + 1;
    (lacking.len() >= quorum).then(|| {
        format!("{which} voters {voters:?}: {lacking:?} lack the acknowledged entry {ack_index} and are a quorum ({quorum}); it is held by {holders:?}")
    })
}

/// A configuration with its ids sorted (comparable whatever order a node holds them in).
fn sorted(mut conf: ConfState) -> ConfState {
    for ids in [&mut conf.voters, &mut conf.learners, &mut conf.voters_outgoing, &mut conf.learners_next] {
        ids.sort_unstable();
    }
    conf
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
    /// Moves not done yet.
    moves: VecDeque<Move>,
    /// The newest configuration some node applied, and the index it is in force from.
    newest_conf: (u64, ConfState),
    /// The newest acknowledged entry's index and term.
    newest_ack: Option<(u64, u64)>,
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
        let named = scenario.moves.iter().flat_map(|m| [m.parts().0, m.parts().1]).flatten().max().unwrap_or(0);
        let mut sim = Sim {
            moves: scenario.moves.iter().copied().collect(),
            newest_conf: (0, ConfState { voters: voters.clone(), ..Default::default() }),
            newest_ack: None,
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
        sim.history.configurations.push(sim.newest_conf.1.clone());
        for id in 1..=sim.scenario.nodes.max(named) {
            let dir = sim._dirs.path().join(format!("node-{id}"));
            let state_dir = sim._dirs.path().join(format!("node-{id}-state"));
            std::fs::create_dir_all(&state_dir).expect("state dir");
            let mut node = Node { id, dir, state_dir, ..Node::placeholder() };
            if id <= sim.scenario.nodes {
                node.joined = true;
                sim.start(&mut node);
            } else {
                // joins when its move starts
                node.restart_at = u64::MAX;
            }
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
            // a node a move adds starts without a configuration (its first snapshot brings it)
            joining: node.id > self.scenario.nodes,
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

    /// A node's group goes down (its run's refused chunks are counted, its journal noted).
    fn stop(history: &mut History, node: &mut Node) {
        if let Some(group) = node.group.take() {
            history.chunks_refused += group.snapshot_stats().chunks_refused;
            node.down_log = Some(DownLog::of(&group));
        }
    }

    fn live(&self) -> usize {
        self.nodes.iter().filter(|n| n.group.is_some()).count()
    }

    /// Nodes in the simulation: started, and not removed by a move.
    fn active(&self) -> usize {
        self.nodes.iter().filter(|n| n.joined && !n.retired).count()
    }

    /// Starts and heals partitions, crashes and restarts nodes.
    fn chaos(&mut self) {
        if let Some((_, heal_at)) = &self.partition {
            if self.step >= *heal_at {
                self.partition = None;
            }
        } else if self.rng.chance(self.scenario.partition) {
            let n = self.nodes.len() as u64;
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
        let down = self.active() - self.live();
        if (down + 1) * 2 < self.active() && self.rng.chance(self.scenario.crash) {
            let leader = self.nodes.iter().position(|n| n.group.as_ref().is_some_and(|g| g.is_leader()));
            let victim = match leader {
                Some(leader) if self.rng.chance(0.5) => leader,
                _ => self.rng.below(self.nodes.len() as u64) as usize,
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
            joined: false,
            retired: false,
            down_log: None,
        }
    }
}

impl Sim {
    /// Heals everything, restarts every node and runs without loss until every node applied
    /// all the leader committed.
    fn calm(&mut self) {
        self.partition = None;
        for i in 0..self.nodes.len() {
            if self.nodes[i].group.is_none() && self.nodes[i].joined && !self.nodes[i].retired {
                let mut node = std::mem::replace(&mut self.nodes[i], Node::placeholder());
                node.run += 1;
                self.start(&mut node);
                self.nodes[i] = node;
            }
        }
        for _ in 0..self.scenario.calm_steps {
            self.advance(false);
            if self.converged() {
                for node in self.nodes.iter().filter(|n| n.joined && !n.retired) {
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
            .filter(|n| n.joined && !n.retired)
            .map(|n| {
                let g = n.group.as_ref().expect("up");
                (n.id, g.term(), g.is_leader(), g.commit_index(), g.last_index(), n.applied, sorted(g.conf_state()))
            })
            .collect();
        panic!(
            "no convergence after {} calm steps (moves left: {:?}): (node, term, leads, commit, last, applied, configuration) {state:?}",
            self.scenario.calm_steps, self.moves
        );
    }

    /// A leader holds its term's entries up to its last index committed, and every node applied
    /// them all.
    fn converged(&self) -> bool {
        let Some(leader) = self.nodes.iter().filter_map(|n| n.group.as_ref()).find(|g| g.is_leader()) else { return false };
        let done = leader.commit_index();
        self.moves.is_empty()
            && done == leader.last_index()
            && self.nodes.iter().filter(|n| n.joined && !n.retired).all(|n| n.applied == done)
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
                let taken = match wire {
                    Wire::Raft(message) => group.step(*message),
                    Wire::Snapshot(packet) => group.receive_snapshot(packet),
                };
                match taken {
                    Ok(()) => {}
                    // a node removed by a move, or not known yet to a node behind on the moves
                    Err(ReplicationError::UnknownPeer(_)) if !self.scenario.moves.is_empty() => self.history.from_non_members += 1,
                    Err(e) => panic!("node {to} fails to take a message from node {from}: {e}"),
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
        if self.step >= self.scenario.moves_from {
            self.move_replicas();
        }
        self.check_quorum();
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
                self.history.acknowledged.push(Acknowledged { data: c.data.clone(), index: c.index, term: c.term, node: node.id });
                if self.newest_ack.is_none_or(|(index, _)| index < c.index) {
                    self.newest_ack = Some((c.index, c.term));
                }
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

impl Sim {
    /// The leader of the highest term among the live nodes, by index.
    fn leader(&self) -> Option<usize> {
        (0..self.nodes.len())
            .filter(|&i| self.nodes[i].group.as_ref().is_some_and(|g| g.is_leader()))
            .max_by_key(|&i| self.nodes[i].group.as_ref().map_or(0, |g| g.term()))
    }

    /// Takes the next step of the move under way on the leader, as the broker would: each step
    /// looks at the leader's configuration and asks for what is missing (a proposal lost with
    /// a leader is asked again of the next one).
    fn move_replicas(&mut self) {
        let Some(&next) = self.moves.front() else { return };
        let Some(l) = self.leader() else { return };
        let leader_id = self.nodes[l].id;
        let conf = self.nodes[l].group.as_ref().expect("up").conf_state();
        if !conf.voters_outgoing.is_empty() {
            // joint consensus: the leader proposes to leave it by itself
            return;
        }
        let (add, remove) = next.parts();
        let added = add.is_none_or(|a| conf.voters.contains(&a));
        let removed = remove.is_none_or(|r| !conf.voters.contains(&r) && !conf.learners.contains(&r));
        if added && removed {
            if let Some(r) = remove {
                self.retire(r);
            }
            self.moves.pop_front();
            self.history.moves_done.push((self.step, next));
            return;
        }
        if let (Some(a), false) = (add, added) {
            self.join(a);
            if !conf.learners.contains(&a) {
                // the learner catches up from a snapshot: the leader's log must be compacted
                if self.nodes[l].group.as_ref().expect("up").first_index() <= 1 {
                    self.checkpoint_node(l);
                }
                let _ = self.nodes[l].group.as_mut().expect("up").add_learner(a);
                return;
            }
            let group = self.nodes[l].group.as_ref().expect("up");
            if !group.caught_up(a) {
                // the snapshot it is sent must carry the configuration naming it
                let conf_index = group.conf_index();
                if self.nodes[l].checkpointed < conf_index && self.nodes[l].applied >= conf_index {
                    self.checkpoint_node(l);
                }
                return;
            }
            match remove {
                None => {
                    let _ = self.nodes[l].group.as_mut().expect("up").promote_learner(a);
                }
                Some(r) if r == leader_id => self.hand_over(l, r),
                Some(r) => {
                    let _ = self.nodes[l].group.as_mut().expect("up").replace_voter(a, r);
                }
            }
            return;
        }
        let r = remove.expect("a move adds or removes");
        if r == leader_id {
            self.hand_over(l, r);
        } else {
            let _ = self.nodes[l].group.as_mut().expect("up").remove_voter(r);
        }
    }

    /// The leader `l` is to leave: it hands its leadership to another voter first.
    fn hand_over(&mut self, l: usize, leaving: u64) {
        let group = self.nodes[l].group.as_mut().expect("up");
        if group.transferring_to().is_none() {
            if let Some(&to) = group.conf_state().voters.iter().find(|&&v| v != leaving) {
                group.transfer_leader(to);
            }
        }
    }

    /// Starts node `id`, which a move adds, unless it runs already.
    fn join(&mut self, id: u64) {
        let i = id as usize - 1;
        if self.nodes[i].joined {
            return;
        }
        let mut node = std::mem::replace(&mut self.nodes[i], Node::placeholder());
        node.joined = true;
        self.start(&mut node);
        self.nodes[i] = node;
    }

    /// Stops node `id`, which a move removed, for good.
    fn retire(&mut self, id: u64) {
        let node = &mut self.nodes[id as usize - 1];
        Self::stop(&mut self.history, node);
        node.outbox.lock().expect("outbox").clear();
        node.retired = true;
        node.crash_next = false;
        node.restart_at = u64::MAX;
    }

    /// Node `i` checkpoints its state and compacts its log there.
    fn checkpoint_node(&mut self, i: usize) {
        let node = &mut self.nodes[i];
        checkpoint(&node.state_dir, node.applied, node.digest);
        node.checkpointed = node.applied;
        node.group.as_mut().expect("up").compact(node.applied).expect("compaction");
    }

    /// Notes the newest configuration applied, and checks [`quorum_violation`] for it.
    fn check_quorum(&mut self) {
        for node in &self.nodes {
            let Some(g) = &node.group else { continue };
            let index = g.conf_index();
            if index > self.newest_conf.0 {
                // a snapshot carries the configuration in force at its index: not a new one
                let conf = sorted(g.conf_state());
                if conf != self.newest_conf.1 {
                    self.history.configurations.push(conf.clone());
                    self.newest_conf = (index, conf);
                }
            }
        }
        let Some((index, term)) = self.newest_ack else { return };
        let holders: BTreeSet<u64> = self.nodes.iter().filter(|n| n.holds(index, term)).map(|n| n.id).collect();
        self.history.quorum_checks += 1;
        if let Some(wrong) = quorum_violation(&self.newest_conf.1, index, &holders) {
            self.history.quorum_violations.push(format!("step {}: {wrong}", self.step));
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
