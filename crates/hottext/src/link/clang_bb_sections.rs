//! `--format clang-bb-sections`: the cluster file for clang's basic-block sections (`-fbasic-block-sections=list=FILE`): for
//! each hot function, the blocks that ran, as one cluster that clang keeps together under the
//! function's symbol; the rest it splits out, so that the hot range holds only code that runs.
//!
//! # What clang 19 does with the file (measured with clang 19.1, lld 19, GNU ld 2.40, gold 1.16)
//!
//! Syntax (`v1`, the first line; without it clang reads the older `!name` / `!!ids` form and
//! silently ignores `f` lines):
//! - `f NAME [ALIAS…]`: the function, by its symbol as the object file names it (mangled for
//!   C++: `_ZN1n1fEi`; a `static` function by its plain name). Any of the names matches.
//! - `c ID…`: a cluster, the ids of `.llvm_bb_addr_map` (`-fbasic-block-address-map`), laid out
//!   in that order. The entry block has id 0; we always write it first, then the others by
//!   their offset in the profiled binary: the compiler's own layout, whose fall-throughs stay
//!   fall-throughs. Ids are the order blocks were made in, not laid out in: `c` lines in id
//!   order made a function 11 bytes longer (0xec for 0xe1) with jumps where blocks had fallen
//!   through, in offset order it came out byte for byte the size of the unsplit one. Where the
//!   profile has block edges (branch records), the blocks after the entry follow an ext-TSP
//!   order of them instead ([`BlockOrder`]): clang lays the cluster out as listed and adds the
//!   jumps the new order needs.
//! - `m MODULE`: the functions that follow count only in the module whose debug-info file name
//!   is MODULE; without `-g` no function matches it. We write no `m` line (see namesakes below).
//! - `#` starts a comment line.
//!
//! Sections and symbols: a listed function's cluster goes to `.text.hot.NAME` under the
//! function's own symbol, with or without `-ffunction-sections` (without it, the unlisted
//! functions stay in `.text`); its other blocks go to `.text.split.NAME` under a local symbol
//! `NAME.cold`. A second `c` line would make another `.text.hot.NAME` section, under
//! `NAME.__part.1` (we write one cluster, so the hot part stays one piece). An `f` line with
//! no `c` line puts every block in a section of its own. The `.cold` name is the one GCC gives
//! its split parts, so `verify` and `order` already treat it as a part that stays out of the
//! hot range.
//!
//! Errors and staleness: clang stops with a fatal error (a crash report, status 1) on a
//! malformed id, on an id twice in a function, and on a function named on two `f` lines that
//! are both in the module being compiled; this writer never writes any of them. An id the
//! function does not have is ignored without a word, and a function the module lacks is
//! skipped: a cluster file from an older build of the source never makes a wrong binary
//! (block sections only move code; clang adds the jumps a move needs), it only splits a
//! changed function less well until it is profiled again. A block that reaches past its
//! function's size was counted in another build of it: no graph keeps one (`GraphBuilder::finish`,
//! the profile's reader). Fitted to a binary, blocks survive only where the function's code and
//! block map are unchanged (`graph::fit`).
//!
//! A split build profiled again: its samples in `NAME.cold` are counted under that part, in
//! its blocks, by the ids of `NAME`'s block map entry (ids are unique across a function's
//! ranges, and the entry has them all). The cluster for `NAME` gathers the blocks of its
//! parts with its own, so that a block that became hot in the cold part is kept in the hot
//! part of the next build instead of being split out again for ever; its place in the cluster
//! is after the hot part's blocks. Counting them under the part keeps every block within the
//! bytes of the function it is counted in, as the profile's readers and `graph::fit` check,
//! where counted under `NAME` they would lie past its end. The parts themselves never enter
//! the hot range (the hot list leaves out every `.cold` part), so the call edge a stack gives
//! from `NAME` into `NAME.cold` (a jump read as a tail call) cannot pull one in.
//!
//! Static namesakes: a plain name matches every static function of that name in every module,
//! and a name on two `f` lines crashes clang in the module that has it; so functions whose
//! names another hot function also has are left out ([`Clusters::namesakes`]) and stay whole.
//!
//! Linkers: the linker inputs name `.text.hot.NAME` among a function's sections already
//! (`SECTION_PREFIXES`) and never `.text.split.NAME`. By default GNU ld puts `.text.split.*`
//! in `.text` among the other unlisted code, lld after every ordered section, gold before the
//! ordered ones. So the ld script gathers them in an output section `.text.split` right after
//! the range, and the gold order file lists them after the range's end marker; lld's symbol
//! order leaves them after the range, among the unlisted code (naming the `.cold` symbols would
//! warn for every function clang did not split). lld's `-z keep-text-section-prefix` would
//! move `.text.hot.*` out of the range into an output section of its own: do not use it with
//! hottext's inputs.

