//! A follower stopped while the leader goes on and compacts its log past the follower's last
//! entry comes back: it is sent the leader's snapshot (the files of its checkpoint, in chunks with
//! checksums), installs it, takes the log after it and converges. A corrupted chunk is refused
//! and sent again; a transfer cut by a crash is never used; a snapshot whose files go during its
//! transfer is still sent whole (its files were opened when it was offered), and the newer one
//! after it; a snapshot installed in the journal
//! before a crash is handed to the owner again when the group reopens.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use waggle_replication::{
    Committed, InstalledSnapshot, Message, PacketBody, RaftGroup, ReplicaConfig, ReplicationError, SnapshotPacket, SnapshotSource,
    Transport,
};

const CHUNK: usize = 64 << 10;

enum Wire {
    Raft(Box<Message>),
    Snapshot(SnapshotPacket),
}

#[derive(Clone, Default)]
struct Outbox(Arc<Mutex<Vec<Wire>>>);

impl Transport for Outbox {
    fn send(&mut self, messages: Vec<Message>) {
        self.0.lock().unwrap().extend(messages.into_iter().map(|m| Wire::Raft(Box::new(m))));
    }

    fn send_snapshot(&mut self, packets: Vec<SnapshotPacket>) {
        self.0.lock().unwrap().extend(packets.into_iter().map(Wire::Snapshot));
    }
}

/// A node's checkpoints, `<dir>/<index>/`.
struct Checkpoints(PathBuf);

impl SnapshotSource for Checkpoints {
    fn files_at(&self, index: u64, _term: u64) -> Option<PathBuf> {
        Some(self.0.join(index.to_string())).filter(|d| d.is_dir())
    }
}

/// A node's state machine: a digest chained over the applied entries, and the entries.
#[derive(Default, Clone)]
struct State {
    applied: u64,
    digest: u64,
    entries: BTreeMap<u64, Vec<u8>>,
}

impl State {
    fn apply(&mut self, c: Committed) {
        assert_eq!(c.index, self.applied + 1, "applied out of order");
        self.applied = c.index;
        if !c.data.is_empty() {
            self.digest = self.digest.rotate_left(5) ^ c.index ^ c.data.iter().fold(0u64, |h, b| h.wrapping_mul(31) + u64::from(*b));
            self.entries.insert(c.index, c.data);
        }
    }
}

