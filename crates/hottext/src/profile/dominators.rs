//! Immediate dominators of a small directed graph (a function's blocks), by petgraph's
//! iterative algorithm of Cooper, Harvey and Kennedy ("A Simple, Fast Dominance Algorithm"),
//! in the shape the block inference uses: successor lists by index.

use petgraph::algo::dominators::simple_fast;
use petgraph::graph::{DiGraph, NodeIndex};

/// Each node's immediate dominator from `root` (`succs[n]`: the nodes `n` leads to); the root's
/// is itself, and a node the root does not reach has none.
pub(super) fn immediate(succs: &[Vec<usize>], root: usize) -> Vec<Option<usize>> {
    let edges = succs.iter().map(Vec::len).sum();
    let mut graph = DiGraph::<(), (), usize>::with_capacity(succs.len(), edges);
    for _ in succs {
        graph.add_node(());
    }
    for (from, to) in succs.iter().enumerate() {
        for &t in to {
            graph.add_edge(NodeIndex::new(from), NodeIndex::new(t), ());
        }
    }
    let dominators = simple_fast(&graph, NodeIndex::new(root));
    (0..succs.len())
        .map(|node| {
            if node == root {
                Some(root)
            } else {
                (dominators.immediate_dominator(NodeIndex::new(node))).map(|d| d.index())
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_diamond_and_a_loop_have_the_dominators_of_their_shape() {
        // 0 -> 1, 2; 1 -> 3; 2 -> 3; 3 -> 4 -> 3 (loop), 4 -> 5; 6 unreached.
        let succs = vec![
            vec![1, 2],
            vec![3],
            vec![3],
            vec![4],
            vec![3, 5],
            vec![],
            vec![5],
        ];
        let idom = immediate(&succs, 0);
        assert_eq!(
            idom,
            [Some(0), Some(0), Some(0), Some(0), Some(3), Some(4), None]
        );
    }
}
