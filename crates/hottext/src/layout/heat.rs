//! Where a layout's samples sit: by blocks of memory of any size (cache lines, 4 KiB or 2 MiB
//! pages), from each function's place and samples, at the granularity of its sampled basic
//! blocks where the profile has them ([`Graph::blocks_of`]), else as [`Heat`] says.

use crate::binary::StatedAddr;
use crate::graph::fit::Placement;
use crate::graph::{FuncId, Graph};

/// What a block's figure counts: what pages or cache lines need to know.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Heat {
    /// The samples on the block; those of a function without sampled basic blocks spread
    /// evenly over all its bytes. Pages: how many hold 99 % of the samples, and the report's
    /// heat map.
    Samples,
    /// How often the block is fetched, for cache lines: a line is fetched once each time the
    /// code on it runs, however few of its bytes that code fills, so a line counts the heat per
    /// byte of the hottest span on it times the line's size (the samples of a line inside one
    /// span), summed over the functions that share it. Splitting a hot span over two lines
    /// then costs a fetch, where counting samples would only share them out: on the demo built
    /// by gcc and by clang, cachegrind had cache-line alignment 5.5 % and 6.7 % better than the
    /// compiled one; counting samples the model had it 1.9 % and 0.7 % better (below `auto`'s
    /// 1 % tie on clang), counting fetches 14 % and 9 % (bench/RESULTS.md).
    ///
    /// A function without sampled basic blocks (a gcc build) has its samples decaying from its
    /// entry, the share beyond `x` bytes `exp(-x / ENTRY_DECAY)`. Execution enters at the first
    /// byte; on the gcc-built demo 56 % of the samples lie in a function's first 64 B, 86 % in
    /// 128 B and 99 % in 256 B (functions of 0.4-5 KiB; an exponential of scale 64 B puts 63,
    /// 86 and 98 % there), while spreading them evenly put 5 MiB of never-run tails in every
    /// L1i set, and every set overflowed alike whatever the placement.
    Fetches,
}

/// The scale of [`Heat::Fetches`]' decay from a function's entry, in bytes.
const ENTRY_DECAY: f64 = 64.0;

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
    /// Every sample of the layout (with [`Heat::Fetches`] too, whose blocks sum to more).
    pub total: f64,
    heat: Heat,
    /// With [`Heat::Fetches`], the current function's shared blocks, each at most once into
    /// `shared` ([`BlockMass::end_function`]).
    pending: Vec<(u64, f64)>,
}

impl BlockMass {
    /// Spreads `samples` evenly over the bytes `start..end` (`end > start`).
    fn add_span(&mut self, start: u64, end: u64, samples: f64, block: u64) {
        let per_byte = samples / (end - start) as f64;
        let (first, last) = (start / block, (end - 1) / block);
        let part = |b: u64| match self.heat {
            Heat::Samples => {
                (end.min((b + 1).saturating_mul(block)) - start.max(b * block)) as f64 * per_byte
            }
            Heat::Fetches => per_byte * block as f64,
        };
        let (on_first, on_last) = (part(first), part(last));
        self.share(first, on_first);
        if last > first {
            self.share(last, on_last);
        }
        if last > first + 1 {
            self.runs.push(Run {
                first: first + 1,
                count: last - first - 1,
                mass: per_byte * block as f64,
            });
        }
    }

    /// Adds `heat` to a block the span shares: at once for samples; for fetches, once per
    /// function, at its hottest span's.
    fn share(&mut self, block: u64, heat: f64) {
        match self.heat {
            Heat::Samples => *self.shared.entry(block).or_default() += heat,
            Heat::Fetches => self.pending.push((block, heat)),
        }
    }

    /// Ends a function's spans: each of its shared blocks into `shared` at its hottest span's
    /// heat ([`Heat::Fetches`]; its spans run one after another, one fetch of the line).
    fn end_function(&mut self) {
        self.pending
            .sort_unstable_by(|a, b| a.0.cmp(&b.0).then(b.1.total_cmp(&a.1)));
        let mut last = None;
        for &(block, heat) in &self.pending {
            if last != Some(block) {
                *self.shared.entry(block).or_default() += heat;
                last = Some(block);
            }
        }
        self.pending.clear();
    }

    /// Puts `samples` on the bytes `start..end` (`end > start`) decaying from `start`
    /// ([`Heat::Fetches`]), as spans of even heat that double in length from 16 B: a
    /// few spans a function, whatever its size, each with the decay's integral over it.
    fn add_from_entry(&mut self, start: u64, end: u64, samples: f64, block: u64) {
        let size = (end - start) as f64;
        let tail = |x: f64| (-x.min(size) / ENTRY_DECAY).exp();
        let whole = 1.0 - tail(size);
        let (mut from, mut len) = (0u64, 16u64);
        while from < end - start {
            // Past 16 scales the rest is below 1e-7 of the samples: one span to the end.
            let to = if from as f64 >= 16.0 * ENTRY_DECAY {
                end - start
            } else {
                from.saturating_add(len).min(end - start)
            };
            let share = (tail(from as f64) - tail(to as f64)) / whole;
            self.add_span(start + from, start + to, samples * share, block);
            (from, len) = (to, len.saturating_mul(2));
        }
    }
}

/// The samples of the layout `at` by blocks of `block` bytes. A function's sampled basic blocks
/// carry their own samples, on their own bytes (clipped to the function's size, which the
/// profile states); what the function's count has beyond its blocks' (samples on no block, or
/// no blocks at all: a gcc build) is spread over all its bytes, as before blocks were known,
/// except that with [`Heat::Fetches`] a function without any blocks has its samples decaying
/// from its entry. `heat` says what a block counts.
/// A function's blocks never count more than the function: if they claim more, they are scaled
/// down to it.
pub(super) fn block_mass(graph: &Graph, at: &Placement, block: u64, heat: Heat) -> BlockMass {
    let mut mass = BlockMass {
        shared: Default::default(),
        runs: Vec::new(),
        total: 0.0,
        heat,
        pending: Vec::new(),
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
        if blocks.is_empty() && heat == Heat::Fetches {
            mass.add_from_entry(start, end, rest, block);
        } else if rest > f.samples as f64 * 1e-12 {
            mass.add_span(start, end, rest, block);
        }
        mass.end_function();
    }
    mass
}
