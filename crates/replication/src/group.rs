//! One partition's Raft group on this node: configuration, the `Ready` loop over the journal, and
//! the [`Transport`] its messages leave by.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use prost011::Message as _;
use raft::prelude::{ConfChange, ConfChangeSingle, ConfChangeTransition, ConfChangeType, ConfChangeV2, ConfState};
use raft::prelude::{Entry as RaftEntry, EntryType, Message, MessageType};
use raft::{Config, RawNode, SnapshotStatus, StateRole};

use waggle_log::{Journal, JournalConfig};

use crate::conf::ConfHistory;
use crate::snapshot::{self, AckKind, Incoming, InstalledSnapshot, Outgoing, OutgoingState, PacketBody, Received, SnapshotPacket};
use crate::storage::{from_raft, to_raft, JournalStorage, CONF_MARKER};
use crate::{Committed, ReplicationError, SnapshotSource, LOCAL_NODE_ID};

/// Committed entries a replica being sent the log may lack and still count as caught up
/// ([`RaftGroup::caught_up`]): a few rounds of pipelined batches.
pub const CAUGHT_UP_LAG: u64 = 16;

/// Largest append a leader sends (Raft's `max_size_per_msg`; one entry larger than this still
/// goes alone).
const MAX_APPEND_BYTES: u64 = 1 << 20;

/// Appends a leader has unacknowledged to one follower (Raft's `max_inflight_msgs`). A
/// follower that comes back far behind is sent this many appends in one go, each read from the
/// journal and encoded on the leader's partition thread: at 256 (and 1 MiB each), a broker
/// that rejoined 60 s behind under W2 kept two leaders' threads busy for longer than an
/// election timeout, their healthy followers heard no heartbeat, and both partitions elected
/// new leaders (a command in flight at such a change is answered `Unavailable`). At 16 that
/// burst is 16 MiB. A follower that keeps up has a few appends in flight (one per pipelined
/// batch).
const MAX_INFLIGHT_APPENDS: usize = 16;

/// Where a follower writes the snapshots it receives, under the journal's directory.
pub const RECEIVED_SNAPSHOTS_DIR: &str = "received-snapshots";

/// Carries a group's Raft messages to its peers.
///
/// Best effort: a message may be lost, delayed, duplicated or reordered (Raft retransmits and
/// discards stale messages), so `send` must not block on a slow or absent peer. The receiving
/// side hands each message to its peer's group with [`RaftGroup::step`].
pub trait Transport: Send {
    /// Sends each message to the peer its `to` names.
    fn send(&mut self, messages: Vec<Message>);

    /// Sends each snapshot packet to the peer its `to` names (best effort too: the group
    /// resends what is lost). The receiving side hands them to [`RaftGroup::receive_snapshot`].
    fn send_snapshot(&mut self, packets: Vec<SnapshotPacket>);
}

/// A group's members and timing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaConfig {
    /// This node's id in the group (not 0).
    pub id: u64,
    /// Every voter's id, this node's included: the group's first configuration. Once the group
    /// has changed its membership ([`RaftGroup::add_learner`], [`RaftGroup::replace_voter`]) the
    /// configuration persisted beside the journal is the group's, and this is not read.
    pub voters: Vec<u64>,
    /// A replica added to a running group: it starts without a configuration, neither campaigns
    /// nor votes, and learns the group's configuration from the leader's snapshot (its
    /// `voters` may be empty).
    pub joining: bool,
    /// Ticks a follower waits without hearing from a leader before it campaigns, and a leader
    /// waits without hearing from a quorum before it steps down (check-quorum).
    pub election_tick: usize,
    /// Ticks between a leader's heartbeats (less than `election_tick`).
    pub heartbeat_tick: usize,
    /// Raft draws each election timeout from `[election_tick, 2 × election_tick)` with the
    /// thread's RNG, so that voters rarely campaign together. Off, the timeout is exactly
    /// `election_tick`: a deterministic simulation jitters the ticks themselves instead.
    pub randomized_election_timeout: bool,
    /// Ticks added to this replica's election timeout: a replica of lower priority waits
    /// longer, so that the one preferred campaigns first (0: none).
    pub election_delay_ticks: usize,
    /// How wide the randomized election timeout's window is, in ticks: the timeout is drawn
    /// from `[election_tick + delay, election_tick + delay + jitter)` (Raft's default width is
    /// `election_tick`).
    pub election_jitter_ticks: usize,
    /// Bytes per chunk of a snapshot sent to a follower ([`snapshot::DEFAULT_CHUNK_BYTES`]).
    pub snapshot_chunk_bytes: usize,
    /// This replica's election priority (Raft's, 0 for none): a voter refuses a candidate of
    /// lower priority than its own whose log is no longer than its own, so among replicas
    /// equally up to date the one of highest priority is elected.
    pub priority: u64,
}

