use raft::storage::Storage;
use raft::GetEntriesContext;

use super::*;
use crate::storage::RECENT_ENTRIES;
fn drive_until(group: &mut RaftGroup, want: usize) -> Vec<Committed> {
    let mut all = Vec::new();
    for _ in 0..100 {
        all.extend(group.drive().unwrap());
        if all.iter().filter(|c| !c.data.is_empty()).count() >= want {
            break;
        }
    }
    all
}

#[test]
fn single_voter_commits_proposals_and_redelivers_unapplied_after_restart() {
    let dir = tempfile::tempdir().unwrap();
    let mut group = RaftGroup::open(dir.path(), 0).unwrap();
    group.drive().unwrap();
    assert!(group.is_leader());
    group.propose(b"\x01one".to_vec()).unwrap();
    group.propose(b"\x01two".to_vec()).unwrap();
    let committed = drive_until(&mut group, 2);
    let data: Vec<_> = committed.iter().filter(|c| !c.data.is_empty()).map(|c| c.data.clone()).collect();
    assert_eq!(data, vec![b"\x01one".to_vec(), b"\x01two".to_vec()]);
    let first_index = committed.iter().find(|c| !c.data.is_empty()).unwrap().index;
    drop(group);

    // state applied only the first entry: the second comes back after restart
    let mut group = RaftGroup::open(dir.path(), first_index).unwrap();
    let again = drive_until(&mut group, 1);
    let data: Vec<_> = again.iter().filter(|c| !c.data.is_empty()).map(|c| c.data.clone()).collect();
    assert_eq!(data, vec![b"\x01two".to_vec()]);
    assert!(group.is_leader());
}

#[test]
fn entries_of_the_last_append_are_served_as_the_journal_holds_them() {
    let dir = tempfile::tempdir().unwrap();
    let mut group = RaftGroup::open(dir.path(), 0).unwrap();
    group.drive().unwrap();
    for p in [&b"\x01first"[..], b"\x01second entry", b"\x01third"] {
        group.propose(p.to_vec()).unwrap();
    }
    drive_until(&mut group, 3);
    let storage = group.node.store().clone();
    // Raft asked for the committed entries of the last append once, all of them: taken
    assert!(storage.recent.lock().unwrap().is_empty());
    let from_journal = |low: u64, high: u64, max: Option<u64>| -> Vec<RaftEntry> {
        storage.journal.read().unwrap().entries(low, high, max).unwrap().into_iter().map(to_raft).collect()
    };
    // held again: the three proposals, as one append would hold them
    let last = storage.journal.read().unwrap().last_index();
    let first = last - 2;
    let held = from_journal(first, last + 1, None);
    let hold = || *storage.recent.lock().unwrap() = held.clone();
    for (low, high) in [(first, last + 1), (first + 1, last + 1), (first, first + 1)] {
        for max in [None, Some(0), Some(12), Some(1 << 20)] {
            hold();
            let served = storage.recent_entries(low, high, max).expect("held");
            assert_eq!(served, from_journal(low, high, max), "{low}..{high} max {max:?}");
            hold();
            let via_raft = Storage::entries(&storage, low, high, max, GetEntriesContext::empty(false)).unwrap();
            assert_eq!(via_raft, served);
        }
    }
    hold();
    // what the last append does not hold comes from the journal
    assert!(storage.recent_entries(first - 1, last + 1, None).is_none());
    // a request for all of them takes them: the next one reads the journal
    assert_eq!(storage.recent_entries(first, last + 1, None).expect("held"), from_journal(first, last + 1, None));
    assert!(storage.recent.lock().unwrap().is_empty());
    assert!(storage.recent_entries(first, last + 1, None).is_none());
    assert_eq!(Storage::entries(&storage, 1, last + 1, None, GetEntriesContext::empty(false)).unwrap(), from_journal(1, last + 1, None));
}

