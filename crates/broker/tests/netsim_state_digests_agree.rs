//! Invariant (network simulation): state machines that applied the same index hold the same
//! state (their digests, chained over every applied command, are equal), on every node and in
//! every run, and after the calm phase every node holds one state.

mod netsim;

use std::collections::BTreeMap;

#[test]
fn state_digests_are_equal_at_equal_applied_index() {
    netsim::for_each_seed(|seed| {
        let history = netsim::history(seed);
        let mut first: BTreeMap<u64, &netsim::Applied> = BTreeMap::new();
        for a in &history.applied {
            let seen = first.entry(a.index).or_insert(a);
            assert_eq!(
                seen.digest, a.digest,
                "seed {seed}: at index {} node {} (run {}) and node {} (run {}) hold different states",
                a.index, seen.node, seen.run, a.node, a.run
            );
        }
        let states: Vec<_> = history.final_states.values().collect();
        assert!(states.windows(2).all(|w| w[0] == w[1]), "seed {seed}: the nodes' states differ after the calm phase: {states:?}");
    });
}