impl ReplicaConfig {
    /// A voter `id` among `voters`, with the timing the broker uses (ticks of ~100 ms: an
    /// election after 1–2 s of silence, a heartbeat every 200 ms).
    pub fn new(id: u64, voters: Vec<u64>) -> Self {
        Self {
            id,
            voters,
            election_tick: 10,
            heartbeat_tick: 2,
            randomized_election_timeout: true,
            election_delay_ticks: 0,
            election_jitter_ticks: 10,
            snapshot_chunk_bytes: snapshot::DEFAULT_CHUNK_BYTES,
            priority: 0,
            joining: false,
        }
    }

    fn validate(&self) -> Result<(), ReplicationError> {
        let invalid = |why: String| Err(ReplicationError::InvalidConfig(why));
        if self.id == 0 || self.voters.contains(&0) {
            return invalid("node id 0 is reserved (Raft's \"none\")".into());
        }
        let mut sorted = self.voters.clone();
        sorted.sort_unstable();
        sorted.dedup();
        if sorted.len() != self.voters.len() {
            return invalid(format!("voters {:?} name a node twice", self.voters));
        }
        if self.snapshot_chunk_bytes == 0 {
            return invalid("snapshot_chunk_bytes must not be 0".into());
        }
        if self.heartbeat_tick == 0 || self.election_tick <= self.heartbeat_tick {
            return invalid(format!(
                "election_tick ({}) must exceed heartbeat_tick ({}), which must not be 0",
                self.election_tick, self.heartbeat_tick
            ));
        }
        Ok(())
    }
}

/// One partition's Raft group on this node.
pub struct RaftGroup {
    node: RawNode<JournalStorage>,
    journal: Arc<RwLock<Journal>>,
    /// The journal's directory (where the configuration is persisted).
    dir: PathBuf,
    /// The group's membership through its changes (shared with Raft's storage).
    conf: Arc<RwLock<ConfHistory>>,
    /// None for a single voter: it has no one to send to.
    transport: Option<Box<dyn Transport>>,
    snapshots: Snapshots,
}

/// Counts of a group's snapshot transfers in this run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SnapshotStats {
    /// Transfers this node started as the leader.
    pub offered: u64,
    /// Transfers a follower acknowledged as done.
    pub completed: u64,
    /// Transfers given up (no progress for long, or the files could not be read).
    pub abandoned: u64,
    pub chunks_sent: u64,
    /// Chunks this node received and refused (out of place, or a checksum that did not match).
    pub chunks_refused: u64,
    /// Snapshots this node installed as a follower.
    pub installed: u64,
}

/// The group's snapshot transfers.
struct Snapshots {
    /// `<journal dir>/received-snapshots`.
    root: PathBuf,
    chunk_bytes: usize,
    /// Ticks without a follower's progress before the leader resends, and gives up.
    resend_ticks: usize,
    abandon_ticks: usize,
    /// The leader's transfers, by follower.
    outgoing: BTreeMap<u64, Outgoing>,
    /// A follower's transfer under way.
    incoming: Option<Incoming>,
    /// Received, its message stepped: waiting for Raft's ready to install it.
    received: Option<InstalledSnapshot>,
    /// Installed in the journal, for the owner to take.
    installed: Option<InstalledSnapshot>,
    /// Followers whose snapshot failed, to report to Raft outside a ready.
    failed: Vec<u64>,
    /// Packets to send at the end of the next `drive`.
    packets: Vec<SnapshotPacket>,
    /// Entries committed after a snapshot, which Raft handed over in the `drive` that installed
    /// it: the next `drive` returns them, once the owner took the snapshot.
    after_install: Vec<Committed>,
    stats: SnapshotStats,
}

impl RaftGroup {
    /// Opens a single-voter group (node [`LOCAL_NODE_ID`]) on the journal in `dir`; it elects
    /// itself at once. `applied` is the last index the state machine has durably applied;
    /// committed entries after it are re-delivered by [`Self::drive`].
    pub fn open(dir: &Path, applied: u64) -> Result<Self, ReplicationError> {
        Self::open_with(dir, applied, ReplicaConfig::new(LOCAL_NODE_ID, vec![LOCAL_NODE_ID]), None)
    }

    /// Opens this node's member of a group of `config.voters` on the journal in `dir` (term, vote
    /// and log as a previous run left them), sending its messages through `transport`. It
    /// starts as a follower (a single voter elects itself at once); `applied` is as for
    /// [`Self::open`].
    pub fn open_replicated(
        dir: &Path,
        applied: u64,
        config: ReplicaConfig,
        transport: Box<dyn Transport>,
    ) -> Result<Self, ReplicationError> {
        Self::open_with(dir, applied, config, Some(transport))
    }

