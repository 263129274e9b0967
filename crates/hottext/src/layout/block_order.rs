//! The ext-TSP order of one function's basic blocks, from "Improved Basic Block Reordering"
//! (Newell and Pupyrev, IEEE Transactions on Computers, 2020), the model LLVM's
//! `CodeLayout.cpp` and BOLT's `-reorder-blocks=ext-tsp` implement.
//!
//! What: an order of the blocks of one function, entry block first. Why: the compiler lays out
//! blocks from static guesses; with branch counts from a profile, the hot successor of a
//! branch can be placed right after it (a fall-through, which costs no taken jump and shares
//! the line already fetched) and the other hot targets a short jump away.
//!
//! Definitions:
//! - *jump*: a control transfer from block `from` to block `to`, taken `count` times (a taken
//!   branch or a fall-through alike). It leaves from the END of `from` (the branch is the
//!   block's last instruction) and arrives at the START of `to`, so a self-loop is a backward
//!   jump over the block's own size.
//! - *ext-TSP score* of a layout: the sum over jumps of `count × weight`, where weight is
//!   [`FALLTHROUGH_WEIGHT`] when `to` starts where `from` ends, `FORWARD_WEIGHT × (1 − d /
//!   FORWARD_DISTANCE)` for a forward jump of `d` bytes up to that distance,
//!   `BACKWARD_WEIGHT × (1 − d / BACKWARD_DISTANCE)` backward, and 0 beyond: a short jump likely
//!   lands on a line still in the i-cache, a long one does not.
//! - *chain*: a sequence of blocks kept together; at first one chain per block. A chain is
//!   named by its lowest block, so the entry's chain is chain 0 and the entry leads it.
//! - *count* of a block: the larger of its incoming and outgoing jump counts (how often it
//!   ran, as far as the jumps tell); *density* of a chain: its blocks' counts per byte.
//!
//! Steps:
//! 1. Put every block in a chain of its own.
//! 2. For every pair of chains joined by jumps, find the merge that gains the most score:
//!    X·Y, Y·X, and, splitting X into X1·X2 at a position, X1·Y·X2, Y·X2·X1 and X2·X1·Y, with
//!    either chain as X. A chain of at most [`SPLIT_THRESHOLD`] blocks is tried at every
//!    position; a longer one only where a jump between the two meets Y's first or last block
//!    (where splitting can make a fall-through). No merge may put a block before the entry.
//! 3. Merge the pair with the largest gain; repeat until no merge gains.
//! 4. Lay out the entry's chain, then the others by decreasing density.
//! 5. If that layout scores less than the compiler's order, keep the compiler's order: a
//!    greedy merge stopped by the budget (below) can lose against a layout the compiler already
//!    tuned (on the tests' random functions, only then). An equal score keeps the merged
//!    layout, whose denser chains come first, which the score does not see.
//!
//! Differences from LLVM: every fall-through weighs 1.0 (LLVM gives unconditional ones 1.05;
//! the profile does not say which jumps are conditional); no "forced pairs" pass (it needs
//! the static CFG's edges, of which only the profiled ones reach us) and no pass joining cold
//! blocks (only blocks that ran are laid out here); step 5 is ours. Sizes of 0 count as 1 byte,
//! as in LLVM, so that density is defined and an empty block is never a free fall-through;
//! sizes past 4 GiB (no real block) count as 4 GiB, so that no sum of sizes overflows.
//!
//! Lazy gains: after a merge, LLVM computes again at once the gains of the merged chain with
//! each of its neighbours. Here a pair whose gain was queued is computed again only when its
//! old gain reaches the top of the queue, and then queued at its new gain (pairs with no gain
//! queued are computed at once, or they would never be seen again). The two differ only when a
//! merge raises a neighbour's gain above another pair's, which then merges first. Splitting X
//! moves only the jumps that cross the split point (each part moves whole), so each point
//! scores only those and the jumps between the two chains.
//!
//! Bounds: a gain costs one score evaluation per jump it looks at. [`WORK_BUDGET`] caps those
//! evaluations per function; when it runs out, merging stops and step 4 lays out the chains
//! formed so far (still never below the compiler's order, by step 5). Measured in release mode
//! on a busy 2-vCPU machine (ranges over runs), on the tests' synthetic compiled-code CFGs
//! (`random_function` in `block_order_tests.rs`, 1.3 jumps a block): 1 000 blocks in
//! 10-20 ms, 5 000 in 60-125 ms, 20 000 in 0.35-0.75 s (25 M evaluations). An interpreter's
//! dispatch (`interpreter` there) of 300 handlers jumping to 50 each (1 200 blocks, 16 000
//! jumps) takes 0.17-0.3 s within the budget; of 1 000 handlers jumping to 100 each (4 000
//! blocks, 103 000 jumps) it spends the budget in 0.5-1.0 s, at a score 1.4 % below the
//! unbounded merge's (which takes about 4 times as long).
//!
//! Bad input never panics: jumps with a count of 0 or an end out of range are ignored.
//!
//! Ties, so that the same input always gives the same order: equal gains go to the pair of
//! chains with the lower names; for one pair, the first merge found wins (X·Y with the lower
//! chain first, then Y·X, then splits by position); equally dense chains keep the compiler's
//! order (by their lowest block).

