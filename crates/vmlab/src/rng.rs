//! Deterministic pseudo-random numbers for workloads.
//!
//! Benchmarks must be reproducible run to run and machine to machine, so
//! every random choice comes from SplitMix64 with a fixed seed instead of an
//! OS-seeded generator. SplitMix64 is tiny, fast and statistically good
//! enough for picking indices; it is not meant for anything else.

/// SplitMix64 (Steele, Lea, Flood 2014; Vigna's reference constants).
#[derive(Debug, Clone)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A generator whose whole output sequence is fixed by `seed`.
    pub fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    /// The next 64 uniformly distributed bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A value in `0..bound` (`bound` must be non-zero).
    ///
    /// Uses the multiply-shift reduction rather than `%`: it avoids a
    /// division and its bias (below `bound / 2^64`) is irrelevant for
    /// benchmark index selection.
    pub fn below(&mut self, bound: u64) -> u64 {
        debug_assert!(bound > 0, "below(0) has no valid result");
        ((u128::from(self.next_u64()) * u128::from(bound)) >> 64) as u64
    }

    /// Shuffles `items` in place with Fisher-Yates, so every permutation is
    /// (up to the generator's quality) equally likely.
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            items.swap(i, j);
        }
    }

    /// A random permutation of `0..n`.
    pub fn permutation(&mut self, n: usize) -> Vec<u64> {
        let mut v: Vec<u64> = (0..n as u64).collect();
        self.shuffle(&mut v);
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_reference_sequence() {
        // First outputs of Vigna's splitmix64.c seeded with 0.
        let mut r = SplitMix64::new(0);
        assert_eq!(r.next_u64(), 0xe220_a839_7b1d_cdaf);
        assert_eq!(r.next_u64(), 0x6e78_9e6a_a1b9_65f4);
    }

    #[test]
    fn below_stays_in_bounds() {
        let mut r = SplitMix64::new(0x5eed);
        assert!((0..10_000).all(|_| r.below(7) < 7));
        assert_eq!(r.below(1), 0);
    }

    #[test]
    fn permutation_is_a_permutation() {
        let mut p = SplitMix64::new(0x5eed).permutation(1000);
        assert_ne!(
            p,
            (0..1000).collect::<Vec<u64>>(),
            "should actually shuffle"
        );
        p.sort_unstable();
        assert_eq!(p, (0..1000).collect::<Vec<u64>>());
    }
}
