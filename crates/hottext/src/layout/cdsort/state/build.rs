//! Setting up CDSort's state: one chain per function, one edge per pair of functions that
//! call each other, with their jumps.

use super::{CdsortParams, Chain, Edge, EdgeBits, Jump, PairIndex, Place, State, NONE, NO_FUNC};
use crate::graph::{FuncId, Graph};

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

        // One edge per pair of functions, its jumps linked in sorted order.
        let pair = |j: &Jump| (j.caller.min(j.callee), j.caller.max(j.callee));
        jumps.sort_unstable_by_key(|j| (pair(j), j.caller, j.offset, j.weight));
        let mut edges: Vec<Edge> = Vec::new();
        // Each list allocated once, at its final length: a million lists grown push by push
        // took a third of this set-up.
        let mut degree = vec![0u32; n];
        for (i, j) in jumps.iter().enumerate() {
            if i == 0 || pair(&jumps[i - 1]) != pair(j) {
                degree[j.caller.index()] += 1;
                degree[j.callee.index()] += 1;
            }
        }
        let mut adj: Vec<Vec<u32>> = degree
            .into_iter()
            .map(|d| Vec::with_capacity(d as usize))
            .collect();
        for i in 0..jumps.len() {
            if i > 0 && pair(&jumps[i - 1]) == pair(&jumps[i]) {
                jumps[i - 1].next = i as u32;
                if let Some(edge) = edges.last_mut() {
                    edge.tail = i as u32;
                }
                continue;
            }
            let (a, b) = pair(&jumps[i]);
            let e = edges.len() as u32;
            edges.push(Edge {
                // A chain is named by the slot of a function it started as.
                ends: [a.0, b.0],
                head: i as u32,
                tail: i as u32,
                computed_at: 0,
            });
            adj[a.index()].push(e);
            adj[b.index()].push(e);
        }

        let mut pairs = PairIndex::new(edges.len());
        for (e, edge) in edges.iter().enumerate() {
            // Random writes: start the one a few edges ahead so that they overlap.
            if let Some(ahead) = edges.get(e + 16) {
                pairs.prefetch(ahead.ends[0], ahead.ends[1]);
            }
            pairs.insert(edge.ends[0], edge.ends[1], e as u32);
        }

        State {
            params,
            jumps,
            dead: EdgeBits::new(edges.len()),
            first_end_leads: EdgeBits::new(edges.len()),
            edges,
            place: (0..n as u32)
                .map(|f| Place {
                    chain: f,
                    offset: 0,
                })
                .collect(),
            next_member: vec![NO_FUNC; n],
            chains: (0..n)
                .map(|f| Chain {
                    size: size[f],
                    hotness: hotness[f],
                    functions: 1,
                    first: FuncId::from_index(f),
                    last: FuncId::from_index(f),
                    changed: 0,
                })
                .collect(),
            adj,
            pairs,
            moving: Vec::new(),
            merges: 0,
            total_hotness: total_hotness as f64,
            far_score: (hot_bytes.max(1) as f64).powf(-params.distance_power),
        }
    }
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