use std::io::{self, Write};

use serde::Serialize;

use foldhash::HashMap;

use super::format::{Format, Laid, Names, OrderWriter, Writer};
use super::split_cold_parent;
use crate::graph::{BlockEdge, BlockSamples, FuncId, Graph};
use crate::layout::block_order::{ext_tsp_order, BlockJump};

/// `--format clang-bb-sections`.
pub(crate) static FORMAT: Format = Format {
    name: "clang-bb-sections",
    help: "clang's basic-block cluster file, -fbasic-block-sections=list=FILE at compile time: each hot function's blocks that ran kept, the rest split out",
    writer: Writer::Order(OrderWriter {
        // clang reads the file's names as whitespace-separated fields: the order files' rule.
        names: Names::Symbols,
        needs_markers_object: false,
        places_individually: false,
        write,
        splits: Some(splits),
    }),
};

/// The share of its function's block samples a block needs by default to stay in the hot part:
/// none, so every block a sample hit stays, and only blocks that never ran in the recording
/// are split out (BOLT's `-split-functions` and Propeller split the same way). A block the
/// samples caught rarely may still run on every call of its function (a loop's set-up in a
/// function whose loop takes the samples): split out, each call would leave the hot range
/// and come back. A higher share trades such jumps for a smaller hot range.
pub const DEFAULT_MIN_BLOCK_SHARE: f64 = 0.0;

/// By default a function with any block sample is split: functions under this many samples in
/// their blocks stay whole only when asked (`--min-split-samples`). On a sparse recording most
/// blocks that ran drew no sample, and a function split from one or two samples runs its split
/// part on most calls (bench/RESULTS.md, "Blocks that must have run").
pub const DEFAULT_MIN_SPLIT_SAMPLES: u64 = 1;

/// Which blocks a cluster file keeps in the hot part, in what order, and which functions it
/// splits at all.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SplitRule {
    /// The share of its function's block samples (or of its block edges' counts) a block
    /// needs to stay ([`DEFAULT_MIN_BLOCK_SHARE`]).
    pub min_block_share: f64,
    /// The samples and block edge counts a function's blocks need, summed, for the function
    /// to be split; under it the function stays whole ([`DEFAULT_MIN_SPLIT_SAMPLES`]).
    pub min_function_samples: u64,
    /// The order of the kept blocks.
    pub block_order: BlockOrder,
}

impl Default for SplitRule {
    fn default() -> SplitRule {
        SplitRule {
            min_block_share: DEFAULT_MIN_BLOCK_SHARE,
            min_function_samples: DEFAULT_MIN_SPLIT_SAMPLES,
            block_order: BlockOrder::ExtTsp,
        }
    }
}

/// The order of a function's kept blocks in its cluster, after the entry block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockOrder {
    /// The profiled binary's: the compiler's layout.
    Original,
    /// ext-TSP ([`crate::layout::block_order`]) where the profile has block edges between the
    /// kept blocks (branch records); the compiler's elsewhere.
    ExtTsp,
}

/// What a cluster file splits, by the profile's block sizes (an estimate: clang adds a jump
/// where a kept block fell through to a split one).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Clusters {
    /// Functions the file lists.
    pub functions: u64,
    /// Blocks the listed functions keep in their hot part (the entry block among them).
    pub blocks_kept: u64,
    /// Blocks that ran but under the threshold, split out with every block no sample hit.
    pub sampled_blocks_split: u64,
    /// Bytes of the hot functions, whole.
    pub hot_bytes_before: u64,
    /// Bytes of the hot functions once split: the kept blocks of the listed ones, the others
    /// whole.
    pub hot_bytes_after: u64,
    /// Hot functions without block counts (a gcc build, a profile without blocks): left whole.
    pub without_blocks: u64,
    /// Hot functions whose blocks drew fewer samples than [`SplitRule::min_function_samples`]:
    /// left whole.
    pub sparse: u64,
    /// Functions sharing a symbol with another hot function: left whole.
    pub namesakes: Vec<String>,
}

