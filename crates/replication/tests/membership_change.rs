//! Moving a replica with Raft membership changes (the `raft` crate's joint consensus, as Zeebe
//! moves partition replicas when brokers are added: docs.camunda.io, "Cluster scaling"): a new
//! replica joins as a learner, catches up by the leader's snapshot and then the log, is
//! promoted while the old one is removed in one joint change, and the group leaves the joint
//! configuration by itself. Proposals commit throughout; the group never has fewer voters than
//! before; every member converges to the same state; the configuration survives a restart.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use waggle_replication::{Committed, Message, RaftGroup, ReplicaConfig, SnapshotPacket, SnapshotSource, Transport};

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

/// A node's checkpoints, `<dir>/<index>/state`.
struct Checkpoints(PathBuf);

impl SnapshotSource for Checkpoints {
    fn files_at(&self, index: u64, _term: u64) -> Option<PathBuf> {
        Some(self.0.join(index.to_string())).filter(|d| d.is_dir())
    }
}

/// A digest chained over the applied entries.
#[derive(Default, Clone, Copy, Debug, PartialEq)]
struct State {
    applied: u64,
    digest: u64,
}

impl State {
    fn apply(&mut self, c: Committed) {
        assert!(c.index > self.applied, "applied out of order: {} after {}", c.index, self.applied);
        self.applied = c.index;
        if !c.data.is_empty() {
            self.digest = self.digest.rotate_left(5) ^ c.index ^ c.data.iter().fold(0u64, |h, b| h.wrapping_mul(31) + u64::from(*b));
        }
    }
}

const NODES: usize = 4;

struct Cluster {
    root: tempfile::TempDir,
    groups: Vec<Option<RaftGroup>>,
    states: Vec<State>,
    outbox: Outbox,
    proposed: u64,
}

impl Cluster {
    fn log_dir(&self, i: usize) -> PathBuf {
        self.root.path().join(format!("log-{i}"))
    }

    fn state_dir(&self, i: usize) -> PathBuf {
        self.root.path().join(format!("state-{i}"))
    }

    /// Opens node `i` (Raft id `i + 1`): a voter of {1, 2, 3}, or joining.
    fn start(&mut self, i: usize, joining: bool) {
        let config = ReplicaConfig { joining, ..ReplicaConfig::new(i as u64 + 1, if joining { vec![] } else { vec![1, 2, 3] }) };
        let mut g = RaftGroup::open_replicated(&self.log_dir(i), self.states[i].applied, config, Box::new(self.outbox.clone())).unwrap();
        std::fs::create_dir_all(self.state_dir(i)).unwrap();
        g.set_snapshot_source(Arc::new(Checkpoints(self.state_dir(i))));
        self.groups[i] = Some(g);
    }

    fn leader(&self) -> Option<usize> {
        (0..NODES).find(|&i| self.groups[i].as_ref().is_some_and(|g| g.is_leader()))
    }

    fn group(&mut self, i: usize) -> &mut RaftGroup {
        self.groups[i].as_mut().expect("up")
    }

    /// One round: every node ticks and drives (adopting a snapshot it installed), then what
    /// was sent is delivered (messages to a node not up, or from outside its group, are lost).
    fn round(&mut self) {
        for i in 0..NODES {
            let Some(g) = self.groups[i].as_mut() else { continue };
            g.tick();
            let committed = g.drive().unwrap();
            let installed = g.take_installed();
            for c in committed {
                self.states[i].apply(c);
            }
            if let Some(s) = installed {
                let text = std::fs::read_to_string(s.dir.join("state")).unwrap();
                let (applied, digest) = text.split_once(' ').unwrap();
                self.states[i] = State { applied: applied.parse().unwrap(), digest: digest.parse().unwrap() };
                assert_eq!(self.states[i].applied, s.index);
            }
        }
        let sent = std::mem::take(&mut *self.outbox.0.lock().unwrap());
        for w in sent {
            match w {
                Wire::Raft(m) => {
                    if let Some(g) = self.groups[m.to as usize - 1].as_mut() {
                        let _ = g.step(*m);
                    }
                }
                Wire::Snapshot(p) => {
                    if let Some(g) = self.groups[p.to as usize - 1].as_mut() {
                        let _ = g.receive_snapshot(p);
                    }
                }
            }
        }
    }

    /// Rounds until `done` (at most `max`), proposing an entry on the leader every round if
    /// `propose`, and checking that the leader's configuration never has fewer than 3 voters.
    fn run_until(&mut self, max: usize, propose: bool, what: &str, done: impl Fn(&Cluster) -> bool) {
        for _ in 0..max {
            if done(self) {
                return;
            }
            if let Some(l) = self.leader().filter(|_| propose) {
                self.proposed += 1;
                let entry = format!("\x01entry {}", self.proposed).into_bytes();
                let _ = self.group(l).propose(entry);
                let voters = self.group(l).conf_state().voters.len();
                assert!(voters >= 3, "the leader's configuration has {voters} voters");
            }
            self.round();
        }
        panic!("not {what} after {max} rounds: states {:?}", self.states);
    }

    /// A checkpoint of node `i`'s state, and its log compacted to it.
    fn snapshot(&mut self, i: usize) {
        let state = self.states[i];
        let at = self.state_dir(i).join(state.applied.to_string());
        std::fs::create_dir_all(&at).unwrap();
        std::fs::write(at.join("state"), format!("{} {}", state.applied, state.digest)).unwrap();
        self.group(i).compact(state.applied).unwrap();
    }
}

fn voters(g: &RaftGroup) -> Vec<u64> {
    let mut v = g.conf_state().voters;
    v.sort_unstable();
    v
}

