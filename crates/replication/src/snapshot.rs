//! Snapshots sent to a follower behind the leader's compacted log.
//!
//! Raft's `MsgSnapshot` names the snapshot (index, term, the voters); the state itself is a
//! directory of files the group's owner keeps (a RocksDB checkpoint) and names through its
//! [`SnapshotSource`]. The leader's group offers the files to the follower ([`PacketBody::Offer`]:
//! names, sizes and the Raft message) and streams them in chunks, each with a CRC-32 over the
//! snapshot's index and term, the chunk's position and its bytes; the follower acknowledges the
//! position it has reached after each chunk, and refuses a chunk that does not fit there or
//! whose checksum does not match (the leader resends from the acknowledged position). At most
//! [`WINDOW_CHUNKS`] chunks are unacknowledged; with no progress for a while the leader resends
//! from the last acknowledged position, and gives the transfer up later (Raft then sends a new
//! snapshot message).
//!
//! The follower writes into `<index>-<term>.tmp` under its received-snapshots directory, and once
//! every byte is in, fsyncs the files, renames the directory to `<index>-<term>` (and fsyncs its
//! parent), and only then steps the Raft message: a transfer cut by a crash leaves a `.tmp`
//! directory, never used and removed when the group opens again.

use std::fs::{self, File};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::Message;

/// Bytes per chunk by default.
pub const DEFAULT_CHUNK_BYTES: usize = 1 << 20;
/// Chunks a leader sends beyond the follower's acknowledged position at most.
pub const WINDOW_CHUNKS: u64 = 8;

/// Where the group's owner keeps the state a snapshot of the group is made of.
pub trait SnapshotSource: Send + Sync {
    /// The directory of files holding the state at `index` (the entry of term `term`), while the
    /// owner keeps it: a flat directory of regular files, e.g. a RocksDB checkpoint named by its
    /// applied index. The owner removes a snapshot by renaming its directory away first (then
    /// deleting the files): the group lists and opens the files when it offers them, and a
    /// directory being emptied in place could be listed without some of them. The group compacts the log to the index it is given
    /// ([`crate::RaftGroup::compact`]) and asks for the files of that index when a follower
    /// needs them; `None` (not kept, or not yet) delays the follower's snapshot.
    fn files_at(&self, index: u64, term: u64) -> Option<PathBuf>;
}

/// A snapshot the follower received and installed: its journal now starts after `index`, and
/// the owner must replace its state by the one in `dir` before applying later entries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstalledSnapshot {
    pub index: u64,
    pub term: u64,
    /// The received files, as the leader's source had them. The owner takes the directory
    /// (renames it into its own place); one left there is removed when the group next opens
    /// with an applied index at or above `index`, or when a newer snapshot arrives.
    pub dir: PathBuf,
}

/// One file of a snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotFile {
    pub name: String,
    pub size: u64,
}

/// A piece of a snapshot transfer between two voters of a group, carried by the
/// [`crate::Transport`] like Raft's messages and handed to [`crate::RaftGroup::receive_snapshot`].
#[derive(Debug, Clone, PartialEq)]
pub struct SnapshotPacket {
    pub from: u64,
    pub to: u64,
    /// The snapshot's index and term (which transfer the packet belongs to).
    pub index: u64,
    pub term: u64,
    pub body: PacketBody,
}

/// What a [`SnapshotPacket`] says. Positions count bytes through the files in the offer's order.
#[derive(Debug, Clone, PartialEq)]
pub enum PacketBody {
    /// Leader → follower: the files, and Raft's snapshot message to step once they are in.
    Offer { files: Vec<SnapshotFile>, message: Box<Message> },
    /// Leader → follower: bytes at `position` (within one file); `crc` is [`chunk_crc`].
    Chunk { position: u64, data: Vec<u8>, crc: u32 },
    /// Follower → leader: every byte before `next` is in.
    Ack { next: u64, kind: AckKind },
}

