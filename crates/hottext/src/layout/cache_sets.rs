//! Which hot cache lines share a set of the L1i, and how many samples each set cannot hold.
//!
//! A set-associative cache of `sets` sets of `ways` lines keeps line `n` (address / line) in
//! set `n % sets`. Hot lines that land in one set beyond its ways evict one another however
//! small the hot code is: on redis, `--align-cache-lines` stacked 11 small hot functions in
//! four sets and the simulated L1i misses tripled (issue 36). The model is static: each set
//! keeps its `ways` hottest lines, and the samples on the others are the set's expected
//! conflict misses (in samples, not fetches; layouts are compared by it, not predicted).
//!
//! Lines are the ones `heat` gives: at the granularity of sampled basic blocks
//! where the profile has them, else each function's samples spread over its bytes. The geometry
//! is [`crate::caches`]' (the simulation's default). Shifting every hot line by whole lines
//! only renames the sets, so the figure depends on where functions sit within their lines and
//! relative to one another, not on the hot range's start modulo the set span.

use super::heat::block_mass;
use crate::caches::Geometry;
use crate::graph::fit::Placement;
use crate::graph::Graph;

/// A layout's samples by cache set.
#[derive(Debug, Clone, PartialEq)]
pub struct SetConflicts {
    /// Per set: the samples on its lines beyond its `ways` hottest, which it cannot hold at
    /// once.
    pub overflow: Vec<f64>,
    /// Per set: how many lines with samples map to it.
    pub hot_lines: Vec<u64>,
    /// Every sample of the layout.
    pub total: f64,
}

impl SetConflicts {
    /// The share of all samples that overflow their set (0 without samples): the modelled L1i
    /// figure, `icache_overflow` in the reports.
    pub fn share(&self) -> f64 {
        if self.total == 0.0 {
            0.0
        } else {
            self.overflow.iter().sum::<f64>() / self.total
        }
    }
}