    fn open_with(dir: &Path, applied: u64, config: ReplicaConfig, transport: Option<Box<dyn Transport>>) -> Result<Self, ReplicationError> {
        config.validate()?;
        let mut journal = Journal::open(dir, JournalConfig::default())?;
        // the configuration persisted by a membership change, else the configured voters (a
        // joining replica has none until its snapshot)
        let conf = match ConfHistory::load(dir)? {
            Some(history) => history,
            None if config.joining => {
                let empty = ConfHistory::default();
                empty.save(dir)?;
                empty
            }
            None if !config.voters.contains(&config.id) => {
                return Err(ReplicationError::InvalidConfig(format!("node {} is not among the voters {:?}", config.id, config.voters)));
            }
            None => ConfHistory::initial(config.voters.clone()),
        };
        let current = conf.latest();
        let single = current.voters == [config.id] && current.learners.is_empty() && current.voters_outgoing.is_empty();
        // The journal persists the commit index lazily: entries the state machine applied were
        // committed, so the commit index is at least the applied one (if the log holds it), and
        // at least the compaction point (an installed snapshot was committed).
        let mut hs = journal.hard_state();
        hs.commit = hs.commit.max(applied.min(journal.last_index())).max(journal.first_index() - 1);
        // A replica of a new group starts in term 1, not 0: a voter in term 0 that refuses a
        // (pre-)vote (a candidate of lower priority) answers with its term, and the `raft`
        // crate panics on a vote answer in term 0 ("term should be set").
        if !single && hs.term == 0 {
            hs.term = 1;
        }
        journal.set_hard_state(hs)?;
        let state_applied = applied;
        let applied = applied.min(hs.commit).max(journal.first_index().saturating_sub(1));
        // a snapshot received and installed in the journal before a crash, which the state
        // does not hold yet: the owner takes it first
        let root = dir.join(RECEIVED_SNAPSHOTS_DIR);
        let compacted = journal.first_index() - 1;
        let pending = (state_applied < compacted)
            .then(|| {
                let term = journal.term(compacted)?;
                let dir = root.join(snapshot::received_name(compacted, term));
                dir.is_dir().then_some(InstalledSnapshot { index: compacted, term, dir })
            })
            .flatten();
        snapshot::clean_received(&root, pending.as_ref().map(|p| p.dir.as_path()))?;
        let journal = Arc::new(RwLock::new(journal));
        let conf = Arc::new(RwLock::new(conf));
        let storage = JournalStorage { journal: journal.clone(), conf: conf.clone(), recent: Arc::default(), source: Arc::default() };
        let snapshots = Snapshots {
            root,
            chunk_bytes: config.snapshot_chunk_bytes,
            resend_ticks: (config.election_tick / 2).max(1),
            abandon_ticks: config.election_tick * 10,
            outgoing: BTreeMap::new(),
            incoming: None,
            received: None,
            installed: pending,
            failed: Vec::new(),
            packets: Vec::new(),
            after_install: Vec::new(),
            stats: SnapshotStats::default(),
        };
        let raft_config = Config {
            id: config.id,
            election_tick: config.election_tick,
            heartbeat_tick: config.heartbeat_tick,
            min_election_tick: config.election_tick + config.election_delay_ticks,
            max_election_tick: config.election_tick
                + config.election_delay_ticks
                + if config.randomized_election_timeout { config.election_jitter_ticks.max(1) } else { 1 },
            applied,
            max_size_per_msg: MAX_APPEND_BYTES,
            max_inflight_msgs: MAX_INFLIGHT_APPENDS,
            // a leader cut off from a quorum steps down (a single voter always hears itself)
            check_quorum: !single,
            // a node back from a partition asks before it campaigns, so it does not depose a
            // healthy leader by raising the term
            pre_vote: true,
            priority: i64::try_from(config.priority).unwrap_or(i64::MAX),
            ..Default::default()
        };
        raft_config.validate()?;
        let logger = slog::Logger::root(crate::raft_log::TracingDrain, slog::o!("journal" => dir.display().to_string()));
        let mut node = RawNode::new(&raft_config, storage, &logger)?;
        if single {
            node.campaign()?;
        }
        Ok(Self { node, journal, dir: dir.to_path_buf(), conf, transport, snapshots })
    }

    pub fn is_leader(&self) -> bool {
        self.node.raft.state == StateRole::Leader
    }

    /// This node's id in the group.
    pub fn id(&self) -> u64 {
        self.node.raft.id
    }

    /// The current term.
    pub fn term(&self) -> u64 {
        self.node.raft.term
    }

    /// The leader this node knows of in the current term, if any.
    pub fn leader_id(&self) -> Option<u64> {
        Some(self.node.raft.leader_id).filter(|&id| id != raft::INVALID_ID)
    }

