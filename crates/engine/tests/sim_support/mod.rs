//! What the engine's seeded simulations of several partitions share (`distribution.rs`,
//! `relocation.rs`): the seeded generator and the test models.

use std::path::PathBuf;

/// xorshift64*: a seeded, dependency-free generator for the simulation.
pub struct Rng(pub u64);

impl Rng {
    /// A number in `0..n`.
    pub fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 33) as usize % n
    }
}

/// The bytes of `tests/models/<name>`.
pub fn model(name: &str) -> Vec<u8> {
    let dir = std::env::var_os("CARGO_MANIFEST_DIR").map(PathBuf::from).unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    std::fs::read(dir.join("tests/models").join(name)).unwrap()
}
