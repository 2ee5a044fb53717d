//! Invariant: state machines that applied the same index hold the same state (their digests,
//! chained over every applied entry, are equal), on every node and in every run.

mod sim;

use std::collections::BTreeMap;

#[test]
fn state_digests_are_equal_at_equal_applied_index() {
    sim::for_each_seed(|seed| {
        let history = sim::history(seed);
        let mut first: BTreeMap<u64, &sim::Applied> = BTreeMap::new();
        for a in &history.applied {
            let seen = first.entry(a.index).or_insert(a);
            assert_eq!(
                seen.digest, a.digest,
                "seed {seed}: at index {} node {} (run {}) and node {} (run {}) hold different states",
                a.index, seen.node, seen.run, a.node, a.run
            );
        }
    });
}
