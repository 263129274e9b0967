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

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

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
    let mut chains: Vec<Chain> = (0..n as FuncId).map(Chain::new).collect();

    // Max-heap by weight, then lower node pair first; stale entries are skipped on pop.
    let mut heap: BinaryHeap<(u64, Reverse<(FuncId, FuncId)>)> = undirected
        .iter()
        .map(|(&(a, b), &w)| (w, Reverse((a, b))))
        .collect();

    while let Some((w, Reverse((a, b)))) = heap.pop() {
        if adj[a as usize].get(&b) != Some(&w) {
            continue; // merged away or re-weighted since this entry was pushed
        }
        let (left, right) = (
            std::mem::take(&mut chains[a as usize]),
            std::mem::take(&mut chains[b as usize]),
        );
        let joined = join(left, right, &undirected);
        // Keep the node with more neighbours, so re-pointing edges costs the smaller side.
        let (keep, gone) = if adj[a as usize].len() >= adj[b as usize].len() {
            (a, b)
        } else {
            (b, a)
        };
        chains[keep as usize] = joined;

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
            heap.push((total, Reverse((keep.min(other), keep.max(other)))));
        }
    }

    let mut nodes: Vec<(u64, u64, FuncId, Vec<FuncId>)> = chains
        .into_iter()
        .filter(|c| !c.is_empty())
        .map(|c| {
            let c = c.into_vec();
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
    // Decreasing density, compared exactly by cross-multiplication; ties by lowest id.
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
fn join(mut a: Chain, mut b: Chain, w: &FxHashMap<(FuncId, FuncId), u64>) -> Chain {
    let weight = |x: FuncId, y: FuncId| w.get(&(x.min(y), x.max(y))).copied().unwrap_or(0);
    // (reverse a, reverse b, weight across the seam), in order of preference on ties.
    let options = [
        (false, false, weight(a.last(), b.first())),
        (true, false, weight(a.first(), b.first())),
        (false, true, weight(a.last(), b.last())),
        (true, true, weight(a.first(), b.last())),
    ];
    let (rev_a, rev_b, _) = options
        .into_iter()
        .reduce(|best, o| if o.2 > best.2 { o } else { best })
        .unwrap_or(options[0]);
    if rev_a {
        a.reverse();
    }
    if rev_b {
        b.reverse();
    }
    a.append(b);
    a
}

/// A sequence of functions that reverses in O(1) and concatenates in time proportional to the
/// shorter side. Copying whole chains on every merge made the algorithm quadratic when one long
/// chain absorbs many small ones, as it does on real call graphs.
#[derive(Default)]
struct Chain {
    items: VecDeque<FuncId>,
    /// The chain reads `items` back to front.
    reversed: bool,
}

impl Chain {
    fn new(f: FuncId) -> Chain {
        Chain {
            items: VecDeque::from([f]),
            reversed: false,
        }
    }

    fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    fn first(&self) -> FuncId {
        let end = if self.reversed {
            self.items.back()
        } else {
            self.items.front()
        };
        end.copied().unwrap_or_default()
    }

    fn last(&self) -> FuncId {
        let end = if self.reversed {
            self.items.front()
        } else {
            self.items.back()
        };
        end.copied().unwrap_or_default()
    }

    fn reverse(&mut self) {
        self.reversed = !self.reversed;
    }

    /// The chain in reading order.
    fn into_vec(self) -> Vec<FuncId> {
        let mut v: Vec<FuncId> = self.items.into();
        if self.reversed {
            v.reverse();
        }
        v
    }

    /// `self` followed by `other`, built in whichever deque is longer.
    fn append(&mut self, mut other: Chain) {
        if self.items.len() >= other.items.len() {
            for f in other.into_vec() {
                self.push_back(f);
            }
        } else {
            for f in std::mem::take(self).into_vec().into_iter().rev() {
                other.push_front(f);
            }
            *self = other;
        }
    }

    fn push_back(&mut self, f: FuncId) {
        if self.reversed {
            self.items.push_front(f);
        } else {
            self.items.push_back(f);
        }
    }

    fn push_front(&mut self, f: FuncId) {
        if self.reversed {
            self.items.push_back(f);
        } else {
            self.items.push_front(f);
        }
    }
}
