//! Invariant (network simulation): routing never makes a command count twice. A gateway sends a
//! command again (to the next leader it learns of or guesses) only when the answer said it was
//! certainly not taken (`NotLeader`: no leader, a node that does not lead, a host that cannot be
//! connected to); so every command is committed at most once, and one a client was answered for
//! exactly once, at the index of its answer.

mod netsim;

use std::collections::BTreeMap;

#[test]
fn a_routed_command_is_committed_at_most_once() {
    let (mut retries, mut forwarded) = (0, 0);
    netsim::for_each_seed(|seed| {
        let history = netsim::history(seed);
        let log = history.final_logs.values().next().expect("a replica");
        let mut committed: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
        for a in log {
            if let Some(op) = a.op {
                committed.entry(op).or_default().push(a.index);
            }
        }
        for (op, at) in &committed {
            assert!(at.len() == 1, "seed {seed}: command {op} is committed {} times, at {at:?}", at.len());
        }
        for ack in &history.acknowledged {
            assert_eq!(
                committed.get(&ack.op),
                Some(&vec![ack.index]),
                "seed {seed}: acknowledged command {} is not once at {}",
                ack.op,
                ack.index
            );
        }
        assert!(committed.len() as u64 <= history.submitted, "seed {seed}: more commands committed than sent");
        retries += history.asks - history.routed;
        forwarded += history.forwarded;
    });
    if std::env::var("SIM_SEED").is_err() {
        // routing was put to the test: commands were forwarded, and retried after NotLeader
        assert!(forwarded > 0 && retries > 0, "{forwarded} forwarded, {retries} retried");
    }
}
