//! Where a layout's samples sit: by blocks of memory of any size (cache lines, 4 KiB or 2 MiB
//! pages), from each function's place and samples, at the granularity of its sampled basic
//! blocks where the profile has them ([`Graph::blocks_of`]), else spread evenly over its bytes.

use crate::binary::StatedAddr;
use crate::graph::fit::Placement;
use crate::graph::{FuncId, Graph};

/// Equal blocks in a row, all inside one function (or one of its sampled basic blocks).
pub(super) struct Run {
    pub first: u64,
    pub count: u64,
    /// Samples on each block.
    pub mass: f64,
}

/// A layout's samples by blocks of `block` bytes (numbered address / block). A block wholly
/// inside one span of equal heat (a function without sampled basic blocks, or one sampled basic
/// block) holds only that span's samples, so those come as one [`Run`] per span, and the work is
/// bounded by the number of spans, not by the sizes a profile claims. (Symbols that overlap, as
/// in some rewritten binaries, count as separate blocks there.)
pub(super) struct BlockMass {
    /// Blocks a span shares with its neighbours (its first and last), summed.
    pub shared: foldhash::HashMap<u64, f64>,
    pub runs: Vec<Run>,
    pub total: f64,
}

impl BlockMass {
    /// Spreads `samples` evenly over the bytes `start..end` (`end > start`).
    fn add_span(&mut self, start: u64, end: u64, samples: f64, block: u64) {
        let per_byte = samples / (end - start) as f64;
        let (first, last) = (start / block, (end - 1) / block);
        let part = |b: u64| {
            (end.min((b + 1).saturating_mul(block)) - start.max(b * block)) as f64 * per_byte
        };
        *self.shared.entry(first).or_default() += part(first);
        if last > first {
            *self.shared.entry(last).or_default() += part(last);
        }
        if last > first + 1 {
            self.runs.push(Run {
                first: first + 1,
                count: last - first - 1,
                mass: per_byte * block as f64,
            });
        }
    }
}

/// The samples of the layout `at` by blocks of `block` bytes. A function's sampled basic blocks
/// carry their own samples, on their own bytes (clipped to the function's size, which the
/// profile states); what the function's count has beyond its blocks' (samples on no block, or
/// no blocks at all: a gcc build) is spread over all its bytes, as before blocks were known.
/// A function's blocks never count more than the function: if they claim more, they are scaled
/// down to it.
pub(super) fn block_mass(graph: &Graph, at: &Placement, block: u64) -> BlockMass {
    let mut mass = BlockMass {
        shared: Default::default(),
        runs: Vec::new(),
        total: 0.0,
    };
    for (i, (f, start)) in graph.funcs().iter().zip(at).enumerate() {
        let (Some(StatedAddr(start)), true) = (*start, f.samples > 0) else {
            continue;
        };
        let size = f.size.max(1);
        let end = start.saturating_add(size);
        mass.total += f.samples as f64;
        let blocks = graph.blocks_of(FuncId::from_index(i));
        let in_blocks: u64 = blocks
            .iter()
            .map(|b| b.samples)
            .fold(0, u64::saturating_add);
        let scale = if in_blocks > f.samples {
            f.samples as f64 / in_blocks as f64
        } else {
            1.0
        };
        let mut placed = 0.0;
        for b in blocks {
            let b_start = start.saturating_add(b.offset.min(size));
            let b_end = start.saturating_add(b.offset.saturating_add(b.size).min(size));
            if b_end > b_start {
                let samples = b.samples as f64 * scale;
                mass.add_span(b_start, b_end, samples, block);
                placed += samples;
            }
        }
        let rest = f.samples as f64 - placed;
        if rest > f.samples as f64 * 1e-12 {
            mass.add_span(start, end, rest, block);
        }
    }
    mass
}
