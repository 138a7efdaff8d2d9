//! Where `ctx.uuid()` and `ctx.random()` get their bits in a live run. Replays take the
//! recorded values instead, so the source never has to repeat itself.

use std::fmt;

use rand::rngs::{OsRng, StdRng};
use rand::{RngCore, SeedableRng};

pub trait Entropy {
    fn fill(&mut self, buffer: &mut [u8]);
}

/// The operating system's random source: what workers use.
#[derive(Debug, Default, Clone, Copy)]
pub struct OsEntropy;

impl Entropy for OsEntropy {
    fn fill(&mut self, buffer: &mut [u8]) {
        OsRng.fill_bytes(buffer);
    }
}

/// A seeded source: what tests use, so live runs repeat.
pub struct SeededEntropy(StdRng);

impl SeededEntropy {
    pub fn new(seed: u64) -> Self {
        Self(StdRng::seed_from_u64(seed))
    }
}

impl fmt::Debug for SeededEntropy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SeededEntropy")
    }
}

impl Entropy for SeededEntropy {
    fn fill(&mut self, buffer: &mut [u8]) {
        self.0.fill_bytes(buffer);
    }
}
