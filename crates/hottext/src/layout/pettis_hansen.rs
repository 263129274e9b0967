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
//! lower id is the left chain in step 2. Equally heavy edges are taken in the order of the pairs
//! of functions they first joined (an edge keeps that rank when merges re-point it). The paper
//! leaves both open; any fixed rule keeps the output deterministic.

use super::edge_lists::edge_lists;
use super::pair_index::PairIndex;
use super::queue::MaxQueue;
use super::Algorithm;
use crate::graph::{FuncId, Graph};
use crate::prefetch::{prefetch, DISTANCE as PREFETCH_DISTANCE};

pub(super) const ALGORITHM: Algorithm = Algorithm {
    name: "ph",
    help: "Pettis-Hansen",
    tried_by_auto: true,
    order: |graph, _| order(graph),
};

pub(super) fn order(graph: &Graph) -> Vec<FuncId> {
    let edges = undirected_edges(graph);
    // Every weight an edge reaches is at most the sum of them all.
    let total: u128 = edges.iter().map(|e| u128::from(e.weight)).sum();
    if total <= u128::from(u32::MAX) {
        merge_along_edges::<u64>(graph, edges)
    } else {
        merge_along_edges::<u128>(graph, edges)
    }
}

/// A queue key: an edge's weight in the high half and its id, inverted, in the low one, so
/// that equal weights go to the lower id. Half the memory of a `u128` when the weights fit in
/// 32 bits (78 MB on a graph of 5 M edges).
trait Key: Ord + Copy {
    fn new(weight: u64, e: u32) -> Self;
    fn edge(self) -> u32;
}

impl Key for u64 {
    fn new(weight: u64, e: u32) -> u64 {
        debug_assert!(weight <= u64::from(u32::MAX));
        (weight << 32) | u64::from(!e)
    }

    fn edge(self) -> u32 {
        !(self as u32)
    }
}

impl Key for u128 {
    fn new(weight: u64, e: u32) -> u128 {
        (u128::from(weight) << 32) | u128::from(!e)
    }

    fn edge(self) -> u32 {
        !(self as u32)
    }
}

