//! Invariant: log compaction never strands a follower. Every node checkpoints its state and
//! compacts its log every few entries, so a node back from a crash or a partition is often behind
//! the leader's log: it is sent the leader's snapshot (chunks with checksums, some corrupted on
//! the way), installs it, takes the log after it, and converges. A snapshot holds the same state
//! as every node that applied its index, and after the calm phase all nodes hold one state.

mod sim;

use std::collections::BTreeMap;

use sim::{Scenario, Sim};

fn scenario(seed: u64) -> Scenario {
    Scenario { checkpoint_every: 25, corrupt: 0.05, ..Scenario::for_seed(seed) }
}

#[test]
fn followers_behind_the_compacted_log_install_snapshots_and_converge() {
    let (mut installs, mut corrupted, mut refused, mut crashed_installing) = (0, 0, 0, 0);
    sim::for_each_seed(|seed| {
        let history = Sim::run(seed, scenario(seed));
        assert!(history.acknowledged.len() >= 20, "seed {seed}: only {} entries acknowledged", history.acknowledged.len());
        // the state at each index, from every application and every installed snapshot
        let mut at: BTreeMap<u64, (u64, String)> = BTreeMap::new();
        let applied = history.applied.iter().map(|a| (a.index, a.digest, format!("node {} (run {}) applying", a.node, a.run)));
        let installed = history.installs.iter().map(|i| (i.index, i.digest, format!("node {} (run {}) installing", i.node, i.run)));
        for (index, digest, who) in applied.chain(installed) {
            let (seen, by) = at.entry(index).or_insert((digest, who.clone()));
            assert_eq!(*seen, digest, "seed {seed}: at index {index} {by} and {who} hold different states");
        }
        let states: Vec<_> = history.final_states.values().collect();
        assert!(states.windows(2).all(|w| w[0] == w[1]), "seed {seed}: the nodes' states differ after the calm phase: {states:?}");
        for ack in &history.acknowledged {
            let (final_index, _) = states[0];
            assert!(*final_index >= ack.index, "seed {seed}: acknowledged index {} is beyond the final state", ack.index);
            let (digest, _) = at.get(&ack.index).expect("an acknowledged index was applied");
            let entry_digest = history.applied.iter().find(|a| a.index == ack.index).map(|a| (a.digest, &a.data));
            assert_eq!(
                entry_digest.map(|(d, data)| (d, data.clone())),
                Some((*digest, ack.data.clone())),
                "seed {seed}: acknowledged entry lost"
            );
        }
        eprintln!(
            "seed {seed}: {} installs ({} crashes before the state took one), {} chunks corrupted, {} refused, {} crashes",
            history.installs.len(),
            history.crashes_after_install,
            history.chunks_corrupted,
            history.chunks_refused,
            history.crashes
        );
        installs += history.installs.len();
        corrupted += history.chunks_corrupted;
        refused += history.chunks_refused;
        crashed_installing += history.crashes_after_install;
    });
    if std::env::var("SIM_SEED").is_err() {
        assert!(installs > 0, "no follower ever needed a snapshot: the test exercises nothing");
        assert!(crashed_installing > 0, "no node crashed between installing a snapshot and taking it");
        assert!(corrupted > 0 && refused >= corrupted / 2, "{corrupted} chunks corrupted, {refused} refused");
    }
}

#[test]
fn a_seed_with_snapshots_replays_the_same_run() {
    let a = Sim::run(4, scenario(4));
    let b = Sim::run(4, scenario(4));
    assert_eq!(a.installs, b.installs);
    assert_eq!(a.applied, b.applied);
}
