//! Invariant: no two nodes lead in the same term (election safety).

mod sim;

#[test]
fn at_most_one_leader_per_term() {
    let mut elections = 0;
    sim::for_each_seed(|seed| {
        let history = sim::history(seed);
        for (term, leaders) in &history.leaders {
            assert!(leaders.len() <= 1, "seed {seed}: nodes {leaders:?} all led term {term}");
        }
        elections += history.leaders.len();
    });
    // the runs changed leaders (crashes, partitions): the invariant was put to the test
    assert!(elections > 1, "only {elections} terms had a leader");
}
