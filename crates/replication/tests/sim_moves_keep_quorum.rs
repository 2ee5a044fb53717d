//! Invariant of replica moves (issue 31): a partition never loses its quorum of up-to-date
//! replicas while replicas move. The simulation moves replicas as the broker does (a new node
//! joins as a learner, catches up from the leader's snapshot, then replaces an old voter in one
//! joint-consensus change or is promoted as one voter more; or a voter leaves), under the same
//! loss, delay, duplication, partitions and crashes as the other invariants. After every step,
//! every quorum of the configuration in force (during joint consensus: of the outgoing voters,
//! which every election then needs; the incoming ones decide alone once the group left it)
//! holds the newest acknowledged entry ([`sim::quorum_violation`]). The cluster's invariants hold through the moves too:
//! at most one leader per term, committed-prefix agreement, equal digests at equal applied
//! index, no acknowledged entry lost by the members that remain.
//!
//! Zeebe 8.5 moves a partition replica the same way (docs.camunda.io, "Cluster scaling":
//! a partition is joined on the new broker before it leaves the old one), and its Raft
//! promotes a joining member only once it has caught up.

mod sim;

use std::collections::{BTreeMap, BTreeSet};

use sim::{History, Move, Scenario, Sim};
use waggle_replication::ConfState;

/// Seeds by default: a run with moves takes about a tenth of a second.
const SEEDS: u64 = 40;

/// The voters a scenario ends with once its moves are done.
fn planned_voters(scenario: &Scenario) -> Vec<u64> {
    let mut voters: BTreeSet<u64> = (1..=scenario.nodes).collect();
    for m in &scenario.moves {
        let (add, remove) = m.parts();
        voters.extend(add);
        if let Some(r) = remove {
            voters.remove(&r);
        }
    }
    voters.into_iter().collect()
}

/// A run with moves for `seed`, checked to have done what it should: entries acknowledged,
/// every move done, the last configuration the planned one.
fn moved(seed: u64) -> History {
    let scenario = Scenario::with_moves(seed);
    let history = Sim::run(seed, scenario.clone());
    assert!(history.acknowledged.len() >= 20, "seed {seed}: only {} entries acknowledged", history.acknowledged.len());
    let done: Vec<Move> = history.moves_done.iter().map(|(_, m)| *m).collect();
    assert_eq!(done, scenario.moves, "seed {seed}: not every move was done");
    let last = history.configurations.last().expect("a configuration");
    assert_eq!(
        (&last.voters, last.voters_outgoing.is_empty(), last.learners.is_empty()),
        (&planned_voters(&scenario), true, true),
        "seed {seed}: the group ends in {last:?}"
    );
    history
}

#[test]
fn every_quorum_holds_the_acknowledged_entries_through_moves() {
    let (mut checks, mut joint, mut moves_in_chaos, mut crashes, mut partitions) = (0, 0, 0, 0, 0);
    sim::for_each_of_seeds(SEEDS, |seed| {
        let h = moved(seed);
        assert!(
            h.quorum_violations.is_empty(),
            "seed {seed}: {} steps without a quorum of up-to-date replicas, the first: {}",
            h.quorum_violations.len(),
            h.quorum_violations[0]
        );
        let chaos_ends = Scenario::with_moves(seed).chaos_steps;
        eprintln!(
            "seed {seed}: moves done at steps {:?}, {} configurations, {} acknowledged, {} crashes, {} partitions, {} messages from non-members",
            h.moves_done.iter().map(|(s, _)| s).collect::<Vec<_>>(),
            h.configurations.len(),
            h.acknowledged.len(),
            h.crashes,
            h.partitions,
            h.from_non_members
        );
        checks += h.quorum_checks;
        joint += h.configurations.iter().filter(|c| !c.voters_outgoing.is_empty()).count();
        moves_in_chaos += h.moves_done.iter().filter(|(step, _)| *step <= chaos_ends).count();
        crashes += h.crashes;
        partitions += h.partitions;
    });
    // the invariant was put to the test: moves through joint consensus, under chaos
    assert!(checks > 0 && joint > 0, "{checks} checks, {joint} joint configurations");
    if std::env::var("SIM_SEED").is_err() {
        assert!(
            moves_in_chaos > 0 && crashes > 0 && partitions > 0,
            "{moves_in_chaos} moves in chaos, {crashes} crashes, {partitions} partitions"
        );
    }
}

