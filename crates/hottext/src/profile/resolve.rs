//! Turning the tallied address pairs into functions and call edges, once per distinct pair and
//! in address order, so that the symbol and code look-ups stay near each other.

use foldhash::HashMap;

use super::apportion::apportion;
use super::branch_records::{self, BranchTally};
use super::callers::{Callers, Found, Hop};
use super::code::Code;
use super::function_index::FunctionIndex;
use super::header;
use super::inferred;
use super::ran_blocks;
use super::tally::PairCounts;
use super::{SampleKind, Stats};
use crate::binary::{symbol_of, Binary, BlockMap, Function, StatedAddr};
use crate::graph::{Graph, GraphBuilder};
use crate::link::split_cold_parent;

/// In a tallied pair: the frame below is not in the binary (or there is none).
pub(super) const NO_CALLER: u64 = u64::MAX;
/// In a tallied pair: the address is in the binary's mappings but outside its code.
pub(super) const UNRESOLVED: u64 = u64::MAX - 1;

/// Samples by stated address pairs in the binary.
#[derive(Default)]
pub(super) struct Tally {
    /// (innermost frame, return address or a marker) of stack samples.
    pub stack_tops: PairCounts,
    /// The same of samples unwound by CFI (`--call-graph dwarf`): their return address is the
    /// sampled function's own at every instruction, so no frame repair applies to them.
    pub cfi_tops: PairCounts,
    /// Branch records.
    pub branches: BranchTally,
}

/// Samples, calls and call sites by function (indices into `Binary::functions`).
pub(super) struct Counts {
    pub self_samples: Vec<u64>,
    /// Samples by (function, block id), with the block's offset in the function and its size,
    /// where the binary has a block map.
    pub blocks: HashMap<(u32, u32), (u64, u64, u64)>,
    /// Transfers by (function, source block id, target block id), from branch records.
    pub block_edges: HashMap<(u32, u32, u32), u64>,
    pub calls: HashMap<(u32, u32), u64>,
    /// (caller, callee, offset of a byte of the call in the caller): part of the calls' weight.
    /// As many entries as distinct tallied pairs at most, so bounded as the tally is.
    pub sites: HashMap<(u32, u32, u64), u64>,
}

impl Counts {
    /// `n` calls (or tail jumps) of `hop.callee` by `hop.caller`, found `through_tail` jumps.
    pub(super) fn add(
        &mut self,
        hop: Hop,
        n: u64,
        through_tail: bool,
        index: &FunctionIndex,
        stats: &mut Stats,
    ) {
        *self.calls.entry((hop.caller, hop.callee)).or_default() += n;
        stats.calls += n;
        if through_tail {
            stats.calls_tail += n;
        }
        if let Some(site) = hop.site {
            let offset = site - index.starts[hop.caller as usize];
            *self
                .sites
                .entry((hop.caller, hop.callee, offset))
                .or_default() += n;
            stats.calls_sited += n;
        }
    }
}

