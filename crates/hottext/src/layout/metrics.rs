//! How good is a layout: how few pages hold the samples, how short the calls are.
//!
//! Call distance follows section 5.2 of the hfsort paper, with the real call sites where the
//! profile has them (v2): a call jumps from its call instruction (else from the middle of its
//! caller) to the callee's first byte.
//!
//! Two figures model the instruction TLB and cache from the profile alone, so that layouts can be
//! compared before anything is linked (`--algorithm auto` picks by them; bench/RESULTS.md checks
//! their ranking against cachegrind's): `calls_within_4k` (a call that stays on its page needs no
//! new iTLB entry) and `icache_overflow` (a static model of a set-associative L1i).

use serde::Serialize;

use super::alignment::ScriptPlacement;
use super::cache_sets::set_conflicts;
use super::heat::{block_mass, Heat, Run};
use crate::binary::{ExecSegment, StatedAddr, HUGE_PAGE};
use crate::caches::L1I;
use crate::graph::fit::Placement;
use crate::graph::{FuncId, Graph};

/// Functions back to back from `placement.hot_offset` after address 0 (the 2 MiB-aligned
/// `__hot_start`), each where the linker puts it under `placement.alignment`
/// ([`super::alignment::Alignment::start`]): the layout an ld script with this placement links, which `auto`'s
/// cache-set model scores.
pub fn place_as_linked(graph: &Graph, order: &[FuncId], placement: &ScriptPlacement) -> Placement {
    place(graph, order, placement.hot_offset, |next, size| {
        placement.alignment.start(next, size)
    })
}

/// Functions back to back from address 0 (which stands for the 2 MiB-aligned `__hot_start`),
/// each at the next multiple of `alignment` ([`COMPILED_ALIGNMENT`](super::alignment::COMPILED_ALIGNMENT) for what a linker does, 1
/// for the hfsort paper's examples).
pub fn place_in_order(graph: &Graph, order: &[FuncId], alignment: u64) -> Placement {
    place(graph, order, 0, |next, _| {
        next.checked_next_multiple_of(alignment.max(1))
            .unwrap_or(next)
    })
}

/// Functions in `order` from `first`, each at `start(end of the previous one, its size)`.
fn place(
    graph: &Graph,
    order: &[FuncId],
    first: u64,
    start: impl Fn(u64, u64) -> u64,
) -> Placement {
    let mut at = vec![None; graph.funcs().len()];
    let mut next = first;
    for &f in order {
        let size = graph.funcs()[f].size;
        next = start(next, size);
        at[f.index()] = Some(StatedAddr(next));
        // Sizes come from a profile, which may claim anything: saturate rather than wrap.
        next = next.saturating_add(size);
    }
    at
}

/// A layout's figures by the profile's own model: how compact the sampled code lies, how far
/// its calls jump, how much of it the L1i can hold.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Metrics {
    /// Functions with samples of their own. The hot range holds more: the functions that only
    /// call these ([`crate::link::HotText`] counts those).
    pub sampled_functions: u64,
    /// The total size of the sampled functions.
    pub sampled_bytes: u64,
    /// From the first byte of the lowest sampled function to the last byte of the highest.
    pub sampled_span_bytes: u64,
    /// Fewest 4 KiB pages that hold 99 % of the samples.
    pub pages_4k_99: u64,
    /// Fewest 2 MiB pages that hold 99 % of the samples.
    pub pages_2m_99: u64,
    /// Share of call weight whose jump is shorter than 64 B.
    pub calls_within_64b: f64,
    /// Share of call weight whose jump stays on its 4 KiB page.
    pub calls_within_4k: f64,
    /// Share of call weight whose jump is shorter than 2 MiB.
    pub calls_within_2m: f64,
    /// Sum over calls of weight × distance in bytes.
    pub weighted_call_distance: u64,
    /// Call weight left out because the layout lacks caller or callee.
    pub unplaced_call_weight: u64,
    /// The misses per sample expected of the L1i of [`L1I`] (32 KiB, 8-way, 64 B lines, LRU)
    /// ([`super::cache_sets`]): each hot line fetched as often as its hottest code runs, by
    /// sampled basic block where the profile has them, else decaying from each function's
    /// entry. Layouts that put hot code in the same sets, or spread it over more lines, score
    /// worse; it compares layouts of one profile and may pass 1.
    pub icache_overflow: f64,
}

