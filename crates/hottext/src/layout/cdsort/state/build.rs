//! Setting up CDSort's state: one chain per function, one edge per pair of functions that
//! call each other, with their jumps.

use super::{CdsortParams, Chain, Edge, EdgeBits, Jump, PairIndex, Place, State, NONE, NO_FUNC};
use crate::graph::{FuncId, Graph};
use crate::layout::edge_lists::edge_lists;
use crate::parallel::join;

impl<'a> State<'a> {
    pub(in crate::layout::cdsort) fn new(graph: &Graph, params: &'a CdsortParams) -> State<'a> {
        let n = graph.funcs().len();
        let size: Vec<u64> = graph.funcs().iter().map(|f| f.size.max(1)).collect();
        let mut jumps = jumps(graph);

        let mut hotness: Vec<u64> = graph.funcs().iter().map(|f| f.samples).collect();
        let (mut incoming, mut outgoing) = (vec![0u64; n], vec![0u64; n]);
        for j in &jumps {
            outgoing[j.caller.index()] += j.weight;
            incoming[j.callee.index()] += j.weight;
        }
        for f in 0..n {
            hotness[f] = hotness[f].max(incoming[f]).max(outgoing[f]);
        }
        let total_hotness: u64 = hotness.iter().sum();
        let hot_bytes: u64 = (0..n).filter(|&f| hotness[f] > 0).map(|f| size[f]).sum();

        // One edge per pair of functions, its jumps linked in sorted order: edge `e`'s first
        // jump moves to `jumps[e]`, the others wait in `later` and go after all first jumps.
        let pair = |j: &Jump| (j.caller.min(j.callee), j.caller.max(j.callee));
        sort_jumps(&mut jumps, |j| (pair(j), j.caller, j.offset, j.weight));
        let mut edges: Vec<Edge> = Vec::new();
        let mut later: Vec<(u32, Jump)> = Vec::new();
        let mut previous = None;
        for i in 0..jumps.len() {
            let (a, b) = pair(&jumps[i]);
            let e = edges.len() as u32;
            if previous == Some((a, b)) {
                later.push((e - 1, jumps[i]));
                continue;
            }
            previous = Some((a, b));
            // Never ahead of `i`: the jumps still to be read stay where they are.
            jumps[e as usize] = jumps[i];
            edges.push(Edge {
                // A chain is named by the slot of a function it started as.
                ends: [a.0, b.0],
                tail: e,
                computed_at: 0,
            });
        }
        jumps.truncate(edges.len());
        for (e, jump) in later {
            let j = jumps.len() as u32;
            let edge = &mut edges[e as usize];
            jumps[edge.tail as usize].next = j;
            edge.tail = j;
            jumps.push(jump);
        }

        let adj = edge_lists(n, edges.iter().map(|e| e.ends.map(|c| c as usize)));
        let mut state = State {
            params,
            jumps,
            dead: EdgeBits::new(edges.len()),
            first_end_leads: EdgeBits::new(edges.len()),
            pairs: PairIndex::new(edges.len()),
            edges,
            place: (0..n as u32)
                .map(|f| Place {
                    chain: f,
                    next_member: NO_FUNC,
                    position: 0,
                })
                .collect(),
            chains: (0..n)
                .map(|f| Chain {
                    size: size[f],
                    hotness: hotness[f],
                    start: 0,
                    first: FuncId::from_index(f),
                    changed: 0,
                })
                .collect(),
            last: (0..n).map(FuncId::from_index).collect(),
            functions: vec![1; n],
            adj,
            moving: Vec::new(),
            merges: 0,
            total_hotness: total_hotness as f64,
            far_score: (hot_bytes.max(1) as f64).powf(-params.distance_power),
        };
        state.fill_pairs();
        state
    }

    /// Fills the pair index with the live edges: at set-up, and again when a merge finds it
    /// crowded with tombstones.
    pub(in crate::layout::cdsort) fn fill_pairs(&mut self) {
        let (edges, dead) = (&self.edges, &self.dead);
        self.pairs.fill(edges.len(), |e| {
            (!dead.get(e)).then(|| edges[e as usize].ends)
        });
    }
}

/// Graphs with fewer edges (or jumps) sort them and compute their first keys on one thread: a
/// thread costs more than it saves there.
const PARALLEL: usize = 1 << 16;

impl State<'_> {
    /// Every edge's first queue key, as ascending runs. The first gains wait for nothing but
    /// the set-up, and on a 1 M-function graph they are 5 M gains (half a second): the second
    /// half is computed on a thread of its own. Under `auto` the other CPU runs C3 and
    /// Pettis-Hansen, which finish seconds before CDSort and so can spare it.
    pub(in crate::layout::cdsort) fn first_keys(&mut self) -> Vec<Vec<u64>> {
        let edges = self.edges.len();
        let parts = if edges < PARALLEL {
            vec![(0, self.keys_of(0..edges))]
        } else {
            // Split on a word of `first_end_leads`, so that each half fills whole words.
            let half = (edges / 2).next_multiple_of(64);
            let this = &*self;
            let (second, first) = join(|| this.keys_of(half..edges), || this.keys_of(0..half));
            vec![(0, first), (half, second)]
        };
        let mut runs = Vec::with_capacity(parts.len());
        for (range_start, (keys, leads)) in parts {
            let word = range_start / 64;
            self.first_end_leads.0[word..word + leads.len()].copy_from_slice(&leads);
            runs.push(keys);
        }
        runs
    }