mod chains;

use chains::Chains;

/// A control transfer between two of the blocks being laid out (indices into `sizes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockJump {
    /// The block the jump leaves, from its end.
    pub from: usize,
    /// The block the jump reaches, at its start.
    pub to: usize,
    /// How often control passed, taken or falling through.
    pub count: u64,
}

/// Weight of a jump whose target starts where its source ends (LLVM: 1.0 for conditional
/// branches).
pub const FALLTHROUGH_WEIGHT: f64 = 1.0;
/// Weight of a forward jump of distance 0+ (LLVM: 0.1).
const FORWARD_WEIGHT: f64 = 0.1;
/// Weight of a backward jump of distance 0+ (LLVM: 0.1).
const BACKWARD_WEIGHT: f64 = 0.1;
/// Bytes past which a forward jump scores nothing (LLVM: 1024).
const FORWARD_DISTANCE: u64 = 1024;
/// Bytes past which a backward jump scores nothing (LLVM: 640).
const BACKWARD_DISTANCE: u64 = 640;
/// Chains of at most this many blocks are tried split at every position; splitting costs a
/// score of the chain's jumps per position (LLVM: 128).
pub const SPLIT_THRESHOLD: usize = 128;
/// Jump scores evaluated per function before merging stops (see "Bounds" above): about half a
/// second.
pub const WORK_BUDGET: u64 = 50_000_000;

/// The order of the blocks (a permutation of `0..sizes.len()`) that the greedy ext-TSP merge
/// finds, block 0 (the function's entry) first; `sizes[i]` is block `i`'s size in bytes.
/// Blocks are given in the compiler's order, which breaks ties and is returned unchanged when
/// no jump says otherwise. Jumps with a count of 0 or an end out of range are ignored.
pub fn ext_tsp_order(sizes: &[u64], jumps: &[BlockJump]) -> Vec<usize> {
    order_within(sizes, jumps, WORK_BUDGET)
}

/// [`ext_tsp_order`] with merging stopped once `budget` jump scores were evaluated.
fn order_within(sizes: &[u64], jumps: &[BlockJump], budget: u64) -> Vec<usize> {
    let original: Vec<usize> = (0..sizes.len()).collect();
    let jumps = usable(sizes.len(), jumps);
    if jumps.iter().all(|j| j.from == j.to) {
        return original; // self-loops score the same in every order
    }
    let sizes = clamped(sizes);
    let merged = Chains::new(&sizes, &jumps).merge_all(budget).into_order();
    if score(&sizes, &jumps, &merged) >= score(&sizes, &jumps, &original) {
        merged
    } else {
        original
    }
}

/// The ext-TSP score of the layout `order` (block indices, first to last). Meant for a
/// permutation of the blocks; entries out of range are skipped, a block listed twice is at its
/// first place, and jumps that are ignored by [`ext_tsp_order`] or reach a block missing from
/// `order` score nothing.
pub fn ext_tsp_score(sizes: &[u64], jumps: &[BlockJump], order: &[usize]) -> f64 {
    let sizes = clamped(sizes);
    score(&sizes, &usable(sizes.len(), jumps), order)
}

/// The sizes as scored (see "Differences from LLVM" above).
fn clamped(sizes: &[u64]) -> Vec<u64> {
    sizes
        .iter()
        .map(|&s| s.clamp(1, u64::from(u32::MAX)))
        .collect()
}

/// The jumps [`ext_tsp_order`] considers, in input order.
fn usable(blocks: usize, jumps: &[BlockJump]) -> Vec<BlockJump> {
    jumps
        .iter()
        .filter(|j| j.count > 0 && j.from < blocks && j.to < blocks)
        .copied()
        .collect()
}

/// [`ext_tsp_score`] over [`clamped`] sizes and usable jumps.
fn score(sizes: &[u64], jumps: &[BlockJump], order: &[usize]) -> f64 {
    let mut start = vec![None; sizes.len()];
    let mut at = 0u64;
    for &b in order {
        if let Some(slot @ None) = start.get_mut(b) {
            *slot = Some(at);
            at += sizes[b];
        }
    }
    jumps
        .iter()
        .filter_map(|j| {
            let (from, to) = (start[j.from]?, start[j.to]?);
            Some(jump_score(from + sizes[j.from], to, j.count))
        })
        .sum()
}

/// What a jump taken `count` times scores when its source block ends at byte `source_end`
/// and its target starts at byte `target`.
fn jump_score(source_end: u64, target: u64, count: u64) -> f64 {
    let (weight, distance, limit) = if target >= source_end {
        let weight = if target == source_end {
            FALLTHROUGH_WEIGHT
        } else {
            FORWARD_WEIGHT
        };
        (weight, target - source_end, FORWARD_DISTANCE)
    } else {
        (BACKWARD_WEIGHT, source_end - target, BACKWARD_DISTANCE)
    };
    if distance > limit {
        return 0.0;
    }
    count as f64 * weight * (1.0 - distance as f64 / limit as f64)
}

#[cfg(test)]
#[path = "block_order_tests.rs"]
mod tests;