/// One function's line pair: its symbols and the blocks it keeps, in layout order.
struct Cluster<'a> {
    symbols: Vec<&'a str>,
    kept: Vec<u32>,
}

/// The clusters of the functions of `laid`, in its order, and what they split.
fn plan<'a>(laid: &'a Laid) -> (Vec<Cluster<'a>>, Clusters) {
    let (graph, list) = (laid.graph, laid.list);
    let mut clusters = Clusters::default();
    let mut lines = Vec::new();
    let shared = shared_symbols(laid);
    let parts = split_parts(graph);
    for (entry, &f) in list.entries.iter().zip(&list.kept) {
        let func = &graph.funcs()[f];
        clusters.hot_bytes_before = clusters.hot_bytes_before.saturating_add(func.size);
        // The function, then the parts split off it: the ranges its blocks were counted in.
        let ranges: Vec<FuncId> = std::iter::once(f)
            .chain(
                entry
                    .symbols()
                    .flat_map(|s| parts.get(s).into_iter().flatten().copied()),
            )
            .collect();
        let blocks: Vec<(usize, BlockSamples)> = (ranges.iter().enumerate())
            .flat_map(|(range, &id)| graph.blocks_of(id).iter().map(move |b| (range, *b)))
            .collect();
        let samples = (blocks.iter()).fold(0u64, |sum, (_, b)| sum.saturating_add(b.samples));
        let edges = graph.block_edges_of(f);
        let evidence = (edges.iter()).fold(samples, |sum, e| sum.saturating_add(e.count));
        let kept = if blocks.is_empty() {
            clusters.without_blocks += 1;
            None
        } else if evidence < laid.split.min_function_samples {
            clusters.sparse += 1;
            None
        } else if entry.symbols().any(|s| shared.contains(s)) {
            clusters.namesakes.push(func.name.clone());
            None
        } else {
            Some(kept_blocks(&blocks, edges, laid.split.min_block_share))
        };
        let Some(kept) = kept else {
            clusters.hot_bytes_after = clusters.hot_bytes_after.saturating_add(func.size);
            continue;
        };
        clusters.functions += 1;
        // The entry block is kept even when no sample hit it; its size is then unknown.
        let entry_unsampled = u64::from(!kept.iter().any(|b| b.block == 0));
        clusters.blocks_kept += kept.len() as u64 + entry_unsampled;
        clusters.sampled_blocks_split += blocks.len().saturating_sub(kept.len()) as u64;
        let kept_bytes = (kept.iter()).fold(0u64, |sum, b| sum.saturating_add(b.size));
        clusters.hot_bytes_after = clusters.hot_bytes_after.saturating_add(kept_bytes);
        // Without edges to follow, the order is the compiler's.
        let followed = match laid.split.block_order {
            BlockOrder::ExtTsp => edges,
            BlockOrder::Original => &[],
        };
        lines.push(Cluster {
            symbols: entry.symbols().collect(),
            kept: hot_order(&kept, followed),
        });
    }
    (lines, clusters)
}

/// Writes the cluster file of `laid`'s functions (names already checked as an order file's).
fn write(laid: &Laid, out: &mut dyn Write) -> io::Result<()> {
    writeln!(
        out,
        "v1\n# hottext: the blocks of each hot function that ran, the rest split out (clang -fbasic-block-sections=list=FILE)"
    )?;
    for cluster in plan(laid).0 {
        writeln!(out, "f {}", cluster.symbols.join(" "))?;
        let ids: Vec<String> = cluster.kept.iter().map(u32::to_string).collect();
        writeln!(out, "c {}", ids.join(" "))?;
    }
    Ok(())
}

/// What the cluster file of `laid` splits.
fn splits(laid: &Laid) -> Clusters {
    plan(laid).1
}

