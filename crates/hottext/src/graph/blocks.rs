//! Sampled basic blocks: how many samples fell in each block of a function, by the block ids
//! clang writes in a binary's `.llvm_bb_addr_map` (`-fbasic-block-address-map`). They say which
//! parts of a hot function ever ran, for splitting the rest out of the hot range (issue 36).
//!
//! A graph without them (a gcc build, an older profile) has none; every use treats that as "the
//! whole function is hot", as before.

use foldhash::HashMap;

use std::io::{self, Write};

use super::{capped_sum, escaped, Func, FuncId, Graph, GraphBuilder};

/// Samples in one basic block of one function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockSamples {
    /// The function the block belongs to.
    pub func: FuncId,
    /// The block's id in the function's `.llvm_bb_addr_map` entry (not its position: ids
    /// survive block reordering, and the cluster file names blocks by them).
    pub block: u32,
    /// The block's first byte, counted from the function's start, as the block map says
    /// (so that a model of cache lines needs no binary).
    pub offset: u64,
    /// Its length in bytes.
    pub size: u64,
    /// Samples whose address lay in the block; 0 for a block that ran but drew no sample,
    /// inferred from the function's control flow (it dominates or post-dominates a sampled
    /// block) or from a merge that scaled its samples down to none.
    pub samples: u64,
}

/// How much of the code of the functions with block counts ran: the figure that says how much
/// cold code a hot range of whole functions carries.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct BlockCoverage {
    /// Functions with block counts.
    pub functions: usize,
    /// Their sizes, summed.
    pub bytes: u64,
    /// The sizes of their blocks that ran (sampled, or inferred with 0 samples), summed.
    pub bytes_run: u64,
}

impl BlockCoverage {
    /// `bytes_run` of `bytes`, 0 to 1 (0 without blocks).
    pub fn share(&self) -> f64 {
        if self.bytes == 0 {
            0.0
        } else {
            self.bytes_run as f64 / self.bytes as f64
        }
    }
}

impl Graph {
    /// How much of the functions with block counts ran.
    pub fn block_coverage(&self) -> BlockCoverage {
        let mut coverage = BlockCoverage::default();
        for function in self.blocks.chunk_by(|a, b| a.func == b.func) {
            coverage.functions += 1;
            coverage.bytes += self.funcs[function[0].func.index()].size;
            coverage.bytes_run += function.iter().map(|b| b.size).sum::<u64>();
        }
        coverage
    }

    /// The sampled blocks' samples, summed; at most [`super::MAX_COUNT`] in a profile that was
    /// read.
    pub fn total_block_samples(&self) -> u64 {
        self.blocks
            .iter()
            .fold(0u64, |sum, b| sum.saturating_add(b.samples))
    }

    /// Every sampled block, sorted by function and block id, one entry per pair.
    pub fn blocks(&self) -> &[BlockSamples] {
        &self.blocks
    }

    /// The sampled blocks of `func`, by block id; empty when the profile has none for it.
    pub fn blocks_of(&self, func: FuncId) -> &[BlockSamples] {
        entries_of(&self.blocks, func, |b| b.func)
    }
}

/// The run of `entries` (sorted by function) that belong to `func`.
pub(super) fn entries_of<T>(entries: &[T], func: FuncId, func_of: impl Fn(&T) -> FuncId) -> &[T] {
    let start = entries.partition_point(|e| func_of(e) < func);
    let end = start + entries[start..].partition_point(|e| func_of(e) == func);
    &entries[start..end]
}