/// `share_candidates`: a stack sample that several chains of tail jumps could explain is shared
/// among their last hops by the samples of each hop's caller (else it is counted undecided).
pub(super) fn resolve(
    binary: &Binary,
    code: Code<'_>,
    kind: SampleKind,
    share_candidates: bool,
    tally: Tally,
    stats: &mut Stats,
) -> Counts {
    let index = FunctionIndex::new(&binary.functions);
    let block_map = match binary.block_map() {
        Ok(map) => map,
        Err(problem) => {
            stats.block_map_problem = Some(problem.to_string());
            None
        }
    };
    stats.block_map = block_map.is_some();
    let mut counts = Counts {
        self_samples: vec![0; binary.functions.len()],
        blocks: HashMap::default(),
        block_edges: HashMap::default(),
        calls: HashMap::default(),
        sites: HashMap::default(),
    };
    let mut callers = Callers::new(&binary.functions, &index, code);
    // Without stacks, each sampled address, for the inference.
    let mut ip_samples = Vec::new();
    // Samples with several candidate callers, shared once every function's samples are known.
    let mut candidates = Vec::new();

    let by_frame_pointers = tally
        .stack_tops
        .into_sorted()
        .into_iter()
        .map(|t| (t, false));
    let by_cfi = tally.cfi_tops.into_sorted().into_iter().map(|t| (t, true));
    for (((ip, ret), n), unwound_by_cfi) in by_frame_pointers.chain(by_cfi) {
        let Some(callee) = index.at(ip) else {
            stats.samples_unresolved += n;
            continue;
        };
        counts.self_samples[callee as usize] += n;
        let func = &binary.functions[callee as usize];
        if block_map.is_some_and(|map| count_block(map, func, callee, ip, n, &mut counts)) {
            stats.samples_in_blocks += n;
        }
        if kind == SampleKind::Plain {
            ip_samples.push((ip, n));
        }
        let found = match ret {
            NO_CALLER => continue,
            UNRESOLVED => Found::Unresolved,
            ret => callers.of_stack(callee, ip, ret, unwound_by_cfi),
        };
        match found {
            Found::Caller { hop, through_tail } => {
                // A caller other than the one the return address is in: the function had no
                // frame of its own, and the caller came from the code.
                if !through_tail && hop.site != Some(ret - 1) {
                    stats.calls_recovered += n;
                }
                counts.add(hop, n, through_tail, &index, stats);
            }
            Found::Candidates { hops, through_tail } if share_candidates => {
                candidates.push((hops, through_tail, n))
            }
            Found::PointerCaller => stats.calls_caller_unknown += n,
            Found::Candidates { .. } | Found::Undecided => stats.calls_tail_undecided += n,
            Found::Unresolved => stats.calls_unresolved += n,
        }
    }

    // Branch records before the inference: their call sites and the blocks their jumps and
    // fall-throughs ran are what it starts from.
    branch_records::read(
        binary,
        block_map,
        &callers.code,
        &index,
        tally.branches,
        &mut counts,
        stats,
    );
    if let Some(map) = block_map {
        stats.blocks_inferred =
            add_blocks_that_ran(binary, map, &callers.code, &index, &mut counts);
    }

    for (hops, through_tail, n) in candidates {
        let weights: Vec<u64> = hops
            .iter()
            .map(|h| counts.self_samples[h.caller as usize])
            .collect();
        for (&hop, part) in hops.iter().zip(apportion(n, &weights)) {
            if part > 0 {
                counts.add(hop, part, through_tail, &index, stats);
            }
        }
        stats.calls_tail_shared += n;
    }

    if kind == SampleKind::Plain {
        let inferred = inferred::edges(
            &binary.functions,
            &index,
            &callers.code,
            &counts.self_samples,
            &ip_samples,
        );
        for e in inferred {
            let hop = Hop {
                caller: e.caller,
                callee: e.callee,
                site: Some(e.site),
                tail: false,
            };
            counts.add(hop, e.weight, false, &index, stats);
            stats.calls_inferred += e.weight;
        }
    }

    counts
}

/// `n` samples at `ip` in `func` (the function `id`), in the block that holds it. A sample
/// the map puts in no block of the function (code the compiler did not describe, such as
/// another compiler's) is counted in the function only; says whether it found the block.
fn count_block(
    map: &BlockMap,
    func: &Function,
    id: u32,
    ip: u64,
    n: u64,
    counts: &mut Counts,
) -> bool {
    let Some(block) = map.block_at(StatedAddr(ip)) else {
        return false;
    };
    if block.start < func.start || block.end() > func.end() {
        return false;
    }
    let offset = block.start.0 - func.start.0;
    let sum = counts
        .blocks
        .entry((id, block.id))
        .or_insert((offset, block.size, 0));
    sum.2 += n;
    true
}