/// Writes a checkpoint of `state`: `state` (index and digest), a 300 KB `data.sst` derived from
/// the digest (several chunks) and an empty `LOCK`.
fn checkpoint(dir: &Path, state: &State) -> PathBuf {
    let at = dir.join(state.applied.to_string());
    std::fs::create_dir_all(&at).unwrap();
    std::fs::write(at.join("state"), format!("{} {}", state.applied, state.digest)).unwrap();
    let mut x = state.digest | 1;
    let data: Vec<u8> = (0..300_000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    std::fs::write(at.join("data.sst"), data).unwrap();
    std::fs::write(at.join("LOCK"), b"").unwrap();
    at
}

/// A directory's files by name.
type Files = BTreeMap<String, Vec<u8>>;

fn read_dir(dir: &Path) -> Files {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .map(|e| (e.file_name().into_string().unwrap(), std::fs::read(e.path()).unwrap()))
        .collect()
}

struct Cluster {
    root: tempfile::TempDir,
    groups: Vec<Option<RaftGroup>>,
    states: Vec<State>,
    outbox: Outbox,
    /// Chunks to corrupt on their way to a node, by node index.
    corrupt: BTreeMap<usize, usize>,
    /// Snapshots installed and the files they held, by node index.
    installed: Vec<Vec<(InstalledSnapshot, Files)>>,
    /// A node whose owner does not take an installed snapshot (it crashes first), and the
    /// snapshot its group holds for it.
    hold: Option<usize>,
    held: Option<InstalledSnapshot>,
}

impl Cluster {
    fn new() -> Self {
        let root = tempfile::tempdir().unwrap();
        let mut c = Cluster {
            root,
            groups: (0..3).map(|_| None).collect(),
            states: vec![State::default(); 3],
            outbox: Outbox::default(),
            corrupt: BTreeMap::new(),
            installed: vec![Vec::new(); 3],
            hold: None,
            held: None,
        };
        for i in 0..3 {
            c.start(i);
        }
        c
    }

    fn log_dir(&self, i: usize) -> PathBuf {
        self.root.path().join(format!("log-{i}"))
    }

    fn state_dir(&self, i: usize) -> PathBuf {
        self.root.path().join(format!("state-{i}"))
    }

    fn start(&mut self, i: usize) -> Option<InstalledSnapshot> {
        let config = ReplicaConfig { snapshot_chunk_bytes: CHUNK, ..ReplicaConfig::new(i as u64 + 1, vec![1, 2, 3]) };
        let mut g = RaftGroup::open_replicated(&self.log_dir(i), self.states[i].applied, config, Box::new(self.outbox.clone())).unwrap();
        std::fs::create_dir_all(self.state_dir(i)).unwrap();
        g.set_snapshot_source(Arc::new(Checkpoints(self.state_dir(i))));
        let pending = g.take_installed();
        self.groups[i] = Some(g);
        pending
    }

    fn stop(&mut self, i: usize) {
        self.groups[i] = None;
    }

    fn group(&mut self, i: usize) -> &mut RaftGroup {
        self.groups[i].as_mut().expect("up")
    }

    /// One round: every live node ticks and drives (taking a snapshot it installed), then what
    /// was sent is delivered (what is for a stopped node is lost).
    fn round(&mut self, tick: bool) {
        for i in 0..3 {
            let Some(g) = self.groups[i].as_mut() else { continue };
            if tick {
                g.tick();
            }
            if self.hold == Some(i) {
                match g.drive() {
                    Err(ReplicationError::SnapshotNotTaken(index)) => {
                        // not taken: the group refuses to go on
                        assert_eq!(self.held.as_ref().expect("held").index, index);
                        continue;
                    }
                    Err(e) => panic!("{e}"),
                    Ok(committed) => committed.into_iter().for_each(|c| self.states[i].apply(c)),
                }
                self.held = g.installed().cloned();
                continue;
            }
            let committed = g.drive().unwrap();
            let installed = g.take_installed();
            for c in committed {
                self.states[i].apply(c);
            }
            if let Some(s) = installed {
                self.adopt(i, s);
            }
        }
        let sent = std::mem::take(&mut *self.outbox.0.lock().unwrap());
        for w in sent {
            match w {
                Wire::Raft(m) => {
                    if let Some(g) = self.groups[m.to as usize - 1].as_mut() {
                        g.step(*m).unwrap();
                    }
                }
                Wire::Snapshot(mut p) => {
                    let to = p.to as usize - 1;
                    if let PacketBody::Chunk { data, .. } = &mut p.body {
                        if let Some(n) = self.corrupt.get_mut(&to).filter(|n| **n > 0) {
                            *n -= 1;
                            data[100] ^= 0x40;
                        }
                    }
                    if let Some(g) = self.groups[to].as_mut() {
                        g.receive_snapshot(p).unwrap();
                    }
                }
            }
        }
    }

    /// The owner's side of an installed snapshot: its files become the node's state.
    fn adopt(&mut self, i: usize, s: InstalledSnapshot) {
        let files = read_dir(&s.dir);
        let text = String::from_utf8(files["state"].clone()).unwrap();
        let (index, digest) = text.split_once(' ').unwrap();
        let index: u64 = index.parse().unwrap();
        assert_eq!(index, s.index);
        self.states[i] = State { applied: index, digest: digest.parse().unwrap(), entries: BTreeMap::new() };
        let target = self.state_dir(i).join(index.to_string());
        std::fs::rename(&s.dir, target).unwrap();
        self.installed[i].push((s, files));
    }

    fn leader(&mut self) -> usize {
        for _ in 0..300 {
            self.round(true);
            let leaders: Vec<_> = (0..3).filter(|&i| self.groups[i].as_ref().is_some_and(|g| g.is_leader())).collect();
            if let [l] = leaders[..] {
                return l;
            }
        }
        panic!("no leader");
    }

    /// Proposes `n` entries to the leader and runs until the live nodes applied them.
    fn propose(&mut self, leader: usize, from: u64, n: u64) {
        for k in from..from + n {
            self.group(leader).propose(format!("\x01entry {k} {}", "x".repeat(500)).into_bytes()).unwrap();
        }
        self.settle(leader);
    }

    /// Runs until every live node applied all the leader committed (its last index).
    fn settle(&mut self, leader: usize) {
        for _ in 0..500 {
            self.round(true);
            let last = self.group(leader).last_index();
            let done = self.group(leader).commit_index() == last;
            if done && (0..3).all(|i| self.groups[i].is_none() || self.states[i].applied == last) {
                return;
            }
        }
        panic!("the live nodes did not apply everything");
    }

    /// The leader and the other live node checkpoint and compact at what they applied.
    fn checkpoint_and_compact(&mut self, except: usize) {
        for i in (0..3).filter(|&i| i != except) {
            checkpoint(&self.state_dir(i), &self.states[i]);
            let applied = self.states[i].applied;
            self.group(i).compact(applied).unwrap();
        }
    }
}

/// Stops a follower, moves the log on and compacts it past the follower on the others; returns
/// (leader, follower, the leader's checkpoint dir).
fn leave_a_follower_behind(c: &mut Cluster) -> (usize, usize, PathBuf) {
    let leader = c.leader();
    c.propose(leader, 0, 10);
    let f = (leader + 1) % 3;
    c.stop(f);
    let behind = c.states[f].applied;
    c.propose(leader, 10, 200);
    c.checkpoint_and_compact(f);
    assert!(c.group(leader).first_index() > behind + 1, "the log is compacted past the stopped follower");
    let snapshot = c.state_dir(leader).join(c.states[leader].applied.to_string());
    (leader, f, snapshot)
}

/// `installs`: the snapshots the follower's group installed in its current run.
fn assert_converged(c: &mut Cluster, leader: usize, f: usize, snapshot: &Path, installs: u64) {
    let (installed, files) = c.installed[f].last().expect("a snapshot installed").clone();
    assert_eq!(files, read_dir(snapshot), "the received files differ from the leader's");
    assert_eq!(installed.index, snapshot.file_name().unwrap().to_str().unwrap().parse::<u64>().unwrap());
    assert!(!installed.dir.exists(), "the owner took the directory");
    // the log after it: new entries reach the follower too
    c.propose(leader, 210, 20);
    assert_eq!(c.states[f].applied, c.states[leader].applied);
    assert_eq!(c.states[f].digest, c.states[leader].digest, "the states differ");
    let after: Vec<_> = c.states[f].entries.iter().collect();
    let leader_after: Vec<_> = c.states[leader].entries.range(installed.index + 1..).collect();
    assert!(!after.is_empty());
    assert_eq!(after, leader_after, "the entries after the snapshot differ");
    assert_eq!(c.group(f).first_index(), installed.index + 1, "the follower's journal starts after the snapshot");
    let stats = c.group(f).snapshot_stats();
    assert_eq!(stats.installed, installs);
    assert!(c.group(leader).snapshot_stats().completed >= 1);
}

#[test]
fn a_follower_behind_the_compacted_log_gets_the_snapshot_then_the_log() {
    let mut c = Cluster::new();
    let (leader, f, snapshot) = leave_a_follower_behind(&mut c);
    assert!(c.start(f).is_none());
    c.settle(leader);
    assert_converged(&mut c, leader, f, &snapshot, 1);
    assert_eq!(c.group(f).snapshot_stats().chunks_refused, 0);
    assert!(c.group(leader).snapshot_stats().chunks_sent >= 5, "300 KB in 64 KB chunks");
}

#[test]
fn a_corrupted_chunk_is_refused_and_sent_again() {
    let mut c = Cluster::new();
    let (leader, f, snapshot) = leave_a_follower_behind(&mut c);
    c.corrupt.insert(f, 2);
    c.start(f);
    c.settle(leader);
    assert_eq!(c.corrupt[&f], 0, "the chunks were corrupted");
    assert!(c.group(f).snapshot_stats().chunks_refused >= 2, "corrupted chunks were taken");
    assert_converged(&mut c, leader, f, &snapshot, 1);
}

#[test]
fn a_transfer_cut_by_a_crash_is_not_used_and_starts_again() {
    let mut c = Cluster::new();
    let (leader, f, snapshot) = leave_a_follower_behind(&mut c);
    c.start(f);
    let tmp_exists = |c: &Cluster| {
        let dir = c.log_dir(f).join(waggle_replication::RECEIVED_SNAPSHOTS_DIR);
        std::fs::read_dir(dir).is_ok_and(|mut d| d.any(|e| e.unwrap().file_name().to_string_lossy().ends_with(".tmp")))
    };
    for _ in 0..50 {
        c.round(true);
        if tmp_exists(&c) {
            break;
        }
    }
    assert!(tmp_exists(&c), "no transfer started");
    c.stop(f);
    c.outbox.0.lock().unwrap().clear();
    assert!(c.start(f).is_none(), "a cut transfer was handed over");
    assert!(!tmp_exists(&c), "the cut transfer was left behind");
    c.settle(leader);
    assert_converged(&mut c, leader, f, &snapshot, 1);
}

#[test]
fn a_snapshot_installed_before_a_crash_is_handed_over_again_at_open() {
    let mut c = Cluster::new();
    let (leader, f, snapshot) = leave_a_follower_behind(&mut c);
    c.hold = Some(f);
    c.start(f);
    for _ in 0..100 {
        c.round(true);
        if c.held.is_some() {
            break;
        }
    }
    c.round(true);
    let held = c.held.clone().expect("the follower installed the snapshot");
    assert!(held.dir.is_dir());
    // a crash before the owner replaced its state: it reopens with the old state
    c.stop(f);
    c.hold = None;
    let pending = c.start(f).expect("the installed snapshot is handed over again");
    assert_eq!(pending, held);
    c.adopt(f, pending);
    c.settle(leader);
    assert_converged(&mut c, leader, f, &snapshot, 0);
}

#[test]
fn a_snapshot_removed_during_its_transfer_is_sent_whole_and_the_newer_one_after_it() {
    let mut c = Cluster::new();
    let (leader, f, old) = leave_a_follower_behind(&mut c);
    let old_files = read_dir(&old);
    // the leader checkpoints again (the owner keeps the older one until it compacts)
    c.propose(leader, 210, 20);
    let newer = checkpoint(&c.state_dir(leader), &c.states[leader]);
    c.start(f);
    let tmp_exists = |c: &Cluster| {
        let dir = c.log_dir(f).join(waggle_replication::RECEIVED_SNAPSHOTS_DIR);
        std::fs::read_dir(dir).is_ok_and(|mut d| d.any(|e| e.unwrap().file_name().to_string_lossy().ends_with(".tmp")))
    };
    for _ in 0..50 {
        c.round(true);
        if tmp_exists(&c) {
            break;
        }
    }
    assert!(tmp_exists(&c), "no transfer started");
    // before a chunk is read: the older checkpoint goes (renamed away, then deleted, as the
    // `SnapshotSource` contract asks), the log is compacted to the newer one
    let away = old.with_extension("removed");
    std::fs::rename(&old, &away).unwrap();
    std::fs::remove_dir_all(&away).unwrap();
    let applied = c.states[leader].applied;
    c.group(leader).compact(applied).unwrap();
    c.settle(leader);
    // the transfer under way sent the files it had opened when it offered them: the
    // follower installed the older snapshot whole, then was sent the newer one
    let stats = c.group(leader).snapshot_stats();
    assert!(stats.abandoned == 0 && stats.completed >= 2, "{stats:?}");
    let (first, files) = c.installed[f].first().expect("a snapshot installed").clone();
    assert_eq!((first.index, files), (old.file_name().unwrap().to_str().unwrap().parse::<u64>().unwrap(), old_files));
    assert_converged(&mut c, leader, f, &newer, 2);
}
