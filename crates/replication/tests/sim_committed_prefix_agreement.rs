//! Invariant: nodes agree on every committed entry: whichever node applies index i, in
//! whichever run (restarts re-apply from the journal), it applies the same entry of the same
//! term, and after the calm phase every node holds the same log.

mod sim;

use std::collections::BTreeMap;

#[test]
fn nodes_agree_on_the_committed_prefix() {
    sim::for_each_seed(|seed| {
        let history = sim::history(seed);
        let mut first: BTreeMap<u64, &sim::Applied> = BTreeMap::new();
        for a in &history.applied {
            let seen = first.entry(a.index).or_insert(a);
            assert!(
                (seen.term, &seen.data) == (a.term, &a.data),
                "seed {seed}: index {} is {:?} of term {} on node {} (run {}) but {:?} of term {} on node {} (run {})",
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
        let logs: Vec<_> =
            history.final_logs.values().map(|log| log.iter().map(|a| (a.index, a.term, &a.data)).collect::<Vec<_>>()).collect();
        assert!(logs.windows(2).all(|w| w[0] == w[1]), "seed {seed}: the nodes' logs differ after the calm phase");
    });
}