/// How a follower answers a snapshot packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckKind {
    /// Bytes up to `next` are written.
    Progress,
    /// The chunk was refused (not at `next`, or its checksum did not match): resend from `next`.
    Refused,
    /// The follower has no transfer of this snapshot (it restarted): offer it again.
    Unknown,
    /// The snapshot is installed (or the follower did not need it): the transfer is over.
    Done,
}

/// The checksum of a chunk: CRC-32 over the snapshot's index and term, the position and the
/// bytes (a chunk of another snapshot or put at another position does not match).
pub fn chunk_crc(index: u64, term: u64, position: u64, data: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&index.to_le_bytes());
    h.update(&term.to_le_bytes());
    h.update(&position.to_le_bytes());
    h.update(data);
    h.finalize()
}

/// The files of a snapshot directory, sorted by name.
pub(crate) fn manifest(dir: &Path) -> std::io::Result<Vec<SnapshotFile>> {
    let mut files = Vec::new();
    for e in fs::read_dir(dir)? {
        let e = e?;
        let meta = e.metadata()?;
        if !meta.is_file() {
            return Err(std::io::Error::other(format!("{} is not a regular file", e.path().display())));
        }
        let name = e.file_name().into_string().map_err(|n| std::io::Error::other(format!("file name {n:?} is not UTF-8")))?;
        files.push(SnapshotFile { name, size: meta.len() });
    }
    files.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(files)
}

/// A file name the follower accepts: no directory parts.
fn safe_name(name: &str) -> bool {
    !name.is_empty() && name != "." && name != ".." && !name.contains('/') && !name.contains('\0')
}

/// The file holding `position`, and the offset in it.
fn locate(files: &[SnapshotFile], position: u64) -> Option<(usize, u64)> {
    let mut start = 0;
    for (i, f) in files.iter().enumerate() {
        if position < start + f.size {
            return Some((i, position - start));
        }
        start += f.size;
    }
    None
}

/// Directory name of a received snapshot.
pub(crate) fn received_name(index: u64, term: u64) -> String {
    format!("{index}-{term}")
}

/// The leader's side of one transfer.
pub(crate) struct Outgoing {
    pub(crate) index: u64,
    pub(crate) term: u64,
    files: Vec<SnapshotFile>,
    total: u64,
    message: Message,
    /// The follower's position; `None` until it answered the offer.
    acked: Option<u64>,
    /// The next position to send.
    sent: u64,
    /// Ticks since the follower last made progress.
    pub(crate) idle_ticks: usize,
    /// Every file, opened when the transfer started: the owner may delete the snapshot
    /// meanwhile (a newer one taken), and the transfer still sends the files it offered.
    handles: Vec<File>,
}

/// What the leader does after a follower's answer.
pub(crate) enum OutgoingState {
    Going,
    Done,
}

