//! Sampled basic blocks: how many samples fell in each block of a function, by the block ids
//! clang writes in a binary's `.llvm_bb_addr_map` (`-fbasic-block-address-map`). They say which
//! parts of a hot function ever ran, for splitting the rest out of the hot range (issue 36).
//!
//! A graph without them (a gcc build, an older profile) has none; every use treats that as "the
//! whole function is hot", as before.

use foldhash::HashMap;

use super::{capped_sum, FuncId, Graph, GraphBuilder};

/// Samples in one basic block of one function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockSamples {
    /// The function the block is in.
    pub func: FuncId,
    /// The block's id in the function's `.llvm_bb_addr_map` entry (not its position: ids
    /// survive block reordering, and the cluster file names blocks by them).
    pub block: u32,
    /// The block's first byte, counted from the function's start, as the block map says
    /// (so that a model of cache lines needs no binary).
    pub offset: u64,
    /// Its length in bytes.
    pub size: u64,
    /// Samples whose address fell in the block.
    pub samples: u64,
}

impl Graph {
    /// Every sampled block, sorted by function and block id, one entry per pair.
    pub fn blocks(&self) -> &[BlockSamples] {
        &self.blocks
    }

    /// The sampled blocks of `func`, by block id; empty when the profile has none for it.
    pub fn blocks_of(&self, func: FuncId) -> &[BlockSamples] {
        let start = self.blocks.partition_point(|b| b.func < func);
        let end = start + self.blocks[start..].partition_point(|b| b.func == func);
        &self.blocks[start..end]
    }
}

/// The builder's sums by (function, block), kept apart from the graph until `finish`.
pub(super) type BlockSums = HashMap<(FuncId, u32), BlockSum>;

/// A block's place in its function and its samples so far.
#[derive(Default)]
pub(super) struct BlockSum {
    offset: u64,
    size: u64,
    samples: u64,
}

impl GraphBuilder {
    /// Adds `samples` to block `block` of `func`, which spans `size` bytes from `offset` in it
    /// (the last call's place wins); sums stop at [`super::MAX_COUNT`].
    pub fn add_block_samples(
        &mut self,
        func: FuncId,
        block: u32,
        offset: u64,
        size: u64,
        samples: u64,
    ) {
        let sum = self.blocks.entry((func, block)).or_default();
        sum.offset = offset;
        sum.size = size;
        sum.samples = capped_sum(sum.samples, samples);
    }
}

/// The sums as the graph keeps them: sorted, without empty blocks.
pub(super) fn sorted(sums: BlockSums) -> Vec<BlockSamples> {
    let mut blocks: Vec<BlockSamples> = sums
        .into_iter()
        .filter(|(_, sum)| sum.samples > 0)
        .map(|((func, block), sum)| BlockSamples {
            func,
            block,
            offset: sum.offset,
            size: sum.size,
            samples: sum.samples,
        })
        .collect();
    blocks.sort_unstable_by_key(|b| (b.func, b.block));
    blocks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_summed_sorted_and_found_by_function() {
        let mut b = GraphBuilder::default();
        let f = b.func("f", 64);
        let g = b.func("g", 32);
        b.add_block_samples(g, 3, 16, 8, 5);
        b.add_block_samples(f, 2, 40, 24, 1);
        b.add_block_samples(f, 0, 0, 12, 4);
        b.add_block_samples(f, 2, 40, 24, 2);
        b.add_block_samples(g, 1, 4, 12, 0);
        let graph = b.finish();
        let of = |id| -> Vec<(u32, u64, u64, u64)> {
            graph
                .blocks_of(id)
                .iter()
                .map(|b| (b.block, b.offset, b.size, b.samples))
                .collect()
        };
        assert_eq!(of(f), [(0, 0, 12, 4), (2, 40, 24, 3)]);
        assert_eq!(of(g), [(3, 16, 8, 5)]);
        assert_eq!(graph.blocks().len(), 3);
    }
}