    /// Asks this leader to hand its leadership to `to`, another voter: once `to`'s log has
    /// caught up, it is told to campaign at once (Raft's leader transfer), and the leader takes
    /// no proposals meanwhile. Without effect on a follower, for `to` outside the group or this
    /// node; a transfer that does not finish within an election timeout is abandoned.
    /// Sets this replica's election priority (see [`ReplicaConfig::priority`]): a replica's
    /// place in its partition changes at run time (a cluster topology change).
    pub fn set_priority(&mut self, priority: u64) {
        let priority = i64::try_from(priority).unwrap_or(i64::MAX);
        if self.node.raft.priority != priority {
            self.node.raft.set_priority(priority);
        }
    }

    pub fn transfer_leader(&mut self, to: u64) {
        if self.is_leader() && to != self.id() && self.conf_state().voters.contains(&to) {
            self.node.transfer_leader(to);
        }
    }

    /// The voter this leader is handing its leadership to, while a transfer is under way.
    pub fn transferring_to(&self) -> Option<u64> {
        self.node.raft.lead_transferee
    }

    /// Proposes an entry (leader only). It is committed when `drive` returns it.
    pub fn propose(&mut self, data: Vec<u8>) -> Result<(), ReplicationError> {
        if !self.is_leader() {
            return Err(ReplicationError::NotLeader);
        }
        debug_assert_ne!(data.first(), Some(&CONF_MARKER), "codec version 0xFF is reserved");
        self.node.propose(vec![], data)?;
        Ok(())
    }

    /// Hands a message from a peer to Raft; [`Self::drive`] then acts on it. Messages meant for
    /// another node, from a node outside the group, or of a kind only a node sends itself are
    /// refused.
    pub fn step(&mut self, message: Message) -> Result<(), ReplicationError> {
        if message.to != self.id() {
            return Err(ReplicationError::WrongRecipient { to: message.to, id: self.id() });
        }
        if !self.is_member(message.from) {
            return Err(ReplicationError::UnknownPeer(message.from));
        }
        if message.msg_type() == MessageType::MsgSnapshot {
            return Err(ReplicationError::SnapshotOutsideTransfer);
        }
        self.node.step(message)?;
        Ok(())
    }

    /// Advances Raft's logical clock (call every ~100 ms); a leader resends snapshot chunks a
    /// follower has not acknowledged for a while, and gives a transfer up after longer.
    pub fn tick(&mut self) {
        self.node.tick();
        let s = &mut self.snapshots;
        let mut abandoned = Vec::new();
        for (&to, out) in s.outgoing.iter_mut() {
            out.idle_ticks += 1;
            if out.idle_ticks >= s.abandon_ticks {
                abandoned.push(to);
            } else if out.idle_ticks.is_multiple_of(s.resend_ticks) {
                s.packets.extend(out.resend());
            }
        }
        for to in abandoned {
            tracing::debug!(to, "snapshot transfer abandoned: no progress");
            s.outgoing.remove(&to);
            s.stats.abandoned += 1;
            self.node.report_snapshot(to, SnapshotStatus::Failure);
        }
    }

    /// Names the files of the owner's snapshots, so that a follower behind the compacted log
    /// can be sent them (without a source, such a follower waits).
    pub fn set_snapshot_source(&mut self, source: Arc<dyn SnapshotSource>) {
        *self.node.store().source.write().expect("snapshot source lock") = Some(source);
    }

    /// The snapshot a follower installed, once: its files replace the owner's state, and the
    /// entries `drive` returns next follow it. Right after [`Self::open_replicated`] it may be
    /// one installed before a crash that the state given at open does not hold.
    pub fn take_installed(&mut self) -> Option<InstalledSnapshot> {
        self.snapshots.installed.take()
    }

    /// The snapshot installed and not taken yet, if any.
    pub fn installed(&self) -> Option<&InstalledSnapshot> {
        self.snapshots.installed.as_ref()
    }

    /// This run's snapshot transfers.
    pub fn snapshot_stats(&self) -> SnapshotStats {
        self.snapshots.stats
    }