impl Outgoing {
    /// Starts a transfer of the snapshot in `dir`: lists and opens its files. Refused (an
    /// error) when `dir` is gone once they are open: it was being removed while listed, and
    /// what was listed may lack files (the [`SnapshotSource`] contract: the owner renames a
    /// snapshot directory away before it deletes its files).
    pub(crate) fn new(message: Message, dir: PathBuf) -> std::io::Result<Self> {
        let meta = message.get_snapshot().get_metadata();
        let (index, term) = (meta.index, meta.term);
        let files = manifest(&dir)?;
        let handles = files.iter().map(|f| File::open(dir.join(&f.name))).collect::<std::io::Result<Vec<File>>>()?;
        if !dir.is_dir() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("snapshot {} was removed while it was offered", dir.display()),
            ));
        }
        let total = files.iter().map(|f| f.size).sum();
        Ok(Self { index, term, files, total, message, acked: None, sent: 0, idle_ticks: 0, handles })
    }

    fn packet(&self, body: PacketBody) -> SnapshotPacket {
        SnapshotPacket { from: self.message.from, to: self.message.to, index: self.index, term: self.term, body }
    }

    pub(crate) fn offer(&self) -> SnapshotPacket {
        self.packet(PacketBody::Offer { files: self.files.clone(), message: Box::new(self.message.clone()) })
    }

    /// Takes the follower's answer.
    pub(crate) fn on_ack(&mut self, next: u64, kind: AckKind) -> OutgoingState {
        match kind {
            AckKind::Done => return OutgoingState::Done,
            AckKind::Unknown => {
                self.acked = None;
                self.sent = 0;
                return OutgoingState::Going;
            }
            AckKind::Progress | AckKind::Refused => {}
        }
        let next = next.min(self.total);
        if self.acked.is_some_and(|a| next < a) {
            // an answer to a chunk sent before the last resend
            return OutgoingState::Going;
        }
        if self.acked.is_none_or(|a| next > a) {
            self.idle_ticks = 0;
        }
        self.acked = Some(next);
        if kind == AckKind::Refused || self.sent < next {
            self.sent = next;
        }
        OutgoingState::Going
    }

    /// Nothing heard for a while: resend the offer, or from the acknowledged position.
    pub(crate) fn resend(&mut self) -> Option<SnapshotPacket> {
        match self.acked {
            None => Some(self.offer()),
            Some(acked) => {
                self.sent = acked;
                None
            }
        }
    }

    /// The chunks the window has room for.
    pub(crate) fn chunks(&mut self, chunk_bytes: usize) -> std::io::Result<Vec<SnapshotPacket>> {
        let Some(acked) = self.acked else { return Ok(Vec::new()) };
        let limit = acked.saturating_add(WINDOW_CHUNKS * chunk_bytes as u64).min(self.total);
        let mut out = Vec::new();
        while self.sent < limit {
            let (file, offset) = locate(&self.files, self.sent).expect("a position below the total is in a file");
            let len = (self.files[file].size - offset).min(chunk_bytes as u64).min(limit - self.sent) as usize;
            let mut data = vec![0u8; len];
            self.handles[file].read_exact_at(&mut data, offset)?;
            let crc = chunk_crc(self.index, self.term, self.sent, &data);
            out.push(self.packet(PacketBody::Chunk { position: self.sent, data, crc }));
            self.sent += len as u64;
        }
        Ok(out)
    }
}

/// The follower's side of one transfer.
pub(crate) struct Incoming {
    pub(crate) from: u64,
    pub(crate) index: u64,
    pub(crate) term: u64,
    files: Vec<SnapshotFile>,
    total: u64,
    pub(crate) message: Message,
    tmp: PathBuf,
    next: u64,
    open: Option<(usize, File)>,
}

/// The result of a chunk.
pub(crate) enum Received {
    /// Written or refused: answer with this.
    Answer(u64, AckKind),
    /// Every byte is in: [`Incoming::finish`] it.
    Complete,
}

impl Incoming {
    /// Starts a transfer into `<root>/<index>-<term>.tmp` (emptied first).
    pub(crate) fn start(
        root: &Path,
        from: u64,
        index: u64,
        term: u64,
        files: Vec<SnapshotFile>,
        message: Message,
    ) -> std::io::Result<Self> {
        if let Some(bad) = files.iter().find(|f| !safe_name(&f.name)) {
            return Err(std::io::Error::other(format!("snapshot file name {:?} refused", bad.name)));
        }
        let tmp = root.join(format!("{}.tmp", received_name(index, term)));
        match fs::remove_dir_all(&tmp) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        fs::create_dir_all(&tmp)?;
        // empty files have no chunk
        for f in &files {
            File::create(tmp.join(&f.name))?;
        }
        let total = files.iter().map(|f| f.size).sum();
        Ok(Self { from, index, term, files, total, message, tmp, next: 0, open: None })
    }

    pub(crate) fn next(&self) -> u64 {
        self.next
    }

    pub(crate) fn complete(&self) -> bool {
        self.next == self.total
    }