/// The blocks of one function that stay in its hot part, in the order the profiled binary
/// lays them out (by range: the function's own, then its parts'; then by offset and id): the
/// entry block if it ran (it stays whatever its share), those that ran unsampled (0 samples:
/// `profile` inferred that they ran whenever a sampled block of the function did, or branch
/// records passed through them), and those with at least `min_block_share` of the function's
/// block samples or of the counts of its block `edges` (into or out of the block, whichever is
/// more). A block that ran unsampled stays under any share: it ran at least as often as a
/// sampled one, and split out it would cost a jump out of the hot range and back on every run.
fn kept_blocks(
    blocks: &[(usize, BlockSamples)],
    edges: &[BlockEdge],
    min_block_share: f64,
) -> Vec<BlockSamples> {
    let total = blocks
        .iter()
        .fold(0u64, |sum, (_, b)| sum.saturating_add(b.samples));
    let needed = min_block_share * total as f64;
    let (mut flow_in, mut flow_out) = (HashMap::default(), HashMap::default());
    for e in edges {
        let out = flow_out.entry(e.from).or_insert(0u64);
        *out = out.saturating_add(e.count);
        let into = flow_in.entry(e.to).or_insert(0u64);
        *into = into.saturating_add(e.count);
    }
    let edge_total = (edges.iter()).fold(0u64, |sum, e| sum.saturating_add(e.count));
    let flow_needed = min_block_share * edge_total as f64;
    let flow = |block: u32| {
        let of = |map: &HashMap<u32, u64>| map.get(&block).copied().unwrap_or(0);
        of(&flow_in).max(of(&flow_out))
    };
    let mut kept: Vec<(usize, BlockSamples)> = blocks
        .iter()
        .filter(|(range, b)| {
            b.block == 0
                || b.samples == 0
                || b.samples as f64 >= needed
                || (*range == 0 && edge_total > 0 && flow(b.block) as f64 >= flow_needed)
        })
        .copied()
        .collect();
    kept.sort_by_key(|(range, b)| (*range, b.offset, b.block));
    // Ids are the function's across its ranges: a block counted in two (profiles of an
    // unsplit and a split build merged) is listed once, where it was first.
    let mut seen = foldhash::HashSet::default();
    kept.into_iter()
        .map(|(_, b)| b)
        .filter(|b| seen.insert(b.block))
        .collect()
}

/// The ids of the kept blocks in the order of their cluster: the entry block, then the others
/// in an ext-TSP order of the transfers between them (`edges`, those of the function's own
/// range), which is the compiler's order where no edge says otherwise. The entry block is
/// listed even where the profile lacks it (its size then counts as 0).
fn hot_order(kept: &[BlockSamples], edges: &[BlockEdge]) -> Vec<u32> {
    let mut ids: Vec<u32> = std::iter::once(0)
        .chain(kept.iter().map(|b| b.block).filter(|&b| b != 0))
        .collect();
    if edges.is_empty() {
        return ids;
    }
    let entry_size = kept.iter().find(|b| b.block == 0).map_or(0, |b| b.size);
    let sizes: Vec<u64> = std::iter::once(entry_size)
        .chain(kept.iter().filter(|b| b.block != 0).map(|b| b.size))
        .collect();
    let position: HashMap<u32, usize> = ids.iter().enumerate().map(|(i, &id)| (id, i)).collect();
    let jumps: Vec<BlockJump> = (edges.iter())
        .filter_map(|e| {
            Some(BlockJump {
                from: *position.get(&e.from)?,
                to: *position.get(&e.to)?,
                count: e.count,
            })
        })
        .collect();
    let order = ext_tsp_order(&sizes, &jumps);
    ids = order.into_iter().map(|i| ids[i]).collect();
    ids
}

/// The parts split off each function that the graph has (`f.cold` for `f`), by the symbol of
/// the function.
fn split_parts(graph: &Graph) -> HashMap<&str, Vec<FuncId>> {
    let mut parts: HashMap<&str, Vec<FuncId>> = HashMap::default();
    for (i, func) in graph.funcs().iter().enumerate() {
        if let Some(parent) = split_cold_parent(&func.name) {
            parts.entry(parent).or_default().push(FuncId::from_index(i));
        }
    }
    parts
}

/// The symbols that more than one function of `laid` answers to.
fn shared_symbols<'a>(laid: &'a Laid) -> foldhash::HashSet<&'a str> {
    let mut seen = foldhash::HashSet::default();
    let mut shared = foldhash::HashSet::default();
    for entry in laid.entries() {
        // A function's own names count once, however often it repeats one.
        let own: foldhash::HashSet<&str> = entry.symbols().collect();
        for symbol in own {
            if !seen.insert(symbol) {
                shared.insert(symbol);
            }
        }
    }
    shared
}

#[cfg(test)]
#[path = "clang_bb_sections_tests.rs"]
mod tests;