    /// Hands a snapshot packet from a peer to the group: a follower writes chunks (refusing one
    /// out of place or with a bad checksum) and, once the files are in, installs them; a
    /// leader moves its transfer on. Answers go out with the next [`Self::drive`].
    pub fn receive_snapshot(&mut self, packet: SnapshotPacket) -> Result<(), ReplicationError> {
        if packet.to != self.id() {
            return Err(ReplicationError::WrongRecipient { to: packet.to, id: self.id() });
        }
        if !self.is_member(packet.from) {
            return Err(ReplicationError::UnknownPeer(packet.from));
        }
        let (from, index, term) = (packet.from, packet.index, packet.term);
        match packet.body {
            PacketBody::Ack { next, kind } => {
                let s = &mut self.snapshots;
                let Some(out) = s.outgoing.get_mut(&from).filter(|o| (o.index, o.term) == (index, term)) else { return Ok(()) };
                match out.on_ack(next, kind) {
                    OutgoingState::Done => {
                        s.outgoing.remove(&from);
                        s.stats.completed += 1;
                        self.node.report_snapshot(from, SnapshotStatus::Finish);
                    }
                    OutgoingState::Going if kind == AckKind::Unknown => s.packets.push(out.offer()),
                    OutgoingState::Going => {}
                }
            }
            PacketBody::Offer { files, message } => {
                let meta = message.get_snapshot().get_metadata();
                let valid = message.msg_type() == MessageType::MsgSnapshot
                    && (message.from, message.to) == (from, self.id())
                    && (meta.index, meta.term) == (index, term);
                if !valid {
                    return Err(ReplicationError::SnapshotOutsideTransfer);
                }
                if index <= self.commit_index() {
                    // not needed (Raft answers the leader with where this node stands)
                    self.node.step(*message)?;
                    self.answer(from, index, term, 0, AckKind::Done);
                    return Ok(());
                }
                let s = &mut self.snapshots;
                if s.installed.is_some() {
                    // the owner has not taken the last one: the leader offers again later
                    return Ok(());
                }
                if let Some(inc) = s.incoming.as_ref().filter(|i| (i.from, i.index, i.term) == (from, index, term)) {
                    let next = inc.next();
                    self.answer(from, index, term, next, AckKind::Progress);
                    return Ok(());
                }
                s.incoming = None;
                if let Some(old) = s.received.take() {
                    let _ = std::fs::remove_dir_all(old.dir);
                }
                std::fs::create_dir_all(&s.root)?;
                snapshot::clean_received(&s.root, None)?;
                let incoming = Incoming::start(&s.root, from, index, term, files, *message)?;
                let complete = incoming.complete();
                s.incoming = Some(incoming);
                if complete {
                    return self.install_received();
                }
                self.answer(from, index, term, 0, AckKind::Progress);
            }
            PacketBody::Chunk { position, data, crc } => {
                let s = &mut self.snapshots;
                let Some(inc) = s.incoming.as_mut().filter(|i| (i.from, i.index, i.term) == (from, index, term)) else {
                    self.answer(from, index, term, 0, AckKind::Unknown);
                    return Ok(());
                };
                match inc.chunk(position, &data, crc)? {
                    Received::Answer(next, kind) => {
                        if kind == AckKind::Refused {
                            s.stats.chunks_refused += 1;
                        }
                        self.answer(from, index, term, next, kind);
                    }
                    Received::Complete => return self.install_received(),
                }
            }
        }
        Ok(())
    }

    /// The incoming transfer is complete: its files go in place and Raft's message is stepped
    /// (the next ready installs it).
    fn install_received(&mut self) -> Result<(), ReplicationError> {
        let s = &mut self.snapshots;
        let incoming = s.incoming.take().expect("a transfer under way");
        let (from, index, term) = (incoming.from, incoming.index, incoming.term);
        let message = incoming.message.clone();
        let dir = incoming.finish(&s.root)?;
        s.received = Some(InstalledSnapshot { index, term, dir });
        self.node.step(message)?;
        self.answer(from, index, term, 0, AckKind::Done);
        Ok(())
    }

    fn answer(&mut self, to: u64, index: u64, term: u64, next: u64, kind: AckKind) {
        let from = self.id();
        self.snapshots.packets.push(SnapshotPacket { from, to, index, term, body: PacketBody::Ack { next, kind } });
    }

    /// Starts sending the snapshot of Raft's message to its follower (unless that transfer is
    /// under way); without its files, Raft is told it failed.
    fn offer_snapshot(&mut self, message: Message) {
        let to = message.to;
        let meta = message.get_snapshot().get_metadata();
        let (index, term) = (meta.index, meta.term);
        let s = &mut self.snapshots;
        if s.outgoing.get(&to).is_some_and(|o| (o.index, o.term) == (index, term)) {
            return;
        }
        let source = self.node.store().source.read().expect("snapshot source lock").clone();
        let files = source.and_then(|s| s.files_at(index, term));
        match files.map(|dir| Outgoing::new(message, dir)) {
            Some(Ok(out)) => {
                s.packets.push(out.offer());
                s.outgoing.insert(to, out);
                s.stats.offered += 1;
            }
            Some(Err(e)) => {
                tracing::warn!(to, index, error = %e, "snapshot files unreadable");
                s.failed.push(to);
            }
            None => s.failed.push(to),
        }
    }

    /// Sends the chunks the leader's transfers have room for, and the packets waiting.
    fn pump_snapshots(&mut self) {
        let s = &mut self.snapshots;
        if !self.node.raft.state.eq(&StateRole::Leader) {
            s.outgoing.clear();
        }
        let mut failed = Vec::new();
        for (&to, out) in s.outgoing.iter_mut() {
            match out.chunks(s.chunk_bytes) {
                Ok(chunks) => {
                    s.stats.chunks_sent += chunks.len() as u64;
                    s.packets.extend(chunks);
                }
                Err(e) => {
                    tracing::warn!(to, index = out.index, error = %e, "snapshot files unreadable: transfer abandoned");
                    failed.push(to);
                }
            }
        }
        for to in failed {
            s.outgoing.remove(&to);
            s.stats.abandoned += 1;
            s.failed.push(to);
        }
        let packets = std::mem::take(&mut s.packets);
        if let (false, Some(transport)) = (packets.is_empty(), &mut self.transport) {
            transport.send_snapshot(packets);
        }
    }