    /// Writes the chunk at `position` if it is the next one and its checksum matches.
    pub(crate) fn chunk(&mut self, position: u64, data: &[u8], crc: u32) -> std::io::Result<Received> {
        if position < self.next {
            // a duplicate of what is written: say where it stands, without a resend
            return Ok(Received::Answer(self.next, AckKind::Progress));
        }
        let Some((file, offset)) = locate(&self.files, position) else { return Ok(Received::Answer(self.next, AckKind::Refused)) };
        let fits = offset + data.len() as u64 <= self.files[file].size && !data.is_empty();
        if position != self.next || !fits || chunk_crc(self.index, self.term, position, data) != crc {
            return Ok(Received::Answer(self.next, AckKind::Refused));
        }
        if self.open.as_ref().is_none_or(|(n, _)| *n != file) {
            let f = fs::OpenOptions::new().write(true).open(self.tmp.join(&self.files[file].name))?;
            self.open = Some((file, f));
        }
        self.open.as_ref().expect("opened").1.write_all_at(data, offset)?;
        self.next += data.len() as u64;
        Ok(if self.complete() { Received::Complete } else { Received::Answer(self.next, AckKind::Progress) })
    }

    /// Makes the files durable and moves them to `<root>/<index>-<term>`, which it returns.
    pub(crate) fn finish(mut self, root: &Path) -> std::io::Result<PathBuf> {
        self.open = None;
        for f in &self.files {
            let file = File::open(self.tmp.join(&f.name))?;
            if file.metadata()?.len() != f.size {
                return Err(std::io::Error::other(format!("received {} has the wrong size", f.name)));
            }
            file.sync_all()?;
        }
        File::open(&self.tmp)?.sync_all()?;
        let done = root.join(received_name(self.index, self.term));
        if done.exists() {
            fs::remove_dir_all(&done)?;
        }
        fs::rename(&self.tmp, &done)?;
        File::open(root)?.sync_all()?;
        Ok(done)
    }
}