/// Replicas 1-3 started as voters, a leader elected and 20 entries applied on each: the
/// cluster and the leader's index.
fn three_voters_committing() -> (Cluster, usize) {
    let root = tempfile::tempdir().unwrap();
    let mut c = Cluster {
        root,
        groups: (0..NODES).map(|_| None).collect(),
        states: vec![State::default(); NODES],
        outbox: Outbox::default(),
        proposed: 0,
    };
    for i in 0..3 {
        c.start(i, false);
    }
    c.run_until(200, false, "a leader elected", |c| c.leader().is_some());
    c.run_until(50, true, "entries committed", |c| c.states.iter().take(3).all(|s| s.applied >= 20));
    let leader = c.leader().unwrap();
    (c, leader)
}

#[test]
fn a_replica_moves_by_learner_catch_up_and_joint_consensus() {
    let (mut c, leader) = three_voters_committing();

    // a learner cannot be added before the leader has a snapshot to send it
    assert!(c.group(leader).add_learner(4).is_err());
    c.snapshot(leader);
    c.start(3, true);
    assert!(!c.groups[3].as_ref().unwrap().has_conf());
    c.group(leader).add_learner(4).unwrap();
    assert!(c.group(leader).add_learner(4).is_err(), "one change at a time");
    c.run_until(50, true, "the learner added", |c| c.groups[leader].as_ref().unwrap().conf_state().learners == [4]);
    // the snapshot it gets must hold the configuration that names it: one taken after adding it
    c.snapshot(leader);
    c.run_until(300, true, "the learner caught up", |c| c.groups[leader].as_ref().unwrap().caught_up(4));
    let learner = c.groups[3].as_ref().unwrap();
    assert!(learner.has_conf() && learner.conf_state().learners == [4] && !learner.is_leader());

    // promote 4 and remove a follower in one joint change; the group leaves it by itself
    let remove = (0..3).find(|&i| i != leader).unwrap() as u64 + 1;
    c.group(leader).replace_voter(4, remove).unwrap();
    let mut expected: Vec<u64> = [1, 2, 3, 4].into_iter().filter(|&v| v != remove).collect();
    expected.sort_unstable();
    c.run_until(300, true, "the joint configuration left", |c| {
        let g = c.groups[leader].as_ref().unwrap();
        voters(g) == expected && g.conf_state().voters_outgoing.is_empty() && g.conf_state().learners.is_empty()
    });
    // every member applies the same configuration and converges to the same state
    let members: Vec<usize> = expected.iter().map(|&v| v as usize - 1).collect();
    c.run_until(300, false, "the members converged", |c| {
        let target = c.states[leader].applied;
        members.iter().all(|&i| {
            let g = c.groups[i].as_ref().unwrap();
            c.states[i].applied == target && voters(g) == expected && g.conf_state().voters_outgoing.is_empty()
        })
    });
    let digests: BTreeMap<usize, State> = members.iter().map(|&i| (i, c.states[i])).collect();
    assert!(digests.values().all(|s| *s == digests[&leader]), "{digests:?}");
    assert!(!c.groups[leader].as_ref().unwrap().is_member(remove));

    // the new voter's configuration is persisted: it restarts as a voter of the new group
    let applied = c.states[3].applied;
    c.groups[3] = None;
    c.states[3].applied = applied;
    c.start(3, false);
    assert_eq!(voters(c.groups[3].as_ref().unwrap()), expected);
    // and the group goes on committing with the removed node gone
    c.groups[remove as usize - 1] = None;
    let before = c.states[leader].applied;
    c.run_until(300, true, "commits after the move", |c| members.iter().all(|&i| c.states[i].applied > before + 10));
}

/// The two steps the broker's partition join and leave take apart (Zeebe 8.5's
/// `POST` / `DELETE /actuator/cluster/brokers/{id}/partitions/{id}`): a caught-up learner is
/// promoted on its own (the group has a voter more), and a follower is removed on its own
/// afterwards; the group never has fewer voters than it started with, and commits throughout.
#[test]
fn a_learner_is_promoted_and_a_voter_removed_in_two_changes() {
    let (mut c, leader) = three_voters_committing();
    c.snapshot(leader);
    c.start(3, true);
    // a node that is not a learner is not promoted
    assert!(c.group(leader).promote_learner(4).is_err());
    c.group(leader).add_learner(4).unwrap();
    c.run_until(50, true, "the learner added", |c| c.groups[leader].as_ref().unwrap().conf_state().learners == [4]);
    c.snapshot(leader);
    c.run_until(300, true, "the learner caught up", |c| c.groups[leader].as_ref().unwrap().caught_up(4));
    c.group(leader).promote_learner(4).unwrap();
    c.run_until(100, true, "the learner promoted", |c| voters(c.groups[leader].as_ref().unwrap()) == [1, 2, 3, 4]);
    // the leader does not remove itself; a follower is removed
    let me = leader as u64 + 1;
    assert!(c.group(leader).remove_voter(me).is_err());
    let remove = (0..3).find(|&i| i != leader).unwrap() as u64 + 1;
    c.group(leader).remove_voter(remove).unwrap();
    let expected: Vec<u64> = [1, 2, 3, 4].into_iter().filter(|&v| v != remove).collect();
    c.run_until(100, true, "the follower removed", |c| voters(c.groups[leader].as_ref().unwrap()) == expected);
    let members: Vec<usize> = expected.iter().map(|&v| v as usize - 1).collect();
    c.groups[remove as usize - 1] = None;
    let before = c.states[leader].applied;
    c.run_until(300, true, "commits after the move", |c| members.iter().all(|&i| c.states[i].applied > before + 10));
    c.run_until(300, false, "the members converged", |c| {
        let target = c.states[leader].applied;
        members.iter().all(|&i| c.states[i].applied == target)
    });
    assert!(members.iter().all(|&i| c.states[i] == c.states[leader]));
}