    /// Does what Raft asks: sends messages, persists entries and hard state (one fsync), and
    /// returns newly committed entries. A message that acknowledges entries or a vote (a
    /// follower's append response, a vote granted) is sent only once they are durable.
    ///
    /// A follower that installs a snapshot resets its journal to start after it and returns
    /// early, with the entries committed before it; [`Self::take_installed`] gives the snapshot,
    /// and until it is taken `drive` refuses to go on ([`ReplicationError::SnapshotNotTaken`]).
    pub fn drive(&mut self) -> Result<Vec<Committed>, ReplicationError> {
        if let Some(installed) = &self.snapshots.installed {
            return Err(ReplicationError::SnapshotNotTaken(installed.index));
        }
        for to in std::mem::take(&mut self.snapshots.failed) {
            self.node.report_snapshot(to, SnapshotStatus::Failure);
        }
        let held = std::mem::take(&mut self.snapshots.after_install);
        let committed = self.drive_readies();
        self.pump_snapshots();
        let mut committed = committed?;
        if !held.is_empty() {
            committed.splice(0..0, held);
        }
        Ok(committed)
    }

    fn drive_readies(&mut self) -> Result<Vec<Committed>, ReplicationError> {
        let mut committed = Vec::new();
        while self.node.has_ready() {
            let mut ready = self.node.ready();
            // a leader's appends and heartbeats go out before its own fsync: Raft counts the
            // leader's copy of an entry toward the quorum only once `advance` says it is durable
            self.send(ready.take_messages());
            let installing = !ready.snapshot().is_empty();
            let snapshot_index = ready.snapshot().get_metadata().index;
            let entries = ready.take_committed_entries();
            self.apply_conf_changes(&entries)?;
            collect(&mut committed, entries);
            {
                let mut j = self.journal.write().expect("journal lock");
                if installing {
                    let meta = ready.snapshot().get_metadata();
                    let (index, term) = (meta.index, meta.term);
                    let received = self.snapshots.received.take().filter(|r| (r.index, r.term) == (index, term));
                    let received = received.ok_or(ReplicationError::SnapshotFilesMissing { index, term })?;
                    // durable at once (the journal's meta file): the log restarts after the snapshot
                    j.reset_to_snapshot(index, term)?;
                    // and the group's configuration is the snapshot's
                    let mut conf = self.conf.write().expect("conf lock");
                    conf.reset(index, ready.snapshot().get_metadata().get_conf_state().clone());
                    conf.save(&self.dir)?;
                    self.node.store().recent.lock().expect("recent entries lock").clear();
                    self.snapshots.installed = Some(received);
                    self.snapshots.stats.installed += 1;
                }
                // the entries' data is moved into the journal's form and back (an entry can be
                // ~150 KB: no copy kept only for the append)
                let entries: Vec<_> = ready.take_entries().into_iter().map(from_raft).collect();
                j.append(&entries)?;
                let appended: Vec<_> = entries.into_iter().map(to_raft).collect();
                if let Some(hs) = ready.hs() {
                    j.set_hard_state(waggle_log::HardState { term: hs.term, vote: hs.vote, commit: hs.commit })?;
                }
                if ready.must_sync() || !appended.is_empty() || ready.hs().is_some() {
                    j.flush()?;
                }
                // kept once durable; an append without entries leaves the last ones
                if !appended.is_empty() {
                    self.node.store().hold_recent(appended);
                }
            }
            // append responses and votes: what they acknowledge is durable now
            self.send(ready.take_persisted_messages());
            let mut light = self.node.advance(ready);
            if let Some(commit) = light.commit_index() {
                let mut j = self.journal.write().expect("journal lock");
                let mut hs = j.hard_state();
                hs.commit = commit;
                j.set_hard_state(hs)?;
                j.flush()?;
            }
            self.send(light.take_messages());
            let entries = light.take_committed_entries();
            self.apply_conf_changes(&entries)?;
            collect(&mut committed, entries);
            self.node.advance_apply();
            if installing {
                // the owner replaces its state before anything after the snapshot: entries
                // committed after it in this ready (Raft hands them over once, now) wait for
                // the next `drive`
                let after = committed.iter().position(|c| c.index > snapshot_index).unwrap_or(committed.len());
                self.snapshots.after_install = committed.split_off(after);
                break;
            }
        }
        Ok(committed)
    }