/// The figures of `graph`'s functions at the addresses `at` (those without one left out).
pub fn measure(graph: &Graph, at: &Placement) -> Metrics {
    let mut sampled_functions = 0;
    let mut sampled_bytes = 0;
    let (mut lo, mut hi) = (u64::MAX, 0);
    for (f, start) in graph.funcs().iter().zip(at) {
        if let (Some(StatedAddr(start)), true) = (*start, f.samples > 0) {
            sampled_functions += 1;
            sampled_bytes = f.size.saturating_add(sampled_bytes);
            lo = lo.min(start);
            hi = hi.max(start.saturating_add(f.size));
        }
    }

    let calls = Calls::of(graph, at);
    let share = |x: u64| calls.share(x);

    Metrics {
        sampled_functions,
        sampled_bytes,
        sampled_span_bytes: hi.saturating_sub(lo),
        pages_4k_99: pages_for_99(graph, at, 4096),
        pages_2m_99: pages_for_99(graph, at, HUGE_PAGE),
        calls_within_64b: share(calls.within_64b),
        calls_within_4k: share(calls.within_4k),
        calls_within_2m: share(calls.within_2m),
        weighted_call_distance: calls.distance,
        unplaced_call_weight: calls.unplaced,
        icache_overflow: set_conflicts(graph, at, L1I).share(),
    }
}

/// The call weight of a layout by how far the calls jump, summed over the profile's calls.
#[derive(Default)]
pub(super) struct Calls {
    /// The weight of the calls whose caller and callee are both placed.
    pub total: u64,
    /// Jumping less than 64 B.
    pub within_64b: u64,
    /// On the call site's own 4 KiB page.
    pub within_4k: u64,
    /// Jumping less than 2 MiB.
    pub within_2m: u64,
    /// Weight × distance in bytes.
    pub distance: u64,
    /// The weight of the calls whose caller or callee the layout lacks.
    pub unplaced: u64,
}

impl Calls {
    pub(super) fn of(graph: &Graph, at: &Placement) -> Calls {
        let mut c = Calls::default();
        for j in graph.jumps() {
            let (Some(StatedAddr(from)), Some(StatedAddr(to))) =
                (at[j.caller.index()], at[j.callee.index()])
            else {
                c.unplaced += j.weight;
                continue;
            };
            let (site, weight) = (from + j.offset, j.weight);
            let d = site.abs_diff(to);
            c.total += weight;
            c.distance = c.distance.saturating_add(weight.saturating_mul(d));
            c.within_64b += if d < 64 { weight } else { 0 };
            c.within_4k += if site / 4096 == to / 4096 { weight } else { 0 };
            c.within_2m += if d < HUGE_PAGE { weight } else { 0 };
        }
        c
    }

    /// `weight` as a share of the placed calls' (0 without any).
    pub(super) fn share(&self, weight: u64) -> f64 {
        if self.total == 0 {
            0.0
        } else {
            weight as f64 / self.total as f64
        }
    }
}

/// How many pages of `page` bytes hold 99 % of the samples.
fn pages_for_99(graph: &Graph, at: &Placement, page: u64) -> u64 {
    hottest_pages(graph, at, page, 0.99, 0).0
}

