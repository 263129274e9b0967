//! Which hot cache lines share a set of the L1i, and how many misses each set can be expected
//! to have.
//!
//! A set-associative cache of `sets` sets of `ways` lines keeps line `n` (address / line) in
//! set `n % sets`. Hot lines that land in one set beyond its ways evict one another however
//! small the hot code is: on redis, `--align-cache-lines` stacked 11 small hot functions in
//! four sets and the simulated L1i misses tripled (issue 36). The model is static: each line
//! is referenced at the rate it is fetched (as `Heat::Fetches` estimates it from the
//! samples), and each set is an LRU set whose misses `expected_misses` estimates (per
//! sample: layouts of one profile are compared by it, not predicted).
//!
//! Lines are the ones `heat` gives: at the granularity of sampled basic blocks where the
//! profile has them, else each function's samples decaying from its entry. The geometry is
//! [`crate::caches`]' (the simulation's default). Shifting every hot line by whole lines only
//! renames the sets, so the figure depends on where functions sit within their lines and
//! relative to one another, not on the hot range's start modulo the set span.

use super::heat::{block_mass, Heat};
use crate::caches::Geometry;
use crate::graph::fit::Placement;
use crate::graph::Graph;

/// A layout's samples by cache set.
#[derive(Debug, Clone, PartialEq)]
pub struct SetConflicts {
    /// Per set: its expected misses, in the samples' units (`expected_misses`).
    pub misses: Vec<f64>,
    /// Per set: how many lines with samples map to it.
    pub hot_lines: Vec<u64>,
    /// Every sample of the layout.
    pub total: f64,
}

impl SetConflicts {
    /// The expected misses per sample (0 without samples; more than 1 where lines are fetched
    /// more often than sampled): the modelled L1i figure, `icache_overflow` in the reports.
    pub fn share(&self) -> f64 {
        if self.total == 0.0 {
            0.0
        } else {
            self.misses.iter().sum::<f64>() / self.total
        }
    }
}

/// Maps the hot lines of the layout `at` to the sets of `cache` and counts what each set is
/// expected to miss. A function's interior lines come as runs of equal lines, counted per set
/// rather than one by one: the work is bounded by the number of sets per function, not by its
/// size (a profile may claim any size), about 0.2 s for a million functions.
pub fn set_conflicts(graph: &Graph, at: &Placement, cache: Geometry) -> SetConflicts {
    let sets = cache.sets().max(1);
    let mass = block_mass(graph, at, cache.line, Heat::Fetches);
    // Per set: (fetches of one line, how many such lines).
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
        misses: Vec::with_capacity(by_set.len()),
        hot_lines: Vec::with_capacity(by_set.len()),
        total: mass.total,
    };
    for mut lines in by_set {
        // Sorted so that the float sums do not depend on the order of a hash map.
        lines.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        conflicts.misses.push(expected_misses(&lines, cache.ways));
        conflicts
            .hot_lines
            .push(lines.iter().map(|l| l.1).fold(0, u64::saturating_add));
    }
    conflicts
}

