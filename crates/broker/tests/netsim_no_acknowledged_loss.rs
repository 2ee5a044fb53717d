//! Invariant (network simulation): a command a client was answered for is, after the calm phase,
//! in every replica's committed log at the index it was answered with, whatever the network lost,
//! delayed or cut and whichever hosts crashed.

mod netsim;

#[test]
fn no_acknowledged_command_is_lost() {
    netsim::for_each_seed(|seed| {
        let history = netsim::history(seed);
        assert_eq!(history.final_logs.len() as u64, history.voters, "seed {seed}: a replica is missing at the end");
        for (node, log) in &history.final_logs {
            for ack in &history.acknowledged {
                let at = log.get(ack.index as usize - 1);
                assert!(
                    at.is_some_and(|a| a.index == ack.index && a.op == Some(ack.op)),
                    "seed {seed}: node {node} lost command {}, acknowledged through node {}'s gateway at index {}; it has {at:?}",
                    ack.op,
                    ack.gateway,
                    ack.index
                );
            }
        }
    });
}
