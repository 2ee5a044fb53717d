//! A partition's membership changes at run time, made by its leader as the cluster topology
//! ([`crate::topology`]) asks: a replica joins as a Raft learner, catches up by a snapshot taken
//! after it was added (so that the snapshot's configuration names it) and then the log, and is
//! promoted to voter; a replica leaves by a configuration change that removes it (a leader that
//! leaves hands its leadership to a caught-up voter first). One change at a time, joins before
//! leaves: a partition never counts a replica that is behind, and a leave never runs while a join
//! of the same partition is unfinished (the topology asks for one operation at a time).

use std::time::{Duration, Instant};

use super::Processor;

/// The changes asked of a partition, in Raft ids. Every replica holds them; only its leader acts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Wanted {
    /// Replicas to add: as learner, then as voter once caught up.
    pub join: Vec<u64>,
    /// Replicas to remove.
    pub leave: Vec<u64>,
    /// This replica's election priority in the topology (it changes when a change gives the
    /// partition a new preferred replica): applied by every replica, whatever its role, so that
    /// a replica that joined can be elected as the new preferred leader.
    pub priority: Option<u64>,
    /// The replicas that stay, highest election priority first: a leader that leaves hands its
    /// leadership to the first of them that is a caught-up voter. (A voter refuses a candidate of
    /// lower priority whose log is no longer than its own, raft-rs's priority election: handed to
    /// a lower-priority replica, the election failed while the new preferred replica and the
    /// leaver voted against it, and the leaver, elected again, handed over again, for minutes:
    /// a 6 -> 3 broker change of `waggle bench cluster --scenarios scaling`.)
    pub successors: Vec<u64>,
}

/// How often the leader proposes the next step at most (a refused step is tried again).
const STEP_EVERY: Duration = Duration::from_millis(100);

/// The leader's progress on a join.
#[derive(Debug, Default)]
pub(super) struct Progress {
    /// The learner being caught up, and the applied index when the leader first saw it in the
    /// configuration: the snapshot it is sent must be at or after that index.
    learner_since: Option<(u64, u64)>,
    last_step: Option<Instant>,
    /// While a learner waits for its first snapshot: the index the log must be compacted to at
    /// least, whatever the followers hold (a snapshot at or after it taken first), so that the
    /// snapshot Raft sends the learner names it in its configuration. `None` once the log is
    /// compacted that far: it is then compacted as usual, and the learner, once it holds that
    /// snapshot, catches up by the log like any follower (its progress holds compaction back).
    /// Forcing a snapshot and a compaction for as long as the learner lagged made the leader
    /// snapshot on every round while commands flowed, and send the learner snapshot after
    /// snapshot: each compaction past it left it needing the next one.
    pub(super) compact_to: Option<u64>,
}

impl Processor {
    /// Makes the next step of the membership changes asked, when this replica serves as the
    /// leader and no configuration change is under way.
    pub(super) fn change_membership(&mut self) {
        self.membership_progress.compact_to = None;
        if self.replica.is_none() {
            return;
        }
        let (priority, nothing_asked) = {
            let wanted = self.membership.lock().unwrap_or_else(|e| e.into_inner());
            (wanted.priority, wanted.join.is_empty() && wanted.leave.is_empty())
        };
        if let Some(priority) = priority {
            self.raft.set_priority(priority);
        }
        if !self.serving() {
            self.membership_progress.learner_since = None;
            return;
        }
        if nothing_asked {
            return;
        }
        let wanted = self.membership.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let conf = self.raft.conf_state();
        if !conf.voters_outgoing.is_empty() {
            return;
        }
        if let Some(id) = wanted.join.iter().copied().find(|id| !conf.voters.contains(id)) {
            if conf.learners.contains(&id) {
                let since = match self.membership_progress.learner_since {
                    Some((learner, since)) if learner == id => since,
                    _ => {
                        self.membership_progress.learner_since = Some((id, self.applied));
                        self.applied
                    }
                };
                if self.compacted < since {
                    self.membership_progress.compact_to = Some(since);
                    return;
                }
                if self.raft.caught_up(id) && self.may_step() {
                    match self.raft.promote_learner(id) {
                        Ok(()) => tracing::info!(
                            partition = self.id,
                            node = crate::cluster::node_of_raft_id(id),
                            "promoting the caught-up learner"
                        ),
                        Err(e) => tracing::debug!(partition = self.id, error = %e, "learner not promoted yet"),
                    }
                }
                return;
            }
            // Raft sends a new member what the log lacks as a snapshot: the log must be compacted
            if self.raft.first_index() <= 1 {
                self.membership_progress.compact_to = Some(1);
                return;
            }
            if self.may_step() {
                match self.raft.add_learner(id) {
                    Ok(()) => tracing::info!(partition = self.id, node = crate::cluster::node_of_raft_id(id), "adding a learner"),
                    Err(e) => tracing::debug!(partition = self.id, error = %e, "learner not added yet"),
                }
            }
            return;
        }
        let Some(id) = wanted.leave.iter().copied().find(|id| conf.voters.contains(id) || conf.learners.contains(id)) else { return };
        if !self.may_step() {
            return;
        }
        if id == self.raft.id() {
            // the leader leaves: it hands its leadership to a voter that holds everything first,
            // the one of highest priority (see `Wanted::successors`)
            let to = handover_target(id, &wanted.successors, &conf.voters, |v| self.raft.caught_up(v));
            if let Some(to) = to {
                tracing::info!(
                    partition = self.id,
                    to = crate::cluster::node_of_raft_id(to),
                    "leaving the partition: handing the leadership over"
                );
                self.raft.transfer_leader(to);
            }
            return;
        }
        match self.raft.remove_voter(id) {
            Ok(()) => tracing::info!(partition = self.id, node = crate::cluster::node_of_raft_id(id), "removing a replica"),
            Err(e) => tracing::debug!(partition = self.id, error = %e, "replica not removed yet"),
        }
    }

    /// Whether a step may be proposed now (at most one per [`STEP_EVERY`]).
    fn may_step(&mut self) -> bool {
        let now = Instant::now();
        if self.membership_progress.last_step.is_some_and(|t| now.duration_since(t) < STEP_EVERY) {
            return false;
        }
        self.membership_progress.last_step = Some(now);
        true
    }
}

/// The voter a leader that leaves (`leaver`) hands its leadership to: the first of `successors`
/// (the staying replicas, highest priority first) that is a voter and `caught_up`, else any
/// caught-up voter but the leaver.
fn handover_target(leaver: u64, successors: &[u64], voters: &[u64], caught_up: impl Fn(u64) -> bool) -> Option<u64> {
    successors.iter().chain(voters).copied().find(|&v| v != leaver && voters.contains(&v) && caught_up(v))
}

#[cfg(test)]
mod tests {
    use super::handover_target;

    #[test]
    fn a_leaver_hands_over_to_the_caught_up_voter_of_highest_priority() {
        // Raft ids; voters in Raft's own order (a hash set's), successors by priority
        let (voters, successors) = ([2, 1, 3, 6], [3, 1, 2]);
        assert_eq!(handover_target(6, &successors, &voters, |_| true), Some(3));
        assert_eq!(handover_target(6, &successors, &voters, |v| v != 3), Some(1), "the next one while the first is behind");
        assert_eq!(handover_target(6, &[], &voters, |v| v != 2), Some(1), "without successors: any caught-up voter");
        assert_eq!(handover_target(6, &[4, 3], &voters, |_| true), Some(3), "a successor still a learner is skipped");
        assert_eq!(handover_target(6, &successors, &voters, |v| v == 6), None, "nobody caught up: nobody");
    }
}
