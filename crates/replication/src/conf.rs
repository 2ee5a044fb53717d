//! A group's membership (Raft's `ConfState`) through its changes, persisted beside the journal
//! in `<dir>/raft-conf`: one line per configuration, `index|voters|learners|voters_outgoing|
//! learners_next|auto_leave`, ids comma-separated, from the oldest still needed.
//!
//! Contract: the file is written (temporary file, fsync, rename, fsync of the folder) each time
//! a configuration change is applied or a snapshot installed, before anything after it is
//! applied; a group without the file has the voters of its [`crate::ReplicaConfig`] since index 0
//! (every group before membership changes existed). A snapshot at index `i` carries the
//! configuration in force at `i` ([`ConfHistory::at`]).

use std::io::Write;
use std::path::Path;

use raft::prelude::ConfState;

/// The file's name in the journal's directory.
pub(crate) const FILE_NAME: &str = "raft-conf";

/// The configurations in force from each index on, oldest first.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct ConfHistory {
    entries: Vec<(u64, ConfState)>,
}

fn ids(list: &[u64]) -> String {
    list.iter().map(u64::to_string).collect::<Vec<_>>().join(",")
}

fn parse_ids(text: &str) -> Option<Vec<u64>> {
    if text.is_empty() {
        return Some(Vec::new());
    }
    text.split(',').map(|s| s.parse().ok()).collect()
}

impl ConfHistory {
    /// Voters `voters` since index 0.
    pub(crate) fn initial(voters: Vec<u64>) -> Self {
        ConfHistory { entries: vec![(0, ConfState { voters, ..Default::default() })] }
    }

    /// The history persisted in `dir`, if any.
    pub(crate) fn load(dir: &Path) -> std::io::Result<Option<Self>> {
        let text = match std::fs::read_to_string(dir.join(FILE_NAME)) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let invalid = |line: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, format!("{FILE_NAME}: unreadable line {line:?}"));
        let mut entries = Vec::new();
        for line in text.lines().filter(|l| !l.is_empty()) {
            let parts: Vec<&str> = line.split('|').collect();
            let [index, voters, learners, outgoing, learners_next, auto_leave] = parts[..] else { return Err(invalid(line)) };
            let conf = (|| {
                Some(ConfState {
                    voters: parse_ids(voters)?,
                    learners: parse_ids(learners)?,
                    voters_outgoing: parse_ids(outgoing)?,
                    learners_next: parse_ids(learners_next)?,
                    auto_leave: auto_leave == "1",
                })
            })()
            .ok_or_else(|| invalid(line))?;
            entries.push((index.parse().map_err(|_| invalid(line))?, conf));
        }
        Ok(Some(ConfHistory { entries }))
    }

    /// Writes the history to `dir` atomically.
    pub(crate) fn save(&self, dir: &Path) -> std::io::Result<()> {
        let mut text = String::new();
        for (index, c) in &self.entries {
            text.push_str(&format!(
                "{index}|{}|{}|{}|{}|{}\n",
                ids(&c.voters),
                ids(&c.learners),
                ids(&c.voters_outgoing),
                ids(&c.learners_next),
                u8::from(c.auto_leave)
            ));
        }
        let tmp = dir.join(format!("{FILE_NAME}.tmp"));
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(text.as_bytes())?;
        file.sync_all()?;
        drop(file);
        std::fs::rename(&tmp, dir.join(FILE_NAME))?;
        std::fs::File::open(dir)?.sync_all()
    }

    /// The configuration in force now (none for a replica that has not learnt it yet).
    pub(crate) fn latest(&self) -> ConfState {
        self.entries.last().map(|(_, c)| c.clone()).unwrap_or_default()
    }

    /// The index of the last change applied (0 for none).
    pub(crate) fn last_index(&self) -> u64 {
        self.entries.last().map_or(0, |(i, _)| *i)
    }

    /// The configuration in force at `index`.
    pub(crate) fn at(&self, index: u64) -> ConfState {
        self.entries.iter().rev().find(|(i, _)| *i <= index).or(self.entries.first()).map(|(_, c)| c.clone()).unwrap_or_default()
    }

    /// Whether `id` is in the configuration now (voter, learner, or leaving voter); a replica
    /// that has no configuration yet takes every node for one.
    pub(crate) fn is_member(&self, id: u64) -> bool {
        let Some((_, c)) = self.entries.last() else { return true };
        c.voters.contains(&id) || c.learners.contains(&id) || c.voters_outgoing.contains(&id) || c.learners_next.contains(&id)
    }

    /// Records the configuration `conf` applied at `index`, dropping those no snapshot needs
    /// any more (before `keep_from`, the log's compaction point).
    pub(crate) fn push(&mut self, index: u64, conf: ConfState, keep_from: u64) {
        self.entries.push((index, conf));
        let still_needed = self.entries.iter().rposition(|(i, _)| *i <= keep_from).unwrap_or(0);
        self.entries.drain(..still_needed);
    }

    /// The history of a replica that installed a snapshot at `index` holding `conf`.
    pub(crate) fn reset(&mut self, index: u64, conf: ConfState) {
        self.entries = vec![(index, conf)];
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_history_round_trips_and_answers_by_index() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(ConfHistory::load(dir.path()).unwrap(), None);
        let mut h = ConfHistory::initial(vec![1, 2, 3]);
        h.push(10, ConfState { voters: vec![1, 2, 3], learners: vec![4], ..Default::default() }, 0);
        let joint = ConfState { voters: vec![2, 3, 4], voters_outgoing: vec![1, 2, 3], auto_leave: true, ..Default::default() };
        h.push(15, joint.clone(), 0);
        h.save(dir.path()).unwrap();
        let back = ConfHistory::load(dir.path()).unwrap().unwrap();
        assert_eq!(back, h);
        assert_eq!(back.at(9).voters, vec![1, 2, 3]);
        assert_eq!(back.at(12).learners, vec![4]);
        assert_eq!(back.at(20), joint);
        assert!(back.is_member(1) && back.is_member(4) && !back.is_member(5));
        // a compaction past 12 drops the initial configuration
        h.push(20, ConfState { voters: vec![2, 3, 4], ..Default::default() }, 12);
        assert_eq!(h.at(0).learners, vec![4], "the oldest kept stands for earlier indexes");
        assert_eq!(h.last_index(), 20);
        assert!(!h.is_member(1));
        assert!(ConfHistory::default().is_member(7), "no configuration yet: anyone");
    }
}
