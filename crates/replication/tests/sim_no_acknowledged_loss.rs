//! Invariant: an entry a client was told is committed is in every node's log at the index it
//! was acknowledged at, whatever was lost, delayed, duplicated, partitioned or crashed before.

mod sim;

#[test]
fn no_acknowledged_entry_is_lost() {
    sim::for_each_seed(|seed| {
        let history = sim::history(seed);
        for (node, log) in &history.final_logs {
            for ack in &history.acknowledged {
                let at = log.get(ack.index as usize - 1);
                assert!(
                    at.is_some_and(|a| a.index == ack.index && a.data == ack.data),
                    "seed {seed}: node {node} lost {:?}, acknowledged by node {} at index {}; it has {at:?}",
                    String::from_utf8_lossy(&ack.data),
                    ack.node,
                    ack.index
                );
            }
        }
    });
}