/// Steps 1 to 3 with keys of type `K`, which must hold every weight an edge reaches.
fn merge_along_edges<K: Key>(graph: &Graph, mut edges: Vec<Edge>) -> Vec<FuncId> {
    let n = graph.funcs().len();
    let original = Original::new(graph);
    // Edge ids per node, some dead: they are dropped when the node is merged away.
    let mut adj = edge_lists(n, edges.iter().map(|e| e.ends.map(FuncId::index)));
    let mut edge_between = PairIndex::new(edges.len());
    edge_between.fill(edges.len(), |e| live_ends(&edges, e));
    let mut moving: Vec<(u32, FuncId)> = Vec::new();
    let mut chains = Chains::new(n);

    // Heaviest edge first; an entry is skipped when its edge died or grew since (growing
    // pushed a new entry). Re-pointing an edge leaves its entry as it is.
    let mut queue = MaxQueue::new(
        (0..edges.len() as u32)
            .map(|e| K::new(edges[e as usize].weight, e))
            .collect(),
    );
    while let Some(key) = queue.pop() {
        let e = key.edge();
        if let Some(next) = queue.peek() {
            prefetch(&edges[next.edge() as usize]); // a random read: overlap it with this merge
        }
        let edge = &edges[e as usize];
        if edge.is_dead() || K::new(edge.weight, e) != key {
            continue;
        }
        let [a, b] = edge.ends;
        let (left, right) = (a.min(b), a.max(b));
        // Keep the node with more edges, so re-pointing edges costs the smaller side.
        let (keep, gone) = if adj[a.index()].len() >= adj[b.index()].len() {
            (a, b)
        } else {
            (b, a)
        };
        chains.join(left, right, keep, &original);
        edges[e as usize].kill();

        edge_between.remove(a.0, b.0, e);
        // Two passes, so that the random reads of each overlap: the first walks gone's edges,
        // reading the edge a few places ahead and starting the pairs' slots it will look up;
        // the second looks them up.
        let gone_edges = std::mem::take(&mut adj[gone.index()]);
        moving.clear();
        for (i, &x) in gone_edges.iter().enumerate() {
            if let Some(&ahead) = gone_edges.get(i + PREFETCH_DISTANCE) {
                prefetch(&edges[ahead as usize]);
            }
            if edges[x as usize].is_dead() {
                continue;
            }
            let other = other_end(&edges[x as usize], gone);
            edge_between.prefetch(gone.0, other.0);
            edge_between.prefetch(keep.0, other.0);
            moving.push((x, other));
        }
        for &(x, other) in &moving {
            // Checked before each insert; the edges not re-pointed yet go back in under their
            // old pair, which is still right.
            if edge_between.is_crowded() {
                edge_between.fill(edges.len(), |e| live_ends(&edges, e));
            }
            edge_between.remove(gone.0, other.0, x);
            let ends = |id: u32| edges[id as usize].ends.map(|f| f.0);
            match edge_between.find(keep.0, other.0, ends) {
                None => {
                    edges[x as usize].ends = [keep, other];
                    edge_between.insert(keep.0, other.0, x);
                    adj[keep.index()].push(x);
                }
                Some(onto) => {
                    // Both nodes had an edge to `other`: one edge of the summed weight.
                    let moved = edges[x as usize].weight;
                    edges[x as usize].kill();
                    edges[onto as usize].weight += moved;
                    queue.push(K::new(edges[onto as usize].weight, onto));
                }
            }
        }
    }

    let mut nodes: Vec<(u64, u64, FuncId, Vec<FuncId>)> = (0..n)
        .filter_map(|node| chains.functions(FuncId::from_index(node)))
        .map(|c| {
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

/// The coalesced weight between two nodes; weight 0 once it died (joined into another edge or
/// merged along): live edges weigh at least 1.
struct Edge {
    ends: [FuncId; 2],
    weight: u64,
}

impl Edge {
    fn is_dead(&self) -> bool {
        self.weight == 0
    }

    fn kill(&mut self) {
        self.weight = 0;
    }
}

/// One edge per pair of functions that call each other, direction dropped and weights added,
/// in the order of the pairs.
fn undirected_edges(graph: &Graph) -> Vec<Edge> {
    let mut edges: Vec<Edge> = graph
        .calls()
        .iter()
        .filter(|c| c.caller != c.callee && c.weight > 0)
        .map(|c| Edge {
            ends: [c.caller.min(c.callee), c.caller.max(c.callee)],
            weight: c.weight,
        })
        .collect();
    edges.sort_unstable_by_key(|e| e.ends);
    edges.dedup_by(|next, kept| {
        let same = next.ends == kept.ends;
        if same {
            kept.weight += next.weight;
        }
        same
    });
    edges
}

/// Edge `e`'s two nodes while it lives: what the pair index holds.
fn live_ends(edges: &[Edge], e: u32) -> Option<[u32; 2]> {
    let edge = &edges[e as usize];
    (!edge.is_dead()).then(|| edge.ends.map(|f| f.0))
}

fn other_end(edge: &Edge, node: FuncId) -> FuncId {
    if edge.ends[0] == node {
        edge.ends[1]
    } else {
        edge.ends[0]
    }
}

/// The call weights between functions, looked up in the graph's calls (sorted by caller) in
/// both directions: what step 2 compares, whatever merges did since.
struct Original<'a> {
    calls: &'a [crate::graph::Call],
    /// Where each caller's calls start in `calls`.
    starts: Vec<u32>,
}

impl Original<'_> {
    fn new(graph: &Graph) -> Original<'_> {
        let calls = graph.calls();
        let mut starts = vec![0u32; graph.funcs().len() + 1];
        for c in calls {
            starts[c.caller.index() + 1] += 1;
        }
        for i in 1..starts.len() {
            starts[i] += starts[i - 1];
        }
        Original { calls, starts }
    }

    fn weight(&self, x: FuncId, y: FuncId) -> u64 {
        if x == y {
            return 0;
        }
        let one_way = |from: FuncId, to: FuncId| {
            let range = &self.calls
                [self.starts[from.index()] as usize..self.starts[from.index() + 1] as usize];
            range
                .binary_search_by_key(&to, |c| c.callee)
                .map_or(0, |i| range[i].weight)
        };
        one_way(x, y) + one_way(y, x)
    }
}

