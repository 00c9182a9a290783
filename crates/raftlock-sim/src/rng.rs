//! The one source of randomness of a run: SplitMix64 from the seed.
//!
//! Our own generator, not `rand`'s, so a seed replays the same run on any
//! version of any dependency. Every draw (election timeouts, link delays,
//! faults, client choices) comes from here, in the order the single-threaded
//! scheduler reaches it, which is what makes a run deterministic.

/// A seeded SplitMix64 generator.
#[derive(Debug, Clone)]
pub struct SimRng {
    state: u64,
}

impl SimRng {
    /// A generator that yields the same sequence for the same seed.
    pub fn new(seed: u64) -> Self {
        SimRng { state: seed }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `lo..hi` (`lo` when the range is empty).
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            return lo;
        }
        lo + self.next_u64() % (hi - lo)
    }

    /// True with probability `p` (0.0..=1.0).
    pub fn chance(&mut self, p: f64) -> bool {
        // 53 bits: the exact precision of an f64 in [0, 1).
        ((self.next_u64() >> 11) as f64 / (1u64 << 53) as f64) < p
    }

    /// An index into a slice of `len` items (`len` > 0).
    pub fn pick(&mut self, len: usize) -> usize {
        self.range(0, len as u64) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_sequence_other_seed_other_sequence() {
        let run = |seed| {
            let mut r = SimRng::new(seed);
            (0..8).map(|_| r.next_u64()).collect::<Vec<_>>()
        };
        assert_eq!(run(7), run(7));
        assert_ne!(run(7), run(8));
    }

    #[test]
    fn range_stays_inside() {
        let mut r = SimRng::new(1);
        for _ in 0..1000 {
            let x = r.range(10, 20);
            assert!((10..20).contains(&x));
        }
        assert_eq!(r.range(5, 5), 5);
    }
}
