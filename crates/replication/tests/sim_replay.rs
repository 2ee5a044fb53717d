//! The simulation is deterministic: a seed replays the same run (what `SIM_SEED` relies on),
//! and the runs exercise what the invariants are checked against.

mod sim;

#[test]
fn a_seed_replays_the_same_run() {
    for seed in [3, 8] {
        let a = sim::history(seed);
        let b = sim::history(seed);
        assert_eq!(a.applied, b.applied, "seed {seed}: applications differ");
        assert_eq!(a.acknowledged, b.acknowledged, "seed {seed}: acknowledgements differ");
        assert_eq!(a.leaders, b.leaders, "seed {seed}: leaders differ");
    }
}

#[test]
fn the_runs_lose_duplicate_partition_and_crash() {
    let (mut lost, mut duplicated, mut partitions, mut crashes) = (0, 0, 0, 0);
    sim::for_each_seed(|seed| {
        let h = sim::history(seed);
        eprintln!(
            "seed {seed}: {} acknowledged, {} terms led, {} lost, {} duplicated, {} partitions, {} crashes",
            h.acknowledged.len(),
            h.leaders.len(),
            h.messages_lost,
            h.messages_duplicated,
            h.partitions,
            h.crashes
        );
        lost += h.messages_lost;
        duplicated += h.messages_duplicated;
        partitions += h.partitions;
        crashes += h.crashes;
    });
    assert!(lost > 0 && duplicated > 0 && partitions > 0 && crashes > 0, "{lost} {duplicated} {partitions} {crashes}");
}