#[test]
fn recent_entries_span_several_appends_and_follow_overwrites() {
    let dir = tempfile::tempdir().unwrap();
    let group = RaftGroup::open(dir.path(), 0).unwrap();
    let storage = group.node.store().clone();
    let entry = |index: u64, term: u64| RaftEntry { index, term, data: vec![index as u8; 10], ..Default::default() };
    let indexes = |entries: &[RaftEntry]| entries.iter().map(|e| (e.index, e.term)).collect::<Vec<_>>();
    // two appends in a row (a leader with two batches in flight): both held
    storage.hold_recent(vec![entry(5, 1), entry(6, 1)]);
    storage.hold_recent(vec![entry(7, 1)]);
    assert_eq!(indexes(&storage.recent.lock().unwrap()), vec![(5, 1), (6, 1), (7, 1)]);
    // the first committed: taken from the front, the rest kept for the next commit
    assert_eq!(indexes(&storage.recent_entries(5, 7, None).unwrap()), vec![(5, 1), (6, 1)]);
    assert_eq!(indexes(&storage.recent.lock().unwrap()), vec![(7, 1)]);
    // an append that overwrites held entries (a follower's log repaired) replaces them
    storage.hold_recent(vec![entry(8, 1), entry(9, 1)]);
    storage.hold_recent(vec![entry(8, 2)]);
    assert_eq!(indexes(&storage.recent.lock().unwrap()), vec![(7, 1), (8, 2)]);
    // one that does not follow them replaces them all
    storage.hold_recent(vec![entry(20, 2)]);
    assert_eq!(indexes(&storage.recent.lock().unwrap()), vec![(20, 2)]);
    // at most RECENT_ENTRIES, the newest kept
    storage.hold_recent((21..21 + RECENT_ENTRIES as u64 + 5).map(|i| entry(i, 2)).collect());
    let held = storage.recent.lock().unwrap().clone();
    assert_eq!(held.len(), RECENT_ENTRIES);
    assert_eq!(held.last().unwrap().index, 20 + RECENT_ENTRIES as u64 + 5);
}

fn payloads(committed: &[Committed]) -> Vec<Vec<u8>> {
    committed.iter().filter(|c| !c.data.is_empty()).map(|c| c.data.clone()).collect()
}

#[test]
fn restart_after_commit_index_was_not_persisted() {
    let dir = tempfile::tempdir().unwrap();
    let mut group = RaftGroup::open(dir.path(), 0).unwrap();
    group.drive().unwrap();
    for p in [&b"\x01a"[..], b"\x01b", b"\x01c"] {
        group.propose(p.to_vec()).unwrap();
    }
    let committed = drive_until(&mut group, 3);
    let last = committed.last().unwrap().index;
    drop(group);

    // the state machine applied everything: nothing comes back, new proposals commit
    let mut group = RaftGroup::open(dir.path(), last).unwrap();
    assert!(group.commit_index() >= last);
    group.drive().unwrap();
    group.propose(b"\x01d".to_vec()).unwrap();
    assert_eq!(payloads(&drive_until(&mut group, 1)), vec![b"\x01d".to_vec()]);
    drop(group);

    // the state machine applied nothing: every entry comes back once, in order
    let mut group = RaftGroup::open(dir.path(), 0).unwrap();
    let again = drive_until(&mut group, 4);
    assert_eq!(payloads(&again), vec![b"\x01a".to_vec(), b"\x01b".to_vec(), b"\x01c".to_vec(), b"\x01d".to_vec()]);
}

/// Keeps what a group sends, for the test to route; with `dir`, checks first that what each
/// message acknowledges is what a restart of the sender right now would find.
/// Three voters (ids 1, 2, 3) of a new group, each on a journal of its own in a temporary
/// folder (kept as long as the folders are), sending through the transport `outbox` makes for
/// its folder.
fn three_voters(outbox: impl Fn(&std::path::Path) -> Box<dyn Transport>) -> (Vec<tempfile::TempDir>, Vec<RaftGroup>) {
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let groups = dirs
        .iter()
        .enumerate()
        .map(|(i, dir)| {
            RaftGroup::open_replicated(dir.path(), 0, ReplicaConfig::new(i as u64 + 1, vec![1, 2, 3]), outbox(dir.path())).unwrap()
        })
        .collect();
    (dirs, groups)
}

struct CheckingOutbox {
    sent: Arc<std::sync::Mutex<Vec<Message>>>,
    dir: std::path::PathBuf,
    checks: Arc<std::sync::Mutex<Vec<String>>>,
}