    fn send(&mut self, mut messages: Vec<Message>) {
        if messages.iter().any(|m| m.msg_type() == MessageType::MsgSnapshot) {
            let (snapshots, rest): (Vec<_>, Vec<_>) = messages.into_iter().partition(|m| m.msg_type() == MessageType::MsgSnapshot);
            for m in snapshots {
                self.offer_snapshot(m);
            }
            messages = rest;
        }
        if messages.is_empty() {
            return;
        }
        // a single voter has no transport and Raft gives it nothing to send
        if let Some(transport) = &mut self.transport {
            transport.send(messages);
        }
    }

    /// Applies the configuration changes among committed `entries` that the persisted
    /// configuration does not hold yet, persisting each new configuration.
    fn apply_conf_changes(&mut self, entries: &[RaftEntry]) -> Result<(), ReplicationError> {
        for e in entries {
            let cc = match e.entry_type {
                t if t == EntryType::EntryConfChangeV2 as i32 => {
                    ConfChangeV2::decode(e.data.as_slice()).map_err(|_| ReplicationError::BadConfChange(e.index))?
                }
                t if t == EntryType::EntryConfChange as i32 => raft_proto::ConfChangeI::into_v2(
                    ConfChange::decode(e.data.as_slice()).map_err(|_| ReplicationError::BadConfChange(e.index))?,
                ),
                _ => continue,
            };
            if e.index <= self.conf.read().expect("conf lock").last_index() {
                // applied before a restart: the configuration Raft started with holds it
                continue;
            }
            let applied = self.node.apply_conf_change(&cc)?;
            tracing::info!(index = e.index, voters = ?applied.voters, learners = ?applied.learners, outgoing = ?applied.voters_outgoing, "raft configuration changed");
            let compacted = self.first_index().saturating_sub(1);
            let me = self.id();
            let removed = !applied.voters.contains(&me) && !applied.voters_outgoing.contains(&me);
            {
                let mut conf = self.conf.write().expect("conf lock");
                conf.push(e.index, applied, compacted);
                conf.save(&self.dir)?;
            }
            if removed && self.is_leader() {
                // a leader removed by a change a former leader proposed (it became leader
                // before applying it): Raft keeps no progress for it any more, and its next
                // append would panic the `raft` crate; the others elect a leader among them
                tracing::info!(index = e.index, "this leader was removed from the group: it steps down");
                let term = self.term();
                self.node.raft.become_follower(term, raft::INVALID_ID);
            }
        }
        Ok(())
    }

    /// The group's configuration as this replica has applied it.
    pub fn conf_state(&self) -> ConfState {
        self.conf.read().expect("conf lock").latest()
    }

    /// Whether `id` is in the group's configuration (voter, learner or leaving voter); a joining
    /// replica that has not learnt it yet takes every node for one.
    pub fn is_member(&self, id: u64) -> bool {
        self.conf.read().expect("conf lock").is_member(id)
    }

    /// The index from which [`Self::conf_state`] is in force: of the last configuration change
    /// applied, or of the snapshot that carried the configuration (0: the initial voters).
    pub fn conf_index(&self) -> u64 {
        self.conf.read().expect("conf lock").last_index()
    }

    /// Whether this replica has a configuration (a joining one learns it from its snapshot).
    pub fn has_conf(&self) -> bool {
        !self.conf.read().expect("conf lock").is_empty()
    }

    /// Adds `id` as a learner (leader only): it receives the log but neither votes nor counts
    /// for the quorum. The leader's log must be compacted (a snapshot taken), so that the
    /// learner catches up by the snapshot, which carries the configuration, and then the log.
    pub fn add_learner(&mut self, id: u64) -> Result<(), ReplicationError> {
        if self.first_index() <= 1 {
            return Err(ReplicationError::InvalidConfig("add a learner once the leader's log is compacted (a snapshot taken)".into()));
        }
        let change = ConfChangeSingle { change_type: ConfChangeType::AddLearnerNode as i32, node_id: id };
        self.propose_conf_change(ConfChangeV2 { changes: vec![change], ..Default::default() })
    }

    /// Whether learner (or voter) `id` has caught up (leader only): it holds every committed
    /// entry, or it is being sent the log entry by entry (not probed, not sent a snapshot) and
    /// lacks at most [`CAUGHT_UP_LAG`] committed entries. While commands flow the commit index
    /// moves on with every round trip, so "every committed entry" alone can stay false for a
    /// replica that keeps up (a join under load was never promoted).
    pub fn caught_up(&self, id: u64) -> bool {
        self.is_leader()
            && self.node.raft.prs().get(id).is_some_and(|p| {
                p.matched >= self.commit_index()
                    || (p.state == raft::ProgressState::Replicate && p.matched + CAUGHT_UP_LAG >= self.commit_index())
            })
    }

