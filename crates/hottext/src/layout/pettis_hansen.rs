//! Pettis-Hansen function ordering, from "Profile Guided Code Positioning" (Pettis and Hansen,
//! PLDI 1990), as described in section 5.1 of the hfsort paper (Ottoni and Maher, CGO 2017).
//! Kept as the baseline C3 is compared with.
//!
//! Definitions:
//! - The graph is *undirected*: the weight between `f` and `g` is the sum of both call directions.
//! - A *node* is a chain of functions; merging two nodes adds up their edges to every other node.
//!
//! Steps:
//! 1. Take the heaviest remaining edge and merge the two nodes it joins into one chain.
//! 2. Of the four ways to join the chains (either one reversed or not), pick the one whose
//!    newly adjacent ends have the heaviest original edge; ties keep the chains as they are.
//! 3. Repeat until no edge is left; lay out the chains by decreasing density (as C3 does, so the
//!    two algorithms differ only in how they build chains).
//!
//! A node keeps the id of one of its functions; of the two nodes an edge joins, the one with the
//! lower id is the left chain in step 2. The paper leaves this open; any fixed rule keeps the
//! output deterministic.

use std::collections::BinaryHeap;

use rustc_hash::FxHashMap;

use crate::graph::{FuncId, Graph};

pub(super) fn order(graph: &Graph) -> Vec<FuncId> {
    let n = graph.funcs.len();
    let undirected = undirected_weights(graph);

    // Per node (named by the id it started as): neighbour node -> coalesced weight.
    let mut adj: Vec<FxHashMap<FuncId, u64>> = vec![FxHashMap::default(); n];
    for (&(a, b), &w) in &undirected {
        adj[a as usize].insert(b, w);
        adj[b as usize].insert(a, w);
    }
    let mut chain: Vec<Vec<FuncId>> = (0..n as FuncId).map(|f| vec![f]).collect();
    let mut alive = vec![true; n];

    // Max-heap by weight, then lower node pair first; stale entries are skipped on pop.
    let mut heap: BinaryHeap<(u64, std::cmp::Reverse<(FuncId, FuncId)>)> = undirected
        .iter()
        .map(|(&(a, b), &w)| (w, std::cmp::Reverse((a, b))))
        .collect();

    while let Some((w, std::cmp::Reverse((a, b)))) = heap.pop() {
        if !alive[a as usize] || !alive[b as usize] || adj[a as usize].get(&b) != Some(&w) {
            continue; // merged away or re-weighted since this entry was pushed
        }
        let joined = join(&chain[a as usize], &chain[b as usize], &undirected);
        // Keep the node with more neighbours, so re-pointing edges costs the smaller side.
        let (keep, gone) = if adj[a as usize].len() >= adj[b as usize].len() {
            (a, b)
        } else {
            (b, a)
        };
        chain[keep as usize] = joined;
        chain[gone as usize] = Vec::new();
        alive[gone as usize] = false;

        let gone_adj = std::mem::take(&mut adj[gone as usize]);
        adj[keep as usize].remove(&gone);
        for (other, w) in gone_adj {
            if other == keep {
                continue;
            }
            adj[other as usize].remove(&gone);
            let total = {
                let e = adj[keep as usize].entry(other).or_default();
                *e += w;
                *e
            };
            adj[other as usize].insert(keep, total);
            heap.push((total, std::cmp::Reverse((keep.min(other), keep.max(other)))));
        }
    }

    let mut nodes: Vec<(u64, u64, FuncId, Vec<FuncId>)> = chain
        .into_iter()
        .filter(|c| !c.is_empty())
        .map(|c| {
            let samples = c.iter().map(|&f| graph.funcs[f as usize].samples).sum();
            let size = c
                .iter()
                .map(|&f| graph.funcs[f as usize].size)
                .sum::<u64>()
                .max(1);
            let first = c.iter().copied().min().unwrap_or(0);
            (samples, size, first, c)
        })
        .collect();
    nodes.sort_by(|a, b| {
        ((b.0 as u128) * (a.1 as u128))
            .cmp(&((a.0 as u128) * (b.1 as u128)))
            .then(a.2.cmp(&b.2))
    });
    nodes.into_iter().flat_map(|n| n.3).collect()
}

/// Call weights with direction dropped, keyed by (lower id, higher id); self-calls dropped.
fn undirected_weights(graph: &Graph) -> FxHashMap<(FuncId, FuncId), u64> {
    let mut w: FxHashMap<(FuncId, FuncId), u64> = FxHashMap::default();
    for c in &graph.calls {
        if c.caller != c.callee && c.weight > 0 {
            *w.entry((c.caller.min(c.callee), c.caller.max(c.callee)))
                .or_default() += c.weight;
        }
    }
    w
}

/// Joins two chains in the orientation whose new neighbours call each other most.
fn join(a: &[FuncId], b: &[FuncId], w: &FxHashMap<(FuncId, FuncId), u64>) -> Vec<FuncId> {
    let weight = |x: FuncId, y: FuncId| w.get(&(x.min(y), x.max(y))).copied().unwrap_or(0);
    let (a_first, a_last) = (a[0], a[a.len() - 1]);
    let (b_first, b_last) = (b[0], b[b.len() - 1]);
    // (reverse a, reverse b, weight across the seam), in order of preference on ties.
    let options = [
        (false, false, weight(a_last, b_first)),
        (true, false, weight(a_first, b_first)),
        (false, true, weight(a_last, b_last)),
        (true, true, weight(a_first, b_last)),
    ];
    let (rev_a, rev_b, _) = options
        .iter()
        .copied()
        .reduce(|best, o| if o.2 > best.2 { o } else { best })
        .unwrap_or(options[0]);
    let mut out = Vec::with_capacity(a.len() + b.len());
    if rev_a {
        out.extend(a.iter().rev());
    } else {
        out.extend(a);
    }
    if rev_b {
        out.extend(b.iter().rev());
    } else {
        out.extend(b);
    }
    out
}