impl CheckingOutbox {
    /// Opens a copy of the journal, as a crash now would leave it.
    fn journal_after_crash(&self) -> Journal {
        let copy = tempfile::tempdir().unwrap();
        for f in std::fs::read_dir(&self.dir).unwrap() {
            let f = f.unwrap();
            std::fs::copy(f.path(), copy.path().join(f.file_name())).unwrap();
        }
        let journal = Journal::open(copy.path(), JournalConfig::default()).unwrap();
        std::mem::forget(copy); // the journal keeps its files open; the dir goes with the test's
        journal
    }
}

impl Transport for CheckingOutbox {
    fn send(&mut self, messages: Vec<Message>) {
        use raft::prelude::MessageType;
        for m in &messages {
            let kind = m.msg_type();
            let verdict = if kind == MessageType::MsgAppendResponse && !m.reject {
                let j = self.journal_after_crash();
                let durable = j.last_index() >= m.index;
                format!("append response {} -> {} for index {}: durable {durable}", m.from, m.to, m.index)
            } else if kind == MessageType::MsgRequestVoteResponse && !m.reject {
                let hs = self.journal_after_crash().hard_state();
                let durable = hs.term == m.term && hs.vote == m.to;
                format!("vote {} -> {} in term {}: durable {durable}", m.from, m.to, m.term)
            } else {
                continue;
            };
            self.checks.lock().unwrap().push(verdict);
        }
        self.sent.lock().unwrap().extend(messages);
    }

    fn send_snapshot(&mut self, _packets: Vec<crate::SnapshotPacket>) {}
}

#[test]
fn three_voters_elect_a_leader_and_acknowledge_only_durable_entries_and_votes() {
    let sent = Arc::new(std::sync::Mutex::new(Vec::<Message>::new()));
    let checks = Arc::new(std::sync::Mutex::new(Vec::new()));
    let (_dirs, mut groups) =
        three_voters(|dir| Box::new(CheckingOutbox { sent: sent.clone(), dir: dir.to_path_buf(), checks: checks.clone() }));
    let mut applied: Vec<Vec<Committed>> = vec![Vec::new(); 3];
    let mut round = |groups: &mut Vec<RaftGroup>, tick: bool| {
        for (i, g) in groups.iter_mut().enumerate() {
            if tick {
                g.tick();
            }
            applied[i].extend(g.drive().unwrap());
        }
        let messages: Vec<Message> = std::mem::take(&mut *sent.lock().unwrap());
        for m in messages {
            let to = m.to as usize - 1;
            groups[to].step(m).unwrap();
        }
        applied.clone()
    };
    let mut elected = false;
    for _ in 0..200 {
        round(&mut groups, true);
        if groups.iter().any(|g| g.is_leader()) {
            elected = true;
            break;
        }
    }
    assert!(elected, "no leader after 200 ticks");
    let leader = groups.iter().position(|g| g.is_leader()).unwrap();
    assert!(groups.iter().all(|g| g.term() == groups[leader].term()));
    for p in [&b"\x01one"[..], b"\x01two", b"\x01three"] {
        groups[leader].propose(p.to_vec()).unwrap();
    }
    let follower = (leader + 1) % 3;
    assert!(matches!(groups[follower].propose(b"\x01x".to_vec()), Err(ReplicationError::NotLeader)));
    let mut last = Vec::new();
    for _ in 0..50 {
        last = round(&mut groups, false);
        if last.iter().all(|a| payloads(a).len() == 3) {
            break;
        }
    }
    let want = vec![b"\x01one".to_vec(), b"\x01two".to_vec(), b"\x01three".to_vec()];
    for (i, a) in last.iter().enumerate() {
        assert_eq!(payloads(a), want, "node {}", i + 1);
        assert_eq!(a, &last[leader], "node {} applied other indexes or terms", i + 1);
    }
    assert_eq!(groups[leader].replicated_to_all(), Some(groups[leader].last_index()));
    assert_eq!(groups[follower].replicated_to_all(), None);
    assert_eq!(groups[follower].leader_id(), Some(groups[leader].id()));
    let checks = checks.lock().unwrap();
    assert!(checks.iter().any(|c| c.starts_with("vote")), "no vote was granted: {checks:?}");
    assert!(checks.iter().any(|c| c.starts_with("append")), "no append was acknowledged: {checks:?}");
    let early: Vec<_> = checks.iter().filter(|c| c.ends_with("false")).collect();
    assert!(early.is_empty(), "acknowledged before durable: {early:?}");
}