/// Adds to `counts`, with 0 samples, the blocks of each function with sampled blocks that ran
/// for sure: the blocks of its call sites that the stacks name (a return address is proof
/// that its call ran), and the blocks that ran whenever one of those or a sampled block ran
/// ([`ran_blocks`]); says how many. A function without sampled blocks (one that only calls)
/// gets none, so that it stays whole. Parts split off a function (`f.cold` of a build with
/// basic-block sections) are entered anywhere: their blocks are only the sampled ones.
fn add_blocks_that_ran(
    binary: &Binary,
    map: &BlockMap,
    code: &Code<'_>,
    index: &FunctionIndex,
    counts: &mut Counts,
) -> u64 {
    let mut ran: HashMap<u32, Vec<u32>> = HashMap::default();
    for &(f, block) in counts.blocks.keys() {
        ran.entry(f).or_default().push(block);
    }
    let mut inferred = 0;
    for &(caller, _, offset) in counts.sites.keys() {
        let Some(ids) = ran.get_mut(&caller) else {
            continue;
        };
        let func = &binary.functions[caller as usize];
        let Some(block) = map.block_at(StatedAddr(func.start.0 + offset)) else {
            continue;
        };
        let inside = block.start >= func.start && block.end() <= func.end();
        if inside && !ids.contains(&block.id) {
            ids.push(block.id);
            let at = (block.start.0 - func.start.0, block.size, 0);
            counts.blocks.insert((caller, block.id), at);
            inferred += 1;
        }
    }
    for (f, ids) in ran {
        let func = &binary.functions[f as usize];
        if split_cold_parent(&func.name).is_some() {
            continue;
        }
        let symbol = symbol_of(&func.name);
        let is_split_part = |addr: u64| {
            index.at(addr).is_some_and(|part| {
                split_cold_parent(&binary.functions[part as usize].name) == Some(symbol)
            })
        };
        let blocks = map.blocks_in(func.start, func.end());
        let inside = blocks.partition_point(|b| b.end() <= func.end());
        for block in ran_blocks::must_have_run(code, func, &blocks[..inside], &ids, is_split_part) {
            let offset = block.start.0 - func.start.0;
            counts
                .blocks
                .entry((f, block.id))
                .or_insert((offset, block.size, 0));
            inferred += 1;
        }
    }
    inferred
}

/// The profile: the functions with samples or calls, their calls, and the headers.
pub(super) fn graph(binary: &Binary, counts: &Counts, kind: SampleKind, stats: &Stats) -> Graph {
    let mut b = GraphBuilder::default();
    let mut ids = vec![None; binary.functions.len()];
    let mut id_of = |b: &mut GraphBuilder, f: u32| {
        *ids[f as usize].get_or_insert_with(|| {
            let func = &binary.functions[f as usize];
            let id = b.func(&func.name, func.size);
            for alias in &func.aliases {
                b.alias(id, alias);
            }
            id
        })
    };
    for (f, &n) in counts.self_samples.iter().enumerate() {
        if n > 0 {
            let id = id_of(&mut b, f as u32);
            b.add_samples(id, n);
        }
    }
    let mut calls: Vec<_> = counts.calls.iter().map(|(&k, &w)| (k, w)).collect();
    calls.sort_unstable();
    for ((caller, callee), weight) in calls {
        let (caller, callee) = (id_of(&mut b, caller), id_of(&mut b, callee));
        b.add_call(caller, callee, weight);
    }
    // Every site's pair has a call, declared above.
    for (&(caller, callee, offset), &weight) in &counts.sites {
        let (caller, callee) = (id_of(&mut b, caller), id_of(&mut b, callee));
        b.add_site(caller, callee, offset, weight);
    }
    for (&(f, block), &(offset, size, n)) in &counts.blocks {
        // A block that only branch records show ran may be in a function without samples.
        let id = id_of(&mut b, f);
        b.add_block_samples(id, block, offset, size, n);
    }
    for (&(f, from, to), &n) in &counts.block_edges {
        // Both blocks were counted above, in the same function.
        let id = id_of(&mut b, f);
        b.add_block_edge(id, from, to, n);
    }
    if let Some(id) = binary.build_id_hex() {
        b.header("build-id", id);
    }
    let name = binary.path.file_name().unwrap_or(binary.path.as_os_str());
    b.header("binary", name.to_string_lossy());
    b.header(header::SAMPLE_KIND, kind);
    match kind {
        SampleKind::Plain => b.header(header::EDGES, "inferred from the code"),
        SampleKind::Stack | SampleKind::Dwarf | SampleKind::Branch => {
            b.header(header::TAIL_CALL_WEIGHT, stats.calls_tail);
            b.header(header::TAIL_CALL_SHARED, stats.calls_tail_shared);
            b.header(header::TAIL_CALL_UNDECIDED, stats.calls_tail_undecided);
        }
    }
    b.header("samples", stats.samples_in_binary);
    b.header("event", &stats.event);
    let mut graph = b.finish();
    stats.cpu.write_headers(&mut graph);
    graph
}