/// Writes the `block` lines of `graph`, by function name (`rank` is each function's place in
/// name order) and block id.
pub(super) fn write_lines(graph: &Graph, rank: &[u32], out: &mut impl Write) -> io::Result<()> {
    let mut blocks: Vec<&BlockSamples> = graph.blocks.iter().collect();
    blocks.sort_unstable_by_key(|b| (rank[b.func.index()], b.block));
    for b in blocks {
        let name = escaped(&graph.funcs[b.func.index()].name);
        let (id, offset, size, samples) = (b.block, b.offset, b.size, b.samples);
        writeln!(out, "block {name} {id} {offset} {size} {samples}")?;
    }
    Ok(())
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

/// The sums as the graph keeps them: sorted, only the blocks that lie inside their function
/// (`funcs`, by id): one that reaches past its end was counted in another build of it. A block
/// with 0 samples stays: it ran, inferred from the code, not sampled.
pub(super) fn sorted(sums: BlockSums, funcs: &[Func]) -> Vec<BlockSamples> {
    let mut blocks: Vec<BlockSamples> = sums
        .into_iter()
        .filter(|((func, _), sum)| {
            (sum.offset.checked_add(sum.size)).is_some_and(|end| end <= funcs[func.index()].size)
        })
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
        // Past g's 32 bytes: counted in another build of g.
        b.add_block_samples(g, 4, 28, 16, 3);
        let graph = b.finish();
        let of = |id| -> Vec<(u32, u64, u64, u64)> {
            graph
                .blocks_of(id)
                .iter()
                .map(|b| (b.block, b.offset, b.size, b.samples))
                .collect()
        };
        assert_eq!(of(f), [(0, 0, 12, 4), (2, 40, 24, 3)]);
        assert_eq!(
            of(g),
            [(1, 4, 12, 0), (3, 16, 8, 5)],
            "a block that ran unsampled stays"
        );
        assert_eq!(graph.blocks().len(), 4);
        let coverage = graph.block_coverage();
        assert_eq!(
            (coverage.functions, coverage.bytes, coverage.bytes_run),
            (2, 96, 56)
        );
        assert!((coverage.share() - 56.0 / 96.0).abs() < 1e-12);
    }

    /// A v4 profile in canonical form: blocks last, by function name and block id.
    const V4: &str = "# hottext profile v4\n# build-id: ab\n\
        fn hot%20loop 64 9\nfn main 32 1\ncall main hot%20loop 9\n\
        block hot%20loop 0 0 12 1\nblock hot%20loop 1 12 28 0\nblock hot%20loop 2 40 24 8\nblock main 1 8 4 1\n";

    #[test]
    fn a_profile_with_blocks_is_v4_and_round_trips_byte_identical() {
        let graph = Graph::read(V4.as_bytes()).unwrap();
        assert_eq!(graph.blocks().len(), 4);
        assert_eq!(graph.blocks_of(FuncId(0))[1].samples, 0);
        assert_eq!(graph.blocks_of(FuncId(0))[2].samples, 8);
        let mut out = Vec::new();
        graph.write(&mut out).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), V4);
    }

    #[test]
    fn a_profile_without_blocks_keeps_its_older_version() {
        for (text, first) in [
            (
                "# hottext profile v4\nfn main 32 1\n",
                "# hottext profile v2\n",
            ),
            (
                "# hottext profile v4\nfn a%20b 32 1\n",
                "# hottext profile v3\n",
            ),
        ] {
            let mut out = Vec::new();
            Graph::read(text.as_bytes())
                .unwrap()
                .write(&mut out)
                .unwrap();
            assert!(String::from_utf8(out).unwrap().starts_with(first), "{text}");
        }
    }

    #[test]
    fn malformed_block_lines_are_errors_naming_the_line() {
        let head = "# hottext profile v4\nfn f 64 9\n";
        let cases = [
            ("block f 0 60 8 1", "lies outside the function's 64 bytes"),
            ("block f 0 18446744073709551615 1 1", "lies outside"),
            (
                "block f 0 0 8 1\nblock f 0 8 8 1",
                "block 0 of 'f' is on two lines",
            ),
            (
                "block f 0 0 8 281474976710657",
                "sample count 281474976710657 is over",
            ),
            ("block g 0 0 8 1", "'g' is not declared"),
            ("block f x 0 8 1", "block id 'x' is not a whole number"),
            ("block f 0 0 8", "'block' record lacks a sample count"),
            ("block f 0 0 8 1 2", "unexpected field '2'"),
        ];
        for (lines, says) in cases {
            let text = format!("{head}{lines}\n");
            let err = Graph::read(text.as_bytes()).unwrap_err().to_string();
            let line = 2 + lines.lines().count();
            assert!(err.starts_with(&format!("line {line}: ")), "{lines}: {err}");
            assert!(err.contains(says), "{lines}: {err}");
        }
        let v3 = "# hottext profile v3\nfn f 64 9\nblock f 0 0 8 1\n";
        let err = Graph::read(v3.as_bytes()).unwrap_err().to_string();
        assert!(
            err.contains("line 3: 'block' records need a v4 profile"),
            "{err}"
        );
        let max = crate::graph::MAX_COUNT;
        let too_many = format!("{head}block f 0 0 8 {max}\nblock f 1 8 8 {max}\n");
        assert!(matches!(
            Graph::read(too_many.as_bytes()),
            Err(crate::graph::GraphError::TooMany {
                what: "block samples"
            })
        ));
    }
}