/// The chains of functions, as doubly linked lists that need no direction: a function's two
/// links are its neighbours in either order, so reversing a chain is swapping its ends and
/// joining two is linking two ends, both O(1). (Copying chains on each merge made the algorithm
/// quadratic when one long chain absorbs many small ones, as it does on real call graphs; a
/// deque per function cost a million allocations.)
struct Chains {
    /// Per function: its neighbours in its chain, `NO_FUNC` where it has fewer than two.
    links: Vec<[FuncId; 2]>,
    /// Per node (named by a function of its chain): the chain's first and last functions;
    /// `NO_FUNC` once the node merged into another.
    ends: Vec<[FuncId; 2]>,
}

const NO_FUNC: FuncId = FuncId(u32::MAX);

impl Chains {
    fn new(n: usize) -> Chains {
        Chains {
            links: vec![[NO_FUNC; 2]; n],
            ends: (0..n).map(|f| [FuncId::from_index(f); 2]).collect(),
        }
    }

    /// Joins the chains of nodes `left` and `right`, in the orientation whose new neighbours
    /// call each other most, as the chain of node `keep` (one of the two).
    fn join(&mut self, left: FuncId, right: FuncId, keep: FuncId, original: &Original) {
        let [a_first, a_last] = self.ends[left.index()];
        let [b_first, b_last] = self.ends[right.index()];
        let weight = |x: FuncId, y: FuncId| original.weight(x, y);
        // (reverse a, reverse b, weight across the seam), in order of preference on ties.
        let options = [
            (false, false, weight(a_last, b_first)),
            (true, false, weight(a_first, b_first)),
            (false, true, weight(a_last, b_last)),
            (true, true, weight(a_first, b_last)),
        ];
        let (rev_a, rev_b, _) = options
            .into_iter()
            .reduce(|best, o| if o.2 > best.2 { o } else { best })
            .unwrap_or(options[0]);
        let (a_first, a_last) = if rev_a {
            (a_last, a_first)
        } else {
            (a_first, a_last)
        };
        let (b_first, b_last) = if rev_b {
            (b_last, b_first)
        } else {
            (b_first, b_last)
        };
        self.link(a_last, b_first);
        self.link(b_first, a_last);
        self.ends[left.index()] = [NO_FUNC; 2];
        self.ends[right.index()] = [NO_FUNC; 2];
        self.ends[keep.index()] = [a_first, b_last];
    }

    fn link(&mut self, f: FuncId, neighbour: FuncId) {
        let links = &mut self.links[f.index()];
        let free = usize::from(links[0] != NO_FUNC);
        links[free] = neighbour;
    }

    /// The functions of node `node`'s chain in order, if the node still stands for one.
    fn functions(&self, node: FuncId) -> Option<Vec<FuncId>> {
        let [first, _] = self.ends[node.index()];
        if first == NO_FUNC {
            return None;
        }
        let mut chain = Vec::new();
        let (mut previous, mut f) = (NO_FUNC, first);
        while f != NO_FUNC {
            chain.push(f);
            let [x, y] = self.links[f.index()];
            (previous, f) = (f, if x != previous { x } else { y });
        }
        Some(chain)
    }
}