#[test]
fn a_message_from_outside_the_group_or_for_another_node_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let outbox = CheckingOutbox { sent: Arc::default(), dir: dir.path().to_path_buf(), checks: Arc::default() };
    let mut group = RaftGroup::open_replicated(dir.path(), 0, ReplicaConfig::new(2, vec![1, 2, 3]), Box::new(outbox)).unwrap();
    let mut m = Message { to: 2, from: 7, term: 1, ..Default::default() };
    m.set_msg_type(raft::prelude::MessageType::MsgHeartbeat);
    assert!(matches!(group.step(m.clone()), Err(ReplicationError::UnknownPeer(7))));
    m.from = 1;
    m.to = 3;
    assert!(matches!(group.step(m.clone()), Err(ReplicationError::WrongRecipient { to: 3, id: 2 })));
    m.to = 2;
    group.step(m).unwrap();
    assert_eq!(group.leader_id(), Some(1));
}

#[test]
fn a_configuration_that_cannot_work_is_refused_with_its_reason() {
    let dir = tempfile::tempdir().unwrap();
    let open = |config: ReplicaConfig| {
        let outbox = CheckingOutbox { sent: Arc::default(), dir: dir.path().to_path_buf(), checks: Arc::default() };
        match RaftGroup::open_replicated(dir.path(), 0, config, Box::new(outbox)) {
            Err(ReplicationError::InvalidConfig(why)) => why,
            Err(e) => panic!("{e}"),
            Ok(_) => panic!("opened"),
        }
    };
    assert!(open(ReplicaConfig::new(4, vec![1, 2, 3])).contains("not among the voters"));
    assert!(open(ReplicaConfig::new(1, vec![1, 2, 2])).contains("twice"));
    assert!(open(ReplicaConfig::new(0, vec![0, 1])).contains("reserved"));
    assert!(open(ReplicaConfig { election_tick: 2, ..ReplicaConfig::new(1, vec![1, 2]) }).contains("must exceed"));
}

#[test]
fn a_node_cut_off_for_long_does_not_depose_the_leader_when_it_returns() {
    let sent = Arc::new(std::sync::Mutex::new(Vec::<Message>::new()));
    let (_dirs, mut groups) =
        three_voters(|dir| Box::new(CheckingOutbox { sent: sent.clone(), dir: dir.to_path_buf(), checks: Arc::default() }));
    // one round: every group ticks and drives; messages to or from `cut` are lost
    let round = |groups: &mut Vec<RaftGroup>, cut: Option<u64>| {
        for g in groups.iter_mut() {
            g.tick();
            g.drive().unwrap();
        }
        let messages: Vec<Message> = std::mem::take(&mut *sent.lock().unwrap());
        for m in messages.into_iter().filter(|m| cut.is_none_or(|c| m.from != c && m.to != c)) {
            let to = m.to as usize - 1;
            groups[to].step(m).unwrap();
        }
    };
    let mut leader = None;
    for _ in 0..200 {
        round(&mut groups, None);
        leader = groups.iter().position(|g| g.is_leader());
        if leader.is_some() {
            break;
        }
    }
    let leader = leader.expect("a leader");
    let term = groups[leader].term();
    let cut = groups[(leader + 1) % 3].id();
    // ten election timeouts alone: without pre-vote it would campaign and raise its term each time
    for _ in 0..200 {
        round(&mut groups, Some(cut));
    }
    assert_eq!(groups[cut as usize - 1].term(), term, "the cut-off node raised its term");
    for _ in 0..50 {
        round(&mut groups, None);
    }
    assert!(groups[leader].is_leader(), "the leader was deposed by the returning node");
    assert_eq!(groups[leader].term(), term);
    assert_eq!(groups[cut as usize - 1].leader_id(), Some(groups[leader].id()));
}

