//! CDSort's merges keep the state whole: after each, the pair index holds exactly the live
//! edges under their current chains, and every chain's functions sit at the offsets their
//! sizes give.

use super::{State, NO_FUNC};
use crate::graph::Graph;
use crate::layout::cdsort::CdsortParams;
use crate::layout::edge_lists::pair_key;

/// Merges along a random graph's edges until no pair fits, checking after every merge that
/// the index holds exactly the live edges under their current chains, and the chains their
/// functions: with chains of any length, and with short ones, where merges give up edges past
/// the limit.
#[test]
fn the_index_and_the_chains_follow_every_merge_and_rebuild() {
    for max_chain_functions in [1800, 8] {
        merge_and_check_the_index(max_chain_functions);
    }
}

fn merge_and_check_the_index(max_chain_functions: u32) {
    // A random tree and a few more calls: sparse, so that most merges re-point edges
    // rather than join them, and the re-pointed edges fill the table with tombstones. Some
    // 2 700 edges start a table of 4 096 slots two-thirds full, so it is rebuilt on the way.
    let n = 1800;
    let names: Vec<String> = (0..n).map(|i| format!("f{i}")).collect();
    let mut random = crate::layout::tests::random_below(7);
    let funcs: Vec<(&str, u64, u64)> = names
        .iter()
        .map(|f| (f.as_str(), 1 + random(500) as u64, 1))
        .collect();
    let mut calls: Vec<(&str, &str, u64)> = (1..n)
        .map(|i| (names[random(i)].as_str(), names[i].as_str(), 1))
        .collect();
    for _ in 0..n / 2 {
        calls.push((names[random(n)].as_str(), names[random(n)].as_str(), 1));
    }
    let graph = crate::layout::tests::graph(&funcs, &calls);
    let params = CdsortParams {
        max_chain_functions,
        ..CdsortParams::default()
    };
    let mut state = State::new(&graph, &params);
    let (mut merges, mut rebuilt) = (0, false);
    while let Some(e) =
        (0..state.edges.len() as u32).find(|&e| !state.is_dead(e) && state.consider(e).is_some())
    {
        let used = state.pairs.used();
        state.merge(e);
        merges += 1;
        rebuilt |= state.pairs.used() < used;
        let mut pairs = std::collections::HashSet::new();
        for (id, edge) in state.edges.iter().enumerate() {
            let [a, b] = edge.ends;
            let found = state.pairs.find(a, b, |x| state.edges[x as usize].ends);
            if state.is_dead(id as u32) {
                assert_ne!(
                    found,
                    Some(id as u32),
                    "dead edge {id} after merge {merges}"
                );
                continue;
            }
            assert_eq!(found, Some(id as u32), "edge {id} after merge {merges}");
            assert!(
                pairs.insert(pair_key(a, b)),
                "two live edges join {a} and {b}"
            );
            for c in [a, b] {
                let first = state.chains[c as usize].first;
                assert_eq!(
                    state.place[first.index()].chain,
                    c,
                    "edge {id} ends at dead chain {c}"
                );
            }
        }
        check_chains(&state, &graph, merges);
    }
    if max_chain_functions as usize >= n {
        assert_eq!(merges, n - 1, "one chain at the end");
        assert!(
            rebuilt,
            "the table was never rebuilt: make the graph denser"
        );
    } else {
        assert!(merges < n - 1, "the limit never stopped a merge");
    }
}

/// Every live chain lists its functions from `first` to its recorded last one, each in the
/// chain at the offset the sizes before it add up to, and the sizes add up to the chain's.
fn check_chains(state: &State, graph: &Graph, merges: usize) {
    let mut seen = 0;
    for (c, chain) in state.chains.iter().enumerate() {
        if state.place[chain.first.index()].chain != c as u32 {
            continue; // merged into another
        }
        let (mut f, mut offset, mut last) = (chain.first, 0, chain.first);
        while f != NO_FUNC {
            let place = state.place[f.index()];
            assert_eq!(place.chain, c as u32, "{f:?} after merge {merges}");
            assert_eq!(
                chain.offset(place.position),
                offset,
                "offset of {f:?} in chain {c} after merge {merges}"
            );
            offset += graph.funcs()[f.index()].size.max(1);
            (last, f) = (f, place.next_member);
            seen += 1;
        }
        assert_eq!(offset, chain.size, "size of chain {c} after merge {merges}");
        assert_eq!(
            last, state.last[c],
            "last of chain {c} after merge {merges}"
        );
    }
    assert_eq!(
        seen,
        state.place.len(),
        "functions in no chain after merge {merges}"
    );
}