#[test]
fn the_cluster_invariants_hold_through_moves() {
    sim::for_each_of_seeds(SEEDS, |seed| {
        let h = moved(seed);
        // at most one leader per term
        for (term, leaders) in &h.leaders {
            assert!(leaders.len() <= 1, "seed {seed}: nodes {leaders:?} all led term {term}");
        }
        // committed-prefix agreement and equal digests at equal applied index: every application
        // of an index, by any node in any run, is of the same entry and yields the same state
        let mut chain: BTreeMap<u64, &sim::Applied> = BTreeMap::new();
        for a in &h.applied {
            let seen = chain.entry(a.index).or_insert(a);
            assert!(
                (seen.term, &seen.data, seen.digest) == (a.term, &a.data, a.digest),
                "seed {seed}: index {} is {:?} of term {} on node {} (run {}) but {:?} of term {} on node {} (run {}), or their states differ",
                a.index,
                String::from_utf8_lossy(&seen.data),
                seen.term,
                seen.node,
                seen.run,
                String::from_utf8_lossy(&a.data),
                a.term,
                a.node,
                a.run
            );
        }
        for i in &h.installs {
            let applied = chain.get(&i.index).map(|a| a.digest);
            assert!(
                applied.is_none_or(|d| d == i.digest),
                "seed {seed}: node {} installed another state at {} than was applied",
                i.node,
                i.index
            );
        }
        // no acknowledged entry lost: the group's chain holds each at its index, and every
        // member that remains holds the chain's state past all of them (the digest chains every
        // entry: members that took snapshots never applied the first entries themselves)
        for ack in &h.acknowledged {
            let at = chain.get(&ack.index);
            assert!(
                at.is_some_and(|a| (a.term, &a.data) == (ack.term, &ack.data)),
                "seed {seed}: {:?}, acknowledged at index {}, is not the group's entry there: {at:?}",
                String::from_utf8_lossy(&ack.data),
                ack.index
            );
        }
        let newest = h.acknowledged.iter().map(|a| a.index).max().unwrap_or(0);
        assert_eq!(h.final_states.keys().copied().collect::<Vec<_>>(), planned_voters(&Scenario::with_moves(seed)), "seed {seed}: members");
        for (node, (index, digest)) in &h.final_states {
            assert!(*index >= newest, "seed {seed}: node {node} ends at {index}, before the acknowledged {newest}");
            let group = chain.get(index).map(|a| a.digest);
            assert_eq!(group, Some(*digest), "seed {seed}: node {node}'s state at {index} is not the group's");
        }
    });
}

/// Seeds that found bugs, run whatever `SIM_SEEDS` says (the seeds depend on the harness: a
/// change to it may move the bugs to other seeds): 7, a follower handed the entries after a
/// snapshot in the `drive` that installed it (applied before its state was replaced), and 50, a
/// voter removed by one leader's change that became leader before applying it (the `raft` crate
/// panicked at its next append).
#[test]
fn seeds_that_found_bugs_pass() {
    for seed in [7, 50] {
        let h = moved(seed);
        assert!(h.quorum_violations.is_empty(), "seed {seed}: {:?}", h.quorum_violations.first());
    }
}

#[test]
fn a_seed_with_moves_replays_the_same_run() {
    let (a, b) = (moved(1), moved(1));
    assert_eq!(a.moves_done, b.moves_done);
    assert_eq!(a.configurations, b.configurations);
    assert_eq!(a.applied, b.applied);
}

fn conf(voters: &[u64], outgoing: &[u64]) -> ConfState {
    ConfState { voters: voters.to_vec(), voters_outgoing: outgoing.to_vec(), ..Default::default() }
}

/// The checker can fail: moves made in a wrong order are reported, the right order is not.
/// Voters 1, 2 and 3 held the entries; the newest acknowledged one is on 1 and 2.
#[test]
fn the_quorum_checker_reports_moves_in_a_wrong_order() {
    let on = |ids: &[u64]| ids.iter().copied().collect::<BTreeSet<u64>>();
    // two learners promoted before they caught up: 3, 4 and 5 could elect a leader without it
    let wrong = sim::quorum_violation(&conf(&[1, 2, 3, 4, 5], &[]), 100, &on(&[1, 2]));
    assert!(wrong.is_some_and(|w| w.contains("[3, 4, 5] lack")), "promotion before catch-up not reported");
    // the same once one caught up (holds it)
    assert_eq!(sim::quorum_violation(&conf(&[1, 2, 3, 4, 5], &[]), 100, &on(&[1, 2, 4])), None);
    // two voters replaced in one step, without joint consensus: 4 and 5 are a quorum of {3, 4, 5}
    assert!(sim::quorum_violation(&conf(&[3, 4, 5], &[]), 100, &on(&[1, 2, 3])).is_some());
    // the same change by joint consensus: the outgoing voters still decide, and hold it
    let joint = conf(&[3, 4, 5], &[1, 2, 3]);
    assert_eq!(sim::quorum_violation(&joint, 100, &on(&[1, 2])), None);
    // an outgoing quorum without it, during joint consensus, is reported
    assert!(sim::quorum_violation(&joint, 100, &on(&[3, 4, 5])).is_some_and(|w| w.starts_with("the outgoing")));
    // and once the group left the joint configuration, the new voters decide alone
    assert!(sim::quorum_violation(&conf(&[3, 4, 5], &[]), 100, &on(&[1, 2, 3, 4])).is_none());
    // one caught-up learner promoted: two of four voters without it are not a quorum
    assert_eq!(sim::quorum_violation(&conf(&[1, 2, 3, 4], &[]), 100, &on(&[1, 2])), None);
}