    /// Promotes learner `add` to voter and removes voter `remove` in one joint-consensus change
    /// (leader only): the group decides by both the old and the new voters until it leaves the
    /// joint configuration, which the leader proposes by itself once the change is applied.
    /// Refused unless `add` has caught up (a partition never counts a replica that is behind),
    /// and for `remove` the leader itself (transfer the leadership first).
    pub fn replace_voter(&mut self, add: u64, remove: u64) -> Result<(), ReplicationError> {
        if !self.caught_up(add) {
            return Err(ReplicationError::InvalidConfig(format!("node {add} has not caught up")));
        }
        if remove == self.id() {
            return Err(ReplicationError::InvalidConfig("the leader does not remove itself: transfer the leadership first".into()));
        }
        let changes = vec![
            ConfChangeSingle { change_type: ConfChangeType::AddNode as i32, node_id: add },
            ConfChangeSingle { change_type: ConfChangeType::RemoveNode as i32, node_id: remove },
        ];
        self.propose_conf_change(ConfChangeV2 { transition: ConfChangeTransition::Auto as i32, changes, context: vec![] })
    }

    /// Promotes learner `id` to voter (leader only), once it holds every committed entry: the
    /// group then has one voter more (a replica joining a partition). Refused for a learner
    /// that has not caught up, and for a node that is not a learner.
    pub fn promote_learner(&mut self, id: u64) -> Result<(), ReplicationError> {
        if !self.conf_state().learners.contains(&id) {
            return Err(ReplicationError::InvalidConfig(format!("node {id} is not a learner")));
        }
        if !self.caught_up(id) {
            return Err(ReplicationError::InvalidConfig(format!("node {id} has not caught up")));
        }
        let change = ConfChangeSingle { change_type: ConfChangeType::AddNode as i32, node_id: id };
        self.propose_conf_change(ConfChangeV2 { changes: vec![change], ..Default::default() })
    }

    /// Removes voter (or learner) `id` from the group (leader only): a replica leaving a
    /// partition. Refused for the leader itself (transfer the leadership first) and for the
    /// last voter.
    pub fn remove_voter(&mut self, id: u64) -> Result<(), ReplicationError> {
        if id == self.id() {
            return Err(ReplicationError::InvalidConfig("the leader does not remove itself: transfer the leadership first".into()));
        }
        let conf = self.conf_state();
        if conf.voters == [id] {
            return Err(ReplicationError::InvalidConfig(format!("node {id} is the group's last voter")));
        }
        let change = ConfChangeSingle { change_type: ConfChangeType::RemoveNode as i32, node_id: id };
        self.propose_conf_change(ConfChangeV2 { changes: vec![change], ..Default::default() })
    }

    /// Proposes a configuration change (leader only; one at a time).
    fn propose_conf_change(&mut self, cc: ConfChangeV2) -> Result<(), ReplicationError> {
        if !self.is_leader() {
            return Err(ReplicationError::NotLeader);
        }
        if self.node.raft.has_pending_conf() || !self.conf_state().voters_outgoing.is_empty() {
            return Err(ReplicationError::ConfChangePending);
        }
        self.node.propose_conf_change(vec![], cc)?;
        Ok(())
    }

    /// Drops log entries up to `index` (state up to it is in a snapshot), keeping the term of
    /// `index`: a follower that needs a dropped entry is sent the snapshot at `index`, whose
    /// files the [`SnapshotSource`] names (without one, such a follower cannot catch up: compact
    /// only up to [`Self::replicated_to_all`] then).
    pub fn compact(&mut self, index: u64) -> Result<(), ReplicationError> {
        let mut j = self.journal.write().expect("journal lock");
        let Some(term) = j.term(index) else { return Ok(()) };
        if index >= j.first_index() {
            j.compact(index, term)?;
        }
        Ok(())
    }

    pub fn first_index(&self) -> u64 {
        self.journal.read().expect("journal lock").first_index()
    }

    /// The term of the entry at `index` in this replica's journal (durable once `drive`
    /// returned), or of the compaction point; `None` for an index compacted away or beyond the
    /// log.
    pub fn log_term(&self, index: u64) -> Option<u64> {
        self.journal.read().expect("journal lock").term(index)
    }

    /// Index of the last entry in the log (the last proposal, right after `propose`).
    pub fn last_index(&self) -> u64 {
        self.node.raft.raft_log.last_index()
    }

    pub fn commit_index(&self) -> u64 {
        self.node.raft.raft_log.committed
    }

    /// The highest index every voter is known to hold (leader only; `None` elsewhere): what
    /// can be compacted without leaving a follower behind the log.
    pub fn replicated_to_all(&self) -> Option<u64> {
        if !self.is_leader() {
            return None;
        }
        self.node.raft.prs().iter().map(|(_, p)| p.matched).min()
    }
}

fn collect(out: &mut Vec<Committed>, entries: Vec<RaftEntry>) {
    out.extend(entries.into_iter().map(|e| {
        let data = if e.entry_type == EntryType::EntryNormal as i32 { e.data } else { Vec::new() };
        Committed { index: e.index, term: e.term, data }
    }));
}

#[cfg(test)]
mod tests;
