//! Block edges (profile v5): how often control passed from one basic block of a function to
//! another, as branch records show it: a taken jump between two of its blocks, or a run of
//! code that fell through from one block into the next between two records. They say in what
//! order a function's hot blocks want to lie (an ext-TSP order), which samples alone cannot.
//!
//! Both ends of an edge are blocks of the function the profile has a `block` line for (a
//! block that ran has one, with 0 samples where no sample hit it), so an edge never names a
//! block the rest of hottext does not know.

use foldhash::HashMap;

use std::io::{self, Write};

use super::{capped_sum, escaped, BlockSamples, FuncId, Graph, GraphBuilder};

/// Transfers of control from block `from` to block `to` of one function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockEdge {
    /// The function both blocks belong to.
    pub func: FuncId,
    /// The source block's id in the function's `.llvm_bb_addr_map` entry.
    pub from: u32,
    /// The target block's id; the same as `from` for a loop of one block.
    pub to: u32,
    /// How many transfers the branch records show.
    pub count: u64,
}

impl Graph {
    /// Every block edge, sorted by function, source and target block, one entry per triple.
    pub fn block_edges(&self) -> &[BlockEdge] {
        &self.block_edges
    }

    /// The block edges of `func`, by source and target; empty without branch records.
    pub fn block_edges_of(&self, func: FuncId) -> &[BlockEdge] {
        super::blocks::entries_of(&self.block_edges, func, |e| e.func)
    }

    /// The edges' counts, summed; at most [`super::MAX_COUNT`] in a profile that was read.
    pub fn total_block_edge_count(&self) -> u64 {
        (self.block_edges.iter()).fold(0u64, |sum, e| sum.saturating_add(e.count))
    }
}

/// Writes the `block-edge` lines of `graph`, by function name (`rank` is each function's
/// place in name order), source and target block.
pub(super) fn write_lines(graph: &Graph, rank: &[u32], out: &mut impl Write) -> io::Result<()> {
    let mut edges: Vec<&BlockEdge> = graph.block_edges.iter().collect();
    edges.sort_unstable_by_key(|e| (rank[e.func.index()], e.from, e.to));
    for e in edges {
        let name = escaped(&graph.funcs[e.func.index()].name);
        writeln!(out, "block-edge {name} {} {} {}", e.from, e.to, e.count)?;
    }
    Ok(())
}

/// The builder's sums by (function, source, target), kept apart from the graph until `finish`.
pub(super) type EdgeSums = HashMap<(FuncId, u32, u32), u64>;

impl GraphBuilder {
    /// Adds `count` transfers from block `from` to block `to` of `func`; sums stop at
    /// [`super::MAX_COUNT`]. The graph keeps the edge only if both blocks are added too
    /// ([`GraphBuilder::add_block_samples`], with 0 samples for a block that only ran).
    pub fn add_block_edge(&mut self, func: FuncId, from: u32, to: u32, count: u64) {
        let sum = self.block_edges.entry((func, from, to)).or_default();
        *sum = capped_sum(*sum, count);
    }
}

/// The sums as the graph keeps them: sorted, without a count of 0, only those whose two ends
/// are among `blocks` (the graph's, sorted by function and id).
pub(super) fn sorted(sums: EdgeSums, blocks: &[BlockSamples]) -> Vec<BlockEdge> {
    let known = |func: FuncId, block: u32| {
        (blocks.binary_search_by_key(&(func, block), |b| (b.func, b.block))).is_ok()
    };
    let mut edges: Vec<BlockEdge> = sums
        .into_iter()
        .filter(|&((func, from, to), count)| count > 0 && known(func, from) && known(func, to))
        .map(|((func, from, to), count)| BlockEdge {
            func,
            from,
            to,
            count,
        })
        .collect();
    edges.sort_unstable_by_key(|e| (e.func, e.from, e.to));
    edges
}

#[cfg(test)]
#[path = "block_edges_tests.rs"]
mod tests;