/// Maps the hot lines of the layout `at` to the sets of `cache` and counts what each set cannot
/// hold. A function's interior lines come as runs of equal lines, counted per set rather than
/// one by one: the work is bounded by the number of sets per function, not by its size (a
/// profile may claim any size), about 0.1 s for a million functions.
pub fn set_conflicts(graph: &Graph, at: &Placement, cache: Geometry) -> SetConflicts {
    let sets = cache.sets().max(1);
    let mass = block_mass(graph, at, cache.line);
    // Per set: (samples on one line, how many such lines).
    let mut by_set: Vec<Vec<(f64, u64)>> = vec![Vec::new(); sets as usize];
    for (l, m) in mass.shared {
        by_set[(l % sets) as usize].push((m, 1));
    }
    for run in mass.runs {
        for k in 0..run.count.min(sets) {
            let set = (run.first + k) % sets;
            let count = run.count / sets + u64::from(k < run.count % sets);
            by_set[set as usize].push((run.mass, count));
        }
    }
    let mut conflicts = SetConflicts {
        overflow: Vec::with_capacity(by_set.len()),
        hot_lines: Vec::with_capacity(by_set.len()),
        total: mass.total,
    };
    for mut lines in by_set {
        // Hottest first; ties by size of the run so that the answer does not depend on the
        // order of a hash map.
        lines.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        let (mut room, mut over, mut count) = (cache.ways, 0.0, 0u64);
        for (mass, n) in lines {
            let kept = n.min(room);
            room -= kept;
            over += mass * (n - kept) as f64;
            count = count.saturating_add(n);
        }
        conflicts.overflow.push(over);
        conflicts.hot_lines.push(count);
    }
    conflicts
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::binary::StatedAddr;
    use crate::caches::L1I;
    use crate::graph::GraphBuilder;

    /// A direct-mapped cache of four 64 B lines: line `n` is in set `n % 4`.
    const TINY: Geometry = Geometry {
        bytes: 256,
        ways: 1,
        line: 64,
    };

    /// A sampled block: offset, size, samples.
    type Block = (u64, u64, u64);

    /// `(size, samples, blocks)` functions at the given addresses.
    fn layout(funcs: &[(u64, u64, &[Block])], at: &[u64]) -> (Graph, Placement) {
        let mut b = GraphBuilder::default();
        for (i, &(size, samples, blocks)) in funcs.iter().enumerate() {
            let f = b.func(&format!("f{i}"), size);
            b.add_samples(f, samples);
            for (k, &(offset, size, samples)) in blocks.iter().enumerate() {
                b.add_block_samples(f, k as u32, offset, size, samples);
            }
        }
        let placement = at.iter().map(|&a| Some(StatedAddr(a))).collect();
        (b.finish(), placement)
    }

    #[test]
    fn two_hot_lines_in_one_set_of_a_direct_mapped_cache_conflict_and_spread_do_not() {
        // Lines 0 and 4 are both in set 0: one of them cannot stay.
        let (g, at) = layout(&[(64, 10, &[]), (64, 30, &[])], &[0, 256]);
        let stacked = set_conflicts(&g, &at, TINY);
        assert_eq!(stacked.overflow, [10.0, 0.0, 0.0, 0.0]);
        assert_eq!(stacked.hot_lines, [2, 0, 0, 0]);
        assert_eq!(stacked.share(), 0.25);
        // The second function one line further: sets 0 and 1, nothing conflicts.
        let (g, at) = layout(&[(64, 10, &[]), (64, 30, &[])], &[0, 320]);
        let spread = set_conflicts(&g, &at, TINY);
        assert_eq!(spread.overflow, [0.0; 4]);
        assert_eq!(spread.share(), 0.0);
    }

    #[test]
    fn without_blocks_a_function_s_samples_spread_over_its_bytes_as_before() {
        // f0 spans lines 0-3, 10 samples each; f1 (40) sits on line 4, set 0, beside f0's
        // first line: set 0 keeps f1's line and loses f0's.
        let (g, at) = layout(&[(256, 40, &[]), (64, 40, &[])], &[0, 256]);
        let conflicts = set_conflicts(&g, &at, TINY);
        assert_eq!(conflicts.overflow, [10.0, 0.0, 0.0, 0.0]);
        assert_eq!(conflicts.share(), 10.0 / 80.0);
        // The figure `measure` reports is this model's with the L1i geometry.
        let metrics = crate::layout::metrics::measure(&g, &at);
        assert_eq!(metrics.icache_overflow, set_conflicts(&g, &at, L1I).share());
    }

    #[test]
    fn sampled_blocks_put_a_function_s_samples_on_their_own_lines() {
        // The same layout, f0's samples all in one block of its third line (set 2): no conflict.
        let block = [(128, 64, 40)];
        let (g, at) = layout(&[(256, 40, &block), (64, 40, &[])], &[0, 256]);
        assert_eq!(set_conflicts(&g, &at, TINY).share(), 0.0);
        // In its first line instead they meet f1's in set 0: the colder whole line goes.
        let block = [(0, 32, 30)];
        let (g, at) = layout(&[(256, 40, &block), (64, 40, &[])], &[0, 256]);
        let conflicts = set_conflicts(&g, &at, TINY);
        // f0's 10 samples outside its block spread over its 256 bytes: 2.5 a line.
        assert_eq!(conflicts.overflow, [32.5, 0.0, 0.0, 0.0]);
        assert_eq!(conflicts.total, 80.0);
        // Blocks that claim more samples than their function, or bytes past its end, are
        // scaled and clipped to it.
        let (g, at) = layout(&[(64, 10, &[(32, 100, 40)])], &[0]);
        let conflicts = set_conflicts(&g, &at, TINY);
        assert_eq!((conflicts.total, conflicts.hot_lines[0]), (10.0, 1));
    }
}