/// Creates `root` if missing, and removes transfers a crash cut (`*.tmp`) and received
/// snapshots other than `keep`.
pub(crate) fn clean_received(root: &Path, keep: Option<&Path>) -> std::io::Result<()> {
    let entries = match fs::read_dir(root) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    for e in entries {
        let path = e?.path();
        if Some(path.as_path()) != keep {
            fs::remove_dir_all(&path)?;
        }
    }
    File::open(root)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot_message(index: u64, term: u64) -> Message {
        let mut m = Message { from: 1, to: 2, term, ..Default::default() };
        m.set_msg_type(crate::MessageType::MsgSnapshot);
        let meta = m.mut_snapshot().mut_metadata();
        meta.index = index;
        meta.term = term;
        m
    }

    fn source(dir: &Path) {
        fs::write(dir.join("a"), vec![7u8; 10_000]).unwrap();
        fs::write(dir.join("b-empty"), b"").unwrap();
        fs::write(dir.join("c"), (0..5_000u32).flat_map(|i| i.to_le_bytes()).collect::<Vec<_>>()).unwrap();
    }

    #[test]
    fn chunks_cross_files_and_arrive_identical_with_refusals_resent() {
        let src = tempfile::tempdir().unwrap();
        let root = tempfile::tempdir().unwrap();
        source(src.path());
        let mut out = Outgoing::new(snapshot_message(40, 3), src.path().to_path_buf()).unwrap();
        let PacketBody::Offer { files, message } = out.offer().body else { panic!("an offer") };
        let mut inc = Incoming::start(root.path(), 1, 40, 3, files, *message).unwrap();
        out.on_ack(inc.next(), AckKind::Progress);
        let mut corrupted = false;
        let mut refused = 0;
        let dir = loop {
            let chunks = out.chunks(3_000).unwrap();
            assert!(!chunks.is_empty(), "the window stalled");
            let mut complete = false;
            for p in chunks {
                let PacketBody::Chunk { position, mut data, crc } = p.body else { panic!("a chunk") };
                if !corrupted && position > 12_000 {
                    data[5] ^= 1;
                    corrupted = true;
                }
                match inc.chunk(position, &data, crc).unwrap() {
                    Received::Answer(next, kind) => {
                        refused += usize::from(kind == AckKind::Refused);
                        out.on_ack(next, kind);
                    }
                    Received::Complete => complete = true,
                }
            }
            if complete {
                break inc.finish(root.path()).unwrap();
            }
        };
        assert!(refused >= 1, "the corrupted chunk was taken");
        assert_eq!(dir, root.path().join("40-3"));
        for name in ["a", "b-empty", "c"] {
            assert_eq!(fs::read(dir.join(name)).unwrap(), fs::read(src.path().join(name)).unwrap(), "{name}");
        }
        assert!(!root.path().join("40-3.tmp").exists());
    }

    #[test]
    fn a_transfer_sends_what_it_offered_after_the_owner_deleted_the_snapshot() {
        // the leader's owner takes a newer snapshot and deletes this one while a follower is
        // sent it: the transfer goes on with the files it offered (it used to open each file
        // only when it reached it, failed, and started over with the next snapshot)
        let src = tempfile::tempdir().unwrap();
        let root = tempfile::tempdir().unwrap();
        let kept = tempfile::tempdir().unwrap();
        source(src.path());
        for name in ["a", "b-empty", "c"] {
            fs::copy(src.path().join(name), kept.path().join(name)).unwrap();
        }
        let mut out = Outgoing::new(snapshot_message(40, 3), src.path().to_path_buf()).unwrap();
        let away = src.path().with_extension("removed");
        fs::rename(src.path(), &away).unwrap();
        fs::remove_dir_all(&away).unwrap();
        let PacketBody::Offer { files, message } = out.offer().body else { panic!("an offer") };
        let mut inc = Incoming::start(root.path(), 1, 40, 3, files, *message).unwrap();
        out.on_ack(inc.next(), AckKind::Progress);
        let dir = 'transfer: loop {
            let chunks = out.chunks(3_000).expect("the offered files stay readable");
            assert!(!chunks.is_empty(), "the window stalled");
            for p in chunks {
                let PacketBody::Chunk { position, data, crc } = p.body else { panic!("a chunk") };
                match inc.chunk(position, &data, crc).unwrap() {
                    Received::Answer(next, kind) => {
                        out.on_ack(next, kind);
                    }
                    Received::Complete => break 'transfer inc.finish(root.path()).unwrap(),
                }
            }
        };
        for name in ["a", "b-empty", "c"] {
            assert_eq!(fs::read(dir.join(name)).unwrap(), fs::read(kept.path().join(name)).unwrap(), "{name}");
        }
    }

    #[test]
    fn a_chunk_of_another_position_or_snapshot_is_refused() {
        let src = tempfile::tempdir().unwrap();
        let root = tempfile::tempdir().unwrap();
        source(src.path());
        let files = manifest(src.path()).unwrap();
        let mut inc = Incoming::start(root.path(), 1, 40, 3, files, snapshot_message(40, 3)).unwrap();
        let data = vec![7u8; 100];
        let refused = |r: Received| matches!(r, Received::Answer(0, AckKind::Refused));
        assert!(refused(inc.chunk(0, &data, chunk_crc(41, 3, 0, &data)).unwrap()));
        assert!(refused(inc.chunk(100, &data, chunk_crc(40, 3, 100, &data)).unwrap()));
        assert!(refused(inc.chunk(0, &data, chunk_crc(40, 3, 1, &data)).unwrap()));
        assert!(matches!(inc.chunk(0, &data, chunk_crc(40, 3, 0, &data)).unwrap(), Received::Answer(100, AckKind::Progress)));
        assert!(
            Incoming::start(root.path(), 1, 40, 3, vec![SnapshotFile { name: "../x".into(), size: 1 }], snapshot_message(40, 3)).is_err()
        );
    }
}
