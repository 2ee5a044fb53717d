//! Invariant (network simulation): nodes agree on every committed entry: whichever node applies
//! index i, in whichever run (a restarted node re-applies from its journal), it applies the same
//! entry of the same term, and after the calm phase every node holds the same log.

mod netsim;

use std::collections::BTreeMap;

#[test]
fn nodes_agree_on_the_committed_prefix() {
    netsim::for_each_seed(|seed| {
        let history = netsim::history(seed);
        let mut first: BTreeMap<u64, &netsim::Applied> = BTreeMap::new();
        for a in &history.applied {
            let seen = first.entry(a.index).or_insert(a);
            assert!(
                (seen.term, seen.op) == (a.term, a.op),
                "seed {seed}: index {} is {:?} of term {} on node {} (run {}) but {:?} of term {} on node {} (run {})",
                a.index,
                seen.op,
                seen.term,
                seen.node,
                seen.run,
                a.op,
                a.term,
                a.node,
                a.run
            );
        }
        let logs: Vec<_> = history.final_logs.values().map(|log| log.iter().map(|a| (a.index, a.term, a.op)).collect::<Vec<_>>()).collect();
        assert!(logs.windows(2).all(|w| w[0] == w[1]), "seed {seed}: the nodes' logs differ after the calm phase");
    });
}
