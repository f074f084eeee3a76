//! The fixed address-space layout every tree benchmark uses, and the
//! answers each operation must produce on it.
//!
//! Entry `i` maps 4 pages starting at `0x400000 + i * 5 pages`, leaving a
//! one-page hole after each entry, which resembles a process with many
//! small mappings separated by guard gaps. Because the layout is closed
//! form, the correct result of every query is also closed form, which lets
//! the benchmark verify each implementation's checksums cheaply.

use crate::rng::SplitMix64;

/// Page size of the modelled address space.
pub const PAGE: u64 = 4096;
/// Start of entry 0 (the traditional x86-64 ELF load address).
pub const BASE: u64 = 0x40_0000;
/// Bytes each entry covers.
pub const MAPPED: u64 = 4 * PAGE;
/// Distance between consecutive entry starts: mapped pages plus a hole.
pub const STRIDE: u64 = 5 * PAGE;

/// First address of entry `i`.
pub fn first(i: u64) -> u64 {
    BASE + i * STRIDE
}

/// Last address (inclusive) of entry `i`.
pub fn last(i: u64) -> u64 {
    first(i) + MAPPED - 1
}

/// Index of the entry whose stride contains `addr` (`addr >= BASE`); for an
/// address inside the mapped part this is the entry that contains it.
pub fn index_of(addr: u64) -> u64 {
    (addr - BASE) / STRIDE
}

/// Precomputed inputs for one structure size, shared by all implementations
/// so they are measured on identical operation sequences.
#[derive(Debug, Clone)]
pub struct Layout {
    /// Number of entries.
    pub n: usize,
    /// A random permutation of `0..n`: the order for `insert_rand`,
    /// `erase_rand` and random builds.
    pub perm: Vec<u64>,
    /// Random addresses, each inside the mapped part of a random entry;
    /// precomputed so the timed loops measure lookups, not the generator.
    pub addrs: Vec<u64>,
}

impl Layout {
    /// Generates the inputs for `n` entries and `lookups` random addresses
    /// from `seed`; the same arguments always give the same workload.
    pub fn generate(n: usize, lookups: usize, seed: u64) -> Self {
        let mut rng = SplitMix64::new(seed);
        let perm = rng.permutation(n);
        let addrs = (0..lookups)
            .map(|_| first(rng.below(n as u64)) + rng.below(MAPPED))
            .collect();
        Self { n, perm, addrs }
    }

    /// Entry indices in ascending order.
    pub fn ascending(&self) -> Vec<u64> {
        (0..self.n as u64).collect()
    }
}

/// Checksum a correct `load` batch yields: the sum of `value + 1` over hits
/// (the `+ 1` makes a miss on entry 0 visible).
pub fn expected_load_sum(addrs: &[u64]) -> u64 {
    addrs
        .iter()
        .fold(0, |sum, &a| sum.wrapping_add(index_of(a) + 1))
}

/// Checksum a correct full iteration yields: the sum of `first + last +
/// value` over all entries.
pub fn expected_iter_sum(n: usize) -> u64 {
    (0..n as u64).fold(0, |sum, i| {
        sum.wrapping_add(first(i))
            .wrapping_add(last(i))
            .wrapping_add(i)
    })
}

/// Checksum of correct `gap_rev` answers: the highest free page below an
/// address inside entry `i` is the hole just before entry `i` (for entry 0,
/// the top page of the unmapped space below `BASE`).
pub fn expected_gap_rev_sum(addrs: &[u64]) -> u64 {
    addrs
        .iter()
        .fold(0, |sum, &a| sum.wrapping_add(first(index_of(a)) - PAGE))
}

/// Checksum of correct `gap_fwd` answers: the lowest free page above an
/// address inside entry `i` is the hole just after entry `i`.
pub fn expected_gap_fwd_sum(addrs: &[u64]) -> u64 {
    addrs
        .iter()
        .fold(0, |sum, &a| sum.wrapping_add(last(index_of(a)) + 1))
}

/// Checksum of correct `gap_rev_far` answers: no 2-page hole exists
/// between entries, so the highest one below any entry is the top of the
/// unmapped space below `BASE`.
pub fn expected_gap_rev_far_sum(addrs: &[u64]) -> u64 {
    addrs
        .iter()
        .fold(0, |sum, _| sum.wrapping_add(BASE - 2 * PAGE))
}

/// Checksum of correct `gap_fwd_far` answers for `n` entries: the lowest
/// 2-page hole above any entry starts right after the last entry.
pub fn expected_gap_fwd_far_sum(addrs: &[u64], n: usize) -> u64 {
    let after_last = last(n as u64 - 1) + 1;
    addrs.iter().fold(0, |sum, _| sum.wrapping_add(after_last))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_matches_spec() {
        assert_eq!(first(0), 0x40_0000);
        assert_eq!(last(0), 0x40_0000 + 4 * 4096 - 1);
        assert_eq!(first(1), 0x40_0000 + 5 * 4096);
        assert_eq!(index_of(last(7)), 7);
        assert_eq!(index_of(first(7)), 7);
    }

    #[test]
    fn addresses_fall_inside_entries() {
        let w = Layout::generate(100, 10_000, 0x5eed);
        assert_eq!(w.perm.len(), 100);
        for &a in &w.addrs {
            let i = index_of(a);
            assert!(i < 100 && (first(i)..=last(i)).contains(&a));
        }
    }

    #[test]
    fn generation_is_deterministic() {
        let a = Layout::generate(50, 100, 1);
        let b = Layout::generate(50, 100, 1);
        assert_eq!((a.perm, a.addrs), (b.perm, b.addrs));
    }
}