/// The misses of one LRU set of `ways` lines whose lines (fetches of one line, how many such
/// lines) are each referenced at the rate of its fetches, by Che's approximation: a line stays
/// while fewer than `ways` other lines are referenced, a time `t` taken as the same for every
/// line of the set and solving `sum(1 - exp(-rate * t)) = ways`; each line then misses
/// `exp(-rate * t)` of its references. Keeping the `ways` hottest lines instead counts the
/// hottest lines of a set that thrashes as never missing, and a set one line over its ways as
/// missing that line always. On the two demos of bench/RESULTS.md it ranked the placements as
/// well as that (Kendall's tau over four placements 0.67 against 0.60 and 0.67) and picked the
/// same one, for about 1.7 s more CPU on a million functions.
fn expected_misses(lines: &[(f64, u64)], ways: u64) -> f64 {
    // A line without samples is never referenced: it takes no way.
    let lines: Vec<(f64, u64)> = lines.iter().copied().filter(|l| l.0 > 0.0).collect();
    let count = lines.iter().map(|l| l.1).fold(0, u64::saturating_add);
    if count <= ways {
        return 0.0;
    }
    // The filled ways, `sum(n * (1 - exp(-m * t)))`, rise from 0 and bend down: Newton's
    // method from 0 climbs to the root from below without overshooting it, in about five steps.
    let ways = ways as f64;
    let mut t = 0.0f64;
    for _ in 0..100 {
        let (mut filled, mut slope) = (0.0, 0.0);
        for &(m, n) in &lines {
            let kept = (-m * t).exp();
            filled += n as f64 * (1.0 - kept);
            slope += n as f64 * m * kept;
        }
        let next = t + (ways - filled) / slope;
        // Not above `t` once float rounding has it at the root (NaN: no slope left at all).
        if next.is_nan() || next <= t * (1.0 + 1e-12) {
            break;
        }
        t = next;
    }
    lines
        .iter()
        .map(|&(m, n)| n as f64 * m * (-m * t).exp())
        .sum()
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
        // Lines 0 and 4 are both in set 0: they evict each other. Exact LRU under independent
        // references misses a line whenever the other one came last: 10 * 3/4 + 30 * 1/4 = 15 of
        // the 40 samples; Che's approximation says 16.4. (Each function's samples in one block
        // of its whole line, so that the line's fetches are its samples.)
        let funcs: [(u64, u64, &[Block]); 2] = [(64, 10, &[(0, 64, 10)]), (64, 30, &[(0, 64, 30)])];
        let (g, at) = layout(&funcs, &[0, 256]);
        let stacked = set_conflicts(&g, &at, TINY);
        assert_eq!(stacked.misses[1..], [0.0; 3]);
        assert!((stacked.misses[0] - 15.0).abs() < 1.5, "{stacked:?}");
        assert_eq!(stacked.hot_lines, [2, 0, 0, 0]);
        assert_eq!(stacked.share(), stacked.misses[0] / 40.0);
        // The second function one line further: sets 0 and 1, nothing conflicts.
        let (g, at) = layout(&funcs, &[0, 320]);
        let spread = set_conflicts(&g, &at, TINY);
        assert_eq!(spread.misses, [0.0; 4]);
        assert_eq!(spread.share(), 0.0);
    }

    #[test]
    fn a_hot_span_that_straddles_two_lines_is_fetched_on_both() {
        // Eight 64 B functions, each run whole, on a direct-mapped cache of four lines: line by
        // line each line is fetched as often as its function runs; 32 B off, every line holds
        // halves of two functions and is fetched for both: twice the fetches, and more misses,
        // though the samples per line are the same.
        let funcs: Vec<(u64, u64, &[Block])> =
            (0..8).map(|_| (64, 10, &[(0, 64, 10)][..])).collect();
        let aligned: Vec<u64> = (0..8).map(|i| i * 64).collect();
        let straddling: Vec<u64> = aligned.iter().map(|a| a + 32).collect();
        let (g, at) = layout(&funcs, &aligned);
        let on_lines = set_conflicts(&g, &at, TINY).share();
        let (g, at) = layout(&funcs, &straddling);
        let off_lines = set_conflicts(&g, &at, TINY).share();
        assert!(off_lines > 1.5 * on_lines, "{on_lines} {off_lines}");
    }

    #[test]
    fn equal_lines_beyond_the_ways_miss_what_they_hold_beyond_the_ways() {
        // n equal lines of mass m in w ways: n (1 - e^-mt) = w, so the misses n m e^-mt are
        // m (n - w), as if the set kept any w of them.
        assert!((expected_misses(&[(3.0, 12)], 8) - 12.0).abs() < 1e-9);
        assert_eq!(expected_misses(&[(3.0, 8), (0.0, 5)], 8), 0.0);
        // One more line in a set that overflows costs misses, a hot one more than a cold one.
        let base = expected_misses(&[(5.0, 6), (1.0, 4)], 8);
        let cold = expected_misses(&[(5.0, 6), (1.0, 5)], 8);
        let hot = expected_misses(&[(5.0, 7), (1.0, 4)], 8);
        assert!(base < cold && cold < hot, "{base} {cold} {hot}");
    }

    #[test]
    fn without_blocks_a_function_s_samples_decay_from_its_entry() {
        // f0 spans lines 0-3, its 40 samples decaying from its entry (e^-1 a line): 25.7, 9.5,
        // 3.5, 1.3. f1 (40 samples, one line) in set 0 meets f0's head; in set 2 its third line.
        let (g, at) = layout(&[(256, 40, &[]), (64, 40, &[])], &[0, 256]);
        let conflicts = set_conflicts(&g, &at, TINY);
        assert_eq!(conflicts.hot_lines, [2, 1, 1, 1]);
        assert_eq!(conflicts.misses[1..], [0.0; 3]);
        let (g2, at2) = layout(&[(256, 40, &[]), (64, 40, &[])], &[0, 384]);
        let apart = set_conflicts(&g2, &at2, TINY);
        assert_eq!(apart.hot_lines, [1, 1, 2, 1]);
        assert!(
            apart.misses[2] < conflicts.misses[0] / 3.0,
            "{apart:?} {conflicts:?}"
        );
        assert_eq!(apart.total, 80.0);
        // The figure `measure` reports is this model's with the L1i geometry.
        let metrics = crate::layout::metrics::measure(&g, &at);
        assert_eq!(metrics.icache_overflow, set_conflicts(&g, &at, L1I).share());
    }

    #[test]
    fn sampled_blocks_put_a_function_s_samples_on_their_own_lines() {
        // f0's samples all in one block of its third line (set 2): no conflict.
        let block = [(128, 64, 40)];
        let (g, at) = layout(&[(256, 40, &block), (64, 40, &[])], &[0, 256]);
        assert_eq!(set_conflicts(&g, &at, TINY).share(), 0.0);
        // In its first line instead they meet f1's in set 0, and the two lines evict each other.
        let block = [(0, 32, 30)];
        let (g, at) = layout(&[(256, 40, &block), (64, 40, &[])], &[0, 256]);
        let conflicts = set_conflicts(&g, &at, TINY);
        // f0's 10 samples outside its block spread over its 256 bytes: 2.5 a line, 32.5 on
        // line 0 against f1's 40.
        assert_eq!(conflicts.hot_lines, [2, 1, 1, 1]);
        assert_eq!(conflicts.misses[1..], [0.0; 3]);
        assert!(conflicts.misses[0] > 30.0, "{conflicts:?}");
        assert_eq!(conflicts.total, 80.0);
        // Blocks that claim more samples than their function, or bytes past its end, are
        // scaled and clipped to it.
        let (g, at) = layout(&[(64, 10, &[(32, 100, 40)])], &[0]);
        let conflicts = set_conflicts(&g, &at, TINY);
        assert_eq!((conflicts.total, conflicts.hot_lines[0]), (10.0, 1));
    }
}