/// The fewest pages of `page` bytes that hold `share` of the samples: how many, and the first
/// `list` of them, hottest first, as page numbers (address / page). Each function's samples are
/// spread evenly over its bytes.
fn hottest_pages(
    graph: &Graph,
    at: &Placement,
    page: u64,
    share: f64,
    list: usize,
) -> (u64, Vec<u64>) {
    let mass = block_mass(graph, at, page, Heat::Samples);
    let shared = mass.shared.into_iter().map(|(p, m)| Run {
        first: p,
        count: 1,
        mass: m,
    });
    let mut blocks: Vec<Run> = shared.chain(mass.runs).collect();
    // Hottest first; ties by address so the answer does not depend on hash order.
    blocks.sort_by(|a, b| b.mass.total_cmp(&a.mass).then(a.first.cmp(&b.first)));
    // A small tolerance keeps float rounding from asking for one page too many.
    let goal = mass.total * share * (1.0 - 1e-12);
    let (mut sum, mut count, mut pages) = (0.0, 0u64, Vec::new());
    for run in blocks {
        if sum >= goal || run.mass <= 0.0 {
            break;
        }
        let needed = ((goal - sum) / run.mass).ceil().max(1.0);
        let taken = if needed >= run.count as f64 {
            run.count
        } else {
            needed as u64
        };
        let listed = (list.saturating_sub(pages.len()) as u64).min(taken);
        pages.extend(run.first..run.first + listed);
        sum += run.mass * taken as f64;
        count = count.saturating_add(taken);
    }
    (count, pages)
}

/// The samples on each block of `block` bytes that holds any (block number = address / block),
/// each function's samples spread evenly over its bytes, in block order: the heat map of
/// `hottext report`.
pub fn samples_by_block(graph: &Graph, at: &Placement, block: u64) -> Vec<(u64, f64)> {
    let mass = block_mass(graph, at, block, Heat::Samples);
    let mut blocks: foldhash::HashMap<u64, f64> = mass.shared;
    for run in mass.runs {
        for b in run.first..run.first + run.count {
            *blocks.entry(b).or_default() += run.mass;
        }
    }
    let mut blocks: Vec<(u64, f64)> = blocks.into_iter().collect();
    blocks.sort_unstable_by_key(|&(b, _)| b);
    blocks
}

/// What [`hot_ranges`] found.
pub struct HotRanges {
    /// At most `max_pages` of the pages that hold 99 % of the samples, hottest first, adjacent
    /// ones merged; the ranges in the order of their hottest page.
    pub ranges: Vec<(StatedAddr, StatedAddr)>,
    /// Pages among those that the text does not hold whole: their samples stay on 4 KiB pages.
    pub partial_pages: usize,
}

/// The hottest 2 MiB pages of a placed binary as address ranges: what a loader without markers
/// can map. Only pages that lie whole inside `text` (the executable segments) are candidates:
/// the runtime maps no page that reaches past the text, as it would replace whatever follows.
pub fn hot_ranges(
    graph: &Graph,
    at: &Placement,
    text: &[ExecSegment],
    max_pages: usize,
) -> HotRanges {
    let (_, hottest) = hottest_pages(graph, at, HUGE_PAGE, 0.99, usize::MAX);
    let whole = |p: u64| {
        let (start, end) = (p * HUGE_PAGE, (p + 1) * HUGE_PAGE);
        text.iter()
            .any(|s| s.start.0 <= start && end <= s.start.0.saturating_add(s.mem_size))
    };
    let (mut pages, partial): (Vec<u64>, Vec<u64>) = hottest.into_iter().partition(|&p| whole(p));
    pages.truncate(max_pages);
    // Adjacent pages merge into one range; the ranges are listed by their hottest page, so that
    // a runtime that keeps only its first ranges (32) keeps the hottest.
    let mut by_address: Vec<(u64, usize)> = pages
        .iter()
        .enumerate()
        .map(|(heat, &p)| (p, heat))
        .collect();
    by_address.sort_unstable();
    let mut ranges: Vec<((StatedAddr, StatedAddr), usize)> = Vec::new();
    for (p, heat) in by_address {
        match ranges.last_mut() {
            Some((last, hottest)) if last.1 .0 == p * HUGE_PAGE => {
                last.1 .0 += HUGE_PAGE;
                *hottest = (*hottest).min(heat);
            }
            _ => ranges.push((
                (StatedAddr(p * HUGE_PAGE), StatedAddr((p + 1) * HUGE_PAGE)),
                heat,
            )),
        }
    }
    ranges.sort_by_key(|&(_, heat)| heat);
    let ranges = ranges.into_iter().map(|(range, _)| range).collect();
    HotRanges {
        ranges,
        partial_pages: partial.len(),
    }
}