    /// The first keys of `range`'s edges, sorted, and their `first_end_leads` bits as words
    /// (`range` starts on a word).
    fn keys_of(&self, range: std::ops::Range<usize>) -> (Vec<u64>, Vec<u64>) {
        let mut leads = EdgeBits::new(range.len());
        let mut keys = Vec::with_capacity(range.len());
        for e in range.clone() {
            if let Some((key, a_first)) = self.best_merge(e as u32) {
                keys.push(key);
                leads.set((e - range.start) as u32, a_first);
            }
        }
        keys.sort_unstable();
        (keys, leads.0)
    }
}

/// Sorts `jumps` by `key`. Large graphs sort on two threads: split at the median first, each
/// half is sorted apart (the sort was a third of the set-up on the 1 M-function benchmark).
/// Jumps of equal keys are equal, so the result is that of one sort.
fn sort_jumps<K: Ord>(jumps: &mut [Jump], key: impl Fn(&Jump) -> K + Sync) {
    if jumps.len() < PARALLEL {
        jumps.sort_unstable_by_key(key);
        return;
    }
    let middle = jumps.len() / 2;
    jumps.select_nth_unstable_by_key(middle, &key);
    let (low, high) = jumps.split_at_mut(middle);
    join(
        || low.sort_unstable_by_key(&key),
        || high.sort_unstable_by_key(&key),
    );
}

/// The graph's jumps that say something about placement: self-calls and zero weights do not.
fn jumps(graph: &Graph) -> Vec<Jump> {
    graph
        .jumps()
        .filter(|j| j.caller != j.callee && j.weight > 0)
        .map(|j| Jump {
            caller: j.caller,
            callee: j.callee,
            next: NONE,
            offset: u32::try_from(j.offset).unwrap_or(u32::MAX),
            weight: j.weight,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jumps_sorted_on_two_threads_are_sorted_as_on_one() {
        let mut random = crate::layout::tests::random_below(5);
        let mut jumps: Vec<Jump> = (0..PARALLEL + 999)
            .map(|_| Jump {
                caller: FuncId::from_index(random(500)),
                callee: FuncId::from_index(random(500)),
                next: NONE,
                offset: random(64) as u32,
                weight: random(3) as u64,
            })
            .collect();
        let fields = |js: &[Jump]| -> Vec<(u32, u32, u32, u64)> {
            js.iter()
                .map(|j| (j.caller.0, j.callee.0, j.offset, j.weight))
                .collect()
        };
        let key = |j: &Jump| (j.callee, j.caller, j.offset, j.weight);
        let mut expected = fields(&jumps);
        expected.sort_unstable_by_key(|&(caller, callee, offset, weight)| {
            (callee, caller, offset, weight)
        });
        sort_jumps(&mut jumps, key);
        assert_eq!(fields(&jumps), expected);
    }

    #[test]
    fn first_keys_on_two_threads_are_those_of_one() {
        let n = 30_000;
        let names: Vec<String> = (0..n).map(|i| format!("f{i}")).collect();
        let funcs: Vec<(&str, u64, u64)> = (0..n)
            .map(|i| (names[i].as_str(), 16 << (i % 7), (i % 5) as u64))
            .collect();
        let mut random = crate::layout::tests::random_below(11);
        let calls: Vec<(&str, &str, u64)> = (0..80_000)
            .map(|_| {
                let (a, b) = (random(n), random(n));
                (
                    names[a].as_str(),
                    names[b].as_str(),
                    1 + random(1000) as u64,
                )
            })
            .collect();
        let graph = crate::layout::tests::graph(&funcs, &calls);
        let params = CdsortParams::default();

        let mut parallel = State::new(&graph, &params);
        assert!(parallel.edges.len() >= PARALLEL);
        let runs = parallel.first_keys();
        assert_eq!(runs.len(), 2);
        let mut keys = runs.concat();
        keys.sort_unstable();

        let mut one = State::new(&graph, &params);
        let mut expected: Vec<u64> = (0..one.edges.len() as u32)
            .filter_map(|e| one.consider(e))
            .collect();
        expected.sort_unstable();
        assert_eq!(keys, expected);
        let leads = &one.first_end_leads.0;
        assert!(leads.iter().any(|&w| w != 0) && leads.iter().any(|&w| w != u64::MAX));
        assert_eq!(parallel.first_end_leads.0, *leads);
    }
}
