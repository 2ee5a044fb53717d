//! Invariant (network simulation): no two nodes lead in the same term (election safety), over
//! the real transport's reconnections, partitions and crashes.

mod netsim;

#[test]
fn at_most_one_leader_per_term() {
    let mut terms = 0;
    netsim::for_each_seed(|seed| {
        let history = netsim::history(seed);
        for (term, leaders) in &history.leaders {
            assert!(leaders.len() <= 1, "seed {seed}: nodes {leaders:?} all led term {term}");
        }
        terms += history.leaders.len();
    });
    // the runs changed leaders (crashes, partitions): the invariant was put to the test
    assert!(terms > 1, "only {terms} terms had a leader");
}