#[test]
fn a_leader_cut_off_from_the_quorum_steps_down() {
    let sent = Arc::new(std::sync::Mutex::new(Vec::<Message>::new()));
    let (_dirs, mut groups) =
        three_voters(|dir| Box::new(CheckingOutbox { sent: sent.clone(), dir: dir.to_path_buf(), checks: Arc::default() }));
    let mut leader = None;
    for _ in 0..200 {
        for g in groups.iter_mut() {
            g.tick();
            g.drive().unwrap();
        }
        for m in std::mem::take(&mut *sent.lock().unwrap()) {
            let to = m.to as usize - 1;
            groups[to].step(m).unwrap();
        }
        leader = groups.iter().position(|g| g.is_leader());
        if leader.is_some() {
            break;
        }
    }
    let leader = leader.expect("a leader");
    // the leader alone ticks, and hears nobody: check-quorum makes it step down
    for _ in 0..25 {
        groups[leader].tick();
        groups[leader].drive().unwrap();
        sent.lock().unwrap().clear();
    }
    assert!(!groups[leader].is_leader(), "an isolated leader kept leading");
}

/// Collects what a group sends.
struct Outbox(Arc<std::sync::Mutex<Vec<Message>>>);

impl Transport for Outbox {
    fn send(&mut self, messages: Vec<Message>) {
        self.0.lock().unwrap().extend(messages);
    }

    fn send_snapshot(&mut self, _packets: Vec<crate::SnapshotPacket>) {}
}

#[test]
fn a_follower_back_from_far_behind_is_sent_a_bounded_burst_and_catches_up() {
    use raft::prelude::MessageType;
    let sent = Arc::new(std::sync::Mutex::new(Vec::<Message>::new()));
    let (_dirs, mut groups) = three_voters(|_| Box::new(Outbox(sent.clone())));
    // one round: every group ticks and drives; messages to or from `cut` are lost. Returns the
    // appends sent to `watch` in the round.
    let round = |groups: &mut Vec<RaftGroup>, cut: Option<u64>, watch: u64| {
        for g in groups.iter_mut() {
            g.tick();
            g.drive().unwrap();
        }
        let messages: Vec<Message> = std::mem::take(&mut *sent.lock().unwrap());
        let appends: Vec<usize> = messages
            .iter()
            .filter(|m| m.to == watch && m.msg_type() == MessageType::MsgAppend)
            .map(|m| m.entries.iter().map(|e| e.data.len()).sum())
            .collect();
        for m in messages.into_iter().filter(|m| cut.is_none_or(|c| m.from != c && m.to != c)) {
            let to = m.to as usize - 1;
            groups[to].step(m).unwrap();
        }
        appends
    };
    let mut leader = None;
    for _ in 0..200 {
        round(&mut groups, None, 0);
        leader = groups.iter().position(|g| g.is_leader());
        if leader.is_some() {
            break;
        }
    }
    let leader = leader.expect("a leader");
    let away = groups[(leader + 1) % 3].id();
    // while `away` is cut off, the others commit 48 entries of 600 KB, ~29 MB (one to an
    // append: two would pass MAX_APPEND_BYTES)
    let entries = 48;
    for i in 0..entries {
        let mut data = vec![0x01; 600 << 10];
        data[1] = i as u8;
        groups[leader].propose(data).unwrap();
        round(&mut groups, Some(away), away);
    }
    for _ in 0..20 {
        round(&mut groups, Some(away), away);
    }
    let last = groups[leader].last_index();
    assert!(groups[away as usize - 1].last_index() + entries as u64 <= last, "the cut-off node got entries");
    // back: it is sent at most ~10 MB a round (17 appends: a heartbeat's answer frees one slot of
    // a full window, as in etcd's Raft), not everything it lacks at once
    let mut rounds = 0;
    while groups[away as usize - 1].last_index() < last {
        let appends = round(&mut groups, None, away);
        let bytes: usize = appends.iter().sum();
        assert!(bytes <= 17 * (600 << 10), "{bytes} bytes in {} appends in one round", appends.len());
        rounds += 1;
        assert!(rounds < 100, "not caught up after 100 rounds: {} of {last}", groups[away as usize - 1].last_index());
    }
    assert!(groups[leader].is_leader(), "the leader lost its lead while the follower caught up");
}
