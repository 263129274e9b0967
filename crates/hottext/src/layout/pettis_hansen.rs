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
use std::collections::VecDeque;

use foldhash::HashMap;

use super::queue::{prefetch, MaxQueue};
use crate::graph::{FuncId, Graph};

pub(super) fn order(graph: &Graph) -> Vec<FuncId> {
    let n = graph.funcs().len();
    let original = Original::new(graph);
    // One edge per pair of nodes, at first the original edges in the same order.
    let mut edges: Vec<Edge> = original
        .edges
        .iter()
        .map(|&(a, b, weight)| Edge {
            ends: [a, b],
            weight,
            dead: false,
        })
        .collect();
    // Edge ids per node, some dead: they are dropped when the node is merged away. One map of
    // node pairs rather than a map per node: on a 1 M-function graph a million small maps cost
    // more than the merging.
    let mut adj: Vec<Vec<u32>> = vec![Vec::new(); n];
    let mut edge_between: HashMap<u64, u32> = HashMap::default();
    edge_between.reserve(edges.len());
    for (e, edge) in edges.iter().enumerate() {
        adj[(edge.ends[0]).index()].push(e as u32);
        adj[(edge.ends[1]).index()].push(e as u32);
        edge_between.insert(pair(edge.ends[0], edge.ends[1]), e as u32);
    }
    let mut chains: Vec<Chain> = (0..n).map(FuncId::from_index).map(Chain::new).collect();

    // Heaviest edge first, then the lower pair of nodes; an entry is skipped when its edge
    // died, was re-pointed or grew since (each change pushed a new entry).
    let mut queue = MaxQueue::new(
        (0..edges.len() as u32)
            .map(|e| entry(&edges[e as usize], e))
            .collect(),
    );
    while let Some(key @ (_, _, Reverse(e))) = queue.pop() {
        if let Some((_, _, Reverse(next))) = queue.peek() {
            prefetch(&edges[next as usize]); // a random read: overlap it with this merge
        }
        let edge = &edges[e as usize];
        if edge.dead || entry(edge, e) != key {
            continue;
        }
        let [a, b] = edge.ends;
        let (left, right) = (a.min(b), a.max(b));
        let joined = join(
            std::mem::take(&mut chains[left.index()]),
            std::mem::take(&mut chains[right.index()]),
            &original,
        );
        // Keep the node with more edges, so re-pointing edges costs the smaller side.
        let (keep, gone) = if adj[a.index()].len() >= adj[b.index()].len() {
            (a, b)
        } else {
            (b, a)
        };
        chains[keep.index()] = joined;
        edges[e as usize].dead = true;

        edge_between.remove(&pair(a, b));
        for x in std::mem::take(&mut adj[gone.index()]) {
            if edges[x as usize].dead {
                continue;
            }
            let other = other_end(&edges[x as usize], gone);
            edge_between.remove(&pair(gone, other));
            match edge_between.get(&pair(keep, other)) {
                None => {
                    edges[x as usize].ends = [keep, other];
                    edge_between.insert(pair(keep, other), x);
                    adj[keep.index()].push(x);
                    queue.push(entry(&edges[x as usize], x));
                }
                Some(&onto) => {
                    // Both nodes had an edge to `other`: one edge of the summed weight.
                    let moved = edges[x as usize].weight;
                    edges[x as usize].dead = true;
                    edges[onto as usize].weight += moved;
                    queue.push(entry(&edges[onto as usize], onto));
                }
            }
        }
    }

    let mut nodes: Vec<(u64, u64, FuncId, Vec<FuncId>)> = chains
        .into_iter()
        .filter(|c| !c.is_empty())
        .map(|c| {
            let c = c.into_vec();
            let samples = c.iter().map(|&f| graph.funcs()[f].samples).sum();
            let size = c.iter().map(|&f| graph.funcs()[f].size).sum::<u64>().max(1);
            let first = c.iter().copied().min().unwrap_or_default();
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

/// Edge `e`'s place in the queue.
fn entry(edge: &Edge, e: u32) -> (u64, Reverse<u64>, Reverse<u32>) {
    (
        edge.weight,
        Reverse(pair(edge.ends[0], edge.ends[1])),
        Reverse(e),
    )
}

/// The key of an unordered pair of nodes.
fn pair(a: FuncId, b: FuncId) -> u64 {
    (u64::from(a.min(b).0) << 32) | u64::from(a.max(b).0)
}

/// The coalesced weight between two nodes.
struct Edge {
    ends: [FuncId; 2],
    weight: u64,
    dead: bool,
}

fn other_end(edge: &Edge, node: FuncId) -> FuncId {
    if edge.ends[0] == node {
        edge.ends[1]
    } else {
        edge.ends[0]
    }
}

/// The call weights between functions with direction dropped, self-calls dropped: what step 2
/// compares, whatever merges did since.
struct Original {
    /// (lower id, higher id, weight), sorted.
    edges: Vec<(FuncId, FuncId, u64)>,
    /// Where each lower id's edges start in `edges`.
    starts: Vec<u32>,
}

impl Original {
    fn new(graph: &Graph) -> Original {
        let mut edges: Vec<(FuncId, FuncId, u64)> = graph
            .calls()
            .iter()
            .filter(|c| c.caller != c.callee && c.weight > 0)
            .map(|c| (c.caller.min(c.callee), c.caller.max(c.callee), c.weight))
            .collect();
        edges.sort_unstable();
        edges.dedup_by(|next, kept| {
            let same = (next.0, next.1) == (kept.0, kept.1);
            if same {
                kept.2 += next.2;
            }
            same
        });
        let mut starts = vec![0u32; graph.funcs().len() + 1];
        for &(a, _, _) in &edges {
            starts[a.index() + 1] += 1;
        }
        for i in 1..starts.len() {
            starts[i] += starts[i - 1];
        }
        Original { edges, starts }
    }

    fn weight(&self, x: FuncId, y: FuncId) -> u64 {
        let (lo, hi) = (x.min(y), x.max(y));
        let range =
            &self.edges[self.starts[lo.index()] as usize..self.starts[lo.index() + 1] as usize];
        range
            .binary_search_by_key(&hi, |&(_, b, _)| b)
            .map_or(0, |i| range[i].2)
    }
}

/// Joins two chains in the orientation whose new neighbours call each other most.
fn join(mut a: Chain, mut b: Chain, original: &Original) -> Chain {
    let weight = |x: FuncId, y: FuncId| original.weight(x, y);
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
